"""What a run reports while it works and when it ends: snapshot progress (rows, rate, ETA) in the run's log, the
Paimon partitions each commit changed (with row counts per change kind), and a per-table summary.

Everything here is best effort: a failed row estimate only removes the ETA, it never fails a run.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.model import OP_COLUMN, BinlogOffset, SourceTable, TableId
from lakecdc.source.connection import connect, query
from lakecdc.source.rows_decoder import fallback_summary

# Seconds between two progress lines of one table's snapshot (tests lower it).
PROGRESS_INTERVAL_SECONDS = 10.0
# Paimon's name for a NULL partition value (option partition.default-name).
DEFAULT_PARTITION_NAME = "__DEFAULT_PARTITION__"
_KIND_NAMES = {"+I": "inserted", "-U": "update_before", "+U": "updated", "-D": "deleted"}


def estimate_rows(options, tables: list[TableId]) -> dict[TableId, int]:
    """MySQL's own row estimates (information_schema.TABLES.TABLE_ROWS, from InnoDB statistics, often ±40%):
    enough for an ETA, read in one query. Empty when they cannot be read."""
    if not tables:
        return {}

    try:
        conn = connect(options)
    except Exception:  # noqa: BLE001 - an estimate is optional
        return {}
    try:
        where = " OR ".join(["(TABLE_SCHEMA = %s AND TABLE_NAME = %s)"] * len(tables))
        args = [part for t in tables for part in (t.database, t.table)]
        rows = query(conn, f"SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_ROWS FROM information_schema.TABLES "
                           f"WHERE {where}", args)
        return {TableId(str(db), str(name)): int(n) for db, name, n in rows if n is not None}
    except Exception:  # noqa: BLE001
        return {}
    finally:
        conn.close()


class SnapshotProgress:
    """Logs a snapshot's progress at most every PROGRESS_INTERVAL_SECONDS: rows read, rate and, when MySQL's row
    estimate is known, percentage and ETA; then one closing line with the total."""

    def __init__(self, table: TableId, estimated_rows: int | None, log, *,
                 clock: Callable[[], float] = time.monotonic):
        self.table = table
        self.estimated = estimated_rows if estimated_rows and estimated_rows > 0 else None
        self.rows = 0
        self._log = log
        self._clock = clock
        self._started = clock()
        self._last = self._started

    def add(self, rows: int) -> None:
        self.rows += rows
        now = self._clock()
        if now - self._last >= PROGRESS_INTERVAL_SECONDS:
            self._last = now
            self._log.info("snapshot of %s: %s", self.table, self.describe(now))

    def describe(self, now: float | None = None) -> str:
        elapsed = max((now if now is not None else self._clock()) - self._started, 1e-9)
        rate = self.rows / elapsed
        text = f"{self.rows:,} rows read, {rate:,.0f} rows/s"
        if self.estimated:
            # The estimate can be below the truth: never show more than 99% or a negative ETA before the end.
            share = min(self.rows / self.estimated, 0.99)
            remaining = max(self.estimated - self.rows, 0)
            eta = remaining / rate if rate > 0 else None
            text += f", about {share:.0%} of ~{self.estimated:,}"
            if eta is not None:
                text += f", ETA {_duration(eta)}"
        return text

    def finish(self, offset) -> None:
        elapsed = self._clock() - self._started
        rate = self.rows / elapsed if elapsed > 0 else float(self.rows)
        self._log.info("snapshot of %s: %s rows at %s in %s (%s rows/s)", self.table, f"{self.rows:,}", offset,
                       _duration(elapsed), f"{rate:,.0f}")


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def partition_name(keys: list[str], values: list) -> str:
    """Paimon's spelling of a partition: ``k1=v1/k2=v2`` (NULL → __DEFAULT_PARTITION__)."""
    return "/".join(f"{k}={DEFAULT_PARTITION_NAME if v is None else v}" for k, v in zip(keys, values))


def count_partitions(output: pa.Table, partition_keys: list[str], into: dict[str, dict[str, int]]) -> None:
    """Add the rows of one transformed batch to ``into`` (partition name → change kind → rows), columnar: one
    group-by per batch."""
    if not partition_keys or output.num_rows == 0:
        return
    columns = {f"p{i}": pc.cast(output.column(k), pa.string()) for i, k in enumerate(partition_keys)}
    columns["op"] = output.column(OP_COLUMN)
    grouped = pa.table(columns).group_by(list(columns)).aggregate([("op", "count")])
    for row in grouped.to_pylist():  # one row per (partition, kind): small
        name = partition_name(partition_keys, [row[f"p{i}"] for i in range(len(partition_keys))])
        kind = _KIND_NAMES.get(row["op"], row["op"])
        counts = into.setdefault(name, {})
        counts[kind] = counts.get(kind, 0) + row["op_count"]


def report_fallbacks(reader, log: logging.Logger | logging.LoggerAdapter,
                     into: Callable[[TableId], list[dict[str, int]]], during: str = "",
                     log_none: bool = True) -> None:
    """Logs a binlog read's decoder fallbacks (rows events decoded value by value by python-mysql-replication
    instead of the columnar decoder, lakecdc.source.rows_decoder; a fast run has none) per source table, and adds
    them to each of ``into(source table)``: the counts per cause of the results that source feeds. ``log_none``
    False: say nothing when there were none (follow mode reports at every checkpoint)."""
    for source_id, causes in sorted(reader.decoder_fallbacks.items()):
        for counted in into(source_id):
            for cause, events in causes.items():
                counted[cause] = counted.get(cause, 0) + events
        log.warning("binlog decoder fallbacks of %s%s (rows events decoded by python-mysql-replication, several "
                    "times slower): %s", source_id, during, fallback_summary(causes))
    if not reader.decoder_fallbacks and log_none:
        log.info("binlog decoder fallbacks%s: none (every rows event decoded by the columnar decoder)", during)


def quiet_text(result, head: BinlogOffset | None) -> str:
    """What a run that committed nothing to a table says about it (its checkpoint stayed where it was)."""
    text = "no new changes"
    if getattr(result, "checkpoint", None) is not None:
        text += f" since its checkpoint {result.checkpoint}"
    if head is not None:
        text += f" (binlog read up to {head})"
    return text + "; checkpoint unchanged, nothing committed"


def log_summary(results, seconds: float, log: logging.Logger | logging.LoggerAdapter,
                head: BinlogOffset | None = None) -> None:
    """One line per table: what the run did to it (or that it had nothing to do, said once: ``head``, where the
    binlog was read up to)."""
    for target in sorted(results):
        result = results[target]
        if not result.committed:
            log.info("summary %s: %s", target, quiet_text(result, head))
            continue
        counts = result.counts
        text = (f"summary {target}: {result.phase}, snapshot {result.snapshot_id} at {result.offset}; "
                f"{counts.inserted} inserted, {counts.updated} updated, {counts.deleted} deleted; "
                f"{result.rows_written} rows written")
        if result.row_count is not None:
            text += f"; {result.row_count} rows in the table"
        partitions = getattr(result, "partitions", None)
        if partitions:
            text += f"; {len(partitions)} partition(s) changed"
        ddl = getattr(result, "ddl", None)
        if ddl:
            text += f"; {len(ddl)} DDL statement(s) met"
        log.info(text)
    log.info("run finished in %s", _duration(seconds))


@dataclass
class SourceRead:
    """What a run read of one MySQL source table: up to where (``read_to``), the commit position of the last
    change of it that the run wrote (None: none in this read), its columns as the run left them and the DDL
    statements it met on it (``lakecdc.runtime.schema_evolution.AppliedDdl``)."""

    source: TableId
    read_to: BinlogOffset
    last_change: BinlogOffset | None = None
    schema: SourceTable | None = None
    ddl: list = field(default_factory=list)


def resnapshot_reads(results: Iterable) -> dict[TableId, SourceRead]:
    """The source tables re-snapshots read (``lakecdc.runtime.resnapshots.ResnapshotResult``): each up to where its
    MySQL snapshot was taken; a re-snapshot reads rows, not changes, so it names no last change."""
    reads: dict[TableId, SourceRead] = {}
    for result in results:
        for source in result.sources:
            read = reads.setdefault(source, SourceRead(source, result.snapshot_offset))
            read.read_to = max(read.read_to, result.snapshot_offset)
    return reads


def source_reads(tables: Iterable, head: BinlogOffset | None) -> dict[TableId, SourceRead]:
    """The source tables a run read, from its tables' results (``TableResult``): a table that committed was read
    up to its new checkpoint, one that did not up to ``head`` (None: follow mode, whose results are commits)."""
    reads: dict[TableId, SourceRead] = {}
    for table in tables:
        read_to = table.offset if table.committed else head
        if read_to is None:
            continue
        schemas = {p.source.table_id: p.source for p in table.plan.sources} if table.plan is not None else {}
        for source in table.sources:
            read = reads.setdefault(source, SourceRead(source, read_to, schema=schemas.get(source)))
            read.read_to = max(read.read_to, read_to)
            change = table.last_changes.get(source)
            if change is not None:
                read.last_change = change if read.last_change is None else max(read.last_change, change)
            for ddl in table.ddl:
                if ddl.source == source and all(ddl.offset != d.offset for d in read.ddl):
                    read.ddl.append(ddl)
    return reads
