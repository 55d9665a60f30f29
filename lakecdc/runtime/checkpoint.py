"""The checkpoint: the binlog offset a Paimon table has reached, stored in its snapshot properties.

The offset is committed atomically with the data it covers, so a run that dies before its commit repeats its
work and a run that dies after it repeats nothing. These are the property keys and their encoding.
"""

from __future__ import annotations

from lakecdc.model import BinlogOffset, TableCounts

BINLOG_FILE = "lakecdc.binlog.file"
BINLOG_POS = "lakecdc.binlog.pos"
BINLOG_GTID = "lakecdc.binlog.gtid"
PHASE = "lakecdc.phase"
PIPELINE = "lakecdc.pipeline"
RUN_ID = "lakecdc.run-id"
SOURCE_TABLES = "lakecdc.source-tables"
INSERTED, UPDATED, DELETED = "lakecdc.changes.inserted", "lakecdc.changes.updated", "lakecdc.changes.deleted"

PHASE_SNAPSHOT = "snapshot"
PHASE_BINLOG = "binlog"


def offset_from_properties(properties: dict[str, str] | None) -> BinlogOffset | None:
    """The offset a snapshot's properties record, or None when the table has no checkpoint yet."""
    if not properties or BINLOG_FILE not in properties:
        return None
    return BinlogOffset(properties[BINLOG_FILE], int(properties[BINLOG_POS]), properties.get(BINLOG_GTID, ""))


def checkpoint_properties(offset: BinlogOffset, *, phase: str, pipeline: str, run_id: str,
                          source_tables: list[str], counts: TableCounts) -> dict[str, str]:
    return {
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
