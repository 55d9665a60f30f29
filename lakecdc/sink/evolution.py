"""Schema changes of Paimon tables, as Flink CDC's PaimonMetadataApplier makes them:
add column at a position (skipped when the column exists), drop column (skipped when missing), rename column, alter
column type (with its comment), make a column nullable, table comment. Truncate and drop table are PaimonSink
methods.

Type changes: every change Paimon can make (what Flink CDC's Paimon sink applies: Paimon's DataTypeCasts with
explicit casts, and a cast for its read path) is applied when both readers lakecdc supports (pypaimon and
pypaimon-rust, which convert the older data files on read) give the values MySQL's ALTER gave the rows: widenings
always, narrowings and conversions after the table's stored values pass :func:`check_stored_values`. Others raise
UnsupportedSchemaChange before anything is committed, which the ``try_evolve`` behaviour tolerates (the list:
docs/schema-changes.md#type-changes). Every change is idempotent, so a run that replays a DDL after a crash
converges to the same schema.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.errors import SinkError
from lakecdc.model import DEFAULT_KEY, BinlogOffset, TableId
from lakecdc.sink.tables import TIME_PRECISION, declared_type, paimon_arrow_type

log = logging.getLogger(__name__)

ADD, DROP, RENAME, ALTER_TYPE, NULLABLE, COMMENT = "add", "drop", "rename", "alter-type", "nullable", "comment"


class UnsupportedSchemaChange(SinkError):
    """A type change lakecdc refuses (docs/schema-changes.md#type-changes); ``try_evolve`` skips it, other modes
    fail."""


@dataclass(frozen=True)
class ColumnChange:
    """One change of a Paimon table's columns (or its comment).

    ``position``: for ADD, ``("FIRST", "")``, ``("AFTER", column)``, ``("BEFORE", column)`` or ``("LAST", "")``."""

    kind: str
    name: str = ""
    field: pa.Field | None = None  # ADD / ALTER_TYPE: the new column (type, nullability, comment, declared type)
    position: tuple[str, str] = ("LAST", "")
    new_name: str = ""  # RENAME
    comment: str | None = None  # ALTER_TYPE: the column comment; COMMENT: the table comment

    @property
    def new_field(self) -> pa.Field:
        """The new column of an ADD or ALTER_TYPE change (every such change has one)."""
        if self.field is None:
            raise ValueError(f"{self.kind} change of column {self.name!r} without its field")
        return self.field

    def describe(self) -> str:
        if self.kind == ADD:
            return f"add column {self.name} {self.new_field.type} {' '.join(self.position).strip()}"
        if self.kind == RENAME:
            return f"rename column {self.name} to {self.new_name}"
        if self.kind == ALTER_TYPE:
            return f"alter column {self.name} type {self.new_field.type}"
        if self.kind == NULLABLE:
            return f"make column {self.name} nullable"
        if self.kind == COMMENT:
            return f"table comment {self.comment!r}"
        return f"drop column {self.name}"


def paimon_type(table_id: TableId, field: pa.Field):
    """The pypaimon DataType a column is stored with (as at table creation: unsigned widening, TIME(p),
    TIMESTAMP(p), CHAR/VARCHAR(n), BINARY/VARBINARY(n))."""
    from pypaimon.schema.data_types import AtomicType, PyarrowFieldParser

    arrow_type = paimon_arrow_type(table_id, field.name, field.type)
    data_type = PyarrowFieldParser.to_paimon_type(arrow_type, field.nullable)
    sized = declared_type(field)
    if sized is not None:
        return AtomicType(sized, field.nullable)
    if pa.types.is_time(arrow_type):
        return AtomicType(f"TIME({TIME_PRECISION[arrow_type.unit]})", field.nullable)
    return data_type


# Table option recording the last change applied: "<binlog file>:<pos>#<index>" (the DDL's end offset and the
# change's index among that DDL's changes), written in the same schema version as the change itself. A replay of
# the DDL after a crash skips what it records, so non-idempotent sequences (add a, rename a to b) converge too.
APPLIED_OPTION = "lakecdc.schema.applied"


def apply_column_changes(sink, table_id: TableId, changes: list[ColumnChange], *,
                         applied_at: BinlogOffset | None = None, tolerate_unsupported: bool = False,
                         warn=log.warning) -> list[ColumnChange]:
    """Apply ``changes`` one by one (each a new schema version); returns those that changed the table (the others
    were already reflected in it, or were applied before by the DDL at ``applied_at``). UnsupportedSchemaChange
    for a type change lakecdc refuses (nothing of that change is applied; with
    ``tolerate_unsupported`` it is skipped with a warning); SinkError when a change cannot be made (primary-key
    or partition columns, a missing column)."""
    from pypaimon.schema.schema_change import SchemaChange

    applied = []
    for index, change in enumerate(changes):
        description = sink.describe(table_id)
        if applied_at is not None and _already_applied(description.options.get(APPLIED_OPTION), applied_at, index):
            log.info("%s: %s was applied before (replay of the DDL at %s); skipped", table_id, change.describe(),
                     applied_at)
            continue
        types = sink.paimon_types(table_id)
        try:
            schema_changes = _schema_changes(table_id, change, description, types,
                                             lambda name: sink.read_table(table_id, [name]).column(name),
                                             SchemaChange)
        except UnsupportedSchemaChange as error:
            if not tolerate_unsupported:
                raise
            warn("Failed to apply schema change %s to %s, but keeps running in tolerant mode: %s",
                 change.describe(), table_id, error)
            continue
        if not schema_changes:
            log.info("%s: %s is already reflected in the table; skipped", table_id, change.describe())
            continue
        if applied_at is not None:
            schema_changes.append(SchemaChange.set_option(APPLIED_OPTION,
                                                          f"{applied_at.file}:{applied_at.pos}#{index}"))
        default = column_default(change.field) if change.kind == ADD else None
        sink.alter_table(table_id, schema_changes, {change.name: default} if default is not None else None)
        applied.append(change)
        log.info("%s: applied %s", table_id, change.describe())
    return applied


def _already_applied(marker: str | None, offset: BinlogOffset, index: int) -> bool:
    if not marker or "#" not in marker:
        return False
    position, _, done_index = marker.rpartition("#")
    file, _, pos = position.rpartition(":")
    try:
        done = BinlogOffset(file, int(pos))
        done_index_value = int(done_index)
    except ValueError:
        return False
    return done > offset or (done.same_position(offset) and done_index_value >= index)


def _schema_changes(table_id: TableId, change: ColumnChange, description, types: dict[str, str], stored_values,
                    SchemaChange):
    from pypaimon.schema.schema_change import Move

    columns = list(types)
    keys = set(description.primary_keys) | set(description.partition_keys)
    if change.kind == ADD:
        if change.name in types:
            return []
        where, reference = change.position
        move = None
        if where == "FIRST":
            move = Move.first(change.name)
        elif where == "AFTER" and reference in types:
            move = Move.after(change.name, reference)
        elif where == "BEFORE" and reference in types:
            index = columns.index(reference)
            move = Move.first(change.name) if index == 0 else Move.after(change.name, columns[index - 1])
        elif where in ("AFTER", "BEFORE"):
            raise SinkError(f"table {table_id}: cannot add column {change.name!r} {where} {reference!r}: no such "
                            f"column (columns: {', '.join(columns)})")
        field = change.new_field.with_nullable(True) if not change.new_field.nullable else change.new_field
        comment = _comment(field)
        return [SchemaChange.add_column(change.name, paimon_type(table_id, field), comment, move)]

    if change.kind == DROP:
        if change.name not in types:
            return []
        if change.name in keys:
            raise SinkError(f"table {table_id}: cannot drop column {change.name!r}, a primary-key or partition "
                            "column of the Paimon table")
        return [SchemaChange.drop_column(change.name)]
    if change.kind == RENAME:
        if change.name not in types and change.new_name in types:
            return []
        if change.name not in types:
            raise SinkError(f"table {table_id}: cannot rename column {change.name!r}: no such column (columns: "
                            f"{', '.join(columns)})")
        if change.new_name in types:
            raise SinkError(f"table {table_id}: cannot rename column {change.name!r} to {change.new_name!r}: the "
                            "table already has that column")
        if change.name in description.partition_keys:
            raise SinkError(f"table {table_id}: cannot rename partition column {change.name!r} (Paimon refuses)")
        return [SchemaChange.rename_column(change.name, change.new_name)]
    if change.kind == NULLABLE:
        if change.name not in types or "NOT NULL" not in types[change.name].upper() or change.name in keys:
            return []
        return [SchemaChange.update_column_nullability(change.name, True)]
    if change.kind == COMMENT:
        return [SchemaChange.update_comment(change.comment)] if (change.comment or "") != (description.comment or "") \
            else []
    if change.kind == ALTER_TYPE:
        return _alter_type(table_id, change, types, keys, _stored_comment(description.schema, change.name),
                           stored_values, SchemaChange)
    raise SinkError(f"table {table_id}: unknown schema change {change.kind!r}")


def _alter_type(table_id: TableId, change: ColumnChange, types: dict[str, str], keys: set[str],
                stored_comment: str | None, stored_values, SchemaChange):
    if change.name not in types:
        raise SinkError(f"table {table_id}: cannot change the type of column {change.name!r}: no such column")
    old = types[change.name]
    nullable = "NOT NULL" not in old.upper()
    new_type = paimon_type(table_id, change.new_field.with_nullable(nullable))
    out = []
    if _base(str(new_type)) != _base(old):
        if change.name in keys:
            raise SinkError(f"table {table_id}: cannot change the type of column {change.name!r} from {old} to "
                            f"{new_type}: it is a primary-key or partition column of the Paimon table (Paimon "
                            "refuses)")
        reason = type_change_refusal(old, str(new_type), change.new_field.nullable)
        if reason is None and needs_value_check(old, str(new_type)):
            reason = check_stored_values(stored_values(change.name), old, new_type)
        if reason is not None:
            raise UnsupportedSchemaChange(
                f"table {table_id}: column {change.name!r} cannot change from {_base(old)} to "
                f"{_base(str(new_type))}: {reason}. Nothing of this change was applied to Paimon "
                "(docs/schema-changes.md lists the type changes lakecdc applies). Re-snapshot the table to take "
                "the column in its new type (lakecdc resnapshot PIPELINE.yaml DB.TABLE, or the Dagster re-snapshot "
                "job), or run with schema.change.behavior try_evolve to keep the old type")
        out.append(SchemaChange.update_column_type(change.name, new_type))
    if change.new_field.nullable and not nullable and change.name not in keys:
        out.append(SchemaChange.update_column_nullability(change.name, True))
    if change.comment is not None and (change.comment or None) != (stored_comment or None):
        out.append(SchemaChange.update_column_comment(change.name, change.comment))
    return out


def _stored_comment(schema: pa.Schema, name: str) -> str | None:
    if name not in schema.names:
        return None
    value = (schema.field(name).metadata or {}).get(b"description")
    return value.decode() if value else None


def column_default(field: pa.Field) -> str | None:
    """The column's MySQL default as Paimon keeps it: zero dates of timestamp columns become
    '1970-01-01 00:00:00' (Flink CDC's Paimon sink), since Paimon cannot hold them."""
    value = (field.metadata or {}).get(DEFAULT_KEY)
    if value is None:
        return None
    text = value.decode()
    if pa.types.is_timestamp(field.type) and text.startswith("0000-00-00 00:00:00"):
        return "1970-01-01 00:00:00"
    return text


def _comment(field: pa.Field) -> str | None:
    value = (field.metadata or {}).get(b"comment")
    return value.decode() if value else None


# ----------------------------------------------------------------------------------------------- type changes

_TYPE = re.compile(r"^\s*([A-Z_ ]+?)\s*(?:\((\d+)(?:\s*,\s*(\d+))?\))?\s*(WITH LOCAL TIME ZONE)?\s*(NOT NULL)?\s*$")
_INTEGERS = ("TINYINT", "SMALLINT", "INT", "BIGINT")
_INTEGER_DIGITS = {"TINYINT": 3, "SMALLINT": 5, "INT": 10, "BIGINT": 19}
_MAX = 2147483647


def _base(text: str) -> str:
    return re.sub(r"\s+NOT NULL\s*$", "", str(text).upper()).strip()


def _parse(text: str) -> tuple[str, int | None, int | None]:
    match = _TYPE.match(_base(text))
    if not match:
        return _base(text), None, None
    root = match.group(1).strip()
    if match.group(4):
        root = "TIMESTAMP_LTZ"
    root = {"INTEGER": "INT", "STRING": "VARCHAR", "BYTES": "VARBINARY"}.get(root, root)
    length = int(match.group(2)) if match.group(2) is not None else None
    scale = int(match.group(3)) if match.group(3) is not None else None
    if root in ("VARCHAR", "VARBINARY") and length is None:
        length = _MAX
    if root in ("CHAR", "BINARY") and length is None:
        length = 1
    if root == "DECIMAL":
        length, scale = length if length is not None else 10, scale or 0
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ") and length is None:
        length = 6
    if root == "TIME" and length is None:
        length = 0
    return root, length, scale


def readable_type_change(old: str, new: str, new_nullable: bool = True) -> bool:
    """True when lakecdc applies a change of a column from Paimon type ``old`` to ``new`` (subject to the check
    of the stored values, for the changes that are not widenings)."""
    return type_change_refusal(old, new, new_nullable) is None


# Type roots as Paimon's DataTypeCasts / CastExecutors group them
_APPROX = ("FLOAT", "DOUBLE")
_NUMERIC = (*_INTEGERS, *_APPROX, "DECIMAL")
_TEXT = ("CHAR", "VARCHAR")
_BYTES = ("BINARY", "VARBINARY")
_TIMESTAMPS = ("TIMESTAMP", "TIMESTAMP_LTZ")


def _paimon_casts(a: str, b: str, string_target: bool, new_nullable: bool) -> bool:
    """Whether Paimon (Java: DataTypeCasts.supportsCast with explicit casts, the SchemaManager default, and a
    CastExecutor for the read path) changes a column of root ``a`` into root ``b``: what Flink CDC's Paimon sink
    can apply. ``string_target``: ``b`` is STRING (VARCHAR of the maximal length), the only text type dates,
    times and timestamps have an executor for (and only nullable)."""
    if a == b:
        return a != "TIME"  # no TIME → TIME executor: a precision change is refused
    if b in _INTEGERS:
        return a in (*_NUMERIC, *_TEXT, "BOOLEAN") or (a in _TIMESTAMPS and b in ("INT", "BIGINT"))
    if b in (*_APPROX, "DECIMAL"):
        return a in (*_NUMERIC, *_TEXT, "BOOLEAN")
    if b == "BOOLEAN":
        return a in (*_TEXT, *_INTEGERS)
    if b in _TEXT:
        return a in (*_NUMERIC, *_TEXT, *_BYTES, "BOOLEAN") or (
            a in ("DATE", "TIME", *_TIMESTAMPS) and string_target and new_nullable)
    if b in _BYTES:
        return a in (*_TEXT, *_BYTES)
    if b in ("DATE", "TIME"):
        return a in (*_TIMESTAMPS, *_TEXT)
    if b in _TIMESTAMPS:
        return a in (*_TIMESTAMPS, "DATE", "TIME", *_TEXT, *_NUMERIC)
    return False


def _widening(a, b) -> bool:
    """Every value of ``a`` reads back unchanged as ``b`` (no check of the stored values needed)."""
    a_root, a_len, a_scale = a
    b_root, b_len, b_scale = b
    if a_root in _INTEGERS:
        if b_root in _INTEGERS:
            return _INTEGERS.index(a_root) <= _INTEGERS.index(b_root)
        if b_root == "DOUBLE":
            return a_root != "BIGINT"  # beyond 2^53 a BIGINT would be rounded
        if b_root == "DECIMAL":
            return b_len - b_scale >= _INTEGER_DIGITS[a_root]
        return b_root == "VARCHAR" and b_len == _MAX
    if a_root == "FLOAT":
        return b_root == "DOUBLE"
    if a_root == b_root == "DECIMAL":
        return b_scale >= a_scale and b_len - b_scale >= a_len - a_scale
    if a_root in _TEXT and b_root == "VARCHAR":
        return b_len >= a_len
    if a_root in _BYTES and b_root == "VARBINARY":
        return b_len >= a_len
    if a_root == b_root and a_root in _TIMESTAMPS:
        return b_len >= a_len
    return a_root == "DATE" and b_root == "TIMESTAMP"


def holds_every_value(stored: str, produced: str) -> bool:
    """Whether a column of Paimon type ``stored`` holds every value of type ``produced`` unchanged (a wider type of
    the same kind: TIMESTAMP(6) for TIMESTAMP(3), BYTES for VARBINARY(65536), BIGINT for INT, ...)."""
    return _widening(_parse(produced), _parse(stored))


def type_change_refusal(old: str, new: str, new_nullable: bool = True) -> str | None:
    """None when lakecdc applies a change of a column from Paimon type ``old`` to ``new``, else why it does not.

    Applied: every change Paimon can make (what Flink CDC's Paimon sink applies) whose existing data files both
    Paimon readers (pypaimon, pypaimon-rust) read back as MySQL converted the rows. Changes that are not widenings
    are applied only after the stored values pass :func:`check_stored_values` (tests/test_schema_changes.py
    checks every pair with both readers, before and after rows written in the new type)."""
    a, b = _parse(old), _parse(new)
    if a == b:
        return None
    a_root, b_root = a[0], b[0]
    if not _paimon_casts(a_root, b_root, b_root == "VARCHAR" and b[1] == _MAX, new_nullable):
        if a_root == b_root == "TIME":
            return ("Paimon has no cast between TIME precisions (its Java readers could not read the files "
                    "written before; Flink CDC's Paimon sink fails the same way)")
        return (f"Paimon has no cast from {a_root} to {_base(new)} (Flink CDC's Paimon sink fails the same "
                "way)")
    if not _readers_convert(old, new):
        return (f"the readers cannot convert the stored {a_root} values to {_base(new)} (pypaimon has no "
                "conversion for it on read)")
    if a_root in _APPROX and b_root in _TEXT:
        return "the readers would render the stored numbers differently from MySQL (3.0 where MySQL has '3')"
    if a_root == "BOOLEAN" and b_root in _TEXT:
        return "the readers would read the stored booleans as 'true'/'false' where MySQL has '1'/'0'"
    if a_root in _NUMERIC and b_root in _TIMESTAMPS:
        return ("the readers would read the stored numbers as seconds or microseconds since 1970 where MySQL "
                "reads 20240102101112 as 2024-01-02 10:11:12")
    if a_root in _TIMESTAMPS and b_root in _INTEGERS:
        return ("the readers would read the stored date-times as milliseconds or microseconds since 1970 where "
                "MySQL has 20240102101112")
    if a_root in _TIMESTAMPS and b_root in _TEXT:
        return ("the readers would render the stored date-times in ISO form ('2024-01-02T10:11:12') where MySQL "
                "has '2024-01-02 10:11:12'")
    if "TIMESTAMP_LTZ" in (a_root, b_root) and a_root != b_root:
        return ("MySQL converts between TIMESTAMP and DATE/TIME/DATETIME in the time zone of the session that "
                "ran the ALTER, which the readers of the stored values do not know")
    if a_root == "TIME" and b_root in _TIMESTAMPS:
        return "MySQL gives the converted times the current date, which the stored values do not have"
    return None


def _readers_convert(old: str, new: str) -> bool:
    """pypaimon's own check that its read path can convert old data files (a pyarrow cast kernel that takes the
    two types: INT → DECIMAL(10, 2) has none, it needs 12 digits)."""
    from pypaimon.casting.data_type_casts import can_execute_cast
    from pypaimon.schema.data_types import DataTypeParser

    def parsed(text: str):
        return DataTypeParser.parse_atomic_type_sql_string(_base(text))

    return can_execute_cast(parsed(old), parsed(new))


def needs_value_check(old: str, new: str) -> bool:
    """Whether a change lakecdc applies depends on the stored values (it is not a widening)."""
    return not _widening(_parse(old), _parse(new))


def check_stored_values(column: pa.ChunkedArray | pa.Array, old: str, new_type) -> str | None:
    """Why the stored values of a column (``column``, the table's current rows, of Paimon type ``old``) would not
    read back in ``new_type`` as MySQL converted them, or None. The readers convert the old data files with
    pypaimon's read-path cast (unsafe: truncating, wrapping, NULL for text they cannot parse), while MySQL's
    ALTER rounds, refuses values that do not fit (strict mode) and pads BINARY(n)."""
    from pypaimon.read.reader.data_file_batch_reader import cast_array_for_schema_evolution
    from pypaimon.schema.data_types import PyarrowFieldParser

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if column.null_count == len(column):
        return None
    a_root = _parse(old)[0]
    b_root, parsed_len, parsed_scale = _parse(str(new_type))
    b_len, b_scale = parsed_len or 0, parsed_scale or 0  # _parse gives every type checked by length one below
    try:
        read = cast_array_for_schema_evolution(column, PyarrowFieldParser.from_paimon_type(new_type))
        if a_root in _BYTES and b_root in _TEXT:
            read.validate(full=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        return f"the readers cannot convert every stored value and would read NULL for it ({error})"

    def example(mask) -> str | None:
        mask = pc.fill_null(mask, False)
        if not pc.any(mask).as_py():
            return None
        return repr(column.filter(mask)[0].as_py())

    found = example(pc.and_(column.is_valid(), read.is_null()))
    if found:
        return f"stored values such as {found} would read as NULL"
    if b_root in _INTEGERS and a_root in _NUMERIC:
        wide = pa.decimal128(38, column.type.scale) if a_root == "DECIMAL" else \
            pa.float64() if a_root in _APPROX else pa.int64()
        found = example(pc.not_equal(read.cast(wide, safe=False), column.cast(wide)))
        if found:
            return f"stored values such as {found} would be truncated or wrapped where MySQL rounds or refuses"
    if b_root == "FLOAT":
        found = example(pc.and_(pc.is_inf(read), pc.invert(pc.is_inf(column.cast(pa.float64())))))
        if found:
            return f"stored values such as {found} are beyond FLOAT's range"
    if b_root == "DECIMAL" and a_root != "DECIMAL":
        source = column.cast(pa.float64(), safe=False)
        found = example(pc.greater_equal(pc.abs(source), float(10 ** (b_len - b_scale))))
        if found:
            return f"stored values such as {found} do not fit DECIMAL({b_len}, {b_scale})"
    if b_root in _TEXT and b_len != _MAX:
        found = example(pc.greater(pc.utf8_length(read), b_len))
        if found:
            return f"stored values such as {found} are longer than {b_len} characters"
        if b_root == "CHAR" and a_root != "CHAR":
            found = example(pc.match_substring_regex(read, r" $"))
            if found:
                return f"stored values such as {found} end with spaces, which MySQL's CHAR drops"
    if b_root in _BYTES and b_len != _MAX:
        lengths = pc.binary_length(read)
        found = example(pc.not_equal(lengths, b_len) if b_root == "BINARY" else pc.greater(lengths, b_len))
        if found:
            return (f"stored values such as {found} are not {b_len} bytes long (MySQL pads BINARY({b_len}) with zero "
                    "bytes)" if b_root == "BINARY" else f"stored values such as {found} are longer than {b_len} bytes")
    if a_root in _TIMESTAMPS and b_root in (*_TIMESTAMPS, "TIME", "DATE"):
        micros = column.cast(pa.timestamp("us", tz=column.type.tz), safe=False).cast(pa.int64())
        if b_root == "DATE":  # MySQL rounds the fraction first: 23:59:59.5 becomes the next day
            of_day = column.cast(pa.timestamp("us")).cast(pa.time64("us")).cast(pa.int64())
            found = example(pc.greater_equal(of_day, 86_399_500_000))
        else:
            unit = 10 ** (6 - min(b_len, 6))
            found = example(pc.not_equal(pc.multiply(pc.divide(micros, unit), unit), micros))
        if found:
            return f"stored values such as {found} have fractional seconds MySQL rounds and the readers truncate"
    return None
