"""Paimon consumers: the progress of a reader of a table's changes, kept in the table's own ``consumer/`` folder.

Layout and format are Paimon's (``org.apache.paimon.consumer.ConsumerManager`` and ``Consumer``; pypaimon's
``pypaimon.consumer`` is a port of them): ``<table>/consumer/consumer-<id>`` holds ``{"nextSnapshot": N}``, the
first snapshot the consumer has not read yet. A Flink or Spark streaming read with ``'consumer-id' = '<id>'``
starts at that snapshot, and lakecdc's change reads with the same id do too (lakecdc.paimon ``read_changes(...,
consumer_id=...)``), so either can continue where the other left off.

* The JSON is pypaimon's ``Consumer.to_json`` / ``from_json`` (Java reads it: unknown fields ignored).
* Files are written through the table's store (lakecdc.sink.table_files): on a local warehouse written aside and
  renamed (pypaimon's ``ConsumerManager.reset_consumer`` truncates the file in place, so a reader could see half of
  it; Paimon's readers retry then, lakecdc's need not), on an object store one PUT (an object is stored whole).
* Reads are lakecdc's change reads (pypaimon-rust's incremental scan, lakecdc.sink.reader), not pypaimon's
  ``StreamReadBuilder.with_consumer_id``: its streaming scan moves the consumer by itself when the caller asks for
  the next plan (the caller cannot say "these were not used"), and reads through pypaimon's Python reader.
  pypaimon's ``ConsumerManager`` reads the files written here (tests/test_consumers.py).
* Expiry follows Paimon's rule (ExpireSnapshotsImpl): no snapshot at or after the smallest ``nextSnapshot`` of the
  consumers is expired; before that, consumers whose file was not modified within ``consumer.expiration-time`` are
  deleted (TableCommitImpl: "expire consumer first to avoid preventing snapshot expiration"), as
  ``ConsumerManager.expire`` does. lakecdc.sink.upkeep applies both, and also keeps the snapshot before the
  smallest ``nextSnapshot`` (reads with before images look the previous rows up there).
* Differences from Paimon's streaming read: a consumer whose next snapshot has expired gets an error (Paimon starts
  at the earliest snapshot left, losing the changes in between); ``consumer.mode`` (at-least-once) and
  ``consumer.changelog-only`` are not read: lakecdc's consumers are committed explicitly and tables have no
  separately retained changelog.
"""

from __future__ import annotations

import pickle
import re
from dataclasses import dataclass, field
from pathlib import PurePath

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.errors import SinkError
from lakecdc.model import INSERT
from lakecdc.sink.reader import ROW_KIND_COLUMN

CONSUMER_DIR = "consumer"
CONSUMER_PREFIX = "consumer-"  # ConsumerManager.CONSUMER_PREFIX
# Ids lakecdc creates or accepts: they become file names on every file system and object store Paimon supports
# (pypaimon only refuses path separators and '.'/'..').
_CONSUMER_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,199}$")


@dataclass(frozen=True)
class ConsumerState:
    """One consumer of a table: the next snapshot it reads, and when its file was last written (epoch ms)."""

    consumer_id: str
    next_snapshot: int
    modified_ms: int


def check_consumer_id(consumer_id: object, what: str) -> str:
    """``consumer_id`` when it is usable as a Paimon consumer id (a file name); SinkError naming it otherwise."""
    if not isinstance(consumer_id, str) or not _CONSUMER_ID.match(consumer_id):
        raise SinkError(f"{what}: consumer id {consumer_id!r} is not valid: use letters, digits, '_', '.' and '-' "
                        f"(at most 200 characters, not starting with '.' or '-')")
    return consumer_id


def consumer_json(next_snapshot: int) -> bytes:
    """A consumer file's content, as pypaimon (and Paimon) write it."""
    from pypaimon.consumer.consumer import Consumer

    return Consumer(next_snapshot=int(next_snapshot)).to_json().encode("utf-8")


def parse_consumer(data: bytes) -> int:
    """``nextSnapshot`` of a consumer file's content (ValueError/KeyError/TypeError when it is not one)."""
    from pypaimon.consumer.consumer import Consumer

    value = Consumer.from_json(data.decode("utf-8")).next_snapshot
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"nextSnapshot is {value!r}")
    return value


class Consumers:
    """The consumers of one table, through its store (lakecdc.sink.table_files.LocalStore or ObjectStore) and its
    directory."""

    def __init__(self, table_id, store, table_dir: PurePath):
        self.table_id = table_id
        self.store = store
        self.dir = table_dir / CONSUMER_DIR

    def _path(self, consumer_id: str) -> PurePath:
        return self.dir / f"{CONSUMER_PREFIX}{check_consumer_id(consumer_id, f'table {self.table_id}')}"

    def _read(self, name: str) -> ConsumerState | None:
        path = self.dir / name
        data = self.store.read_bytes(path)
        if data is None:
            return None
        try:
            next_snapshot = parse_consumer(data)
        except (ValueError, KeyError, TypeError, AttributeError):
            raise SinkError(f"table {self.table_id}: the consumer file {path} is not a Paimon consumer "
                            f"({data[:80]!r}); fix or delete it") from None
        return ConsumerState(name[len(CONSUMER_PREFIX):], next_snapshot, self.store.mtime_ms(path))

    def get(self, consumer_id: str) -> ConsumerState | None:
        """The consumer, or None when it has no file."""
        return self._read(self._path(consumer_id).name)

    def all(self) -> list[ConsumerState]:
        """Every consumer of the table, by id."""
        names = sorted(n for n in self.store.listdir(self.dir) if n.startswith(CONSUMER_PREFIX))
        found = (self._read(n) for n in names)
        return [c for c in found if c is not None]

    def reset(self, consumer_id: str, next_snapshot: int) -> None:
        """Create or replace the consumer's file with ``next_snapshot`` (ConsumerManager.resetConsumer)."""
        if isinstance(next_snapshot, bool) or not isinstance(next_snapshot, int) or next_snapshot < 1:
            raise SinkError(f"table {self.table_id}: consumer {consumer_id!r}: the next snapshot must be an integer "
                            f">= 1, got {next_snapshot!r}")
        self.store.replace(self._path(consumer_id), consumer_json(next_snapshot))

    def delete(self, consumer_id: str) -> bool:
        """Delete the consumer (ConsumerManager.deleteConsumer); False when it had no file."""
        return self.store.remove(self._path(consumer_id))

    def expire(self, cutoff_ms: int) -> list[str]:
        """Delete the consumers whose file was last modified before ``cutoff_ms`` (ConsumerManager.expire);
        returns their ids."""
        expired = []
        for name in sorted(n for n in self.store.listdir(self.dir) if n.startswith(CONSUMER_PREFIX)):
            path = self.dir / name
            if self.store.mtime_ms(path) < cutoff_ms and self.store.remove(path):
                expired.append(name[len(CONSUMER_PREFIX):])
        return expired


def min_next_snapshot(consumers: list[ConsumerState]) -> int | None:
    """ConsumerManager.minNextSnapshot: the first snapshot some consumer still has to read."""
    return min((c.next_snapshot for c in consumers), default=None)


# ------------------------------------------------------------------------------------------- consumer reads
@dataclass
class ConsumerRead:
    """What one read of a consumer returned: the change rows (leading ``rowkind`` column) of the snapshots in
    (start, end], and what committing it writes. ``full``: the consumer had no progress (new, or
    ``consumer.ignore-progress``), so the rows are the whole table at snapshot ``end`` as ``+I`` rows (Paimon's
    default streaming start, ``latest-full``)."""

    table_id: object
    consumer_id: str
    rows: pa.Table
    start_snapshot_id: int  # exclusive
    end_snapshot_id: int  # inclusive; == start: nothing new
    full: bool
    found_next_snapshot: int | None  # the consumer's nextSnapshot when read (None: no file)

    @property
    def next_snapshot(self) -> int:
        """The consumer's ``nextSnapshot`` once this read is committed."""
        return self.end_snapshot_id + 1

    def counts(self) -> dict[str, int]:
        """Rows per row kind (``+I``, ``-U``, ``+U``, ``-D``), kinds without rows left out."""
        return change_counts(self.rows)


def change_counts(rows: pa.Table) -> dict[str, int]:
    """Rows per row kind of a change read (its ``rowkind`` column)."""
    if rows.num_rows == 0:
        return {}
    counted = pc.value_counts(rows.column(ROW_KIND_COLUMN)).to_pylist()
    return {c["values"]: c["counts"] for c in sorted(counted, key=lambda c: _KIND_ORDER.index(c["values"]))}


_KIND_ORDER = ["+I", "-U", "+U", "-D"]


def ignores_progress(options: dict[str, str]) -> bool:
    """Paimon's ``consumer.ignore-progress`` (default false) of a table's options."""
    return str(options.get("consumer.ignore-progress", "false")).strip().lower() == "true"


def read_for_consumer(sink, table_id, consumer_id: str, *, columns: list[str] | None = None, mode: str = "auto",
                      ignore_delete: bool = False, ignore_progress: bool | None = None,
                      before_images: bool = False) -> ConsumerRead:
    """The changes ``consumer_id`` has not read yet, up to the latest snapshot; the consumer is not moved
    (:func:`commit_consumer` does that once the caller has used them). ``sink`` is a lakecdc.sink.PaimonSink.

    A consumer with progress reads from its ``nextSnapshot`` (as a Flink streaming read with ``consumer-id`` does).
    One without (no file yet, or ``ignore_progress``, default: the table option ``consumer.ignore-progress``) reads
    the whole table at the latest snapshot as ``+I`` rows, then its changes. Where Paimon's streaming read would
    silently start at the earliest snapshot left, a consumer whose next snapshot has expired gets SinkError saying
    so and how to recover. ``before_images``: see PaimonSink.read_changes (it reads the previous rows from the
    snapshot the consumer read last, which lakecdc's expiry keeps)."""
    check_consumer_id(consumer_id, f"table {table_id}")
    consumers = sink.consumers(table_id)
    state = consumers.get(consumer_id)
    latest = sink.latest_snapshot_id(table_id) or 0
    if ignore_progress is None:
        ignore_progress = ignores_progress(sink.describe(table_id).options)
    found = state.next_snapshot if state is not None else None
    if state is None or ignore_progress:
        if latest == 0:
            rows = sink.empty_changes(table_id, columns)
        else:
            data = sink.read_table(table_id, columns, snapshot_id=latest)
            rows = data.add_column(0, pa.field(ROW_KIND_COLUMN, pa.string(), nullable=False),
                                   pa.repeat(pa.scalar(INSERT), data.num_rows))
        return ConsumerRead(table_id, consumer_id, _nullable(rows), 0, latest, True, found)
    next_snapshot = state.next_snapshot
    recover = (f"to recover, read the table again: delete the consumer (or reset it) and the next read starts with "
               f"the whole table (lakecdc.paimon: table.delete_consumer({consumer_id!r}); Dagster: the downstream "
               f"asset's next materialisation after that)")
    if next_snapshot > latest + 1:
        raise SinkError(f"table {table_id}: consumer {consumer_id!r} is at snapshot {next_snapshot}, but the latest "
                        f"snapshot is {latest} (the table was re-created or rolled back): {recover}")
    if next_snapshot <= latest and sink.snapshot_manager(table_id).get_snapshot_by_id(next_snapshot) is None:
        earliest = next((i for i in range(next_snapshot + 1, latest + 1)
                         if sink.snapshot_manager(table_id).get_snapshot_by_id(i) is not None), latest)
        raise SinkError(f"table {table_id}: consumer {consumer_id!r} has not read snapshot {next_snapshot}, which "
                        f"has expired (the earliest snapshot is {earliest}): the changes in between are lost to it "
                        f"(it was reset to an old snapshot, or snapshots were expired while it had no consumer file: "
                        f"consumer.expiration-time, or an engine that ignores consumers); {recover}")
    rows = sink.read_changes(table_id, next_snapshot - 1, latest, columns=columns, mode=mode,
                             ignore_delete=ignore_delete, before_images=before_images)
    return ConsumerRead(table_id, consumer_id, _nullable(rows), next_snapshot - 1, latest, False, found)


def _nullable(rows: pa.Table) -> pa.Table:
    """The rows with every column but ``rowkind`` nullable: whole-table reads keep the primary key's NOT NULL,
    change reads (pypaimon-rust) do not, and a consumer's reads should all have one schema."""
    fields = [f if f.name == ROW_KIND_COLUMN else f.with_nullable(True) for f in rows.schema]
    return rows.cast(pa.schema(fields, metadata=rows.schema.metadata))


def commit_consumer(sink, read: ConsumerRead) -> int:
    """Advance the consumer of ``read`` past what it returned (``nextSnapshot`` = its end + 1; the file is
    rewritten even when nothing was read, so ``consumer.expiration-time`` counts from the last read). SinkError when
    the consumer was moved by someone else since the read (another reader with the same id): nothing is written.
    Committing the same read twice is harmless. Returns the next snapshot."""
    consumers = _unmoved(sink, read)
    consumers.reset(read.consumer_id, read.next_snapshot)
    return read.next_snapshot


def _unmoved(sink, read: ConsumerRead) -> Consumers:
    """The table's consumers, after checking that ``read``'s consumer is where the read found it (or already where
    committing the read puts it)."""
    consumers = sink.consumers(read.table_id)
    state = consumers.get(read.consumer_id)
    now = state.next_snapshot if state is not None else None
    if now != read.found_next_snapshot and now != read.next_snapshot:
        raise SinkError(f"table {read.table_id}: consumer {read.consumer_id!r} moved from snapshot "
                        f"{read.found_next_snapshot} to {now} since these changes were read (another reader uses the "
                        f"same consumer id?); its progress was left as it is: read again")
    return consumers


# --------------------------------------------------------------------------------------------------- status
# Snapshots a consumer's lag is counted over (one small JSON read each); further back, only the snapshots count.
MAX_COUNTED_SNAPSHOTS = 1000


@dataclass(frozen=True)
class ConsumerLag:
    """How far one consumer is behind its table's latest snapshot."""

    consumer_id: str
    next_snapshot: int
    modified_ms: int
    snapshots_behind: int  # snapshot ids from its next one to the latest (upkeep snapshots included)
    changes_behind: int | None  # rows those snapshots committed (change snapshots only); None: not counted
    expired: bool = False  # its next snapshot has expired: its next read fails (read_for_consumer)


def consumer_lags(sink, table_id) -> list[ConsumerLag]:
    """Each consumer of the table and its lag, from the snapshot files only (their ``deltaRecordCount``, or
    ``changelogRecordCount`` when they have changelog files: the rows a change read of them returns, before
    ``ignore_delete``)."""
    manager = sink.snapshot_manager(table_id)
    latest_snapshot = manager.get_latest_snapshot() if manager is not None else None
    latest = latest_snapshot.id if latest_snapshot is not None else 0
    lags = []
    for consumer in sink.consumers(table_id).all():
        first = consumer.next_snapshot
        behind = max(0, latest - first + 1)
        snapshots = [manager.get_snapshot_by_id(i) for i in range(first, latest + 1)] \
            if 0 < behind <= MAX_COUNTED_SNAPSHOTS else []
        expired = behind > 0 and manager.get_snapshot_by_id(first) is None
        changes = None
        if behind == 0:
            changes = 0
        elif snapshots and not expired:
            changes = sum(_change_rows(s) for s in snapshots if s is not None)
        lags.append(ConsumerLag(consumer.consumer_id, first, consumer.modified_ms, behind, changes, expired))
    return lags


def _change_rows(snapshot) -> int:
    if str(snapshot.commit_kind) != "APPEND":
        return 0  # compaction, overwrite (upkeep's rewrite): no change rows for a change read
    if snapshot.changelog_record_count is not None and snapshot.changelog_manifest_list:
        return int(snapshot.changelog_record_count)
    return int(snapshot.delta_record_count or 0)


# ------------------------------------------------------------------------------------ consumers with state
# A downstream computation (a Dagster asset) that keeps a result built from a table's changes saves that result
# together with the consumer positions it includes, in one file, and only then commits the consumers: the file is
# the checkpoint (as a Flink job's state holds its source positions). A crash between the two leaves a consumer
# behind its position in the file, and the next read first moves it there (nothing is applied twice); a failure
# before the file is written moves nothing (the same changes come again).
STATE_DIR = "consumer-state"


@dataclass
class ConsumerCheckpoint:
    """What a stateful consumer saved last: its value and, per table (``db.table``), the next snapshot it
    includes."""

    value: object = None
    positions: dict[str, int] = field(default_factory=dict)
    saved: bool = False  # False: it never saved one


def state_name(consumer_id: str) -> str:
    """The file (under ``<warehouse>/.lakecdc/``) holding a stateful consumer's checkpoint."""
    return f"{STATE_DIR}/{check_consumer_id(consumer_id, 'consumer state')}.pickle"


def load_checkpoint(sink, consumer_id: str) -> ConsumerCheckpoint:
    """The consumer's last saved checkpoint (empty when it never saved one)."""
    data = sink.read_state(state_name(consumer_id))
    if data is None:
        return ConsumerCheckpoint()
    try:
        saved = pickle.loads(data)
        return ConsumerCheckpoint(saved["value"], {str(k): int(v) for k, v in saved["positions"].items()}, True)
    except Exception as error:  # noqa: BLE001 - any unreadable file is reported the same way
        raise SinkError(f"consumer {consumer_id!r}: its saved state {state_name(consumer_id)} in the warehouse "
                        f"cannot be read ({error}); delete it and the consumer files to start again") from error


def read_with_checkpoint(sink, table_id, consumer_id: str, checkpoint: ConsumerCheckpoint, **options) -> ConsumerRead:
    """read_for_consumer, after moving the consumer forward to the position ``checkpoint`` holds for the table when
    it is behind it (a crash after the checkpoint was saved, before the consumer was committed). A consumer ahead
    of the checkpoint was moved by someone else: SinkError (its changes since the checkpoint would be lost)."""
    recorded = checkpoint.positions.get(str(table_id))
    consumers = sink.consumers(table_id)
    state = consumers.get(consumer_id)
    if recorded is not None and state is not None and state.next_snapshot != recorded:
        if state.next_snapshot > recorded:
            raise SinkError(f"table {table_id}: consumer {consumer_id!r} is at snapshot {state.next_snapshot}, past "
                            f"snapshot {recorded} that its saved state includes (another reader with the same id?): "
                            f"the changes in between are not in the state. Delete the consumer to read the table "
                            f"again")
        consumers.reset(consumer_id, recorded)
    return read_for_consumer(sink, table_id, consumer_id, **options)


def save_checkpoint(sink, consumer_id: str, value: object, reads: list[ConsumerRead],
                    previous: ConsumerCheckpoint) -> None:
    """Save ``value`` with the positions after ``reads`` (and the other positions of ``previous``), then commit the
    consumers of ``reads``."""
    for read in reads:  # another run of the same consumer committed meanwhile: save nothing
        _unmoved(sink, read)
    positions = dict(previous.positions)
    positions.update({str(r.table_id): r.next_snapshot for r in reads})
    sink.write_state(state_name(consumer_id), pickle.dumps({"value": value, "positions": positions}))
    for read in reads:
        commit_consumer(sink, read)
