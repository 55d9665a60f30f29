"""The incremental (lock-free) snapshot against a server that presents itself as MySQL 8.0.36 with MySQL 8's
binlog_row_metadata=MINIMAL (a MariaDB started with ``--version=8.0.36-...``: lakecdc takes its MySQL code paths
there), read by a user with exactly Flink CDC's documented grants, and real Paimon files: writes during the snapshot
(also moving keys between chunks) compared with MySQL, a primary-key table, an append table and a SOFT_DELETE table;
no lock statement in the server's general log; a SIGKILL mid-snapshot then resume; application writes never
waiting behind the snapshot while a long write runs; the consistent mode refused before any write where it would
need the global read lock."""

from __future__ import annotations

import itertools
import random
import os
import re
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from lakecdc.config import parse_pipeline
from lakecdc.model import TableId
from lakecdc.runtime import run_micro_batch
from lakecdc.runtime.checkpoint import read_checkpoint
from lakecdc.runtime.resnapshots import resnapshot
from lakecdc.sink import PaimonSink
from lakecdc.sink.sql import run_sql
from lakecdc.source import MySqlSource, MySqlSourceOptions
from lakecdc.source import chunk_reader as chunk_reader_module
from tests.test_source_chunked import CLI, PIPELINE, Writers, change_big

FLINK_USER = "flinkcdc"
# Flink CDC's MySQL connector docs: "Create a MySQL user ... GRANT SELECT, SHOW DATABASES, REPLICATION SLAVE,
# REPLICATION CLIENT ON *.* TO 'user' ..." (on MariaDB, REPLICATION CLIENT is BINLOG MONITOR's alias)
FLINK_GRANTS = ("GRANT SELECT, SHOW DATABASES, REPLICATION SLAVE, REPLICATION CLIENT ON *.* "
                f"TO '{FLINK_USER}'@'127.0.0.1'")
LOCK_STATEMENT = re.compile(r"FLUSH\s+TABLES|LOCK\s+TABLES|LOCK\s+INSTANCE|UNLOCK\s+|START\s+TRANSACTION",
                            re.IGNORECASE)



@pytest.fixture(scope="module")
def flink_user(mysql8_server):
    """A user with exactly Flink CDC's grants (no RELOAD, no LOCK TABLES, no BACKUP_ADMIN)."""
    mysql8_server.execute(f"CREATE USER IF NOT EXISTS '{FLINK_USER}'@'127.0.0.1'")
    mysql8_server.execute(FLINK_GRANTS)
    return FLINK_USER


def pipeline(server, tmp_path, db, tables, *, user="root", chunk=500, commit_rows=5000, extra="", transform="",
             server_id=5901, readers=1):
    text = PIPELINE.format(port=server.port, tables=tables, db=db, chunk=chunk, commit_rows=commit_rows, extra=extra,
                           warehouse=tmp_path / "warehouse", server_id=server_id)
    text = text.replace("username: root", f"username: {user}", 1).replace("name: chunked", "name: incremental", 1)
    text = text.replace("pipeline:\n", f"pipeline:\n  parallelism: {readers}\n", 1)
    text += transform
    path = tmp_path / "pipeline.yaml"
    path.write_text(text)
    return parse_pipeline(text, path=str(path)), path


class GeneralLog:
    """The server's general log (every statement of every session) in its tmpdir while the block runs."""

    def __init__(self, server):
        self.server = server
        self.path = os.path.join(server.tmpdir, f"general-{time.monotonic_ns()}.log")

    def __enter__(self):
        self.server.execute(f"SET GLOBAL general_log_file = '{self.path}'")
        self.server.execute("SET GLOBAL general_log = ON")
        return self

    def __exit__(self, *exc):
        self.server.execute("SET GLOBAL general_log = OFF")

    def lock_statements(self) -> list[str]:
        text = Path(self.path).read_text(errors="replace")
        assert "SHOW MASTER STATUS" in text  # the log did record lakecdc's statements
        return [line for line in text.splitlines() if LOCK_STATEMENT.search(line)]


LOG_KEYS = itertools.count(1000)


def change_rows(cur, rnd):
    """Every kind of change to the three tables of :func:`create_tables`."""
    change_big(cur, rnd, 24_000)  # inserts, updates, deletes and key moves (also across chunks) of `big`
    action, k = rnd.random(), rnd.randrange(1, 24_000)
    # the append table only gets inserts (an append table keeps every image, so only inserts can equal MySQL) at
    # growing chunk keys, as a log does (an insert into a chunk's range while it is read makes it read again), and
    # the SOFT_DELETE table all kinds of change
    cur.execute("INSERT INTO log (grp, msg) VALUES (%s, %s)", (next(LOG_KEYS), f"w{k}"))
    j = rnd.randrange(1, 3_000)
    if action < 0.4:
        cur.execute("UPDATE soft SET v = v + 1 WHERE id = %s", (j,))
    elif action < 0.6:
        cur.execute("DELETE FROM soft WHERE id = %s", (j,))
    else:
        cur.execute("INSERT IGNORE INTO soft VALUES (%s, 0)", (j,))


TABLES = (
    "CREATE TABLE big (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(20))",
    "INSERT INTO big SELECT seq, seq % 100, CONCAT('n', seq) FROM seq_1_to_20000",
    "CREATE TABLE log (grp INT NOT NULL, msg VARCHAR(20), KEY (grp))",  # an append table
    "INSERT INTO log SELECT seq % 250, CONCAT('m', seq) FROM seq_1_to_6000",
    "CREATE TABLE soft (id INT PRIMARY KEY, v INT NOT NULL)",  # captured with SOFT_DELETE
    "INSERT INTO soft SELECT seq, 0 FROM seq_1_to_2500",
)


def create_tables(server, db):
    for statement in TABLES:
        server.execute(statement, database=db)


SOFT_DELETE = """
transform:
  - source-table: {db}.soft
    projection: "*, __data_event_type__ AS op_type"
    converter-after-transform: SOFT_DELETE
"""


def lake_rows(config, sql):
    return [tuple(r.values()) for r in run_sql(config.sink.catalog_options, sql).to_pylist()]


def assert_equal_to_mysql(server, config, db):
    assert sorted(lake_rows(config, f"SELECT id, v, note FROM {db}.big")) == \
        sorted(server.execute("SELECT id, v, note FROM big", database=db))
    assert Counter(lake_rows(config, f"SELECT grp, msg FROM {db}.log")) == \
        Counter(server.execute("SELECT grp, msg FROM log", database=db))
    live = lake_rows(config, f"SELECT id, v FROM {db}.soft WHERE op_type <> '-D'")
    assert sorted(live) == sorted(server.execute("SELECT id, v FROM soft", database=db))
    # a soft-deleted row is a row MySQL no longer has
    deleted = {r[0] for r in lake_rows(config, f"SELECT id FROM {db}.soft WHERE op_type = '-D'")}
    assert not deleted & {r[0] for r in server.execute("SELECT id FROM soft", database=db)}


def test_server_presents_as_mysql8(mysql8_server):
    source = MySqlSource(MySqlSourceOptions(hostname="127.0.0.1", port=mysql8_server.port))
    assert source.flavor() == "mysql"
    assert mysql8_server.execute("SELECT @@GLOBAL.binlog_row_metadata")[0][0] == "MINIMAL"


@pytest.mark.parametrize("readers", [1, 3])
def test_flink_cdc_grants_snapshot_with_writes_then_stream(mysql8_server, mysql8_db, flink_user, tmp_path, readers):
    """Snapshot then binlog with exactly Flink CDC's grants while writers change every table (primary-key moves
    across chunks included), with one reader or three (pipeline.parallelism): Paimon equals MySQL, and no lock or
    transaction statement reaches the server."""
    server, db = mysql8_server, mysql8_db
    create_tables(server, db)
    config, _ = pipeline(server, tmp_path, db, f"{db}.big, {db}.log, {db}.soft", user=flink_user,
                         extra=f"  scan.incremental.snapshot.chunk.key-column: {db}.log:grp",
                         transform=SOFT_DELETE.format(db=db), readers=readers)
    with GeneralLog(server) as general:
        with Writers(server, db, change_rows, pause=0.001) as writers:
            time.sleep(0.1)
            first = run_micro_batch(config)
            during = writers.commits
        assert during > 20, during  # the writers really wrote while the snapshot ran
        for target in ("big", "log", "soft"):
            assert first.tables[TableId(db, target)].snapshot_complete
        assert first.tables[TableId(db, "big")].commits >= 4  # 20,000 rows in groups of 5,000
        streamed = run_micro_batch(config)
        assert streamed.tables[TableId(db, "big")].phase == "binlog"
        assert_equal_to_mysql(server, config, db)
        # and the binlog phase goes on with the same user
        server.execute("UPDATE big SET v = -1 WHERE id <= 10", database=db)
        server.execute("DELETE FROM soft WHERE id <= 5", database=db)
        run_micro_batch(config)
        assert_equal_to_mysql(server, config, db)
        # a re-snapshot (lock-free too) while the writers go on, then the binlog after it
        with Writers(server, db, change_rows, pause=0.001):
            resnapshot(config, TableId(db, "big"))
        run_micro_batch(config)
        assert_equal_to_mysql(server, config, db)
    assert general.lock_statements() == []


def test_consistent_mode_without_reload_fails_before_any_write(mysql8_server, mysql8_db, flink_user, tmp_path):
    server, db = mysql8_server, mysql8_db
    server.execute("CREATE TABLE t (id INT PRIMARY KEY)", database=db)
    config, _ = pipeline(server, tmp_path, db, f"{db}.t", user=flink_user,
                         extra="  scan.incremental.snapshot.enabled: false")
    with pytest.raises(Exception, match=rf"{db}\.t.*RELOAD.*scan\.incremental\.snapshot\.enabled: true"):
        run_micro_batch(config)
    assert not PaimonSink(config.sink.catalog_options).table_exists(TableId(db, "t"))


@pytest.mark.parametrize("failpoint", ["incremental-chunks-read", "during-snapshot", "before-commit"])
def test_killed_mid_snapshot_resumes_exactly(mysql8_server, mysql8_db, flink_user, tmp_path, failpoint):
    """SIGKILL after a group's chunks were read (before its binlog read and commit), while a later group writes its
    chunks, or after the first group was folded and written, before its commit: the next run continues from the last
    committed chunk and Paimon equals MySQL."""
    server, db = mysql8_server, mysql8_db
    create_tables(server, db)
    config, path = pipeline(server, tmp_path, db, f"{db}.big, {db}.log, {db}.soft", user=flink_user,
                            extra=f"  scan.incremental.snapshot.chunk.key-column: {db}.log:grp",
                            transform=SOFT_DELETE.format(db=db), server_id=5911)
    target = TableId(db, "big")
    sink = PaimonSink(config.sink.catalog_options)
    with Writers(server, db, change_rows, pause=0.001):
        killed = subprocess.run(CLI + [str(path)], env={**os.environ, "LAKECDC_FAILPOINT": failpoint},
                                capture_output=True, text=True, timeout=300)
        assert killed.returncode == -9, killed.stderr[-3000:]
        committed = read_checkpoint(sink.checkpoint(target)) if sink.table_exists(target) else None
        if failpoint == "during-snapshot":  # killed after the first group's commit
            assert committed is not None and committed.pending
        resumed = run_micro_batch(config)
    assert resumed.tables[target].snapshot_complete
    if failpoint == "during-snapshot":  # it continued instead of reading the table again
        assert resumed.tables[target].snapshot_rows < 20_000
    run_micro_batch(config)
    assert_equal_to_mysql(server, config, db)


@pytest.mark.parametrize("incremental", [True, False])
def test_long_write_does_not_stall_application_writes(mysql8_server, mysql8_db, flink_user, tmp_path, incremental):
    """A 4 s UPDATE of another table runs when the snapshot starts: an application inserting in a loop never waits a
    second. The consistent mode (root, with RELOAD) shows what the test guards against: FLUSH TABLES WITH READ LOCK
    queues behind the UPDATE, and the application's inserts queue behind the lock."""
    server, db = mysql8_server, mysql8_db
    server.execute("CREATE TABLE orders (id INT PRIMARY KEY AUTO_INCREMENT, v INT)", database=db)
    server.execute("INSERT INTO orders (v) SELECT seq FROM seq_1_to_5000", database=db)
    server.execute("CREATE TABLE other (id INT PRIMARY KEY, x INT)", database=db)
    server.execute("INSERT INTO other VALUES (1, 0), (2, 0)", database=db)
    config, _ = pipeline(server, tmp_path, db, f"{db}.orders, {db}.other", user=flink_user if incremental else "root",
                         extra="" if incremental else "  scan.incremental.snapshot.enabled: false", server_id=5921)
    stop = threading.Event()
    latencies: list[float] = []
    errors: list[BaseException] = []

    def application():
        conn = server.connect(db)
        try:
            with conn.cursor() as cur:
                while not stop.is_set():
                    started = time.monotonic()
                    cur.execute("INSERT INTO orders (v) VALUES (1)")
                    latencies.append(time.monotonic() - started)
                    time.sleep(0.005)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            conn.close()

    def long_update():
        server.execute("UPDATE other SET x = x + 1 WHERE SLEEP(4) = 0", database=db)

    app = threading.Thread(target=application)
    slow = threading.Thread(target=long_update)
    app.start()
    slow.start()
    try:
        time.sleep(0.5)  # the long UPDATE is running
        result = run_micro_batch(config)
        slow.join()
        time.sleep(0.2)
    finally:
        stop.set()
        app.join()
        slow.join()
    assert not errors, errors
    assert result.tables[TableId(db, "orders")].snapshot_complete
    if not incremental:
        assert max(latencies) > 1.0, max(latencies)
        return
    assert len(latencies) > 50 and max(latencies) < 1.0, max(latencies)
    run_micro_batch(config)
    assert sorted(lake_rows(config, f"SELECT id, v FROM {db}.orders")) == \
        sorted(server.execute("SELECT id, v FROM orders", database=db))


@pytest.mark.parametrize("readers", [1, 4])
def test_random_chunk_moves(mysql8_server, mysql8_db, tmp_path, readers):
    """Tiny chunks (every key move crosses chunks), read by one or four readers, and a writer that keeps moving keys
    forwards and backwards across the range while the snapshot reads: Paimon equals MySQL."""
    server, db = mysql8_server, mysql8_db
    server.execute("CREATE TABLE big (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(20))", database=db)
    server.execute("INSERT INTO big SELECT seq * 3, seq, 'n' FROM seq_1_to_3000", database=db)
    config, _ = pipeline(server, tmp_path, db, f"{db}.big", chunk=20, commit_rows=400, server_id=5931,
                         readers=readers)

    def move(cur, rnd):
        a, b = rnd.randrange(1, 9_100), rnd.randrange(1, 9_100)
        cur.execute("UPDATE IGNORE big SET id = %s, note = 'moved' WHERE id = %s", (b, a))

    with Writers(server, db, move, pause=0.001):
        run_micro_batch(config)
    run_micro_batch(config)
    assert sorted(lake_rows(config, f"SELECT id, v, note FROM {db}.big")) == \
        sorted(server.execute("SELECT id, v, note FROM big", database=db))


def test_differential_workload_during_snapshot(mysql8_server, mysql8_db, tmp_path):
    """The differential test's random workload (composite keys, key changes, a case-insensitive text key whose
    chunks the server orders) runs while a snapshot reads two-row chunks in tiny commit groups: every table equals
    MySQL."""
    from tests.crosscheck import assert_same_rows
    from tests.test_differential import TABLES as WORKLOAD_TABLES, Workload

    server, db = mysql8_server, mysql8_db
    for create in WORKLOAD_TABLES.values():
        server.execute(create, database=db)
    conn = server.connect(db)
    try:
        workload = Workload(random.Random(11), db)
        with conn.cursor() as cur:
            for _ in range(200):
                cur.execute(*workload.statement(cur))
        config, _ = pipeline(server, tmp_path, db, ", ".join(f"{db}.{t}" for t in WORKLOAD_TABLES), chunk=2,
                             commit_rows=6, server_id=5941)
        concurrent = Workload(random.Random(12), db)

        def work(cur, _rnd):
            cur.execute(*concurrent.statement(cur))

        with Writers(server, db, work, threads=1, pause=0.002) as writers:
            first = run_micro_batch(config)
            during = writers.commits
        assert during > 10, during
        assert all(r.snapshot_complete for r in first.tables.values())
        run_micro_batch(config)
        for table in WORKLOAD_TABLES:
            assert_same_rows(conn, config.sink.catalog_options, db, table, context="after the snapshot")
    finally:
        conn.close()


def test_chunk_key_outside_the_primary_key(mysql8_server, mysql8_db, tmp_path):
    """A primary-key table chunked by another column (scan.incremental.snapshot.chunk.key-column): a writer moves
    rows between chunk ranges without changing their key (one key then lives in a committed range, then in a chunk
    of a later group, and back): Paimon equals MySQL."""
    server, db = mysql8_server, mysql8_db
    server.execute("CREATE TABLE acct (id INT PRIMARY KEY, grp INT NOT NULL, v INT NOT NULL, KEY (grp))", database=db)
    server.execute("INSERT INTO acct SELECT seq, seq % 400, 0 FROM seq_1_to_4000", database=db)
    config, _ = pipeline(server, tmp_path, db, f"{db}.acct", chunk=50, commit_rows=300, server_id=5951,
                         extra=f"  scan.incremental.snapshot.chunk.key-column: {db}.acct:grp")

    def regroup(cur, rnd):
        cur.execute("UPDATE acct SET grp = %s, v = v + 1 WHERE id = %s", (rnd.randrange(400), rnd.randrange(1, 4001)))
        if rnd.random() < 0.2:
            cur.execute("DELETE FROM acct WHERE id = %s", (rnd.randrange(1, 4001),))
        if rnd.random() < 0.2:
            cur.execute("INSERT IGNORE INTO acct VALUES (%s, %s, 0)", (rnd.randrange(1, 4001), rnd.randrange(400)))

    with Writers(server, db, regroup, pause=0.001) as writers:
        first = run_micro_batch(config)
        during = writers.commits
    assert during > 20 and first.tables[TableId(db, "acct")].commits > 3
    run_micro_batch(config)
    assert sorted(lake_rows(config, f"SELECT id, grp, v FROM {db}.acct")) == \
        sorted(server.execute("SELECT id, grp, v FROM acct", database=db))


def test_append_chunk_that_keeps_changing_fails_naming_the_way_out(mysql8_server, mysql8_db, tmp_path, monkeypatch):
    """An append table whose only chunk is updated while each read of it runs (the reader's test hook updates a row
    right after the SELECT's first rows came): which updates a chunk's SELECT saw cannot be told without a key, so
    the chunk is read again, group after group, until the run fails naming the table and the options that help."""
    server, db = mysql8_server, mysql8_db
    server.execute("CREATE TABLE hot (grp INT NOT NULL, v INT NOT NULL, KEY (grp))", database=db)
    server.execute("INSERT INTO hot SELECT seq % 10, 0 FROM seq_1_to_200", database=db)
    config, _ = pipeline(server, tmp_path, db, f"{db}.hot", chunk=1000, server_id=5961,
                         extra=f"  scan.incremental.snapshot.chunk.key-column: {db}.hot:grp")
    reads = []

    def update_while_read(_connection_id: int) -> None:  # in the reading thread, between the two watermarks
        reads.append(1)
        server.execute("UPDATE hot SET v = v + 1 WHERE grp = 3 LIMIT 1", database=db)

    monkeypatch.setattr(chunk_reader_module, "mid_chunk_hook", update_while_read)
    with pytest.raises(Exception, match=rf"{db}\.hot.*changed while the chunk was read, in 5 commit groups.*"
                                        r"scan\.incremental\.snapshot\.enabled: false"):
        run_micro_batch(config)
    assert len(reads) == 5


def test_ddl_while_the_chunks_are_read_fails_the_group_then_the_next_run_succeeds(mysql8_server, mysql8_db, tmp_path,
                                                                                 monkeypatch):
    """An ALTER TABLE runs while an incremental commit group reads its chunks (started from the reader's test hook,
    it completes once the running SELECT ends): the group is not committed (its rows and the binlog up to its
    position would disagree with the recorded schema); the next run snapshots the table with its new schema."""
    server, db = mysql8_server, mysql8_db
    server.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)", database=db)
    server.execute("INSERT INTO t SELECT seq, seq FROM seq_1_to_3000", database=db)
    config, _ = pipeline(server, tmp_path, db, f"{db}.t", chunk=500, commit_rows=100_000, server_id=5971)
    altered: list[threading.Thread] = []

    def alter_once(_connection_id: int) -> None:
        if not altered:
            altered.append(threading.Thread(target=server.execute, args=("ALTER TABLE t ADD COLUMN w INT",),
                                            kwargs={"database": db}))
            altered[0].start()
            time.sleep(0.2)

    monkeypatch.setattr(chunk_reader_module, "mid_chunk_hook", alter_once)
    with pytest.raises(Exception, match=rf"schema of MySQL table {db}\.t changed while its snapshot was read"):
        run_micro_batch(config)
    altered[0].join()
    assert not PaimonSink(config.sink.catalog_options).latest_snapshot_id(TableId(db, "t"))
    monkeypatch.setattr(chunk_reader_module, "mid_chunk_hook", None)
    server.execute("UPDATE t SET w = id WHERE id <= 10", database=db)
    assert run_micro_batch(config).tables[TableId(db, "t")].snapshot_complete
    assert sorted(lake_rows(config, f"SELECT id, v, w FROM {db}.t")) == \
        sorted(server.execute("SELECT id, v, w FROM t", database=db))


def test_fold_rows_last_image_per_primary_key():
    """fold_rows alone: per primary key (one column, or two) the last image of the changes wins, a delete or a
    lone before image removes the row, untouched rows stay, and every row comes out as a snapshot row (+I, 0)."""
    import pyarrow as pa

    from lakecdc.model import change_schema
    from lakecdc.runtime.incremental import fold_rows

    schema = change_schema(pa.schema([("a", pa.int32()), ("b", pa.string()), ("v", pa.int64())]))

    def table(rows, op_ts=0):
        return pa.Table.from_pylist([dict(zip(("a", "b", "v", "__lakecdc_op__"), r), __lakecdc_op_ts__=op_ts)
                                     for r in rows], schema=schema)

    rows = table([(1, "x", 10, "+I"), (2, "x", 20, "+I"), (3, "x", 30, "+I")])
    changes = [table([(2, "x", 20, "-U"), (2, "x", 21, "+U"), (4, "x", 40, "+I"), (3, "x", 30, "-D")], 5000),
               table([(3, "x", 31, "+I"), (4, "x", 40, "-D"), (1, "x", 10, "-U"), (1, "y", 10, "+U")], 6000)]
    for keys, want in ((["a"], {(1, "y", 10), (2, "x", 21), (3, "x", 31)}),
                       (["a", "b"], {(1, "y", 10), (2, "x", 21), (3, "x", 31)})):
        folded = fold_rows(rows, changes, keys)
        assert {(r["a"], r["b"], r["v"]) for r in folded.to_pylist()} == want and folded.num_rows == len(want)
        assert set(folded.column("__lakecdc_op__").to_pylist()) == {"+I"}
        assert set(folded.column("__lakecdc_op_ts__").to_pylist()) == {0}
    assert fold_rows(rows, [], ["a"]) is rows
