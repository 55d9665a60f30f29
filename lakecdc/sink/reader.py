"""Reading a Paimon table back: the merged current state (deleted rows gone, latest row per key)."""

from __future__ import annotations

import pyarrow as pa

from lakecdc.errors import SinkError
from lakecdc.model import TableId


def read_table(table_id: TableId, table, columns: list[str] | None = None) -> pa.Table:
    """The latest snapshot of ``table`` (a pypaimon table with the native read options), optionally projected."""
    names = [f.name for f in table.table_schema.fields]
    if columns is not None:
        missing = [c for c in columns if c not in names]
        if missing:
            raise SinkError(f"table {table_id}: no column(s) {', '.join(map(repr, missing))} "
                            f"(columns: {', '.join(names)})")
    try:
        builder = table.new_read_builder()
        if columns is not None:
            builder = builder.with_projection(list(columns))
        splits = builder.new_scan().plan().splits()
        result = builder.new_read().to_arrow(splits)
    except Exception as error:
        raise SinkError(f"table {table_id}: read failed: {error}") from error
    if result is None:  # defensive: some pypaimon paths return None for no splits
        from pypaimon.schema.data_types import PyarrowFieldParser

        schema = PyarrowFieldParser.from_paimon_schema(table.table_schema.fields)
        result = schema.empty_table()
        if columns is not None:
            result = result.select(list(columns))
    return result


def row_count(table_id: TableId, table) -> int:
    """Number of live rows (merged). Reads only the first column (primary-key columns are read for merging anyway)."""
    keys = list(table.primary_keys) or [table.table_schema.fields[0].name]
    return read_table(table_id, table, keys[:1]).num_rows
