"""Schema changes of Paimon tables, as Flink CDC's PaimonMetadataApplier makes them (flink-cdc-semantics.md §6.3):
add column at a position (skipped when the column exists), drop column (skipped when missing), rename column, alter
column type (with its comment), make a column nullable, table comment. Truncate and drop table are PaimonSink
methods.

Only type changes that every Paimon reader lakecdc supports reads back exactly (pypaimon and pypaimon-rust read
older data files in the new type) are applied: widening within a family, integers into wider decimals, DOUBLE or
STRING, longer strings and binaries, finer timestamps. Others raise UnsupportedSchemaChange, which the
``try_evolve`` behaviour tolerates. Every change is idempotent, so a run that replays a DDL after a crash
converges to the same schema.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import pyarrow as pa

from lakecdc.errors import SinkError
from lakecdc.model import DEFAULT_KEY, BinlogOffset, TableId

log = logging.getLogger(__name__)

ADD, DROP, RENAME, ALTER_TYPE, NULLABLE, COMMENT = "add", "drop", "rename", "alter-type", "nullable", "comment"


class UnsupportedSchemaChange(SinkError):
    """A schema change Paimon readers could not read back; ``try_evolve`` skips it, other modes fail."""


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

    def describe(self) -> str:
        if self.kind == ADD:
            return f"add column {self.name} {self.field.type} {' '.join(self.position).strip()}"
        if self.kind == RENAME:
            return f"rename column {self.name} to {self.new_name}"
        if self.kind == ALTER_TYPE:
            return f"alter column {self.name} type {self.field.type}"
        if self.kind == NULLABLE:
            return f"make column {self.name} nullable"
        if self.kind == COMMENT:
            return f"table comment {self.comment!r}"
        return f"drop column {self.name}"


def paimon_type(table_id: TableId, field: pa.Field):
    """The pypaimon DataType a column is stored with (as at table creation: unsigned widening, TIME(p),
    TIMESTAMP(p), CHAR/VARCHAR(n), BINARY/VARBINARY(n))."""
    from pypaimon.schema.data_types import AtomicType, PyarrowFieldParser

    from lakecdc.sink.tables import _TIME_PRECISION, declared_type, paimon_arrow_type

    arrow_type = paimon_arrow_type(table_id, field.name, field.type)
    data_type = PyarrowFieldParser.to_paimon_type(arrow_type, field.nullable)
    sized = declared_type(field)
    if sized is not None:
        return AtomicType(sized, field.nullable)
    if pa.types.is_time(arrow_type):
        return AtomicType(f"TIME({_TIME_PRECISION[arrow_type.unit]})", field.nullable)
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
    for a type change readers could not read back (nothing of that change is applied; with
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
            schema_changes = _schema_changes(table_id, change, description, types, SchemaChange)
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


def _schema_changes(table_id: TableId, change: ColumnChange, description, types: dict[str, str], SchemaChange):
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
        field = change.field.with_nullable(True) if not change.field.nullable else change.field
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
                           SchemaChange)
    raise SinkError(f"table {table_id}: unknown schema change {change.kind!r}")


def _alter_type(table_id: TableId, change: ColumnChange, types: dict[str, str], keys: set[str],
                stored_comment: str | None, SchemaChange):
    if change.name not in types:
        raise SinkError(f"table {table_id}: cannot change the type of column {change.name!r}: no such column")
    old = types[change.name]
    nullable = "NOT NULL" not in old.upper()
    new_type = paimon_type(table_id, change.field.with_nullable(nullable))
    out = []
    if _base(str(new_type)) != _base(old):
        if change.name in keys:
            raise SinkError(f"table {table_id}: cannot change the type of column {change.name!r} from {old} to "
                            f"{new_type}: it is a primary-key or partition column of the Paimon table (Paimon "
                            "refuses)")
        if not readable_type_change(old, str(new_type)):
            raise UnsupportedSchemaChange(
                f"table {table_id}: column {change.name!r} cannot change from {_base(old)} to {_base(str(new_type))}: "
                "Paimon readers could not read the existing data files in the new type exactly (only widening "
                "changes are applied: see docs/schema-changes.md). Use schema.change.behavior try_evolve to keep "
                "the old type, or re-create the table")
        out.append(SchemaChange.update_column_type(change.name, new_type))
    if change.field.nullable and not nullable and change.name not in keys:
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


def readable_type_change(old: str, new: str) -> bool:
    """True when Paimon readers read data written as ``old`` exactly as ``new`` (tests/test_schema_changes.py
    checks each allowed pair with pypaimon and pypaimon-rust)."""
    a_root, a_len, a_scale = _parse(old)
    b_root, b_len, b_scale = _parse(new)
    if (a_root, a_len, a_scale) == (b_root, b_len, b_scale):
        return True
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
    if a_root in ("CHAR", "VARCHAR") and b_root in ("CHAR", "VARCHAR"):
        return b_len >= a_len and not (a_root == "VARCHAR" and b_root == "CHAR")
    if a_root in ("BINARY", "VARBINARY") and b_root == "VARBINARY":
        return b_len >= a_len
    if a_root == b_root and a_root in ("TIMESTAMP", "TIMESTAMP_LTZ", "TIME"):
        return b_len >= a_len
    return False
