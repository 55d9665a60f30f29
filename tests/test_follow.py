"""Follow mode (``lakecdc run --follow``, ``lakecdc.runtime.follow_pipeline``): one binlog connection kept open, a
commit every ``pipeline.checkpoint-interval``, each commit carrying its offset and schema history.

The pipeline is the crash matrix's three tables (``accounts`` with a primary key, ``items`` with a composite one,
``events`` without: an append table, where a change applied twice shows as a duplicate row), against the session
MariaDB and a real Paimon warehouse.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from crosscheck import assert_same_rows
from lakecdc.config import parse_pipeline
from lakecdc.runtime import follow_pipeline, run_micro_batch
from test_crash_matrix import Lake
from test_source_chunked import Writers

CLI = [str(Path(sys.executable).parent / "lakecdc"), "-v", "run", "--follow", "--json"]


def _with_interval(lake: Lake, interval: str) -> None:
    """The lake's pipeline file with ``pipeline.checkpoint-interval``."""
    text = lake.path.read_text() + f"  checkpoint-interval: {interval}\n"
    lake.path.write_text(text)
    lake.config = parse_pipeline(text, path=str(lake.path))


def _stop_after(commits: int, rounds: list, writers: Writers):
    """A should_stop that turns true once ``commits`` follow commits happened, stopping the writers first (so the
    last commit, at the head when the stop was asked, must equal MySQL)."""
    def should_stop() -> bool:
        if len(rounds) >= commits:
            writers.stop_event.set()
            for thread in writers.threads:
                thread.join()
            return True
        return False

    return should_stop


def test_follow_commits_under_a_stream_of_changes_and_equals_mysql(mariadb, fresh_db, tmp_path):
    lake = Lake(mariadb, fresh_db, tmp_path, random.Random(7))
    _with_interval(lake, "500ms")
    rounds: list[list] = []
    writers = Writers(mariadb, fresh_db, lake.change, threads=1, pause=0.01)
    with writers:
        result = follow_pipeline(lake.config, should_stop=_stop_after(4, rounds, writers),
                                 on_commit=lambda tables: rounds.append(tables))
    assert writers.commits > 20
    # the first micro-batch (the snapshot), then at least four commits while the writer ran, then the stop's
    assert rounds[0][0].phase == "snapshot"
    assert result.follow_commits >= 4
    follow_rounds = rounds[1:]
    assert sum(t.counts.inserted + t.counts.updated + t.counts.deleted for r in follow_rounds for t in r) > 0
    offsets = [max(t.offset for t in r) for r in follow_rounds]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)  # every commit moved the checkpoint
    lake.assert_equal("after follow")
    for name in lake.targets:  # each commit carries the offset it reached (the last one: MySQL's head at the stop)
        checkpoint = lake.checkpoint(name)
        assert checkpoint.offset == max(t.offset for r in rounds for t in r if t.target == lake.targets[name])
    # a run afterwards finds nothing new
    quiet = lake.snapshot_ids()
    run_micro_batch(lake.config)
    assert lake.snapshot_ids() == quiet


def _follow_process(lake: Lake, failpoint: str | None = None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "LAKECDC_FAILPOINT"}
    if failpoint:
        env["LAKECDC_FAILPOINT"] = failpoint
    return subprocess.Popen(CLI + [str(lake.path)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _read_commits(proc: subprocess.Popen, count: int) -> list[dict]:
    """Commit lines (JSON) the follow process printed, until ``count`` of them came from follow commits."""
    lines = []
    for line in proc.stdout:
        lines.append(json.loads(line))
        if sum(1 for row in lines if row["phase"] == "binlog") >= count:
            return lines
    raise AssertionError(f"the follow process ended early: {proc.wait()}\n{proc.stderr.read()[-3000:]}")


def test_sigterm_commits_up_to_the_head_and_stops(mariadb, fresh_db, tmp_path):
    lake = Lake(mariadb, fresh_db, tmp_path, random.Random(11))
    _with_interval(lake, "300ms")
    run_micro_batch(lake.config)  # the snapshot
    proc = _follow_process(lake)
    try:
        with Writers(mariadb, fresh_db, lake.change, threads=1, pause=0.01):
            lines = _read_commits(proc, 3)
        lake.write(3)  # changes no follow commit has seen yet: the stop must commit them
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-3000:]
    assert "Traceback" not in err
    lines += [json.loads(line) for line in out.splitlines()]
    last = {row["table"]: row for row in lines}
    for name, target in lake.targets.items():
        checkpoint = lake.checkpoint(name)
        assert str(checkpoint.offset) == last[str(target)]["offset"]
    lake.assert_equal("after SIGTERM")  # the last commit is MySQL at its offset (the head when asked to stop)
    quiet = lake.snapshot_ids()
    run_micro_batch(lake.config)  # the locks were released, and nothing is left to read
    assert lake.snapshot_ids() == quiet


@pytest.mark.parametrize("failpoint", [None, "follow-commit", "between-commits"])
def test_sigkill_mid_follow_then_a_run_loses_and_repeats_nothing(mariadb, fresh_db, tmp_path, failpoint):
    """Killed at a random moment under a stream of changes (or right after a follow commit, or between the commits
    of two tables): a normal run afterwards makes every table, the append table included, equal MySQL."""
    rng = random.Random({None: 1, "follow-commit": 2, "between-commits": 3}[failpoint])
    lake = Lake(mariadb, fresh_db, tmp_path, rng)
    _with_interval(lake, "300ms")
    run_micro_batch(lake.config)
    before = lake.snapshot_ids()
    with Writers(mariadb, fresh_db, lake.change, threads=1, pause=0.01):
        proc = _follow_process(lake, failpoint)
        try:
            if failpoint is None:
                _read_commits(proc, 2)
                time.sleep(rng.uniform(0.0, 0.5))
                proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        err = proc.stderr.read()
    assert proc.returncode == -signal.SIGKILL, err[-3000:]
    if failpoint:
        assert f"failpoint {failpoint} reached" in err
    assert any(lake.snapshot_ids()[n] > before[n] for n in before)  # killed after follow commits
    lake.write(rng.randint(3, 10))
    run_micro_batch(lake.config)
    lake.assert_equal(f"after SIGKILL ({failpoint or 'random moment'}) and a run")


def test_ddl_during_follow_is_applied_as_in_a_micro_batch(mariadb, fresh_db, tmp_path):
    db = fresh_db
    mariadb.execute("CREATE TABLE orders (id INT PRIMARY KEY, product VARCHAR(20))", database=db)
    mariadb.execute("INSERT INTO orders VALUES (1, 'book'), (2, 'pen')", database=db)
    text = f"""
source:
  type: mysql
  hostname: 127.0.0.1
  port: {mariadb.port}
  username: root
  password: ""
  tables: {db}.orders
  server-id: 5830-5839
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {tmp_path / 'warehouse'}
pipeline:
  name: follow ddl {db}
  schema.change.behavior: evolve
  checkpoint-interval: 200ms
"""
    config = parse_pipeline(text)
    rounds: list[list] = []
    steps = iter([
        "INSERT INTO orders VALUES (3, 'ink')",
        "ALTER TABLE orders ADD COLUMN price DECIMAL(8,2)",
        "INSERT INTO orders VALUES (4, 'pad', 2.50)",
        "UPDATE orders SET price = 1.25 WHERE id = 1",
    ])
    done = threading.Event()

    def on_commit(tables) -> None:  # one statement after each commit: the DDL lands between two follow commits
        rounds.append(tables)
        statement = next(steps, None)
        if statement is None:
            done.set()
        else:
            mariadb.execute(statement, database=db)

    follow_pipeline(config, should_stop=done.is_set, on_commit=on_commit)
    assert len(rounds) >= 5
    assert_same_rows(mariadb, config.sink.catalog_options, db, "orders", ["id", "product", "price"],
                     context="after a DDL during follow")
    from lakecdc.runtime.checkpoint import read_checkpoint
    from lakecdc.sink import PaimonSink
    from lakecdc.model import TableId

    checkpoint = read_checkpoint(PaimonSink(config.sink.catalog_options).checkpoint(TableId(db, "orders")))
    assert "price" in json.dumps({str(k): v for k, v in checkpoint.schemas.items()})  # the history moved with the DDL
    mariadb.execute("INSERT INTO orders VALUES (5, 'cup', 9.99)", database=db)
    run_micro_batch(config)  # a normal run decodes after the follow's checkpoint with the new schema
    assert_same_rows(mariadb, config.sink.catalog_options, db, "orders", ["id", "product", "price"],
                     context="a run after the follow")
