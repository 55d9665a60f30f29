"""Where each table of a pipeline stands: its checkpoint, its latest Paimon snapshot and its lag behind the
binlog head. Used by ``lakecdc status`` and by the Dagster sensor."""

from __future__ import annotations

from dataclasses import dataclass

from lakecdc.config import PipelineConfig
from lakecdc.model import BinlogOffset, TableId
from lakecdc.runtime.checkpoint import offset_from_properties
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

    def lag(self, head: BinlogOffset) -> str:
        if self.checkpoint is None:
            return "needs a snapshot"
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
        return any(t.checkpoint is None or t.checkpoint < self.head for t in self.tables)


def pipeline_status(config: PipelineConfig) -> PipelineStatus:
    source = MySqlSource(source_options(config))
    plan = build_plan(config, source)
    head = source.head_offset()
    sink = PaimonSink(config.sink.catalog_options, config.sink.table_properties, config.sink.commit_user_prefix)
    tables = []
    for target, target_plan in sorted(plan.targets.items()):
        exists = sink.table_exists(target)
        checkpoint = offset_from_properties(sink.checkpoint(target)) if exists else None
        snapshot_id = sink.latest_snapshot_id(target) if exists else None
        tables.append(TableStatus(target, [s.source.table_id for s in target_plan.sources], exists, checkpoint,
                                  snapshot_id))
    return PipelineStatus(config.name, head, tables)
