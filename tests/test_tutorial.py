"""The Flink CDC tutorial end to end, through Dagster, against the private MariaDB and real Paimon files.

Each step runs the tutorial's own SQL queries through pypaimon-rust's DataFusion engine (an independent reader)
and compares with the exact tables the tutorial prints; the merged state is also read through pypaimon.
"""

import os
import signal
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import dagster as dg
import pytest

from lakecdc.config import load_pipeline
from lakecdc.dagster import build_definitions
from lakecdc.model import TableId
from lakecdc.sink import PaimonSink
from lakecdc.sink.sql import run_sql

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL_YAML = ROOT / "assets" / "tutorial.yaml"
ORDERS_KEY = dg.AssetKey(["paimon", "inventory", "orders"])

FIRST_QUERY = "SELECT id, product_upper, price, order_day, op_type FROM inventory.orders ORDER BY id"
METADATA_QUERY = "SELECT id, source_table, source_ts FROM inventory.orders ORDER BY id"
FULL_QUERY = ("SELECT id, product_upper, price, order_day, op_type, source_ts > 0 AS has_binlog_time "
              "FROM inventory.orders ORDER BY id")
ACTIVE_QUERY = "SELECT id, product_upper, price FROM inventory.orders WHERE op_type <> '-D' ORDER BY id"

SNAPSHOT_ROWS = [(101, "BOOK", Decimal("29.90"), "20260101", "+I"), (102, "PEN", Decimal("5.00"), "20260102", "+I")]
SNAPSHOT_METADATA = [(101, "inventory.orders", 0), (102, "inventory.orders", 0)]
AFTER_CHANGES = [
    (101, "NOTEBOOK", Decimal("39.90"), "20260101", "+U", True),
    (102, "PEN", Decimal("5.00"), "20260102", "-D", True),
    (103, "PENCIL", Decimal("3.50"), "20260103", "+I", True),
]
AFTER_CHANGES_ACTIVE = [(101, "NOTEBOOK", Decimal("39.90")), (103, "PENCIL", Decimal("3.50"))]
AFTER_REINSERT = [
    (101, "NOTEBOOK", Decimal("39.90"), "20260101", "+U", True),
    (102, "BLUE PEN", Decimal("6.00"), "20260102", "+I", True),
    (103, "PENCIL", Decimal("3.50"), "20260103", "+I", True),
]
AFTER_REINSERT_ACTIVE = [(101, "NOTEBOOK", Decimal("39.90")), (102, "BLUE PEN", Decimal("6.00")),
                         (103, "PENCIL", Decimal("3.50"))]

CREATE_ORDERS = """
CREATE TABLE orders (
  id BIGINT NOT NULL,
  product VARCHAR(100) NOT NULL,
  price DECIMAL(10, 2) NOT NULL,
  created_at DATETIME(3) NOT NULL,
  PRIMARY KEY (id)
)"""
CHANGES = [
    "UPDATE inventory.orders SET product = 'notebook', price = 39.90 WHERE id = 101",
    "DELETE FROM inventory.orders WHERE id = 102",
    "INSERT INTO inventory.orders VALUES (103, 'pencil', 3.50, '2026-01-03 12:00:00')",
]
REINSERT = "INSERT INTO inventory.orders VALUES (102, 'blue pen', 6.00, '2026-01-02 09:30:00')"


@pytest.fixture
def tutorial(source_server, tmp_path, monkeypatch):
    """The tutorial's source table with its two orders, and the environment the tutorial YAML reads (on the server
    with binlog_row_metadata = ``row_metadata``, FULL unless a test parametrizes it)."""
    mariadb = source_server
    env = {
        "MYSQL_HOST": "127.0.0.1", "MYSQL_PORT": str(mariadb.port), "MYSQL_USER": "root", "MYSQL_PASSWORD": "",
        "LAKECDC_WAREHOUSE": str(tmp_path / "warehouse"), "LAKECDC_PIPELINES_DIR": str(ROOT / "assets"),
        "DAGSTER_HOME": str(tmp_path / "dagster_home"),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    os.makedirs(env["DAGSTER_HOME"])
    Path(env["DAGSTER_HOME"], "dagster.yaml").write_text("")
    mariadb.execute("DROP DATABASE IF EXISTS inventory")
    mariadb.execute("CREATE DATABASE inventory")
    mariadb.execute(CREATE_ORDERS.replace("CREATE TABLE orders", "CREATE TABLE inventory.orders"))
    mariadb.execute("INSERT INTO inventory.orders VALUES (101, 'book', 29.90, '2026-01-01 12:00:00'), "
                    "(102, 'pen', 5.00, '2026-01-02 09:30:00')")
    config = load_pipeline(TUTORIAL_YAML)
    yield config, env
    mariadb.execute("DROP DATABASE IF EXISTS inventory")


def query(config, sql):
    table = run_sql(config.sink.catalog_options, sql)
    return [tuple(row.values()) for row in table.to_pylist()]


def assert_snapshot_step(config):
    assert query(config, FIRST_QUERY) == SNAPSHOT_ROWS
    assert query(config, METADATA_QUERY) == SNAPSHOT_METADATA


def assert_changes_step(config):
    assert query(config, FULL_QUERY) == AFTER_CHANGES
    assert query(config, ACTIVE_QUERY) == AFTER_CHANGES_ACTIVE


def assert_reinsert_step(config):
    assert query(config, FULL_QUERY) == AFTER_REINSERT
    assert query(config, ACTIVE_QUERY) == AFTER_REINSERT_ACTIVE


def execute_all(mariadb, statements):
    for statement in statements:
        mariadb.execute(statement)


def assert_table_definition(config):
    from pypaimon_rust.datafusion import PaimonCatalog

    table = PaimonCatalog({"warehouse": config.sink.catalog_options["warehouse"]}).get_table("inventory.orders")
    schema = table.schema()
    fields = [(f.name(), f.field_type()) for f in schema.fields()]
    assert fields == [
        ("id", "BIGINT NOT NULL"), ("product", "VARCHAR(100) NOT NULL"), ("price", "DECIMAL(10, 2) NOT NULL"),
        ("created_at", "TIMESTAMP(3) NOT NULL"), ("source_table", "STRING"), ("source_ts", "BIGINT NOT NULL"),
        ("op_type", "STRING NOT NULL"), ("product_upper", "STRING"), ("order_day", "STRING NOT NULL"),
    ]
    assert schema.primary_keys() == ["id", "order_day"]
    assert schema.partition_keys() == ["order_day"]


@pytest.mark.parametrize("row_metadata", ["FULL", "MINIMAL", "NO_LOG", "MYSQL8"])
def test_tutorial_in_process_materialize(source_server, tutorial, row_metadata):
    """The tutorial's exact tables, also on servers with MySQL 8's (MINIMAL) and MariaDB's (NO_LOG) default row
    metadata (the tutorial's compose file sets only --binlog-format=ROW --binlog-row-image=FULL), and on a server
    presenting itself as MySQL 8.0.36 (lakecdc's MySQL code paths: the incremental snapshot without any lock)."""
    mariadb = source_server
    config, env = tutorial
    defs = build_definitions(ROOT / "assets")
    with dg.instance_for_test(temp_dir=env["DAGSTER_HOME"]) as instance:
        def materialize():
            result = dg.materialize(defs.assets, instance=instance, selection=[ORDERS_KEY])
            assert result.success
            events = result.get_asset_materialization_events()
            return {e.asset_key: e.materialization.metadata for e in events}

        metadata = materialize()[ORDERS_KEY]
        assert_snapshot_step(config)
        assert_table_definition(config)
        assert metadata["lakecdc/phase"].value == "snapshot"
        assert metadata["lakecdc/inserted"].value == 2
        assert metadata["dagster/row_count"].value == 2
        first_snapshot = metadata["lakecdc/paimon_snapshot_id"].value
        columns = [c.name for c in metadata["dagster/column_schema"].value.columns]
        assert columns[-1] == "order_day" and "source_table" in columns

        execute_all(mariadb, CHANGES)
        metadata = materialize()[ORDERS_KEY]
        assert_changes_step(config)
        assert metadata["lakecdc/phase"].value == "binlog"
        assert (metadata["lakecdc/inserted"].value, metadata["lakecdc/updated"].value,
                metadata["lakecdc/deleted"].value) == (1, 1, 1)
        assert metadata["lakecdc/paimon_snapshot_id"].value == first_snapshot + 1
        # The checkpoint in the snapshot equals what Dagster recorded.
        sink = PaimonSink(config.sink.catalog_options)
        properties = sink.checkpoint(TableId("inventory", "orders"))
        assert properties["lakecdc.binlog.file"] == metadata["lakecdc/binlog_file"].value
        assert int(properties["lakecdc.binlog.pos"]) == metadata["lakecdc/binlog_pos"].value

        execute_all(mariadb, [REINSERT])
        materialize()
        assert_reinsert_step(config)
        # The merged state read back through pypaimon agrees with the independent reader.
        rows = sink.read_table(TableId("inventory", "orders"), ["id", "product_upper", "op_type"]).to_pylist()
        assert sorted((r["id"], r["product_upper"], r["op_type"]) for r in rows) == [
            (101, "NOTEBOOK", "+U"), (102, "BLUE PEN", "+I"), (103, "PENCIL", "+I")]

        # Nothing new: the run commits nothing, and the sensor sees every table at the head.
        before = sink.latest_snapshot_id(TableId("inventory", "orders"))
        assert materialize() == {}
        assert sink.latest_snapshot_id(TableId("inventory", "orders")) == before


def _dagster_cli(env, *, failpoint=None):
    run_env = {**os.environ, **env}
    run_env.pop("LAKECDC_FAILPOINT", None)
    if failpoint:
        run_env["LAKECDC_FAILPOINT"] = failpoint
    return subprocess.run(
        [str(Path(sys.executable).parent / "dagster"), "asset", "materialize", "-m", "definitions",
         "--select", "paimon/inventory/orders"],
        cwd=ROOT, env=run_env, capture_output=True, text=True, timeout=300)


def _materialize_in_process(env) -> None:
    """What ``_dagster_cli(env)`` runs, in this process: ``definitions.py``'s assets materialised into the instance
    at $DAGSTER_HOME (the CLI's), without a dagster process start-up (the CLI itself is run by the test above)."""
    import importlib.util

    assert os.environ["DAGSTER_HOME"] == env["DAGSTER_HOME"]
    spec = importlib.util.spec_from_file_location("lakecdc_tutorial_definitions", ROOT / "definitions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # reads the environment the tutorial fixture set, as the CLI's import does
    with dg.DagsterInstance.get() as instance:
        result = dg.materialize(module.defs.assets, instance=instance, selection=[ORDERS_KEY],
                                resources=module.defs.resources)
        assert result.success


def test_tutorial_dagster_cli_with_crashes(mariadb, tutorial):
    """`dagster asset materialize -m definitions`, with runs killed before and after their commit. The runs after
    the second and third kill run the same definitions in this process, on the CLI's Dagster instance."""
    config, env = tutorial
    sink = PaimonSink(config.sink.catalog_options)
    orders = TableId("inventory", "orders")

    # Killed after writing the snapshot's data files, before the commit: nothing visible, the rerun redoes it.
    crashed = _dagster_cli(env, failpoint="before-commit")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    assert sink.latest_snapshot_id(orders) is None
    done = _dagster_cli(env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert_snapshot_step(config)
    assert_table_definition(config)

    # Killed after committing the binlog changes, before Dagster recorded the materialisation.
    execute_all(mariadb, CHANGES)
    crashed = _dagster_cli(env, failpoint="after-commit")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    committed = sink.latest_snapshot_id(orders)
    assert_changes_step(config)
    # The next run repeats nothing (no new snapshot) and reports the unrecorded commit to Dagster.
    _materialize_in_process(env)
    assert sink.latest_snapshot_id(orders) == committed
    assert_changes_step(config)
    with dg.DagsterInstance.get() as instance:
        event = instance.get_latest_materialization_event(ORDERS_KEY)
        assert event.asset_materialization.metadata["lakecdc/paimon_snapshot_id"].value == committed

    # Killed before committing the re-insert: the rerun applies it exactly once.
    execute_all(mariadb, [REINSERT])
    crashed = _dagster_cli(env, failpoint="before-commit")
    assert crashed.returncode == -signal.SIGKILL
    assert sink.latest_snapshot_id(orders) == committed
    assert_changes_step(config)
    _materialize_in_process(env)
    assert sink.latest_snapshot_id(orders) == committed + 1
    assert_reinsert_step(config)
