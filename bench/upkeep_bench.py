"""Benchmark: a merged read of a primary-key table after many small micro-batch commits, with lakecdc's table upkeep
running after every commit (as a pipeline does by default), against the same rows freshly compacted (issue 9
target: at most 1.5x). For context it also reads the same commits without any upkeep.

Four tables get the same seeded commits (upserts and deletes of random keys over every bucket, written by the same
native writer the pipeline uses): ``with_upkeep`` runs ``Table.upkeep()`` after each commit; ``no_upkeep`` never
does; ``compacted``, the reference, is fully compacted (one file per bucket, one manifest) after each of the last
``trigger + 1`` commits. A bucket is rewritten once it holds ``num-sorted-run.compaction-trigger`` files, so the
read time of ``with_upkeep`` cycles with the commits: after each of the last ``trigger + 1`` commits it is read in
turn with the reference (three rounds, medians, so that host noise hits both alike), and the mean and the worst of
the ratios are reported. Reads are pypaimon's native merged read of the whole table.

The fourth, ``size_threshold``, gets the same commits and upkeep with Paimon's
``compaction.total-size-threshold`` (TOTAL_SIZE_THRESHOLD): a bucket smaller than that is compacted as soon as it
holds two sorted runs, the trigger left at its default.

Then the cost of each sorted run: the same layout compacted once and given one commit after another without upkeep,
read after each against a copy compacted after every commit (a bucket of one file is read as it is, a bucket of
more goes through Paimon's sort-merge reader); once in the main case's layout (buckets of about 1,700 rows) and
once with 5 x ROWS rows in 4 buckets (about 250,000 rows each), where opening a file is a small part of reading it.

A last case is the table a chunked snapshot leaves: 5 x ROWS rows (1,000,000) committed in ``SNAPSHOT_GROUPS``
groups of consecutive keys (as a snapshot with ``lakecdc.snapshot.commit-rows`` of 250,000 commits them), into the
pipeline's default table layout (unpartitioned, dynamic buckets). Its first upkeep is timed (it moves the
non-overlapping files up a level instead of rewriting them) against a full compaction of a copy, and its merged
read against the compacted copy's.

Usage: .venv/bin/python -m bench.upkeep_bench [ROWS] [COMMITS] [CHANGES_PER_COMMIT] [TRIGGER]
       (default 200,000 200 2,000 and Paimon's default trigger 5)
"""

import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from lakecdc.paimon import Catalog

OPTIONS = {"bucket": "4", "snapshot.num-retained.min": "3", "snapshot.time-retained": "0 s"}
# Paimon's early full compaction by size, for the third table of the main case: its buckets (a few hundred KB)
# are all below it, so every bucket a commit adds a sorted run to is compacted at the next upkeep
TOTAL_SIZE_THRESHOLD = "1 mb"
PARTITIONS = 30
SNAPSHOT_GROUPS = 4


def batch(ids: list[int], kinds: list[str], version: int) -> pa.Table:
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "product": pa.array([f"product-{i % 1000}-{version}" for i in ids]),
        "price": pa.array([(i * 7 + version) % 10000 / 100 for i in ids], pa.float64()),
        "order_day": pa.array([f"2026-01-{1 + i % PARTITIONS:02d}" for i in ids]),
        "rowkind": pa.array(kinds),
    })


def commits(rows: int, count: int, changes: int, seed: int = 42):
    """The first commit inserts ``rows`` rows; then ``count`` commits of ``changes`` upserts (10% deletes)."""
    yield batch(list(range(rows)), ["+I"] * rows, 0)
    rng = random.Random(seed)
    live = set(range(rows))
    for version in range(1, count + 1):
        ids = rng.sample(range(int(rows * 1.05)), changes)
        kinds = []
        for i in ids:
            if i in live and rng.random() < 0.1:
                kinds.append("-D")
                live.discard(i)
            else:
                kinds.append("+U" if i in live else "+I")
                live.add(i)
        yield batch(ids, kinds, version)


def read_seconds(table) -> tuple[float, int]:
    times, rows = [], 0
    for _ in range(3):
        started = time.perf_counter()
        rows = table.read().to_arrow().num_rows
        times.append(time.perf_counter() - started)
    return statistics.median(times), rows


def row_count(table) -> int:
    return table.read().to_arrow().num_rows


def data_files(warehouse: Path, name: str) -> int:
    return sum(1 for _ in (warehouse / "bench.db" / name).rglob("data-*.parquet"))


def snapshot_case(catalog, rows: int) -> None:
    """Upkeep and merged read after a snapshot committed in groups of consecutive keys, against a compacted copy."""
    schema = [("id", "BIGINT"), ("product", "STRING"), ("price", "DOUBLE"), ("order_day", "STRING")]
    tables = {name: catalog.create_table(f"bench.snapshot_{name}", schema, primary_keys=["id"],
                                         options={"bucket": "-1"}) for name in ("kept_up", "compacted")}
    step = rows // SNAPSHOT_GROUPS
    for group in range(SNAPSHOT_GROUPS):
        data = batch(list(range(group * step, (group + 1) * step)), ["+I"] * step, 0)
        for table in tables.values():
            table.write(data)
    started = time.perf_counter()
    result = tables["kept_up"].upkeep(orphan_older_than_seconds=0)
    upkeep = time.perf_counter() - started
    started = time.perf_counter()
    tables["compacted"].upkeep(full_compaction=True, orphan_older_than_seconds=0)
    compaction = time.perf_counter() - started
    seconds = paired_reads(tables)
    kept_up, fresh = seconds["kept_up"], seconds["compacted"]
    assert row_count(tables["kept_up"]) == row_count(tables["compacted"]) == rows
    print(f"{rows:,} rows committed in {SNAPSHOT_GROUPS} groups of consecutive keys (a chunked snapshot; "
          f"unpartitioned, dynamic buckets)")
    print(f"  first upkeep: {upkeep:.3f} s ({result.summary()}); a full compaction instead: {compaction:.3f} s = "
          f"{compaction / upkeep:.1f}x")
    print(f"  merged read after it: {kept_up:.3f} s = {kept_up / fresh:.2f}x the compacted copy's {fresh:.3f} s "
          f"(target <= 1.5x)")


def runs_case(catalog, rows: int, changes: int, max_runs: int = 5, partitioned: bool = True) -> None:
    """What one more sorted run per bucket costs a merged read: the same layout, compacted once and then given
    1 to ``max_runs - 1`` commits without upkeep, against a copy compacted after every commit. ``partitioned``: the
    main case's layout (PARTITIONS partitions x 4 buckets); otherwise one partition of 4 buckets (large buckets)."""
    schema = [("id", "BIGINT"), ("product", "STRING"), ("price", "DOUBLE"), ("order_day", "STRING")]
    layout = "partitioned" if partitioned else "large"
    tables = {name: catalog.create_table(f"bench.runs_{layout}_{name}", schema, primary_keys=["id", "order_day"],
                                         partition_keys=["order_day"] if partitioned else (), options=OPTIONS)
              for name in ("growing", "compacted")}
    ratios = []
    for number, data in enumerate(commits(rows, max_runs - 1, changes, seed=7)):
        for name, table in tables.items():
            table.write(data)
            if name == "compacted" or number == 0:
                table.upkeep(full_compaction=True, orphan_older_than_seconds=0)
        if number:
            seconds = paired_reads(tables)
            assert row_count(tables["growing"]) == row_count(tables["compacted"])
            ratios.append(f"{number + 1} runs {seconds['growing'] / seconds['compacted']:.2f}x")
    buckets = PARTITIONS * 4 if partitioned else 4
    print(f"  merged read by sorted runs per bucket ({rows:,} rows in {buckets} buckets, about {rows // buckets:,} "
          f"rows each; compacted once, then commits of {changes:,} changes without upkeep, each adding a run to the "
          f"buckets it changes), against the same rows compacted after every commit: {', '.join(ratios)}")


def paired_reads(tables: dict) -> dict[str, float]:
    """Median read seconds of each table, read in turn three times (so that host noise hits them alike)."""
    times: dict[str, list[float]] = {name: [] for name in tables}
    for _ in range(3):
        for name, table in tables.items():
            started = time.perf_counter()
            table.read().to_arrow()
            times[name].append(time.perf_counter() - started)
    return {name: statistics.median(seconds) for name, seconds in times.items()}


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    changes = int(sys.argv[3]) if len(sys.argv) > 3 else 2_000
    trigger = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    work = Path(tempfile.mkdtemp(prefix="lakecdc-upkeep-bench-"))
    try:
        catalog = Catalog(work / "warehouse")
        schema = [("id", "BIGINT"), ("product", "STRING"), ("price", "DOUBLE"), ("order_day", "STRING")]
        options = {**OPTIONS, "num-sorted-run.compaction-trigger": str(trigger)}
        threshold = {**options, "compaction.total-size-threshold": TOTAL_SIZE_THRESHOLD}
        # compacted: the reference, fully compacted after each of the window's commits (read next to the others)
        tables = {name: catalog.create_table(f"bench.{name}", schema, primary_keys=["id", "order_day"],
                                             partition_keys=["order_day"],
                                             options=threshold if name == "size_threshold" else options)
                  for name in ("with_upkeep", "no_upkeep", "size_threshold", "compacted")}
        upkeep_seconds = {"with_upkeep": 0.0, "size_threshold": 0.0}
        write_seconds = 0.0
        # after each of the last trigger + 1 commits: each table's read against the compacted one's, read in turn
        ratios: dict[str, list[float]] = {name: [] for name in upkeep_seconds}
        fresh_reads: list[float] = []
        for number, data in enumerate(commits(rows, count, changes)):
            for table in tables.values():
                started = time.perf_counter()
                table.write(data)
                write_seconds += time.perf_counter() - started
            for name in upkeep_seconds:
                started = time.perf_counter()
                tables[name].upkeep(orphan_older_than_seconds=0)
                upkeep_seconds[name] += time.perf_counter() - started
            if number > count - trigger - 1:
                tables["compacted"].upkeep(full_compaction=True, orphan_older_than_seconds=0)
                seconds = paired_reads({name: tables[name] for name in ("compacted", *upkeep_seconds)})
                fresh_reads.append(seconds["compacted"])
                for name in upkeep_seconds:
                    ratios[name].append(seconds[name] / seconds["compacted"])
        neglected, neglected_rows = read_seconds(tables["no_upkeep"])
        neglected_files = data_files(work / "warehouse", "no_upkeep")
        fresh, fresh_rows = read_seconds(tables["compacted"])
        assert row_count(tables["with_upkeep"]) == row_count(tables["size_threshold"]) == neglected_rows == fresh_rows

        print(f"{rows:,} rows, {count} commits of {changes:,} changes, {PARTITIONS} partitions x 4 buckets, "
              f"compaction trigger {trigger}; writes take {write_seconds / (len(tables) * (count + 1)) * 1000:.0f} ms "
              f"per commit")
        print(f"  merged read, freshly compacted (reference, after each of the last {len(fresh_reads)} commits): "
              f"{min(fresh_reads):.3f}-{max(fresh_reads):.3f} s")
        labels = {"with_upkeep": "upkeep after every commit",
                  "size_threshold": f"the same with compaction.total-size-threshold {TOTAL_SIZE_THRESHOLD}"}
        for name, label in labels.items():
            print(f"  merged read, {label} ({upkeep_seconds[name] / (count + 1) * 1000:.0f} ms of upkeep per commit), "
                  f"against the reference read next to it after each of the last {len(ratios[name])} commits: mean "
                  f"{statistics.mean(ratios[name]):.2f}x, worst {max(ratios[name]):.2f}x (target <= 1.5x; "
                  f"{data_files(work / 'warehouse', name)} data files on disk)")
        print(f"  merged read, no upkeep: {neglected:.3f} s = {neglected / fresh:.2f}x the reference's {fresh:.3f} s "
              f"({neglected_files} data files on disk)")
        runs_case(catalog, rows, changes, trigger)
        runs_case(catalog, 5 * rows, changes, trigger, partitioned=False)
        snapshot_case(catalog, 5 * rows)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
