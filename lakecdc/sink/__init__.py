"""The Paimon sink: creates Paimon tables like Flink CDC's Paimon pipeline sink, writes change rows with
pypaimon's native (Rust) writer, commits them with the binlog checkpoint in the snapshot properties, and reads
tables back.

Storage is pypaimon 2.1.0 + pypaimon-rust 0.4.0 (lakecdc.sink.native says why and how). The native
read/write/commit/plan paths are switched on as *dynamic* options (``table.copy``) every time a table is used, so
the tables' stored options are only the user's ``table.properties.*`` and transform ``table-options``.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from pathlib import PurePath, PurePosixPath
from typing import ContextManager, Iterator

import pyarrow as pa

from lakecdc.errors import CommitConflictError, SinkError
from lakecdc.model import CHECKPOINT_KEY, LAKECDC_DIR, TableId
from lakecdc.sink import native, object_store
from lakecdc.sink.consumers import Consumers
from lakecdc.sink.catalog import (create_catalog, identifier, local_warehouse_path, normalize_catalog_options,
                                  storage_options)
from lakecdc.sink.sink_options import table_defaults
from lakecdc.sink.lock import InProcessTableLock, TableLock, lock_path
from lakecdc.sink.metadata import StoredTable, Warehouse, open_warehouse_metadata, uses_catalog_files
from lakecdc.sink.reader import drop_retractions as _drop_retractions
from lakecdc.sink.reader import empty_changes as _empty_changes
from lakecdc.sink.reader import KeyRead, ROW_KIND_COLUMN
from lakecdc.sink.reader import read_buckets as _read_buckets
from lakecdc.sink.reader import read_changes as _read_changes
from lakecdc.sink.reader import read_batches as _read_batches
from lakecdc.sink.reader import read_keys as _read_keys
from lakecdc.sink.reader import read_table as _read_table
from lakecdc.sink.reader import counted_from_files as _counted_from_files
from lakecdc.sink.reader import row_count as _row_count
from lakecdc.sink.table_files import LocalStore, ObjectStore
from lakecdc.sink.tables import TableDescription, build_schema, check_existing_table, describe_table
from lakecdc.sink.writer import TableWriter
from lakecdc.sink.written import WrittenRows

__all__ = ["PaimonSink", "TableWriter", "TableDescription", "CHECKPOINT_KEY"]

# Used only while writing: a commit without rows still creates a snapshot (the checkpoint advances), and a commit
# that meets another writer's snapshot fails instead of being re-planned on top of it.
_WRITE_OPTIONS = {**native.NATIVE_OPTIONS, **native.COMMIT_OPTIONS, "snapshot.ignore-empty-commit": "false"}


class PaimonSink:
    """One Paimon catalog (the sink block of a pipeline)."""

    def __init__(self, catalog_options: dict[str, str], table_properties: dict[str, str] | None = None,
                 commit_user_prefix: str = "admin"):
        native.check_library_versions()
        self.catalog_options = normalize_catalog_options(catalog_options)
        # options of every table created: Paimon's catalog defaults (table-default.*) below table.properties
        self.table_properties = {**table_defaults(self.catalog_options),
                                 **{str(k): str(v) for k, v in (table_properties or {}).items()}}
        # Flink CDC: prefix + random UUID, no separator, fixed for the life of the sink.
        self.commit_user = f"{commit_user_prefix}{uuid.uuid4()}"
        self.warehouse = self.catalog_options["warehouse"]
        self._warehouse_dir = local_warehouse_path(self.warehouse)
        self._object_store = object_store.is_object_store(self.warehouse)
        # Questions about what is stored (tables, schemas, snapshots) are answered from the metadata files
        # (lakecdc.sink.metadata), tables are created and writers opened from them; pypaimon's catalog, whose import
        # costs about 0.4 s, is created at the first commit (while the Rust writer prepares its files), schema change
        # or row read. A jdbc metastore uses the catalog for everything.
        self._metadata: Warehouse | None = None
        self._catalog_instance = None
        if uses_catalog_files(self.catalog_options):
            self._metadata = open_warehouse_metadata(self.catalog_options)
        else:
            self._catalog_instance = create_catalog(self.catalog_options)
        self._locks: dict[TableId, TableLock | InProcessTableLock] = {}
        # Per table whose checkpoint this sink loaded, the snapshot its next commit must follow: the latest one
        # when the checkpoint was first loaded, then each snapshot this sink committed. A commit finding any other
        # snapshot there fails with CommitConflictError (lakecdc.sink.native). Tables written without a loaded
        # checkpoint (the Python API) follow the latest snapshot at the time their writer was opened.
        self._bases: dict[TableId, int] = {}
        # Likewise the schema its next schema change must follow: the latest one when the checkpoint was loaded,
        # then each schema this sink committed (lakecdc.sink.native.commit_schema_change).
        self._schema_bases: dict[TableId, int] = {}
        self._store_checked = not self._object_store
        # Per table, what its writers commit is kept to check the commit (lakecdc.sink.written; record_writes).
        self._recorders: dict[TableId, WrittenRows] = {}

    def _check_store(self) -> None:
        """Before the first write to an object store: refuse one that ignores If-None-Match."""
        if not self._store_checked:
            object_store.probe_conditional_put(object_store.S3Settings.from_options(self.catalog_options),
                                               self.warehouse)
            self._store_checked = True

    def base_snapshot_id(self, table_id: TableId) -> int:
        """The snapshot this sink's next commit to ``table_id`` must follow (0: the table has none; see
        ``_bases``)."""
        if table_id in self._bases:
            return self._bases[table_id]
        return self.latest_snapshot_id(table_id) or 0

    def note_commit(self, table_id: TableId, snapshot_id: int, base_snapshot_id: int | None = None) -> None:
        """This sink published ``snapshot_id`` (on top of ``base_snapshot_id``): its next commit to the table follows
        it, unless that commit was built on another snapshot than the one this sink's commits follow (table upkeep
        on another writer's snapshot), which must not hide that writer's commit from this sink."""
        if table_id in self._bases and (base_snapshot_id is None or self._bases[table_id] == base_snapshot_id):
            self._bases[table_id] = snapshot_id

    @property
    def _catalog(self):
        """pypaimon's catalog, created at first use (on an object store with the file IO of the metadata reads)."""
        if self._catalog_instance is None:
            metadata = self._metadata
            file_io = metadata.file_io if metadata is not None and metadata.shared_file_io else None
            self._catalog_instance = create_catalog(self.catalog_options, file_io)
        return self._catalog_instance

    def prepare_writes(self) -> None:
        """Create pypaimon's catalog now instead of at the first commit (follow mode: its import, about 0.4 s, would
        otherwise delay the first checkpoint's commit)."""
        self._catalog  # noqa: B018 (the property creates it)

    # ----------------------------------------------------------------- tables
    def _stored(self, table_id: TableId) -> StoredTable | None:
        """The table's stored metadata (schema, keys, snapshots: what pypaimon's table describes it with), or None
        when it (or its database) does not exist; read without pypaimon's catalog where the metastore allows."""
        if self._metadata is None:
            return self._load(table_id)
        try:
            identifier(table_id)  # names the catalog would refuse are refused the same way
            return self._metadata.table(table_id)
        except Exception as error:
            raise SinkError(f"table {table_id}: cannot load it from {self.warehouse}: {error}") from error

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
        """The pypaimon table with dynamic ``options``, to write or read it; SinkError when it does not exist."""
        table = self._load(table_id)
        if table is None:
            raise self._missing(table_id)
        return table.copy(dict(options))

    def _require_stored(self, table_id: TableId) -> StoredTable:
        table = self._stored(table_id)
        if table is None:
            raise self._missing(table_id)
        return table

    def _missing(self, table_id: TableId) -> SinkError:
        return SinkError(f"table {table_id} does not exist in the Paimon warehouse {self.warehouse}")

    def table_exists(self, table_id: TableId) -> bool:
        return self._stored(table_id) is not None

    def list_tables(self) -> list[TableId]:
        """Every table of the warehouse, sorted."""
        try:
            if self._metadata is not None:
                return self._metadata.list_tables()
            return sorted(TableId(database, table) for database in self._catalog.list_databases()
                          for table in self._catalog.list_tables(database))
        except Exception as error:
            raise SinkError(f"cannot list the tables of the Paimon warehouse {self.warehouse}: {error}") from error

    def ensure_table(self, table_id: TableId, schema: pa.Schema, primary_keys: list[str], partition_keys: list[str],
                     options: dict[str, str] | None = None, comment: str = "") -> TableDescription:
        """Create the database and table if missing (as Flink CDC's PaimonMetadataApplier.applyCreateTable). An
        existing table is returned as is."""
        from pypaimon.catalog.catalog_exception import TableAlreadyExistException

        self._check_store()
        existing = self._stored(table_id)
        merged = dict(self.table_properties)
        merged.update({str(k): str(v) for k, v in (options or {}).items()})
        if existing is not None:
            if not self._stale_empty_table(table_id, existing, schema, primary_keys, partition_keys, merged, comment):
                description = describe_table(table_id, existing, created=False)
                check_existing_table(description)
                return description
            self.drop_table(table_id)
        paimon_schema = build_schema(table_id, schema, list(primary_keys or []), list(partition_keys or []),
                                     merged, comment)
        try:
            created = self._create(table_id, paimon_schema)
        except TableAlreadyExistException:
            created = False
        except Exception as error:
            raise SinkError(f"table {table_id}: cannot create it: {error}") from error
        # not created: created concurrently, not ours, not altered
        return describe_table(table_id, self._stored(table_id), created=created)

    def _create(self, table_id: TableId, paimon_schema) -> bool:
        """Create the database if missing and the table; False if the table exists. Without pypaimon's catalog
        where the metastore allows (lakecdc.sink.metadata)."""
        if self._metadata is not None:
            return self._metadata.create_table(table_id, paimon_schema)
        self._catalog.create_database(table_id.database, ignore_if_exists=True)
        self._catalog.create_table(identifier(table_id), paimon_schema, ignore_if_exists=False)
        return True

    def _stale_empty_table(self, table_id: TableId, existing, schema: pa.Schema, primary_keys: list[str],
                           partition_keys: list[str], options: dict[str, str], comment: str) -> bool:
        """True for a table that a failed run created and never committed to (no snapshot, so no data) and whose
        definition is no longer what the pipeline asks for (the user fixed the transform that made the run fail):
        it is re-created instead of being kept with the old columns or keys. Only under this sink's table lock."""
        held = self._locks.get(table_id)
        if held is None or not held.held or existing.snapshot_manager().get_latest_snapshot() is not None:
            return False
        try:
            wanted = build_schema(table_id, schema, list(primary_keys or []), list(partition_keys or []), options,
                                  comment)
        except SinkError:
            return False  # the caller's own checks report it
        stored = existing.table_schema
        differs = ([(f.name, str(f.type)) for f in stored.fields] != [(f.name, str(f.type)) for f in wanted.fields]
                   or list(stored.primary_keys) != list(wanted.primary_keys)
                   or list(stored.partition_keys) != list(wanted.partition_keys)
                   or any((stored.options or {}).get(k) != v for k, v in wanted.options.items()))
        if differs:
            logging.getLogger("lakecdc.sink").warning(
                "table %s has no snapshot (an earlier run created it and failed before its first commit) and its "
                "definition differs from the pipeline's: re-creating it", table_id)
        return differs

    def describe(self, table_id: TableId) -> TableDescription:
        return describe_table(table_id, self._require_stored(table_id), created=False)

    # -------------------------------------------------------------- snapshots
    def latest_snapshot_id(self, table_id: TableId) -> int | None:
        table = self._stored(table_id)
        if table is None:
            return None
        snapshot = table.snapshot_manager().get_latest_snapshot()
        return snapshot.id if snapshot else None

    def checkpoint(self, table_id: TableId) -> dict[str, str] | None:
        """Properties of the newest snapshot that carries ``lakecdc.binlog.file`` (walking back from the latest,
        as upkeep snapshots may not carry them); None without table or such snapshot."""
        table = self._stored(table_id)
        if table is None:
            self._bases.setdefault(table_id, 0)
            return None
        manager = table.snapshot_manager()
        snapshot = manager.get_latest_snapshot()
        self._bases.setdefault(table_id, snapshot.id if snapshot else 0)
        self._schema_bases.setdefault(table_id, table.table_schema.id)
        while snapshot is not None:
            if CHECKPOINT_KEY in (snapshot.properties or {}):
                return dict(snapshot.properties)
            if snapshot.id <= 1:
                return None
            snapshot = manager.get_snapshot_by_id(snapshot.id - 1)  # None once older snapshots were expired
        return None

    # ------------------------------------------------------------ lakecdc's own files
    def _state_path(self, name: str) -> tuple[LocalStore | ObjectStore, PurePath]:
        if self._warehouse_dir is not None:
            return LocalStore(), self._warehouse_dir / LAKECDC_DIR / name
        file_io = self._metadata.file_io if self._metadata is not None else self._catalog.file_io
        return ObjectStore(file_io), PurePosixPath(file_io.to_filesystem_path(self.warehouse)) / LAKECDC_DIR / name

    def read_state(self, name: str) -> bytes | None:
        """The file ``<warehouse>/.lakecdc/<name>`` that lakecdc keeps beside the tables (an object on an s3://
        warehouse), or None when there is none; OSError when it cannot be read."""
        store, path = self._state_path(name)
        return store.read_bytes(path)

    def write_state(self, name: str, data: bytes) -> None:
        """Create or replace ``<warehouse>/.lakecdc/<name>`` atomically (readers see the old or the new bytes). No
        lock and no condition, the last writer's bytes stand: only for hints whose loss costs work, never data
        (when each table had its last upkeep)."""
        store, path = self._state_path(name)
        store.replace(path, data)

    # ------------------------------------------------------------ consumers
    def consumers(self, table_id: TableId) -> Consumers:
        """The table's Paimon consumers (``<table>/consumer/consumer-<id>``, lakecdc.sink.consumers), through the
        warehouse's store: local files or the object store's."""
        table = self._require_stored(table_id) if self._metadata is not None else self._require(table_id, {})
        table_path = str(table.table_path)
        local = local_warehouse_path(table_path)
        if local is not None:
            return Consumers(table_id, LocalStore(), local)
        file_io = table.file_io
        return Consumers(table_id, ObjectStore(file_io), PurePosixPath(file_io.to_filesystem_path(table_path)))

    # ------------------------------------------------------------ lock, write
    def _table_lock(self, table_id: TableId, owner: str) -> TableLock | InProcessTableLock:
        identifier(table_id)  # a name like '../x' is refused before its lock file is created
        if self._object_store:
            # no cross-process lock on an object store: commits are conditional (lakecdc.sink.object_store)
            self._check_store()
            return InProcessTableLock(table_id, owner or self.commit_user)
        if self._warehouse_dir is None:
            raise SinkError(f"table {table_id}: the warehouse {self.warehouse} is not supported")
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

    def holds_lock(self, table_id: TableId) -> bool:
        """This sink holds the table's lock (inside ``with sink.lock(t)``)."""
        held = self._locks.get(table_id)
        return held is not None and held.held

    def record_writes(self, table_id: TableId) -> WrittenRows:
        """From now on, what every writer this sink opens for ``table_id`` commits is kept (per primary key the
        last row, bounded; lakecdc.sink.written) in the returned object, until :meth:`stop_recording`."""
        recorder = self._recorders.get(table_id)
        if recorder is None:
            description = self.describe(table_id)
            recorder = self._recorders[table_id] = WrittenRows(table_id, list(description.primary_keys))
        return recorder

    def stop_recording(self, table_id: TableId) -> WrittenRows | None:
        """Stop keeping what ``table_id``'s writers commit; returns what was kept."""
        return self._recorders.pop(table_id, None)

    def open_writer(self, table_id: TableId, *, overwrite: dict | None = None, parallelism: int = 1,
                    ignore_delete: bool = False, options: dict[str, str] | None = None,
                    base_snapshot_id: int | None = None) -> TableWriter:
        """A writer for one commit. Uses this sink's lock on the table if held (``with sink.lock(t)``), otherwise
        takes the table lock itself until commit/abort. ``overwrite``, ``parallelism`` and ``ignore_delete``: see
        TableWriter. ``options``: dynamic table options for this write only (table upkeep uses them).
        ``base_snapshot_id``: the snapshot the commit must follow (default: ``base_snapshot_id(table_id)``; table
        upkeep gives the snapshot whose rows it rewrites)."""
        base = self.base_snapshot_id(table_id) if base_snapshot_id is None else base_snapshot_id
        self._check_store()
        target = self._write_target(table_id, {**_WRITE_OPTIONS, **(options or {})})
        held = self._locks.get(table_id)
        on_close = None
        if held is None or not held.held:
            own = self._table_lock(table_id, "").acquire()
            on_close = own.release
        recorder = self._recorders.get(table_id)
        try:
            return TableWriter(table_id, target, self.commit_user, on_close=on_close, overwrite=overwrite,
                               parallelism=parallelism, ignore_delete=ignore_delete,
                               base_snapshot_id=base,
                               on_commit=lambda snapshot_id: self.note_commit(table_id, snapshot_id, base),
                               # an overwrite (upkeep's rewrite of live rows) changes no row: not the run's
                               record=recorder.pending() if recorder is not None and overwrite is None else None)
        except BaseException:
            if on_close is not None:
                on_close()
            raise

    def _write_target(self, table_id: TableId, options: dict[str, str]) -> native.RustWriteTarget:
        """The table as its writer opens it, with the dynamic ``options``: from the stored schema where the
        metastore allows, so that pypaimon's catalog is created only for the commit (lakecdc.sink.writer)."""
        if self._metadata is None:
            return native.RustWriteTarget.of_table(table_id, self._require(table_id, options))
        stored = self._require_stored(table_id)
        return native.RustWriteTarget.of_stored_table(
            table_id, stored.table_schema, stored.table_path, options, self.catalog_options,
            load_table=lambda: self._require(table_id, options))

    def create_table(self, table_id: TableId, schema: pa.Schema, primary_keys: list[str],
                     partition_keys: list[str], options: dict[str, str] | None = None, comment: str = "",
                     ignore_if_exists: bool = False) -> TableDescription:
        """Create a table exactly as given (unlike ensure_table, which follows Flink CDC and appends the partition
        keys to the primary key): SinkError if it exists (unless ``ignore_if_exists``) or if the primary key
        leaves out a partition key (cross-partition updates need a global index that pypaimon does not have)."""
        missing = [p for p in partition_keys if primary_keys and p not in primary_keys]
        if missing:
            raise SinkError(f"table {table_id}: the primary key {list(primary_keys)} must contain the partition "
                            f"key(s) {missing} (pypaimon cannot write cross-partition primary keys)")
        if self.table_exists(table_id):
            if ignore_if_exists:
                return self.describe(table_id)
            raise SinkError(f"table {table_id} already exists in the Paimon warehouse {self.warehouse}")
        return self.ensure_table(table_id, schema, primary_keys, partition_keys, options, comment)

    def alter_table(self, table_id: TableId, changes: list,
                    defaults: dict[str, str] | None = None) -> TableDescription:
        """Apply pypaimon ``SchemaChange``s as one new schema version, the columns of ``defaults`` with those default
        values (Flink CDC's updateColumnDefaultValue); the caller holds the table lock. The new schema must follow
        the one this sink loaded with the checkpoint (then its own previous change): CommitConflictError if
        another writer changed the schema meanwhile."""
        if changes:
            self._check_store()
            table = self._require(table_id, {})
            try:
                schema_id = native.commit_schema_change(table, table_id, list(changes),
                                                        self._schema_bases.get(table_id), defaults)
            except CommitConflictError:
                raise
            except Exception as error:
                raise SinkError(f"table {table_id}: schema change failed: {error}") from error
            if table_id in self._schema_bases:
                self._schema_bases[table_id] = schema_id
        return self.describe(table_id)

    def truncate(self, table_id: TableId, properties: dict[str, str]) -> int:
        """Remove every row in one OVERWRITE snapshot carrying ``properties``; returns its id. The caller holds the
        table lock."""
        self._check_store()
        table = self._require(table_id, native.COMMIT_OPTIONS)
        before = self.base_snapshot_id(table_id)
        try:
            native.truncate_table(table, table_id, self.commit_user, properties, before)
        except Exception as error:
            conflict = native.commit_conflict(error)
            if conflict is not None:
                raise conflict from None
            raise SinkError(f"table {table_id}: truncate failed: {error}") from error
        after = self.latest_snapshot_id(table_id)
        if after != before + 1:
            raise SinkError(f"table {table_id}: truncate did not produce snapshot {before + 1} (latest: {after}); "
                            "another writer may be writing this table")
        self.note_commit(table_id, after)
        if table_id in self._recorders:
            self._recorders[table_id].truncated(after)
        return after

    def drop_table(self, table_id: TableId) -> None:
        """Drop the table and its files (Flink CDC's DropTableEvent); the caller holds the table lock."""
        self._check_store()
        try:
            self._catalog.drop_table(identifier(table_id), ignore_if_not_exists=True)
        except Exception as error:
            raise SinkError(f"table {table_id}: drop failed: {error}") from error
        if table_id in self._bases:
            self._bases[table_id] = 0
        self._schema_bases.pop(table_id, None)  # a re-created table starts at schema 0 again

    def paimon_types(self, table_id: TableId) -> dict[str, str]:
        """Column → Paimon type as stored (``BIGINT NOT NULL``, ``TIMESTAMP(6)``), in column order."""
        return self.describe(table_id).paimon_types

    def snapshot_manager(self, table_id: TableId):
        """pypaimon's SnapshotManager of the table, or None when the table does not exist."""
        table = self._stored(table_id)
        return table.snapshot_manager() if table is not None else None

    def snapshots(self, table_id: TableId) -> list:
        """pypaimon Snapshot objects of the table, oldest first (expired ones are skipped)."""
        manager = self._require_stored(table_id).snapshot_manager()
        latest = manager.get_latest_snapshot()
        if latest is None:
            return []
        found = (manager.get_snapshot_by_id(i) for i in range(1, latest.id + 1))
        return [s for s in found if s is not None]

    # ------------------------------------------------------------------- read
    def read_table(self, table_id: TableId, columns: list[str] | None = None, *, predicate_builder=None,
                   limit: int | None = None, snapshot_id: int | None = None,
                   timestamp_ms: int | None = None) -> pa.Table:
        """The merged rows of the latest snapshot, of ``snapshot_id``, or of the newest snapshot at or before
        ``timestamp_ms``; see lakecdc.sink.reader.read_table for the other arguments."""
        options = dict(native.NATIVE_OPTIONS)
        if snapshot_id is not None and timestamp_ms is not None:
            raise SinkError(f"table {table_id}: give a snapshot id or a timestamp, not both")
        if snapshot_id is not None:
            self._check_snapshot(table_id, snapshot_id)
            options["scan.snapshot-id"] = str(int(snapshot_id))
        if timestamp_ms is not None:
            first = next(iter(self.snapshots(table_id)), None)
            if first is None or first.time_millis > int(timestamp_ms):
                raise SinkError(f"table {table_id}: no snapshot at or before timestamp {timestamp_ms} (the first "
                                f"is {'at ' + str(first.time_millis) if first else 'not written yet'})")
            options["scan.timestamp-millis"] = str(int(timestamp_ms))
        return _read_table(table_id, self._require(table_id, options), columns, predicate_builder, limit)

    def read_batches(self, table_id: TableId, columns: list[str] | None = None, *,
                     snapshot_id: int | None = None) -> Iterator[pa.RecordBatch]:
        """The merged rows of the latest snapshot (or of ``snapshot_id``) as record batches, one bucket at a time,
        so a whole-table pass holds one batch, never the table."""
        return _read_batches(table_id, self._at_snapshot(table_id, snapshot_id), columns)

    def column_names(self, table_id: TableId, snapshot_id: int | None = None) -> list[str]:
        """The table's columns, as of ``snapshot_id`` (its schema then) or now."""
        return [f.name for f in self._at_snapshot(table_id, snapshot_id).table_schema.fields]

    def _at_snapshot(self, table_id: TableId, snapshot_id: int | None):
        options = dict(native.NATIVE_OPTIONS)
        if snapshot_id is not None:
            self._check_snapshot(table_id, snapshot_id)
            options["scan.snapshot-id"] = str(int(snapshot_id))
        return self._require(table_id, options)

    def read_keys(self, table_id: TableId, keys: pa.Table, snapshot_id: int,
                  columns: list[str] | None = None) -> KeyRead:
        """The rows of snapshot ``snapshot_id`` whose primary key is one of ``keys``' rows (see
        lakecdc.sink.reader.read_keys: buckets and data files pruned, a few reads of many keys each)."""
        return _read_keys(table_id, self._at_snapshot(table_id, snapshot_id), keys, columns)

    def read_buckets(self, table_id: TableId, columns: list[str],
                     snapshot_id: int) -> Iterator[tuple[tuple, int, pa.Table]]:
        """The merged rows of snapshot ``snapshot_id`` bucket by bucket (lakecdc.sink.reader.read_buckets)."""
        return _read_buckets(table_id, self._at_snapshot(table_id, snapshot_id), columns)

    def _check_snapshot(self, table_id: TableId, snapshot_id: int) -> None:
        latest = self.latest_snapshot_id(table_id)
        if isinstance(snapshot_id, bool) or not isinstance(snapshot_id, int) or snapshot_id < 1 \
                or latest is None or snapshot_id > latest:
            raise SinkError(f"table {table_id}: snapshot {snapshot_id!r} does not exist (latest: {latest})")
        if self.snapshot_manager(table_id).get_snapshot_by_id(snapshot_id) is None:
            raise SinkError(f"table {table_id}: snapshot {snapshot_id} has expired (snapshot.num-retained.*, "
                            f"snapshot.time-retained; see docs/operations.md, table upkeep)")

    def read_changes(self, table_id: TableId, start_snapshot_id: int, end_snapshot_id: int | None = None, *,
                     columns: list[str] | None = None, mode: str = "auto", ignore_delete: bool = False,
                     before_images: bool = False) -> pa.Table:
        """Rows written by the snapshots in (start, end] (end: latest) with a leading ``rowkind`` column; see
        lakecdc.sink.reader.read_changes. ``before_images``: a delta read (no changelog files) of a primary-key
        table gets each key's previous row from the snapshot before each commit, as ``-U``/``-D`` rows, so that it
        is an exact changelog (lakecdc.sink.reader.with_before_images); snapshot ``start`` must still exist."""
        latest = self.latest_snapshot_id(table_id)
        if latest is None:
            raise SinkError(f"table {table_id} has no snapshot yet")
        end = latest if end_snapshot_id is None else end_snapshot_id
        if isinstance(start_snapshot_id, bool) or not isinstance(start_snapshot_id, int) \
                or not 0 <= start_snapshot_id <= end or end > latest:
            raise SinkError(f"table {table_id}: cannot read the changes of snapshots ({start_snapshot_id}, {end}]: "
                            f"need 0 <= start <= end <= {latest} (the latest snapshot)")
        table = self._require(table_id, native.NATIVE_OPTIONS)
        if start_snapshot_id < end and table.snapshot_manager().get_snapshot_by_id(start_snapshot_id + 1) is None:
            raise SinkError(f"table {table_id}: cannot read the changes of snapshots ({start_snapshot_id}, {end}]: "
                            f"snapshot {start_snapshot_id + 1} has expired (see docs/operations.md, table upkeep)")
        if start_snapshot_id == end:
            return _empty_changes(table_id, table, columns)
        if not before_images:
            return _read_changes(table_id, table, storage_options(self.catalog_options), start_snapshot_id, end,
                                 columns, mode, ignore_delete)
        keys = list(table.primary_keys)
        # the keys are needed to match each row to its previous one; a projection without them drops them after
        read_columns = None if columns is None else list(dict.fromkeys([*keys, *columns]))

        def previous(snapshot_id: int, wanted: pa.Table) -> pa.Table | None:
            if snapshot_id <= 1:
                return None  # nothing before the first snapshot
            if table.snapshot_manager().get_snapshot_by_id(snapshot_id - 1) is None:
                raise SinkError(f"table {table_id}: the previous rows of snapshot {snapshot_id}'s changes are read "
                                f"from snapshot {snapshot_id - 1}, which has expired; read without before images, "
                                f"or from a later snapshot")
            return self.read_keys(table_id, wanted, snapshot_id - 1, read_columns).rows

        rows = _read_changes(table_id, table, storage_options(self.catalog_options), start_snapshot_id, end,
                             read_columns, mode, ignore_delete=False, before=previous)
        if ignore_delete:
            rows = _drop_retractions(rows)
        return rows if columns is None else rows.select([ROW_KIND_COLUMN, *columns])

    def empty_changes(self, table_id: TableId, columns: list[str] | None = None) -> pa.Table:
        """A change read without rows (``rowkind`` and the columns)."""
        return _empty_changes(table_id, self._require(table_id, native.NATIVE_OPTIONS), columns)

    def row_count(self, table_id: TableId) -> int:
        storage = storage_options(self.catalog_options) if uses_catalog_files(self.catalog_options) else None
        return _row_count(table_id, self._require(table_id, native.NATIVE_OPTIONS), storage)

    def row_count_from_statistics(self, table_id: TableId) -> int | None:
        """The row count when the data files' statistics prove it (reads manifests only), else None."""
        return _counted_from_files(table_id, self._require(table_id, native.NATIVE_OPTIONS))
