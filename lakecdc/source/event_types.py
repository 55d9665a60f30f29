"""Binlog event types python-mysql-replication does not parse (it hands them over as NotImplementedEvent), and what
the binlog reader does with each: go on past the few that carry neither rows nor DDL, stop at every other one.

Skipping an event type that can carry rows or DDL loses changes silently: MySQL 8's compressed transactions
(TRANSACTION_PAYLOAD_EVENT) hold a whole transaction's rows; an INCIDENT_EVENT says the server lost events; an event
type a newer server writes may hold anything. So only the types listed in ``_IGNORABLE`` are passed over; MariaDB's
compressed events are turned into their plain events on the wire before this point
(lakecdc.source.compressed_events).
"""

from __future__ import annotations

START_EVENT_V3 = 0x01  # the first event of a binlog written by MySQL 4.x and before
INCIDENT_EVENT = 0x1A
IGNORABLE_LOG_EVENT = 0x1C  # by definition safe to ignore (the server sets LOG_EVENT_IGNORABLE_F)
ANONYMOUS_GTID_LOG_EVENT = 0x22  # MySQL without GTIDs: starts a transaction, holds no rows
TRANSACTION_CONTEXT_EVENT = 0x24  # MySQL group replication: certification data, no rows
VIEW_CHANGE_EVENT = 0x25  # MySQL group replication: membership change, no rows
TRANSACTION_PAYLOAD_EVENT = 0x28  # MySQL 8.0.20+: a compressed transaction (binlog_transaction_compression=ON)
HEARTBEAT_LOG_EVENT_V2 = 0x29  # MySQL 8.0.26+: a heartbeat, no rows
GTID_TAGGED_LOG_EVENT = 0x2A  # MySQL 8.4+: the GTID event of a tagged GTID

_IGNORABLE = frozenset({START_EVENT_V3, IGNORABLE_LOG_EVENT, ANONYMOUS_GTID_LOG_EVENT, TRANSACTION_CONTEXT_EVENT,
                        VIEW_CHANGE_EVENT, HEARTBEAT_LOG_EVENT_V2})

_RESNAPSHOT = ("Nothing from this point on is committed; after changing the setting, re-snapshot the captured tables "
               "written since then (lakecdc resnapshot PIPELINE.yaml DB.TABLE, or the Dagster re-snapshot job)")


def unread_event_problem(event_type: int, position: str) -> str | None:
    """None for an event type the reader may pass over; else why the read stops at it and what to do."""
    if event_type in _IGNORABLE:
        return None
    where = f"binlog event ending at {position}"
    if event_type == TRANSACTION_PAYLOAD_EVENT:
        return (f"{where} is a compressed transaction (TRANSACTION_PAYLOAD_EVENT, zstd), which lakecdc does not "
                "decode: the server or a writer session has binlog_transaction_compression=ON. Set it OFF "
                "(SET GLOBAL binlog_transaction_compression=OFF, and in my.cnf; no session may set it ON). "
                + _RESNAPSHOT)
    if event_type == INCIDENT_EVENT:
        return (f"{where} is an INCIDENT_EVENT: the server recorded that changes may be missing from its binlog "
                "(for example a statement that failed part-way on a non-transactional table), so the binlog no "
                "longer tells every change. Re-snapshot the captured tables (lakecdc resnapshot PIPELINE.yaml "
                "DB.TABLE, or the Dagster re-snapshot job)")
    if event_type == GTID_TAGGED_LOG_EVENT:
        return (f"{where} is the GTID event of a tagged GTID (MySQL 8.4+), which lakecdc does not read. Do not use "
                "tagged GTIDs (SET gtid_next with a tag) on a captured server. " + _RESNAPSHOT)
    return (f"{where} has type {event_type} (0x{event_type:02x}), which lakecdc does not read; it may carry rows or "
            "DDL of a captured table, so the read stops instead of passing over it. Check the server's binlog "
            "settings (lakecdc reads ROW events written with binlog_format=ROW, binlog_row_image=FULL, without "
            "binlog_transaction_compression) and report this event type. " + _RESNAPSHOT)
