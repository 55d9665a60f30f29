"""Binlog positions other than the head: the oldest one the server still has, the one at a point in time, the one
after a GTID set, and whether a checkpoint's file still exists. Used by the startup modes
(``scan.startup.mode``) and the purged-binlog check."""

from __future__ import annotations

import logging

import pymysql
from pymysqlreplication.event import (FormatDescriptionEvent, GtidEvent, MariadbGtidEvent, QueryEvent,
                                      RotateEvent)

from lakecdc.errors import BinlogPurgedError, SourceError
from lakecdc.model import BinlogOffset
from lakecdc.source import gtid as _gtid
from lakecdc.source.connection import (BinlogStream, binlog_gtid_pos, connect, driver_reason, error_code, event_start,
                                       head_offset, open_binlog_stream, query, server_flavor, text)
from lakecdc.source.options import MySqlSourceOptions

log = logging.getLogger(__name__)

_FIRST_EVENT_POS = 4  # every binlog file starts with a 4-byte magic number


def binary_logs(options: MySqlSourceOptions, conn=None) -> list[str]:
    """The binlog files the server still has, oldest first (SHOW BINARY LOGS); on ``conn`` if given, else on a
    connection of its own."""
    if conn is not None:
        return [text(row[0]) for row in query(conn, "SHOW BINARY LOGS", options=options)]
    own = connect(options)
    try:
        return binary_logs(options, own)
    finally:
        own.close()


def check_available(options: MySqlSourceOptions, offset: BinlogOffset, what: str) -> None:
    """BinlogPurgedError (saying what to do) when the server no longer has ``offset``'s binlog file."""
    files = binary_logs(options)
    if offset.file in files:
        return
    oldest = files[0] if files else "none"
    raise BinlogPurgedError(
        f"{what}: its checkpoint {offset} is in binlog file {offset.file}, which the server at {options.address} "
        f"no longer has (oldest binlog: {oldest}; it was purged by PURGE BINARY LOGS or binlog_expire_logs_seconds). "
        "The changes since the checkpoint are lost to the binlog, so the table needs a new snapshot")


def earliest_offset(options: MySqlSourceOptions) -> BinlogOffset:
    """The start of the oldest binlog file the server has (``earliest-offset``)."""
    files = binary_logs(options)
    if not files:
        raise SourceError(f"MySQL at {options.address} has no binlog files (is log_bin on?)")
    conn = connect(options)
    try:
        gtid = binlog_gtid_pos(conn, files[0], _FIRST_EVENT_POS) if server_flavor(conn) == "mariadb" else ""
    finally:
        conn.close()
    return BinlogOffset(files[0], _FIRST_EVENT_POS, gtid)


def _stream(options: MySqlSourceOptions, **position) -> BinlogStream:
    return open_binlog_stream(
        options, blocking=False,
        only_events=[RotateEvent, FormatDescriptionEvent, MariadbGtidEvent, GtidEvent, QueryEvent], **position)


def _read_error(options: MySqlSourceOptions, exc: BaseException, what: str) -> SourceError:
    if error_code(exc) == 1236:
        return BinlogPurgedError(f"{what}: the server at {options.address} no longer has that part of the binlog "
                                 f"({driver_reason(exc)})")
    return SourceError(f"{what}: reading the binlog of {options.address} failed: {driver_reason(exc)}")


def offset_for_gtid(options: MySqlSourceOptions, gtid_set: str) -> BinlogOffset:
    """The file/position where the first transaction after ``gtid_set`` starts (MariaDB position or MySQL GTID
    set); the head when no transaction follows it yet."""
    flavor = _gtid.gtid_flavor(gtid_set)
    gtid_set = _gtid.normalize(gtid_set)
    what = f"scan.startup.specific-offset.gtid-set {gtid_set}"
    conn = connect(options)
    try:
        server = server_flavor(conn)
    finally:
        conn.close()
    if flavor != server:
        raise SourceError(f"{what} is a {flavor} GTID set but the server at {options.address} is {server}")
    stream = _stream(options, auto_position=gtid_set, is_mariadb=(flavor == "mariadb"))
    try:
        for ev in stream:
            if isinstance(ev, (MariadbGtidEvent, GtidEvent)):
                return BinlogOffset(stream.log_file, event_start(ev), gtid_set)
    except pymysql.MySQLError as exc:
        raise _read_error(options, exc, what) from exc
    finally:
        stream.close()
    conn = connect(options)
    try:
        head = head_offset(conn, options)
    finally:
        conn.close()
    return BinlogOffset(head.file, head.pos, gtid_set)


def offset_at_timestamp(options: MySqlSourceOptions, timestamp_ms: int) -> BinlogOffset:
    """The start of the first transaction committed at or after ``timestamp_ms`` (epoch milliseconds; binlog
    events have second resolution, so a transaction in the same second counts as after); the head when there is
    none. Files are chosen by the time of their first event, then scanned from the last one that starts before
    the timestamp."""
    files = binary_logs(options)
    if not files:
        raise SourceError(f"MySQL at {options.address} has no binlog files (is log_bin on?)")
    seconds = timestamp_ms // 1000
    starts = [_file_start_time(options, f) for f in files]
    candidates = [i for i, t in enumerate(starts) if t is not None and t <= seconds]
    first = candidates[-1] if candidates else 0
    stream = _stream(options, log_file=files[first], log_pos=_FIRST_EVENT_POS, resume_stream=True)
    try:
        for ev in stream:
            if isinstance(ev, (MariadbGtidEvent, GtidEvent)) and ev.timestamp >= seconds:
                offset = BinlogOffset(stream.log_file, event_start(ev))
                break
        else:
            offset = None
    except pymysql.MySQLError as exc:
        raise _read_error(options, exc, f"scan.startup.timestamp-millis {timestamp_ms}") from exc
    finally:
        stream.close()
    conn = connect(options)
    try:
        if offset is None:
            return head_offset(conn, options)
        gtid = binlog_gtid_pos(conn, offset.file, offset.pos) if server_flavor(conn) == "mariadb" else ""
    finally:
        conn.close()
    return BinlogOffset(offset.file, offset.pos, gtid)


def _file_start_time(options: MySqlSourceOptions, file: str) -> int | None:
    """The header time (seconds) of a binlog file's format description event, or None."""
    stream = _stream(options, log_file=file, log_pos=_FIRST_EVENT_POS, resume_stream=True)
    try:
        for ev in stream:
            if isinstance(ev, FormatDescriptionEvent):
                return ev.timestamp
            if not isinstance(ev, RotateEvent):
                return ev.timestamp or None
    except pymysql.MySQLError as exc:
        raise _read_error(options, exc, f"reading binlog file {file}") from exc
    finally:
        stream.close()
    return None
