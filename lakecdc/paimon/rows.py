"""Row kinds and the conversion of user input (Python rows, dicts, Arrow, pandas, polars) into the change layout
the sink writes: the table's columns plus the row-kind column, checked against the table schema.

Python rows are turned into Arrow column by column (``pa.array`` per column), never row by row into the writer.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from lakecdc.errors import SinkError
from lakecdc.model import OP_COLUMN, ROW_KINDS
from lakecdc.sink.reader import ROW_KIND_COLUMN  # as pypaimon-rust and Paimon's $audit_log name it



class RowKind(str, enum.Enum):
    """Paimon's (and Flink's) row kinds, by their short strings."""

    INSERT = "+I"
    UPDATE_BEFORE = "-U"
    UPDATE_AFTER = "+U"
    DELETE = "-D"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def of(cls, value: "RowKind | str") -> "RowKind":
        """``RowKind``, its short string (``+I``) or its name (``INSERT``)."""
        if isinstance(value, RowKind):
            return value
        text = str(value).strip()
        for kind in cls:
            if text == kind.value or text.upper() == kind.name:
                return kind
        raise SinkError(f"unknown row kind {value!r}; use one of {', '.join(ROW_KINDS)} (or INSERT, UPDATE_BEFORE, "
                        f"UPDATE_AFTER, DELETE)")


class Row:
    """One row with its kind, values in the order of the input schema (by default the table's column order),
    like Flink's ``Row.ofKind(RowKind.INSERT, "Alice", 12)``."""

    __slots__ = ("kind", "values")

    def __init__(self, *values: Any, kind: RowKind | str = RowKind.INSERT):
        self.kind = RowKind.of(kind)
        self.values = tuple(values)

    @classmethod
    def of_kind(cls, kind: RowKind | str, *values: Any) -> "Row":
        return cls(*values, kind=kind)

    def __repr__(self) -> str:
        return f"Row.of_kind({self.kind.name}, {', '.join(map(repr, self.values))})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Row) and (self.kind, self.values) == (other.kind, other.values)

    def __hash__(self) -> int:
        return hash((self.kind, self.values))


def to_changes(data: Any, table_schema: pa.Schema, *, input_schema: pa.Schema | None = None,
               row_kind_column: str = ROW_KIND_COLUMN, what: str = "the input") -> pa.Table:
    """``data`` as an Arrow table of the table's columns (in table order, table types) plus ``OP_COLUMN``.

    Accepted: an iterable of ``Row`` / tuples / lists (positional, in ``input_schema`` or table order) or of dicts
    (by column name, the row kind under ``row_kind_column``, default ``+I``); a pyarrow Table or RecordBatch, a
    pandas or polars DataFrame (by column name, row kinds in ``row_kind_column`` when present, else all ``+I``).
    ``input_schema`` (like Flink's input type) must have the table's column names in the table's order; the data is
    checked against it. Values that do not fit the column type raise SinkError naming the column."""
    if input_schema is not None:
        _check_input_schema(input_schema, table_schema)
    arrow = _as_arrow(data)
    if arrow is None:
        arrow = _rows_to_arrow(data, input_schema or table_schema, row_kind_column, what)
    elif input_schema is not None:
        _check_arrow_against(arrow, input_schema, row_kind_column, what)
    return _with_row_kinds(arrow, table_schema, row_kind_column, what)


def _check_input_schema(input_schema: pa.Schema, table_schema: pa.Schema) -> None:
    if input_schema.names != table_schema.names:
        raise SinkError(f"the input schema's fields {input_schema.names} must be the table's columns in the table's "
                        f"order {table_schema.names}")
    for f in input_schema:
        expected = table_schema.field(f.name).type
        if f.type != expected:
            raise SinkError(f"input schema field {f.name!r} is {f.type} but the table column is {expected}")


def _as_arrow(data: Any) -> pa.Table | None:
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    module = type(data).__module__.split(".")[0]
    if module == "pandas":
        return pa.Table.from_pandas(data, preserve_index=False)
    if module == "polars" and hasattr(data, "to_arrow"):
        return data.to_arrow()
    return None


def _check_arrow_against(arrow: pa.Table, input_schema: pa.Schema, row_kind_column: str, what: str) -> None:
    names = [n for n in arrow.column_names if n != row_kind_column]
    if names != input_schema.names:
        raise SinkError(f"{what}: columns {names} do not match the input schema {input_schema.names}")
    for f in input_schema:
        if arrow.schema.field(f.name).type != f.type:
            raise SinkError(f"{what}: column {f.name!r} is {arrow.schema.field(f.name).type}, the input schema "
                            f"says {f.type}")


def _rows_to_arrow(rows: Any, schema: pa.Schema, row_kind_column: str, what: str) -> pa.Table:
    if isinstance(rows, (str, bytes)) or not isinstance(rows, Iterable):
        raise SinkError(f"{what}: expected rows (Row, tuple, list or dict), a pyarrow Table, or a pandas/polars "
                        f"DataFrame, got {type(rows).__name__}")
    columns: list[list] = [[] for _ in schema]
    kinds: list[str] = []
    names = schema.names
    for i, row in enumerate(rows):
        if isinstance(row, Row):
            kind, values = row.kind.value, row.values
        elif isinstance(row, Mapping):
            extra = [k for k in row if k not in names and k != row_kind_column]
            if extra:
                raise SinkError(f"{what}, row {i}: unknown column(s) {extra} (columns: {', '.join(names)})")
            kind = RowKind.of(row.get(row_kind_column, RowKind.INSERT)).value
            values = tuple(row.get(n) for n in names)
        elif isinstance(row, (tuple, list)):
            kind, values = RowKind.INSERT.value, tuple(row)
        else:
            raise SinkError(f"{what}, row {i}: expected a Row, tuple, list or dict, got {type(row).__name__}")
        if len(values) != len(names):
            raise SinkError(f"{what}, row {i}: {len(values)} value(s) for {len(names)} column(s) {names}")
        kinds.append(kind)
        for column, value in zip(columns, values):
            column.append(value)
    arrays = []
    for f, column in zip(schema, columns):
        try:
            arrays.append(pa.array(column, type=f.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as error:
            raise SinkError(f"{what}, column {f.name!r}: values do not fit type {f.type}: {error}") from None
    table = pa.Table.from_arrays(arrays, schema=pa.schema([f.with_nullable(True) for f in schema]))
    return table.append_column(row_kind_column, pa.array(kinds, pa.string()))


def _with_row_kinds(arrow: pa.Table, table_schema: pa.Schema, row_kind_column: str, what: str) -> pa.Table:
    """Rename the row-kind column to the sink's ``OP_COLUMN`` (or add ``+I``); the sink checks and casts the rest."""
    if OP_COLUMN in arrow.column_names:
        raise SinkError(f"{what}: column {OP_COLUMN!r} is reserved")
    if row_kind_column in arrow.column_names and row_kind_column not in table_schema.names:
        index = arrow.column_names.index(row_kind_column)
        kinds = arrow.column(index)
        if not pa.types.is_string(kinds.type) and not pa.types.is_large_string(kinds.type):
            raise SinkError(f"{what}: row kind column {row_kind_column!r} must hold strings ({', '.join(ROW_KINDS)}), "
                            f"not {kinds.type}")
        return arrow.remove_column(index).append_column(OP_COLUMN, kinds)
    return arrow.append_column(OP_COLUMN, pa.repeat(pa.scalar(RowKind.INSERT.value, pa.string()), arrow.num_rows))
