"""The production deployment: a Dagster instance whose storage (runs, event log, schedules) is a PostgreSQL server,
Dagster's multiprocess executor, and a whole-database pipeline (``tables: db.\\.*``, every table its own op):
snapshot run, binlog run, the binlog sensor and the blocking checks, with every table compared with MySQL.

The PostgreSQL server is private (tests/postgres_server.py: Debian's package on a free loopback port), like the
private MariaDB."""

from __future__ import annotations

import pytest

from tests.crosscheck import assert_same_rows
from tests.postgres_server import PostgresServer
from tests.dagster_processes import materialize_out_of_process

TABLES = 6  # each table is one op, so one step process per table and run (about 10 s per table here)

PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: root
  password: ""
  tables: {db}.\\.*
  server-id: 5840
  scan.incremental.snapshot.chunk.key-column: {db}.\\.*:id
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {warehouse}
pipeline:
  name: whole database {db}
"""

DEFS = """
import os

import dagster as dg

from lakecdc.dagster import build_definitions

base = build_definitions(os.environ["LAKECDC_PIPELINES_DIR"])
defs = dg.Definitions(assets=base.assets, jobs=base.jobs, sensors=base.sensors, schedules=base.schedules,
                      resources=base.resources, executor=dg.multiprocess_executor)
"""


@pytest.fixture(scope="module")
def postgres():
    with PostgresServer() as server:
        yield server


def test_whole_database_on_a_postgres_instance_with_the_multiprocess_executor(postgres, mariadb, fresh_db, tmp_path,
                                                                               monkeypatch):
    import dagster as dg
    from dagster_postgres import PostgresEventLogStorage

    from lakecdc.config import load_pipeline
    from lakecdc.dagster import build_definitions

    db = fresh_db
    names = [f"t{i:02d}" for i in range(TABLES)]
    for i, name in enumerate(names):
        key = "id INT PRIMARY KEY" if i % 4 else "id INT"  # every fourth table has no key: an append table
        mariadb.execute(f"CREATE TABLE `{db}`.{name} ({key}, v VARCHAR(20))")
        mariadb.execute(f"INSERT INTO `{db}`.{name} SELECT seq, CONCAT('v', seq) FROM seq_1_to_{10 + i}", database=db)
    pipelines = tmp_path / "pipelines"
    pipelines.mkdir()
    path = pipelines / "whole.yaml"
    path.write_text(PIPELINE.format(port=mariadb.port, db=db, warehouse=tmp_path / "wh"))
    config = load_pipeline(path)
    (tmp_path / "lakecdc_pg_defs.py").write_text(DEFS)
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(f"storage:\n  postgres:\n    postgres_url: {postgres.url}\n")
    monkeypatch.setenv("LAKECDC_PIPELINES_DIR", str(pipelines))
    keys = [f"paimon/{db}/{name}" for name in names]

    def equal_to_mysql(context: str) -> None:
        for name in names:
            assert_same_rows(mariadb, config.sink.catalog_options, db, name, context=context)

    materialize_out_of_process("lakecdc_pg_defs", tmp_path, home, keys)  # snapshot
    equal_to_mysql("after the snapshot run")

    defs = build_definitions(str(pipelines))
    sensor = defs.resolve_sensor_def(f"{config.slug}_binlog_sensor")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
        quiet = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=defs))
        assert quiet.run_requests == [], quiet.skip_message
        changed = names[1:4] + names[4:5]  # three primary-key tables and one append table
        for name in changed:
            mariadb.execute(f"UPDATE `{db}`.{name} SET v = 'updated' WHERE id % 2 = 0")
            mariadb.execute(f"INSERT INTO `{db}`.{name} VALUES (100, 'new')")
        mariadb.execute(f"DELETE FROM `{db}`.{names[2]} WHERE id = 3")
        tick = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=defs,
                                                            cursor=quiet.cursor))
        requested = sorted(k.path[-1] for r in tick.run_requests for k in r.asset_selection)
        assert requested == sorted(changed), (requested, tick.skip_message)

    materialize_out_of_process("lakecdc_pg_defs", tmp_path, home, keys)  # binlog
    for name in names:  # an append table keeps every version of a row: compare the keyed tables only
        if names.index(name) % 4:
            assert_same_rows(mariadb, config.sink.catalog_options, db, name, context="after the binlog run")

    with dg.DagsterInstance.from_config(str(home)) as instance:
        runs = instance.get_runs()
        assert len(runs) == 2 and all(r.is_success for r in runs)
        steps, checks = {}, {}
        for record in instance.all_logs(runs[0].run_id):
            event = record.dagster_event
            if event is not None and event.event_type_value == "STEP_START":
                steps[record.step_key] = event.pid
            if event is not None and event.event_type_value == "ASSET_CHECK_EVALUATION":
                evaluation = event.event_specific_data
                checks[(evaluation.asset_key.path[-1], evaluation.check_name)] = evaluation.passed
        assert len(steps) == TABLES and len(set(steps.values())) > 1, steps  # one op per table, several processes
        assert {name for name, _ in checks} == set(names) and all(checks.values()), checks
