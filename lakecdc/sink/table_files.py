"""The on-disk metadata of one Paimon table as table upkeep needs it: the snapshots and tags, the files a
snapshot references, the live entries of its manifests, and writing merged manifests plus a snapshot pointing at
them.

Format (pypaimon's ``manifest/`` and ``snapshot/`` modules are the reference):

* ``snapshot/snapshot-N`` (JSON) names a base, a delta and optionally a changelog *manifest list*
  (``manifest/manifest-list-*``, Avro ``ManifestFileMeta`` records) and an index manifest
  (``manifest/index-manifest-*``, dynamic-bucket tables). A snapshot's full state is the ADD entries of all
  manifests in its base and delta lists minus the entries a DELETE entry names; its delta list alone holds what
  that commit changed.
* ``manifest/manifest-*`` (Avro ``ManifestEntry``): kind (0 ADD, 1 DELETE), partition (BinaryRow bytes), bucket and
  the data file's meta (name, level, extra files, external path, stats, ...). Data and changelog files live in
  ``<partition path>/bucket-N/``, index files in ``index/``; every file name carries a UUID, so a name identifies a
  file within its table and references can be kept as sets of names.

Manifests are read as raw Avro records (fastavro) so that merging writes every field, statistics included, back
exactly as it was. Files are reached through a store: ``LocalStore`` (a local warehouse, ``pathlib.Path``) or
``ObjectStore`` (an s3:// warehouse through pypaimon's pyarrow S3 filesystem, paths ``bucket/key`` as
``PurePosixPath``; new snapshots are published by conditional put, see lakecdc.sink.object_store).
"""

from __future__ import annotations

import io
import os
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path, PurePath, PurePosixPath
from typing import Any, Iterator, cast

from lakecdc.errors import CommitConflictError, SinkError
from lakecdc.sink.catalog import local_warehouse_path
from lakecdc.sink.object_store import is_object_store

ADD, DELETE = 0, 1
_SNAPSHOT_FILE = re.compile(r"^snapshot-(\d+)$")
# Directories of table metadata that upkeep never scans for data files (branches, tags, consumers, schemas...).
METADATA_DIRS = frozenset({"snapshot", "schema", "tag", "branch", "consumer", "changelog", "service"})


@dataclass(frozen=True)
class ManifestRecord:
    """One ManifestEntry: what it names (for reference sets) and the raw Avro record (for merging)."""

    kind: int
    identifier: tuple  # as pypaimon/Java match a DELETE entry to its ADD entry
    name: str
    extra_files: tuple[str, ...]
    external_path: str | None
    partition: bytes
    bucket: int
    level: int
    row_count: int
    delete_row_count: int | None  # None: the writer did not record it (older Paimon writers)
    record: dict = field(repr=False, compare=False)

    @property
    def may_retract(self) -> bool:
        """The file may hold ``-U``/``-D`` rows: it says so, or it does not say (Paimon's readers also treat an
        unknown delete row count as "not raw-convertible")."""
        return self.delete_row_count is None or self.delete_row_count > 0

    @property
    def partition_values(self) -> tuple:
        return self.identifier[0]

    @property
    def file_size(self) -> int:
        """The data file's size in bytes, as its writer recorded it."""
        return int(self.record["_FILE"]["_FILE_SIZE"])

    @property
    def key_range(self) -> tuple[bytes, bytes]:
        """The file's smallest and largest key (BinaryRow bytes of the trimmed primary key; see
        TableFiles.key_order)."""
        meta = self.record["_FILE"]
        return bytes(meta["_MIN_KEY"]), bytes(meta["_MAX_KEY"])


@dataclass
class References:
    """File names a set of snapshots needs (data, changelog, extra, index, manifest, manifest-list, statistics),
    and absolute external paths (``data-file.external-paths``), which upkeep never deletes."""

    names: set[str] = field(default_factory=set)
    external: set[str] = field(default_factory=set)

    def update(self, other: "References") -> None:
        self.names |= other.names
        self.external |= other.external


def _record(raw: dict, partition_key) -> ManifestRecord:
    meta = raw["_FILE"]
    extra = tuple(meta.get("_EXTRA_FILES") or ())
    external = meta.get("_EXTERNAL_PATH")
    embedded = meta.get("_EMBEDDED_FILE_INDEX")
    identifier = (partition_key(bytes(raw["_PARTITION"])), raw["_BUCKET"], meta["_LEVEL"], meta["_FILE_NAME"],
                  extra, bytes(embedded) if embedded is not None else None, external)
    return ManifestRecord(kind=raw["_KIND"], identifier=identifier, name=meta["_FILE_NAME"], extra_files=extra,
                          external_path=external, partition=bytes(raw["_PARTITION"]), bucket=raw["_BUCKET"],
                          level=meta["_LEVEL"], row_count=meta["_ROW_COUNT"],
                          delete_row_count=meta.get("_DELETE_ROW_COUNT"), record=raw)


# Key types whose Python values order as Paimon's key comparator does: integers, decimals, dates, times and
# timestamps by value, strings by code point (= UTF-8 byte order), booleans false < true.
_ORDERED_TYPES = frozenset({"TINYINT", "SMALLINT", "INT", "INTEGER", "BIGINT", "DECIMAL", "NUMERIC", "DATE", "TIME",
                            "TIMESTAMP", "CHAR", "VARCHAR", "STRING", "BOOLEAN"})


def _ordered_type(paimon_type: str) -> bool:
    return re.split(r"[\s(]", paimon_type.strip().upper(), maxsplit=1)[0] in _ORDERED_TYPES


def disjoint_runs(records: list["ManifestRecord"], order) -> int:
    """The fewest sorted runs ``records`` (the files of one bucket) form when files whose key ranges do not overlap
    may share a run: the largest number of files holding any one key (the depth of their key intervals)."""
    events = []
    for record in records:
        low, high = record.key_range
        events.append((order(low), 0))  # a range opens before one ending at the same key closes: [low, high]
        events.append((order(high), 1))
    depth = deepest = 0
    for _, kind in sorted(events):
        depth += 1 if kind == 0 else -1
        deepest = max(deepest, depth)
    return deepest


def merge_records(records: list[ManifestRecord]) -> list[ManifestRecord]:
    """The live entries: ADD entries no DELETE entry names (pypaimon's ``read_entries_parallel`` rule)."""
    deleted = {r.identifier for r in records if r.kind != ADD}
    return [r for r in records if r.kind == ADD and r.identifier not in deleted]


class LocalStore:
    """Files of a local warehouse."""

    @staticmethod
    def listdir(directory: PurePath) -> list[str]:
        try:
            return os.listdir(directory)
        except (FileNotFoundError, NotADirectoryError):
            return []

    @staticmethod
    def read_bytes(path: PurePath) -> bytes | None:
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    @staticmethod
    def remove(path: PurePath) -> bool:
        return _remove(path)

    @staticmethod
    def write_new(path: PurePath, data: bytes) -> None:
        _write_atomic(path, data)

    @staticmethod
    def write_hint(path: PurePath, data: bytes) -> None:
        _write_atomic(path, data)

    @staticmethod
    def replace(path: PurePath, data: bytes) -> None:
        """Create or replace the file atomically (written aside, then renamed), with its directories."""
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(path, data)

    @staticmethod
    def walk(root: PurePath, skip_top: frozenset[str]) -> dict[str, list[PurePath]]:
        found: dict[str, list[PurePath]] = {}
        stack = [root]
        while stack:
            directory = stack.pop()
            try:
                entries = list(os.scandir(directory))
            except FileNotFoundError:
                continue
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if not (directory == root and entry.name in skip_top):
                        stack.append(Path(entry.path))
                elif entry.is_file(follow_symlinks=False):
                    found.setdefault(entry.name, []).append(Path(entry.path))
        return found

    @staticmethod
    def mtime_ms(path: PurePath) -> int:
        try:
            return int(Path(path).stat().st_mtime * 1000)
        except FileNotFoundError:
            return 0

    @staticmethod
    def remove_empty_dirs(root: PurePath, directories: set, keep: set) -> None:
        for directory in sorted(directories, key=lambda p: len(p.parts), reverse=True):
            while directory not in keep and root in directory.parents:
                try:
                    directory.rmdir()
                except OSError:
                    break
                directory = directory.parent


class ObjectStore:
    """Files of an s3:// warehouse, through the table's pypaimon file IO (its pyarrow S3 filesystem)."""

    def __init__(self, file_io):
        self.file_io = file_io
        self.fs = file_io.filesystem
        self._mtimes: dict[str, int] = {}

    def listdir(self, directory: PurePath) -> list[str]:
        import pyarrow.fs as pafs  # s3:// only: local runs do without it

        infos = self.fs.get_file_info(pafs.FileSelector(str(directory), allow_not_found=True))
        return [PurePosixPath(i.path).name for i in infos]

    def read_bytes(self, path: PurePath) -> bytes | None:
        try:
            with self.fs.open_input_stream(str(path)) as f:
                return f.read()
        except FileNotFoundError:
            return None

    def remove(self, path: PurePath) -> bool:
        import pyarrow.fs as pafs  # s3:// only: local runs do without it

        if self.fs.get_file_info(str(path)).type == pafs.FileType.NotFound:
            return False
        self.fs.delete_file(str(path))
        return True

    def write_new(self, path: PurePath, data: bytes) -> None:
        with self.fs.open_output_stream(str(path)) as f:  # a new, uniquely named file
            f.write(data)

    def write_hint(self, path: PurePath, data: bytes) -> None:
        self.file_io.try_to_write_atomic(f"s3://{path}", data.decode())  # one plain PUT (a hint)

    def replace(self, path: PurePath, data: bytes) -> None:
        """Create or replace the object: S3 stores a written object whole or not at all, so readers see the old
        bytes or the new ones (no condition: the last writer's bytes stand)."""
        with self.fs.open_output_stream(str(path)) as f:
            f.write(data)

    def walk(self, root: PurePath, skip_top: frozenset[str]) -> dict[str, list[PurePath]]:
        import pyarrow.fs as pafs  # s3:// only: local runs do without it

        found: dict[str, list[PurePath]] = {}
        for info in self.fs.get_file_info(pafs.FileSelector(str(root), recursive=True, allow_not_found=True)):
            path = PurePosixPath(info.path)
            if info.type != pafs.FileType.File or path.relative_to(root).parts[0] in skip_top:
                continue
            found.setdefault(path.name, []).append(path)
            if info.mtime_ns is not None:
                self._mtimes[str(path)] = info.mtime_ns // 1_000_000
        return found

    def mtime_ms(self, path: PurePath) -> int:
        if str(path) not in self._mtimes:
            info = self.fs.get_file_info(str(path))
            self._mtimes[str(path)] = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else 0
        return self._mtimes[str(path)]

    @staticmethod
    def remove_empty_dirs(root, directories: set, keep: set) -> None:
        """Object stores have no directories to leave behind."""


class TableFiles:
    """Read access to one table's snapshots and manifests (cached per instance), and the writes upkeep makes."""

    def __init__(self, table, table_dir: Path | PurePosixPath, table_id, store: LocalStore | ObjectStore | None = None):
        self.table = table  # the pypaimon FileStoreTable (schema, partition fields, options, snapshot commit)
        self.table_id = table_id
        self.store = store or LocalStore()
        self.dir: PurePath = table_dir if isinstance(table_dir, PurePosixPath) else Path(table_dir)
        self.manifest_dir = self.dir / "manifest"
        self.snapshot_dir = self.dir / "snapshot"
        self._lists: dict[str, list[str]] = {}
        self._manifests: dict[str, list[ManifestRecord]] = {}
        self._index: dict[str, list[str]] = {}
        self._partitions: dict[bytes, tuple] = {}
        self._keys: dict[bytes, tuple] = {}

    # ------------------------------------------------------------ snapshots
    def snapshot_ids(self) -> list[int]:
        """Ids of the snapshot files present, ascending (expired ones are gone)."""
        ids = [int(m.group(1)) for m in map(_SNAPSHOT_FILE.match, self.store.listdir(self.snapshot_dir)) if m]
        return sorted(ids)

    def snapshot(self, snapshot_id: int):
        """The pypaimon Snapshot, or None when its file is gone."""
        return self._read_snapshot_json(self.snapshot_dir / f"snapshot-{snapshot_id}")

    def _read_snapshot_json(self, path):
        from pypaimon.common.json_util import JSON
        from pypaimon.snapshot.snapshot import Snapshot

        data = self.store.read_bytes(path)
        return None if data is None else JSON.from_json(data.decode("utf-8"), Snapshot)

    def tags(self) -> list:
        """Tagged snapshots (``tag/tag-<name>`` hold a snapshot's JSON): their files are always kept."""
        tag_dir = self.dir / "tag"
        found = (self._read_snapshot_json(tag_dir / n) for n in sorted(self.store.listdir(tag_dir))
                 if n.startswith("tag-"))
        return [s for s in found if s is not None]

    def has_branches(self) -> bool:
        return bool(self.store.listdir(self.dir / "branch"))

    def delete_snapshot_file(self, snapshot_id: int) -> None:
        self.store.remove(self.snapshot_dir / f"snapshot-{snapshot_id}")

    def write_earliest_hint(self, snapshot_id: int) -> None:
        """``snapshot/EARLIEST``: where readers start looking for the first snapshot (replaced atomically)."""
        self.store.write_hint(self.snapshot_dir / "EARLIEST", str(snapshot_id).encode())

    def remove(self, path) -> bool:
        """Delete one file of the table; False when it was already gone (upkeep repeats after a crash)."""
        return self.store.remove(path)

    def mtime_ms(self, path) -> int:
        return self.store.mtime_ms(path)

    # ------------------------------------------------------------ manifests
    def manifest_list(self, name: str) -> list[str]:
        """Manifest file names in a manifest list."""
        if name not in self._lists:
            self._lists[name] = [r["_FILE_NAME"] for r in _avro_records(self._open(self.manifest_dir / name))]
        return self._lists[name]

    def manifest(self, name: str) -> list[ManifestRecord]:
        if name not in self._manifests:
            self._manifests[name] = [_record(r, self._partition_key)
                                     for r in _avro_records(self._open(self.manifest_dir / name))]
        return self._manifests[name]

    def _open(self, path) -> io.BytesIO:
        data = self.store.read_bytes(path)
        if data is None:
            raise FileNotFoundError(str(path))
        return io.BytesIO(data)

    def _partition_key(self, data: bytes) -> tuple:
        """A partition's values: DELETE entries are matched to ADD entries by value, as pypaimon does (two
        serialisations of one partition need not be the same bytes)."""
        if data not in self._partitions:
            from pypaimon.table.row.generic_row import GenericRowDeserializer

            fields = self.table.partition_keys_fields if self.table is not None else []
            self._partitions[data] = tuple(GenericRowDeserializer.from_bytes(data, fields).values) if fields \
                else ()
        return self._partitions[data]

    def key_order(self):
        """A function giving each key's sort value (a tuple comparing as Paimon orders keys), or None when this
        table's key types have no such Python order here (floating point: NaN; binary; nested types)."""
        fields = self.table.trimmed_primary_keys_fields if self.table is not None else []
        if not fields or any(not _ordered_type(str(f.type)) for f in fields):
            return None

        def order(data: bytes) -> tuple:
            if data not in self._keys:
                from pypaimon.table.row.generic_row import GenericRowDeserializer

                values = tuple(GenericRowDeserializer.from_bytes(data, fields).values)
                if len(values) != len(fields) or None in values:
                    raise SinkError(f"table {self.table_id}: a data file's key statistics do not hold the "
                                    f"primary key ({len(values)} values)")
                self._keys[data] = values
            return self._keys[data]
        return order

    def data_manifests(self, snapshot) -> list[str]:
        """The manifests of a snapshot's full state: base list, then delta list."""
        return self.manifest_list(snapshot.base_manifest_list) + self.manifest_list(snapshot.delta_manifest_list)

    def live_entries(self, snapshot) -> list[ManifestRecord]:
        return merge_records([r for m in self.data_manifests(snapshot) for r in self.manifest(m)])

    def index_files(self, index_manifest: str) -> list[str]:
        """Index file names of an index manifest (it holds the full index state of its snapshot)."""
        if index_manifest not in self._index:
            from pypaimon.manifest.index_manifest_file import IndexManifestFile

            entries = IndexManifestFile(self.table).read(index_manifest)
            self._index[index_manifest] = [e.index_file.file_name for e in entries if e.kind == ADD]
        return self._index[index_manifest]

    def references(self, snapshot, *, full_state_only: bool) -> References:
        """Every file ``snapshot`` references. ``full_state_only`` (a snapshot that stays): its metadata files, the
        live data files of its full state, the files its delta and changelog add and its index files; data files
        only named by DELETE entries are not needed by it. Otherwise (a snapshot being expired): every file named
        anywhere in its metadata, the candidates for deletion."""
        refs = References()
        lists = [snapshot.base_manifest_list, snapshot.delta_manifest_list, snapshot.changelog_manifest_list]
        lists = [name for name in lists if name]
        refs.names.update(lists)
        manifests = [m for name in lists for m in self.manifest_list(name)]
        refs.names.update(manifests)
        if full_state_only:
            records = self.live_entries(snapshot)
            records += [r for m in self.manifest_list(snapshot.delta_manifest_list) for r in self.manifest(m)
                        if r.kind == ADD]
            if snapshot.changelog_manifest_list:
                records += [r for m in self.manifest_list(snapshot.changelog_manifest_list)
                            for r in self.manifest(m) if r.kind == ADD]
        else:
            records = [r for m in manifests for r in self.manifest(m)]
        for r in records:
            if r.external_path:
                refs.external.add(r.external_path)
            else:
                refs.names.add(r.name)
            refs.names.update(r.extra_files)
        if snapshot.index_manifest:
            refs.names.add(snapshot.index_manifest)
            refs.names.update(self.index_files(snapshot.index_manifest))
        if snapshot.statistics:
            refs.names.add(snapshot.statistics)
        return refs

    # --------------------------------------------------------------- writes
    def write_merged_manifests(self, records: list[ManifestRecord], target_size: int) -> list:
        """Write ``records`` (live ADD entries) as new manifest files of about ``target_size`` bytes each;
        returns their pypaimon ManifestFileMeta, ready for a manifest list."""
        from pypaimon.manifest import avro_codec
        from pypaimon.manifest.schema.manifest_entry import MANIFEST_ENTRY_SCHEMA

        import fastavro  # heavy: lazy for start-up time (a run with nothing to write reads no manifest)

        schema = fastavro.parse_schema(MANIFEST_ENTRY_SCHEMA)
        codec = avro_codec(self.table.options.manifest_compression())
        prefix = f"manifest-{uuid.uuid4()}"
        metas: list = []
        chunk: list[ManifestRecord] = []
        buffer = io.BytesIO()
        writer = fastavro.write.Writer(buffer, schema, codec=codec)
        try:
            for i, record in enumerate(records):
                writer.write(record.record)
                chunk.append(record)
                # checked every 1000 records, as Paimon's rolling manifest writer does
                if (i + 1) % 1000 == 0 and buffer.tell() >= target_size:
                    writer.flush()
                    metas.append(self._flush_manifest(f"{prefix}-{len(metas)}", buffer.getvalue(), chunk))
                    chunk, buffer = [], io.BytesIO()
                    writer = fastavro.write.Writer(buffer, schema, codec=codec)
            if chunk:
                writer.flush()
                metas.append(self._flush_manifest(f"{prefix}-{len(metas)}", buffer.getvalue(), chunk))
        except BaseException:
            for meta in metas:
                self.store.remove(self.manifest_dir / meta.file_name)
            raise
        return metas

    def _flush_manifest(self, name: str, data: bytes, records: list[ManifestRecord]):
        from pypaimon.manifest.schema.manifest_file_meta import ManifestFileMeta
        from pypaimon.manifest.schema.simple_stats import SimpleStats
        from pypaimon.table.row.generic_row import GenericRow, GenericRowDeserializer

        self.store.write_new(self.manifest_dir / name, data)
        fields = self.table.partition_keys_fields
        columns = list(zip(*(GenericRowDeserializer.from_bytes(r.partition, fields).values for r in records))) \
            if fields else []
        buckets = {r.record["_TOTAL_BUCKETS"] for r in records}
        total_buckets = buckets.pop() if len(buckets) == 1 else None
        row_ids = [r.record["_FILE"].get("_FIRST_ROW_ID") for r in records]
        return ManifestFileMeta(
            file_name=name, file_size=len(data), num_added_files=len(records), num_deleted_files=0,
            partition_stats=SimpleStats(
                min_values=GenericRow([min((v for v in c if v is not None), default=None) for c in columns],
                                      fields),
                max_values=GenericRow([max((v for v in c if v is not None), default=None) for c in columns],
                                      fields),
                null_counts=[sum(1 for v in c if v is None) for c in columns]),
            schema_id=max(r.record["_FILE"]["_SCHEMA_ID"] for r in records),
            min_bucket=min(r.bucket for r in records), max_bucket=max(r.bucket for r in records),
            min_level=min(r.level for r in records), max_level=max(r.level for r in records),
            # row ids (row tracking) are only summarised when every file has them, as pypaimon does
            min_row_id=None if None in row_ids else min(row_ids),
            max_row_id=None if None in row_ids else max(
                r.record["_FILE"]["_FIRST_ROW_ID"] + r.row_count - 1 for r in records),
            total_buckets=total_buckets if total_buckets is not None and total_buckets > 0 else None)

    def write_manifest_list(self, metas: list) -> tuple[str, int]:
        from pypaimon.manifest.manifest_list_manager import ManifestListManager

        name = f"manifest-list-{uuid.uuid4()}-0"
        size = ManifestListManager(self.table).write(name, metas)
        return name, size

    def commit_snapshot(self, latest, *, base: tuple[str, int], delta: tuple[str, int], total_record_count: int,
                        commit_user: str, commit_kind: str, properties: dict[str, str]) -> int:
        """Publish snapshot ``latest.id + 1`` with the given manifest lists and everything else of ``latest``
        (schema, index manifest, watermark, row ids) through pypaimon's atomic snapshot commit."""
        from pypaimon.snapshot.snapshot import BATCH_COMMIT_IDENTIFIER, Snapshot

        try:
            from pypaimon.build_info import full_version
            writer_version = full_version()
        except Exception:  # noqa: BLE001 - informative field only
            writer_version = None
        snapshot = Snapshot(
            version=3, id=latest.id + 1, schema_id=self.table.table_schema.id,
            base_manifest_list=base[0], base_manifest_list_size=base[1],
            delta_manifest_list=delta[0], delta_manifest_list_size=delta[1],
            total_record_count=total_record_count, delta_record_count=0, commit_user=commit_user,
            commit_identifier=BATCH_COMMIT_IDENTIFIER, commit_kind=commit_kind, time_millis=int(time.time() * 1000),
            watermark=latest.watermark, next_row_id=latest.next_row_id, index_manifest=latest.index_manifest,
            properties=dict(properties), writer_version=writer_version)
        committer = self.table.new_snapshot_commit()
        with committer:
            if not committer.commit(latest.uuid, snapshot, []):
                raise CommitConflictError(f"table {self.table_id}: upkeep commit conflict: another writer "
                                          f"published snapshot {snapshot.id} first (a run, another upkeep or an "
                                          f"external engine); upkeep published nothing")
        return snapshot.id

    # ----------------------------------------------------------- file walk
    def walk_files(self) -> dict:
        """Every file under the table directory outside the metadata directories (data, changelog, index,
        manifest, statistics, leftovers), by name."""
        return self.store.walk(self.dir, METADATA_DIRS)

    def remove_empty_dirs(self, directories: set) -> None:
        """Remove now-empty bucket and partition directories (never the table's own top-level directories)."""
        keep = {self.dir, self.manifest_dir, self.dir / "index", self.dir / "statistics"}
        self.store.remove_empty_dirs(self.dir, directories, keep)


def open_table_files(table, table_id) -> TableFiles:
    """The TableFiles of a pypaimon table of a local or object-store (s3://) warehouse."""
    table_path = str(table.table_path)
    if is_object_store(table_path):
        return TableFiles(table, PurePosixPath(table.file_io.to_filesystem_path(table_path)), table_id,
                          ObjectStore(table.file_io))
    table_dir = local_warehouse_path(table_path)
    if table_dir is None or not table_dir.is_dir():
        raise SinkError(f"table {table_id}: cannot reach the table directory {table_path}")
    return TableFiles(table, table_dir, table_id)


def _avro_records(data: io.BytesIO) -> Iterator[dict[str, Any]]:
    """The records of an Avro file whose schema is a record (as every manifest's is)."""
    import fastavro  # heavy: lazy for start-up time (a run with nothing to write reads no manifest)

    return cast("Iterator[dict[str, Any]]", iter(fastavro.reader(data)))


def _remove(path: PurePath) -> bool:
    """Delete one file; False when it was already gone (upkeep repeats after a crash)."""
    try:
        os.remove(path)
        return True
    except FileNotFoundError:
        return False


def _write_atomic(path: PurePath, content: str | bytes) -> None:
    data = content.encode() if isinstance(content, str) else content
    temp = path.with_name(f".{path.name}.{uuid.uuid4()}.tmp")
    try:
        with open(temp, "wb") as f:
            f.write(data)
        os.replace(temp, path)
    except BaseException:
        try:
            os.remove(temp)
        except OSError:
            pass
        raise


def remove_file(path: Path) -> bool:
    return _remove(path)
