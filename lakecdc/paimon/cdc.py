"""CDC records with schema evolution, like Paimon's ``RichCdcRecord`` / ``RichCdcSinkBuilder``.

A ``CdcRecord`` carries a row kind and fields with a name, a Paimon type (``"BIGINT"``, ``"DECIMAL(10, 2)"``,
``"TIMESTAMP(3)"``...) and a string-encoded value. Writing records first evolves the table the way Paimon's CDC
sink does (``UpdatedDataFieldsProcessFunctionBase``):

* a field the table does not have is added as a nullable column at the end (also on partial-update tables, where
  the NULLs of rows that do not carry the field do not overwrite anything);
* a field whose type differs is compared with ``can_convert``: a widening in the same family (INT → BIGINT,
  FLOAT → DOUBLE, VARCHAR(10) → VARCHAR(20), DECIMAL(10, 2) → DECIMAL(12, 2), TIMESTAMP(3) → TIMESTAMP(6)) updates
  the column type; a narrower type of the same family is ignored (values are cast to the column type); anything
  else is refused before anything is written;
* a table column that a record does not carry is NULL in that row.

Values are converted column by column with Arrow casts: numbers, booleans (``true``/``false``), DECIMAL, DATE
(``2023-06-12``), TIMESTAMP (``2023-06-12 20:21:12[.ffffff]``, also with ``T``), STRING; BYTES are base64 (as
Paimon's CDC records encode them). A value that does not convert raises SinkError naming the field and value.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.errors import SinkError
from lakecdc.model import OP_COLUMN
from lakecdc.paimon.rows import RowKind


@dataclass(frozen=True)
class CdcField:
    name: str
    type: str  # a Paimon type, e.g. "BIGINT", "DECIMAL(10, 2)"
    value: str | None  # string-encoded value; None = NULL


class CdcRecord:
    """One change with its own schema (``RichCdcRecord``): build it with ``CdcRecord.builder(kind)``."""

    __slots__ = ("kind", "fields")

    def __init__(self, kind: RowKind | str, fields: Iterable[CdcField]):
        self.kind = RowKind.of(kind)
        self.fields = tuple(fields)
        names = [f.name for f in self.fields]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise SinkError(f"CDC record: field(s) {', '.join(dup)} given more than once")

    @staticmethod
    def builder(kind: RowKind | str) -> "CdcRecordBuilder":
        return CdcRecordBuilder(kind)

    def __repr__(self) -> str:
        return f"CdcRecord({self.kind.value}, {', '.join(f'{f.name} {f.type}={f.value!r}' for f in self.fields)})"


class CdcRecordBuilder:
    def __init__(self, kind: RowKind | str):
        self._kind = RowKind.of(kind)
        self._fields: list[CdcField] = []

    def field(self, name: str, data_type: str, value: str | None) -> "CdcRecordBuilder":
        """Add a field: its name, a Paimon type string and its value as a string (None for NULL)."""
        if not isinstance(name, str) or not name:
            raise SinkError(f"CDC record: field name must be a non-empty string, got {name!r}")
        parse_type(data_type, name)  # fail on the builder line that is wrong
        if value is not None and not isinstance(value, str):
            raise SinkError(f"CDC record, field {name!r}: values are string-encoded, got {type(value).__name__} "
                            f"{value!r} (write str({value!r}))")
        self._fields.append(CdcField(name, str(data_type), value))
        return self

    def build(self) -> CdcRecord:
        return CdcRecord(self._kind, self._fields)


# ------------------------------------------------------------------------------------------------------ types

_INTEGERS = ("TINYINT", "SMALLINT", "INT", "BIGINT")
_FLOATS = ("FLOAT", "DOUBLE")
_MAX_LENGTH = 2147483647
_TYPE = re.compile(r"^\s*([A-Z_]+(?:\s+[A-Z_]+)*?)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?"
                   r"(\s+WITH(?:OUT)?\s+(?:LOCAL\s+)?TIME\s+ZONE)?\s*(NOT\s+NULL)?\s*$")


@dataclass(frozen=True)
class TypeInfo:
    """A Paimon atomic type reduced to what ``can_convert`` compares."""

    root: str  # CHAR, VARCHAR, BINARY, VARBINARY, TINYINT.., FLOAT, DOUBLE, DECIMAL, TIMESTAMP, TIMESTAMP_LTZ, ...
    length: int | None = None  # length or precision
    scale: int | None = None


def parse_type(text: str, field: str = "") -> Any:
    """The pypaimon DataType of a Paimon type string; SinkError naming the field otherwise."""
    from pypaimon.schema.data_types import DataTypeParser

    if not isinstance(text, str) or not text.strip():
        raise SinkError(f"CDC record, field {field!r}: type must be a Paimon type string like 'BIGINT', got {text!r}")
    try:
        return DataTypeParser.parse_atomic_type_sql_string(text.strip())
    except Exception:
        raise SinkError(f"CDC record, field {field!r}: unknown or unsupported type {text!r} (use Paimon atomic types "
                        f"such as INT, BIGINT, DOUBLE, DECIMAL(p, s), STRING, VARCHAR(n), DATE, TIMESTAMP(p), "
                        f"BOOLEAN, BYTES)") from None


def storable_type(text: str, field: str, nullable: bool = True):
    """The pypaimon DataType a new or widened column gets: the record type normalised the way tables are created
    from Arrow (explicit precisions such as TIMESTAMP(6), which the Rust writer requires; CHAR/VARCHAR(n) become
    STRING and BINARY/VARBINARY(n) BYTES, as Arrow has no string lengths)."""
    from pypaimon.schema.data_types import PyarrowFieldParser

    arrow_type = PyarrowFieldParser.from_paimon_type(parse_type(text, field))
    return PyarrowFieldParser.to_paimon_type(arrow_type, nullable)


def type_info(text: str) -> TypeInfo:
    match = _TYPE.match(str(text).upper())
    if not match:
        return TypeInfo(str(text).upper())
    root, length, scale, zone = match.group(1), match.group(2), match.group(3), match.group(4)
    root = {"INTEGER": "INT", "STRING": "VARCHAR", "BYTES": "VARBINARY", "DEC": "DECIMAL", "NUMERIC": "DECIMAL",
            "TIMESTAMP_LTZ": "TIMESTAMP_LTZ"}.get(root, root)
    if zone and "LOCAL" in zone:
        root = "TIMESTAMP_LTZ"
    n = int(length) if length is not None else None
    if root in ("VARCHAR", "VARBINARY") and n is None:
        n = _MAX_LENGTH  # STRING / BYTES
    if root in ("CHAR", "BINARY") and n is None:
        n = 1
    if root == "DECIMAL":
        return TypeInfo(root, 10 if n is None else n, int(scale) if scale is not None else 0)
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ") and n is None:
        n = 6
    return TypeInfo(root, n)


CONVERT, IGNORE, EXCEPTION = "convert", "ignore", "exception"


def can_convert(old: str, new: str) -> str:
    """Paimon's ``canConvert(oldType, newType)``: CONVERT (widen the column), IGNORE (keep it), EXCEPTION."""
    a, b = type_info(old), type_info(new)
    if a == b:
        return CONVERT
    for family in (("CHAR", "VARCHAR"), ("BINARY", "VARBINARY")):
        if a.root in family and b.root in family:
            return CONVERT if (a.length or 0) <= (b.length or 0) else IGNORE
    for ranks in (_INTEGERS, _FLOATS):
        if a.root in ranks and b.root in ranks:
            return CONVERT if ranks.index(a.root) <= ranks.index(b.root) else IGNORE
    # type_info gives every DECIMAL a length and a scale, every TIMESTAMP a length
    if a.root == b.root == "DECIMAL":
        return IGNORE if ((b.length or 0) <= (a.length or 0) and (b.scale or 0) <= (a.scale or 0)) else CONVERT
    if a.root == b.root == "TIMESTAMP":
        return CONVERT if (a.length or 0) <= (b.length or 0) else IGNORE
    return EXCEPTION


def _without_not_null(text: str) -> str:
    return re.sub(r"\s+NOT\s+NULL\s*$", "", str(text), flags=re.IGNORECASE).strip()


def record_fields(records: list[CdcRecord]) -> dict[str, str]:
    """Field name → type over all records, in first-seen order; a later record's type replaces an earlier one
    when it widens it (``can_convert``), as the records' schema changes are applied one after the other."""
    fields: dict[str, str] = {}
    for record in records:
        for f in record.fields:
            if f.name not in fields:
                fields[f.name] = f.type
                continue
            action = can_convert(fields[f.name], f.type)
            if action == CONVERT:
                fields[f.name] = f.type
            elif action == EXCEPTION:
                raise SinkError(f"CDC records: field {f.name!r} is {fields[f.name]} in one record and {f.type} in "
                                f"another; these types cannot be converted into each other")
    return fields


def schema_changes(table_name: str, table_fields: dict[str, str], key_columns: set[str],
                   fields: dict[str, str]) -> list:
    """The pypaimon SchemaChanges that make the table take ``fields`` (see the module docstring)."""
    from pypaimon.schema.schema_change import SchemaChange

    changes = []
    for name, new_type in fields.items():
        if name not in table_fields:
            changes.append(SchemaChange.add_column(name, storable_type(_without_not_null(new_type), name)))
            continue
        old_type = table_fields[name]
        action = can_convert(_without_not_null(old_type), _without_not_null(new_type))
        if action == EXCEPTION:
            raise SinkError(f"Cannot convert field {name} from type {old_type} to {new_type} of Paimon table "
                            f"{table_name}: the types belong to different families. Nothing was written")
        if action == CONVERT and type_info(old_type) != type_info(new_type):
            if name in key_columns:
                raise SinkError(f"Paimon table {table_name}: field {name} is a primary-key or partition column; its "
                                f"type {old_type} cannot be changed to {new_type}. Nothing was written")
            new = storable_type(_without_not_null(new_type), name, "NOT NULL" not in str(old_type).upper())
            if type_info(str(new)) != type_info(old_type):  # e.g. VARCHAR(10) → VARCHAR(20) is STRING both times
                changes.append(SchemaChange.update_column_type(name, new))
    return changes


# ----------------------------------------------------------------------------------------------------- values

def records_to_changes(records: list[CdcRecord], schema: pa.Schema, table_name: str) -> pa.Table:
    """The records as a change table of the (evolved) table: its columns in order plus ``OP_COLUMN``.

    The string values are gathered per column (one Python pass over the records, which are Python objects
    already), then converted with one Arrow cast per column."""
    values: dict[str, list[str | None]] = {name: [None] * len(records) for name in schema.names}
    for i, record in enumerate(records):
        for f in record.fields:
            values[f.name][i] = f.value
    arrays = [_convert(pa.array(values[f.name], pa.string()), f, table_name) for f in schema]
    table = pa.Table.from_arrays(arrays, schema=pa.schema([f.with_nullable(True) for f in schema]))
    return table.append_column(OP_COLUMN, pa.array([r.kind.value for r in records], pa.string()))


def _convert(strings: pa.Array, f: pa.Field, table_name: str) -> pa.Array:
    try:
        return _cast_strings(strings, f.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, ValueError, binascii.Error) as error:
        bad = _first_bad(strings, f.type)
        raise SinkError(f"Paimon table {table_name}, field {f.name!r}: value {bad!r} cannot be read as {f.type}: "
                        f"{error}. Nothing was written") from None


def _cast_strings(strings: pa.Array, t: pa.DataType) -> pa.Array:
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        decoded = [None if v is None else base64.b64decode(v, validate=True) for v in strings.to_pylist()]
        return pa.array(decoded, t)
    if pa.types.is_timestamp(t):
        text = pc.replace_substring(strings, "T", " ")
        unit = "ns" if t.unit == "ns" else "us"
        # finer digits than the column keeps are truncated, as Paimon's CDC value parser does
        return pc.cast(pc.cast(text, pa.timestamp(unit)), t, safe=False)
    if pa.types.is_time(t):
        return _parse_time(strings, t)
    if pa.types.is_boolean(t):
        lowered = pc.utf8_lower(pc.utf8_trim_whitespace(strings))
        bad = pc.and_(pc.is_valid(lowered), pc.invert(pc.is_in(lowered, pa.array(["true", "false"]))))
        if pc.any(bad).as_py():
            raise ValueError("booleans are 'true' or 'false'")
        return pc.equal(lowered, "true")
    return pc.cast(strings, t)


def _parse_time(strings: pa.Array, t: pa.DataType) -> pa.Array:
    ts = pc.cast(pc.binary_join_element_wise("1970-01-01 ", strings, ""), pa.timestamp("ms"))
    return pc.cast(pc.cast(ts, pa.int64()), pa.int32()).cast(pa.time32("ms")).cast(t)


def _first_bad(strings: pa.Array, t: pa.DataType) -> str | None:
    for value in strings.to_pylist():  # only on the error path, to name the value
        if value is None:
            continue
        try:
            _cast_strings(pa.array([value], pa.string()), t)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, ValueError, binascii.Error):
            return value
    return None
