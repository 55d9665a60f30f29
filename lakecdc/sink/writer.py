"""Writing change rows into one Paimon table with the native (Rust) writer and committing them as one snapshot.

Row kinds follow Flink CDC's Paimon sink (PaimonWriterHelper.convertEventToFullGenericRows): a primary-key table
receives every row with its row kind (``+I``, ``-U``, ``+U``, ``-D``) and Paimon's merge engine folds them in input
order; an append table (no primary key) only receives ``+I`` and ``+U`` rows, both as inserts, and drops ``-U`` and
``-D``.

Before a batch reaches Paimon it is checked against the table's merge engine (lakecdc.sink.options): a retract row
the engine cannot take is refused, because pypaimon-rust would commit a lone one and every later read would fail.

Every Rust writer lives on a writer thread, not the caller's (it is bound to the thread that created it; the
process keeps one such thread per shard index), and writes while the caller prepares the next batch: ``write``
hands a batch over and returns, waiting only for the batch before it (one batch in flight per writer), so decoding
or reading the next rows overlaps the Rust writer's sorting and encoding, which releases the GIL. A write that
fails is reported by the next ``write``, ``flush`` or ``commit``, before anything is committed.

The Rust writer is opened from the table's stored schema (lakecdc.sink.native.RustWriteTarget); pypaimon's table,
whose import holds the GIL for about 0.4 s, is loaded by ``commit`` while the Rust writers prepare their files
(``prepare_commit`` encodes every row they hold and releases the GIL), where the caller would otherwise wait idle.

Parallelism (``parallelism > 1``) mirrors Flink's sink parallelism: N Rust writers, each taking the rows of a
disjoint set of primary keys (a hash of the key), all committed as one snapshot. Per-key order is kept because a key
always goes to the same writer. Dynamic-bucket primary-key tables (``bucket = -1``) are refused: their bucket index
is kept per writer, so two writers would assign buckets independently (Paimon allows one writer for them too).
"""

from __future__ import annotations

import functools
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc
from pypaimon.schema.data_types import PyarrowFieldParser

from lakecdc.errors import SinkError
from lakecdc.model import DELETE, INSERT, OP_COLUMN, OP_TS_COLUMN, ROW_KINDS, UPDATE_AFTER, UPDATE_BEFORE, TableId
from lakecdc.sink import native
from lakecdc.sink.native import RustWriteTarget
from lakecdc.sink.options import unsupported_row_kinds
from lakecdc.sink.written import PendingRows

# Paimon RowKind byte values, in the order of model.ROW_KINDS.
assert ROW_KINDS == (INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE)
_KIND_CODE = {kind: code for code, kind in enumerate(ROW_KINDS)}


@functools.cache
def _row_kind_values() -> pa.Array:
    # built at first use, not at import: pyarrow imports pandas at its first pa.array of a Python list (its pandas
    # shim), a third of a second that a run with nothing to write does not need (docs/benchmarks.md)
    return pa.array(ROW_KINDS, pa.string())


_writer_threads: list[ThreadPoolExecutor] = []
_writer_threads_lock = threading.Lock()


def _writer_thread(index: int) -> ThreadPoolExecutor:
    """The ``index``-th of the process's writer threads, started at first use and kept: every writer of shard
    ``index`` runs there. Long-lived threads, because glibc gives each new thread its own malloc arena and the
    memory a finished writer freed in its arena is not reused by the next one's thread (a thread per writer raised
    the peak RSS of a 5,000,000-row snapshot of five commit groups from 563 to 651 MiB)."""
    with _writer_threads_lock:
        while len(_writer_threads) <= index:
            _writer_threads.append(ThreadPoolExecutor(1, thread_name_prefix=f"paimon-writer-{len(_writer_threads)}"))
        return _writer_threads[index]


def _forget_writer_threads() -> None:
    """In a forked child: the parent's writer threads do not exist there (a new one starts at first use)."""
    global _writer_threads_lock
    _writer_threads.clear()
    _writer_threads_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_writer_threads)


_TIME_UNITS = ("s", "ms", "us", "ns")
_FLOOR_UNIT = {"s": "second", "ms": "millisecond", "us": "microsecond"}


def _to_precision(col, target: pa.DataType):
    """Timestamps finer than their column's precision, floored to it: a transform declares Calcite's TIMESTAMP(3)
    over values that keep their microseconds (as Flink CDC's TimestampData does), and pypaimon stores a
    TIMESTAMP(p) in the unit of p (Paimon's Java writer drops the digits below milliseconds too)."""
    if pa.types.is_timestamp(target) and pa.types.is_timestamp(col.type) and \
            _TIME_UNITS.index(col.type.unit) > _TIME_UNITS.index(target.unit):
        return pc.floor_temporal(col, unit=_FLOOR_UNIT[target.unit])
    return col


class _Shard:
    """One native writer and the single thread it lives on (``executor``, shared with the process's other
    writers of the same shard index)."""

    def __init__(self, executor: ThreadPoolExecutor):
        self.executor = executor
        self.write: Any = None  # pypaimon-rust's batch write, once opened

    def submit(self, fn: Callable, *args) -> Future:
        return self.executor.submit(fn, *args)


def _wait_all(futures: list[Future]) -> list:
    """Results of all futures (every one is waited for); the first failure is raised afterwards."""
    results, first_error = [], None
    for future in futures:
        try:
            results.append(future.result())
        except BaseException as error:  # noqa: BLE001
            first_error = first_error or error
    if first_error is not None:
        raise first_error
    return results


class TableWriter:
    """Collects rows for one table and commits them as exactly one snapshot. Use once: write ... commit (or abort).

    ``overwrite``: None appends; a dict of partition values (``{}`` = the whole table) makes the commit an
    OVERWRITE of that static partition (for partitioned tables pypaimon's default ``dynamic-partition-overwrite``
    replaces only the partitions written). ``ignore_delete`` drops ``-U``/``-D`` rows before they reach Paimon
    (Paimon's write-time ``ignore-delete``). ``parallelism``: see the module docstring.

    ``rows_written`` counts the rows handed to Paimon (for append tables, after dropping ``-U``/``-D``)."""

    def __init__(self, table_id: TableId, target: RustWriteTarget, commit_user: str, on_close=None, *,
                 overwrite: dict | None = None, parallelism: int = 1, ignore_delete: bool = False,
                 base_snapshot_id: int | None = None, on_commit: Callable[[int], None] | None = None,
                 record: PendingRows | None = None):
        self.table_id = table_id
        self.rows_written = 0
        self._target = target
        self._commit_user = commit_user
        self._on_close = on_close
        self._on_commit = on_commit
        self._record = record  # what this write hands to Paimon, kept to check the commit (lakecdc.sink.written)
        # The snapshot this commit must follow (the one the writer's checkpoint came from); None: the latest at
        # commit time (lakecdc.sink.native.guard_snapshot_commit).
        self._base_snapshot_id = base_snapshot_id
        self._state = "open"
        self._shards: list[_Shard] = []
        self._in_flight: list[Future] = []  # the last write's parts, still being written (one batch per shard)
        self._prepared: list = []  # the Rust writers' commit messages of the files flushed so far (flush())
        self._buckets_since_flush: set = set()  # the explicit buckets written since the last flush (None: none)
        self._is_pk = bool(target.primary_keys)
        self._overwrite = None if overwrite is None else dict(overwrite)
        self._ignore_delete = bool(ignore_delete)
        stored = PyarrowFieldParser.from_paimon_schema(target.table_schema.fields)
        self._schema = pa.schema([pa.field(f.name, f.type, nullable=f.nullable) for f in stored])
        options = target.options
        self._options = options
        value_columns = [n for n in self._schema.names if n not in target.primary_keys]
        self._refused_kinds = unsupported_row_kinds(options, value_columns) if self._is_pk else {}
        try:
            self._parallelism = self._check_parallelism(parallelism, options)
            problem = target.problem()
            if problem is not None:
                raise SinkError(native.not_native_message(table_id, problem))
            self._shards = [_Shard(_writer_thread(i)) for i in range(self._parallelism)]
            _wait_all([shard.submit(self._open_shard, shard) for shard in self._shards])
        except BaseException:
            self._close()
            raise

    def _check_parallelism(self, parallelism: int, options: dict[str, str]) -> int:
        if isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1:
            raise SinkError(f"table {self.table_id}: parallelism must be an integer >= 1, got {parallelism!r}")
        if parallelism > 1 and self._is_pk and int(options.get("bucket", "-1")) < 1:
            raise SinkError(
                f"table {self.table_id}: parallelism {parallelism} needs a fixed bucket count: this primary-key "
                f"table uses dynamic buckets (bucket = -1), whose bucket index allows a single writer. Create the "
                f"table with bucket = N, or write with parallelism 1")
        return parallelism

    def _open_shard(self, shard: _Shard) -> None:
        shard.write = self._target.open_batch_write(self._commit_user, self._overwrite)

    @property
    def is_primary_key_table(self) -> bool:
        return self._is_pk

    @property
    def commit_user(self) -> str:
        return self._commit_user

    @property
    def parallelism(self) -> int:
        return self._parallelism

    # ------------------------------------------------------------------ write
    def write(self, data: pa.Table | pa.RecordBatch, bucket: int | None = None) -> None:
        """Hand rows to Paimon. ``bucket``: the bucket all of them go to, instead of the one Paimon assigns (a
        compaction rewriting the live rows of one bucket of a dynamic-bucket table; parallelism 1 only)."""
        self._check_open("write")
        if bucket is not None and self._parallelism != 1:
            raise SinkError(f"table {self.table_id}: a write to an explicit bucket needs parallelism 1")
        self._buckets_since_flush.add(bucket)
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        if not isinstance(data, pa.Table):
            raise SinkError(f"table {self.table_id}: write() expects a pyarrow Table, got {type(data).__name__}")
        kinds = self._row_kinds(data)
        columns = self._table_columns(data)
        if self._ignore_delete or not self._is_pk:
            # +I and +U only: ignore-delete at write, or an append table (which takes +U as an insert)
            keep = pc.or_(pc.equal(kinds, _KIND_CODE[INSERT]), pc.equal(kinds, _KIND_CODE[UPDATE_AFTER]))
            columns, kinds = columns.filter(keep), kinds.filter(keep)
        if columns.num_rows == 0:
            return
        self._check_row_kinds(kinds)
        self._observe(columns, kinds)
        try:
            if self._is_pk:
                columns = columns.append_column(
                    pa.field(native.VALUE_KIND_COLUMN, native.VALUE_KIND_TYPE, nullable=False),
                    pc.cast(kinds, native.VALUE_KIND_TYPE))
            parts = self._split(columns)
            self._drain()  # the previous batch first: one batch in flight per writer bounds the memory
            self._in_flight = [shard.submit(self._write_part, shard, part, bucket)
                               for shard, part in zip(self._shards, parts) if part.num_rows]
        except SinkError:
            self._fail()
            raise
        except Exception as error:
            self._fail()
            raise SinkError(f"table {self.table_id}: the Paimon writer refused the rows: {error}") from error
        self.rows_written += columns.num_rows

    def _observe(self, columns: pa.Table, kinds: pa.Array) -> None:
        """Keep the rows for the commit's check (as Paimon gets them). Recording only observes: when it fails, the
        check says why it could not look, and the write goes on."""
        record = self._record
        if record is None or record.written.error is not None:
            return
        try:
            record.add(columns, kinds)
        except Exception as error:  # noqa: BLE001 - see the docstring
            record.written.error = f"keeping the rows written for the check failed: {error}"
            record.discard()

    def _drain(self) -> None:
        """Wait for the writes in flight; the first failure is raised."""
        in_flight, self._in_flight = self._in_flight, []
        _wait_all(in_flight)

    def _check_row_kinds(self, kinds: pa.Array) -> None:
        """Refuse retract rows the table's merge engine cannot take (see lakecdc.sink.options), before writing."""
        for kind, why in self._refused_kinds.items():
            found = pc.sum(pc.equal(kinds, _KIND_CODE[kind])).as_py() or 0
            if found:
                self._fail()
                raise SinkError(f"table {self.table_id}: {found} row(s) of kind {kind} cannot be written: {why}. "
                                f"Nothing of this write was committed")

    def _split(self, columns: pa.Table) -> list[pa.Table]:
        """One part per shard; rows of one primary key always land in the same part (hash of the key)."""
        n = len(self._shards)
        if n == 1:
            return [columns]
        if not self._is_pk:  # append table: any split keeps the result; contiguous slices are the cheapest
            size = -(-columns.num_rows // n)
            return [columns.slice(i * size, size) for i in range(n)]
        import polars as pl

        keys = pl.DataFrame(columns.select(self._target.primary_keys))
        shard = pa.array((keys.hash_rows(seed=0) % n).to_numpy())
        return [columns.filter(pc.equal(shard, i)) for i in range(n)]

    def _write_part(self, shard: _Shard, part: pa.Table, bucket: int | None) -> None:
        for batch in part.combine_chunks().to_batches():
            if self._is_pk:
                native.write_with_row_kinds(shard.write, batch, self.table_id, bucket)
            else:
                shard.write.write_arrow(batch, bucket)

    def _row_kinds(self, data: pa.Table) -> pa.Array:
        if OP_COLUMN not in data.column_names:
            raise SinkError(f"table {self.table_id}: column {OP_COLUMN!r} (row kind) is missing")
        op = data.column(OP_COLUMN)
        if not (pa.types.is_string(op.type) or pa.types.is_large_string(op.type)):
            raise SinkError(f"table {self.table_id}: column {OP_COLUMN!r} must be a string column, not {op.type}")
        op = op.combine_chunks() if op.num_chunks != 1 else op.chunk(0)
        kinds = pc.index_in(pc.cast(op, pa.string()), value_set=_row_kind_values())
        if kinds.null_count:
            bad = op.filter(pc.is_null(kinds))[0].as_py()
            raise SinkError(f"table {self.table_id}: column {OP_COLUMN!r} holds {bad!r}; expected one of "
                            f"{', '.join(ROW_KINDS)}")
        return kinds

    def _table_columns(self, data: pa.Table) -> pa.Table:
        extra = [n for n in data.column_names if n not in self._schema.names and n not in (OP_COLUMN, OP_TS_COLUMN)]
        if extra:
            raise SinkError(f"table {self.table_id}: column(s) {', '.join(map(repr, extra))} are not columns of "
                            f"the Paimon table (columns: {', '.join(self._schema.names)})")
        arrays = []
        for f in self._schema:
            if f.name not in data.column_names:
                raise SinkError(f"table {self.table_id}: column {f.name!r} is missing from the rows written")
            if data.column_names.count(f.name) > 1:
                raise SinkError(f"table {self.table_id}: column {f.name!r} appears more than once")
            col = data.column(f.name)
            if col.type != f.type:
                col = _to_precision(col, f.type)
                try:
                    # Paimon stores TIME as milliseconds of the day (Java and Flink CDC truncate finer values too)
                    col = pc.cast(col, f.type, safe=not pa.types.is_time(f.type))
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as error:
                    raise SinkError(f"table {self.table_id}, column {f.name!r}: cannot convert {col.type} to the "
                                    f"table's type {f.type}: {error}") from None
            if not f.nullable and col.null_count:
                raise SinkError(f"table {self.table_id}, column {f.name!r}: NULL in a NOT NULL column "
                                f"(primary-key columns are NOT NULL)")
            arrays.append(col)
        return pa.Table.from_arrays(arrays, schema=self._schema)

    def flush(self) -> None:
        """Write the rows held so far to data files now, to be committed with the rest by commit(): the Rust writer
        keeps every row until its prepare_commit, so a long write (a compaction's rewrite) flushes to bound its
        memory. Each shard's writer prepares once and is replaced by a fresh one. Only for writes whose flushed
        parts hold disjoint keys (a rewrite of live rows): the fresh writer numbers its rows from the table's
        latest snapshot again, so a key written before and after a flush would have no defined order. A
        dynamic-bucket primary-key table keeps a key index per bucket that one writer writes whole: there, every
        write since the previous flush must have named its bucket, and no bucket may be written again after a
        flush (the commit refuses two index files of one bucket)."""
        self._check_open("flush")
        if self._is_pk and int(self._options.get("bucket", "-1")) < 1 and None in self._buckets_since_flush:
            raise SinkError(f"table {self.table_id}: flush() of a dynamic-bucket table needs every write since the "
                            f"previous flush to name its bucket")
        self._buckets_since_flush = set()
        try:
            self._drain()
            self._prepared += [m for part in _wait_all([shard.submit(self._prepare_shard, shard)
                                                        for shard in self._shards]) for m in part]
            _wait_all([shard.submit(self._reopen_shard, shard) for shard in self._shards])
        except BaseException:
            self._fail()
            raise

    def _reopen_shard(self, shard: _Shard) -> None:
        self._close_shard(shard)
        self._open_shard(shard)

    # ----------------------------------------------------------------- commit
    def commit(self, properties: dict[str, str]) -> int:
        """Commit everything written as exactly one new snapshot carrying ``properties``; returns its id.
        Also commits when nothing was written (a checkpoint-only snapshot)."""
        self._check_open("commit")
        properties = dict(properties or {})
        for k, v in properties.items():
            if not isinstance(k, str) or not isinstance(v, str):
                self.abort()
                raise SinkError(f"table {self.table_id}: snapshot property {k!r}={v!r}: keys and values must be "
                                f"strings")
        try:
            self._drain()
        except SinkError:
            self._fail()
            raise
        except Exception as error:
            self._fail()
            raise SinkError(f"table {self.table_id}: the Paimon writer refused the rows: {error}; nothing was "
                            f"committed") from error
        self._state = "committing"
        table_commit = None
        try:
            table, messages = self._prepare_all()
            before = table.snapshot_manager().get_latest_snapshot()
            base = self._base_snapshot_id if self._base_snapshot_id is not None else (before.id if before else 0)
            native.guard_snapshot_commit(table, self.table_id, base)
            table_commit = native.new_write_builder(table, self._commit_user, self._overwrite).new_commit()
            # Passing snapshot_properties makes pypaimon publish through its Python committer (the only one that
            # stores properties); the data files come from the Rust writer either way.
            table_commit.commit(messages, snapshot_properties=properties)
            after = table.snapshot_manager().get_latest_snapshot()
        except SinkError:
            self._state = "failed"
            raise
        except Exception as error:
            self._state = "failed"
            conflict = native.commit_conflict(error)
            if conflict is not None:
                raise conflict from None
            # The outcome is unknown (the snapshot may have been published): keep the files, report.
            raise SinkError(f"table {self.table_id}: commit failed: {error}") from error
        finally:
            if table_commit is not None:
                try:
                    table_commit.close()
                except Exception:  # noqa: BLE001
                    pass
            self._close()
        expected = base + 1
        if after is None or after.id != expected or after.commit_user != self._commit_user \
                or any((after.properties or {}).get(k) != v for k, v in properties.items()):
            self._state = "failed"
            raise SinkError(
                f"table {self.table_id}: commit did not produce the expected snapshot {expected} of commit user "
                f"{self._commit_user} (latest is {after.id if after else None} by "
                f"{after.commit_user if after else None}); another writer may be writing this table")
        self._state = "committed"
        if self._on_commit is not None:
            self._on_commit(after.id)
        if self._record is not None:
            self._record.commit(after.id)
        return after.id

    def abort(self) -> None:
        """Drop the uncommitted rows (the Rust writers delete the files they still own). Idempotent."""
        try:
            self._drain()
        except BaseException:  # noqa: BLE001 - the rows are dropped anyway; the failure was or will be reported
            pass
        if self._state in ("open", "failed"):
            _wait_all([shard.submit(self._abort_shard, shard) for shard in self._shards])
        if self._state == "open":
            self._state = "aborted"
        if self._record is not None and self._state != "committed":
            self._record.discard()
        self._close()

    def _prepare_all(self) -> tuple[Any, list]:
        """pypaimon's table and the commit messages of every file written. The Rust writers prepare their files on
        their threads while this thread loads pypaimon's table (its import holds the GIL, their encoding does not):
        the load would otherwise wait for them, or they for it."""
        preparing = [shard.submit(self._prepare_shard, shard) for shard in self._shards]
        try:
            table = self._target.table()
        finally:
            prepared = _wait_all(preparing)
        return table, native.commit_messages(table, self._prepared + [m for part in prepared for m in part])

    @staticmethod
    def _prepare_shard(shard: _Shard) -> list:
        return shard.write.prepare_commit()

    @staticmethod
    def _abort_shard(shard: _Shard) -> None:
        # closing the Rust writer deletes the files it still owns (not the prepared ones: their commit may have been
        # published although it raised)
        TableWriter._close_shard(shard)

    @staticmethod
    def _close_shard(shard: _Shard) -> None:
        write, shard.write = shard.write, None
        if write is not None:
            try:
                write.close()
            except Exception:  # noqa: BLE001
                pass

    def __enter__(self) -> "TableWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._state != "committed":
            self.abort()

    # -------------------------------------------------------------- internals
    def _check_open(self, what: str) -> None:
        if self._state != "open":
            raise SinkError(f"table {self.table_id}: cannot {what}: the writer is {self._state}")

    def _fail(self) -> None:
        self._state = "failed"
        self.abort()

    def _close(self) -> None:
        shards, self._shards = self._shards, []
        try:
            _wait_all([shard.submit(self._close_shard, shard) for shard in shards])
        finally:
            on_close, self._on_close = self._on_close, None
            if on_close is not None:
                on_close()
