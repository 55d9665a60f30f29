"""s3:// warehouses against a private S3 server (moto's backend, tests/s3_server.py): options, the If-None-Match
probe, lock-free commits that lose nothing between racing processes, and a writer frozen (SIGSTOP) at the moment it
publishes its snapshot while another run commits.

Every table is read back over S3 by pypaimon-rust (an independent reader) and compared with MySQL."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from tests.crosscheck import assert_same_rows, mysql_rows, paimon_rows
from lakecdc.config import load_pipeline, parse_pipeline
from lakecdc.errors import CommitConflictError, PipelineConfigError, SinkError
from lakecdc.model import OP_COLUMN, TableId
from lakecdc.runtime import run_micro_batch
from lakecdc.runtime.checkpoint import read_checkpoint
from lakecdc.sink import PaimonSink
from lakecdc.sink import object_store
from lakecdc.sink.table_files import References, open_table_files
from lakecdc.sink.object_store import (PAUSE_BEFORE_PUBLISH, PAUSE_BEFORE_SCHEMA_PUBLISH, PAUSEPOINT_ENV,
                                      PAUSEPOINT_FILE_ENV)
from tests.dagster_processes import materialize_out_of_process
from tests.test_upkeep import PIPELINE as KEPT_UP_PIPELINE
from tests.test_upkeep import change as change_kept_up_tables
from tests.test_upkeep import create_tables as create_kept_up_tables
from tests.s3_server import ACCESS_KEY, KEY_ENV, REGION, SECRET_ENV, SECRET_KEY

pytestmark = pytest.mark.slow  # a private S3 server and full pipeline runs

BIN = Path(sys.executable).parent

PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: root
  password: ""
  tables: {db}.accounts, {db}.events
  server-id: 5960-5969
  scan.incremental.snapshot.chunk.key-column: {db}.events:id
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {warehouse}
  catalog.properties.s3.endpoint: {endpoint}
  catalog.properties.s3.access-key: ${{{key_env}}}
  catalog.properties.s3.secret-key: ${{{secret_env}}}
  catalog.properties.s3.region: {region}
  catalog.properties.s3.path.style.access: true
pipeline:
  name: s3 {db}
"""


@pytest.fixture
def s3_env(monkeypatch):
    monkeypatch.setenv(KEY_ENV, ACCESS_KEY)
    monkeypatch.setenv(SECRET_ENV, SECRET_KEY)
    for name in (PAUSEPOINT_ENV, PAUSEPOINT_FILE_ENV, "LAKECDC_FAILPOINT"):
        monkeypatch.delenv(name, raising=False)


def table_schema():
    return pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def rows(ids, tag: str) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "v": [f"{tag}{i}" for i in ids], OP_COLUMN: ["+I"] * len(ids)})


def rust_rows(options: dict, table: str) -> list[tuple]:
    """The table read over S3 by pypaimon-rust's standalone reader (not lakecdc's pypaimon path)."""
    from pypaimon_rust.datafusion import PaimonCatalog

    from lakecdc.sink.catalog import normalize_catalog_options, storage_options

    rust_table = PaimonCatalog(storage_options(normalize_catalog_options(options))).get_table(table)
    builder = rust_table.new_read_builder()
    batches = builder.new_read().read(builder.new_scan().plan().splits())
    return sorted(tuple(r.values()) for r in pa.Table.from_batches(batches).to_pylist()) if batches else []


# ------------------------------------------------------------------------------------------- options
def test_warehouse_schemes_and_s3_option_aliases():
    assert object_store.warehouse_problem("/tmp/wh") is None
    assert object_store.warehouse_problem("file:///tmp/wh") is None
    assert object_store.warehouse_problem("s3://bucket/wh") is None
    assert "names no bucket" in object_store.warehouse_problem("s3:///wh")
    for uri, why in (("oss://b/wh", "OSS warehouses are not supported"), ("hdfs://nn/wh", "HDFS"),
                     ("gs://b/wh", "GCS"), ("s3a://b/wh", "write the warehouse as s3://")):
        assert why in object_store.warehouse_problem(uri), uri
    # Paimon's names and the usual Hadoop/aws spellings mean the same; the libraries get one set of names
    aliases = {"warehouse": "s3://b/wh", "fs.s3a.access.key": "AK", "s3.secret.key": "SK",
               "fs.s3a.endpoint": "http://127.0.0.1:9", "s3a.path-style-access": "true", "s3.region": "eu-west-1"}
    assert object_store.normalize_s3_options(aliases) == {
        "warehouse": "s3://b/wh", "s3.access-key": "AK", "s3.secret-key": "SK", "s3.endpoint": "http://127.0.0.1:9",
        "s3.path-style-access": "true", "s3.region": "eu-west-1"}
    with pytest.raises(SinkError, match="both set s3.endpoint to different values"):
        object_store.S3Settings.from_options({"s3.endpoint": "http://a", "fs.s3a.endpoint": "http://b"})
    with pytest.raises(SinkError, match=r"s3.acess-key: unknown S3 option"):
        object_store.S3Settings.from_options({"s3.acess-key": "x"})
    with pytest.raises(SinkError, match="go together"):
        object_store.S3Settings.from_options({"s3.access-key": "x"})
    assert "SK" not in repr(object_store.S3Settings.from_options(aliases))


def test_pipeline_validation_accepts_s3_and_refuses_written_keys(tmp_path, s3_env):
    text = PIPELINE.format(port=3306, db="d", warehouse="s3://b/wh", endpoint="http://127.0.0.1:9",
                           key_env=KEY_ENV, secret_env=SECRET_ENV, region=REGION)
    config = parse_pipeline(text)
    assert config.sink.catalog_options["s3.secret-key"] == SECRET_KEY
    assert SECRET_KEY not in repr(config) and SECRET_KEY not in repr(config.sink)
    path = tmp_path / "p.yaml"
    path.write_text(text.replace(f"${{{SECRET_ENV}}}", SECRET_KEY))
    with pytest.raises(PipelineConfigError) as info:
        load_pipeline(path)
    assert "catalog.properties.s3.secret-key: an S3 key written in the pipeline file is refused" in str(info.value)
    assert SECRET_KEY not in str(info.value)
    with pytest.raises(PipelineConfigError, match="HDFS warehouses are not supported"):
        parse_pipeline(text.replace("s3://b/wh", "hdfs://nn/wh"))


def test_probe_refuses_a_store_that_ignores_if_none_match(s3_server, s3_warehouse):
    from tests.s3_server import S3Server

    object_store.probe_conditional_put(object_store.S3Settings.from_options(s3_warehouse),
                                       s3_warehouse["warehouse"])  # moto honours If-None-Match: accepted
    with S3Server(ignore_if_none_match=True) as careless:
        bucket = careless.new_bucket()
        options = careless.catalog_options(f"s3://{bucket}/wh")
        sink = PaimonSink(options)
        with pytest.raises(SinkError, match="the object store ignores If-None-Match"):
            sink.ensure_table(TableId("db", "t"), table_schema(), ["id"], [])
        assert careless.keys(bucket, "wh/db.db") == []  # refused before anything was written


# --------------------------------------------------------------------------------------- sink on S3
def test_sink_writes_reads_and_publishes_by_conditional_put(s3_server, s3_warehouse):
    sink = PaimonSink(s3_warehouse)
    target = TableId("db", "items")
    sink.ensure_table(target, table_schema(), ["id"], [], options={"bucket": "2"})
    for n in range(3):
        with sink.open_writer(target) as writer:
            writer.write(rows(range(n * 10, n * 10 + 10), "r"))
            assert writer.commit({"lakecdc.binlog.file": f"b.{n}"}) == n + 1
    expected = [(i, f"r{i}") for i in range(30)]
    assert sorted(tuple(r.values()) for r in sink.read_table(target).to_pylist()) == expected
    assert rust_rows(s3_warehouse, "db.items") == expected
    bucket = s3_warehouse["warehouse"][len("s3://"):].split("/")[0]
    snapshot_keys = s3_server.keys(bucket, "warehouse/db.db/items/snapshot/")
    assert sorted(k.rsplit("/", 1)[1] for k in snapshot_keys) == ["LATEST", "snapshot-1", "snapshot-2",
                                                                 "snapshot-3"]
    assert not [k for k in s3_server.keys(bucket) if k.endswith(".tmp")]  # no rename-style temporary objects
    # the table's file IO publishes a metadata file only if it does not exist: snapshot-2 cannot be replaced
    # its writer opens from the stored schema with the arguments pypaimon gives the Rust table (endpoint, keys)
    from pypaimon.write.native_commit import create_native_write_table

    from lakecdc.sink import _WRITE_OPTIONS
    from tests.test_sink import native_table_arguments

    monkeypatch = pytest.MonkeyPatch()
    ours = native_table_arguments(sink._write_target(target, _WRITE_OPTIONS)._open_native_table, monkeypatch)
    table = sink._require(target, _WRITE_OPTIONS)
    assert ours == native_table_arguments(lambda: create_native_write_table(table), monkeypatch)
    assert ours[2]["options"]["s3.access-key"] == ACCESS_KEY
    table = sink._load(target)
    snapshot_2 = f"{table.table_path}/snapshot/snapshot-2"
    stored = s3_server.client().get_object(Bucket=bucket, Key="warehouse/db.db/items/snapshot/snapshot-2")
    assert table.file_io.try_to_write_atomic(snapshot_2, "{}") is False
    assert s3_server.client().get_object(Bucket=bucket, Key="warehouse/db.db/items/snapshot/snapshot-2")[
        "ETag"] == stored["ETag"]


def test_a_snapshot_id_expiry_freed_is_not_published_again(s3_server):
    """publish_snapshot: the conditional put of snapshot-N stands when N-1 exists, or when the EARLIEST hint is not
    past N (an expiry that began after the put); when N-1 is gone and EARLIEST is past N (N had been expired and its
    key freed), the object just written is deleted and the id counts as taken; likewise snapshot-1 once anything
    was expired."""
    client, bucket = s3_server.client(), s3_server.new_bucket()
    keys = lambda: sorted(k.rsplit("/", 1)[1] for k in s3_server.keys(bucket))  # noqa: E731

    def put(name: str, data: bytes = b"{}") -> None:
        client.put_object(Bucket=bucket, Key=f"t/snapshot/{name}", Body=data)

    def publish(snapshot_id: int) -> bool:  # each writer's own bytes (equal bytes are one writer's retried put)
        return object_store.publish_snapshot(client, bucket, f"t/snapshot/snapshot-{snapshot_id}",
                                             os.urandom(8))

    assert publish(1) and publish(2) and not publish(2)  # new ids; a taken one
    put("EARLIEST", b"2")
    assert publish(3)  # snapshot 2 exists
    for name in ("snapshot-1", "snapshot-2", "snapshot-3"):  # expired, EARLIEST written first
        client.delete_object(Bucket=bucket, Key=f"t/snapshot/{name}")
    put("EARLIEST", b"5")
    put("snapshot-5")
    assert not publish(3) and not publish(1)  # expired ids: withdrawn
    assert keys() == ["EARLIEST", "snapshot-5"]
    put("EARLIEST", b"6")  # an expiry that deleted 5 right after a writer published 6 on top of it
    client.delete_object(Bucket=bucket, Key="t/snapshot/snapshot-5")
    put("EARLIEST", b"5")
    assert publish(6) and keys() == ["EARLIEST", "snapshot-6"]


def _commit_once(options: dict, worker: int, commit: int, barrier=None) -> str:
    """One "run": load the table's state (the base snapshot), optionally wait for the others, commit one row."""
    sink = PaimonSink(options, commit_user_prefix=f"w{worker}-")
    target = TableId("db", "log")
    sink.checkpoint(target)
    writer = sink.open_writer(target)
    writer.write(rows([worker * 1000 + commit], f"w{worker}-"))
    if barrier is not None:
        barrier.wait(60)
    try:
        writer.commit({"lakecdc.binlog.file": f"w{worker}.{commit}"})
        return "ok"
    except CommitConflictError as error:
        assert "commit conflict" in str(error) and "db.log" in str(error)
        return "conflict"


def _race_once(options: dict, worker: int, barrier) -> str:
    return _commit_once(options, worker, 0, barrier)


def _commit_k(options: dict, worker: int, k: int) -> int:
    """K commits, each retried (as the next run would) after a conflict; returns the conflicts met."""
    conflicts = 0
    for commit in range(1, k + 1):
        while _commit_once(options, worker, commit) == "conflict":
            conflicts += 1
    return conflicts


def test_racing_processes_lose_no_commit(s3_server, s3_warehouse):
    """N processes that loaded the same base snapshot commit at the same instant: exactly one wins, the others
    fail with CommitConflictError. Then N processes x K commits, retrying after conflicts: every row once."""
    n, k = 3, 2
    PaimonSink(s3_warehouse).ensure_table(TableId("db", "log"), table_schema(), [], [])  # an append table
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Manager().Barrier(n)
    # close() and join(), not the context manager: its terminate() relies on SIGTERM killing the workers, and a
    # worker blocked on the pool's queue lock never exits when the process inherited SIGTERM ignored
    pool = ctx.Pool(n)
    try:
        outcomes = pool.starmap(_race_once, [(s3_warehouse, w, barrier) for w in range(n)])
        assert sorted(outcomes) == ["conflict"] * (n - 1) + ["ok"]
        conflicts = pool.starmap(_commit_k, [(s3_warehouse, w, k) for w in range(n)])
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()
    winner = outcomes.index("ok")
    expected = sorted([(winner * 1000, f"w{winner}-{winner * 1000}")]
                      + [(w * 1000 + c, f"w{w}-{w * 1000 + c}") for w in range(n) for c in range(1, k + 1)])
    assert rust_rows(s3_warehouse, "db.log") == expected  # nothing lost, nothing doubled
    sink = PaimonSink(s3_warehouse)
    snapshots = sink.snapshots(TableId("db", "log"))
    assert [s.id for s in snapshots] == list(range(1, n * k + 2))
    assert len({s.properties["lakecdc.binlog.file"] for s in snapshots}) == n * k + 1
    print(f"conflicts met while committing freely: {conflicts}")


# ------------------------------------------------------------------------------------------ pipelines
@pytest.fixture
def s3_pipeline(mariadb, fresh_db, tmp_path, s3_server, s3_warehouse, s3_env):
    """A primary-key table and an append table (no primary key) in MySQL, and a pipeline writing them to S3."""
    mariadb.execute("CREATE TABLE accounts (id INT PRIMARY KEY, balance INT NOT NULL, note VARCHAR(20))",
                    database=fresh_db)
    mariadb.execute("CREATE TABLE events (id INT NOT NULL, what VARCHAR(20))", database=fresh_db)
    mariadb.execute("INSERT INTO accounts SELECT seq, seq * 10, 'a' FROM seq_1_to_200", database=fresh_db)
    mariadb.execute("INSERT INTO events SELECT seq, 'start' FROM seq_1_to_100", database=fresh_db)
    path = tmp_path / "s3.yaml"
    path.write_text(PIPELINE.format(port=mariadb.port, db=fresh_db, warehouse=s3_warehouse["warehouse"],
                                    endpoint=s3_server.endpoint, key_env=KEY_ENV, secret_env=SECRET_ENV,
                                    region=REGION))
    return load_pipeline(path), path, fresh_db


def assert_equal_to_mysql(mariadb, config, db: str, context: str) -> None:
    assert_same_rows(mariadb, config.sink.catalog_options, db, "accounts", context=context)
    columns = ["id", "what"]
    assert sorted(paimon_rows(config.sink.catalog_options, db, "events", columns)) == \
        sorted(mysql_rows(mariadb, db, "events", columns)), f"events differ {context}"


def change(mariadb, db: str, step: int) -> None:
    mariadb.execute(f"UPDATE accounts SET balance = balance + {step} WHERE id % 3 = {step % 3}", database=db)
    mariadb.execute(f"DELETE FROM accounts WHERE id % 17 = {step}", database=db)
    mariadb.execute(f"INSERT INTO accounts VALUES ({1000 + step}, {step}, 'new')", database=db)
    mariadb.execute(f"INSERT INTO events SELECT 1000 * {step} + seq, 'step{step}' FROM seq_1_to_20", database=db)


def test_pipeline_snapshot_and_binlog_runs_on_s3(mariadb, s3_pipeline):
    config, _, db = s3_pipeline
    first = run_micro_batch(config)
    assert {str(t.target) for t in first.committed} == {f"{db}.accounts", f"{db}.events"}
    assert_equal_to_mysql(mariadb, config, db, "after the snapshot")
    change(mariadb, db, 1)
    run_micro_batch(config)
    assert_equal_to_mysql(mariadb, config, db, "after a binlog run")


def start_pausing_writer(run: list[str], pausepoint: str, tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    """Start ``run`` so that it stops itself (SIGSTOP) at ``pausepoint``; returns it and its marker file."""
    marker = tmp_path / "paused"
    env = {**os.environ, PAUSEPOINT_ENV: pausepoint, PAUSEPOINT_FILE_ENV: str(marker)}
    return subprocess.Popen(run, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env), marker


def paused_at_publish(proc: subprocess.Popen, marker: Path, timeout: float = 120) -> str:
    """Wait until ``proc`` stopped itself at the publish point; returns the snapshot it was about to publish."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if marker.exists() and marker.read_text().endswith("\n"):
            pid, path = marker.read_text().split()
            assert int(pid) == proc.pid
            state = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "T":  # stopped
                return path
        time.sleep(0.02)
    out, err = proc.communicate(timeout=60) if proc.poll() is not None else ("", "")
    pytest.fail(f"the writer never stopped at the publish point (exit {proc.returncode}): {err[-3000:]}")


def test_writer_stopped_at_publish_fails_clearly_and_nothing_is_lost(mariadb, s3_pipeline, tmp_path):
    """Writer A is frozen with SIGSTOP right before it publishes its snapshot; writer B runs and commits; A resumes:
    its conditional put finds B's snapshot, it fails with a commit conflict naming the table, and publishes
    nothing. One more run later the primary-key table equals MySQL and the append table holds every MySQL row
    exactly once (a replayed or doubled change would show there)."""
    config, path, db = s3_pipeline
    run_micro_batch(config)  # the snapshot
    change(mariadb, db, 1)
    run = [str(BIN / "lakecdc"), "run", str(path)]
    writer_a, marker = start_pausing_writer(run, PAUSE_BEFORE_PUBLISH, tmp_path)
    try:
        publishing = paused_at_publish(writer_a, marker)
        sink = PaimonSink(config.sink.catalog_options)
        table = TableId(db, publishing.split(".db/")[1].split("/")[0])
        latest = sink.latest_snapshot_id(table)
        assert publishing.endswith(f"/snapshot/snapshot-{latest + 1}")  # not yet published
        change(mariadb, db, 2)
        writer_b = run_micro_batch(config)  # B in this process (A is the `lakecdc run` process)
        assert table in {t.target for t in writer_b.committed}
        assert PaimonSink(config.sink.catalog_options).latest_snapshot_id(table) == latest + 1  # B took the id
    finally:
        os.kill(writer_a.pid, signal.SIGCONT)
        out, err = writer_a.communicate(timeout=300)
    assert writer_a.returncode == 1, err[-3000:]
    assert f"table {table}: commit conflict: another writer published snapshot {latest + 1} first" in err, err
    assert "run the pipeline again" in err
    after = PaimonSink(config.sink.catalog_options)
    assert after.snapshots(table)[-1].commit_user != ""  # B's snapshot stands
    change(mariadb, db, 3)
    run_micro_batch(config)
    assert_equal_to_mysql(mariadb, config, db, "after the conflicting runs and one more run")


def test_writers_racing_a_schema_change_one_wins_the_other_fails_clearly(mariadb, s3_pipeline, tmp_path):
    """Two runs apply the same ADD COLUMN from the binlog: writer A is frozen right before it publishes schema-1,
    writer B applies the change and commits; A resumes: its schema-1 is refused (pypaimon alone would re-plan the
    change on top of B's schema), it fails with a schema commit conflict naming the table, and one more run leaves
    both tables equal to MySQL with the new column."""
    config, path, db = s3_pipeline
    run_micro_batch(config)  # the snapshot
    table = TableId(db, "accounts")
    assert PaimonSink(config.sink.catalog_options).describe(table).schema.names == ["id", "balance", "note"]
    change(mariadb, db, 1)
    mariadb.execute("ALTER TABLE accounts ADD COLUMN extra INT", database=db)
    mariadb.execute("UPDATE accounts SET extra = id WHERE id % 5 = 0", database=db)
    run = [str(BIN / "lakecdc"), "run", str(path)]
    writer_a, marker = start_pausing_writer(run, PAUSE_BEFORE_SCHEMA_PUBLISH, tmp_path)
    try:
        publishing = paused_at_publish(writer_a, marker)
        assert publishing.endswith("/accounts/schema/schema-1"), publishing  # not yet published
        run_micro_batch(config)  # writer B, in this process (A is the `lakecdc run` process)
        assert "extra" in PaimonSink(config.sink.catalog_options).describe(table).schema.names  # B's schema-1
    finally:
        os.kill(writer_a.pid, signal.SIGCONT)
        out, err = writer_a.communicate(timeout=300)
    assert writer_a.returncode == 1, err[-3000:]
    assert f"table {table}: schema commit conflict: another writer published schema 1 first" in err, err
    assert "run the pipeline again" in err
    assert PaimonSink(config.sink.catalog_options).describe(table).schema.names == ["id", "balance", "note", "extra"]
    mariadb.execute("UPDATE accounts SET extra = extra + 1 WHERE id % 7 = 0", database=db)
    mariadb.execute("INSERT INTO accounts (id, balance, note) VALUES (2000, 1, 'late')", database=db)
    run_micro_batch(config)
    assert_equal_to_mysql(mariadb, config, db, "after the racing schema changes and one more run (every column)")


# ------------------------------------------------------------------------------------ tutorial, CLI
from tests.test_tutorial import (CHANGES, ORDERS_KEY, REINSERT, TUTORIAL_YAML, assert_changes_step,  # noqa: E402
                           assert_reinsert_step, assert_snapshot_step, execute_all, tutorial)  # noqa: F401

TUTORIAL_WAREHOUSE = "catalog.properties.warehouse: file://${LAKECDC_WAREHOUSE:-/tmp/lakecdc-tutorial/warehouse}"


def test_tutorial_on_s3_through_dagster_and_the_cli(mariadb, tutorial, s3_server, tmp_path, capsys):
    """The Flink CDC tutorial with its warehouse on s3://: every step's exact rows, read back over S3 by
    pypaimon-rust's SQL engine, Dagster's asset checks, and status / describe / sql / upkeep from the CLI (describe
    and sql as `lakecdc` processes; status and upkeep through the CLI's main() here, their processes are run by
    tests/test_runtime.py and tests/test_upkeep.py)."""
    from lakecdc.cli import main
    import dagster as dg

    from lakecdc.dagster import build_definitions

    _, env = tutorial
    text = TUTORIAL_YAML.read_text()
    assert TUTORIAL_WAREHOUSE in text
    pipelines = tmp_path / "s3-pipelines"
    pipelines.mkdir()
    path = pipelines / "tutorial.yaml"
    warehouse = f"s3://{s3_server.new_bucket()}/tutorial"
    path.write_text(text.replace(TUTORIAL_WAREHOUSE,
                                 "catalog.properties.warehouse: " + s3_server.warehouse_yaml(warehouse)))
    config = load_pipeline(path)
    defs = build_definitions(pipelines)
    with dg.instance_for_test(temp_dir=env["DAGSTER_HOME"]) as instance:
        def materialize():
            result = dg.materialize(defs.assets, instance=instance, selection=[ORDERS_KEY])
            assert result.success
            checks = result.get_asset_check_evaluations()
            assert checks and all(c.passed for c in checks), [(c.check_name, c.metadata) for c in checks]

        materialize()
        assert_snapshot_step(config)
        execute_all(mariadb, CHANGES)
        materialize()
        assert_changes_step(config)
        execute_all(mariadb, [REINSERT])
        materialize()
        assert_reinsert_step(config)

    def in_process(*argv: str) -> str:
        capsys.readouterr()
        code = main(list(argv))
        out, err = capsys.readouterr()
        assert code == 0, err[-3000:]
        return out

    cli = [str(BIN / "lakecdc")]
    describe = subprocess.run(cli + ["describe", str(path), "inventory.orders"], capture_output=True, text=True,
                              timeout=300)
    sql = subprocess.run(cli + ["sql", str(path), "SELECT id, product_upper FROM inventory.orders ORDER BY id"],
                         capture_output=True, text=True, timeout=300)
    for done in (describe, sql):
        assert done.returncode == 0, done.stderr[-3000:]
    assert "inventory.orders" in in_process("status", str(path))
    assert "CREATE TABLE `inventory`.`orders`" in describe.stdout and "PARTITIONED BY (`order_day`)" in describe.stdout
    assert "| 102 | BLUE PEN      |" in sql.stdout and "3 row(s) in set" in sql.stdout
    [kept_up] = json.loads(in_process("upkeep", str(path), "--full", "--json"))["tables"]
    assert kept_up["skipped"] is None and kept_up["compaction_snapshot_id"] is not None, kept_up
    assert_reinsert_step(config)  # upkeep changed no row


WRITER = """
import json, sys
from lakecdc.errors import CommitConflictError
from lakecdc.model import OP_COLUMN, TableId
from lakecdc.sink import PaimonSink
import pyarrow as pa

options = json.loads(sys.argv[1])
sink = PaimonSink(options)
target = TableId("db", "kept")
sink.checkpoint(target)
writer = sink.open_writer(target)
writer.write(pa.table({"id": pa.array([999], pa.int64()), "v": ["late"], OP_COLUMN: ["+I"]}))
try:
    writer.commit({"lakecdc.binlog.file": "late"})
except CommitConflictError as error:
    print(error, file=sys.stderr)
    sys.exit(3)
"""


def test_upkeep_next_to_a_writer_stopped_at_publish(s3_server, s3_warehouse, tmp_path, s3_env):
    """A writer frozen right before it publishes its snapshot; table upkeep compacts the table meanwhile (and
    expires and removes orphans with the defaults); the writer resumes: its commit is refused, the compacted table
    is intact and holds exactly the committed rows."""
    from lakecdc.sink.upkeep import upkeep_table

    target = TableId("db", "kept")
    sink = PaimonSink(s3_warehouse)
    sink.ensure_table(target, table_schema(), ["id"], [], options={"bucket": "1"})
    for n in range(3):
        with sink.open_writer(target) as writer:
            writer.write(rows(range(n * 5, n * 5 + 5), "v"))
            writer.commit({"lakecdc.binlog.file": f"b.{n}"})
    marker = tmp_path / "paused"
    env = {**os.environ, PAUSEPOINT_ENV: PAUSE_BEFORE_PUBLISH, PAUSEPOINT_FILE_ENV: str(marker)}
    writer_a = subprocess.Popen([sys.executable, "-c", WRITER, json.dumps(s3_warehouse)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert paused_at_publish(writer_a, marker).endswith("/snapshot/snapshot-4")
        result = upkeep_table(PaimonSink(s3_warehouse), target, full_compaction=True)
        assert result.skipped is None and result.compaction_snapshot_id == 4, result.summary()
    finally:
        os.kill(writer_a.pid, signal.SIGCONT)
        out, err = writer_a.communicate(timeout=300)
    assert writer_a.returncode == 3, err[-3000:]
    assert "table db.kept: commit conflict: another writer published snapshot 4 first" in err
    expected = [(i, f"v{i}") for i in range(15)]
    assert rust_rows(s3_warehouse, "db.kept") == expected
    latest = PaimonSink(s3_warehouse).snapshots(target)[-1]
    assert latest.properties["lakecdc.upkeep"] in ("compact", "merge-manifests")
    assert latest.properties["lakecdc.binlog.file"] == "b.2"  # the checkpoint is the last committed one


# tests/test_upkeep.py's pipeline (upkeep thresholds of 3 files, 2 retained snapshots, no time retained, orphans of
# any age) with its primary-key table alone (accounts; the append table adds time, not cases), upkeep every 2 commits
UPKEEP_PIPELINE = (KEPT_UP_PIPELINE.replace("server-id: 5880", "server-id: {server_id}")
                   .replace("tables: {db}.accounts, {db}.events", "tables: {db}.accounts")
                   + "  lakecdc.upkeep.every-commits: 2\n")
UPKEEP_TABLES = ("accounts",)


@pytest.fixture
def upkeep_tables(mariadb, fresh_db, s3_env):
    """tests/test_upkeep.py's tables, and a function giving their pipeline (upkeep every 2 commits) into a
    warehouse."""
    create_kept_up_tables(mariadb, fresh_db)

    def pipeline(warehouse: str, server_id: int):
        return parse_pipeline(UPKEEP_PIPELINE.format(port=mariadb.port, db=fresh_db, warehouse=warehouse,
                                                     server_id=server_id))
    return pipeline, fresh_db


def upkeep_outcome(result) -> tuple | None:
    """What an upkeep did, without its file names and time (None: no upkeep)."""
    if result is None:
        return None
    return (result.skipped, result.compaction_snapshot_id, result.files_rewritten, result.upgrade_snapshot_id,
            result.manifest_snapshot_id, result.manifests_before, result.manifests_after, result.expired_snapshots,
            result.expired_files_deleted, result.orphan_files_deleted)


def table_layout(sink: PaimonSink, target: TableId) -> tuple:
    """The snapshots left, and the latest one's manifests and live data files per bucket (as counts)."""
    files = open_table_files(sink._require(target, {}), target)
    ids = files.snapshot_ids()
    latest = files.snapshot(ids[-1])
    buckets = Counter((r.partition_values, r.bucket) for r in files.live_entries(latest))
    return ids, len(files.data_manifests(latest)), sorted(buckets.values())


def test_upkeep_every_n_commits_on_s3_as_on_a_local_warehouse(mariadb, upkeep_tables, tmp_path, s3_server,
                                                              s3_warehouse):
    """The same pipeline into a local and an s3:// warehouse, upkeep every 2 commits: on S3 too upkeep runs only
    every second commit (the record of each table's last upkeep is an object of the bucket), compacts the small
    files, merges the manifests and expires old snapshots and their files exactly as on the local warehouse; the
    tables equal MySQL and nothing the kept snapshots do not reference is left on S3."""
    pipeline, db = upkeep_tables
    configs = {"local": pipeline(str(tmp_path / "warehouse"), 5970),
               "s3": pipeline(s3_server.warehouse_yaml(s3_warehouse["warehouse"]), 5971)}
    targets = [TableId(db, table) for table in UPKEEP_TABLES]
    outcomes: dict[str, list] = {where: [] for where in configs}
    for step in range(5):
        if step:
            change_kept_up_tables(mariadb, db, step)
        for where, config in configs.items():
            result = run_micro_batch(config)
            outcomes[where].append([upkeep_outcome(result.tables[target].upkeep) for target in targets])
    assert outcomes["s3"] == outcomes["local"]
    for table, steps in zip(UPKEEP_TABLES, zip(*outcomes["s3"])):
        # the first run (never kept up), then every second commit: three files per bucket each time, compacted,
        # manifests merged, older snapshots expired
        assert [step for step, outcome in enumerate(steps) if outcome is not None] == [0, 2, 4], (table, steps)
        for _, compaction, _, _, merge, before, after, expired, deleted, _ in (steps[2], steps[4]):
            assert compaction is not None and merge == compaction + 1 and after == 1 < before, (table, steps)
            assert expired and deleted, (table, steps)
    sinks = {where: PaimonSink(config.sink.catalog_options) for where, config in configs.items()}
    bucket, prefix = object_store.split_location(s3_warehouse["warehouse"])
    for target in targets:
        layout = table_layout(sinks["s3"], target)
        assert layout == table_layout(sinks["local"], target)
        ids, manifests, files_per_bucket = layout
        assert len(ids) == 2 and manifests == 1 and set(files_per_bucket) == {1}, (target, layout)
        files = open_table_files(sinks["s3"]._require(target, {}), target)
        kept = References()
        for snapshot_id in ids:
            kept.update(files.references(files.snapshot(snapshot_id), full_state_only=True))
        assert set(files.walk_files()) == kept.names  # the expired snapshots' files are gone from the bucket
        record = s3_server.client().get_object(Bucket=bucket, Key=f"{prefix}/.lakecdc/upkeep/{target}.json")
        assert json.loads(record["Body"].read()) == {"snapshot_id": ids[-1]}
        for where, config in configs.items():
            assert_same_rows(mariadb, config.sink.catalog_options, db, target.table, context=f"on {where}")


def test_upkeep_racing_a_run_on_s3_loses_no_commit(mariadb, upkeep_tables, tmp_path, s3_server, s3_warehouse):
    """``lakecdc upkeep --full`` frozen right before it publishes its compaction as snapshot 3; a run commits
    snapshot 3 meanwhile and its own upkeep (due every 2 commits) compacts, merges and expires snapshots 1 to 3, so
    the key snapshot-3 is free again; the frozen upkeep resumes: its conditional put succeeds, but snapshot 2 is
    gone and EARLIEST is past 3, so it withdraws its snapshot and fails with a commit conflict. The run's commit
    and checkpoint stand, no stale snapshot-3 is left, the LATEST hint names the latest snapshot, and the tables
    equal MySQL, then and after one more run."""
    _, db = upkeep_tables
    path = tmp_path / "upkeep.yaml"
    path.write_text(UPKEEP_PIPELINE.format(port=mariadb.port, db=db, server_id=5972,
                                           warehouse=s3_server.warehouse_yaml(s3_warehouse["warehouse"])))
    config = load_pipeline(path)
    target = TableId(db, "accounts")
    run_micro_batch(config)  # snapshot 1 (and its upkeep: nothing to do)
    change_kept_up_tables(mariadb, db, 1)
    run_micro_batch(config)  # snapshot 2: upkeep not due
    upkeep, marker = start_pausing_writer([str(BIN / "lakecdc"), "upkeep", str(path), "--full"],
                                          PAUSE_BEFORE_PUBLISH, tmp_path)
    try:
        assert paused_at_publish(upkeep, marker).endswith("/accounts/snapshot/snapshot-3")
        change_kept_up_tables(mariadb, db, 2)
        run = run_micro_batch(config).tables[target]
        assert run.snapshot_id == 3 and run.upkeep is not None and run.upkeep.expired_snapshots == [1, 2, 3], \
            run.upkeep and run.upkeep.summary()
    finally:
        os.kill(upkeep.pid, signal.SIGCONT)
        out, err = upkeep.communicate(timeout=300)
    assert upkeep.returncode == 1, out + err[-3000:]
    assert f"table {target}: commit conflict: another writer published snapshot 3 first and table upkeep has " \
           f"expired it since" in err, err
    sink = PaimonSink(config.sink.catalog_options)
    bucket, prefix = object_store.split_location(s3_warehouse["warehouse"])
    snapshot_dir = f"{prefix}/{db}.db/accounts/snapshot/"
    assert sorted(k[len(snapshot_dir):] for k in s3_server.keys(bucket, snapshot_dir) if k != snapshot_dir) == \
        ["EARLIEST", "LATEST", "snapshot-4", "snapshot-5"]
    hint = s3_server.client().get_object(Bucket=bucket, Key=f"{snapshot_dir}LATEST")["Body"].read()
    assert hint == b"5" and sink.latest_snapshot_id(target) == 5
    assert read_checkpoint(sink.checkpoint(target)).offset == run.offset  # the run's checkpoint stands
    assert_same_rows(mariadb, config.sink.catalog_options, db, "accounts", context="after the race")
    change_kept_up_tables(mariadb, db, 3)
    run_micro_batch(config)
    assert_same_rows(mariadb, config.sink.catalog_options, db, "accounts", context="after one more run")


def test_writing_sql_is_refused_on_s3():
    from lakecdc.sink.sql import run_sql

    options = {"metastore": "filesystem", "warehouse": "s3://bucket/wh", "s3.endpoint": "http://127.0.0.1:9"}
    with pytest.raises(SinkError, match="writing SQL is not supported on an s3:// warehouse"):
        run_sql(options, "INSERT INTO db.t VALUES (1)", write=True)


MULTIPROCESS_DEFS = """
import os

import dagster as dg

from lakecdc.dagster import build_definitions

# lakecdc's definitions with Dagster's multiprocess executor: the pipeline's op runs in its own step process
def _with_multiprocess_executor(base: dg.Definitions) -> dg.Definitions:
    return dg.Definitions(assets=base.assets, jobs=base.jobs, sensors=base.sensors, schedules=base.schedules,
                          resources=base.resources, executor=dg.multiprocess_executor)


defs = _with_multiprocess_executor(build_definitions(os.environ["LAKECDC_PIPELINES_DIR"]))
"""


def test_tables_of_a_run_on_s3_in_separate_processes(mariadb, s3_pipeline, tmp_path, monkeypatch):
    """Dagster's multiprocess executor writes the two tables of a run in the pipeline op's step process (one per run,
    not the launching process) on one s3:// warehouse; snapshot and binlog runs give tables equal to MySQL."""
    import dagster as dg

    from lakecdc.dagster.assets import pipeline_op_name

    config, path, db = s3_pipeline
    (tmp_path / "lakecdc_mp_defs.py").write_text(MULTIPROCESS_DEFS)
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("")
    monkeypatch.setenv("LAKECDC_PIPELINES_DIR", str(path.parent))  # read by the module, here and in the steps
    keys = [f"paimon/{db}/accounts", f"paimon/{db}/events"]
    for step in (0, 1):
        if step:
            change(mariadb, db, step)
        materialize_out_of_process("lakecdc_mp_defs", tmp_path, home, keys)
        assert_equal_to_mysql(mariadb, config, db, f"after run {step} on the multiprocess executor")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        runs = instance.get_runs()
        assert len(runs) == 2
        pids = {}
        for record in instance.all_logs(runs[0].run_id):
            if record.dagster_event is not None and record.dagster_event.event_type_value == "STEP_START":
                pids[record.step_key] = record.dagster_event.pid
        assert list(pids) == [pipeline_op_name(config)], pids  # one op for both tables
        assert os.getpid() not in pids.values(), pids  # not in the launching process


CELERY_DEFS = MULTIPROCESS_DEFS.replace("multiprocess", "celery").replace(
    "executor=dg.celery_executor", 'executor=celery_executor.configured({"broker": os.environ["LAKECDC_BROKER"], '
    '"backend": os.environ["LAKECDC_BROKER"]})').replace(
    "import dagster as dg\n", "import dagster as dg\nfrom dagster_celery import celery_executor\n")


# the second run in this process registers dagster-celery's submitting task again (the same function): harmless
@pytest.mark.filterwarnings("ignore:Task name 'execute_plan' is already registered")
def test_tables_of_a_run_on_s3_on_two_celery_workers(mariadb, s3_pipeline, tmp_path, monkeypatch):
    """Dagster's celery executor (dagster-celery, a private redis-server as broker) writes the two tables of a run
    in a celery worker's pool process (the pipeline's one op) on one s3:// warehouse; snapshot and binlog runs give
    tables equal to MySQL."""
    import dagster as dg

    from lakecdc.dagster.assets import pipeline_op_name
    from tests.s3_server import free_port

    config, path, db = s3_pipeline
    assert "celery_executor.configured" in CELERY_DEFS
    (tmp_path / "lakecdc_celery_defs.py").write_text(CELERY_DEFS)
    port = free_port()
    broker = f"redis://127.0.0.1:{port}/0"
    (tmp_path / "dagster_celery_config.py").write_text(  # read by the workers' app (dagster_celery.app)
        f"broker_url = {broker!r}\nresult_backend = {broker!r}\n")
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("")
    env = {**os.environ, "DAGSTER_HOME": str(home), "LAKECDC_PIPELINES_DIR": str(path.parent),
           "PYTHONPATH": str(tmp_path), "LAKECDC_BROKER": broker}
    servers = [subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                 "--appendonly", "no", "--dir", str(tmp_path)], cwd=tmp_path,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        for name in ("w1", "w2"):
            servers.append(subprocess.Popen(
                [str(BIN / "celery"), "-A", "dagster_celery.app", "worker", "--concurrency", "1",
                 "--prefetch-multiplier", "1", "-n", f"{name}@lakecdc", "-Q", "dagster", "-l", "warning"],
                cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=open(tmp_path / f"{name}.log", "w")))
        keys = [f"paimon/{db}/accounts", f"paimon/{db}/events"]
        for name in ("LAKECDC_PIPELINES_DIR", "LAKECDC_BROKER"):  # read by the module here too
            monkeypatch.setenv(name, env[name])
        for step in (0, 1):
            if step:
                change(mariadb, db, step)
            materialize_out_of_process("lakecdc_celery_defs", tmp_path, home, keys)
            assert_equal_to_mysql(mariadb, config, db, f"after run {step} on the celery executor")
        worker_pids = set()
        for worker in servers[1:]:
            children = Path(f"/proc/{worker.pid}/task/{worker.pid}/children").read_text().split()
            worker_pids.update(int(child) for child in children)  # each worker's one pool process
        with dg.DagsterInstance.from_config(str(home)) as instance:
            runs = instance.get_runs()
            assert len(runs) == 2
            for run in runs:
                pids = {}
                for record in instance.all_logs(run.run_id):
                    if record.dagster_event is not None and record.dagster_event.event_type_value == "STEP_START":
                        pids[record.step_key] = record.dagster_event.pid
                assert list(pids) == [pipeline_op_name(config)] and set(pids.values()) <= worker_pids, \
                    (pids, worker_pids)
        assert len(worker_pids) == 2
    finally:
        for server in reversed(servers):
            server.terminate()
        for server in reversed(servers):
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
