"""The freshness case: how long a MySQL commit takes to become readable in Paimon, on the Flink CDC tutorial's
``inventory.orders`` pipeline (assets/tutorial.yaml: the transform, SOFT_DELETE, a partitioned primary-key table)
under a steady stream of changes, measured in the same run:

- fixed cost of a run: ``lakecdc run`` with nothing new to read, process start to exit (median of 5, wall and
  CPU time), next to a bare interpreter start and a run that writes one change, measured alternately;
- follow mode: ``lakecdc run --follow`` with ``pipeline.checkpoint-interval: 3s`` (the tutorial's Flink
  checkpointing interval); target p95 <= 5 s;
- sensor mode: what the binlog sensor does, without the Dagster daemon: every sensor interval, when the head moved,
  one ``lakecdc run`` process (Dagster's own run launch, which adds its process start and code loading, is not in
  this figure); target p95 <= the sensor interval + 10 s.

A writer commits one change (an insert, or an update of an earlier order) every ``WRITE_EVERY`` seconds and
notes, for each, the wall time its COMMIT returned and the binlog position after it. A poller reads the table's
latest Paimon snapshot every ``POLL_EVERY`` seconds; a commit is readable from the first snapshot whose checkpoint
offset (the binlog position the snapshot carries) is at or past the commit's position. Latency = that snapshot's
first sighting minus the commit time (the poll adds at most ``POLL_EVERY``).
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench.common import ROOT, Case, MariaDBServer, installed_env

WRITE_EVERY = 0.2  # seconds between two MySQL commits of the writer (5 commits/s)
POLL_EVERY = 0.05  # seconds between two looks at the Paimon table
FOLLOW_TARGET_P95 = 5.0
FIXED_COST_TARGET = 1.0  # seconds of a `lakecdc run` with nothing to read
SENSOR_SLACK = 10.0  # sensor mode target: p95 <= interval + this
CLI = str(Path(sys.executable).parent / "lakecdc")


def _tutorial(server: MariaDBServer, warehouse: Path, interval: str) -> Path:
    """The tutorial's table with two orders, and its pipeline file (``checkpoint-interval`` added)."""
    server.execute("DROP DATABASE IF EXISTS inventory")
    server.execute("CREATE DATABASE inventory")
    server.execute("CREATE TABLE inventory.orders (id BIGINT NOT NULL, product VARCHAR(100) NOT NULL, "
                   "price DECIMAL(10, 2) NOT NULL, created_at DATETIME(3) NOT NULL, PRIMARY KEY (id))")
    server.execute("INSERT INTO inventory.orders VALUES (101, 'book', 29.90, '2026-01-01 12:00:00'), "
                   "(102, 'pen', 5.00, '2026-01-02 09:30:00')")
    text = (ROOT / "assets" / "tutorial.yaml").read_text()
    text = text.replace("${MYSQL_PORT:-3307}", str(server.port)).replace(
        "file://${LAKECDC_WAREHOUSE:-/tmp/lakecdc-tutorial/warehouse}", f"file://{warehouse}")
    text += f"  checkpoint-interval: {interval}\n"
    path = warehouse.parent / "tutorial.yaml"
    path.write_text(text)
    return path


class _Writer(threading.Thread):
    """One change every WRITE_EVERY s; ``commits``: (wall time the COMMIT returned, binlog position after it)."""

    def __init__(self, server: MariaDBServer):
        super().__init__(daemon=True)
        self.server = server
        self.stop_event = threading.Event()
        self.commits: list[tuple[float, tuple[str, int]]] = []

    def run(self) -> None:
        conn = self.server.connect("inventory")
        conn.autocommit(False)
        next_id = 1000
        try:
            with conn.cursor() as cur:
                while not self.stop_event.is_set():
                    if next_id % 3 == 0:
                        cur.execute("UPDATE orders SET price = price + 1 WHERE id = %s", (next_id - 2,))
                    cur.execute("INSERT INTO orders VALUES (%s, 'pen', 1.50, '2026-01-05 10:00:00')", (next_id,))
                    conn.commit()
                    committed = time.time()
                    cur.execute("SHOW MASTER STATUS")
                    file, pos = cur.fetchone()[:2]
                    self.commits.append((committed, (file, int(pos))))
                    next_id += 1
                    self.stop_event.wait(WRITE_EVERY)
        finally:
            conn.close()


class _Poller(threading.Thread):
    """Sightings of new Paimon snapshots: (wall time first seen, checkpoint (file, pos))."""

    def __init__(self, config):
        super().__init__(daemon=True)
        from lakecdc.model import TableId
        from lakecdc.sink import PaimonSink

        self.sink = PaimonSink(config.sink.catalog_options)
        self.table = TableId("inventory", "orders")
        self.stop_event = threading.Event()
        self.seen: list[tuple[float, tuple[str, int]]] = []

    def run(self) -> None:
        from lakecdc.runtime.checkpoint import read_checkpoint

        last = None
        while not self.stop_event.wait(POLL_EVERY):
            latest = self.sink.latest_snapshot_id(self.table) if self.sink.table_exists(self.table) else None
            if latest is None or latest == last:
                continue
            checkpoint = read_checkpoint(self.sink.checkpoint(self.table))
            last = latest
            if checkpoint is not None and not checkpoint.snapshot_pending:
                self.seen.append((time.time(), (checkpoint.offset.file, checkpoint.offset.pos)))


def _latencies(commits, seen) -> tuple[list[float], int]:
    """Each commit's latency to the first snapshot at or past its position; and how many were never seen."""
    out, unseen = [], 0
    for committed, position in commits:
        visible = next((t for t, offset in seen if offset >= position), None)
        if visible is None:
            unseen += 1
        else:
            out.append(max(0.0, visible - committed))
    return out, unseen


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _measure(server: MariaDBServer, config, seconds: float, drive) -> tuple[list[float], int, int]:
    """Run ``drive(stop_event)`` (follow process or sensor loop) while the writer writes for ``seconds``; then
    give the pipeline time to catch up and return (latencies, commits never seen, commits written)."""
    writer, poller = _Writer(server), _Poller(config)
    poller.start()
    stop = threading.Event()
    driver = threading.Thread(target=drive, args=(stop,), daemon=True)
    driver.start()
    time.sleep(1.0)
    writer.start()
    time.sleep(seconds)
    writer.stop_event.set()
    writer.join()
    deadline = time.time() + 60
    while time.time() < deadline:
        _, unseen = _latencies(writer.commits, poller.seen)
        if not unseen:
            break
        time.sleep(0.2)
    stop.set()
    driver.join()
    poller.stop_event.set()
    poller.join()
    latencies, unseen = _latencies(writer.commits, poller.seen)
    return latencies, unseen, len(writer.commits)


def _timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one child process, start to exit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime




def fixed_cost(server: MariaDBServer, path: Path, env: dict[str, str], runs: int = 5) -> list[str]:
    """The fixed cost of ``lakecdc run`` (process start to exit): with nothing to read (the target), next to a bare
    interpreter start and a run that writes one change, alternating so that the load affects all alike; medians of
    ``runs`` each, wall and CPU time."""
    bare, idle, one = [], [], []
    subprocess.run([CLI, "run", str(path)], check=True, capture_output=True, env=env)  # bytecode cached
    for i in range(runs):
        bare.append(_timed([sys.executable, "-c", "pass"], env))
        idle.append(_timed([CLI, "run", str(path)], env))
        server.execute(f"INSERT INTO inventory.orders VALUES ({900000 + i}, 'cup', 2.50, '2026-01-04 08:00:00')")
        one.append(_timed([CLI, "run", str(path)], env))

    def median(samples: list[tuple[float, float]], which: int) -> float:
        return statistics.median(s[which] for s in samples)

    cost = median(idle, 0)
    verdict = "met" if cost <= FIXED_COST_TARGET else "NOT MET"
    return [f"fixed cost of a run (lakecdc run, nothing to read, process start to exit): {cost:.2f} s wall, "
            f"{median(idle, 1):.2f} s CPU (median of {runs}); target <= {FIXED_COST_TARGET:g} s: {verdict}",
            f"  same run: a bare `python -c pass` {median(bare, 0):.2f} s wall ({cost / median(bare, 0):.1f}x); "
            f"`lakecdc run` writing one change {median(one, 0):.2f} s wall, {median(one, 1):.2f} s CPU "
            f"({median(one, 0) / cost:.1f}x the run with nothing to read: pandas, pypaimon's catalog, the commit, "
            "the row count and the upkeep check)"]


def case(server: MariaDBServer, tmp: Path, seconds: float, sensor_interval: float) -> Case:
    from lakecdc.config import load_pipeline

    lines, notes = [], []
    # follow mode
    warehouse = tmp / "freshness-follow" / "warehouse"
    warehouse.parent.mkdir(parents=True)
    path = _tutorial(server, warehouse, "3s")
    config = load_pipeline(path)
    subprocess.run([CLI, "run", str(path)], check=True, capture_output=True)  # the snapshot
    lines += fixed_cost(server, path, installed_env())

    def follow(stop: threading.Event) -> None:
        proc = subprocess.Popen([CLI, "run", "--follow", str(path)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        stop.wait()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)

    latencies, unseen, written = _measure(server, config, seconds, follow)
    lines.append(_line("follow mode, checkpoint-interval 3 s", latencies, unseen, written, FOLLOW_TARGET_P95))

    # sensor mode
    shutil.rmtree(warehouse.parent)
    warehouse.parent.mkdir(parents=True)
    path = _tutorial(server, warehouse, "3s")
    config = load_pipeline(path)
    subprocess.run([CLI, "run", str(path)], check=True, capture_output=True)

    def sensor(stop: threading.Event) -> None:
        from lakecdc.runtime import pipeline_status

        while not stop.wait(sensor_interval):
            if pipeline_status(config).needs_run:  # what the binlog sensor asks before it launches a run
                subprocess.run([CLI, "run", str(path)], check=True, capture_output=True)

    latencies, unseen, written = _measure(server, config, seconds, sensor)
    lines.append(_line(f"sensor mode, interval {sensor_interval:g} s", latencies, unseen, written,
                       sensor_interval + SENSOR_SLACK))
    notes.append(f"a steady stream of one MySQL commit every {WRITE_EVERY:g} s for {seconds:g} s; latency = first "
                 f"Paimon snapshot at or past the commit's binlog position (polled every {POLL_EVERY:g} s) minus "
                 "the commit; sensor mode runs `lakecdc run` where Dagster would launch a run (Dagster's run "
                 "launch not included)")
    server.execute("DROP DATABASE IF EXISTS inventory")
    return Case("freshness: MySQL commit -> readable in Paimon, tutorial pipeline (bench/freshness_bench.py)",
                "", "", None, 0, lines=lines, notes=notes)


def _line(label: str, latencies: list[float], unseen: int, written: int, target: float) -> str:
    if not latencies:
        return f"{label}: no commit became readable ({written} written)"
    p50, p95, worst = _p(latencies, 0.5), _p(latencies, 0.95), max(latencies)
    verdict = "met" if p95 <= target and not unseen else "NOT MET"
    return (f"{label}: p50 {p50:.2f} s, p95 {p95:.2f} s, max {worst:.2f} s over {written} commits"
            + (f" ({unseen} never readable)" if unseen else "") + f"; target p95 <= {target:g} s: {verdict}")


if __name__ == "__main__":
    import tempfile

    from bench.common import bench_server

    with bench_server() as server, tempfile.TemporaryDirectory(prefix="lakecdc-bench-") as tmp:
        print("\n".join(case(server, Path(tmp), float(os.environ.get("SECONDS", 30)),
                             float(os.environ.get("SENSOR_INTERVAL", 30))).render()))
