"""The MySQL/MariaDB source: server checks, table discovery and description, a consistent snapshot at an exact
binlog position, and bounded transaction-safe binlog reads, all producing Arrow change batches
(:class:`lakecdc.model.ChangeBatch`).

Typical use by the runtime::

    source = MySqlSource(MySqlSourceOptions(hostname="127.0.0.1", port=3306, username="root", password="..."))
    source.check_server()
    table = source.describe_table(TableId("inventory", "orders"))
    with source.snapshot([table]) as snap:          # first run
        for batch in snap.read(table.table_id): ...
        checkpoint = snap.offset
    stop = source.head_offset()                     # later runs
    reader = source.read_binlog({table.table_id: table}, {table.table_id: checkpoint}, stop)
    for batch in reader: ...
    checkpoint = reader.end_offset

Large tables are read in chunks of their chunk key, each call continuing where the last one stopped::

    key = source.chunk_key(table)
    progress = ChunkProgress.not_started(key)
    while not progress.done:
        with source.snapshot([table]) as snap:
            for batch in snap.read_chunks(table.table_id, key, progress, max_rows=100_000): ...
            progress = snap.progress       # commit it with the rows, at snap.offset

and binlog rows of a table whose snapshot is unfinished are kept only for the keys already read
(:func:`restrict_to_snapshotted` with :func:`snapshotted_mask`). Startup positions: ``earliest_offset``,
``offset_at_timestamp``, ``offset_for_gtid``; ``check_available`` tells whether a checkpoint's binlog still exists.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

import pymysql

from lakecdc.model import BinlogOffset, SourceTable, TableId
from lakecdc.source import connection as _connection
from lakecdc.source import positions as _positions
from lakecdc.source import schema as _schema
from lakecdc.source.binlog import BinlogCheckpoint, BinlogReader, SchemaChange, TableSchemaChange
from lakecdc.source.chunks import ChunkKey, ChunkProgress, chunk_key_for, restrict_to_snapshotted, snapshotted_mask
from lakecdc.source.gtid import gtid_flavor
from lakecdc.source.options import (MySqlSourceOptions, parse_chunk_key_columns, parse_server_id,
                                    parse_server_id_range)
from lakecdc.source.chunk_reader import ChunkWindow
from lakecdc.source.initial_load import InitialLoadReader
from lakecdc.source.sql_text import qualified_table

__all__ = [
    "MySqlSourceOptions",
    "MySqlSource",
    "InitialLoadReader",
    "ChunkWindow",
    "BinlogReader",
    "BinlogCheckpoint",
    "TableSchemaChange",
    "SchemaChange",
    "ChunkKey",
    "ChunkProgress",
    "restrict_to_snapshotted",
    "snapshotted_mask",
    "gtid_flavor",
    "parse_server_id",
    "parse_server_id_range",
    "parse_chunk_key_columns",
]


class MySqlSource:
    """One MySQL/MariaDB server as a CDC source. Every call opens (and closes) its own short connection, except
    between :meth:`share_connection` and :meth:`close`, where the short calls (server checks, table lists and
    descriptions, the head position, the binlog files) share one: a run's start-up makes several of them, and each
    connection costs round trips and a login."""

    def __init__(self, options: MySqlSourceOptions):
        self.options = options
        self._flavor: str | None = None
        self._sharing = False
        self._shared = None
        self._shared_lock = threading.RLock()

    def __repr__(self) -> str:
        return f"MySqlSource({self.options.username}@{self.options.address})"

    def _connect(self):
        return _connection.connect(self.options)

    def share_connection(self) -> None:
        """Until :meth:`close`, the short calls use one connection (opened at the first, and again when the server
        dropped it) instead of one each."""
        self._sharing = True

    def close(self) -> None:
        """Close the shared connection; later calls open their own again."""
        with self._shared_lock:
            self._sharing = False
            shared, self._shared = self._shared, None
        if shared is not None:
            shared.close()

    @contextlib.contextmanager
    def _session(self) -> Iterator:
        """A connection for one short call: the shared one while sharing, else a new one closed after the call."""
        if not self._sharing:
            conn = self._connect()
            try:
                yield conn
            finally:
                conn.close()
            return
        with self._shared_lock:  # one statement at a time on the shared connection
            if self._shared is not None:
                try:  # one round trip (a new connection takes several and a login): the server may have dropped it
                    self._shared.ping(reconnect=False)
                except pymysql.MySQLError:
                    self._shared = None  # PyMySQL closed it when the ping failed
            if self._shared is None:
                self._shared = self._connect()
            yield self._shared

    def check_server(self) -> None:
        """SourceError naming the setting and the fix when the server cannot be a CDC source (binlog settings,
        privileges) or cannot be reached."""
        with self._session() as conn:
            self._flavor = _connection.server_flavor(conn)
            _connection.check_server(conn, self.options)

    def flavor(self) -> str:
        """'mariadb' or 'mysql'."""
        if self._flavor is None:
            with self._session() as conn:
                self._flavor = _connection.server_flavor(conn)
        return self._flavor

    def missing_global_privilege(self, privilege: str) -> bool:
        """True when SHOW GRANTS says the user lacks ``privilege`` on ``*.*`` (False when it holds it, holds ALL
        PRIVILEGES, or the grants cannot be read: the statement needing it then fails on its own)."""
        with self._session() as conn:
            granted = _connection.granted_globally(conn)
        return granted is not None and privilege.upper() not in granted and "ALL PRIVILEGES" not in granted

    def list_tables(self) -> list[TableId]:
        """Base tables of all non-system databases."""
        with self._session() as conn:
            return _schema.list_tables(conn, self.options)

    def describe_table(self, table_id: TableId) -> SourceTable:
        """Columns (Arrow types, nullability), primary key and comments; SourceError if the table is missing."""
        with self._session() as conn:
            return _schema.describe_table(conn, table_id, self.options)

    def describe_tables(self, table_ids: list[TableId]) -> dict[TableId, SourceTable]:
        """:meth:`describe_table` of each table, three queries per database instead of three per table."""
        with self._session() as conn:
            return _schema.describe_tables(conn, table_ids, self.options)

    def leading_index_columns(self, table_id: TableId) -> set[str]:
        """The columns that lead one of the table's indexes."""
        with self._session() as conn:
            return _schema.leading_index_columns(conn, table_id, self.options)

    def head_offset(self) -> BinlogOffset:
        """The current end of the binlog (SHOW MASTER STATUS) with its GTID position."""
        with self._session() as conn:
            return _connection.head_offset(conn, self.options)

    def count_rows(self, tables: list[TableId]) -> int:
        """The rows of ``tables`` together (SELECT COUNT(*) of each, one after the other)."""
        total = 0
        with self._session() as conn:
            for table_id in tables:
                sql = f"SELECT COUNT(*) FROM {qualified_table(table_id.database, table_id.table)}"
                total += int(_connection.query(conn, sql, options=self.options)[0][0])
        return total

    def binary_log_sizes(self) -> dict[str, int]:
        """Each binlog file the server has → its size in bytes (SHOW BINARY LOGS)."""
        with self._session() as conn:
            return {_connection.text(row[0]): int(row[1])
                    for row in _connection.query(conn, "SHOW BINARY LOGS", options=self.options)}

    def snapshot(self, tables: list[SourceTable], *, incremental: bool = False,
                 extra: dict[TableId, tuple[str, list]] | None = None) -> InitialLoadReader:
        """A consistent snapshot of ``tables`` (a context manager; ``offset`` is its exact binlog position), or with
        ``incremental`` a lock-free chunk-by-chunk read (``offset`` is where it started; each chunk's watermarks are
        in ``windows``: see lakecdc.runtime.incremental for how they become exact). ``extra``: per table, a condition
        (SQL with ``%s`` parameters, and its arguments) every chunk statement adds."""
        return InitialLoadReader(self.options, list(tables), incremental=incremental, extra=extra)

    def read_binlog(self, tables: dict[TableId, SourceTable], start_offsets: dict[TableId, BinlogOffset],
                    stop: BinlogOffset | None, *, cuts=(), skip_events: int = 0, skip_rows: int = 0,
                    track_schemas: bool = False, xa_scan_start: BinlogOffset | None = None,
                    checkpoint_seconds: float | None = None, should_stop=None) -> BinlogReader:
        """Committed changes of ``tables`` after their start offsets up to ``stop`` (iterate once); batches never
        span one of ``cuts``; ``skip_events``/``skip_rows`` drop changes right after the start (specific-offset);
        ``track_schemas``: follow DDL and yield TableSchemaChange items between the batches (see BinlogReader);
        ``xa_scan_start``: a checkpoint's oldest open prepared XA transaction, scanned from (see BinlogReader);
        ``stop`` None with ``checkpoint_seconds``: follow the binlog with no end, yielding a BinlogCheckpoint every
        ``checkpoint_seconds`` until ``should_stop()``."""
        return BinlogReader(self.options, tables, start_offsets, stop, cuts=cuts, skip_events=skip_events,
                            skip_rows=skip_rows, track_schemas=track_schemas, xa_scan_start=xa_scan_start,
                            checkpoint_seconds=checkpoint_seconds, should_stop=should_stop)

    def chunk_key(self, table: SourceTable) -> ChunkKey | None:
        """The column ``table`` is chunked by in snapshots (None: read whole); SourceError for a bad option."""
        return chunk_key_for(table, self.options)

    def earliest_offset(self) -> BinlogOffset:
        """The start of the oldest binlog file the server still has."""
        return _positions.earliest_offset(self.options)

    def offset_at_timestamp(self, timestamp_ms: int) -> BinlogOffset:
        """Where the first transaction committed at or after ``timestamp_ms`` starts (the head if none)."""
        return _positions.offset_at_timestamp(self.options, timestamp_ms)

    def offset_for_gtid(self, gtid_set: str) -> BinlogOffset:
        """Where the first transaction after a GTID set (MariaDB or MySQL form) starts (the head if none)."""
        return _positions.offset_for_gtid(self.options, gtid_set)

    def binary_logs(self) -> list[str]:
        """The binlog files the server still has, oldest first."""
        with self._session() as conn:
            return _positions.binary_logs(self.options, conn)

    def check_available(self, offset: BinlogOffset, what: str) -> None:
        """BinlogPurgedError (naming ``what``) when ``offset``'s binlog file is gone from the server."""
        _positions.check_available(self.options, offset, what)
