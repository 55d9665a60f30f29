"""Writing change rows into one Paimon table with the native (Rust) writer and committing them as one snapshot.

Row kinds follow Flink CDC's Paimon sink (flink-cdc-semantics.md §6.4): a primary-key table receives every row with
its row kind (``+I``, ``-U``, ``+U``, ``-D``) and Paimon's merge engine folds them in input order; an append table
(no primary key) only receives ``+I`` and ``+U`` rows, both as inserts, and drops ``-U`` and ``-D``.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.errors import SinkError
from lakecdc.model import DELETE, INSERT, OP_COLUMN, OP_TS_COLUMN, ROW_KINDS, UPDATE_AFTER, UPDATE_BEFORE, TableId
from lakecdc.sink import native

# Paimon RowKind byte values, in the order of model.ROW_KINDS.
assert ROW_KINDS == (INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE)
_ROW_KIND_VALUES = pa.array(ROW_KINDS, pa.string())


class TableWriter:
    """Collects rows for one table and commits them as exactly one snapshot. Use once: write ... commit (or abort).

    ``rows_written`` counts the rows handed to Paimon (for append tables, after dropping ``-U``/``-D``)."""

    def __init__(self, table_id: TableId, table, commit_user: str, on_close=None):
        from pypaimon.schema.data_types import PyarrowFieldParser

        self.table_id = table_id
        self.rows_written = 0
        self._table = table
        self._commit_user = commit_user
        self._on_close = on_close
        self._state = "open"
        self._is_pk = bool(table.primary_keys)
        stored = PyarrowFieldParser.from_paimon_schema(table.table_schema.fields)
        self._schema = pa.schema([pa.field(f.name, f.type, nullable=f.nullable) for f in stored])
        try:
            self._builder, self._write = native.new_native_write(table, commit_user, table_id)
        except BaseException:
            self._close()
            raise

    @property
    def is_primary_key_table(self) -> bool:
        return self._is_pk

    @property
    def commit_user(self) -> str:
        return self._commit_user

    # ------------------------------------------------------------------ write
    def write(self, data: pa.Table | pa.RecordBatch) -> None:
        self._check_open("write")
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        if not isinstance(data, pa.Table):
            raise SinkError(f"table {self.table_id}: write() expects a pyarrow Table, got {type(data).__name__}")
        kinds = self._row_kinds(data)
        columns = self._table_columns(data)
        if not self._is_pk:
            keep = pc.or_(pc.equal(kinds, 0), pc.equal(kinds, 2))  # +I and +U (as +I); -U and -D are dropped
            columns = columns.filter(keep)
        if columns.num_rows == 0:
            return
        try:
            if self._is_pk:
                columns = columns.append_column(
                    pa.field(native.VALUE_KIND_COLUMN, native.VALUE_KIND_TYPE, nullable=False),
                    pc.cast(kinds, native.VALUE_KIND_TYPE))
                for batch in columns.combine_chunks().to_batches():
                    native.write_with_row_kinds(self._write, batch, self.table_id)
            else:
                native.assert_native(self._write, self.table_id)
                self._write.write_arrow(columns)
        except SinkError:
            self._fail()
            raise
        except Exception as error:
            self._fail()
            raise SinkError(f"table {self.table_id}: the Paimon writer refused the rows: {error}") from error
        self.rows_written += columns.num_rows

    def _row_kinds(self, data: pa.Table) -> pa.Array:
        if OP_COLUMN not in data.column_names:
            raise SinkError(f"table {self.table_id}: column {OP_COLUMN!r} (row kind) is missing")
        op = data.column(OP_COLUMN)
        if not (pa.types.is_string(op.type) or pa.types.is_large_string(op.type)):
            raise SinkError(f"table {self.table_id}: column {OP_COLUMN!r} must be a string column, not {op.type}")
        op = op.combine_chunks() if op.num_chunks != 1 else op.chunk(0)
        kinds = pc.index_in(pc.cast(op, pa.string()), value_set=_ROW_KIND_VALUES)
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
        self._state = "committing"
        table_commit = None
        try:
            native.assert_native(self._write, self.table_id)
            messages = self._write.prepare_commit()
            before = self._table.snapshot_manager().get_latest_snapshot()
            table_commit = self._builder.new_commit()
            # Passing snapshot_properties makes pypaimon publish through its Python committer (the only one that
            # stores properties); the data files come from the Rust writer either way.
            table_commit.commit(messages, snapshot_properties=properties)
            after = self._table.snapshot_manager().get_latest_snapshot()
        except SinkError:
            self._state = "failed"
            raise
        except Exception as error:
            # The outcome is unknown (the snapshot may have been published): keep the files, report.
            self._state = "failed"
            raise SinkError(f"table {self.table_id}: commit failed: {error}") from error
        finally:
            if table_commit is not None:
                try:
                    table_commit.close()
                except Exception:  # noqa: BLE001
                    pass
            self._close()
        expected = (before.id if before else 0) + 1
        if after is None or after.id != expected or after.commit_user != self._commit_user \
                or any((after.properties or {}).get(k) != v for k, v in properties.items()):
            self._state = "failed"
            raise SinkError(
                f"table {self.table_id}: commit did not produce the expected snapshot {expected} of commit user "
                f"{self._commit_user} (latest is {after.id if after else None} by "
                f"{after.commit_user if after else None}); another writer may be writing this table")
        self._state = "committed"
        return after.id

    def abort(self) -> None:
        """Drop the uncommitted rows (the Rust writer deletes the files it still owns). Idempotent."""
        if self._state in ("open", "failed") and self._write is not None:
            try:
                self._write.abort()
            except Exception:  # noqa: BLE001 - nothing was committed; orphan files are harmless
                pass
        if self._state == "open":
            self._state = "aborted"
        self._close()

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
        write, self._write = getattr(self, "_write", None), None
        if write is not None:
            try:
                write.close()
            except Exception:  # noqa: BLE001
                pass
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()
