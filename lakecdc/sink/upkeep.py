"""Table upkeep: compaction of small files, manifest merging, snapshot expiry and orphan file removal.

pypaimon 2.1.0 and pypaimon-rust 0.4.0 do none of these: every commit adds one level-0 file per
touched bucket and one manifest, and the base manifest list of every snapshot lists every manifest ever written,
so reads slow down and the table directory grows with every micro-batch. Upkeep of one table, in this order, all
under the table lock (lakecdc.sink.lock), so no lakecdc writer can commit in between:

1. **Level upgrade** (primary-key tables, deduplicate merge engine): a bucket whose files hold no retract row and
   do not overlap in key range, one of them on level 0 at least (a chunked snapshot, keys appended in order), gets
   its files listed on the highest level in a COMPACT snapshot, data files untouched (Paimon's upgrade of a file
   that needs no merging): reads take them without merging and they count as one sorted run.
   **Compaction**: the partitions with a bucket holding at least ``num-sorted-run.compaction-trigger`` sorted runs
   (primary-key tables; ``compaction.min.file-num`` for append tables; both 5 as in Paimon), or, before that, a
   primary-key bucket of two or more sorted runs whose files total less than ``compaction.total-size-threshold``
   (Paimon's early full compaction, unset by default), are read merged (live rows only) and rewritten by the native
   writer in one OVERWRITE snapshot. A whole-table rewrite is used when the table is unpartitioned, every partition
   is due, or a due partition has no live row left (pypaimon's dynamic partition overwrite only replaces partitions
   it writes rows to).
2. **Manifest merging**: when the latest snapshot references ``manifest.merge-min-count`` manifests or more (30,
   as in Paimon) or any DELETE entry, a COMPACT snapshot is written whose base manifest list holds only the live
   ADD entries (merged into files of ``manifest.target-file-size``) and whose delta list is empty.
3. **Snapshot expiry** as Paimon's ExpireSnapshots: keep at least ``snapshot.num-retained.min`` (10), at most
   ``snapshot.num-retained.max`` (unbounded) and everything younger than ``snapshot.time-retained`` (1 h),
   expiring at most ``snapshot.expire.limit`` (10) per run; never the latest snapshot, the newest one carrying the
   lakecdc checkpoint, or one a consumer still reads (at or after its ``nextSnapshot``, and the one before, for
   reads with before images; lakecdc.sink.consumers),
   after deleting the consumers not updated within ``consumer.expiration-time`` (when set). The ``EARLIEST`` hint is
   written, the expired snapshot files
   are deleted (oldest first), then every file the expired snapshots referenced and no kept snapshot or tag needs
   (data, changelog, index files, manifests, manifest lists).
4. **Orphan files**: files under the table directory no snapshot or tag references and older than
   ``older_than`` (1 day by default, Paimon's ``remove_orphan_files`` default), e.g. left by a crashed writer or a
   crash in the middle of step 3.

Snapshots written by upkeep carry the properties of the snapshot they follow (so the lakecdc checkpoint read from
the latest snapshot is unchanged) plus ``lakecdc.upkeep`` (``compact``, ``upgrade`` or ``merge-manifests``). They
add no change rows: change reads (pypaimon-rust's incremental delta scan) skip OVERWRITE and COMPACT snapshots, and the
compaction is written with ``changelog-producer=none`` so it adds no changelog files.

Crash safety: a crash before a commit leaves uncommitted files (orphans, removed later by step 4); a crash after
deleting expired snapshot files leaves their unreferenced files (orphans too). No step ever deletes a file that a
remaining snapshot or tag references, so every snapshot that exists stays readable.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Iterator, TypeVar

import pyarrow as pa

from lakecdc.errors import SinkError, TableLockedError
from lakecdc.model import CHECKPOINT_KEY, OP_COLUMN, TableId
from lakecdc.sink import native
from lakecdc.sink.consumers import Consumers, min_next_snapshot
from lakecdc.sink.table_files import ADD, ManifestRecord, References, disjoint_runs, merge_records, open_table_files

logger = logging.getLogger("lakecdc.sink.upkeep")

UPKEEP_PROPERTY = "lakecdc.upkeep"
COMPACT = "compact"
MERGE_MANIFESTS = "merge-manifests"
UPGRADE = "upgrade"

# Failpoints (lakecdc.runtime.micro_batch.failpoint): after compaction/manifest merging, before any deletion; and
# right after the first file deleted by expiry or orphan removal.
FAILPOINT_UPKEEP = "during-upkeep"
FAILPOINT_DELETE = "during-upkeep-delete"

DEFAULT_ORPHAN_OLDER_THAN_SECONDS = 86400.0
_INT_MAX = 2**31 - 1
_Default = TypeVar("_Default", int, None)
_REWRITE_ROWS = 65536  # rows handed to the writer at once while rewriting
# Rows a rewrite lets the Rust writer hold before it writes them out (plus the rest of the bucket being copied):
# a few hundred MiB at most (bench/memory_bench.py); not much smaller, as each flush opens a fresh writer, which
# has a start-up cost (an appending dynamic-bucket writer loads the table's key index).
_FLUSH_ROWS = 250_000


# ----------------------------------------------------------------------------------------------- options
@dataclass(frozen=True)
class UpkeepPolicy:
    """The Paimon table options upkeep honours, with Paimon's defaults."""

    retained_min: int = 10  # snapshot.num-retained.min
    retained_max: int = _INT_MAX  # snapshot.num-retained.max
    time_retained_ms: int = 3_600_000  # snapshot.time-retained
    expire_limit: int = 10  # snapshot.expire.limit
    sorted_run_trigger: int = 5  # num-sorted-run.compaction-trigger (primary-key tables)
    min_file_num: int = 5  # compaction.min.file-num (append tables)
    num_levels: int | None = None  # num-levels (None: the trigger + 1, as in Paimon)
    merge_min_count: int = 30  # manifest.merge-min-count
    manifest_target_size: int = 8 * 1024 * 1024  # manifest.target-file-size
    write_only: bool = False  # write-only: the writer itself does no upkeep (a dedicated job does)
    # Paimon's early full compaction by total size (EarlyFullCompaction, primary-key tables; unset by default): a
    # bucket of two or more sorted runs is compacted whatever the trigger says when its files total less than
    # compaction.total-size-threshold bytes. Its compaction.incremental-size-threshold counts the bytes below the
    # highest level, which here would be the whole bucket (this rewrite leaves its output on level 0), so it is
    # not acted on (docs/operations.md)
    total_size_threshold: int | None = None
    # consumer.expiration-time (no default: consumers never expire): a consumer whose file was not written within
    # it is deleted before snapshots expire, as Paimon's TableCommitImpl does
    consumer_expiration_ms: int | None = None

    @property
    def max_level(self) -> int:
        return (self.num_levels or self.sorted_run_trigger + 1) - 1

    def early_full_compaction(self, records: list[ManifestRecord]) -> bool:
        """Whether the files of one primary-key bucket are due for a full compaction by size, before the trigger
        (Paimon's EarlyFullCompaction.tryFullCompact): never for one sorted run."""
        return (self.total_size_threshold is not None and _sorted_runs(records) >= 2
                and sum(r.file_size for r in records) < self.total_size_threshold)

    @classmethod
    def from_options(cls, options: dict[str, str]) -> "UpkeepPolicy":
        """The policy of a table's options; SinkError naming the option when one is invalid."""
        o = {str(k): str(v).strip() for k, v in (options or {}).items() if v is not None}

        def integer(key: str, default: int, minimum: int) -> int:
            if key not in o:
                return default
            try:
                value = int(o[key])
            except ValueError:
                raise SinkError(f"table option {key}: expected an integer, got {o[key]!r}") from None
            if value < minimum:
                raise SinkError(f"table option {key}: must be at least {minimum}, got {value}")
            return value

        def size(key: str, default: _Default) -> int | _Default:
            return parse_memory_size(o[key], key) if key in o else default

        policy = cls(
            retained_min=integer("snapshot.num-retained.min", 10, 1),
            retained_max=integer("snapshot.num-retained.max", _INT_MAX, 1),
            time_retained_ms=parse_duration_ms(o["snapshot.time-retained"], "snapshot.time-retained")
            if "snapshot.time-retained" in o else 3_600_000,
            expire_limit=integer("snapshot.expire.limit", 10, 1),
            sorted_run_trigger=integer("num-sorted-run.compaction-trigger", 5, 1),
            min_file_num=integer("compaction.min.file-num", 5, 1),
            num_levels=integer("num-levels", 0, 2) if "num-levels" in o else None,
            merge_min_count=integer("manifest.merge-min-count", 30, 1),
            manifest_target_size=size("manifest.target-file-size", 8 * 1024 * 1024),
            write_only=o.get("write-only", "false").lower() == "true",
            total_size_threshold=size("compaction.total-size-threshold", None),
            consumer_expiration_ms=parse_duration_ms(o["consumer.expiration-time"], "consumer.expiration-time")
            if "consumer.expiration-time" in o else None)
        if "consumer.ignore-progress" in o and o["consumer.ignore-progress"].lower() not in ("true", "false"):
            raise SinkError(f"table option consumer.ignore-progress: expected true or false, got "
                            f"{o['consumer.ignore-progress']!r}")
        if policy.retained_max < policy.retained_min:
            raise SinkError(f"table options: snapshot.num-retained.max ({policy.retained_max}) must not be smaller "
                            f"than snapshot.num-retained.min ({policy.retained_min})")
        return policy


def policy_problem(options: dict[str, str]) -> str | None:
    """Why the upkeep options among ``options`` are invalid, or None (checked when a pipeline is validated)."""
    try:
        UpkeepPolicy.from_options(options)
    except SinkError as error:
        return str(error)
    return None


_DURATION_UNITS = {
    "ms": 1, "milli": 1, "millis": 1, "millisecond": 1, "milliseconds": 1,
    "s": 1000, "sec": 1000, "secs": 1000, "second": 1000, "seconds": 1000,
    "m": 60_000, "min": 60_000, "mins": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
}
_MEMORY_UNITS = {"b": 1, "bytes": 1, "k": 1024, "kb": 1024, "kibibytes": 1024, "m": 1024**2, "mb": 1024**2,
                 "mebibytes": 1024**2, "g": 1024**3, "gb": 1024**3, "gibibytes": 1024**3, "t": 1024**4,
                 "tb": 1024**4, "tebibytes": 1024**4}
_AMOUNT = re.compile(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$")


def parse_duration_ms(text: str, key: str) -> int:
    """A Paimon duration (``1 h``, ``30min``, ``1d``, ``500 ms``; no unit = milliseconds) in milliseconds."""
    match = _AMOUNT.match(str(text))
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _DURATION_UNITS and unit != "":
        raise SinkError(f"table option {key}: expected a duration like '1 h', '30 min' or '1 d', got {text!r}")
    return int(match.group(1)) * _DURATION_UNITS.get(unit, 1)


def parse_memory_size(text: str, key: str) -> int:
    """A Paimon memory size (``8 mb``, ``128MB``, ``1 gb``; no unit = bytes) in bytes."""
    match = _AMOUNT.match(str(text))
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _MEMORY_UNITS and unit != "":
        raise SinkError(f"table option {key}: expected a size like '8 mb', got {text!r}")
    return int(match.group(1)) * _MEMORY_UNITS.get(unit, 1)


# ------------------------------------------------------------------------------------------------ result
@dataclass
class UpkeepResult:
    """What one upkeep of one table did."""

    table: TableId
    skipped: str | None = None  # why nothing was done (table locked, no snapshot, write-only, ...)
    compaction_snapshot_id: int | None = None
    partitions_compacted: int = 0
    files_rewritten: int = 0  # live data files the compaction replaced
    upgrade_snapshot_id: int | None = None
    files_upgraded: int = 0  # level-0 files moved to the highest level without a rewrite
    manifest_snapshot_id: int | None = None
    manifests_before: int = 0  # manifests the latest snapshot referenced before upkeep
    manifests_after: int = 0
    expired_snapshots: list[int] = field(default_factory=list)
    expired_consumers: list[str] = field(default_factory=list)  # consumer.expiration-time
    expired_files_deleted: int = 0
    orphan_files_deleted: int = 0
    notes: list[str] = field(default_factory=list)  # steps left out, and why
    seconds: float = 0.0

    def summary(self) -> str:
        if self.skipped:
            return f"{self.table}: upkeep skipped: {self.skipped}"
        parts = []
        if self.compaction_snapshot_id is not None:
            parts.append(f"compacted {self.partitions_compacted} partition(s) ({self.files_rewritten} files) in "
                         f"snapshot {self.compaction_snapshot_id}")
        if self.upgrade_snapshot_id is not None:
            parts.append(f"moved {self.files_upgraded} non-overlapping files to the highest level in snapshot "
                         f"{self.upgrade_snapshot_id}")
        if self.manifest_snapshot_id is not None:
            parts.append(f"merged {self.manifests_before} manifests into {self.manifests_after} in snapshot "
                         f"{self.manifest_snapshot_id}")
        if self.expired_snapshots:
            parts.append(f"expired snapshots {self.expired_snapshots[0]}..{self.expired_snapshots[-1]} "
                         f"({self.expired_files_deleted} files deleted)")
        if self.expired_consumers:
            parts.append(f"removed consumer(s) {', '.join(self.expired_consumers)} (not updated within "
                         f"consumer.expiration-time)")
        if self.orphan_files_deleted:
            parts.append(f"removed {self.orphan_files_deleted} orphan files")
        parts += self.notes
        return f"{self.table}: " + ("; ".join(parts) if parts else "nothing to do") + f" ({self.seconds:.2f}s)"


# ------------------------------------------------------------------------------------------------- entry
def upkeep_table(sink, table_id: TableId, *, compact: bool = True, full_compaction: bool = False,
                 merge_manifests: bool = True, expire: bool = True, remove_orphans: bool = True,
                 orphan_older_than_seconds: float = DEFAULT_ORPHAN_OLDER_THAN_SECONDS,
                 options: dict[str, str] | None = None, wait_seconds: float = 0.0, owner: str = "table upkeep",
                 failpoint: Callable[[str], None] | None = None,
                 log: logging.Logger | logging.LoggerAdapter | None = None) -> UpkeepResult:
    """Upkeep of one table of ``sink`` (a lakecdc.sink.PaimonSink), the steps in the module docstring.

    Uses the sink's lock on the table when it holds it (``with sink.lock(t)``, as a pipeline run does); otherwise
    takes the lock, waiting up to ``wait_seconds`` for another writer, and returns a result with ``skipped`` set
    when the table stays locked. ``full_compaction`` rewrites every bucket holding more than one file or any
    deleted row, instead of only those past the trigger. ``options`` override the table's stored options (e.g. the
    pipeline's current ``table.properties.*``). ``failpoint`` is called with FAILPOINT_* names (crash tests)."""
    log = log or logger
    started = time.monotonic()
    result = UpkeepResult(table_id)
    try:
        with _locked(sink, table_id, wait_seconds, owner):
            _Upkeep(sink, table_id, options, failpoint or (lambda name: None), log, result).run(
                compact=compact, full_compaction=full_compaction, merge_manifests=merge_manifests, expire=expire,
                remove_orphans=remove_orphans, orphan_older_than_seconds=orphan_older_than_seconds)
    except TableLockedError as error:
        result.skipped = f"{error}"
    result.seconds = time.monotonic() - started
    log.info("%s", result.summary())
    return result


@contextlib.contextmanager
def _locked(sink, table_id: TableId, wait_seconds: float, owner: str) -> Iterator[None]:
    if sink.holds_lock(table_id):
        yield
        return
    deadline = time.monotonic() + max(0.0, float(wait_seconds))
    while True:
        lock = sink.lock(table_id, owner=owner)
        try:
            lock.__enter__()
            break
        except TableLockedError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(min(0.5, max(0.01, deadline - time.monotonic())))
    try:
        yield
    finally:
        lock.__exit__(None, None, None)


def is_upkeep_snapshot(properties: dict[str, str] | None) -> bool:
    return properties is not None and UPKEEP_PROPERTY in properties


def latest_change_snapshot_id(sink, table_id: TableId) -> int | None:
    """The newest snapshot that is not an upkeep snapshot (what the last writer committed), or None."""
    snapshots = sink.snapshot_manager(table_id)
    snapshot = snapshots.get_latest_snapshot() if snapshots is not None else None
    while snapshot is not None and is_upkeep_snapshot(snapshot.properties):
        snapshot = snapshots.get_snapshot_by_id(snapshot.id - 1) if snapshot.id > 1 else None
    return snapshot.id if snapshot is not None else None


# ------------------------------------------------------------------------------------------------- steps
class _Upkeep:
    """One upkeep of one table, the lock held."""

    def __init__(self, sink, table_id: TableId, options: dict[str, str] | None, failpoint, log,
                 result: UpkeepResult):
        self.sink, self.table_id, self.failpoint, self.log, self.result = sink, table_id, failpoint, log, result
        self.table = sink._require(table_id, native.NATIVE_OPTIONS)
        stored = {str(k): str(v) for k, v in (self.table.table_schema.options or {}).items() if v is not None}
        self.options = {**stored, **{str(k): str(v) for k, v in (options or {}).items()}}
        self.policy = UpkeepPolicy.from_options(self.options)
        self.files = open_table_files(self.table, table_id)

    def run(self, *, compact: bool, full_compaction: bool, merge_manifests: bool, expire: bool,
            remove_orphans: bool, orphan_older_than_seconds: float) -> None:
        if not self.files.snapshot_ids():
            self.result.skipped = "the table has no snapshot yet"
            return
        if compact:
            self.compact(full_compaction)
        if merge_manifests:
            self.merge_manifests(force=full_compaction)
        self.failpoint(FAILPOINT_UPKEEP)
        if (expire or remove_orphans) and self.files.has_branches():
            self.result.notes.append("expiry and orphan removal left out: the table has branches, whose files "
                                     "lakecdc does not track")
            return
        if expire:
            self.expire_snapshots()
        if remove_orphans:
            self.remove_orphan_files(orphan_older_than_seconds)

    def consumers(self) -> Consumers:
        """The table's consumers (``consumer/consumer-<id>``): Paimon never expires a snapshot one still reads."""
        return Consumers(self.table_id, self.files.store, self.files.dir)

    def latest(self):
        ids = self.files.snapshot_ids()
        return self.files.snapshot(ids[-1]) if ids else None

    # --------------------------------------------------------- compaction
    def _compaction_refused(self) -> str | None:
        o = {k: v.lower() for k, v in self.options.items()}
        if o.get("merge-engine") == "first-row" or o.get("deletion-vectors.enabled") == "true":
            return ("merge-engine=first-row and deletion-vectors tables are read without their level-0 files, so "
                    "a rewrite from a read would drop rows")
        if o.get("row-tracking.enabled") == "true" or o.get("data-evolution.enabled") == "true":
            return "row tracking / data evolution tables keep row ids that a rewrite would change"
        return None

    def compact(self, full: bool) -> None:
        refused = self._compaction_refused()
        if refused:
            self.result.notes.append(f"compaction left out: {refused}")
            return
        latest = self.latest()
        live = self.files.live_entries(latest)
        is_pk = bool(self.table.primary_keys)
        # at least two: a bucket of one sorted run (one file, for append tables) has nothing to merge, so a trigger
        # of 1 compacts each bucket a commit added a run to, not every bucket at every upkeep
        trigger = max(2, self.policy.sorted_run_trigger if is_pk else self.policy.min_file_num)
        buckets: dict[tuple[tuple, int], list[ManifestRecord]] = defaultdict(list)
        for record in live:
            buckets[(record.partition_values, record.bucket)].append(record)
        # buckets due by size come first, as in Paimon's UniversalCompaction.pick
        early = {key for key, records in buckets.items() if is_pk and self.policy.early_full_compaction(records)}
        # buckets a merged read can read file by file once their files sit in one level: no rewrite needed
        upgrades = {} if full or not is_pk else self._upgradable(
            {key: records for key, records in buckets.items() if key not in early}, trigger)
        due = {partition for (partition, bucket), records in buckets.items()
               if (partition, bucket) in early
               or (partition, bucket) not in upgrades and _sorted_runs(records) >= trigger
               or len(records) >= trigger * trigger
               or (full and (len(records) > 1 or (is_pk and any(r.may_retract for r in records))))}
        if due:
            partitions = {partition for partition, _ in buckets}
            whole = not self.table.partition_keys or due == partitions
            snapshot_id, rewritten = self._rewrite(latest, None if whole else sorted(due, key=repr))
            done = partitions if rewritten is None else set(rewritten)
            self.result.compaction_snapshot_id = snapshot_id
            self.result.partitions_compacted = len(done)
            self.result.files_rewritten = sum(len(records) for (partition, _), records in buckets.items()
                                              if partition in done)
            upgrades = {key: records for key, records in upgrades.items() if key[0] not in done}
        if upgrades:
            self._upgrade({r.identifier for records in upgrades.values() for r in records if r.level == 0})

    def _upgradable(self, buckets: dict, trigger: int) -> dict:
        """The buckets whose level-0 files can move to the highest level as they are (Paimon's upgrade of a file
        without rewriting it): every file of the bucket holds no retract row and no two overlap in key range, so
        they form one sorted run a read takes file by file (raw, without merging), however many commits wrote
        them (a chunked snapshot, keys appended in order). Only the deduplicate merge engine: the others' merge
        of a single row is not always the row itself."""
        if self.options.get("merge-engine", "deduplicate").lower() != "deduplicate":
            return {}
        order = self.files.key_order()
        if order is None:
            return {}
        found = {}
        for key, records in buckets.items():
            if len(records) < 2 or len(records) >= trigger * trigger or all(r.level > 0 for r in records) \
                    or any(r.may_retract for r in records):
                continue
            if disjoint_runs(records, order) == 1:
                found[key] = records
        return found

    def _upgrade(self, identifiers: set) -> None:
        """One COMPACT snapshot whose base manifest list holds the latest full state with the files of
        ``identifiers`` at the highest level (their data files stay as they are)."""
        latest = self.latest()
        live = self.files.live_entries(latest)
        level = self.policy.max_level
        moved = [_at_level(r, level) if r.identifier in identifiers else r for r in live]
        count = sum(1 for r in live if r.identifier in identifiers)
        if not count:
            return
        snapshot_id, _ = self._publish_full_state(latest, moved, UPGRADE)
        self.result.upgrade_snapshot_id = snapshot_id
        self.result.files_upgraded = count

    def _rewrite(self, latest, partitions: list[tuple] | None) -> tuple[int, list[tuple] | None]:
        """Rewrite the live rows of ``partitions`` (None: the whole table) in one OVERWRITE snapshot; returns its
        id and the partitions rewritten (None: all)."""
        writer_options = {"changelog-producer": "none"}  # a rewrite is no change: no changelog files
        if partitions is None:
            writer_options["dynamic-partition-overwrite"] = "false"  # static {} = replace every partition
        properties = {**(latest.properties or {}), UPKEEP_PROPERTY: COMPACT}
        writer = self.sink.open_writer(self.table_id, overwrite={}, options=writer_options,
                                       base_snapshot_id=latest.id)
        with writer:
            for partition in partitions if partitions else [None]:
                if self._copy_live_rows(writer, partition) == 0 and partition is not None:
                    # a due partition without live rows would not be replaced by a dynamic overwrite
                    writer.abort()
                    return self._rewrite(latest, None)
            return writer.commit(properties), partitions

    def _copy_live_rows(self, writer, partition: tuple | None) -> int:
        """Write the live rows of ``partition`` (None: all) into ``writer``, bucket by bucket, flushing the writer
        every _FLUSH_ROWS rows so that it never holds much more than that (the Rust writer keeps every row until it
        prepares its files). A dynamic-bucket table's rows go back into the bucket they were read from and it
        flushes only between buckets (the writer's key index is per bucket, see TableWriter.flush): it holds at
        most _FLUSH_ROWS plus one bucket (``dynamic-bucket.target-row-num``, 2,000,000 rows by default)."""
        builder = self.table.new_read_builder()
        if partition is not None:
            builder = builder.with_partition_filter(self._partition_predicate(builder, partition))
        dynamic = bool(self.table.primary_keys) and int(self.options.get("bucket", "-1")) < 1
        try:
            buckets: dict[tuple, list] = {}
            for split in builder.new_scan().plan().splits():
                values = tuple(getattr(split.partition, "values", None) or ())
                buckets.setdefault((values, split.bucket), []).append(split)
        except Exception as error:
            raise SinkError(f"table {self.table_id}: compaction read failed: {error}") from error
        rows = unflushed = 0
        for bucket, splits in self._read_groups(buckets, dynamic):
            try:
                batches = builder.new_read().to_arrow_batch_reader(splits)
            except Exception as error:
                raise SinkError(f"table {self.table_id}: compaction read failed: {error}") from error
            pending, pending_rows = [], 0
            for piece in (b.slice(i, _REWRITE_ROWS) for b in batches for i in range(0, b.num_rows, _REWRITE_ROWS)):
                pending.append(piece)
                pending_rows += piece.num_rows
                if pending_rows >= _REWRITE_ROWS:
                    unflushed += self._write_inserts(writer, pending, bucket if dynamic else None)
                    pending, pending_rows = [], 0
                    if unflushed >= _FLUSH_ROWS and not dynamic:  # fixed buckets: also within a bucket
                        writer.flush()
                        rows, unflushed = rows + unflushed, 0
            if pending:
                unflushed += self._write_inserts(writer, pending, bucket if dynamic else None)
            if unflushed >= _FLUSH_ROWS:
                writer.flush()
                rows, unflushed = rows + unflushed, 0
        return rows + unflushed

    @staticmethod
    def _read_groups(buckets: dict[tuple, list], dynamic: bool) -> Iterator[tuple[int | None, list]]:
        """The splits to read together, with the bucket their rows go back to (None: the writer assigns it). A
        dynamic-bucket table: one bucket at a time. Otherwise consecutive buckets together, up to _FLUSH_ROWS
        rows in their files: every read has a fixed cost, which dominates for small buckets, and small buckets are
        what a size threshold compacts at every upkeep (120 buckets of 1,700 rows: 0.74 s per upkeep with a read
        per bucket, 0.62 s read together)."""
        if dynamic:
            for (_, bucket), splits in buckets.items():
                yield bucket, splits
            return
        group: list = []
        group_rows = 0
        for splits in buckets.values():
            rows = sum(split.row_count for split in splits)
            if group and group_rows + rows > _FLUSH_ROWS:
                yield None, group
                group, group_rows = [], 0
            group += splits
            group_rows += rows
        if group:
            yield None, group

    @staticmethod
    def _write_inserts(writer, batches: list[pa.RecordBatch], bucket: int | None) -> int:
        data = pa.Table.from_batches(batches)
        writer.write(data.append_column(OP_COLUMN, pa.repeat(pa.scalar("+I"), data.num_rows)), bucket)
        return data.num_rows

    def _partition_predicate(self, builder, values: tuple):
        fields = self.table.partition_keys_fields
        pb = builder.new_predicate_builder()
        parts = [pb.is_null(f.name) if v is None else pb.equal(f.name, v) for f, v in zip(fields, values)]
        return parts[0] if len(parts) == 1 else pb.and_predicates(parts)

    # --------------------------------------------------- manifest merging
    def merge_manifests(self, force: bool = False) -> None:
        latest = self.latest()
        manifests = self.files.data_manifests(latest)
        self.result.manifests_before = self.result.manifests_after = len(manifests)
        records = [r for m in manifests for r in self.files.manifest(m)]
        has_deletes = any(r.kind != ADD for r in records)
        if len(manifests) < 2 and not has_deletes:
            return
        if not (has_deletes or len(manifests) >= self.policy.merge_min_count or force):
            return
        snapshot_id, metas = self._publish_full_state(latest, merge_records(records), MERGE_MANIFESTS)
        self.result.manifest_snapshot_id = snapshot_id
        self.result.manifests_after = len(metas)

    def _publish_full_state(self, latest, live: list[ManifestRecord], step: str) -> tuple[int, list]:
        """Publish snapshot ``latest.id + 1`` (COMPACT, no change rows) whose base manifest list holds ``live``
        in new manifest files and whose delta list is empty; returns its id and the manifests written."""
        metas = self.files.write_merged_manifests(live, self.policy.manifest_target_size)
        written = [m.file_name for m in metas]
        try:
            base = self.files.write_manifest_list(metas)
            written.append(base[0])
            delta = self.files.write_manifest_list([])
            written.append(delta[0])
            snapshot_id = self.files.commit_snapshot(
                latest, base=base, delta=delta, total_record_count=sum(r.row_count for r in live),
                commit_user=self.sink.commit_user, commit_kind="COMPACT",
                properties={**(latest.properties or {}), UPKEEP_PROPERTY: step})
        except BaseException:
            for name in written:  # never referenced: safe to drop (orphan removal would, later)
                self.files.remove(self.files.manifest_dir / name)
            raise
        self.sink.note_commit(self.table_id, snapshot_id, latest.id)
        return snapshot_id, metas

    # ----------------------------------------------------------- expiry
    def _expire_until(self, ids: list[int], now_ms: int) -> int:
        """Paimon's ExpireSnapshots rule: snapshots [earliest, returned id) expire."""
        p = self.policy
        earliest, latest = ids[0], ids[-1]
        low = max(latest - p.retained_max + 1, earliest)
        end = latest - p.retained_min + 1
        # the snapshot a consumer reads next, and every later one, is kept (Paimon's ExpireSnapshotsImpl); lakecdc
        # also keeps the one it read last, where a read with before images looks the previous rows up
        next_snapshot = min_next_snapshot(self.consumers().all())
        if next_snapshot is not None:
            end = min(end, next_snapshot - 1)
        checkpoint = self._newest_checkpoint_snapshot(ids)
        if checkpoint is not None:
            end = min(end, checkpoint)
        end = min(end, earliest + p.expire_limit)
        for snapshot_id in range(low, end):
            snapshot = self.files.snapshot(snapshot_id)
            if snapshot is not None and now_ms - p.time_retained_ms <= snapshot.time_millis:
                return snapshot_id
        return end

    def _newest_checkpoint_snapshot(self, ids: list[int]) -> int | None:
        for snapshot_id in reversed(ids):
            snapshot = self.files.snapshot(snapshot_id)
            if snapshot is not None and CHECKPOINT_KEY in (snapshot.properties or {}):
                return snapshot_id
        return None

    def _kept_references(self, snapshot_ids: list[int]) -> References:
        keep = References()
        for snapshot in [self.files.snapshot(i) for i in snapshot_ids] + self.files.tags():
            if snapshot is not None:
                keep.update(self.files.references(snapshot, full_state_only=True))
        return keep

    def expire_snapshots(self, now_ms: int | None = None) -> None:
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        if self.policy.consumer_expiration_ms is not None:
            # first, so that an abandoned consumer stops holding snapshots back (as Paimon does)
            self.result.expired_consumers = self.consumers().expire(
                now_ms - self.policy.consumer_expiration_ms)
        ids = self.files.snapshot_ids()
        end = self._expire_until(ids, now_ms)
        expired = [i for i in ids if i < end]
        if not expired:
            return
        keep = self._kept_references([i for i in ids if i >= end])
        candidates = References()
        for snapshot_id in expired:
            snapshot = self.files.snapshot(snapshot_id)
            if snapshot is not None:
                candidates.update(self.files.references(snapshot, full_state_only=False))
        # the hint first: a writer that publishes an expired id by conditional put finds it past its id and
        # withdraws (lakecdc.sink.object_store.publish_snapshot)
        self.files.write_earliest_hint(end)
        for snapshot_id in expired:  # oldest first: the snapshots left always form one range
            self.files.delete_snapshot_file(snapshot_id)
        self.result.expired_snapshots = expired
        self.result.expired_files_deleted = self._delete(candidates.names - keep.names, older_than_ms=None)

    # ---------------------------------------------------------- orphans
    def remove_orphan_files(self, older_than_seconds: float) -> None:
        keep = self._kept_references(self.files.snapshot_ids())
        cutoff_ms = int((time.time() - max(0.0, float(older_than_seconds))) * 1000)
        found = self.files.walk_files()
        self.result.orphan_files_deleted = self._delete(set(found) - keep.names, older_than_ms=cutoff_ms,
                                                        found=found)

    def _delete(self, names: set[str], *, older_than_ms: int | None, found: dict | None = None) -> int:
        """Delete the files called ``names`` under the table directory (only those last modified before
        ``older_than_ms`` when given); returns how many were deleted."""
        if not names:
            return 0
        found = self.files.walk_files() if found is None else found
        deleted, directories = 0, set()
        for name in sorted(names):
            for path in found.get(name, []):
                if older_than_ms is not None and self.files.mtime_ms(path) > older_than_ms:
                    continue
                if self.files.remove(path):
                    deleted += 1
                    directories.add(path.parent)
                    if deleted == 1:
                        self.failpoint(FAILPOINT_DELETE)
        self.files.remove_empty_dirs(directories)
        return deleted


def _at_level(record: ManifestRecord, level: int) -> ManifestRecord:
    """``record`` naming the same data file at ``level``."""
    raw = {**record.record, "_FILE": {**record.record["_FILE"], "_LEVEL": level}}
    return dataclasses.replace(record, level=level, identifier=record.identifier[:2] + (level,) +
                               record.identifier[3:], record=raw)


def _sorted_runs(records: list[ManifestRecord]) -> int:
    """Sorted runs of a bucket as Paimon counts them: each level-0 file, plus each non-empty higher level."""
    return sum(1 for r in records if r.level == 0) + len({r.level for r in records if r.level > 0})
