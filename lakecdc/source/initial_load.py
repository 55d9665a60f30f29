"""The initial load: a consistent snapshot of several tables at an exact binlog position, read as Arrow change
batches (+I rows).

Names: in lakecdc's code the MySQL side of this is the *initial load* (Flink CDC's "snapshot phase", whose user-facing
words, such as ``scan.snapshot.*`` and ``scan.startup.mode: snapshot``, the options and docs keep), while *snapshot*
alone, as in ``snapshot_id``, is a Paimon snapshot: a version of a Paimon table.

MariaDB: ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` then ``SHOW STATUS LIKE 'binlog_snapshot_%'`` gives the
binlog position of the snapshot itself, lock-free (``BINLOG_GTID_POS`` turns it into a GTID position).
MySQL: a brief ``FLUSH TABLES WITH READ LOCK`` around ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` +
``SHOW MASTER STATUS`` (needs RELOAD). Replaying the binlog from ``offset`` over the snapshot gives exactly the
table's later states: nothing is duplicated, nothing is lost.

A table is read whole (``read``) or in chunks of its chunk key (``read_chunks``, see lakecdc.source.chunks), all
inside the same consistent transaction.

``incremental=True`` (Flink CDC's incremental snapshot, ``scan.incremental.snapshot.enabled``): no transaction and no
lock. ``offset`` is the binlog head when the reader opened; every chunk is one autocommit SELECT between two reads of
the binlog head, its low and high watermark, recorded as a :class:`ChunkWindow` in ``windows``. The caller brings
the chunks to one binlog position with the binlog between the watermarks (lakecdc.runtime.incremental).

Rows go from the wire to Arrow without a Python object per value (lakecdc.source.wire, text_columns), and are read
one batch ahead in a background thread (lakecdc.source.prefetch) while the caller transforms and writes the previous
one. A connection lost mid-read raises :class:`SourceConnectionLost`: the transaction (or chunk) is gone, so the
caller retries the commit group.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import pyarrow as pa
import pymysql

from lakecdc.errors import SourceConnectionLost, SourceError
from lakecdc.model import INSERT, BinlogOffset, ChangeBatch, SourceTable, TableId
from lakecdc.source.columns import decoding_layout
from lakecdc.source.chunks import (ChunkKey, ChunkProgress, chunk_query, limited_chunk_query, max_key_query,
                                   next_upper_bound)
from lakecdc.source.connection import (
    binlog_gtid_pos,
    connect,
    driver_reason,
    error_code,
    head_offset,
    is_connection_lost,
    server_flavor,
    text,
)
from lakecdc.source.options import MySqlSourceOptions
from lakecdc.source.prefetch import Prefetch
from lakecdc.source.schema import describe_tables
from lakecdc.source.text_columns import TextColumn, text_columns
from lakecdc.source.wire import abort_connection, read_columns, result_columns

log = logging.getLogger(__name__)

# Test hook: when set, called in the reading thread after each batch of a SELECT came off the wire and before it
# is handed on, with the MySQL connection id of the snapshot connection. The reader is paused while it runs, so a
# test can kill the connection at an exact point mid-chunk (tests/test_source_tables.py). None in normal runs:
# one attribute check per batch.
mid_chunk_hook: Callable[[int], None] | None = None


def _columns(table: SourceTable) -> str:
    return ", ".join(f"{c.name} {c.column_type}" for c in table.columns)


def quote_identifier(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class ChunkWindow:
    """One chunk of an incremental snapshot: the key range of ``table`` that ``lower`` lacks and ``upper`` has (see
    ChunkProgress), the ``rows`` its SELECT returned, and the binlog head read right before the SELECT (``low``,
    the low watermark) and right after it (``high``). A chunk's bounds are found before ``low`` (so rows appended
    at growing keys while it is read fall outside it); an empty last chunk of a table without primary key is the
    statement that found no row after ``lower`` (``SELECT MAX``), between ``low`` and ``high``."""

    table: TableId
    lower: ChunkProgress
    upper: ChunkProgress
    rows: int
    low: BinlogOffset
    high: BinlogOffset


class InitialLoadReader:
    """One consistent read of several tables: use as a context manager; ``offset`` is the snapshot's position.

    Tables are read one after the other on one connection inside one transaction: consume (or close) the
    iterator of ``read`` before calling ``read`` again.
    """

    def __init__(self, options: MySqlSourceOptions, tables: list[SourceTable], *, incremental: bool = False):
        self.options = options
        self.incremental = incremental
        self.windows: list[ChunkWindow] = []  # incremental: every chunk read, in reading order
        self.tables: dict[TableId, SourceTable] = {t.table_id: t for t in tables}
        self._conn: Any = None  # the open pymysql connection (pymysql has no type hints)
        self._offset: BinlogOffset | None = None
        self._active: TableId | None = None
        self._closed = False
        self.rows_read = 0
        self.chunks_read = 0
        self.progress: ChunkProgress | None = None  # after read_chunks: where the next read continues
        self.tables_read: set[TableId] = set()  # the tables read_chunks was called for
        self._reading: Prefetch | None = None  # the read running ahead in its thread

    # -------------------------------------------------------------------------------------------- lifecycle

    def open(self) -> "InitialLoadReader":
        if self._closed:
            raise SourceError("this snapshot reader is closed; take a new snapshot")
        if self._conn is not None:
            return self
        conn = connect(self.options, streaming=True, autocommit=True)
        try:
            self._offset = self._begin(conn)
            self._check_schemas(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        log.info("%s snapshot of %d table(s) %s %s (gtid %s)", "incremental" if self.incremental else "consistent",
                 len(self.tables), "from" if self.incremental else "at", self._offset, self._offset.gtid or "-")
        return self

    def _exec(self, cur, sql: str) -> None:
        try:
            cur.execute(sql)
        except pymysql.MySQLError as exc:
            if is_connection_lost(exc):
                raise SourceConnectionLost(f"MySQL at {self.options.address}: connection lost: "
                                           f"{driver_reason(exc)}") from exc
            if error_code(exc) in (1227, 1045):
                raise SourceError(
                    f"MySQL at {self.options.address}: {sql} needs a privilege user '{self.options.username}' "
                    f"lacks: {driver_reason(exc)}"
                ) from None
            raise SourceError(f"MySQL at {self.options.address}: {sql} failed: {driver_reason(exc)}") from exc

    def _begin(self, conn) -> BinlogOffset:
        with conn.cursor(pymysql.cursors.Cursor) as cur:
            self._exec(cur, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            # a consumer may take minutes between two fetches: the server must not drop the streamed result
            self._exec(cur, "SET SESSION net_write_timeout = 3600")
            if self.incremental:
                # no transaction, no lock: each chunk is an autocommit SELECT between two binlog heads
                return head_offset(conn, self.options)
            if server_flavor(conn) == "mariadb":
                self._exec(cur, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
                self._exec(cur, "SHOW STATUS LIKE 'binlog_snapshot_%'")
                status = {text(k).lower(): text(v) for k, v in cur.fetchall()}
                file, pos = status.get("binlog_snapshot_file"), status.get("binlog_snapshot_position")
                if not file or pos is None:
                    raise SourceError(
                        f"MySQL at {self.options.address}: binary logging is disabled (log_bin=OFF); start the "
                        "server with --log-bin and binlog_format=ROW"
                    )
                return BinlogOffset(file, int(pos), binlog_gtid_pos(conn, file, int(pos)))
            # MySQL: a brief global read lock makes the transaction start and the binlog position one instant
            self._global_read_lock(cur)
            started = time.monotonic()
            try:
                self._exec(cur, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
                offset = head_offset(conn, self.options)
            finally:
                self._exec(cur, "UNLOCK TABLES")
            log.debug("global read lock held %.1f ms", (time.monotonic() - started) * 1000)
            return offset

    def _global_read_lock(self, cur) -> None:
        try:
            cur.execute("FLUSH TABLES WITH READ LOCK")
        except pymysql.MySQLError as exc:
            if is_connection_lost(exc):
                raise SourceConnectionLost(f"MySQL at {self.options.address}: connection lost: "
                                           f"{driver_reason(exc)}") from exc
            tables = ", ".join(sorted(str(t) for t in self.tables))
            raise SourceError(
                f"snapshot of {tables}: scan.incremental.snapshot.enabled is false, and a consistent snapshot on "
                f"MySQL at {self.options.address} needs FLUSH TABLES WITH READ LOCK, which user "
                f"'{self.options.username}' may not run ({driver_reason(exc)}; it needs the RELOAD privilege, and "
                "managed MySQL services refuse it to every user). Set scan.incremental.snapshot.enabled: true (the "
                "default: lock-free, needs only SELECT, SHOW DATABASES, REPLICATION SLAVE and REPLICATION CLIENT), "
                "or GRANT RELOAD to the user. Nothing was written") from None

    def head(self) -> BinlogOffset:
        """The binlog head now with its GTID position, read on this reader's connection (between two reads).
        Incremental: the chunks were read over time, so the schemas are checked again first: a DDL while they
        were read would make their rows, and the binlog decoded up to this head, disagree with the schemas (after
        the head: a DDL after the check is after the head too)."""
        self.open()
        head = self._head_offset(gtid=True)
        if self.incremental:
            # the tables whose chunks were read: the others (of a commit group of several tables) were not read
            self._check_schemas(self._conn, self.tables_read)
        return head

    def _head_offset(self, *, gtid: bool = False) -> BinlogOffset:
        """The head's file and position; a watermark needs no GTID position (which costs a query on MariaDB)."""
        try:
            return head_offset(self._conn, self.options, gtid=gtid)
        except SourceError as exc:
            if exc.__cause__ is not None and is_connection_lost(exc.__cause__):
                raise SourceConnectionLost(str(exc)) from exc
            raise

    def _check_schemas(self, conn, only: set[TableId] | None = None) -> None:
        """The schemas this snapshot records must be the tables' schemas at its binlog position: the binlog after it
        is decoded with them. A DDL between the moment they were described and the snapshot's start (or right
        after it: a data dictionary read is not part of the snapshot) shows here as a different definition; the
        snapshot then stops rather than record a schema it cannot vouch for. ``only``: check these tables only.
        One batched description (a few queries per database), whatever the number of tables."""
        checked = [t for t in self.tables if only is None or t in only]
        if not checked:
            return
        described = describe_tables(conn, checked, self.options)
        for table_id in checked:
            recorded, now = self.tables[table_id], described[table_id]
            if decoding_layout(now) != decoding_layout(recorded) or \
                    tuple(k.lower() for k in now.primary_keys) != tuple(k.lower() for k in recorded.primary_keys):
                when = "was read from" if self.incremental else "started at"
                raise SourceError(
                    f"the schema of MySQL table {table_id} changed while its snapshot {when} {self._offset} "
                    f"(a DDL statement ran at the same moment): described as ({_columns(recorded)}), now "
                    f"({_columns(now)}). Nothing of this snapshot is kept; run again")

    def close(self) -> None:
        reading, self._reading = self._reading, None
        if reading is not None:
            # a read still running (its caller stopped early) reads no further: the connection goes anyway
            reading.stop(abort=lambda: abort_connection(self._conn))
        conn, self._conn = self._conn, None
        self._closed = True
        if conn is not None:
            try:
                conn.close()  # ends (rolls back) the read-only transaction
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass

    def __enter__(self) -> "InitialLoadReader":
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def offset(self) -> BinlogOffset:
        """The exact binlog position of the snapshot (opens the snapshot if needed)."""
        self.open()
        assert self._offset is not None
        return self._offset

    # -------------------------------------------------------------------------------------------- reading

    def read(self, table_id: TableId) -> Iterator[ChangeBatch]:
        """All rows of one table as +I change batches of at most ``snapshot_batch_rows`` rows, op_ts 0."""
        table = self.tables.get(table_id)
        if table is None:
            raise SourceError(f"table {table_id} is not part of this snapshot")
        self.open()
        return self._ahead(self._read(table))

    def _read(self, table: SourceTable) -> Iterator[ChangeBatch]:
        columns = ", ".join(quote_identifier(c.name) for c in table.columns)
        sql = (f"SELECT {columns} FROM {quote_identifier(table.table_id.database)}."
               f"{quote_identifier(table.table_id.table)}")
        self._claim(table)
        try:
            yield from self._select(table, sql, None)
        finally:
            self._active = None

    def _claim(self, table: SourceTable) -> None:
        if self._active is not None:
            raise SourceError(
                f"snapshot of {self._active} is still being read; finish it before reading {table.table_id}"
            )
        self._active = table.table_id

    def _failure(self, table: SourceTable, exc: pymysql.MySQLError) -> SourceError:
        if is_connection_lost(exc):
            return SourceConnectionLost(f"snapshot of {table.table_id}: connection to {self.options.address} lost: "
                                        f"{driver_reason(exc)}")
        return SourceError(f"snapshot of {table.table_id} failed: {driver_reason(exc)}")

    def _select(self, table: SourceTable, sql: str, args: list | None, key_index: int | None = None):
        """The rows of one SELECT as +I change batches, streamed from the server (``args`` None: ``sql`` is
        not a format string). The rows go from the wire to Arrow column by column (lakecdc.source.wire and
        text_columns), not through a Python object per value. Returns (rows, the driver value of column
        ``key_index`` in the last row, or None)."""
        schema = table.change_schema()
        batch_rows = self.options.snapshot_batch_rows
        cur = self._conn.cursor()  # SSCursor: rows stream from the server
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
                        mid_chunk_hook(self._conn.thread_id())
                    yield ChangeBatch(table, build_columns(schema, decoders, raw, INSERT, 0))
            finally:
                batches.close()  # reads the rest of an unfinished result: the connection runs the next query
        finally:
            try:
                cur.close()
            except Exception:  # noqa: BLE001 - a broken connection (PyMySQL may fail with AttributeError then):
                pass  # the error that broke it is already being raised

    def read_chunks(self, table_id: TableId, key: ChunkKey | None, progress: ChunkProgress, max_rows: int,
                    chunk_size: int | None = None, *, readers: int = 1) -> Iterator[ChangeBatch]:
        """The rows after ``progress``, chunk by chunk, until at least ``max_rows`` rows were read or the table
        is exhausted; afterwards ``self.progress`` is where the next read continues (``done`` at the end). A table
        without chunk key (``key`` None) is read whole. Incremental with ``readers`` > 1: the chunks' ranges are
        planned first, then read by that many readers at once, each on its own connection (:meth:`_parallel`);
        the batches still come in key order."""
        table = self.tables.get(table_id)
        if table is None:
            raise SourceError(f"table {table_id} is not part of this snapshot")
        self.open()
        self.tables_read.add(table_id)
        size = chunk_size or self.options.chunk_size
        if self.incremental and readers > 1 and key is not None and not progress.done and \
                (progress.nulls_done or progress.has_after or not key.column.nullable):
            chunks = self._parallel(table, key, progress, max_rows, size, readers)
        else:
            chunks = self._read_chunks(table, key, progress, max_rows, size)
        return self._ahead(coalesce(chunks, self.options.snapshot_batch_rows))

    def _ahead(self, batches: Iterator[ChangeBatch]) -> Iterator[ChangeBatch]:
        """``batches`` read one batch ahead in a background thread (lakecdc.source.prefetch): the next batch
        comes from MySQL while the caller transforms and writes this one."""
        if self._reading is not None:
            self._reading.stop()
        self._reading = Prefetch(batches, depth=1, name="lakecdc-snapshot-read")
        return self._reading

    def _low(self) -> tuple[BinlogOffset, int] | None:
        """Incremental: (low watermark, rows read so far) right before a chunk's SELECT; else None."""
        if not self.incremental:
            return None
        return self._head_offset(), self.rows_read

    def _high(self, table: SourceTable, started: tuple[BinlogOffset, int] | None, lower: ChunkProgress,
              upper: ChunkProgress) -> None:
        """Incremental: record the chunk just read, with its high watermark."""
        if started is None:
            return
        low, rows_before = started
        high = self._head_offset()
        self.windows.append(ChunkWindow(table.table_id, lower, upper, self.rows_read - rows_before, low, high))

    def _read_chunks(self, table: SourceTable, key: ChunkKey | None, progress: ChunkProgress, max_rows: int,
                     chunk_size: int) -> Iterator[ChangeBatch]:
        self.progress = progress
        if progress.done:
            return
        if key is None:
            started = self._low()
            yield from self._read(table)
            self.progress = ChunkProgress(done=True)
            self._high(table, started, progress, self.progress)
            return
        self._claim(table)
        try:
            start_rows = self.rows_read
            if key.column.nullable and not progress.nulls_done and not progress.has_after:
                started = self._low()
                sql, args = chunk_query(table, key, progress, None, nulls=True)
                yield from self._select(table, sql, args)
                upper = ChunkProgress(column=key.name, nulls_done=True)
                self._high(table, started, progress, upper)
                progress = self.progress = upper
            while self.rows_read - start_rows < max_rows:
                empty_rest = None
                if key.unique:
                    started = self._low()
                    found, value = yield from self._limited_chunk(table, key, progress, chunk_size)
                else:
                    (found, value), started, empty_rest = yield from self._bounded_chunk(table, key, progress,
                                                                                          chunk_size)
                self.chunks_read += 1
                progress = self.progress = self._chunk_done(table, key, progress, found, value, started, empty_rest)
                if progress.done:
                    break
            if not progress.done:
                started = self._low()
                if not self._rows_after(table, key, progress):
                    # the budget ended with the last row: the rest of the key range is an empty chunk
                    upper = ChunkProgress(column=key.name, done=True)
                    self._high(table, started, progress, upper)
                    self.progress = upper
        finally:
            self._active = None

    def _bounded_chunk(self, table: SourceTable, key: ChunkKey, progress: ChunkProgress, chunk_size: int):
        """One chunk of a non-unique key: its upper bound first (the chunk_size-th key value), then its rows
        (every row of the bound's value); returns ((found, upper bound) as next_upper_bound, the incremental window
        opened right before the SELECT)."""
        with self._conn.cursor(pymysql.cursors.Cursor) as cur:
            try:
                upper = next_upper_bound(cur, table, key, progress, chunk_size)
            except pymysql.MySQLError as exc:
                raise self._failure(table, exc) from exc
        return (yield from self._range_chunk(table, key, progress, upper))

    def _chunk_done(self, table: SourceTable, key: ChunkKey, lower: ChunkProgress, found: bool, value: Any,
                    started: tuple[BinlogOffset, int] | None, empty_rest: ChunkWindow | None) -> ChunkProgress:
        """Record a chunk just read (incremental: its window, then the empty rest's); returns the progress after
        it."""
        if found:
            upper = ChunkProgress(column=key.name, nulls_done=True, after=value, has_after=True)
        else:
            upper = ChunkProgress(column=key.name, done=True)
        self._high(table, started, lower, upper)
        if empty_rest is not None:
            self.windows.append(empty_rest)
            return empty_rest.upper
        return upper

    def _range_chunk(self, table: SourceTable, key: ChunkKey, progress: ChunkProgress, upper: tuple[bool, Any]):
        """The chunk of the keys after ``progress`` up to ``upper`` (to the end when not found); returns as
        _bounded_chunk, plus the window of an empty last chunk to record after this one (or None)."""
        empty_rest = None
        with self._conn.cursor(pymysql.cursors.Cursor) as cur:
            try:
                if self.incremental and not upper[0] and not table.primary_keys:
                    # The last chunk of a table without primary key ends at the largest key now, not at the end of
                    # the key range, and its window opens after that: rows appended at growing keys while it is
                    # read fall outside it (lakecdc cannot tell which of those an append table's SELECT saw). The
                    # rest of the range is an empty chunk as of the MAX statement, whose window ends right after it:
                    # the rows appended there since are changes.
                    before = self._low()
                    sql, args = max_key_query(table, key, progress)
                    cur.execute(sql, args)
                    row = cur.fetchone()
                    if row is None or row[0] is None:
                        return upper, before, None  # no row after `progress` as this statement saw it
                    upper = (True, row[0])
                    assert before is not None
                    rest = ChunkProgress(column=key.name, nulls_done=True, after=upper[1], has_after=True)
                    empty_rest = ChunkWindow(table.table_id, rest, ChunkProgress(column=key.name, done=True), 0,
                                             before[0], self._head_offset())
            except pymysql.MySQLError as exc:
                raise self._failure(table, exc) from exc
        started = self._low()
        sql, args = chunk_query(table, key, progress, upper)
        yield from self._select(table, sql, args)
        return upper, started, empty_rest

    def _limited_chunk(self, table: SourceTable, key: ChunkKey, progress: ChunkProgress, chunk_size: int):
        """One chunk of a unique key in one statement: the chunk_size rows after ``progress``; the same chunk and
        the same (found, upper bound) as _bounded_chunk (found: chunk_size rows were read; then the bound is the
        last row's key as the driver reads it)."""
        sql, args = limited_chunk_query(table, key, progress, chunk_size)
        rows, last_key = yield from self._select(table, sql, args, key_index=table.column_names.index(key.name))
        return (True, last_key) if rows == chunk_size else (False, None)

    def _parallel(self, table: SourceTable, key: ChunkKey, progress: ChunkProgress, max_rows: int, chunk_size: int,
                  readers: int) -> Iterator[ChangeBatch]:
        """Incremental, several readers: plan the ranges of about ``max_rows`` rows on this connection (the
        ``chunk_size``-th key after each bound, as _bounded_chunk finds it; the last range runs to the end of the
        table when fewer rows remain), then read them with ``readers`` threads, each with its own connection and
        each chunk between its own two heads. Windows and batches are recorded in key order."""
        ranges: list[tuple[ChunkProgress, tuple[bool, Any]]] = []
        lower = progress
        with self._conn.cursor(pymysql.cursors.Cursor) as cur:
            try:
                while len(ranges) * chunk_size < max_rows:
                    upper = next_upper_bound(cur, table, key, lower, chunk_size)
                    ranges.append((lower, upper))
                    if not upper[0]:
                        break
                    lower = ChunkProgress(column=key.name, nulls_done=True, after=upper[1], has_after=True)
                else:
                    if not next_upper_bound(cur, table, key, lower, 1)[0]:
                        ranges.append((lower, (False, None)))  # nothing after the budget: the empty last chunk
            except pymysql.MySQLError as exc:
                raise self._failure(table, exc) from exc
        results: list[tuple[list[ChangeBatch], list[ChunkWindow], int] | None] = [None] * len(ranges)
        with ThreadPoolExecutor(max_workers=min(readers, len(ranges)),
                                thread_name_prefix="lakecdc-chunk-reader") as pool:
            workers: list[InitialLoadReader] = []
            lock = threading.Lock()
            local = threading.local()

            def read(index: int) -> None:
                reader = getattr(local, "reader", None)
                if reader is None:
                    reader = local.reader = InitialLoadReader(self.options, [table], incremental=True)
                    with lock:
                        workers.append(reader)
                    reader.open()
                lower, upper = ranges[index]
                batches, windows = reader.read_range(table, key, lower, upper)
                results[index] = (batches, windows, sum(b.num_rows for b in batches))

            try:
                for future in [pool.submit(read, i) for i in range(len(ranges))]:
                    future.result()
            finally:
                for reader in workers:
                    reader.close()
        for result in results:
            assert result is not None
            batches, windows, rows = result
            self.windows.extend(windows)
            self.rows_read += rows
            self.chunks_read += 1
            yield from batches
            self.progress = windows[-1].upper

    def read_range(self, table: SourceTable, key: ChunkKey, lower: ChunkProgress,
                   upper: tuple[bool, Any]) -> tuple[list[ChangeBatch], list[ChunkWindow]]:
        """Incremental: the chunk of the keys after ``lower`` up to ``upper`` (to the end when not found), read on
        this reader's connection between two heads; (its batches, its window(s))."""
        self.open()
        first = len(self.windows)
        batches: list[ChangeBatch] = []
        chunk = self._range_chunk(table, key, lower, upper)
        while True:
            try:
                batches.append(next(chunk))
            except StopIteration as end:
                (found, value), started, empty_rest = end.value
                break
        self._chunk_done(table, key, lower, found, value, started, empty_rest)
        return batches, self.windows[first:]

    def _rows_after(self, table: SourceTable, key: ChunkKey, progress: ChunkProgress) -> bool:
        with self._conn.cursor(pymysql.cursors.Cursor) as cur:
            try:
                return next_upper_bound(cur, table, key, progress, 1)[0]
            except pymysql.MySQLError as exc:
                raise self._failure(table, exc) from exc


def coalesce(batches: Iterator[ChangeBatch], max_rows: int) -> Iterator[ChangeBatch]:
    """Consecutive batches of one table joined into batches of up to ``max_rows`` rows: chunks (8096 rows by
    default) are smaller than a good write (the Paimon writer takes small batches at a measurably higher cost)."""
    pending: list[ChangeBatch] = []
    rows = 0
    for batch in batches:
        if pending and (rows + batch.num_rows > max_rows or batch.table is not pending[0].table):
            yield _joined(pending)
            pending, rows = [], 0
        pending.append(batch)
        rows += batch.num_rows
    if pending:
        yield _joined(pending)


def _joined(batches: list[ChangeBatch]) -> ChangeBatch:
    if len(batches) == 1:
        return batches[0]
    data = pa.concat_tables([b.data for b in batches]).combine_chunks()
    return ChangeBatch(batches[0].table, data)


def build_columns(schema: pa.Schema, decoders: list[TextColumn], raw: list[pa.Array], op: str,
                  op_ts: int) -> pa.Table:
    """A change batch from raw text-protocol columns (see lakecdc.source.wire), all rows with the same row kind
    and op_ts."""
    n = len(raw[0]) if raw else 0
    arrays = [decoder.to_array(values) for decoder, values in zip(decoders, raw)]
    arrays.append(pa.repeat(pa.scalar(op, pa.string()), n))
    arrays.append(pa.repeat(pa.scalar(op_ts, pa.int64()), n))
    return pa.Table.from_arrays(arrays, schema=schema)

