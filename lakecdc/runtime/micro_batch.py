"""One micro-batch of a pipeline, from the checkpoint to the commit.

1. Check the server, resolve the captured tables, compile the transforms (all errors before any write).
2. Lock every target table, create missing ones, read each table's checkpoint from its latest snapshot, and
   decide what each does (lakecdc.runtime.snapshots: startup mode, newly added tables, unfinished snapshots).
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
from lakecdc.model import OP_COLUMN, BinlogOffset, ChangeBatch, SourceTable, TableCounts, TableId
from lakecdc.runtime import snapshots as _snapshots
from lakecdc.runtime.checkpoint import PHASE_BINLOG, PHASE_SNAPSHOT, checkpoint_properties, read_checkpoint
from lakecdc.runtime.connect import open_sink, open_source
from lakecdc.runtime.plan import PipelinePlan, SourcePlan, TargetPlan, build_plan, planned_targets
from lakecdc.runtime.report import (SnapshotProgress, count_partitions, estimate_rows, log_summary,
                                    report_fallbacks)
from lakecdc.runtime.upkeep import upkeep_after_commits
from lakecdc.sink import PaimonSink, TableWriter
from lakecdc.source import BinlogCheckpoint, MySqlSource, TableSchemaChange

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


def run_micro_batch(config: PipelineConfig, *, targets: set[TableId] | None = None, run_id: str | None = None,
                    log: logging.Logger | logging.LoggerAdapter | None = None) -> RunResult:
    """Run one micro-batch of ``config`` (optionally only for some target tables) and return what it did."""
    return _run(config, targets, run_id, log, None)


def follow_pipeline(config: PipelineConfig, *, should_stop: Callable[[], bool] = lambda: False,
                    on_commit: Callable[[list[TableResult]], None] | None = None,
                    targets: set[TableId] | None = None, run_id: str | None = None,
                    log: logging.Logger | logging.LoggerAdapter | None = None) -> RunResult:
    """Follow mode: one micro-batch (snapshots first where a table needs one), then, under the same table locks,
    keep reading the binlog and commit every ``pipeline.checkpoint-interval`` (each commit carries the offset and
    schema history it reached, as a micro-batch's does) until ``should_stop()`` returns True at a checkpoint.
    ``on_commit`` gets the tables each checkpoint committed, with that checkpoint's counts."""
    return _run(config, targets, run_id, log, Follow(should_stop, on_commit))


def _run(config: PipelineConfig, targets: set[TableId] | None, run_id: str | None,
         log: logging.Logger | logging.LoggerAdapter | None, follow: Follow | None) -> RunResult:
    source = open_source(config)
    # The start-up's short queries (server checks, table lists and descriptions, the head, the binlog files) share
    # one connection, closed before the first row is read; reads open their own connections as before.
    source.share_connection()
    try:
        return _run_with(source, config, targets, run_id, log, follow)
    finally:
        source.close()


def _run_with(source: MySqlSource, config: PipelineConfig, targets: set[TableId] | None, run_id: str | None,
              log: logging.Logger | logging.LoggerAdapter | None, follow: Follow | None) -> RunResult:
    log = log or logger
    run_id = run_id or uuid.uuid4().hex
    started = time.monotonic()
    source.check_server()
    sink = open_sink(config)
    stored = _stored_checkpoints(config, sink, planned_targets(config, source))
    history = schema_history(stored, source.options)
    # decode the binlog after each checkpoint with the schema its rows were written with (and keep reading tables
    # dropped upstream up to their DROP TABLE)
    full_plan = build_plan(config, source, schemas=history)
    admission = _snapshots.admit_tables(config, full_plan, stored, log)
    plan = full_plan.restrict(set(targets)) if targets is not None else full_plan
    plan = _snapshots.without_sources(plan, admission.ignored)
    keys = {sid: source.chunk_key(p.source) for sid, p in plan.sources.items()}  # bad chunk-key options fail here
    run = RunResult(config.name, run_id, None, {}, ignored_tables=sorted(admission.ignored))

    with ExitStack() as locks:
        for target in sorted(plan.targets):
            locks.enter_context(sink.lock(target, owner=f"pipeline {config.name!r} run {run_id}"))
        checkpoints = {t: read_checkpoint(sink.checkpoint(t)) for t in plan.targets}
        head = run.head = source.head_offset()
        # what each table does (startup positions resolved, purged binlogs found) before any table is created
        work = _snapshots.plan_work(config, plan, checkpoints, admission, source, head, log)
        _snapshots.check_binlog_available(
            source, {t: w.offset for t, w in work.items() if w.kind in (_snapshots.BINLOG, _snapshots.SNAPSHOT)
                     and w.offset is not None}, sink.warehouse)
        source.close()  # the end of the start-up's shared connection
        results = _prepare_targets(config, plan, sink, checkpoints)
        run.tables = results
        captured = sorted(str(t) for t in admission.captured)
        writers: dict[TableId, TableWriter] = {}
        try:
            # (BINLOG work always has its checkpoint's offset)
            binlog_starts = {t: w.offset for t, w in work.items()
                             if w.kind == _snapshots.BINLOG and w.offset is not None}
            binlog_targets = set(binlog_starts)
            if binlog_targets:
                evolver = _schema_applier(config, plan, sink, run_id, captured, binlog_targets,
                                          dict(binlog_starts), writers, results, log)
                _run_binlog(plan, source, sink, binlog_targets, dict(binlog_starts), head,
                            writers, results, log, evolver,
                            xa_scan_starts={t: c.xa_scan_start for t in binlog_targets
                                            if (c := checkpoints.get(t)) is not None})
                run.binlog_reads += 1
            fresh = {t: w for t, w in work.items() if w.kind == _snapshots.FRESH_BINLOG}
            for (start, skip_events, skip_rows), group in _by_start(fresh).items():
                evolver = _schema_applier(config, plan, sink, run_id, captured, group, {t: None for t in group},
                                          writers, results, log)
                _run_fresh_binlog(plan, source, sink, group, start, head, skip_events, skip_rows, writers, results,
                                  log, evolver)
                run.binlog_reads += 1
            failpoint("before-commit")
            for target in sorted(writers):
                _commit(config, run_id, target, writers[target], results[target], log, captured, plan)
                failpoint("between-commits")
        except BaseException:
            for writer in writers.values():
                writer.abort()
            raise
        _run_snapshots(config, plan, source, sink, run_id, captured, work, keys, results, log)
        failpoint("after-commit")
        # table upkeep (compaction, manifests, expiry, orphans) under the locks this run holds
        kept_up = upkeep_after_commits(config, sink, [r.target for r in results.values()
                                                      if r.committed and sink.table_exists(r.target)],
                                       failpoint=failpoint, log=log)
        for target, outcome in kept_up.items():
            results[target].upkeep = outcome
        # after the upkeep, which changes no row (the locks keep other writers out): a bucket it compacted has its
        # count in the file statistics instead of a read back (lakecdc.sink.reader.row_count)
        for result in results.values():
            if result.committed and sink.table_exists(result.target):
                result.row_count = sink.row_count(result.target)
        if follow is not None:
            if follow.on_commit is not None and run.committed:
                follow.on_commit([replace(t) for t in run.committed])
            if not follow.should_stop():
                _follow(config, plan, source, sink, run, captured, follow, log)
    log_summary(results, time.monotonic() - started, log)
    run.seconds = time.monotonic() - started
    return run


def _prepare_targets(config: PipelineConfig, plan: PipelinePlan, sink: PaimonSink,
                     checkpoints: dict) -> dict[TableId, TableResult]:
    results = {}
    for target, target_plan in plan.targets.items():
        description = sink.ensure_table(target, target_plan.schema, target_plan.primary_keys,
                                        target_plan.partition_keys, target_plan.options, target_plan.comment)
        if not description.created:
            checkpoint = checkpoints.get(target)
            if checkpoint is None or not checkpoint.schemas or _follows_new_columns(config):
                _check_existing_schema(target_plan, description.schema)
            else:
                _check_existing_schema(target_plan, description.schema, unapplied=_star_columns(target_plan))
            _coerce_into_table(plan, sink, target)
        results[target] = TableResult(
            target=target, sources=[s.source.table_id for s in target_plan.sources], phase=PHASE_BINLOG,
            committed=False, snapshot_id=None, offset=None, schema=description.schema,
            primary_keys=description.primary_keys, partition_keys=description.partition_keys,
            created=description.created)
    return results


def _follows_new_columns(config: PipelineConfig) -> bool:
    """Whether every upstream column the transform passes on reaches the Paimon table (new columns and renames
    are applied, or, in exception mode, fail the run): then a produced column the table lacks can only come from a
    changed projection. In ignore mode, or with add.column / rename.column excluded, a column new upstream stays
    out of the table by design."""
    from lakecdc.runtime.schema_evolution import IGNORE, included_types
    from lakecdc.source.ddl import ADD_COLUMN, RENAME_COLUMN

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


def _coerce_into_table(plan: PipelinePlan, sink: PaimonSink, target: TableId) -> None:
    """Rows of an existing table's sources go into its stored schema, by column name (after ignored, tolerated or
    lenient schema changes the two differ)."""
    from lakecdc.runtime.schema_evolution import coerce_into_table

    for source_plan in plan.sources.values():
        if target in source_plan.targets and len(source_plan.targets) == 1:
            coerce_into_table(sink, source_plan, target)


def _check_existing_schema(target_plan: TargetPlan, stored: pa.Schema,
                           unapplied: frozenset[str] | set[str] = frozenset()) -> None:
    """An existing table must still take every column the transform produces (``unapplied``: columns it may lack
    because the schema change behaviour keeps new upstream columns out), else rows would lose a column silently."""
    from lakecdc.errors import SinkError

    stored_names = stored.names
    for column in target_plan.schema:
        if column.name not in stored_names and column.name not in unapplied:
            raise SinkError(
                f"Paimon table {target_plan.target} has no column {column.name!r} that the pipeline now produces; "
                "the table was created from an older pipeline or source schema (or the column was added upstream "
                "before lakecdc kept a schema history). Nothing was written. Change the projection back, or bring "
                f"the table to the pipeline's schema with `lakecdc resnapshot PIPELINE.yaml {target_plan.target}` "
                "(schema.change.behavior other than ignore), or drop the table and run again")


def _writer(target: TableId, sink: PaimonSink, writers: dict[TableId, TableWriter]) -> TableWriter:
    if target not in writers:
        writers[target] = sink.open_writer(target)
    return writers[target]


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


def _apply(source_plan: SourcePlan, batch: ChangeBatch, targets: set[TableId], sink: PaimonSink,
           writers: dict[TableId, TableWriter], results: dict[TableId, TableResult]) -> None:
    wanted = [t for t in source_plan.targets if t in targets]
    if not wanted or batch.num_rows == 0:
        return
    output = source_plan.transform.apply(batch)
    for target in wanted:
        _count_changes(batch, results[target].counts)
        if output.num_rows:
            _writer(target, sink, writers).write(output)
            results[target].rows_written += output.num_rows
            count_partitions(output, results[target].partition_keys, results[target].partitions)


def _write_batch(source_plan: SourcePlan, batch: ChangeBatch, writer: TableWriter, counts: TableCounts,
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


def _run_snapshots(config: PipelineConfig, plan: PipelinePlan, source: MySqlSource, sink: PaimonSink, run_id: str,
                   captured: list[str], work: dict, keys: dict, results: dict[TableId, TableResult], log) -> None:
    """Chunked snapshots of the tables that need one, each committing as it goes (lakecdc.runtime.snapshots)."""
    targets = sorted(t for t, w in work.items() if w.kind == _snapshots.SNAPSHOT)
    if not targets:
        return
    estimates = estimate_rows(source.options, sorted({s for t in targets for s in work[t].progress}))
    for target in targets:
        result = results[target]
        ctx = _snapshots.SnapshotContext(
            config=config, plan=plan, source=source, sink=sink, run_id=run_id, captured=captured,
            apply=functools.partial(_write_batch, result=result),
            failpoint=failpoint, log=log,
            progress_report=lambda table_id: SnapshotProgress(table_id, estimates.get(table_id), log))
        result.phase = PHASE_SNAPSHOT
        result.snapshot_complete = False
        outcome = _snapshots.run_snapshot(ctx, work[target], keys)
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
    groups: dict[tuple, set[TableId]] = {}
    for target, item in fresh.items():
        groups.setdefault((item.offset, item.skip_events, item.skip_rows), set()).add(target)
    return groups


def _run_fresh_binlog(plan: PipelinePlan, source: MySqlSource, sink: PaimonSink, targets: set[TableId],
                      start: BinlogOffset, head: BinlogOffset, skip_events: int, skip_rows: int,
                      writers: dict[TableId, TableWriter], results: dict[TableId, TableResult], log,
                      evolver) -> None:
    """Tables without checkpoint that start from a binlog position (startup modes other than initial/snapshot,
    binlog-only newly added tables): read from ``start`` to the head; their first checkpoint is where it ended."""
    source_plans = {sid: p for sid, p in plan.sources.items() if any(t in targets for t in p.targets)}
    log.info("binlog from %s to %s for %s (no checkpoint yet)", start, head, ", ".join(map(str, sorted(targets))))
    stop = max(head, start)
    reader = source.read_binlog({sid: p.source for sid, p in source_plans.items()},
                                {sid: start for sid in source_plans}, stop, skip_events=skip_events,
                                skip_rows=skip_rows, track_schemas=True)
    for batch in reader:
        if isinstance(batch, TableSchemaChange):
            _track_open_xa(reader, targets, results)  # commits before the DDL keep the open XA transactions
            evolver.apply(batch, set(writers))
            continue
        assert isinstance(batch, ChangeBatch)  # not a follow read: no BinlogCheckpoint
        _apply(source_plans[batch.table.table_id], batch, targets, sink, writers, results)
    end = reader.end_offset if reader.end_offset is not None else start
    _record_fallbacks(reader, source_plans, targets, results, log)
    _track_open_xa(reader, targets, results)
    for target in targets:
        if target in evolver.dropped:
            continue
        _writer(target, sink, writers)  # the first checkpoint is committed even without changes
        results[target].offset = end


def _run_binlog(plan: PipelinePlan, source: MySqlSource, sink: PaimonSink, targets: set[TableId],
                checkpoints: dict[TableId, BinlogOffset], head: BinlogOffset | None,
                writers: dict[TableId, TableWriter], results: dict[TableId, TableResult], log, evolver,
                xa_scan_starts: dict[TableId, BinlogOffset | None] | None = None,
                follow: tuple[float, Callable[[], bool], Callable[[BinlogOffset], None]] | None = None) -> None:
    """Read the binlog from the checkpoints to ``head`` into ``writers``; the caller commits them. Follow mode
    (``head`` None, ``follow`` = (checkpoint interval, should_stop, on_checkpoint)): read with no end and call
    ``on_checkpoint(offset)`` at every checkpoint the reader reaches, to commit what was read so far."""
    xa_scan_starts = xa_scan_starts or {}
    source_plans = {sid: p for sid, p in plan.sources.items() if any(t in targets for t in p.targets)}
    # A source feeding several targets starts at the oldest of their checkpoints: replaying full row images on a
    # primary-key table converges to the same state, so the target that was further ahead stays correct.
    start_offsets = {sid: min(checkpoints[t] for t in p.targets if t in targets)
                     for sid, p in source_plans.items()}
    log.info("binlog from %s to %s", min(start_offsets.values()), head or "(following)")
    # Batches never span a checkpoint, so each goes exactly to the targets it is new for: a target further ahead
    # does not get changes again (on an append table or with SOFT_DELETE a replay would add rows).
    reader = source.read_binlog({sid: p.source for sid, p in source_plans.items()}, start_offsets, head,
                                cuts={checkpoints[t] for t in targets}, track_schemas=True,
                                xa_scan_start=min((x for x in xa_scan_starts.values() if x is not None), default=None),
                                checkpoint_seconds=follow[0] if follow else None,
                                should_stop=follow[1] if follow else None)
    for batch in reader:
        if isinstance(batch, TableSchemaChange):
            _track_open_xa(reader, targets, results)  # commits before the DDL keep the open XA transactions
            evolver.apply(batch, set(writers))
            continue
        if isinstance(batch, BinlogCheckpoint):
            _track_open_xa(reader, targets, results)
            _checkpoint_targets(targets, batch.offset, checkpoints, writers, evolver, sink, results, log)
            assert follow is not None  # only follow reads yield checkpoints
            follow[2](batch.offset)
            continue
        fresh = {t for t in targets
                 if batch.first_commit is None or batch.first_commit > checkpoints[t]}
        _apply(source_plans[batch.table.table_id], batch, fresh, sink, writers, results)
    log.info("binlog read %d row changes up to %s", reader.rows_read, reader.end_offset)
    _record_fallbacks(reader, source_plans, targets, results, log)
    _track_open_xa(reader, targets, results)
    if follow is None:  # a follow read ended at its last checkpoint, already committed
        assert reader.end_offset is not None  # set by the read
        _checkpoint_targets(targets, reader.end_offset, checkpoints, writers, evolver, sink, results, log)


def _checkpoint_targets(targets: set[TableId], reached: BinlogOffset, checkpoints: dict, writers: dict,
                        evolver, sink: PaimonSink, results: dict[TableId, TableResult], log) -> None:
    """The binlog was read up to ``reached``: give the tables that take a commit there their offset (and a writer,
    for a commit that carries only the new checkpoint)."""
    for target in targets:
        if target in evolver.dropped:
            continue
        if target in writers or target in evolver.consumed:
            # a DDL with no row after it still moves the checkpoint: the commit carries the new schema history
            _writer(target, sink, writers)
            results[target].offset = max(reached, checkpoints[target])
        elif _far_behind(checkpoints[target], reached):
            # A table without changes keeps its checkpoint, so every later run re-reads the binlog from there;
            # once that stretch is long, an empty snapshot moves its checkpoint forward.
            _writer(target, sink, writers)
            results[target].offset = reached
            log.info("%s had no changes; moving its checkpoint to %s", target, reached)


def _record_fallbacks(reader, source_plans: dict[TableId, SourcePlan], targets: set[TableId],
                      results: dict[TableId, TableResult], log) -> None:
    """Logs the read's decoder fallbacks and adds them to the results of the targets their sources feed."""
    report_fallbacks(reader, log, lambda source_id: [results[t].decoder_fallbacks
                                                     for t in source_plans[source_id].targets if t in targets])


def _track_open_xa(reader, targets: set[TableId], results: dict[TableId, TableResult]) -> None:
    """Every checkpoint this read writes records where the oldest XA transaction still open starts: a later read
    scans from there to know its rows when the XA COMMIT comes (lakecdc.source.binlog)."""
    for target in targets:
        results[target].xa_scan_start = reader.open_xa_start


IDLE_CHECKPOINT_BYTES = 64 * 1024 * 1024


def _follow(config: PipelineConfig, plan: PipelinePlan, source: MySqlSource, sink: PaimonSink, run: RunResult,
            captured: list[str], follow: Follow, log) -> None:
    """After the first micro-batch, under its locks: follow the binlog from every table's checkpoint and commit at
    each checkpoint the reader reaches (the commits and the schema-change handling of a micro-batch)."""
    results = run.tables
    checkpoints: dict[TableId, BinlogOffset] = {}
    xa_scan_starts: dict[TableId, BinlogOffset | None] = {}
    for target in sorted(plan.targets):
        checkpoint = read_checkpoint(sink.checkpoint(target)) if sink.table_exists(target) else None
        if checkpoint is None or checkpoint.snapshot_pending:
            # only a table dropped upstream (and in Paimon) during the first micro-batch gets here
            log.info("%s has no checkpoint after the first micro-batch: not followed", target)
            continue
        checkpoints[target] = checkpoint.offset
        xa_scan_starts[target] = checkpoint.xa_scan_start
    if not checkpoints:
        log.warning("pipeline %r: no table to follow", config.name)
        return
    targets = set(checkpoints)
    for target in targets:  # each checkpoint reports its own counts, as a binlog commit
        _reset_counts(results[target])
        results[target].phase = PHASE_BINLOG
    writers: dict[TableId, TableWriter] = {}
    evolver = _schema_applier(config, plan, sink, run.run_id, captured, targets, dict(checkpoints), writers,
                              results, log)
    commits = {t: results[t].commits for t in targets}

    def on_checkpoint(offset: BinlogOffset) -> None:
        for target in sorted(writers):
            _commit(config, run.run_id, target, writers[target], results[target], log, captured, plan)
            failpoint("between-commits")
        writers.clear()
        evolver.consumed.clear()
        committed = sorted(t for t in targets if results[t].commits > commits[t])
        if not committed:
            return
        for target in committed:
            committed_offset = results[target].offset
            assert committed_offset is not None  # every commit carries one (_properties)
            checkpoints[target] = committed_offset
            commits[target] = results[target].commits
        run.follow_commits += 1
        failpoint("follow-commit")
        for target, outcome in upkeep_after_commits(config, sink, committed, failpoint=failpoint, log=log).items():
            results[target].upkeep = outcome
        if follow.on_commit is not None:
            follow.on_commit([replace(results[t]) for t in committed])
        for target in committed:
            _reset_counts(results[target])

    log.info("following the binlog of %d table(s), a commit every %g s", len(targets),
             config.checkpoint_interval_seconds)
    try:
        _run_binlog(plan, source, sink, targets, checkpoints, None, writers, results, log, evolver, xa_scan_starts,
                    follow=(config.checkpoint_interval_seconds, follow.should_stop, on_checkpoint))
    except BaseException:
        for writer in writers.values():
            writer.abort()
        raise
    run.binlog_reads += 1


def _reset_counts(result: TableResult) -> None:
    result.counts = TableCounts()
    result.rows_written = 0
    result.partitions = {}
    result.row_count = None
    result.upkeep = None


def _far_behind(checkpoint: BinlogOffset, reached: BinlogOffset) -> bool:
    if reached <= checkpoint:
        return False
    if checkpoint.file != reached.file:
        return True
    return reached.pos - checkpoint.pos >= IDLE_CHECKPOINT_BYTES


def _commit(config: PipelineConfig, run_id: str, target: TableId, writer: TableWriter, result: TableResult,
            log, captured: list[str] | None = None, plan: PipelinePlan | None = None) -> None:
    properties = _properties(config, run_id, result, captured, plan)
    result.snapshot_id = writer.commit(properties)
    result.committed = True
    result.commits += 1
    log.info("committed %s: snapshot %s at %s (%d inserted, %d updated, %d deleted)", target, result.snapshot_id,
             result.offset, result.counts.inserted, result.counts.updated, result.counts.deleted)


def _properties(config: PipelineConfig, run_id: str, result: TableResult, captured: list[str] | None,
                plan: PipelinePlan | None) -> dict[str, str]:
    schemas = None
    if plan is not None:  # the schema history: each source table's schema as of this checkpoint
        schemas = {str(s): plan.sources[s].source.to_json() for s in result.sources if s in plan.sources}
    if result.offset is None:
        raise ValueError(f"commit of {', '.join(map(str, result.sources))} without a checkpoint offset")
    return checkpoint_properties(
        result.offset, phase=result.phase, pipeline=config.name, run_id=run_id,
        source_tables=[str(s) for s in result.sources], counts=result.counts, captured=captured,
        startup_mode=config.source.startup_mode, source_schemas=schemas, xa_scan_start=result.xa_scan_start)


def _stored_checkpoints(config: PipelineConfig, sink: PaimonSink, targets: set[TableId]) -> dict:
    """The checkpoints of ``targets``, plus those of other tables this pipeline wrote (their source tables may have
    been dropped upstream after the checkpoint)."""
    from lakecdc.runtime.checkpoint import PIPELINE

    stored = {t: read_checkpoint(sink.checkpoint(t)) for t in sorted(targets)}
    for table in sink.list_tables():
        if table not in stored:
            properties = sink.checkpoint(table)
            if properties and properties.get(PIPELINE) == config.name:
                stored[table] = read_checkpoint(properties)
    return stored


def schema_history(checkpoints: dict, options) -> dict[TableId, SourceTable]:
    """Each source table's schema as of the oldest checkpoint that records one (the binlog read of a source starts
    at the oldest checkpoint of its tables)."""
    from lakecdc.source.schema import source_table_from_json

    history: dict[TableId, tuple[BinlogOffset, dict]] = {}
    for checkpoint in checkpoints.values():
        if checkpoint is None or checkpoint.snapshot_pending:
            continue
        for table_id, data in checkpoint.schemas.items():
            if table_id not in history or checkpoint.offset < history[table_id][0]:
                history[table_id] = (checkpoint.offset, data)
    return {t: source_table_from_json(data, options) for t, (_, data) in history.items()}


def _schema_applier(config: PipelineConfig, plan: PipelinePlan, sink: PaimonSink, run_id: str, captured: list[str],
                    targets: set[TableId], checkpoints: dict, writers: dict[TableId, TableWriter],
                    results: dict[TableId, TableResult], log):
    """The SchemaChangeApplier of one binlog read, wired to this run's writers and results."""
    from lakecdc.runtime.schema_evolution import SchemaChangeApplier

    def commit(target: TableId, offset: BinlogOffset) -> None:
        result = results[target]
        result.offset = offset
        _commit(config, run_id, target, writers.pop(target), result, log, captured, plan)

    def truncate(target: TableId, offset: BinlogOffset) -> None:
        result = results[target]
        if target in writers:
            writers.pop(target).abort()
        result.offset = offset
        result.snapshot_id = sink.truncate(target, _properties(config, run_id, result, captured, plan))
        result.committed = True
        result.commits += 1

    return SchemaChangeApplier(config, plan, sink, set(targets), dict(checkpoints), commit=commit,
                               truncate=truncate, log=log, failpoint=failpoint)
