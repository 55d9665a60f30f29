"""Behind means behind: a table is behind only when a committed change or DDL of its source tables lies after its
checkpoint (lakecdc.source.activity scans the binlog for them); the sensor starts runs for those tables only, idle
tables' checkpoints follow the binlog (rotations, 64 MiB) so a purge never strands them, and each tick scans only the
binlog written since the last one. Against the private MariaDB, real Paimon files and Dagster's sensor evaluation."""

import contextlib
import io
import json

import dagster as dg
import pytest

from lakecdc.cli import main as cli_main
from lakecdc.config import parse_pipeline
from lakecdc.dagster import build_pipeline_definitions
from lakecdc.model import BinlogOffset, TableId
from lakecdc.runtime import pipeline_status, run_micro_batch
from lakecdc.runtime.checkpoint import IDLE_CHECKPOINT_BYTES, idle_checkpoint_due, idle_checkpoint_urgent
from lakecdc.sink import PaimonSink
from lakecdc.sink.sql import run_sql
from lakecdc.source import MySqlSource
from lakecdc.source.activity import EVERYTHING, binlog_sizes, bytes_between, scan_activity

PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: root
  password: ""
  tables: "{db}.[ab]"
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {warehouse}
pipeline:
  name: behind {db}
"""


@pytest.fixture
def other_db(mariadb):
    """A database the pipeline does not capture, with a table to write to."""
    mariadb.execute("DROP DATABASE IF EXISTS behind_other")
    mariadb.execute("CREATE DATABASE behind_other")
    mariadb.execute("CREATE TABLE behind_other.noise (id INT PRIMARY KEY AUTO_INCREMENT, payload VARCHAR(200))")
    yield "behind_other"
    mariadb.execute("DROP DATABASE IF EXISTS behind_other")


@pytest.fixture
def pipeline(mariadb, fresh_db, tmp_path):
    """Two captured tables, a and b, each snapshotted by a first run; the YAML file and its config."""
    for name in ("a", "b"):
        mariadb.execute(f"CREATE TABLE `{fresh_db}`.{name} (id INT PRIMARY KEY, v VARCHAR(20))")
        mariadb.execute(f"INSERT INTO `{fresh_db}`.{name} VALUES (1, 'one')")
    path = tmp_path / "behind.yaml"
    path.write_text(PIPELINE.format(port=mariadb.port, db=fresh_db, warehouse=tmp_path / "warehouse"))
    config = parse_pipeline(path.read_text(), path=path)
    first = run_micro_batch(config)
    assert {t.phase for t in first.committed} == {"snapshot"} and len(first.committed) == 2
    return config, path, TableId(fresh_db, "a"), TableId(fresh_db, "b")


def noise(mariadb, rows: int = 20) -> None:
    for i in range(rows):
        mariadb.execute(f"INSERT INTO behind_other.noise (payload) VALUES ('{'x' * 150}{i}')")


def by_table(status) -> dict:
    return {t.target: t for t in status.tables}


def status_json(path) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli_main(["status", "--json", str(path)]) == 0
    return json.loads(out.getvalue())


def tick(defs, config, instance, cursor):
    sensor = defs.resolve_sensor_def(f"{config.slug}_binlog_sensor")
    return sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=defs, cursor=cursor))


def requested(result) -> list[list[dg.AssetKey]]:
    return [list(r.asset_selection) for r in result.run_requests]


def key(table: TableId) -> dg.AssetKey:
    return dg.AssetKey(["paimon", table.database, table.table])


def test_other_databases_start_nothing_and_a_change_starts_exactly_its_table(mariadb, other_db, pipeline, tmp_path):
    config, path, a, b = pipeline
    defs = build_pipeline_definitions(config)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        first = tick(defs, config, instance, None)
        assert first.run_requests == [], first.skip_message
        cursor = first.cursor

        # Writes to another database move the head past both checkpoints; neither table is behind.
        noise(mariadb)
        status = pipeline_status(config)
        assert all(t.checkpoint < status.head for t in status.tables)
        assert [t.behind for t in status.tables] == [False, False]
        report = status_json(path)
        assert [(t["table"], t["behind"]) for t in report["tables"]] == [(str(a), False), (str(b), False)]
        assert report["needs_run"] is False
        result = tick(defs, config, instance, cursor)
        assert result.run_requests == [], result.skip_message
        # The tick scanned only what was written since the previous one, and its cursor reaches the head.
        scan = json.loads(result.cursor)["scan"]
        assert scan["to"] == str(status.head) and scan["changed"] == {}
        cursor = result.cursor
        noise(mariadb, 5)
        quiet = pipeline_status(config, activity=_activity(cursor))
        since_last_tick = bytes_between(binlog_sizes(config.source), _activity(cursor).stop, quiet.head)
        fresh = pipeline_status(config)
        assert 0 < quiet.scanned_bytes <= since_last_tick < fresh.scanned_bytes

        # One write to table a: a alone is behind, and the sensor starts a run of a only.
        mariadb.execute(f"INSERT INTO `{a.database}`.a VALUES (2, 'two')")
        noise(mariadb, 3)
        status = by_table(pipeline_status(config))
        assert status[a].behind and not status[b].behind
        assert status[a].last_change > status[a].checkpoint
        result = tick(defs, config, instance, cursor)
        assert requested(result) == [[key(a)]]
        assert json.loads(result.cursor)["requested"] == [str(a)]
        cursor = result.cursor
        # The same change does not start a second run while nothing new arrives for a (its run may fail).
        noise(mariadb, 3)
        again = tick(defs, config, instance, cursor)
        assert again.run_requests == [], again.skip_message
        cursor = again.cursor

        # The run catches a up; nothing is behind, and more noise starts nothing.
        ran = run_micro_batch(config, targets={a})
        assert [t.target for t in ran.committed] == [a]
        noise(mariadb, 3)
        assert [t.behind for t in pipeline_status(config).tables] == [False, False]
        result = tick(defs, config, instance, cursor)
        assert result.run_requests == [], result.skip_message
        cursor = result.cursor

        # A DDL on table b makes it behind; a DDL on an uncaptured table of the same database does not.
        mariadb.execute(f"CREATE TABLE `{a.database}`.ignored (id INT)")
        status = by_table(pipeline_status(config))
        assert not status[a].behind and not status[b].behind
        mariadb.execute(f"ALTER TABLE `{b.database}`.b ADD COLUMN note VARCHAR(10)")
        status = by_table(pipeline_status(config))
        assert status[b].behind and not status[a].behind
        assert status_json(path)["tables"][1]["behind"] is True
        result = tick(defs, config, instance, cursor)
        assert requested(result) == [[key(b)]]


def _activity(cursor: str):
    from lakecdc.source.activity import BinlogActivity

    return BinlogActivity.from_json(json.loads(cursor)["scan"])


def test_statement_logged_dml_and_xa_count_when_committed(mariadb, pipeline):
    config, _, a, b = pipeline
    source = MySqlSource(config.source)
    start = source.head_offset()
    conn = mariadb.connect()
    conn.autocommit(True)
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION binlog_format = 'STATEMENT'")
            cur.execute(f"INSERT INTO `{a.database}`.a VALUES (5, 'stmt')")
            cur.execute("SET SESSION binlog_format = 'ROW'")
            cur.execute("XA START 'behind-xa'")
            cur.execute(f"INSERT INTO `{b.database}`.b VALUES (6, 'xa')")
            cur.execute("XA END 'behind-xa'")
            cur.execute("XA PREPARE 'behind-xa'")
        prepared = source.head_offset()
        scan = scan_activity(source.options, {a, b}, start, prepared)
        assert set(scan.changed) == {a}  # the prepared XA transaction has not committed yet
        assert [sorted(map(str, t)) for t in scan.prepared_xa.values()] == [[str(b)]]
        assert by_table(pipeline_status(config))[b].behind is False
        with conn.cursor() as cur:
            cur.execute("XA COMMIT 'behind-xa'")
        committed = source.head_offset()
        later = scan_activity(source.options, {a, b}, prepared, committed, prepared_xa=scan.prepared_xa)
        assert set(later.changed) == {b} and later.prepared_xa == {}
        # Without the prepare in view, its XA COMMIT counts for every table (conservative).
        blind = scan_activity(source.options, {a, b}, prepared, committed)
        assert set(blind.changed) == {EVERYTHING}
        status = by_table(pipeline_status(config))
        assert status[a].behind and status[b].behind
        # An XA transaction rolled back after its prepare changes nothing.
        with conn.cursor() as cur:
            cur.execute("XA START 'behind-rb'")
            cur.execute(f"INSERT INTO `{b.database}`.b VALUES (7, 'rb')")
            cur.execute("XA END 'behind-rb'")
            cur.execute("XA PREPARE 'behind-rb'")
            cur.execute("XA ROLLBACK 'behind-rb'")
        assert scan_activity(source.options, {a, b}, committed, source.head_offset()).changed == {}
    finally:
        conn.close()


def test_statement_logged_load_data_counts(mariadb, pipeline, tmp_path):
    """LOAD DATA logged as a statement is an Execute_load_query event, not a query event: it counts too."""
    config, _, a, b = pipeline
    source = MySqlSource(config.source)
    start = source.head_offset()
    data = tmp_path / "b.tsv"
    data.write_text("8\tloaded\n")
    conn = mariadb.connect(local_infile=True)
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION binlog_format = 'STATEMENT'")
            cur.execute(f"LOAD DATA LOCAL INFILE '{data}' INTO TABLE `{b.database}`.b")
    finally:
        conn.close()
    assert set(scan_activity(source.options, {a, b}, start, source.head_offset()).changed) == {b}


def test_scan_limit_counts_unscanned_tables_as_behind(mariadb, other_db, pipeline):
    config, _, a, b = pipeline
    noise(mariadb, 10)
    status = pipeline_status(config, scan_limit=100)
    assert status.scanned_bytes == 0
    assert all(t.behind and t.reason.startswith("not scanned") for t in status.tables)


def test_an_idle_table_survives_a_purge_of_its_checkpoints_binlog(mariadb, other_db, pipeline, tmp_path):
    config, _, a, b = pipeline
    defs = build_pipeline_definitions(config)
    sink = PaimonSink(config.sink.catalog_options)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        cursor = tick(defs, config, instance, None).cursor
        idle_snapshot = sink.latest_snapshot_id(b)
        # Only a changes; the binlog rotates.
        mariadb.execute(f"INSERT INTO `{a.database}`.a VALUES (2, 'two')")
        noise(mariadb, 3)
        mariadb.execute("FLUSH BINARY LOGS")
        noise(mariadb, 3)
        status = by_table(pipeline_status(config))
        assert status[a].behind and not status[b].behind and status[b].refresh_due
        # The sensor runs a for its change and b for a checkpoint refresh, and its tags say so.
        result = tick(defs, config, instance, cursor)
        assert requested(result) == [[key(a), key(b)]]
        assert result.run_requests[0].tags["lakecdc/run_reason"] == "changes and checkpoint refresh"
        assert result.run_requests[0].tags["lakecdc/checkpoint_refresh"] == str(b)
        cursor = result.cursor
        ran = run_micro_batch(config, targets={a, b})
        head = ran.head
        assert sink.latest_snapshot_id(b) == idle_snapshot + 1  # one empty snapshot moved b's checkpoint
        assert by_table(pipeline_status(config))[b].checkpoint.same_position(head)
        # More noise in the same binlog file: no more refreshes (no snapshot per tick).
        noise(mariadb, 3)
        result = tick(defs, config, instance, cursor)
        assert result.run_requests == [], result.skip_message
        cursor = result.cursor

        # The file b's old checkpoint was in is purged; b keeps working.
        current = MySqlSource(config.source).head_offset().file
        mariadb.purge_binary_logs_to(current)
        assert MySqlSource(config.source).binary_logs()[0] == current
        mariadb.execute(f"INSERT INTO `{b.database}`.b VALUES (3, 'three')")
        result = tick(defs, config, instance, cursor)
        assert requested(result) == [[key(b)]]
        ran = run_micro_batch(config, targets={b})
        assert [t.target for t in ran.committed] == [b]
        rows = run_sql(config.sink.catalog_options, f"SELECT id, v FROM {b.database}.b ORDER BY id").to_pylist()
        assert rows == [{"id": 1, "v": "one"}, {"id": 3, "v": "three"}]
        cursor = result.cursor

        # One rotation (a server restart) with no change: the refreshes wait for a run with real work...
        mariadb.execute("FLUSH BINARY LOGS")
        noise(mariadb, 1)
        result = tick(defs, config, instance, cursor)
        assert result.run_requests == [] and "left for the next run with changes" in result.skip_message, \
            result.skip_message
        # ... for an hour at most (a purge comes with a rotation): a refresh that waited that long runs on its own
        waited = json.loads(result.cursor)
        assert set(waited["refresh_waiting_since"]) == {str(a), str(b)}
        waited["refresh_waiting_since"] = {t: since - 3601 for t, since in waited["refresh_waiting_since"].items()}
        late = tick(defs, config, instance, json.dumps(waited))
        assert requested(late) == [[key(a), key(b)]]
        assert late.run_requests[0].tags["lakecdc/run_reason"] == "checkpoint refresh only"
        # ... until a second rotation brings a purge of their checkpoints' file closer: a run of its own, saying so
        mariadb.execute("FLUSH BINARY LOGS")
        noise(mariadb, 1)
        result = tick(defs, config, instance, result.cursor)
        assert requested(result) == [[key(a), key(b)]]
        assert result.run_requests[0].tags["lakecdc/run_reason"] == "checkpoint refresh only"
        assert result.run_requests[0].tags["lakecdc/checkpoint_refresh"] == f"{a}, {b}"


def test_a_scan_cut_by_its_time_limit_goes_on_from_where_it_stopped(mariadb, other_db, pipeline, monkeypatch):
    import lakecdc.runtime.status as status_module

    config, _, a, b = pipeline
    source = MySqlSource(config.source)
    start = source.head_offset()
    mariadb.execute("CREATE PROCEDURE behind_other.fill(n INT) BEGIN DECLARE i INT DEFAULT 0; WHILE i < n DO "
                    "INSERT INTO behind_other.noise (payload) VALUES ('y'); SET i = i + 1; END WHILE; END")
    mariadb.execute("CALL behind_other.fill(2500)")
    mariadb.execute(f"INSERT INTO `{a.database}`.a VALUES (9, 'nine')")
    stop = source.head_offset()
    cut = scan_activity(source.options, {a, b}, start, stop, max_seconds=0)
    assert start < cut.stop < stop and cut.changed == {}
    # The cut is a transaction boundary: reading on from it finds the change, and so does the status.
    rest = scan_activity(source.options, {a, b}, cut.stop, stop)
    assert set(rest.changed) == {a}
    status = pipeline_status(config, activity=cut)
    assert status.activity.stop.same_position(status.head) and status.activity.start == cut.start
    assert [(t.target, t.behind) for t in status.tables] == [(a, True), (b, False)]
    # A status whose scan runs out of time counts the tables it could not judge as behind, and the next call
    # (the sensor's next tick) goes on from where it stopped.
    monkeypatch.setattr(status_module, "SCAN_LIMIT_SECONDS", 0.0)
    hurried = pipeline_status(config)
    assert hurried.activity.stop < hurried.head
    assert all(t.behind and t.reason.startswith("not scanned past") for t in hurried.tables)
    monkeypatch.undo()
    calm = pipeline_status(config, activity=hurried.activity)
    assert [(t.target, t.behind) for t in calm.tables] == [(a, True), (b, False)]
    assert calm.scanned_bytes < pipeline_status(config).scanned_bytes


def test_compressed_statements_are_read(mariadb, pipeline):
    """MariaDB's log_bin_compress writes long statements as compressed query events."""
    config, _, a, b = pipeline
    source = MySqlSource(config.source)
    start = source.head_offset()
    comment = "c" * 400  # longer than log_bin_compress_min_len (256)
    mariadb.execute("SET GLOBAL log_bin_compress = ON")
    try:
        mariadb.execute(f"ALTER TABLE `{b.database}`.b COMMENT '{comment}'")
    finally:
        mariadb.execute("SET GLOBAL log_bin_compress = OFF")
    kinds = {row[2] for row in mariadb.execute(f"SHOW BINLOG EVENTS IN '{start.file}' FROM {start.pos}")}
    assert "Query_compressed" in kinds, kinds
    scan = scan_activity(source.options, {a, b}, start, source.head_offset())
    assert set(scan.changed) == {b}
    assert by_table(pipeline_status(config))[b].behind


def test_an_idle_tables_checkpoint_keeps_up_within_one_binlog_file(mariadb, other_db, pipeline, tmp_path):
    """Issue 24 item 5: a quiet table does not make later runs re-read ever more binlog. Once the binlog has moved
    IDLE_CHECKPOINT_BYTES past its checkpoint in the same file, the sensor asks for a refresh and the run moves the
    checkpoint with one empty snapshot; a later run of the table alone then starts near the head."""
    config, _, a, b = pipeline
    defs = build_pipeline_definitions(config)
    sink = PaimonSink(config.sink.catalog_options)
    source = MySqlSource(config.source)
    mariadb.execute("CREATE TABLE behind_other.big (id INT PRIMARY KEY AUTO_INCREMENT, payload LONGBLOB)")
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        cursor = tick(defs, config, instance, None).cursor
        idle_snapshot = sink.latest_snapshot_id(b)
        start = source.head_offset()
        # Only a changes, with more than IDLE_CHECKPOINT_BYTES of other databases' binlog, all in one file.
        megabytes = IDLE_CHECKPOINT_BYTES // (1024 * 1024) + 2
        for _ in range(megabytes):
            mariadb.execute("INSERT INTO behind_other.big (payload) VALUES (REPEAT('x', 1048576))")
        mariadb.execute(f"INSERT INTO `{a.database}`.a VALUES (2, 'two')")
        head = source.head_offset()
        assert head.file == start.file and head.pos - start.pos > IDLE_CHECKPOINT_BYTES
        status = by_table(pipeline_status(config))
        assert status[a].behind and not status[b].behind and status[b].refresh_due

        result = tick(defs, config, instance, cursor)
        assert requested(result) == [[key(a), key(b)]]
        run_micro_batch(config, targets={a, b})
        assert sink.latest_snapshot_id(b) == idle_snapshot + 1  # one empty snapshot moved b's checkpoint
        refreshed = by_table(pipeline_status(config))[b]
        assert refreshed.checkpoint.same_position(head) and not refreshed.refresh_due
        assert bytes_between(binlog_sizes(source.options), refreshed.checkpoint, source.head_offset()) == 0
        rows = run_sql(config.sink.catalog_options, f"SELECT id, v FROM {b.database}.b ORDER BY id").to_pylist()
        assert rows == [{"id": 1, "v": "one"}]


def test_a_checkpoint_refresh_is_urgent_two_binlog_files_behind():
    checkpoint = BinlogOffset("mysql-bin.000007", 4096)
    assert not idle_checkpoint_urgent(checkpoint, BinlogOffset("mysql-bin.000007", 4096 + IDLE_CHECKPOINT_BYTES))
    assert not idle_checkpoint_urgent(checkpoint, BinlogOffset("mysql-bin.000008", 4))
    assert idle_checkpoint_urgent(checkpoint, BinlogOffset("mysql-bin.000009", 4))


def test_idle_checkpoint_due_counts_bytes_within_a_file_and_any_file_change():
    checkpoint = BinlogOffset("mysql-bin.000007", 4096)
    assert not idle_checkpoint_due(checkpoint, checkpoint)
    assert not idle_checkpoint_due(checkpoint, BinlogOffset("mysql-bin.000007", 4096 + IDLE_CHECKPOINT_BYTES - 1))
    assert idle_checkpoint_due(checkpoint, BinlogOffset("mysql-bin.000007", 4096 + IDLE_CHECKPOINT_BYTES))
    assert idle_checkpoint_due(checkpoint, BinlogOffset("mysql-bin.000008", 4))
    assert not idle_checkpoint_due(checkpoint, BinlogOffset("mysql-bin.000006", 10 ** 9))
