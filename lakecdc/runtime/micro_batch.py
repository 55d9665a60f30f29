"""One micro-batch of a pipeline, from the checkpoint to the commit.

1. Check the server, resolve the captured tables, compile the transforms (all errors before any write).
2. Lock every target table, create missing ones, read each table's checkpoint from its latest snapshot.
3. Tables without a checkpoint get a consistent snapshot; the others read the binlog from their checkpoint up
   to the head position taken at the start of the run (a transaction boundary).
4. Rows pass through the transform as Arrow tables and go to the native Paimon writer.
5. Every touched table gets exactly one new snapshot whose properties carry the offset it reached.
"""

from __future__ import annotations

import logging
import os
import signal
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.config import PipelineConfig
from lakecdc.model import OP_COLUMN, BinlogOffset, ChangeBatch, TableCounts, TableId
from lakecdc.runtime.checkpoint import (PHASE_BINLOG, PHASE_SNAPSHOT, checkpoint_properties,
                                        offset_from_properties)
from lakecdc.runtime.plan import PipelinePlan, SourcePlan, TargetPlan, build_plan, source_options
from lakecdc.sink import PaimonSink, TableWriter
from lakecdc.source import MySqlSource

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


@dataclass
class RunResult:
    pipeline: str
    run_id: str
    head: BinlogOffset | None
    tables: dict[TableId, TableResult]
    seconds: float = 0.0

    @property
    def committed(self) -> list[TableResult]:
        return [t for t in self.tables.values() if t.committed]


def failpoint(name: str) -> None:
    """Kill this process here when ``LAKECDC_FAILPOINT`` names this point: crash tests use it to stop a run at an
    exact step (SIGKILL, so nothing gets a chance to clean up, as in a real crash)."""
    if os.environ.get(FAILPOINT_ENV) == name:
        logger.warning("failpoint %s reached: killing the process", name)
        os.kill(os.getpid(), signal.SIGKILL)


def run_micro_batch(config: PipelineConfig, *, targets: set[TableId] | None = None, run_id: str | None = None,
                    log: logging.Logger | logging.LoggerAdapter | None = None) -> RunResult:
    """Run one micro-batch of ``config`` (optionally only for some target tables) and return what it did."""
    log = log or logger
    run_id = run_id or uuid.uuid4().hex
    started = time.monotonic()
    source = MySqlSource(source_options(config))
    source.check_server()
    plan = build_plan(config, source)
    if targets is not None:
        plan = plan.restrict(set(targets))
    sink = PaimonSink(config.sink.catalog_options, config.sink.table_properties, config.sink.commit_user_prefix)

    with ExitStack() as locks:
        for target in sorted(plan.targets):
            locks.enter_context(sink.lock(target, owner=f"pipeline {config.name!r} run {run_id}"))
        results = _prepare_targets(plan, sink)
        checkpoints = {t: offset_from_properties(sink.checkpoint(t)) for t in plan.targets}
        head = source.head_offset()
        writers: dict[TableId, TableWriter] = {}
        try:
            snapshot_targets = {t for t, offset in checkpoints.items() if offset is None}
            if snapshot_targets:
                _run_snapshot(plan, source, sink, snapshot_targets, writers, results, log)
            binlog_targets = {t for t, offset in checkpoints.items() if offset is not None and offset < head}
            if binlog_targets:
                _run_binlog(plan, source, sink, binlog_targets, checkpoints, head, writers, results, log)
            failpoint("before-commit")
            for target in sorted(writers):
                _commit(config, run_id, target, writers[target], results[target], log)
                failpoint("between-commits")
        except BaseException:
            for writer in writers.values():
                writer.abort()
            raise
        for result in results.values():
            if result.committed:
                result.row_count = sink.row_count(result.target)
    failpoint("after-commit")
    return RunResult(config.name, run_id, head, results, time.monotonic() - started)


def _prepare_targets(plan: PipelinePlan, sink: PaimonSink) -> dict[TableId, TableResult]:
    results = {}
    for target, target_plan in plan.targets.items():
        description = sink.ensure_table(target, target_plan.schema, target_plan.primary_keys,
                                        target_plan.partition_keys, target_plan.options, target_plan.comment)
        _check_existing_schema(target_plan, description.schema)
        results[target] = TableResult(
            target=target, sources=[s.source.table_id for s in target_plan.sources], phase=PHASE_BINLOG,
            committed=False, snapshot_id=None, offset=None, schema=description.schema,
            primary_keys=description.primary_keys, partition_keys=description.partition_keys,
            created=description.created)
    return results


def _check_existing_schema(target_plan: TargetPlan, stored: pa.Schema) -> None:
    """An existing table must still take the rows the transform produces (schema evolution is separate work)."""
    from lakecdc.errors import SinkError

    stored_names = stored.names
    for column in target_plan.schema:
        if column.name not in stored_names:
            raise SinkError(
                f"Paimon table {target_plan.target} has no column {column.name!r} that the pipeline now produces; "
                "the table was created from an older pipeline or source schema. Drop and re-create it, or change the "
                "projection back")


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


def _run_snapshot(plan: PipelinePlan, source: MySqlSource, sink: PaimonSink, targets: set[TableId],
                  writers: dict[TableId, TableWriter], results: dict[TableId, TableResult], log) -> None:
    source_plans = [p for p in plan.sources.values() if any(t in targets for t in p.targets)]
    log.info("snapshot of %s", ", ".join(str(p.source.table_id) for p in source_plans))
    with source.snapshot([p.source for p in source_plans]) as snapshot:
        for source_plan in source_plans:
            rows = 0
            for batch in snapshot.read(source_plan.source.table_id):
                _apply(source_plan, batch, targets, sink, writers, results)
                rows += batch.num_rows
            log.info("snapshot of %s: %d rows at %s", source_plan.source.table_id, rows, snapshot.offset)
        for target in targets:
            _writer(target, sink, writers)  # a snapshot commits even when the table is empty
            results[target].phase = PHASE_SNAPSHOT
            results[target].offset = snapshot.offset


def _run_binlog(plan: PipelinePlan, source: MySqlSource, sink: PaimonSink, targets: set[TableId],
                checkpoints: dict[TableId, BinlogOffset | None], head: BinlogOffset,
                writers: dict[TableId, TableWriter], results: dict[TableId, TableResult], log) -> None:
    source_plans = {sid: p for sid, p in plan.sources.items() if any(t in targets for t in p.targets)}
    # A source feeding several targets starts at the oldest of their checkpoints: replaying full row images on a
    # primary-key table converges to the same state, so the target that was further ahead stays correct.
    start_offsets = {sid: min(checkpoints[t] for t in p.targets if t in targets)
                     for sid, p in source_plans.items()}
    log.info("binlog from %s to %s", min(start_offsets.values()), head)
    reader = source.read_binlog({sid: p.source for sid, p in source_plans.items()}, start_offsets, head)
    for batch in reader:
        _apply(source_plans[batch.table.table_id], batch, targets, sink, writers, results)
    log.info("binlog read %d row changes up to %s", reader.rows_read, reader.end_offset)
    for target in targets:
        if target in writers:
            results[target].offset = max(reader.end_offset, checkpoints[target])
        elif _far_behind(checkpoints[target], reader.end_offset):
            # A table without changes keeps its checkpoint, so every later run re-reads the binlog from there;
            # once that stretch is long, an empty snapshot moves its checkpoint forward.
            _writer(target, sink, writers)
            results[target].offset = reader.end_offset
            log.info("%s had no changes; moving its checkpoint to %s", target, reader.end_offset)


IDLE_CHECKPOINT_BYTES = 64 * 1024 * 1024


def _far_behind(checkpoint: BinlogOffset, reached: BinlogOffset) -> bool:
    if reached <= checkpoint:
        return False
    if checkpoint.file != reached.file:
        return True
    return reached.pos - checkpoint.pos >= IDLE_CHECKPOINT_BYTES


def _commit(config: PipelineConfig, run_id: str, target: TableId, writer: TableWriter, result: TableResult,
            log) -> None:
    properties = checkpoint_properties(
        result.offset, phase=result.phase, pipeline=config.name, run_id=run_id,
        source_tables=[str(s) for s in result.sources], counts=result.counts)
    result.snapshot_id = writer.commit(properties)
    result.committed = True
    log.info("committed %s: snapshot %s at %s (%d inserted, %d updated, %d deleted)", target, result.snapshot_id,
             result.offset, result.counts.inserted, result.counts.updated, result.counts.deleted)
