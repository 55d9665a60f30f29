"""The one place that touches pypaimon internals: the native (Rust) writer, row kinds and the commit user.

Why private attributes at all:

* pypaimon's pure-Python primary-key writer records ``delete_row_count=0`` for files holding ``-D``/``-U`` rows, so
  readers return deleted rows as live rows. Only the Rust writer (pypaimon-rust) is correct, and pypaimon falls back
  to the Python writer *silently* for table settings the Rust writer does not support. lakecdc therefore opens
  pypaimon-rust's writer itself, as pypaimon's ``create_native_write`` does (:class:`RustWriteTarget`), and refuses
  those settings (:func:`rust_write_problem`, pypaimon's own conditions) instead of falling back.
* Opening it from the table's stored schema needs no pypaimon catalog (whose import, with pandas and polars, costs
  about 0.4 s): pypaimon's table is loaded only for the commit, while the Rust writer prepares its files on its own
  thread (lakecdc.sink.writer).
* Flink CDC's tables have no row-kind column. The Rust writer takes the row kind of every row from an extra int8
  column ``_VALUE_KIND`` appended after the table's columns (pypaimon's ``NativeTableWrite.write_arrow`` would reject
  that column; lakecdc hands batches to the Rust writer directly).
* Flink CDC's commit user is ``prefix + uuid`` (no separator); the writers only take an explicit commit user through
  the private ``_with_commit_user``.

Everything here is verified against exactly the versions in ``VERIFIED_VERSIONS`` by tests/test_sink.py (which reads
the results back through pypaimon-rust's standalone reader, and compares :class:`RustWriteTarget` with what
pypaimon builds). Any other version is refused with a SinkError: re-run those tests against the new version, then
update ``VERIFIED_VERSIONS``.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any, Callable

import pyarrow as pa
from pypaimon.common.json_util import JSON
from pypaimon.common.options import Options
from pypaimon.common.options.core_options import CoreOptions, MergeEngine
from pypaimon.schema.data_types import PyarrowFieldParser
from pypaimon.schema.table_schema import TableSchema

from lakecdc.errors import CommitConflictError, SinkError

VERIFIED_VERSIONS = {"pypaimon": "2.1.0", "pypaimon-rust": "0.4.0"}
MAIN_BRANCH = "main"  # the only branch lakecdc writes

# Dynamic options (table.copy) applied whenever we use a table; never persisted in the table's schema.
NATIVE_OPTIONS = {
    "write.native.enabled": "true",
    "commit.native.enabled": "true",
    "read.native.enabled": "true",
    "scan.native-plan.enabled": "true",
}

# Dynamic options of every commit: a commit that finds another writer's snapshot in its place fails instead of being
# re-planned on top of it (pypaimon retries up to 10 times by default, publishing this run's older checkpoint after
# the other writer's newer one).
COMMIT_OPTIONS = {"commit.max-retries": "0"}

VALUE_KIND_COLUMN = "_VALUE_KIND"  # int8: 0 +I, 1 -U, 2 +U, 3 -D (Paimon RowKind byte values)
VALUE_KIND_TYPE = pa.int8()

_versions_checked = False


def check_library_versions() -> None:
    """Refuse library versions whose internals were not verified (see the module docstring)."""
    global _versions_checked
    if _versions_checked:
        return
    for dist, expected in VERIFIED_VERSIONS.items():
        try:
            found = metadata.version(dist)
        except metadata.PackageNotFoundError:
            raise SinkError(
                f"{dist}=={expected} is required by the Paimon sink (the native writer is the only correct "
                f"primary-key writer) but it is not installed"
            ) from None
        if found != expected:
            raise SinkError(
                f"{dist} {found} is installed but the Paimon sink's use of its internals was verified with "
                f"{dist}=={expected} only: install {expected}, or re-run tests/test_sink.py against {found} and "
                f"update VERIFIED_VERSIONS in {__name__}"
            )
    _versions_checked = True


def new_write_builder(table, commit_user: str, overwrite: dict | None = None):
    """pypaimon's batch write builder carrying ``commit_user`` (its commit publishes the Rust writer's files);
    ``overwrite`` (a static partition, ``{}`` = the whole table) makes its commit an overwrite, None appends."""
    builder = table.new_batch_write_builder()
    builder._with_commit_user(commit_user)
    if overwrite is not None:
        builder.overwrite(dict(overwrite))
    return builder


def _option_string(value) -> str:
    """An option value as pypaimon hands it to Rust (``_option_value_to_string``: Rust parses booleans
    case-sensitively)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def rust_write_problem(table_schema: TableSchema) -> str | None:
    """Why pypaimon would not give this table's batch writes to the Rust writer (the conditions of its
    ``create_native_write`` and ``create_native_write_table``, for a table whose schema carries every effective
    option), or None. pypaimon would use its Python writer there; lakecdc refuses to write instead."""
    options = CoreOptions(Options(dict(table_schema.options)))
    merge_engine = options.merge_engine()
    if options.deletion_vectors_enabled() and merge_engine in (MergeEngine.PARTIAL_UPDATE, MergeEngine.AGGREGATE):
        return f"deletion vectors with merge-engine {merge_engine.value}"
    if options.file_format() != "parquet":
        return f"file.format {options.file_format()!r} (the Rust writer writes parquet only)"
    if options.changelog_file_format() not in (None, "parquet"):
        return f"changelog-file.format {options.changelog_file_format()!r} (the Rust writer writes parquet only)"
    fields = {f.name: f.type for f in PyarrowFieldParser.from_paimon_schema(table_schema.fields)}
    for name in table_schema.partition_keys:
        data_type = fields[name]
        if pa.types.is_floating(data_type) or pa.types.is_binary(data_type) or pa.types.is_large_binary(data_type) \
                or pa.types.is_fixed_size_binary(data_type):
            return f"partition key {name!r} of type {data_type} (the Rust writer cannot encode it)"
    if options.video_frame_fields():
        return "video frame fields"
    if options.query_auth_enabled:
        return "query authorization"
    return None


def _native_table_options(options: dict[str, str]) -> dict[str, str]:
    """The options pypaimon's ``create_native_write_table`` gives the Rust table: every effective option, and four
    with pypaimon's parsed value (its boolean spellings such as "off" are not Rust's)."""
    core = CoreOptions(Options(dict(options)))
    return {**options,
            "dynamic-partition-overwrite": _option_string(core.dynamic_partition_overwrite()),
            "snapshot.ignore-empty-commit": _option_string(core.snapshot_ignore_empty_commit()),
            "row-tracking.partition-group-on-commit": _option_string(core.row_tracking_partition_group_on_commit()),
            "data-evolution.row-sidecar.enabled": _option_string(core.data_evolution_row_sidecar_enabled())}


class RustWriteTarget:
    """One table as pypaimon-rust's writer opens it, and pypaimon's table of it for the commit.

    ``table_schema`` carries every effective option (the stored ones and the write's dynamic ones).
    :meth:`open_batch_write` opens the Rust writer as pypaimon's ``create_native_write`` does for a batch write, from
    the table's location, schema and warehouse options only: no pypaimon catalog, whose import costs about 0.4 s.
    ``load_table`` returns pypaimon's table (with the same dynamic options); :meth:`table` calls it once, for the
    commit."""

    def __init__(self, table_id, table_schema: TableSchema, *, open_native_table: Callable[[], Any],
                 load_table: Callable[[], Any]):
        self.table_id = table_id
        self.table_schema = table_schema
        self.primary_keys: list[str] = list(table_schema.primary_keys)
        self.partition_keys: list[str] = list(table_schema.partition_keys)
        self.options = {str(k): str(v) for k, v in table_schema.options.items() if v is not None}
        self._open_native_table = open_native_table
        self._load_table = load_table
        self._table: Any = None

    @classmethod
    def of_stored_table(cls, table_id, table_schema: TableSchema, table_path: str, dynamic_options: dict[str, str],
                        warehouse_options: dict[str, str], load_table: Callable[[], Any]) -> "RustWriteTarget":
        """A filesystem-metastore table from its stored schema (``table_path``: its directory as pypaimon's catalog
        names it; ``warehouse_options``: the normalized catalog options, which pypaimon gives the Rust table as its
        file IO options)."""
        options = {str(k): _option_string(v) for k, v in {**table_schema.options, **dynamic_options}.items()
                   if v is not None}
        effective = table_schema.copy(new_options=options)
        file_io_options = {str(k): _option_string(v) for k, v in warehouse_options.items() if v is not None}

        def open_native_table():
            from pypaimon_rust.datafusion import Table as NativeTable  # here: its absence is this table's refusal

            schema_json = JSON.to_json(effective.copy(new_options=_native_table_options(options)))
            return NativeTable.from_resolved_schema(table_path, schema_json, database=table_id.database,
                                                    table=table_id.table, branch=MAIN_BRANCH, options=file_io_options)

        return cls(table_id, effective, open_native_table=open_native_table, load_table=load_table)

    @classmethod
    def of_table(cls, table_id, table) -> "RustWriteTarget":
        """A table pypaimon's catalog loaded (a jdbc metastore), opened as pypaimon opens it."""
        def open_native_table():
            from pypaimon.write.native_commit import create_native_write_table  # heavy: pypaimon's read stack

            native_table = create_native_write_table(table)
            if native_table is None:
                raise SinkError(not_native_message(table_id, "pypaimon does not open this table's Rust writer"))
            return native_table

        return cls(table_id, table.table_schema, open_native_table=open_native_table, load_table=lambda: table)

    def problem(self) -> str | None:
        """Why the Rust writer cannot write this table (:func:`rust_write_problem`), or None."""
        return rust_write_problem(self.table_schema)

    def open_batch_write(self, commit_user: str, overwrite: dict | None = None) -> "RustBatchWrite":
        """pypaimon-rust's batch write for ``commit_user`` (``overwrite``: see new_write_builder). It is bound to the
        calling thread (pyo3 ``unsendable``): use it, and close it, there only."""
        try:
            native_table = self._open_native_table()
        except ImportError as error:
            raise SinkError(not_native_message(self.table_id, f"pypaimon-rust cannot be imported: {error}")) from None
        builder = native_table.new_batch_write_builder()._with_commit_user(commit_user)
        if overwrite is not None:
            builder = builder.with_overwrite(dict(overwrite))
        return RustBatchWrite(builder.new_write())

    def table(self) -> Any:
        """pypaimon's table, loaded at the first call (it imports pypaimon's catalog)."""
        if self._table is None:
            self._table = self._load_table()
        return self._table


class RustBatchWrite:
    """pypaimon-rust's batch write, held so that closing it also frees it. The Rust object may only be freed on the
    thread that created it (pyo3 ``unsendable``: elsewhere pyo3 reports an error instead), and a failed write's
    traceback keeps the frames that referenced the write alive until a garbage collection on any thread: those
    frames reference this holder, whose Rust object is gone once it was closed on its own thread."""

    def __init__(self, native_write: Any):
        self._native: Any = native_write

    def write_arrow(self, batch: pa.RecordBatch, bucket: int | None = None) -> None:
        self._native.write_arrow(batch, bucket)

    def prepare_commit(self) -> list:
        """The commit messages of every row written since the last call (the Rust writer writes its files here)."""
        return self._native.prepare_commit()

    def close(self) -> None:
        """Close and free the Rust writer (it deletes the files it still owns, not the prepared ones)."""
        native_write, self._native = self._native, None
        if native_write is not None:
            native_write.close()


def not_native_message(table_id, problem: str) -> str:
    return (f"table {table_id}: the native (Rust) Paimon writer is not active ({problem}). pypaimon's Python writer "
            f"makes deleted rows visible again, so lakecdc refuses to write. Causes: pypaimon-rust missing or broken, "
            f"or a table setting the native writer does not support (file.format other than parquet, float/binary "
            f"partition keys, deletion vectors with partial-update/aggregation, ...).")


def commit_messages(table, native_messages: list) -> list:
    """pypaimon's commit messages of the Rust writer's ones (``prepare_commit``), for pypaimon's commit."""
    from pypaimon.write.native_commit import from_native_commit_messages  # heavy: pypaimon's read stack

    return from_native_commit_messages(table, native_messages)


def write_with_row_kinds(write, batch: pa.RecordBatch, table_id, bucket: int | None = None) -> None:
    """Hand a batch = table columns in table order + int8 ``_VALUE_KIND`` to the Rust writer (into ``bucket`` when
    given, instead of the bucket the writer assigns)."""
    if batch.schema.names[-1] != VALUE_KIND_COLUMN or batch.schema.field(-1).type != VALUE_KIND_TYPE:
        raise SinkError(f"table {table_id}: internal error: batch must end with an int8 {VALUE_KIND_COLUMN} column")
    write.write_arrow(batch, bucket)


def truncate_table(table, table_id, commit_user: str, properties: dict[str, str], base_snapshot_id: int) -> None:
    """One OVERWRITE snapshot ``base_snapshot_id + 1`` that removes every data file and carries ``properties``
    (pypaimon's public ``truncate_table`` cannot attach snapshot properties, which hold lakecdc's checkpoint)."""
    from pypaimon.write.table_commit import BATCH_COMMIT_IDENTIFIER

    guard_snapshot_commit(table, table_id, base_snapshot_id)
    table_commit = new_write_builder(table, commit_user).new_commit()
    try:
        store_commit = table_commit.file_store_commit
        provider = store_commit._overwrite_changes_provider(None, [])
        store_commit._try_commit(commit_kind="OVERWRITE", commit_identifier=BATCH_COMMIT_IDENTIFIER,
                                 commit_entries_plan=provider.provide, detect_conflicts=True, allow_rollback=False,
                                 snapshot_properties=dict(properties), allow_empty_commit=True)
    finally:
        table_commit.close()


def commit_schema_change(table, table_id, changes: list, base_schema_id: int | None,
                         defaults: dict[str, str] | None = None) -> int:
    """Apply pypaimon SchemaChanges as exactly schema ``base_schema_id + 1`` (the schema this writer planned the
    change from; None: the latest one now), with the columns of ``defaults`` carrying those default values
    (pypaimon's ``alter_table`` cannot set them: UpdateColumnDefaultValue is not implemented). Returns the new
    schema id. pypaimon's own ``commit_changes`` re-plans a change on top of whatever schema another writer
    published meanwhile, so two writers evolving one table could each apply their change over the other's; here
    a moved base, or a ``schema-N`` another writer published first (the publication is conditional: put-if-absent
    on S3, a rename that refuses an existing file locally), raises CommitConflictError instead."""
    from pypaimon.schema.schema_manager import SchemaManager

    manager = SchemaManager(table.file_io, table.table_path)
    latest = manager.latest()
    base = latest.id if base_schema_id is None else base_schema_id
    if latest.id != base:
        raise CommitConflictError(schema_conflict_message(table_id, base, f"the table's latest schema is {latest.id}"))
    new_schema = manager._generate_table_schema(latest, list(changes))
    for data_field in new_schema.fields:
        if defaults and data_field.name in defaults:
            data_field.default_value = defaults[data_field.name]
    if not manager.commit(new_schema):
        raise CommitConflictError(schema_conflict_message(
            table_id, base, f"another writer published schema {new_schema.id} first"))
    return new_schema.id


def schema_conflict_message(table_id, base_schema_id: int, found: str) -> str:
    return (f"table {table_id}: schema commit conflict: {found} after this writer planned its schema change from "
            f"schema {base_schema_id}, so the change was not published. Another writer (a concurrent run or an "
            f"external engine) is changing this table's schema; run the pipeline again: it resumes from the "
            f"checkpoint in the newest snapshot")


def conflict_message(table_id, base_snapshot_id: int, found: str) -> str:
    return (f"table {table_id}: commit conflict: {found} after this writer loaded its state from snapshot "
            f"{base_snapshot_id or 'none (empty table)'}, so this commit was not published (nothing of it is "
            f"visible). Another writer (a concurrent run, upkeep, or an external engine) is writing this table; "
            f"run the pipeline again: it resumes from the checkpoint in the newest snapshot")


def guard_snapshot_commit(table, table_id, base_snapshot_id: int) -> None:
    """Make every snapshot ``table`` (this pypaimon table object) publishes be exactly snapshot
    ``base_snapshot_id + 1``: pypaimon plans a commit on the latest snapshot it finds, which after another writer's
    commit is not the one this writer's checkpoint came from. The conditional publication of ``snapshot-N``
    (lakecdc.sink.object_store, or the rename of a local warehouse under its table lock) makes check and publish
    one atomic step. Raises CommitConflictError (through pypaimon, as the cause of its error)."""
    from pypaimon.snapshot.snapshot_commit import SnapshotCommit

    new_snapshot_commit = type(table).new_snapshot_commit.__get__(table)

    class BaseCheckedSnapshotCommit(SnapshotCommit):
        def __init__(self, inner):
            self.inner = inner

        def commit(self, base_snapshot_uuid, snapshot, statistics) -> bool:
            if snapshot.id != base_snapshot_id + 1:
                raise CommitConflictError(conflict_message(
                    table_id, base_snapshot_id, f"the table's latest snapshot is {snapshot.id - 1}"))
            if not self.inner.commit(base_snapshot_uuid, snapshot, statistics):
                found = f"another writer published snapshot {snapshot.id} first"
                if not table.file_io.exists(table.snapshot_manager().get_snapshot_path(snapshot.id)):
                    found += (" and table upkeep has expired it since (this writer stalled for longer than "
                              "snapshot.time-retained)")
                raise CommitConflictError(conflict_message(table_id, base_snapshot_id, found))
            return True

        def close(self):
            self.inner.close()

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.close()
            return False

    table.new_snapshot_commit = lambda: BaseCheckedSnapshotCommit(new_snapshot_commit())


def commit_conflict(error: BaseException | None) -> CommitConflictError | None:
    """The CommitConflictError behind ``error`` (pypaimon wraps what its snapshot commit raises), or None."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, CommitConflictError):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None
