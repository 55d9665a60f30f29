"""Re-snapshots in commit groups (bounded memory): a whole table in several groups removes the rows MySQL no longer
has and counts what it changed; one killed between two groups starts over at the next run; a partition whose key is
a monotone function of a source column reads only that partition's rows from MySQL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lakecdc.config import parse_pipeline
from lakecdc.model import TableId
from lakecdc.runtime import replacement as replacement_module
from lakecdc.runtime import run_micro_batch
from lakecdc.runtime.checkpoint import PHASE_BINLOG, PHASE_RESNAPSHOT, read_checkpoint
from lakecdc.runtime.resnapshots import resnapshot
from lakecdc.sink import PaimonSink
from lakecdc.sink.sql import run_sql
from tests.test_source_chunked import PIPELINE

LAKECDC = str(Path(sys.executable).parent / "lakecdc")

PARTITIONED = """
transform:
  - source-table: {db}.orders
    projection: "*, DATE_FORMAT(created_at, 'yyyyMMdd') AS order_day"
    primary-keys: id, order_day
    partition-keys: order_day
"""


def setup(server, db, tmp_path, *, partitioned=False, commit_rows=1000):
    server.execute("CREATE TABLE orders (id INT PRIMARY KEY, v INT NOT NULL, created_at DATETIME(3) NOT NULL)",
                   database=db)
    server.execute("INSERT INTO orders SELECT seq, seq % 7, TIMESTAMPADD(HOUR, seq % 240, '2026-01-01') "
                   "FROM seq_1_to_4000", database=db)
    text = PIPELINE.format(port=server.port, tables=f"{db}.orders", db=db, chunk=300, commit_rows=commit_rows,
                           extra="", warehouse=tmp_path / "warehouse", server_id="5950-5959")
    text += PARTITIONED.format(db=db) if partitioned else ""
    path = tmp_path / "pipeline.yaml"
    path.write_text(text)
    return parse_pipeline(text, path=str(path)), path


def lake(config, db, columns="id, v"):
    return sorted(tuple(r.values()) for r in run_sql(config.sink.catalog_options,
                                                    f"SELECT {columns} FROM {db}.orders").to_pylist())


def mysql(server, db, columns="id, v"):
    return sorted(server.execute(f"SELECT {columns} FROM orders", database=db))


def drift(server, db):
    """MySQL changes the binlog does not record (sql_log_bin=0): Paimon then holds stale and old rows."""
    conn = server.connect(db)
    try:
        with conn.cursor() as cur:
            for statement in ("SET SESSION sql_log_bin = 0", "DELETE FROM orders WHERE id % 10 = 0",
                              "UPDATE orders SET v = v + 100 WHERE id % 10 = 1",
                              "INSERT INTO orders VALUES (9001, 1, '2026-01-02 10:00:00')"):
                cur.execute(statement)
        conn.commit()
    finally:
        conn.close()


def day_of(row_id: int) -> int:
    """The day of January 2026 the setup gives row ``row_id``."""
    return 1 + (row_id % 240) // 24


@pytest.mark.parametrize("keys_per_partition", [250_000, 500])
def test_whole_table_in_commit_groups(source_server, source_db, tmp_path, monkeypatch, keys_per_partition):
    """With the sweep's keys in one hash partition, or in several (about 8)."""
    server, db = source_server, source_db
    monkeypatch.setattr(replacement_module, "KEYS_PER_PARTITION", keys_per_partition)
    config, _ = setup(server, db, tmp_path)
    run_micro_batch(config)
    drift(server, db)
    result = resnapshot(config, TableId(db, "orders"))
    assert result.commits >= 4  # 4,001 rows in groups of 1,000
    assert lake(config, db) == mysql(server, db)
    assert result.stale_deleted == 400 and result.counts.deleted == 400
    assert (result.counts.inserted, result.counts.updated, result.unchanged) == (1, 400, 3200)
    checkpoint = read_checkpoint(PaimonSink(config.sink.catalog_options).checkpoint(TableId(db, "orders")))
    assert checkpoint.phase == PHASE_RESNAPSHOT and not checkpoint.pending and checkpoint.offset == result.offset
    # the binlog phase goes on from the re-snapshot's position
    server.execute("UPDATE orders SET v = -1 WHERE id = 5", database=db)
    server.execute("DELETE FROM orders WHERE id = 7", database=db)
    assert run_micro_batch(config).tables[TableId(db, "orders")].phase == PHASE_BINLOG
    assert lake(config, db) == mysql(server, db)


def test_a_killed_resnapshot_starts_over_at_the_next_run(source_server, source_db, tmp_path):
    server, db = source_server, source_db
    config, path = setup(server, db, tmp_path)
    run_micro_batch(config)
    drift(server, db)
    env = {**os.environ, "LAKECDC_FAILPOINT": "snapshot-group-committed"}
    killed = subprocess.run([LAKECDC, "resnapshot", str(path), f"{db}.orders"], env=env, capture_output=True,
                            text=True, timeout=300)
    assert killed.returncode == -9 and "failpoint snapshot-group-committed reached" in killed.stderr
    checkpoint = read_checkpoint(PaimonSink(config.sink.catalog_options).checkpoint(TableId(db, "orders")))
    assert checkpoint.phase == PHASE_RESNAPSHOT and checkpoint.pending  # one group committed, the rest pending
    server.execute("INSERT INTO orders VALUES (9002, 2, '2026-01-03 10:00:00')", database=db)
    result = run_micro_batch(config).tables[TableId(db, "orders")]
    assert result.snapshot_complete
    assert lake(config, db) == mysql(server, db)  # stale rows of every group removed, the insert applied


def test_partition_reads_only_its_rows(source_server, source_db, tmp_path):
    server, db = source_server, source_db
    config, _ = setup(server, db, tmp_path, partitioned=True)
    server.execute("CREATE INDEX by_time ON orders (created_at)", database=db)  # so the range is read, not scanned
    run_micro_batch(config)
    drift(server, db)
    day = "2026-01-02"
    partition_rows = int(server.execute(f"SELECT COUNT(*) FROM orders WHERE DATE(created_at) = '{day}'",
                                        database=db)[0][0])
    before = int(dict(server.execute("SHOW GLOBAL STATUS LIKE 'Rows_read'"))["Rows_read"])
    result = resnapshot(config, TableId(db, "orders"), "order_day=20260102")
    rows_read = int(dict(server.execute("SHOW GLOBAL STATUS LIKE 'Rows_read'"))["Rows_read"]) - before
    assert result.snapshot_rows == partition_rows
    assert rows_read < 4 * partition_rows  # the range, not the 4,000-row table
    in_day = f"WHERE DATE(created_at) = '{day}'"
    lake_day = sorted(tuple(r.values()) for r in run_sql(
        config.sink.catalog_options, f"SELECT id, v FROM {db}.orders WHERE order_day = '20260102'").to_pylist())
    assert lake_day == sorted(server.execute(f"SELECT id, v FROM orders {in_day}", database=db))
    assert result.stale_deleted == len([i for i in range(10, 4001, 10) if day_of(i) == 2])
    checkpoint = read_checkpoint(PaimonSink(config.sink.catalog_options).checkpoint(TableId(db, "orders")))
    assert checkpoint.offset == result.offset  # the rest of the table stays at its checkpoint
    run_micro_batch(config)
    # other days still hold the drift (only the binlog moves them); this one equals MySQL
    assert lake_day == sorted(server.execute(f"SELECT id, v FROM orders {in_day}", database=db))
