"""Full reconciliation of a pipeline's Paimon tables against MySQL: the whole-table checks that Dagster's reconcile
job runs on its own schedule (``pipeline.lakecdc.reconcile.schedule``) and ``lakecdc check`` runs from the CLI.
Routine runs never do this (their own checks look at their own commit: lakecdc.runtime.verify).

* ``row_count_matches_source``: the active rows of the Paimon table at its checkpoint equal the MySQL rows at that
  checkpoint, exactly. MySQL is read in chunks of the chunk key, as the incremental snapshot reads it
  (``scan.incremental.snapshot.chunk.size`` rows per statement, ``pipeline.lakecdc.reconcile.pause`` between two
  statements, each chunk between two reads of the binlog head, its watermarks), never in one long scan. Then the
  binlog from the checkpoint to the last chunk's high watermark is read once: a change to a key before the chunk
  holding it was read is undone from the count; a change to a key while its chunk was read may or may not have been
  seen by the SELECT and is the stated tolerance (usually 0: a chunk's SELECT takes milliseconds); a change after is
  irrelevant. Tables with a ``filter`` have no such check (the filtered-out rows are not in Paimon), nor append
  tables (a row per change) or SOFT_DELETE tables without a column holding ``__data_event_type__``.
* ``primary_key_unique``: no two live rows share a primary key, read bucket by bucket (the key columns only), so
  memory holds one bucket's keys. Paimon keeps each key in one bucket of its partition (the bucket its hash or the
  dynamic-bucket index gives it), and the partition columns are part of the key: within a bucket is where a
  duplicate can be.

Both read the Paimon table at the snapshot that carries the checkpoint, so a micro-batch committing meanwhile
changes nothing of what they compare. ``lakecdc check`` adds ``schema_matches_source`` against MySQL's schema now.

On MariaDB every chunk is read in a consistent snapshot of its own at its exact binlog position
(lakecdc.source.chunk_reader): its window is that one position, so nothing is uncertain and the tolerance is 0. On
MySQL the window is two reads of the head, and MySQL writes a transaction to the binlog before InnoDB commits it, so
one logged right before a chunk's low watermark and committed only after its SELECT started is counted as seen when
it was not: the one race of the incremental snapshot's algorithm, as in Flink CDC; a check failing by that margin
passes on the next run.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import pyarrow.compute as pc

from lakecdc.config import PipelineConfig
from lakecdc.errors import LakeCdcError
from lakecdc.model import (CHECKPOINT_KEY, DELETE, INSERT, OP_COLUMN, UPDATE_AFTER, BinlogOffset, ChangeBatch,
                           SourceTable, TableId)
from lakecdc.runtime.checkpoint import Checkpoint, read_checkpoint
from lakecdc.runtime.connect import open_sink, open_source
from lakecdc.runtime.plan import TargetPlan, build_plan, soft_delete_column
from lakecdc.runtime.verify import SCHEMA, CheckResult, has_filter, not_applicable, not_evaluated, schema_check
from lakecdc.sink import PaimonSink
from lakecdc.source import ChunkKey, ChunkProgress, MySqlSource, MySqlSourceOptions, snapshotted_mask
from lakecdc.source.activity import binlog_sizes, bytes_between
from lakecdc.source.schema import source_table_from_json

logger = logging.getLogger("lakecdc.runtime.reconcile")

ROW_COUNT = "row_count_matches_source"
PK_UNIQUE = "primary_key_unique"
RECONCILE_CHECKS = (ROW_COUNT, PK_UNIQUE)
# Reading more binlog than this from the checkpoint to the start of the count would make the check slower than the
# run that moves the checkpoint: run the pipeline first.
MAX_RECONCILE_BYTES = 64 * 1024 * 1024
DUPLICATES_SHOWN = 5


def reconcile_check_names(config: PipelineConfig, sources: list[TableId]) -> list[str]:
    """The reconciliation checks a table fed by ``sources`` has (no row count when a filter drops rows)."""
    return [n for n in RECONCILE_CHECKS if n != ROW_COUNT or not has_filter(config, sources)]


@dataclass
class CountAtCheckpoint:
    """MySQL's row count reconciled to a checkpoint (see the module docstring)."""

    expected_rows: int  # MySQL rows at the checkpoint
    rows_read: int  # rows the chunks' SELECTs returned
    chunks: int
    net_inserts_since: int  # inserts − deletes after the checkpoint of keys whose chunk was not read yet
    tolerance: int  # changes of a chunk's keys while its SELECT ran
    binlog_bytes_since: int  # binlog written from the checkpoint to the start of the count
    counted_from: BinlogOffset | None = None  # the first chunk's low watermark
    counted_to: BinlogOffset | None = None  # the last chunk's high watermark
    seconds: float = 0.0


@dataclass
class LakeTally:
    """One pass over a Paimon table bucket by bucket: its rows, active rows and keys held twice."""

    rows: int = 0
    active_rows: int = 0
    buckets: int = 0
    largest_bucket: int = 0
    duplicate_keys: int = 0
    duplicates_shown: list = field(default_factory=list)


def pinned_checkpoint(sink: PaimonSink, target: TableId) -> tuple[int, Checkpoint] | None:
    """The latest snapshot of ``target`` and the checkpoint it carries (upkeep snapshots carry their commit's), from
    one snapshot chain: what the reconciliation compares, whatever commits meanwhile. None without a checkpoint."""
    manager = sink.snapshot_manager(target)
    latest = manager.get_latest_snapshot() if manager is not None else None
    snapshot = latest
    while snapshot is not None:
        if CHECKPOINT_KEY in (snapshot.properties or {}):
            checkpoint = read_checkpoint(dict(snapshot.properties))
            assert latest is not None and checkpoint is not None
            return latest.id, checkpoint
        snapshot = manager.get_snapshot_by_id(snapshot.id - 1) if snapshot.id > 1 else None
    return None


def binlog_bytes_since(source: MySqlSource | MySqlSourceOptions, checkpoint: BinlogOffset, head: BinlogOffset) -> int:
    """The binlog bytes written from ``checkpoint`` to ``head``, across rotations (the file sizes of SHOW BINARY
    LOGS; through ``source``'s connection, or a new one for bare options); LakeCdcError when reconciling them
    would read more than MAX_RECONCILE_BYTES or the checkpoint's file is gone."""
    if head <= checkpoint:
        return 0
    return _bytes_since(source.binary_log_sizes() if isinstance(source, MySqlSource) else binlog_sizes(source),
                        checkpoint, head)


def _bytes_since(sizes: dict[str, int], checkpoint: BinlogOffset, head: BinlogOffset) -> int:
    if head <= checkpoint:
        return 0
    written = bytes_between(sizes, checkpoint, head)
    if written is None:
        raise LakeCdcError(f"the checkpoint's binlog file {checkpoint.file} is no longer on the server (purged), so "
                           "the count at the checkpoint cannot be reconciled; run the pipeline (its checkpoint moves "
                           "to a binlog file the server has), or re-snapshot the table if the run says the binlog "
                           "was purged")
    if written > MAX_RECONCILE_BYTES:
        raise LakeCdcError(f"{_mib(written)} of binlog were written since the checkpoint {checkpoint} (up to "
                           f"{head}), more than the {_mib(MAX_RECONCILE_BYTES)} the check reads to reconcile the "
                           "count; run the pipeline (its checkpoint moves to the head), then the check")
    return written


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB" if size >= 1 << 20 else f"{size} bytes"


# ------------------------------------------------------------------------------------------- MySQL side


@dataclass
class _Chunks:
    """One source table read chunk by chunk: its chunk key, the windows of its chunks (in key order, which is also
    the order they were read in) and the rows they returned."""

    table: SourceTable
    key: ChunkKey | None
    windows: list = field(default_factory=list)  # lakecdc.source.ChunkWindow
    rows: int = 0
    seconds: float = 0.0


def pause(seconds: float) -> None:
    """Between two chunk statements: leave the server room (``pipeline.lakecdc.reconcile.pause``)."""
    if seconds > 0:
        time.sleep(seconds)


def _read_chunks(source: MySqlSource, snap, table: SourceTable, pause_seconds: float) -> _Chunks:
    """Count ``table``'s rows chunk by chunk on the open incremental reader ``snap`` (one chunk-size SELECT per
    call, a pause after each)."""
    started = time.monotonic()
    key = source.chunk_key(table)
    chunks = _Chunks(table, key)
    size = source.options.chunk_size
    first = len(snap.windows)
    progress = ChunkProgress.not_started(key)
    while not progress.done:
        chunks.rows += sum(batch.num_rows for batch in snap.read_chunks(table.table_id, key, progress,
                                                                         max_rows=size, chunk_size=size))
        assert snap.progress is not None  # set by read_chunks
        progress = snap.progress
        if not progress.done:
            pause(pause_seconds)
    chunks.windows = list(snap.windows[first:])
    chunks.seconds = time.monotonic() - started
    return chunks


@dataclass
class _Undo:
    """Per target: inserts − deletes to undo and the tolerance (module docstring)."""

    net: int = 0
    tolerance: int = 0


def _undo_changes(source: MySqlSource, chunks: dict[TableId, _Chunks], feeds: dict[TableId, list[TableId]],
                  checkpoints: dict[TableId, Checkpoint]) -> dict[TableId, _Undo]:
    """Per target, what the binlog after its checkpoint up to the last chunk's high watermark undoes from its
    sources' counts (module docstring): one read for all of them. ``feeds``: source table → the targets it feeds.
    Each batch lies between two watermarks and on one side of every checkpoint (they are cuts of the read)."""
    undo = {t: _Undo() for t in checkpoints}
    windows = [w for c in chunks.values() for w in c.windows]
    stop = max(w.high for w in windows)
    starts = {s: min(checkpoints[t].offset for t in targets) for s, targets in feeds.items()}
    if stop <= min(starts.values()):
        return undo
    schemas = {}
    for table_id, start in starts.items():  # decoded with the schema the oldest checkpoint records (DDL followed)
        recorded = [checkpoints[t].schemas[table_id] for t in feeds[table_id]
                    if checkpoints[t].offset == start and table_id in checkpoints[t].schemas]
        schemas[table_id] = source_table_from_json(recorded[0], source.options) if recorded \
            else chunks[table_id].table
    cuts = {w.low for w in windows} | {w.high for w in windows} | {c.offset for c in checkpoints.values()}
    xa_starts = [c.xa_scan_start for c in checkpoints.values() if c.xa_scan_start is not None]
    done = {t: 0 for t in chunks}  # per table, how many of its windows ended before the batch at hand
    reader = source.read_binlog(schemas, starts, stop, cuts=cuts, track_schemas=True,
                                xa_scan_start=min(xa_starts, default=None))
    for item in reader:
        if not isinstance(item, ChangeBatch) or item.num_rows == 0:
            continue  # a DDL after the checkpoint: the reader decodes the rows after it with the new schema
        table_id = item.table.table_id
        first = item.first_commit
        assert first is not None
        net, tolerance = _batch_changes(source.options, chunks[table_id], done, item, first)
        for target in feeds[table_id]:
            if first > checkpoints[target].offset:
                undo[target].net += net
                undo[target].tolerance += tolerance
    return undo


def _batch_changes(options: MySqlSourceOptions, table_chunks: _Chunks, done: dict[TableId, int], batch: ChangeBatch,
                   first: BinlogOffset) -> tuple[int, int]:
    """(inserts − deletes of keys whose chunk was not read yet, changes of the chunk being read) of one batch."""
    table_id = batch.table.table_id
    ws = table_chunks.windows
    i = done[table_id]
    while i < len(ws) and ws[i].high < first:
        i += 1
    done[table_id] = i
    before = ws[i - 1].upper if i else ChunkProgress.not_started(table_chunks.key)
    current = ws[i] if i < len(ws) and ws[i].low < first else None
    values = batch.data.column(table_chunks.key.name if table_chunks.key is not None else 0)
    open_keys = pc.invert(snapshotted_mask(options, table_chunks.key, before, values))
    tolerance = 0
    if current is not None:
        reading = pc.and_(open_keys, snapshotted_mask(options, table_chunks.key, current.upper, values))
        tolerance = int(pc.sum(reading).as_py() or 0)
        open_keys = pc.and_(open_keys, pc.invert(reading))
    kinds = batch.data.column(OP_COLUMN)
    delta = pc.if_else(pc.or_(pc.equal(kinds, INSERT), pc.equal(kinds, UPDATE_AFTER)), 1, -1)
    return int(pc.sum(pc.if_else(open_keys, delta, 0)).as_py() or 0), tolerance


def count_at_checkpoints(config: PipelineConfig, source: MySqlSource, wanted: dict[TableId, tuple[TargetPlan,
                         Checkpoint]], *, log: logging.Logger | logging.LoggerAdapter = logger
                         ) -> dict[TableId, CountAtCheckpoint | LakeCdcError]:
    """For each target of ``wanted`` (its plan from MySQL now, its checkpoint) the MySQL rows of its source tables
    at its checkpoint, counted chunk by chunk (module docstring), or why it cannot be reconciled (too much binlog
    since the checkpoint, its file purged). The chunks of every source table are read on one connection, one table
    after the other, and the binlog once for all of them: the connections stay the same whatever the tables."""
    head = source.head_offset()
    sizes = source.binary_log_sizes()
    outcome: dict[TableId, CountAtCheckpoint | LakeCdcError] = {}
    written = {}
    for target, (_, checkpoint) in wanted.items():
        try:
            written[target] = _bytes_since(sizes, checkpoint.offset, head)
        except LakeCdcError as exc:
            outcome[target] = exc
    counted = {t: wanted[t] for t in written}
    if not counted:
        return outcome
    tables: dict[TableId, SourceTable] = {}
    feeds: dict[TableId, list[TableId]] = {}
    for target, (plan, _) in counted.items():
        for source_plan in plan.sources:
            tables[source_plan.source.table_id] = source_plan.source
            feeds.setdefault(source_plan.source.table_id, []).append(target)
    chunks: dict[TableId, _Chunks] = {}
    with source.snapshot(list(tables.values()), incremental=True) as snap:
        for table_id, table in tables.items():
            chunks[table_id] = _read_chunks(source, snap, table, config.reconcile.pause_seconds)
            log.info("reconcile: %s counted, %d rows in %d chunk(s) in %.1f s", table_id, chunks[table_id].rows,
                     len(chunks[table_id].windows), chunks[table_id].seconds)
    undo = _undo_changes(source, chunks, feeds, {t: c for t, (_, c) in counted.items()})
    for target, (plan, _) in counted.items():
        mine = [chunks[s.source.table_id] for s in plan.sources]
        rows = sum(c.rows for c in mine)
        windows = [w for c in mine for w in c.windows]
        outcome[target] = CountAtCheckpoint(
            rows - undo[target].net, rows, len(windows), undo[target].net, undo[target].tolerance, written[target],
            min((w.low for w in windows), default=None), max((w.high for w in windows), default=None),
            sum(c.seconds for c in mine))
    return outcome


# ------------------------------------------------------------------------------------------- Paimon side


def tally_lake(sink: PaimonSink, target: TableId, snapshot_id: int, keys: list[str],
               marker: str | None) -> LakeTally:
    """Rows, active rows (``marker``: the SOFT_DELETE column, rows marked ``-D`` are not active) and keys held
    twice, reading snapshot ``snapshot_id`` one bucket at a time (the key columns and the marker only)."""
    tally = LakeTally()
    columns = list(dict.fromkeys([*keys, *([marker] if marker else [])]))
    for _, _, rows in sink.read_buckets(target, columns, snapshot_id):
        tally.buckets += 1
        tally.rows += rows.num_rows
        tally.largest_bucket = max(tally.largest_bucket, rows.num_rows)
        deleted = pc.sum(pc.fill_null(pc.equal(rows.column(marker), DELETE), False)).as_py() if marker else 0
        tally.active_rows += rows.num_rows - int(deleted or 0)
        if keys and rows.num_rows:
            counts = rows.group_by(keys, use_threads=False).aggregate([([], "count_all")])
            twice = counts.filter(pc.greater(counts.column("count_all"), 1))
            tally.duplicate_keys += twice.num_rows
            room = DUPLICATES_SHOWN - len(tally.duplicates_shown)
            if twice.num_rows and room > 0:
                tally.duplicates_shown += twice.slice(0, room).to_pylist()
    return tally


# ------------------------------------------------------------------------------------------- the checks


def _unique(target: TableId, keys: list[str], tally: LakeTally, snapshot_id: int) -> CheckResult:
    if not keys:
        return not_applicable(PK_UNIQUE, target, "an append table has no primary key", primary_keys="")
    metadata: dict[str, int | str | bool] = {
        "primary_keys": ", ".join(keys), "rows": tally.rows, "buckets_read": tally.buckets,
        "largest_bucket_rows": tally.largest_bucket, "snapshot_id": snapshot_id, "duplicate_keys": tally.duplicate_keys}
    if tally.duplicate_keys:
        sample = "; ".join(str(row) for row in tally.duplicates_shown)
        return CheckResult(PK_UNIQUE, target, False, f"{tally.duplicate_keys} primary keys are held by more than one "
                           f"row, e.g. {sample}", metadata={**metadata, "sample": sample})
    return CheckResult(PK_UNIQUE, target, True, f"every ({', '.join(keys)}) of the {tally.rows} rows of snapshot "
                       f"{snapshot_id} is unique ({tally.buckets} buckets read one at a time)", metadata=metadata)


def _row_count(target: TableId, checkpoint: Checkpoint, tally: LakeTally, snapshot_id: int,
               count: CountAtCheckpoint | LakeCdcError, chunk_size: int) -> CheckResult:
    if isinstance(count, LakeCdcError):
        return not_evaluated(ROW_COUNT, target, str(count))
    difference = tally.active_rows - count.expected_rows
    metadata: dict[str, int | str | bool] = {
        "paimon_active_rows": tally.active_rows, "expected_rows_at_checkpoint": count.expected_rows,
        "difference": difference, "tolerance": count.tolerance, "checkpoint": str(checkpoint.offset),
        "snapshot_id": snapshot_id, "mysql_rows_read": count.rows_read, "mysql_chunks": count.chunks,
        "chunk_size": chunk_size, "net_inserts_since_checkpoint": count.net_inserts_since,
        "binlog_bytes_since_checkpoint": count.binlog_bytes_since, "counted_to": str(count.counted_to),
        "seconds": f"{count.seconds:.1f}"}
    how = "exact" if count.tolerance == 0 else f"within ±{count.tolerance} (rows changed while their chunk was read)"
    if abs(difference) <= count.tolerance:
        return CheckResult(ROW_COUNT, target, True, f"{tally.active_rows} active rows in Paimon, "
                           f"{count.expected_rows} in MySQL at {checkpoint.offset} ({how}; {count.rows_read} rows "
                           f"counted in {count.chunks} chunks)", metadata=metadata)
    return CheckResult(ROW_COUNT, target, False, f"{tally.active_rows} active rows in Paimon but "
                       f"{count.expected_rows} in MySQL at {checkpoint.offset} (difference {difference:+d}, "
                       f"tolerance {count.tolerance})", metadata=metadata)


@dataclass
class _TableCheck:
    """One table's reconciliation while it runs: what is known, and what the MySQL count still has to give."""

    target: TableId
    wanted: list[str]
    results: list[CheckResult] = field(default_factory=list)
    count_for: tuple[TargetPlan, Checkpoint] | None = None  # a row count to make: (plan, checkpoint)
    tally: LakeTally | None = None
    snapshot_id: int = 0


def _lake_side(config: PipelineConfig, target: TableId, plan: TargetPlan | None, wanted: list[str],
               sink: PaimonSink, plan_error: str) -> _TableCheck:
    """The checks of ``target`` that read Paimon only, and the row count to make against MySQL, if any."""
    check = _TableCheck(target, wanted)
    if not sink.table_exists(target):
        check.results = [not_evaluated(n, target, f"the Paimon table {target} does not exist yet") for n in wanted]
        return check
    pinned = pinned_checkpoint(sink, target)
    if pinned is None:
        check.results = [not_evaluated(n, target, f"{target} has no committed checkpoint yet") for n in wanted]
        return check
    check.snapshot_id, checkpoint = pinned
    if checkpoint.snapshot_pending:
        why = f"the snapshot of {target} is still in progress (it resumes with the next run)"
        check.results = [not_evaluated(n, target, why) for n in wanted]
        return check
    keys = list(sink.describe(target).primary_keys)
    marker = soft_delete_column(config, plan) if plan is not None else False
    try:
        check.tally = tally_lake(sink, target, check.snapshot_id, keys, marker or None)
    except LakeCdcError as exc:
        check.results = [not_evaluated(n, target, str(exc)) for n in wanted]
        return check
    if PK_UNIQUE in wanted:
        check.results.append(_unique(target, keys, check.tally, check.snapshot_id))
    if ROW_COUNT not in wanted:
        return check
    if plan is None:
        check.results.append(not_evaluated(ROW_COUNT, target, f"cannot read the source tables: {plan_error}"))
    elif not keys:
        check.results.append(not_applicable(ROW_COUNT, target, "an append table gets a row per change, so its row "
                                            "count is not comparable with MySQL's"))
    elif has_filter(config, [s.source.table_id for s in plan.sources]):
        check.results.append(not_applicable(ROW_COUNT, target, "a transform filter keeps some MySQL rows out"))
    elif marker is None:
        check.results.append(not_applicable(ROW_COUNT, target, "a SOFT_DELETE table without a column holding "
                                            "__data_event_type__ cannot tell deleted rows from active ones"))
    else:
        check.count_for = (plan, checkpoint)
    return check


def _plans(config: PipelineConfig, source: MySqlSource,
           tables: list[TableId] | None) -> tuple[list[TableId], dict[TableId, TargetPlan], str]:
    """(targets, their plans from MySQL now, why there are none): one plan of the pipeline. When MySQL cannot be
    planned against, the named ``tables`` are still checked (what reads Paimon only evaluates)."""
    try:
        plan = build_plan(config, source, targets=set(tables) if tables else None)
    except LakeCdcError as exc:
        if not tables:
            raise
        return sorted(tables), {}, str(exc)
    targets = sorted(tables) if tables else sorted(plan.targets)
    return targets, plan.restrict(set(targets)).targets, ""  # unknown tables are an error


def reconcile_pipeline(config: PipelineConfig, tables: list[TableId] | None = None, *,
                       names: dict[TableId, set[str]] | None = None, with_schema: bool = False,
                       log: logging.Logger | logging.LoggerAdapter = logger) -> list[CheckResult]:
    """The reconciliation of every Paimon table of the pipeline (or of ``tables``; ``names``: the checks wanted per
    table, default all); ``with_schema`` adds ``schema_matches_source`` against MySQL now. The pipeline is planned
    once, the Paimon tables are read one after the other (bucket by bucket), then MySQL: every table's chunks on one
    connection, and the binlog once (lakecdc.runtime.reconcile.count_at_checkpoints); the short queries share one
    more connection. An error inside a check is a failed result."""
    source = open_source(config)
    source.share_connection()
    try:
        targets, plans, plan_error = _plans(config, source, tables)
        sink = open_sink(config)
        checks = []
        for target in targets:
            wanted = [n for n in RECONCILE_CHECKS
                      if n in (names.get(target, set()) if names is not None else RECONCILE_CHECKS)]
            if wanted:
                checks.append(_lake_side(config, target, plans.get(target), wanted, sink, plan_error))
        to_count = {c.target: c.count_for for c in checks if c.count_for is not None}
        try:
            counts = count_at_checkpoints(config, source, to_count, log=log) if to_count else {}
        except LakeCdcError as exc:
            counts = {t: exc for t in to_count}
        results: list[CheckResult] = []
        for check in checks:
            if check.count_for is not None:
                assert check.tally is not None
                check.results.append(_row_count(check.target, check.count_for[1], check.tally, check.snapshot_id,
                                                counts[check.target], source.options.chunk_size))
            results += sorted(check.results, key=lambda r: RECONCILE_CHECKS.index(r.check))
        if with_schema:
            for target in targets:
                stored = sink.paimon_types(target) if sink.table_exists(target) else None
                results.append(schema_check(config, target, plans.get(target), stored, reached="MySQL's schema now",
                                            plan_error=plan_error))
        return sorted(results, key=lambda r: str(r.target))
    finally:
        source.close()


def check_pipeline(config: PipelineConfig, tables: list[TableId] | None = None) -> list[CheckResult]:
    """``lakecdc check``: the reconciliation of every table (or of ``tables``) plus its schema against MySQL now."""
    return reconcile_pipeline(config, tables, with_schema=True)


__all__ = ["ROW_COUNT", "PK_UNIQUE", "RECONCILE_CHECKS", "SCHEMA", "reconcile_check_names", "reconcile_pipeline",
           "check_pipeline", "count_at_checkpoints", "tally_lake", "CountAtCheckpoint"]
