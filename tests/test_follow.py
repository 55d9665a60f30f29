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

from tests.crosscheck import assert_same_rows
from lakecdc.config import parse_pipeline
from lakecdc.runtime import follow_pipeline, run_micro_batch
from tests.test_crash_matrix import Lake
from tests.test_source_chunked import Writers

pytestmark = pytest.mark.slow  # follow-mode runs that wait for binlog heartbeats

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

    result = follow_pipeline(config, should_stop=done.is_set, on_commit=on_commit)
    assert len(rounds) >= 5
    # the run's result (and its closing summary) count every commit of the run, not the last one's; the DDL is
    # listed with its statement, binlog position and what Paimon did
    [table] = result.tables.values()
    assert (table.counts.inserted, table.counts.updated) == (4, 1), table.counts
    [ddl] = table.ddl
    assert "ADD COLUMN price" in ddl.statement and ddl.paimon and "price" in ddl.paimon[0], ddl
    assert ddl.offset <= table.offset and table.schema_changes == ddl.paimon
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


# --- the Dagster follow job ------------------------------------------------------------------------------------

from lakecdc.dagster.metadata import SNAPSHOT_ID_KEY  # noqa: E402
from tests.test_dagster import ORDERS, tutorial  # noqa: E402,F401  (the tutorial fixture)


class _OrderWriter:
    """Inserts tutorial orders in a thread until stopped; ``then`` runs once ``ready()`` turns true."""

    def __init__(self, mariadb, ready=None, then=None):
        self.mariadb, self.ready, self.then = mariadb, ready, then
        self.stop_event = threading.Event()
        self.inserted = 0
        self.thread = threading.Thread(target=self._loop)

    def _loop(self):
        conn = self.mariadb.connect("inventory")
        try:
            with conn.cursor() as cur:
                while not self.stop_event.is_set():
                    cur.execute("INSERT INTO orders VALUES (%s, 'pen', 1.50, '2026-01-05 10:00:00')",
                                (1000 + self.inserted,))
                    conn.commit()
                    self.inserted += 1
                    if self.ready is not None and self.inserted > 20 and self.ready():
                        self.then()
                        return
                    time.sleep(0.02)
        finally:
            conn.close()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        self.thread.join()


def _follow_job(config):
    import dataclasses

    from lakecdc.dagster.jobs import build_follow_job

    return build_follow_job(dataclasses.replace(config, checkpoint_interval_seconds=0.3))


def _materializations(instance) -> list:
    import dagster as dg

    records = instance.fetch_materializations(dg.AssetKey(["paimon", "inventory", "orders"]), limit=1000).records
    return sorted(r.asset_materialization.metadata[SNAPSHOT_ID_KEY].value for r in records)


def test_dagster_follow_job_materialises_every_commit_and_stops_at_max_commits(mariadb, tutorial):
    import dagster as dg

    config, _ = tutorial
    job = _follow_job(config)
    instance = dg.DagsterInstance.ephemeral()
    with _OrderWriter(mariadb):
        result = job.execute_in_process(
            instance=instance, run_config={"ops": {f"{config.slug}_follow_op": {"config": {"max_commits": 3}}}})
    assert result.success
    snapshots = _materializations(instance)
    assert len(snapshots) >= 4 and len(set(snapshots)) == len(snapshots)  # the snapshot, then one per commit
    sink = PaimonSinkFor(config)
    latest = sink.latest_snapshot_id(ORDERS)
    assert snapshots[-1] <= latest
    # every follow commit reports its decoder fallbacks (none here), and its row count where the file statistics
    # prove it: the writer only inserts new keys, so the last commit's count is the table's
    records = sorted(instance.fetch_materializations(dg.AssetKey(["paimon", "inventory", "orders"]),
                                                     limit=1000).records,
                     key=lambda r: r.asset_materialization.metadata[SNAPSHOT_ID_KEY].value)
    assert all(r.asset_materialization.metadata["lakecdc/decoder_fallbacks"].value == 0 for r in records[1:])
    assert records[-1].asset_materialization.metadata["dagster/row_count"].value == sink.row_count(ORDERS)
    # each commit's checks ran as it was committed: its keys read back from its snapshot
    checks = result.get_asset_check_evaluations()
    rows = [c for c in checks if c.check_name == "changed_rows_match"]
    assert len(rows) == len(snapshots) and all(c.passed for c in checks), [c.description for c in checks]
    assert {c.metadata["snapshot_id"].value for c in rows} == set(snapshots)
    assert all(c.metadata["keys_checked"].value >= 1 for c in rows[1:])
    run_micro_batch(config)  # the locks were released; the run reads on from the follow's checkpoint
    assert_same_rows(mariadb, config.sink.catalog_options, "inventory", "orders", ["id", "product", "price"],
                     context="after the follow job and a run")


def test_dagster_follow_job_commits_and_stops_when_the_run_is_cancelled(mariadb, tutorial):
    """Dagster cancels a run with SIGINT (or SIGTERM) to the run worker: the follow commits up to the binlog head,
    then the op returns: a clean stop, the run a success."""
    import dagster as dg

    config, _ = tutorial
    job = _follow_job(config)
    instance = dg.DagsterInstance.ephemeral()

    def followed() -> bool:  # the follow has committed a few times since its first micro-batch
        return len(_materializations(instance)) >= 3

    with _OrderWriter(mariadb, ready=followed, then=lambda: os.kill(os.getpid(), signal.SIGINT)) as writer:
        result = job.execute_in_process(instance=instance, raise_on_error=False)
        writer.thread.join()  # the writer sent the SIGINT after its last insert
    # a clean stop: no step failure, no interrupt trace; the log says why it stopped
    assert result.success and not [e for e in result.all_events if e.is_step_failure]
    messages = [e.message or "" for e in instance.all_logs(result.run_id)]
    assert not [m for m in messages if "Interrupted" in m or "Traceback" in m], messages
    assert any("the run was cancelled (Terminate)" in m for m in messages), messages
    snapshots = _materializations(instance)
    assert len(snapshots) >= 4
    # the closing summary counts what the whole run committed (the snapshot's 2 rows and every insert after it)
    [summary] = [m for m in messages if m.startswith("summary inventory.orders:")]
    assert f"{2 + writer.inserted} inserted, 0 updated, 0 deleted" in summary, summary
    # every commit recorded the MySQL table it read (a materialisation of the external asset when it changed), its
    # last change as the data version
    mysql = dg.AssetKey(["mysql", "inventory", "orders"])
    changed = instance.fetch_materializations(mysql, limit=1000).records
    read = len(changed) + len(instance.fetch_observations(mysql, limit=1000).records)
    assert read == len(snapshots) and len(changed) >= 2, (read, len(changed), snapshots)
    last = changed[0].event_log_entry.asset_materialization
    assert last.tags["dagster/data_version"] == f"binlog-{last.metadata['lakecdc/last_change'].value}"
    # the stop committed everything the writer inserted before the cancel
    assert_same_rows(mariadb, config.sink.catalog_options, "inventory", "orders", ["id", "product", "price"],
                     context="after cancelling the follow job")


def PaimonSinkFor(config):
    from lakecdc.sink import PaimonSink

    return PaimonSink(config.sink.catalog_options)
