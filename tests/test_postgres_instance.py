"""The production deployment (issue 24 item 4): a Dagster instance whose storage (runs, event log, schedules) is a
PostgreSQL server, Dagster's multiprocess executor, and a whole-database pipeline of 200 tables (``tables: db.\\.*``,
one op for all of them): snapshot run; changes spread over the tables; a tick of the binlog sensor, whose run request
(exactly the changed tables) is then run as the sensor would launch it; the blocking checks of both runs; every table
compared with MySQL after each run; and the MySQL connections of the snapshot and binlog runs independent of the
tables.

The PostgreSQL server is private (tests/postgres_server.py: Debian's package on a free loopback port), like the
private MariaDB."""

from __future__ import annotations

import time

import pytest

from bench.wholedb_bench import connections
from tests.crosscheck import assert_same_rows
from tests.postgres_server import PostgresServer
from tests.dagster_processes import materialize_out_of_process

TABLES = 200
APPEND_EVERY = 4  # every fourth table has no primary key: an append table
# MySQL connections the binlog run may open, whatever the number of tables: the launching process and the step
# process each load the definitions (the table list, and the schemas of every table on one connection), the
# micro-batch's start-up connection and its binlog read (two: the dump and its control connection), and the reports'
# and checks' one shared connection (lakecdc.runtime.connect.shared_source); a little room for a reconnect.
MAX_CONNECTIONS_PER_RUN = 12

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


def create_tables(mariadb, db: str, names: list[str]) -> None:
    conn = mariadb.connect(database=db)
    try:
        with conn.cursor() as cur:
            for i, name in enumerate(names):
                key = "id INT" if i % APPEND_EVERY == 0 else "id INT PRIMARY KEY"
                cur.execute(f"CREATE TABLE {name} ({key}, v VARCHAR(20))")
                cur.execute(f"INSERT INTO {name} SELECT seq, CONCAT('v', seq) FROM seq_1_to_{10 + i % 20}")
    finally:
        conn.close()


def change_tables(mariadb, db: str, names: list[str]) -> None:
    """An update and an insert in each of ``names``, and a delete in every other keyed one, in one connection."""
    conn = mariadb.connect(database=db)
    try:
        with conn.cursor() as cur:
            for i, name in enumerate(names):
                cur.execute(f"UPDATE {name} SET v = 'updated' WHERE id % 2 = 0")
                cur.execute(f"INSERT INTO {name} VALUES (100, 'new')")
                if i % 2:
                    cur.execute(f"DELETE FROM {name} WHERE id = 3")
    finally:
        conn.close()


def test_whole_database_on_a_postgres_instance_with_the_multiprocess_executor(postgres, mariadb, fresh_db, tmp_path,
                                                                               monkeypatch):
    import os

    import dagster as dg
    from dagster_postgres import PostgresEventLogStorage

    from lakecdc.config import load_pipeline
    from lakecdc.dagster import build_definitions
    from lakecdc.dagster.assets import pipeline_op_name

    db = fresh_db
    names = [f"t{i:03d}" for i in range(TABLES)]
    keyed = [name for i, name in enumerate(names) if i % APPEND_EVERY]
    create_tables(mariadb, db, names)
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
    opened, seconds = {}, {}

    def run(label: str, selection: list[str]) -> None:
        before = connections(mariadb)
        started = time.monotonic()
        materialize_out_of_process("lakecdc_pg_defs", tmp_path, home, selection)
        seconds[label] = round(time.monotonic() - started, 1)
        opened[label] = connections(mariadb) - before - 1  # the count's own connection

    def equal_to_mysql(tables: list[str], context: str) -> None:
        for name in tables:
            assert_same_rows(mariadb, config.sink.catalog_options, db, name, context=context)

    run("snapshot", keys)
    equal_to_mysql(names, "after the snapshot run")

    defs = build_definitions(str(pipelines))
    sensor = defs.resolve_sensor_def(f"{config.slug}_binlog_sensor")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
        quiet = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=defs))
        assert quiet.run_requests == [], quiet.skip_message
        changed = names[1::7]  # spread over the tables: keyed and append tables
        assert set(changed) - set(keyed) and set(changed) & set(keyed)
        change_tables(mariadb, db, changed)
        tick = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=defs,
                                                            cursor=quiet.cursor))
        [request] = tick.run_requests
        requested = sorted(k.path[-1] for k in request.asset_selection)
        assert requested == sorted(changed), (requested, tick.skip_message)

    run("binlog", [k.to_user_string() for k in request.asset_selection])  # the run the sensor asked for
    # an append table keeps every version of a row: compare the keyed tables (all of them, changed or not)
    equal_to_mysql(keyed, "after the binlog run")

    op = pipeline_op_name(config)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        runs = instance.get_runs()
        assert len(runs) == 2 and all(r.is_success for r in runs)
        for dagster_run in runs:
            steps, checks, materialized = {}, {}, set()
            for record in instance.all_logs(dagster_run.run_id):
                event = record.dagster_event
                if event is None:
                    continue
                if event.event_type_value == "STEP_START":
                    steps[record.step_key] = event.pid
                elif event.event_type_value == "ASSET_CHECK_EVALUATION":
                    evaluation = event.event_specific_data
                    checks[(evaluation.asset_key.path[-1], evaluation.check_name)] = evaluation.passed
                elif event.event_type_value == "ASSET_MATERIALIZATION" and event.asset_key.path[0] == "paimon":
                    materialized.add(event.asset_key.path[-1])  # (the MySQL tables read are recorded too)
            # one op, one step process for all the tables (not in the launching process)
            assert list(steps) == [op] and os.getpid() not in steps.values(), steps
            tables = names if dagster_run.run_id == runs[-1].run_id else changed  # the snapshot run: every table
            assert materialized == set(tables), sorted(materialized ^ set(tables))
            assert {name for name, _ in checks} == set(tables) and all(checks.values()), \
                [k for k, passed in checks.items() if not passed]
            assert len(checks) == 3 * len(tables)
    print(f"{TABLES} tables: seconds per run {seconds}, MySQL connections per run {opened}")
    assert opened["binlog"] <= MAX_CONNECTIONS_PER_RUN < len(changed), opened
    # the snapshot run's tables share commit groups: one snapshot reader for all of them, and one query of MySQL's
    # row estimates, on top of the binlog run's connections
    assert opened["snapshot"] <= MAX_CONNECTIONS_PER_RUN + 2, opened
