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

import functools
import logging
import uuid
from dataclasses import dataclass, field

import pyarrow as pa

from lakecdc.config import PipelineConfig
from lakecdc.errors import LakeCdcError, PipelineConfigError
from lakecdc.model import BinlogOffset, SourceTable, TableCounts, TableId
from lakecdc.runtime.checkpoint import (PHASE_BINLOG, PHASE_RESNAPSHOT, PHASE_SNAPSHOT, RESNAPSHOT_OFFSET,
                                        RESNAPSHOT_PARTITION, Checkpoint, checkpoint_properties, read_checkpoint)
from lakecdc.runtime.commit_groups import InitialLoadContext, run_initial_loads
from lakecdc.runtime.connect import open_sink, open_source
from lakecdc.runtime.micro_batch import TableResult, failpoint, run_micro_batch, write_batch
from lakecdc.runtime.plan import PipelinePlan, TargetPlan, build_plan
from lakecdc.runtime.replacement import Replacement, SweepOutcome, partition_mask, replacement_for
from lakecdc.runtime.report import DEFAULT_PARTITION_NAME, SnapshotProgress, count_partitions, estimate_rows
from lakecdc.runtime.schema_evolution import (IGNORE, LENIENT, SchemaChangeError, SinkEvent, coerce_into_table,
                                              included_types, lenient)
from lakecdc.runtime.table_work import SNAPSHOT, TargetWork
from lakecdc.runtime.verify import schema_drift
from lakecdc.sink import PaimonSink, TableWriter
from lakecdc.sink.evolution import ADD, ALTER_TYPE, DROP, ColumnChange, UnsupportedSchemaChange, apply_column_changes
from lakecdc.source import ChunkKey, ChunkProgress, MySqlSource
from lakecdc.source.chunks import chunkable
from lakecdc.source.chunk_sql import ranges_condition
from lakecdc.transform.partition_ranges import ColumnRange, partition_ranges
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
    """Re-snapshot ``target`` (or one partition of it) in commit groups, in bounded memory. The table must already
    have a checkpoint (see ``needs_first_snapshot``)."""
    log = log or logger
    run_id = run_id or uuid.uuid4().hex
    source = open_source(config)
    head = source.head_offset()  # first, as a run takes it: where the commit groups fold the binlog from
    source.check_server()
    sink = open_sink(config)
    with sink.lock(target, owner=f"re-snapshot of {target} by pipeline {config.name!r} run {run_id}"):
        if not sink.table_exists(target):
            raise LakeCdcError(f"{target} does not exist in the Paimon warehouse: run the pipeline, which creates "
                               "and snapshots it")
        checkpoint = read_checkpoint(sink.checkpoint(target))
        if checkpoint is None:
            raise LakeCdcError(f"{target} has no checkpoint yet: run the pipeline, which takes its first snapshot")
        restarting = checkpoint.snapshot_pending and checkpoint.phase == PHASE_RESNAPSHOT
        if (checkpoint.snapshot_pending and not restarting) or checkpoint.phase not in _KNOWN_PHASES:
            raise LakeCdcError(f"{target} is in phase {checkpoint.phase!r} (a snapshot still in progress?); "
                               "let the pipeline finish it before re-snapshotting")
        if restarting and partition:
            raise LakeCdcError(f"a re-snapshot of the whole of {target} stopped half-way; re-snapshot the whole "
                               "table (or run the pipeline, which starts it over) before one partition")
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
        for source_plan in plan.sources.values():
            coerce_into_table(sink, source_plan, target)  # rows into the table's actual columns (ignore mode)
        estimates = estimate_rows(source.options, sorted(plan.sources))
        replacement = replacement_for(config, sink, target_plan, estimated_rows=sum(estimates.values()), spec=spec)
        try:
            if spec and partition:
                result = _resnapshot_partition(config, source, sink, plan, checkpoint, partition, spec, replacement,
                                               run_id, log)
            else:
                result = _resnapshot_table(config, source, sink, plan, checkpoint, replacement, estimates, head,
                                           run_id, log)
        finally:
            replacement.close()
        result.schema_changes = schema_changes
    result.row_count = sink.row_count(target)
    # the rows of what was re-snapshotted (the partition's, not the table's), then the table's
    log.info("re-snapshot of %s%s committed: snapshot %s in %d commit(s); %s: %d rows from MySQL, %d stale rows "
             "deleted; the table holds %s rows; checkpoint %s", target, f" partition {partition}" if partition else "",
             result.snapshot_id, result.commits, f"partition {partition}" if partition else "the table",
             result.snapshot_rows, result.stale_deleted, result.row_count, result.offset)
    return result


def _result(target: TableId, plan: PipelinePlan, sink: PaimonSink, sweep: SweepOutcome | None,
            **fields) -> ResnapshotResult:
    """A ResnapshotResult of the table as it is now, with the sweep's counts."""
    description = sink.describe(target)
    sweep = sweep or SweepOutcome()
    result = ResnapshotResult(target=target, sources=sorted(plan.sources), schema=description.schema,
                              primary_keys=list(description.primary_keys),
                              partition_keys=list(description.partition_keys),
                              counts=TableCounts(inserted=sweep.inserted, updated=sweep.updated,
                                                 deleted=sweep.deleted),
                              stale_deleted=sweep.stale, unchanged=sweep.unchanged, **fields)
    for name, kinds in sweep.stale_partitions.items():
        for kind, rows in kinds.items():
            result.partitions.setdefault(name, {})
            result.partitions[name][kind] = result.partitions[name].get(kind, 0) + rows
    return result


def _resnapshot_table(config: PipelineConfig, source: MySqlSource, sink: PaimonSink, plan: PipelinePlan,
                      checkpoint: Checkpoint, replacement: Replacement, estimates: dict[TableId, int],
                      head: BinlogOffset, run_id: str, log) -> ResnapshotResult:
    """The whole table, through the snapshot's commit groups (lakecdc.runtime.commit_groups): each group's rows
    are brought to its position P and committed with P as the checkpoint (and the progress, while groups
    remain); the last group's commit also removes the stale rows. The table then equals MySQL at the last P."""
    [target] = plan.targets
    written = TableResult(target=target, sources=sorted(plan.sources), phase=PHASE_RESNAPSHOT, committed=False,
                          snapshot_id=None, offset=None, partition_keys=list(plan.targets[target].partition_keys))
    captured = sorted(str(t) for t in (checkpoint.captured if checkpoint.captured is not None else plan.sources))
    ctx = InitialLoadContext(
        config=config, plan=plan, source=source, sink=sink, run_id=run_id, captured=captured,
        apply=functools.partial(write_batch, result=written), failpoint=failpoint, log=log,
        progress_report=lambda table_id: SnapshotProgress(table_id, estimates.get(table_id), log),
        run_head=head, replacement=replacement)
    work = TargetWork(target, SNAPSHOT, checkpoint, progress={s: ChunkProgress() for s in plan.sources},
                      replace=True)
    keys = {sid: source.chunk_key(p.source) for sid, p in plan.sources.items()}
    outcome = run_initial_loads([(ctx, work)], keys, estimates)[target]
    assert outcome.offset is not None and outcome.snapshot_id is not None
    result = _result(target, plan, sink, outcome.sweep, partition=None, snapshot_id=outcome.snapshot_id,
                     offset=outcome.offset, snapshot_offset=outcome.offset, snapshot_rows=outcome.snapshot_rows,
                     rows_written=outcome.rows_written + (outcome.sweep.stale if outcome.sweep else 0),
                     commits=outcome.commits)
    for name, kinds in written.partitions.items():
        for kind, rows in kinds.items():
            result.partitions.setdefault(name, {})
            result.partitions[name][kind] = result.partitions[name].get(kind, 0) + rows
    return result


def _resnapshot_partition(config: PipelineConfig, source: MySqlSource, sink: PaimonSink, plan: PipelinePlan,
                          checkpoint: Checkpoint, partition: str, spec: dict[str, str | None],
                          replacement: Replacement, run_id: str, log) -> ResnapshotResult:
    """One partition: the rest of the table stays at the checkpoint C, and so does the checkpoint; the next run
    replays (C, head] with full row images, which converges on the partition as on the others. So the partition's
    rows are read chunk by chunk, lock-free, with no binlog, and committed every ``snapshot.commit-rows`` rows; the
    last commit also removes the partition's stale rows. A partition column that is a source column, or a monotone
    function of one (lakecdc.transform.partition_ranges), narrows every chunk statement to the partition's rows."""
    [target] = plan.targets
    group = _PartitionGroup(config, sink, target, checkpoint, partition, replacement, run_id)
    budget = config.snapshot_commit_rows
    snapshot_rows = 0
    position = checkpoint.offset
    for table_id in sorted(plan.sources):
        source_plan = plan.sources[table_id]
        ranges = partition_ranges(source_plan.transform, spec)
        key = _partition_chunk_key(source, source_plan.source, ranges)
        log.info("re-snapshot of %s partition %s: %s", target, partition,
                 f"reads the rows of {table_id} where " + " and ".join(r.describe() for r in ranges) +
                 f" (chunked by {key.name if key else '-'})" if ranges else
                 f"reads every chunk of {table_id} (its partition columns are not monotone in a source column)")
        condition = ranges_condition(ranges)
        progress = ChunkProgress.not_started(key)
        while not progress.done:
            with source.snapshot([source_plan.source], incremental=True,
                                 extra={table_id: condition} if condition else None) as snap:
                for batch in snap.read_chunks(table_id, key, progress, max(budget - group.rows, 1)):
                    output = source_plan.transform.apply(batch)
                    snapshot_rows += group.write(output.filter(partition_mask(output, spec)))
                assert snap.progress is not None
                progress = snap.progress
                position = snap.head()  # after the schema check of the tables read
            if group.rows >= budget:
                group.commit(position, final=False)
    group.commit(position, final=True)
    return _result(target, plan, sink, group.sweep, partition=partition, snapshot_id=group.snapshot_id,
                   offset=checkpoint.offset, snapshot_offset=position, snapshot_rows=snapshot_rows,
                   rows_written=group.written, commits=group.commits, partitions=group.partitions)


def _partition_chunk_key(source: MySqlSource, table: SourceTable, ranges: list[ColumnRange]) -> ChunkKey | None:
    """The chunk key a partition's read walks: a column of its ranges that leads an index (the server then reads
    the partition's range of that index, not the table), else the table's own chunk key (every chunk statement
    then still sends only the partition's rows)."""
    if ranges:
        indexed = source.leading_index_columns(table.table_id)
        for name in (r.column for r in ranges):
            column = table.column(name)
            if name in indexed and chunkable(column):
                return ChunkKey(column, unique=tuple(table.row_identity) == (name,))
    return source.chunk_key(table)


class _PartitionGroup:
    """The open commit group of a partition re-snapshot: its writer, and its commits at the table's checkpoint."""

    def __init__(self, config: PipelineConfig, sink: PaimonSink, target: TableId, checkpoint: Checkpoint,
                 partition: str, replacement: Replacement, run_id: str):
        self.config, self.sink, self.target = config, sink, target
        self.checkpoint, self.partition, self.replacement, self.run_id = checkpoint, partition, replacement, run_id
        self.partition_keys = list(sink.describe(target).partition_keys)
        self._writer: TableWriter | None = None
        self.rows = 0  # rows in the open group
        self.written = 0
        self.commits = 0
        self.snapshot_id: int | None = None
        self.sweep: SweepOutcome | None = None
        self.partitions: dict[str, dict[str, int]] = {}

    @property
    def writer(self):
        if self._writer is None:
            self._writer = self.sink.open_writer(self.target)
        return self._writer

    def write(self, output: pa.Table) -> int:
        if output.num_rows == 0:
            return 0
        try:
            self.writer.write(output)
        except BaseException:
            self.abort()
            raise
        self.replacement.record(output)
        self.rows += output.num_rows
        self.written += output.num_rows
        count_partitions(output, self.partition_keys, self.partitions)
        return output.num_rows

    def abort(self) -> None:
        writer, self._writer = self._writer, None
        self.replacement.group_discarded()
        if writer is not None:
            writer.abort()

    def commit(self, snapshot_offset: BinlogOffset, *, final: bool) -> None:
        """Commit the open group at the table's checkpoint (the last one with the partition's stale rows)."""
        checkpoint = self.checkpoint
        try:
            if final:
                self.sweep = self.replacement.sweep(self.writer.write)
                self.written += self.sweep.stale
            properties = checkpoint_properties(
                checkpoint.offset, phase=PHASE_RESNAPSHOT, pipeline=self.config.name, run_id=self.run_id,
                source_tables=[str(s) for s in checkpoint.sources], counts=TableCounts(),
                captured=sorted(str(t) for t in checkpoint.captured) if checkpoint.captured is not None else None,
                startup_mode=checkpoint.startup_mode,
                source_schemas={str(t): s for t, s in checkpoint.schemas.items()},
                xa_scan_start=checkpoint.xa_scan_start)
            properties.update({RESNAPSHOT_PARTITION: self.partition, RESNAPSHOT_OFFSET: str(snapshot_offset)})
            self.snapshot_id = self.writer.commit(properties)
        except BaseException:
            self.abort()
            raise
        self._writer = None
        self.replacement.group_committed()
        self.commits += 1
        self.rows = 0


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
