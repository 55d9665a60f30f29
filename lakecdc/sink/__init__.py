"""The Paimon sink: creates Paimon tables like Flink CDC's Paimon pipeline sink, writes change rows with
pypaimon's native (Rust) writer, commits them with the binlog checkpoint in the snapshot properties, and reads
tables back.

Storage is pypaimon 2.1.0 + pypaimon-rust 0.4.0 (see /work/shared/reference/paimon-python.md). The native
read/write/commit/plan paths are switched on as *dynamic* options (``table.copy``) every time a table is used, so
the tables' stored options are only the user's ``table.properties.*`` and transform ``table-options``.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import ContextManager, Iterator

import pyarrow as pa

from lakecdc.errors import SinkError
from lakecdc.model import TableId
from lakecdc.sink import native
from lakecdc.sink.catalog import create_catalog, identifier, local_warehouse_path, normalize_catalog_options
from lakecdc.sink.lock import TableLock, lock_path
from lakecdc.sink.reader import read_table as _read_table
from lakecdc.sink.reader import row_count as _row_count
from lakecdc.sink.tables import TableDescription, build_schema, describe_table
from lakecdc.sink.writer import TableWriter

__all__ = ["PaimonSink", "TableWriter", "TableDescription", "CHECKPOINT_KEY"]

# A snapshot written by lakecdc's runtime carries this property; maintenance snapshots may not.
CHECKPOINT_KEY = "lakecdc.binlog.file"

# Used only while writing: a commit without rows still creates a snapshot (the checkpoint advances).
_WRITE_OPTIONS = {**native.NATIVE_OPTIONS, "snapshot.ignore-empty-commit": "false"}


class PaimonSink:
    """One Paimon catalog (the sink block of a pipeline)."""

    def __init__(self, catalog_options: dict[str, str], table_properties: dict[str, str] | None = None,
                 commit_user_prefix: str = "admin"):
        native.check_library_versions()
        self.catalog_options = normalize_catalog_options(catalog_options)
        self.table_properties = {str(k): str(v) for k, v in (table_properties or {}).items()}
        # Flink CDC: prefix + random UUID, no separator, fixed for the life of the sink.
        self.commit_user = f"{commit_user_prefix}{uuid.uuid4()}"
        self.warehouse = self.catalog_options["warehouse"]
        self._warehouse_dir = local_warehouse_path(self.warehouse)
        self._catalog = create_catalog(self.catalog_options)
        self._locks: dict[TableId, TableLock] = {}

    # ----------------------------------------------------------------- tables
    def _load(self, table_id: TableId):
        """The pypaimon table as stored, or None when it (or its database) does not exist."""
        from pypaimon.catalog.catalog_exception import DatabaseNotExistException, TableNotExistException

        try:
            return self._catalog.get_table(identifier(table_id))
        except (TableNotExistException, DatabaseNotExistException):
            return None
        except Exception as error:
            raise SinkError(f"table {table_id}: cannot load it from {self.warehouse}: {error}") from error

    def _require(self, table_id: TableId, options: dict[str, str]):
        table = self._load(table_id)
        if table is None:
            raise SinkError(f"table {table_id} does not exist in the Paimon warehouse {self.warehouse}")
        return table.copy(dict(options))

    def table_exists(self, table_id: TableId) -> bool:
        return self._load(table_id) is not None

    def ensure_table(self, table_id: TableId, schema: pa.Schema, primary_keys: list[str], partition_keys: list[str],
                     options: dict[str, str] | None = None, comment: str = "") -> TableDescription:
        """Create the database and table if missing (Flink CDC §6.2). An existing table is returned as is."""
        from pypaimon.catalog.catalog_exception import TableAlreadyExistException

        existing = self._load(table_id)
        if existing is not None:
            return describe_table(table_id, existing, created=False)
        merged = dict(self.table_properties)
        merged.update({str(k): str(v) for k, v in (options or {}).items()})
        paimon_schema = build_schema(table_id, schema, list(primary_keys or []), list(partition_keys or []),
                                     merged, comment)
        try:
            self._catalog.create_database(table_id.database, ignore_if_exists=True)
            self._catalog.create_table(identifier(table_id), paimon_schema, ignore_if_exists=False)
        except TableAlreadyExistException:  # created concurrently: not ours, not altered
            return describe_table(table_id, self._load(table_id), created=False)
        except Exception as error:
            raise SinkError(f"table {table_id}: cannot create it: {error}") from error
        return describe_table(table_id, self._load(table_id), created=True)

    def describe(self, table_id: TableId) -> TableDescription:
        table = self._load(table_id)
        if table is None:
            raise SinkError(f"table {table_id} does not exist in the Paimon warehouse {self.warehouse}")
        return describe_table(table_id, table, created=False)

    # -------------------------------------------------------------- snapshots
    def latest_snapshot_id(self, table_id: TableId) -> int | None:
        table = self._load(table_id)
        if table is None:
            return None
        snapshot = table.snapshot_manager().get_latest_snapshot()
        return snapshot.id if snapshot else None

    def checkpoint(self, table_id: TableId) -> dict[str, str] | None:
        """Properties of the newest snapshot that carries ``lakecdc.binlog.file`` (walking back from the latest,
        as maintenance snapshots may not carry them); None without table or such snapshot."""
        table = self._load(table_id)
        if table is None:
            return None
        manager = table.snapshot_manager()
        snapshot = manager.get_latest_snapshot()
        while snapshot is not None:
            if CHECKPOINT_KEY in (snapshot.properties or {}):
                return dict(snapshot.properties)
            if snapshot.id <= 1:
                return None
            snapshot = manager.get_snapshot_by_id(snapshot.id - 1)  # None once older snapshots were expired
        return None

    # ------------------------------------------------------------ lock, write
    def _table_lock(self, table_id: TableId, owner: str) -> TableLock:
        if self._warehouse_dir is None:
            raise SinkError(
                f"table {table_id}: the warehouse {self.warehouse} is not a local filesystem. Paimon commits to "
                f"object stores/HDFS need an external lock to stay single-writer, which lakecdc does not support "
                f"yet; use a local (or NFS with working flock) warehouse")
        return TableLock(lock_path(self._warehouse_dir, table_id), table_id, owner or self.commit_user)

    @contextlib.contextmanager
    def _lock(self, table_id: TableId, owner: str) -> Iterator[None]:
        lock = self._table_lock(table_id, owner).acquire()
        self._locks[table_id] = lock
        try:
            yield None
        finally:
            if self._locks.get(table_id) is lock:
                del self._locks[table_id]
            lock.release()

    def lock(self, table_id: TableId, owner: str = "") -> ContextManager[None]:
        """Exclusive, non-blocking, cross-process lock of one table (see lakecdc.sink.lock). Held elsewhere →
        TableLockedError naming the holder. Writers opened by this sink inside the block use it."""
        return self._lock(table_id, owner)

    def open_writer(self, table_id: TableId) -> TableWriter:
        """A writer for one commit. Uses this sink's lock on the table if held (``with sink.lock(t)``), otherwise
        takes the table lock itself until commit/abort."""
        table = self._require(table_id, _WRITE_OPTIONS)
        held = self._locks.get(table_id)
        on_close = None
        if held is None or not held.held:
            own = self._table_lock(table_id, "").acquire()
            on_close = own.release
        try:
            return TableWriter(table_id, table, self.commit_user, on_close=on_close)
        except BaseException:
            if on_close is not None:
                on_close()
            raise

    # ------------------------------------------------------------------- read
    def read_table(self, table_id: TableId, columns: list[str] | None = None) -> pa.Table:
        return _read_table(table_id, self._require(table_id, native.NATIVE_OPTIONS), columns)

    def row_count(self, table_id: TableId) -> int:
        return _row_count(table_id, self._require(table_id, native.NATIVE_OPTIONS))
