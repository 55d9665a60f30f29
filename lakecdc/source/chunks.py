"""Chunked snapshots: a table is read in ranges of its chunk key, and a snapshot that stopped half-way knows where to
continue.

* The chunk key is ``scan.incremental.snapshot.chunk.key-column`` (``db.table_regex:column;...``), else the first
  column of the row's identity: the primary key, or for a table without one its first unique index whose columns
  are all NOT NULL (Flink CDC makes the user name such a column). A table with none is read whole (one consistent
  read, not resumable).
* A chunk is a half-open range of chunk-key values ``(after, upper]``; ``upper`` is the ``chunk.size``-th value
  after ``after`` (all rows sharing a value stay in one chunk, so a chunk may be larger than ``chunk.size``). NULL
  chunk keys (possible for a configured non-key column) form one chunk read first.
* :class:`ChunkProgress` says which keys are snapshotted (``NULL`` first, then every value ``<= after``); it is what a
  checkpoint stores between runs (:meth:`ChunkProgress.to_json`).
* :func:`restrict_to_snapshotted` keeps only the binlog rows of snapshotted keys, with the exact ordering the
  chunk queries use: Arrow comparisons for numbers, temporal values and bytes; the server itself (the column's
  collation) for character keys, whose order Python cannot reproduce (case-insensitive and PAD SPACE collations).
"""

from __future__ import annotations

import base64
import datetime as _dt
import decimal
import logging
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.errors import SourceError
from lakecdc.model import (DELETE, INSERT, OP_COLUMN, UPDATE_AFTER, UPDATE_BEFORE, ChangeBatch, SourceColumn,
                           SourceTable)
from lakecdc.selectors import TableSelector
from lakecdc.source.connection import connect, query
from lakecdc.source.options import MySqlSourceOptions
from lakecdc.source.types import codec_for, column_data_type

log = logging.getLogger(__name__)

# Types whose MySQL order equals the order of their normalised Arrow values.
_ARROW_ORDERED = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year", "float", "double", "real",
                  "double precision", "decimal", "numeric", "fixed", "date", "datetime", "timestamp", "time",
                  "binary", "varbinary"}
# Character types: ordered by the server (their collation).
_SERVER_ORDERED = {"char", "varchar"}
_SERVER_CHECK_BATCH = 500  # values compared per query by the server


@dataclass(frozen=True)
class ChunkKey:
    """The column a table is chunked by; ``unique`` when it alone identifies a row (the whole primary key, or a
    unique NOT NULL index of one column): a chunk is then read with one statement
    (lakecdc.source.chunk_sql.limited_query)."""

    column: SourceColumn
    unique: bool = False

    @property
    def name(self) -> str:
        return self.column.name

    @property
    def data_type(self) -> str:
        return column_data_type(self.column.column_type)

    @property
    def by_server(self) -> bool:
        return self.data_type in _SERVER_ORDERED

    def param_sql(self) -> str:
        """A placeholder for a value of this column that keeps its index usable (same character set)."""
        if self.by_server and self.column.charset:
            collate = f" COLLATE {self.column.collation}" if self.column.collation else ""
            return f"CONVERT(%s USING {self.column.charset}){collate}"
        return "%s"


def chunkable(column: SourceColumn) -> bool:
    data_type = column_data_type(column.column_type)
    if pa.types.is_boolean(column.arrow_type) or pa.types.is_string(column.arrow_type) and \
            data_type in ("decimal", "numeric", "fixed"):
        return False  # TINYINT(1) read as BOOLEAN, DECIMAL(p > 38) read as text: their Arrow order differs
    return data_type in _ARROW_ORDERED or data_type in _SERVER_ORDERED


def chunk_key_for(table: SourceTable, options: MySqlSourceOptions) -> ChunkKey | None:
    """The chunk key of ``table``: the configured column (first matching selector), else the first primary-key
    column; None when the table is read whole. SourceError naming the column when it cannot be a chunk key."""
    for selector, column in options.chunk_key_columns:
        if not TableSelector(selector).matches(table.table_id):
            continue
        try:
            source_column = table.column(column)
        except KeyError:
            raise SourceError(
                f"scan.incremental.snapshot.chunk.key-column names column '{column}' for {table.table_id}, which "
                f"has no such column (columns: {', '.join(table.column_names)})") from None
        if not chunkable(source_column):
            raise SourceError(
                f"scan.incremental.snapshot.chunk.key-column: column '{column}' of {table.table_id} has type "
                f"{source_column.column_type}, which cannot be a chunk key (use an integer, decimal, date/time, "
                "CHAR/VARCHAR or BINARY/VARBINARY column)")
        return ChunkKey(source_column, unique=tuple(table.row_identity) == (source_column.name,))
    identity = table.row_identity  # the primary key, else a unique NOT NULL index (Flink CDC asks for the option)
    if identity:
        first = table.column(identity[0])
        if chunkable(first):
            return ChunkKey(first, unique=len(identity) == 1)
        log.info("%s: %s column %s (%s) cannot be a chunk key; the table is read whole", table.table_id,
                 "primary-key" if table.primary_keys else "unique-index", first.name, first.column_type)
    return None


# ----------------------------------------------------------------------------------------------------- progress


def _encode(value: Any) -> dict:
    if isinstance(value, bool):
        return {"int": int(value)}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, decimal.Decimal):
        return {"decimal": str(value)}
    if isinstance(value, float):
        return {"float": repr(value)}
    if isinstance(value, str):
        return {"str": value}
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, _dt.datetime):
        return {"datetime": value.isoformat()}
    if isinstance(value, _dt.date):
        return {"date": value.isoformat()}
    if isinstance(value, _dt.timedelta):
        return {"time_us": (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds}
    raise SourceError(f"cannot record a chunk boundary of type {type(value).__name__}: {value!r}")


def _decode(data: dict) -> Any:
    (kind, value), = data.items()
    if kind == "int":
        return int(value)
    if kind == "decimal":
        return decimal.Decimal(value)
    if kind == "float":
        return float(value)
    if kind == "str":
        return value
    if kind == "bytes":
        return base64.b64decode(value)
    if kind == "datetime":
        return _dt.datetime.fromisoformat(value)
    if kind == "date":
        return _dt.date.fromisoformat(value)
    if kind == "time_us":
        return _dt.timedelta(microseconds=int(value))
    raise SourceError(f"unknown chunk boundary encoding {data!r}")


@dataclass(frozen=True)
class ChunkProgress:
    """Which rows of a source table a (possibly unfinished) snapshot has read: every row when ``done``; else the
    rows whose chunk key is NULL (if ``nulls_done``) and those whose key is ``<= after`` (when ``after`` is set;
    ``after`` is the raw driver value of the boundary). ``column`` is None for a table read whole."""

    column: str | None = None
    nulls_done: bool = False
    after: Any = None
    has_after: bool = False
    done: bool = False

    @classmethod
    def not_started(cls, key: ChunkKey | None) -> "ChunkProgress":
        return cls(column=key.name if key else None)

    @property
    def started(self) -> bool:
        return self.done or self.nulls_done or self.has_after

    def to_json(self) -> dict:
        data: dict[str, Any] = {"chunk-key": self.column}
        if self.nulls_done:
            data["nulls-done"] = True
        if self.has_after:
            data["after"] = _encode(self.after)
        return data

    @classmethod
    def from_json(cls, data: dict) -> "ChunkProgress":
        has_after = "after" in data
        return cls(column=data.get("chunk-key"), nulls_done=bool(data.get("nulls-done")),
                   after=_decode(data["after"]) if has_after else None, has_after=has_after)

    def describe(self) -> str:
        if self.done:
            return "done"
        if not self.started:
            return "not started"
        if self.has_after:
            return f"{self.column} <= {self.after!r}"
        return f"{self.column} IS NULL"


# ------------------------------------------------------------------------------------------- binlog restriction


def snapshotted_mask(options: MySqlSourceOptions, key: ChunkKey | None, progress: ChunkProgress,
                     values: pa.ChunkedArray | pa.Array) -> pa.Array:
    """True for the rows whose chunk-key value (``values``) the snapshot has already read."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    n = len(values)
    if progress.done:
        return pa.repeat(pa.scalar(True), n)
    if key is None or not progress.started:
        return pa.repeat(pa.scalar(False), n)
    is_null = pc.is_null(values)
    if not progress.has_after:
        return is_null
    if key.by_server:
        below = _server_at_or_below(options, key, values, progress.after)
    else:
        codec = codec_for(key.column.name, key.column.column_type, key.column.arrow_type, True)
        bound = codec.to_array(codec.snapshot_values([progress.after]))
        below = pc.less_equal(_orderable(values), _orderable(bound)[0])
    return pc.or_kleene(is_null, pc.fill_null(below, False))


def _orderable(values: pa.Array) -> pa.Array:
    """Arrow arrays compare like MySQL values once TIME is an integer and fixed-size binary is plain binary."""
    t = values.type
    if pa.types.is_time32(t):
        return values.view(pa.int32())
    if pa.types.is_time64(t):
        return values.view(pa.int64())
    if pa.types.is_fixed_size_binary(t):
        return values.cast(pa.binary())
    return values


def _server_at_or_below(options: MySqlSourceOptions, key: ChunkKey, values: pa.Array, bound: Any) -> pa.Array:
    """``value <= bound`` decided by the server in the column's character set and collation (per distinct value,
    batched; only binlog rows of a table whose snapshot is unfinished get here)."""
    distinct = [v for v in pc.unique(values).to_pylist() if v is not None]
    if not distinct:
        return pa.repeat(pa.scalar(None, pa.bool_()), len(values))
    charset, collation = key.column.charset or "utf8mb4", key.column.collation
    expr = f"CONVERT(%s USING {charset})" + (f" COLLATE {collation}" if collation else "")
    verdict: dict[Any, bool] = {}
    conn = connect(options)
    try:
        for start in range(0, len(distinct), _SERVER_CHECK_BATCH):
            part = distinct[start:start + _SERVER_CHECK_BATCH]
            sql = " UNION ALL ".join(f"SELECT {i}, {expr} <= {expr}" for i in range(len(part)))
            args: list = []
            for v in part:
                args += [v, bound]
            for i, ok in query(conn, sql, args, options=options):
                verdict[part[int(i)]] = bool(ok)
    finally:
        conn.close()
    keys = pa.array(list(verdict), type=values.type)
    flags = pa.array(list(verdict.values()), type=pa.bool_())
    return pc.take(flags, pc.index_in(values, value_set=keys))


def restrict_to_snapshotted(batch: ChangeBatch, mask: pa.Array) -> ChangeBatch | None:
    """The rows of ``batch`` where ``mask`` is True. An update whose before image is kept and after image dropped
    (the row left the snapshotted key range) becomes a delete; the opposite becomes an insert, so every update
    stays a -U/+U pair."""
    if pc.all(mask).as_py():
        return batch
    if not pc.any(mask).as_py():
        return None
    ops = batch.data.column(OP_COLUMN).combine_chunks()
    n = len(ops)
    next_kept = pa.concat_arrays([mask.slice(1), pa.array([False])]) if n else mask
    prev_kept = pa.concat_arrays([pa.array([False]), mask.slice(0, n - 1)]) if n else mask
    lone_before = pc.and_(pc.equal(ops, UPDATE_BEFORE), pc.invert(next_kept))
    lone_after = pc.and_(pc.equal(ops, UPDATE_AFTER), pc.invert(prev_kept))
    fixed = pc.if_else(lone_before, pa.scalar(DELETE), pc.if_else(lone_after, pa.scalar(INSERT), ops))
    index = batch.data.schema.get_field_index(OP_COLUMN)
    data = batch.data.set_column(index, batch.data.schema.field(index), fixed).filter(mask)
    return ChangeBatch(batch.table, data, batch.first_commit, batch.last_commit)
