"""A routine run's row count costs its changes (lakecdc.runtime.row_counts): after a first count, each run counts
the table's rows from the count the previous run left and its own keys, never reading the table back; a hint that
does not name the run's starting snapshot is not used."""

from __future__ import annotations

from lakecdc.config import parse_pipeline
from lakecdc.model import TableId
from lakecdc.runtime import run_micro_batch
from lakecdc.runtime.row_counts import read_hint, write_hint
from lakecdc.sink import PaimonSink
from tests.test_source_chunked import PIPELINE


def _config(server, db, tmp_path):
    text = PIPELINE.format(port=server.port, tables=f"{db}.t", db=db, chunk=1000, commit_rows=100000, extra="",
                           warehouse=tmp_path / "warehouse", server_id="5960-5964")
    return parse_pipeline(text, path=str(tmp_path / "p.yaml"))


def _table(server, db, tmp_path, rows: int):
    """A keyed table of ``rows`` rows, its pipeline and its table id."""
    server.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL)", database=db)
    server.execute(f"INSERT INTO t SELECT seq, 0 FROM seq_1_to_{rows}", database=db)
    return _config(server, db, tmp_path), TableId(db, "t")


def _mysql_rows(server, db) -> int:
    return int(server.execute("SELECT COUNT(*) FROM t", database=db)[0][0])


def test_row_count_follows_the_changes(source_server, source_db, tmp_path, monkeypatch):
    server, db = source_server, source_db
    config, table = _table(server, db, tmp_path, 3000)
    assert run_micro_batch(config).tables[table].row_count == 3000
    server.execute("UPDATE t SET v = 1 WHERE id <= 100", database=db)  # files now overlap: statistics cannot tell
    assert run_micro_batch(config).tables[table].row_count == 3000

    def no_read_back(self, table_id):
        raise AssertionError("a routine run read the table back to count its rows")

    monkeypatch.setattr(PaimonSink, "row_count", no_read_back)
    for statements in (["INSERT INTO t VALUES (5001, 1), (5002, 2)", "DELETE FROM t WHERE id IN (7, 8, 9)"],
                       ["UPDATE t SET v = 3 WHERE id = 5001", "INSERT INTO t VALUES (7, 7)"],
                       ["DELETE FROM t WHERE id = 5001", "UPDATE t SET id = 6000 WHERE id = 10"]):
        for statement in statements:
            server.execute(statement, database=db)
        result = run_micro_batch(config).tables[table]
        assert result.row_count == _mysql_rows(server, db)
    sink = PaimonSink(config.sink.catalog_options)
    assert read_hint(sink, table) == (sink.latest_snapshot_id(table), _mysql_rows(server, db))


def test_a_hint_of_another_snapshot_is_not_used(source_server, source_db, tmp_path, monkeypatch):
    server, db = source_server, source_db
    config, table = _table(server, db, tmp_path, 500)
    run_micro_batch(config)
    sink = PaimonSink(config.sink.catalog_options)
    first = sink.latest_snapshot_id(table)
    server.execute("UPDATE t SET v = 1 WHERE id <= 10", database=db)
    run_micro_batch(config)
    write_hint(sink, table, first, 12345)  # a count of a snapshot a data commit follows: never used
    server.execute("DELETE FROM t WHERE id <= 5", database=db)
    assert run_micro_batch(config).tables[table].row_count == 495
