"""The chunked, resumable initial load (the MySQL snapshot phase), one commit group after the other; what each
table has to do comes from lakecdc.runtime.table_work.

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
from lakecdc.errors import SourceConnectionLost, SourceError
from lakecdc.model import BinlogOffset, ChangeBatch, SourceTable, TableCounts, TableId
from lakecdc.runtime import incremental as _incremental
from lakecdc.runtime.checkpoint import (PHASE_RESNAPSHOT, PHASE_SNAPSHOT, RESNAPSHOT_OFFSET, RESNAPSHOT_PARTITION,
                                        checkpoint_properties)
from lakecdc.runtime.plan import PipelinePlan, SourcePlan
from lakecdc.runtime.replacement import Replacement, SweepOutcome
from lakecdc.runtime.report import report_fallbacks
from lakecdc.runtime.table_work import TargetWork, check_binlog_available
from lakecdc.sink import PaimonSink
from lakecdc.source import ChunkKey, ChunkProgress, MySqlSource, restrict_to_snapshotted, snapshotted_mask

logger = logging.getLogger("lakecdc.runtime")

# At most this many tables share a commit group: each keeps a Paimon writer open until the group commits (about
# 0.15 MiB each, measured: a group of 1,000 one-thousand-row tables peaked at 399 MiB against 245 MiB one by one)
GROUP_MAX_TABLES = 1000


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
    # a re-snapshot of the table (lakecdc.runtime.replacement): records what each group writes; the last group
    # sweeps the rows MySQL no longer has and commits as a re-snapshot
    replacement: Replacement | None = None


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
    sweep: SweepOutcome | None = None  # a re-snapshot's last group: what it changed and the stale rows it removed


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
    # where every incremental group of this run folds the binlog from: the checkpoint the run resumed from, else the
    # head when the run started (see _IncrementalPart.prepare)
    fold_start: BinlogOffset | None = None
    reports: dict = field(default_factory=dict)
    stalled: dict[TableId, int] = field(default_factory=dict)  # incremental, no primary key: groups without progress

    @classmethod
    def start(cls, ctx: InitialLoadContext, work: TargetWork, keys: dict[TableId, ChunkKey | None]) -> "_TargetLoad":
        target = work.target
        # a re-snapshot reads everything anew: the table's older state is no position to continue from
        position = work.checkpoint.offset if work.checkpoint is not None and ctx.replacement is None else None
        load = cls(ctx, target, keys, {s.source.table_id: s for s in ctx.plan.targets[target].sources},
                   dict(work.progress), list(work.done_sources), position, InitialLoadOutcome(offset=position),
                   fold_start=position if position is not None else ctx.run_head)
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
    chunks while it reads them and starts the writer over (abort, open anew) when the binlog then changes one. A
    re-snapshot's writes are recorded (``replacement``) until the group commits or starts over."""

    def __init__(self, sink, target: TableId, replacement: Replacement | None = None):
        self.sink, self.target = sink, target
        self.replacement = replacement
        self._writer = None

    @property
    def raw(self):
        """The table's open writer (writes are not recorded)."""
        if self._writer is None:
            self._writer = self.sink.open_writer(self.target)
        return self._writer

    @property
    def writer(self):
        return self.raw if self.replacement is None else _RecordingWriter(self.raw, self.replacement)

    def restart(self) -> None:
        self.abort()

    def abort(self) -> None:
        writer, self._writer = self._writer, None
        if self.replacement is not None:
            self.replacement.group_discarded()
        if writer is not None:
            writer.abort()


class _RecordingWriter:
    """A re-snapshot's writer: every row written is recorded by its replacement."""

    def __init__(self, writer, replacement: Replacement):
        self._writer, self._replacement = writer, replacement

    def write(self, table: pa.Table) -> None:
        self._writer.write(table)
        self._replacement.record(table)


class _Part:
    """One table's part of a commit group: its writer, counts, new progress and what it read and wrote."""

    def __init__(self, load: _TargetLoad):
        self.load = load
        self.slot = _GroupWriter(load.ctx.sink, load.target, load.ctx.replacement)
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

    def read_next_chunks(self, snap, budget: int, readers: int = 1) -> int:
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
        writer = self.slot.raw
        replacement = ctx.replacement
        pending = {str(t): p.to_json() for t, p in self.new_progress.items() if not p.done}
        if replacement is not None and not pending and all(t in self.new_progress or t in load.done
                                                             for t in load.plans):
            # the re-snapshot's last group: the rows MySQL no longer has go in its commit
            load.outcome.sweep = replacement.sweep(writer.write)
        ctx.failpoint("before-commit")
        properties = checkpoint_properties(
            position, phase=PHASE_SNAPSHOT if replacement is None else PHASE_RESNAPSHOT, pipeline=ctx.config.name,
            run_id=ctx.run_id, source_tables=sorted(str(s) for s in load.plans), counts=self.counts,
            pending=pending, captured=ctx.captured, startup_mode=ctx.config.source.startup_mode,
            source_schemas={str(t): p.source.to_json() for t, p in load.plans.items()})
        if replacement is not None:
            properties.update({RESNAPSHOT_PARTITION: "", RESNAPSHOT_OFFSET: str(position)})
        snapshot_id = writer.commit(properties)
        if replacement is not None:
            replacement.group_committed()
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
                budget = part.read_next_chunks(snap, budget)
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
        self.windows: dict[TableId, list] = {}  # the chunk windows of each table read in this group
        self.fold_changes = False  # the fold changes a chunk's rows (else the chunks as read are their rows at P)

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
                budget = part.read_next_chunks(snap, budget, readers=ctx.config.parallelism)
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
            # batches never span a window's positions, nor a table's last commit (what lies before it was applied)
            cuts = _incremental.cuts_of([w for p in reading for chunks in p.append.values() for w in chunks.windows])
            cuts |= {p.load.position for p in reading if p.load.position is not None}
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
        # G: the run's first position (the checkpoint it resumed from, or the head when it started, taken before
        # its tables were planned), for every group of the run, not the previous group's position: MySQL logs a
        # transaction before InnoDB commits it, so one logged before a group's position may still be invisible to
        # the next group's SELECT. Folding from G (idempotent for a key that identifies rows) leaves such a
        # transaction at least the whole start-up's time to be committed (docs/operations.md, "Why the snapshot
        # loses nothing"). What lies before the table's last commit is folded, never applied again (binlog_change).
        start = load.fold_start if load.fold_start is not None else opened
        self.start = min(start, opened)
        self.read_tables = {t for t in self.new_progress if self.new_progress[t] != load.progress.get(t)}
        self.windows = {t: [w for w in windows if w.table == t] for t in self.read_tables}
        self.append = {t: _incremental.AppendChunks(t, self.windows[t])
                       for t in self.read_tables if not load.plans[t].source.row_identity}
        self.binlog_tables = {t: load.plans[t].source for t in load.plans
                              if t in load.done or (t in load.progress and (load.progress[t].started
                                                                            or t in self.read_tables))}

    def binlog_change(self, batch: ChangeBatch) -> None:
        """A change of (G, P] of one of this table's sources."""
        load = self.load
        options = load.ctx.source.options
        table_id = batch.table.table_id
        # a change at or before the table's last commit was applied by it (or lies in a range not read then): it
        # is only folded into this group's chunks
        applied = load.position is not None and batch.last_commit is not None and batch.last_commit <= load.position
        if table_id not in load.progress:  # a source already snapshotted: every later change applies
            if not applied:
                self.caught_up.append(batch)
            return
        key = load.keys.get(table_id)
        values = _incremental.key_values(batch, key)
        if not applied:
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
                if not self._seen_by_chunks(table_id, batch):
                    self.fold_changes = True

    def _seen_by_chunks(self, table_id: TableId, batch: ChangeBatch) -> bool:
        """Whether every chunk of this group already holds ``batch``'s changes: only with exact windows (each chunk
        read at its own exact position), for a batch that ends at or before the first of them. A change the chunks
        hold folds to the rows they already have."""
        windows = self.windows.get(table_id, [])
        if not windows or not all(w.exact for w in windows) or batch.last_commit is None:
            return False
        return batch.last_commit <= min(w.low for w in windows)

    def finish(self) -> None:
        """The chunks brought to P, and the catch-up, written (see the class docstring)."""
        load = self.load
        options = load.ctx.source.options
        outcome = load.outcome
        changed = outcome.chunks_changed = self.fold_changes or \
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
                rows = _incremental.fold_rows(rows, folded, list(source.row_identity))
            if not rewrite:
                continue
            for offset in range(0, rows.num_rows, options.snapshot_batch_rows):
                self.apply(ChangeBatch(source, rows.slice(offset, options.snapshot_batch_rows)))
                if load.position is not None:  # crash tests: killed while a later group writes its chunks
                    load.ctx.failpoint("during-snapshot")
        self.applied += sum(b.num_rows for b in self.caught_up + later)
        for batch in later if rewrite else self.caught_up + later:
            self.apply(batch)
