"""The Dagster experience in process, against the private MariaDB and real Paimon files: the checks of each run's
commit (and a failing one blocking), the reconcile job's checks, column lineage, the partitions a commit changed,
re-snapshots of a partition and of a table, resources, retries of transient errors only, the schedule, the failure
alert, progress logs."""

import http.server
import json
import logging
import re
import shutil
import socket
import threading
from pathlib import Path

import dagster as dg
import pytest

from lakecdc.config import load_pipeline, parse_pipeline
from lakecdc.dagster import (DagsterLakeCdcTranslator, MySqlResource, PaimonCatalogResource, PaimonTableProps,
                             build_definitions, build_pipeline_definitions)
from lakecdc.dagster.assets import pool_name
from lakecdc.dagster.invalid import VALIDATION_ENV
from lakecdc.errors import LakeCdcError, PipelineConfigError
from lakecdc.model import BinlogOffset, TableId
from lakecdc.sink import PaimonSink
from lakecdc.sink.sql import run_sql
from lakecdc.source.activity import parse_offset

ROOT = Path(__file__).resolve().parent.parent
ORDERS = TableId("inventory", "orders")
ORDERS_KEY = dg.AssetKey(["paimon", "inventory", "orders"])
MYSQL_ORDERS = dg.AssetKey(["mysql", "inventory", "orders"])
OP = "enrich_mysql_orders_with_soft_deletes_tables"  # the tutorial pipeline's one op
CREATE_ORDERS = """CREATE TABLE inventory.orders (id BIGINT NOT NULL, product VARCHAR(100) NOT NULL,
  price DECIMAL(10, 2) NOT NULL, created_at DATETIME(3) NOT NULL, PRIMARY KEY (id))"""


@pytest.fixture
def tutorial(mariadb, tmp_path, monkeypatch):
    """The tutorial's inventory.orders with two orders, its pipeline YAML in a pipelines directory, a warehouse."""
    env = {"MYSQL_HOST": "127.0.0.1", "MYSQL_PORT": str(mariadb.port), "MYSQL_USER": "root", "MYSQL_PASSWORD": "",
           "LAKECDC_WAREHOUSE": str(tmp_path / "warehouse")}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    pipelines = tmp_path / "pipelines"
    pipelines.mkdir()
    shutil.copy(ROOT / "assets" / "tutorial.yaml", pipelines / "tutorial.yaml")
    mariadb.execute("DROP DATABASE IF EXISTS inventory")
    mariadb.execute("CREATE DATABASE inventory")
    mariadb.execute(CREATE_ORDERS)
    mariadb.execute("INSERT INTO inventory.orders VALUES (101, 'book', 29.90, '2026-01-01 12:00:00'), "
                    "(102, 'pen', 5.00, '2026-01-02 09:30:00')")
    yield load_pipeline(pipelines / "tutorial.yaml"), pipelines
    mariadb.execute("DROP DATABASE IF EXISTS inventory")


def without_binlog(mariadb, statement):
    """Change MySQL behind the pipeline's back (the change never reaches the binlog): Paimon drifts."""
    conn = mariadb.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute(statement)
        conn.commit()
    finally:
        conn.close()


REPORT_KEY = dg.AssetKey("orders_report")


@dg.asset(key=REPORT_KEY, deps=[ORDERS_KEY])
def orders_report() -> None:
    """A user's asset downstream of the Paimon table: the blocking checks decide whether it runs."""


def materialize(defs, instance, *, run_config=None, selection=(ORDERS_KEY, REPORT_KEY), tags=None):
    """Materialise ``selection`` (by default the orders table and ``orders_report`` downstream of it) or run only
    the given checks: (result, metadata by asset key, check evaluations by name)."""
    if all(isinstance(item, dg.AssetCheckKey) for item in selection):
        selection = dg.AssetSelection.checks(*selection)
    else:
        selection = list(selection)
    result = dg.materialize([*defs.assets, *defs.asset_checks, orders_report], instance=instance,
                            selection=selection, raise_on_error=False, run_config=run_config, resources=defs.resources,
                            tags=tags)
    materializations = {e.asset_key: e.materialization.metadata for e in result.get_asset_materialization_events()}
    checks = {e.check_name: e
              for e in result.get_asset_check_evaluations()}
    return result, materializations, checks


RUN_CHECKS = {"changed_rows_match", "changed_keys_unique", "schema_matches_source"}
ROW_COUNT_KEY = dg.AssetCheckKey(ORDERS_KEY, "row_count_matches_source")
PK_UNIQUE_KEY = dg.AssetCheckKey(ORDERS_KEY, "primary_key_unique")


def reconcile(defs, instance, name="enrich_mysql_orders_with_soft_deletes_reconcile"):
    """Run the pipeline's reconcile job: (result, check evaluations by name)."""
    result = defs.resolve_job_def(name).execute_in_process(instance=instance, raise_on_error=False)
    return result, {e.check_name: e for e in result.get_asset_check_evaluations()}


def active_rows(config):
    table = run_sql(config.sink.catalog_options,
                    "SELECT id, product_upper, op_type FROM inventory.orders ORDER BY id")
    return [tuple(r.values()) for r in table.to_pylist()]


def test_checks_lineage_partitions_and_resnapshots(mariadb, tutorial, tmp_path):
    config, pipelines = tutorial
    defs = build_definitions(pipelines)
    sink = PaimonSink(config.sink.catalog_options)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        result, metadata, checks = materialize(defs, instance)
        assert result.success
        meta = metadata[ORDERS_KEY]
        # Column lineage from the transform expressions.
        lineage = {col: [(dep.asset_key, dep.column_name) for dep in deps]
                   for col, deps in meta["dagster/column_lineage"].value.deps_by_column.items()}
        assert lineage["id"] == [(MYSQL_ORDERS, "id")]
        assert lineage["product_upper"] == [(MYSQL_ORDERS, "product")]
        assert lineage["order_day"] == [(MYSQL_ORDERS, "created_at")]
        assert "source_table" not in lineage and "op_type" not in lineage  # metadata only
        schema = {c.name: c for c in meta["dagster/column_schema"].value.columns}
        assert schema["product_upper"].description == "from `inventory.orders.product`"
        assert schema["product"].type == "VARCHAR(100)" and schema["created_at"].type == "TIMESTAMP(3)"
        # The partitions this commit changed, with row counts.
        partitions = {r.data["partition"]: r.data for r in meta["lakecdc/partitions_changed"].value.records}
        assert set(partitions) == {"order_day=20260101", "order_day=20260102"}
        assert partitions["order_day=20260101"]["+I"] == 1
        # a routine commit lists what it wrote, not the partitions' sizes (that would read each partition)
        assert "rows_now" not in partitions["order_day=20260101"]
        # The checks of the run's commit ran with the materialisation and passed: the two keys it wrote hold its rows.
        assert set(checks) == RUN_CHECKS
        assert all(c.passed for c in checks.values()), {n: c.description for n, c in checks.items()}
        assert REPORT_KEY in metadata  # passing blocking checks let the downstream asset run
        rows = checks["changed_rows_match"].metadata
        assert (rows["keys_checked"].value, rows["keys_present"].value, rows["sampled"].value) == (2, 2, False)

        # Binlog changes: the three keys the run wrote read back as written (SOFT_DELETE keeps 102, marked -D).
        mariadb.execute("UPDATE inventory.orders SET product = 'notebook' WHERE id = 101")
        mariadb.execute("DELETE FROM inventory.orders WHERE id = 102")
        mariadb.execute("INSERT INTO inventory.orders VALUES (103, 'pencil', 3.50, '2026-01-03 12:00:00')")
        result, metadata, checks = materialize(defs, instance)
        assert result.success and all(c.passed for c in checks.values())
        assert checks["changed_rows_match"].metadata["keys_present"].value == 3
        assert checks["changed_keys_unique"].metadata["duplicate_keys"].value == 0
        meta = metadata[ORDERS_KEY]
        partitions = {r.data["partition"]: r.data for r in meta["lakecdc/partitions_changed"].value.records}
        # Paimon rows per row kind: the MySQL delete (top level) is written as a +I row marking 102 deleted
        assert meta["lakecdc/deleted"].value == 1 and partitions["order_day=20260102"]["+I"] == 1
        assert partitions["order_day=20260102"]["-D"] == 0
        # dagster/row_count: every row of the merged table, counted from the run's changes; the rows not marked
        # deleted are the reconcile job's (no whole-table count on a routine run)
        assert meta["dagster/row_count"].value == 3 and "lakecdc/active_rows" not in meta
        # the reconcile job: soft-deleted rows are not active rows, the count matches exactly
        outcome, reconciled = reconcile(defs, instance)
        assert outcome.success and set(reconciled) == {"row_count_matches_source", "primary_key_unique"}
        assert all(c.passed for c in reconciled.values()), {n: c.description for n, c in reconciled.items()}
        count = reconciled["row_count_matches_source"].metadata
        assert count["paimon_active_rows"].value == 2 and count["tolerance"].value == 0

        # Drift behind the binlog's back: a run's checks look at its own commit and pass; the reconcile job's row
        # count sees it (non-blocking: the reconcile run itself succeeds).
        without_binlog(mariadb, "DELETE FROM inventory.orders WHERE id = 103")
        mariadb.execute("UPDATE inventory.orders SET price = 30.00 WHERE id = 101")
        result, metadata, checks = materialize(defs, instance)
        assert result.success and all(c.passed for c in checks.values())
        checkpoint = sink.checkpoint(ORDERS)
        outcome, reconciled = reconcile(defs, instance)
        failed = reconciled["row_count_matches_source"]
        assert not failed.passed and failed.severity == dg.AssetCheckSeverity.ERROR and not failed.blocking
        assert failed.metadata["difference"].value == 1 and failed.metadata["tolerance"].value == 0
        assert "2 active rows in Paimon but 1 in MySQL" in failed.description
        assert reconciled["primary_key_unique"].passed and outcome.success

        # Re-snapshot one partition through the re-snapshot job: 103 is marked deleted; a row missing from
        # another partition stays missing (that partition is not re-read).
        without_binlog(mariadb, "INSERT INTO inventory.orders VALUES (104, 'ink', 2.00, '2026-01-01 08:00:00')")
        job = defs.resolve_job_def("resnapshot__inventory__orders")
        outcome = job.execute_in_process(instance=instance, raise_on_error=False, run_config={"ops": {
            "resnapshot__inventory__orders_op": {"config": {"partitions": ["order_day=20260103"]}}}})
        assert outcome.success
        assert (103, "PENCIL", "-D") in active_rows(config)
        assert all(row[0] != 104 for row in active_rows(config))
        properties = sink.checkpoint(ORDERS)
        assert properties["lakecdc.phase"] == "resnapshot"
        assert properties["lakecdc.resnapshot.partition"] == "order_day=20260103"
        # the MySQL table it read, on its asset: read up to where the re-snapshot's MySQL snapshot was taken
        [read] = [e for e in outcome.all_events if e.event_type_value == "ASSET_OBSERVATION"
                  and e.event_specific_data.asset_observation.asset_key == MYSQL_ORDERS]
        assert read.event_specific_data.asset_observation.metadata["lakecdc/binlog_read_to"].value == \
            properties["lakecdc.resnapshot.offset"]
        # A partition re-snapshot keeps the table's checkpoint: the other partitions are still there.
        assert (properties["lakecdc.binlog.file"], properties["lakecdc.binlog.pos"]) == (
            checkpoint["lakecdc.binlog.file"], checkpoint["lakecdc.binlog.pos"])
        event = instance.get_latest_materialization_event(ORDERS_KEY).asset_materialization
        recorded = event.metadata
        assert recorded["lakecdc/phase"].value == "resnapshot"
        # which partition, the partition table, the data version: as for the asset's own commits
        assert recorded["lakecdc/resnapshot_partition"].value == "order_day=20260103"
        assert recorded["lakecdc/stale_rows_deleted"].value == 1
        rows = {r.data["partition"]: r.data for r in recorded["lakecdc/partitions_changed"].value.records}
        assert list(rows) == ["order_day=20260103"] and rows["order_day=20260103"]["rows_now"] == 1
        # what it changed, in the binlog phase's words: one row deleted (in this SOFT_DELETE table, written as a +I
        # row marked deleted, which stays in the table), nothing inserted
        assert (recorded["lakecdc/inserted"].value, recorded["lakecdc/updated"].value,
                recorded["lakecdc/deleted"].value, recorded["lakecdc/unchanged"].value) == (0, 0, 1, 0)
        assert (rows["order_day=20260103"]["+I"], rows["order_day=20260103"]["-D"]) == (1, 0)
        snapshot_id = recorded["lakecdc/paimon_snapshot_id"].value
        assert event.tags["dagster/data_version"] == f"snapshot-{snapshot_id}"

        # Re-snapshot the whole table through the asset's run config: 104 arrives, 101 changed behind the
        # binlog's back is updated, the checkpoint moves.
        without_binlog(mariadb, "UPDATE inventory.orders SET price = 31.00 WHERE id = 101")
        result, metadata, checks = materialize(
            defs, instance, run_config={"ops": {OP: {"config": {"resnapshot": True}}}})
        assert result.success and all(c.passed for c in checks.values()), \
            {n: c.description for n, c in checks.items()}
        whole_meta = metadata[ORDERS_KEY]
        assert (whole_meta["lakecdc/inserted"].value, whole_meta["lakecdc/updated"].value,
                whole_meta["lakecdc/deleted"].value, whole_meta["lakecdc/unchanged"].value) == (1, 1, 0, 0)
        assert (104, "INK", "+I") in active_rows(config)
        whole = sink.checkpoint(ORDERS)
        assert whole["lakecdc.resnapshot.partition"] == ""
        # A whole-table re-snapshot equals MySQL at the snapshot position, which becomes the checkpoint.
        assert whole["lakecdc.resnapshot.offset"] == f"{whole['lakecdc.binlog.file']}:{whole['lakecdc.binlog.pos']}"
        assert metadata[ORDERS_KEY]["lakecdc/phase"].value == "resnapshot"

        # Schema drift in MySQL: the schema check run alone compares with MySQL now and names the column.
        mariadb.execute("ALTER TABLE inventory.orders ADD COLUMN coupon VARCHAR(10)")
        _, _, checks = materialize(defs, instance,
                                   selection=[dg.AssetCheckKey(ORDERS_KEY, "schema_matches_source")])
        drift = checks["schema_matches_source"]
        assert not drift.passed and "coupon" in drift.description
        assert drift.severity == dg.AssetCheckSeverity.ERROR  # blocking: stops downstream assets


def test_a_failing_check_of_the_commit_blocks_downstream(mariadb, tutorial, tmp_path):
    """A column narrowed in the Paimon table behind the pipeline's back (evolve mode: the table no longer follows
    MySQL): the next run commits, its schema check fails and, being blocking, keeps the downstream asset from running
    and fails the run; the checks of the rows it wrote pass."""
    from pypaimon.schema.data_types import AtomicType
    from pypaimon.schema.schema_change import SchemaChange

    config, pipelines = tutorial
    defs = build_definitions(pipelines)
    sink = PaimonSink(config.sink.catalog_options)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        assert materialize(defs, instance)[0].success
        sink.checkpoint(ORDERS)
        sink.alter_table(ORDERS, [SchemaChange.update_column_type("product", AtomicType("VARCHAR(5)"))])
        mariadb.execute("UPDATE inventory.orders SET price = 30.00 WHERE id = 101")
        result, metadata, checks = materialize(defs, instance)
        assert ORDERS_KEY in metadata  # committed and reported
        drift = checks["schema_matches_source"]
        assert not drift.passed and drift.severity == dg.AssetCheckSeverity.ERROR
        assert "product: VARCHAR(5) in Paimon, VARCHAR(100) NOT NULL from MySQL" in drift.description
        assert checks["changed_rows_match"].passed and checks["changed_keys_unique"].passed
        assert not result.success and REPORT_KEY not in metadata and not result.is_node_success("orders_report")


def test_a_check_that_cannot_evaluate_fails_with_error_severity(mariadb, tutorial, tmp_path, monkeypatch):
    config, pipelines = tutorial
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        assert materialize(build_definitions(pipelines), instance)[0].success
        with socket.socket() as s:  # a port nobody listens on: MySQL is unreachable for the checks
            s.bind(("127.0.0.1", 0))
            monkeypatch.setenv("MYSQL_PORT", str(s.getsockname()[1]))
        defs = build_definitions(pipelines)
        _, _, checks = materialize(defs, instance, selection=[PK_UNIQUE_KEY, ROW_COUNT_KEY,
                                                              dg.AssetCheckKey(ORDERS_KEY, "schema_matches_source")])
        assert checks["primary_key_unique"].passed  # reads Paimon only
        for name in ("row_count_matches_source", "schema_matches_source"):
            check = checks[name]
            assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR, name
            assert check.metadata["evaluated"].value is False and "could not be evaluated" in check.description


def test_the_run_that_adds_a_column_reports_it(mariadb, tutorial, tmp_path):
    """The materialisation of the run that applied ADD COLUMN has the new column in its column schema (the table
    after the run's last commit), consistent with its column lineage; the schema check passes in the same run."""
    config, pipelines = tutorial
    defs = build_definitions(pipelines)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        _, metadata, _ = materialize(defs, instance)
        before = [c.name for c in metadata[ORDERS_KEY]["dagster/column_schema"].value.columns]
        assert len(before) == 9 and "note" not in before
        mariadb.execute("ALTER TABLE inventory.orders ADD COLUMN note VARCHAR(20)")
        mariadb.execute("INSERT INTO inventory.orders VALUES (106, 'tape', 2.50, '2026-01-02 11:00:00', 'gift')")
        result, metadata, checks = materialize(defs, instance)
        assert result.success and all(c.passed for c in checks.values()), \
            {n: c.description for n, c in checks.items()}
        meta = metadata[ORDERS_KEY]
        columns = {c.name: c for c in meta["dagster/column_schema"].value.columns}
        assert set(columns) == {*before, "note"}
        assert columns["note"].type == "VARCHAR(20)"
        assert columns["note"].description == "from `inventory.orders.note`"
        lineage = meta["dagster/column_lineage"].value.deps_by_column
        assert [(d.asset_key, d.column_name) for d in lineage["note"]] == [(MYSQL_ORDERS, "note")]
        assert set(lineage) <= set(columns)  # lineage names only columns the table has
        # The DDL is in that materialisation (statement, binlog position, what Paimon did) and in the run's log
        [ddl] = [r.data for r in meta["lakecdc/schema_changes"].value.records]
        assert ddl["statement"] == "ALTER TABLE inventory.orders ADD COLUMN note VARCHAR(20)", ddl
        assert ddl["source"] == "inventory.orders" and "note" in ddl["paimon"], ddl
        assert parse_offset(ddl["binlog_position"]) <= parse_offset(meta["lakecdc/binlog_offset"].value)
        logs = [e.message for e in instance.all_logs(result.run_id)]
        assert any("ADD COLUMN note" in m and ddl["binlog_position"] in m and ddl["paimon"] in m for m in logs), logs
        # ... and the MySQL table's columns follow without reloading the definitions: the run that read the change
        # records it as a materialisation of the external MySQL asset, with the columns at the new position and
        # the table's last change as its data version
        changed = instance.get_latest_materialization_event(MYSQL_ORDERS)
        mysql_meta = changed.asset_materialization.metadata
        assert mysql_meta["dagster/column_schema"].value.columns[-1].name == "note"
        assert mysql_meta["dagster/column_schema"].value.columns[-1].type == "varchar(20)"
        assert changed.run_id == result.run_id
        assert changed.asset_materialization.tags["dagster/data_version"] == \
            f"binlog-{mysql_meta['lakecdc/last_change'].value}"
        assert [r.data for r in mysql_meta["lakecdc/schema_changes"].value.records] == [ddl]

        # A DDL after the table's last commit is not in the next report: a run with nothing new for the table
        # reports nothing; the schema check names the new column until a run applies it.
        mariadb.execute("ALTER TABLE inventory.orders ADD COLUMN coupon VARCHAR(10)")
        _, _, checks = materialize(defs, instance, selection=[dg.AssetCheckKey(ORDERS_KEY, "schema_matches_source")])
        assert "coupon" in checks["schema_matches_source"].description


def test_a_refresh_that_only_moves_the_checkpoint_is_an_observation(mariadb, tutorial, tmp_path):
    """An idle table's checkpoint refresh after a binlog rotation commits no change: it is recorded as an
    observation, so the latest materialisation keeps the table's last change; later runs do not report it again."""
    config, pipelines = tutorial
    defs = build_definitions(pipelines)
    sink = PaimonSink(config.sink.catalog_options)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        assert materialize(defs, instance, selection=[ORDERS_KEY])[0].success
        first = instance.get_latest_materialization_event(ORDERS_KEY).asset_materialization.metadata
        snapshot = sink.latest_snapshot_id(ORDERS)
        mariadb.execute("FLUSH BINARY LOGS")
        # (the tags the binlog sensor gives such a run: tests/test_behind.py)
        refresh = {"lakecdc/run_reason": "checkpoint refresh only", "lakecdc/checkpoint_refresh": "inventory.orders"}
        result, metadata, _ = materialize(defs, instance, selection=[ORDERS_KEY], tags=refresh)
        assert result.success and ORDERS_KEY not in metadata
        assert sink.latest_snapshot_id(ORDERS) == snapshot + 1  # the checkpoint moved to the new binlog file
        said = [e.message for e in instance.all_logs(result.run_id) if "checkpoint refresh only" in e.message]
        assert said and "inventory.orders had no changes but their checkpoints are due a refresh" in said[0], said
        [observed] = instance.fetch_observations(ORDERS_KEY, limit=5).records
        observation = observed.event_log_entry.asset_observation.metadata
        assert observation["lakecdc/paimon_snapshot_id"].value == snapshot + 1
        assert "moved the checkpoint" in observation["lakecdc/checkpoint_only"].value
        latest = instance.get_latest_materialization_event(ORDERS_KEY).asset_materialization.metadata
        assert latest["lakecdc/paimon_snapshot_id"] == first["lakecdc/paimon_snapshot_id"]
        assert latest["lakecdc/inserted"].value == 2
        # a run with nothing new reports no materialisation (the observed commit is not reported as a recovered
        # one): it says so once in its log, and observes the table at its checkpoint
        first_read = instance.get_latest_materialization_event(MYSQL_ORDERS).asset_materialization
        version = first_read.tags["dagster/data_version"]
        result, metadata, _ = materialize(defs, instance, selection=[ORDERS_KEY])
        assert result.success and ORDERS_KEY not in metadata
        quiet = [m for m in (e.message for e in instance.all_logs(result.run_id)) if "no new changes" in m]
        assert len(quiet) == 1 and quiet[0].startswith("summary inventory.orders: no new changes since its "
                                                       f"checkpoint {observation['lakecdc/binlog_offset'].value}"), \
            quiet
        [observed] = [r.event_log_entry for r in instance.fetch_observations(ORDERS_KEY, limit=1).records]
        assert observed.run_id == result.run_id
        assert observed.asset_observation.metadata["lakecdc/binlog_offset"] == observation["lakecdc/binlog_offset"]
        assert "no new changes since its checkpoint" in \
            observed.asset_observation.metadata["lakecdc/no_new_changes"].value
        # the MySQL table: its first read (the snapshot) is its materialisation; the later runs read it without a
        # change, each an observation with the same data version
        mysql = instance.fetch_observations(MYSQL_ORDERS, limit=10).records
        assert len(mysql) == 2 and mysql[0].event_log_entry.run_id == result.run_id
        assert {r.event_log_entry.asset_observation.tags["dagster/data_version"] for r in mysql} == {version}
        assert mysql[0].event_log_entry.asset_observation.metadata["lakecdc/binlog_read_to"].value == \
            observed.asset_observation.metadata["lakecdc/binlog_read_to"].value
        # a real change is a materialisation again
        mariadb.execute("UPDATE inventory.orders SET product = 'notebook' WHERE id = 101")
        _, metadata, _ = materialize(defs, instance, selection=[ORDERS_KEY])
        assert metadata[ORDERS_KEY]["lakecdc/updated"].value == 1


def test_row_count_check_reconciles_across_binlog_rotations(mariadb, tutorial, tmp_path, monkeypatch):
    """After a binlog rotation (FLUSH BINARY LOGS, a server restart) the check compares at the committed offset
    across files: it measures the few bytes written since, not 'another file, too far'."""
    import lakecdc.runtime.reconcile as reconcile

    config, pipelines = tutorial
    defs = build_definitions(pipelines)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        assert materialize(defs, instance)[0].success
        checkpoint = PaimonSink(config.sink.catalog_options).checkpoint(ORDERS)["lakecdc.binlog.file"]
        mariadb.execute("FLUSH BINARY LOGS")
        mariadb.execute("INSERT INTO inventory.orders VALUES (105, 'ruler', 1.50, '2026-01-02 10:00:00')")
        mariadb.execute("FLUSH BINARY LOGS")
        assert mariadb.execute("SHOW MASTER STATUS")[0][0] != checkpoint
        result, _, checks = materialize(defs, instance, selection=[ROW_COUNT_KEY])
        check = checks["row_count_matches_source"]
        assert check.passed and result.success, check.description
        # the insert after the checkpoint is undone from MySQL's count: 2 rows at the checkpoint, as in Paimon
        assert check.metadata["expected_rows_at_checkpoint"].value == 2
        assert check.metadata["net_inserts_since_checkpoint"].value == 1
        written = check.metadata["binlog_bytes_since_checkpoint"].value
        assert 0 < written < 64 * 1024, written

        # More binlog than the check reads to reconcile: it fails as not evaluated and says how much was written.
        monkeypatch.setattr(reconcile, "MAX_RECONCILE_BYTES", 100)
        result, _, checks = materialize(defs, instance, selection=[ROW_COUNT_KEY])
        check = checks["row_count_matches_source"]
        assert not check.passed and result.success  # non-blocking: the run goes on
        assert check.metadata["evaluated"].value is False
        measured = re.search(r"(\d+) bytes of binlog were written since the checkpoint", check.description)
        assert measured and written <= int(measured.group(1)) < 64 * 1024, check.description
        assert "run the pipeline" in check.description

    # A checkpoint in a binlog file the server no longer has cannot be reconciled: the error says so.
    head = config_head(config)
    with pytest.raises(LakeCdcError, match="no longer on the server"):
        reconcile.binlog_bytes_since(config.source, BinlogOffset("mysql-bin.000000", 4), head)


def config_head(config):
    from lakecdc.runtime.connect import open_source

    return open_source(config).head_offset()


def test_partition_resnapshot_is_refused_for_bad_partitions(mariadb, tutorial, tmp_path):
    config, pipelines = tutorial
    defs = build_definitions(pipelines)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        assert materialize(defs, instance)[0].success
        result, _, _ = materialize(defs, instance, run_config={
            "ops": {OP: {"config": {"resnapshot": True, "partition": "day=1"}}}})
        assert not result.success
        failure = result.get_step_failure_events()[0].event_specific_data.error.message
        assert "order_day=<value>" in failure
        # Configuration errors are not retried.
        assert not any(e.event_type_value == "STEP_UP_FOR_RETRY" for e in result.all_events)
        # The re-snapshot job without a partition says how to name one.
        job = defs.resolve_job_def("resnapshot__inventory__orders")
        outcome = job.execute_in_process(instance=instance, raise_on_error=False, run_config={"ops": {
            "resnapshot__inventory__orders_op": {"config": {"partitions": []}}}})
        assert not outcome.success
        failure = outcome.get_step_failure_events()[0].event_specific_data.error.message
        assert "partitions: [order_day=value]" in failure, failure


RESOURCE_PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: 1
  username: {user}
  password: ${{YAML_PASSWORD:-}}
  tables: {db}.items
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: /nonexistent/warehouse
pipeline:
  name: resources {db}
  lakecdc.retry.max-retries: 2
  lakecdc.retry.delay: 50ms
  lakecdc.schedule: "15 3 * * *"
  lakecdc.sensor.default-status: stopped
"""
SECRET = "Res0urce-Secr3t"


def test_resources_override_yaml_and_transient_errors_are_retried(mariadb, fresh_db, tmp_path, monkeypatch):
    user = f"r_{fresh_db[-8:]}"
    mariadb.execute(f"CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY '{SECRET}'")
    mariadb.execute(f"GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO '{user}'@'127.0.0.1'")
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.items (id INT PRIMARY KEY, name VARCHAR(20))")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.items VALUES (1, 'a'), (2, 'b')")
    monkeypatch.setenv("YAML_PASSWORD", "not-the-password")
    config = parse_pipeline(RESOURCE_PIPELINE.format(user=user, db=fresh_db))
    key = dg.AssetKey(["paimon", fresh_db, "items"])
    try:
        # The YAML points at port 1 with a wrong password: unreachable, a transient error, retried then failed.
        defs = build_pipeline_definitions(config)
        with dg.instance_for_test() as instance:
            result, _, _ = materialize(defs, instance, selection=[key])
        assert not result.success
        retries = [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
        assert len(retries) == 2

        # Resources (EnvVar for the secret) make the same YAML run against the real server and warehouse.
        monkeypatch.setenv("ITEMS_PASSWORD", SECRET)
        resources = {"mysql": MySqlResource(port=mariadb.port, password=dg.EnvVar("ITEMS_PASSWORD")),
                     "paimon": PaimonCatalogResource(warehouse=str(tmp_path / "warehouse"))}
        defs = build_pipeline_definitions(config, resources=resources)
        with dg.instance_for_test() as instance:
            result, metadata, checks = materialize(defs, instance, selection=[key])
            assert result.success and all(c.passed for c in checks.values())
            assert metadata[key]["dagster/row_count"].value == 2
            text = json.dumps({k: str(v) for k, v in metadata[key].items()})
            assert SECRET not in text
            logs = "".join(str(e.message) for e in result.all_events)
            assert SECRET not in logs

            # The sensor reads the same resources; its cursor records the head it saw.
            sensor = defs.resolve_sensor_def(f"{config.slug}_binlog_sensor")
            context = dg.build_sensor_context(instance=instance, definitions=defs, resources=defs.resources)
            tick = sensor.evaluate_tick(context)
            assert tick.run_requests == [] and tick.cursor, tick.skip_message
            assert json.loads(tick.cursor)["requested"] == []
            mariadb.execute(f"INSERT INTO `{fresh_db}`.items VALUES (3, 'c')")
            tick = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=defs,
                                                                resources=defs.resources, cursor=tick.cursor))
            assert [r.asset_selection for r in tick.run_requests] == [[key]]
            assert json.loads(tick.cursor)["requested"] == [f"{fresh_db}.items"]

        # A wrong password is not transient: no retry.
        monkeypatch.setenv("ITEMS_PASSWORD", "wrong")
        with dg.instance_for_test() as instance:
            result, _, _ = materialize(defs, instance, selection=[key])
        assert not result.success
        assert not any(e.event_type_value == "STEP_UP_FOR_RETRY" for e in result.all_events)
        assert SECRET not in "".join(str(e.message) for e in result.all_events)

        # The cron schedule from the YAML.
        schedule = defs.resolve_schedule_def(f"{config.slug}_schedule")
        assert schedule.cron_schedule == "15 3 * * *"
        assert schedule.job_name == f"{config.slug}_job"
        # The reconcile job's schedule: daily by default, running; `none` leaves the job without one.
        reconcile_schedule = defs.resolve_schedule_def(f"{config.slug}_reconcile_schedule")
        assert (reconcile_schedule.cron_schedule, reconcile_schedule.job_name) == ("0 4 * * *",
                                                                                   f"{config.slug}_reconcile")
        assert reconcile_schedule.default_status == dg.DefaultScheduleStatus.RUNNING
        off = build_pipeline_definitions(parse_pipeline(RESOURCE_PIPELINE.format(user=user, db=fresh_db).replace(
            "pipeline:\n", "pipeline:\n  lakecdc.reconcile.schedule: none\n")))
        assert [s.name for s in off.schedules] == [f"{config.slug}_schedule"]
        assert off.resolve_job_def(f"{config.slug}_reconcile").name == f"{config.slug}_reconcile"
    finally:
        mariadb.execute(f"DROP USER IF EXISTS '{user}'@'127.0.0.1'")


def test_invalid_automation_keys_name_the_key():
    base = RESOURCE_PIPELINE.format(user="u", db="d")
    with pytest.raises(PipelineConfigError, match=r"pipeline.lakecdc.schedule: expected a cron"):
        parse_pipeline(base.replace('"15 3 * * *"', "daily"))
    with pytest.raises(PipelineConfigError, match=r"pipeline.lakecdc.retry.max-retries"):
        parse_pipeline(base.replace("max-retries: 2", "max-retries: -1"))
    with pytest.raises(PipelineConfigError, match=r"invalid cron schedule"):
        build_pipeline_definitions(parse_pipeline(base.replace('"15 3 * * *"', '"99 3 * * *"')))
    # the pools of the one op per table are gone with it: said so, not silently reinterpreted
    delay = "lakecdc.retry.delay: 50ms"
    with pytest.raises(PipelineConfigError, match=r"pipeline.lakecdc.pool.*`per-table` is gone"):
        parse_pipeline(base.replace(delay, f"{delay}\n  lakecdc.pool: per-table"))
    named = parse_pipeline(base.replace(delay, f"{delay}\n  lakecdc.pool: cdc"))
    assert pool_name(named) == "cdc" and pool_name(parse_pipeline(base)) == f"lakecdc/{parse_pipeline(base).slug}"


class _Hook(http.server.BaseHTTPRequestHandler):
    received: list = []

    def do_POST(self):  # noqa: N802
        length = int(self.headers["Content-Length"])
        _Hook.received.append(json.loads(self.rfile.read(length)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_failure_alert_posts_to_the_webhook(mariadb, fresh_db):
    server = http.server.HTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        text = RESOURCE_PIPELINE.format(user="root", db=fresh_db).replace(
            "lakecdc.retry.max-retries: 2", f"lakecdc.retry.max-retries: 0\n  lakecdc.alert.webhook: "
                                            f"http://127.0.0.1:{server.server_port}/hook")
        config = parse_pipeline(text)
        defs = build_pipeline_definitions(config)
        with dg.instance_for_test() as instance:
            result = defs.resolve_job_def(f"{config.slug}_job").execute_in_process(instance=instance,
                                                                                  raise_on_error=False)
            assert not result.success
            sensor = defs.resolve_sensor_def(f"{config.slug}_failure_alert")
            context = dg.build_run_status_sensor_context(
                sensor_name=sensor.name, dagster_instance=instance, dagster_run=result.dagster_run,
                dagster_event=result.get_run_failure_event()).for_run_failure()
            sensor(context)
        alert = _Hook.received[-1]
        assert alert["pipeline"] == config.name and alert["run_id"] == result.run_id
        assert "cannot connect to MySQL at 127.0.0.1:1" in alert["text"]
        assert "not-the-password" not in json.dumps(alert)
    finally:
        server.shutdown()


def test_snapshot_progress_and_summary_logs(mariadb, tutorial, monkeypatch, caplog):
    import lakecdc.runtime.report as report
    from lakecdc.runtime import run_micro_batch

    config, _ = tutorial
    mariadb.execute("INSERT INTO inventory.orders SELECT seq, 'bulk', 1.00, '2026-02-01 00:00:00' "
                    "FROM seq_1000_to_4999", database="inventory")
    mariadb.execute("ANALYZE TABLE inventory.orders")
    monkeypatch.setattr(report, "PROGRESS_INTERVAL_SECONDS", 0.0)
    with caplog.at_level(logging.INFO, logger="lakecdc.runtime"):
        run_micro_batch(config)
    lines = [r.getMessage() for r in caplog.records]
    progress = [line for line in lines if "rows/s" in line and "ETA" in line]
    assert progress, lines
    assert any(line.startswith("snapshot of inventory.orders: 4,002 rows at") for line in lines)
    assert any(line.startswith("summary inventory.orders: snapshot, snapshot 1") and "4002 inserted" in line
               for line in lines)



def test_translator_prefixes_every_key_and_names_groups(mariadb, tutorial, tmp_path):
    """A key prefix (two servers with one db.table) reaches every Dagster object: assets, lineage, checks, the
    sensor's run requests, the re-snapshot partitions; groups come from the translator too."""
    config, pipelines = tutorial
    translator = DagsterLakeCdcTranslator(key_prefix=["east"], group_name="lake", source_group_name="east_mysql")
    defs = build_definitions(pipelines, translator=translator)
    key = dg.AssetKey(["east", "paimon", "inventory", "orders"])
    source_key = dg.AssetKey(["east", "mysql", "inventory", "orders"])
    specs = {s.key: s for s in defs.resolve_all_asset_specs()}
    assert set(specs) == {key, source_key}
    assert specs[key].group_name == "lake" and specs[source_key].group_name == "east_mysql"
    assert [d.asset_key for d in specs[key].deps] == [source_key]
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        result, metadata, checks = materialize(defs, instance, selection=[key])
        assert result.success and all(c.passed for c in checks.values())
        assert {c.asset_key for c in checks.values()} == {key}
        lineage = metadata[key]["dagster/column_lineage"].value.deps_by_column
        assert [(d.asset_key, d.column_name) for d in lineage["product_upper"]] == [(source_key, "product")]
        mariadb.execute("UPDATE inventory.orders SET product = 'notebook' WHERE id = 101")
        sensor = defs.resolve_sensor_def(f"{config.slug}_binlog_sensor")
        tick = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=defs))
        assert [r.asset_selection for r in tick.run_requests] == [[key]], tick.skip_message

    # A subclass renames a table everywhere through one method.
    class Renaming(DagsterLakeCdcTranslator):
        def get_asset_key(self, props):
            if isinstance(props, PaimonTableProps):
                return dg.AssetKey(["lake", props.table.table])
            return super().get_asset_key(props)

    specs = {s.key for s in build_definitions(pipelines, translator=Renaming()).resolve_all_asset_specs()}
    assert specs == {dg.AssetKey(["lake", "orders"]), MYSQL_ORDERS}


def test_one_table_on_two_servers_needs_a_key_prefix(mariadb, tutorial, tmp_path):
    """Two pipelines reading inventory.orders from two servers would collapse into one MySQL asset: refused."""
    _, pipelines = tutorial
    other = (pipelines / "tutorial.yaml").read_text().replace("${MYSQL_PORT:-3307}", "1").replace(
        "Enrich MySQL orders with soft deletes", "orders from the second server")
    (pipelines / "second.yaml").write_text(other)
    with pytest.raises(PipelineConfigError, match="key prefix") as raised:
        build_definitions(pipelines)
    assert f"mysql://127.0.0.1:{mariadb.port}/inventory.orders" in str(raised.value)
    assert "mysql://127.0.0.1:1/inventory.orders" in str(raised.value)


def test_definitions_check_the_pipeline_against_mysql(mariadb, tutorial, monkeypatch):
    """Loading the definitions compiles the transforms against the MySQL tables: a misspelt partition key fails
    (so `dg check defs` reports it); the MySQL asset names the server the resources point at."""
    config, pipelines = tutorial
    path = pipelines / "tutorial.yaml"
    path.write_text(path.read_text().replace("partition-keys: order_day", "partition-keys: order_dya"))
    monkeypatch.setenv(VALIDATION_ENV, "1")  # as `dg check defs` does
    with pytest.raises(PipelineConfigError, match="order_dya") as raised:
        build_definitions(pipelines)
    assert "partition-keys" in str(raised.value)
    monkeypatch.delenv(VALIDATION_ENV)

    # The description names the server of the resource override, not the YAML's.
    path.write_text((ROOT / "assets" / "tutorial.yaml").read_text())
    monkeypatch.setenv("MYSQL_PORT", "1")
    defs = build_definitions(pipelines, resources={"mysql": MySqlResource(port=mariadb.port)})
    spec = {s.key: s for s in defs.resolve_all_asset_specs()}[MYSQL_ORDERS]
    assert f"`127.0.0.1:{mariadb.port}`" in spec.description
    assert spec.metadata["dagster/table_name"] == f"mysql://127.0.0.1:{mariadb.port}/inventory.orders"
    assert [c.name for c in spec.metadata["dagster/column_schema"].columns] == ["id", "product", "price",
                                                                                 "created_at"]


def test_a_broken_pipeline_file_fails_alone(mariadb, tutorial, tmp_path, monkeypatch):
    """A pipeline file that does not load, next to a valid one: the valid one loads and runs; the broken one is an
    asset whose description names the file, the YAML line of the key at fault and what to do. Under `dg check defs`
    (DAGSTER_IS_DEFS_VALIDATION_CLI) it still fails the load."""
    config, pipelines = tutorial
    text = (pipelines / "tutorial.yaml").read_text().replace("Enrich MySQL orders", "Broken orders")
    (pipelines / "broken.yaml").write_text(text.replace("UPPER(product) AS", "UPPER(product AS"))
    # a file that parses, but whose transform does not fit the MySQL table (checked while the definitions load)
    (pipelines / "misfit.yaml").write_text(text.replace("Broken orders", "Misfit orders")
                                           .replace("partition-keys: order_day", "partition-keys: order_dya"))
    monkeypatch.delenv(VALIDATION_ENV, raising=False)
    defs = build_definitions(pipelines)
    specs = {s.key: s for s in defs.resolve_all_asset_specs()}
    assert ORDERS_KEY in specs and MYSQL_ORDERS in specs
    assert defs.resolve_sensor_def(f"{config.slug}_binlog_sensor") is not None
    broken = specs[dg.AssetKey(["lakecdc_broken", "broken_yaml"])]
    lines = (pipelines / "broken.yaml").read_text().splitlines()
    # the expression error points at the faulty part of the folded projection in the file: UPPER(product's "("
    line = next(i for i, text in enumerate(lines, 1) if "UPPER(product AS" in text)
    column = lines[line - 1].index("UPPER(") + len("UPPER(")
    assert f"{pipelines / 'broken.yaml'}, line {line}, column {column} (key transform[0].projection)" in \
        broken.description, broken.description
    assert "syntax error" in broken.description and "lakecdc validate --connect" in broken.description
    assert "[at line" not in broken.description and "**" not in broken.description
    assert (broken.metadata["lakecdc/yaml_line"].value, broken.metadata["lakecdc/yaml_column"].value) == \
        (line, column)
    assert broken.group_name == "lakecdc_broken_pipelines" and broken.kinds == {"broken"}
    misfit = specs[dg.AssetKey(["lakecdc_broken", "misfit_yaml"])]
    partition_keys_line = next(i for i, text in enumerate(lines, 1) if "partition-keys:" in text)
    assert misfit.metadata["lakecdc/yaml_line"].value == partition_keys_line
    assert "order_dya" in misfit.metadata["lakecdc/error"].value and "order_dya" in misfit.description
    # the valid pipeline runs, its checks pass
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        result, metadata, checks = materialize(defs, instance, selection=[ORDERS_KEY])
        assert result.success and all(c.passed for c in checks.values())

    monkeypatch.setenv(VALIDATION_ENV, "1")
    with pytest.raises(PipelineConfigError, match="transform"):
        build_definitions(pipelines)


def test_pipeline_files_sharing_a_name_fail_alone(mariadb, tutorial, tmp_path, monkeypatch):
    """Two files with one pipeline.name (which would share their op, jobs and sensors) each become an asset naming
    the other file and the key at fault; the other pipelines load. Under `dg check defs` the load fails."""
    config, pipelines = tutorial
    text = (pipelines / "tutorial.yaml").read_text().replace("Enrich MySQL orders", "Twin orders")
    (pipelines / "twin_a.yaml").write_text(text)
    (pipelines / "twin_b.yaml").write_text(text)
    monkeypatch.delenv(VALIDATION_ENV, raising=False)
    defs = build_definitions(pipelines)
    specs = {s.key: s for s in defs.resolve_all_asset_specs()}
    assert ORDERS_KEY in specs and defs.resolve_sensor_def(f"{config.slug}_binlog_sensor") is not None
    for name, other in (("twin_a", "twin_b"), ("twin_b", "twin_a")):
        twin = specs[dg.AssetKey(["lakecdc_broken", f"{name}_yaml"])]
        assert twin.metadata["lakecdc/yaml_key"].value == "pipeline.name"
        assert str(pipelines / f"{other}.yaml") in twin.metadata["lakecdc/error"].value
        assert "unique pipeline.name" in twin.metadata["lakecdc/error"].value
    monkeypatch.setenv(VALIDATION_ENV, "1")
    with pytest.raises(PipelineConfigError, match="same name"):
        build_definitions(pipelines)


def test_owners_kinds_and_freshness_through_the_translator(mariadb, tutorial):
    """As dagster-sling/dlt users expect: owners and kinds come through the translator, and a freshness policy is
    derived from the sensor interval (``auto``) or given as a window."""
    config, pipelines = tutorial
    path = pipelines / "tutorial.yaml"
    base = path.read_text()
    path.write_text(base.replace("  parallelism: 2\n", "  parallelism: 2\n"
                                 "  lakecdc.owners: data@example.com, team:lake\n"
                                 "  lakecdc.freshness.fail-window: auto\n  lakecdc.sensor.interval: 2min\n"))
    specs = {s.key: s for s in build_definitions(pipelines).resolve_all_asset_specs()}
    orders, source = specs[ORDERS_KEY], specs[MYSQL_ORDERS]
    assert orders.owners == ["data@example.com", "team:lake"] and source.owners == []
    assert orders.kinds == {"paimon"} and source.kinds == {"mysql"}
    policy = orders.freshness_policy
    assert (policy.fail_window.to_timedelta().total_seconds(), policy.warn_window.to_timedelta().total_seconds()) \
        == (600, 240)  # 5 and 2 sensor intervals
    assert source.freshness_policy is None

    path.write_text(base.replace("  parallelism: 2\n", "  parallelism: 2\n  lakecdc.freshness.fail-window: 2h\n"))
    policy = {s.key: s for s in build_definitions(pipelines).resolve_all_asset_specs()}[ORDERS_KEY].freshness_policy
    assert policy.fail_window.to_timedelta().total_seconds() == 7200 and policy.warn_window is None

    class Owners(DagsterLakeCdcTranslator):
        def get_owners(self, props):
            return ["team:override"]

    specs = {s.key: s for s in build_definitions(pipelines, translator=Owners()).resolve_all_asset_specs()}
    assert specs[ORDERS_KEY].owners == ["team:override"]
    for bad, message in (("lakecdc.owners: bob", "email addresses or team:<name>"),
                         ("lakecdc.freshness.fail-window: 10s", "at least 1 minute")):
        with pytest.raises(PipelineConfigError, match=message):
            parse_pipeline(base.replace("  parallelism: 2\n", f"  parallelism: 2\n  {bad}\n"))


TYPES_PIPELINE = """
source: {{type: mysql, hostname: 127.0.0.1, port: {port}, username: root, password: "", tables: {db}.kinds,
          include-comments.enabled: true}}
sink: {{type: paimon, catalog.properties.metastore: filesystem, catalog.properties.warehouse: {warehouse}}}
pipeline: {{name: kinds {db}}}
"""


def test_column_types_are_spelt_as_paimon_and_mysql_spell_them(mariadb, fresh_db, tmp_path):
    """Before any run, the Paimon asset shows the types Paimon will store (unsigned widened, TIME(p), CHAR(n)) and
    the MySQL asset MySQL's own column types."""
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.kinds (id INT UNSIGNED PRIMARY KEY, code CHAR(5), at TIME(3), "
                    "ts TIMESTAMP(6) NULL, note TEXT COMMENT 'free __text__')")
    config = parse_pipeline(TYPES_PIPELINE.format(port=mariadb.port, db=fresh_db, warehouse=tmp_path / "w"))
    specs = {s.key: s for s in build_pipeline_definitions(config).resolve_all_asset_specs()}
    paimon = {c.name: c.type for c in specs[dg.AssetKey(["paimon", fresh_db, "kinds"])]
              .metadata["dagster/column_schema"].columns}
    assert paimon == {"id": "BIGINT", "code": "CHAR(5)", "at": "TIME(3)", "ts": "TIMESTAMP_LTZ(6)", "note": "STRING"}
    mysql = {c.name: c for c in specs[dg.AssetKey(["mysql", fresh_db, "kinds"])]
             .metadata["dagster/column_schema"].columns}
    assert mysql["id"].type == "int(10) unsigned" and mysql["at"].type == "time(3)"
    assert mysql["note"].description == r"free \_\_text\_\_"  # a MySQL comment is prose: Markdown escaped
