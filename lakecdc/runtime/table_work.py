"""What each Paimon table of a run has to do (the chunked snapshot itself is lakecdc.runtime.commit_groups).

**Which source tables a run captures** (:func:`admit_tables`). Every run resolves ``tables`` against the live
server. A table that no checkpoint of the pipeline has seen before was created after the pipeline started: it is
captured with a snapshot when ``scan.newly-added-table.enabled``, from the binlog only (from the pipeline's oldest
checkpoint) when ``scan.binlog.newly-added-table.enabled``, and otherwise ignored (as in Flink CDC). Every checkpoint
records the captured set (``lakecdc.captured-tables``).

**What a table does** (:func:`plan_work`): a table without checkpoint starts as ``scan.startup.mode`` says (a
snapshot for ``initial``/``snapshot``, else a binlog read from the startup position); a table whose checkpoint
lists an unfinished snapshot (``lakecdc.snapshot.pending``) or lacks one of its current source tables continues
or starts that snapshot (an unfinished re-snapshot starts over: lakecdc.runtime.replacement); a ``snapshot``-mode
table whose snapshot is complete is finished; the others read the binlog from their checkpoint.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from lakecdc.config import PipelineConfig
from lakecdc.errors import BinlogPurgedError, SourceError
from lakecdc.model import BinlogOffset, TableId
from lakecdc.runtime.checkpoint import PHASE_RESNAPSHOT, Checkpoint
from lakecdc.runtime.plan import PipelinePlan, TargetPlan
from lakecdc.source import ChunkKey, ChunkProgress, MySqlSource
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
    replace: bool = False  # SNAPSHOT: a whole-table re-snapshot (lakecdc.runtime.replacement), read from the start


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
        if checkpoint.pending and checkpoint.phase == PHASE_RESNAPSHOT:
            # a re-snapshot stopped half-way: its record of what it wrote went with it, so it starts over (rows
            # already rewritten are rewritten again; the sweep then finds every stale row)
            log.info("the re-snapshot of %s stopped before its end: it starts over", target)
            work[target] = TargetWork(target, SNAPSHOT, checkpoint, progress={s: ChunkProgress() for s in sources},
                                      replace=True)
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
