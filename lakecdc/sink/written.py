"""What a run committed to one Paimon table, kept to check the commit afterwards by reading its keys back
(lakecdc.runtime.verify): per primary key the last row handed to Paimon, as Paimon stores it (the writer's
columns after their conversion to the table's types) with its row kind, and the snapshots committed.

A :class:`WrittenRows` belongs to one table for one run (or one follow commit); the sink gives every writer it opens
for that table a :class:`PendingRows` of it (``PaimonSink.record_writes``): rows count only once their writer
commits, and are dropped when it aborts (an incremental snapshot that starts a commit group over, a failed commit).

The rows kept are bounded by the keys, not by the batch: a commit adds at most :data:`FIRST_COMMIT_KEYS` new keys
(the first commit of the run) or :data:`LATER_COMMIT_KEYS` (each later one: the commit groups of a chunked
snapshot, the commits around a DDL), in the order they were written; the rows of keys not taken are only counted
(``keys_skipped``). Keys written one after the other are neighbours in the table (a snapshot writes in chunk-key
order), so reading them back touches few data files. Everything is columnar (Arrow joins and group-bys); a run
that writes fewer rows than its bound keeps them as they are.

An append table (no primary key) keeps only the number of rows each commit added.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.model import TableId

# New keys a run's first commit to a table adds to its sample, and each later commit (see the module docstring).
FIRST_COMMIT_KEYS = 10_000
LATER_COMMIT_KEYS = 1_000
KIND_COLUMN = "__lakecdc_kind"  # int8 Paimon row kind (0 +I, 1 -U, 2 +U, 3 -D) of the row written
SEQUENCE_COLUMN = "__lakecdc_seq"  # write order within the run
SEGMENT_COLUMN = "__lakecdc_segment"  # which table schema the row was written with (see WrittenRows.segments)
RETRACT_KINDS = (1, 3)  # -U, -D: the key's row is gone after them


@dataclass
class WrittenRows:
    """The committed part of what one run wrote to ``table_id`` (see the module docstring)."""

    table_id: TableId
    primary_keys: list[str]
    rows: pa.Table | None = None  # the last row per sampled key (keys, values, kind, sequence, segment)
    segments: list[list[str]] = field(default_factory=list)  # per segment id, the columns its rows have
    snapshot_ids: list[int] = field(default_factory=list)  # the snapshots this run committed, in order
    rows_committed: int = 0  # rows handed to Paimon in committed writes (every key, sampled or not)
    rows_per_snapshot: dict[int, int] = field(default_factory=dict)
    keys_skipped: int = 0  # distinct new keys of a write not taken once the commit's share was used up
    truncated_at: int | None = None  # the snapshot of a TRUNCATE TABLE this run applied (earlier keys: absent)
    error: str | None = None  # why recording stopped (the check then says it could not look)
    _sequence: int = 0

    @property
    def last_snapshot_id(self) -> int | None:
        return self.snapshot_ids[-1] if self.snapshot_ids else None

    @property
    def keys(self) -> int:
        return self.rows.num_rows if self.rows is not None else 0

    @property
    def sampled(self) -> bool:
        return self.keys_skipped > 0

    def pending(self) -> "PendingRows":
        """What one writer of this table records until it commits or aborts."""
        share = FIRST_COMMIT_KEYS if not self.snapshot_ids else LATER_COMMIT_KEYS
        return PendingRows(self, share)

    def truncated(self, snapshot_id: int) -> None:
        """A TRUNCATE TABLE committed as ``snapshot_id``: every key written before is now absent."""
        self.snapshot_ids.append(snapshot_id)
        self.truncated_at = snapshot_id
        if self.rows is not None and self.rows.num_rows:
            index = self.rows.schema.get_field_index(KIND_COLUMN)
            self.rows = self.rows.set_column(index, self.rows.schema.field(index),
                                             pa.repeat(pa.scalar(3, pa.int8()), self.rows.num_rows))

    def _segment(self, columns: list[str]) -> int:
        if columns not in self.segments:
            self.segments.append(columns)
        return self.segments.index(columns)

    def _next_sequence(self, n: int) -> pa.Array:
        start = self._sequence
        self._sequence += n
        return pa.array(range(start, start + n), pa.int64())


class PendingRows:
    """The rows one writer handed to Paimon so far (only those of admitted keys), not yet committed."""

    def __init__(self, written: WrittenRows, share: int):
        self.written = written
        self.share = share  # new keys this writer may still add
        self.parts: list[pa.Table] = []
        self.admitted: pa.Table | None = None  # the distinct new keys taken so far (when counted)
        self.rows = 0  # every row handed over, admitted or not
        self.held = 0  # rows in ``parts``
        self.skipped = 0

    def add(self, columns: pa.Table, kinds: pa.Array) -> None:
        """Rows handed to Paimon (``columns`` in the table's schema, ``kinds`` their int8 row kinds)."""
        self.rows += columns.num_rows
        keys = self.written.primary_keys
        if not keys or columns.num_rows == 0:
            return
        segment = self.written._segment(columns.column_names)
        part = columns.append_column(KIND_COLUMN, pc.cast(kinds, pa.int8())) \
            .append_column(SEQUENCE_COLUMN, self.written._next_sequence(columns.num_rows)) \
            .append_column(SEGMENT_COLUMN, pa.repeat(pa.scalar(segment, pa.int32()), columns.num_rows))
        if self.admitted is None and self.held + part.num_rows <= self.share:
            self._hold(part)  # no more rows than the share: every new key fits, no need to count them
            return
        self._hold(self._admit(part))

    def _hold(self, part: pa.Table) -> None:
        self.parts.append(part)
        self.held += part.num_rows
        if self.held > 4 * max(self.share, 1):  # a hot key changed many times: keep its last row only
            self.parts = [_last_per_key(_concat(self.parts), self.written.primary_keys)]
            self.held = self.parts[0].num_rows

    def _admit(self, part: pa.Table) -> pa.Table:
        """The rows of ``part`` whose key is already kept, and of the first new keys the share still allows."""
        keys = self.written.primary_keys
        if self.admitted is None:  # first time over the share: count the keys held so far
            held = _concat(self.parts) if self.parts else part.slice(0, 0)
            self.admitted = _distinct(held.select(keys))
            if self.written.rows is not None:
                self.admitted = _anti(self.admitted, self.written.rows.select(keys), keys)
            self.share -= self.admitted.num_rows
        known = [self.admitted]
        if self.written.rows is not None:
            known.append(self.written.rows.select(keys))
        known_keys = _concat([k.select(keys) for k in known])
        kept = part.join(known_keys, keys, join_type="left semi") if known_keys.num_rows else part.slice(0, 0)
        new = part.join(known_keys, keys, join_type="left anti") if known_keys.num_rows else part
        if new.num_rows == 0:
            return kept
        first_seen = new.group_by(keys, use_threads=False).aggregate([(SEQUENCE_COLUMN, "min")])
        first_seen = first_seen.sort_by(f"{SEQUENCE_COLUMN}_min").select(keys)
        take = max(self.share, 0)
        taken, left = first_seen.slice(0, take), first_seen.num_rows - min(take, first_seen.num_rows)
        self.skipped += left
        if taken.num_rows:
            self.share -= taken.num_rows
            self.admitted = _concat([self.admitted, taken])
            kept = _concat([kept, new.join(taken, keys, join_type="left semi")])
        return kept.sort_by(SEQUENCE_COLUMN)

    def commit(self, snapshot_id: int) -> None:
        """The writer committed ``snapshot_id``: its rows join the run's."""
        written = self.written
        written.snapshot_ids.append(snapshot_id)
        written.rows_committed += self.rows
        written.rows_per_snapshot[snapshot_id] = self.rows
        written.keys_skipped += self.skipped
        if self.parts:
            merged = self.parts if written.rows is None else [written.rows, *self.parts]
            written.rows = _last_per_key(_concat(merged), written.primary_keys)
        self.discard()

    def discard(self) -> None:
        """The writer aborted (or committed): nothing more of it is kept here."""
        self.parts, self.admitted, self.held = [], None, 0


def _concat(tables: list[pa.Table]) -> pa.Table:
    return pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 else tables[0]


def _distinct(keys: pa.Table) -> pa.Table:
    return keys.group_by(keys.column_names, use_threads=False).aggregate([])


def _anti(left: pa.Table, right: pa.Table, keys: list[str]) -> pa.Table:
    return left.join(right, keys, join_type="left anti") if right.num_rows else left


def _last_per_key(rows: pa.Table, keys: list[str]) -> pa.Table:
    """The row written last of each key (sequence numbers are unique within a run)."""
    last = rows.group_by(keys, use_threads=False).aggregate([(SEQUENCE_COLUMN, "max")])
    return rows.filter(pc.is_in(rows.column(SEQUENCE_COLUMN), value_set=last.column(f"{SEQUENCE_COLUMN}_max")))
