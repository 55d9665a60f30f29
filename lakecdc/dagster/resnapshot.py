"""Re-snapshot one Paimon table, or one partition of it, in a single commit, while the pipeline's other tables go
on with their binlog increments.

How it stays correct (primary-key tables only):

1. Under the table's lock, read its checkpoint C from its latest lakecdc snapshot. A table without checkpoint is
   simply snapshotted by the normal micro-batch.
2. Take a consistent MySQL snapshot at position S (S ≥ C), transform it, and keep the rows of the partition
   (or all rows). Every such row is upserted.
3. Rows in Paimon (in that partition) whose primary key the snapshot no longer has are deleted; in a SOFT_DELETE
   table they are marked deleted in the column carrying ``__data_event_type__`` instead.
4. One commit. Whole table: the table now equals MySQL at S, so the checkpoint becomes S (this also repairs a
   table whose binlog was purged). One partition: the rest of the table is still at C, so the checkpoint stays C;
   the next run replays (C, head] with full row images, which converges on the partition as on the others.

Append tables (no primary key) cannot be reconciled this way: the refusal says to drop and re-create the table.
This module uses only stable entry points of the runtime, source and sink (``build_plan``, ``MySqlSource.snapshot``,
``CompiledTransform.apply``, ``PaimonSink``), so the snapshot machinery may change underneath.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.config import PipelineConfig
from lakecdc.errors import LakeCdcError, PipelineConfigError
from lakecdc.model import DELETE, INSERT, OP_COLUMN, BinlogOffset, TableCounts, TableId
from lakecdc.runtime.report import DEFAULT_PARTITION_NAME, SnapshotProgress, count_partitions, estimate_rows
from lakecdc.transform.rules import SOFT_DELETE, select_rule

PHASE_RESNAPSHOT = "resnapshot"
RESNAPSHOT_PARTITION = "lakecdc.resnapshot.partition"
RESNAPSHOT_OFFSET = "lakecdc.resnapshot.offset"
EVENT_TYPE_COLUMN = "__data_event_type__"
_KNOWN_PHASES = ("snapshot", "binlog", PHASE_RESNAPSHOT)
# Set while a chunked snapshot is unfinished (lakecdc.runtime.checkpoint.SNAPSHOT_PENDING).
SNAPSHOT_PENDING = "lakecdc.snapshot.pending"
# Properties of the previous checkpoint that describe the pipeline, not the data: carried over unchanged.
_CARRIED = ("lakecdc.captured-tables", "lakecdc.startup.mode")

logger = logging.getLogger("lakecdc.resnapshot")


@dataclass
class ResnapshotResult:
    """What a re-snapshot committed (mirrors the fields of ``lakecdc.runtime.TableResult`` the UI shows)."""

    target: TableId
    sources: list[TableId]
    partition: str | None
    snapshot_id: int
    offset: BinlogOffset  # the checkpoint written
    snapshot_offset: BinlogOffset  # where the MySQL snapshot was taken
    schema: pa.Schema
    primary_keys: list[str]
    partition_keys: list[str]
    counts: TableCounts = field(default_factory=TableCounts)
    rows_written: int = 0
    stale_deleted: int = 0
    stale_kept: int = 0
    row_count: int | None = None
    partitions: dict[str, dict[str, int]] = field(default_factory=dict)
    phase: str = PHASE_RESNAPSHOT
    committed: bool = True


def parse_partition(text: str, partition_keys: list[str], table: TableId) -> dict[str, str | None]:
    """``k1=v1/k2=v2`` (Paimon's spelling, as the UI lists it) → {column: value text, None for the NULL
    partition}; every partition key must be given."""
    if not partition_keys:
        raise PipelineConfigError(f"{table} is not partitioned; re-snapshot the whole table instead")
    spec: dict[str, str | None] = {}
    for part in text.split("/"):
        key, sep, value = part.partition("=")
        if not sep or key not in partition_keys or key in spec:
            raise PipelineConfigError(
                f"partition {text!r} of {table}: expected "
                + "/".join(f"{k}=<value>" for k in partition_keys) + " (the table's partition keys)")
        spec[key] = None if value == DEFAULT_PARTITION_NAME else value
    missing = [k for k in partition_keys if k not in spec]
    if missing:
        raise PipelineConfigError(f"partition {text!r} of {table}: missing {', '.join(missing)}")
    return spec


def _partition_mask(data: pa.Table, spec: dict[str, str | None]) -> pa.Array:
    mask = None
    for key, value in spec.items():
        column = data.column(key)
        if value is None:
            part = pc.is_null(column)
        else:
            part = pc.fill_null(pc.equal(pc.cast(column, pa.string()), value), False)
        mask = part if mask is None else pc.and_(mask, part)
    return mask


def soft_delete_column(config: PipelineConfig, plan) -> str | None | bool:
    """For a SOFT_DELETE table, the output column carrying ``__data_event_type__`` unchanged (None when it has
    none); False when the table does not soft-delete. ``plan`` is a ``TargetPlan``."""
    from lakecdc.transform.expressions import parse_projection

    soft = [s for s in plan.sources if s.transform.converter == SOFT_DELETE]
    if not soft:
        return False
    rule = select_rule(config.transforms, soft[0].source.table_id)
    if rule is None or not rule.projection:
        return None
    for item in parse_projection(rule.projection):
        if not item.star and item.bare_column == EVENT_TYPE_COLUMN:
            return item.alias
    return None


def needs_first_snapshot(config: PipelineConfig, target: TableId) -> bool:
    """True when the table has no checkpoint: the normal micro-batch then takes its first snapshot."""
    from lakecdc.runtime.checkpoint import offset_from_properties
    from lakecdc.sink import PaimonSink

    sink = PaimonSink(config.sink.catalog_options)
    return not sink.table_exists(target) or offset_from_properties(sink.checkpoint(target)) is None


def resnapshot(config: PipelineConfig, target: TableId, partition: str | None = None, *, run_id: str,
               log: logging.Logger | logging.LoggerAdapter | None = None) -> ResnapshotResult:
    """Re-snapshot ``target`` (or one partition of it) in one commit. The table must already have a checkpoint
    (see ``needs_first_snapshot``)."""
    from lakecdc.runtime.checkpoint import PHASE, checkpoint_properties, offset_from_properties
    from lakecdc.runtime.plan import build_plan, source_options
    from lakecdc.sink import PaimonSink
    from lakecdc.source import MySqlSource

    log = log or logger
    source = MySqlSource(source_options(config))
    source.check_server()
    plan = build_plan(config, source).restrict({target})
    target_plan = plan.targets[target]
    sink = PaimonSink(config.sink.catalog_options, config.sink.table_properties, config.sink.commit_user_prefix)
    with sink.lock(target, owner=f"re-snapshot of {target} by pipeline {config.name!r} run {run_id}"):
        description = sink.describe(target)
        properties = sink.checkpoint(target)
        checkpoint = offset_from_properties(properties)
        if checkpoint is None:
            raise LakeCdcError(f"{target} has no checkpoint yet: run the pipeline, which takes its first snapshot")
        if properties.get(SNAPSHOT_PENDING) or properties.get(PHASE, "snapshot") not in _KNOWN_PHASES:
            raise LakeCdcError(f"{target} is in phase {properties.get(PHASE)!r} (a snapshot still in progress?); "
                               "let the pipeline finish it before re-snapshotting")
        keys = list(description.primary_keys)
        if not keys:
            raise PipelineConfigError(
                f"{target} is an append table (no primary key): a re-snapshot cannot remove its old rows. Drop the "
                "table and run the pipeline to snapshot it afresh")
        spec = parse_partition(partition, description.partition_keys, target) if partition else None
        marker = soft_delete_column(config, target_plan)
        writer = sink.open_writer(target)
        try:
            result = _write_snapshot(source, sink, plan, target, description, spec, marker, writer, log)
            result.partition = partition
            result.offset = checkpoint if spec else result.snapshot_offset
            extra = {k: properties[k] for k in _CARRIED if k in properties}
            extra.update({RESNAPSHOT_PARTITION: partition or "", RESNAPSHOT_OFFSET: str(result.snapshot_offset)})
            result.snapshot_id = writer.commit({**checkpoint_properties(
                result.offset, phase=PHASE_RESNAPSHOT, pipeline=config.name, run_id=run_id,
                source_tables=[str(s) for s in result.sources], counts=result.counts), **extra})
        except BaseException:
            writer.abort()
            raise
    result.row_count = sink.row_count(target)
    log.info("re-snapshot of %s%s committed: snapshot %s, %d rows upserted, %d stale rows deleted%s, checkpoint %s",
             target, f" partition {partition}" if partition else "", result.snapshot_id, result.rows_written,
             result.stale_deleted, f", {result.stale_kept} kept" if result.stale_kept else "", result.offset)
    return result


def _write_snapshot(source, sink, plan, target, description, spec, marker, writer, log) -> ResnapshotResult:
    keys = list(description.primary_keys)
    result = ResnapshotResult(target=target, sources=sorted(plan.sources), partition=None, snapshot_id=0,
                              offset=BinlogOffset("", 0), snapshot_offset=BinlogOffset("", 0),
                              schema=description.schema, primary_keys=keys,
                              partition_keys=list(description.partition_keys))
    seen: list[pa.Table] = []
    source_plans = [plan.sources[s] for s in sorted(plan.sources)]
    with source.snapshot([p.source for p in source_plans]) as snapshot:
        result.snapshot_offset = snapshot.offset
        estimates = estimate_rows(source.options, [p.source.table_id for p in source_plans]) if not spec else {}
        for source_plan in source_plans:
            table_id = source_plan.source.table_id
            progress = SnapshotProgress(table_id, estimates.get(table_id), log)
            for batch in snapshot.read(table_id):
                progress.add(batch.num_rows)
                output = source_plan.transform.apply(batch)
                if spec:
                    output = output.filter(_partition_mask(output, spec))
                if not output.num_rows:
                    continue
                writer.write(output)
                result.rows_written += output.num_rows
                result.counts.inserted += output.num_rows
                count_partitions(output, result.partition_keys, result.partitions)
                seen.append(output.select(keys))
            progress.finish(snapshot.offset)
    _remove_stale_rows(sink, target, description, spec, marker, seen, writer, result, log)
    return result


def _remove_stale_rows(sink, target, description, spec, marker, seen, writer, result, log) -> None:
    """Delete (or mark deleted) the Paimon rows whose key the snapshot does not have. Reading while holding the
    lock sees exactly the snapshot this commit follows."""
    keys = list(description.primary_keys)
    wanted = list(dict.fromkeys(keys + list(spec or {}) + ([marker] if marker else [])))
    current = sink.read_table(target, wanted)
    if spec:
        current = current.filter(_partition_mask(current, spec))
    if marker:
        current = current.filter(pc.fill_null(pc.not_equal(current.column(marker), DELETE), True))
    if current.num_rows == 0:
        return
    snapshot_keys = pa.concat_tables(seen).combine_chunks() if seen else current.select(keys).slice(0, 0)
    stale_keys = current.select(keys).join(snapshot_keys.select(keys), keys=keys, join_type="left anti")
    if stale_keys.num_rows == 0:
        return
    if marker is None:  # SOFT_DELETE without an event-type column: nothing can mark them
        result.stale_kept = stale_keys.num_rows
        log.warning("%s: %d rows are gone from MySQL but stay (SOFT_DELETE table without a column holding "
                    "__data_event_type__)", target, stale_keys.num_rows)
        return
    full = sink.read_table(target)
    stale = full.join(stale_keys, keys=keys, join_type="left semi")
    if marker:
        stale = stale.set_column(stale.schema.get_field_index(marker), marker,
                                 pa.repeat(pa.scalar(DELETE, stale.schema.field(marker).type), stale.num_rows))
        kinds = pa.repeat(pa.scalar(INSERT), stale.num_rows)
    else:
        kinds = pa.repeat(pa.scalar(DELETE), stale.num_rows)
    stale = stale.append_column(pa.field(OP_COLUMN, pa.string(), nullable=False), kinds)
    writer.write(stale)
    result.stale_deleted = stale.num_rows
    result.counts.deleted += stale.num_rows
    result.rows_written += stale.num_rows
    count_partitions(stale.set_column(stale.schema.get_field_index(OP_COLUMN), OP_COLUMN,
                                      pa.repeat(pa.scalar(DELETE), stale.num_rows)),
                     result.partition_keys, result.partitions)

