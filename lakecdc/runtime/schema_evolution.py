"""Schema changes met in the binlog, applied to the Paimon tables as ``pipeline.schema.change.behavior`` says
(Flink CDC's schema change behaviours, its transform rules for schema changes and its PaimonMetadataApplier;
docs/schema-changes.md).

For each DDL of a captured table the micro-batch (lakecdc.runtime.micro_batch) calls
:meth:`SchemaChangeApplier.apply`, which

1. commits the rows its target tables received before the DDL, checkpointed at the end of the last transaction
   before it (data written before a DDL is committed under the old schema; the checkpoint never lands between a
   DDL and the rows that depend on it);
2. recompiles the table's transform against the new upstream schema;
3. turns the upstream events into sink events as the transform sees them (as Flink CDC does: through ``*`` only,
   AddColumn placed inside the ``*`` block), keeps the ones ``include.schema.changes`` /
   ``exclude.schema.changes`` select, then follows the behaviour: ``exception`` fails, ``ignore`` drops them,
   ``lenient`` rewrites them (adds become nullable and LAST, drops make the column nullable, renames add the new
   column), ``evolve`` applies them and ``try_evolve`` applies them but tolerates the type changes lakecdc refuses;
4. applies them to Paimon (idempotently, so a replay after a crash converges), truncates or drops the table;
5. coerces the table's rows from then on into the Paimon table's actual schema by column name (missing columns
   NULL, extra ones dropped), which is what ``ignore``, ``lenient`` and ``try_evolve`` need. The extra ones can
   only be upstream columns the behaviour keeps out: a run starts by refusing any other produced column the table
   lacks (lakecdc.runtime.micro_batch._check_existing_schema);
6. marks the target as having consumed a DDL, so the run commits its new checkpoint and schema history even when
   no row follows the DDL.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable

import pyarrow as pa

from lakecdc.config import EVOLVE, EXCEPTION, IGNORE, LENIENT, TRY_EVOLVE, PipelineConfig, transform_context
from lakecdc.errors import LakeCdcError, SinkError
from lakecdc.model import DECLARED_TYPE_KEY, EVENT_TYPES, BinlogOffset, TableId
from lakecdc.runtime.plan import PipelinePlan, SourcePlan
from lakecdc.sink import PaimonSink
from lakecdc.sink.evolution import (ADD, ALTER_TYPE, COMMENT, DROP, NULLABLE, RENAME, ColumnChange,
                                    apply_column_changes)
from lakecdc.source import TableSchemaChange
from lakecdc.source.ddl import (ADD_COLUMN, ALTER_COLUMN_TYPE, ALTER_TABLE_COMMENT, CREATE_TABLE, DROP_COLUMN,
                                DROP_TABLE, RENAME_COLUMN, TRUNCATE_TABLE, UNPARSED_DDL,
                                SchemaChangeEvent)
from lakecdc.transform import compile_transform, select_rule
from lakecdc.transform.routes import CoercedTransform

logger = logging.getLogger("lakecdc.runtime")



class SchemaChangeError(LakeCdcError):
    """A schema change the pipeline's schema.change.behavior does not allow (or Paimon refuses)."""


@dataclass
class SinkEvent:
    """One upstream event as it reaches a Paimon table: its type (for include/exclude and exception mode) and the
    column changes it makes there (none for truncate, drop table and create table)."""

    type: str
    changes: list[ColumnChange] = field(default_factory=list)


def included_types(config: PipelineConfig) -> set[str]:
    """The event types the sink applies (Flink CDC's schema change event types): include (default all; create.table
    always unless excluded) minus exclude (default: drop.table and truncate.table in lenient mode)."""
    sink = config.sink
    include = set(sink.include_schema_changes) if sink.include_schema_changes is not None else set(EVENT_TYPES)
    exclude = set(sink.exclude_schema_changes or ())
    if sink.include_schema_changes is not None and CREATE_TABLE not in exclude:
        include.add(CREATE_TABLE)
    if sink.exclude_schema_changes is None and config.schema_change_behavior == LENIENT:
        exclude |= {DROP_TABLE, TRUNCATE_TABLE}
    return include - exclude


def sink_events(event: SchemaChangeEvent, old_transform, new_transform) -> list[SinkEvent]:
    """What one upstream event becomes after the transform, as in Flink CDC (``*`` passes column changes; without
    ``*`` only type changes of projected columns pass)."""
    star = getattr(new_transform, "star", True)
    old_names = old_transform.output_schema.names if old_transform is not None else []
    new_schema = new_transform.output_schema if new_transform is not None else pa.schema([])
    if event.type == ADD_COLUMN:
        if not star:
            return []
        changes = []
        for column, _ in event.columns:
            if column.name not in new_schema.names:
                continue
            i = new_schema.names.index(column.name)
            position = ("FIRST", "") if i == 0 else ("AFTER", new_schema.names[i - 1])
            changes.append(ColumnChange(ADD, column.name, new_schema.field(column.name), position))
        return [SinkEvent(ADD_COLUMN, changes)] if changes else []
    if event.type == DROP_COLUMN:
        names = [n for n in event.names if n in old_names and n not in new_schema.names]
        return [SinkEvent(DROP_COLUMN, [ColumnChange(DROP, n) for n in names])] if star and names else []
    if event.type == RENAME_COLUMN:
        renames = [(a, b) for a, b in event.renames if a in old_names]
        return [SinkEvent(RENAME_COLUMN, [ColumnChange(RENAME, a, new_name=b) for a, b in renames])] \
            if star and renames else []
    if event.type == ALTER_COLUMN_TYPE:
        # the column as the event leaves it (a CHANGE a b ... alters a first, then renames it)
        name = event.altered.name
        if name not in old_names:
            return []
        if not star and (old_transform is None or old_transform.column_sources().get(name) != [name]):
            return []
        return [SinkEvent(ALTER_COLUMN_TYPE, [ColumnChange(ALTER_TYPE, name, event.altered.sink_field(),
                                                           comment=event.altered.comment or None)])]
    if event.type == ALTER_TABLE_COMMENT:
        return [SinkEvent(ALTER_TABLE_COMMENT, [ColumnChange(COMMENT, comment=event.comment)])]
    return [SinkEvent(event.type)]


def lenient(events: list[SinkEvent], types: dict[str, str]) -> list[SinkEvent]:
    """Flink CDC's lenient rewriting (SchemaDerivator) against the Paimon table's column types."""
    out = []
    altered: dict[str, pa.Field] = {}  # type changes earlier in the same statement (CHANGE a b DOUBLE)
    for event in events:
        changes = []
        for change in event.changes:
            if change.kind == ADD:
                changes.append(ColumnChange(ADD, change.name, change.new_field.with_nullable(True), ("LAST", "")))
            elif change.kind == DROP:
                changes.append(ColumnChange(NULLABLE, change.name))
            elif change.kind == RENAME:
                old_field = altered.get(change.name) or _field_of(types, change.name)
                if old_field is not None:
                    changes.append(ColumnChange(ADD, change.new_name, old_field.with_name(change.new_name)
                                                .with_nullable(True), ("LAST", "")))
                changes.append(ColumnChange(NULLABLE, change.name))
            else:
                if change.kind == ALTER_TYPE:
                    altered[change.name] = change.field
                changes.append(change)
        out.append(SinkEvent(event.type, changes))
    return out


def _field_of(types: dict[str, str], name: str) -> pa.Field | None:
    """A nullable Arrow field of the Paimon column's type (for lenient renames: the new column takes the old
    column's type)."""
    if name not in types:
        return None
    from pypaimon.schema.data_types import DataTypeParser, PyarrowFieldParser

    text = types[name].upper().replace(" NOT NULL", "")
    arrow_type = PyarrowFieldParser.from_paimon_type(DataTypeParser.parse_atomic_type_sql_string(text))
    metadata = {DECLARED_TYPE_KEY: text.encode()} if text.startswith(("CHAR", "VARCHAR", "BINARY",
                                                                          "VARBINARY")) else None
    return pa.field(name, arrow_type, nullable=True, metadata=metadata)


@dataclass
class AppliedDdl:
    """One DDL statement a run met on a source of a table, and what it did to the Paimon table (``paimon``: each
    change applied, in order; empty when the table kept its schema, ``note`` says why)."""

    source: TableId
    statement: str
    offset: BinlogOffset  # the end of the statement in the binlog: the checkpoint after it
    paimon: list[str] = field(default_factory=list)
    note: str = ""

    def outcome(self) -> str:
        """What Paimon did, in words."""
        return "; ".join(self.paimon) if self.paimon else f"no change to the Paimon table ({self.note})"

    def describe(self) -> str:
        return f"DDL on {self.source} at {self.offset}: {self.statement[:300]!r}: {self.outcome()}"


@dataclass
class SchemaChangeApplier:
    """Applies the TableSchemaChanges of one binlog read to the run's Paimon tables (see the module docstring).

    ``commit(target, offset)`` commits the target's open writer with its checkpoint at ``offset``;
    ``truncate(target, offset)`` truncates it in one snapshot checkpointed at ``offset``."""

    config: PipelineConfig
    plan: PipelinePlan
    sink: PaimonSink
    targets: set[TableId]
    checkpoints: dict[TableId, BinlogOffset | None]
    commit: Callable[[TableId, BinlogOffset], None]
    truncate: Callable[[TableId, BinlogOffset], None]
    log: logging.Logger | logging.LoggerAdapter = logger
    failpoint: Callable[[str], None] = lambda name: None
    dropped: set[TableId] = field(default_factory=set)
    # targets that consumed a DDL after their checkpoint: their new schema history and offset must be committed
    # even when no row follows the DDL in this read (else the next run decodes with the old schema)
    consumed: set[TableId] = field(default_factory=set)
    # target → each DDL met for it, with what Paimon did (for reports); its ``paimon`` lists are what was applied
    ddl: dict[TableId, list[AppliedDdl]] = field(default_factory=dict)

    def apply(self, change: TableSchemaChange, open_writers: set[TableId]) -> None:
        source_plan = self.plan.sources.get(change.table_id)
        if source_plan is None:
            return
        mode = self.config.schema_change_behavior
        recreated = any(e.type == CREATE_TABLE for e in change.events)
        targets = [t for t in source_plan.targets if t in self.targets and (recreated or t not in self.dropped)
                   and ((checkpoint := self.checkpoints.get(t)) is None or change.offset > checkpoint)]
        for target in targets:
            if target in open_writers and change.previous is not None and target not in self.dropped:
                self.commit(target, change.previous)
        self.consumed.update(targets)
        for target in targets:
            self.ddl.setdefault(target, []).append(AppliedDdl(change.table_id, change.statement, change.offset,
                                                              note=f"schema.change.behavior {mode}"))
        if any(e.type == UNPARSED_DDL for e in change.events):
            self._unparsed(change, targets, mode)
            self._log_applied(targets)
            return
        old_transform = source_plan.transform
        new_transform = self._recompile(source_plan, change)
        included = included_types(self.config)
        for target in targets:
            events = [e for event in change.events for e in sink_events(event, old_transform, new_transform)]
            skipped = [e for e in events if e.type not in included]
            for e in skipped:
                self.log.info("%s: ignored schema change %s (not in include.schema.changes / in "
                              "exclude.schema.changes)", target, e.type)
            if skipped:
                self.ddl[target][-1].note += "; not in include.schema.changes / in exclude.schema.changes"
            events = [e for e in events if e.type in included]
            if mode == EXCEPTION and any(e.type != CREATE_TABLE for e in events):
                raise SchemaChangeError(
                    f"Unexpected schema change events occurred in EXCEPTION mode: {change.statement[:300]!r} on "
                    f"{change.table_id} at {change.offset} ({', '.join(e.describe() for e in change.events)}). "
                    f"{target} is committed up to the statement before it. Set pipeline.schema.change.behavior to "
                    "lenient, evolve, try_evolve or ignore, or exclude these changes (sink.exclude.schema.changes)")
            if mode == IGNORE:
                events = [e for e in events if e.type == CREATE_TABLE]
            self._apply_events(target, events, change, new_transform, mode)
        if change.after is not None and new_transform is not None:
            source_plan.source = change.after
        for target in targets:
            if target not in self.dropped and self.sink.table_exists(target) and new_transform is not None:
                coerce_into_table(self.sink, source_plan, target, new_transform)
        self._log_applied(targets)
        self.failpoint("after-schema-change")

    def _log_applied(self, targets: list[TableId]) -> None:
        """One line per table for the DDL just met: the statement, where, and what Paimon did."""
        for target in targets:
            self.log.info("%s: %s", target, self.ddl[target][-1].describe())

    # --------------------------------------------------------------------------------------------------------

    def _unparsed(self, change: TableSchemaChange, targets: list[TableId], mode: str) -> None:
        """A DDL statement on the table that lakecdc cannot interpret. evolve and exception must not let the Paimon
        table fall behind a change they would apply or refuse: the run fails (rows before it are committed).
        ignore, lenient and try_evolve leave the Paimon table and the schema history as they were and go on: every
        later rows event of the table is still checked against the history (column count and binlog types; names,
        signedness and labels where the server logs FULL metadata, lakecdc.source.columns), so a statement that
        did change the columns stops the run at the first row written after it. Without FULL metadata a change
        that keeps every binlog type (a rename) would not be seen, so then every mode fails here."""
        if not targets:
            return
        why = "; ".join(e.detail for e in change.events if e.type == UNPARSED_DDL and e.detail)
        why = f" ({why})" if why else ""
        committed = f"{', '.join(map(str, targets))} is committed up to the statement before it"
        if not change.column_names_logged:
            # MINIMAL / NO_LOG: rows are named from the history alone; a statement that renamed or reordered
            # columns of the same binlog types would go unnoticed, so no mode may go past it
            raise SchemaChangeError(
                f"cannot interpret the DDL statement {change.statement[:300]!r} on {change.table_id} at "
                f"{change.offset}{why}, and the server does not log column names in the binlog "
                f"(binlog_row_metadata is not FULL), so lakecdc could not tell whether later rows still fit its "
                f"schema history: it stops in every schema.change.behavior ({mode}) rather than decode them with "
                f"names it guessed. {committed}. Re-snapshot the table (lakecdc resnapshot PIPELINE.yaml "
                f"{change.table_id}, or the Dagster re-snapshot job); with binlog_row_metadata=FULL set before such "
                "statements, ignore, lenient and try_evolve go past them and check every later row by name")
        if mode in (EVOLVE, EXCEPTION):
            raise SchemaChangeError(
                f"cannot interpret the DDL statement {change.statement[:300]!r} on {change.table_id} at "
                f"{change.offset}{why} (schema.change.behavior {mode}): lakecdc stops rather than guess the table's "
                f"new schema. {committed}. If the statement changed no columns, run with schema.change.behavior "
                "lenient, ignore or try_evolve past it; otherwise re-snapshot the table (lakecdc resnapshot "
                "PIPELINE.yaml DB.TABLE, or the Dagster re-snapshot job)")
        self.log.warning("%s: cannot interpret the DDL statement %r at %s%s; schema.change.behavior %s keeps the "
                         "Paimon table and the schema history as they are (a later row that no longer fits the "
                         "history stops the run)", change.table_id, change.statement[:300], change.offset, why, mode)

    def _recompile(self, source_plan: SourcePlan, change: TableSchemaChange):
        if change.after is None:
            return None
        rule = select_rule(self.config.transforms, change.table_id)
        try:
            return compile_transform(rule, change.after, transform_context(self.config))
        except LakeCdcError as error:
            raise SchemaChangeError(
                f"after {change.statement[:300]!r} on {change.table_id} at {change.offset}, the transform no longer "
                f"compiles: {error}. Change the transform rule to the new schema and run again (the table is "
                "committed up to the statement before it)") from error

    def _apply_events(self, target: TableId, events: list[SinkEvent], change: TableSchemaChange, new_transform,
                      mode: str) -> None:
        if mode == LENIENT:
            events = lenient(events, self.sink.paimon_types(target) if self.sink.table_exists(target) else {})
        column_changes = [c for e in events for c in e.changes]
        for event in events:
            if event.type == TRUNCATE_TABLE:
                self.truncate(target, change.offset)
                self._record(target, "truncate table")
            elif event.type == DROP_TABLE:
                self.sink.drop_table(target)
                self.dropped.add(target)
                self._record(target, "drop table")
                self.log.warning("%s dropped (DROP TABLE %s at %s, schema.change.behavior %s)", target,
                                 change.table_id, change.offset, mode)
            elif event.type == CREATE_TABLE:
                self._create(target, new_transform)
        if column_changes and self.sink.table_exists(target):
            self._apply_columns(target, column_changes, change, mode)

    def _apply_columns(self, target: TableId, changes: list[ColumnChange], change: TableSchemaChange,
                       mode: str) -> None:
        try:
            applied = apply_column_changes(self.sink, target, changes, applied_at=change.offset,
                                           tolerate_unsupported=mode == TRY_EVOLVE, warn=self.log.warning)
        except SinkError as error:
            raise SchemaChangeError(f"{error} (statement {change.statement[:200]!r} on {change.table_id} at "
                                    f"{change.offset}, schema.change.behavior {mode})") from error
        for c in applied:
            self._record(target, c.describe())

    def _create(self, target: TableId, transform) -> None:
        if transform is None or self.sink.table_exists(target):
            return
        target_plan = self.plan.targets[target]
        partition_keys = self.config.sink.partition_keys.get(target, transform.partition_keys)
        self.sink.ensure_table(target, transform.output_schema, list(transform.primary_keys), list(partition_keys),
                               dict(transform.table_options), transform.source.comment)
        self.dropped.discard(target)
        target_plan.schema = transform.output_schema
        self._record(target, "create table")

    def _record(self, target: TableId, what: str) -> None:
        self.ddl[target][-1].paimon.append(what)


def coerce_into_table(sink: PaimonSink, source_plan: SourcePlan, target: TableId, transform=None) -> None:
    """From now on, ``source_plan``'s rows go into ``target``'s actual Paimon schema, by column name (missing
    columns NULL, extra ones dropped); ``transform``: the compiled transform to wrap (default: the current one)."""
    transform = transform if transform is not None else getattr(source_plan.transform, "_inner",
                                                                source_plan.transform)
    stored = sink.describe(target).schema
    produced = {f.name: f for f in transform.output_schema}
    # by name only: the writer converts the types into the table's storage types (TIME as milliseconds, ...)
    layout = pa.schema([produced[f.name] if f.name in produced else f.with_metadata(None) for f in stored])
    if layout.names == transform.output_schema.names:
        source_plan.transform = transform
    else:
        source_plan.transform = CoercedTransform(transform, layout, getattr(transform, "_zone", "UTC"))
