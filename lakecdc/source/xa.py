"""XA transactions prepared before a binlog read starts and committed after it: where their prepared rows are.

MySQL 8 and MariaDB 10.5+ write an XA transaction's rows to the binlog at ``XA PREPARE`` (a group that ends with an
XA_PREPARE_LOG_EVENT); they become visible at ``XA COMMIT``, a later group of its own with no rows, or never (``XA
ROLLBACK``). The binlog reader (lakecdc.source.binlog) keeps the prepared rows it reads until the commit, and a
checkpoint taken while one is open records where it starts (``lakecdc.source.xa-scan-start``), so the next read
sees it again. What no checkpoint records is a transaction that was already prepared when a table's snapshot (or
one of its chunks) was read: the snapshot cannot see its rows (uncommitted), and its prepare lies before the
snapshot's binlog position, where the table's binlog read starts. Such a read meets an ``XA COMMIT`` whose rows it
has not read.

Design: the reader looks back for them when that happens. An ``XA COMMIT`` of a transaction whose prepare the read
has not seen, ending after the read's start (so after some table's start offset), makes it call
:func:`find_prepare`: the binlog before the position the read started scanning from is searched for the
transaction's XA_PREPARE event, first the part of that file before it (from position 4), then each older file,
newest first; the last prepare of that xid wins (an xid may be reused once resolved). Only event frames are read
(lakecdc.source.activity's frame reader, no rows decoded), including the events inside MySQL's compressed
transactions. The reader then decodes that one prepare group, from the GTID event that opens it to its XA PREPARE,
with a nested binlog read, and applies its rows at the commit as it applies any XA transaction's. An ``XA
ROLLBACK`` of such a transaction needs nothing: its rows never took effect.

Why at the commit and not with ``XA RECOVER`` when the snapshot starts: ``XA RECOVER`` names the transactions
prepared at the moment it runs, not at the snapshot's position, and no statement takes both at once without a lock.
A transaction prepared before the position and committed between the two would be missing from the list while its
commit still lies after the position; one prepared after ``XA RECOVER`` and before the position would be missing
too. The commit event names its transaction exactly and always lies after the prepare, so looking back from it
has no window: whatever happened between the snapshot's statements, the rows are in the binlog before the commit.
It costs a read of the binlog back to the prepare, paid only for such a transaction (one that spanned a snapshot
or a chunk, rare) and only once per read that meets its commit.

The nested read uses server id 0 and registers no replica (as the activity scan and ``mysqlbinlog`` do), so the
reader's own dump connection, still open, is not displaced by a second connection with its id. A prepare the server
no longer has (its file was purged) or never logged (a session with ``sql_log_bin=0``) is an error naming the
transaction and its commit position: its rows cannot be known, and the tables it changed need a new snapshot.
"""

from __future__ import annotations

import logging
import struct
import time
from dataclasses import dataclass

import pymysql

from lakecdc.errors import BinlogPurgedError, SourceError
from lakecdc.model import BinlogOffset
from lakecdc.source.activity import EventFrames, dump
from lakecdc.source.connection import driver_reason, error_code
from lakecdc.source.event_types import (ANONYMOUS_GTID_LOG_EVENT, GTID_LOG_EVENT, MARIADB_GTID_EVENT, ROTATE_EVENT,
                                        TRANSACTION_PAYLOAD_EVENT, XA_PREPARE_LOG_EVENT)
from lakecdc.source.options import MySqlSourceOptions
from lakecdc.source.positions import binary_logs

log = logging.getLogger(__name__)

Xid = tuple[int, bytes, bytes]  # (formatID, gtrid, bqual)

_HEADER = 19
_GTID_EVENTS = (GTID_LOG_EVENT, ANONYMOUS_GTID_LOG_EVENT, MARIADB_GTID_EVENT)
_XA_PREPARE_BODY = struct.Struct("<BIII")  # one phase, formatID, gtrid length, bqual length
_FILE_END = 1 << 62  # a position past the end of any binlog file


@dataclass(frozen=True)
class PrepareGroup:
    """Where an XA transaction's prepare group lies: from the start of the GTID event that opens it to the end of
    its XA_PREPARE event."""

    start: BinlogOffset
    end: BinlogOffset


def xid_text(xid: Xid) -> str:
    """An xid as MySQL and MariaDB log it in ``XA COMMIT``."""
    fmt, gtrid, bqual = xid
    return f"X'{gtrid.hex()}',X'{bqual.hex()}',{fmt}"


def find_prepare(options: MySqlSourceOptions, xid: Xid, before: BinlogOffset, what: str) -> PrepareGroup:
    """The last prepare group of ``xid`` that ends at or before ``before``: the part of ``before``'s file before
    it, then each older file, newest first. ``what`` (the commit that needs it) goes into the error when there is
    none on the server."""
    started = time.monotonic()
    files = binary_logs(options)
    searched = [f for f in files if BinlogOffset(f, 0).sort_key <= BinlogOffset(before.file, 0).sort_key]
    for name in reversed(searched):
        stop = before if name == before.file else BinlogOffset(name, _FILE_END)
        finder = _PrepareFinder(xid, BinlogOffset(name, 4), stop)
        finder.read(options)
        if finder.found is not None:
            log.info("%s: its XA PREPARE is at %s..%s, found in %.2f s", what, finder.found.start, finder.found.end,
                     time.monotonic() - started)
            return finder.found
    oldest = files[0] if files else "none"
    raise BinlogPurgedError(
        f"{what}: its XA PREPARE is not in the binlog the server at {options.address} still has (searched back from "
        f"{before} to the oldest file, {oldest}): the file that held it was purged (binlog_expire_logs_seconds, "
        "PURGE BINARY LOGS) or the prepare was never logged (a session with sql_log_bin=0), so the transaction's "
        "rows cannot be known. Nothing from this point on is committed. Re-snapshot the tables that transaction "
        "changed (lakecdc resnapshot PIPELINE.yaml DB.TABLE, or the Dagster re-snapshot job), and keep binlogs "
        "longer than XA transactions stay prepared")


class _PrepareFinder(EventFrames):
    """Reads one stretch of the binlog for the prepare groups of one xid; ``found``: the last one."""

    def __init__(self, xid: Xid, start: BinlogOffset, stop: BinlogOffset):
        super().__init__(start, stop)
        self.xid = xid
        self.group_start = start.pos  # where the current group started (its GTID event), in ``file``
        self.found: PrepareGroup | None = None

    def read(self, options: MySqlSourceOptions) -> None:
        start = BinlogOffset(self.file, 4)
        conn = dump(options, start)
        try:
            self.run(conn)
        except pymysql.MySQLError as exc:
            if error_code(exc) == 1236:  # the file was purged while searched: not there any more
                return
            raise SourceError(f"binlog search from {start} on {options.address} failed: {driver_reason(exc)}") \
                from None
        except OSError as exc:
            raise SourceError(f"binlog search from {start} on {options.address} failed: {exc}") from None
        finally:
            conn.close()

    def event(self, data: bytes, p: int, end: int) -> bool:
        kind = data[p + 4]
        if kind == ROTATE_EVENT:
            if self.rotated(data, p, end):
                return True
            self.group_start = 4
            return False
        end_pos, = struct.unpack_from("<I", data, p + 13)
        if end_pos == 0:
            return False  # an artificial event of the dump protocol
        if self.in_stop_file and end_pos > self.stop_pos:
            return True
        if kind in _GTID_EVENTS:
            self.group_start = end_pos - struct.unpack_from("<I", data, p + 9)[0]
        elif kind == XA_PREPARE_LOG_EVENT:
            one_phase, fmt, gtrid_length, bqual_length = _XA_PREPARE_BODY.unpack_from(data, p + _HEADER)
            gtrid = p + _HEADER + _XA_PREPARE_BODY.size
            bqual = gtrid + gtrid_length
            xid = (fmt, bytes(data[gtrid:bqual]), bytes(data[bqual:bqual + bqual_length]))
            if not one_phase and xid == self.xid:
                self.found = PrepareGroup(BinlogOffset(self.file, self.group_start), BinlogOffset(self.file, end_pos))
        elif kind == TRANSACTION_PAYLOAD_EVENT:  # MySQL compresses XA prepare groups too
            self.payload(data, p, end)
        return False
