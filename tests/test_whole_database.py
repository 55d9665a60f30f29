"""A whole database through Dagster: the pipeline is one op (a subsettable multi-asset); one run of many tables
reads the binlog once, plans once, and opens a fixed number of MySQL connections whatever the number of tables (the
same for ``lakecdc check``); each table keeps its own materialisation, checks and failure: a table another writer
holds, or one that fails with its own error, is reported failed to materialise while the others commit; a run of
some of the tables materialises exactly those.

Connections are what the server counts (``SHOW GLOBAL STATUS LIKE 'Connections'``), so every path that opens one
is counted, not only those lakecdc knows about.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
import time
from pathlib import Path

import dagster as dg
import pytest

from lakecdc.config import load_pipeline
from lakecdc.dagster import build_definitions
from lakecdc.dagster.assets import pipeline_op_name
from lakecdc.model import TableId
from lakecdc.runtime import check_pipeline, run_micro_batch
from lakecdc.runtime import commit_groups as commit_groups_module
from lakecdc.sink import PaimonSink
from lakecdc.sink.evolution import DROP, ColumnChange, apply_column_changes
from bench.wholedb_bench import PIPELINE, connections
from tests.crosscheck import assert_same_rows
from tests.test_source_chunked import CLI, Writers

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


@contextlib.contextmanager
def database_of(mariadb, prefix: str, tables: int, tmp_path: Path):
    """A database of ``tables`` tables and its pipeline (:func:`create_database`): (name, pipelines directory);
    dropped afterwards."""
    db = f"{prefix}_{tables}_{tmp_path.name[-6:]}".replace("-", "_")
    mariadb.execute(f"CREATE DATABASE `{db}`")
    try:
        yield db, create_database(mariadb, db, tables, tmp_path)
    finally:
        mariadb.execute(f"DROP DATABASE IF EXISTS `{db}`")


def change_every_table(mariadb, db: str, tables: int) -> None:
    for i in range(tables):
        mariadb.execute(f"UPDATE t{i} SET amount = amount + 1 WHERE id <= 3", database=db)
        mariadb.execute(f"DELETE FROM t{i} WHERE id = 20", database=db)


def statements(mariadb) -> int:
    return int(mariadb.execute("SHOW GLOBAL STATUS LIKE 'Questions'")[0][1])


def materialize_all(mariadb, pipelines: Path, selection=None, run_config=None
                    ) -> tuple[dg.ExecuteInProcessResult, int, int]:
    """Every table asset of the pipeline (or ``selection``) in one run: (result, MySQL connections it opened,
    binlog reads logged). ``result.unmaterialized``: the tables the run planned and did not materialise;
    ``result.statements``: the statements MySQL executed for the run."""
    defs = build_definitions(pipelines)
    assets = [a for a in defs.assets if isinstance(a, dg.AssetsDefinition)]
    with dg.instance_for_test() as instance:
        before, asked = connections(mariadb), statements(mariadb)
        result = dg.materialize(assets, instance=instance, resources=defs.resources, raise_on_error=False,
                                selection=selection, run_config=run_config)
        opened = connections(mariadb) - before - 1  # the count's own connection
        result.statements = statements(mariadb) - asked - 2  # the counts' own SHOW statements
        logs = instance.all_logs(result.run_id)
        reads = sum(1 for record in logs if "binlog from " in record.user_message)
        # Dagster OSS 1.13 records no ASSET_FAILED_TO_MATERIALIZE event: a table the failed run planned and did not
        # materialise is what the UI shows as failed
        planned = {r.dagster_event.asset_key.path[-1] for r in logs if r.dagster_event is not None
                   and r.dagster_event.event_type_value == "ASSET_MATERIALIZATION_PLANNED"}
    result.unmaterialized = planned - {e.asset_key.path[-1] for e in paimon_events(result)}
    return result, opened, reads


def paimon_events(result) -> list:
    """The run's materialisations of Paimon tables (a run also records the MySQL tables it read, as
    materialisations of their external assets when it read a change: docs/dagster.md)."""
    return [e for e in result.get_asset_materialization_events() if e.asset_key.path[0] == "paimon"]


@pytest.mark.parametrize("tables", [3])
def test_one_run_reads_the_binlog_once_with_connections_independent_of_the_tables(mariadb, tmp_path,
                                                                                  tables):
    opened, asked = {}, {}
    for n in (tables, tables * 3):
        with database_of(mariadb, "whole", n, tmp_path) as (db, pipelines):
            change_every_table(mariadb, db, n)
            result, opened[n], reads = materialize_all(mariadb, pipelines)
            asked[n] = result.statements
            assert result.success
            assert reads == 1, f"{n} tables: {reads} binlog reads in one run"
            materialized = {e.asset_key for e in paimon_events(result)}
            assert len(materialized) == n  # each table its own materialisation
            checks = result.get_asset_check_evaluations()
            assert len(checks) == 3 * n and all(c.passed for c in checks), [c.description for c in checks
                                                                             if not c.passed]
            config = load_pipeline(pipelines / "whole.yaml")
            for i in range(n):
                assert assert_same_rows(mariadb, config.sink.catalog_options, db, f"t{i}") == 19
    assert opened[tables * 3] == opened[tables], f"MySQL connections per run by tables: {opened}"
    # one plan per run: reporting and checking the tables asks MySQL nothing (no plan, no description per table)
    assert asked[tables * 3] == asked[tables], f"MySQL statements per run by tables: {asked}"


def test_a_table_held_by_another_writer_fails_alone_and_the_others_commit(mariadb, fresh_db, tmp_path):
    pipelines = create_database(mariadb, fresh_db, 3, tmp_path)
    change_every_table(mariadb, fresh_db, 3)
    config = load_pipeline(pipelines / "whole.yaml")
    held = TableId(fresh_db, "t1")
    sink = PaimonSink(config.sink.catalog_options)
    with sink.lock(held, owner="a test holding the table"):
        result, _, reads = materialize_all(mariadb, pipelines)
    assert not result.success
    # another writer is transient: the op is retried once (lakecdc.retry.max-retries: 1), then fails
    retried = [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
    assert len(retried) == 1
    failed = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert len(failed) == 1
    assert f"table {held} is being written by another writer" in str(failed[0].event_specific_data.error)
    assert result.unmaterialized == {"t1"}
    materialized = {e.asset_key.path[-1] for e in paimon_events(result)}
    assert materialized == {"t0", "t2"}  # in the first attempt; the retry finds nothing new for them
    # one read for the others (the retry finds them at the head: nothing to read); the held table, tried alone,
    # stops at its lock before reading
    assert reads == 1
    for table in ("t0", "t2"):
        assert_same_rows(mariadb, config.sink.catalog_options, fresh_db, table)
    # the next run catches the held table up
    result, _, _ = materialize_all(mariadb, pipelines)
    assert result.success
    assert_same_rows(mariadb, config.sink.catalog_options, fresh_db, "t1")


def test_a_table_that_fails_fails_alone_and_the_others_commit(mariadb, fresh_db, tmp_path):
    """The micro-batch of the run fails as a whole (one table's Paimon schema lost a column the pipeline
    produces); each table then runs alone: that table fails with its own error, named in the run's failure and
    recorded as failed to materialise; the others commit and are materialised."""
    pipelines = create_database(mariadb, fresh_db, 3, tmp_path)
    change_every_table(mariadb, fresh_db, 3)
    config = load_pipeline(pipelines / "whole.yaml")
    broken = TableId(fresh_db, "t1")
    apply_column_changes(PaimonSink(config.sink.catalog_options), broken, [ColumnChange(DROP, "amount")])
    result, _, _ = materialize_all(mariadb, pipelines)
    assert not result.success
    assert not [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]  # not transient
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    message = str(failure.event_specific_data.error)
    assert f"{broken}" in message and "no column 'amount'" in message, message
    assert result.unmaterialized == {"t1"}
    materialized = {e.asset_key.path[-1] for e in paimon_events(result)}
    assert materialized == {"t0", "t2"}
    checks = result.get_asset_check_evaluations()
    assert {c.asset_key.path[-1] for c in checks} == {"t0", "t2"} and all(c.passed for c in checks)
    for table in ("t0", "t2"):
        assert_same_rows(mariadb, config.sink.catalog_options, fresh_db, table)


def test_a_run_of_some_tables_materialises_exactly_those(mariadb, fresh_db, tmp_path):
    pipelines = create_database(mariadb, fresh_db, 4, tmp_path)
    change_every_table(mariadb, fresh_db, 4)
    config = load_pipeline(pipelines / "whole.yaml")
    sink = PaimonSink(config.sink.catalog_options)
    before = {f"t{i}": sink.latest_snapshot_id(TableId(fresh_db, f"t{i}")) for i in range(4)}
    selection = [dg.AssetKey(["paimon", fresh_db, name]) for name in ("t1", "t3")]
    result, _, reads = materialize_all(mariadb, pipelines, selection=selection)
    assert result.success and reads == 1
    assert {e.asset_key for e in paimon_events(result)} == set(selection)
    assert {c.asset_key for c in result.get_asset_check_evaluations()} == set(selection)
    for name in ("t1", "t3"):
        assert_same_rows(mariadb, config.sink.catalog_options, fresh_db, name)
    for name in ("t0", "t2"):  # not selected: not written
        assert sink.latest_snapshot_id(TableId(fresh_db, name)) == before[name]


def lag_behind_the_head(mariadb, db: str, pipelines: Path) -> None:
    """Every table but t0 idle with its checkpoint behind the binlog head (t0 changed and committed alone), and
    changes in t1 since its checkpoint: the row-count checks of t1.. reconcile their counts with the binlog."""
    config = load_pipeline(pipelines / "whole.yaml")
    mariadb.execute("UPDATE t0 SET amount = amount + 1 WHERE id = 1", database=db)
    run_micro_batch(config, targets={TableId(db, "t0")})
    mariadb.execute("DELETE FROM t1 WHERE id = 1", database=db)


def test_check_opens_a_fixed_number_of_connections(mariadb, tmp_path):
    opened, lagging = {}, {}
    for n in (2, 6):
        with database_of(mariadb, "check", n, tmp_path) as (db, pipelines):
            config = load_pipeline(pipelines / "whole.yaml")
            before = connections(mariadb)
            results = check_pipeline(config)
            opened[n] = connections(mariadb) - before - 1
            assert len(results) == 3 * n and all(r.passed for r in results)
            # checkpoints behind the head: one binlog read reconciles every table's count
            lag_behind_the_head(mariadb, db, pipelines)
            before = connections(mariadb)
            results = check_pipeline(config)
            lagging[n] = connections(mariadb) - before - 1
            assert all(r.passed for r in results), [r.description for r in results if not r.passed]
            counts = {str(r.target): r.metadata for r in results if r.check == "row_count_matches_source"}
            assert counts[f"{db}.t1"]["net_inserts_since_checkpoint"] == -1  # the delete after the checkpoint
    # one for the short queries, one for every table's chunks (one after the other); the binlog read when checkpoints
    # lag behind the head
    assert opened[6] == opened[2] == 2, f"MySQL connections of `lakecdc check` by tables: {opened}"
    assert lagging[6] == lagging[2] <= 4, f"... with checkpoints behind the head: {lagging}"


def test_a_run_of_idle_tables_opens_a_fixed_number_of_connections(mariadb, tmp_path):
    """Tables the run has nothing to commit for keep checkpoints behind the head: their row-count checks reconcile
    from one shared binlog read, not one read (two connections) per table."""
    opened = {}
    for n in (3, 9):
        with database_of(mariadb, "idle", n, tmp_path) as (db, pipelines):
            lag_behind_the_head(mariadb, db, pipelines)
            result, opened[n], _ = materialize_all(mariadb, pipelines)
            assert result.success
            # t1 changed (the others' commits by the CLI are reported as recovered: this instance never saw them)
            fresh = {e.asset_key.path[-1] for e in paimon_events(result)
                     if "lakecdc/recovered" not in e.materialization.metadata}
            assert fresh == {"t1"}
            checks = result.get_asset_check_evaluations()
            assert len(checks) == 3 * n and all(c.passed for c in checks)
    assert opened[9] == opened[3], f"MySQL connections per run by tables: {opened}"


def test_run_config_resnapshots_every_selected_table_and_a_partition_needs_one_table(mariadb, fresh_db, tmp_path):
    pipelines = create_database(mariadb, fresh_db, 3, tmp_path)
    config = load_pipeline(pipelines / "whole.yaml")
    sink = PaimonSink(config.sink.catalog_options)
    op = pipeline_op_name(config)
    selection = [dg.AssetKey(["paimon", fresh_db, name]) for name in ("t0", "t2")]
    before = {name: sink.latest_snapshot_id(TableId(fresh_db, name)) for name in ("t0", "t1", "t2")}

    # a partition with two tables selected: refused before anything is written, not retried
    result, _, _ = materialize_all(mariadb, pipelines, selection=selection, run_config={
        "ops": {op: {"config": {"resnapshot": True, "partition": "amount=1"}}}})
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert "select exactly one table" in str(failure.event_specific_data.error)
    assert not [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
    assert {n: sink.latest_snapshot_id(TableId(fresh_db, n)) for n in before} == before

    # resnapshot: every selected table, each in one commit; the others untouched
    mariadb.execute("UPDATE t0 SET amount = 0 WHERE id = 1", database=fresh_db)
    result, _, _ = materialize_all(mariadb, pipelines, selection=selection, run_config={
        "ops": {op: {"config": {"resnapshot": True}}}})
    assert result.success
    phases = {e.asset_key.path[-1]: e.materialization.metadata["lakecdc/phase"].value
              for e in paimon_events(result)}
    assert phases == {"t0": "resnapshot", "t2": "resnapshot"}
    assert sink.checkpoint(TableId(fresh_db, "t0"))["lakecdc.phase"] == "resnapshot"
    assert sink.latest_snapshot_id(TableId(fresh_db, "t1")) == before["t1"]
    for name in ("t0", "t2"):
        assert_same_rows(mariadb, config.sink.catalog_options, fresh_db, name)


def snapshot_database(mariadb, db: str, tables: int, tmp_path: Path) -> tuple:
    """``tables`` tables t0.. of 300 rows each and a pipeline capturing them (not run yet): (config, path)."""
    for i in range(tables):
        mariadb.execute(f"CREATE TABLE t{i} (id INT PRIMARY KEY, amount INT NOT NULL)", database=db)
        mariadb.execute(f"INSERT INTO t{i} SELECT seq, seq FROM seq_1_to_300", database=db)
    path = tmp_path / f"snapshot_{tables}.yaml"
    path.write_text(PIPELINE.format(port=mariadb.port, db=db, warehouse=tmp_path / f"warehouse_{tables}", retries=1))
    return load_pipeline(path), path


def writes_to(tables: int):
    """A Writers workload: inserts, updates and deletes of random rows of random tables t0.."""
    def work(cur, rnd):
        table, key = f"t{rnd.randrange(tables)}", rnd.randrange(1, 400)
        action = rnd.random()
        if action < 0.4:
            cur.execute(f"UPDATE {table} SET amount = amount + 1 WHERE id = %s", (key,))
        elif action < 0.7:
            cur.execute(f"DELETE FROM {table} WHERE id = %s", (key,))
        else:
            cur.execute(f"INSERT IGNORE INTO {table} VALUES (%s, %s)", (key, -key))
    return work


@pytest.mark.parametrize("incremental", [True, False])
def test_a_snapshot_run_of_many_tables_opens_a_fixed_number_of_connections(mariadb, tmp_path, incremental):
    """The first run of a whole database while the application writes to every table: small tables share commit
    groups (one snapshot connection, one binlog read for all of them), so the run opens as many MySQL connections
    for 16 tables as for 4; each table still commits its own snapshot, and after the next run Paimon equals MySQL."""
    opened = {}
    extra = "" if incremental else "  scan.incremental.snapshot.enabled: false\n"
    for n in (4, 16):
        db = f"snap_{n}_{incremental:d}_{tmp_path.name[-6:]}".replace("-", "_")
        mariadb.execute(f"CREATE DATABASE `{db}`")
        try:
            _, path = snapshot_database(mariadb, db, n, tmp_path)
            config = load_pipeline(_with_source_option(path, extra))
            with Writers(mariadb, db, writes_to(n), threads=1, pause=0.002) as writers:
                time.sleep(0.1)  # the writers' connection is open before the count
                before = connections(mariadb)
                first = run_micro_batch(config)
                opened[n] = connections(mariadb) - before - 1  # the count's own connection
                during = writers.commits
            assert during > 5, during  # the application really wrote while the snapshot ran
            for i in range(n):
                table = first.tables[TableId(db, f"t{i}")]
                assert table.committed and table.snapshot_complete and table.commits == 1, table
            run_micro_batch(config)  # the changes after each table's snapshot
            for i in range(n):
                assert assert_same_rows(mariadb, config.sink.catalog_options, db, f"t{i}") > 250
        finally:
            mariadb.execute(f"DROP DATABASE IF EXISTS `{db}`")
    assert opened[16] == opened[4] <= 5, f"MySQL connections of a snapshot run by tables: {opened}"


def _with_source_option(path: Path, option: str) -> Path:
    """``path``'s pipeline with one more ``source:`` option line (``option`` empty: as it is)."""
    if option:
        text = path.read_text()
        path.write_text(text.replace("  tables: ", option + "  tables: ", 1))
    return path


def test_killed_between_the_commits_of_a_shared_group_resumes_exactly(mariadb, fresh_db, tmp_path):
    """SIGKILL right after the first table of a shared commit group committed, the others not, while the
    application writes: the next run continues that table from its checkpoint (binlog) and snapshots the others,
    and Paimon equals MySQL."""
    config, path = snapshot_database(mariadb, fresh_db, 5, tmp_path)
    sink = PaimonSink(config.sink.catalog_options)
    targets = [TableId(fresh_db, f"t{i}") for i in range(5)]
    with Writers(mariadb, fresh_db, writes_to(5), threads=1, pause=0.002):
        killed = subprocess.run(CLI + [str(path)], env={**os.environ, "LAKECDC_FAILPOINT": "snapshot-group-committed"},
                                capture_output=True, text=True, timeout=300)
        assert killed.returncode == -9, killed.stderr[-3000:]
        committed = [t for t in targets if sink.table_exists(t) and sink.checkpoint(t) is not None]
        assert committed == [targets[0]], committed  # one group for all five: killed after its first commit
        resumed = run_micro_batch(config)
    assert resumed.tables[targets[0]].phase == "binlog"
    for target in targets[1:]:
        assert resumed.tables[target].phase == "snapshot" and resumed.tables[target].snapshot_complete
    run_micro_batch(config)
    for target in targets:
        assert_same_rows(mariadb, config.sink.catalog_options, fresh_db, target.table)


def test_commit_groups_hold_at_most_their_table_limit(mariadb, fresh_db, tmp_path, monkeypatch, caplog):
    """With a limit of 2 tables per commit group, 5 small tables take 3 groups (2, 2, 1), each table one commit."""
    monkeypatch.setattr(commit_groups_module, "GROUP_MAX_TABLES", 2)
    config, _ = snapshot_database(mariadb, fresh_db, 5, tmp_path)
    with caplog.at_level(logging.INFO, logger="lakecdc"):
        result = run_micro_batch(config)
    groups = [int(m.group(1)) for r in caplog.records
              if (m := re.match(r"incremental snapshot of (\d+) table", r.getMessage()))]
    assert groups == [2, 2, 1], groups
    for i in range(5):
        assert result.tables[TableId(fresh_db, f"t{i}")].commits == 1
        assert_same_rows(mariadb, config.sink.catalog_options, fresh_db, f"t{i}")
