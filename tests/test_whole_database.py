"""A whole database through Dagster: one run of many tables reads the binlog once, plans once, and opens a fixed
number of MySQL connections whatever the number of tables (the same for ``lakecdc check``); each table keeps its own
materialisation, checks and failure; a table another writer holds is left to its own step, which retries and fails
alone.

Connections are what the server counts (``SHOW GLOBAL STATUS LIKE 'Connections'``), so every path that opens one
is counted, not only those lakecdc knows about.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from lakecdc.config import load_pipeline
from lakecdc.dagster import build_definitions
from lakecdc.model import TableId
from lakecdc.runtime import check_pipeline, run_micro_batch
from lakecdc.sink import PaimonSink
from bench.wholedb_bench import PIPELINE, connections
from tests.crosscheck import assert_same_rows

def create_database(mariadb, db: str, tables: int, tmp_path: Path) -> Path:
    """``tables`` tables t0.. of 20 rows each, a pipeline YAML capturing the database, and its first snapshot."""
    for i in range(tables):
        mariadb.execute(f"CREATE TABLE t{i} (id INT PRIMARY KEY, amount INT NOT NULL)", database=db)
        mariadb.execute(f"INSERT INTO t{i} SELECT seq, seq FROM seq_1_to_20", database=db)
    pipelines = tmp_path / f"pipelines_{tables}"
    pipelines.mkdir()
    path = pipelines / "whole.yaml"
    path.write_text(PIPELINE.format(port=mariadb.port, db=db, warehouse=tmp_path / f"warehouse_{tables}",
                                    retries=1))
    run_micro_batch(load_pipeline(path))
    return pipelines


def change_every_table(mariadb, db: str, tables: int) -> None:
    for i in range(tables):
        mariadb.execute(f"UPDATE t{i} SET amount = amount + 1 WHERE id <= 3", database=db)
        mariadb.execute(f"DELETE FROM t{i} WHERE id = 20", database=db)


def materialize_all(mariadb, pipelines: Path) -> tuple[dg.ExecuteInProcessResult, int, int]:
    """Every table asset of the pipeline in one run: (result, MySQL connections it opened, binlog reads logged)."""
    defs = build_definitions(pipelines)
    assets = [a for a in defs.assets if isinstance(a, dg.AssetsDefinition)]
    with dg.instance_for_test() as instance:
        before = connections(mariadb)
        result = dg.materialize(assets, instance=instance, resources=defs.resources, raise_on_error=False)
        opened = connections(mariadb) - before - 1  # the count's own connection
        reads = sum(1 for record in instance.all_logs(result.run_id) if "binlog from " in record.user_message)
    return result, opened, reads


@pytest.mark.parametrize("tables", [3])
def test_one_run_reads_the_binlog_once_with_connections_independent_of_the_tables(mariadb, tmp_path,
                                                                                  tables):
    opened = {}
    for n in (tables, tables * 3):
        db = f"whole_{n}_{tmp_path.name[-6:]}".replace("-", "_")
        mariadb.execute(f"CREATE DATABASE `{db}`")
        try:
            pipelines = create_database(mariadb, db, n, tmp_path)
            change_every_table(mariadb, db, n)
            result, opened[n], reads = materialize_all(mariadb, pipelines)
            assert result.success
            assert reads == 1, f"{n} tables: {reads} binlog reads in one run"
            materialized = {e.asset_key for e in result.get_asset_materialization_events()}
            assert len(materialized) == n  # each table its own materialisation
            checks = result.get_asset_check_evaluations()
            assert len(checks) == 3 * n and all(c.passed for c in checks), [c.description for c in checks
                                                                             if not c.passed]
            config = load_pipeline(pipelines / "whole.yaml")
            for i in range(n):
                assert assert_same_rows(mariadb, config.sink.catalog_options, db, f"t{i}") == 19
        finally:
            mariadb.execute(f"DROP DATABASE IF EXISTS `{db}`")
    assert opened[tables * 3] == opened[tables], f"MySQL connections per run by tables: {opened}"


def test_a_table_held_by_another_writer_fails_alone_and_the_others_commit(mariadb, fresh_db, tmp_path):
    pipelines = create_database(mariadb, fresh_db, 3, tmp_path)
    change_every_table(mariadb, fresh_db, 3)
    config = load_pipeline(pipelines / "whole.yaml")
    held = TableId(fresh_db, "t1")
    sink = PaimonSink(config.sink.catalog_options)
    with sink.lock(held, owner="a test holding the table"):
        result, _, reads = materialize_all(mariadb, pipelines)
    assert not result.success
    retried = [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
    assert [e.step_key for e in retried] == [failed_key := f"paimon__{fresh_db}__t1"]  # another writer: waited
    failed = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert [e.step_key for e in failed] == [failed_key]
    assert f"table {held} is being written by another writer" in str(failed[0].event_specific_data.error)
    assert reads == 1  # the others in one read; the held table's own step stops at its lock, before reading
    for table in ("t0", "t2"):
        assert_same_rows(mariadb, config.sink.catalog_options, fresh_db, table)
    # the next run catches the held table up
    result, _, _ = materialize_all(mariadb, pipelines)
    assert result.success
    assert_same_rows(mariadb, config.sink.catalog_options, fresh_db, "t1")


def test_check_opens_a_fixed_number_of_connections(mariadb, tmp_path):
    opened = {}
    for n in (2, 6):
        db = f"check_{n}_{tmp_path.name[-6:]}".replace("-", "_")
        mariadb.execute(f"CREATE DATABASE `{db}`")
        try:
            config = load_pipeline(create_database(mariadb, db, n, tmp_path) / "whole.yaml")
            before = connections(mariadb)
            results = check_pipeline(config)
            opened[n] = connections(mariadb) - before - 1
            assert len(results) == 3 * n and all(r.passed for r in results)
        finally:
            mariadb.execute(f"DROP DATABASE IF EXISTS `{db}`")
    assert opened[6] == opened[2] == 1, f"MySQL connections of `lakecdc check` by tables: {opened}"
