"""A re-snapshot's record of what it wrote, and its sweep: the Paimon rows the re-snapshot must remove, found in
bounded memory.

A re-snapshot rewrites a table (or one partition) from MySQL in commit groups, like a first snapshot, so it never
holds the table. Rows Paimon has and MySQL no longer has (a key deleted while the binlog was not read, a drifted
table) are found at the end, by what the re-snapshot did NOT write: every key it wrote (an upsert, or a delete the
binlog brought) is recorded, and after its last group every active Paimon key it did not record is stale and gets
deleted (or marked deleted, in a SOFT_DELETE table) in the last group's commit.

Neither the recorded keys nor Paimon's keys are held whole: both sides are hash-partitioned by key into Arrow IPC
files in a temporary directory (about :data:`KEYS_PER_PARTITION` keys per partition), and each partition is
compared on its own. Paimon is read batch by batch (lakecdc.sink.PaimonSink.read_batches). A group's keys are
recorded when its commit succeeds (a group read again, after a lost connection or a changed chunk, records once).

The same pass tells what the re-snapshot changed, in the words of a binlog commit: against the table as it was
before the re-snapshot, a key it wrote alive is ``inserted`` (Paimon did not hold it, or held it marked deleted),
``updated`` (a compared value differs: a hash of the columns computed from MySQL columns) or ``unchanged``; a key
whose last write was a delete, and each stale key, is ``deleted``.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.config import PipelineConfig
from lakecdc.errors import LakeCdcError
from lakecdc.model import DELETE, INSERT, OP_COLUMN, UPDATE_AFTER, TableId
from lakecdc.runtime.report import count_partitions
from lakecdc.runtime.plan import TargetPlan, soft_delete_column
from lakecdc.sink import PaimonSink

KEYS_PER_PARTITION = 250_000  # keys compared at once by the sweep: its memory (the tables joined) stays small
_HASH = "__lakecdc_values_hash__"
_ALIVE = "__lakecdc_alive__"
_SEQ = "__lakecdc_seq__"


def partition_mask(data: pa.Table, spec: dict[str, str | None]) -> pa.Array:
    """The rows of ``data`` in the partition ``spec`` ({column: value as Paimon spells it, None for NULL})."""
    mask = pa.repeat(pa.scalar(True), data.num_rows)
    for key, value in spec.items():
        column = data.column(key)
        if value is None:
            part = pc.is_null(column)
        else:
            part = pc.fill_null(pc.equal(pc.cast(column, pa.string()), value), False)
        mask = pc.and_(mask, part)
    return mask


def _hashes(table: pa.Table) -> np.ndarray:
    """A 64-bit hash of each row of ``table`` (every column), the same for equal rows of equal types."""
    import polars as pl  # heavy import: only a re-snapshot's sweep needs it

    if table.num_columns == 0:
        return np.zeros(table.num_rows, dtype=np.uint64)
    return pl.DataFrame(table.combine_chunks()).hash_rows(seed=0).to_numpy()


class _Partitioned:
    """Tables of one schema hash-partitioned by ``keys`` into ``count`` Arrow IPC files under ``directory``."""

    def __init__(self, directory: str, name: str, keys: list[str], count: int):
        self.keys, self.count = keys, count
        self.paths = [os.path.join(directory, f"{name}-{i}.arrows") for i in range(count)]
        self._writers: list = [None] * count
        self._schema: pa.Schema | None = None

    def add(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        if self._schema is None:
            self._schema = table.schema
        table = table.cast(self._schema)
        if self.count == 1:
            self._write(0, table)
            return
        parts = _hashes(table.select(self.keys)) % np.uint64(self.count)
        for i in np.unique(parts):
            self._write(int(i), table.filter(pa.array(parts == i)))

    def _write(self, i: int, table: pa.Table) -> None:
        if self._writers[i] is None:
            self._writers[i] = pa.ipc.new_stream(self.paths[i], table.schema)
        self._writers[i].write_table(table)

    def close(self) -> None:
        for i, writer in enumerate(self._writers):
            if writer is not None:
                writer.close()
                self._writers[i] = None

    def read(self, i: int, empty: pa.Schema) -> pa.Table:
        """Partition ``i`` in the order its rows were added (``empty``: the schema when nothing was added)."""
        if self._writers[i] is not None:
            self._writers[i].close()
            self._writers[i] = None
        if not os.path.exists(self.paths[i]):
            return (self._schema or empty).empty_table()
        with pa.ipc.open_stream(self.paths[i]) as reader:
            return reader.read_all()


@dataclass
class SweepOutcome:
    """What a re-snapshot changed (see the module docstring) and the stale rows it removed."""

    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    stale: int = 0
    partitions: int = 1  # hash partitions the sweep compared
    stale_partitions: dict[str, dict[str, int]] = field(default_factory=dict)  # Paimon partition → kind → rows


class Replacement:
    """The keys one re-snapshot of ``target`` writes, and its sweep. ``keys``: the Paimon table's primary key;
    ``compared``: the columns a re-read row is compared on; ``marker``: the SOFT_DELETE column holding
    ``__data_event_type__`` (None: deletes are deletes; ``soft_delete`` without a marker cannot delete); ``spec``:
    the one partition re-snapshotted ({column: value text, None for NULL}), None for the whole table;
    ``base_snapshot``: the table's snapshot before the re-snapshot (None: it was empty)."""

    def __init__(self, sink: PaimonSink, target: TableId, keys: list[str], compared: list[str], marker: str | None,
                 *, base_snapshot: int | None, estimated_rows: int, spec: dict[str, str | None] | None = None,
                 soft_delete: bool = False):
        if not keys:
            raise LakeCdcError(f"{target} is an append table (no primary key): a re-snapshot cannot remove its old "
                               "rows. Drop the table and run the pipeline to snapshot it afresh")
        self.sink, self.target = sink, target
        self.keys, self.compared, self.marker = keys, compared, marker
        self.soft_delete = soft_delete
        self.base_snapshot = base_snapshot
        self.spec = spec
        description = sink.describe(target)
        self.partition_keys = list(description.partition_keys)
        self._stored_schema = description.schema
        self.partitions = max(1, math.ceil(max(estimated_rows, 1) / KEYS_PER_PARTITION))
        self._directory = tempfile.mkdtemp(prefix="lakecdc-resnapshot-")
        self._written = _Partitioned(self._directory, "written", keys, self.partitions)
        self._pending: list[pa.Table] = []
        self._seq = 0

    # ------------------------------------------------------------------------------------------ recording

    def record(self, output: pa.Table) -> None:
        """Rows of ``output`` (transform output with ``OP_COLUMN``) were written in the current group."""
        if output.num_rows == 0:
            return
        ops = output.column(OP_COLUMN)
        alive = pc.or_(pc.equal(ops, INSERT), pc.equal(ops, UPDATE_AFTER))
        if self.marker is not None:
            alive = pc.and_(alive, pc.fill_null(pc.not_equal(output.column(self.marker), DELETE), True))
        kept = output.filter(pc.invert(pc.equal(ops, "-U")))  # an update's before image: its after image follows
        alive = pc.filter(alive, pc.invert(pc.equal(ops, "-U")))
        recorded = kept.select(self.keys).append_column(_ALIVE, alive)
        recorded = recorded.append_column(_HASH, pa.array(self._value_hashes(kept), pa.uint64()))
        recorded = recorded.append_column(_SEQ, pa.array(np.arange(self._seq, self._seq + kept.num_rows)))
        self._seq += kept.num_rows
        self._pending.append(recorded)

    def _value_hashes(self, rows: pa.Table) -> np.ndarray:
        """A hash of the compared values of each row, taken in the table's current column types (so a row read from
        an older snapshot and a re-read row compare alike); a column the rows lack hashes as NULL."""
        stored = self._stored_schema
        try:
            columns = [rows.column(c).cast(stored.field(c).type) if c in rows.column_names
                       else pa.nulls(rows.num_rows, stored.field(c).type) for c in self.compared]
            return _hashes(pa.table(columns, names=self.compared))
        except Exception:  # noqa: BLE001 - a type polars cannot hash or cast: such rows count as updated
            return np.full(rows.num_rows, np.iinfo(np.uint64).max, dtype=np.uint64)

    def group_committed(self) -> None:
        """The current group's commit succeeded: its keys count."""
        for table in self._pending:
            self._written.add(table)
        self._pending = []

    def group_discarded(self) -> None:
        """The current group's writes were thrown away (read again, or the group failed)."""
        self._pending = []

    def close(self) -> None:
        self._written.close()
        shutil.rmtree(self._directory, ignore_errors=True)

    # ------------------------------------------------------------------------------------------ the sweep

    def sweep(self, write: Callable[[pa.Table], None]) -> SweepOutcome:
        """After the last group's rows were written (recorded, not yet committed): find the stale rows and
        ``write`` their deletes (before that group's commit), and count what the re-snapshot changed."""
        outcome = SweepOutcome(partitions=self.partitions)
        written_schema = self._written_schema()
        current = self._partition_paimon("current", None, with_values=False)
        before = self._partition_paimon("before", self.base_snapshot, with_values=True)
        stale_parts: list[pa.Table] = []
        for i in range(self.partitions):
            written = self._last_writes(i, written_schema)
            stale_parts.append(self._stale(current.read(i, self._key_schema()), written))
            self._count(before.read(i, self._before_schema()), written, outcome)
        current.close()
        before.close()
        stale_keys = pa.concat_tables(stale_parts) if stale_parts else self._key_schema().empty_table()
        outcome.stale = stale_keys.num_rows
        outcome.deleted += stale_keys.num_rows
        if stale_keys.num_rows:
            self._write_stale(stale_keys, write, outcome.stale_partitions)
        return outcome

    def _key_schema(self) -> pa.Schema:
        stored = self.sink.describe(self.target).schema
        return pa.schema([stored.field(k) for k in self.keys])

    def _before_schema(self) -> pa.Schema:
        return self._key_schema().append(pa.field(_HASH, pa.uint64()))

    def _written_schema(self) -> pa.Schema:
        return self._key_schema().append(pa.field(_ALIVE, pa.bool_())).append(pa.field(_HASH, pa.uint64())) \
            .append(pa.field(_SEQ, pa.int64()))

    def _last_writes(self, i: int, schema: pa.Schema) -> pa.Table:
        """Each recorded key of partition ``i`` with its last write (the current group's too)."""
        parts = [self._written.read(i, schema)]
        parts += [p for p in self._in_partition(self._pending, i)]
        table = pa.concat_tables([p.cast(parts[0].schema) for p in parts if p.num_rows] or [parts[0]])
        if table.num_rows == 0:
            return table
        last = table.group_by(self.keys, use_threads=False).aggregate([(_SEQ, "max")])
        return table.join(last.rename_columns(self.keys + [_SEQ]), keys=self.keys + [_SEQ], join_type="inner")

    def _in_partition(self, tables: Iterable[pa.Table], i: int) -> Iterator[pa.Table]:
        for table in tables:
            if self.partitions == 1:
                yield table
                continue
            parts = _hashes(table.select(self.keys)) % np.uint64(self.partitions)
            yield table.filter(pa.array(parts == i))

    def _partition_paimon(self, name: str, snapshot_id: int | None, *, with_values: bool) -> _Partitioned:
        """The table's active rows in scope (keys, and a hash of the compared values), partitioned."""
        partitioned = _Partitioned(self._directory, name, self.keys, self.partitions)
        if snapshot_id is None and name == "before":
            return partitioned
        stored = set(self.sink.column_names(self.target, snapshot_id))
        compared = [c for c in self.compared if c in stored] if with_values else []
        columns = list(dict.fromkeys(self.keys + compared + list(self.spec or {}) +
                                     ([self.marker] if self.marker else [])))
        key_schema = self._key_schema()
        for batch in self.sink.read_batches(self.target, columns, snapshot_id=snapshot_id):
            table = pa.Table.from_batches([batch])
            if self.spec:
                table = table.filter(partition_mask(table, self.spec))
            if self.marker is not None:
                table = table.filter(pc.fill_null(pc.not_equal(table.column(self.marker), DELETE), True))
            if table.num_rows == 0:
                continue
            keys = table.select(self.keys).cast(key_schema)
            if with_values:
                keys = keys.append_column(_HASH, pa.array(self._value_hashes(table), pa.uint64()))
            partitioned.add(keys)
        return partitioned

    def _stale(self, current: pa.Table, written: pa.Table) -> pa.Table:
        """Active Paimon keys in scope that the re-snapshot did not write."""
        if current.num_rows == 0:
            return current
        return current.join(written.select(self.keys).cast(current.schema), keys=self.keys, join_type="left anti")

    def _count(self, before: pa.Table, written: pa.Table, outcome: SweepOutcome) -> None:
        if written.num_rows == 0:
            return
        alive = written.filter(written.column(_ALIVE))
        dead = written.filter(pc.invert(written.column(_ALIVE)))
        previous = before.rename_columns(self.keys + ["__before__"])
        joined = alive.select(self.keys + [_HASH]).join(previous.cast(
            pa.schema([alive.schema.field(k) for k in self.keys] + [pa.field("__before__", pa.uint64())])),
            keys=self.keys, join_type="left outer")
        had = pc.is_valid(joined.column("__before__"))
        same = pc.fill_null(pc.equal(joined.column(_HASH), joined.column("__before__")), False)
        existing = pc.sum(had).as_py() or 0
        unchanged = pc.sum(same).as_py() or 0
        outcome.inserted += joined.num_rows - existing
        outcome.updated += existing - unchanged
        outcome.unchanged += unchanged
        if dead.num_rows and before.num_rows:
            outcome.deleted += dead.select(self.keys).join(before.select(self.keys).cast(
                dead.select(self.keys).schema), keys=self.keys, join_type="left semi").num_rows

    def _write_stale(self, stale_keys: pa.Table, write: Callable[[pa.Table], None],
                     partitions: dict[str, dict[str, int]]) -> None:
        """Delete (or mark deleted) the stale rows: their full rows, read batch by batch."""
        if self.soft_delete and self.marker is None:
            raise LakeCdcError(
                f"{stale_keys.num_rows} rows of {self.target} are gone from MySQL, but this SOFT_DELETE table has no "
                "column holding __data_event_type__ to mark them deleted, so the re-snapshot cannot make the table "
                "equal MySQL; nothing was committed. Add such a column to the projection (e.g. `__data_event_type__ "
                "AS op_type`), or drop the table and run the pipeline to snapshot it afresh")
        for batch in self.sink.read_batches(self.target, None):
            rows = pa.Table.from_batches([batch])
            if self.spec:
                rows = rows.filter(partition_mask(rows, self.spec))
            stale = rows.join(stale_keys.cast(rows.select(self.keys).schema), keys=self.keys, join_type="left semi")
            if stale.num_rows == 0:
                continue
            if self.marker is not None:
                stale = stale.set_column(stale.schema.get_field_index(self.marker), stale.schema.field(self.marker),
                                         pa.repeat(pa.scalar(DELETE, stale.schema.field(self.marker).type),
                                                   stale.num_rows))
                kinds = pa.repeat(pa.scalar(INSERT), stale.num_rows)
            else:
                kinds = pa.repeat(pa.scalar(DELETE), stale.num_rows)
            stale = stale.append_column(pa.field(OP_COLUMN, pa.string(), nullable=False), kinds)
            write(stale)
            # as a binlog commit counts them: a SOFT_DELETE table's stale row is a +I row marked deleted
            count_partitions(stale, self.partition_keys, partitions)


def compared_columns(source_plans: list, stored: list[str], keys: list[str]) -> list[str]:
    """The stored non-key columns computed from MySQL columns: what a re-read row is compared on (metadata columns
    such as ``op_ts`` differ in every re-read row and are no change of the data)."""
    columns: list[str] = []
    for source_plan in source_plans:
        source_columns = set(source_plan.source.column_names)
        for column, names in source_plan.transform.column_sources().items():
            if column in stored and column not in keys and column not in columns and source_columns & set(names):
                columns.append(column)
    return columns


def replacement_for(config: PipelineConfig, sink: PaimonSink, target_plan: TargetPlan, *, estimated_rows: int,
                    spec: dict[str, str | None] | None = None) -> Replacement:
    """The Replacement of a re-snapshot of ``target_plan``'s table (or of its partition ``spec``)."""
    target = target_plan.target
    description = sink.describe(target)
    keys = list(description.primary_keys)
    marker = soft_delete_column(config, target_plan)
    return Replacement(sink, target, keys, compared_columns(target_plan.sources, description.schema.names, keys),
                       marker or None, base_snapshot=sink.latest_snapshot_id(target),
                       estimated_rows=max(estimated_rows, sink.row_count_from_statistics(target) or 0), spec=spec,
                       soft_delete=marker is not False)
