"""The incremental snapshot's race windows, held open on purpose (docs/operations.md, "Why the snapshot loses
nothing").

MySQL writes a transaction to the binlog in its flush stage and commits it in InnoDB after its sync stage, so a
SELECT that starts after the binlog position passed a transaction may still miss it. A real server holds that gap
for milliseconds; these tests hold it as long as they need with InnoDB's own visibility: a chunk's SELECT runs on a
connection whose consistent read view was opened before the transaction committed (``select_connection_hook``),
while the binlog position the reader sees is already past it. That is the watermark reader's case (the server
presenting itself as MySQL); on MariaDB every chunk is read at its exact position, which the last test checks.
"""

from __future__ import annotations

from collections import Counter

import pymysql
import pytest

from lakecdc.model import TableId
from lakecdc.runtime import run_micro_batch
from lakecdc.sink.sql import run_sql
from lakecdc.source import chunk_reader as chunk_reader_module
from lakecdc.source import MySqlSource, MySqlSourceOptions
from lakecdc.source.chunks import ChunkProgress
from lakecdc.source.connection import connect
from tests.test_incremental_snapshot import pipeline


def lake_rows(config, sql):
    return [tuple(r.values()) for r in run_sql(config.sink.catalog_options, sql).to_pylist()]


class OldReadView:
    """A connection to ``server`` inside a consistent snapshot opened now: what it reads misses every transaction
    committed after this moment."""

    def __init__(self, server, db):
        self.conn = connect(MySqlSourceOptions(hostname="127.0.0.1", port=server.port), database=db, streaming=True)
        with self.conn.cursor(pymysql.cursors.Cursor) as cur:
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            cur.execute("SELECT COUNT(*) FROM t")  # InnoDB opens the read view at the first read
            cur.fetchall()

    def close(self):
        self.conn.close()


def race_hook(server, db, later_range_start, transaction):
    """A select_connection_hook: at the first chunk of the snapshot, open an old read view, then commit
    ``transaction`` (statements on rows at or after ``later_range_start``, which a later commit group reads); the
    chunks that start at or after that key are read through the old view, which misses the transaction although the
    binlog has it before the chunks' low watermarks, and before the previous group's position."""
    state: dict = {}

    def hook(table_id, lower: ChunkProgress):
        if "view" not in state:
            state["view"] = OldReadView(server, db)
            for statement in transaction:
                server.execute(statement, database=db)
            return None
        if lower.has_after and lower.after >= later_range_start:
            state["used"] = True
            return state["view"].conn
        return None

    return hook, state


TRANSACTION = ["UPDATE t SET v = -1 WHERE id = 3500",
               "INSERT INTO t (id, v, note) VALUES (3600, 7, 'new')",
               "DELETE FROM t WHERE id = 3700"]


@pytest.mark.parametrize("key", ["PRIMARY KEY", "UNIQUE KEY"])
def test_a_transaction_logged_before_a_group_and_invisible_to_its_select(mysql8_server, mysql8_db, tmp_path,
                                                                         monkeypatch, key):
    """A transaction logged before commit group 1 ended, invisible to group 2's SELECT of its rows: folded from the
    run's first position, it lands (folded from group 1's position it was lost). With a unique NOT NULL index
    instead of a primary key the table needs no chunk-key option and gets the same guarantee."""
    server, db = mysql8_server, mysql8_db
    server.execute(f"CREATE TABLE t (id INT NOT NULL, v INT NOT NULL, note VARCHAR(20), {key} (id))", database=db)
    server.execute("INSERT INTO t SELECT seq, seq % 10, CONCAT('n', seq) FROM seq_1_to_4000 WHERE seq <> 3600",
                   database=db)
    config, _ = pipeline(server, tmp_path, db, f"{db}.t", chunk=500, commit_rows=2000)
    hook, state = race_hook(server, db, 3000, TRANSACTION)
    monkeypatch.setattr(chunk_reader_module, "select_connection_hook", hook)
    try:
        result = run_micro_batch(config)
    finally:
        state["view"].close()
    assert state.get("used"), "the old read view was never used: the race was not reproduced"
    assert result.tables[TableId(db, "t")].commits >= 2
    lake = sorted(lake_rows(config, f"SELECT id, v, note FROM {db}.t"))
    assert lake == sorted(server.execute("SELECT id, v, note FROM t", database=db))
    assert (3500, -1, "n3500") in lake and (3600, 7, "new") in lake and not [r for r in lake if r[0] == 3700]


def test_unique_not_null_index_is_the_chunk_key(mysql8_server, mysql8_db):
    """Without a primary key, the first unique index whose columns are NOT NULL identifies rows; a nullable unique
    index does not."""
    server, db = mysql8_server, mysql8_db
    server.execute("CREATE TABLE u (a INT NULL, b INT NOT NULL, c INT NOT NULL, UNIQUE KEY ka (a), "
                   "UNIQUE KEY kbc (b, c))", database=db)
    source = MySqlSource(MySqlSourceOptions(hostname="127.0.0.1", port=server.port))
    table = source.describe_table(TableId(db, "u"))
    assert table.primary_keys == () and table.unique_keys == (("b", "c"),) and table.row_identity == ("b", "c")
    key = source.chunk_key(table)
    assert key is not None and key.name == "b" and not key.unique


def test_mariadb_reads_each_chunk_at_its_exact_position(source_server, source_db, tmp_path):
    """On MariaDB every chunk of an append table (no key at all, a non-unique chunk key) is read in a consistent
    snapshot of its own whose binlog position is exact, so a chunk changed while the group reads is never read
    again, and rows inserted into a chunk's range during the snapshot land exactly once."""
    server, db = source_server, source_db
    server.execute("CREATE TABLE log (grp INT NOT NULL, msg VARCHAR(20), KEY (grp))", database=db)
    server.execute("INSERT INTO log SELECT seq % 300, CONCAT('m', seq) FROM seq_1_to_3000", database=db)
    config, _ = pipeline(server, tmp_path, db, f"{db}.log", chunk=400, commit_rows=1200,
                         extra=f"  scan.incremental.snapshot.chunk.key-column: {db}.log:grp")
    inserted = []

    def insert_into_read_ranges(table_id, lower):
        # every chunk's SELECT starts right after rows went into ranges already read, being read and not read yet
        n = len(inserted)
        for grp in (5, 150, 290):
            server.execute("INSERT INTO log VALUES (%s, %s)", (grp, f"x{n}-{grp}"), database=db)
            inserted.append(grp)
        return None

    chunk_reader_module.select_connection_hook = insert_into_read_ranges
    try:
        first = run_micro_batch(config)
    finally:
        chunk_reader_module.select_connection_hook = None
    assert inserted and first.tables[TableId(db, "log")].snapshot_complete
    run_micro_batch(config)
    assert Counter(lake_rows(config, f"SELECT grp, msg FROM {db}.log")) == \
        Counter(server.execute("SELECT grp, msg FROM log", database=db))
