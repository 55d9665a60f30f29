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
"""

from __future__ import annotations

from lakecdc.model import BinlogOffset, SourceTable, TableId
from lakecdc.source import connection as _connection
from lakecdc.source import schema as _schema
from lakecdc.source.binlog import BinlogReader, SchemaChange
from lakecdc.source.options import MySqlSourceOptions, parse_server_id
from lakecdc.source.snapshot import SnapshotReader

__all__ = [
    "MySqlSourceOptions",
    "MySqlSource",
    "SnapshotReader",
    "BinlogReader",
    "SchemaChange",
    "parse_server_id",
]


class MySqlSource:
    """One MySQL/MariaDB server as a CDC source. Every call opens (and closes) its own short connection."""

    def __init__(self, options: MySqlSourceOptions):
        self.options = options
        self._flavor: str | None = None

    def __repr__(self) -> str:
        return f"MySqlSource({self.options.username}@{self.options.address})"

    def _connect(self):
        return _connection.connect(self.options)

    def check_server(self) -> None:
        """SourceError naming the setting and the fix when the server cannot be a CDC source (binlog settings,
        privileges) or cannot be reached."""
        conn = self._connect()
        try:
            self._flavor = _connection.server_flavor(conn)
            _connection.check_server(conn, self.options)
        finally:
            conn.close()

    def flavor(self) -> str:
        """'mariadb' or 'mysql'."""
        if self._flavor is None:
            conn = self._connect()
            try:
                self._flavor = _connection.server_flavor(conn)
            finally:
                conn.close()
        return self._flavor

    def list_tables(self) -> list[TableId]:
        """Base tables of all non-system databases."""
        conn = self._connect()
        try:
            return _schema.list_tables(conn, self.options)
        finally:
            conn.close()

    def describe_table(self, table_id: TableId) -> SourceTable:
        """Columns (Arrow types, nullability), primary key and comments; SourceError if the table is missing."""
        conn = self._connect()
        try:
            return _schema.describe_table(conn, table_id, self.options)
        finally:
            conn.close()

    def head_offset(self) -> BinlogOffset:
        """The current end of the binlog (SHOW MASTER STATUS) with its GTID position."""
        conn = self._connect()
        try:
            return _connection.head_offset(conn, self.options)
        finally:
            conn.close()

    def snapshot(self, tables: list[SourceTable]) -> SnapshotReader:
        """A consistent snapshot of ``tables`` (a context manager; ``offset`` is its exact binlog position)."""
        return SnapshotReader(self.options, list(tables))

    def read_binlog(self, tables: dict[TableId, SourceTable], start_offsets: dict[TableId, BinlogOffset],
                    stop: BinlogOffset) -> BinlogReader:
        """Committed changes of ``tables`` after their start offsets up to ``stop`` (iterate once)."""
        return BinlogReader(self.options, tables, start_offsets, stop)
