"""Where each table of a pipeline stands: its checkpoint, its latest Paimon snapshot and its lag behind the
binlog head. Used by ``lakecdc status`` and by the Dagster sensor."""

from __future__ import annotations

from dataclasses import dataclass

from lakecdc.config import PipelineConfig
from lakecdc.model import BinlogOffset, TableId
from lakecdc.runtime.checkpoint import read_checkpoint
from lakecdc.runtime.plan import build_plan, source_options
from lakecdc.sink import PaimonSink
from lakecdc.source import MySqlSource


@dataclass
class TableStatus:
    target: TableId
    sources: list[TableId]
    exists: bool
    checkpoint: BinlogOffset | None
    snapshot_id: int | None
    snapshot_pending: bool = False  # a chunked snapshot has chunks left to read
    finished: bool = False  # scan.startup.mode: snapshot, and the snapshot is complete

    def needs_run(self, head: BinlogOffset) -> bool:
        if self.finished:
            return False
        return self.checkpoint is None or self.snapshot_pending or self.checkpoint < head

    def lag(self, head: BinlogOffset) -> str:
        if self.checkpoint is None:
            return "needs a snapshot"
        if self.snapshot_pending:
            return "snapshot in progress"
        if self.finished:
            return "finished (scan.startup.mode: snapshot)"
        if self.checkpoint >= head:
            return "up to date"
        if self.checkpoint.file == head.file:
            return f"{head.pos - self.checkpoint.pos} binlog bytes behind"
        return f"behind: checkpoint in {self.checkpoint.file}, head in {head.file}"


@dataclass
class PipelineStatus:
    pipeline: str
    head: BinlogOffset
    tables: list[TableStatus]

    @property
    def needs_run(self) -> bool:
        return any(t.needs_run(self.head) for t in self.tables)


def pipeline_status(config: PipelineConfig) -> PipelineStatus:
    from lakecdc.runtime.snapshots import admit_tables, without_sources

    source = MySqlSource(source_options(config))
    plan = build_plan(config, source)
    head = source.head_offset()
    sink = PaimonSink(config.sink.catalog_options, config.sink.table_properties, config.sink.commit_user_prefix)
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
        tables.append(TableStatus(target, sources, exists, checkpoint.offset if checkpoint else None, snapshot_id,
                                  snapshot_pending=pending, finished=finished))
    return PipelineStatus(config.name, head, tables)
