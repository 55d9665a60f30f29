"""Peak memory of a snapshot: one snapshot micro-batch of an orders table (MySQL -> committed Paimon) in a child
process, whose RSS high-water mark (the kernel's VmHWM) is reported with its RSS after imports. Run
for two table sizes to show that the peak does not grow with the table (a chunked snapshot holds one commit group,
``lakecdc.snapshot.commit-rows``, at most). The peak is also taken just before the table upkeep that the
micro-batch runs after its commits (lakecdc.runtime.upkeep), so the snapshot's own peak shows apart from it. Then
the child runs a full compaction of the table (``lakecdc upkeep --full``: every live row rewritten), whose peak is
reported too: the memory of a compaction of the whole table.

The two sizes run twice: in the pipeline's default table layout (a primary-key table with dynamic buckets,
``bucket = -1``, whose writer keeps an index of every key of a partition) and with fixed buckets
(``table.properties.bucket: 4``, no key index), which shows what the key index adds.

The child: .venv/bin/python -m bench.memory_bench --port PORT --table TABLE --warehouse DIR [--bucket N]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import ROOT, Case, pipeline_yaml

TARGET_MIB = 1024
INDEPENDENT = 0.2  # "independent of the table size": the larger table's peak within 20 % of the smaller one's
FIXED_BUCKETS = 4  # the fixed-bucket layout measured next to the default one


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/self/status has no {field} (the memory case needs Linux)")


def _rss_mib() -> float:
    return _status_mib("VmRSS")


def child() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--bucket", type=int, help="table.properties.bucket (default: the pipeline's, dynamic)")
    args = parser.parse_args()

    import lakecdc.sink.catalog  # noqa: F401 - imports (pypaimon, pypaimon-rust) belong to the baseline
    from lakecdc.config import parse_pipeline
    from lakecdc.runtime import run_micro_batch

    yaml_text = pipeline_yaml(args.port, args.table, Path(args.warehouse), server_id=5991)
    if args.bucket is not None:
        yaml_text = yaml_text.replace("\nsink:\n", f"\nsink:\n  table.properties.bucket: {args.bucket}\n", 1)
    config = parse_pipeline(yaml_text)
    before_upkeep = _peak_before_upkeep()
    baseline = _rss_mib()
    result = run_micro_batch(config)
    rows = sum(t.rows_written for t in result.tables.values())
    peak = _peak_mib()
    from lakecdc.runtime.upkeep import upkeep_pipeline

    compacted = upkeep_pipeline(config, full_compaction=True, orphan_older_than_seconds=86400.0)
    if not compacted or any(r.skipped for r in compacted):  # (a table in one file has nothing to rewrite)
        raise RuntimeError(f"the full compaction did not run: {[r.summary() for r in compacted]}")
    print(json.dumps({"peak_mib": peak, "snapshot_peak_mib": before_upkeep[0] if before_upkeep else None,
                      "compaction_peak_mib": _peak_mib(), "baseline_mib": baseline, "rows": rows,
                      "commit_rows": config.snapshot_commit_rows}))


def _peak_mib() -> float:
    # VmHWM, the high-water mark of this process's own memory: ru_maxrss is kept across exec and would start at
    # the RSS of the parent that forked this child
    return _status_mib("VmHWM")


def _peak_before_upkeep() -> list:
    """Record the peak RSS when the micro-batch starts its table upkeep (a measuring point: the upkeep still runs).
    An empty list when this lakecdc has no upkeep step (then the run's peak is the snapshot's)."""
    from lakecdc.runtime import micro_batch

    upkeep = getattr(micro_batch, "upkeep_after_commits", None)
    seen: list = []
    if upkeep is None:
        return seen

    def measured(*args, **kwargs):
        seen.append(_peak_mib())
        return upkeep(*args, **kwargs)

    micro_batch.upkeep_after_commits = measured
    return seen


def measure(port: int, table: str, bucket: int | None = None) -> dict:
    """Run the child for ``bench.<table>`` (``bucket``: fixed buckets) and return what it printed."""
    with tempfile.TemporaryDirectory(prefix="lakecdc-bench-memory-") as tmp:
        proc = subprocess.run([sys.executable, "-m", "bench.memory_bench", "--port", str(port), "--table", table,
                               "--warehouse", str(Path(tmp) / "warehouse")]
                              + ([] if bucket is None else ["--bucket", str(bucket)]),
                              cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"memory child for {table} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def case(port: int, tables: list[tuple[str, int]]) -> Case:
    """Peak RSS of a snapshot of each (table, rows), in the default layout and with fixed buckets."""
    lines: list[str] = []
    commit_rows = None
    for layout, bucket in (("default layout (dynamic buckets)", None), (f"bucket = {FIXED_BUCKETS}", FIXED_BUCKETS)):
        lines.append(f"{layout}:")
        commit_rows = _layout_lines(port, tables, bucket, lines)
    title = (f"peak memory of a snapshot micro-batch (RSS high-water mark, VmHWM, of a child process; "
             f"lakecdc.snapshot.commit-rows = {commit_rows:,})")
    return Case(title, "MiB", "", None, 0, lines=lines)


def _layout_lines(port: int, tables: list[tuple[str, int]], bucket: int | None, lines: list[str]) -> int:
    peaks, snapshot_peaks, compaction_peaks, commit_rows = [], [], [], 0
    for table, rows in tables:
        got = measure(port, table, bucket)
        if got["rows"] != rows:
            raise RuntimeError(f"memory child wrote {got['rows']} rows of {table}, expected {rows}")
        peaks.append(got["peak_mib"])
        commit_rows = got["commit_rows"]
        snapshot = got["snapshot_peak_mib"]
        if snapshot is not None:
            snapshot_peaks.append(snapshot)
        before = "" if snapshot is None else f"   before the upkeep step {snapshot:>7,.0f} MiB"
        compaction = got.get("compaction_peak_mib")
        if compaction is not None:
            compaction_peaks.append(compaction)
        after = "" if compaction is None else f"   with a full compaction after it {compaction:>7,.0f} MiB"
        lines.append(f"  {rows:>11,} rows   peak RSS {got['peak_mib']:>7,.0f} MiB{before}{after}   "
                     f"(after imports {got['baseline_mib']:,.0f} MiB)")
    for label, values in (("whole micro-batch", peaks), ("snapshot before the upkeep step", snapshot_peaks),
                          ("micro-batch and a full compaction", compaction_peaks)):
        if not values:
            continue
        growth = values[-1] - values[0]
        verdict = "met" if max(values) < TARGET_MIB and growth <= INDEPENDENT * values[0] else "NOT MET"
        lines.append(f"  {label}: target < {TARGET_MIB:,} MiB, independent of the table size: {verdict} "
                     f"(peak {max(values):,.0f} MiB; largest table vs smallest: {growth:+,.0f} MiB)")
    return commit_rows


if __name__ == "__main__":
    child()
