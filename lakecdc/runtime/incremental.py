"""One commit group of the incremental snapshot (``scan.incremental.snapshot.enabled: true``, the default): Flink CDC's
lock-free, chunk-by-chunk algorithm, made exact per commit group.

The group reads chunks with :class:`lakecdc.source.InitialLoadReader` in incremental mode: each chunk is one
autocommit SELECT between two reads of the binlog head, its low and high watermark (a
:class:`lakecdc.source.ChunkWindow`); no transaction spans two statements and no lock is taken. The group's position
P is the head after its last chunk. Then the binlog (G, P] is read once, G being the table's checkpoint (for a first
group the head when the run started, before its start-up), and every change row of a table being snapshotted is
sorted by its chunk-key value (:func:`range_mask`):

* a key in a range committed by an earlier group: written as a change (the catch-up of the consistent mode);
* a key in a chunk of this group, primary-key table: folded into the chunk's rows (:func:`fold_rows`): the last image
  per primary key wins, a delete removes the row. Folding every change in (G, P] is idempotent for a primary key, so
  it does not matter which of them the SELECT already saw: the chunk becomes its rows at P. Folding from G rather
  than from the chunk's low watermark also covers the one race of the algorithm: MySQL writes a transaction to the
  binlog before InnoDB commits it, so a transaction just before the low watermark may be invisible to the SELECT;
* a key in a chunk of this group, table without primary key (chunked by ``scan.incremental.snapshot.chunk.key-column``):
  rows are not identified by a key, so a chunk is kept only when no change touched its range between its low and
  high watermark (:class:`AppendChunks`); it is then the chunk at its high watermark, and the later changes of its
  range, up to P, are written after its rows. An empty chunk also keeps the inserts made while it was read, as
  changes. A chunk's bounds are found before its low watermark, so rows appended at growing keys (a log) fall
  after it, into the empty last chunk, whose inserts are changes. The one race of the algorithm stays here, as
  in Flink CDC: MySQL writes a transaction to the binlog before InnoDB commits it, so a transaction logged right
  before a low watermark and committed only after the SELECT started would be missed. The first touched chunk and
  the ones after it are dropped: the group's progress ends before them and the next group reads them again (a
  table whose first chunk keeps changing fails after :data:`MAX_STALLED_GROUPS` groups);
* a key not snapshotted yet: ignored (its chunk will be read later).

After the commit every snapshotted key is exactly at P, as in the consistent mode: a run killed at any point resumes
from the last commit, repeats nothing and loses nothing, and the binlog phase starts at the last P.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.errors import SourceError
from lakecdc.model import (DELETE, INSERT, OP_COLUMN, OP_TS_COLUMN, UPDATE_AFTER, UPDATE_BEFORE, BinlogOffset,
                           ChangeBatch, TableId)
from lakecdc.source import (ChunkKey, ChunkProgress, ChunkWindow, restrict_to_snapshotted,
                            snapshotted_mask)
from lakecdc.source.options import MySqlSourceOptions

# a table without primary key whose first chunk was touched by changes in this many groups in a row fails
MAX_STALLED_GROUPS = 5
_SEQ = "__lakecdc_fold_seq__"


def fold_rows(rows: pa.Table, changes: list[pa.Table], keys: list[str]) -> pa.Table:
    """``rows`` (snapshot rows, +I) with ``changes`` (change rows in binlog order, same schema) applied by primary
    key ``keys``: a key the changes touch ends as its last image (+I, op_ts 0), or absent when that is a delete or a
    before image. Columnar: the touched keys are grouped once, not looked up row by row."""
    changes = [c for c in changes if c.num_rows]
    if not changes:
        return rows
    delta = pa.concat_tables([c.cast(rows.schema) for c in changes]).combine_chunks()
    if len(keys) == 1:
        # one key column: drop the touched keys from the rows, then add each touched key's last image
        key = keys[0]
        untouched = rows.filter(pc.invert(pc.is_in(rows.column(key), value_set=pc.unique(delta.column(key)))))
        last = _last_per_key(delta, keys)
        return pa.concat_tables([untouched, _as_snapshot_rows(last, rows.schema)])
    combined = pa.concat_tables([rows, delta]).combine_chunks()
    return _as_snapshot_rows(_last_per_key(combined, keys), rows.schema)


def _last_per_key(data: pa.Table, keys: list[str]) -> pa.Table:
    """The last row of each key in ``data``, alive ones only (+I / +U)."""
    numbered = data.append_column(_SEQ, pa.array(range(data.num_rows), pa.int64()))
    last = numbered.group_by(keys, use_threads=False).aggregate([(_SEQ, "max")])
    rows = last.column(f"{_SEQ}_max")
    picked = data.take(pc.take(rows, pc.sort_indices(rows)))  # in binlog order
    ops = picked.column(OP_COLUMN)
    return picked.filter(pc.or_(pc.equal(ops, INSERT), pc.equal(ops, UPDATE_AFTER)))


def _as_snapshot_rows(data: pa.Table, schema: pa.Schema) -> pa.Table:
    n = data.num_rows
    data = data.set_column(schema.get_field_index(OP_COLUMN), schema.field(OP_COLUMN),
                           pa.repeat(pa.scalar(INSERT, pa.string()), n))
    data = data.set_column(schema.get_field_index(OP_TS_COLUMN), schema.field(OP_TS_COLUMN),
                           pa.repeat(pa.scalar(0, pa.int64()), n))
    return data.cast(schema)


def range_mask(options: MySqlSourceOptions, key: ChunkKey | None, lower: ChunkProgress, upper: ChunkProgress,
               values: pa.ChunkedArray | pa.Array) -> pa.Array:
    """True for the rows whose chunk-key value lies in the range ``upper`` covers and ``lower`` does not."""
    inside = snapshotted_mask(options, key, upper, values)
    before = snapshotted_mask(options, key, lower, values)
    return pc.and_(inside, pc.invert(before))


def key_values(batch: ChangeBatch, key: ChunkKey | None) -> pa.ChunkedArray:
    """The chunk-key column of ``batch`` (any column for a table read whole: only its length matters)."""
    return batch.data.column(key.name if key is not None else 0)


@dataclass
class AppendChunks:
    """The chunks of one table without primary key read in this group, and what the binlog says about them."""

    table: TableId
    windows: list[ChunkWindow]
    touched: set[int] = field(default_factory=set)  # windows whose range changed while they were read
    later: dict[int, list[ChangeBatch]] = field(default_factory=dict)  # changes after each window, in order

    def add(self, options: MySqlSourceOptions, key: ChunkKey | None, batch: ChangeBatch) -> None:
        """Sort one binlog batch (which never spans a window's ``low`` or ``high``: they are cuts of the read)."""
        values = key_values(batch, key)
        assert batch.first_commit is not None and batch.last_commit is not None
        for i, window in enumerate(self.windows):
            if batch.last_commit <= window.low or i in self.touched:
                continue
            part = restrict_to_snapshotted(batch, range_mask(options, key, window.lower, window.upper, values))
            if part is None:
                continue
            if batch.first_commit > window.high:
                self.later.setdefault(i, []).append(part)
                continue
            # inside the window: the SELECT may or may not have seen these changes
            ops = part.data.column(OP_COLUMN)
            before_images = pc.any(pc.or_(pc.equal(ops, UPDATE_BEFORE), pc.equal(ops, DELETE))).as_py()
            if window.rows == 0 and not before_images:
                # nothing was in the range when the SELECT ran, so it saw none of these inserts: they are changes
                self.later.setdefault(i, []).append(part)
            else:
                self.touched.add(i)

    def kept(self) -> int:
        """How many windows (from the first) stand: those before the first touched one."""
        return min(self.touched, default=len(self.windows))


def cuts_of(windows: list[ChunkWindow]) -> set[BinlogOffset]:
    """The binlog positions a read must not batch across, so each batch lies before, inside or after each window."""
    cuts: set[BinlogOffset] = set()
    for window in windows:
        cuts.update((window.low, window.high))
    return cuts


def stalled_error(table: TableId, window: ChunkWindow, groups: int) -> SourceError:
    return SourceError(
        f"incremental snapshot of {table}: the rows of its chunk after {window.lower.describe()} changed while the "
        f"chunk was read, in {groups} commit groups in a row. The table has no primary key, so lakecdc cannot tell "
        "which of those changes the chunk's SELECT saw, and reads it again instead. Give the table a primary key, "
        "choose a scan.incremental.snapshot.chunk.key-column that writes do not touch (or a smaller "
        "scan.incremental.snapshot.chunk.size), pause the writers of this table during its snapshot, or set "
        "scan.incremental.snapshot.enabled: false (one consistent transaction; on MySQL needs RELOAD for "
        "FLUSH TABLES WITH READ LOCK). Nothing of the unfinished chunk was written")
