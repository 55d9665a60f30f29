"""Chunked, resumable snapshots against the private MariaDB and real Paimon files: a 200,000-row snapshot killed
(SIGKILL) half-way while writers keep changing the table, resumed, and compared with MySQL; the same for an append
table (no primary key) chunked by a non-unique column; lost connections retried."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from decimal import Decimal
from pathlib import Path


from lakecdc.config import parse_pipeline
from lakecdc.model import TableId
from lakecdc.runtime import pipeline_status, run_micro_batch
from lakecdc.runtime.checkpoint import read_checkpoint
from lakecdc.sink import PaimonSink
from lakecdc.sink.sql import run_sql

PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: root
  password: ""
  tables: {tables}
  server-id: {server_id}
  scan.incremental.snapshot.chunk.size: {chunk}
{extra}
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {warehouse}
pipeline:
  name: chunked {db}
  lakecdc.snapshot.commit-rows: {commit_rows}
"""

CLI = [str(Path(sys.executable).parent / "lakecdc"), "run"]


def pipeline(mariadb, tmp_path, db, tables, *, chunk=4000, commit_rows=25000, extra="", server_id=5701):
    text = PIPELINE.format(port=mariadb.port, tables=tables, db=db, chunk=chunk, commit_rows=commit_rows,
                           extra=extra, warehouse=tmp_path / "warehouse", server_id=server_id)
    path = tmp_path / "pipeline.yaml"
    path.write_text(text)
    return parse_pipeline(text, path=str(path)), path


class Writers:
    """Threads committing small random transactions until stopped."""

    def __init__(self, mariadb, db, work, threads=2, pause=0.002):
        self.pause = pause  # between transactions: leaves CPU to the pipeline on a 2-core machine
        self.stop_event = threading.Event()
        self.commits = 0
        self.errors: list[BaseException] = []
        self.threads = [threading.Thread(target=self._loop, args=(mariadb, db, work, seed)) for seed in range(threads)]

    def _loop(self, mariadb, db, work, seed):
        rnd = random.Random(seed)
        conn = mariadb.connect(db)
        conn.autocommit(False)
        try:
            with conn.cursor() as cur:
                while not self.stop_event.is_set():
                    for _ in range(rnd.randint(1, 4)):
                        work(cur, rnd)
                    conn.commit()
                    self.commits += 1
                    time.sleep(self.pause)
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.errors.append(exc)
        finally:
            conn.close()

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def stop(self):
        self.stop_event.set()
        for t in self.threads:
            t.join()
        assert not self.errors, self.errors

    def __exit__(self, *exc):
        self.stop()


def change_big(cur, rnd, keys=230_000):
    """Inserts, updates, deletes and primary-key moves anywhere in the key range 1..``keys`` (also across chunks)."""
    k = rnd.randrange(1, keys)
    action = rnd.random()
    if action < 0.3:
        cur.execute("INSERT INTO big VALUES (%s, %s, 'w') ON DUPLICATE KEY UPDATE v = v + 1", (k, rnd.randrange(100)))
    elif action < 0.65:
        cur.execute("UPDATE big SET v = v + 1, note = %s WHERE id = %s", (f"u{k % 7}", k))
    elif action < 0.85:
        cur.execute("DELETE FROM big WHERE id = %s", (k,))
    else:  # move a row to another key (a delete and an insert in the binlog, possibly across chunks)
        cur.execute("UPDATE IGNORE big SET id = %s WHERE id = %s", (rnd.randrange(1, keys), k))


def wait_for_snapshots(sink, target, count, proc, timeout=180):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if (sink.latest_snapshot_id(target) or 0) >= count:
            return True
        time.sleep(0.02)
    return False


def mysql_rows(mariadb, db, sql):
    return list(mariadb.execute(sql, database=db))


def test_chunked_snapshot_killed_midway_while_writing_resumes_exactly(mariadb, fresh_db, tmp_path):
    db = fresh_db
    mariadb.execute("CREATE TABLE big (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(20))", database=db)
    mariadb.execute("INSERT INTO big SELECT seq, seq % 100, CONCAT('n', seq) FROM seq_1_to_200000", database=db)
    config, path = pipeline(mariadb, tmp_path, db, f"{db}.big")
    target = TableId(db, "big")
    sink = PaimonSink(config.sink.catalog_options)

    with Writers(mariadb, db, change_big) as writers:
        time.sleep(0.2)
        proc = subprocess.Popen(CLI + [str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            assert wait_for_snapshots(sink, target, 2, proc), proc.stderr.read().decode()[-3000:] if proc.poll() \
                is not None else "no progress commits"
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            proc.stderr.close()
        assert proc.returncode == -signal.SIGKILL
        killed_at = read_checkpoint(sink.checkpoint(target))
        assert killed_at.snapshot_pending, "the run was killed after its snapshot had finished"
        progress = killed_at.pending[target]
        assert progress["chunk-key"] == "id" and progress["after"]["int"] >= 25_000
        committed_rows = sink.row_count(target)
        assert 25_000 <= committed_rows < 200_000
        status = pipeline_status(config)  # the sensor keeps asking for runs until the snapshot is done
        assert status.needs_run and status.tables[0].lag(status.head) == "snapshot in progress"

        resumed = run_micro_batch(config).tables[target]  # writers still running
        assert resumed.snapshot_complete and resumed.commits >= 2
        # it continued from the killed run's progress instead of reading the table again
        assert resumed.snapshot_rows <= 200_000 + writers.commits * 4 - progress["after"]["int"] + 30_000
        assert resumed.snapshot_rows < 200_000 - 20_000
        time.sleep(0.3)
    assert writers.commits > 50

    final = run_micro_batch(config).tables[target]
    assert final.phase == "binlog"
    want = {r[0]: (r[1], r[2]) for r in mysql_rows(mariadb, db, "SELECT id, v, note FROM big")}
    got = {r["id"]: (r["v"], r["note"]) for r in
           run_sql(config.sink.catalog_options, f"SELECT id, v, note FROM {db}.big").to_pylist()}
    assert len(got) == len(want)
    assert got == want


def test_append_table_chunked_by_non_unique_column_is_exactly_once(mariadb, fresh_db, tmp_path):
    """No primary key: an append table, chunked by a non-unique nullable column. Inserts that land before and after
    the chunk being read while the run is killed and resumed appear exactly once."""
    db = fresh_db
    mariadb.execute("CREATE TABLE events (grp INT NULL, payload VARCHAR(30) NOT NULL, amount DECIMAL(8,2))",
                    database=db)
    mariadb.execute("INSERT INTO events SELECT IF(seq % 50 = 0, NULL, seq % 700), CONCAT('p', seq), seq / 100 "
                    "FROM seq_1_to_20000", database=db)
    mariadb.execute("CREATE INDEX by_grp ON events (grp)", database=db)
    config, path = pipeline(mariadb, tmp_path, db, f"{db}.events", chunk=1000, commit_rows=4000,
                            extra=f"  scan.incremental.snapshot.chunk.key-column: {db}.events:grp", server_id=5711)
    target = TableId(db, "events")
    sink = PaimonSink(config.sink.catalog_options)
    counter = iter(range(10**9))

    def insert_events(cur, rnd):
        n = next(counter)
        cur.execute("INSERT INTO events VALUES (%s, %s, %s)",
                    (None if n % 13 == 0 else rnd.randrange(0, 720), f"w{n}", Decimal(n % 1000) / 10))

    with Writers(mariadb, db, insert_events):
        time.sleep(0.1)
        proc = subprocess.Popen(CLI + [str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            assert wait_for_snapshots(sink, target, 2, proc), "no progress commits"
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            proc.stderr.close()
        checkpoint = read_checkpoint(sink.checkpoint(target))
        assert checkpoint.snapshot_pending and checkpoint.pending[target]["chunk-key"] == "grp"
        assert sink.describe(target).primary_keys == []
        resumed = run_micro_batch(config).tables[target]
        assert resumed.snapshot_complete
        assert resumed.decoder_fallbacks == {}  # the catch-ups' binlog reads are counted too: all decoded in C
    run_micro_batch(config)
    want = Counter(mysql_rows(mariadb, db, "SELECT grp, payload, CAST(amount AS CHAR) FROM events"))
    got = Counter((r["grp"], r["payload"], str(r["amount"])) for r in run_sql(
        config.sink.catalog_options, f"SELECT grp, payload, amount FROM {db}.events").to_pylist())
    assert sum(got.values()) == sum(want.values())
    assert got == want
