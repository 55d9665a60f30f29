"""Re-snapshot one Paimon table, or one partition of it, in a single commit, while the pipeline's other tables go
on with their binlog increments (``lakecdc resnapshot``, the Dagster ``resnapshot: true`` run config and the
per-table re-snapshot job all call :func:`resnapshot`).

How it stays correct (primary-key tables only):

1. Under the table's lock, read its checkpoint C from its latest lakecdc snapshot. A table without checkpoint is
   simply snapshotted by the normal micro-batch (:func:`resnapshot_or_snapshot`).
2. Whole table: bring the Paimon schema to what the pipeline produces from MySQL now, as
   ``schema.change.behavior`` allows (:func:`align_schema`), which repairs a table whose schema drifted.
   One partition: the rest of the table stays at C, so MySQL's schema must still be the one recorded at C (else:
   run the pipeline first, which applies the DDL in between).
3. Take a consistent MySQL snapshot at position S (S ≥ C), transform it, and keep the rows of the partition
   (or all rows). Every such row is upserted.
4. Rows in Paimon (in that partition) whose primary key the snapshot no longer has are deleted; in a SOFT_DELETE
   table they are marked deleted in the column carrying ``__data_event_type__`` instead.
5. One commit. Whole table: the table now equals MySQL at S, so the checkpoint becomes S (this also repairs a
   table whose binlog was purged) and the schema history records the source schemas at S. One partition: the
   checkpoint and its schema history stay C's; the next run replays (C, head] with full row images, which
   converges on the partition as on the others. The commit records the partition (``lakecdc.resnapshot.partition``)
   and S (``lakecdc.resnapshot.offset``).

Its counts say what it changed, in the words of a binlog commit: ``inserted`` rows whose key Paimon did not hold (or
held marked deleted), ``updated`` rows whose values from MySQL differ from Paimon's, ``deleted`` the stale rows;
rows re-read unchanged are ``unchanged`` (compared on the columns computed from MySQL columns: metadata columns such
as ``op_ts`` differ in every re-read row and are no change of the data).

Append tables (no primary key) cannot be reconciled this way: the refusal says to drop and re-create the table.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.config import PipelineConfig
from lakecdc.errors import LakeCdcError, PipelineConfigError
from lakecdc.model import DELETE, INSERT, OP_COLUMN, BinlogOffset, ChangeBatch, TableCounts, TableId
from lakecdc.runtime.incremental import read_at_head
from lakecdc.runtime.checkpoint import (PHASE_BINLOG, PHASE_RESNAPSHOT, PHASE_SNAPSHOT, RESNAPSHOT_OFFSET,
                                        RESNAPSHOT_PARTITION, checkpoint_properties, read_checkpoint)
from lakecdc.runtime.connect import open_sink, open_source
from lakecdc.runtime.micro_batch import run_micro_batch
from lakecdc.runtime.plan import PipelinePlan, TargetPlan, build_plan
from lakecdc.runtime.report import DEFAULT_PARTITION_NAME, SnapshotProgress, count_partitions, estimate_rows
from lakecdc.runtime.schema_evolution import (IGNORE, LENIENT, SchemaChangeError, SinkEvent, coerce_into_table,
                                              included_types, lenient)
from lakecdc.runtime.verify import schema_drift, soft_delete_column
from lakecdc.sink import PaimonSink
from lakecdc.sink.evolution import ADD, ALTER_TYPE, DROP, ColumnChange, UnsupportedSchemaChange, apply_column_changes
from lakecdc.source import MySqlSource
from lakecdc.source.ddl import ADD_COLUMN, ALTER_COLUMN_TYPE, DROP_COLUMN

_KNOWN_PHASES = (PHASE_SNAPSHOT, PHASE_BINLOG, PHASE_RESNAPSHOT)

logger = logging.getLogger("lakecdc.resnapshot")


@dataclass
class ResnapshotResult:
    """What a re-snapshot committed (the fields of ``lakecdc.runtime.TableResult`` the UI shows, and more)."""

    target: TableId
    sources: list[TableId]
    partition: str | None  # the partition re-snapshotted (``k1=v1/k2=v2``), None for the whole table
    snapshot_id: int
    offset: BinlogOffset  # the checkpoint written
    snapshot_offset: BinlogOffset  # where the MySQL snapshot was taken
    schema: pa.Schema  # the Paimon table's schema after the re-snapshot
    primary_keys: list[str]
    partition_keys: list[str]
    counts: TableCounts = field(default_factory=TableCounts)
    rows_written: int = 0
    snapshot_rows: int = 0  # rows of the partition (or table) read from MySQL
    stale_deleted: int = 0
    unchanged: int = 0  # rows re-read that Paimon already held with the same values (rewritten, not counted)
    row_count: int | None = None
    partitions: dict[str, dict[str, int]] = field(default_factory=dict)
    schema_changes: list[str] = field(default_factory=list)  # what align_schema changed in the Paimon table
    phase: str = PHASE_RESNAPSHOT
    committed: bool = True
    commits: int = 1


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


def needs_first_snapshot(config: PipelineConfig, target: TableId) -> bool:
    """True when the table has no checkpoint: the normal micro-batch then takes its first snapshot."""
    sink = open_sink(config)
    return not sink.table_exists(target) or read_checkpoint(sink.checkpoint(target)) is None


def resnapshot_or_snapshot(config: PipelineConfig, target: TableId, partition: str | None = None, *,
                           run_id: str | None = None, log: logging.Logger | logging.LoggerAdapter | None = None):
    """Re-snapshot ``target`` (or one partition); a table without checkpoint gets its first snapshot from the
    micro-batch instead. Returns the ResnapshotResult, or the micro-batch's TableResult (None when it committed
    nothing)."""
    log = log or logger
    if not needs_first_snapshot(config, target):
        return resnapshot(config, target, partition, run_id=run_id, log=log)
    if partition:
        raise LakeCdcError(f"{target} has no checkpoint yet, so it has no partitions to re-snapshot: run the "
                           "pipeline (or re-snapshot the whole table), which takes its first snapshot")
    log.info("%s has no checkpoint yet: taking its first snapshot", target)
    table = run_micro_batch(config, targets={target}, run_id=run_id, log=log).tables.get(target)
    return table if table is not None and table.committed else None


def resnapshot(config: PipelineConfig, target: TableId, partition: str | None = None, *, run_id: str | None = None,
               log: logging.Logger | logging.LoggerAdapter | None = None) -> ResnapshotResult:
    """Re-snapshot ``target`` (or one partition of it) in one commit. The table must already have a checkpoint
    (see ``needs_first_snapshot``)."""
    log = log or logger
    run_id = run_id or uuid.uuid4().hex
    source = open_source(config)
    source.check_server()
    sink = open_sink(config)
    with sink.lock(target, owner=f"re-snapshot of {target} by pipeline {config.name!r} run {run_id}"):
        if not sink.table_exists(target):
            raise LakeCdcError(f"{target} does not exist in the Paimon warehouse: run the pipeline, which creates "
                               "and snapshots it")
        checkpoint = read_checkpoint(sink.checkpoint(target))
        if checkpoint is None:
            raise LakeCdcError(f"{target} has no checkpoint yet: run the pipeline, which takes its first snapshot")
        if checkpoint.snapshot_pending or checkpoint.phase not in _KNOWN_PHASES:
            raise LakeCdcError(f"{target} is in phase {checkpoint.phase!r} (a snapshot still in progress?); "
                               "let the pipeline finish it before re-snapshotting")
        plan = build_plan(config, source, targets={target}).restrict({target})  # this table's sources only
        target_plan = plan.targets[target]
        description = sink.describe(target)
        if not description.primary_keys:
            raise PipelineConfigError(
                f"{target} is an append table (no primary key): a re-snapshot cannot remove its old rows. Drop the "
                "table and run the pipeline to snapshot it afresh")
        spec = parse_partition(partition, description.partition_keys, target) if partition else None
        if spec and partition:
            _require_recorded_schema(plan, checkpoint, target, partition)
            schema_changes: list[str] = []
        else:
            schema_changes = align_schema(config, sink, target_plan, log)
            description = sink.describe(target)
        for source_plan in plan.sources.values():
            coerce_into_table(sink, source_plan, target)  # rows into the table's actual columns (ignore mode)
        marker = soft_delete_column(config, target_plan)
        writer = sink.open_writer(target)
        try:
            result = _write_snapshot(source, sink, plan, target, description, spec, marker, writer, log)
            result.partition = partition
            result.schema_changes = schema_changes
            if spec:  # the rest of the table is still at C: so are the checkpoint and its schema history
                result.offset = checkpoint.offset
                schemas = {str(t): s for t, s in checkpoint.schemas.items()}
            else:
                result.offset = result.snapshot_offset
                schemas = {str(t): p.source.to_json() for t, p in plan.sources.items()}
            properties = checkpoint_properties(
                result.offset, phase=PHASE_RESNAPSHOT, pipeline=config.name, run_id=run_id,
                source_tables=[str(s) for s in result.sources], counts=result.counts,
                captured=sorted(str(t) for t in checkpoint.captured) if checkpoint.captured is not None else None,
                startup_mode=checkpoint.startup_mode, source_schemas=schemas)
            properties.update({RESNAPSHOT_PARTITION: partition or "", RESNAPSHOT_OFFSET: str(result.snapshot_offset)})
            result.snapshot_id = writer.commit(properties)
        except BaseException:
            writer.abort()
            raise
    result.row_count = sink.row_count(target)
    log.info("re-snapshot of %s%s committed: snapshot %s, %d rows upserted, %d stale rows deleted, checkpoint %s",
             target, f" partition {partition}" if partition else "", result.snapshot_id, result.snapshot_rows,
             result.stale_deleted, result.offset)
    return result


def _require_recorded_schema(plan: PipelinePlan, checkpoint, target: TableId, partition: str) -> None:
    """A partition re-snapshot keeps the checkpoint C, so its rows must have the columns of the schema recorded at
    C: a DDL after C (not yet read by the pipeline) would mix two schemas in one table."""
    for table_id, source_plan in plan.sources.items():
        recorded = checkpoint.schemas.get(table_id)
        if recorded is not None and _columns(recorded) != _columns(source_plan.source.to_json()):
            raise LakeCdcError(
                f"cannot re-snapshot partition {partition} of {target}: the schema of {table_id} changed after the "
                f"table's checkpoint {checkpoint.offset} (a DDL the pipeline has not applied yet). Run the pipeline "
                "first, or re-snapshot the whole table")


def _columns(schema_json: dict) -> tuple:
    """What a source schema (SourceTable.to_json) means for the rows: column names, types, nullability and the
    primary key (a schema parsed from DDL may not know a column's default collation; information_schema does)."""
    return (tuple((c["name"], c["type"].lower(), c["nullable"]) for c in schema_json["columns"]),
            tuple(schema_json.get("primary_keys", ())))


def align_schema(config: PipelineConfig, sink: PaimonSink, plan: TargetPlan,
                 log: logging.Logger | logging.LoggerAdapter = logger) -> list[str]:
    """Before a whole-table re-snapshot: change the Paimon table's columns to what the pipeline produces from MySQL
    now, as ``schema.change.behavior`` and ``include/exclude.schema.changes`` allow (ignore: nothing; lenient:
    adds nullable and last, keeps dropped columns nullable; the other modes: exactly). A type change Paimon readers
    could not read back replaces the column (every row is rewritten by the re-snapshot). Returns what changed."""
    mode = config.schema_change_behavior
    if mode == IGNORE:
        return []
    target = plan.target
    drift = schema_drift(plan, sink.paimon_types(target), mode)
    if not drift.drifted:
        return []
    included = included_types(config)
    names = plan.schema.names
    events = []
    if DROP_COLUMN in included and drift.dropped:
        events.append(SinkEvent(DROP_COLUMN, [ColumnChange(DROP, c) for c in drift.dropped]))
    if ADD_COLUMN in included and drift.added:
        events.append(SinkEvent(ADD_COLUMN, [
            ColumnChange(ADD, c, plan.schema.field(c), ("FIRST", "") if names.index(c) == 0
                         else ("AFTER", names[names.index(c) - 1])) for c in drift.added]))
    if ALTER_COLUMN_TYPE in included and drift.changed:
        events.append(SinkEvent(ALTER_COLUMN_TYPE, [ColumnChange(ALTER_TYPE, c, plan.schema.field(c))
                                                    for c in drift.changed]))
    if mode == LENIENT:
        events = lenient(events, sink.paimon_types(target))
    applied: list[str] = []
    for change in (c for e in events for c in e.changes):
        try:
            done = apply_column_changes(sink, target, [change], warn=log.warning)
        except UnsupportedSchemaChange:
            done = _replace_column(sink, target, change, names)
        except LakeCdcError as error:
            raise SchemaChangeError(f"re-snapshot of {target}: {error}") from error
        applied.extend(c.describe() for c in done)
    for what in applied:
        log.info("re-snapshot of %s: %s", target, what)
    return applied


def _replace_column(sink: PaimonSink, target: TableId, change: ColumnChange, names: list[str]) -> list[ColumnChange]:
    """A type change lakecdc refuses: drop the column and add it with the new type in its place (the
    re-snapshot rewrites every row, so no old value is needed)."""
    index = names.index(change.name)
    position = ("FIRST", "") if index == 0 else ("AFTER", names[index - 1])
    replaced = [ColumnChange(DROP, change.name), ColumnChange(ADD, change.name, change.field, position)]
    try:
        return apply_column_changes(sink, target, replaced)
    except LakeCdcError as error:
        raise SchemaChangeError(f"re-snapshot of {target}: cannot change column {change.name!r} to the type MySQL "
                                f"has now: {error}. Drop the Paimon table and run the pipeline to snapshot it "
                                "afresh") from error


def _write_snapshot(source, sink, plan, target, description, spec, marker, writer, log) -> ResnapshotResult:
    keys = list(description.primary_keys)
    result = ResnapshotResult(target=target, sources=sorted(plan.sources), partition=None, snapshot_id=0,
                              offset=BinlogOffset("", 0), snapshot_offset=BinlogOffset("", 0),
                              schema=description.schema, primary_keys=keys,
                              partition_keys=list(description.partition_keys))
    seen: list[pa.Table] = []
    source_plans = [plan.sources[s] for s in sorted(plan.sources)]
    compared = _data_columns(source_plans, description.schema.names, keys)
    before = _active_rows(sink, target, keys + compared, spec, marker)

    def write(source_plan, batch: ChangeBatch) -> None:
        output = source_plan.transform.apply(batch)
        if spec:
            output = output.filter(_partition_mask(output, spec))
        if not output.num_rows:
            return
        writer.write(output)
        result.rows_written += output.num_rows
        result.snapshot_rows += output.num_rows
        try:
            _count_against(output, before, keys, compared, result)
        except pa.ArrowException:  # a column Arrow cannot compare: every row counted as inserted
            result.counts.inserted += output.num_rows
        count_partitions(output, result.partition_keys, result.partitions)
        seen.append(output.select(keys))

    estimates = estimate_rows(source.options, [p.source.table_id for p in source_plans]) if not spec else {}
    if source.options.incremental_snapshot:
        # lock-free (scan.incremental.snapshot.enabled): chunk by chunk, brought to one binlog position by the binlog
        offset, tables = read_at_head(source, [p.source for p in source_plans])
        result.snapshot_offset = offset
        for source_plan in source_plans:
            rows = tables.pop(source_plan.source.table_id)
            progress = SnapshotProgress(source_plan.source.table_id, estimates.get(source_plan.source.table_id), log)
            for start in range(0, rows.num_rows, source.options.snapshot_batch_rows):
                batch = ChangeBatch(source_plan.source, rows.slice(start, source.options.snapshot_batch_rows))
                progress.add(batch.num_rows)
                write(source_plan, batch)
            progress.finish(offset)
        _check_schema_unchanged(source, source_plans, target)
    else:
        with source.snapshot([p.source for p in source_plans]) as snapshot:
            result.snapshot_offset = snapshot.offset
            for source_plan in source_plans:
                table_id = source_plan.source.table_id
                progress = SnapshotProgress(table_id, estimates.get(table_id), log)
                for batch in snapshot.read(table_id):
                    progress.add(batch.num_rows)
                    write(source_plan, batch)
                progress.finish(snapshot.offset)
            _check_schema_unchanged(source, source_plans, target)
    _remove_stale_rows(sink, target, description, spec, marker, seen, writer, result)
    return result


def _data_columns(source_plans: list, stored: list[str], keys: list[str]) -> list[str]:
    """The stored non-key columns computed from MySQL columns (what a re-read row is compared on)."""
    columns: list[str] = []
    for source_plan in source_plans:
        source_columns = set(source_plan.source.column_names)
        for column, names in source_plan.transform.column_sources().items():
            if column in stored and column not in keys and column not in columns and source_columns & set(names):
                columns.append(column)
    return columns


def _active_rows(sink: PaimonSink, target: TableId, columns: list[str], spec: dict | None,
                 marker: str | None) -> pa.Table:
    """The table's rows (of the partition) before the re-snapshot, not marked deleted, with ``columns``."""
    wanted = list(dict.fromkeys(columns + list(spec or {}) + ([marker] if marker else [])))
    current = sink.read_table(target, wanted)
    if spec:
        current = current.filter(_partition_mask(current, spec))
    if marker:
        current = current.filter(pc.fill_null(pc.not_equal(current.column(marker), DELETE), True))
    return current.select(columns)


_BEFORE = "__lakecdc_before__"


def _count_against(output: pa.Table, before: pa.Table, keys: list[str], compared: list[str],
                   result: ResnapshotResult) -> None:
    """Count the re-read rows of ``output`` as inserted (key not active in Paimon), updated (a compared value
    differs) or unchanged."""
    if output.select(keys + compared).schema != before.schema:  # e.g. a nullability difference: compare values
        before = before.cast(pa.schema([output.schema.field(c) for c in before.column_names]))
    renamed = before.rename_columns([c if c in keys else f"{c}{_BEFORE}" for c in before.column_names])
    renamed = renamed.append_column(_BEFORE, pa.repeat(pa.scalar(True), renamed.num_rows))
    joined = output.select(keys + compared).join(renamed, keys=keys, join_type="left outer")
    present = pc.fill_null(joined.column(_BEFORE), False).combine_chunks()
    existing = joined.filter(present)
    changed = pa.array([False] * existing.num_rows, pa.bool_())
    for column in compared:
        changed = pc.or_(changed, _differs(existing.column(column), existing.column(f"{column}{_BEFORE}")))
    updated = pc.sum(changed).as_py() or 0
    result.counts.inserted += joined.num_rows - existing.num_rows
    result.counts.updated += updated
    result.unchanged += existing.num_rows - updated


def _differs(new: pa.ChunkedArray, old: pa.ChunkedArray) -> pa.Array:
    """Row-wise: the values differ (a null and a value differ; two nulls do not)."""
    try:
        unequal = pc.fill_null(pc.not_equal(new, old), False)
        return pc.or_(unequal, pc.not_equal(pc.is_null(new), pc.is_null(old))).combine_chunks()
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):  # nested or mismatched types: compare as Python values
        return pa.array([a != b for a, b in zip(new.to_pylist(), old.to_pylist())], pa.bool_())


def _check_schema_unchanged(source: MySqlSource, source_plans: list, target: TableId) -> None:
    """The rows were read with the schema planned before the snapshot opened; a DDL in between would make the
    schema history recorded at the snapshot's position wrong. (A DDL after the snapshot read a table waits for the
    snapshot's transaction to end, so it lands after the position.)"""
    for source_plan in source_plans:
        table_id = source_plan.source.table_id
        if _columns(source.describe_table(table_id).to_json()) != _columns(source_plan.source.to_json()):
            raise LakeCdcError(f"the schema of {table_id} changed while {target} was being re-snapshotted; nothing "
                               "was committed: run the re-snapshot again")


def _remove_stale_rows(sink, target, description, spec, marker, seen, writer, result) -> None:
    """Delete (or mark deleted) the Paimon rows whose key the snapshot does not have. Reading while holding the
    lock sees exactly the snapshot this commit follows."""
    keys = list(description.primary_keys)
    current = _active_rows(sink, target, keys, spec, marker)
    if current.num_rows == 0:
        return
    snapshot_keys = pa.concat_tables(seen).combine_chunks() if seen else current.select(keys).slice(0, 0)
    stale_keys = current.select(keys).join(snapshot_keys.select(keys), keys=keys, join_type="left anti")
    if stale_keys.num_rows == 0:
        return
    if marker is None:  # SOFT_DELETE without an event-type column: nothing can mark them, and keeping them differs
        raise LakeCdcError(
            f"{stale_keys.num_rows} rows of {target} are gone from MySQL, but this SOFT_DELETE table has no column "
            "holding __data_event_type__ to mark them deleted, so the re-snapshot cannot make the table equal "
            "MySQL; nothing was committed. Add such a column to the projection (e.g. `__data_event_type__ AS "
            "op_type`), or drop the table and run the pipeline to snapshot it afresh")
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
    # the rows as written, as a binlog commit counts them: a SOFT_DELETE table's stale row is a +I row marked
    # deleted (it stays in the table), otherwise a -D
    count_partitions(stale, result.partition_keys, result.partitions)

