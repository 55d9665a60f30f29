"""Schema changes read from the binlog: DDL statements of captured tables parsed into Flink CDC's schema change
events (the events Flink CDC's MySQL source emits), and each event applied to the table's schema history.

Rows in the binlog must be decoded with the schema that was current when they were written, never with today's
``information_schema``, which already shows later DDL. The binlog reader therefore keeps each captured
table's schema as of the position it has read to, and changes it only here, when the DDL that changed the table
passes by. Statements are parsed with sqlglot (MySQL dialect); a statement on a captured table that cannot be
understood stops the read with an error naming it, rather than guessing a schema.
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass, field, replace

import sqlglot
from sqlglot import exp

from lakecdc.errors import SourceError
from lakecdc.model import (ADD_COLUMN, ALTER_COLUMN_TYPE, ALTER_TABLE_COMMENT, CREATE_TABLE, DROP_COLUMN, DROP_TABLE,
                           RENAME_COLUMN, TRUNCATE_TABLE, UNPARSED_DDL, OnlineSchemaChange, SourceColumn,
                           SourceTable, TableId)
from lakecdc.source.columns import decoding_layout
from lakecdc.source.options import MySqlSourceOptions
from lakecdc.source.types import source_column

log = logging.getLogger(__name__)

FIRST, AFTER, BEFORE, LAST = "FIRST", "AFTER", "BEFORE", "LAST"


@dataclass(frozen=True)
class ColumnPosition:
    kind: str = LAST  # FIRST, AFTER, BEFORE or LAST
    reference: str = ""  # AFTER / BEFORE: the existing column

    def __str__(self) -> str:
        return f"{self.kind} {self.reference}".strip()


@dataclass(frozen=True)
class SchemaChangeEvent:
    """One schema change of one table (the payload fields used depend on ``type``)."""

    type: str
    table_id: TableId
    columns: tuple[tuple[SourceColumn, ColumnPosition], ...] = ()  # add.column (and create.table: the new table)
    names: tuple[str, ...] = ()  # drop.column
    renames: tuple[tuple[str, str], ...] = ()  # rename.column: (old, new)
    column: SourceColumn | None = None  # alter.column.type: the new definition (type, comment)
    comment: str = ""  # alter.table.comment
    table: SourceTable | None = None  # create.table
    detail: str = ""  # unparsed.ddl: why lakecdc cannot follow the statement and what to do (empty: generic)

    @property
    def altered(self) -> SourceColumn:
        """The new definition of an alter.column.type event's column (every such event has one)."""
        if self.column is None:
            raise ValueError(f"{self.type} event has no column definition")
        return self.column

    def describe(self) -> str:
        if self.type == ADD_COLUMN:
            return "add column " + ", ".join(f"{c.name} {c.column_type} {p}" for c, p in self.columns)
        if self.type == DROP_COLUMN:
            return "drop column " + ", ".join(self.names)
        if self.type == RENAME_COLUMN:
            return "rename column " + ", ".join(f"{a} to {b}" for a, b in self.renames)
        if self.type == ALTER_COLUMN_TYPE:
            return f"alter column {self.altered.name} type {self.altered.column_type}"
        if self.type == ALTER_TABLE_COMMENT:
            return f"alter table comment {self.comment!r}"
        if self.type == UNPARSED_DDL:
            return self.detail or "a statement lakecdc cannot interpret"
        return self.type.replace(".", " ")


@dataclass
class ParsedDdl:
    """What one DDL statement does to the captured tables."""

    events: list[SchemaChangeEvent] = field(default_factory=list)
    schemas: dict[TableId, SourceTable | None] = field(default_factory=dict)  # table → schema after (None: gone)
    # table → what to show as the statement that changed it, when not the statement itself (the cut-over of an
    # online schema change shows the ALTER statements run on the shadow table)
    statements: dict[TableId, str] = field(default_factory=dict)


_GEOMETRY_SUBTYPES = re.compile(
    r"(?i)(\s)(multipoint|multilinestring|multipolygon|geometrycollection|geomcollection|linestring|polygon|point)"
    r"(?=\s*(?:,|\)|$|not\b|null\b|default\b|comment\b|first\b|after\b|srid\b|invisible\b))")
_ADD_LIST = re.compile(r"(?is)\badd\s+(?:column\s+)?\(")


def parse_ddl(statement: str, default_database: str, tables: dict[TableId, SourceTable],
              options: MySqlSourceOptions) -> ParsedDdl:
    """The events ``statement`` (run with ``default_database`` as the current database) causes on ``tables``
    (the captured tables' current schemas), and their schemas afterwards. Statements on other tables give no
    events. An ALTER TABLE / CREATE / DROP / TRUNCATE of a captured table that lakecdc cannot interpret gives one
    UNPARSED_DDL event per table and leaves its schema as it was; SourceError when a statement contradicts the
    schema history (a column it names is not there)."""
    cleaned = _GEOMETRY_SUBTYPES.sub(r"\1geometry", statement.strip().rstrip(";"))
    head = cleaned[:40].upper()
    if not head.startswith(("ALTER", "CREATE", "DROP", "TRUNCATE", "RENAME")):
        return ParsedDdl()
    try:
        tree = sqlglot.parse_one(cleaned, read="mysql")
    except sqlglot.errors.ParseError:
        tree = None
    renames = _rename_pairs(cleaned, default_database)
    if renames and any(new in tables for _, new in renames):
        return _renamed_onto_captured(renames, statement, tables, options)
    if options.parse_online_schema_changes:
        online = _shadow_table_ddl(cleaned, tree, statement, default_database, tables, options)
        if online is not None:
            return online
    parsed = ParsedDdl()
    if isinstance(tree, exp.Alter) and (tree.args.get("kind") or "").upper() == "TABLE":
        table_id = _table_id(tree.this, default_database)
        if table_id in tables:
            try:
                _alter_table(tree, tables[table_id], options, parsed)
            except _Unrecognised:
                return _unparsed([table_id], tables)
        return parsed
    if isinstance(tree, exp.TruncateTable):
        for t in tree.expressions:
            table_id = _table_id(t, default_database)
            if table_id in tables:
                parsed.events.append(SchemaChangeEvent(TRUNCATE_TABLE, table_id))
                parsed.schemas[table_id] = tables[table_id]
        return parsed
    if isinstance(tree, exp.Drop) and (tree.args.get("kind") or "").upper() == "TABLE":
        for t in tree.args.get("tables") or []:
            table_id = _table_id(t, default_database)
            if table_id in tables:
                parsed.events.append(SchemaChangeEvent(DROP_TABLE, table_id))
                parsed.schemas[table_id] = None
            elif (original := _migrated_by(table_id, tables)) is not None and original not in parsed.schemas \
                    and (pending := tables[original].online_change) is not None and pending.shadow == table_id.table:
                # the shadow table of an online schema change is dropped: the migration was given up
                log.warning("%s: the online schema change through %s ended without its cut-over (%r)", original,
                            table_id, statement[:200])
                parsed.schemas[original] = replace(tables[original], online_change=None)
        return parsed
    if isinstance(tree, exp.Create) and (tree.args.get("kind") or "").upper() == "TABLE":
        schema = tree.this
        target = schema.this if isinstance(schema, exp.Schema) else schema
        table_id = _table_id(target, default_database)
        if table_id not in tables:
            return parsed
        if isinstance(schema, exp.Schema):
            created = _create_table(table_id, schema, tree, options)
        else:
            created = _create_like(table_id, tree, default_database, tables, statement)
        parsed.events.append(SchemaChangeEvent(CREATE_TABLE, table_id, table=created))
        parsed.schemas[table_id] = created
        return parsed
    # Statements sqlglot leaves as a raw command or cannot parse: look for captured table names in them
    mentioned = [t for t in tables if mentions_table(statement, t, default_database)]
    if not mentioned:
        return parsed
    if head.startswith("RENAME") or re.search(r"(?is)^\s*alter\s+table\s+\S+\s+rename\s+(to|as)\b", cleaned):
        # Harmless to the data captured under the name (tests/test_source_nothing_skipped.py): every row written
        # under it before the rename is read; afterwards no row event carries the name until a CREATE TABLE of it,
        # which is followed as create.table. Flink CDC emits no event either; the warning says where rows went.
        for table_id in mentioned:
            log.warning("%s was renamed by %r: its rows are no longer captured under this name (Flink CDC emits no "
                        "event for RENAME TABLE either)", table_id, statement[:200])
        return parsed
    if _ADD_LIST.search(cleaned) and head.startswith("ALTER"):
        return _add_column_list(cleaned, default_database, tables, options)
    if head.startswith("ALTER") and _PARTITION_ROWS_GONE.search(cleaned):
        raise SourceError(
            f"{statement[:300]!r} on {', '.join(map(str, mentioned))} removes or swaps rows without writing row "
            "events to the binlog (DROP / TRUNCATE / EXCHANGE PARTITION), so lakecdc cannot capture the change. "
            "Re-snapshot the table (lakecdc resnapshot PIPELINE.yaml DB.TABLE, or the Dagster re-snapshot job)")
    if head.startswith("ALTER") and _PARTITION_MAINTENANCE.search(cleaned):
        return parsed  # partitions are laid out anew: the rows and columns stay as they are
    convert = _CONVERT_CHARSET.match(cleaned)
    if convert and head.startswith("ALTER"):
        return _convert_charset(convert, default_database, tables)
    if head.startswith(("ALTER", "TRUNCATE", "DROP TABLE", "CREATE TABLE")):
        return _unparsed(mentioned, tables)
    return parsed


_ALTER_TABLE = r"(?is)^\s*alter\s+(?:online\s+|ignore\s+)*table\s+\S+\s+"
_PARTITION_ROWS_GONE = re.compile(_ALTER_TABLE + r"(?:.*,\s*)?(?:drop|truncate|exchange)\s+partition\b")
_PARTITION_MAINTENANCE = re.compile(
    _ALTER_TABLE + r"(?:add|reorganize|coalesce|analyze|check|optimize|rebuild|repair)\s+partition\b"
    r"|" + _ALTER_TABLE[5:] + r"(?:remove\s+partitioning|partition\s+by)\b")


class _Unrecognised(Exception):
    """An ALTER TABLE action lakecdc does not model (it might change columns)."""


def _unparsed(table_ids: list[TableId], tables: dict[TableId, SourceTable]) -> ParsedDdl:
    parsed = ParsedDdl()
    for table_id in table_ids:
        parsed.events.append(SchemaChangeEvent(UNPARSED_DDL, table_id))
        parsed.schemas[table_id] = tables[table_id]
    return parsed


_CONVERT_CHARSET = re.compile(
    r"(?is)^\s*alter\s+(?:online\s+|ignore\s+)*table\s+(\S+)\s+convert\s+to\s+(?:character\s+set|charset)\s*=?\s*"
    r"[`'\"]?(\w+)[`'\"]?(?:\s+collate\s*=?\s*[`'\"]?(\w+)[`'\"]?)?\s*$")
_CHARACTER_DATA_TYPES = ("char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set")


def _convert_charset(match, default_database: str, tables: dict[TableId, SourceTable]) -> ParsedDdl:
    """``ALTER TABLE t CONVERT TO CHARACTER SET cs [COLLATE c]``: every character column is now in ``cs`` (which
    rows in the binlog are decoded with, whatever binlog_row_metadata logs). No Flink CDC event."""
    target = sqlglot.parse_one(f"SELECT * FROM {match.group(1)}", read="mysql").find(exp.Table)
    table_id = _table_id(target, default_database)
    parsed = ParsedDdl()
    if table_id not in tables:
        return parsed
    charset, collation = match.group(2).lower(), (match.group(3) or "").lower()
    if charset == "binary":
        return _unparsed([table_id], tables)  # text columns become binary ones: a type change lakecdc does not model
    table = tables[table_id]
    columns = tuple(replace(c, charset=charset, collation=collation)
                    if c.column_type.lower().split("(")[0].split()[0] in _CHARACTER_DATA_TYPES else c
                    for c in table.columns)
    parsed.schemas[table_id] = replace(table, columns=columns)
    return parsed


def apply_events(table: SourceTable, events: list[SchemaChangeEvent]) -> SourceTable:
    """``table`` after ``events`` (which all concern it)."""
    for event in events:
        table = _apply(table, event)
    return table


# ----------------------------------------------------------------------------------------------- RENAME TABLE

_TABLE_NAME = r"(?:`[^`]+`|[\w$]+)(?:\s*\.\s*(?:`[^`]+`|[\w$]+))?"
_RENAME_PAIR = re.compile(rf"\s*({_TABLE_NAME})\s+to\s+({_TABLE_NAME})\s*(?:,|$)", re.IGNORECASE)
_RENAME_TABLE = re.compile(r"(?is)^\s*rename\s+tables?\s+")
_ALTER_RENAME = re.compile(rf"(?is)^\s*alter\s+(?:online\s+|ignore\s+)*table\s+({_TABLE_NAME})\s+rename\s+"
                           rf"(?:to\s+|as\s+)?({_TABLE_NAME})\s*$")
_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)


def _name_id(name: str, default_database: str) -> TableId:
    parts = [p.strip().strip("`") for p in re.findall(r"`[^`]+`|[^.\s`]+", name)]
    return TableId(parts[0], parts[1]) if len(parts) == 2 else TableId(default_database, parts[0])


def _rename_pairs(statement: str, default_database: str) -> list[tuple[TableId, TableId]] | None:
    """(old name, new name) of each rename of ``RENAME TABLE a TO b, c TO d`` or ``ALTER TABLE a RENAME TO b``, in
    the order MySQL applies them; None for any other statement (or one that cannot be read)."""
    text = _COMMENT.sub(" ", statement).strip()
    alter = _ALTER_RENAME.match(text)
    if alter:
        return [(_name_id(alter.group(1), default_database), _name_id(alter.group(2), default_database))]
    head = _RENAME_TABLE.match(text)
    if not head:
        return None
    pairs, rest = [], text[head.end():]
    while rest.strip():
        match = _RENAME_PAIR.match(rest)
        if not match:
            return None
        pairs.append((_name_id(match.group(1), default_database), _name_id(match.group(2), default_database)))
        rest = rest[match.end():]
    return pairs or None


def _renamed_onto_captured(renames: list[tuple[TableId, TableId]], statement: str,
                           tables: dict[TableId, SourceTable], options: MySqlSourceOptions) -> ParsedDdl:
    """A RENAME that puts another table in place of a captured one. With scan.parse.online.schema.changes.enabled
    and the captured table's shadow table (its migration followed since the ALTER on the shadow) that is the
    cut-over of a gh-ost / pt-online-schema-change migration: the ALTER statements run on the shadow table become
    the table's schema change here, where its rows start to have the new schema. Any other table put in place of a
    captured one has a schema lakecdc did not follow: one UNPARSED_DDL event, which stops the run unless the
    schema.change.behavior tolerates it (lakecdc.runtime.schema_evolution)."""
    parsed = ParsedDdl()
    arriving = {new for _, new in renames if new in tables}
    for old, new in renames:
        if old in tables and old not in arriving:
            log.warning("%s was renamed by %r: its rows are no longer captured under this name (Flink CDC emits no "
                        "event for RENAME TABLE either)", old, statement[:200])
        if new not in tables or new in parsed.schemas:
            continue
        table = tables[new]
        online = table.online_change
        if options.parse_online_schema_changes and online is not None and old == TableId(new.database, online.shadow):
            events, after = _swap_in(table, options)
            parsed.events += events
            parsed.schemas[new] = after
            parsed.statements[new] = "; ".join(sql for _, sql in online.statements) + f"; {statement}"
            log.info("%s: cut-over of the online schema change through %s (%r)", new, old, statement[:200])
            continue
        parsed.events.append(SchemaChangeEvent(UNPARSED_DDL, new, detail=_foreign_table_detail(old, new, options)))
        parsed.schemas[new] = replace(table, online_change=None)
    return parsed


def _foreign_table_detail(old: TableId, new: TableId, options: MySqlSourceOptions) -> str:
    what = f"RENAME TABLE puts {old} in place of the captured table {new}, whose schema lakecdc did not follow"
    if _shadow_original(old) != new:
        return f"{what}: re-snapshot {new}"
    if not options.parse_online_schema_changes:
        return (f"{what}: this is the cut-over of a gh-ost / pt-online-schema-change migration. Set "
                "source.scan.parse.online.schema.changes.enabled: true to follow such migrations (it must be set "
                f"before the ALTER on the shadow table is read); for this one, re-snapshot {new}")
    return (f"{what}: the ALTER on the shadow table of this gh-ost / pt-online-schema-change migration was not read "
            f"(it ran before the table's checkpoint or snapshot); re-snapshot {new}")


# ----------------------------------------------------------------------------------------------- online schema changes

# gh-ost's ghost table _t_gho and pt-online-schema-change's new table _t_new (Flink CDC's pattern); their other
# tables (gh-ost's changelog _t_ghc and _t_del, pt-osc's _t_old) are never the table's future schema
_SHADOW_TABLE = re.compile(r"^_(.+)_(gho|new)$")
_TOOL_TABLE = re.compile(r"^_(.+)_(gho|ghc|del|new|old)$")  # every table of either tool
_SHADOW_TARGET = re.compile(rf"(?is)^\s*(?:alter\s+(?:online\s+|ignore\s+)*|create\s+)table\s+(?:if\s+not\s+exists\s+)?"
                            rf"({_TABLE_NAME})")


def online_tool_table_of(table_id: TableId) -> TableId | None:
    """The table whose migration ``table_id`` would serve by the tools' naming: gh-ost's ghost, changelog and
    cut-over tables ``_t_gho``, ``_t_ghc``, ``_t_del``, pt-online-schema-change's ``_t_new`` and ``_t_old``."""
    match = _TOOL_TABLE.match(table_id.table)
    return TableId(table_id.database, match.group(1)) if match else None


def _shadow_original(table_id: TableId) -> TableId | None:
    """The table whose shadow table ``table_id`` is by the tools' naming (``_t_gho`` → ``t``), else None."""
    match = _SHADOW_TABLE.match(table_id.table)
    return TableId(table_id.database, match.group(1)) if match else None


def _migrated_by(table_id: TableId, tables: dict[TableId, SourceTable]) -> TableId | None:
    """The captured table (one of ``tables``) whose shadow table ``table_id`` is; None when it is none."""
    original = _shadow_original(table_id)
    return original if original in tables else None


def _shadow_table_ddl(cleaned: str, tree, statement: str, default_database: str, tables: dict[TableId, SourceTable],
                      options: MySqlSourceOptions) -> ParsedDdl | None:
    """CREATE TABLE or ALTER TABLE of the shadow table of a captured table ``t`` (scan.parse.online.schema.changes
    .enabled): the migration is recorded in ``t``'s schema history (SourceTable.online_change), which changes
    nothing else until the cut-over (:func:`_renamed_onto_captured`); None for any other statement. Each ALTER is
    checked against the shadow table's schema at once, so a statement that contradicts it stops the run here."""
    target = _SHADOW_TARGET.match(_COMMENT.sub(" ", cleaned).strip())
    if target is None:
        return None
    shadow = _name_id(target.group(1), default_database)
    original = _migrated_by(shadow, tables)
    if original is None:
        return None
    table = tables[original]
    if cleaned.lstrip()[:6].upper() == "CREATE":
        if not _created_like(tree, original, table, default_database, options):
            # the shadow table does not start as a copy of the table: its schema is not the table's plus the ALTERs
            log.warning("%s: %r does not create %s as a copy of it; its cut-over will not be followed", original,
                        statement[:200], shadow)
            return ParsedDdl(schemas={original: replace(table, online_change=None)})
        log.info("%s: online schema change through %s started (%r)", original, shadow, statement[:200])
        return ParsedDdl(schemas={original: replace(table, online_change=OnlineSchemaChange(shadow.table))})
    online = table.online_change
    if online is None or online.shadow != shadow.table:
        # the CREATE ran before the table's checkpoint: the tools create the shadow table as a copy of the table
        online = OnlineSchemaChange(shadow.table)
    online = replace(online, statements=online.statements + ((default_database, statement),))
    events, _ = _swap_in(replace(table, online_change=online), options)
    log.info("%s: online schema change through %s: %s", original, shadow,
             "; ".join(e.describe() for e in events) or "(no column change)")
    return ParsedDdl(schemas={original: replace(table, online_change=online)})


def _created_like(tree, original: TableId, table: SourceTable, default_database: str,
                  options: MySqlSourceOptions) -> bool:
    """Whether a CREATE TABLE of a shadow table makes it a copy of ``table``: ``LIKE`` the table (gh-ost), or the
    table's own columns spelled out (pt-online-schema-change copies SHOW CREATE TABLE)."""
    if not isinstance(tree, exp.Create):
        return False
    schema = tree.this
    if not isinstance(schema, exp.Schema):
        like = tree.find(exp.LikeProperty)
        return like is not None and _table_id(like.this, default_database) == original
    created = _create_table(original, schema, tree, options)
    # what decoding depends on, but the character set: a column's set is spelled out only where it differs from
    # the table's default, which the history does not keep
    return [layout[:-1] for layout in decoding_layout(created)] == [layout[:-1] for layout in decoding_layout(table)]


def _swap_in(table: SourceTable, options: MySqlSourceOptions) -> tuple[list[SchemaChangeEvent], SourceTable]:
    """The events of the ALTER statements run on ``table``'s shadow table (as events of ``table``) and the table's
    schema after them, without the migration. A statement lakecdc cannot interpret gives one UNPARSED_DDL event
    and the schema as it was (the ALTERs are then not applied at all)."""
    online = table.online_change
    if online is None:
        raise ValueError(f"{table.table_id} has no online schema change in progress")
    shadow_id = TableId(table.table_id.database, online.shadow)
    current = SourceTable(shadow_id, table.columns, table.primary_keys, table.comment)
    events: list[SchemaChangeEvent] = []
    for database, statement in online.statements:
        parsed = parse_ddl(statement, database, {shadow_id: current}, options)
        if any(e.type == UNPARSED_DDL for e in parsed.events):
            detail = (f"cannot interpret {statement[:300]!r}, run on {shadow_id}, the shadow table of an online "
                      f"schema change of {table.table_id}")
            return ([SchemaChangeEvent(UNPARSED_DDL, table.table_id, detail=detail)],
                    replace(table, online_change=None))
        events += [replace(e, table_id=table.table_id) for e in parsed.events]
        after = parsed.schemas.get(shadow_id, current)
        current = after if after is not None else current
    return events, SourceTable(table.table_id, current.columns, current.primary_keys, current.comment)


# ----------------------------------------------------------------------------------------------- ALTER TABLE


def _alter_table(tree, table: SourceTable, options: MySqlSourceOptions, parsed: ParsedDdl) -> None:
    table_id = table.table_id
    events: list[SchemaChangeEvent] = []
    current = table
    for action in tree.args.get("actions") or []:
        new_events = _action_events(action, current, options)
        for event in new_events:
            current = _apply(current, event)
        events += new_events
    for option in tree.args.get("options") or []:
        if isinstance(option, exp.SchemaCommentProperty) and options.include_comments:
            event = SchemaChangeEvent(ALTER_TABLE_COMMENT, table_id, comment=_literal(option.this))
            current = _apply(current, event)
            events.append(event)
    # MODIFY/CHANGE ... FIRST/AFTER move columns without an event (as in Flink CDC); the schema still follows
    current = _moved(current, tree, options)
    parsed.events += events
    parsed.schemas[table_id] = current


def _action_events(action, table: SourceTable, options: MySqlSourceOptions) -> list[SchemaChangeEvent]:
    table_id = table.table_id
    if isinstance(action, exp.ColumnDef):  # ADD [COLUMN] c type [FIRST | AFTER x]
        column = _column(table_id, action, options, table)
        if column.name in table.column_names:
            return []  # redundant: already in the schema (ADD COLUMN IF NOT EXISTS, or a replay)
        return [SchemaChangeEvent(ADD_COLUMN, table_id, columns=((column, _position(action)),))]
    if isinstance(action, exp.ModifyColumn):  # MODIFY c type / CHANGE a b type
        definition = action.this
        old_name = action.args.get("rename_from")
        old_name = old_name.name if old_name is not None else definition.name
        existing = _find(table, old_name)
        column = _column(table_id, definition, options, table, existing)
        events = []
        if _definition(column) != _definition(existing):
            events.append(SchemaChangeEvent(ALTER_COLUMN_TYPE, table_id,
                                            column=replace(column, name=existing.name)))
        if column.name != existing.name:  # (Flink CDC ignores a change of letter case; rows carry the new name)
            events.append(SchemaChangeEvent(RENAME_COLUMN, table_id, renames=((existing.name, column.name),)))
        return events
    if isinstance(action, exp.RenameColumn):
        old, new = action.this.name, action.args["to"].name
        _find(table, old)
        return [SchemaChangeEvent(RENAME_COLUMN, table_id, renames=((old, new),))]
    if isinstance(action, exp.Drop) and (action.args.get("kind") or "").upper() == "COLUMN":
        names = [c.name for c in action.args.get("tables") or []]
        names = [_find(table, n).name for n in names if _has(table, n) or not action.args.get("exists")]
        return [SchemaChangeEvent(DROP_COLUMN, table_id, names=tuple(names))] if names else []
    if isinstance(action, exp.AlterColumn):  # SET/DROP DEFAULT, VISIBLE...: the type stays
        existing = _find(table, action.this.name)
        if "default" in action.args or action.args.get("drop"):
            default = None if action.args.get("drop") else _default_text(action.args.get("default"))
            return [SchemaChangeEvent(ALTER_COLUMN_TYPE, table_id, column=replace(existing, default=default))] \
                if default != existing.default else []
        return []
    if isinstance(action, exp.AlterRename):  # ALTER TABLE ... RENAME TO: as RENAME TABLE in parse_ddl
        log.warning("%s is renamed: its rows are no longer captured under this name", table_id)
        return []
    if isinstance(action, _key_actions()) or (isinstance(action, exp.Drop) and (action.args.get("kind") or "").upper()
                                             in ("INDEX", "KEY", "FOREIGN KEY", "CHECK", "CONSTRAINT")):
        return []  # indexes, keys (the key change is read in _moved), constraints: no event, rows unchanged
    raise _Unrecognised(type(action).__name__)


@functools.cache
def _key_actions() -> tuple:
    """ALTER TABLE actions that change indexes, keys or constraints only (the rows keep their columns)."""
    return tuple(getattr(exp, name) for name in ("AddConstraint", "DropPrimaryKey", "RenameIndex", "AlterIndex",
                                                 "ForceProperty") if hasattr(exp, name))



def _definition(column: SourceColumn) -> tuple:
    """What an AlterColumnType event changes (information_schema spells ``int(11)`` what a DDL spells ``int``)."""
    return column.arrow_type, column.declared_type, column.nullable, column.comment, column.default


def _moved(table: SourceTable, tree, options: MySqlSourceOptions) -> SourceTable:
    columns = list(table.columns)
    for action in tree.args.get("actions") or []:
        if not isinstance(action, exp.ModifyColumn):
            continue
        position = action.this.args.get("position")
        if position is None:
            continue
        name = action.this.name
        moving = next((c for c in columns if c.name == name), None)
        if moving is None:
            continue
        columns.remove(moving)
        _insert(columns, moving, _position(action.this))
    primary = _primary_key(tree)
    return replace(table, columns=tuple(columns), primary_keys=primary if primary is not None else table.primary_keys)


def _primary_key(tree) -> tuple[str, ...] | None:
    """The key after ADD PRIMARY KEY (...) / DROP PRIMARY KEY, or None when the statement keeps it."""
    key = None
    for action in tree.args.get("actions") or []:
        if isinstance(action, exp.Drop) and "PRIMARY" in action.sql("mysql").upper():
            key = ()
        if isinstance(action, exp.AddConstraint):
            for constraint in action.expressions:
                if isinstance(constraint, exp.PrimaryKey) or "PRIMARY KEY" in constraint.sql("mysql").upper():
                    key = tuple(c.name for c in constraint.find_all(exp.Column)) or tuple(
                        i.name for i in constraint.find_all(exp.Identifier))
    return key


def _add_column_list(statement: str, default_database: str, tables: dict[TableId, SourceTable],
                     options: MySqlSourceOptions) -> ParsedDdl:
    """``ALTER TABLE t ADD [COLUMN] (a ..., b ...)``, which sqlglot does not parse: the list is parsed as the body
    of a CREATE TABLE. One AddColumn event with every column, LAST (as Flink CDC emits it)."""
    match = re.match(r"(?is)\s*alter\s+(?:online\s+|ignore\s+)*table\s+(\S+)\s+add\s+(?:column\s+)?\((.*)\)\s*$",
                     statement)
    if not match:
        raise SourceError(f"cannot interpret the DDL statement {statement[:300]!r}: lakecdc stops rather than "
                          "guess the table's new schema")
    target = sqlglot.parse_one(f"SELECT * FROM {match.group(1)}", read="mysql").find(exp.Table)
    table_id = _table_id(target, default_database)
    parsed = ParsedDdl()
    if table_id not in tables:
        return parsed
    body = sqlglot.parse_one(f"CREATE TABLE x ({match.group(2)})", read="mysql")
    table = tables[table_id]
    added = [(_column(table_id, d, options, table), ColumnPosition()) for d in body.this.expressions
             if isinstance(d, exp.ColumnDef)]
    added = [(c, p) for c, p in added if c.name not in table.column_names]
    if added:
        event = SchemaChangeEvent(ADD_COLUMN, table_id, columns=tuple(added))
        parsed.events.append(event)
        table = _apply(table, event)
    parsed.schemas[table_id] = table
    return parsed


# ----------------------------------------------------------------------------------------------- CREATE TABLE


def _create_table(table_id: TableId, schema, tree, options: MySqlSourceOptions) -> SourceTable:
    empty = SourceTable(table_id, ())
    columns = [_column(table_id, d, options, empty) for d in schema.expressions if isinstance(d, exp.ColumnDef)]
    keys: tuple[str, ...] = ()
    for item in schema.expressions:
        if isinstance(item, exp.PrimaryKey):
            keys = tuple(_name(e) for e in item.expressions)
    for d in schema.expressions:
        if isinstance(d, exp.ColumnDef) and any(isinstance(c.kind, exp.PrimaryKeyColumnConstraint)
                                                for c in d.args.get("constraints") or []):
            keys = (d.name,)
    columns = [replace(c, nullable=False) if c.name in keys else c for c in columns]
    comment = ""
    for prop in (tree.args.get("properties").expressions if tree.args.get("properties") else []):
        if isinstance(prop, exp.SchemaCommentProperty) and options.include_comments:
            comment = _literal(prop.this)
    return SourceTable(table_id, tuple(columns), keys, comment)


def _create_like(table_id: TableId, tree, default_database: str, tables: dict[TableId, SourceTable],
                 statement: str) -> SourceTable:
    """``CREATE TABLE t LIKE s``: the schema of ``s``, known only when ``s`` is captured too."""
    like = tree.find(exp.LikeProperty)
    origin = _table_id(like.this, default_database) if like is not None else None
    if origin is None or origin not in tables:
        raise SourceError(f"cannot follow {statement[:300]!r}: the schema of {origin or 'its source table'} is not "
                          f"captured, so the new schema of {table_id} is unknown. Re-snapshot {table_id} (remove its "
                          "Paimon table) or exclude it")
    return SourceTable(table_id, tables[origin].columns, tables[origin].primary_keys, tables[origin].comment)


# ----------------------------------------------------------------------------------------------- columns


_UNSIGNED_PREFIX = {"UINT": "int", "UBIGINT": "bigint", "UMEDIUMINT": "mediumint", "USMALLINT": "smallint",
                    "UTINYINT": "tinyint", "UDECIMAL": "decimal", "UDOUBLE": "double", "UFLOAT": "float"}
_DATA_TYPES = {"TIMESTAMPTZ": "timestamp", "TIMESTAMPLTZ": "timestamp", "NVARCHAR": "varchar", "NCHAR": "char",
               "BOOLEAN": "tinyint", "SERIAL": "bigint"}


def _column(table_id: TableId, definition, options: MySqlSourceOptions, table: SourceTable,
            existing: SourceColumn | None = None) -> SourceColumn:
    """A column from a sqlglot ColumnDef: the MySQL type as information_schema would spell it."""
    kind = definition.args.get("kind")
    if kind is None:
        raise SourceError(f"{table_id}: column {definition.name!r} has no type in the DDL statement")
    dtype = kind.this.name
    constraints = definition.args.get("constraints") or []
    kinds = [c.kind for c in constraints]
    data_type = _UNSIGNED_PREFIX.get(dtype) or _DATA_TYPES.get(dtype) or dtype.lower()
    params = [e.sql("mysql") for e in kind.expressions]
    if dtype in ("BOOLEAN",):
        column_type = "tinyint(1)"
    elif dtype == "SERIAL":
        column_type = "bigint(20) unsigned"
    else:
        column_type = data_type + (f"({','.join(params)})" if params else "")
        if dtype in _UNSIGNED_PREFIX or "UNSIGNED" in kind.sql("mysql").upper():
            column_type += " unsigned"
    if any(isinstance(k, exp.ZeroFillColumnConstraint) for k in kinds):
        column_type += " zerofill" if "unsigned" in column_type else " unsigned zerofill"
    nullable = not any(isinstance(k, (exp.NotNullColumnConstraint, exp.PrimaryKeyColumnConstraint))
                       and not k.args.get("allow_null") for k in kinds)
    comment = next((_literal(k.this) for k in kinds if isinstance(k, exp.CommentColumnConstraint)), "")
    default = next((_default_text(k.this) for k in kinds if isinstance(k, exp.DefaultColumnConstraint)), None)
    charset = next((k.this.name for k in kinds if isinstance(k, exp.CharacterSetColumnConstraint)), "")
    collation = next((k.this.name for k in kinds if isinstance(k, exp.CollateColumnConstraint)), "")
    if not charset and data_type in _CHARACTER_TYPES:
        charset = existing.charset if existing is not None and existing.charset else _table_charset(table)
    precision = None
    if data_type in ("time", "datetime", "timestamp"):
        precision = int(params[0]) if params else 0
    return source_column(table_id, options, name=definition.name, data_type=data_type, column_type=column_type,
                         datetime_precision=precision, nullable=nullable, comment=comment, charset=charset,
                         collation=collation, default=default)


_CHARACTER_TYPES = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set"}


def _table_charset(table: SourceTable) -> str:
    """A new character column without CHARACTER SET takes the table's default, which the binlog does not carry:
    the charset of the table's other character columns is the best guess (the decoder uses the row events' own
    column charsets, so this only labels the column)."""
    return next((c.charset for c in table.columns if c.charset), "")


def _position(definition) -> ColumnPosition:
    position = definition.args.get("position")
    if position is None:
        return ColumnPosition()
    where = (position.args.get("position") or "").upper()
    if where == FIRST:
        return ColumnPosition(FIRST)
    if where == AFTER:
        return ColumnPosition(AFTER, _name(position.this))
    return ColumnPosition()


def _default_text(value) -> str | None:
    if value is None or isinstance(value, exp.Null):
        return None
    if isinstance(value, exp.Literal):
        return str(value.this)
    return value.sql("mysql")


def _literal(value) -> str:
    if isinstance(value, exp.Literal):
        return str(value.this)
    return value.sql("mysql") if value is not None else ""


def _name(node) -> str:
    if isinstance(node, exp.Ordered):
        node = node.this
    if isinstance(node, (exp.Column, exp.Identifier)):
        return node.name
    return node.sql("mysql").strip("`")


def _table_id(node, default_database: str) -> TableId:
    database = node.args.get("db")
    return TableId(database.name if database is not None else default_database, node.name)


def mentions_table(statement: str, table_id: TableId, default_database: str) -> bool:
    """Whether SQL text names ``table_id``: qualified, or unqualified when ``default_database`` is its database
    (quoted or not, case-insensitively)."""
    text = statement.replace("`", "").lower()
    name = table_id.table.lower()
    qualified = f"{table_id.database.lower()}.{name}"
    if qualified in text:
        return True
    return table_id.database == default_database and re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", text) is not None


def _has(table: SourceTable, name: str) -> bool:
    return any(c.name.lower() == name.lower() for c in table.columns)


def _find(table: SourceTable, name: str) -> SourceColumn:
    for c in table.columns:
        if c.name.lower() == name.lower():  # MySQL column names are case-insensitive
            return c
    raise SourceError(f"DDL on {table.table_id} names column {name!r}, which its schema history does not have "
                      f"(columns: {', '.join(table.column_names)}); the history is out of step with the server: "
                      "re-snapshot the table")


def _insert(columns: list[SourceColumn], column: SourceColumn, position: ColumnPosition) -> None:
    if position.kind == FIRST:
        columns.insert(0, column)
        return
    if position.kind in (AFTER, BEFORE):
        index = next((i for i, c in enumerate(columns) if c.name.lower() == position.reference.lower()), None)
        if index is not None:
            columns.insert(index + 1 if position.kind == AFTER else index, column)
            return
    columns.append(column)


# ----------------------------------------------------------------------------------------------- applying


def _apply(table: SourceTable, event: SchemaChangeEvent) -> SourceTable:
    columns = list(table.columns)
    if event.type == ADD_COLUMN:
        for column, position in event.columns:
            _insert(columns, column, position)
    elif event.type == DROP_COLUMN:
        dropped = {n.lower() for n in event.names}
        columns = [c for c in columns if c.name.lower() not in dropped]
        keys = tuple(k for k in table.primary_keys if k.lower() not in dropped)
        return replace(table, columns=tuple(columns), primary_keys=keys)
    elif event.type == RENAME_COLUMN:
        renames = {a.lower(): b for a, b in event.renames}
        columns = [replace(c, name=renames.get(c.name.lower(), c.name)) for c in columns]
        keys = tuple(renames.get(k.lower(), k) for k in table.primary_keys)
        return replace(table, columns=tuple(columns), primary_keys=keys)
    elif event.type == ALTER_COLUMN_TYPE:
        altered = event.altered
        columns = [altered if c.name.lower() == altered.name.lower() else c for c in columns]
    elif event.type == ALTER_TABLE_COMMENT:
        return replace(table, comment=event.comment)
    elif event.type == CREATE_TABLE:
        if event.table is None:
            raise ValueError("create.table event without its table")
        return event.table
    return replace(table, columns=tuple(columns))


# ----------------------------------------------------------------------------------------------- statement-logged DML


_LOAD_DATA_TARGET = re.compile(r"(?is)\bINTO\s+TABLE\s+((?:`[^`]+`|[\w$]+)(?:\s*\.\s*(?:`[^`]+`|[\w$]+))?)")


def dml_target_tables(statement: str, default_database: str) -> set[TableId] | None:
    """The tables a statement-logged INSERT / REPLACE / UPDATE / DELETE / LOAD DATA writes (run with
    ``default_database`` as the current database); None when the statement cannot be parsed. UPDATE and DELETE
    count every table they name outside subqueries of their SET / WHERE (a multi-table statement may write any of
    them)."""
    cleaned = statement.strip().rstrip(";")
    head = cleaned[:16].upper()
    if head.startswith("LOAD DATA"):
        match = _LOAD_DATA_TARGET.search(cleaned)
        if not match:
            return None
        parts = [p.strip().strip("`") for p in match.group(1).split(".")]
        return {TableId(parts[0], parts[1]) if len(parts) == 2 else TableId(default_database, parts[0])}
    if head.startswith("REPLACE"):
        cleaned = "INSERT" + cleaned[len("REPLACE"):]
    try:
        tree = sqlglot.parse_one(cleaned, read="mysql")
    except sqlglot.errors.ParseError:
        return None
    if isinstance(tree, exp.Insert):
        target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
        return {_table_id(target, default_database)} if isinstance(target, exp.Table) else None
    if isinstance(tree, (exp.Update, exp.Delete)):
        nodes = [tree.this, *(tree.args.get("tables") or [])]
        using = tree.args.get("using")
        nodes += using if isinstance(using, list) else []
        found = {_table_id(t, default_database) for node in nodes if node is not None
                 for t in ([node] if isinstance(node, exp.Table) else []) + list(node.find_all(exp.Table))}
        return found or None
    return None
