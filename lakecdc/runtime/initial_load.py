"""What each Paimon table of a run has to do, and the chunked, resumable initial load (the MySQL snapshot phase;
*snapshot* alone in code names is a Paimon snapshot, see lakecdc.source.initial_load).

**Which source tables a run captures** (:func:`admit_tables`). Every run resolves ``tables`` against the live
server. A table that no checkpoint of the pipeline has seen before was created after the pipeline started: it is
captured with a snapshot when ``scan.newly-added-table.enabled``, from the binlog only (from the pipeline's oldest
checkpoint) when ``scan.binlog.newly-added-table.enabled``, and otherwise ignored (as in Flink CDC). Every checkpoint
records the captured set (``lakecdc.captured-tables``).

**What a table does** (:func:`plan_work`): a table without checkpoint starts as ``scan.startup.mode`` says (a
snapshot for ``initial``/``snapshot``, else a binlog read from the startup position); a table whose checkpoint
lists an unfinished snapshot (``lakecdc.snapshot.pending``) or lacks one of its current source tables continues
or starts that snapshot; a ``snapshot``-mode table whose snapshot is complete is finished; the others read the
binlog from their checkpoint.

**The chunked snapshot** (:func:`run_initial_load`), one commit group after the other until every source is read.
With ``scan.incremental.snapshot.enabled: true`` (the default) a group reads its chunks lock-free, each between two
binlog heads, and brings them to the group's position P with the binlog (lakecdc.runtime.incremental). With
``false``:

1. open a consistent snapshot at binlog position P;
2. catch up the part already committed: binlog changes in (C, P], C being the checkpoint, restricted to the
   chunk-key ranges snapshotted so far (lakecdc.source.chunks.restrict_to_snapshotted);
3. read the next chunks at P until ``lakecdc.snapshot.commit-rows`` rows;
4. commit rows and progress together: checkpoint P, the new chunk progress.

After each commit every snapshotted key is exactly at P (its snapshot rows at P, or its older state plus every
change up to P) and no other key is in the table, so a run killed at any point resumes from the last commit,
repeats nothing and loses nothing; the binlog read after the snapshot starts at the last P. Each change is applied
once (never replayed over a newer snapshot row), so this holds for append tables and SOFT_DELETE transforms too,
not only for upserts on a primary key. Memory is bounded by the rows of one commit group.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable

import pyarrow as pa

from lakecdc.config import PipelineConfig
from lakecdc.errors import BinlogPurgedError, SourceConnectionLost, SourceError
from lakecdc.model import BinlogOffset, ChangeBatch, TableCounts, TableId
from lakecdc.runtime import incremental as _incremental
from lakecdc.runtime.checkpoint import PHASE_SNAPSHOT, Checkpoint, checkpoint_properties
from lakecdc.runtime.plan import PipelinePlan, SourcePlan, TargetPlan
from lakecdc.runtime.report import report_fallbacks
from lakecdc.sink import PaimonSink
from lakecdc.source import ChunkKey, ChunkProgress, MySqlSource, restrict_to_snapshotted, snapshotted_mask
from lakecdc.source.ddl import online_tool_table_of

logger = logging.getLogger("lakecdc.runtime")

SNAPSHOT, BINLOG, FRESH_BINLOG, FINISHED, IDLE = "snapshot", "binlog", "fresh-binlog", "finished", "idle"


# ------------------------------------------------------------------------------------------- captured tables


@dataclass
class Admission:
    """Which planned source tables this run captures."""

    captured: set[TableId]  # every source table captured (recorded in each checkpoint)
    new: set[TableId] = field(default_factory=set)  # created after the pipeline started, and captured
    ignored: set[TableId] = field(default_factory=set)  # created after the pipeline started, not captured
    pipeline_started: bool = False


def admit_tables(config: PipelineConfig, plan: PipelinePlan, checkpoints: dict[TableId, Checkpoint | None],
                 log=logger) -> Admission:
    """Split the planned source tables into known, newly added and ignored ones (see the module docstring).
    ``checkpoints`` holds the checkpoint of every target of the (unrestricted) plan."""
    known: set[TableId] = set()
    started = False
    for checkpoint in checkpoints.values():
        if checkpoint is None:
            continue
        started = True
        known |= set(checkpoint.captured if checkpoint.captured is not None else checkpoint.sources)
    planned = set(plan.sources)
    if not started:
        return Admission(captured=planned)
    new = planned - known
    source = config.source
    tool_tables: set[TableId] = set()
    if source.parse_online_schema_changes:
        # the tables of a gh-ost / pt-osc migration of a captured table are the tool's, never captured tables
        tool_tables = {t for t in new if online_tool_table_of(t) in planned - new}
        for table in sorted(tool_tables):
            log.info("%s belongs to an online schema change of %s (scan.parse.online.schema.changes.enabled): not "
                     "captured", table, online_tool_table_of(table))
        new -= tool_tables
    if new and not (source.newly_added_tables or source.binlog_newly_added_tables):
        for table in sorted(new):
            log.warning("%s matches 'tables' but was created after the pipeline started; it is not captured "
                        "(set scan.newly-added-table.enabled: true to snapshot and capture it, or "
                        "scan.binlog.newly-added-table.enabled: true to capture it from the binlog)", table)
        return Admission(captured=planned - new - tool_tables, ignored=new | tool_tables, pipeline_started=True)
    return Admission(captured=planned - tool_tables, new=new, ignored=tool_tables, pipeline_started=True)


def without_sources(plan: PipelinePlan, dropped: set[TableId]) -> PipelinePlan:
    """``plan`` minus some source tables (targets left without a source are dropped)."""
    if not dropped:
        return plan
    sources = {sid: p for sid, p in plan.sources.items() if sid not in dropped}
    targets = {}
    for target, target_plan in plan.targets.items():
        kept = [s for s in target_plan.sources if s.source.table_id not in dropped]
        if kept:
            targets[target] = TargetPlan(target_plan.target, target_plan.schema, target_plan.primary_keys,
                                         target_plan.partition_keys, target_plan.options, target_plan.comment, kept)
    return PipelinePlan(sources, targets)


# ------------------------------------------------------------------------------------------- per-table work


@dataclass
class TargetWork:
    """What one run does for one Paimon table."""

    target: TableId
    kind: str  # SNAPSHOT, BINLOG, FRESH_BINLOG, FINISHED or IDLE
    checkpoint: Checkpoint | None
    offset: BinlogOffset | None = None  # BINLOG: the checkpoint; FRESH_BINLOG: where reading starts
    progress: dict[TableId, ChunkProgress] = field(default_factory=dict)  # SNAPSHOT: unfinished sources
    done_sources: list[TableId] = field(default_factory=list)  # SNAPSHOT: sources already snapshotted
    skip_events: int = 0
    skip_rows: int = 0


def plan_work(config: PipelineConfig, plan: PipelinePlan, checkpoints: dict[TableId, Checkpoint | None],
              admission: Admission, source: MySqlSource, head: BinlogOffset, log=logger) -> dict[TableId, TargetWork]:
    startup: tuple[BinlogOffset, int, int] | None = None
    pipeline_position = min((c.offset for c in checkpoints.values() if c is not None), default=head)
    work = {}
    for target, target_plan in plan.targets.items():
        checkpoint = checkpoints.get(target)
        sources = [s.source.table_id for s in target_plan.sources]
        if checkpoint is None:
            all_new = admission.new.issuperset(sources)
            if all_new and config.source.binlog_newly_added_tables:
                work[target] = TargetWork(target, FRESH_BINLOG, None, offset=pipeline_position)
            elif all_new or config.source.startup_mode in ("initial", "snapshot"):
                work[target] = TargetWork(target, SNAPSHOT, None,
                                          progress={s: ChunkProgress() for s in sources})
            else:
                if startup is None:
                    startup = startup_position(config, source, head, log)
                offset, skip_events, skip_rows = startup
                work[target] = TargetWork(target, FRESH_BINLOG, None, offset=offset, skip_events=skip_events,
                                          skip_rows=skip_rows)
            continue
        progress = {s: ChunkProgress.from_json(p) for s, p in checkpoint.pending.items() if s in sources}
        for s in sources:
            if s in checkpoint.sources or s in progress:
                continue
            if s in admission.new and config.source.binlog_newly_added_tables:
                log.info("%s joins %s from the binlog at its checkpoint %s", s, target, checkpoint.offset)
                continue
            progress[s] = ChunkProgress()  # a source this table has not seen yet: snapshot it
        if progress:
            done = [s for s in sources if s not in progress]
            work[target] = TargetWork(target, SNAPSHOT, checkpoint, offset=checkpoint.offset, progress=progress,
                                      done_sources=done)
        elif config.source.startup_mode == "snapshot":
            work[target] = TargetWork(target, FINISHED, checkpoint, offset=checkpoint.offset)
        elif checkpoint.offset < head:
            work[target] = TargetWork(target, BINLOG, checkpoint, offset=checkpoint.offset)
        else:
            work[target] = TargetWork(target, IDLE, checkpoint, offset=checkpoint.offset)
    return work


def startup_position(config: PipelineConfig, source: MySqlSource, head: BinlogOffset,
                     log=logger) -> tuple[BinlogOffset, int, int]:
    """(offset, skip-events, skip-rows) where tables without checkpoint start in the binlog-only startup modes."""
    startup = config.source.startup
    mode = startup.mode
    if mode == "latest-offset":
        offset = head
    elif mode == "earliest-offset":
        offset = source.earliest_offset()
    elif mode == "timestamp":
        offset = source.offset_at_timestamp(startup.timestamp_millis or 0)
    elif startup.gtid_set:
        offset = source.offset_for_gtid(startup.gtid_set)
    else:
        offset = BinlogOffset(startup.file or "", int(startup.pos or 4))
        source.check_available(offset, "scan.startup.specific-offset")
        if offset > head:
            raise SourceError(f"scan.startup.specific-offset {offset} is past the end of the binlog ({head}) of "
                              f"{source.options.address}; check the file name and position")
    log.info("scan.startup.mode %s: tables without checkpoint start at %s%s", mode, offset,
             f" (gtid {offset.gtid})" if offset.gtid else "")
    return offset, startup.skip_events, startup.skip_rows


def check_binlog_available(source: MySqlSource, checkpoints: dict[TableId, BinlogOffset], warehouse: str) -> None:
    """BinlogPurgedError naming every table whose checkpoint's binlog file the server no longer has, and how to
    re-snapshot it, before anything is read or written."""
    if not checkpoints:
        return
    files = source.binary_logs()
    lost = {t: o for t, o in checkpoints.items() if o.file not in files}
    if not lost:
        return
    oldest = files[0] if files else "none"
    tables = "; ".join(f"{t} at {o}" for t, o in sorted(lost.items()))
    paths = ", ".join(f"{warehouse.rstrip('/')}/{t.database}.db/{t.table}" for t in sorted(lost))
    raise BinlogPurgedError(
        f"the binlog that Paimon table(s) {tables} must continue from is gone from {source.options.address} "
        f"(oldest binlog there: {oldest}; purged by PURGE BINARY LOGS or binlog_expire_logs_seconds), so the "
        "changes made since those checkpoints can no longer be read. Re-snapshot the table(s): `lakecdc resnapshot "
        "PIPELINE.yaml DB.TABLE`, or in Dagster materialize them with run config 'resnapshot: true'; or drop them "
        f"({paths}) and run the pipeline again, which snapshots them anew while the other tables continue. Nothing "
        "was written. Keep binlogs longer than the longest pause between runs.")


def check_snapshot_mode(config: PipelineConfig, plan: PipelinePlan, work: dict[TableId, TargetWork],
                        keys: dict[TableId, ChunkKey | None], source: MySqlSource) -> None:
    """SourceError, before anything is written, when a table due for a snapshot cannot be snapshotted in the
    configured mode: incremental (the default), a table with neither primary key nor chunk key column (its rows
    cannot be told apart, Flink CDC refuses it too); consistent (``scan.incremental.snapshot.enabled: false``) on
    MySQL, a user that may not take the global read lock (no RELOAD)."""
    snapshotted = sorted({s for w in work.values() if w.kind == SNAPSHOT for s in w.progress})
    if not snapshotted:
        return
    if config.source.incremental_snapshot:
        for table_id in snapshotted:
            table = plan.sources[table_id].source
            if keys.get(table_id) is None and not table.primary_keys:
                raise SourceError(
                    f"incremental snapshot of {table_id}: the table has no primary key, so its chunks need a chunk "
                    f"key column; set scan.incremental.snapshot.chunk.key-column: {table_id}:<column> (a column "
                    "writes rarely change, ideally indexed), or scan.incremental.snapshot.enabled: false (one "
                    "consistent transaction; on MySQL it takes FLUSH TABLES WITH READ LOCK, which needs RELOAD). "
                    "Nothing was written")
        return
    if source.flavor() != "mysql":
        return  # MariaDB's consistent snapshot knows its binlog position without a lock
    missing = source.missing_global_privilege("RELOAD")
    if missing:
        raise SourceError(
            f"snapshot of {', '.join(map(str, snapshotted))}: scan.incremental.snapshot.enabled is false, and a "
            f"consistent snapshot on MySQL at {source.options.address} needs FLUSH TABLES WITH READ LOCK, which "
            f"needs the RELOAD privilege user '{source.options.username}' lacks (managed MySQL services refuse the "
            "lock to every user). Set scan.incremental.snapshot.enabled: true (the default: lock-free, needs only "
            "SELECT, SHOW DATABASES, REPLICATION SLAVE and REPLICATION CLIENT), or GRANT RELOAD to the user. "
            "Nothing was written")


# ------------------------------------------------------------------------------------------- chunked snapshot


@dataclass
class InitialLoadContext:
    """What the chunked snapshot of one table needs from the run."""

    config: PipelineConfig
    plan: PipelinePlan
    source: MySqlSource
    sink: PaimonSink
    run_id: str
    captured: list[str]
    # apply(source_plan, batch, writer, counts): transform a batch and write it to the open writer
    apply: Callable[[SourcePlan, ChangeBatch, object, TableCounts], int]
    failpoint: Callable[[str], None]
    log: logging.Logger | logging.LoggerAdapter = logger
    progress_report: Callable | None = None  # optional: (table_id) -> object with add(rows) / finish(offset)
    # the binlog head when the run started: a first incremental group folds the binlog from there (see below)
    run_head: BinlogOffset | None = None


@dataclass
class InitialLoadOutcome:
    commits: int = 0
    snapshot_id: int | None = None
    offset: BinlogOffset | None = None
    counts: TableCounts = field(default_factory=TableCounts)
    rows_written: int = 0
    complete: bool = False
    snapshot_rows: int = 0  # rows read from MySQL by this run
    catchup_rows: int = 0  # binlog rows applied to the snapshotted part
    decoder_fallbacks: dict[str, int] = field(default_factory=dict)  # of the catch-up's binlog reads, per cause
    # incremental: tables without primary key whose first chunk of the last group was read again, with that chunk
    stalled: dict = field(default_factory=dict)
    # incremental: the binlog changed a chunk of the last group (the next one holds its chunks until it is folded)
    chunks_changed: bool = False


def run_initial_load(ctx: InitialLoadContext, work: TargetWork,
                     keys: dict[TableId, ChunkKey | None]) -> InitialLoadOutcome:
    """Snapshot one Paimon table's unfinished source tables, committing every ``snapshot_commit_rows`` rows."""
    target = work.target
    target_plan = ctx.plan.targets[target]
    plans = {s.source.table_id: s for s in target_plan.sources}
    progress = dict(work.progress)
    done = list(work.done_sources)
    position = work.checkpoint.offset if work.checkpoint is not None else None
    outcome = InitialLoadOutcome(offset=position)
    reports = {}
    for table_id, p in progress.items():
        key = keys.get(table_id)
        if p.column is None and key is not None and not p.started:
            progress[table_id] = ChunkProgress.not_started(key)
        elif p.started and (p.column or None) != (key.name if key else None):
            raise SourceError(
                f"the unfinished snapshot of {table_id} into {target} was chunked by {p.column!r} but the chunk key is "
                f"now {key.name if key else None!r} (scan.incremental.snapshot.chunk.key-column changed?); put the "
                "option back, or drop the Paimon table to start its snapshot over")
        if ctx.progress_report is not None:
            reports[table_id] = ctx.progress_report(table_id)
    ctx.log.info("snapshot of %s into %s: %s", ", ".join(map(str, progress)), target,
                 "; ".join(f"{t}: {p.describe()}" for t, p in progress.items()))
    stalled: dict[TableId, int] = {}  # incremental, tables without primary key: groups in a row without progress
    while progress:
        before = dict(progress)
        group = _snapshot_group(ctx, target, plans, progress, done, position, keys, outcome, reports)
        position = group
        for table_id, window in outcome.stalled.items():
            if progress.get(table_id) != before.get(table_id):
                continue
            stalled[table_id] = stalled.get(table_id, 0) + 1
            if stalled[table_id] >= _incremental.MAX_STALLED_GROUPS:
                raise _incremental.stalled_error(table_id, window, stalled[table_id])
        for table_id in list(stalled):
            if progress.get(table_id) != before.get(table_id):
                del stalled[table_id]
        outcome.stalled = {}
        for table_id in [t for t, p in progress.items() if p.done]:
            del progress[table_id]
            done.append(table_id)
            if table_id in reports:
                reports[table_id].finish(position)
    outcome.complete = True
    return outcome


def _snapshot_group(ctx: InitialLoadContext, target: TableId, plans: dict[TableId, SourcePlan],
                    progress: dict[TableId, ChunkProgress], done: list[TableId], position: BinlogOffset | None,
                    keys: dict, outcome: InitialLoadOutcome, reports: dict) -> BinlogOffset:
    """One commit group (retried with backoff when the connection is lost). Updates ``progress`` in place and
    returns the group's position."""
    options = ctx.source.options
    attempt = 0
    while True:
        slot = _GroupWriter(ctx.sink, target)
        counts = TableCounts()
        try:
            if ctx.source.options.incremental_snapshot:
                snap_offset, new_progress, written, rows, catchup = _read_incremental_group(
                    ctx, target, plans, progress, done, position, keys, slot, counts, reports, outcome)
            else:
                snap_offset, new_progress, written, rows, catchup = _read_group(
                    ctx, target, plans, progress, done, position, keys, slot.writer, counts, reports, outcome)
            writer = slot.writer
            ctx.failpoint("before-commit")
            pending = {str(t): p.to_json() for t, p in new_progress.items() if not p.done}
            properties = checkpoint_properties(
                snap_offset, phase=PHASE_SNAPSHOT, pipeline=ctx.config.name,
                run_id=ctx.run_id, source_tables=sorted(str(s) for s in plans), counts=counts, pending=pending,
                captured=ctx.captured, startup_mode=ctx.config.source.startup_mode,
                source_schemas={str(t): p.source.to_json() for t, p in plans.items()})
            snapshot_id = writer.commit(properties)
        except SourceConnectionLost as lost:
            slot.writer.abort()
            attempt += 1
            if attempt > options.connect_max_retries:
                raise SourceError(f"snapshot of {target}: {lost}; gave up after {options.connect_max_retries} "
                                  "retries (connect.max-retries)") from lost
            delay = options.backoff(attempt)
            ctx.log.warning("snapshot of %s: %s; retry %d/%d in %.1f s", target, lost, attempt,
                            options.connect_max_retries, delay)
            time.sleep(delay)
            continue
        except BaseException:
            slot.writer.abort()
            raise
        progress.update(new_progress)
        outcome.commits += 1
        outcome.snapshot_id = snapshot_id
        outcome.offset = snap_offset
        outcome.rows_written += written
        outcome.snapshot_rows += rows
        outcome.catchup_rows += catchup
        for name in ("inserted", "updated", "deleted"):
            setattr(outcome.counts, name, getattr(outcome.counts, name) + getattr(counts, name))
        # the group's rows were held in Arrow buffers until the commit: give the freed ones back to the system, so
        # the process's peak does not grow from group to group with the allocator's cache
        pa.default_memory_pool().release_unused()
        ctx.log.info("snapshot of %s: committed snapshot %s at %s (%d rows read, %d binlog rows caught up; %s)",
                     target, snapshot_id, snap_offset, rows, catchup,
                     "; ".join(f"{t}: {p.describe()}" for t, p in new_progress.items()))
        ctx.failpoint("snapshot-group-committed")
        return snap_offset


def _read_group(ctx: InitialLoadContext, target: TableId, plans: dict[TableId, SourcePlan],
                progress: dict[TableId, ChunkProgress], done: list[TableId], position: BinlogOffset | None,
                keys: dict, writer, counts: TableCounts, reports: dict, outcome: InitialLoadOutcome):
    """Catch-up and chunks of one group (consistent mode) written to ``writer``: (position, progress, rows written,
    snapshot rows, binlog rows); the catch-up's decoder fallbacks are added to ``outcome``."""
    fallbacks = outcome.decoder_fallbacks
    new_progress = dict(progress)
    written = rows_read = catchup_rows = 0
    unfinished = [t for t in plans if t in progress]
    with ctx.source.snapshot([plans[t].source for t in unfinished]) as snap:
        offset = snap.offset
        if position is not None and position < offset:
            catchup_rows, caught = _catch_up(ctx, target, plans, progress, done, position, offset, keys, writer,
                                             counts, fallbacks)
            written += caught
        elif position is not None and position > offset:
            raise _binlog_reset(target, offset, position)

        def write(table_id: TableId, batch: ChangeBatch) -> None:
            nonlocal written
            written += ctx.apply(plans[table_id], batch, writer, counts)
            if position is not None:  # crash tests: killed mid-chunk of a group after an earlier commit
                ctx.failpoint("during-snapshot")

        rows_read = _read_chunks(ctx, snap, unfinished, progress, keys, reports, new_progress, write)
    return offset, new_progress, written, rows_read, catchup_rows


def _binlog_reset(target: TableId, offset: BinlogOffset, position: BinlogOffset) -> SourceError:
    return SourceError(f"snapshot of {target}: the server's binlog position {offset} is before the table's "
                       f"checkpoint {position}; was the binlog reset (RESET MASTER)? Drop the Paimon table to "
                       "snapshot it anew")


def _read_chunks(ctx: InitialLoadContext, snap, unfinished: list[TableId], progress: dict[TableId, ChunkProgress],
                 keys: dict, reports: dict, new_progress: dict[TableId, ChunkProgress],
                 take: Callable[[TableId, ChangeBatch], None], readers: int = 1) -> int:
    """The group's chunks, table after table until ``lakecdc.snapshot.commit-rows`` rows, each batch handed to
    ``take`` (read by ``readers`` connections at once: incremental snapshots); sets ``new_progress`` of the tables
    read and returns the rows read."""
    budget = ctx.config.snapshot_commit_rows
    rows_read = 0
    for table_id in unfinished:
        if budget <= 0:
            break
        before = snap.rows_read
        for batch in snap.read_chunks(table_id, keys.get(table_id), progress[table_id], budget, readers=readers):
            take(table_id, batch)
            if table_id in reports:
                reports[table_id].add(batch.num_rows)
        assert snap.progress is not None  # set by read_chunks
        new_progress[table_id] = snap.progress
        read = snap.rows_read - before
        rows_read += read
        budget -= max(read, 1)
    return rows_read


class _GroupWriter:
    """The writer of one commit group. The incremental snapshot writes its chunks while it reads them and starts
    the writer over (abort, open anew) when the binlog then changes one of them."""

    def __init__(self, sink, target: TableId):
        self.sink, self.target = sink, target
        self.writer = sink.open_writer(target)

    def restart(self) -> None:
        self.writer.abort()
        self.writer = self.sink.open_writer(self.target)


def _read_incremental_group(ctx: InitialLoadContext, target: TableId, plans: dict[TableId, SourcePlan],
                            progress: dict[TableId, ChunkProgress], done: list[TableId],
                            position: BinlogOffset | None, keys: dict, slot: _GroupWriter, counts: TableCounts,
                            reports: dict, outcome: InitialLoadOutcome):
    """One group of the incremental snapshot (lakecdc.runtime.incremental) written to ``slot``: (position P,
    progress, rows written, snapshot rows, binlog rows).

    The chunks are kept in memory and, unless the binlog changed a chunk of the previous group, also written while
    they are read (reading and writing overlap): when the binlog (G, P] changes none of them, they are already their
    rows at P and only the catch-up (of other keys: no key is in both unless the binlog moved it, which changes a
    chunk) and the later changes of append tables follow; otherwise the writer starts over. A group that did not
    write its chunks early (a table being written to: its next group would start over again) writes the catch-up,
    the folded chunks and the later changes once, after the binlog."""
    options = ctx.source.options
    new_progress = dict(progress)
    unfinished = [t for t in plans if t in progress]
    chunk_rows: dict[TableId, list[pa.Table]] = {}
    written = 0
    early = not outcome.chunks_changed  # write the chunks while they are read

    def take(table_id: TableId, batch: ChangeBatch) -> None:
        nonlocal written
        chunk_rows.setdefault(table_id, []).append(batch.data)
        if early:
            written += ctx.apply(plans[table_id], batch, slot.writer, counts)
            if position is not None:  # crash tests: killed while a later group writes its chunks
                ctx.failpoint("during-snapshot")

    with ctx.source.snapshot([plans[t].source for t in unfinished], incremental=True) as snap:
        opened = snap.offset
        if position is not None and position > opened:
            raise _binlog_reset(target, opened, position)
        # pipeline.parallelism readers, each on its own connection; the rows still go through the table's one writer
        rows_read = _read_chunks(ctx, snap, unfinished, progress, keys, reports, new_progress, take,
                                 readers=ctx.config.parallelism)
        windows = list(snap.windows)
        stop = snap.head()  # P: every chunk's high watermark is at or before it
    ctx.failpoint("incremental-chunks-read")
    # G: the checkpoint, or for a first group the head when the run started, taken before the tables were planned
    # and created: folding from there (idempotent for a primary key) leaves a transaction logged before G a whole
    # start-up's time to be committed by InnoDB before the first chunk's SELECT (MySQL logs before it commits)
    start = position if position is not None else min(opened, ctx.run_head or opened)
    read_tables = {t for t in new_progress if new_progress[t] != progress.get(t)}
    append = {t: _incremental.AppendChunks(t, [w for w in windows if w.table == t])
              for t in read_tables if not plans[t].source.primary_keys}
    tables = {t: plans[t].source for t in plans
              if t in done or (t in progress and (progress[t].started or t in read_tables))}
    fold: dict[TableId, list[pa.Table]] = {}
    caught_up: list[ChangeBatch] = []  # changes of keys committed earlier: after the chunks, or first on a restart
    applied = 0
    if tables and start < stop:
        if position is not None:
            check_binlog_available(ctx.source, {target: start}, ctx.sink.warehouse)
        cuts = _incremental.cuts_of([w for chunks in append.values() for w in chunks.windows])
        reader = ctx.source.read_binlog(tables, {t: start for t in tables}, stop, cuts=cuts)
        for item in reader:
            assert isinstance(item, ChangeBatch)  # neither track_schemas nor a follow read: change batches only
            batch = item
            table_id = batch.table.table_id
            if table_id not in progress:  # a source already snapshotted: every change applies
                caught_up.append(batch)
                continue
            key = keys.get(table_id)
            values = _incremental.key_values(batch, key)
            caught = restrict_to_snapshotted(batch, snapshotted_mask(options, key, progress[table_id], values))
            if caught is not None:  # keys committed by an earlier group: changes
                caught_up.append(caught)
            if table_id in append:
                append[table_id].add(options, key, batch)
            elif table_id in read_tables:
                mask = _incremental.range_mask(options, key, progress[table_id], new_progress[table_id], values)
                part = restrict_to_snapshotted(batch, mask)
                if part is not None:
                    fold.setdefault(table_id, []).append(part.data)
        report_fallbacks(reader, ctx.log, lambda _source: [outcome.decoder_fallbacks],
                         during=f" in the incremental snapshot of {target}")
    changed = outcome.chunks_changed = any(fold.values()) or any(chunks.touched for chunks in append.values())
    rewrite = changed or not early
    if rewrite:
        # the chunks as written (if they were) are not their rows at P: start over, the catch-up first (a key the
        # binlog moved between a committed range and a chunk of this group, by a chunk key outside the primary key,
        # is deleted by the catch-up and brought back by the chunk), then the folded chunks
        if early:
            slot.restart()
            counts.inserted = counts.updated = counts.deleted = 0
            counts.extra.clear()
            written = 0
        for batch in caught_up:
            written += ctx.apply(plans[batch.table.table_id], batch, slot.writer, counts)
    later: list[ChangeBatch] = []
    for table_id in [t for t in plans if t in read_tables]:
        source = plans[table_id].source
        parts = chunk_rows.pop(table_id, [])
        rows = pa.concat_tables(parts) if parts else source.change_schema().empty_table()
        if table_id in append:
            chunks = append[table_id]
            kept = chunks.kept()
            rows = rows.slice(0, sum(w.rows for w in chunks.windows[:kept]))
            if kept < len(chunks.windows):
                new_progress[table_id] = chunks.windows[kept - 1].upper if kept else progress[table_id]
                if kept == 0:
                    outcome.stalled[table_id] = chunks.windows[0]
                ctx.log.info("incremental snapshot of %s: rows of its chunk after %s changed while it was read; "
                             "it is read again in the next commit group", table_id,
                             chunks.windows[kept].lower.describe())
            later += [b for i in range(kept) for b in chunks.later.get(i, [])]
        else:
            folded = fold.get(table_id, [])
            applied += sum(f.num_rows for f in folded)
            rows = _incremental.fold_rows(rows, folded, list(source.primary_keys))
        if not rewrite:
            continue
        for offset in range(0, rows.num_rows, options.snapshot_batch_rows):
            batch = ChangeBatch(source, rows.slice(offset, options.snapshot_batch_rows))
            written += ctx.apply(plans[table_id], batch, slot.writer, counts)
            if position is not None:  # crash tests: killed while a later group writes its chunks
                ctx.failpoint("during-snapshot")
    applied += sum(b.num_rows for b in caught_up + later)
    for batch in later if rewrite else caught_up + later:
        written += ctx.apply(plans[batch.table.table_id], batch, slot.writer, counts)
    return stop, new_progress, written, rows_read, applied


def _catch_up(ctx: InitialLoadContext, target: TableId, plans: dict[TableId, SourcePlan],
              progress: dict[TableId, ChunkProgress], done: list[TableId], start: BinlogOffset, stop: BinlogOffset,
              keys: dict, writer, counts: TableCounts, fallbacks: dict[str, int]) -> tuple[int, int]:
    """Binlog changes in (start, stop] of the rows this table already holds (whole done sources, snapshotted key
    ranges of the others), written to ``writer``: (binlog rows applied, rows written); the read's decoder
    fallbacks are added to ``fallbacks``."""
    tables = {t: plans[t].source for t in plans if t in done or (t in progress and progress[t].started)}
    if not tables:
        return 0, 0
    check_binlog_available(ctx.source, {target: start}, ctx.sink.warehouse)
    reader = ctx.source.read_binlog(tables, {t: start for t in tables}, stop)
    applied = written = 0
    for batch in reader:
        assert isinstance(batch, ChangeBatch)  # neither track_schemas nor a follow read: change batches only
        table_id = batch.table.table_id
        if table_id in progress:
            key = keys.get(table_id)
            values = batch.data.column(key.name) if key is not None else None
            mask = snapshotted_mask(ctx.source.options, key, progress[table_id],
                                    values if values is not None else batch.data.column(0))
            kept = restrict_to_snapshotted(batch, mask)
            if kept is None:
                continue
            batch = kept
        applied += batch.num_rows
        written += ctx.apply(plans[table_id], batch, writer, counts)
    report_fallbacks(reader, ctx.log, lambda _source: [fallbacks], during=f" in the snapshot catch-up of {target}")
    return applied, written
