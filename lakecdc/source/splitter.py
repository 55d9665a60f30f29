"""Which key ranges a table's snapshot reads (Flink CDC's ``MySqlChunkSplitter``): one planner for the serial reader,
which finds each chunk's bounds right before reading it, and for parallel readers, which get every range of a
commit group's budget planned up front.

A chunk is a :class:`ChunkRange`:

* ``WHOLE``: a table without chunk key, read with one statement (not resumable);
* ``NULLS``: the rows whose (nullable, configured) chunk key is NULL, read first;
* ``LIMITED``: a key that alone identifies a row: the ``size`` rows after ``lower`` in key order, one statement; the
  last row's key is the chunk's upper bound (fewer rows: the table is done);
* ``BOUNDED``: the rows after ``lower`` up to ``bound``, the ``size``-th key value after ``lower`` (every row of a
  value stays in one chunk, so a chunk of a non-unique key may be larger); no bound found: to the end of the table.

Bounds are found with statements of their own (lakecdc.source.chunk_sql), outside any chunk's window: a chunk's
range is fixed before the binlog position its rows are brought to is read (lakecdc.source.chunk_reader).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from lakecdc.model import SourceTable
from lakecdc.source import chunk_sql
from lakecdc.source.chunks import ChunkKey, ChunkProgress

WHOLE, NULLS, LIMITED, BOUNDED = "whole", "nulls", "limited", "bounded"

# a statement's first row (None: no row), run on the snapshot connection: how the splitter reads bounds
FetchOne = Callable[[str, list], "tuple | None"]


@dataclass(frozen=True)
class ChunkRange:
    """One chunk to read: its kind (see the module docstring), the progress before it, and its bound or size."""

    kind: str
    lower: ChunkProgress
    bound: tuple[bool, Any] = (False, None)  # BOUNDED: (found, the last key value of the chunk)
    size: int = 0  # LIMITED: rows

    def upper(self, key: ChunkKey | None, last_key: Any = None, rows: int = 0) -> ChunkProgress:
        """The progress after this chunk was read (``last_key``/``rows``: what a LIMITED chunk returned)."""
        if self.kind == WHOLE or key is None:
            return ChunkProgress(done=True)
        if self.kind == NULLS:
            return ChunkProgress(column=key.name, nulls_done=True)
        found, value = (rows == self.size, last_key) if self.kind == LIMITED else self.bound
        if found:
            return ChunkProgress(column=key.name, nulls_done=True, after=value, has_after=True)
        return ChunkProgress(column=key.name, done=True)


class ChunkSplitter:
    """Plans the chunks of one table by ``key`` (None: read whole), ``chunk_size`` rows each. ``extra``: a
    condition every statement adds (a re-snapshot of one partition reads only its rows)."""

    def __init__(self, table: SourceTable, key: ChunkKey | None, chunk_size: int, fetch_one: FetchOne,
                 extra: tuple[str, list] | None = None):
        self.table, self.key, self.chunk_size = table, key, chunk_size
        self._fetch_one = fetch_one
        self.extra = extra

    def null_chunk(self, progress: ChunkProgress) -> ChunkRange | None:
        """The chunk of NULL keys, when the key may be NULL and it has not been read."""
        key = self.key
        if key is None or progress.done or progress.nulls_done or progress.has_after or not key.column.nullable:
            return None
        return ChunkRange(NULLS, progress)

    def next_chunk(self, progress: ChunkProgress) -> ChunkRange:
        """The chunk after ``progress`` for a reader that reads it right away."""
        if self.key is None:
            return ChunkRange(WHOLE, progress)
        if self.key.unique:
            return ChunkRange(LIMITED, progress, size=self.chunk_size)
        return ChunkRange(BOUNDED, progress, bound=self.nth_key(progress, self.chunk_size))

    def plan(self, progress: ChunkProgress, max_rows: int) -> list[ChunkRange]:
        """Every chunk of about ``max_rows`` rows after ``progress``, bounds found up front (parallel readers); the
        last one runs to the end when fewer rows remain, and an empty one to the end follows when none remain after
        the budget (so the table is known to be done)."""
        assert self.key is not None
        ranges: list[ChunkRange] = []
        lower = progress
        while len(ranges) * self.chunk_size < max_rows:
            bound = self.nth_key(lower, self.chunk_size)
            ranges.append(ChunkRange(BOUNDED, lower, bound=bound))
            if not bound[0]:
                return ranges
            lower = ranges[-1].upper(self.key)
        if not self.has_rows_after(lower):
            ranges.append(ChunkRange(BOUNDED, lower))
        return ranges

    def nth_key(self, progress: ChunkProgress, n: int) -> tuple[bool, Any]:
        """(found, value) of the ``n``-th key value after ``progress``; found False when fewer rows remain."""
        assert self.key is not None
        row = self._fetch_one(*chunk_sql.nth_key_query(self.table, self.key, progress, n, self.extra))
        return (True, row[0]) if row else (False, None)

    def has_rows_after(self, progress: ChunkProgress) -> bool:
        return self.nth_key(progress, 1)[0]
