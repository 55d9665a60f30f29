"""The catalog and table objects of the Python API (see docs/python-api.md).

Everything is a thin layer over lakecdc.sink: writes go through the same native (Rust) writer, table lock and
checks as the pipeline's writes, reads through pypaimon's native read path and pypaimon-rust's incremental scan.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterable

import pyarrow as pa

from lakecdc.errors import SinkError
from lakecdc.model import TableId
from lakecdc.paimon.cdc import CdcRecord, parse_type, record_fields, records_to_changes, schema_changes
from lakecdc.paimon.read import ReadResult, compile_where
from lakecdc.paimon.rows import ROW_KIND_COLUMN, to_changes
from lakecdc.sink import PaimonSink, TableDescription, TableWriter
from lakecdc.sink.sql import run_sql
from lakecdc.sink.consumers import ConsumerRead, ConsumerState, commit_consumer, read_for_consumer


@dataclass(frozen=True)
class WriteResult:
    """One commit: the snapshot it created and the rows handed to Paimon."""

    snapshot_id: int
    rows_written: int


@dataclass(frozen=True)
class SnapshotInfo:
    id: int
    time_millis: int
    commit_kind: str
    commit_user: str
    properties: dict[str, str] = field(default_factory=dict)


def _table_id(identifier: str | TableId) -> TableId:
    if isinstance(identifier, TableId):
        return identifier
    try:
        return TableId.parse(str(identifier))
    except ValueError as error:
        raise SinkError(f"table identifier: {error}") from None


def _arrow_schema(schema: pa.Schema | Iterable) -> pa.Schema:
    """A pyarrow schema, or (name, type) pairs whose type is a pyarrow type or a Paimon type string."""
    if isinstance(schema, pa.Schema):
        return schema
    from pypaimon.schema.data_types import PyarrowFieldParser

    fields = []
    for item in schema:
        try:
            name, data_type = item
        except (TypeError, ValueError):
            raise SinkError(f"schema: expected (name, type) pairs, got {item!r}") from None
        if isinstance(data_type, pa.DataType):
            fields.append(pa.field(name, data_type))
        else:
            parsed = parse_type(data_type, name)
            fields.append(pa.field(name, PyarrowFieldParser.from_paimon_type(parsed), nullable=parsed.nullable))
    return pa.schema(fields)


class Catalog:
    """A Paimon warehouse (filesystem catalog): ``Catalog("/path/to/warehouse")``."""

    def __init__(self, warehouse: str | os.PathLike, *, options: dict[str, str] | None = None,
                 commit_user_prefix: str = "lakecdc"):
        catalog_options = {"metastore": "filesystem", **{str(k): str(v) for k, v in (options or {}).items()},
                           "warehouse": str(warehouse)}
        self._sink = PaimonSink(catalog_options, commit_user_prefix=commit_user_prefix)

    @property
    def warehouse(self) -> str:
        return self._sink.warehouse

    def create_table(self, identifier: str | TableId, schema: pa.Schema | Iterable, *,
                     primary_keys: Iterable[str] = (), partition_keys: Iterable[str] = (),
                     options: dict[str, Any] | None = None, comment: str = "",
                     ignore_if_exists: bool = False) -> "Table":
        """Create ``db.table`` (the database too). ``schema`` is a pyarrow schema or (name, type) pairs with Paimon
        type strings (``[("f0", "STRING"), ("f1", "INT")]``). ``options`` are Paimon table options, validated: an
        option the storage library cannot honour correctly is refused (see docs/python-api.md)."""
        table_id = _table_id(identifier)
        options = {str(k): (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in (options or {}).items()}
        self._sink.create_table(table_id, _arrow_schema(schema), list(primary_keys), list(partition_keys), options,
                                comment, ignore_if_exists=ignore_if_exists)
        return Table(self._sink, table_id)

    def get_table(self, identifier: str | TableId) -> "Table":
        table_id = _table_id(identifier)
        if not self._sink.table_exists(table_id):
            raise SinkError(f"table {table_id} does not exist in the Paimon warehouse {self.warehouse}")
        return Table(self._sink, table_id)

    def table_exists(self, identifier: str | TableId) -> bool:
        return self._sink.table_exists(_table_id(identifier))

    def sql(self, query: str, *, write: bool = False) -> pa.Table:
        """Run SQL over the warehouse with pypaimon-rust's DataFusion engine (tables as ``db.table``). Read-only
        unless ``write``; writing statements then hold the lock of the tables they name (lakecdc.sink.sql)."""
        return run_sql(self._sink.catalog_options, query, write=write)


class Table:
    """One Paimon table of a Catalog."""

    def __init__(self, sink: PaimonSink, table_id: TableId):
        self._sink = sink
        self.table_id = table_id

    def __repr__(self) -> str:
        return f"Table({self.table_id})"

    # --------------------------------------------------------------- metadata
    def describe(self) -> TableDescription:
        return self._sink.describe(self.table_id)

    @property
    def schema(self) -> pa.Schema:
        return self.describe().schema

    @property
    def primary_keys(self) -> list[str]:
        return self.describe().primary_keys

    @property
    def partition_keys(self) -> list[str]:
        return self.describe().partition_keys

    @property
    def options(self) -> dict[str, str]:
        return self.describe().options

    def latest_snapshot_id(self) -> int | None:
        return self._sink.latest_snapshot_id(self.table_id)

    def snapshots(self) -> list[SnapshotInfo]:
        """The table's snapshots, oldest first."""
        return [SnapshotInfo(s.id, s.time_millis, str(s.commit_kind), s.commit_user, dict(s.properties or {}))
                for s in self._sink.snapshots(self.table_id)]

    # ------------------------------------------------------------------ write
    def new_write(self, *, overwrite: bool | dict = False, parallelism: int = 1,
                  ignore_delete: bool = False) -> "TableWrite":
        """A write that collects any number of ``write`` calls and commits them as one snapshot.

        ``overwrite=True`` replaces the table's contents (for a partitioned table: the partitions written),
        ``overwrite={"dt": "2024-01-01"}`` that static partition; the default appends changes. ``parallelism``
        writers share the rows by primary key (fixed-bucket tables only). ``ignore_delete`` drops ``-U``/``-D``
        rows (Paimon's write-time ``ignore-delete`` hint)."""
        if overwrite is True:
            static: dict | None = {}
        elif overwrite is False or overwrite is None:
            static = None
        elif isinstance(overwrite, dict):
            static = dict(overwrite)
        else:
            raise SinkError(f"table {self.table_id}: overwrite must be True, False or a dict of partition values, "
                            f"got {overwrite!r}")
        writer = self._sink.open_writer(self.table_id, overwrite=static, parallelism=parallelism,
                                        ignore_delete=ignore_delete)
        return TableWrite(self, writer)

    def write(self, data: Any, *, schema: pa.Schema | Iterable | None = None,
              row_kind_column: str = ROW_KIND_COLUMN, overwrite: bool | dict = False, parallelism: int = 1,
              ignore_delete: bool = False, properties: dict[str, str] | None = None) -> WriteResult:
        """Write ``data`` (rows, Arrow, pandas or polars; see TableWrite.write) and commit it as one snapshot."""
        with self.new_write(overwrite=overwrite, parallelism=parallelism, ignore_delete=ignore_delete) as w:
            w.write(data, schema=schema, row_kind_column=row_kind_column)
            return w.commit(properties)

    def write_cdc_records(self, records: Iterable[CdcRecord], *, parallelism: int = 1,
                          properties: dict[str, str] | None = None) -> WriteResult:
        """Evolve the table for the records' fields (see lakecdc.paimon.cdc), then write them as one snapshot."""
        records = list(records)
        for i, record in enumerate(records):
            if not isinstance(record, CdcRecord):
                raise SinkError(f"table {self.table_id}: record {i} is a {type(record).__name__}, not a CdcRecord")
        fields = record_fields(records)
        with self._sink.lock(self.table_id, owner="lakecdc.paimon write_cdc_records"):
            description = self.describe()
            stored = self._sink.paimon_types(self.table_id)
            keys = set(description.primary_keys) | set(description.partition_keys)
            changes = schema_changes(str(self.table_id), stored, keys, fields)
            if changes:
                description = self._sink.alter_table(self.table_id, changes)
            data = records_to_changes(records, description.schema, str(self.table_id))
            writer = self._sink.open_writer(self.table_id, parallelism=parallelism)
            with TableWrite(self, writer) as w:
                w._write_changes(data)
                return w.commit(properties)

    # ------------------------------------------------------------------- read
    def read(self, *, columns: list[str] | None = None, where: str | None = None, limit: int | None = None,
             snapshot_id: int | None = None, timestamp_ms: int | None = None) -> ReadResult:
        """A bounded read of the table's state: the latest snapshot, ``snapshot_id``, or the newest snapshot at or
        before ``timestamp_ms`` (epoch milliseconds). ``columns`` projects, ``where`` filters (a SQL condition,
        see lakecdc.paimon.read), ``limit`` caps the number of rows (which rows is not defined)."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise SinkError(f"table {self.table_id}: limit must be an integer >= 0, got {limit!r}")
        schema = self.schema
        condition = compile_where(where, schema, str(self.table_id)) if where is not None else None
        read_columns = columns
        if condition is not None and columns is not None:
            # the exact filter needs its columns; they are dropped again below
            read_columns = list(columns) + [n for n in condition.columns if n not in columns]
        result = self._sink.read_table(
            self.table_id, read_columns, predicate_builder=condition.pushdown if condition else None,
            # with a filter the limit is applied after it (pypaimon's limit may count rows before filtering)
            limit=None if condition is not None else limit, snapshot_id=snapshot_id, timestamp_ms=timestamp_ms)
        if condition is not None:
            result = condition.apply(result)
            if columns is not None:
                result = result.select(list(columns))
            if limit is not None:
                result = result.slice(0, limit)
        return ReadResult(result)

    def read_changes(self, start_snapshot_id: int | None = None, end_snapshot_id: int | None = None, *,
                     columns: list[str] | None = None, where: str | None = None, ignore_delete: bool = False,
                     mode: str = "auto", consumer_id: str | None = None,
                     ignore_progress: bool | None = None, before_images: bool = False) -> ReadResult:
        """The changes committed by the snapshots in (start, end] (end: the latest), each row with its kind in a
        leading ``rowkind`` column. ``ignore_delete=True`` drops ``-U``/``-D`` rows, for consumers that keep
        history. With ``changelog-producer=input`` the rows are exactly those written; otherwise each commit
        shows one merged row per key (an update as ``+U``, a delete as ``-D``). ``where`` filters the rows.

        ``consumer_id`` (instead of a start): the changes that Paimon consumer has not read yet, up to the latest
        snapshot, as a ConsumerChanges whose ``commit()`` advances the consumer; until then it stays where it was,
        so reading again returns the same changes. A consumer without progress (new, or ``ignore_progress``,
        default: the table option ``consumer.ignore-progress``) gets the whole table as ``+I`` rows.

        ``before_images`` (tables without ``changelog-producer=input``): each commit's rows come with the previous
        row of their key, looked up in the snapshot before the commit: an update as ``-U``/``+U``, a delete as
        ``-D`` with the deleted row, a new key as ``+I`` (Flink's ChangelogNormalize); costs a keyed read per
        commit."""
        if consumer_id is not None:
            if start_snapshot_id is not None or end_snapshot_id is not None:
                raise SinkError(f"table {self.table_id}: a consumer read starts at the consumer's next snapshot "
                                f"and ends at the latest one: give consumer_id or snapshot ids, not both")
        elif start_snapshot_id is None:
            raise SinkError(f"table {self.table_id}: read_changes needs a start snapshot id or a consumer_id")
        schema = self.schema
        condition = compile_where(where, schema, str(self.table_id)) if where is not None else None
        read_columns = columns
        if condition is not None and columns is not None:
            read_columns = list(columns) + [n for n in condition.columns if n not in columns]
        consumed = None
        if consumer_id is not None:
            consumed = read_for_consumer(self._sink, self.table_id, consumer_id, columns=read_columns, mode=mode,
                                         ignore_delete=ignore_delete, ignore_progress=ignore_progress,
                                         before_images=before_images)
            result = consumed.rows
        else:
            assert start_snapshot_id is not None  # checked above
            result = self._sink.read_changes(self.table_id, start_snapshot_id, end_snapshot_id,
                                             columns=read_columns, mode=mode, ignore_delete=ignore_delete,
                                             before_images=before_images)
        if condition is not None:
            result = condition.apply(result)
            if columns is not None:
                result = result.select([ROW_KIND_COLUMN] + list(columns))
        if consumed is not None:
            consumed.rows = result
            return ConsumerChanges(self._sink, consumed)
        return ReadResult(result)

    # -------------------------------------------------------------- consumers
    def consumers(self) -> list[ConsumerState]:
        """The table's Paimon consumers (``consumer/consumer-<id>``: lakecdc's, Flink's, Spark's), by id."""
        return self._sink.consumers(self.table_id).all()

    def reset_consumer(self, consumer_id: str, next_snapshot: int) -> None:
        """Set the consumer's next snapshot (Paimon's ``reset_consumer`` procedure): its next read starts there."""
        self._sink.consumers(self.table_id).reset(consumer_id, next_snapshot)

    def delete_consumer(self, consumer_id: str) -> bool:
        """Delete the consumer (False when there was none): snapshot expiry no longer waits for it, and a read
        with its id starts again with the whole table."""
        return self._sink.consumers(self.table_id).delete(consumer_id)

    # ----------------------------------------------------------------- upkeep
    def upkeep(self, *, compact: bool = True, full_compaction: bool = False, merge_manifests: bool = True,
               expire: bool = True, remove_orphans: bool = True, orphan_older_than_seconds: float = 86400.0,
               wait_seconds: float = 0.0):
        """Table upkeep (lakecdc.sink.upkeep, docs/operations.md): compaction of small files, manifest
        merging, snapshot expiry by the table's ``snapshot.*`` options and removal of orphan files, under the table
        lock (waiting up to ``wait_seconds`` for another writer, then skipping). Returns an UpkeepResult."""
        from lakecdc.sink.upkeep import upkeep_table  # here: upkeep brings the Avro manifest code (start-up)

        return upkeep_table(self._sink, self.table_id, compact=compact, full_compaction=full_compaction,
                            merge_manifests=merge_manifests, expire=expire, remove_orphans=remove_orphans,
                            orphan_older_than_seconds=orphan_older_than_seconds, wait_seconds=wait_seconds)

    def compact(self, *, full: bool = False, wait_seconds: float = 0.0):
        """Rewrite the partitions with too many small files (all buckets with more than one file when ``full``)
        and merge the manifests; no snapshot expires and no file is deleted."""
        return self.upkeep(full_compaction=full, expire=False, remove_orphans=False, wait_seconds=wait_seconds)

    def expire_snapshots(self, *, wait_seconds: float = 0.0):
        """Expire snapshots by ``snapshot.num-retained.min/max``, ``snapshot.time-retained`` and
        ``snapshot.expire.limit`` and delete the files only they referenced."""
        return self.upkeep(compact=False, merge_manifests=False, remove_orphans=False, wait_seconds=wait_seconds)

    def remove_orphan_files(self, *, older_than_seconds: float = 86400.0, wait_seconds: float = 0.0):
        """Delete files under the table directory that no snapshot or tag references, if older than
        ``older_than_seconds``."""
        return self.upkeep(compact=False, merge_manifests=False, expire=False,
                           orphan_older_than_seconds=older_than_seconds, wait_seconds=wait_seconds)


class TableWrite:
    """Writes for one commit (``Table.new_write``): ``write`` any number of times, then ``commit`` once. Leaving
    the ``with`` block without a commit aborts: nothing is written to the table."""

    def __init__(self, table: Table, writer: TableWriter):
        self._table = table
        self._writer = writer
        self._schema = table.schema

    def write(self, data: Any, *, schema: pa.Schema | Iterable | None = None,
              row_kind_column: str = ROW_KIND_COLUMN) -> None:
        """Add rows: ``Row.of_kind(RowKind.UPDATE_AFTER, "Alice", 100)`` objects, tuples/lists (``+I``, values in
        table order), dicts (by column name, kind under ``row_kind_column``), a pyarrow Table/RecordBatch or a
        pandas/polars DataFrame (by column name; kinds in ``row_kind_column`` when present, else all ``+I``).
        ``schema`` declares the input's names and types (like Flink's input type); it must equal the table's
        columns in order. Columns are checked against the table schema before anything is written."""
        input_schema = _arrow_schema(schema) if schema is not None else None
        changes = to_changes(data, self._schema, input_schema=input_schema, row_kind_column=row_kind_column,
                             what=f"table {self._table.table_id}")
        self._writer.write(changes)

    def _write_changes(self, changes: pa.Table) -> None:
        self._writer.write(changes)

    def commit(self, properties: dict[str, str] | None = None) -> WriteResult:
        """Commit everything written as one snapshot (also when nothing was written); ``properties`` are stored in
        the snapshot."""
        snapshot_id = self._writer.commit(dict(properties or {}))
        return WriteResult(snapshot_id, self._writer.rows_written)

    def abort(self) -> None:
        self._writer.abort()

    def __enter__(self) -> "TableWrite":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._writer.__exit__(exc_type, exc, tb)


class ConsumerChanges(ReadResult):
    """The changes a Paimon consumer had not read yet (``Table.read_changes(consumer_id=...)``): rows as any
    ReadResult, the snapshot range they cover, and ``commit()``, which advances the consumer past them."""

    def __init__(self, sink: PaimonSink, read: ConsumerRead):
        super().__init__(read.rows)
        self._sink = sink
        self._read = read

    @property
    def consumer_id(self) -> str:
        return self._read.consumer_id

    @property
    def start_snapshot_id(self) -> int:
        """The range read is (start, end]: start is the last snapshot the consumer had read (0: none)."""
        return self._read.start_snapshot_id

    @property
    def end_snapshot_id(self) -> int:
        return self._read.end_snapshot_id

    @property
    def full(self) -> bool:
        """True when the consumer had no progress: the rows are the whole table at ``end_snapshot_id`` (``+I``)."""
        return self._read.full

    def counts(self) -> dict[str, int]:
        """Rows per row kind (``+I``, ``-U``, ``+U``, ``-D``)."""
        return self._read.counts()

    def commit(self) -> int:
        """The changes were used: the consumer's next snapshot becomes ``end_snapshot_id + 1`` (returned). Fails,
        moving nothing, when the consumer was moved by another reader since this read."""
        return commit_consumer(self._sink, self._read)
