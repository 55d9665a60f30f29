"""lakecdc's benchmark suite, one command: ``.venv/bin/python -m bench [--quick]`` (or ``bench/run.sh``).

It starts its own private MariaDB (tests/mariadb_server.py) and a warehouse in a temp dir, creates its data there,
and prints for each case lakecdc's rate next to references measured in the same run, the ratio and the target:

- snapshot: an orders table, MySQL -> committed Paimon, vs ``mariadb --batch`` and dlt (pyarrow, connectorx);
- memory: peak RSS of a snapshot micro-batch in a child process, for two table sizes;
- binlog: row changes -> committed Paimon, vs python-mysql-replication decoding the same events;
- transform: the tutorial transform vs hand-written pyarrow.compute;
- upkeep: bench/upkeep_bench.py (merged read after many commits vs compacted), run as it is when present;
- s3: a snapshot micro-batch into an s3:// warehouse on a local S3 server vs into a local-disk warehouse;
- freshness: how long a MySQL commit takes to become readable in Paimon (p50/p95) on the tutorial pipeline, in
  follow mode and in sensor mode, and the fixed cost of a run;
- whole-database: N tables (10, 100, 1,000) of 1,000 rows with 1,000 changes spread over them, the binlog run of
  the CLI (its whole command) vs one Dagster run of every table, with the MySQL connections each opened; loading the
  definitions and one sensor tick (bench/wholedb_bench.py);
- routine: a 3,000,000-row and a 30,000-row table, each in its own pipeline: the Dagster micro-batch of 10 changes
  (``dagster asset materialize``, whole command) on the large table as a ratio to the small one, the MySQL rows it
  reads, and the peak memory of ``lakecdc resnapshot`` against the first snapshot's (bench/routine_bench.py).

Benchmark-only dependencies (dlt, connectorx: the ``bench`` extra of pyproject.toml) are installed when missing,
unless ``--no-install`` (then the dlt references are skipped).
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, Case, bench_server, create_orders

CASES = ("snapshot", "memory", "binlog", "transform", "upkeep", "s3", "freshness", "whole-database", "routine")
FULL = dict(rows=1_000_000, big_rows=5_000_000, changes=1_000_000, transform_rows=1_000_000,
            # upkeep_args=None: upkeep_bench.py's own defaults
            upkeep_args=None, s3_rows=200_000, freshness_seconds=60.0, sensor_interval=30.0, repeats=3,
            wholedb_tables="10,100,1000", routine_rows="3000000,30000")
QUICK = dict(rows=50_000, big_rows=250_000, changes=50_000, transform_rows=100_000,
             upkeep_args="20000 30 500", s3_rows=20_000, freshness_seconds=15.0, sensor_interval=5.0, repeats=1,
             wholedb_tables="10,50", routine_rows="300000,3000")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run of every case")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated subset of {', '.join(CASES)}")
    parser.add_argument("--rows", type=int, help="rows of the snapshot table (default 1,000,000)")
    parser.add_argument("--big-rows", type=int, help="rows of the second memory-case table (default 5,000,000)")
    parser.add_argument("--changes", type=int, help="binlog row changes (default 1,000,000; at most 2x --rows)")
    parser.add_argument("--transform-rows", type=int, help="rows of the transform case (default 1,000,000)")
    parser.add_argument("--s3-rows", type=int, help="rows of the s3 case's table (default 200,000)")
    parser.add_argument("--freshness-seconds", type=float,
                        help="how long the freshness case's writer writes, per mode (default 60)")
    parser.add_argument("--sensor-interval", type=float,
                        help="the freshness case's sensor interval in seconds (default 30, the sensor's default)")
    parser.add_argument("--repeats", type=int,
                        help="runs of lakecdc and of each reference in the snapshot and binlog cases, alternating; "
                             "the medians are compared (default 3; --quick: 1)")
    parser.add_argument("--wholedb-tables", help="table counts of the whole-database case (default 10,100,1000)")
    parser.add_argument("--routine-rows", help="rows of the routine case's large and small tables (default "
                                               "3000000,30000)")
    parser.add_argument("--upkeep-args", help="arguments for bench/upkeep_bench.py (ROWS COMMITS CHANGES)")
    parser.add_argument("--dlt-backends", default="pyarrow,connectorx",
                        help="dlt references of the snapshot case (comma-separated; empty: none)")
    parser.add_argument("--no-install", action="store_true", help="do not install the bench extra when missing")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    for name, default in sizes.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    args.cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    args.dlt_backends = [b.strip() for b in args.dlt_backends.split(",") if b.strip()]
    unknown = set(args.cases) - set(CASES)
    if unknown:
        parser.error(f"unknown case(s) {', '.join(sorted(unknown))}; choose from {', '.join(CASES)}")
    return args


def bench_requirements() -> list[str]:
    """The requirements of the ``bench`` extra, from pyproject.toml (constraints.txt pins their versions)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    with open(ROOT / "pyproject.toml", "rb") as f:
        return list(tomllib.load(f)["project"]["optional-dependencies"]["bench"])


def ensure_bench_extra() -> None:
    """Install the bench extra's packages (with the project's constraints) when dlt or connectorx is missing."""
    if all(importlib.util.find_spec(name) is not None for name in ("dlt", "connectorx")):
        return
    requirements = bench_requirements()
    print(f"installing the bench extra: {' '.join(requirements)}", flush=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    "-c", str(ROOT / "constraints.txt"), *requirements], check=True)
    importlib.invalidate_caches()


def upkeep_case(args) -> Case | None:
    """bench/upkeep_bench.py run as it is (another module owns it): its output, indented."""
    script = ROOT / "bench" / "upkeep_bench.py"
    if not script.exists():
        return None
    command = [sys.executable, str(script), *(args.upkeep_args.split() if args.upkeep_args else [])]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"bench/upkeep_bench.py failed:\n{proc.stderr[-3000:]}")
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    return Case("table upkeep: merged read after many micro-batch commits vs compacted (bench/upkeep_bench.py)",
                "", "", None, 0, lines=lines)


def run(args) -> list[Case]:
    from bench import binlog_bench, freshness_bench, memory_bench, s3_bench, snapshot_bench, transform_bench

    cases: list[Case] = []

    def report(case: Case | None) -> None:
        if case is not None:
            cases.append(case)
            print("\n".join(case.render()) + "\n", flush=True)

    if "transform" in args.cases:
        report(transform_bench.case(args.transform_rows))
    if any(c in args.cases for c in ("snapshot", "memory", "binlog", "s3")):
        with bench_server() as server, tempfile.TemporaryDirectory(prefix="lakecdc-bench-") as tmp:
            print(f"private MariaDB on port {server.port}; loading {args.rows:,} orders ...", flush=True)
            load = create_orders(server, "orders", args.rows)
            print(f"loaded in {load:.1f} s\n", flush=True)
            warehouse = Path(tmp) / "warehouse"
            config = None
            if "snapshot" in args.cases:
                case, config = snapshot_bench.case(server, "orders", args.rows, warehouse, args.dlt_backends,
                                                   args.repeats)
                report(case)
            if "binlog" in args.cases:  # before the memory case loads its table: its binlog is not this case's
                if config is None:  # the binlog case continues a committed snapshot
                    _, _, config = snapshot_bench.run_snapshot(server, "orders", warehouse)
                report(binlog_bench.case(server, "orders", args.rows, args.changes, config, args.repeats))
            if "memory" in args.cases:
                # its own tables: the binlog case changed the orders table
                print(f"loading {args.rows:,} and {args.big_rows:,} orders for the memory case ...", flush=True)
                create_orders(server, "orders_mem", args.rows)
                create_orders(server, "orders_big", args.big_rows)
                report(memory_bench.case(server.port, [("orders_mem", args.rows), ("orders_big", args.big_rows)]))
            if "s3" in args.cases:
                create_orders(server, "orders_s3", args.s3_rows)
                report(s3_bench.case(server, "orders_s3", args.s3_rows))
    if "freshness" in args.cases:  # its own server: the tutorial's inventory.orders, no other load on it
        with bench_server() as server, tempfile.TemporaryDirectory(prefix="lakecdc-bench-") as tmp:
            report(freshness_bench.case(server, Path(tmp), args.freshness_seconds, args.sensor_interval))
    if "upkeep" in args.cases:
        report(upkeep_case(args))
    if "whole-database" in args.cases:  # its own server and warehouses
        from bench import wholedb_bench
        report(wholedb_bench.case([int(n) for n in args.wholedb_tables.split(",")]))
    if "routine" in args.cases:  # its own server, warehouse and Dagster instance
        from bench import routine_bench
        large, small = (int(n) for n in args.routine_rows.split(","))
        report(routine_bench.case(large, small, args.repeats))
    return cases


def summary(cases: list[Case]) -> list[str]:
    """A markdown table of every case with a rate (for docs/benchmarks.md)."""
    out = ["| case | lakecdc | reference | lakecdc / reference | target |", "|---|---|---|---|---|"]
    for case in cases:
        if case.lines is not None or case.rate is None:
            continue
        for ref in case.references:
            ratio = case.ratio(ref)
            target = "-" if ref.target is None else f">= {ref.target:g}x" + (
                "" if ratio is None else (" (met)" if ratio >= ref.target else " (not met)"))
            ref_rate = ref.note or f"{ref.rate:,.0f} {case.unit}"
            out.append(f"| {case.title} | {case.rate:,.0f} {case.unit} | {ref.label}: {ref_rate} | "
                       f"{'-' if ratio is None else f'{ratio:.2f}x'} | {target} |")
    return out


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if not args.no_install and "snapshot" in args.cases and args.dlt_backends:
        ensure_bench_extra()
    started = time.perf_counter()
    cases = run(args)
    print("summary\n" + "\n".join(summary(cases)))
    print(f"\nsuite finished in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
