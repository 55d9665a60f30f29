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

from crosscheck import assert_same_rows
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


def test_runs_started_together_never_lose_or_double_anything(mariadb, shop):
    """Pairs of runs launched at the same moment while MySQL changes: each one either works or fails on the lock,
    and after a last run the table equals MySQL."""
    config, path, target, _ = shop
    rng = random.Random(7)
    run = [str(BIN / "lakecdc"), "run", str(path)]
    outcomes = []
    for _ in range(3):
        change(mariadb, target.database, rng)
        pair = [subprocess.Popen(run, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        for proc in pair:
            err = proc.communicate(timeout=300)[1]
            assert proc.returncode in (0, 1), err
            if proc.returncode == 1:
                assert "is being written by another writer" in err, err
            outcomes.append(proc.returncode)
    run_micro_batch(config)
    assert_same_rows(mariadb, config.sink.catalog_options, target.database, "orders", context=f"outcomes {outcomes}")
    assert 0 in outcomes


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
