"""The checkpoint: the binlog offset a Paimon table has reached, stored in its snapshot properties.

The offset is committed atomically with the data it covers, so a run that dies before its commit repeats its
work and a run that dies after it repeats nothing. These are the property keys and their encoding.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field

from lakecdc.model import CHECKPOINT_KEY, BinlogOffset, TableCounts, TableId

BINLOG_FILE = CHECKPOINT_KEY
BINLOG_POS = "lakecdc.binlog.pos"
BINLOG_GTID = "lakecdc.binlog.gtid"
PHASE = "lakecdc.phase"
PIPELINE = "lakecdc.pipeline"
RUN_ID = "lakecdc.run-id"
SOURCE_TABLES = "lakecdc.source-tables"
INSERTED, UPDATED, DELETED = "lakecdc.changes.inserted", "lakecdc.changes.updated", "lakecdc.changes.deleted"
# A chunked snapshot that is not finished: JSON {"db.table": chunk progress} of the source tables still being read
# (absent: every source table in SOURCE_TABLES is fully snapshotted). See docs/operations.md.
SNAPSHOT_PENDING = "lakecdc.snapshot.pending"
# Every source table the pipeline captured at that run (to tell tables created later: scan.newly-added-table.*)
CAPTURED_TABLES = "lakecdc.captured-tables"
STARTUP_MODE = "lakecdc.startup.mode"
# The schema history: JSON {"db.table": SourceTable.to_json()} of each source table as of the checkpoint's offset,
# so the binlog after it is decoded with the schema its rows were written with (docs/schema-changes.md).
SOURCE_SCHEMAS = "lakecdc.source.schemas"
# Where the oldest XA transaction that was prepared but not yet committed or rolled back at the checkpoint starts in
# the binlog ("file:pos"; absent: none open). The next binlog read scans from there, so the transaction's rows are
# known when its XA COMMIT comes after the checkpoint; transactions ending before the checkpoint are not applied again.
XA_SCAN_START = "lakecdc.source.xa-scan-start"

# A re-snapshot's commit (lakecdc.runtime.resnapshots): the partition it re-loaded ("" for the whole table) and the
# binlog position of its MySQL snapshot (the checkpoint itself stays at the older offset for one partition).
RESNAPSHOT_PARTITION = "lakecdc.resnapshot.partition"
RESNAPSHOT_OFFSET = "lakecdc.resnapshot.offset"

# An idle table (no change of its sources after its checkpoint) keeps its checkpoint until the binlog has moved this
# far past it in the same file, or to another file; then a run that includes it commits an empty snapshot that only
# moves the checkpoint, and the sensor asks for such a run. Every read that includes the table re-reads at most this
# much for it, and a purge of old binlog files never strands it. A commit per idle table per run would cost more.
IDLE_CHECKPOINT_BYTES = 64 * 1024 * 1024


def idle_checkpoint_due(checkpoint: BinlogOffset, head: BinlogOffset) -> bool:
    """Whether an idle table's checkpoint is far enough behind ``head`` to be moved by a checkpoint-only commit
    (another binlog file, or :data:`IDLE_CHECKPOINT_BYTES` further in the same one)."""
    if head <= checkpoint:
        return False
    if checkpoint.file != head.file:
        return True
    return head.pos - checkpoint.pos >= IDLE_CHECKPOINT_BYTES


def idle_checkpoint_urgent(checkpoint: BinlogOffset, head: BinlogOffset) -> bool:
    """Whether an idle table's checkpoint refresh should not wait for a run with real work: its checkpoint lies two
    or more binlog files behind ``head`` (one rotation, e.g. a server restart, leaves the file of the checkpoint in
    place; the next one brings a purge of it closer)."""
    if head <= checkpoint or checkpoint.file == head.file:
        return False
    return head.sort_key[0] - checkpoint.sort_key[0] >= 2 or head.sort_key[0] < 0 or checkpoint.sort_key[0] < 0


PHASE_SNAPSHOT = "snapshot"
PHASE_BINLOG = "binlog"
PHASE_RESNAPSHOT = "resnapshot"


def offset_from_properties(properties: dict[str, str] | None) -> BinlogOffset | None:
    """The offset a snapshot's properties record, or None when the table has no checkpoint yet."""
    if not properties or BINLOG_FILE not in properties:
        return None
    return BinlogOffset(properties[BINLOG_FILE], int(properties[BINLOG_POS]), properties.get(BINLOG_GTID, ""))


def counts_from_properties(properties: dict[str, str]) -> TableCounts:
    """The change counts a commit recorded (0 for a kind it does not name)."""
    return TableCounts(inserted=int(properties.get(INSERTED, 0)), updated=int(properties.get(UPDATED, 0)),
                       deleted=int(properties.get(DELETED, 0)))


def checkpoint_properties(offset: BinlogOffset, *, phase: str, pipeline: str, run_id: str,
                          source_tables: list[str], counts: TableCounts, pending: dict[str, dict] | None = None,
                          captured: list[str] | None = None, startup_mode: str | None = None,
                          source_schemas: dict[str, dict] | None = None,
                          xa_scan_start: BinlogOffset | None = None) -> dict[str, str]:
    properties = {
        BINLOG_FILE: offset.file,
        BINLOG_POS: str(offset.pos),
        BINLOG_GTID: offset.gtid or "",
        PHASE: phase,
        PIPELINE: pipeline,
        RUN_ID: run_id,
        SOURCE_TABLES: ",".join(source_tables),
        INSERTED: str(counts.inserted),
        UPDATED: str(counts.updated),
        DELETED: str(counts.deleted),
    }
    if pending:
        properties[SNAPSHOT_PENDING] = json.dumps(pending, sort_keys=True, separators=(",", ":"))
    if captured is not None:
        properties[CAPTURED_TABLES] = ",".join(sorted(captured))
    if startup_mode:
        properties[STARTUP_MODE] = startup_mode
    if xa_scan_start is not None:
        properties[XA_SCAN_START] = f"{xa_scan_start.file}:{xa_scan_start.pos}"
    if source_schemas:
        properties[SOURCE_SCHEMAS] = json.dumps(source_schemas, sort_keys=True, separators=(",", ":"))
    return properties


@dataclass(frozen=True)
class Checkpoint:
    """Everything a table's latest lakecdc snapshot says about where it stands."""

    offset: BinlogOffset
    phase: str
    sources: tuple[TableId, ...]  # the source tables this checkpoint covers
    pending: dict[TableId, dict] = field(default_factory=dict)  # unfinished snapshots: chunk progress (JSON)
    captured: frozenset[TableId] | None = None  # every source table of the pipeline at that run, when recorded
    startup_mode: str = ""
    schemas: dict[TableId, dict] = field(default_factory=dict)  # source schema history (SourceTable.to_json)
    xa_scan_start: BinlogOffset | None = None  # the oldest open prepared XA transaction's start (XA_SCAN_START)

    @property
    def snapshot_pending(self) -> bool:
        return bool(self.pending)


@functools.lru_cache(maxsize=256)
def _table_ids(text: str) -> tuple[TableId, ...]:
    """The tables a property lists. Cached by the text: every table of a pipeline records the same captured list,
    so reading N checkpoints parses it once instead of N times (N^2 table names at a thousand tables)."""
    return tuple(TableId.parse(item) for item in (t.strip() for t in (text or "").split(",")) if item)


@functools.lru_cache(maxsize=256)
def _table_set(text: str) -> frozenset[TableId]:
    return frozenset(_table_ids(text))


def read_checkpoint(properties: dict[str, str] | None) -> Checkpoint | None:
    """The checkpoint a snapshot's properties record, or None when the table has none yet."""
    offset = offset_from_properties(properties)
    if properties is None or offset is None:
        return None
    pending_text = properties.get(SNAPSHOT_PENDING) or ""
    pending = {TableId.parse(k): v for k, v in json.loads(pending_text).items()} if pending_text else {}
    captured = properties.get(CAPTURED_TABLES)
    schemas_text = properties.get(SOURCE_SCHEMAS) or ""
    schemas = {TableId.parse(k): v for k, v in json.loads(schemas_text).items()} if schemas_text else {}
    return Checkpoint(
        offset=offset, phase=properties.get(PHASE, ""), sources=_table_ids(properties.get(SOURCE_TABLES, "")),
        pending=pending, captured=_table_set(captured) if captured is not None else None,
        startup_mode=properties.get(STARTUP_MODE, ""), schemas=schemas,
        xa_scan_start=_position(properties.get(XA_SCAN_START) or ""))


def _position(text: str) -> BinlogOffset | None:
    if not text:
        return None
    file, _, pos = text.rpartition(":")
    return BinlogOffset(file, int(pos))
