"""What the benchmark cases share: the private MariaDB with its orders tables, the pipeline YAML, and the result
lines (lakecdc's rate, each reference's rate, the ratio and the target) the suite prints."""

from __future__ import annotations

import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.mariadb_server import SERVER_FLAGS, MariaDBServer

ROOT = Path(__file__).resolve().parent.parent

# The benchmark server caches its tables in memory (the tests' server keeps 64 MiB): every reader measured then
# reads from the same warm buffer pool.
BENCH_SERVER_FLAGS = tuple("--innodb-buffer-pool-size=2G" if flag.startswith("--innodb-buffer-pool-size=") else flag
                           for flag in SERVER_FLAGS)


def bench_server() -> MariaDBServer:
    """The suite's private MariaDB (binlog on, as for the tests) with a buffer pool that holds its tables."""
    return MariaDBServer(flags=BENCH_SERVER_FLAGS)

DATABASE = "bench"

# A realistic orders table: int primary key, varchar, decimal, datetime, int.
ORDERS_DDL = ("CREATE TABLE {db}.{table} (id INT NOT NULL PRIMARY KEY, customer VARCHAR(64) NOT NULL, "
              "amount DECIMAL(12,2) NOT NULL, created_at DATETIME NOT NULL, quantity INT NOT NULL)")
ORDERS_ROWS = ("INSERT INTO {db}.{table} SELECT seq, CONCAT('customer-', seq % 50000), (seq % 100000) / 100, "
               "TIMESTAMP'2026-01-01 00:00:00' + INTERVAL (seq % 31536000) SECOND, 1 + seq % 20 "
               "FROM seq_{first}_to_{last}")
LOAD_STEP = 1_000_000  # rows per INSERT ... SELECT (bounded transactions)

# The snapshot pipeline: the table as it is into a primary-key table (no transform: the references copy too).
PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: root
  password: ""
  tables: {db}.{table}
  server-id: {server_id}
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {warehouse}
pipeline:
  name: bench {table}
"""


def pipeline_yaml(port: int, table: str, warehouse: Path, server_id: int = 5990, readers: int = 1) -> str:
    """The snapshot pipeline; ``readers``: pipeline.parallelism (the incremental snapshot's chunk readers)."""
    text = PIPELINE.format(port=port, db=DATABASE, table=table, warehouse=warehouse, server_id=server_id)
    return text + (f"  parallelism: {readers}\n" if readers != 1 else "")


def create_orders(server: MariaDBServer, table: str, rows: int) -> float:
    """Create and fill ``bench.<table>`` with ``rows`` orders (server-side); returns the seconds it took."""
    started = time.perf_counter()
    server.execute(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    server.execute(ORDERS_DDL.format(db=DATABASE, table=table))
    for first in range(1, rows + 1, LOAD_STEP):
        last = min(rows, first + LOAD_STEP - 1)
        server.execute(ORDERS_ROWS.format(db=DATABASE, table=table, first=first, last=last), database=DATABASE)
    return time.perf_counter() - started


# ----------------------------------------------------------------------------------------------------- results


@dataclass
class Reference:
    """A reference measured in the same run; ``target``: the ratio lakecdc should reach (ours/reference for
    rates, or None for information only)."""

    label: str
    seconds: float | None
    items: int
    target: float | None = None
    note: str = ""  # e.g. why it was skipped

    @property
    def rate(self) -> float | None:
        return self.items / self.seconds if self.seconds else None


@dataclass
class Case:
    """One benchmark case: lakecdc's measurement and the references next to it."""

    title: str
    unit: str  # "rows/s", "changes/s"
    label: str
    seconds: float | None
    items: int
    references: list[Reference] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    lines: list[str] | None = None  # a case printed as it is (memory, upkeep)

    @property
    def rate(self) -> float | None:
        return self.items / self.seconds if self.seconds else None

    def ratio(self, ref: Reference) -> float | None:
        if self.rate is None or ref.rate is None:
            return None
        return self.rate / ref.rate

    def render(self) -> list[str]:
        out = [self.title]
        if self.lines is not None:
            return out + [f"  {line}" for line in self.lines] + [f"  {n}" for n in self.notes]
        out.append(f"  {self.label:<44}{fmt_rate(self.rate):>12} {self.unit}  ({fmt_seconds(self.seconds)})")
        for ref in self.references:
            if ref.rate is None:
                out.append(f"  {ref.label:<44}{'-':>12}          {ref.note}")
                continue
            ratio = self.ratio(ref)
            verdict = ""
            if ref.target is not None and ratio is not None:
                verdict = f"  target >= {ref.target:g}x: {'met' if ratio >= ref.target else 'NOT MET'}"
            out.append(f"  {ref.label:<44}{fmt_rate(ref.rate):>12} {self.unit}  ({fmt_seconds(ref.seconds)})  "
                       f"lakecdc = {ratio:.2f}x{verdict}")
        return out + [f"  {n}" for n in self.notes]


def fmt_rate(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:,.0f}"


def fmt_seconds(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f} s"


@contextmanager
def upkeep_timer(seconds: list):
    """Adds the seconds a micro-batch spends in its table upkeep step (lakecdc.runtime.upkeep, after the commits) to
    ``seconds``; a measuring point only (the upkeep runs as usual; nothing is added when there is no such step)."""
    from lakecdc.runtime import micro_batch

    upkeep = getattr(micro_batch, "upkeep_after_commits", None)
    if upkeep is None:
        yield
        return

    def timed_upkeep(*args, **kwargs):
        started = time.perf_counter()
        try:
            return upkeep(*args, **kwargs)
        finally:
            seconds.append(time.perf_counter() - started)

    micro_batch.upkeep_after_commits = timed_upkeep
    try:
        yield
    finally:
        micro_batch.upkeep_after_commits = upkeep


def median_seconds(samples: list[float]) -> float:
    """The median of repeated measurements (runs alternate with their references, so a burst of load from
    elsewhere hits one sample of each, not a whole side)."""
    return statistics.median(samples)


def repeats_note(repeats: int, samples: dict[str, list[float]] | None = None) -> list[str]:
    """The note saying the figures are medians, with every run's seconds (``samples``: label -> seconds)."""
    if repeats <= 1:
        return []
    runs = "; ".join(f"{label} {', '.join(f'{s:.2f}' for s in values)}" for label, values in (samples or {}).items())
    return [f"median of {repeats} runs of each, alternating" + (f" (seconds: {runs})" if runs else "")]


def timed(fn, *args, **kwargs) -> tuple[float, object]:
    started = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - started, result


def installed_env() -> dict[str, str]:
    """The environment of a measured ``lakecdc`` process: bytecode cached as after an install (pip compiles the
    packages it installs; lakecdc's own modules get their ``__pycache__`` once), even where the environment sets
    PYTHONDONTWRITEBYTECODE (then every start would compile lakecdc's modules again)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


@functools.cache
def _cli_env() -> dict[str, str]:
    """installed_env, with lakecdc's modules compiled before the first measured command."""
    env = installed_env()
    subprocess.run([sys.executable, "-m", "compileall", "-q", "lakecdc"], cwd=ROOT, env=env, check=True)
    return env


# The kernel's peak RSS of a waited child (getrusage's ru_maxrss) counts the memory of the process it was forked
# from when it execs (Linux records the old address space's high-water mark at exec), so a command started from the
# bench's own process would report at least the bench's size. It is started by this small launcher instead, which
# writes the peak (KiB) and the exit code of the command it waited for into the file named first.
_PEAK_LAUNCHER = ("import os, subprocess, sys\n"
                  "child = subprocess.Popen(sys.argv[2:])\n"
                  "_, status, usage = os.wait4(child.pid, 0)\n"
                  "code = os.waitstatus_to_exitcode(status)\n"
                  "open(sys.argv[1], 'w').write(f'{usage.ru_maxrss} {code}')\n"
                  "sys.exit(code if code >= 0 else 1)\n")


@dataclass
class Measured:
    """One command, start to exit: its seconds, its peak RSS (the largest of its process and the descendants it
    waited for, as ``/usr/bin/time -v`` reports it) and what it printed."""

    seconds: float
    peak_mib: float
    returncode: int
    stdout: str
    stderr: str


def measured_run(command: list[str], *, env: dict[str, str] | None = None, cwd: Path = ROOT) -> Measured:
    """Run ``command`` to its end through the peak-RSS launcher (about 20 ms of Python start-up added to its
    seconds)."""
    with tempfile.TemporaryDirectory(prefix="lakecdc-bench-peak-") as tmp:
        result = Path(tmp) / "peak"
        seconds, proc = timed(subprocess.run, [sys.executable, "-I", "-S", "-c", _PEAK_LAUNCHER, str(result),
                                               *command], cwd=cwd, env=env, capture_output=True, text=True)
        peak_kib, code = (int(v) for v in result.read_text().split()) if result.exists() else (0, proc.returncode)
    return Measured(seconds, peak_kib / 1024, code, proc.stdout, proc.stderr)


def cli_run(yaml_text: str) -> tuple[float, list[dict]]:
    """``lakecdc run --json`` of the pipeline in its own process, as a user runs it: the seconds from process start
    to exit, and the tables of its result."""
    env = _cli_env()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pipeline.yaml"
        path.write_text(yaml_text)
        seconds, proc = timed(subprocess.run, [sys.executable, "-m", "lakecdc.cli", "run", "--json", str(path)],
                              cwd=ROOT, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"lakecdc run failed ({proc.returncode}): {proc.stderr[-3000:]}")
    return seconds, json.loads(proc.stdout)["tables"]
