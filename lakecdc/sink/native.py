"""The one place that touches pypaimon internals: the native (Rust) writer, row kinds and the commit user.

Why private attributes at all:

* pypaimon's pure-Python primary-key writer records ``delete_row_count=0`` for files holding ``-D``/``-U`` rows, so
  readers return deleted rows as live rows. Only the Rust writer (pypaimon-rust, behind ``write.native.enabled``)
  is correct, and pypaimon falls back to the Python writer *silently* when the native path is unavailable. We
  therefore check the writer's concrete type and its internals and refuse to write otherwise.
* Flink CDC's tables have no row-kind column. The Rust writer takes the row kind of every row from an extra int8
  column ``_VALUE_KIND`` appended after the table's columns, but pypaimon's public ``NativeTableWrite.write_arrow``
  rejects any column the table does not have, so batches go straight to ``NativeTableWrite._native_writer``.
* Flink CDC's commit user is ``prefix + uuid`` (no separator); pypaimon only sets an explicit commit user through
  the private ``WriteBuilder._with_commit_user``.

Everything here is verified against exactly the versions in ``VERIFIED_VERSIONS`` by tests/test_sink.py (which reads
the results back through pypaimon-rust's standalone reader). Any other version is refused with a SinkError: re-run
those tests against the new version, then update ``VERIFIED_VERSIONS``.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

import pyarrow as pa

from lakecdc.errors import CommitConflictError, SinkError

VERIFIED_VERSIONS = {"pypaimon": "2.1.0", "pypaimon-rust": "0.4.0"}

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
    """A batch write builder carrying ``commit_user``; ``overwrite`` (a static partition, ``{}`` = the whole table)
    makes its writes and commit an overwrite, None appends."""
    builder = table.new_batch_write_builder()
    builder._with_commit_user(commit_user)
    if overwrite is not None:
        builder.overwrite(dict(overwrite))
    return builder


def new_native_write(table, commit_user: str, table_id, overwrite: dict | None = None) -> tuple[Any, Any]:
    """A batch write builder carrying ``commit_user`` and its write; SinkError unless the write is the Rust one.

    The Rust writer is bound to the thread that created it (pyo3 ``unsendable``): use it, and close it, on that
    thread only."""
    builder = new_write_builder(table, commit_user, overwrite)
    write = builder.new_write()
    problem = _native_problem(write)
    if problem is None and getattr(write, "commit_user", None) != commit_user:
        problem = f"the writer's commit user is {getattr(write, 'commit_user', None)!r}, not {commit_user!r}"
    if problem is not None:
        _close_quietly(write)
        raise SinkError(
            f"table {table_id}: the native (Rust) Paimon writer is not active ({problem}). pypaimon's Python "
            f"writer makes deleted rows visible again, so lakecdc refuses to write. Causes: pypaimon-rust missing "
            f"or broken, or a table setting the native writer does not support (file.format other than parquet, "
            f"float/binary partition keys, deletion vectors with partial-update/aggregation, ...)."
        )
    return builder, write


def _native_problem(write) -> str | None:
    if type(write).__name__ != "NativeTableWrite" or type(write).__module__ != "pypaimon.write.native_write":
        return f"pypaimon returned {type(write).__module__}.{type(write).__qualname__}"
    d = vars(write)
    if "_native_writer" not in d or "_python_writer" not in d or "_written" not in d:
        return "NativeTableWrite no longer has _native_writer/_python_writer/_written: pypaimon changed"
    if d["_python_writer"] is not None:
        return "NativeTableWrite switched to its Python writer"
    if d["_native_writer"] is None or not callable(getattr(d["_native_writer"], "write_arrow", None)):
        return "NativeTableWrite has no Rust writer"
    return None


def assert_native(write, table_id) -> None:
    """Fail unless ``write`` is still backed by the Rust writer (checked before every write and the commit)."""
    problem = _native_problem(write)
    if problem is not None:
        raise SinkError(f"table {table_id}: the native Paimon writer is no longer active ({problem})")


def write_with_row_kinds(write, batch: pa.RecordBatch, table_id, bucket: int | None = None) -> None:
    """Hand a batch = table columns in table order + int8 ``_VALUE_KIND`` to the Rust writer (into ``bucket`` when
    given, instead of the bucket the writer assigns)."""
    assert_native(write, table_id)
    if batch.schema.names[-1] != VALUE_KIND_COLUMN or batch.schema.field(-1).type != VALUE_KIND_TYPE:
        raise SinkError(f"table {table_id}: internal error: batch must end with an int8 {VALUE_KIND_COLUMN} column")
    # From now on pypaimon must never switch this write to its Python writer (that would drop the Rust writer's
    # buffered rows); NativeTableWrite refuses to switch once _written is set, as after its own write_arrow.
    write._written = True
    write._native_writer.write_arrow(batch, bucket)


def _close_quietly(write) -> None:
    try:
        write.close()
    except Exception:  # noqa: BLE001 - best effort while reporting the real problem
        pass


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
                raise CommitConflictError(conflict_message(
                    table_id, base_snapshot_id, f"another writer published snapshot {snapshot.id} first"))
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
