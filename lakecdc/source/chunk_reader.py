"""Reading one chunk (a :class:`lakecdc.source.splitter.ChunkRange`) on one connection, and, in an incremental
snapshot, the binlog positions that say which changes its rows include: its :class:`ChunkWindow`.

A consistent snapshot reads every chunk inside its one transaction: the snapshot's position is every chunk's.

An incremental snapshot (lock-free, Flink CDC's algorithm) reads each chunk with statements of its own:

* **exact windows** (MariaDB): the chunk's statements run in a short transaction opened with ``START TRANSACTION
  WITH CONSISTENT SNAPSHOT``, and ``SHOW STATUS LIKE 'binlog_snapshot_%'`` gives the binlog position its read view
  is consistent with: every transaction that ends at or before it is in the rows, none after it. MariaDB takes that
  position under the lock that orders commits (no table lock, no privilege). The window's low and high are that one
  position: nothing about the chunk is uncertain.
* **watermarks** (MySQL, which has no such status without BACKUP_ADMIN): the binlog head right before the chunk's
  SELECT (low) and right after it (high). Changes after high are not in the rows; changes in (low, high] may or may
  not be. Changes before low are in the rows, except one race: MySQL writes a transaction to the binlog in its flush
  stage and commits it in InnoDB only after its sync stage (``binlog_group_commit_sync_delay`` and the fsync), so a
  transaction logged just before low may still be invisible to the SELECT. A table identified by a key does not
  care: its commit group folds every change since the run's first position into its chunks, and a fold is
  idempotent (lakecdc.runtime.incremental). A table without such a key keeps that race, as in Flink CDC
  (docs/operations.md, "Why the snapshot loses nothing").

Rows go from the wire to Arrow without a Python object per value (lakecdc.source.wire, text_columns).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generator

import pyarrow as pa
import pymysql

from lakecdc.errors import SourceConnectionLost, SourceError
from lakecdc.model import INSERT, BinlogOffset, ChangeBatch, SourceTable, TableId
from lakecdc.source import chunk_sql
from lakecdc.source.chunks import ChunkProgress
from lakecdc.source.connection import driver_reason, head_offset, is_connection_lost, text
from lakecdc.source.options import MySqlSourceOptions
from lakecdc.source.splitter import BOUNDED, LIMITED, NULLS, WHOLE, ChunkRange, ChunkSplitter
from lakecdc.source.text_columns import TextColumn, text_columns
from lakecdc.source.wire import read_columns, result_columns

# Test hook: when set, called in the reading thread after each batch of a SELECT came off the wire and before it
# is handed on, with the MySQL connection id of the snapshot connection. The reader is paused while it runs, so a
# test can kill the connection at an exact point mid-chunk. None in normal runs: one attribute check per batch.
mid_chunk_hook: Callable[[int], None] | None = None
# Test hook: when set, called with (table, the chunk's lower progress) right before a chunk's SELECT; a connection it
# returns runs that SELECT instead of the reader's own (a test gives one whose read view is older than the low
# watermark: the commit race of MySQL's group commit, held open as long as the test needs). None in normal runs.
select_connection_hook: Callable[[TableId, ChunkProgress], Any] | None = None


@dataclass(frozen=True)
class ChunkWindow:
    """One chunk of an incremental snapshot: the key range of ``table`` that ``lower`` lacks and ``upper`` has (see
    ChunkProgress), the ``rows`` its SELECT returned, and the binlog positions around it: changes ending at or
    before ``low`` are in the rows (on MySQL but for its commit race, see the module docstring), those after
    ``high`` are not, those in (low, high] may be; an ``exact`` window's low and high are the one position its rows
    are at. A chunk's bounds are found before its window opens (so rows appended at growing keys while it is read
    fall outside it); an empty last chunk of a table without row identity is the statement that found no row after
    ``lower`` (``SELECT MAX``), in a window of its own."""

    table: TableId
    lower: ChunkProgress
    upper: ChunkProgress
    rows: int
    low: BinlogOffset
    high: BinlogOffset
    exact: bool = False


class ChunkReader:
    """Reads chunks on ``conn`` (a streaming, autocommit connection): inside the caller's consistent transaction
    (``incremental`` False), or each in its own window, ``exact`` or between watermarks (see the module docstring).
    Records each chunk's :class:`ChunkWindow` in ``windows`` (incremental) and counts ``rows_read``."""

    def __init__(self, conn, options: MySqlSourceOptions, *, incremental: bool, exact: bool):
        self.conn = conn
        self.options = options
        self.incremental = incremental
        self.exact = exact
        self.windows: list[ChunkWindow] = []
        self.rows_read = 0

    # ------------------------------------------------------------------------------------------------ windows

    def execute(self, sql: str, args: list | None = None) -> list[tuple]:
        """A short statement on the reader's connection (its rows); connection losses as SourceConnectionLost."""
        try:
            with self.conn.cursor(pymysql.cursors.Cursor) as cur:
                cur.execute(sql, args)
                return list(cur.fetchall())
        except pymysql.MySQLError as exc:
            if is_connection_lost(exc):
                raise SourceConnectionLost(f"MySQL at {self.options.address}: connection lost: "
                                           f"{driver_reason(exc)}") from exc
            if exc.args and exc.args[0] in (1227, 1045):
                raise SourceError(f"MySQL at {self.options.address}: {sql} needs a privilege user "
                                  f"'{self.options.username}' lacks: {driver_reason(exc)}") from None
            raise SourceError(f"MySQL at {self.options.address}: {sql} failed: {driver_reason(exc)}") from exc

    def fetch_one(self, sql: str, args: list) -> tuple | None:
        rows = self.execute(sql, args)
        return rows[0] if rows else None

    def head(self, *, gtid: bool = False) -> BinlogOffset:
        """The binlog head now (a watermark needs no GTID position: ``gtid`` False); a lost connection as
        SourceConnectionLost."""
        try:
            return head_offset(self.conn, self.options, gtid=gtid)
        except SourceError as exc:
            if exc.__cause__ is not None and is_connection_lost(exc.__cause__):
                raise SourceConnectionLost(str(exc)) from exc
            raise

    def _open_window(self) -> tuple[BinlogOffset, int] | None:
        """Before a chunk's statements: (low, rows read so far), or None outside incremental mode."""
        if not self.incremental:
            return None
        if self.exact:
            self.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
            status = {text(k).lower(): text(v) for k, v in self.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")}
            file, pos = status.get("binlog_snapshot_file"), status.get("binlog_snapshot_position")
            if not file or pos is None:
                raise SourceError(f"MySQL at {self.options.address}: binary logging is disabled (log_bin=OFF); "
                                  "start the server with --log-bin and binlog_format=ROW")
            return BinlogOffset(file, int(pos)), self.rows_read
        return self.head(), self.rows_read

    def _close_window(self, opened: tuple[BinlogOffset, int] | None, table: SourceTable, lower: ChunkProgress,
                      upper: ChunkProgress) -> None:
        """After a chunk's statements: record its window."""
        if opened is None:
            return
        low, rows_before = opened
        if self.exact:
            self.execute("COMMIT")
            high = low
        else:
            high = self.head()
        self.windows.append(ChunkWindow(table.table_id, lower, upper, self.rows_read - rows_before, low, high,
                                        self.exact))

    # ------------------------------------------------------------------------------------------------ chunks

    def read(self, splitter: ChunkSplitter, chunk: ChunkRange) -> Generator[ChangeBatch, None, ChunkProgress]:
        """The rows of ``chunk`` as +I change batches; returns (as the generator's value) the progress after it."""
        table, key = splitter.table, splitter.key
        if chunk.kind == BOUNDED and not chunk.bound[0] and self.incremental and not self.exact \
                and not table.row_identity:
            return (yield from self._last_chunk_by_max(splitter, chunk))
        opened = self._open_window()
        if chunk.kind == WHOLE:
            sql, args = chunk_sql.whole_table_query(table)
        elif chunk.kind == NULLS:
            assert key is not None
            sql, args = chunk_sql.nulls_query(table, key, splitter.extra)
        elif chunk.kind == LIMITED:
            assert key is not None
            sql, args = chunk_sql.limited_query(table, key, chunk.lower, chunk.size, splitter.extra)
        else:
            assert key is not None
            sql, args = chunk_sql.range_query(table, key, chunk.lower, chunk.bound, splitter.extra)
        key_index = table.column_names.index(key.name) if chunk.kind == LIMITED and key is not None else None
        rows, last_key = yield from self.select(table, sql, args, key_index, chunk.lower)
        upper = chunk.upper(key, last_key, rows)
        self._close_window(opened, table, chunk.lower, upper)
        return upper

    def _last_chunk_by_max(self, splitter: ChunkSplitter,
                           chunk: ChunkRange) -> Generator[ChangeBatch, None, ChunkProgress]:
        """The last chunk of a table without row identity, between watermarks: it ends at the largest key now, not
        at the end of the key range, and its window opens after that, so rows appended at growing keys while it is
        read fall outside it (lakecdc cannot tell which of those an append table's SELECT saw). The rest of the range
        is an empty chunk as of the MAX statement, whose window ends right after it: the rows appended there since
        are changes."""
        table, key = splitter.table, splitter.key
        assert key is not None
        opened = self._open_window()
        row = self.fetch_one(*chunk_sql.max_key_query(table, key, chunk.lower, splitter.extra))
        done = ChunkProgress(column=key.name, done=True)
        if row is None or row[0] is None:  # no row after `lower` as this statement saw it
            self._close_window(opened, table, chunk.lower, done)
            return done
        bounded = ChunkRange(BOUNDED, chunk.lower, bound=(True, row[0]))
        rest = bounded.upper(key)
        self._close_window(opened, table, rest, done)
        empty_rest = self.windows.pop()
        yield from self.read(splitter, bounded)
        self.windows.append(empty_rest)
        return done

    def read_empty_rest(self, splitter: ChunkSplitter, progress: ChunkProgress) -> bool:
        """After a budget that ended with the last row: True (and the empty chunk to the end recorded) when no row
        follows ``progress``."""
        key = splitter.key
        assert key is not None
        opened = self._open_window()
        if splitter.has_rows_after(progress):
            if opened is not None and self.exact:
                self.execute("COMMIT")
            return False
        self._close_window(opened, splitter.table, progress, ChunkProgress(column=key.name, done=True))
        return True

    # ------------------------------------------------------------------------------------------------ rows

    def _failure(self, table: SourceTable, exc: pymysql.MySQLError) -> SourceError:
        if is_connection_lost(exc):
            return SourceConnectionLost(f"snapshot of {table.table_id}: connection to {self.options.address} lost: "
                                        f"{driver_reason(exc)}")
        return SourceError(f"snapshot of {table.table_id} failed: {driver_reason(exc)}")

    def select(self, table: SourceTable, sql: str, args: list | None, key_index: int | None = None,
               lower: ChunkProgress | None = None):
        """The rows of one SELECT as +I change batches, streamed from the server. The rows go from the wire to Arrow
        column by column (lakecdc.source.wire and text_columns), not through a Python object per value. Returns
        (rows, the driver value of column ``key_index`` in the last row, or None)."""
        schema = table.change_schema()
        batch_rows = self.options.snapshot_batch_rows
        conn = self.conn
        if select_connection_hook is not None and lower is not None:
            conn = select_connection_hook(table.table_id, lower) or conn
        cur = conn.cursor()  # SSCursor: rows stream from the server
        try:
            try:
                cur.execute(sql, args)
            except pymysql.MySQLError as exc:
                raise self._failure(table, exc) from exc
            described = result_columns(cur)
            if described is None:
                return 0, None
            decoders = text_columns(list(table.columns), described.converters)
            batches = read_columns(cur, batch_rows)
            rows, last_key = 0, None
            try:
                while True:
                    try:
                        raw = next(batches, None)
                    except pymysql.MySQLError as exc:
                        raise self._failure(table, exc) from exc
                    if raw is None:
                        return rows, last_key
                    n = len(raw[0]) if raw else 0
                    rows += n
                    self.rows_read += n
                    if key_index is not None and n:
                        last_key = decoders[key_index].driver_value(raw[key_index], n - 1)
                    if mid_chunk_hook is not None:
                        mid_chunk_hook(conn.thread_id())
                    yield ChangeBatch(table, build_columns(schema, decoders, raw, INSERT, 0))
            finally:
                batches.close()  # reads the rest of an unfinished result: the connection runs the next query
        finally:
            try:
                cur.close()
            except Exception:  # noqa: BLE001 - a broken connection (PyMySQL may fail with AttributeError then):
                pass  # the error that broke it is already being raised


def read_one(reader: ChunkReader, splitter: ChunkSplitter, chunk: ChunkRange) -> tuple[list[ChangeBatch], list]:
    """One chunk read whole on ``reader`` (a parallel reader's unit of work): its batches and its window(s)."""
    first = len(reader.windows)
    batches: list[ChangeBatch] = []
    rows = reader.read(splitter, chunk)
    while True:
        try:
            batches.append(next(rows))
        except StopIteration:
            break
    return batches, reader.windows[first:]


def build_columns(schema: pa.Schema, decoders: list[TextColumn], raw: list[pa.Array], op: str,
                  op_ts: int) -> pa.Table:
    """A change batch from raw text-protocol columns (see lakecdc.source.wire), all rows with the same row kind
    and op_ts."""
    n = len(raw[0]) if raw else 0
    arrays = [decoder.to_array(values) for decoder, values in zip(decoders, raw)]
    arrays.append(pa.repeat(pa.scalar(op, pa.string()), n))
    arrays.append(pa.repeat(pa.scalar(op_ts, pa.int64()), n))
    return pa.Table.from_arrays(arrays, schema=schema)
