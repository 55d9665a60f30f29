"""Concurrency: two runs of one pipeline never write one Paimon table at the same time. The second one fails at once
with a message naming the table, the lock file and the holder, before it writes anything; the first one finishes;
the table equals MySQL. The binlog sensor does not request a run for a table that an active Dagster run is writing,
whichever way that run was launched (its own job, or *Materialize* in the UI / ``dagster asset materialize``).

A run is held in the middle of its work with SIGSTOP once it holds its table lock (the lock file names its pid),
so the overlap is certain, not a matter of timing.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from tests.crosscheck import assert_same_rows
from lakecdc.config import load_pipeline
from lakecdc.dagster import build_definitions
from lakecdc.errors import TableLockedError
from lakecdc.model import TableId
from lakecdc.runtime import run_micro_batch
from lakecdc.sink import PaimonSink
from lakecdc.sink.lock import lock_path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: root
  password: ""
  tables: {db}.orders
  server-id: 5870-5879
  scan.incremental.snapshot.chunk.size: 2000
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {warehouse}
pipeline:
  name: concurrency {db}
  lakecdc.sensor.interval: 5s
"""


@pytest.fixture
def shop(mariadb, fresh_db, tmp_path):
    mariadb.execute("CREATE TABLE orders (id INT PRIMARY KEY, qty INT NOT NULL, note VARCHAR(20))", database=fresh_db)
    mariadb.execute("INSERT INTO orders SELECT seq, seq % 10, IF(seq % 7 = 0, NULL, 'n') FROM seq_1_to_20000",
                    database=fresh_db)
    pipelines = tmp_path / "pipelines"
    pipelines.mkdir()
    path = pipelines / "orders.yaml"
    path.write_text(PIPELINE.format(port=mariadb.port, db=fresh_db, warehouse=tmp_path / "warehouse"))
    config = load_pipeline(path)
    target = TableId(fresh_db, "orders")
    lock = lock_path(tmp_path / "warehouse", target)
    return config, path, target, lock


def change(mariadb, db: str, rng: random.Random, n: int = 30) -> None:
    for _ in range(n):
        k = rng.randint(1, 21000)
        mariadb.execute(rng.choice([
            "INSERT INTO orders VALUES (%s, 1, 'new') ON DUPLICATE KEY UPDATE qty = qty + 1",
            "UPDATE orders SET note = NULL, qty = qty + 2 WHERE id = %s",
            "DELETE FROM orders WHERE id = %s"]), (k,), database=db)


def held_by(lock: Path, proc: subprocess.Popen, timeout: float = 120) -> bool:
    """Wait until ``proc`` holds the table lock (its pid is in the lock file)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if json.loads(lock.read_text() or "{}").get("pid") == proc.pid:
                return True
        except (OSError, ValueError):
            pass
        time.sleep(0.01)
    return False


def stopped_holder(cmd: list[str], lock: Path, env: dict | None = None, cwd: Path | None = None):
    """Start ``cmd`` and freeze it (SIGSTOP) as soon as it holds the table lock."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
    if not held_by(lock, proc):
        out, err = proc.communicate(timeout=60)
        pytest.fail(f"{cmd} never took the lock (exit {proc.returncode}):\n{err[-3000:]}")
    os.kill(proc.pid, signal.SIGSTOP)
    return proc


def resume(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    os.kill(proc.pid, signal.SIGCONT)
    out, err = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_second_run_fails_clearly_and_writes_nothing(mariadb, shop):
    config, path, target, lock = shop
    sink = PaimonSink(config.sink.catalog_options)
    run = [str(BIN / "lakecdc"), "run", str(path)]
    first = stopped_holder(run, lock)  # the snapshot of 20,000 rows, frozen after taking the lock
    frozen_at = sink.latest_snapshot_id(target) if sink.table_exists(target) else None
    try:
        second = subprocess.run(run, capture_output=True, text=True, timeout=300)
        assert second.returncode == 1, second.stderr
        message = second.stderr
        assert f"table {target} is being written by another writer (pid {first.pid}" in message
        assert str(lock) in message and "wait for it to finish or stop it" in message
        with pytest.raises(TableLockedError):  # the same in process
            run_micro_batch(config)
        assert (sink.latest_snapshot_id(target) if sink.table_exists(target) else None) == frozen_at  # nothing new
    finally:
        done = resume(first)
    assert done.returncode == 0, done.stderr[-3000:]
    assert_same_rows(mariadb, config.sink.catalog_options, target.database, "orders", context="after the first run")


# `lakecdc run` that freezes itself (SIGSTOP) right after it first takes a table lock, so the other run of a pair meets
# the held lock whatever the timing.
FREEZE_WHEN_LOCKED = """
import os, signal, sys
from lakecdc import cli
from lakecdc.sink.lock import TableLock
acquire, frozen = TableLock.acquire, []
def acquire_and_freeze(self):
    held = acquire(self)
    if not frozen:
        frozen.append(True)
        os.kill(os.getpid(), signal.SIGSTOP)
    return held
TableLock.acquire = acquire_and_freeze
sys.exit(cli.main(sys.argv[1:]))
"""


def frozen(proc: subprocess.Popen) -> bool:
    """Whether ``proc`` is stopped (state T in /proc)."""
    try:
        return Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return False


def test_runs_started_together_never_lose_or_double_anything(mariadb, shop):
    """Pairs of runs launched at the same moment while MySQL changes collide: the first to take the table lock
    holds it (frozen right after taking it), the other fails on the lock, naming it; the holder then finishes, and
    after a last run the table equals MySQL."""
    config, path, target, _ = shop
    rng = random.Random(7)
    run = [sys.executable, "-c", FREEZE_WHEN_LOCKED, "run", str(path)]
    for round_ in range(3):
        change(mariadb, target.database, rng)
        pair = [subprocess.Popen(run, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        try:
            deadline = time.monotonic() + 120
            while not any(map(frozen, pair)) and all(p.poll() is None for p in pair) and time.monotonic() < deadline:
                time.sleep(0.01)
            holders = [p for p in pair if frozen(p)]
            assert len(holders) == 1, f"round {round_}: no run took the lock: " + \
                " | ".join(p.communicate(timeout=60)[1][-2000:] for p in pair if p.poll() is not None)
            [holder] = holders
            [other] = [p for p in pair if p is not holder]
            err = other.communicate(timeout=300)[1]
            # the collision: the other run met the held lock and failed, naming it
            assert other.returncode == 1 and "is being written by another writer" in err, err[-3000:]
            assert f"pid {holder.pid}" in err, err[-3000:]
        finally:
            for proc in pair:
                if proc.poll() is None:
                    os.kill(proc.pid, signal.SIGCONT)
        err = holder.communicate(timeout=300)[1]
        assert holder.returncode == 0, err[-3000:]
    run_micro_batch(config)
    assert_same_rows(mariadb, config.sink.catalog_options, target.database, "orders", context="after the pairs")


def test_sensor_does_not_start_a_second_writer_during_a_run(mariadb, shop, tmp_path):
    """A run launched like *Materialize* in the UI (``dagster asset materialize``: the implicit asset job, no
    pipeline tag) is in progress: the sensor sees it and requests nothing for its table."""
    config, path, target, lock = shop
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("")
    env = {k: v for k, v in os.environ.items() if k not in ("MYSQL_PASSWORD", "LAKECDC_FAILPOINT")}
    env.update(DAGSTER_HOME=str(home), LAKECDC_PIPELINES_DIR=str(path.parent))
    key = f"paimon/{target.database}/{target.table}"
    cmd = [str(BIN / "dagster"), "asset", "materialize", "-m", "definitions", "--select", key]
    first = stopped_holder(cmd, lock, env=env, cwd=ROOT)
    try:
        defs = build_definitions(path.parent)
        sensor = defs.resolve_sensor_def(f"{config.slug}_binlog_sensor")
        with dg.DagsterInstance.from_config(str(home)) as instance:
            active = instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
            assert len(active) == 1
            tick = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=defs))
            assert tick.run_requests == [], "the sensor requested a second writer"
            assert active[0].run_id in (tick.skip_message or ""), tick.skip_message
        # and had it launched one anyway, the table lock would stop it before it wrote anything
        with pytest.raises(TableLockedError):
            run_micro_batch(config, targets={target})
    finally:
        done = resume(first)
    assert done.returncode == 0, done.stderr[-3000:]
    assert_same_rows(mariadb, config.sink.catalog_options, target.database, "orders", context="after the run")
