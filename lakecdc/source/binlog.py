"""Bounded, transaction-safe binlog reader: committed row changes of the captured tables between checkpoints and
a stop position, as Arrow change batches.

Reads with python-mysql-replication from ``min(start_offsets)`` (file + position, ``resume_stream=True``,
``is_mariadb=False``: with ``is_mariadb=True`` and no GTID the library ignores the position), non-blocking, so
the read ends at the server's current end of binlog at the latest. Each transaction is buffered and emitted only
at its commit (Xid event, ``COMMIT`` query, or the end of a stand-alone DDL group); the read stops before the
first transaction that ends past ``stop``. A checkpoint (``end_offset``) is therefore always a transaction
boundary: resuming from it repeats nothing and loses nothing.

XA transactions are applied as MySQL applies them: ``XA COMMIT ... ONE PHASE`` like any transaction; a prepared
transaction (its group ends with XA_PREPARE_LOG_EVENT, MySQL 8 and MariaDB ≥ 10.5) is held until its ``XA COMMIT``
group, where its rows take effect, or dropped at ``XA ROLLBACK``. ``open_xa_start`` tells where the oldest prepared
transaction still open starts; a checkpoint records it and the next read scans from there (``xa_scan_start``), so
the held rows are known again, while transactions that end at or before each table's start offset are not emitted.
An XA COMMIT whose prepare lies before where the read started scanning (the transaction was open when a table was
snapshotted) is resolved by looking back in the binlog for that prepare and decoding its group alone
(lakecdc.source.xa). Statement-logged DML on a captured table, and a group with rows but no commit, stop the read
with an error.

Every event the stream delivers is decided (lakecdc.source.event_types): applied, passed over when its type carries
neither rows nor DDL, or the read stops at it, before anything past it is committed (the library's own filtering is
kept from dropping any other: lakecdc.source.connection.open_binlog_stream). MariaDB's compressed events and MySQL's
compressed transactions arrive as their plain events (lakecdc.source.compressed_events).

A connection lost mid-read is retried ``connect_max_retries`` times with exponential backoff, from the end of the
last whole transaction read (python-mysql-replication itself reconnects at once after errors 2006/2013; a server
that is down or restarting surfaces here). The binlog client id comes from the ``server-id`` range: the first id
that no registered replica uses (``SHOW SLAVE HOSTS``), and the next id of the range after each lost connection,
since MySQL/MariaDB drop an older dump connection that uses the same id.
"""

from __future__ import annotations

import bisect
import logging
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterator, Union

import pymysql
from pymysqlreplication.event import (ExecuteLoadQueryEvent, GtidEvent, HeartbeatLogEvent, MariadbGtidEvent,
                                      QueryEvent, XAPrepareEvent, XidEvent)
from pymysqlreplication.row_event import (DeleteRowsEvent, PartialUpdateRowsEvent, TableMapEvent, UpdateRowsEvent,
                                          WriteRowsEvent)

from lakecdc.errors import BinlogPurgedError, SourceError
from lakecdc.model import UNPARSED_DDL, BinlogOffset, ChangeBatch, SourceTable, TableId
from lakecdc.source import gtid as _gtid
from lakecdc.source.charsets import install_binlog_decoding
from lakecdc.source.columns import bind_columns, keep_signedness
from lakecdc.source.ddl import SchemaChangeEvent, dml_target_tables, mentions_table, parse_ddl
from lakecdc.source.connection import (
    BinlogStream,
    binlog_gtid_pos,
    connect,
    connection_kwargs,
    driver_reason,
    error_code,
    event_start,
    free_server_id,
    head_offset,
    is_connection_lost,
    open_binlog_stream,
    query,
    server_flavor,
    server_version,
    text,
)
from lakecdc.source.options import MySqlSourceOptions
from lakecdc.source.event_types import unread_event_problem
from lakecdc.source.row_images import image_gaps, partial_image_message
from lakecdc.source.sql_text import executed_statement, has_comment, without_set_statement
from lakecdc.source.rows_decoder import build_change_batch, decode_rows_event, event_kind
from lakecdc.source.xa import find_prepare, xid_text

log = logging.getLogger(__name__)

install_binlog_decoding()

FLUSH_ROWS = 50_000  # emit pending batches once this many change rows are buffered (at a commit)
_MARIADB_GTID_STANDALONE = 0x01  # FL_STANDALONE: the group is one statement with no COMMIT / Xid event
_ROW_EVENTS = (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)
# the library's classes of every event type the reader reads (lakecdc.source.event_types.READ; a test checks it)
READ_EVENT_CLASSES = (MariadbGtidEvent, GtidEvent, QueryEvent, ExecuteLoadQueryEvent, XidEvent, XAPrepareEvent,
                      TableMapEvent, *_ROW_EVENTS, PartialUpdateRowsEvent)
# statements the binlog logs only when they change rows (a logged SELECT / DO / CALL runs a stored function or
# procedure that writes; WITH starts MySQL 8's UPDATE / DELETE with common table expressions)
_DML_PREFIXES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "LOAD DATA", "LOAD XML", "WITH", "SELECT", "DO", "CALL")
REPLICA_NAME = "lakecdc"  # how the binlog client registers itself (SHOW SLAVE HOSTS)
# follow mode: the server sends a heartbeat after this long without events, so an idle stream still reaches its
# checkpoints on time and notices a stop request
FOLLOW_HEARTBEAT_SECONDS = 0.5


def load_query_text(event: ExecuteLoadQueryEvent) -> tuple[str, str]:
    """The default database and the statement of an Execute_load_query event. python-mysql-replication reads only
    its post-header; the rest is laid out as in a query event: status variables, the database name and a NUL, then
    the statement up to the event's end."""
    packet = event.packet
    packet.read(event.status_vars_length)
    schema = packet.read(event.schema_length)
    packet.advance(1)
    post_header = 26  # 13 bytes of a query event's post-header, then file id, start, end, duplicate handling
    length = event.event_size - post_header - event.status_vars_length - event.schema_length - 1
    return text(schema) or "", packet.read(length).decode("utf-8", "backslashreplace").strip()


@dataclass
class _Txn:
    ts: int  # header timestamp (seconds) of the event that started the group
    multi: bool  # True: ends with an Xid / COMMIT; False: a stand-alone statement (DDL) ends it
    gtid: str = ""
    changes: list = field(default_factory=list)  # (SourceTable, DecodedRows)
    ddl: list = field(default_factory=list)  # (schema, query)
    start: BinlogOffset | None = None  # where the group's first event starts (a position to scan from again)
    statements: list = field(default_factory=list)  # statement-logged DML: (schema, query, position)
    # rows of a captured table lakecdc cannot know exactly (partial row images, partial JSON updates):
    # (TableId, message); the read stops at the group's end unless the table's checkpoint is past it
    problems: list = field(default_factory=list)


@dataclass
class _PreparedXa:
    """An XA transaction prepared (XA PREPARE) and not yet committed or rolled back: its rows take effect at the XA
    COMMIT, which comes later in the binlog as a group of its own (so do its rows lakecdc cannot know, and its
    statement-logged DML: judged at the commit, against the tables' start offsets)."""

    changes: list
    start: BinlogOffset  # where its prepare group starts: a read that must still see it scans from here
    prepared_at: BinlogOffset
    problems: list = field(default_factory=list)
    statements: list = field(default_factory=list)


@dataclass(frozen=True)
class SchemaChange:
    """A DDL statement seen in a captured database (informational)."""

    offset: BinlogOffset
    database: str
    statement: str


@dataclass(frozen=True)
class TableSchemaChange:
    """A DDL statement changed a captured table: its events, and its schema before and after (None: dropped).
    ``offset`` is the end of the DDL (a checkpoint after it); ``previous`` the end of the last transaction before
    it (a checkpoint before it; None when the read started right before the DDL)."""

    table_id: TableId
    events: tuple[SchemaChangeEvent, ...]
    before: SourceTable
    after: SourceTable | None
    offset: BinlogOffset
    previous: BinlogOffset | None
    statement: str
    # False when an unparsed.ddl event's table is read from a server that logs no column names (binlog_row_metadata
    # not FULL): rows after the statement could not be cross-checked against the history, so the run must stop
    column_names_logged: bool = True


@dataclass(frozen=True)
class BinlogCheckpoint:
    """Follow mode: every change up to ``offset`` (a transaction boundary) has been yielded; a commit of what was
    read so far may carry ``offset`` as its checkpoint."""

    offset: BinlogOffset


# what a BinlogReader yields: change batches, schema changes (track_schemas) and checkpoints (follow mode)
BinlogItem = Union[ChangeBatch, TableSchemaChange, BinlogCheckpoint]


@dataclass
class _Skip:
    """``scan.startup.specific-offset.skip-events`` / ``skip-rows``: row events, then rows of the next row event,
    to drop right after the start position."""

    events: int = 0
    rows: int = 0

    @property
    def active(self) -> bool:
        return self.events > 0 or self.rows > 0


@dataclass
class _Pending:
    """Rows of whole transactions not yet emitted, per table, with the commit positions they span."""

    items: dict = field(default_factory=dict)  # TableId -> [(DecodedRows, op_ts_ms)]
    first: dict = field(default_factory=dict)  # TableId -> commit position of its first transaction
    last: dict = field(default_factory=dict)  # TableId -> commit position of its last transaction
    rows: int = 0
    last_end: BinlogOffset | None = None  # commit position of the newest transaction added


class _LostConnection(Exception):
    def __init__(self, cause: BaseException):
        super().__init__(driver_reason(cause))
        self.cause = cause


class BinlogReader:
    """Iterate once: committed changes of ``tables`` after their ``start_offsets``, up to ``stop``.

    Batches hold one table each, rows in binlog order; flushed every ~50k rows, at the end, and before the first
    transaction past each of ``cuts`` (so a batch never spans a cut: a caller with several checkpoints can tell
    from ``batch.first_commit`` on which side of each checkpoint the whole batch lies). After iteration
    ``end_offset`` is ``stop`` when the read reached it, else the end of the last transaction read (with its GTID
    position when known), and ``rows_read`` is the number of change rows emitted (an UPDATE counts twice).
    ``decoder_fallbacks`` counts, per table and cause, the rows events the columnar decoder left to
    python-mysql-replication (lakecdc.source.rows_decoder; same rows, several times slower).

    ``skip_events`` / ``skip_rows`` (Flink CDC's ``scan.startup.specific-offset.skip-*``) drop that many row events
    of the captured tables right after the start position, then that many rows of the next row event.

    Row-event columns are mapped to the SourceTable's columns by position, named and typed from it (any
    ``binlog_row_metadata``); a column count or type that does not fit is an error (lakecdc.source.columns).
    DDL statements of captured databases are listed in ``schema_changes``.

    With ``track_schemas`` the given SourceTables are the schemas as of the start offsets, and the reader keeps
    them current: a DDL statement that changes a captured table (lakecdc.source.ddl) ends the batches before it
    (all pending rows are emitted), then a :class:`TableSchemaChange` is yielded, and later rows are built with
    the new schema. ``tables`` then holds the schemas as of ``end_offset``.

    Follow mode (``checkpoint_seconds`` set, ``stop`` None): the read has no end; the connection blocks for new
    events (with server heartbeats while idle), and every ``checkpoint_seconds``, at a transaction boundary, the
    pending rows are emitted followed by a :class:`BinlogCheckpoint`. When ``should_stop()`` turns true the reader
    takes the server's head position as its stop, reads up to it (as a bounded read does; a heartbeat at or past
    it says nothing more is coming), emits a last checkpoint there and ends.
    """

    def __init__(self, options: MySqlSourceOptions, tables: dict[TableId, SourceTable],
                 start_offsets: dict[TableId, BinlogOffset], stop: BinlogOffset | None, *,
                 flush_rows: int = FLUSH_ROWS,
                 cuts: list[BinlogOffset] | set[BinlogOffset] | tuple = (), skip_events: int = 0,
                 skip_rows: int = 0, track_schemas: bool = False, xa_scan_start: BinlogOffset | None = None,
                 checkpoint_seconds: float | None = None, should_stop: Callable[[], bool] | None = None):
        if (stop is None) != (checkpoint_seconds is not None):
            raise SourceError("binlog read: a read without stop position is a follow read (checkpoint_seconds)")
        missing = [str(t) for t in tables if t not in start_offsets]
        if missing:
            raise SourceError(f"binlog read: no start offset for table(s) {', '.join(sorted(missing))}")
        if skip_events < 0 or skip_rows < 0:
            raise SourceError("binlog read: skip-events and skip-rows must be >= 0")
        self.options = options
        self.tables = dict(tables)
        self.start_offsets = {t: start_offsets[t] for t in self.tables}
        self.stop = stop
        self.flush_rows = flush_rows
        self.track_schemas = track_schemas
        self.checkpoint_seconds = checkpoint_seconds
        self.should_stop = should_stop or (lambda: False)
        self._cut_keys = sorted({c.sort_key for c in cuts})
        self._skip = _Skip(skip_events, skip_rows)
        self.end_offset: BinlogOffset | None = None
        self.rows_read = 0
        self.events_read = 0
        self.transactions_read = 0
        self.reconnects = 0
        self.decoder_fallbacks: dict[TableId, Counter] = {}  # table → fallback cause → rows events
        self.server_id: int | None = None  # the binlog client id used (last one after reconnects)
        self.schema_changes: list[SchemaChange] = []
        self._server: tuple[str, tuple[int, int, int]] | None = None  # (flavor, version), read when first needed
        self._trigger_bodies: dict[TableId, list[tuple[str, str]]] = {}  # table -> [(trigger schema, statement)]
        self._started = False
        self._last_end: BinlogOffset | None = None  # end of the last whole transaction read (≤ stop)
        self._skip_at_last_end = _Skip(skip_events, skip_rows)
        self._gtid_position = ""
        # XA: transactions prepared and not yet resolved, by xid; the scan starts at xa_scan_start (a checkpoint's
        # oldest open prepared XA) when that lies before the start offsets
        self.xa_scan_start = xa_scan_start
        self._prepared: dict[tuple, _PreparedXa] = {}
        self._carry_xa = True  # until the read starts (and when there is nothing to read): xa_scan_start stands

    @property
    def open_xa_start(self) -> BinlogOffset | None:
        """Where the oldest XA transaction prepared but not committed or rolled back (as far as read) starts; None
        when there is none. A checkpoint records it (lakecdc.source.xa-scan-start): the next read scans from there
        so that the transaction's rows are known when its XA COMMIT comes, while transactions that end before the
        checkpoint are not emitted again."""
        if self._carry_xa:
            return self.xa_scan_start
        return min((p.start for p in self._prepared.values()), default=None)

    def __iter__(self) -> Iterator[BinlogItem]:
        if self._started:
            raise SourceError("a BinlogReader can be iterated only once; create a new one to read again")
        self._started = True
        return self._run()

    # ------------------------------------------------------------------------------------------------------------

    def _stream(self, start: BinlogOffset, server_id: int | None) -> BinlogStream:
        settings = connection_kwargs(self.options)
        # a slow consumer must not make the server drop the dump connection between two batches
        settings["init_command"] = "SET SESSION net_write_timeout = 3600"
        follow = self.checkpoint_seconds is not None
        heartbeat = min(self.options.heartbeat_interval, FOLLOW_HEARTBEAT_SECONDS) if follow \
            else self.options.heartbeat_interval
        return open_binlog_stream(
            self.options,
            settings=settings,
            server_id=server_id,
            log_file=start.file,
            log_pos=start.pos,
            resume_stream=True,
            blocking=follow,
            is_mariadb=False,
            # the classes of every type lakecdc reads (lakecdc.source.event_types.READ; PartialUpdateRowsEvent: MySQL's
            # partial JSON updates); the stream adds the classes of every type that may not be passed over
            only_events=[*READ_EVENT_CLASSES, *([HeartbeatLogEvent] if follow else [])],
            only_schemas=sorted({t.database for t in self.tables}),
            only_tables=sorted({t.table for t in self.tables}),
            slave_heartbeat=heartbeat,
            report_slave=REPLICA_NAME if self._registers else None,
        )

    _registers = True  # the stream registers as a replica (SHOW SLAVE HOSTS) with an id of the server-id range

    def _server_ids(self) -> Iterator[int]:
        """The ids to connect with, in order: a free one of the range first, then round-robin."""
        ids = self.options.server_ids
        i = ids.index(free_server_id(self.options))
        while True:
            yield ids[i % len(ids)]
            i += 1

    def _run(self) -> Iterator[BinlogItem]:
        stop = self.stop
        if not self.tables:
            self.end_offset = stop
            return
        start = min(self.start_offsets.values())
        if stop is not None and start >= stop:  # nothing between the checkpoints and the stop position
            self.end_offset = stop if start.same_position(stop) else start
            return
        self._carry_xa = False
        self._gtid_position = start.gtid
        self._gtid_base = start
        scan = min(start, self.xa_scan_start) if self.xa_scan_start is not None else start
        self._scan_from = scan  # every XA PREPARE from here on is seen (lakecdc.source.xa: the ones before it)
        pending = _Pending()
        ids = self._server_ids()
        attempt = 0
        resume = scan
        while True:
            self.server_id = next(ids)
            try:
                reached, eof_pos, txn_open = yield from self._read(resume, pending)
                stop = self.stop  # a follow read gets its stop position when asked to stop
                if self.checkpoint_seconds is not None and not reached:  # a follow read ends only when asked to
                    raise _LostConnection(SourceError("the server ended the binlog stream"))
                at_eof = stop is not None and not txn_open and eof_pos is not None and eof_pos >= stop
                if reached or at_eof or not self._ended_early(eof_pos):
                    break
                # the server closed the stream before its end (shutting down): like a lost connection
                raise _LostConnection(SourceError("the server ended the binlog stream early"))
            except _LostConnection as lost:
                if self._last_end is not None and self._last_end != resume:
                    attempt = 0  # the connection made progress: a long follow read gets its retries afresh
                attempt += 1
                if attempt > self.options.connect_max_retries:
                    raise SourceError(
                        f"lost the binlog connection to {self.options.address} and could not reconnect after "
                        f"{self.options.connect_max_retries} retries (connect.max-retries): {lost}") from lost.cause
                delay = self.options.backoff(attempt)
                resume = self._last_end or scan
                log.warning("binlog connection to %s lost (%s); retry %d/%d in %.1f s from %s",
                            self.options.address, lost, attempt, self.options.connect_max_retries, delay, resume)
                time.sleep(delay)
                self.reconnects += 1
                self._skip = _Skip(self._skip_at_last_end.events, self._skip_at_last_end.rows)
        yield from self._flush(pending)

        last_end = self._last_end
        if stop is not None and (reached or (last_end is not None and last_end >= stop) or at_eof):
            self.end_offset = stop
        else:
            self.end_offset = self._reached_offset(start)
        if self.checkpoint_seconds is not None:
            yield BinlogCheckpoint(self.end_offset)

    def _reached_offset(self, start: BinlogOffset) -> BinlogOffset:
        """The end of the last whole transaction read (with its GTID position when known), else ``start``."""
        last_end = self._last_end
        if last_end is None:
            return start
        gtid = self._gtid_position if self._gtid_position else self._gtid_at(last_end)
        return BinlogOffset(last_end.file, last_end.pos, gtid)

    def _read(self, start: BinlogOffset, pending: _Pending):
        """One binlog connection from ``start``: returns (reached ``stop``, ended at EOF past ``stop``).
        Raises _LostConnection when the connection breaks (the caller resumes from ``self._last_end``)."""
        stop = self.stop
        by_name = {(t.database, t.table): table for t, table in self.tables.items()}
        databases = {t.database for t in self.tables}
        txn: _Txn | None = None
        reached = False
        follow = self.checkpoint_seconds is not None
        next_checkpoint = time.monotonic() + (self.checkpoint_seconds or 0)
        stream = self._stream(start, self.server_id)
        try:
            try:
                for ev in stream:
                    self.events_read += 1
                    if follow:
                        if stop is None and self.should_stop():
                            # asked to stop: read on up to the head, as a micro-batch would, then end
                            stop = self.stop = self._head()
                        if isinstance(ev, HeartbeatLogEvent) and stop is not None and txn is None and \
                                BinlogOffset(stream.log_file, stream.log_pos or 0) >= stop:
                            reached = True  # the server has sent everything up to the stop position
                            break
                        if txn is None and time.monotonic() >= next_checkpoint:
                            # at a transaction boundary: everything read so far goes out with its checkpoint
                            yield from self._flush(pending)
                            yield BinlogCheckpoint(self._reached_offset(min(self.start_offsets.values())))
                            # at a fixed rate, as Flink triggers checkpoints: the commit's own time is not added
                            next_checkpoint = max(next_checkpoint + (self.checkpoint_seconds or 0), time.monotonic())
                    if isinstance(ev, HeartbeatLogEvent):
                        continue
                    if isinstance(ev, TableMapEvent):  # of a captured table (the library filters the others)
                        keep_signedness(ev)
                        continue
                    if isinstance(ev, _ROW_EVENTS):
                        table = by_name.get((ev.schema, ev.table))
                        if table is None:
                            continue
                        if txn is None:  # no GTID / BEGIN seen (a start inside a transaction): the rows start a group
                            txn = _Txn(ev.timestamp, multi=True)
                        if self._skip.events > 0:
                            self._skip.events -= 1
                            continue
                        # decode now, while the event's table map is current: whole event, column by column, each
                        # column named and typed from the schema history
                        position = f"{stream.log_file}:{ev.packet.log_pos}"
                        bind_columns(ev, table, position)
                        # rows lakecdc cannot know exactly stop the read at the group's end (if it is this read's)
                        gaps = None if isinstance(ev, PartialUpdateRowsEvent) else image_gaps(ev, table, event_kind(ev))
                        if gaps is None or gaps.unknown:
                            txn.problems.append((table.table_id, _partial_json_message(table, position) if gaps is None
                                                 else partial_image_message(table, position, gaps)))
                            self._skip.rows = 0
                            continue
                        decoded = decode_rows_event(ev, table, skip_rows=self._skip.rows)
                        decoded.after_from_before = gaps.fillable_after
                        if decoded.fallback is not None:
                            self.decoder_fallbacks.setdefault(table.table_id, Counter())[decoded.fallback] += 1
                        self._skip.rows = 0
                        txn.changes.append((table, decoded))
                        continue
                    if isinstance(ev, (MariadbGtidEvent, GtidEvent)) and txn is not None and txn.changes:
                        # every group ends with a commit, an XA PREPARE or a stand-alone statement; rows without one
                        # would be lost, so the binlog is not what lakecdc understands
                        raise SourceError(
                            f"binlog group of {self._txn_tables(txn)} ending before {stream.log_file}:"
                            f"{ev.packet.log_pos} has {len(txn.changes)} rows event(s) but no commit: lakecdc cannot "
                            "tell whether they took effect. Report this binlog; re-snapshot the table(s) to go on")
                    if isinstance(ev, MariadbGtidEvent):
                        txn = _Txn(ev.timestamp, multi=not (ev.flags & _MARIADB_GTID_STANDALONE), gtid=ev.gtid,
                                   start=_event_start(stream, ev))
                        continue
                    if isinstance(ev, GtidEvent):  # MySQL: BEGIN follows for DML, DDL stands alone
                        txn = _Txn(ev.timestamp, multi=False, gtid=getattr(ev, "gtid", "") or "",
                                   start=_event_start(stream, ev))
                        continue
                    end = None
                    xa: tuple | None = None  # (action, xid) of an XA PREPARE / COMMIT / ROLLBACK ending the group
                    if isinstance(ev, XidEvent):
                        end = BinlogOffset(stream.log_file, ev.packet.log_pos)
                    elif isinstance(ev, XAPrepareEvent):  # MySQL 8 and MariaDB ≥ 10.5: XA_PREPARE_LOG_EVENT
                        end = BinlogOffset(stream.log_file, ev.packet.log_pos)
                        if not ev.one_phase:  # XA COMMIT ... ONE PHASE (MySQL) commits right here
                            xa = (_XA_PREPARE, (ev.xid_format_id, bytes(ev.xid_gtrid), bytes(ev.xid_bqual)))
                    elif isinstance(ev, ExecuteLoadQueryEvent):
                        # a statement-logged LOAD DATA: like statement-logged DML it carries no row images
                        schema, statement = load_query_text(ev)
                        statement = self._executed(statement)
                        if txn is None:
                            txn = _Txn(ev.timestamp, multi=False, start=_event_start(stream, ev))
                        txn.statements.append((schema, statement, f"{stream.log_file}:{ev.packet.log_pos}"))
                        if txn.multi:
                            continue
                        end = BinlogOffset(stream.log_file, ev.packet.log_pos)
                    elif isinstance(ev, QueryEvent):
                        statement = self._executed(ev.query)
                        upper = statement[:16].upper()
                        if upper == "BEGIN" or upper.startswith("XA START"):
                            if txn is None:
                                txn = _Txn(ev.timestamp, multi=True, start=_event_start(stream, ev))
                            else:
                                txn.multi = True
                            continue
                        if upper.startswith("XA END"):
                            continue
                        if upper in ("COMMIT", "ROLLBACK"):
                            end = BinlogOffset(stream.log_file, ev.packet.log_pos)
                        elif upper.startswith(("XA COMMIT", "XA ROLLBACK")):
                            end = BinlogOffset(stream.log_file, ev.packet.log_pos)
                            xa = (_XA_COMMIT if upper.startswith("XA COMMIT") else _XA_ROLLBACK,
                                  parse_xid(statement, f"{stream.log_file}:{ev.packet.log_pos}"))
                        else:
                            schema = text(ev.schema) or ""
                            if txn is None:
                                txn = _Txn(ev.timestamp, multi=False, start=_event_start(stream, ev))
                            if upper.startswith(_DML_PREFIXES):
                                txn.statements.append((schema, statement, f"{stream.log_file}:{ev.packet.log_pos}"))
                            if schema in databases or any(f"`{d}`" in statement or f"{d}." in statement
                                                          for d in databases):
                                txn.ddl.append((schema, statement))
                            if txn.multi:  # a statement inside a transaction
                                continue
                            end = BinlogOffset(stream.log_file, ev.packet.log_pos)
                    elif self._past_undecided(ev, stream.log_file, stop):  # any other event: pass over it or stop
                        reached = True
                        break
                    if end is None:
                        continue
                    # ---- a group (transaction / DDL) ends at `end`
                    if stop is not None and end > stop:
                        reached = True
                        break
                    if xa is not None:
                        txn = self._resolve_xa(xa, txn, end, ev.timestamp)
                    if txn is not None:
                        yield from self._add_transaction(txn, end, pending)
                        if self.track_schemas and txn.ddl:
                            changed = yield from self._schema_changes(txn, end, pending)
                            if changed:
                                by_name = {(t.database, t.table): table for t, table in self.tables.items()}
                    txn = None
                    self._last_end = end
                    self._skip_at_last_end = _Skip(self._skip.events, self._skip.rows)
                    if pending.rows >= self.flush_rows:
                        yield from self._flush(pending)
            except pymysql.MySQLError as exc:
                if is_connection_lost(exc):
                    raise _LostConnection(exc) from exc
                raise self._stream_error(exc, start) from exc
            except (OSError, EOFError) as exc:
                raise _LostConnection(exc) from exc
            eof_pos = BinlogOffset(stream.log_file, stream.log_pos or 0) if stream.log_file else None
        finally:
            stream.close()
        return reached, eof_pos, txn is not None

    @staticmethod
    def _past_undecided(ev, log_file: str, stop: BinlogOffset | None) -> bool:
        """An event of a type the reader does not apply (NotImplementedEvent: a type the library does not parse, or
        a compressed event that could not be decoded): False when it is known to carry neither rows nor DDL, True
        when it lies past ``stop`` (not this read's to judge); else SourceError, so that nothing past it is
        committed."""
        problem = unread_event_problem(ev.packet.event_type, f"{log_file}:{ev.packet.log_pos}", flags=ev.packet.flags,
                                       undecoded=getattr(ev.packet.packet, "undecoded", None))
        if problem is None:
            return False
        if stop is not None and BinlogOffset(log_file, ev.packet.log_pos) > stop:
            return True
        raise SourceError(problem)

    def _executed(self, statement: str) -> str:
        """``statement`` as the server executed it (comments removed, executable comments opened, MariaDB's
        ``SET STATEMENT ... FOR`` prefix dropped): what decides whether it is DML, DDL or a transaction boundary."""
        if has_comment(statement) and self._server is None:
            conn = connect(self.options)
            try:
                self._server = (server_flavor(conn), server_version(conn))
            finally:
                conn.close()
        if self._server is not None:
            statement = executed_statement(statement, flavor=self._server[0], version=self._server[1])
        return without_set_statement(statement.strip())

    def _head(self) -> BinlogOffset:
        conn = connect(self.options)
        try:
            return head_offset(conn, self.options)
        finally:
            conn.close()

    def _resolve_xa(self, xa: tuple, txn: _Txn | None, end: BinlogOffset, timestamp: int) -> _Txn:
        """The group to add at ``end`` for an XA PREPARE (its rows are kept until the XA COMMIT; the group adds
        nothing now), XA COMMIT (the prepared rows take effect here, as MySQL applies them) or XA ROLLBACK (they
        are dropped)."""
        action, xid = xa
        if txn is None:
            txn = _Txn(timestamp, multi=False)
        if action == _XA_PREPARE:
            if xid in self._prepared:
                raise SourceError(f"XA transaction {xid_text(xid)} prepared twice (again at {end}) in the binlog")
            self._prepared[xid] = _PreparedXa(txn.changes, txn.start or self._last_end or end, end, txn.problems,
                                              txn.statements)
            txn.changes, txn.problems, txn.statements = [], [], []
            return txn
        prepared = self._prepared.pop(xid, None)
        if action == _XA_ROLLBACK:
            return txn
        if prepared is None:
            if end <= self._gtid_base:
                return txn  # committed before every checkpoint: applied by an earlier run
            prepared = self._prepared_before_read(xid, end)
        txn.changes = prepared.changes + txn.changes
        txn.problems = prepared.problems + txn.problems
        txn.statements = prepared.statements + txn.statements
        return txn

    def _prepared_before_read(self, xid: tuple, end: BinlogOffset) -> _PreparedXa:
        """The prepared rows of an XA transaction committed at ``end`` whose XA PREPARE lies before where this read
        started scanning (it was open when a table was snapshotted): found in the binlog before that position and
        decoded alone (lakecdc.source.xa)."""
        what = f"XA COMMIT of {xid_text(xid)} at {end}"
        group = find_prepare(self.options, xid, self._scan_from, what)
        reader = _PrepareGroupReader(self.options, self.tables, {t: group.start for t in self.tables}, group.end)
        for _ in reader:
            pass  # a prepare group commits nothing: the reader only holds its rows
        prepared = reader._prepared.get(xid)
        if prepared is None:
            raise SourceError(f"{what}: the binlog from {group.start} to {group.end} holds no XA PREPARE of it on a "
                              "second read; run again, and report this if it persists")
        return prepared

    def _check_problems(self, txn: _Txn, end: BinlogOffset) -> None:
        """Stop at a transaction with rows lakecdc cannot know exactly, of a table whose checkpoint lies before it."""
        for table_id, message in txn.problems:
            if end > self.start_offsets[table_id]:
                raise SourceError(message)

    def _check_statements(self, txn: _Txn, end: BinlogOffset) -> None:
        """Statement-logged DML (a writer session with binlog_format STATEMENT, or MIXED logging a statement)
        carries no row images: its changes cannot be captured. When it writes a captured table (or may: it cannot
        be parsed and names a captured database), stop before anything from that point is committed."""
        if not txn.statements:
            return
        live = {t for t in self.tables if end > self.start_offsets[t]}
        if not live:
            return
        databases = {t.database for t in live}
        for schema, statement, position in txn.statements:
            targets = dml_target_tables(statement, schema)
            if targets is None:
                if schema in databases or any(f"`{d}`" in statement or f"{d}." in statement for d in databases):
                    hit = sorted(str(t) for t in live if t.database == schema or t.database in statement)
                    raise SourceError(self._statement_message(", ".join(hit) + " (may be written: lakecdc cannot "
                                                              "parse the statement)", statement, position))
                continue
            hit = sorted(str(t) for t in targets & live)
            if hit:
                raise SourceError(self._statement_message(", ".join(hit), statement, position))
            triggered = sorted(str(t) for t in self._trigger_writes(targets, live))
            if triggered:
                raise SourceError(self._statement_message(
                    ", ".join(triggered) + " (through a trigger of " + ", ".join(sorted(map(str, targets))) + ")",
                    statement, position))

    def _trigger_writes(self, targets: set[TableId], live: set[TableId]) -> set[TableId]:
        """The captured tables that triggers on ``targets`` may write: a statement-logged write of a table fires
        its triggers on the replica side, so their row changes never appear in the binlog. A trigger counts when
        its body names a captured table (qualified, or unqualified in the trigger's own database). The server lists
        only the triggers of tables the user may see with the TRIGGER privilege (information_schema.TRIGGERS)."""
        written: set[TableId] = set()
        for target in targets:
            for trigger_schema, body in self._triggers(target):
                written |= {t for t in live if mentions_table(body, t, trigger_schema)}
        return written

    def _triggers(self, table_id: TableId) -> list[tuple[str, str]]:
        if table_id not in self._trigger_bodies:
            conn = connect(self.options)
            try:
                rows = query(conn, "SELECT TRIGGER_SCHEMA, ACTION_STATEMENT FROM information_schema.TRIGGERS "
                                   "WHERE EVENT_OBJECT_SCHEMA = %s AND EVENT_OBJECT_TABLE = %s",
                             (table_id.database, table_id.table), options=self.options)
            finally:
                conn.close()
            self._trigger_bodies[table_id] = [(text(schema), text(body) or "") for schema, body in rows]
        return self._trigger_bodies[table_id]

    @staticmethod
    def _statement_message(tables: str, statement: str, position: str) -> str:
        return (f"statement-logged change of {tables} at {position}: {statement[:200]!r} was written to the binlog "
                "in STATEMENT format (a writer session with binlog_format=STATEMENT, or MIXED logging it as a "
                "statement), which carries no row images, so lakecdc cannot capture it. Nothing from this point on "
                "is committed. Make every writer session use binlog_format=ROW (SET GLOBAL binlog_format='ROW' and "
                "reconnect the writers; no SET SESSION binlog_format), then re-snapshot the table(s) (lakecdc "
                "resnapshot PIPELINE.yaml DB.TABLE, or the Dagster re-snapshot job)")

    @staticmethod
    def _txn_tables(txn: _Txn) -> str:
        return ", ".join(sorted({str(table.table_id) for table, _ in txn.changes}))

    def _ended_early(self, eof_pos: BinlogOffset | None) -> bool:
        """After an EOF before ``stop``: True when the server has more binlog than the stream delivered (or cannot
        be asked), i.e. the stream was cut, not finished."""
        try:
            conn = connect(self.options)
        except SourceError:
            return True
        try:
            head = head_offset(conn, self.options)
        except SourceError:
            return True
        finally:
            conn.close()
        return eof_pos is None or head > eof_pos

    def _add_transaction(self, txn: _Txn, end: BinlogOffset, pending: _Pending) -> Iterator[ChangeBatch]:
        """Add a whole transaction's rows to ``pending`` (after emitting what precedes a cut it crosses)."""
        self._check_problems(txn, end)
        self._check_statements(txn, end)
        if txn.gtid and self._gtid_position and end > self._gtid_base:
            self._gtid_position = _gtid.advance(self._gtid_position, txn.gtid)
        for schema, statement in txn.ddl:
            self.schema_changes.append(SchemaChange(end, schema, statement))
        self.transactions_read += 1
        changes = [(table, decoded) for table, decoded in txn.changes
                   if end > self.start_offsets[table.table_id] and decoded.num_changes]
        if not changes:
            return
        if pending.last_end is not None and self._segment(pending.last_end) != self._segment(end):
            yield from self._flush(pending)
        ts_ms = txn.ts * 1000
        for table, decoded in changes:
            table_id = table.table_id
            pending.items.setdefault(table_id, []).append((decoded, ts_ms))
            pending.rows += decoded.num_changes
            pending.first.setdefault(table_id, end)
            pending.last[table_id] = end
        pending.last_end = end

    def _schema_changes(self, txn: _Txn, end: BinlogOffset, pending: _Pending):
        """Apply the group's DDL to the tracked schemas; emits the pending rows first, then one TableSchemaChange
        per changed table. Returns whether a schema changed."""
        changed = False
        for schema, statement in txn.ddl:
            live = {t: table for t, table in self.tables.items() if end > self.start_offsets[t]}
            parsed = parse_ddl(statement, schema, live, self.options)
            if not parsed.schemas:
                continue
            for table_id, after in parsed.schemas.items():
                events = tuple(e for e in parsed.events if e.table_id == table_id)
                before = self.tables[table_id]
                if not events and after == before:
                    continue
                if not changed:
                    yield from self._flush(pending)
                changed = True
                previous = self._last_end
                names = not any(e.type == UNPARSED_DDL for e in events) or self._logs_column_names()
                yield TableSchemaChange(table_id, events, before, after, end, previous,
                                        parsed.statements.get(table_id, statement), names)
                if after is not None:
                    self.tables[table_id] = after
                log.info("schema of %s changed at %s: %s", table_id, end,
                         "; ".join(e.describe() for e in events) or "(no event)")
        return changed

    def _logs_column_names(self) -> bool:
        """Whether the server logs column names in the binlog (binlog_row_metadata FULL; a global setting on MySQL
        and MariaDB), so that rows after a statement lakecdc could not interpret are cross-checked by name."""
        conn = connect(self.options)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT @@GLOBAL.binlog_row_metadata")
                row = cur.fetchone()
        except pymysql.MySQLError:
            return False  # a server without the setting (MySQL 5.7, MariaDB < 10.5) logs no names
        finally:
            conn.close()
        return row is not None and text(row[0]).upper() == "FULL"

    def _segment(self, offset: BinlogOffset) -> int:
        """How many cuts lie strictly before ``offset``."""
        return bisect.bisect_left(self._cut_keys, offset.sort_key)

    # ------------------------------------------------------------------------------------------------------------

    def _stream_error(self, exc: BaseException, start: BinlogOffset) -> SourceError:
        reason = driver_reason(exc)
        if error_code(exc) == 1236:
            return BinlogPurgedError(
                f"the binlog at {start} is no longer available on {self.options.address} ({reason}): the "
                "server purged it before it was read. The tables reading from there need a new snapshot: drop "
                "their Paimon tables (or re-snapshot them) and run again; keep binlogs longer than the longest "
                "pause between runs (binlog_expire_logs_seconds)"
            )
        if error_code(exc) in (1227, 1045, 1044):
            return SourceError(
                f"MySQL user '{self.options.username}' at {self.options.address} cannot read the binlog ({reason}): "
                "it needs the REPLICATION SLAVE privilege"
            )
        return SourceError(f"reading the binlog of {self.options.address} from {start} failed: {reason}")

    def _gtid_at(self, offset: BinlogOffset) -> str:
        try:
            conn = connect(self.options)
        except SourceError:
            return ""
        try:
            return binlog_gtid_pos(conn, offset.file, offset.pos) if server_flavor(conn) == "mariadb" else ""
        finally:
            conn.close()

    def _flush(self, pending: _Pending) -> Iterator[ChangeBatch]:
        items, first, last = pending.items, pending.first, pending.last
        pending.items, pending.first, pending.last, pending.rows, pending.last_end = {}, {}, {}, 0, None
        for table_id, parts in items.items():
            if not parts:
                continue
            table = self.tables[table_id]
            data = build_change_batch(table, parts)
            self.rows_read += data.num_rows
            yield ChangeBatch(table, data, first_commit=first[table_id], last_commit=last[table_id])


def _partial_json_message(table: SourceTable, position: str) -> str:
    return (f"binlog rows event of {table.table_id} ending at {position} is a partial JSON update "
            "(PARTIAL_UPDATE_ROWS_EVENT: the writer session has binlog_row_value_options=PARTIAL_JSON), which logs "
            "a JSON column's change as a diff; lakecdc does not apply such diffs. Nothing from this transaction on is "
            "committed. Set binlog_row_value_options='' (the default) globally and in every writer session, then "
            "re-snapshot the table (lakecdc resnapshot PIPELINE.yaml DB.TABLE, or the Dagster re-snapshot job)")


_XA_PREPARE, _XA_COMMIT, _XA_ROLLBACK = "prepare", "commit", "rollback"
_XID_PART = r"\s*(?:X'([0-9A-Fa-f]*)'|'((?:[^']|'')*)')"
_XID = re.compile(r"(?is)^XA\s+(?:COMMIT|ROLLBACK)" + _XID_PART + r"(?:\s*," + _XID_PART + r"(?:\s*,\s*(\d+))?)?")


def parse_xid(statement: str, position: str) -> tuple[int, bytes, bytes]:
    """(formatID, gtrid, bqual) of ``XA COMMIT xid [ONE PHASE]`` / ``XA ROLLBACK xid`` as the binlog logs them
    (MySQL and MariaDB: ``X'hex',X'hex',formatID``; plain quoted strings accepted too)."""
    match = _XID.match(statement)
    if not match:
        raise SourceError(f"cannot read the XA transaction id of {statement[:200]!r} at {position}")
    hex1, str1, hex2, str2, fmt = match.groups()

    def part(hex_value, str_value) -> bytes:
        if hex_value is not None:
            return bytes.fromhex(hex_value)
        return (str_value or "").replace("''", "'").encode("utf-8")

    return int(fmt) if fmt else 1, part(hex1, str1), part(hex2, str2)


def _event_start(stream, ev) -> BinlogOffset:
    """Where ``ev`` starts in the binlog."""
    return BinlogOffset(stream.log_file, event_start(ev))


class _PrepareGroupReader(BinlogReader):
    """Reads one XA prepare group for its rows (lakecdc.source.xa) while another reader's dump connection is open:
    as server id 0 without registering, like ``mysqlbinlog``, so that connection is not displaced (a server drops
    an older dump connection with the same id)."""

    _registers = False

    def _server_ids(self) -> Iterator[int]:
        while True:
            yield 0
