"""Bounded, transaction-safe binlog reader: committed row changes of the captured tables between checkpoints and
a stop position, as Arrow change batches.

Reads with python-mysql-replication from ``min(start_offsets)`` (file + position, ``resume_stream=True``,
``is_mariadb=False``: with ``is_mariadb=True`` and no GTID the library ignores the position), non-blocking, so
the read ends at the server's current end of binlog at the latest. Each transaction is buffered and emitted only
at its commit (Xid event, ``COMMIT`` query, or the end of a stand-alone DDL group); the read stops before the
first transaction that ends past ``stop``. A checkpoint (``end_offset``) is therefore always a transaction
boundary: resuming from it repeats nothing and loses nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Iterator

import pyarrow as pa
import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import GtidEvent, MariadbGtidEvent, QueryEvent, RotateEvent, XidEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from lakecdc.errors import BinlogPurgedError, SourceError
from lakecdc.model import DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE, BinlogOffset, ChangeBatch, SourceTable, TableId
from lakecdc.source.connection import (
    binlog_gtid_pos,
    connect,
    connection_kwargs,
    driver_reason,
    error_code,
    server_flavor,
)
from lakecdc.source.options import MySqlSourceOptions
from lakecdc.source.types import table_codecs

log = logging.getLogger(__name__)

FLUSH_ROWS = 50_000  # emit pending batches once this many change rows are buffered (at a commit)
_MARIADB_GTID_STANDALONE = 0x01  # FL_STANDALONE: the group is one statement with no COMMIT / Xid event
_ROW_EVENTS = (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)
_DML_PREFIXES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "LOAD DATA")


@dataclass
class _Txn:
    ts: int  # header timestamp (seconds) of the event that started the group
    multi: bool  # True: ends with an Xid / COMMIT; False: a stand-alone statement (DDL) ends it
    gtid: str = ""
    changes: list = field(default_factory=list)  # (table, event class, rows)
    ddl: list = field(default_factory=list)  # (schema, query)


@dataclass(frozen=True)
class SchemaChange:
    """A DDL statement seen in a captured database (informational: batches use the given SourceTable schema)."""

    offset: BinlogOffset
    database: str
    statement: str


class BinlogReader:
    """Iterate once: committed changes of ``tables`` after their ``start_offsets``, up to ``stop``.

    Batches hold one table each, rows in binlog order; flushed every ~50k rows and at the end. After iteration
    ``end_offset`` is ``stop`` when the read reached it, else the end of the last transaction read (with its GTID
    position when known), and ``rows_read`` is the number of change rows emitted (an UPDATE counts twice).

    Rows are mapped to the SourceTable's columns by name: columns an event lacks (written before an ADD COLUMN)
    are NULL, columns the SourceTable lacks (dropped since) are ignored. DDL statements of captured databases
    are listed in ``schema_changes``.
    """

    def __init__(self, options: MySqlSourceOptions, tables: dict[TableId, SourceTable],
                 start_offsets: dict[TableId, BinlogOffset], stop: BinlogOffset, *, flush_rows: int = FLUSH_ROWS):
        missing = [str(t) for t in tables if t not in start_offsets]
        if missing:
            raise SourceError(f"binlog read: no start offset for table(s) {', '.join(sorted(missing))}")
        self.options = options
        self.tables = dict(tables)
        self.start_offsets = {t: start_offsets[t] for t in self.tables}
        self.stop = stop
        self.flush_rows = flush_rows
        self.end_offset: BinlogOffset | None = None
        self.rows_read = 0
        self.events_read = 0
        self.transactions_read = 0
        self.schema_changes: list[SchemaChange] = []
        self._started = False

    def __iter__(self) -> Iterator[ChangeBatch]:
        if self._started:
            raise SourceError("a BinlogReader can be iterated only once; create a new one to read again")
        self._started = True
        return self._run()

    # ------------------------------------------------------------------------------------------------------------

    def _stream(self, start: BinlogOffset) -> BinLogStreamReader:
        settings = connection_kwargs(self.options)
            # a slow consumer must not make the server drop the dump connection between two batches
        settings["init_command"] = "SET SESSION net_write_timeout = 3600"
        return BinLogStreamReader(
            connection_settings=settings,
            server_id=self.options.server_id,
            log_file=start.file,
            log_pos=start.pos,
            resume_stream=True,
            blocking=False,
            is_mariadb=False,
            only_events=[MariadbGtidEvent, GtidEvent, QueryEvent, XidEvent, RotateEvent, *_ROW_EVENTS],
            only_schemas=sorted({t.database for t in self.tables}),
            only_tables=sorted({t.table for t in self.tables}),
            enable_logging=False,
            pymysql_wrapper=_pymysql_connect,
        )

    def _run(self) -> Iterator[ChangeBatch]:
        stop = self.stop
        if not self.tables:
            self.end_offset = stop
            return
        start = min(self.start_offsets.values())
        if start >= stop:  # nothing between the checkpoints and the stop position
            self.end_offset = stop if start.same_position(stop) else start
            return

        by_name = {(t.database, t.table): table for t, table in self.tables.items()}
        databases = {t.database for t in self.tables}
        pending: dict[TableId, list] = {}
        pending_rows = 0
        txn: _Txn | None = None
        last_end: BinlogOffset | None = None
        reached = False
        checked_maps: set = set()
        stream = self._stream(start)
        try:
            try:
                for ev in stream:
                    self.events_read += 1
                    if isinstance(ev, _ROW_EVENTS):
                        table = by_name.get((ev.schema, ev.table))
                        if table is None:
                            continue
                        if txn is None:  # no GTID / BEGIN seen (should not happen): the rows start a group
                            txn = _Txn(ev.timestamp, multi=True)
                        rows = ev.rows  # decode now
                        if rows:
                            self._check_columns(table, rows[0], checked_maps)
                        txn.changes.append((table, type(ev), rows))
                        continue
                    if isinstance(ev, (MariadbGtidEvent, GtidEvent)) and txn is not None and txn.changes:
                        log.warning("binlog group at %s:%s has no commit event (an XA transaction?): its %d rows "
                                    "event(s) are dropped", stream.log_file, ev.packet.log_pos, len(txn.changes))
                    if isinstance(ev, MariadbGtidEvent):
                        txn = _Txn(ev.timestamp, multi=not (ev.flags & _MARIADB_GTID_STANDALONE), gtid=ev.gtid)
                        continue
                    if isinstance(ev, GtidEvent):  # MySQL: BEGIN follows for DML, DDL stands alone
                        txn = _Txn(ev.timestamp, multi=False, gtid=getattr(ev, "gtid", "") or "")
                        continue
                    if isinstance(ev, RotateEvent):
                        continue
                    end = None
                    if isinstance(ev, XidEvent):
                        end = BinlogOffset(stream.log_file, ev.packet.log_pos)
                    elif isinstance(ev, QueryEvent):
                        statement = ev.query.strip()
                        upper = statement[:16].upper()
                        if upper == "BEGIN" or upper.startswith("XA START"):
                            if txn is None:
                                txn = _Txn(ev.timestamp, multi=True)
                            else:
                                txn.multi = True
                            continue
                        if upper in ("COMMIT", "ROLLBACK") or upper.startswith("XA COMMIT"):
                            end = BinlogOffset(stream.log_file, ev.packet.log_pos)
                        else:
                            schema = ev.schema.decode("utf-8", "replace") if isinstance(ev.schema, bytes) \
                                else (ev.schema or "")
                            if upper.startswith(_DML_PREFIXES) and schema in databases:
                                log.warning("statement-logged change in %s at %s:%s (a writer session does not "
                                            "use binlog_format=ROW): it is not captured: %.200s",
                                            schema, stream.log_file, ev.packet.log_pos, statement)
                            if txn is None:
                                txn = _Txn(ev.timestamp, multi=False)
                            if schema in databases or any(f"`{d}`" in statement or f"{d}." in statement
                                                          for d in databases):
                                txn.ddl.append((schema, statement))
                            if txn.multi:  # a statement inside a transaction
                                continue
                            end = BinlogOffset(stream.log_file, ev.packet.log_pos)
                    if end is None:
                        continue
                    # ---- a group (transaction / DDL) ends at `end`
                    if end > stop:
                        reached = True
                        break
                    if txn is not None:
                        ts_ms = txn.ts * 1000
                        for table, cls, rows in txn.changes:
                            if end > self.start_offsets[table.table_id]:
                                pending_rows += _append_changes(pending.setdefault(table.table_id, []),
                                                                table, cls, rows, ts_ms)
                        for schema, statement in txn.ddl:
                            self.schema_changes.append(SchemaChange(end, schema, statement))
                        self.transactions_read += 1
                    txn = None
                    last_end = end
                    if pending_rows >= self.flush_rows:
                        yield from self._flush(pending)
                        pending, pending_rows = {}, 0
            except pymysql.MySQLError as exc:
                raise self._stream_error(exc, start) from exc
            eof_pos = BinlogOffset(stream.log_file, stream.log_pos or 0) if stream.log_file else None
        finally:
            stream.close()
        yield from self._flush(pending)

        if reached or (last_end is not None and last_end >= stop) or (
            txn is None and eof_pos is not None and eof_pos >= stop
        ):
            self.end_offset = stop
        elif last_end is not None:
            self.end_offset = BinlogOffset(last_end.file, last_end.pos, self._gtid_at(last_end))
        else:
            self.end_offset = start

    # ------------------------------------------------------------------------------------------------------------

    @staticmethod
    def _check_columns(table: SourceTable, row: dict, seen: set) -> None:
        values = row.get("values") or row.get("before_values") or {}
        names = tuple(values)
        if (table.table_id, names) in seen:
            return
        seen.add((table.table_id, names))
        if any(str(name).startswith("UNKNOWN_COL") for name in values):
            raise SourceError(
                f"binlog event for {table.table_id} carries no column names: the server wrote it with "
                "binlog_row_metadata other than FULL (or the setting is not FULL now); run "
                "SET GLOBAL binlog_row_metadata='FULL' and take a new snapshot of the table"
            )
        if list(names) != table.column_names:
            log.warning("binlog columns of %s %s differ from the captured schema %s: matching by name",
                        table.table_id, names, table.column_names)

    def _stream_error(self, exc: BaseException, start: BinlogOffset) -> SourceError:
        reason = driver_reason(exc)
        if error_code(exc) == 1236:
            return BinlogPurgedError(
                f"the binlog at {start} is no longer available on {self.options.address} ({reason}): the "
                "server purged it before it was read; the affected tables need a new snapshot (re-run them with "
                "a full snapshot), and consider a longer binlog retention (binlog_expire_logs_seconds)"
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

    def _flush(self, pending: dict[TableId, list]) -> Iterator[ChangeBatch]:
        for table_id, items in pending.items():
            if not items:
                continue
            table = self.tables[table_id]
            data = _build_batch(table, items)
            self.rows_read += data.num_rows
            yield ChangeBatch(table, data)


def _pymysql_connect(**kwargs):
    # the library passes the deprecated 'db' / 'passwd' names for its control connection
    if "db" in kwargs:
        kwargs["database"] = kwargs.pop("db")
    if "passwd" in kwargs:
        kwargs["password"] = kwargs.pop("passwd")
    return pymysql.connect(**kwargs)


def _append_changes(out: list, table: SourceTable, cls, rows: list, ts_ms: int) -> int:
    """Append (op, op_ts, values, none_sources) tuples for one rows event; returns how many were added."""
    before = len(out)
    if cls is WriteRowsEvent:
        for r in rows:
            out.append((INSERT, ts_ms, r["values"], r["none_sources"]))
    elif cls is DeleteRowsEvent:
        for r in rows:
            out.append((DELETE, ts_ms, r["values"], r["none_sources"]))
    else:
        pks = table.primary_keys
        for r in rows:
            b, a = r["before_values"], r["after_values"]
            if pks and any(b.get(k) != a.get(k) for k in pks):
                # a primary key change is a delete of the old key and an insert of the new one (Debezium)
                out.append((DELETE, ts_ms, b, r["before_none_sources"]))
                out.append((INSERT, ts_ms, a, r["after_none_sources"]))
            else:
                out.append((UPDATE_BEFORE, ts_ms, b, r["before_none_sources"]))
                out.append((UPDATE_AFTER, ts_ms, a, r["after_none_sources"]))
    return len(out) - before


def _build_batch(table: SourceTable, items: list) -> pa.Table:
    arrays = []
    for codec in table_codecs(table):
        name = codec.name
        conv = codec.binlog_value
        values: list[Any] = []
        append = values.append
        for _op, _ts, vals, nones in items:
            v = vals.get(name)
            append(conv(v, nones.get(name) if v is None else None))
        arrays.append(codec.to_array(values))
    arrays.append(pa.array([it[0] for it in items], type=pa.string()))
    arrays.append(pa.array([it[1] for it in items], type=pa.int64()))
    return pa.Table.from_arrays(arrays, schema=table.change_schema())
