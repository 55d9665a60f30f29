"""One micro-batch of a pipeline, from the checkpoint to the commit.

1. Check the server, resolve the captured tables, compile the transforms (all errors before any write).
2. Lock every target table, create missing ones, read each table's checkpoint from its latest snapshot, and
   decide what each does (lakecdc.runtime.table_work: startup mode, newly added tables, unfinished snapshots).
3. Tables with a checkpoint read the binlog from it up to the head position taken at the start of the run (a
   transaction boundary); tables without one start as ``scan.startup.mode`` says. They commit once each.
4. Tables that need a snapshot take it in chunks, committing rows and progress every
   ``lakecdc.snapshot.commit-rows`` rows, so a run that dies resumes the snapshot where it stopped.
5. Rows pass through the transform as Arrow tables and go to the native Paimon writer; every commit's snapshot
   properties carry the offset (and snapshot progress) it reached.
6. Still under the locks, table upkeep of the tables that committed (lakecdc.runtime.upkeep): compaction,
   manifest merging, snapshot expiry and orphan files, as far as their thresholds say.

Follow mode (:func:`follow_pipeline`) is the same run that does not end at step 6: still under the same locks it
keeps one binlog connection open from the checkpoints the run reached and commits what it read every
``pipeline.checkpoint-interval`` (steps 3, 5 and 6 again, at a transaction boundary each time), until asked to stop.

The steps are the methods of :class:`MicroBatch`, one object per run holding what they share (source, sink, plan,
results, open writers); :func:`run_micro_batch` and :func:`follow_pipeline` are what the CLI and Dagster call.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.config import PipelineConfig
from lakecdc.errors import SinkError, TableLockedError
from lakecdc.model import OP_COLUMN, BinlogOffset, ChangeBatch, SourceTable, TableCounts, TableId
from lakecdc.runtime import commit_groups as _commit_groups
from lakecdc.runtime import table_work as _table_work
from lakecdc.runtime.replacement import replacement_for
from lakecdc.runtime.row_counts import row_count_after_run
from lakecdc.runtime.checkpoint import (PHASE_BINLOG, PHASE_SNAPSHOT, PIPELINE, checkpoint_properties,
                                        idle_checkpoint_due, read_checkpoint)
from lakecdc.runtime.connect import open_sink, open_source
from lakecdc.runtime.plan import PipelinePlan, SourcePlan, TargetPlan, build_plan, planned_targets
from lakecdc.runtime.report import (SnapshotProgress, count_partitions, estimate_rows, log_summary,
                                    report_fallbacks)
from lakecdc.runtime.schema_evolution import (IGNORE, AppliedDdl, SchemaChangeApplier, coerce_into_table,
                                              included_types)
from lakecdc.runtime.upkeep import upkeep_after_commits
from lakecdc.sink import PaimonSink, TableWriter
from lakecdc.sink.written import WrittenRows
from lakecdc.source import BinlogCheckpoint, MySqlSource, TableSchemaChange
from lakecdc.source.ddl import ADD_COLUMN, RENAME_COLUMN
from lakecdc.source.schema import source_table_from_json

logger = logging.getLogger("lakecdc.runtime")

FAILPOINT_ENV = "LAKECDC_FAILPOINT"


@dataclass
class TableResult:
    """What one run did to one Paimon table."""

    target: TableId
    sources: list[TableId]
    phase: str
    committed: bool
    snapshot_id: int | None
    offset: BinlogOffset | None
    counts: TableCounts = field(default_factory=TableCounts)
    rows_written: int = 0
    row_count: int | None = None
    schema: pa.Schema | None = None
    primary_keys: list[str] = field(default_factory=list)
    partition_keys: list[str] = field(default_factory=list)
    created: bool = False
    partitions: dict[str, dict[str, int]] = field(default_factory=dict)  # partition → change kind → rows
    commits: int = 0  # snapshots this run committed (a chunked snapshot commits several)
    snapshot_complete: bool = True  # False while a chunked snapshot still has chunks to read
    snapshot_rows: int = 0  # rows this run read from MySQL for a snapshot
    upkeep: object | None = None  # lakecdc.sink.upkeep.UpkeepResult when upkeep ran after the commits
    xa_scan_start: BinlogOffset | None = None  # the oldest open prepared XA at ``offset`` (checkpoint.XA_SCAN_START)
    # binlog rows events of its sources the columnar decoder left to python-mysql-replication, per cause
    # (lakecdc.source.rows_decoder.FALLBACK_*): the same rows, several times slower
    decoder_fallbacks: dict[str, int] = field(default_factory=dict)
    # column → Paimon type as stored after the run (``schema`` likewise): a DDL the run applied is in them
    paimon_types: dict[str, str] = field(default_factory=dict)
    schema_changes: list[str] = field(default_factory=list)  # what the run's DDL did to the table (in order)
    # each DDL of its sources the run met: statement, binlog position, what Paimon did (schema_changes's source)
    ddl: list[AppliedDdl] = field(default_factory=list)
    # the checkpoint the run started from (None: the table had none); a run with nothing new leaves it there
    checkpoint: BinlogOffset | None = None
    # source table → the commit position of the last transaction with its rows that this run (in follow mode:
    # this commit) wrote to the table; a source without changes is not listed
    last_changes: dict[TableId, BinlogOffset] = field(default_factory=dict)
    # the table's plan the run committed with (its sources' schemas and transforms as the run left them)
    plan: TargetPlan | None = None
    # with record_writes: what the run (in follow mode: this commit) committed, kept to check the commit by
    # reading its keys back (lakecdc.sink.written, lakecdc.runtime.verify)
    written: WrittenRows | None = None


@dataclass
class RunResult:
    pipeline: str
    run_id: str
    head: BinlogOffset | None
    tables: dict[TableId, TableResult]
    seconds: float = 0.0
    binlog_reads: int = 0  # binlog connections the run opened for its tables (snapshot catch-ups not counted)
    ignored_tables: list[TableId] = field(default_factory=list)  # created after the start, not captured
    follow_commits: int = 0  # follow mode: commit rounds after the first micro-batch
    skipped_tables: list[TableId] = field(default_factory=list)  # skip_locked: locked by another writer, not run
    # the plan the run committed with: the source schemas it reached (after the DDL it read) and their transforms
    plan: PipelinePlan | None = None

    @property
    def committed(self) -> list[TableResult]:
        return [t for t in self.tables.values() if t.committed]

    @property
    def decoder_fallbacks(self) -> dict[str, int]:
        """Binlog rows events decoded by python-mysql-replication instead of the columnar decoder, per cause,
        over all tables (an event of a source feeding several tables counts once per table)."""
        total: dict[str, int] = {}
        for table in self.tables.values():
            for cause, events in table.decoder_fallbacks.items():
                total[cause] = total.get(cause, 0) + events
        return total


def failpoint(name: str) -> None:
    """Kill this process here when ``LAKECDC_FAILPOINT`` names this point: crash tests use it to stop a run at an
    exact step (SIGKILL, so nothing gets a chance to clean up, as in a real crash)."""
    if os.environ.get(FAILPOINT_ENV) == name:
        logger.warning("failpoint %s reached: killing the process", name)
        os.kill(os.getpid(), signal.SIGKILL)


@dataclass
class Follow:
    """How a follow session ends and whom it tells about its commits."""

    should_stop: Callable[[], bool] = lambda: False  # checked at every checkpoint; True: commit, then end
    on_commit: Callable[[list[TableResult]], None] | None = None  # the tables one checkpoint committed


Log = logging.Logger | logging.LoggerAdapter


def run_micro_batch(config: PipelineConfig, *, targets: set[TableId] | None = None, run_id: str | None = None,
                    log: Log | None = None, skip_locked: bool = False, record_writes: bool = False) -> RunResult:
    """Run one micro-batch of ``config`` (optionally only for some target tables) and return what it did.
    ``skip_locked``: a table whose lock another writer holds is left out of the run (listed in
    ``RunResult.skipped_tables``) instead of failing it: a run of many tables (lakecdc.runtime.table_runs) then
    tries such a table alone, so it fails alone. ``record_writes``: keep what each table's commits wrote
    (``TableResult.written``) for the run's checks (lakecdc.runtime.verify.verify_run)."""
    return _run(config, targets, run_id, log, None, skip_locked, record_writes)


def follow_pipeline(config: PipelineConfig, *, should_stop: Callable[[], bool] = lambda: False,
                    on_commit: Callable[[list[TableResult]], None] | None = None,
                    targets: set[TableId] | None = None, run_id: str | None = None,
                    log: Log | None = None, record_writes: bool = False) -> RunResult:
    """Follow mode: one micro-batch (snapshots first where a table needs one), then, under the same table locks,
    keep reading the binlog and commit every ``pipeline.checkpoint-interval`` (each commit carries the offset and
    schema history it reached, as a micro-batch's does) until ``should_stop()`` returns True at a checkpoint.
    ``on_commit`` gets the tables each checkpoint committed, with that checkpoint's counts (and with
    ``record_writes``, what that commit wrote: ``TableResult.written``)."""
    return _run(config, targets, run_id, log, Follow(should_stop, on_commit), record_writes=record_writes)


def _run(config: PipelineConfig, targets: set[TableId] | None, run_id: str | None, log: Log | None,
         follow: Follow | None, skip_locked: bool = False, record_writes: bool = False) -> RunResult:
    """A MicroBatch against the pipeline's MySQL server (checked first: a server that cannot be a CDC source fails
    before anything else) and its Paimon warehouse."""
    source = open_source(config)
    # The start-up's short queries (server checks, table lists and descriptions, the head, the binlog files) share
    # one connection, closed before the first row is read; reads open their own connections as before.
    source.share_connection()
    try:
        source.check_server()
        return MicroBatch(config, source, open_sink(config), run_id=run_id, log=log, skip_locked=skip_locked,
                          record_writes=record_writes).execute(targets, follow)
    finally:
        source.close()


class MicroBatch:
    """One run of a pipeline: the steps of the module docstring as methods. What the steps share lives here (the
    source and sink, the plan, each table's result, the writers open until the next commit) instead of being
    passed from function to function."""

    def __init__(self, config: PipelineConfig, source: MySqlSource, sink: PaimonSink, *, run_id: str | None = None,
                 log: Log | None = None, skip_locked: bool = False, record_writes: bool = False) -> None:
        self.config = config
        self.skip_locked = skip_locked
        self.record_writes = record_writes
        self.source = source
        self.sink = sink
        self.log = log or logger
        self.run = RunResult(config.name, run_id or uuid.uuid4().hex, None, {})
        self.plan = PipelinePlan({}, {})
        self.captured: list[str] = []  # every captured source table, recorded in each checkpoint
        self.writers: dict[TableId, TableWriter] = {}  # open until the next commit (or abort)
        self.evolvers: list[SchemaChangeApplier] = []  # this run's, to know which tables' schema it changed
        self.base_snapshots: dict[TableId, int | None] = {}  # each table's latest snapshot before the run wrote
        self.recorded: dict[TableId, WrittenRows] = {}  # what the run's writers commit, per table recorded
        self._changes_reported: dict[tuple[int, TableId], int] = {}  # (evolver, table) → its changes in results

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def results(self) -> dict[TableId, TableResult]:
        return self.run.tables

    def execute(self, targets: set[TableId] | None = None, follow: Follow | None = None) -> RunResult:
        """Steps 1-6 for ``targets`` (default: every table), then follow mode when ``follow`` is given."""
        started = time.monotonic()
        # the head first, before planning: a snapshot's first commit group folds the binlog from here, which leaves
        # a transaction MySQL logged before it the whole start-up's time to be committed (lakecdc.runtime.
        # commit_groups); the binlog phase reads up to it
        head = self.run.head = self.source.head_offset()
        admission, keys = self._resolve(targets)
        with ExitStack() as locks:
            self._lock_targets(locks)
            checkpoints = {t: read_checkpoint(self.sink.checkpoint(t)) for t in self.plan.targets}
            # what each table does (startup positions resolved, purged binlogs found) before any table is created
            work = _table_work.plan_work(self.config, self.plan, checkpoints, admission, self.source, head, self.log)
            _table_work.check_binlog_available(
                self.source, {t: w.offset for t, w in work.items()
                              if w.kind in (_table_work.BINLOG, _table_work.SNAPSHOT) and w.offset is not None},
                self.sink.warehouse)
            _table_work.check_snapshot_mode(self.config, self.plan, work, keys, self.source)
            self.source.close()  # the end of the start-up's shared connection
            self.run.tables = self._prepare_targets(checkpoints, work)
            self._read_binlogs(work, checkpoints, head)
            self._run_initial_loads(work, keys)
            failpoint("after-commit")
            # table upkeep (compaction, manifests, expiry, orphans) under the locks this run holds
            self._upkeep([r.target for r in self.results.values()
                          if r.committed and self.sink.table_exists(r.target)])
            self._count_rows()
            self._finish_results()
            if follow is not None:
                self._start_follow(follow)
        log_summary(self.results, time.monotonic() - started, self.log, head)
        self.run.seconds = time.monotonic() - started
        self.run.plan = self.plan
        return self.run

    # ----------------------------------------------------------------------------------------------- step 1

    def _resolve(self, targets: set[TableId] | None) -> tuple[_table_work.Admission, dict]:
        """The plan of this run (``self.plan``) and the captured tables; returns the admission and each source's
        chunk key. Every configuration error surfaces here, before any lock is taken or anything written."""
        stored = self._stored_checkpoints(planned_targets(self.config, self.source))
        # decode the binlog after each checkpoint with the schema its rows were written with (and keep reading
        # tables dropped upstream up to their DROP TABLE)
        full_plan = build_plan(self.config, self.source, schemas=schema_history(stored, self.source.options))
        admission = _table_work.admit_tables(self.config, full_plan, stored, self.log)
        plan = full_plan.restrict(set(targets)) if targets is not None else full_plan
        self.plan = _table_work.without_sources(plan, admission.ignored)
        keys = {sid: self.source.chunk_key(p.source) for sid, p in self.plan.sources.items()}  # bad options fail here
        self.run.ignored_tables = sorted(admission.ignored)
        self.captured = sorted(str(t) for t in admission.captured)
        return admission, keys

    def _stored_checkpoints(self, targets: set[TableId]) -> dict:
        """The checkpoints of ``targets``, plus those of other tables this pipeline wrote (their source tables may
        have been dropped upstream after the checkpoint)."""
        stored = {t: read_checkpoint(self.sink.checkpoint(t)) for t in sorted(targets)}
        for table in self.sink.list_tables():
            if table not in stored:
                properties = self.sink.checkpoint(table)
                if properties and properties.get(PIPELINE) == self.config.name:
                    stored[table] = read_checkpoint(properties)
        return stored

    # ----------------------------------------------------------------------------------------------- step 2

    def _lock_targets(self, locks: ExitStack) -> None:
        """Lock every table of the plan (in a fixed order); with ``skip_locked`` a table another writer holds is
        dropped from the plan (and reported in ``skipped_tables``) instead of failing the run."""
        skipped = set()
        for target in sorted(self.plan.targets):
            try:
                locks.enter_context(self.sink.lock(target, owner=f"pipeline {self.config.name!r} run {self.run_id}"))
            except TableLockedError as exc:
                if not self.skip_locked:
                    raise
                self.log.info("%s is locked by another writer: left out of this run (%s)", target, exc)
                skipped.add(target)
        if skipped:
            self.plan = self.plan.restrict(set(self.plan.targets) - skipped)
            self.run.skipped_tables = sorted(skipped)

    def _prepare_targets(self, checkpoints: dict, work: dict) -> dict[TableId, TableResult]:
        """Create the missing tables; an existing one must still take what the pipeline produces."""
        results = {}
        for target, target_plan in self.plan.targets.items():
            description = self.sink.ensure_table(target, target_plan.schema, target_plan.primary_keys,
                                                 target_plan.partition_keys, target_plan.options, target_plan.comment)
            if not description.created:
                checkpoint = checkpoints.get(target)
                if checkpoint is None or not checkpoint.schemas or _follows_new_columns(self.config):
                    _check_existing_schema(target_plan, description.schema)
                else:
                    _check_existing_schema(target_plan, description.schema, unapplied=_star_columns(target_plan))
                self._coerce_into_table(target)
            results[target] = TableResult(
                target=target, sources=[s.source.table_id for s in target_plan.sources], phase=PHASE_BINLOG,
                committed=False, snapshot_id=None, offset=None, schema=description.schema,
                primary_keys=description.primary_keys, partition_keys=description.partition_keys,
                created=description.created, paimon_types=description.paimon_types,
                checkpoint=checkpoint.offset if (checkpoint := checkpoints.get(target)) is not None else None)
            self.base_snapshots[target] = None if description.created else self.sink.latest_snapshot_id(target)
            # a run's writes are kept for its checks, and, unless it snapshots (whose files the statistics count),
            # to count the table's rows from its changes (lakecdc.runtime.row_counts)
            if self.record_writes or work[target].kind != _table_work.SNAPSHOT:
                self.recorded[target] = self.sink.record_writes(target)
        return results

    def _coerce_into_table(self, target: TableId) -> None:
        """Rows of an existing table's sources go into its stored schema, by column name (after ignored, tolerated
        or lenient schema changes the two differ)."""
        for source_plan in self.plan.targets[target].sources:  # not every source of the pipeline: N^2 at scale
            if len(source_plan.targets) == 1:
                coerce_into_table(self.sink, source_plan, target)

    # ----------------------------------------------------------------------------------------------- step 3

    def _read_binlogs(self, work: dict, checkpoints: dict, head: BinlogOffset) -> None:
        """The binlog reads of the tables with a checkpoint (one read) and of those starting from a binlog position
        (one read per start), then one commit per table that got changes or a new checkpoint."""
        try:
            # (BINLOG work always has its checkpoint's offset)
            binlog_starts = {t: w.offset for t, w in work.items()
                             if w.kind == _table_work.BINLOG and w.offset is not None}
            binlog_targets = set(binlog_starts)
            if binlog_targets:
                self._read_binlog(binlog_targets, dict(binlog_starts), head,
                                  self._schema_applier(binlog_targets, binlog_starts),
                                  xa_scan_starts={t: c.xa_scan_start for t in binlog_targets
                                                  if (c := checkpoints.get(t)) is not None})
                self.run.binlog_reads += 1
            fresh = {t: w for t, w in work.items() if w.kind == _table_work.FRESH_BINLOG}
            for (start, skip_events, skip_rows), group in _by_start(fresh).items():
                evolver = self._schema_applier(group, {t: None for t in group})
                self._read_fresh_binlog(group, start, head, skip_events, skip_rows, evolver)
                self.run.binlog_reads += 1
            failpoint("before-commit")
            self._commit_writers()
        except BaseException:
            self._abort_writers()
            raise

    def _read_fresh_binlog(self, targets: set[TableId], start: BinlogOffset, head: BinlogOffset, skip_events: int,
                           skip_rows: int, evolver: SchemaChangeApplier) -> None:
        """Tables without checkpoint that start from a binlog position (startup modes other than initial/snapshot,
        binlog-only newly added tables): read from ``start`` to the head; their first checkpoint is where it
        ended."""
        source_plans = self._feeding(targets)
        self.log.info("binlog from %s to %s for %s (no checkpoint yet)", start, head,
                      ", ".join(map(str, sorted(targets))))
        reader = self.source.read_binlog({sid: p.source for sid, p in source_plans.items()},
                                         {sid: start for sid in source_plans}, max(head, start),
                                         skip_events=skip_events, skip_rows=skip_rows, track_schemas=True)
        for batch in reader:
            if isinstance(batch, TableSchemaChange):
                self._track_open_xa(reader, targets)  # commits before the DDL keep the open XA transactions
                evolver.apply(batch, set(self.writers))
                continue
            assert isinstance(batch, ChangeBatch)  # not a follow read: no BinlogCheckpoint
            self._apply(source_plans[batch.table.table_id], batch, targets)
        end = reader.end_offset if reader.end_offset is not None else start
        self._record_fallbacks(reader, source_plans, targets)
        self._track_open_xa(reader, targets)
        for target in targets:
            if target in evolver.dropped:
                continue
            self._writer(target)  # the first checkpoint is committed even without changes
            self.results[target].offset = end

    def _read_binlog(self, targets: set[TableId], checkpoints: dict[TableId, BinlogOffset], head: BinlogOffset | None,
                     evolver: SchemaChangeApplier, xa_scan_starts: dict[TableId, BinlogOffset | None],
                     follow: Follow | None = None,
                     on_checkpoint: Callable[[BinlogOffset], None] | None = None) -> None:
        """Read the binlog from the checkpoints to ``head`` into the writers; the caller commits them. Follow mode
        (``head`` None): read with no end until ``follow.should_stop()``, and call ``on_checkpoint(offset)`` at
        every checkpoint the reader reaches, to commit what was read so far."""
        source_plans = self._feeding(targets)
        # A source feeding several targets starts at the oldest of their checkpoints: replaying full row images on a
        # primary-key table converges to the same state, so the target that was further ahead stays correct.
        start_offsets = {sid: min(checkpoints[t] for t in p.targets if t in targets)
                         for sid, p in source_plans.items()}
        self.log.info("binlog from %s to %s", min(start_offsets.values()), head or "(following)")
        # Batches never span a checkpoint, so each goes exactly to the targets it is new for: a target further
        # ahead does not get changes again (on an append table or with SOFT_DELETE a replay would add rows).
        reader = self.source.read_binlog(
            {sid: p.source for sid, p in source_plans.items()}, start_offsets, head,
            cuts={checkpoints[t] for t in targets}, track_schemas=True,
            xa_scan_start=min((x for x in xa_scan_starts.values() if x is not None), default=None),
            checkpoint_seconds=self.config.checkpoint_interval_seconds if follow else None,
            should_stop=follow.should_stop if follow else None)
        for batch in reader:
            if isinstance(batch, TableSchemaChange):
                self._track_open_xa(reader, targets)  # commits before the DDL keep the open XA transactions
                evolver.apply(batch, set(self.writers))
                continue
            if isinstance(batch, BinlogCheckpoint):
                self._track_open_xa(reader, targets)
                self._record_fallbacks(reader, source_plans, targets, at_checkpoint=True)
                self._checkpoint_targets(targets, batch.offset, checkpoints, evolver)
                assert on_checkpoint is not None  # only follow reads yield checkpoints
                on_checkpoint(batch.offset)
                continue
            fresh = {t for t in targets if batch.first_commit is None or batch.first_commit > checkpoints[t]}
            self._apply(source_plans[batch.table.table_id], batch, fresh)
        self.log.info("binlog read %d row changes up to %s", reader.rows_read, reader.end_offset)
        self._record_fallbacks(reader, source_plans, targets)
        self._track_open_xa(reader, targets)
        if follow is None:  # a follow read ended at its last checkpoint, already committed
            assert reader.end_offset is not None  # set by the read
            self._checkpoint_targets(targets, reader.end_offset, checkpoints, evolver)

    def _feeding(self, targets: set[TableId]) -> dict[TableId, SourcePlan]:
        """The source tables that feed any of ``targets``."""
        return {sid: p for sid, p in self.plan.sources.items() if any(t in targets for t in p.targets)}

    def _checkpoint_targets(self, targets: set[TableId], reached: BinlogOffset, checkpoints: dict,
                            evolver: SchemaChangeApplier) -> None:
        """The binlog was read up to ``reached``: give the tables that take a commit there their offset (and a
        writer, for a commit that carries only the new checkpoint)."""
        for target in targets:
            if target in evolver.dropped:
                continue
            if target in self.writers or target in evolver.consumed:
                # a DDL with no row after it still moves the checkpoint: the commit carries the new schema history
                self._writer(target)
                self.results[target].offset = max(reached, checkpoints[target])
            elif idle_checkpoint_due(checkpoints[target], reached):
                # A table without changes keeps its checkpoint, so every later run re-reads the binlog from there;
                # once that stretch is long (IDLE_CHECKPOINT_BYTES), an empty snapshot moves its checkpoint forward.
                self._writer(target)
                self.results[target].offset = reached
                self.log.info("%s had no changes; moving its checkpoint to %s", target, reached)

    def _record_fallbacks(self, reader, source_plans: dict[TableId, SourcePlan], targets: set[TableId],
                          at_checkpoint: bool = False) -> None:
        """Logs the read's decoder fallbacks and adds them to the results of the targets their sources feed.
        ``at_checkpoint`` (follow mode): those since the last checkpoint, which go with the commit made there; the
        reader's counts then start again, so the end of the read does not count them twice."""
        report_fallbacks(reader, self.log, lambda source_id: [self.results[t].decoder_fallbacks
                                                              for t in source_plans[source_id].targets
                                                              if t in targets],
                         during=" since the last checkpoint" if at_checkpoint else "", log_none=not at_checkpoint)
        if at_checkpoint:
            reader.decoder_fallbacks.clear()

    def _track_open_xa(self, reader, targets: set[TableId]) -> None:
        """Every checkpoint this read writes records where the oldest XA transaction still open starts: a later
        read scans from there to know its rows when the XA COMMIT comes (lakecdc.source.binlog)."""
        for target in targets:
            self.results[target].xa_scan_start = reader.open_xa_start

    def _schema_applier(self, targets: set[TableId], checkpoints: dict) -> SchemaChangeApplier:
        """The SchemaChangeApplier of one binlog read, wired to this run's writers and results."""
        evolver = SchemaChangeApplier(self.config, self.plan, self.sink, set(targets), dict(checkpoints),
                                      commit=self._commit_at, truncate=self._truncate_at, log=self.log,
                                      failpoint=failpoint)
        self.evolvers.append(evolver)
        return evolver

    def _commit_at(self, target: TableId, offset: BinlogOffset) -> None:
        """Commit ``target``'s open writer with its checkpoint at ``offset`` (before a schema change)."""
        self.results[target].offset = offset
        self._commit(target, self.writers.pop(target))

    def _truncate_at(self, target: TableId, offset: BinlogOffset) -> None:
        """Truncate ``target`` in one snapshot checkpointed at ``offset`` (a TRUNCATE TABLE upstream)."""
        result = self.results[target]
        if target in self.writers:
            self.writers.pop(target).abort()
        result.offset = offset
        result.snapshot_id = self.sink.truncate(target, self._properties(result))
        result.committed = True
        result.commits += 1

    # ----------------------------------------------------------------------------------------------- step 4

    def _run_initial_loads(self, work: dict, keys: dict) -> None:
        """Chunked snapshots of the tables that need one, each committing as it goes (lakecdc.runtime.commit_groups)."""
        targets = sorted(t for t, w in work.items() if w.kind == _table_work.SNAPSHOT)
        if not targets:
            return
        estimates = estimate_rows(self.source.options, sorted({s for t in targets for s in work[t].progress}))
        loads = []
        for target in targets:
            result = self.results[target]
            replacement = replacement_for(
                self.config, self.sink, self.plan.targets[target],
                estimated_rows=sum(estimates.get(s, 0) for s in work[target].progress)) \
                if work[target].replace else None
            ctx = _commit_groups.InitialLoadContext(
                config=self.config, plan=self.plan, source=self.source, sink=self.sink, run_id=self.run_id,
                captured=self.captured,
                apply=functools.partial(write_batch, result=result),
                failpoint=failpoint, log=self.log,
                progress_report=lambda table_id: SnapshotProgress(table_id, estimates.get(table_id), self.log),
                run_head=self.run.head, replacement=replacement)
            result.phase = PHASE_SNAPSHOT
            result.snapshot_complete = False
            loads.append((ctx, work[target]))
        # small tables share commit groups (one snapshot connection and one binlog read for several tables)
        for target, outcome in _commit_groups.run_initial_loads(loads, keys, estimates).items():
            _add_snapshot_outcome(self.results[target], outcome)

    # ----------------------------------------------------------------------------------------------- step 5

    def _writer(self, target: TableId) -> TableWriter:
        if target not in self.writers:
            self.writers[target] = self.sink.open_writer(target)
        return self.writers[target]

    def _apply(self, source_plan: SourcePlan, batch: ChangeBatch, targets: set[TableId]) -> None:
        """Transform one batch of changes and write it to those of its source's tables that are in ``targets``."""
        wanted = [t for t in source_plan.targets if t in targets]
        if not wanted or batch.num_rows == 0:
            return
        output = source_plan.transform.apply(batch)
        source_id = source_plan.source.table_id
        for target in wanted:
            result = self.results[target]
            _count_changes(batch, result.counts)
            if batch.last_commit is not None:
                seen = result.last_changes.get(source_id)
                result.last_changes[source_id] = batch.last_commit if seen is None else max(seen, batch.last_commit)
            if output.num_rows:
                self._writer(target).write(output)
                result.rows_written += output.num_rows
                count_partitions(output, result.partition_keys, result.partitions)

    def _commit_writers(self) -> None:
        """One commit per open writer, each carrying its table's checkpoint."""
        for target in sorted(self.writers):
            self._commit(target, self.writers[target])
            failpoint("between-commits")
        self.writers.clear()

    def _abort_writers(self) -> None:
        for writer in self.writers.values():
            writer.abort()

    def _commit(self, target: TableId, writer: TableWriter) -> None:
        result = self.results[target]
        result.snapshot_id = writer.commit(self._properties(result))
        result.committed = True
        result.commits += 1
        self.log.info("committed %s: snapshot %s at %s (%d inserted, %d updated, %d deleted)", target,
                      result.snapshot_id, result.offset, result.counts.inserted, result.counts.updated,
                      result.counts.deleted)

    def _properties(self, result: TableResult) -> dict[str, str]:
        """The checkpoint a commit of ``result``'s table carries, with the schema history: each source table's
        schema as of this checkpoint."""
        schemas = {str(s): self.plan.sources[s].source.to_json() for s in result.sources if s in self.plan.sources}
        if result.offset is None:
            raise ValueError(f"commit of {', '.join(map(str, result.sources))} without a checkpoint offset")
        return checkpoint_properties(
            result.offset, phase=result.phase, pipeline=self.config.name, run_id=self.run_id,
            source_tables=[str(s) for s in result.sources], counts=result.counts, captured=self.captured,
            startup_mode=self.config.source.startup_mode, source_schemas=schemas,
            xa_scan_start=result.xa_scan_start)

    # ----------------------------------------------------------------------------------------------- step 6

    def _count_rows(self) -> None:
        """The row count of each table the run committed to, after the upkeep, which changes no row (the locks
        keep other writers out): from the count the previous run left and this run's changes, else from the file
        statistics, else read back once (lakecdc.runtime.row_counts)."""
        for result in self.results.values():
            if result.committed and self.sink.table_exists(result.target):
                result.row_count = row_count_after_run(self.sink, result.target,
                                                       self.base_snapshots.get(result.target),
                                                       self.recorded.get(result.target))

    def _finish_results(self) -> None:
        """What the results need beyond the commits: the stored columns of the tables whose schema the run changed,
        and what each table's commits wrote (recording goes on per commit in follow mode)."""
        for index, evolver in enumerate(self.evolvers):
            for target, met in evolver.ddl.items():
                reported = self._changes_reported.get((index, target), 0)
                result = self.results.get(target)
                if result is None or reported == len(met):
                    continue
                self._changes_reported[(index, target)] = len(met)
                result.ddl += met[reported:]
                applied = [change for ddl in met[reported:] for change in ddl.paimon]
                result.schema_changes += applied
                if applied and self.sink.table_exists(target):
                    description = self.sink.describe(target)
                    result.schema, result.paimon_types = description.schema, description.paimon_types
        for target, result in self.results.items():
            result.plan = self.plan.targets.get(target)
            recorded = self.sink.stop_recording(target)
            if self.record_writes:
                result.written = recorded

    def _upkeep(self, targets: list[TableId]) -> None:
        """Upkeep of the tables that just committed, when due (this run holds their locks)."""
        for target, outcome in upkeep_after_commits(self.config, self.sink, targets, failpoint=failpoint,
                                                    log=self.log).items():
            self.results[target].upkeep = outcome

    # ----------------------------------------------------------------------------------------------- follow mode

    def _start_follow(self, follow: Follow) -> None:
        """After the first micro-batch: report its commits, then follow unless already asked to stop."""
        if follow.on_commit is not None and self.run.committed:
            follow.on_commit([replace(t) for t in self.run.committed])
        if not follow.should_stop():
            self._follow(follow)

    def _follow(self, follow: Follow) -> None:
        """Under the first micro-batch's locks: follow the binlog from every table's checkpoint and commit at each
        checkpoint the reader reaches (the commits and the schema-change handling of a micro-batch)."""
        checkpoints, xa_scan_starts = self._follow_checkpoints()
        if not checkpoints:
            self.log.warning("pipeline %r: no table to follow", self.config.name)
            return
        targets = set(checkpoints)
        # the run's totals (the first micro-batch and every commit after it) for its summary and result
        totals = {t: _add_into(_counts_only(self.results[t]), self.results[t]) for t in targets}
        for target in targets:  # each checkpoint reports its own counts, as a binlog commit
            _reset_counts(self.results[target])
            self.results[target].phase = PHASE_BINLOG
        evolver = self._schema_applier(targets, dict(checkpoints))
        commits = {t: self.results[t].commits for t in targets}
        if self.record_writes:  # each follow commit is checked on its own
            for target in targets:
                self.sink.record_writes(target)
        self.sink.prepare_writes()  # the first micro-batch may have written nothing: import the writer's stack now

        def on_checkpoint(offset: BinlogOffset) -> None:
            self._commit_checkpoint(targets, checkpoints, commits, evolver, follow, totals)

        self.log.info("following the binlog of %d table(s), a commit every %g s", len(targets),
                      self.config.checkpoint_interval_seconds)
        try:
            self._read_binlog(targets, checkpoints, None, evolver, xa_scan_starts, follow, on_checkpoint)
        except BaseException:
            self._abort_writers()
            raise
        self.run.binlog_reads += 1
        for target, total in totals.items():  # the result (and the summary) count what the whole run committed
            _take_counts(self.results[target], total)

    def _follow_checkpoints(self) -> tuple[dict[TableId, BinlogOffset], dict[TableId, BinlogOffset | None]]:
        """Where each table's follow read starts (its checkpoint and oldest open XA after the first micro-batch)."""
        checkpoints: dict[TableId, BinlogOffset] = {}
        xa_scan_starts: dict[TableId, BinlogOffset | None] = {}
        for target in sorted(self.plan.targets):
            checkpoint = read_checkpoint(self.sink.checkpoint(target)) if self.sink.table_exists(target) else None
            if checkpoint is None or checkpoint.snapshot_pending:
                # only a table dropped upstream (and in Paimon) during the first micro-batch gets here
                self.log.info("%s has no checkpoint after the first micro-batch: not followed", target)
                continue
            checkpoints[target] = checkpoint.offset
            xa_scan_starts[target] = checkpoint.xa_scan_start
        return checkpoints, xa_scan_starts

    def _commit_checkpoint(self, targets: set[TableId], checkpoints: dict[TableId, BinlogOffset],
                           commits: dict[TableId, int], evolver: SchemaChangeApplier, follow: Follow,
                           totals: dict[TableId, TableResult]) -> None:
        """A follow read reached a checkpoint: commit what it read, then upkeep and report the tables that
        committed. ``checkpoints`` and ``commits`` are the read's, moved forward here; ``totals`` add up what
        each table's commits counted."""
        self._commit_writers()
        evolver.consumed.clear()
        committed = sorted(t for t in targets if self.results[t].commits > commits[t])
        if not committed:
            return
        for target in committed:
            committed_offset = self.results[target].offset
            assert committed_offset is not None  # every commit carries one (_properties)
            checkpoints[target] = committed_offset
            commits[target] = self.results[target].commits
        self.run.follow_commits += 1
        failpoint("follow-commit")
        self._upkeep(committed)
        for target in committed:
            # from the file statistics only: a read-back at every checkpoint would cost more than the commit
            self.results[target].row_count = self.sink.row_count_from_statistics(target)
        self._finish_results()
        if self.record_writes:
            for target in targets:
                self.sink.record_writes(target)
        if follow.on_commit is not None:
            follow.on_commit([replace(self.results[t]) for t in committed])
        for target in committed:
            _add_into(totals[target], self.results[target])
            _reset_counts(self.results[target])


def _counts_only(result: TableResult) -> TableResult:
    """An empty tally of what a follow run commits to ``result``'s table."""
    return TableResult(target=result.target, sources=list(result.sources), phase=result.phase, committed=False,
                       snapshot_id=None, offset=None)


def _add_into(total: TableResult, part: TableResult) -> TableResult:
    """Add what one commit (``part``) counted to ``total``: changes, rows written, partitions, DDL, fallbacks."""
    for name in ("inserted", "updated", "deleted"):
        setattr(total.counts, name, getattr(total.counts, name) + getattr(part.counts, name))
    total.rows_written += part.rows_written
    for name, kinds in part.partitions.items():
        into = total.partitions.setdefault(name, {})
        for kind, rows in kinds.items():
            into[kind] = into.get(kind, 0) + rows
    total.ddl += part.ddl
    total.schema_changes += part.schema_changes
    for cause, events in part.decoder_fallbacks.items():
        total.decoder_fallbacks[cause] = total.decoder_fallbacks.get(cause, 0) + events
    for source, offset in part.last_changes.items():
        total.last_changes[source] = max(offset, total.last_changes.get(source, offset))
    return total


def _take_counts(result: TableResult, total: TableResult) -> None:
    """``result`` (the table's latest commit) with the counts of the whole run from ``total``."""
    result.counts, result.rows_written, result.partitions = total.counts, total.rows_written, total.partitions
    result.ddl, result.schema_changes = total.ddl, total.schema_changes
    result.decoder_fallbacks, result.last_changes = total.decoder_fallbacks, total.last_changes


def _follows_new_columns(config: PipelineConfig) -> bool:
    """Whether every upstream column the transform passes on reaches the Paimon table (new columns and renames
    are applied, or, in exception mode, fail the run): then a produced column the table lacks can only come from a
    changed projection. In ignore mode, or with add.column / rename.column excluded, a column new upstream stays
    out of the table by design."""
    return config.schema_change_behavior != IGNORE and {ADD_COLUMN, RENAME_COLUMN} <= included_types(config)


def _star_columns(target_plan: TargetPlan) -> set[str]:
    """The produced columns that pass a source column of the same name through ``*``: the only ones a schema
    change that the behaviour does not apply can leave out of the table."""
    names: set[str] = set()
    for source_plan in target_plan.sources:
        transform = getattr(source_plan.transform, "_inner", source_plan.transform)
        if getattr(transform, "star", True):
            names |= {name for name, read in transform.column_sources().items() if read == [name]}
    return names


def _check_existing_schema(target_plan: TargetPlan, stored: pa.Schema,
                           unapplied: frozenset[str] | set[str] = frozenset()) -> None:
    """An existing table must still take every column the transform produces (``unapplied``: columns it may lack
    because the schema change behaviour keeps new upstream columns out), else rows would lose a column silently."""
    stored_names = stored.names
    for column in target_plan.schema:
        if column.name not in stored_names and column.name not in unapplied:
            raise SinkError(
                f"Paimon table {target_plan.target} has no column {column.name!r} that the pipeline now produces; "
                "the table was created from an older pipeline or source schema (or the column was added upstream "
                "before lakecdc kept a schema history). Nothing was written. Change the projection back, or bring "
                f"the table to the pipeline's schema with `lakecdc resnapshot PIPELINE.yaml {target_plan.target}` "
                "(schema.change.behavior other than ignore), or drop the table and run again")


def _count_changes(batch: ChangeBatch, counts: TableCounts) -> None:
    kinds = pc.value_counts(batch.data.column(OP_COLUMN))
    for item in kinds.to_pylist():
        kind, n = item["values"], item["counts"]
        if kind == "+I":
            counts.inserted += n
        elif kind == "+U":
            counts.updated += n
        elif kind == "-D":
            counts.deleted += n


def write_batch(source_plan: SourcePlan, batch: ChangeBatch, writer: TableWriter, counts: TableCounts,
                 result: TableResult) -> int:
    """Transform one batch and write it to one table's open writer; returns the rows written."""
    if batch.num_rows == 0:
        return 0
    output = source_plan.transform.apply(batch)
    _count_changes(batch, counts)
    if output.num_rows:
        writer.write(output)
        count_partitions(output, result.partition_keys, result.partitions)
    return output.num_rows


def _add_snapshot_outcome(result: TableResult, outcome: _commit_groups.InitialLoadOutcome) -> None:
    """What a table's chunked snapshot did, added to what the run did to the table before."""
    result.snapshot_complete = outcome.complete
    result.commits += outcome.commits
    result.committed = result.committed or outcome.commits > 0
    result.snapshot_id = outcome.snapshot_id if outcome.snapshot_id is not None else result.snapshot_id
    result.offset = outcome.offset
    result.rows_written += outcome.rows_written
    result.snapshot_rows += outcome.snapshot_rows
    for name in ("inserted", "updated", "deleted"):
        setattr(result.counts, name, getattr(result.counts, name) + getattr(outcome.counts, name))
    for cause, events in outcome.decoder_fallbacks.items():
        result.decoder_fallbacks[cause] = result.decoder_fallbacks.get(cause, 0) + events


def _by_start(fresh: dict) -> dict[tuple, set[TableId]]:
    """Tables without checkpoint grouped by where their binlog read starts (one read per group)."""
    groups: dict[tuple, set[TableId]] = {}
    for target, item in fresh.items():
        groups.setdefault((item.offset, item.skip_events, item.skip_rows), set()).add(target)
    return groups


def _reset_counts(result: TableResult) -> None:
    result.counts = TableCounts()
    result.schema_changes = []
    result.ddl = []
    result.last_changes = {}
    result.rows_written = 0
    result.partitions = {}
    result.row_count = None
    result.upkeep = None
    result.decoder_fallbacks = {}


def schema_history(checkpoints: dict, options) -> dict[TableId, SourceTable]:
    """Each source table's schema as of the oldest checkpoint that records one (the binlog read of a source starts
    at the oldest checkpoint of its tables)."""
    history: dict[TableId, tuple[BinlogOffset, dict]] = {}
    for checkpoint in checkpoints.values():
        if checkpoint is None or checkpoint.snapshot_pending:
            continue
        for table_id, data in checkpoint.schemas.items():
            if table_id not in history or checkpoint.offset < history[table_id][0]:
                history[table_id] = (checkpoint.offset, data)
    return {t: source_table_from_json(data, options) for t, (_, data) in history.items()}
