"""Crash matrix: a run of a three-table pipeline (`lakecdc run` in a subprocess) is SIGKILLed at every stage while
a writer keeps changing MySQL, more changes follow the crash, the pipeline runs again, and every Paimon table must
then hold exactly the MySQL rows: nothing lost, nothing doubled.

Stages (``LAKECDC_FAILPOINT``, see lakecdc.runtime.micro_batch.failpoint): before the first commit of a snapshot
(the tables exist without any snapshot), in the middle of a chunk of a snapshot commit group that follows an
earlier commit (``during-snapshot``), right after a snapshot group's commit
(``snapshot-group-committed``), after the binlog rows were written and before any commit (``before-commit``),
between the commits of two tables (``between-commits``), after every commit (``after-commit``) and during table
upkeep, after compaction and before any file is deleted (``during-upkeep``) and right after the first deleted
file (``during-upkeep-delete``); upkeep is set to compact from two files and expire down to two snapshots, so it
works in every run. A last case kills a run at a random moment while it writes a large binlog batch.

Tables: ``accounts`` (primary key, updates, deletes, primary-key moves, NULLs), ``items`` (composite primary key)
and ``events`` (no primary key: an append table, insert-only, so a change applied twice shows as a duplicate row).

Seeds: by default each stage runs once, with a seed of its own (eight seeds over the eight stages, so the drawn
chunk sizes, commit-group sizes and workloads differ from stage to stage); with ``LAKECDC_LONG=1`` every stage runs
with each of 10 seeds, with ``LAKECDC_SEED=n[,m]`` with those seeds. The seed is in the test id.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.crosscheck import assert_same_rows, seeds
from lakecdc.config import parse_pipeline
from lakecdc.model import TableId
from lakecdc.runtime import run_micro_batch
from lakecdc.runtime.checkpoint import read_checkpoint
from lakecdc.sink import PaimonSink
from tests.test_source_chunked import Writers

pytestmark = pytest.mark.slow  # kills runs at every failpoint

ROOT = Path(__file__).resolve().parent.parent
CLI = [str(Path(sys.executable).parent / "lakecdc"), "-v", "run"]

PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: root
  password: ""
  tables: {db}.accounts, {db}.items, {db}.events
  server-id: 5810-5819
  scan.incremental.snapshot.chunk.size: {chunk}
  scan.incremental.snapshot.chunk.key-column: {db}.events:grp
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {warehouse}
  # upkeep in every run: compaction from 2 files, expiry down to 2 snapshots
  table.properties.num-sorted-run.compaction-trigger: "2"
  table.properties.compaction.min.file-num: "2"
  table.properties.snapshot.num-retained.min: "2"
  table.properties.snapshot.time-retained: "1 ms"
pipeline:
  name: crash {db}
  lakecdc.snapshot.commit-rows: {commit_rows}
"""

COLUMNS = {
    "accounts": ["id", "owner", "balance", "note", "opened"],
    "items": ["order_id", "line", "qty", "sku"],
    "events": ["grp", "payload", "amount"],
}
# test id -> failpoint; the first three crash the first run (a snapshot), the others a binlog run
STAGES = {"snapshot-before-first-commit": "before-commit", "during-snapshot": "during-snapshot",
          "snapshot-group-committed": "snapshot-group-committed", "before-commit": "before-commit",
          "between-commits": "between-commits", "after-commit": "after-commit", "during-upkeep": "during-upkeep",
          "during-upkeep-delete": "during-upkeep-delete"}
SNAPSHOT_STAGES = {"snapshot-before-first-commit", "during-snapshot", "snapshot-group-committed"}
SEEDS = seeds(len(STAGES), 10)
# every stage with every seed when the seeds are asked for (LAKECDC_LONG, LAKECDC_SEED); else one seed per stage
EVERY_SEED = bool(os.environ.get("LAKECDC_SEED")) or os.environ.get("LAKECDC_LONG", "") not in ("", "0")
STAGE_SEEDS = [(stage, seed) for stage in STAGES for seed in SEEDS] if EVERY_SEED else list(zip(STAGES, SEEDS))
UPKEEP_MODULE = ROOT / "lakecdc" / "sink" / "upkeep.py"


class Lake:
    """One seeded source database, its pipeline file and its Paimon warehouse."""

    def __init__(self, mariadb, db: str, tmp_path: Path, rng: random.Random, s3_server=None):
        self.mariadb, self.db, self.rng = mariadb, db, rng
        self.accounts = rng.randint(1800, 3000)
        mariadb.execute("CREATE TABLE accounts (id INT PRIMARY KEY, owner VARCHAR(30) NOT NULL, "
                        "balance DECIMAL(12,2), note TEXT, opened DATETIME(3))", database=db)
        mariadb.execute("CREATE TABLE items (order_id INT, line SMALLINT, qty INT NOT NULL, sku VARCHAR(12), "
                        "PRIMARY KEY (order_id, line))", database=db)
        mariadb.execute("CREATE TABLE events (grp INT NULL, payload VARCHAR(40) NOT NULL, amount DECIMAL(8,2), "
                        "KEY by_grp (grp))", database=db)
        mariadb.execute(
            "INSERT INTO accounts SELECT seq, CONCAT('o', seq % 97), seq / 7, IF(seq % 11 = 0, NULL, "
            "REPEAT('n', seq % 40)), '2026-01-01 00:00:00' + INTERVAL seq SECOND FROM seq_1_to_" + str(self.accounts),
            database=db)
        mariadb.execute("INSERT INTO items SELECT seq DIV 4, seq % 4, seq % 13, IF(seq % 5 = 0, NULL, "
                        "CONCAT('s', seq)) FROM seq_4_to_1203", database=db)
        mariadb.execute("INSERT INTO events SELECT IF(seq % 17 = 0, NULL, seq % 300), CONCAT('e', seq), seq / 100 "
                        "FROM seq_1_to_1500", database=db)
        self.events = 1500
        self.lock = threading.Lock()
        warehouse = tmp_path / "warehouse"
        if s3_server is not None:
            warehouse = s3_server.warehouse_yaml(f"s3://{s3_server.new_bucket()}/warehouse")
        text = PIPELINE.format(port=mariadb.port, db=db, warehouse=warehouse,
                               chunk=rng.choice([150, 300, 700]), commit_rows=rng.choice([600, 900, 1300]))
        self.path = tmp_path / "pipeline.yaml"
        self.path.write_text(text)
        self.config = parse_pipeline(text, path=str(self.path))
        self.sink = PaimonSink(self.config.sink.catalog_options)
        self.targets = {name: TableId(db, name) for name in COLUMNS}

    # --- MySQL side
    def change(self, cur, rnd: random.Random) -> None:
        """One random statement: inserts, updates (to NULL too), deletes, primary-key moves, re-inserts of
        deleted keys (ids are drawn from a range that deletes keep freeing)."""
        top = self.accounts + 300
        action = rnd.random()
        if action < 0.2:
            cur.execute("INSERT INTO accounts VALUES (%s, %s, %s, %s, NOW(3)) ON DUPLICATE KEY UPDATE "
                        "balance = COALESCE(balance, 0) + 1", (rnd.randint(1, top), f"w{rnd.randint(0, 9)}",
                                                                rnd.randint(-999, 999), rnd.choice([None, "x", ""])))
        elif action < 0.4:
            cur.execute("UPDATE accounts SET balance = %s, note = %s WHERE id = %s",
                        (rnd.choice([None, rnd.randint(0, 10**6) / 100]), rnd.choice([None, "upd", "ü" * 3]),
                         rnd.randint(1, top)))
        elif action < 0.5:
            cur.execute("DELETE FROM accounts WHERE id = %s", (rnd.randint(1, top),))
        elif action < 0.55:  # primary-key move (a delete and an insert), possibly across chunks
            cur.execute("UPDATE IGNORE accounts SET id = %s WHERE id = %s", (rnd.randint(1, top), rnd.randint(1, top)))
        elif action < 0.65:
            cur.execute("INSERT IGNORE INTO items VALUES (%s, %s, %s, %s)",
                        (rnd.randint(1, 320), rnd.randint(0, 5), rnd.randint(0, 50), rnd.choice([None, "new"])))
        elif action < 0.72:
            cur.execute("UPDATE items SET qty = qty + 1, sku = %s WHERE order_id = %s",
                        (rnd.choice([None, "upd"]), rnd.randint(1, 320)))
        elif action < 0.78:
            cur.execute("DELETE FROM items WHERE order_id = %s AND line = %s", (rnd.randint(1, 320), rnd.randint(0, 5)))
        elif action < 0.8:
            cur.execute("UPDATE IGNORE items SET line = line + 10 WHERE order_id = %s", (rnd.randint(1, 320),))
        else:
            with self.lock:
                self.events += 1
                n = self.events
            cur.execute("INSERT INTO events VALUES (%s, %s, %s)",
                        (None if n % 13 == 0 else rnd.randint(0, 320), f"w{n}", rnd.randint(0, 99999) / 100))

    def write(self, transactions: int) -> None:
        """Seeded transactions of 1..5 statements, and one change of every table (so each has something new)."""
        conn = self.mariadb.connect(self.db)
        conn.autocommit(False)
        try:
            with conn.cursor() as cur:
                for _ in range(transactions):
                    for _ in range(self.rng.randint(1, 5)):
                        self.change(cur, self.rng)
                    conn.commit()
                cur.execute("UPDATE accounts SET note = 'touched' WHERE id = (SELECT MIN(id) FROM accounts)")
                cur.execute("UPDATE items SET qty = qty + 100 LIMIT 1")
                cur.execute("INSERT INTO events VALUES (1, 'touch', NULL)")
                conn.commit()
        finally:
            conn.close()

    # --- Paimon side
    def snapshot_ids(self) -> dict[str, int]:
        return {name: self.sink.latest_snapshot_id(t) or 0 for name, t in self.targets.items()}

    def checkpoint(self, name: str):
        return read_checkpoint(self.sink.checkpoint(self.targets[name]))

    def assert_equal(self, context: str) -> None:
        for name, columns in COLUMNS.items():
            assert_same_rows(self.mariadb, self.config.sink.catalog_options, self.db, name, columns, context=context)

    def run_cli(self, failpoint: str | None = None) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k != "LAKECDC_FAILPOINT"}
        if failpoint:
            env["LAKECDC_FAILPOINT"] = failpoint
        return subprocess.run(CLI + [str(self.path)], env=env, capture_output=True, text=True, timeout=300)


# Every stage on a local warehouse; on s3:// too (a private S3 server; tests/test_s3.py) the stages around commits
# and upkeep deletions, each with the first seed it has (every stage with LAKECDC_LONG=1: an s3:// case takes
# minutes).
S3_STAGES = set(STAGES) if os.environ.get("LAKECDC_LONG", "") not in ("", "0") else {
    "snapshot-group-committed", "between-commits", "after-commit", "during-upkeep-delete"}
CASES = [(stage, seed, "local") for stage, seed in STAGE_SEEDS] + \
    [(stage, next(seed for s, seed in STAGE_SEEDS if s == stage), "s3") for stage in STAGES if stage in S3_STAGES]


@pytest.mark.parametrize("stage,seed,storage", CASES)
def test_crash_at_stage_then_rerun_is_exact(mariadb, fresh_db, tmp_path, stage, seed, storage, request):
    if stage.startswith("during-upkeep") and not UPKEEP_MODULE.exists():
        pytest.skip("table upkeep (lakecdc/sink/upkeep.py, failpoint during-upkeep) does not exist yet")
    rng = random.Random(seed)
    lake = Lake(mariadb, fresh_db, tmp_path, rng, request.getfixturevalue("s3_server") if storage == "s3" else None)
    context = f"seed {seed} on {storage}, crash at {stage}"
    if stage not in SNAPSHOT_STAGES:
        run_micro_batch(lake.config)  # the snapshot; the crash comes in a binlog run
        lake.write(rng.randint(5, 40))
    before = lake.snapshot_ids()

    with Writers(mariadb, fresh_db, lake.change, threads=1, pause=0.01):
        crashed = lake.run_cli(STAGES[stage])
    assert crashed.returncode == -signal.SIGKILL, f"{context}: the run was not killed:\n{crashed.stderr[-3000:]}"
    assert f"failpoint {STAGES[stage]} reached" in crashed.stderr
    after = lake.snapshot_ids()
    new = {name: after[name] - before[name] for name in after}

    if stage == "snapshot-before-first-commit":  # the tables exist, without any snapshot
        assert new == {"accounts": 0, "events": 0, "items": 0} and lake.sink.table_exists(lake.targets["accounts"])
    elif stage == "during-snapshot":  # killed inside a later commit group of the first table (accounts)
        assert new == {"accounts": 1, "events": 0, "items": 0}, context
        assert lake.checkpoint("accounts").snapshot_pending
    elif stage == "snapshot-group-committed":
        assert new == {"accounts": 1, "events": 0, "items": 0}, context
    elif stage == "before-commit":
        assert new == {"accounts": 0, "events": 0, "items": 0}, context
    elif stage == "between-commits":  # tables commit in name order: only the first one did
        assert new == {"accounts": 1, "events": 0, "items": 0}, context
    elif stage == "after-commit":
        assert new == {"accounts": 1, "events": 1, "items": 1}, context
    else:  # upkeep: after the commits (compaction and expiry add and remove snapshots)
        assert all(n >= 1 for n in new.values()), context

    lake.write(rng.randint(5, 40))  # more changes after the crash
    rerun = run_micro_batch(lake.config)
    assert all(t.snapshot_complete for t in rerun.tables.values()), context
    lake.assert_equal(context)
    # and a run with nothing new changes nothing
    quiet = lake.snapshot_ids()
    run_micro_batch(lake.config)
    assert lake.snapshot_ids() == quiet, context


def _bulk_changes(mariadb, db: str) -> None:
    """A large binlog batch: tens of thousands of row changes over the three tables."""
    mariadb.execute("UPDATE accounts SET balance = COALESCE(balance, 0) + 1, note = NULL", database=db)
    mariadb.execute("INSERT INTO events SELECT seq % 500, CONCAT('bulk', seq), NULL FROM seq_1_to_40000",
                    database=db)
    mariadb.execute("DELETE FROM items WHERE qty % 3 = 0", database=db)


def _run_and_kill(path: Path, delay: float) -> int:
    """`lakecdc run`, SIGKILLed ``delay`` seconds after its binlog phase starts; its exit status (a run that
    finished first exits 0)."""
    proc = subprocess.Popen(CLI + [str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={k: v for k, v in os.environ.items() if k != "LAKECDC_FAILPOINT"})
    try:
        for line in proc.stderr:  # the binlog phase starts: kill a random moment later
            if "binlog from" in line:
                if delay:
                    time.sleep(delay)
                os.kill(proc.pid, signal.SIGKILL)
                break
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stderr.close()
    return proc.returncode


@pytest.mark.parametrize("seed", SEEDS if EVERY_SEED else SEEDS[:2])
def test_killed_at_a_random_moment_while_writing_a_large_binlog_batch(mariadb, fresh_db, tmp_path, seed):
    """A timer SIGKILLs the run somewhere inside a large binlog read and write (tens of thousands of rows). When
    the run finishes before the timer (a fast machine), the scenario is repeated with a shorter delay, and at last
    with none (the kill then lands as soon as the binlog phase starts): the test asserts that a run was killed."""
    rng = random.Random(seed)
    lake = Lake(mariadb, fresh_db, tmp_path, rng)
    run_micro_batch(lake.config)
    delay = rng.uniform(0.0, 1.5)
    attempts = []
    for attempt_delay in (delay, delay / 4, 0.0):
        _bulk_changes(mariadb, fresh_db)
        lake.write(rng.randint(5, 20))
        status = _run_and_kill(lake.path, attempt_delay)
        attempts.append(f"{attempt_delay:.2f}s: exit {status}")
        if status == -signal.SIGKILL:
            break
    context = f"seed {seed}, killed after {'; '.join(attempts)}"
    assert status == -signal.SIGKILL, f"{context}: no run was killed"
    lake.write(rng.randint(5, 20))
    run_micro_batch(lake.config)
    lake.assert_equal(context)
