"""Every ``scan.startup.mode`` against the private MariaDB, end to end into Paimon: ``initial``, ``snapshot`` (then
finished), ``latest-offset``, ``earliest-offset``, ``specific-offset`` by file/position (with skip-events and
skip-rows) and by GTID set, and ``timestamp``. Plus the GTID forms of both servers."""

from __future__ import annotations

import time

import pytest

from lakecdc.config import parse_pipeline
from lakecdc.errors import PipelineConfigError, SourceError
from lakecdc.model import BinlogOffset, TableId
from lakecdc.runtime import pipeline_status, run_micro_batch
from lakecdc.runtime.checkpoint import read_checkpoint
from lakecdc.sink import PaimonSink
from lakecdc.sink.sql import run_sql
from lakecdc.source import MySqlSource, MySqlSourceOptions
from lakecdc.source.gtid import advance, gtid_flavor

PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: root
  password: ""
  tables: {db}.items
  server-id: 5901
  scan.startup.mode: {mode}
{extra}
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {warehouse}
pipeline:
  name: startup {db}
"""


@pytest.fixture
def items(mariadb, fresh_db):
    mariadb.execute("CREATE TABLE items (id INT PRIMARY KEY, label VARCHAR(20))", database=fresh_db)
    return fresh_db


def config_for(mariadb, tmp_path, db, mode, extra=""):
    text = PIPELINE.format(port=mariadb.port, db=db, mode=mode, extra=extra, warehouse=tmp_path / mode)
    return parse_pipeline(text, path=f"{mode}.yaml")


def insert(mariadb, db, *ids):
    mariadb.execute("INSERT INTO items VALUES " + ", ".join(f"({i}, 'item {i}')" for i in ids), database=db)


def lake_ids(config, db):
    rows = run_sql(config.sink.catalog_options, f"SELECT id FROM {db}.items ORDER BY id").to_pylist()
    return [r["id"] for r in rows]


def head(mariadb) -> BinlogOffset:
    source = MySqlSource(MySqlSourceOptions(hostname=mariadb.host, port=mariadb.port))
    return source.head_offset()


def test_initial_snapshots_then_reads_the_binlog(mariadb, items, tmp_path):
    insert(mariadb, items, 1, 2)
    config = config_for(mariadb, tmp_path, items, "initial")
    assert run_micro_batch(config).tables[TableId(items, "items")].phase == "snapshot"
    insert(mariadb, items, 3)
    assert run_micro_batch(config).tables[TableId(items, "items")].phase == "binlog"
    assert lake_ids(config, items) == [1, 2, 3]


def test_snapshot_mode_takes_the_snapshot_and_then_is_finished(mariadb, items, tmp_path):
    insert(mariadb, items, 1, 2)
    config = config_for(mariadb, tmp_path, items, "snapshot")
    target = TableId(items, "items")
    first = run_micro_batch(config).tables[target]
    assert first.phase == "snapshot" and first.snapshot_complete
    insert(mariadb, items, 3)
    second = run_micro_batch(config).tables[target]
    assert not second.committed  # finished: later changes are not read
    assert lake_ids(config, items) == [1, 2]
    status = pipeline_status(config)
    assert not status.needs_run and status.tables[0].lag(status.head).startswith("finished")
    # BATCH execution needs snapshot mode, as in Flink CDC
    batch = PIPELINE.replace("  name: startup {db}", "  name: startup {db}\n  execution.runtime-mode: BATCH")
    with pytest.raises(PipelineConfigError, match="BATCH needs source scan.startup.mode: snapshot"):
        parse_pipeline(batch.format(port=1, db="d", mode="initial", extra="", warehouse="/tmp/x"))


def test_latest_offset_skips_existing_rows(mariadb, items, tmp_path):
    insert(mariadb, items, 1, 2)
    config = config_for(mariadb, tmp_path, items, "latest-offset")
    target = TableId(items, "items")
    first = run_micro_batch(config).tables[target]
    assert first.committed and first.phase == "binlog" and first.counts.inserted == 0
    assert read_checkpoint(PaimonSink(config.sink.catalog_options).checkpoint(target)).offset.same_position(
        head(mariadb))
    insert(mariadb, items, 3)
    mariadb.execute("UPDATE items SET label = 'changed' WHERE id = 1", database=items)
    run_micro_batch(config)
    # the update of a row the table never saw arrives as its new image (Paimon upsert)
    assert lake_ids(config, items) == [1, 3]


def test_earliest_offset_reads_the_whole_retained_binlog(mariadb, items, tmp_path):
    # keep the retained binlog short: start a new file and drop the older ones
    mariadb.execute("FLUSH BINARY LOGS")
    current = head(mariadb).file
    mariadb.purge_binary_logs_to(current)
    insert(mariadb, items, 1, 2)
    mariadb.execute("DELETE FROM items WHERE id = 1", database=items)
    insert(mariadb, items, 3)
    config = config_for(mariadb, tmp_path, items, "earliest-offset")
    result = run_micro_batch(config).tables[TableId(items, "items")]
    assert result.phase == "binlog" and result.counts.inserted == 3 and result.counts.deleted == 1
    assert lake_ids(config, items) == [2, 3]


def test_specific_offset_file_and_position_with_skips(mariadb, items, tmp_path):
    insert(mariadb, items, 1)
    start = head(mariadb)
    insert(mariadb, items, 2)  # row event 1: skipped by skip-events: 1
    insert(mariadb, items, 3, 4, 5)  # row event 2: its first row skipped by skip-rows: 1
    insert(mariadb, items, 6)
    extra = (f"  scan.startup.specific-offset.file: {start.file}\n  scan.startup.specific-offset.pos: {start.pos}\n"
             "  scan.startup.specific-offset.skip-events: 1\n  scan.startup.specific-offset.skip-rows: 1")
    config = config_for(mariadb, tmp_path, items, "specific-offset", extra)
    run_micro_batch(config)
    assert lake_ids(config, items) == [4, 5, 6]
    insert(mariadb, items, 7)  # the skips applied only to the first read
    run_micro_batch(config)
    assert lake_ids(config, items) == [4, 5, 6, 7]

    plain = config_for(mariadb, tmp_path / "plain", items, "specific-offset",
                       f"  scan.startup.specific-offset.file: {start.file}\n"
                       f"  scan.startup.specific-offset.pos: {start.pos}")
    run_micro_batch(plain)
    assert lake_ids(plain, items) == [2, 3, 4, 5, 6, 7]

    gone = config_for(mariadb, tmp_path / "gone", items, "specific-offset",
                      "  scan.startup.specific-offset.file: binlog.999999\n  scan.startup.specific-offset.pos: 4")
    with pytest.raises(SourceError, match="binlog.999999"):
        run_micro_batch(gone)


def test_specific_offset_gtid_set(mariadb, items, tmp_path):
    insert(mariadb, items, 1)
    position = head(mariadb).gtid
    assert gtid_flavor(position) == "mariadb"
    insert(mariadb, items, 2)
    mariadb.execute("UPDATE items SET label = 'two' WHERE id = 2", database=items)
    config = config_for(mariadb, tmp_path, items, "specific-offset",
                        f"  scan.startup.specific-offset.gtid-set: \"{position}\"")
    result = run_micro_batch(config).tables[TableId(items, "items")]
    assert result.counts.inserted == 1 and result.counts.updated == 1
    assert lake_ids(config, items) == [2]
    checkpoint = read_checkpoint(PaimonSink(config.sink.catalog_options).checkpoint(TableId(items, "items")))
    assert checkpoint.offset.same_position(head(mariadb)) and checkpoint.offset.gtid == head(mariadb).gtid
    mysql_set = config_for(mariadb, tmp_path / "mysql", items, "specific-offset",
                           "  scan.startup.specific-offset.gtid-set: 3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5")
    with pytest.raises(SourceError, match="is a mysql GTID set but the server .* is mariadb"):
        run_micro_batch(mysql_set)


def test_timestamp_starts_at_the_first_transaction_of_that_second(mariadb, items, tmp_path):
    insert(mariadb, items, 1)
    time.sleep(1.05 - time.time() % 1)  # binlog times have second resolution: start a new second
    time.sleep(1)
    since_ms = int(time.time() * 1000)
    insert(mariadb, items, 2)
    insert(mariadb, items, 3)
    config = config_for(mariadb, tmp_path, items, "timestamp", f"  scan.startup.timestamp-millis: {since_ms}")
    run_micro_batch(config)
    assert lake_ids(config, items) == [2, 3]
    future = config_for(mariadb, tmp_path / "future", items, "timestamp",
                        f"  scan.startup.timestamp-millis: {since_ms + 3_600_000}")
    assert run_micro_batch(future).tables[TableId(items, "items")].counts.inserted == 0


def test_gtid_forms_of_both_servers():
    assert gtid_flavor("0-1-42") == "mariadb"
    assert gtid_flavor("0-1-42,1-2-7") == "mariadb"
    assert gtid_flavor("3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5:11-18,\n"
                       "4e11fa47-71ca-11e1-9e33-c80aa9429562:1-27") == "mysql"
    assert advance("0-1-42,1-2-7", "1-2-8") == "0-1-42,1-2-8"
    assert advance("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5", "3e11fa47-71ca-11e1-9e33-c80aa9429562:6") == \
        "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-6"
    for bad in ("", "0-1", "abc:1-5", "0-1-2,0-3-4"):
        with pytest.raises(SourceError):
            gtid_flavor(bad)
