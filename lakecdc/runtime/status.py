"""Where each table of a pipeline stands: its checkpoint, its latest Paimon snapshot, and whether it is *behind*:
a committed change or DDL of its source tables lies after its checkpoint (lakecdc.source.activity scans the binlog
between the checkpoints and the head for them). Used by ``lakecdc status`` and by the Dagster sensor, which passes
the previous scan back in (its cursor) so each tick reads only the binlog written since the last one.

A table whose checkpoint is older than the stretch that could be scanned within ``scan_limit`` bytes counts as
behind (its run moves the checkpoint forward, so the next scan covers it). An idle table whose checkpoint lies in an
older binlog file, or IDLE_CHECKPOINT_BYTES behind the head in the same file, is *due a checkpoint refresh*: a run
that finds nothing commits an empty snapshot that only moves its checkpoint (lakecdc.runtime.micro_batch), so a purge
of old binlog files never strands it and a later run that includes it re-reads at most that much binlog for it.
docs/operations.md has the design and its numbers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from lakecdc.config import PipelineConfig
from lakecdc.model import BinlogOffset, TableId
from lakecdc.runtime.checkpoint import (IDLE_CHECKPOINT_BYTES, idle_checkpoint_due, idle_checkpoint_urgent,
                                       read_checkpoint)
from lakecdc.runtime.connect import open_sink, open_source
from lakecdc.runtime.plan import build_plan
from lakecdc.runtime.table_work import admit_tables, without_sources
from lakecdc.sink.consumers import ConsumerLag, consumer_lags
from lakecdc.source import MySqlSource
from lakecdc.source.activity import BinlogActivity, binlog_sizes, bytes_between, scan_activity

# At most this many binlog bytes are scanned per status (per sensor tick); must stay above the distance after which
# a run moves an idle table's checkpoint, so a table too far back to scan gets one run and is within reach afterwards.
SCAN_LIMIT_BYTES = 4 * IDLE_CHECKPOINT_BYTES
# ... and for at most this long (one-row transactions scan far fewer bytes per second than bulk rows events); a cut
# scan continues from where it stopped at the next call that passes it in
SCAN_LIMIT_SECONDS = 20.0


@dataclass
class TableStatus:
    target: TableId
    sources: list[TableId]
    exists: bool
    checkpoint: BinlogOffset | None
    snapshot_id: int | None
    snapshot_pending: bool = False  # a chunked snapshot has chunks left to read
    finished: bool = False  # scan.startup.mode: snapshot, and the snapshot is complete
    behind: bool = False  # something a run would capture lies after the checkpoint (see ``reason``)
    reason: str = ""  # why it is behind
    last_change: BinlogOffset | None = None  # end of the last change / DDL after the checkpoint found by the scan
    refresh_due: bool = False  # idle, but its checkpoint is far behind the head (checkpoint.idle_checkpoint_due)
    consumers: list[ConsumerLag] = field(default_factory=list)  # Paimon consumers (pipeline_status(consumers=True))

    def needs_run(self, head: BinlogOffset) -> bool:
        return self.behind or self.refresh_due

    def refresh_can_wait(self, head: BinlogOffset) -> bool:
        """Only due a checkpoint refresh, and one that may wait for a run with real work (it is folded into the
        next such run): at most one binlog file behind (checkpoint.idle_checkpoint_urgent)."""
        return not self.behind and self.refresh_due and self.checkpoint is not None and \
            not idle_checkpoint_urgent(self.checkpoint, head)

    def lag(self, head: BinlogOffset) -> str:
        if self.finished:
            return "finished (scan.startup.mode: snapshot)"
        if self.behind:
            return self.reason
        if self.refresh_due and self.checkpoint is not None:
            return f"no changes; checkpoint {self.checkpoint}, head {head}: due a checkpoint refresh"
        if self.checkpoint is not None and self.checkpoint < head:
            return "up to date (no changes of its tables since the checkpoint)"
        return "up to date"


@dataclass
class PipelineStatus:
    pipeline: str
    head: BinlogOffset
    tables: list[TableStatus]
    activity: BinlogActivity | None = None  # what the binlog scans know (pass it to the next pipeline_status)
    scanned_bytes: int = 0  # binlog bytes this call scanned

    @property
    def needs_run(self) -> bool:
        return any(t.needs_run(self.head) for t in self.tables)


def pipeline_status(config: PipelineConfig, *, activity: BinlogActivity | None = None,
                    scan_limit: int = SCAN_LIMIT_BYTES, consumers: bool = False) -> PipelineStatus:
    """Each table's state. ``activity``: the previous call's ``PipelineStatus.activity`` (the sensor's cursor), so
    only the binlog written since is scanned. ``consumers``: also list each table's Paimon consumers and how far
    behind they are (lakecdc.sink.consumers.consumer_lags; ``lakecdc status`` asks, the sensor does not)."""
    source = open_source(config)
    source.share_connection()  # the plan's queries and the head on one connection (the sensor asks every tick)
    try:
        plan = build_plan(config, source)
        head = source.head_offset()
    finally:
        source.close()
    sink = open_sink(config)
    checkpoints = {t: read_checkpoint(sink.checkpoint(t)) if sink.table_exists(t) else None for t in plan.targets}
    # tables a run would not capture (created after the start, without scan.newly-added-table.*) are not listed
    plan = without_sources(plan, admit_tables(config, plan, checkpoints).ignored)
    tables = []
    for target, target_plan in sorted(plan.targets.items()):
        exists = sink.table_exists(target)
        checkpoint = checkpoints.get(target)
        snapshot_id = sink.latest_snapshot_id(target) if exists else None
        sources = [s.source.table_id for s in target_plan.sources]
        pending = checkpoint is not None and (checkpoint.snapshot_pending or any(
            s not in checkpoint.sources for s in sources) and not config.source.binlog_newly_added_tables)
        finished = checkpoint is not None and not pending and config.source.startup_mode == "snapshot"
        status = TableStatus(target, sources, exists, checkpoint.offset if checkpoint else None, snapshot_id,
                             snapshot_pending=pending, finished=finished,
                             consumers=consumer_lags(sink, target) if consumers and exists else [])
        if checkpoint is None:
            status.behind, status.reason = True, "needs a snapshot"
        elif pending:
            status.behind, status.reason = True, "snapshot in progress"
        tables.append(status)
    # (a table that is not behind has a checkpoint)
    scanned = [t for t in tables
               if not t.behind and not t.finished and t.checkpoint is not None and t.checkpoint < head]
    if not scanned and all(t.checkpoint is not None and head <= t.checkpoint for t in tables if not t.finished):
        # every table is at the head: the next scan starts there
        activity = BinlogActivity(head, head, tables=frozenset(s for t in tables for s in t.sources))
    activity, scanned_bytes, files = _scan(source, scanned, head, activity, scan_limit)
    for table in scanned:
        _judge(table, head, activity, files)
    return PipelineStatus(config.name, head, tables, activity, scanned_bytes)


def _judge(table: TableStatus, head: BinlogOffset, activity: BinlogActivity | None, files: set[str]) -> None:
    """Behind, due a refresh or up to date, from what the scan found after the table's checkpoint."""
    checkpoint = table.checkpoint
    assert checkpoint is not None  # only tables with a checkpoint are scanned
    if checkpoint.file not in files:
        table.behind, table.reason = True, f"binlog file {checkpoint.file} of its checkpoint was purged"
        return
    if activity is None or checkpoint < activity.start:
        table.behind = True
        table.reason = f"not scanned: checkpoint {checkpoint} lies further back than the binlog scan limit"
        return
    last = activity.last_change(table.sources)
    if last is not None and last > checkpoint:
        table.behind, table.last_change = True, last
        table.reason = f"changed at {last} (checkpoint {checkpoint})"
        return
    if activity.stop < head:
        table.behind = True
        table.reason = f"not scanned past {activity.stop} yet (binlog scan time limit)"
        return
    table.refresh_due = idle_checkpoint_due(checkpoint, head)


def _scan(source: MySqlSource, tables: list[TableStatus], head: BinlogOffset, prior: BinlogActivity | None,
          limit: int) -> tuple[BinlogActivity | None, int, set[str]]:
    """The activity covering the tables' checkpoints up to ``head`` as far as ``limit`` bytes reach: the prior
    scan extended forward to the head, then back towards older checkpoints; without a usable prior scan, the
    stretch from the oldest checkpoint that fits. Returns it, the bytes scanned now and the server's binlog
    files."""
    wanted = frozenset(s for t in tables for s in t.sources)
    if not tables:
        return prior, 0, set()
    options = source.options
    deadline = time.monotonic() + SCAN_LIMIT_SECONDS
    sizes = binlog_sizes(options)
    checkpoints = {t.checkpoint for t in tables if t.checkpoint is not None}  # every scanned table has one
    reachable = sorted((c for c in checkpoints if c.file in sizes), key=lambda o: o.sort_key)
    usable = prior if (prior is not None and wanted <= prior.tables and prior.stop <= head
                       and (prior.stop.file in sizes or prior.stop.same_position(head))) else None
    forward = bytes_between(sizes, usable.stop, head) if usable is not None else None
    scanned = 0
    activity: BinlogActivity | None
    if usable is not None and forward is not None and forward <= limit:
        later = scan_activity(options, set(usable.tables | wanted), usable.stop, head,
                              prepared_xa=usable.prepared_xa, max_seconds=deadline - time.monotonic())
        activity = usable.merge(later)
        scanned += later.bytes_scanned
        budget = limit - forward
    else:
        start = _earliest_within(sizes, reachable, head, limit)
        activity = (scan_activity(options, set(wanted), start, head, max_seconds=deadline - time.monotonic())
                    if start is not None else None)
        scanned += activity.bytes_scanned if activity is not None else 0
        budget = 0
    if activity is not None and activity.stop.same_position(head):
        older = [c for c in reachable if c < activity.start]
        start = _earliest_within(sizes, older, activity.start, budget)
        if start is not None:
            earlier = scan_activity(options, set(activity.tables), start, activity.start,
                                    max_seconds=max(0.0, deadline - time.monotonic()))
            scanned += earlier.bytes_scanned
            if earlier.stop.same_position(activity.start):  # a cut stretch would leave a gap: dropped
                # XA transactions the earlier stretch left prepared were counted as touching every table at
                # their XA COMMIT (the later scan did not know them)
                earlier.prepared_xa = {}
                activity = _prepend(earlier, activity)
    return activity, scanned, set(sizes)


def _prepend(earlier: BinlogActivity, later: BinlogActivity) -> BinlogActivity:
    merged = earlier.merge(later)
    merged.prepared_xa = dict(later.prepared_xa)
    return merged


def _earliest_within(sizes: dict[str, int], candidates: list[BinlogOffset], stop: BinlogOffset,
                     limit: int) -> BinlogOffset | None:
    """The earliest of ``candidates`` (transaction boundaries, oldest first) from which at most ``limit`` bytes
    lead to ``stop``."""
    for candidate in candidates:
        distance = bytes_between(sizes, candidate, stop)
        if distance is not None and distance <= limit:
            return candidate
    return None
