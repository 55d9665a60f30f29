"""Partial row images: which columns a rows event leaves out, and whether lakecdc can still know their values.

A rows event says, per image, which columns it carries (its columns-present bitmaps). With
``binlog_row_image=FULL`` every image carries every column. A writer session may set its own value
(``SET SESSION binlog_row_image``) whatever the server's global setting is, and then:

- NOBLOB leaves out BLOB/TEXT (and MariaDB's JSON) columns an image does not need: from an UPDATE's after image
  the ones the statement did not change, from before images all of them when the table has a primary key;
- MINIMAL keeps only the primary key in before images and only the changed columns in after images (an INSERT's
  after image only the columns the statement set).

A column left out of an UPDATE's after image kept its value. When the before image carries it, the after image takes
it from there (:func:`fill_after_from_before`; a table without primary key under NOBLOB). Any other gap cannot be
filled from the binlog, and guessing (a NULL) would write a wrong row: the read stops before anything of that
transaction is committed, with :func:`partial_image_message`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lakecdc.model import SourceTable
from lakecdc.source.types import column_data_type

# column types NOBLOB may leave out (MariaDB logs JSON as LONGTEXT; MySQL's binary JSON is a blob type too)
_BLOB_TYPES = frozenset({"tinyblob", "blob", "mediumblob", "longblob", "tinytext", "text", "mediumtext", "longtext",
                         "json", "long", "long varchar"})


@dataclass(frozen=True)
class ImageGaps:
    """Columns a rows event leaves out of its before and after images (names, in table order); ``kind``: 'insert',
    'update' or 'delete'."""

    kind: str
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()

    @property
    def unknown(self) -> tuple[str, ...]:
        """Columns whose values the event does not tell: those an INSERT's after image lacks, and those a before
        image lacks (an UPDATE's old row, a DELETE's row)."""
        return self.after if self.kind == "insert" else self.before

    @property
    def fillable_after(self) -> tuple[str, ...]:
        """Columns an UPDATE's after image lacks while its before image is whole: they kept their values."""
        return self.after if self.kind == "update" and not self.before else ()


def image_gaps(event, table: SourceTable, kind: str) -> ImageGaps:
    """The gaps of a bound rows event (lakecdc.source.columns.bind_columns matched its columns to ``table`` by
    position); ``kind``: 'insert', 'update' or 'delete'."""
    names = table.column_names
    first = _missing(event.columns_present_bitmap, names)
    if kind == "insert":
        return ImageGaps(kind, after=first)
    if kind == "delete":
        return ImageGaps(kind, before=first)
    return ImageGaps(kind, before=first, after=_missing(event.columns_present_bitmap2, names))


def _missing(bitmap: bytes, names: list[str]) -> tuple[str, ...]:
    if bitmap == _whole(len(names)):  # the usual case (FULL images): no per-column test on every event
        return ()
    if len(bitmap) * 8 < len(names):
        return tuple(names)
    return tuple(name for i, name in enumerate(names) if not (bitmap[i >> 3] >> (i & 7)) & 1)


@functools.lru_cache(maxsize=64)
def _whole(columns: int) -> bytes:
    """The columns-present bitmap of an image carrying all ``columns`` columns."""
    return (((1 << columns) - 1).to_bytes((columns + 7) // 8, "little"))


def partial_image_message(table: SourceTable, position: str, gaps: ImageGaps) -> str:
    """Why the read stops at a rows event whose missing columns cannot be known, and what to do."""
    unknown = gaps.unknown
    types = {c.name: column_data_type(c.column_type) for c in table.columns}
    setting = "NOBLOB" if all(types.get(c) in _BLOB_TYPES for c in unknown) else "MINIMAL"
    image = {"insert": "after image of an INSERT", "delete": "before image of a DELETE"}.get(
        gaps.kind, "before image of an UPDATE")
    return (f"binlog rows event of {table.table_id} ending at {position}: the {image} lacks column(s) "
            f"{', '.join(unknown)}, so their values in MySQL cannot be known from the binlog. The writer session "
            f"logged it with a partial row image (binlog_row_image={setting} set for the session; lakecdc needs "
            "FULL). Nothing from this transaction on is committed. Make every writer session use "
            "binlog_row_image=FULL (SET GLOBAL binlog_row_image='FULL', reconnect the writers, no SET SESSION "
            "binlog_row_image), then re-snapshot the table (lakecdc resnapshot PIPELINE.yaml DB.TABLE, or the "
            "Dagster re-snapshot job)")


def fill_after_from_before(data: pa.Table, columns: tuple[str, ...]) -> pa.Table:
    """The change rows of one UPDATE event (before/after pairs in order: -U/+U, or -D/+I for a key change) with
    each after row's ``columns`` taken from its before row."""
    pair_start = pa.array(np.arange(data.num_rows, dtype=np.int64) & ~1)
    for name in columns:
        index = data.schema.get_field_index(name)
        data = data.set_column(index, data.schema.field(index), data.column(name).take(pair_start))
    return data
