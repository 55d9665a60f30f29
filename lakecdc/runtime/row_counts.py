"""A table's row count after a run, at the cost of what the run changed.

The merged row count of a primary-key table is in no metadata: as soon as an update lands, two files hold one key,
and only reading the keys back tells how many rows the table has (lakecdc.sink.reader.row_count). A routine run of
ten changes must not read a table of millions of rows, so the count moves with the changes instead:

    rows after the run = rows before it + (its keys alive after it) - (its keys alive before it)

where a key is alive after the run when the last row the run wrote for it is no retraction (``-U``/``-D``; a
SOFT_DELETE table's delete is a row), and alive before it when the table held it at the snapshot the run started
from (read by key: buckets and data files pruned, lakecdc.sink.reader.read_keys). The run must have recorded every
key it wrote (lakecdc.sink.written, not sampled: a routine run of fewer than 10,000 keys).

"Rows before" is the count a previous run left as a hint beside the table (``<warehouse>/.lakecdc/row-counts/
<db>.<table>.json``: a snapshot id and the table's rows at it). It stands only for the snapshot the run started
from, or one that only upkeep snapshots (which change no row) follow; anything else (no hint, a write lakecdc did not
make, a lost file) falls back to the statistics when they prove the count, else to reading the keys back once, and
the next run counts from there. A wrong hint is never used: it names the exact snapshot it counted.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.errors import SinkError
from lakecdc.model import TableId
from lakecdc.sink import PaimonSink
from lakecdc.sink.upkeep import is_upkeep_snapshot
from lakecdc.sink.written import KIND_COLUMN, RETRACT_KINDS, WrittenRows

_HINTS = "row-counts"


def _hint_name(table_id: TableId) -> str:
    return f"{_HINTS}/{table_id.database}.{table_id.table}.json"


def read_hint(sink: PaimonSink, table_id: TableId) -> tuple[int, int] | None:
    """(snapshot id, rows at it) of the table's count hint, or None."""
    try:
        data = sink.read_state(_hint_name(table_id))
        if not data:
            return None
        hint = json.loads(data)
        return int(hint["snapshot_id"]), int(hint["rows"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # a hint: losing it costs one read of the keys, never a wrong count


def write_hint(sink: PaimonSink, table_id: TableId, snapshot_id: int, rows: int) -> None:
    try:
        sink.write_state(_hint_name(table_id), json.dumps({"snapshot_id": snapshot_id, "rows": rows}).encode())
    except OSError:
        pass  # the next run reads the keys back once


def _only_upkeep_after(sink: PaimonSink, table_id: TableId, counted: int, base: int) -> bool:
    """Whether the snapshots after ``counted`` up to ``base`` are all upkeep snapshots (which change no row)."""
    if counted > base:
        return False
    manager = sink.snapshot_manager(table_id)
    for snapshot_id in range(counted + 1, base + 1):
        snapshot = manager.get_snapshot_by_id(snapshot_id)
        if snapshot is None or not is_upkeep_snapshot(snapshot.properties):
            return False
    return True


def counted_from_changes(sink: PaimonSink, table_id: TableId, base_snapshot: int | None,
                         written: WrittenRows | None) -> int | None:
    """The table's rows after a run that started at ``base_snapshot`` and wrote ``written``, from the count hint
    and the run's keys (see the module docstring); None when they cannot tell."""
    if written is None or written.error or written.sampled or written.truncated_at is not None \
            or not written.primary_keys or base_snapshot is None:
        return None
    hint = read_hint(sink, table_id)
    if hint is None or not _only_upkeep_after(sink, table_id, hint[0], base_snapshot):
        return None
    rows = hint[1]
    if written.rows is None or written.rows.num_rows == 0:
        return rows
    keys = written.primary_keys
    after = pc.invert(pc.is_in(written.rows.column(KIND_COLUMN), value_set=pa.array(RETRACT_KINDS, pa.int8())))
    alive_after = pc.sum(after).as_py() or 0
    try:
        before = sink.read_keys(table_id, written.rows.select(keys), base_snapshot, keys).rows
    except SinkError:  # the run's own upkeep expired the snapshot it started from: count another way
        return None
    alive_before = before.num_rows
    return rows + alive_after - alive_before


def row_count_after_run(sink: PaimonSink, table_id: TableId, base_snapshot: int | None,
                        written: WrittenRows | None) -> int:
    """The table's rows now (after a run that started at ``base_snapshot`` and wrote ``written``), at the cost of
    the run's changes when the hint allows it; the count is left as the hint for the next run."""
    rows = counted_from_changes(sink, table_id, base_snapshot, written)
    if rows is None:
        rows = sink.row_count(table_id)  # the statistics when they prove it, else the keys read back once
    latest = sink.latest_snapshot_id(table_id)
    if latest is not None:
        write_hint(sink, table_id, latest, rows)
    return rows
