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

A table is read whole (``read``) or in chunks of its chunk key (``read_chunks``): lakecdc.source.splitter plans the
chunks, lakecdc.source.chunk_reader reads each one; all inside the same consistent transaction.

``incremental=True`` (Flink CDC's incremental snapshot, ``scan.incremental.snapshot.enabled``): no long transaction
and no lock. ``offset`` is the binlog head when the reader opened; every chunk is read on its own, in a window that
says which binlog changes its rows include (on MariaDB its exact position; on MySQL its low and high watermark),
recorded as a :class:`ChunkWindow` in ``windows``. The caller brings the chunks to one binlog position with the
binlog (lakecdc.runtime.incremental). With ``readers`` > 1 the chunks of a commit group are planned up front and read
by that many connections at once.

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
from typing import Any, Iterator

import pyarrow as pa
import pymysql

from lakecdc.errors import SourceConnectionLost, SourceError
from lakecdc.model import BinlogOffset, ChangeBatch, SourceTable, TableId
from lakecdc.source.chunk_reader import ChunkReader, ChunkWindow, read_one
from lakecdc.source.chunks import ChunkKey, ChunkProgress
from lakecdc.source.columns import decoding_layout
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
from lakecdc.source.splitter import ChunkSplitter
from lakecdc.source.wire import abort_connection

log = logging.getLogger(__name__)


def _columns(table: SourceTable) -> str:
    return ", ".join(f"{c.name} {c.column_type}" for c in table.columns)


class InitialLoadReader:
    """One read of several tables: use as a context manager; ``offset`` is the snapshot's position (consistent) or
    the binlog head when it opened (incremental).

    Tables are read one after the other on one connection: consume (or close) the iterator of ``read`` or
    ``read_chunks`` before calling either again. ``extra``: per table, a condition every chunk statement adds (a
    re-snapshot of one partition reads only its rows).
    """

    def __init__(self, options: MySqlSourceOptions, tables: list[SourceTable], *, incremental: bool = False,
                 extra: dict[TableId, tuple[str, list]] | None = None):
        self.options = options
        self.incremental = incremental
        self.tables: dict[TableId, SourceTable] = {t.table_id: t for t in tables}
        self.extra = dict(extra or {})
        self._conn: Any = None  # the open pymysql connection (pymysql has no type hints)
        self._chunks: ChunkReader | None = None
        self._offset: BinlogOffset | None = None
        self._exact = False  # incremental on MariaDB: each chunk in a consistent snapshot of its own
        self._active: TableId | None = None
        self._closed = False
        self.chunks_read = 0
        self.progress: ChunkProgress | None = None  # after read_chunks: where the next read continues
        self.tables_read: set[TableId] = set()  # the tables read_chunks was called for
        self._parallel_windows: list[ChunkWindow] = []
        self._parallel_rows = 0
        self._reading: Prefetch | None = None  # the read running ahead in its thread

    @property
    def windows(self) -> list[ChunkWindow]:
        """Incremental: every chunk read, in reading order (parallel readers' in key order)."""
        own = self._chunks.windows if self._chunks is not None else []
        return own + self._parallel_windows if self._parallel_windows else own

    @property
    def rows_read(self) -> int:
        return (self._chunks.rows_read if self._chunks is not None else 0) + self._parallel_rows

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
        self._chunks = ChunkReader(conn, self.options, incremental=self.incremental, exact=self._exact)
        log.info("%s snapshot of %d table(s) %s %s (gtid %s)%s",
                 "incremental" if self.incremental else "consistent", len(self.tables),
                 "from" if self.incremental else "at", self._offset, self._offset.gtid or "-",
                 " (each chunk at its exact position)" if self._exact else "")
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
            mariadb = server_flavor(conn) == "mariadb"
            if self.incremental:
                # no long transaction, no lock: each chunk is read on its own (lakecdc.source.chunk_reader), on
                # MariaDB in a consistent snapshot of its own whose binlog position is exact
                self._exact = mariadb
                return head_offset(conn, self.options)
            if mariadb:
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
        assert self._chunks is not None
        head = self._chunks.head(gtid=True)
        if self.incremental:
            # the tables whose chunks were read: the others (of a commit group of several tables) were not read
            self._check_schemas(self._conn, self.tables_read)
        return head

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

    def _table(self, table_id: TableId) -> SourceTable:
        table = self.tables.get(table_id)
        if table is None:
            raise SourceError(f"table {table_id} is not part of this snapshot")
        self.open()
        return table

    def _splitter(self, table: SourceTable, key: ChunkKey | None, chunk_size: int | None = None) -> ChunkSplitter:
        assert self._chunks is not None
        return ChunkSplitter(table, key, chunk_size or self.options.chunk_size, self._chunks.fetch_one,
                             self.extra.get(table.table_id))

    def read(self, table_id: TableId) -> Iterator[ChangeBatch]:
        """All rows of one table as +I change batches of at most ``snapshot_batch_rows`` rows, op_ts 0."""
        table = self._table(table_id)
        return self._ahead(self._read_whole(table))

    def _read_whole(self, table: SourceTable) -> Iterator[ChangeBatch]:
        assert self._chunks is not None
        splitter = self._splitter(table, None)
        self._claim(table)
        try:
            yield from self._chunks.read(splitter, splitter.next_chunk(ChunkProgress()))
        finally:
            self._active = None

    def _claim(self, table: SourceTable) -> None:
        if self._active is not None:
            raise SourceError(
                f"snapshot of {self._active} is still being read; finish it before reading {table.table_id}"
            )
        self._active = table.table_id

    def read_chunks(self, table_id: TableId, key: ChunkKey | None, progress: ChunkProgress, max_rows: int,
                    chunk_size: int | None = None, *, readers: int = 1) -> Iterator[ChangeBatch]:
        """The rows after ``progress``, chunk by chunk, until at least ``max_rows`` rows were read or the table
        is exhausted; afterwards ``self.progress`` is where the next read continues (``done`` at the end). A table
        without chunk key (``key`` None) is read whole. Incremental with ``readers`` > 1: the chunks' ranges are
        planned first, then read by that many readers at once, each on its own connection (:meth:`_parallel`);
        the batches still come in key order."""
        table = self._table(table_id)
        self.tables_read.add(table_id)
        splitter = self._splitter(table, key, chunk_size)
        if self.incremental and readers > 1 and key is not None and not progress.done and \
                splitter.null_chunk(progress) is None:
            chunks = self._parallel(splitter, progress, max_rows, readers)
        else:
            chunks = self._serial(splitter, progress, max_rows)
        return self._ahead(coalesce(chunks, self.options.snapshot_batch_rows))

    def _ahead(self, batches: Iterator[ChangeBatch]) -> Iterator[ChangeBatch]:
        """``batches`` read one batch ahead in a background thread (lakecdc.source.prefetch): the next batch
        comes from MySQL while the caller transforms and writes this one."""
        if self._reading is not None:
            self._reading.stop()
        self._reading = Prefetch(batches, depth=1, name="lakecdc-snapshot-read")
        return self._reading

    def _serial(self, splitter: ChunkSplitter, progress: ChunkProgress, max_rows: int) -> Iterator[ChangeBatch]:
        """Chunk after chunk on this reader's connection, each chunk's bounds found right before it is read."""
        chunks = self._chunks
        assert chunks is not None
        self.progress = progress
        if progress.done:
            return
        self._claim(splitter.table)
        try:
            start_rows = chunks.rows_read
            nulls = splitter.null_chunk(progress)
            if nulls is not None:
                progress = self.progress = yield from chunks.read(splitter, nulls)
            while not progress.done and chunks.rows_read - start_rows < max_rows:
                progress = self.progress = yield from chunks.read(splitter, splitter.next_chunk(progress))
                self.chunks_read += 1
            if not progress.done and splitter.key is not None and chunks.read_empty_rest(splitter, progress):
                # the budget ended with the last row: the rest of the key range is an empty chunk
                self.progress = ChunkProgress(column=splitter.key.name, done=True)
        finally:
            self._active = None

    def _parallel(self, splitter: ChunkSplitter, progress: ChunkProgress, max_rows: int,
                  readers: int) -> Iterator[ChangeBatch]:
        """Incremental, several readers: plan the ranges of about ``max_rows`` rows on this connection
        (lakecdc.source.splitter), then read them with ``readers`` threads, each with its own connection and each
        chunk in its own window. Windows and batches are recorded in key order."""
        ranges = splitter.plan(progress, max_rows)
        results: list[tuple[list[ChangeBatch], list[ChunkWindow]] | None] = [None] * len(ranges)
        with ThreadPoolExecutor(max_workers=min(readers, len(ranges)),
                                thread_name_prefix="lakecdc-chunk-reader") as pool:
            connections: list = []
            lock = threading.Lock()
            local = threading.local()

            def read(index: int) -> None:
                reader = getattr(local, "reader", None)
                if reader is None:
                    conn = connect(self.options, streaming=True, autocommit=True)
                    with lock:
                        connections.append(conn)
                    reader = local.reader = ChunkReader(conn, self.options, incremental=True, exact=self._exact)
                    reader.execute("SET SESSION net_write_timeout = 3600")
                worker = ChunkSplitter(splitter.table, splitter.key, splitter.chunk_size, reader.fetch_one,
                                       splitter.extra)
                results[index] = read_one(reader, worker, ranges[index])

            try:
                for future in [pool.submit(read, i) for i in range(len(ranges))]:
                    future.result()
            finally:
                for conn in connections:
                    try:
                        conn.close()
                    except Exception:  # noqa: BLE001 - closing a broken connection
                        pass
        for result in results:
            assert result is not None
            batches, windows = result
            self._parallel_windows.extend(windows)
            self._parallel_rows += sum(b.num_rows for b in batches)
            self.chunks_read += 1
            yield from batches
            self.progress = windows[-1].upper


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
