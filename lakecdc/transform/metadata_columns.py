"""Metadata columns declared in the pipeline, FLIP-107 style (``pipeline.lakecdc.metadata-columns``).

Each item declares a column that every captured table gets, filled from a source metadata key:

    change_time TIMESTAMP_LTZ(3) METADATA FROM 'op_ts'      -- the key under another name, persisted
    op_ts BIGINT METADATA                                   -- the key under its own name
    source_db STRING METADATA FROM 'database_name' VIRTUAL  -- usable in expressions, not persisted

or as a mapping ``{name: ..., type: ..., from: ..., virtual: true}``. As in FLIP-107, a non-virtual metadata column
is part of the table: ``*`` (and a table without a transform rule) includes it after the source columns, so it is
written to Paimon. A ``VIRTUAL`` column is not part of ``*`` and never persisted on its own; projections and
filters may still use it by name, e.g. ``UPPER(source_db) AS db`` or ``filter: source_db <> 'test'``.

Keys (those of Flink's MySQL CDC connector): ``op_ts`` (change time: epoch milliseconds, 0 for snapshot rows;
declare BIGINT, or TIMESTAMP_LTZ(p) for an instant), ``database_name`` and ``table_name`` (STRING), ``row_kind``
(STRING: ``+I``, ``-U``, ``+U``, ``-D``). Declaring a column is what requests the key: ``metadata.list`` is not
needed for it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.errors import PipelineConfigError
from lakecdc.model import OP_TS_COLUMN, TableId
from lakecdc.transform.expressions import METADATA_COLUMNS, OP_TS

KEYS = (OP_TS, "database_name", "table_name", "row_kind")
_DDL = re.compile(r"^\s*`?([A-Za-z_][A-Za-z0-9_]*)`?\s+(.+?)\s+METADATA(?:\s+FROM\s+'([^']*)')?(\s+VIRTUAL)?\s*$",
                  re.IGNORECASE)


@dataclass(frozen=True)
class MetadataColumn:
    name: str
    type_text: str  # as declared, e.g. "TIMESTAMP_LTZ(3)"
    arrow_type: pa.DataType
    nullable: bool
    key: str
    virtual: bool

    @property
    def field(self) -> pa.Field:
        return pa.field(self.name, self.arrow_type, nullable=self.nullable)

    def values(self, data: pa.Table, table_id: TableId, row_kinds: pa.Array) -> pa.Array:
        """This column for a change batch (``data`` holds ``OP_TS_COLUMN``; ``row_kinds`` the source row kinds)."""
        n = data.num_rows
        if self.key == OP_TS:
            millis = data.column(OP_TS_COLUMN).combine_chunks().cast(pa.int64())
            if pa.types.is_timestamp(self.arrow_type):
                instants = millis.cast(pa.timestamp("ms", tz="UTC"))
                return pc.cast(instants, self.arrow_type, safe=False)  # TIMESTAMP_LTZ(0) truncates
            return millis.cast(self.arrow_type)
        if self.key == "row_kind":
            return row_kinds.cast(self.arrow_type)
        text = table_id.database if self.key == "database_name" else table_id.table
        return pa.repeat(pa.scalar(text, pa.string()), n).cast(self.arrow_type)


def parse_metadata_columns(raw: Any, *, file: str | None, path: str) -> tuple[MetadataColumn, ...]:
    """The declarations of ``pipeline.lakecdc.metadata-columns`` (a list); PipelineConfigError naming the item."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise PipelineConfigError("expected a list of column declarations like \"change_time TIMESTAMP_LTZ(3) "
                                  "METADATA FROM 'op_ts' VIRTUAL\"", file=file, path=path)
    columns: list[MetadataColumn] = []
    for i, item in enumerate(raw):
        column = _parse_item(item, file, f"{path}[{i}]")
        if any(c.name == column.name for c in columns):
            raise PipelineConfigError(f"column {column.name!r} is declared twice", file=file, path=f"{path}[{i}]")
        columns.append(column)
    return tuple(columns)


def _parse_item(item: Any, file: str | None, path: str) -> MetadataColumn:
    def error(message: str) -> PipelineConfigError:
        return PipelineConfigError(message, file=file, path=path)

    if isinstance(item, str):
        match = _DDL.match(item)
        if not match:
            raise error(f"expected \"<name> <type> METADATA [FROM '<key>'] [VIRTUAL]\", got {item!r}")
        name, type_text, key, virtual = match.group(1), match.group(2), match.group(3), bool(match.group(4))
    elif isinstance(item, dict):
        unknown = sorted(set(item) - {"name", "type", "from", "virtual"})
        if unknown:
            raise error(f"unknown key(s) {', '.join(unknown)} (keys: name, type, from, virtual)")
        name, type_text, key = item.get("name"), item.get("type"), item.get("from")
        virtual = item.get("virtual", False)
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name or ""):
            raise error(f"name must be a column name, got {name!r}")
        if not isinstance(type_text, str):
            raise error(f"type must be a type like BIGINT or STRING, got {type_text!r}")
        if not isinstance(virtual, bool):
            raise error(f"virtual must be true or false, got {virtual!r}")
    else:
        raise error(f"expected a declaration string or a mapping, got {type(item).__name__}")
    key = name if key is None else str(key)
    if key not in KEYS:
        raise error(f"[{key}] cannot be found in mysql metadata (available keys: {', '.join(KEYS)})")
    if name in METADATA_COLUMNS or name.startswith("__lakecdc"):
        raise error(f"column name {name} is reserved and shading it is not allowed")
    arrow_type, nullable = _arrow_type(type_text, error)
    _check_type(key, type_text, arrow_type, error)
    return MetadataColumn(name, type_text.strip(), arrow_type, nullable, key, virtual)


def _arrow_type(type_text: str, error) -> tuple[pa.DataType, bool]:
    from pypaimon.schema.data_types import DataTypeParser, PyarrowFieldParser

    try:
        parsed = DataTypeParser.parse_atomic_type_sql_string(type_text.strip())
        return PyarrowFieldParser.from_paimon_type(parsed), parsed.nullable
    except Exception:
        raise error(f"unknown type {type_text!r} (use BIGINT, STRING, TIMESTAMP_LTZ(3), ...)") from None


def _check_type(key: str, type_text: str, arrow_type: pa.DataType, error) -> None:
    if key == OP_TS:
        ok = arrow_type == pa.int64() or (pa.types.is_timestamp(arrow_type) and arrow_type.tz is not None)
        wanted = "BIGINT (epoch milliseconds) or TIMESTAMP_LTZ(p)"
    else:
        ok = pa.types.is_string(arrow_type)
        wanted = "STRING (or VARCHAR/CHAR)"
    if not ok:
        raise error(f"metadata key {key!r} cannot be read as {type_text.strip()}; declare it as {wanted}")


def check_declared_metadata(columns: tuple[MetadataColumn, ...], source, file: str | None) -> None:
    """A declared metadata column must not have the name of a column of the source table (``source``: a
    SourceTable): a table's columns have unique names (FLIP-107)."""
    clash = [c.name for c in columns if c.name in source.column_names]
    if clash:
        raise PipelineConfigError(
            f"metadata column(s) {', '.join(clash)} have the name of a column of {source.table_id}; rename the "
            f"declaration (e.g. '{clash[0]}_meta ... METADATA FROM ...')", file=file,
            path="pipeline.lakecdc.metadata-columns")
