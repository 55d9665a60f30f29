"""Verification of a pipeline's Paimon tables against MySQL: the checks Dagster runs as blocking asset checks and
``lakecdc check`` runs without Dagster. Each returns a plain :class:`CheckResult`.

* ``primary_key_unique``: no two rows of the merged table share a primary key.
* ``row_count_matches_source``: active Paimon rows equal the MySQL rows *at the committed checkpoint*: MySQL is
  counted between two reads of the binlog head, the changes from the checkpoint to the first head are undone from
  the count, and the changes made while counting are the tolerance (:func:`count_at_checkpoint`). Tables with a
  ``filter`` have no such check (the filtered-out rows are not in Paimon).
* ``schema_matches_source``: the columns and Paimon types the pipeline produces from today's MySQL schema equal
  the stored table's (:func:`schema_drift`), as far as ``schema.change.behavior`` promises they follow MySQL.

The binlog to reconcile is measured in bytes actually written since the checkpoint (SHOW BINARY LOGS: the rest of
the checkpoint's file, every file after it, the head file up to the head), so a rotation (a server restart,
FLUSH BINARY LOGS) costs only the few bytes it wrote, not a "too far" verdict.

A failed check is a real difference or a check that could not be evaluated (MySQL unreachable, too much binlog to
reconcile, the checkpoint's binlog file purged, a snapshot still running): both fail, so blocking checks stop
downstream work. A check that cannot apply to a table by its nature (a row count of an append table) passes and
says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.config import PipelineConfig
from lakecdc.errors import LakeCdcError
from lakecdc.model import DELETE, INSERT, OP_COLUMN, BinlogOffset, ChangeBatch, TableId
from lakecdc.runtime.checkpoint import Checkpoint, read_checkpoint
from lakecdc.runtime.connect import open_sink, open_source
from lakecdc.runtime.plan import PipelinePlan, TargetPlan, build_plan, soft_delete_column
from lakecdc.runtime.schema_evolution import IGNORE, LENIENT, TRY_EVOLVE, included_types
from lakecdc.sink import PaimonSink, TableDescription
from lakecdc.sink.evolution import holds_every_value, paimon_type, readable_type_change
from lakecdc.sink.sql import run_sql
from lakecdc.source import MySqlSource, MySqlSourceOptions
from lakecdc.source.activity import binlog_sizes, bytes_between
from lakecdc.source.ddl import ADD_COLUMN, ALTER_COLUMN_TYPE, DROP_COLUMN, RENAME_COLUMN
from lakecdc.source.schema import source_table_from_json
from lakecdc.transform.rules import select_rule

PK_UNIQUE = "primary_key_unique"
ROW_COUNT = "row_count_matches_source"
SCHEMA = "schema_matches_source"
CHECK_NAMES = (PK_UNIQUE, ROW_COUNT, SCHEMA)
# Reading more binlog than this to reconcile a count would make the check slower than the run it checks.
MAX_RECONCILE_BYTES = 64 * 1024 * 1024


@dataclass
class CheckResult:
    """The outcome of one check of one table. ``evaluated`` is False when the check could not look (it then fails
    too); ``applicable`` is False when it cannot apply to this table (it then passes and says why)."""

    check: str
    target: TableId
    passed: bool
    description: str
    evaluated: bool = True
    applicable: bool = True
    metadata: dict[str, int | str | bool] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"table": str(self.target), "check": self.check, "passed": self.passed, "evaluated": self.evaluated,
                "applicable": self.applicable, "description": self.description, "metadata": self.metadata}


@dataclass
class CountAtCheckpoint:
    """MySQL's row count reconciled to a checkpoint (see the module docstring)."""

    expected_rows: int  # MySQL rows at the checkpoint
    mysql_rows_now: int
    counted_at: BinlogOffset  # the head read before counting
    net_inserts_since: int  # inserts − deletes in (checkpoint, counted_at]
    changes_since: int  # inserts + deletes in (checkpoint, counted_at]
    tolerance: int  # inserts + deletes while counting
    binlog_bytes_since: int = 0  # binlog written from the checkpoint to counted_at (across files)


@dataclass
class SchemaDrift:
    """Expected (from today's MySQL) against stored Paimon columns, as Paimon types (``INT NOT NULL``)."""

    expected: dict[str, str]
    stored: dict[str, str]
    added: list[str]  # produced from MySQL, missing in Paimon
    dropped: list[str]  # in Paimon, no longer produced
    changed: list[str]  # produced with another type

    @property
    def drifted(self) -> bool:
        return bool(self.added or self.dropped or self.changed)

    def describe(self) -> str:
        problems = []
        if self.added:
            problems.append(f"new in MySQL, missing in Paimon: {', '.join(self.added)}")
        if self.dropped:
            problems.append(f"in Paimon, no longer produced from MySQL: {', '.join(self.dropped)}")
        if self.changed:
            problems.append("type changed: " + "; ".join(
                f"{c}: {self.stored[c]} in Paimon, {self.expected[c]} from MySQL" for c in self.changed))
        return " | ".join(problems)


def has_filter(config: PipelineConfig, sources: list[TableId]) -> bool:
    """Whether a transform rule filters rows of one of ``sources`` (then Paimon holds fewer rows than MySQL)."""
    for source in sources:
        rule = select_rule(config.transforms, source)
        if rule is not None and rule.filter and rule.filter.strip():
            return True
    return False


def check_names(config: PipelineConfig, sources: list[TableId]) -> list[str]:
    """The checks a table fed by ``sources`` has (no row count when a filter drops rows)."""
    return [n for n in CHECK_NAMES if n != ROW_COUNT or not has_filter(config, sources)]


# ------------------------------------------------------------------------------------------- table state


@dataclass
class TableState:
    """What the checks look at: the live plan for the table (from MySQL now) and the stored Paimon table."""

    config: PipelineConfig
    target: TableId
    plan: TargetPlan | None
    plan_error: str | None
    stored: TableDescription | None
    checkpoint: Checkpoint | None

    source: MySqlSource | None = None  # the connection(s) the checks query MySQL through (None: their own)
    # the changes since the checkpoint from one binlog read shared by many tables' checks (see tally_since_checkpoints)
    tally: BinlogTally | None = None

    @classmethod
    def load(cls, config: PipelineConfig, target: TableId, *, plan: PipelinePlan | None = None,
             source: MySqlSource | None = None, sink: PaimonSink | None = None) -> "TableState":
        """The state of ``target``. ``plan``: a plan from MySQL now that holds the table (a caller checking many
        tables plans once, ``check_pipeline``); without it only this table is planned. ``source``/``sink``: reuse
        a caller's (a source sharing one connection keeps the connections per call fixed)."""
        plan_error = None
        target_plan = None
        try:
            if plan is None or target not in plan.targets:
                plan = build_plan(config, source or open_source(config), targets={target}).restrict({target})
            target_plan = plan.targets[target]
        except LakeCdcError as exc:
            plan_error = str(exc)
        sink = sink or open_sink(config)
        stored = sink.describe(target) if sink.table_exists(target) else None
        checkpoint = read_checkpoint(sink.checkpoint(target)) if stored is not None else None
        return cls(config, target, target_plan, plan_error, stored, checkpoint, source)

    @property
    def offset(self) -> BinlogOffset | None:
        return self.checkpoint.offset if self.checkpoint is not None else None


def plan_at_checkpoint(config: PipelineConfig, target: TableId, checkpoint: Checkpoint | None, *,
                       source: MySqlSource | None = None) -> TargetPlan | None:
    """The table's plan compiled against its source tables' schemas as ``checkpoint`` records them: the schemas its
    last commit was written with (a DDL in MySQL after that commit is not in it). None without a checkpoint that
    records them."""
    if checkpoint is None or checkpoint.snapshot_pending or not checkpoint.schemas:
        return None
    source = source or open_source(config)
    schemas = {t: source_table_from_json(data, source.options) for t, data in checkpoint.schemas.items()}
    return build_plan(config, source, schemas=schemas, targets={target}).restrict({target}).targets[target]


def evaluate(state: TableState, names: set[str] | list[str]) -> list[CheckResult]:
    """The results of the selected checks, in a fixed order; an error inside a check is a failed result."""
    results = []
    for name, check in ((PK_UNIQUE, primary_key_unique), (ROW_COUNT, row_count_matches_source),
                        (SCHEMA, schema_matches_source)):
        if name not in names:
            continue
        try:
            results.append(check(state))
        except LakeCdcError as exc:
            results.append(_not_evaluated(state, name, str(exc)))
    return results


def check_pipeline(config: PipelineConfig, tables: list[TableId] | None = None) -> list[CheckResult]:
    """Every check of every Paimon table of the pipeline (or of ``tables``), as Dagster runs them. The pipeline is
    planned once and every query goes through one shared MySQL connection (binlog reads to reconcile a count open
    their own), however many tables are checked."""
    source = open_source(config)
    source.share_connection()
    try:
        plan = build_plan(config, source, targets=set(tables) if tables else None)
        targets = sorted(tables) if tables else sorted(plan.targets)
        plan = plan.restrict(set(targets))  # unknown tables are an error
        sink = open_sink(config)
        states = {target: TableState.load(config, target, plan=plan, source=source, sink=sink) for target in targets}
        share_tally(source, list(states.values()))
        results = []
        for target, state in states.items():
            sources = [s.source.table_id for s in plan.targets[target].sources]
            results.extend(evaluate(state, check_names(config, sources)))
        return results
    finally:
        source.close()


def _not_evaluated(state: TableState, name: str, why: str) -> CheckResult:
    return CheckResult(name, state.target, False, f"could not be evaluated: {why}", evaluated=False)


def _sql(state: TableState, query: str) -> pa.Table:
    try:
        return run_sql(state.config.sink.catalog_options, query)
    except Exception as exc:  # DataFusion raises its own exception types
        raise LakeCdcError(f"reading {state.target} back failed: {exc}") from None


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _table_ref(table: TableId) -> str:
    return f"{_ident(table.database)}.{_ident(table.table)}"


# ------------------------------------------------------------------------------------------- the checks


def primary_key_unique(state: TableState) -> CheckResult:
    if state.stored is None:
        return _not_evaluated(state, PK_UNIQUE, f"the Paimon table {state.target} does not exist yet")
    keys = list(state.stored.primary_keys)
    if not keys:
        return CheckResult(PK_UNIQUE, state.target, True, "append table without a primary key: nothing to check",
                           applicable=False, metadata={"primary_keys": ""})
    columns = ", ".join(_ident(k) for k in keys)
    duplicates = _sql(state, f"SELECT {columns}, COUNT(*) AS copies FROM {_table_ref(state.target)} "
                             f"GROUP BY {columns} HAVING COUNT(*) > 1 LIMIT 5")
    metadata: dict = {"primary_keys": ", ".join(keys), "duplicate_keys_shown": duplicates.num_rows}
    if duplicates.num_rows:
        sample = "; ".join(str(row) for row in duplicates.to_pylist())
        return CheckResult(PK_UNIQUE, state.target, False, f"duplicate primary keys, e.g. {sample}",
                           metadata={**metadata, "sample": sample})
    return CheckResult(PK_UNIQUE, state.target, True, f"every ({', '.join(keys)}) is unique", metadata=metadata)


def row_count_matches_source(state: TableState) -> CheckResult:
    target = state.target
    if state.stored is None or state.checkpoint is None:
        return _not_evaluated(state, ROW_COUNT, f"{target} has no committed checkpoint yet")
    if state.checkpoint.snapshot_pending:
        return _not_evaluated(state, ROW_COUNT, f"the snapshot of {target} is still in progress (it resumes with "
                                                "the next run)")
    if state.plan is None:
        return _not_evaluated(state, ROW_COUNT, f"cannot read the source tables: {state.plan_error}")
    if not state.stored.primary_keys:
        return CheckResult(ROW_COUNT, target, True, "not applicable: an append table gets a row per change, so its "
                           "row count is not comparable with MySQL's", applicable=False)
    deleted_marker = soft_delete_column(state.config, state.plan)
    if deleted_marker is None:
        return CheckResult(ROW_COUNT, target, True, "not applicable: a SOFT_DELETE table without a column holding "
                           "__data_event_type__ cannot tell deleted rows from active ones", applicable=False)
    where = f" WHERE {_ident(deleted_marker)} <> '{DELETE}'" if deleted_marker else ""
    paimon_rows = _sql(state, f"SELECT COUNT(*) AS n FROM {_table_ref(target)}{where}").column(0)[0].as_py()
    count = count_at_checkpoint(state.config, state.plan, state.checkpoint.offset,
                                xa_scan_start=state.checkpoint.xa_scan_start, source=state.source, tally=state.tally)
    difference = paimon_rows - count.expected_rows
    metadata = {"paimon_active_rows": paimon_rows, "expected_rows_at_checkpoint": count.expected_rows,
                "difference": difference, "tolerance": count.tolerance, "checkpoint": str(state.checkpoint.offset),
                "mysql_rows_now": count.mysql_rows_now, "counted_at": str(count.counted_at),
                "net_inserts_since_checkpoint": count.net_inserts_since,
                "binlog_bytes_since_checkpoint": count.binlog_bytes_since,
                "source_quiet": count.changes_since == 0 and count.tolerance == 0}
    how = "exact" if count.tolerance == 0 else f"within ±{count.tolerance} (rows changed in MySQL while counting)"
    if abs(difference) <= count.tolerance:
        return CheckResult(ROW_COUNT, target, True, f"{paimon_rows} active rows in Paimon, {count.expected_rows} in "
                           f"MySQL at {state.checkpoint.offset} ({how})", metadata=metadata)
    return CheckResult(ROW_COUNT, target, False, f"{paimon_rows} active rows in Paimon but {count.expected_rows} in "
                       f"MySQL at {state.checkpoint.offset} (difference {difference:+d}, tolerance {count.tolerance})",
                       metadata=metadata)


def count_at_checkpoint(config: PipelineConfig, plan: TargetPlan, checkpoint: BinlogOffset, *,
                        xa_scan_start: BinlogOffset | None = None, source: MySqlSource | None = None,
                        tally: BinlogTally | None = None) -> CountAtCheckpoint:
    """The MySQL rows of ``plan``'s source tables at ``checkpoint``. ``xa_scan_start``: the checkpoint's open
    prepared XA transaction (its rows count where it commits). LakeCdcError when the count cannot be reconciled:
    more than MAX_RECONCILE_BYTES of binlog written since the checkpoint, or its binlog file purged. ``source``:
    a caller's (sharing its connection), else one of its own. ``tally``: the changes since the checkpoint from a
    read shared with other tables, used when it covers exactly this count's window (the head has not moved since)."""
    source = source or open_source(config)
    sources = {s.source.table_id: s.source for s in plan.sources}
    before = source.head_offset()
    written = binlog_bytes_since(source, checkpoint, before)
    mysql_rows = source.count_rows(sorted(sources))
    after = source.head_offset()
    shared = tally.changes(sources, checkpoint, before) if tally is not None else None
    net_since, changes_since = shared if shared is not None else \
        binlog_changes(source, sources, checkpoint, before, xa_scan_start=xa_scan_start)
    _, tolerance = binlog_changes(source, sources, before, after,
                                  xa_scan_start=min(xa_scan_start or checkpoint, checkpoint))
    return CountAtCheckpoint(mysql_rows - net_since, mysql_rows, before, net_since, changes_since, tolerance,
                             written)


def binlog_bytes_since(source: MySqlSource | MySqlSourceOptions, checkpoint: BinlogOffset, head: BinlogOffset) -> int:
    """The binlog bytes written from ``checkpoint`` to ``head``, across rotations (the file sizes of SHOW BINARY
    LOGS; through ``source``'s connection, or a new one for bare options); LakeCdcError when reconciling them
    would read more than MAX_RECONCILE_BYTES or the checkpoint's file is gone."""
    if head <= checkpoint:
        return 0
    sizes = source.binary_log_sizes() if isinstance(source, MySqlSource) else binlog_sizes(source)
    written = bytes_between(sizes, checkpoint, head)
    if written is None:
        raise LakeCdcError(f"the checkpoint's binlog file {checkpoint.file} is no longer on the server (purged), so "
                           "the count at the checkpoint cannot be reconciled; run the pipeline (its checkpoint moves "
                           "to a binlog file the server has), or re-snapshot the table if the run says the binlog "
                           "was purged")
    if written > MAX_RECONCILE_BYTES:
        raise LakeCdcError(f"{_mib(written)} of binlog were written since the checkpoint {checkpoint} (up to "
                           f"{head}), more than the {_mib(MAX_RECONCILE_BYTES)} the check reads to reconcile the "
                           "count; run the pipeline (its checkpoint moves to the head), then the check")
    return written


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB" if size >= 1 << 20 else f"{size} bytes"


def binlog_changes(source: MySqlSource, tables: dict, start: BinlogOffset, stop: BinlogOffset, *,
                   xa_scan_start: BinlogOffset | None = None) -> tuple[int, int]:
    """(inserts − deletes, inserts + deletes) of ``tables`` in the binlog after ``start`` up to ``stop``
    (``xa_scan_start``: where to look for XA transactions prepared before ``start``, see BinlogReader)."""
    if stop <= start:
        return 0, 0
    reader = source.read_binlog(tables, {t: start for t in tables}, stop, xa_scan_start=xa_scan_start)
    inserts = deletes = 0
    for batch in reader:
        assert isinstance(batch, ChangeBatch)  # neither track_schemas nor a follow read: change batches only
        kinds = batch.data.column(OP_COLUMN)
        inserts += pc.sum(pc.equal(kinds, INSERT)).as_py() or 0
        deletes += pc.sum(pc.equal(kinds, DELETE)).as_py() or 0
    return inserts - deletes, inserts + deletes


@dataclass(frozen=True)
class BinlogTally:
    """Per source table, (inserts − deletes, inserts + deletes) after its own start offset up to ``stop``: one binlog
    read for the row-count checks of many tables, instead of one read (two MySQL connections) per table whose
    checkpoint is behind the head."""

    stop: BinlogOffset
    starts: dict[TableId, BinlogOffset]
    counts: dict[TableId, tuple[int, int]]

    def changes(self, sources, start: BinlogOffset, stop: BinlogOffset) -> tuple[int, int] | None:
        """The changes of ``sources`` after ``start`` up to ``stop``, None unless this tally read exactly that."""
        if stop != self.stop or any(self.starts.get(s) != start for s in sources):
            return None
        return (sum(self.counts.get(s, (0, 0))[0] for s in sources),
                sum(self.counts.get(s, (0, 0))[1] for s in sources))


def tally_since_checkpoints(source: MySqlSource, states: list[TableState]) -> BinlogTally | None:
    """One binlog read of the changes since each table's checkpoint up to the head, for ``states`` whose row count
    is reconciled; None when fewer than two tables need a read, or when the read is refused (too much binlog, a
    purged file: each table's own check then says so). A source feeding tables with different checkpoints is left
    to each table's own read."""
    starts: dict[TableId, BinlogOffset] = {}
    tables: dict = {}
    xa_starts = []
    conflicting = set()
    for state in states:
        checkpoint = state.checkpoint
        if state.plan is None or checkpoint is None or checkpoint.snapshot_pending or checkpoint.offset is None:
            continue
        for source_plan in state.plan.sources:
            table_id = source_plan.source.table_id
            if starts.get(table_id, checkpoint.offset) != checkpoint.offset:
                conflicting.add(table_id)
            starts[table_id], tables[table_id] = checkpoint.offset, source_plan.source
        if checkpoint.xa_scan_start is not None:
            xa_starts.append(checkpoint.xa_scan_start)
    head = source.head_offset()
    behind = {t: start for t, start in starts.items() if t not in conflicting and start < head}
    if len(behind) < 2:
        return None
    try:
        binlog_bytes_since(source, min(behind.values()), head)
    except LakeCdcError:
        return None
    counts: dict[TableId, tuple[int, int]] = {}
    reader = source.read_binlog({t: tables[t] for t in behind}, behind, head,
                                xa_scan_start=min(xa_starts, default=None))
    for batch in reader:
        assert isinstance(batch, ChangeBatch)  # neither track_schemas nor a follow read: change batches only
        kinds = batch.data.column(OP_COLUMN)
        inserts = pc.sum(pc.equal(kinds, INSERT)).as_py() or 0
        deletes = pc.sum(pc.equal(kinds, DELETE)).as_py() or 0
        net, total = counts.get(batch.table.table_id, (0, 0))
        counts[batch.table.table_id] = (net + inserts - deletes, total + inserts + deletes)
    return BinlogTally(head, {t: s for t, s in starts.items() if t not in conflicting}, counts)


def share_tally(source: MySqlSource, states: list[TableState]) -> None:
    """Give ``states`` one shared binlog read for their row-count checks (see :func:`tally_since_checkpoints`); a
    failed read leaves each table to its own (which reports the error)."""
    try:
        tally = tally_since_checkpoints(source, states)
    except Exception:  # noqa: BLE001 - the shared read only saves connections: each table then reads on its own
        return
    for state in states:
        state.tally = tally


def expected_types(plan: TargetPlan) -> dict[str, str]:
    """Column → Paimon type (``INT NOT NULL``) the pipeline produces for the table from the current MySQL schema,
    spelt as the stored table's (``PaimonSink.paimon_types``)."""
    keys = set(plan.primary_keys) | set(plan.partition_keys) if plan.primary_keys else set()
    return {f.name: str(paimon_type(plan.target, f.with_nullable(f.nullable and f.name not in keys)))
            for f in plan.schema}


def _without_null(type_text: str) -> str:
    return type_text.replace(" NOT NULL", "")


def schema_drift(plan: TargetPlan, stored: dict[str, str], behavior: str = "") -> SchemaDrift:
    """How the stored table's columns (``PaimonSink.paimon_types``) differ from what ``plan`` produces. In lenient
    mode columns are kept when dropped upstream and added nullable, so only missing columns and other base types
    count there."""
    expected = expected_types(plan)
    comparable = _without_null if behavior == LENIENT else (lambda t: t)
    added = [c for c in expected if c not in stored]
    dropped = [c for c in stored if c not in expected] if behavior != LENIENT else []
    changed = [c for c in expected if c in stored and comparable(stored[c]) != comparable(expected[c])]
    return SchemaDrift(expected, dict(stored), added, dropped, changed)


_NEXT_RUN = {
    "evolve": "schema.change.behavior evolve: the next run applies the DDL it reads from the binlog; if it does "
              "not, `lakecdc resnapshot` brings the table back to MySQL's schema",
    "try_evolve": "schema.change.behavior try_evolve: the next run applies what Paimon readers can read back",
    "lenient": "schema.change.behavior lenient: the next run adds new columns, nullable",
    "exception": "schema.change.behavior exception: the next run stops at the DDL",
}


def kept_by_design(config: PipelineConfig, drift: SchemaDrift) -> SchemaDrift:
    """The part of ``drift`` that the runs never close because ``schema.change.behavior`` or
    ``include/exclude.schema.changes`` keep those changes out of the table (ignore: all of it; excluded add, drop,
    rename or type changes; try_evolve: type changes lakecdc refuses whatever the stored values)."""
    if config.schema_change_behavior == IGNORE:
        return drift
    included = included_types(config)
    renames_out = RENAME_COLUMN not in included
    added = drift.added if ADD_COLUMN not in included or renames_out else []
    dropped = drift.dropped if DROP_COLUMN not in included or renames_out else []
    if ALTER_COLUMN_TYPE not in included:
        changed = drift.changed
    elif config.schema_change_behavior == TRY_EVOLVE:
        changed = [c for c in drift.changed
                   if not readable_type_change(_without_null(drift.stored[c]), _without_null(drift.expected[c]))]
    else:
        changed = []
    return SchemaDrift(drift.expected, drift.stored, added, dropped, changed)


def schema_matches_source(state: TableState) -> CheckResult:
    if state.plan is None:
        return _not_evaluated(state, SCHEMA, f"the pipeline cannot be planned against MySQL now: {state.plan_error}")
    if state.stored is None:
        return _not_evaluated(state, SCHEMA, f"the Paimon table {state.target} does not exist yet")
    behavior = state.config.schema_change_behavior
    drift = schema_drift(state.plan, open_sink(state.config).paimon_types(state.target),
                         behavior)
    metadata: dict = {"source_tables": ", ".join(str(s.source.table_id) for s in state.plan.sources),
                      "columns_from_source": len(drift.expected), "columns_in_paimon": len(drift.stored),
                      "schema_change_behavior": behavior}
    if not drift.drifted:
        return CheckResult(SCHEMA, state.target, True, f"{len(drift.expected)} columns in sync with MySQL",
                           metadata=metadata)
    kept = kept_by_design(state.config, drift)
    # a column stored wider than produced holds every value (a table created by an earlier release, which declared
    # some computed columns with more precision: TIMESTAMP(6) where Flink CDC declares TIMESTAMP(3))
    wider = [c for c in drift.changed
             if holds_every_value(_without_null(drift.stored[c]), _without_null(drift.expected[c]))]
    failing = SchemaDrift(drift.expected, drift.stored, [c for c in drift.added if c not in kept.added],
                          [c for c in drift.dropped if c not in kept.dropped],
                          [c for c in drift.changed if c not in kept.changed and c not in wider])
    if wider:
        metadata["wider_in_paimon"] = "; ".join(f"{c}: {drift.stored[c]} holds {drift.expected[c]}" for c in wider)
    metadata.update({"added": ", ".join(drift.added), "dropped": ", ".join(drift.dropped),
                     "changed": "; ".join(drift.changed), "kept_by_behavior": kept.describe()})
    if not failing.drifted and not kept.drifted:  # only wider stored types: every produced value fits
        return CheckResult(SCHEMA, state.target, True, f"{len(drift.expected)} columns in sync with MySQL; stored "
                           f"wider than produced, holding every value: {metadata['wider_in_paimon']}",
                           metadata=metadata)
    if not failing.drifted:  # what the table's schema-change settings keep out: as asked
        return CheckResult(SCHEMA, state.target, True, f"schema.change.behavior {behavior} (and the included "
                           f"schema changes) keep these differences from MySQL by design: {kept.describe()}",
                           applicable=False, metadata=metadata)
    return CheckResult(SCHEMA, state.target, False, f"schema drift ({_NEXT_RUN.get(behavior, '')}): "
                       + failing.describe(), metadata=metadata)
