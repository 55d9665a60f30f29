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

**Shared commit groups** (:func:`run_initial_loads`): the tables a run snapshots share groups while their estimated
rows fit in one (at most GROUP_MAX_TABLES): one snapshot reader, the chunks of each table in turn within the group's
row budget, one binlog read for all (each source table from its own table's C or G), then each table's own commit at
the common P. Each table's steps and checkpoint are those above, as if it were alone; a kill between two of the
group's commits leaves each table at its own last commit.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence, TypeVar

import pyarrow as pa

from lakecdc.config import PipelineConfig
from lakecdc.errors import BinlogPurgedError, SourceConnectionLost, SourceError
from lakecdc.model import BinlogOffset, ChangeBatch, SourceTable, TableCounts, TableId
from lakecdc.runtime import incremental as _incremental
from lakecdc.runtime.checkpoint import PHASE_SNAPSHOT, Checkpoint, checkpoint_properties
from lakecdc.runtime.plan import PipelinePlan, SourcePlan, TargetPlan
from lakecdc.runtime.report import report_fallbacks
from lakecdc.sink import PaimonSink
from lakecdc.source import ChunkKey, ChunkProgress, MySqlSource, restrict_to_snapshotted, snapshotted_mask
from lakecdc.source.ddl import online_tool_table_of

logger = logging.getLogger("lakecdc.runtime")

SNAPSHOT, BINLOG, FRESH_BINLOG, FINISHED, IDLE = "snapshot", "binlog", "fresh-binlog", "finished", "idle"

# At most this many tables share a commit group: each keeps a Paimon writer open until the group commits (about
# 0.15 MiB each, measured: a group of 1,000 one-thousand-row tables peaked at 399 MiB against 245 MiB one by one)
GROUP_MAX_TABLES = 1000


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
    return run_initial_loads([(ctx, work)], keys)[work.target]


def run_initial_loads(loads: list[tuple[InitialLoadContext, TargetWork]], keys: dict[TableId, ChunkKey | None],
                      estimates: dict[TableId, int] | None = None) -> dict[TableId, InitialLoadOutcome]:
    """Snapshot the unfinished source tables of several Paimon tables (each with its own context), committing
    every ``snapshot_commit_rows`` rows.

    Tables small enough share a commit group (by MySQL's row ``estimates``; the group's row budget bounds its memory
    whatever they say): one snapshot connection and one binlog read serve all of them, and each table then commits
    its part in its own Paimon commit, carrying its own checkpoint. A whole database of small tables thus costs a
    few connections and binlog reads, not a few per table. Two tables fed by the same source table never share a
    group (each reads the binlog from its own checkpoint)."""
    started = [_TargetLoad.start(ctx, work, keys) for ctx, work in loads]
    pending = [load for load in started if load.progress]
    while pending:
        group = _next_group(pending, estimates or {})
        before = {load.target: dict(load.progress) for load in group}
        _snapshot_group(group)
        for load in group:
            load.end_group(before[load.target])
        pending = [load for load in pending if load.progress]
    for load in started:
        load.outcome.complete = True
    return {load.target: load.outcome for load in started}


@dataclass
class _TargetLoad:
    """One Paimon table's snapshot, from commit group to commit group."""

    ctx: InitialLoadContext
    target: TableId
    keys: dict[TableId, ChunkKey | None]
    plans: dict[TableId, SourcePlan]  # every source table of the target
    progress: dict[TableId, ChunkProgress]  # the unfinished ones
    done: list[TableId]
    position: BinlogOffset | None  # the last commit's checkpoint
    outcome: InitialLoadOutcome
    reports: dict = field(default_factory=dict)
    stalled: dict[TableId, int] = field(default_factory=dict)  # incremental, no primary key: groups without progress

    @classmethod
    def start(cls, ctx: InitialLoadContext, work: TargetWork, keys: dict[TableId, ChunkKey | None]) -> "_TargetLoad":
        target = work.target
        position = work.checkpoint.offset if work.checkpoint is not None else None
        load = cls(ctx, target, keys, {s.source.table_id: s for s in ctx.plan.targets[target].sources},
                   dict(work.progress), list(work.done_sources), position, InitialLoadOutcome(offset=position))
        for table_id, p in load.progress.items():
            key = keys.get(table_id)
            if p.column is None and key is not None and not p.started:
                load.progress[table_id] = ChunkProgress.not_started(key)
            elif p.started and (p.column or None) != (key.name if key else None):
                raise SourceError(
                    f"the unfinished snapshot of {table_id} into {target} was chunked by {p.column!r} but the chunk "
                    f"key is now {key.name if key else None!r} (scan.incremental.snapshot.chunk.key-column "
                    "changed?); put the option back, or drop the Paimon table to start its snapshot over")
            if ctx.progress_report is not None:
                load.reports[table_id] = ctx.progress_report(table_id)
        ctx.log.info("snapshot of %s into %s: %s", ", ".join(map(str, load.progress)), target,
                     "; ".join(f"{t}: {p.describe()}" for t, p in load.progress.items()))
        return load

    @property
    def unfinished(self) -> list[TableId]:
        return [t for t in self.plans if t in self.progress]

    def end_group(self, before: dict[TableId, ChunkProgress]) -> None:
        """After a commit group (which may have left this table for the next one): stop a table that makes no
        progress, and move the finished source tables to ``done``."""
        for table_id, window in self.outcome.stalled.items():
            if self.progress.get(table_id) != before.get(table_id):
                continue
            self.stalled[table_id] = self.stalled.get(table_id, 0) + 1
            if self.stalled[table_id] >= _incremental.MAX_STALLED_GROUPS:
                raise _incremental.stalled_error(table_id, window, self.stalled[table_id])
        for table_id in list(self.stalled):
            if self.progress.get(table_id) != before.get(table_id):
                del self.stalled[table_id]
        self.outcome.stalled = {}
        for table_id in [t for t, p in self.progress.items() if p.done]:
            del self.progress[table_id]
            self.done.append(table_id)
            if table_id in self.reports:
                self.reports[table_id].finish(self.position)


def _next_group(pending: list[_TargetLoad], estimates: dict[TableId, int]) -> list[_TargetLoad]:
    """The tables of the next commit group: the first pending one, then those whose estimated rows still fit in
    the group's budget and whose source tables no table of the group has, up to GROUP_MAX_TABLES."""
    budget = pending[0].ctx.config.snapshot_commit_rows
    group: list[_TargetLoad] = []
    sources: set[TableId] = set()
    rows = 0
    for load in pending:
        estimate = sum(estimates.get(t, 0) for t in load.unfinished)
        if group and (rows + estimate > budget or sources & set(load.plans)):
            continue
        if len(group) == GROUP_MAX_TABLES:
            break
        group.append(load)
        sources |= set(load.plans)
        rows += estimate
    return group


def _snapshot_group(loads: list[_TargetLoad]) -> None:
    """One commit group of ``loads`` (retried with backoff when the connection is lost): each table that read
    chunks in it commits its part; one that the group's row budget left out waits for the next group. Updates each
    table's progress, position and outcome."""
    ctx = loads[0].ctx
    options = ctx.source.options
    attempt = 0
    while True:
        parts = [(_IncrementalPart if options.incremental_snapshot else _ConsistentPart)(load) for load in loads]
        committed: set[TableId] = set()
        try:
            position = parts[0].read_group(parts)
            for part in [p for p in parts if p.read]:
                part.commit(position)
                committed.add(part.load.target)
        except SourceConnectionLost as lost:
            _abort(parts, committed)
            if committed:  # a commit never talks to MySQL: unreachable, but a retry would then repeat those
                raise
            attempt += 1
            if attempt > options.connect_max_retries:
                raise SourceError(f"snapshot of {', '.join(str(load.target) for load in loads)}: {lost}; gave up "
                                  f"after {options.connect_max_retries} retries (connect.max-retries)") from lost
            delay = options.backoff(attempt)
            ctx.log.warning("snapshot of %s: %s; retry %d/%d in %.1f s",
                            ", ".join(str(load.target) for load in loads), lost, attempt,
                            options.connect_max_retries, delay)
            time.sleep(delay)
            continue
        except BaseException:
            _abort(parts, committed)
            raise
        _abort(parts, committed)  # the tables the budget left for the next group
        # the group's rows were held in Arrow buffers until the commit: give the freed ones back to the system, so
        # the process's peak does not grow from group to group with the allocator's cache
        pa.default_memory_pool().release_unused()
        return


def _abort(parts: Sequence["_Part"], committed: set[TableId]) -> None:
    for part in parts:
        if part.load.target not in committed:
            part.slot.abort()


class _GroupWriter:
    """The writer of one table in one commit group, opened at its first write. The incremental snapshot writes its
    chunks while it reads them and starts the writer over (abort, open anew) when the binlog then changes one."""

    def __init__(self, sink, target: TableId):
        self.sink, self.target = sink, target
        self._writer = None

    @property
    def writer(self):
        if self._writer is None:
            self._writer = self.sink.open_writer(self.target)
        return self._writer

    def restart(self) -> None:
        self.abort()

    def abort(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.abort()


class _Part:
    """One table's part of a commit group: its writer, counts, new progress and what it read and wrote."""

    def __init__(self, load: _TargetLoad):
        self.load = load
        self.slot = _GroupWriter(load.ctx.sink, load.target)
        self.counts = TableCounts()
        self.new_progress = dict(load.progress)
        self.read: list[TableId] = []  # the source tables whose chunks this group read
        self.written = 0  # rows written
        self.rows_read = 0  # snapshot rows read
        self.applied = 0  # binlog rows applied

    def read_group(self, parts: Sequence["_Part"]) -> BinlogOffset:
        """Read the group of ``parts`` (this one among them); returns the group's position P."""
        raise NotImplementedError

    def apply(self, batch: ChangeBatch) -> None:
        self.written += self.load.ctx.apply(self.load.plans[batch.table.table_id], batch, self.slot.writer,
                                            self.counts)

    def take(self, table_id: TableId, batch: ChangeBatch) -> None:
        """A batch of chunk rows as it is read."""
        self.apply(batch)
        if self.load.position is not None:  # crash tests: killed mid-chunk of a group after an earlier commit
            self.load.ctx.failpoint("during-snapshot")

    def read_chunks(self, snap, budget: int, readers: int = 1) -> int:
        """The next chunks of this table's sources, source after source until ``budget`` rows (of the group's
        budget) are read; returns what is left of the budget."""
        load = self.load
        for table_id in load.unfinished:
            if budget <= 0:
                break
            before = snap.rows_read
            for batch in snap.read_chunks(table_id, load.keys.get(table_id), load.progress[table_id], budget,
                                          readers=readers):
                self.take(table_id, batch)
                if table_id in load.reports:
                    load.reports[table_id].add(batch.num_rows)
            assert snap.progress is not None  # set by read_chunks
            self.new_progress[table_id] = snap.progress
            self.read.append(table_id)
            read = snap.rows_read - before
            self.rows_read += read
            budget -= max(read, 1)
        return budget

    def commit(self, position: BinlogOffset) -> None:
        """Commit this table's part: its rows and its checkpoint (``position``, the new chunk progress)."""
        load, ctx = self.load, self.load.ctx
        writer = self.slot.writer
        ctx.failpoint("before-commit")
        pending = {str(t): p.to_json() for t, p in self.new_progress.items() if not p.done}
        properties = checkpoint_properties(
            position, phase=PHASE_SNAPSHOT, pipeline=ctx.config.name,
            run_id=ctx.run_id, source_tables=sorted(str(s) for s in load.plans), counts=self.counts,
            pending=pending, captured=ctx.captured, startup_mode=ctx.config.source.startup_mode,
            source_schemas={str(t): p.source.to_json() for t, p in load.plans.items()})
        snapshot_id = writer.commit(properties)
        load.progress.update(self.new_progress)
        load.position = position
        outcome = load.outcome
        outcome.commits += 1
        outcome.snapshot_id = snapshot_id
        outcome.offset = position
        outcome.rows_written += self.written
        outcome.snapshot_rows += self.rows_read
        outcome.catchup_rows += self.applied
        for name in ("inserted", "updated", "deleted"):
            setattr(outcome.counts, name, getattr(outcome.counts, name) + getattr(self.counts, name))
        ctx.log.info("snapshot of %s: committed snapshot %s at %s (%d rows read, %d binlog rows caught up; %s)",
                     load.target, snapshot_id, position, self.rows_read, self.applied,
                     "; ".join(f"{t}: {p.describe()}" for t, p in self.new_progress.items()))
        ctx.failpoint("snapshot-group-committed")


def _snapshot_of(parts: Sequence[_Part], incremental: bool):
    """One snapshot reader over the unfinished source tables of every part."""
    ctx = parts[0].load.ctx
    tables = [p.load.plans[t].source for p in parts for t in p.load.unfinished]
    return ctx.source.snapshot(tables, incremental=incremental)


PartT = TypeVar("PartT", bound=_Part)


def _binlog_owners(parts: Sequence[PartT], tables_of: Callable[[PartT], dict[TableId, SourceTable]],
                   start_of: Callable[[PartT], BinlogOffset],
                   ) -> tuple[dict[TableId, SourceTable], dict[TableId, BinlogOffset], dict[TableId, PartT]]:
    """For one binlog read serving several parts: the tables to read, each one's start, and the part it belongs
    to (a source table belongs to one part of a group: see _next_group)."""
    tables: dict[TableId, SourceTable] = {}
    starts: dict[TableId, BinlogOffset] = {}
    owners: dict[TableId, PartT] = {}
    for part in parts:
        for table_id, table in tables_of(part).items():
            tables[table_id], starts[table_id], owners[table_id] = table, start_of(part), part
    return tables, starts, owners


def _check_checkpoints_available(parts: Sequence[PartT], start_of: Callable[[PartT], BinlogOffset]) -> None:
    resumed = [p for p in parts if p.load.position is not None]
    if resumed:
        ctx = parts[0].load.ctx
        check_binlog_available(ctx.source, {p.load.target: start_of(p) for p in resumed}, ctx.sink.warehouse)


def _binlog_reset(target: TableId, offset: BinlogOffset, position: BinlogOffset) -> SourceError:
    return SourceError(f"snapshot of {target}: the server's binlog position {offset} is before the table's "
                       f"checkpoint {position}; was the binlog reset (RESET MASTER)? Drop the Paimon table to "
                       "snapshot it anew")


def _check_not_reset(parts: Sequence[_Part], offset: BinlogOffset) -> None:
    for part in parts:
        if part.load.position is not None and part.load.position > offset:
            raise _binlog_reset(part.load.target, offset, part.load.position)


class _ConsistentPart(_Part):
    """A table's part of a consistent-mode group (``scan.incremental.snapshot.enabled: false``): at the snapshot's
    position P, the catch-up of the part already committed, then the next chunks (see the module docstring)."""

    def read_group(self, parts: Sequence[_Part]) -> BinlogOffset:
        ctx = self.load.ctx
        with _snapshot_of(parts, incremental=False) as snap:
            offset = snap.offset
            _check_not_reset(parts, offset)
            _catch_up([p for p in parts if p.load.position is not None and p.load.position < offset], offset)
            budget = ctx.config.snapshot_commit_rows
            for part in parts:
                budget = part.read_chunks(snap, budget)
        return offset

    def catch_up_tables(self) -> dict[TableId, SourceTable]:
        load = self.load
        return {t: load.plans[t].source for t in load.plans
                if t in load.done or (t in load.progress and load.progress[t].started)}

    def caught_up(self, batch: ChangeBatch) -> None:
        """A binlog change of the catch-up: written when its row is one this table already holds."""
        load = self.load
        table_id = batch.table.table_id
        if table_id in load.progress:
            key = load.keys.get(table_id)
            values = batch.data.column(key.name) if key is not None else batch.data.column(0)
            kept = restrict_to_snapshotted(batch, snapshotted_mask(load.ctx.source.options, key,
                                                                   load.progress[table_id], values))
            if kept is None:
                return
            batch = kept
        self.applied += batch.num_rows
        self.apply(batch)


def _catch_up(parts: Sequence[_Part], stop: BinlogOffset) -> None:
    """Consistent mode: the binlog changes in (checkpoint, stop] of the rows each part's table already holds (whole
    done sources, snapshotted key ranges of the others), in one binlog read for all of them."""
    consistent = [p for p in parts if isinstance(p, _ConsistentPart)]
    if not consistent:
        return

    def start_of(part: _ConsistentPart) -> BinlogOffset:
        assert part.load.position is not None  # resumed tables only
        return part.load.position

    tables, starts, owners = _binlog_owners(consistent, _ConsistentPart.catch_up_tables, start_of)
    if not tables:
        return
    ctx = consistent[0].load.ctx
    _check_checkpoints_available(consistent, start_of)
    reader = ctx.source.read_binlog(tables, starts, stop)
    for batch in reader:
        assert isinstance(batch, ChangeBatch)  # neither track_schemas nor a follow read: change batches only
        owners[batch.table.table_id].caught_up(batch)
    report_fallbacks(reader, ctx.log, lambda source: [owners[source].load.outcome.decoder_fallbacks],
                     during=" in the snapshot catch-up of " + ", ".join(str(p.load.target) for p in consistent))


class _IncrementalPart(_Part):
    """A table's part of an incremental group (lakecdc.runtime.incremental): position P, the chunks, then the
    binlog up to P folded into them.

    The chunks are kept in memory and, unless the binlog changed a chunk of the table's previous group, also
    written while they are read (reading and writing overlap): when the binlog (G, P] changes none of them, they are
    already their rows at P and only the catch-up (of other keys: no key is in both unless the binlog moved it,
    which changes a chunk) and the later changes of append tables follow; otherwise the writer starts over. A
    group that did not write its chunks early (a table being written to: its next group would start over again)
    writes the catch-up, the folded chunks and the later changes once, after the binlog."""

    start: BinlogOffset  # G, where the fold's binlog read starts (set by prepare)

    def __init__(self, load: _TargetLoad):
        super().__init__(load)
        self.chunk_rows: dict[TableId, list[pa.Table]] = {}
        self.early = not load.outcome.chunks_changed  # write the chunks while they are read
        self.read_tables: set[TableId] = set()
        self.append: dict[TableId, _incremental.AppendChunks] = {}
        self.fold: dict[TableId, list[pa.Table]] = {}
        self.caught_up: list[ChangeBatch] = []  # changes of keys committed earlier: after the chunks, or first
        self.binlog_tables: dict[TableId, SourceTable] = {}

    def take(self, table_id: TableId, batch: ChangeBatch) -> None:
        self.chunk_rows.setdefault(table_id, []).append(batch.data)
        if self.early:
            super().take(table_id, batch)

    def read_group(self, parts: Sequence[_Part]) -> BinlogOffset:
        ctx = self.load.ctx
        incremental = [p for p in parts if isinstance(p, _IncrementalPart)]
        with _snapshot_of(parts, incremental=True) as snap:
            opened = snap.offset
            _check_not_reset(parts, opened)
            budget = ctx.config.snapshot_commit_rows
            for part in parts:
                # pipeline.parallelism readers, each on its own connection; a table's rows still go through its
                # one writer
                budget = part.read_chunks(snap, budget, readers=ctx.config.parallelism)
            windows = list(snap.windows)
            stop = snap.head()  # P: every chunk's high watermark is at or before it
        ctx.failpoint("incremental-chunks-read")
        reading = [p for p in incremental if p.read]
        for part in reading:
            part.prepare(windows, opened)
        tables, starts, owners = _binlog_owners(reading, lambda p: p.binlog_tables, lambda p: p.start)
        live = {t: s for t, s in starts.items() if s < stop}
        if live:
            _check_checkpoints_available([p for p in reading if p.binlog_tables and p.start < stop],
                                         lambda p: p.start)
            cuts = _incremental.cuts_of([w for p in reading for chunks in p.append.values() for w in chunks.windows])
            reader = ctx.source.read_binlog({t: tables[t] for t in live}, live, stop, cuts=cuts)
            for item in reader:
                assert isinstance(item, ChangeBatch)  # neither track_schemas nor a follow read: change batches only
                owners[item.table.table_id].binlog_change(item)
            report_fallbacks(reader, ctx.log, lambda source: [owners[source].load.outcome.decoder_fallbacks],
                             during=" in the incremental snapshot of " + ", ".join(str(p.load.target) for p in reading))
        for part in reading:
            part.finish()
        return stop

    def prepare(self, windows: list, opened: BinlogOffset) -> None:
        """After the chunks: where this table's binlog fold starts, and what it reads."""
        load = self.load
        # G: the checkpoint, or for a first group the head when the run started, taken before the tables were
        # planned and created: folding from there (idempotent for a primary key) leaves a transaction logged before
        # G a whole start-up's time to be committed by InnoDB before the first chunk's SELECT (MySQL logs before it
        # commits)
        self.start = load.position if load.position is not None else min(opened, load.ctx.run_head or opened)
        self.read_tables = {t for t in self.new_progress if self.new_progress[t] != load.progress.get(t)}
        self.append = {t: _incremental.AppendChunks(t, [w for w in windows if w.table == t])
                       for t in self.read_tables if not load.plans[t].source.primary_keys}
        self.binlog_tables = {t: load.plans[t].source for t in load.plans
                              if t in load.done or (t in load.progress and (load.progress[t].started
                                                                            or t in self.read_tables))}

    def binlog_change(self, batch: ChangeBatch) -> None:
        """A change of (G, P] of one of this table's sources."""
        load = self.load
        options = load.ctx.source.options
        table_id = batch.table.table_id
        if table_id not in load.progress:  # a source already snapshotted: every change applies
            self.caught_up.append(batch)
            return
        key = load.keys.get(table_id)
        values = _incremental.key_values(batch, key)
        caught = restrict_to_snapshotted(batch, snapshotted_mask(options, key, load.progress[table_id], values))
        if caught is not None:  # keys committed by an earlier group: changes
            self.caught_up.append(caught)
        if table_id in self.append:
            self.append[table_id].add(options, key, batch)
        elif table_id in self.read_tables:
            mask = _incremental.range_mask(options, key, load.progress[table_id], self.new_progress[table_id],
                                           values)
            part = restrict_to_snapshotted(batch, mask)
            if part is not None:
                self.fold.setdefault(table_id, []).append(part.data)

    def finish(self) -> None:
        """The chunks brought to P, and the catch-up, written (see the class docstring)."""
        load = self.load
        options = load.ctx.source.options
        outcome = load.outcome
        changed = outcome.chunks_changed = any(self.fold.values()) or \
            any(chunks.touched for chunks in self.append.values())
        rewrite = changed or not self.early
        if rewrite:
            # the chunks as written (if they were) are not their rows at P: start over, the catch-up first (a key
            # the binlog moved between a committed range and a chunk of this group, by a chunk key outside the
            # primary key, is deleted by the catch-up and brought back by the chunk), then the folded chunks
            if self.early:
                self.slot.restart()
                self.counts.inserted = self.counts.updated = self.counts.deleted = 0
                self.counts.extra.clear()
                self.written = 0
            for batch in self.caught_up:
                self.apply(batch)
        later: list[ChangeBatch] = []
        for table_id in [t for t in load.plans if t in self.read_tables]:
            source = load.plans[table_id].source
            parts = self.chunk_rows.pop(table_id, [])
            rows = pa.concat_tables(parts) if parts else source.change_schema().empty_table()
            if table_id in self.append:
                chunks = self.append[table_id]
                kept = chunks.kept()
                rows = rows.slice(0, sum(w.rows for w in chunks.windows[:kept]))
                if kept < len(chunks.windows):
                    self.new_progress[table_id] = chunks.windows[kept - 1].upper if kept else load.progress[table_id]
                    if kept == 0:
                        outcome.stalled[table_id] = chunks.windows[0]
                    load.ctx.log.info("incremental snapshot of %s: rows of its chunk after %s changed while it was "
                                      "read; it is read again in the next commit group", table_id,
                                      chunks.windows[kept].lower.describe())
                later += [b for i in range(kept) for b in chunks.later.get(i, [])]
            else:
                folded = self.fold.get(table_id, [])
                self.applied += sum(f.num_rows for f in folded)
                rows = _incremental.fold_rows(rows, folded, list(source.primary_keys))
            if not rewrite:
                continue
            for offset in range(0, rows.num_rows, options.snapshot_batch_rows):
                self.apply(ChangeBatch(source, rows.slice(offset, options.snapshot_batch_rows)))
                if load.position is not None:  # crash tests: killed while a later group writes its chunks
                    load.ctx.failpoint("during-snapshot")
        self.applied += sum(b.num_rows for b in self.caught_up + later)
        for batch in later if rewrite else self.caught_up + later:
            self.apply(batch)
