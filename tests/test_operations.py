"""Operations in the library, run here through the CLI and the Python API without Dagster (issue 13 items 3, 5,
6; issue 34 items 1, 2): re-snapshots of a table and of one partition carry the schema history forward, a
re-snapshot repairs a table whose Paimon schema drifted, ``lakecdc check`` (the reconciliation) fails (exit code 3)
on real differences and on checks that cannot be evaluated and counts MySQL chunk by chunk, the checks of a run's
own commit catch what Paimon does not hold as written, and a produced column that the table lacks stops the run in
every schema-change mode."""

import json

import pytest

from lakecdc.cli import main
from lakecdc.errors import LakeCdcError, SinkError
from lakecdc.model import TableId
from lakecdc.runtime import check_pipeline, resnapshot, run_micro_batch
from lakecdc.runtime.checkpoint import read_checkpoint
from lakecdc.sink import PaimonSink
from lakecdc.sink.evolution import ADD, DROP, ColumnChange, apply_column_changes
from tests.test_schema_changes import MEMBERS, SEED_ROWS, make_config, paimon_state

PARTITIONED = """
transform:
  - source-table: {db}.members
    projection: "*"
    primary-keys: id,age
    partition-keys: age
"""


def mysql_state(mariadb, table: TableId):
    """(column → MySQL type, rows sorted by id), to compare with paimon_state."""
    types = {name: kind for name, kind in mariadb.execute(
        "SELECT column_name, column_type FROM information_schema.columns WHERE table_schema = %s AND "
        "table_name = %s ORDER BY ordinal_position", (table.database, table.table))}
    rows = sorted(mariadb.execute(f"SELECT * FROM `{table.database}`.`{table.table}`"))
    return types, rows


@pytest.fixture
def members(mariadb, fresh_db):
    mariadb.execute(MEMBERS.format(db=fresh_db))
    mariadb.execute(SEED_ROWS.format(db=fresh_db))
    return TableId(fresh_db, "members")


def cli(capsys, *argv) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def checkpoint_of(config, table):
    return read_checkpoint(PaimonSink(config.sink.catalog_options).checkpoint(table))


def test_resnapshot_then_add_column_then_run_equals_mysql(mariadb, fresh_db, members, tmp_path, capsys):
    config = make_config(mariadb, fresh_db, tmp_path, "evolve")
    run_micro_batch(config)
    code, out = cli(capsys, "resnapshot", config.path, str(members), "--json")
    assert code == 0
    done = json.loads(out)
    assert done["phase"] == "resnapshot" and done["partition"] is None and done["rows"] == 3
    assert done["offset"] == done["snapshot_offset"]
    recorded = checkpoint_of(config, members)
    assert [c["name"] for c in recorded.schemas[members]["columns"]] == ["id", "name", "age"]

    mariadb.execute(f"ALTER TABLE `{fresh_db}`.members ADD COLUMN note2 VARCHAR(10)")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.members VALUES (1011, 'Dan', 30, 'n2')")
    assert run_micro_batch(config).tables[members].committed
    types, rows = paimon_state(config, members)
    assert types == {"id": "INT NOT NULL", "name": "VARCHAR(17)", "age": "INT", "note2": "VARCHAR(10)"}
    assert rows == mysql_state(mariadb, members)[1]
    # a second re-snapshot works too, and the next DDL still follows
    second = resnapshot(config, members)
    assert second.snapshot_rows == 4 and second.schema_changes == []
    mariadb.execute(f"ALTER TABLE `{fresh_db}`.members DROP COLUMN note2")
    run_micro_batch(config)
    assert paimon_state(config, members) == ({"id": "INT NOT NULL", "name": "VARCHAR(17)", "age": "INT"},
                                             mysql_state(mariadb, members)[1])


def test_resnapshot_repairs_a_drifted_paimon_schema(mariadb, fresh_db, members, tmp_path, capsys):
    config = make_config(mariadb, fresh_db, tmp_path, "evolve")
    run_micro_batch(config)
    assert cli(capsys, "check", config.path)[0] == 0
    # the Paimon schema drifts away from the pipeline's: a column lost, a stray one added
    sink = PaimonSink(config.sink.catalog_options)
    apply_column_changes(sink, members, [ColumnChange(DROP, "age")])
    apply_column_changes(sink, members, [ColumnChange(ADD, "stray", pa_field("stray"), ("LAST", ""))])
    code, out = cli(capsys, "check", config.path, "--json")
    assert code == 3
    report = {c["check"]: c for c in json.loads(out)["checks"]}
    schema = report["schema_matches_source"]
    assert not schema["passed"] and schema["evaluated"]
    assert schema["metadata"]["added"] == "age" and schema["metadata"]["dropped"] == "stray"
    with pytest.raises(SinkError, match="no column 'age'.*lakecdc resnapshot"):
        run_micro_batch(config)

    result = resnapshot(config, members)
    assert result.schema_changes == ["drop column stray", "add column age int32 AFTER name"]
    assert set(result.schema.names) == {"id", "name", "age"}
    types, rows = paimon_state(config, members)
    assert types == {"id": "INT NOT NULL", "name": "VARCHAR(17)", "age": "INT"}
    assert rows == mysql_state(mariadb, members)[1]
    code, out = cli(capsys, "check", config.path)
    assert code == 0, out
    mariadb.execute(f"UPDATE `{fresh_db}`.members SET age = 40 WHERE id = 1008")
    run_micro_batch(config)
    assert paimon_state(config, members)[1] == mysql_state(mariadb, members)[1]


def pa_field(name):
    import pyarrow as pa

    return pa.field(name, pa.int32())


def test_partition_resnapshot_records_the_partition_and_keeps_the_schema_history(mariadb, fresh_db, members,
                                                                                  tmp_path, capsys):
    config = make_config(mariadb, fresh_db, tmp_path, "evolve", transform=PARTITIONED.format(db=fresh_db))
    run_micro_batch(config)
    before = checkpoint_of(config, members)
    # a row changed behind the binlog's back, in partition age=20 only
    conn = mariadb.connect()
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_log_bin = 0")
        cur.execute(f"UPDATE `{fresh_db}`.members SET name = 'Robert' WHERE id = 1009")
    conn.commit()
    conn.close()
    result = resnapshot(config, members, "age=20")
    assert (result.partition, result.snapshot_rows, result.partitions) == ("age=20", 1, {"age=20": {"inserted": 1}})
    properties = PaimonSink(config.sink.catalog_options).checkpoint(members)
    assert properties["lakecdc.resnapshot.partition"] == "age=20"
    after = checkpoint_of(config, members)
    assert after.offset == before.offset and after.schemas == before.schemas and after.captured == before.captured
    assert paimon_state(config, members)[1] == mysql_state(mariadb, members)[1]

    mariadb.execute(f"ALTER TABLE `{fresh_db}`.members ADD COLUMN note2 VARCHAR(10)")
    with pytest.raises(LakeCdcError, match="schema of .* changed after the table's checkpoint"):
        resnapshot(config, members, "age=20")  # the DDL is not applied yet: the partition would mix two schemas
    mariadb.execute(f"INSERT INTO `{fresh_db}`.members VALUES (1011, 'Dan', 30, 'n2')")
    run_micro_batch(config)
    assert paimon_state(config, members)[1] == mysql_state(mariadb, members)[1]
    code, out = cli(capsys, "resnapshot", config.path, str(members), "--partition", "age=30")
    assert code == 0 and "resnapshot of partition age=30" in out and "(1 rows from MySQL" in out
    assert PaimonSink(config.sink.catalog_options).checkpoint(members)["lakecdc.resnapshot.partition"] == "age=30"
    code, _ = cli(capsys, "resnapshot", config.path, str(members), "--partition", "nope=1")
    assert code == 2  # a partition the table does not have: a configuration error, nothing written


def test_check_fails_on_a_row_count_difference_and_when_it_cannot_evaluate(mariadb, fresh_db, members, tmp_path,
                                                                        capsys):
    config = make_config(mariadb, fresh_db, tmp_path, "evolve")
    run_micro_batch(config)
    results = {r.check: r for r in check_pipeline(config)}
    assert all(r.passed and r.evaluated for r in results.values())
    assert results["row_count_matches_source"].metadata["expected_rows_at_checkpoint"] == 3
    # changes after the checkpoint are reconciled: still exact
    mariadb.execute(f"DELETE FROM `{fresh_db}`.members WHERE id = 1010")
    count = {r.check: r for r in check_pipeline(config)}["row_count_matches_source"]
    assert count.passed and count.metadata["net_inserts_since_checkpoint"] == -1
    conn = mariadb.connect()
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_log_bin = 0")
        cur.execute(f"DELETE FROM `{fresh_db}`.members WHERE id = 1009")
    conn.commit()
    conn.close()
    code, out = cli(capsys, "check", config.path)
    assert code == 3 and "FAIL" in out and "3 active rows in Paimon but 2 in MySQL" in out

    unreachable = make_config(mariadb, fresh_db, tmp_path, "evolve")
    unreachable.source.port = free_port()
    results = {r.check: r for r in check_pipeline(unreachable, [members])}
    assert results["primary_key_unique"].passed  # reads Paimon only
    for name in ("row_count_matches_source", "schema_matches_source"):  # need MySQL: fail, not evaluated
        assert not results[name].passed and not results[name].evaluated, results[name]
        assert "could not be evaluated" in results[name].description


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_reconciliation_counts_mysql_chunk_by_chunk_exactly_at_the_checkpoint(mariadb, fresh_db, members, tmp_path,
                                                                             monkeypatch):
    """Chunks of 2 rows with a pause after each. Changes after the checkpoint to keys whose chunk was not read yet
    are undone (also in the pause after the first chunk); a change to a key whose chunk was read already changes
    nothing: the count is exact (tolerance 0)."""
    from lakecdc.runtime import reconcile

    config = make_config(mariadb, fresh_db, tmp_path, "evolve",
                         source_extra="  scan.incremental.snapshot.chunk.size: 2")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.members VALUES (1011, 'Dan', 30), (1012, 'Eve', 31), (1013, 'Fay', 32)")
    run_micro_batch(config)  # 1008-1013 at the checkpoint
    # after the checkpoint: two inserts, a key moving from the last chunk's range into the first one's
    mariadb.execute(f"INSERT INTO `{fresh_db}`.members VALUES (1014, 'Gil', 33), (1015, 'Hal', 34)")
    mariadb.execute(f"UPDATE `{fresh_db}`.members SET id = 1000 WHERE id = 1013")
    pauses = []

    def after_chunk(seconds):
        pauses.append(seconds)
        if len(pauses) == 1:  # the first chunk (1000, 1008) is counted
            mariadb.execute(f"INSERT INTO `{fresh_db}`.members VALUES (1007, 'Ida', 35)")  # in it: irrelevant
            mariadb.execute(f"DELETE FROM `{fresh_db}`.members WHERE id = 1012")  # not read yet: undone

    monkeypatch.setattr(reconcile, "pause", after_chunk)
    [count] = [r for r in check_pipeline(config) if r.check == reconcile.ROW_COUNT]
    assert count.passed, count.description
    metadata = count.metadata
    assert (metadata["mysql_rows_read"], metadata["net_inserts_since_checkpoint"], metadata["tolerance"],
            metadata["expected_rows_at_checkpoint"], metadata["paimon_active_rows"]) == (7, 1, 0, 6, 6)
    assert metadata["mysql_chunks"] == 4 and metadata["chunk_size"] == 2  # (1000 1008) (1009 1010) (1011 1014) (1015)
    assert pauses == [config.reconcile.pause_seconds] * 3  # after each chunk but the last


def test_the_checks_of_a_commit_catch_what_paimon_does_not_hold_as_written(mariadb, fresh_db, members, tmp_path,
                                                                           monkeypatch):
    """What a run wrote is read back by key from the snapshot it committed: the real commit passes; the same
    read against rows the run did not write (a value, a deleted key, a key never written) fails naming each."""
    import dataclasses

    import pyarrow as pa
    import pyarrow.compute as pc

    from lakecdc.runtime.verify import verify_run
    from lakecdc.sink import written as written_rows

    config = make_config(mariadb, fresh_db, tmp_path, "evolve",
                         source_extra=f"  scan.incremental.snapshot.chunk.key-column: {fresh_db}.notes:id")
    sink = PaimonSink(config.sink.catalog_options)
    notes = TableId(fresh_db, "notes")  # no primary key: an append table
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.notes (id INT, text VARCHAR(20))")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.notes VALUES (1, 'a'), (2, 'b')")
    run = run_micro_batch(config, record_writes=True)
    first = run.tables[members]
    assert [r.passed for r in verify_run(config, sink, members, first, first.plan)] == [True, True, True]
    assert first.written.keys == 3 and not first.written.sampled
    [appended, unique, _] = verify_run(config, sink, notes, run.tables[notes], run.tables[notes].plan)
    assert appended.passed and appended.applicable and appended.metadata["rows_written"] == 2
    assert "append table" in appended.description and unique.passed and not unique.applicable
    mariadb.execute(f"UPDATE `{fresh_db}`.members SET age = 22 WHERE id = 1008")
    mariadb.execute(f"DELETE FROM `{fresh_db}`.members WHERE id = 1009")
    result = run_micro_batch(config, record_writes=True).tables[members]
    checks = {r.check: r for r in verify_run(config, sink, members, result, result.plan)}
    assert all(r.passed for r in checks.values()), {n: r.description for n, r in checks.items()}
    rows = checks["changed_rows_match"].metadata
    assert (rows["keys_checked"], rows["keys_present"], rows["keys_deleted"]) == (2, 1, 1)
    assert rows["buckets_read"] >= 1 and rows["files_read"] >= 1

    written = result.written
    kept = written.rows
    ids, ages = kept.column("id"), kept.column("age")
    kinds = kept.column(written_rows.KIND_COLUMN)
    tampered = kept.set_column(kept.schema.get_field_index("age"), "age",
                               pc.if_else(pc.equal(ids, 1008), pa.scalar(99, ages.type), ages))
    tampered = tampered.set_column(tampered.schema.get_field_index(written_rows.KIND_COLUMN),
                                   written_rows.KIND_COLUMN, pc.if_else(pc.equal(ids, 1009), pa.scalar(0, pa.int8()),
                                                                        kinds))
    extra = kept.filter(pc.equal(ids, 1008)).set_column(0, kept.schema.field("id"),
                                                        pa.array([5000], kept.schema.field("id").type))
    result.written = dataclasses.replace(written, rows=pa.concat_tables([tampered, extra]))
    [rows_check, unique, _] = verify_run(config, sink, members, result, result.plan)
    assert not rows_check.passed and unique.passed
    assert "age: 1 key(s) differ, e.g. written 99, read 22" in rows_check.description, rows_check.description
    assert "2 missing in Paimon" in rows_check.description  # 1009 (deleted) and 5000 (never written)

    # a run writing more keys than its share checks the first ones and says how many it left out
    monkeypatch.setattr(written_rows, "FIRST_COMMIT_KEYS", 2)
    mariadb.execute(f"INSERT INTO `{fresh_db}`.members VALUES (1011, 'Dan', 30), (1012, 'Eve', 31), (1013, 'Fay', 32)")
    sampled = run_micro_batch(config, record_writes=True).tables[members]
    [rows_check, _, _] = verify_run(config, sink, members, sampled, sampled.plan)
    assert rows_check.passed and rows_check.metadata["keys_checked"] == 2
    assert rows_check.metadata["keys_not_checked"] == 1 and rows_check.metadata["sampled"] is True
    assert sorted(sampled.written.rows.column("id").to_pylist()) == [1011, 1012]  # the first ones written


@pytest.mark.parametrize("mode", ["ignore", "exception", "try_evolve"])
def test_a_produced_column_the_table_lacks_stops_the_run(mariadb, fresh_db, members, tmp_path, mode):
    """A changed projection adds a computed column: in every mode the run stops before writing (before, ignore,
    exception and try_evolve dropped the column silently)."""
    config = make_config(mariadb, fresh_db, tmp_path, mode)
    run_micro_batch(config)
    changed = make_config(mariadb, fresh_db, tmp_path, mode, transform=f"""
transform:
  - source-table: {fresh_db}.members
    projection: "*, UPPER(name) AS loud"
""")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.members VALUES (1011, 'Dan', 30)")
    with pytest.raises(SinkError, match="has no column 'loud' that the pipeline now produces"):
        run_micro_batch(changed)
    assert len(paimon_state(config, members)[1]) == 3  # nothing written


def test_ignore_mode_still_leaves_new_upstream_columns_out(mariadb, fresh_db, members, tmp_path):
    config = make_config(mariadb, fresh_db, tmp_path, "ignore")
    run_micro_batch(config)
    mariadb.execute(f"ALTER TABLE `{fresh_db}`.members ADD COLUMN note2 VARCHAR(10)")
    run_micro_batch(config)
    mariadb.execute(f"INSERT INTO `{fresh_db}`.members VALUES (1011, 'Dan', 30, 'n2')")
    run_micro_batch(config)  # the schema history has note2, the table does not: by design, no error
    types, rows = paimon_state(config, members)
    assert types == {"id": "INT NOT NULL", "name": "VARCHAR(17)", "age": "INT"} and rows[-1] == (1011, "Dan", 30)
    schema = {r.check: r for r in check_pipeline(config)}["schema_matches_source"]
    assert schema.passed and not schema.applicable and "note2" in schema.description


def test_schema_check_accepts_what_the_settings_keep_out_and_fails_on_the_rest(mariadb, fresh_db, members,
                                                                               tmp_path):
    config = make_config(mariadb, fresh_db, tmp_path, "evolve", sink_extra="  exclude.schema.changes: [drop]")
    run_micro_batch(config)
    mariadb.execute(f"ALTER TABLE `{fresh_db}`.members DROP COLUMN age")
    run_micro_batch(config)  # the drop is excluded: Paimon keeps age
    schema = {r.check: r for r in check_pipeline(config)}["schema_matches_source"]
    assert schema.passed and not schema.applicable and "age" in schema.metadata["kept_by_behavior"]
    mariadb.execute(f"ALTER TABLE `{fresh_db}`.members ADD COLUMN note2 INT")  # not run yet: real drift
    schema = {r.check: r for r in check_pipeline(config)}["schema_matches_source"]
    assert not schema.passed and schema.description.endswith("new in MySQL, missing in Paimon: note2")


def test_resnapshot_replaces_a_column_whose_type_change_readers_could_not_read(mariadb, fresh_db, members,
                                                                               tmp_path):
    """evolve refuses INT → VARBINARY (Paimon has no such cast; MySQL makes 21 b'21'); the re-snapshot rewrites
    every row, so it replaces the column in place and the table follows MySQL again."""
    config = make_config(mariadb, fresh_db, tmp_path, "evolve")
    run_micro_batch(config)
    mariadb.execute(f"ALTER TABLE `{fresh_db}`.members MODIFY COLUMN age VARBINARY(10)")
    with pytest.raises(LakeCdcError, match=r"column 'age' cannot change from INT to VARBINARY\(10\): Paimon has no "
                                           "cast"):
        run_micro_batch(config)
    result = resnapshot(config, members)
    assert result.schema_changes == ["drop column age", "add column age binary AFTER name"]
    types, rows = paimon_state(config, members)
    assert types == {"id": "INT NOT NULL", "name": "VARCHAR(17)", "age": "VARBINARY(10)"}
    assert rows == mysql_state(mariadb, members)[1]
    mariadb.execute(f"INSERT INTO `{fresh_db}`.members VALUES (1011, 'Dan', '30')")
    run_micro_batch(config)
    assert paimon_state(config, members)[1] == mysql_state(mariadb, members)[1]
    assert all(r.passed for r in check_pipeline(config))


def test_resnapshot_repairs_a_table_whose_checkpoint_has_no_schema_history(mariadb, fresh_db, members, tmp_path):
    """A table checkpointed before lakecdc kept a schema history: an ADD COLUMN upstream stops every run; one
    re-snapshot brings the column and the history, and the next DDL is followed again."""
    from lakecdc.runtime.checkpoint import SOURCE_SCHEMAS

    config = make_config(mariadb, fresh_db, tmp_path, "evolve")
    run_micro_batch(config)
    sink = PaimonSink(config.sink.catalog_options)
    properties = {k: v for k, v in sink.checkpoint(members).items() if k != SOURCE_SCHEMAS}
    writer = sink.open_writer(members)
    writer.commit(properties)  # the latest checkpoint now has no history, as one written by an older lakecdc
    assert not checkpoint_of(config, members).schemas
    mariadb.execute(f"ALTER TABLE `{fresh_db}`.members ADD COLUMN note2 VARCHAR(10)")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.members VALUES (1011, 'Dan', 30, 'n2')")
    with pytest.raises(SinkError, match="no column 'note2'"):
        run_micro_batch(config)
    assert resnapshot(config, members).schema_changes == ["add column note2 string AFTER age"]
    assert checkpoint_of(config, members).schemas[members]["columns"][-1]["name"] == "note2"
    mariadb.execute(f"ALTER TABLE `{fresh_db}`.members DROP COLUMN age")
    run_micro_batch(config)
    assert paimon_state(config, members) == ({"id": "INT NOT NULL", "name": "VARCHAR(17)", "note2": "VARCHAR(10)"},
                                             mysql_state(mariadb, members)[1])


def test_schema_check_accepts_a_stored_type_that_holds_every_produced_value(mariadb, fresh_db, members, tmp_path):
    """A table whose column is stored wider than the pipeline produces it now (an earlier release declared some
    computed columns with more precision, e.g. TIMESTAMP(6) where Flink CDC declares TIMESTAMP(3)) holds every
    value: the schema check passes and says so; the other way round it fails."""
    import pyarrow as pa

    from lakecdc.sink.evolution import ALTER_TYPE

    config = make_config(mariadb, fresh_db, tmp_path, "evolve")
    run_micro_batch(config)
    sink = PaimonSink(config.sink.catalog_options)
    apply_column_changes(sink, members, [ColumnChange(ALTER_TYPE, "age", pa.field("age", pa.int64()))])
    mariadb.execute(f"INSERT INTO `{fresh_db}`.members VALUES (1011, 'Dan', 30)")
    run_micro_batch(config)
    schema = {r.check: r for r in check_pipeline(config)}["schema_matches_source"]
    assert schema.passed and schema.applicable, schema.description
    assert schema.metadata["wider_in_paimon"] == "age: BIGINT holds INT", schema.metadata
    assert paimon_state(config, members)[1] == mysql_state(mariadb, members)[1]
    mariadb.execute(f"ALTER TABLE `{fresh_db}`.members MODIFY COLUMN age DECIMAL(30, 2)")  # not run yet: drift
    schema = {r.check: r for r in check_pipeline(config)}["schema_matches_source"]
    assert not schema.passed and "age: BIGINT in Paimon, DECIMAL(30, 2) from MySQL" in schema.description


def test_a_run_of_some_tables_coerces_rows_into_a_table_that_kept_a_dropped_column(mariadb, fresh_db, members,
                                                                                 tmp_path):
    """lenient mode keeps a column dropped upstream: a run of some tables (as Dagster's runs are: the plan
    restricted to them) coerces the rows into the stored table as a run of every table does."""
    config = make_config(mariadb, fresh_db, tmp_path, "lenient")
    run_micro_batch(config)
    mariadb.execute(f"ALTER TABLE `{fresh_db}`.members DROP COLUMN age")
    run_micro_batch(config, targets={members})  # applies the drop: Paimon keeps age
    mariadb.execute(f"INSERT INTO `{fresh_db}`.members VALUES (1011, 'Dan')")
    result = run_micro_batch(config, targets={members}, record_writes=True).tables[members]
    assert result.committed and paimon_state(config, members)[1][-1] == (1011, "Dan", None)
    from lakecdc.runtime.verify import verify_run

    checks = verify_run(config, PaimonSink(config.sink.catalog_options), members, result, result.plan)
    assert all(c.passed for c in checks), [c.description for c in checks]
