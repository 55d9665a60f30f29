"""Nothing on the source side is skipped silently: XA transactions are captured as MySQL applies them (across
micro-batches, crashes and snapshots, in both snapshot modes), statement-logged DML on a captured table fails the run
before anything is committed, a DDL statement lakecdc cannot interpret fails evolve/exception runs (and what the
other modes do), a binlog that no longer fits the schema history is an error, and a RENAME TABLE keeps what it kept
before.

All against the private MariaDB (10.11 logs XA PREPARE as XA_PREPARE_LOG_EVENT and the XA COMMIT / ROLLBACK as a
group of its own, like MySQL 8) and real Paimon files."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest

from lakecdc.config import parse_pipeline
from lakecdc.errors import SourceError
from lakecdc.model import TableId
from lakecdc.runtime import run_micro_batch
from lakecdc.runtime.checkpoint import XA_SCAN_START, read_checkpoint
from lakecdc.runtime.schema_evolution import SchemaChangeError
from lakecdc.sink import PaimonSink
from lakecdc.sink.sql import run_sql
from lakecdc.source import MySqlSource
from lakecdc.source.options import MySqlSourceOptions
from lakecdc.source.schema import source_table_from_json

PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: root
  password: ""
  tables: {db}.\\.*
  server-id: 5820
  scan.incremental.snapshot.chunk.key-column: {db}.events:id
  scan.incremental.snapshot.enabled: {incremental}
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {warehouse}
pipeline:
  name: skipped {db}
  schema.change.behavior: {behavior}
"""


@pytest.fixture
def lake(source_server, source_db, tmp_path):
    """(server, db, config factory): ``events`` is an append table (no primary key: a replayed row would show
    twice), ``items`` a primary-key table."""
    source_server.execute("CREATE TABLE events (id INT, note VARCHAR(20))", database=source_db)
    source_server.execute("CREATE TABLE items (id INT PRIMARY KEY, v INT)", database=source_db)
    path = tmp_path / "pipeline.yaml"

    def config(behavior: str = "evolve", incremental: bool = True):
        path.write_text(PIPELINE.format(port=source_server.port, db=source_db, warehouse=tmp_path / "wh",
                                        behavior=behavior, incremental=str(incremental).lower()))
        return parse_pipeline(path.read_text()), path

    yield source_server, source_db, config
    roll_back_prepared_xa(source_server)


def roll_back_prepared_xa(server) -> None:
    """A failed test can leave a prepared XA transaction, which outlives its session and holds its locks (the
    database could not be dropped): close the sessions, roll back what is still prepared."""
    for conn in _XA_SESSIONS:
        conn.close()
    _XA_SESSIONS.clear()
    for _format, gtrid_length, _bqual_length, data in server.execute("XA RECOVER"):
        data = data if isinstance(data, bytes) else str(data).encode()
        server.execute(f"XA ROLLBACK X'{data[:gtrid_length].hex()}', X'{data[gtrid_length:].hex()}', {_format}")


_XA_SESSIONS: list = []


def rows(config, db: str, table: str) -> list[tuple]:
    data = run_sql(config.sink.catalog_options, f"SELECT * FROM {db}.{table}")
    return sorted(tuple(r.values()) for r in data.to_pylist())


def checkpoint(config, db: str, table: str):
    return read_checkpoint(PaimonSink(config.sink.catalog_options).checkpoint(TableId(db, table)))


READ_COMMITTED = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"  # no gap locks: prepared transactions
# writing one table do not wait for each other


def prepare_xa(server, db: str, xid: str, statements: list[str], *, session: tuple[str, ...] = ()):
    """A session that ran ``session`` (settings), XA START, ``statements``, XA END, XA PREPARE (kept open: MariaDB
    resolves a prepared XA transaction in its own session, or in any once that session is gone)."""
    conn = server.connect(db)
    _XA_SESSIONS.append(conn)
    with conn.cursor() as cur:
        for setting in session:
            cur.execute(setting)
        cur.execute(f"XA START '{xid}'")
        for statement in statements:
            cur.execute(statement)
        cur.execute(f"XA END '{xid}'")
        cur.execute(f"XA PREPARE '{xid}'")
    return conn


def resolve_xa(conn, xid: str, action: str) -> None:
    with conn.cursor() as cur:
        cur.execute(f"XA {action} '{xid}'")
    conn.close()
    _XA_SESSIONS.remove(conn)


# ------------------------------------------------------------------------------------------------------------- XA


def test_xa_prepared_in_one_batch_committed_in_the_next(lake):
    server, db, make = lake
    config, _ = make()
    run_micro_batch(config)  # snapshot: empty tables
    xa = prepare_xa(server, db, "x1", ["INSERT INTO events VALUES (1, 'xa')", "INSERT INTO items VALUES (1, 10)"])
    server.execute("INSERT INTO events VALUES (2, 'plain')", database=db)
    server.execute("INSERT INTO items VALUES (2, 20)", database=db)
    run_micro_batch(config)
    # the prepared rows are not applied yet; the checkpoint moved past the later transaction but remembers where
    # the open XA transaction starts
    assert rows(config, db, "events") == [(2, "plain")]
    assert rows(config, db, "items") == [(2, 20)]
    for table in ("events", "items"):
        cp = checkpoint(config, db, table)
        assert cp.xa_scan_start is not None and cp.xa_scan_start < cp.offset

    resolve_xa(xa, "x1", "COMMIT")
    server.execute("INSERT INTO events VALUES (3, 'after')", database=db)
    run_micro_batch(config)
    # the XA rows take effect at the XA COMMIT, once; the transaction before the checkpoint is not replayed
    assert rows(config, db, "events") == [(1, "xa"), (2, "plain"), (3, "after")]
    assert rows(config, db, "items") == [(1, 10), (2, 20)]
    assert checkpoint(config, db, "events").xa_scan_start is None
    assert XA_SCAN_START not in PaimonSink(config.sink.catalog_options).checkpoint(TableId(db, "events"))

    server.execute("INSERT INTO events VALUES (4, 'later')", database=db)
    run_micro_batch(config)
    assert rows(config, db, "events") == [(1, "xa"), (2, "plain"), (3, "after"), (4, "later")]


def test_xa_prepared_then_rolled_back_in_the_next_batch(lake):
    server, db, make = lake
    config, _ = make()
    run_micro_batch(config)
    xa = prepare_xa(server, db, "x2", ["INSERT INTO events VALUES (1, 'xa')", "UPDATE items SET v = 1"])
    server.execute("INSERT INTO events VALUES (2, 'plain')", database=db)
    run_micro_batch(config)
    assert rows(config, db, "events") == [(2, "plain")]
    resolve_xa(xa, "x2", "ROLLBACK")
    server.execute("INSERT INTO events VALUES (3, 'after')", database=db)
    run_micro_batch(config)
    assert rows(config, db, "events") == [(2, "plain"), (3, "after")]
    assert checkpoint(config, db, "events").xa_scan_start is None


def test_xa_one_phase_and_within_one_batch(lake):
    server, db, make = lake
    config, _ = make()
    run_micro_batch(config)
    conn = server.connect(db)
    with conn.cursor() as cur:
        cur.execute("XA START 'one', 'branch', 7")
        cur.execute("INSERT INTO events VALUES (1, 'one phase')")
        cur.execute("XA END 'one', 'branch', 7")
        cur.execute("XA COMMIT 'one', 'branch', 7 ONE PHASE")
    conn.close()
    resolve_xa(prepare_xa(server, db, "two", ["INSERT INTO events VALUES (2, 'two phase')"]), "two", "COMMIT")
    resolve_xa(prepare_xa(server, db, "gone", ["INSERT INTO events VALUES (3, 'rolled back')"]), "gone", "ROLLBACK")
    run_micro_batch(config)
    assert rows(config, db, "events") == [(1, "one phase"), (2, "two phase")]
    assert checkpoint(config, db, "events").xa_scan_start is None


def _cli(path, failpoint: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "LAKECDC_FAILPOINT"}
    if failpoint:
        env["LAKECDC_FAILPOINT"] = failpoint
    return subprocess.run([sys.executable, "-m", "lakecdc.cli", "run", str(path)], env=env, capture_output=True,
                          text=True, timeout=300)


def test_xa_across_a_crash(lake):
    """Prepared in one batch; the batch that reads its XA COMMIT is killed before its commit; the rerun applies the
    rows once, and a crash right after the prepare batch's commit loses nothing either."""
    server, db, make = lake
    config, path = make()
    assert _cli(path).returncode == 0
    xa = prepare_xa(server, db, "x3", ["INSERT INTO events VALUES (1, 'xa')"])
    server.execute("INSERT INTO events VALUES (2, 'plain')", database=db)
    crashed = _cli(path, "after-commit")  # the checkpoint with the open XA transaction is committed, then killed
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    assert rows(config, db, "events") == [(2, "plain")]
    assert checkpoint(config, db, "events").xa_scan_start is not None

    resolve_xa(xa, "x3", "COMMIT")
    crashed = _cli(path, "before-commit")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    assert rows(config, db, "events") == [(2, "plain")]  # nothing of the killed run is visible
    done = _cli(path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert rows(config, db, "events") == [(1, "xa"), (2, "plain")]
    assert _cli(path).returncode == 0
    assert rows(config, db, "events") == [(1, "xa"), (2, "plain")]


@pytest.mark.parametrize("row_metadata,incremental", [
    ("FULL", True), ("FULL", False),
    ("MYSQL8", False),  # MySQL's consistent snapshot: FLUSH TABLES WITH READ LOCK while the XA transactions are open
], ids=["lock-free chunks", "consistent snapshot", "consistent snapshot, MySQL 8"])
@pytest.mark.parametrize("resolved", ["while the snapshot reads", "after the snapshot"])
def test_xa_open_across_the_snapshot_lands_or_vanishes(lake, monkeypatch, incremental, resolved):
    """Two XA transactions prepared before the snapshot, each writing the keyed table ``items`` and the table
    without key ``events`` (chunked by its ``id``): the snapshot sees neither (prepared rows are invisible), and
    their prepares lie before its position. One is committed, one rolled back, either from the snapshot reader's
    test hook (between a chunk's watermarks; in the consistent mode after its position) or after the snapshot run,
    with the prepares then in an older binlog file. The committed one lands, the rolled back one does not, with no
    re-snapshot; the binlog scan of the sensor counts the commit as a change of both tables."""
    from lakecdc.runtime.status import pipeline_status
    from lakecdc.source import chunk_reader as chunk_reader_module
    from tests.crosscheck import assert_same_rows

    server, db, make = lake
    config, _ = make(incremental=incremental)
    server.execute("INSERT INTO events VALUES (1, 'before'), (2, 'before')", database=db)
    server.execute("INSERT INTO items VALUES (1, 10), (2, 20), (3, 30)", database=db)
    kept = prepare_xa(server, db, "kept", [
        "INSERT INTO events VALUES (10, 'xa'), (11, 'xa')", "INSERT INTO items VALUES (10, 100)",
        "UPDATE items SET v = 11 WHERE id = 1", "DELETE FROM items WHERE id = 3"], session=(READ_COMMITTED,))
    gone = prepare_xa(server, db, "gone", [
        "INSERT INTO events VALUES (20, 'gone')", "INSERT INTO items VALUES (20, 200)",
        "UPDATE items SET v = 21 WHERE id = 2"], session=(READ_COMMITTED,))

    def resolve(*_args) -> None:
        if kept in _XA_SESSIONS:
            resolve_xa(kept, "kept", "COMMIT")
            resolve_xa(gone, "gone", "ROLLBACK")

    if resolved == "while the snapshot reads":
        monkeypatch.setattr(chunk_reader_module, "mid_chunk_hook", resolve)
    else:
        server.execute("FLUSH BINARY LOGS")  # the prepares now lie in an older file than the snapshot's position
    run_micro_batch(config)
    monkeypatch.setattr(chunk_reader_module, "mid_chunk_hook", None)
    if resolved == "after the snapshot":
        assert rows(config, db, "events") == [(1, "before"), (2, "before")]  # prepared: not visible yet
        resolve()
        status = {t.target: t for t in pipeline_status(config).tables}
        assert status[TableId(db, "events")].behind and status[TableId(db, "items")].behind
    assert kept not in _XA_SESSIONS  # resolved in either case
    server.execute("INSERT INTO events VALUES (30, 'later')", database=db)
    run_micro_batch(config)
    assert rows(config, db, "events") == [(1, "before"), (2, "before"), (10, "xa"), (11, "xa"), (30, "later")]
    assert rows(config, db, "items") == [(1, 11), (2, 20), (10, 100)]
    for table in ("events", "items"):
        assert_same_rows(server, config.sink.catalog_options, db, table)
        assert checkpoint(config, db, table).xa_scan_start is None


def test_xa_rows_lakecdc_cannot_know_stop_the_run_at_their_commit(lake):
    """An XA transaction whose prepared rows lakecdc cannot know (a partial row image) is judged where its rows take
    effect, at its XA COMMIT: prepared in one batch (before the checkpoint, kept through xa-scan-start) and
    committed in the next, it stops that run instead of being applied without those rows."""
    server, db, make = lake
    config, _ = make()
    server.execute("INSERT INTO items VALUES (1, 10)", database=db)
    run_micro_batch(config)
    xa = prepare_xa(server, db, "partial", ["UPDATE items SET v = 11 WHERE id = 1"],
                    session=("SET SESSION binlog_row_image = 'MINIMAL'",))
    server.execute("INSERT INTO items VALUES (2, 20)", database=db)
    run_micro_batch(config)
    assert checkpoint(config, db, "items").xa_scan_start is not None
    resolve_xa(xa, "partial", "COMMIT")
    with pytest.raises(SourceError, match=rf"{db}\.items.*binlog_row_image=MINIMAL"):
        run_micro_batch(config)
    assert rows(config, db, "items") == [(1, 10), (2, 20)]


def test_xa_commit_whose_prepare_is_not_in_the_binlog_is_an_error(lake):
    """A prepare the binlog does not hold (here: logged by a session with sql_log_bin=0; a purged file is the
    same): the commit's rows cannot be known, so the run stops naming the transaction, before committing."""
    server, db, make = lake
    config, _ = make()
    run_micro_batch(config)
    unlogged = prepare_xa(server, db, "unlogged", ["INSERT INTO events VALUES (1, 'xa')"],
                          session=("SET SESSION sql_log_bin = 0",))
    unlogged.close()
    _XA_SESSIONS.remove(unlogged)
    server.execute("XA COMMIT 'unlogged'")  # from a new session, which logs it
    before = PaimonSink(config.sink.catalog_options).latest_snapshot_id(TableId(db, "events"))
    with pytest.raises(SourceError, match=r"XA COMMIT of X'756e6c6f67676564',X'',1 at binlog\.\d+:\d+: its XA "
                                          r"PREPARE is not in the binlog .*sql_log_bin=0.*Re-snapshot"):
        run_micro_batch(config)
    assert PaimonSink(config.sink.catalog_options).latest_snapshot_id(TableId(db, "events")) == before


# ------------------------------------------------------------------------------------------------ statement-logged DML


@pytest.mark.parametrize("binlog_format,statement", [
    ("STATEMENT", "INSERT INTO items VALUES (5, 50)"),
    ("STATEMENT", "UPDATE {db}.items SET v = v + 1"),
    ("STATEMENT", "DELETE FROM items WHERE id = 1"),
    ("MIXED", "INSERT INTO items VALUES (5, 50)"),
    # its own event type (Execute_load_query), not a query event
    ("STATEMENT", "LOAD DATA LOCAL INFILE '{file}' INTO TABLE items"),
])
def test_statement_logged_dml_fails_before_committing(lake, tmp_path, binlog_format, statement):
    server, db, make = lake
    config, _ = make()
    server.execute("INSERT INTO items VALUES (1, 10)", database=db)
    run_micro_batch(config)
    sink = PaimonSink(config.sink.catalog_options)
    before = sink.latest_snapshot_id(TableId(db, "items"))
    server.execute("INSERT INTO items VALUES (2, 20)", database=db)  # row-logged, before the statement
    data = tmp_path / "items.tsv"
    data.write_text("5\t50\n")
    conn = server.connect(db, local_infile=True)
    with conn.cursor() as cur:
        cur.execute(f"SET SESSION binlog_format = '{binlog_format}'")
        cur.execute(statement.format(db=db, file=data))
    conn.close()
    with pytest.raises(SourceError) as failure:
        run_micro_batch(config)
    message = str(failure.value)
    assert f"{db}.items" in message and "STATEMENT format" in message and "re-snapshot" in message
    assert sink.latest_snapshot_id(TableId(db, "items")) == before
    assert rows(config, db, "items") == [(1, 10)]


def test_statement_logged_dml_elsewhere_is_not_an_error(lake):
    """Statement-logged DML on a table the pipeline does not capture (another database) does not stop it."""
    server, db, make = lake
    config, _ = make()
    run_micro_batch(config)
    other = f"{db}_other"
    server.execute(f"CREATE DATABASE `{other}`")
    try:
        server.execute(f"CREATE TABLE `{other}`.t (id INT)")
        conn = server.connect(other)
        with conn.cursor() as cur:
            cur.execute("SET SESSION binlog_format = 'STATEMENT'")
            cur.execute("INSERT INTO t VALUES (1)")
            cur.execute(f"INSERT INTO `{other}`.t SELECT id FROM `{db}`.items")  # reads a captured table only
        conn.close()
        server.execute("INSERT INTO items VALUES (3, 30)", database=db)
        run_micro_batch(config)
        assert rows(config, db, "items") == [(3, 30)]
    finally:
        server.execute(f"DROP DATABASE `{other}`")


# ------------------------------------------------------------------------------------------------ unparsed DDL

UNPARSED_HARMLESS = "ALTER TABLE items ADD CHECK (v >= 0)"  # sqlglot cannot parse it; it changes no column
UNPARSED_ADDS_A_COLUMN = "ALTER TABLE items ADD COLUMN w INT, ADD CHECK (w >= 0)"


@pytest.mark.parametrize("behavior", ["evolve", "exception"])
def test_unparsed_alter_fails_evolve_and_exception(lake, behavior):
    server, db, make = lake
    config, _ = make(behavior)
    run_micro_batch(config)
    server.execute("INSERT INTO items VALUES (1, 10)", database=db)
    server.execute(UNPARSED_HARMLESS, database=db)
    server.execute("INSERT INTO items VALUES (2, 20)", database=db)
    with pytest.raises(SchemaChangeError, match=r"cannot interpret the DDL statement 'ALTER TABLE items ADD "
                                                rf"CHECK \(v >= 0\)' on {db}\.items .*schema\.change\.behavior "
                                                rf"{behavior}"):
        run_micro_batch(config)
    assert rows(config, db, "items") == [(1, 10)]  # committed up to the statement before it


@pytest.mark.parametrize("behavior", ["ignore", "lenient", "try_evolve"])
def test_unparsed_alter_in_tolerant_modes(lake, behavior):
    """ignore / lenient / try_evolve go past a statement they cannot interpret with the schema unchanged; when it
    did change the columns, the first row written after it no longer fits the history and stops the run."""
    server, db, make = lake
    config, _ = make(behavior)
    run_micro_batch(config)
    server.execute(UNPARSED_HARMLESS, database=db)
    server.execute("INSERT INTO items VALUES (1, 10)", database=db)
    run_micro_batch(config)
    assert rows(config, db, "items") == [(1, 10)]

    server.execute(UNPARSED_ADDS_A_COLUMN, database=db)
    server.execute("INSERT INTO items VALUES (2, 20, 2)", database=db)
    with pytest.raises(SourceError, match=rf"rows event of {db}\.items at .* 3 columns .* schema history has 2 "
                                          r"\(id, v\).*Re-snapshot"):
        run_micro_batch(config)
    assert rows(config, db, "items") == [(1, 10)]


def test_partition_ddl_that_drops_rows_is_an_error(source_server, source_db, tmp_path):
    server, db = source_server, source_db
    server.execute("CREATE TABLE items (id INT PRIMARY KEY, v INT) PARTITION BY RANGE (id) "
                   "(PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN MAXVALUE)", database=db)
    path = tmp_path / "p.yaml"
    path.write_text(PIPELINE.format(port=server.port, db=db, warehouse=tmp_path / "wh", behavior="lenient",
                                    incremental="true"))
    config = parse_pipeline(path.read_text())
    server.execute("INSERT INTO items VALUES (1, 1), (20, 2)", database=db)
    run_micro_batch(config)
    server.execute("ALTER TABLE items REORGANIZE PARTITION p1 INTO (PARTITION p1 VALUES LESS THAN (100), "
                   "PARTITION p2 VALUES LESS THAN MAXVALUE)", database=db)  # partition maintenance: no change
    server.execute("INSERT INTO items VALUES (2, 3)", database=db)
    run_micro_batch(config)
    assert rows(config, db, "items") == [(1, 1), (2, 3), (20, 2)]
    server.execute("ALTER TABLE items TRUNCATE PARTITION p0", database=db)
    with pytest.raises(SourceError, match=r"TRUNCATE PARTITION p0.*removes or swaps rows.*Re-snapshot"):
        run_micro_batch(config)
    assert rows(config, db, "items") == [(1, 1), (2, 3), (20, 2)]


# ------------------------------------------------------------------------------------------------ schema history


def test_binlog_with_more_columns_than_the_history_is_an_error(lake):
    """A change lakecdc never saw (here: a checkpointed schema history edited to lack a column) stops the read with
    the table, the position and what to do."""
    server, db, make = lake
    config, _ = make()
    run_micro_batch(config)
    sink = PaimonSink(config.sink.catalog_options)
    target = TableId(db, "items")
    properties = dict(sink.checkpoint(target))
    schemas = json.loads(properties["lakecdc.source.schemas"])
    schemas[f"{db}.items"]["columns"] = schemas[f"{db}.items"]["columns"][:1]
    properties["lakecdc.source.schemas"] = json.dumps(schemas)
    sink.open_writer(target).commit(properties)
    server.execute("INSERT INTO items VALUES (1, 10)", database=db)
    with pytest.raises(SourceError, match=rf"rows event of {db}\.items at binlog\.\d+:\d+ .*has 2 columns.*schema "
                                          r"history has 1 \(id\).*Re-snapshot"):
        run_micro_batch(config)


@pytest.mark.parametrize("row_metadata,column,expected", [
    ("FULL", ("renamed", "int(11)"), "named 'v' in the binlog"),
    ("FULL", ("v", "int(10) unsigned"), "is signed in the binlog"),
    ("NO_LOG", ("v", "bigint(20)"), "binlog field type 3, which does not fit bigint"),
    ("NO_LOG", ("v", "decimal(10,2)"), "binlog field type 3, which does not fit decimal"),
])
def test_binlog_column_that_does_not_fit_the_history_is_an_error(source_server, source_db, row_metadata, column,
                                                                expected):
    """The reader with a schema history that differs from what the binlog carries: FULL metadata is the
    cross-check of names and signedness; without it the binlog types must fit."""
    server, db = source_server, source_db
    server.execute("CREATE TABLE items (id INT PRIMARY KEY, v INT)", database=db)
    source = MySqlSource(MySqlSourceOptions(hostname=server.host, port=server.port, username=server.user,
                                            password=server.password, server_id=5821))
    table = source.describe_table(TableId(db, "items"))
    wrong = source_table_from_json({**table.to_json(), "columns": [
        table.to_json()["columns"][0], {**table.to_json()["columns"][1], "name": column[0], "type": column[1]}]},
        source.options)
    start = source.head_offset()
    server.execute("INSERT INTO items VALUES (1, 10)", database=db)
    with pytest.raises(SourceError, match=rf"rows event of {db}\.items at binlog\.\d+:\d+ .*column 2 "
                                          rf"\('{column[0]}' {re.escape(column[1])}.*{expected}.*Re-snapshot"):
        list(source.read_binlog({table.table_id: wrong}, {table.table_id: start}, source.head_offset()))


def test_rows_written_with_full_metadata_read_while_the_setting_is_minimal(mariadb, fresh_db, tmp_path):
    """binlog_row_metadata changed between runs: events written with FULL and read while the global is MINIMAL (and
    the other way round) decode exactly (python-mysql-replication would look only at the setting)."""
    server, db = mariadb, fresh_db
    server.execute("CREATE TABLE items (id INT PRIMARY KEY, u INT UNSIGNED, e ENUM('a','b'), s SET('x','y'), "
                   "l VARCHAR(5) CHARACTER SET latin1)", database=db)
    path = tmp_path / "p.yaml"
    path.write_text(PIPELINE.format(port=server.port, db=db, warehouse=tmp_path / "wh", behavior="evolve",
                                    incremental="true"))
    config = parse_pipeline(path.read_text())
    run_micro_batch(config)
    old = server.execute("SELECT @@GLOBAL.binlog_row_metadata")[0][0]
    try:
        server.execute("INSERT INTO items VALUES (1, 4294967295, 'b', 'x,y', 'é')", database=db)  # FULL
        server.execute("SET GLOBAL binlog_row_metadata = 'MINIMAL'")
        run_micro_batch(config)
        server.execute("INSERT INTO items VALUES (2, 4294967294, 'a', 'y', 'ü')", database=db)  # MINIMAL
        server.execute("SET GLOBAL binlog_row_metadata = 'FULL'")
        run_micro_batch(config)
    finally:
        server.execute(f"SET GLOBAL binlog_row_metadata = '{old}'")
    assert rows(config, db, "items") == [(1, 4294967295, "b", ["x", "y"], "é"), (2, 4294967294, "a", ["y"], "ü")]


def test_rename_table_keeps_the_rows_before_it(lake):
    """RENAME TABLE of a captured table gives no event (as in Flink CDC): the Paimon table keeps the rows up to the
    rename, the renamed table is not captured under its new name, and a new table under the old name is captured
    from its CREATE TABLE on. Nothing written under the captured name is lost."""
    server, db, make = lake
    config, _ = make()
    server.execute("INSERT INTO items VALUES (1, 10)", database=db)
    run_micro_batch(config)
    server.execute("INSERT INTO items VALUES (2, 20)", database=db)
    server.execute("RENAME TABLE items TO items_old", database=db)
    server.execute("INSERT INTO items_old VALUES (3, 30)", database=db)
    server.execute("CREATE TABLE items (id INT PRIMARY KEY, v INT)", database=db)
    server.execute("INSERT INTO items VALUES (4, 40)", database=db)
    run_micro_batch(config)
    assert rows(config, db, "items") == [(1, 10), (2, 20), (4, 40)]


def test_snapshot_refuses_a_schema_that_changed_before_its_start(source_server, source_db):
    """A DDL between describing a table and the snapshot's start (the race of a DDL with the snapshot): the
    snapshot would record a schema that is not the one at its binlog position, so it stops instead."""
    server, db = source_server, source_db
    server.execute("CREATE TABLE items (id INT PRIMARY KEY, v INT)", database=db)
    source = MySqlSource(MySqlSourceOptions(hostname=server.host, port=server.port, username=server.user,
                                            password=server.password, server_id=5822))
    described = source.describe_table(TableId(db, "items"))
    with source.snapshot([described]) as snap:  # unchanged: fine
        assert snap.offset is not None
    server.execute("ALTER TABLE items MODIFY v INT UNSIGNED", database=db)
    with pytest.raises(SourceError, match=rf"schema of MySQL table {db}\.items changed while its snapshot started.*"
                                          r"v int\(11\)\).*v int\(10\) unsigned\).*run again"):
        with source.snapshot([described]):
            pass


def test_minimal_metadata_cross_checks_signedness(source_server, source_db):
    """MINIMAL row metadata (MySQL 8's default) logs signedness without names: a history that says INT while the
    binlog says INT UNSIGNED (a change lakecdc never saw; the binlog type is the same) is an error."""
    server, db = source_server, source_db
    server.execute("CREATE TABLE items (id INT PRIMARY KEY, v INT)", database=db)
    source = MySqlSource(MySqlSourceOptions(hostname=server.host, port=server.port, username=server.user,
                                            password=server.password, server_id=5823))
    table = source.describe_table(TableId(db, "items"))
    start = source.head_offset()
    server.execute("ALTER TABLE items MODIFY v INT UNSIGNED", database=db)
    server.execute("INSERT INTO items VALUES (1, 4000000000)", database=db)
    old = server.execute("SELECT @@GLOBAL.binlog_row_metadata")[0][0]
    server.execute("SET GLOBAL binlog_row_metadata = 'MINIMAL'")
    try:
        server.execute("INSERT INTO items VALUES (2, 4000000001)", database=db)
    finally:
        server.execute(f"SET GLOBAL binlog_row_metadata = '{old}'")
    # without DDL tracking the stale schema meets both events: the FULL one by name/signedness, here the MINIMAL one
    first_full = source.read_binlog({table.table_id: table}, {table.table_id: start}, source.head_offset())
    with pytest.raises(SourceError, match=r"column 2 \('v' int\(11\) in the schema history\) is unsigned in the "
                                          r"binlog"):
        list(first_full)
    after_full = source.head_offset()
    server.execute("SET GLOBAL binlog_row_metadata = 'MINIMAL'")
    try:
        server.execute("INSERT INTO items VALUES (3, 4000000002)", database=db)
    finally:
        server.execute(f"SET GLOBAL binlog_row_metadata = '{old}'")
    with pytest.raises(SourceError, match=r"column 2 \('v' int\(11\) in the schema history\) is unsigned in the "
                                          r"binlog"):
        list(source.read_binlog({table.table_id: table}, {table.table_id: after_full}, source.head_offset()))


@pytest.mark.parametrize("statement,xid", [
    ("XA COMMIT X'78',X'',1", (1, b"x", b"")),  # how MySQL 8 and MariaDB log it
    ("XA ROLLBACK X'6f6e65',X'6272616e6368',7", (7, b"one", b"branch")),
    ("XA COMMIT 'x'", (1, b"x", b"")),
    ("xa commit 'it''s', 'b' , 3 ONE PHASE", (3, b"it's", b"b")),
])
def test_xa_ids_as_logged(statement, xid):
    from lakecdc.source.binlog import parse_xid

    assert parse_xid(statement, "binlog.000001:4") == xid


@pytest.mark.parametrize("statement,tables", [
    ("INSERT INTO t VALUES (1)", {"d.t"}),
    ("REPLACE INTO `e`.`t` VALUES (1)", {"e.t"}),
    ("INSERT INTO x.y SELECT * FROM d.t", {"x.y"}),  # reads d.t, writes x.y
    ("UPDATE a JOIN e.b ON a.id = b.id SET a.v = b.v", {"d.a", "e.b"}),  # either may be written
    ("UPDATE t SET v = (SELECT MAX(v) FROM u)", {"d.t"}),
    ("DELETE a FROM a JOIN b ON a.id = b.id", {"d.a", "d.b"}),
    ("LOAD DATA INFILE '/tmp/f' INTO TABLE e.t", {"e.t"}),
    ("INSERT INTO t VALUES (", None),
])
def test_statement_dml_targets(statement, tables):
    from lakecdc.source.ddl import dml_target_tables

    found = dml_target_tables(statement, "d")
    assert (None if found is None else {str(t) for t in found}) == tables
