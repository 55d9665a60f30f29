"""A filesystem-metastore warehouse's metadata (databases, tables, schemas, snapshots) read without pypaimon's catalog.

Importing pypaimon's catalog imports its table, read and REST modules, and with them pandas, polars and
``pyarrow.dataset``: about a second of a ``lakecdc run`` that has nothing to write (docs/benchmarks.md, the fixed
cost of a run). The questions such a run asks (which tables exist, their stored schema, the latest snapshot and its
properties) need only the table's ``schema/`` and ``snapshot/`` files, which pypaimon's own SchemaManager and
SnapshotManager read. So :class:`Warehouse` answers them with exactly those classes, with the paths pypaimon's
FileSystemCatalog uses, on the catalog's file IO or, for a local warehouse, on :class:`LocalFiles` (the three reads
those classes make, on plain paths). It also creates tables as that catalog does (a database directory and the
table's first schema file), and the writer opens pypaimon-rust's writer from the stored schema
(lakecdc.sink.native.RustWriteTarget); committing, altering and reading rows still go through the catalog
(lakecdc.sink.PaimonSink creates it at its first such use: a first run's snapshot imports it while the Rust writer
prepares its files).

The two managers are built without their constructors, whose only work is resolving the branch directory through
``pypaimon.branch``, a package whose ``__init__`` imports the whole catalog: the attributes are set here as those
constructors set them for the main branch (the only branch lakecdc writes). tests/test_sink.py compares them with
managers pypaimon builds, for the pinned pypaimon version (lakecdc.sink.native.VERIFIED_VERSIONS).
"""

from __future__ import annotations

import os

import pyarrow.fs as pafs
from pypaimon.common.file_io import FileIO
from pypaimon.common.options import Options
from pypaimon.common.options.core_options import CoreOptions
from pypaimon.schema.schema import Schema
from pypaimon.schema.schema_manager import SchemaManager
from pypaimon.schema.table_schema import TableSchema
from pypaimon.snapshot.snapshot_manager import SnapshotManager

from lakecdc.errors import SinkError
from lakecdc.model import TableId
from lakecdc.sink import object_store
from lakecdc.sink.catalog import local_warehouse_path
from lakecdc.sink.native import MAIN_BRANCH

DATABASE_SUFFIX = ".db"  # pypaimon's Catalog.DB_SUFFIX: database 'inventory' is the directory 'inventory.db'
# pypaimon's FileSystemCatalog refuses to load tables when the catalog options set this
_UNSUPPORTED_OPTIONS = ("scan.fallback-branch",)


def uses_catalog_files(catalog_options: dict[str, str]) -> bool:
    """True for the filesystem metastore, whose tables are only their files (a jdbc metastore keeps its table list
    in a database: those warehouses go through pypaimon's catalog for everything)."""
    return catalog_options.get("metastore", "filesystem") == "filesystem"


def open_file_io(catalog_options: dict[str, str]):
    """The file IO pypaimon's FileSystemCatalog builds for normalized catalog options (its local cache when
    configured); on an object store the conditional-put file IO lakecdc publishes metadata with
    (lakecdc.sink.object_store)."""
    options = Options(dict(catalog_options))
    warehouse = catalog_options["warehouse"]
    try:
        if object_store.is_object_store(warehouse):
            return object_store.conditional_file_io(warehouse, options,
                                                    object_store.S3Settings.from_options(catalog_options))
        from pypaimon.filesystem.caching_file_io import CachingFileIO

        return CachingFileIO.wrap_with_caching_if_needed(FileIO.get(warehouse, options), options,
                                                         CachingFileIO.create_cache_manager(options))
    except SinkError:
        raise
    except Exception as error:  # pypaimon raises ValueError/KeyError/OSError/... for bad options
        raise SinkError(f"cannot open the Paimon catalog {warehouse!r}: {error}") from error


def open_warehouse_metadata(catalog_options: dict[str, str]) -> "Warehouse":
    """The metadata reader of a filesystem-metastore warehouse. A local warehouse without pypaimon's local cache
    is read with :class:`LocalFiles` (pypaimon's local file IO imports ``requests``, for blobs over HTTP: a tenth
    of a second of every start-up); other warehouses with the file IO the catalog will use (``shared_file_io``)."""
    local = local_warehouse_path(catalog_options["warehouse"])
    if local is not None and not CoreOptions(Options(dict(catalog_options))).local_cache_enabled():
        return Warehouse(str(local), LocalFiles(), catalog_options, shared_file_io=False)
    return Warehouse(catalog_options["warehouse"], open_file_io(catalog_options), catalog_options,
                     shared_file_io=True)


class _LocalStatus:
    """What pypaimon's file statuses carry that its managers and :class:`Warehouse` read."""

    def __init__(self, entry: os.DirEntry):
        self.path = entry.path
        self.base_name = entry.name
        self.type = pafs.FileType.Directory if entry.is_dir() else pafs.FileType.File


class LocalFiles:
    """The reads pypaimon's SchemaManager and SnapshotManager make of a file IO (``exists``, ``list_status``,
    ``read_file_utf8``), on plain local paths, as pypaimon's LocalFileIO makes them (a missing directory lists
    nothing, a file lists itself)."""

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def list_status(self, path: str) -> list[_LocalStatus]:
        if os.path.isfile(path):
            parent = os.path.dirname(path) or "."
            return [_LocalStatus(e) for e in os.scandir(parent) if e.name == os.path.basename(path)]
        if not os.path.isdir(path):
            return []
        return [_LocalStatus(entry) for entry in os.scandir(path)]

    def read_file_utf8(self, path: str) -> str:
        with open(path, "rb") as file:
            return file.read().decode("utf-8")


class MainBranchSnapshots(SnapshotManager):
    """pypaimon's SnapshotManager of a table's main branch (see the module docstring)."""

    def __init__(self, file_io, table_path: str):  # not super().__init__: it imports the catalog
        self.file_io = file_io
        self.table_path = table_path.rstrip("/")
        self.branch = MAIN_BRANCH
        # a filesystem catalog's tables have a snapshot loader too, which always falls back to the files
        self.snapshot_loader = None
        self.snapshot_dir = f"{self.table_path}/snapshot"
        self.latest_file = f"{self.snapshot_dir}/LATEST"


class MainBranchSchemas(SchemaManager):
    """pypaimon's SchemaManager of a table's main branch (see the module docstring)."""

    def __init__(self, file_io, table_path: str):  # not super().__init__: it imports the catalog
        self.schema_prefix = "schema-"
        self.file_io = file_io
        self.table_path = table_path
        self.branch = MAIN_BRANCH
        self.schema_path = f"{table_path}/schema"
        self.schema_cache: dict = {}  # schema id -> TableSchema, as pypaimon keeps it

    @property
    def branch_path(self) -> str:
        return self.table_path


class StoredTable:
    """One table's stored metadata: the attributes and methods of pypaimon's FileStoreTable that describe it
    (``table_schema``, ``primary_keys``, ``partition_keys``, ``comment()``, ``snapshot_manager()``)."""

    def __init__(self, file_io, table_path: str, table_schema: TableSchema):
        self.file_io = file_io
        self.table_path = table_path
        self.table_schema = table_schema
        self.primary_keys = table_schema.primary_keys
        self.partition_keys = table_schema.partition_keys

    def comment(self) -> str | None:
        return self.table_schema.comment

    def snapshot_manager(self) -> SnapshotManager:
        return MainBranchSnapshots(self.file_io, self.table_path)


class Warehouse:
    """The databases and tables of a filesystem-metastore warehouse, as pypaimon's FileSystemCatalog lays them out
    (``<warehouse>/<database>.db/<table>/schema/schema-N``)."""

    def __init__(self, root: str, file_io, catalog_options: dict[str, str], *, shared_file_io: bool):
        self.root = root.rstrip("/")
        self.file_io = file_io
        self.shared_file_io = shared_file_io  # the catalog is to use this file IO too
        self._catalog_options = dict(catalog_options)
        self._unsupported = [k for k in _UNSUPPORTED_OPTIONS if k in catalog_options]
        self._writable_file_io = file_io if shared_file_io else None

    def database_path(self, database: str) -> str:
        return f"{self.root}/{database}{DATABASE_SUFFIX}"

    def table_path(self, table_id: TableId) -> str:
        return f"{self.database_path(table_id.database)}/{table_id.table}"

    def _directories(self, path: str) -> list[str]:
        return [status.base_name for status in self.file_io.list_status(path)
                if status.type == pafs.FileType.Directory and status.base_name]

    def list_tables(self) -> list[TableId]:
        """Every table directory of every database directory, sorted (what the catalog's list_databases and
        list_tables return)."""
        found = []
        for name in self._directories(self.root):
            if name.endswith(DATABASE_SUFFIX):
                database = name[:-len(DATABASE_SUFFIX)]
                found += [TableId(database, t) for t in self._directories(self.database_path(database))
                          if not t.startswith(".")]
        return sorted(found)

    def table(self, table_id: TableId) -> StoredTable | None:
        """The table's latest schema and paths; None when it has no schema file (it, or its database, does not
        exist)."""
        self._check_catalog_options()
        path = self.table_path(table_id)
        schema = MainBranchSchemas(self.file_io, path).latest()
        return StoredTable(self.file_io, path, schema) if schema is not None else None

    def create_table(self, table_id: TableId, schema: Schema) -> bool:
        """Create the table as pypaimon's FileSystemCatalog does (``create_database(ignore_if_exists=True)``, then
        ``create_table``): its database directory if missing, then its first schema file, through the catalog's
        file IO (its conditional publication on an object store). False when the table has a schema already."""
        core = CoreOptions(Options(dict(schema.options or {})))
        if core.auto_create():
            raise ValueError(f"The value of {CoreOptions.AUTO_CREATE.key()} property should be False.")
        self._check_catalog_options()
        file_io = self._writable()
        file_io.mkdirs(self.database_path(table_id.database))
        manager = MainBranchSchemas(file_io, self.table_path(table_id))
        if manager.latest() is not None:
            return False
        table_type = (schema.options or {}).get(CoreOptions.TYPE.key())
        if table_type is not None and table_type != "table":
            raise ValueError(f"Table Type: {table_type}")
        manager.create_table(schema)
        return True

    def _check_catalog_options(self) -> None:
        """Refuse what pypaimon's FileSystemCatalog refuses to load or create tables with."""
        if self._unsupported:
            raise ValueError(f"Unsupported CoreOption {self._unsupported[0]}")

    def _writable(self):
        """The file IO the catalog writes with (for a local warehouse read with LocalFiles: opened at first use)."""
        if self._writable_file_io is None:
            self._writable_file_io = open_file_io(self._catalog_options)
        return self._writable_file_io
