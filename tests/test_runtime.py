"""The micro-batch runtime, the CLI and the Dagster sensor against the private MariaDB and real Paimon files:
several tables, routes, a held lock, the sensor's decisions, and secrets kept out of everything visible."""

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from lakecdc.config import parse_pipeline
from lakecdc.dagster import build_pipeline_definitions
from lakecdc.errors import SourceError, TableLockedError
from lakecdc.model import TableId
from lakecdc.runtime import pipeline_status, run_micro_batch
from lakecdc.sink import PaimonSink
from lakecdc.sink.sql import run_sql

PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: {user}
  password: ${{LAKECDC_TEST_PASSWORD}}
  tables: {db}.customers, {db}.orders_\\.*
  server-id: 5501
  metadata.list: op_ts
transform:
  - source-table: {db}.orders_\\.*
    projection: "*, __table_name__ AS shard, UPPER(status) AS status_upper"
    filter: status <> 'draft'
    primary-keys: shard, id
route:
  - source-table: {db}.orders_\\.*
    sink-table: lake_{db}.orders
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {warehouse}
pipeline:
  name: {name}
  lakecdc.sensor.interval: 5s
"""
SECRET = "s3cr3t-Pa55"


@pytest.fixture
def shop(mariadb, fresh_db, tmp_path, monkeypatch):
    """Two order shards routed into one Paimon table, plus a customers table, read by a user with a password."""
    user = f"u_{fresh_db[-8:]}"
    mariadb.execute(f"CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY '{SECRET}'")
    mariadb.execute(f"GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO '{user}'@'127.0.0.1'")
    for shard in ("orders_1", "orders_2"):
        mariadb.execute(f"CREATE TABLE `{fresh_db}`.{shard} (id INT PRIMARY KEY, status VARCHAR(20) NOT NULL, "
                        "amount DECIMAL(12,2))")
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.customers (id INT PRIMARY KEY, name VARCHAR(50))")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.orders_1 VALUES (1, 'new', 10.00), (2, 'draft', 20.00)")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.orders_2 VALUES (1, 'paid', 30.00)")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.customers VALUES (1, 'Ada')")
    monkeypatch.setenv("LAKECDC_TEST_PASSWORD", SECRET)
    text = PIPELINE.format(port=mariadb.port, user=user, db=fresh_db, warehouse=tmp_path / "warehouse",
                           name=f"shop {fresh_db}")
    path = tmp_path / "shop.yaml"
    path.write_text(text)
    yield parse_pipeline(text, path=str(path)), path, fresh_db
    mariadb.execute(f"DROP USER IF EXISTS '{user}'@'127.0.0.1'")


def orders_rows(config, db):
    table = run_sql(config.sink.catalog_options,
                    f"SELECT shard, id, status, status_upper, amount FROM lake_{db}.orders ORDER BY shard, id")
    return [(r["shard"], r["id"], r["status"], r["status_upper"], str(r["amount"])) for r in table.to_pylist()]


def test_routes_filters_and_several_tables(mariadb, shop):
    config, _, db = shop
    first = run_micro_batch(config)
    orders, customers = TableId(f"lake_{db}", "orders"), TableId(db, "customers")
    assert {t.phase for t in first.committed} == {"snapshot"}
    assert set(first.tables) == {orders, customers}
    assert orders_rows(config, db) == [("orders_1", 1, "new", "NEW", "10.00"), ("orders_2", 1, "paid", "PAID", "30.00")]

    # A draft that leaves the filter on update arrives as an insert; one that enters it as a delete.
    mariadb.execute(f"UPDATE `{db}`.orders_1 SET status = 'paid' WHERE id = 2")
    mariadb.execute(f"UPDATE `{db}`.orders_2 SET status = 'draft' WHERE id = 1")
    mariadb.execute(f"INSERT INTO `{db}`.orders_2 VALUES (7, 'new', NULL)")
    second = run_micro_batch(config)
    assert [t.target for t in second.committed] == [orders]  # customers untouched: no new snapshot
    assert orders_rows(config, db) == [("orders_1", 1, "new", "NEW", "10.00"), ("orders_1", 2, "paid", "PAID", "20.00"),
                                       ("orders_2", 7, "new", "NEW", "None")]
    assert run_sql(config.sink.catalog_options, f"SELECT name FROM {db}.customers").to_pylist() == [{"name": "Ada"}]

    # The customers table resumes from its own, older checkpoint without repeating or missing anything.
    mariadb.execute(f"INSERT INTO `{db}`.customers VALUES (2, 'Grace')")
    mariadb.execute(f"DELETE FROM `{db}`.customers WHERE id = 1")
    third = run_micro_batch(config)
    assert [t.target for t in third.committed] == [customers]
    assert run_sql(config.sink.catalog_options, f"SELECT id, name FROM {db}.customers").to_pylist() == [
        {"id": 2, "name": "Grace"}]
    status = pipeline_status(config)
    by_table = {t.target: t for t in status.tables}
    assert by_table[customers].checkpoint.same_position(status.head)
    # The orders table saw no change, so it keeps its older checkpoint (no empty snapshot for a small lag).
    assert by_table[orders].checkpoint < status.head
    assert by_table[orders].snapshot_id == 2

    # Secrets stay out of snapshot properties and results.
    sink = PaimonSink(config.sink.catalog_options)
    for table in (orders, customers):
        assert SECRET not in json.dumps(sink.checkpoint(table))
    assert SECRET not in repr(first) + repr(config)


def test_held_lock_fails_clearly_and_writes_nothing(mariadb, shop):
    config, _, db = shop
    orders = TableId(f"lake_{db}", "orders")
    run_micro_batch(config)
    mariadb.execute(f"INSERT INTO `{db}`.orders_1 VALUES (3, 'new', 1.00)")
    sink = PaimonSink(config.sink.catalog_options)
    before = sink.latest_snapshot_id(orders)
    with sink.lock(orders, owner="another run"):
        with pytest.raises(TableLockedError, match="another run"):
            run_micro_batch(config)
    assert sink.latest_snapshot_id(orders) == before
    run_micro_batch(config)
    assert ("orders_1", 3, "new", "NEW", "1.00") in orders_rows(config, db)


def test_wrong_password_is_a_clear_error_without_the_secret(shop, monkeypatch):
    config, _, _ = shop
    config.source.password = "not-the-password"
    with pytest.raises(SourceError) as info:
        run_micro_batch(config)
    assert "not-the-password" not in str(info.value) and SECRET not in str(info.value)
    assert "127.0.0.1" in str(info.value)


def test_cli_validate_run_status(mariadb, shop, capsys):
    """validate, run and status as `lakecdc` processes; the two refused pipelines through the CLI's main() here
    (the same code path after the process start-up)."""
    from lakecdc.cli import main

    config, path, db = shop
    cli = [str(Path(sys.executable).parent / "lakecdc")]
    env = {**os.environ}

    validated = subprocess.run(cli + ["validate", "--connect", str(path)], capture_output=True, text=True, env=env)
    assert validated.returncode == 0, validated.stderr
    assert f"{db}.orders_1, {db}.orders_2 -> lake_{db}.orders" in validated.stdout

    ran = subprocess.run(cli + ["run", "--json", str(path)], capture_output=True, text=True, env=env)
    assert ran.returncode == 0, ran.stderr
    report = json.loads(ran.stdout)
    assert {t["table"]: t["phase"] for t in report["tables"]} == {f"lake_{db}.orders": "snapshot",
                                                                  f"{db}.customers": "snapshot"}
    status = subprocess.run(cli + ["status", "--json", str(path)], capture_output=True, text=True, env=env)
    assert json.loads(status.stdout)["needs_run"] is False
    for output in (validated, ran, status):
        assert SECRET not in output.stdout + output.stderr

    # a fixed bucket count on a pipeline that also captures a table without primary key: caught by validate
    mariadb.execute(f"CREATE TABLE `{db}`.audit_log (at DATETIME, what VARCHAR(10))")
    bucketed = path.with_name("bucketed.yaml")
    bucketed.write_text(path.read_text().replace("sink:\n", "sink:\n  table.properties.bucket: 2\n", 1)
                        .replace(f"{db}.customers,", f"{db}.customers, {db}.audit_log,", 1))
    capsys.readouterr()
    assert main(["validate", "--connect", str(bucketed)]) == 2
    refused = capsys.readouterr()
    assert "audit_log" in refused.err and "bucket-key" in refused.err, refused
    assert "valid" not in refused.out, refused  # a refused file is never called valid first
    mariadb.execute(f"DROP TABLE `{db}`.audit_log")

    broken = path.with_name("broken.yaml")
    broken.write_text(path.read_text().replace("primary-keys: shard, id", "primary-keys: shard, nope"))
    assert main(["validate", "--connect", str(broken)]) == 2
    failed = capsys.readouterr()
    assert "transform[0]" in failed.err and "nope" in failed.err, failed
    line = next(i for i, text in enumerate(broken.read_text().splitlines(), 1) if "primary-keys:" in text)
    assert f"{broken}, line {line} (transform[0].primary-keys): " in failed.err, failed  # the YAML line of the key
    assert "valid" not in failed.out, failed


_RUN_IN_A_CHILD = """
import sys
from lakecdc.cli import main
code = main(["run", sys.argv[1]])
print(sorted(m for m in ("pandas", "polars", "dagster", "pypaimon.catalog.catalog", "fastavro", "requests",
                         "lakecdc.runtime.status", "lakecdc.runtime.verify") if m in sys.modules))
sys.exit(code)
"""


def test_a_run_with_nothing_to_read_opens_one_connection_and_skips_heavy_imports(mariadb, shop):
    """The fixed cost of a run (docs/benchmarks.md): its start-up queries share one MySQL connection, and a run with
    nothing to read imports neither Dagster, pandas, polars, pypaimon's catalog nor the other operations."""
    config, path, _ = shop
    run_micro_batch(config)  # the snapshot; the run below has nothing to read
    conn = mariadb.connect()

    def connections() -> int:
        with conn.cursor() as cur:
            cur.execute("SHOW GLOBAL STATUS LIKE 'Connections'")
            return int(cur.fetchone()[1])

    try:
        before = connections()
        ran = subprocess.run([sys.executable, "-c", _RUN_IN_A_CHILD, str(path)], capture_output=True, text=True,
                             env={**os.environ})
        assert ran.returncode == 0, ran.stderr
        assert connections() - before == 1
    finally:
        conn.close()
    assert ran.stdout.splitlines()[-1] == "[]", ran.stdout


def test_sensor_requests_a_run_only_when_the_binlog_moved(mariadb, shop):
    config, _, db = shop
    defs = build_pipeline_definitions(config)
    sensor = defs.resolve_sensor_def(f"{config.slug}_binlog_sensor")
    with dg.instance_for_test() as instance:
        def tick():
            return sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=defs))

        first = tick()
        assert len(first.run_requests) == 1  # the tables need their snapshot
        result = dg.materialize(defs.assets, instance=instance,
                                selection=dg.AssetSelection.groups(config.slug))
        assert result.success
        materialized = {e.asset_key for e in result.get_asset_materialization_events()
                        if e.asset_key.path[0] == "paimon"}  # (the MySQL tables read are recorded too)
        assert materialized == {dg.AssetKey(["paimon", f"lake_{db}", "orders"]),
                                dg.AssetKey(["paimon", db, "customers"])}
        assert tick().run_requests == []
        mariadb.execute(f"INSERT INTO `{db}`.customers VALUES (5, 'Edsger')")
        again = tick()
        assert len(again.run_requests) == 1
        assert again.run_requests[0].run_key != first.run_requests[0].run_key
        # Lineage: the routed Paimon table depends on both MySQL shards.
        graph = defs.resolve_asset_graph()
        parents = graph.get(dg.AssetKey(["paimon", f"lake_{db}", "orders"])).parent_keys
        assert parents == {dg.AssetKey(["mysql", db, "orders_1"]), dg.AssetKey(["mysql", db, "orders_2"])}


def test_killed_between_two_commits_loses_and_repeats_nothing(mariadb, shop):
    """A run killed after committing one table and before the other: the rerun finishes the second table and
    leaves the first alone. (The killed run is a `lakecdc run` process; the runs before and after it run here.)"""
    config, path, db = shop
    cli = [str(Path(sys.executable).parent / "lakecdc"), "run", str(path)]
    orders, customers = TableId(f"lake_{db}", "orders"), TableId(db, "customers")
    run_micro_batch(config)
    sink = PaimonSink(config.sink.catalog_options)
    snapshots = {t: sink.latest_snapshot_id(t) for t in (orders, customers)}

    mariadb.execute(f"INSERT INTO `{db}`.orders_2 VALUES (8, 'new', 8.00)")
    mariadb.execute(f"UPDATE `{db}`.customers SET name = 'Ada L.' WHERE id = 1")
    crashed = subprocess.run(cli, capture_output=True, text=True,
                             env={**os.environ, "LAKECDC_FAILPOINT": "between-commits"})
    assert crashed.returncode == -9
    after_crash = {t: sink.latest_snapshot_id(t) for t in (orders, customers)}
    # Targets commit in name order: exactly one of the two got its snapshot.
    assert sorted(after_crash[t] - snapshots[t] for t in after_crash) == [0, 1]

    run_micro_batch(config)
    assert {t: sink.latest_snapshot_id(t) for t in (orders, customers)} == {t: s + 1 for t, s in snapshots.items()}
    assert ("orders_2", 8, "new", "NEW", "8.00") in orders_rows(config, db)
    assert run_sql(config.sink.catalog_options, f"SELECT id, name FROM {db}.customers").to_pylist() == [
        {"id": 1, "name": "Ada L."}]
    assert pipeline_status(config).needs_run is False


def test_decoder_fallbacks_are_counted_per_cause_in_the_result_and_the_log(mariadb, shop, monkeypatch, caplog):
    """Every binlog rows event the columnar decoder leaves to python-mysql-replication is counted per cause in the
    run result (per table and in total) and named in the run's log; a run without any says so."""
    import logging

    from lakecdc.dagster.metadata import materialization
    from lakecdc.source import rows_decoder

    config, _, db = shop
    run_micro_batch(config)
    orders, customers = TableId(f"lake_{db}", "orders"), TableId(db, "customers")
    mariadb.execute(f"INSERT INTO `{db}`.orders_1 VALUES (3, 'new', 1.00), (4, 'new', 2.00)")
    mariadb.execute(f"UPDATE `{db}`.orders_2 SET amount = 31.00 WHERE id = 1")
    mariadb.execute(f"INSERT INTO `{db}`.customers VALUES (2, 'Grace')")
    with monkeypatch.context() as patch, caplog.at_level(logging.INFO, logger="lakecdc"):
        patch.setattr(rows_decoder, "_ext", None)  # as on a machine where the extension was not built
        slow = run_micro_batch(config)
    assert slow.tables[orders].decoder_fallbacks == {rows_decoder.FALLBACK_NOT_BUILT: 2}  # two events, 3 rows
    assert slow.tables[customers].decoder_fallbacks == {rows_decoder.FALLBACK_NOT_BUILT: 1}
    assert slow.decoder_fallbacks == {rows_decoder.FALLBACK_NOT_BUILT: 3}
    shown = materialization(slow.tables[orders]).metadata  # what the Dagster materialisation shows
    assert shown["lakecdc/decoder_fallbacks"].value == 2
    assert shown["lakecdc/decoder_fallback_causes"].value == "2 x decoder not built"
    warnings = [r.getMessage() for r in caplog.records if "binlog decoder fallbacks of" in r.getMessage()]
    assert sorted(warnings) == sorted(f"binlog decoder fallbacks of {db}.{t} (rows events decoded by "
                                      f"python-mysql-replication, several times slower): {n} x decoder not built"
                                      for t, n in (("orders_1", 1), ("orders_2", 1), ("customers", 1)))
    assert orders_rows(config, db)[-2:] == [("orders_1", 4, "new", "NEW", "2.00"), ("orders_2", 1, "paid", "PAID",
                                                                                   "31.00")]

    caplog.clear()
    mariadb.execute(f"DELETE FROM `{db}`.orders_1 WHERE id = 3")
    with caplog.at_level(logging.INFO, logger="lakecdc"):
        fast = run_micro_batch(config)
    assert [t.target for t in fast.committed] == [orders]
    assert fast.decoder_fallbacks == {} and fast.tables[orders].decoder_fallbacks == {}
    assert any("binlog decoder fallbacks: none" in r.getMessage() for r in caplog.records)
    shown = materialization(fast.tables[orders]).metadata
    assert shown["lakecdc/decoder_fallbacks"].value == 0 and "lakecdc/decoder_fallback_causes" not in shown
