"""Table selection against the private MariaDB, end to end into Paimon: selectors over several databases with
``tables.exclude`` read through one binlog connection, a table without primary key, tables created after the
pipeline started (``scan.newly-added-table.enabled``, ``scan.binlog.newly-added-table.enabled``, neither), a purged
binlog, lost connections and ``server-id`` ranges."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
import uuid

import pytest

from lakecdc.config import parse_pipeline
from lakecdc.errors import BinlogPurgedError
from lakecdc.model import TableId
from lakecdc.runtime import pipeline_status, run_micro_batch
from lakecdc.runtime.checkpoint import read_checkpoint
from lakecdc.sink import PaimonSink
from lakecdc.sink.sql import run_sql
from lakecdc.source import BinlogReader, MySqlSource, MySqlSourceOptions
from lakecdc.source import chunk_reader as chunk_reader_module

PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: root
  password: ""
  tables: {tables}
  server-id: {server_id}
{extra}
{rest}
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {warehouse}
pipeline:
  name: tables {name}
"""


def make_config(mariadb, tmp_path, tables, *, extra="", rest="", server_id="6001", name=None):
    text = PIPELINE.format(port=mariadb.port, tables=tables, extra=extra, rest=rest, server_id=server_id,
                           warehouse=tmp_path / "warehouse", name=name or uuid.uuid4().hex[:8])
    return parse_pipeline(text, path="tables.yaml")


def lake(config, table, columns="*", order="id"):
    return run_sql(config.sink.catalog_options, f"SELECT {columns} FROM {table} ORDER BY {order}").to_pylist()


@pytest.fixture
def two_databases(mariadb):
    names = [f"s_{uuid.uuid4().hex[:8]}" for _ in range(2)]
    for db in names:
        mariadb.execute(f"CREATE DATABASE `{db}`")
    yield names
    for db in names:
        mariadb.execute(f"DROP DATABASE IF EXISTS `{db}`")


def test_selectors_over_two_databases_read_the_binlog_once(mariadb, two_databases, tmp_path):
    a, b = two_databases
    for db in (a, b):
        for table in ("orders", "orders_archive", "customers", "tmp_scratch"):
            mariadb.execute(f"CREATE TABLE `{db}`.{table} (id INT PRIMARY KEY, v VARCHAR(10))")
            mariadb.execute(f"INSERT INTO `{db}`.{table} VALUES (1, '{db[-4:]}')")
    # every table of both databases (`.` separates database and table, `\.` is the regex dot), without the
    # tmp_ tables and b's archive; b.customers is named twice
    config = make_config(mariadb, tmp_path, f"s_[0-9a-f]+.\\.*, {b}.customers",
                         extra=f"  tables.exclude: \\.*.tmp_\\.*, {b}.orders_archive")
    first = run_micro_batch(config)
    captured = {str(t) for t in first.tables}
    others = {str(TableId(db, t)) for db in (a, b) for t in ("orders", "customers")} | {f"{a}.orders_archive"}
    assert others <= captured  # other test databases with the same prefix may be captured too
    assert not any(t.endswith(".tmp_scratch") or t == f"{b}.orders_archive" for t in captured)

    for db in (a, b):
        for table in ("orders", "customers", "tmp_scratch", "orders_archive"):
            mariadb.execute(f"INSERT INTO `{db}`.{table} VALUES (2, 'new')")
    second = run_micro_batch(config)
    assert second.binlog_reads == 1  # one binlog connection for every table of both databases
    changed = {str(t.target) for t in second.committed}
    assert others <= changed
    for table in others:
        assert [r["id"] for r in lake(config, table, "id")] == [1, 2]


def test_table_without_primary_key_becomes_an_append_table(mariadb, fresh_db, tmp_path):
    mariadb.execute("CREATE TABLE log (at INT NOT NULL, msg VARCHAR(20))", database=fresh_db)
    mariadb.execute("INSERT INTO log VALUES (1, 'a'), (2, 'b'), (2, 'b'), (3, NULL)", database=fresh_db)
    config = make_config(mariadb, tmp_path, f"{fresh_db}.log", server_id="6011",
                         extra=f"  scan.incremental.snapshot.chunk.key-column: {fresh_db}.log:at\n"
                               "  scan.incremental.snapshot.chunk.size: 2",
                         rest="")
    config.snapshot_commit_rows = 2
    target = TableId(fresh_db, "log")
    first = run_micro_batch(config).tables[target]
    assert first.primary_keys == [] and first.commits >= 2  # chunked by `at`, two rows per commit
    mariadb.execute("INSERT INTO log VALUES (4, 'd')", database=fresh_db)
    mariadb.execute("UPDATE log SET msg = 'A' WHERE at = 1", database=fresh_db)
    mariadb.execute("DELETE FROM log WHERE at = 3", database=fresh_db)
    run_micro_batch(config)
    # append semantics (as Flink CDC's Paimon sink): updates append the new image, deletes are dropped
    assert lake(config, f"{fresh_db}.log", "at, msg", "at, msg") == [
        {"at": 1, "msg": "A"}, {"at": 1, "msg": "a"}, {"at": 2, "msg": "b"}, {"at": 2, "msg": "b"},
        {"at": 3, "msg": None}, {"at": 4, "msg": "d"}]

    # without chunk key the incremental snapshot (the default) refuses the table, naming it and the option, before
    # anything is written; the consistent snapshot reads it whole; a bad chunk key is refused naming the column
    refused = make_config(mariadb, tmp_path / "refused", f"{fresh_db}.log", server_id="6012")
    with pytest.raises(Exception, match=f"{fresh_db}.log: the table has no primary key.*chunk.key-column"):
        run_micro_batch(refused)
    assert not (tmp_path / "refused" / "warehouse" / f"{fresh_db}.db").exists()
    whole = make_config(mariadb, tmp_path / "whole", f"{fresh_db}.log", server_id="6012",
                        extra="  scan.incremental.snapshot.enabled: false")
    assert run_micro_batch(whole).tables[target].commits == 1
    bad = make_config(mariadb, tmp_path / "bad", f"{fresh_db}.log", server_id="6013",
                      extra=f"  scan.incremental.snapshot.chunk.key-column: {fresh_db}.log:nope")
    with pytest.raises(Exception, match="names column 'nope'"):
        run_micro_batch(bad)


NEW_TABLE_MODES = {
    "snapshot": "  scan.newly-added-table.enabled: true",
    "binlog": "  scan.binlog.newly-added-table.enabled: true",
    "off": "",
}


@pytest.mark.parametrize("mode", sorted(NEW_TABLE_MODES))
def test_table_created_after_the_pipeline_started(mariadb, fresh_db, tmp_path, mode):
    db = fresh_db
    mariadb.execute("CREATE TABLE t_1 (id INT PRIMARY KEY, v INT)", database=db)
    mariadb.execute("INSERT INTO t_1 VALUES (1, 1)", database=db)
    config = make_config(mariadb, tmp_path, f"{db}.t_\\.*", extra=NEW_TABLE_MODES[mode], server_id="6021")
    run_micro_batch(config)

    # a new table with rows from before and after the first run of the pipeline that sees it
    mariadb.execute("CREATE TABLE t_2 (id INT PRIMARY KEY, v INT)", database=db)
    mariadb.execute("INSERT INTO t_2 VALUES (1, 10), (2, 20)", database=db)
    mariadb.execute("INSERT INTO t_1 VALUES (2, 2)", database=db)
    second = run_micro_batch(config)
    new = TableId(db, "t_2")
    if mode == "off":
        assert new not in second.tables and second.ignored_tables == [new]
        assert not pipeline_status(config).needs_run
        return
    assert second.tables[new].phase == ("snapshot" if mode == "snapshot" else "binlog")
    mariadb.execute("UPDATE t_2 SET v = 21 WHERE id = 2", database=db)
    mariadb.execute("INSERT INTO t_2 VALUES (3, 30)", database=db)
    run_micro_batch(config)
    assert lake(config, f"{db}.t_2", "id, v") == [{"id": 1, "v": 10}, {"id": 2, "v": 21}, {"id": 3, "v": 30}]
    assert [r["id"] for r in lake(config, f"{db}.t_1", "id")] == [1, 2]
    checkpoint = read_checkpoint(PaimonSink(config.sink.catalog_options).checkpoint(TableId(db, "t_1")))
    assert new in checkpoint.captured


def test_new_table_routed_into_an_existing_table_is_snapshotted_into_it(mariadb, fresh_db, tmp_path):
    """A new shard joins a Paimon table that is already in its binlog phase: the shard is snapshotted (chunk by
    chunk) into it while the existing shard's changes go on being applied."""
    db = fresh_db
    mariadb.execute("CREATE TABLE shard_1 (id INT PRIMARY KEY, v INT)", database=db)
    mariadb.execute("INSERT INTO shard_1 VALUES (1, 1), (2, 2)", database=db)
    rest = (f"transform:\n  - source-table: {db}.shard_\\.*\n    projection: \"*, __table_name__ AS shard\"\n"
            "    primary-keys: shard, id\n"
            f"route:\n  - source-table: {db}.shard_\\.*\n    sink-table: {db}.shards")
    config = make_config(mariadb, tmp_path, f"{db}.shard_\\.*", server_id="6031", rest=rest,
                         extra="  scan.newly-added-table.enabled: true\n  scan.incremental.snapshot.chunk.size: 3")
    config.snapshot_commit_rows = 3
    run_micro_batch(config)
    mariadb.execute("CREATE TABLE shard_2 (id INT PRIMARY KEY, v INT)", database=db)
    mariadb.execute("INSERT INTO shard_2 SELECT seq, seq FROM seq_1_to_10", database=db)
    mariadb.execute("UPDATE shard_1 SET v = 100 WHERE id = 1", database=db)
    result = run_micro_batch(config).tables[TableId(db, "shards")]
    assert result.commits >= 3 and result.snapshot_complete
    mariadb.execute("DELETE FROM shard_2 WHERE id > 2", database=db)
    mariadb.execute("DELETE FROM shard_1 WHERE id = 2", database=db)
    run_micro_batch(config)
    assert lake(config, f"{db}.shards", "shard, id, v", "shard, id") == [
        {"shard": "shard_1", "id": 1, "v": 100}, {"shard": "shard_2", "id": 1, "v": 1},
        {"shard": "shard_2", "id": 2, "v": 2}]


def purge_to_head(mariadb):
    mariadb.execute("FLUSH BINARY LOGS")
    current = mariadb.execute("SHOW MASTER STATUS")[0][0]
    mariadb.purge_binary_logs_to(current)


def test_purged_binlog_stops_the_run_and_says_how_to_resnapshot(mariadb, fresh_db, tmp_path):
    db = fresh_db
    mariadb.execute("CREATE TABLE p (id INT PRIMARY KEY)", database=db)
    config = make_config(mariadb, tmp_path, f"{db}.p", server_id="6041")
    target = TableId(db, "p")
    run_micro_batch(config)
    sink = PaimonSink(config.sink.catalog_options)
    before = sink.latest_snapshot_id(target)
    mariadb.execute("INSERT INTO p VALUES (1)", database=db)
    purge_to_head(mariadb)
    with pytest.raises(BinlogPurgedError) as error:
        run_micro_batch(config)
    message = str(error.value)
    assert str(target) in message and "is gone" in message and "resnapshot: true" in message
    assert f"{db}.db/p" in message and "Nothing was written" in message
    assert sink.latest_snapshot_id(target) == before
    # the documented way out: drop the Paimon table; the next run snapshots it anew
    import shutil

    shutil.rmtree(tmp_path / "warehouse" / f"{db}.db" / "p")
    assert run_micro_batch(config).tables[target].phase == "snapshot"
    assert lake(config, f"{db}.p", "id") == [{"id": 1}]


# PyMySQL's cursor of the killed connection fails again when garbage-collected
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_lost_snapshot_connection_is_retried(mariadb, fresh_db, tmp_path, monkeypatch, caplog):
    """The connection holding the consistent snapshot is killed mid-chunk (the reader paused by its test hook
    right after the first rows of the first chunk came off the wire): the group is retried on a new connection (a
    new consistent snapshot, the writer's uncommitted rows dropped) and the table ends up complete."""
    db = fresh_db
    mariadb.execute("CREATE TABLE big (id INT PRIMARY KEY, pad VARCHAR(200))", database=db)
    mariadb.execute("INSERT INTO big SELECT seq, REPEAT('x', 200) FROM seq_1_to_5000", database=db)
    config = make_config(mariadb, tmp_path, f"{db}.big", server_id="6051",
                         extra="  scan.incremental.snapshot.chunk.size: 2000")
    config.snapshot_commit_rows = 5000
    connections, killed = [], []

    def pause_and_kill(connection_id: int) -> None:  # runs in the reader's thread, which waits meanwhile
        connections.append(connection_id)
        if not killed:
            mariadb.execute(f"KILL CONNECTION {connection_id}")
            killed.append(connection_id)

    monkeypatch.setattr(chunk_reader_module, "mid_chunk_hook", pause_and_kill)
    with caplog.at_level(logging.WARNING):
        result = run_micro_batch(config).tables[TableId(db, "big")]
    assert result.snapshot_complete
    assert lake(config, f"{db}.big", "count(*) AS n, sum(id) AS s", "n") == [{"n": 5000, "s": 5000 * 5001 // 2}]
    # The kill happened, and the group was read again on another connection.
    assert len(killed) == 1
    assert any(c != killed[0] for c in connections[1:]), connections
    assert any("connection" in r.getMessage() and "retry 1/" in r.getMessage() for r in caplog.records), \
        [r.getMessage() for r in caplog.records]


# PyMySQL's cursor of the killed connection fails again when garbage-collected
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_lost_binlog_connection_is_retried_with_backoff(mariadb, fresh_db):
    """The server goes away in the middle of a binlog read (a restart): the reader backs off, reconnects from the
    last whole transaction it read, and the changes are complete and in order."""
    db = fresh_db
    mariadb.execute("CREATE TABLE r (id INT PRIMARY KEY, pad VARCHAR(300))", database=db)
    options = MySqlSourceOptions(hostname=mariadb.host, port=mariadb.port, server_id=6061, retry_backoff=0.5,
                                 connect_max_retries=5)
    source = MySqlSource(options)
    table = source.describe_table(TableId(db, "r"))
    start = source.head_offset()
    # 24 MB of binlog: more than the socket buffers hold, so the read is still going when the server stops
    for i in range(40):
        mariadb.execute(f"INSERT INTO r SELECT seq + {i * 2000}, REPEAT('x', 300) FROM seq_0_to_1999", database=db)
    stop = source.head_offset()
    reader = BinlogReader(options, {table.table_id: table}, {table.table_id: start}, stop, flush_rows=2000)
    ids = []
    outage = None

    def restart():  # the dump connection dies; reconnecting fails until the server is back a second later
        mariadb.shutdown()
        time.sleep(1)
        mariadb.resume()

    for batch in reader:
        ids += batch.data.column("id").to_pylist()
        if outage is None:
            outage = threading.Thread(target=restart)
            outage.start()
    outage.join()
    assert ids == list(range(80_000))
    assert reader.reconnects >= 2 and reader.end_offset == stop  # refused at least once, then reconnected


def test_server_id_range_avoids_an_id_in_use(mariadb, fresh_db):
    """With a server-id range the reader picks an id no registered replica uses (a second dump with the same id
    would make the server drop the first)."""
    db = fresh_db
    mariadb.execute("CREATE TABLE s (id INT PRIMARY KEY)", database=db)
    # another replica, registered with id 6071, following the binlog (in its own process: a blocking binlog
    # stream cannot be closed cleanly from another thread)
    busy = subprocess.Popen([sys.executable, "-c", (
        "from pymysqlreplication import BinLogStreamReader\n"
        f"s = BinLogStreamReader(connection_settings=dict(host='{mariadb.host}', port={mariadb.port}, user='root', "
        "passwd=''), server_id=6071, blocking=True, report_slave='someone-else', resume_stream=True)\n"
        "for _ in s: pass\n")])
    try:
        deadline = time.monotonic() + 60  # a Python interpreter starting on a loaded 2-core machine
        while 6071 not in {int(r[0]) for r in mariadb.execute("SHOW SLAVE HOSTS")}:
            assert time.monotonic() < deadline, "the other replica did not register"
            time.sleep(0.05)
        options = MySqlSourceOptions(hostname=mariadb.host, port=mariadb.port, server_id=6071, server_id_last=6073)
        source = MySqlSource(options)
        table = source.describe_table(TableId(db, "s"))
        start = source.head_offset()
        mariadb.execute("INSERT INTO s VALUES (1)", database=db)
        reader = source.read_binlog({table.table_id: table}, {table.table_id: start}, source.head_offset())
        assert [b.data.column("id").to_pylist() for b in reader] == [[1]]
        assert reader.server_id == 6072
        assert 6071 in {int(r[0]) for r in mariadb.execute("SHOW SLAVE HOSTS")}  # the other one still runs
    finally:
        busy.kill()
        busy.wait()
