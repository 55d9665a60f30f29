"""Table upkeep (lakecdc.sink.upkeep) on real Paimon tables: compaction, manifest merging, snapshot expiry and
orphan files keep every reader's rows (pypaimon, pypaimon-rust's reader and its DataFusion SQL), retained snapshots
stay readable by id, expired files are really gone from disk, the lakecdc checkpoint survives, the table lock is
respected, and a run killed during upkeep leaves a correct table."""

from __future__ import annotations

import dataclasses
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.crosscheck import assert_same_rows
from lakecdc.config import UpkeepConfig, parse_pipeline
from lakecdc.errors import PipelineConfigError, SinkError
from lakecdc.model import TableId
from lakecdc.paimon import Catalog, Row, RowKind
from lakecdc.runtime import run_micro_batch
from lakecdc.runtime.checkpoint import read_checkpoint
from lakecdc.sink import PaimonSink, native
from lakecdc.sink.upkeep import COMPACT, MERGE_MANIFESTS, UPKEEP_PROPERTY, UpkeepPolicy
from lakecdc.sink.sql import run_sql
from lakecdc.sink.table_files import References, TableFiles

T = TableId("db", "t")
CLI = str(Path(sys.executable).parent / "lakecdc")


# ------------------------------------------------------------------------------------------------ helpers
def table_dir(warehouse, table_id: TableId = T) -> Path:
    return Path(warehouse) / f"{table_id.database}.db" / table_id.table


def files_of(catalog: Catalog, table_id: TableId = T) -> TableFiles:
    sink = catalog._sink
    return TableFiles(sink._require(table_id, {}), table_dir(catalog.warehouse, table_id), table_id)


def on_disk(warehouse, table_id: TableId = T) -> set[str]:
    """Names of every file under the table directory except schemas and snapshot/hint files."""
    return set(TableFiles(None, table_dir(warehouse, table_id), table_id).walk_files())


def referenced(files: TableFiles, snapshot_ids, *, full_state_only: bool = True) -> References:
    refs = References()
    for snapshot_id in snapshot_ids:
        refs.update(files.references(files.snapshot(snapshot_id), full_state_only=full_state_only))
    return refs


def api_rows(table, snapshot_id: int | None = None) -> list[tuple]:
    return sorted(tuple(r.values()) for r in table.read(snapshot_id=snapshot_id).to_arrow().to_pylist())


def rust_rows(warehouse, table_id: TableId = T, snapshot_id: int | None = None) -> list[tuple]:
    """The independent pypaimon-rust reader (time travel through its scan option)."""
    from pypaimon_rust.datafusion import PaimonCatalog

    table = PaimonCatalog({"warehouse": str(warehouse)}).get_table(str(table_id))
    builder = table.new_read_builder({"scan.snapshot-id": str(snapshot_id)} if snapshot_id else None)
    batches = builder.new_read().read(builder.new_scan().plan().splits())
    return sorted(tuple(r.values()) for b in batches for r in b.to_pylist())


def sql_rows(warehouse, table_id: TableId = T) -> list[tuple]:
    return sorted(tuple(r.values()) for r in run_sql({"warehouse": str(warehouse)}, f"SELECT * FROM {table_id}")
                  .to_pylist())


def assert_all_readers(table, warehouse, expected: list[tuple]) -> None:
    assert api_rows(table) == expected
    assert rust_rows(warehouse) == expected
    assert sql_rows(warehouse) == expected


def pk_table(tmp_path, **options):
    catalog = Catalog(tmp_path / "wh")
    table = catalog.create_table(str(T), [("id", "BIGINT NOT NULL"), ("v", "STRING"), ("p", "STRING NOT NULL")],
                                 primary_keys=["id", "p"], partition_keys=["p"], options=options)
    return catalog, table


class Model:
    """Random primary-key changes written to a table and kept in a dict, to know the expected rows."""

    def __init__(self, table, seed: int = 7, partitions: str = "ab"):
        self.table, self.rng, self.partitions, self.rows = table, random.Random(seed), partitions, {}

    def commit(self, changes: int = 12, partitions: str | None = None) -> int:
        batch, touched = [], set()
        for _ in range(changes):
            key = (self.rng.randint(0, 40), self.rng.choice(partitions or self.partitions))
            if key in touched:
                continue
            touched.add(key)
            if key in self.rows and self.rng.random() < 0.25:
                batch.append(Row.of_kind(RowKind.DELETE, key[0], self.rows.pop(key), key[1]))
            else:
                value = f"v{self.rng.randint(0, 10**6)}"
                kind = RowKind.UPDATE_AFTER if key in self.rows else RowKind.INSERT
                batch.append(Row.of_kind(kind, key[0], value, key[1]))
                self.rows[key] = value
        return self.table.write(batch).snapshot_id

    def expected(self) -> list[tuple]:
        return sorted((k[0], v, k[1]) for k, v in self.rows.items())


# -------------------------------------------------------------------------------------- the Python API
def test_compaction_and_expiry_keep_rows_and_retained_snapshots_readable(tmp_path):
    catalog, table = pk_table(tmp_path, **{"dynamic-bucket.target-row-num": "6", "snapshot.num-retained.min": "3",
                                           "snapshot.time-retained": "0 ms", "snapshot.expire.limit": "100"})
    warehouse = catalog.warehouse
    model = Model(table)
    history = {}
    for _ in range(9):
        snapshot_id = model.commit()
        history[snapshot_id] = model.expected()
    assert len(os.listdir(table_dir(warehouse) / "p=a")) > 1  # several dynamic buckets
    files = files_of(catalog)
    every = referenced(files, history, full_state_only=False)
    assert_all_readers(table, warehouse, model.expected())

    result = table.upkeep(orphan_older_than_seconds=0)

    assert result.skipped is None and result.compaction_snapshot_id == 10 and result.manifest_snapshot_id == 11
    assert result.manifests_before == 10 and result.manifests_after == 1
    assert result.expired_snapshots == list(range(1, 9))  # 9, 10 and 11 are the three retained
    snapshots = table.snapshots()
    assert [(s.id, s.commit_kind, s.properties.get(UPKEEP_PROPERTY)) for s in snapshots] == [
        (9, "APPEND", None), (10, "OVERWRITE", COMPACT), (11, "COMPACT", MERGE_MANIFESTS)]
    assert_all_readers(table, warehouse, model.expected())
    # retained snapshots read as before, by every reader; expired ones are refused
    for snapshot_id in (9, 10, 11):
        assert api_rows(table, snapshot_id) == history[9] == rust_rows(warehouse, snapshot_id=snapshot_id)
    with pytest.raises(SinkError, match="snapshot 3 has expired"):
        table.read(snapshot_id=3)
    assert (table_dir(warehouse) / "snapshot" / "EARLIEST").read_text() == "9"
    # the files only expired snapshots used are gone; everything the retained ones use is there
    files = files_of(catalog)
    kept = referenced(files, [9, 10, 11])
    present = on_disk(warehouse)
    assert kept.names <= present
    gone = every.names - kept.names
    assert gone and not gone & present
    assert present - kept.names == set()  # no leftovers at all (orphans older than 0 s are removed)
    assert not any(name.startswith("snapshot-") and int(name[9:]) < 9
                   for name in os.listdir(table_dir(warehouse) / "snapshot"))

    # the table goes on: later changes apply on top of the compacted files, change reads skip upkeep snapshots
    for _ in range(2):
        model.commit()
    assert_all_readers(table, warehouse, model.expected())
    changes = table.read_changes(9).to_arrow()
    assert changes.num_rows and set(changes.column("rowkind").to_pylist()) <= {"+I", "+U", "-D"}
    assert changes.num_rows == len(table.read_changes(11).to_arrow())  # snapshots 10 and 11 add no change rows


def test_manifests_and_files_stay_bounded_over_many_commits(tmp_path):
    catalog, table = pk_table(tmp_path, **{"bucket": "2", "snapshot.num-retained.min": "2",
                                           "snapshot.time-retained": "0 ms", "manifest.merge-min-count": "5",
                                           "num-sorted-run.compaction-trigger": "4"})
    model = Model(table, seed=3)
    for _ in range(40):
        model.commit(changes=6)
        table.upkeep(orphan_older_than_seconds=0)
    files = files_of(catalog)
    latest = files.snapshot(files.snapshot_ids()[-1])
    assert len(files.data_manifests(latest)) < 5
    assert len(files.snapshot_ids()) <= 3
    # 2 partitions x 2 buckets x fewer than 4 runs, for at most 3 snapshots
    data = [n for n in on_disk(catalog.warehouse) if n.startswith("data-")]
    assert len(data) <= 2 * 2 * 4 * 3
    assert_all_readers(table, catalog.warehouse, model.expected())


def test_only_due_partitions_are_rewritten_and_an_emptied_partition_is_dropped(tmp_path):
    catalog, table = pk_table(tmp_path, **{"bucket": "1", "num-sorted-run.compaction-trigger": "3",
                                           "snapshot.num-retained.min": "1", "snapshot.time-retained": "0 ms"})
    model = Model(table, partitions="abc")
    model.commit(partitions="b")
    for _ in range(3):
        model.commit(partitions="a")
    files = files_of(catalog)

    def data_files(partition: str) -> set[str]:
        latest = files.snapshot(files.snapshot_ids()[-1])
        return {r.name for r in files.live_entries(latest) if r.partition_values == (partition,)}

    b_files, a_files = data_files("b"), data_files("a")
    result = table.compact()
    assert result.partitions_compacted == 1 and result.files_rewritten == 3
    assert data_files("b") == b_files and len(data_files("a")) == 1 and data_files("a") != a_files
    assert_all_readers(table, catalog.warehouse, model.expected())

    # partition c: three commits, then every row deleted -> due but without live rows: whole-table rewrite
    for _ in range(2):
        model.commit(partitions="c")
    deletes = [Row.of_kind(RowKind.DELETE, k[0], v, "c") for k, v in model.rows.items() if k[1] == "c"]
    table.write(deletes)
    model.rows = {k: v for k, v in model.rows.items() if k[1] != "c"}
    result = table.upkeep(orphan_older_than_seconds=0)
    assert result.partitions_compacted == 3
    assert data_files("c") == set() and not (table_dir(catalog.warehouse) / "p=c").exists()
    assert_all_readers(table, catalog.warehouse, model.expected())


def test_a_trigger_of_one_compacts_what_each_commit_touched_and_nothing_else(tmp_path):
    catalog, table = pk_table(tmp_path, **{"bucket": "1", "num-sorted-run.compaction-trigger": "1"})
    model = Model(table, partitions="ab")
    model.commit(partitions="a")
    model.commit(partitions="b")
    table.upkeep(orphan_older_than_seconds=0)  # a single file per bucket: nothing to merge
    files = files_of(catalog)

    def live() -> dict[str, set[str]]:
        latest = files.snapshot(files.snapshot_ids()[-1])
        found: dict[str, set[str]] = {"a": set(), "b": set()}
        for r in files.live_entries(latest):
            found[r.partition_values[0]].add(r.name)
        return found

    before = live()
    assert len(before["a"]) == len(before["b"]) == 1
    model.commit(partitions="a")  # a second sorted run in a's bucket: rewritten at the next upkeep, b is not
    assert table.upkeep(orphan_older_than_seconds=0).partitions_compacted == 1
    after = live()
    assert after["b"] == before["b"] and len(after["a"]) == 1 and after["a"] != before["a"]
    assert table.upkeep(orphan_older_than_seconds=0).partitions_compacted == 0  # one file per bucket: nothing
    assert live() == after
    assert_all_readers(table, catalog.warehouse, model.expected())


def bucket_files(catalog: Catalog) -> dict[str, int]:
    """Live data files per partition of the latest snapshot."""
    files = files_of(catalog)
    found: Counter = Counter()
    for r in files.live_entries(files.snapshot(files.snapshot_ids()[-1])):
        found[r.partition_values[0]] += 1
    return dict(found)


@pytest.mark.parametrize("bucket", ["1", "-1"])
def test_small_buckets_are_compacted_before_the_trigger_by_total_size(tmp_path, bucket):
    """Paimon's compaction.total-size-threshold: a bucket of two or more sorted runs whose files total less is
    compacted whatever the trigger; a bucket at or above it waits for the trigger."""
    catalog, table = pk_table(tmp_path, bucket=bucket, **{"compaction.total-size-threshold": "1 mb"})
    model = Model(table, partitions="ab")
    model.commit(partitions="a")
    model.commit(partitions="b")
    assert table.upkeep(orphan_older_than_seconds=0).partitions_compacted == 0  # one sorted run each
    model.commit(partitions="a")
    result = table.upkeep(orphan_older_than_seconds=0)
    assert result.partitions_compacted == 1 and result.files_rewritten == 2
    assert bucket_files(catalog) == {"a": 1, "b": 1}
    assert_all_readers(table, catalog.warehouse, model.expected())

    # a threshold below the bucket's size: the default trigger (5) decides again
    big = Catalog(tmp_path / "wh2")
    table = big.create_table(str(T), [("id", "BIGINT NOT NULL"), ("v", "STRING"), ("p", "STRING NOT NULL")],
                             primary_keys=["id", "p"], partition_keys=["p"],
                             options={"bucket": bucket, "compaction.total-size-threshold": "100 b"})
    model = Model(table, partitions="a")
    for _ in range(2):
        model.commit()
    assert table.upkeep(orphan_older_than_seconds=0).partitions_compacted == 0
    assert bucket_files(big) == {"a": 2}


def test_append_table_compaction_keeps_duplicate_rows(tmp_path):
    catalog = Catalog(tmp_path / "wh")
    table = catalog.create_table(str(T), [("k", "INT"), ("v", "STRING")], options={"compaction.min.file-num": "3"})
    written = Counter()
    for i in range(4):
        rows = [(i % 2, "same"), (i, f"x{i}"), (None, "null key")]
        table.write(rows)
        written.update(rows)
    result = table.compact()
    assert result.files_rewritten == 4 and result.compaction_snapshot_id is not None
    assert Counter(tuple(r.values()) for r in table.read().to_arrow().to_pylist()) == written
    assert Counter(tuple(r.values()) for r in run_sql({"warehouse": catalog.warehouse}, f"SELECT * FROM {T}")
                   .to_pylist()) == written


def test_compaction_of_a_changelog_table_adds_no_changelog(tmp_path):
    catalog = Catalog(tmp_path / "wh")
    table = catalog.create_table(str(T), [("id", "INT NOT NULL"), ("v", "STRING")], primary_keys=["id"],
                                 options={"bucket": "1", "changelog-producer": "input",
                                          "num-sorted-run.compaction-trigger": "2"})
    table.write([Row.of_kind(RowKind.INSERT, 1, "a"), Row.of_kind(RowKind.INSERT, 2, "b")])
    table.write([Row.of_kind(RowKind.UPDATE_AFTER, 1, "a2"), Row.of_kind(RowKind.DELETE, 2, "b")])
    result = table.compact()
    assert result.compaction_snapshot_id == 3
    table.write([Row.of_kind(RowKind.INSERT, 3, "c")])
    files = files_of(catalog)
    assert files.snapshot(3).changelog_manifest_list is None and files.snapshot(4).changelog_manifest_list is None
    changes = table.read_changes(0).to_arrow().to_pylist()
    assert [(c["rowkind"], c["id"], c["v"]) for c in changes] == [
        ("+I", 1, "a"), ("+I", 2, "b"), ("+U", 1, "a2"), ("-D", 2, "b"), ("+I", 3, "c")]
    assert api_rows(table) == [(1, "a2"), (3, "c")]


def test_orphan_files_are_removed_only_when_old_enough(tmp_path):
    catalog, table = pk_table(tmp_path, **{"bucket": "1"})
    model = Model(table)
    for _ in range(3):
        model.commit()
    directory = table_dir(catalog.warehouse)
    strays = [directory / "p=a" / "bucket-0" / "data-orphan-0.parquet", directory / "manifest" / "manifest-orphan-0",
              directory / "index" / "index-orphan-0", directory / "p=zz" / "bucket-3" / "data-orphan-1.parquet"]
    for stray in strays:
        stray.parent.mkdir(parents=True, exist_ok=True)
        stray.write_bytes(b"left by a crashed writer")
    before = on_disk(catalog.warehouse)

    assert table.remove_orphan_files(older_than_seconds=3600).orphan_files_deleted == 0
    assert on_disk(catalog.warehouse) == before
    an_hour_ago = time.time() - 7200
    for stray in strays:
        os.utime(stray, (an_hour_ago, an_hour_ago))
    assert table.remove_orphan_files(older_than_seconds=3600).orphan_files_deleted == len(strays)
    assert on_disk(catalog.warehouse) == before - {s.name for s in strays}
    assert not (directory / "p=zz").exists()  # its emptied directories went too
    assert_all_readers(table, catalog.warehouse, model.expected())


def test_upkeep_waits_for_or_skips_a_locked_table(tmp_path):
    catalog, table = pk_table(tmp_path, **{"bucket": "1", "num-sorted-run.compaction-trigger": "2"})
    model = Model(table)
    for _ in range(3):
        model.commit()
    other = PaimonSink({"warehouse": catalog.warehouse})
    with other.lock(T, owner="another writer"):
        result = table.upkeep()
        assert result.skipped and "being written by another writer" in result.skipped and "another writer" in \
            result.skipped
        assert table.latest_snapshot_id() == 3
    held = other.lock(T, owner="a slow writer")
    held.__enter__()
    releaser = threading.Timer(0.5, held.__exit__, (None, None, None))
    releaser.start()
    try:
        result = table.upkeep(wait_seconds=60)
    finally:
        releaser.join()
    assert result.skipped is None and result.compaction_snapshot_id == 4
    assert_all_readers(table, catalog.warehouse, model.expected())


@pytest.mark.parametrize("option, value, message", [
    ("snapshot.num-retained.min", "0", "must be at least 1"),
    ("snapshot.num-retained.max", "2", "must not be smaller than snapshot.num-retained.min"),
    ("snapshot.time-retained", "soon", "expected a duration"),
    ("manifest.target-file-size", "big", "manifest.target-file-size"),
    ("compaction.total-size-threshold", "tiny", "compaction.total-size-threshold"),
])
def test_bad_upkeep_options_are_refused_when_the_pipeline_is_validated(option, value, message):
    text = f"""
source: {{type: mysql, hostname: 127.0.0.1, username: root, tables: db.t}}
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: /tmp/unused
  table.properties.{option}: "{value}"
pipeline: {{name: p}}
"""
    with pytest.raises(PipelineConfigError, match=message) as error:
        parse_pipeline(text)
    assert "sink.table.properties" in str(error.value)


def test_upkeep_options_in_paimon_style():
    policy = UpkeepPolicy.from_options({"snapshot.time-retained": "2 min", "manifest.target-file-size": "2 mb",
                                        "snapshot.num-retained.max": "20", "write-only": "true"})
    assert (policy.time_retained_ms, policy.manifest_target_size, policy.retained_max, policy.write_only) == (
        120_000, 2 * 1024 * 1024, 20, True)
    config = parse_pipeline("""
source: {type: mysql, hostname: 127.0.0.1, username: root, tables: db.t}
sink: {type: paimon, catalog.properties.metastore: filesystem, catalog.properties.warehouse: /tmp/unused}
pipeline:
  name: p
  lakecdc.upkeep.every-commits: 5
  lakecdc.upkeep.orphan-files.older-than: 2d
  lakecdc.upkeep.schedule: "0 3 * * *"
""")
    assert config.upkeep == UpkeepConfig(enabled=True, every_commits=5, orphan_older_than_seconds=172800.0,
                                         schedule="0 3 * * *")


def test_expiry_keeps_the_snapshot_holding_the_checkpoint(tmp_path):
    catalog, table = pk_table(tmp_path, **{"bucket": "1", "snapshot.num-retained.min": "1",
                                           "snapshot.time-retained": "0 ms"})
    model = Model(table)
    model.commit()
    with table.new_write() as write:
        write.write([Row.of_kind(RowKind.INSERT, 99, "cp", "a")])
        checkpoint = {"lakecdc.binlog.file": "binlog.000007", "lakecdc.binlog.pos": "1234", "lakecdc.phase": "binlog"}
        assert write.commit(checkpoint).snapshot_id == 2
    model.rows[(99, "a")] = "cp"
    for _ in range(3):  # later snapshots without a checkpoint (e.g. written through this API)
        model.commit()
    result = table.expire_snapshots()
    assert result.expired_snapshots == [1]
    assert [s.id for s in table.snapshots()] == [2, 3, 4, 5]
    assert catalog._sink.checkpoint(T) == checkpoint
    assert_all_readers(table, catalog.warehouse, model.expected())


def test_when_a_pipeline_runs_upkeep(tmp_path):
    from lakecdc.runtime.upkeep import upkeep_after_commits

    def config(**pipeline):
        lines = "".join(f"  {k}: {v}\n" for k, v in pipeline.items())
        return parse_pipeline(f"""
source: {{type: mysql, hostname: 127.0.0.1, username: root, tables: db.t}}
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {tmp_path / "wh"}
  table.properties.num-sorted-run.compaction-trigger: "2"
pipeline:
  name: p
{lines}""")

    catalog, table = pk_table(tmp_path, bucket="1")
    model = Model(table)
    sink = PaimonSink({"warehouse": catalog.warehouse})
    every3 = config(**{"lakecdc.upkeep.every-commits": 3})
    assert upkeep_after_commits(config(**{"lakecdc.upkeep.enabled": "false"}), sink, [T]) == {}
    model.commit()
    first = upkeep_after_commits(every3, sink, [T])[T]  # never kept up: due
    assert first.skipped is None and first.compaction_snapshot_id is None  # one file per bucket: nothing to do
    model.commit()
    model.commit()
    assert upkeep_after_commits(every3, sink, [T]) == {}  # 2 commits since the last upkeep
    model.commit()
    assert upkeep_after_commits(every3, sink, [T])[T].compaction_snapshot_id == 5
    model.commit()
    write_only = config(**{"lakecdc.upkeep.every-commits": 1}).sink
    write_only.table_properties["write-only"] = "true"
    skipped = upkeep_after_commits(dataclasses.replace(config(), sink=write_only), sink, [T])[T]
    assert "write-only" in skipped.skipped
    assert_all_readers(table, catalog.warehouse, model.expected())


# ------------------------------------------------------------------------------------------ the pipeline
PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: root
  password: ""
  tables: {db}.accounts, {db}.events
  server-id: 5880
  scan.incremental.snapshot.chunk.key-column: {db}.events:amount
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {warehouse}
  table.properties.num-sorted-run.compaction-trigger: "3"
  table.properties.compaction.min.file-num: "3"
  table.properties.snapshot.num-retained.min: "2"
  table.properties.snapshot.time-retained: 0 ms
pipeline:
  name: upkeep {db}
  lakecdc.upkeep.orphan-files.older-than: 0s
"""


def create_tables(mariadb, db: str) -> None:
    """The pipeline's MySQL tables: accounts (primary key, 300 rows) and events (no key, 50 rows)."""
    mariadb.execute("CREATE TABLE accounts (id INT PRIMARY KEY, owner VARCHAR(20), balance INT)", database=db)
    mariadb.execute("CREATE TABLE events (payload VARCHAR(20), amount INT)", database=db)
    mariadb.execute("INSERT INTO accounts SELECT seq, CONCAT('o', seq), seq FROM seq_1_to_300", database=db)
    mariadb.execute("INSERT INTO events SELECT CONCAT('e', seq), seq FROM seq_1_to_50", database=db)


@pytest.fixture
def lake(mariadb, fresh_db, tmp_path):
    create_tables(mariadb, fresh_db)
    path = tmp_path / "pipeline.yaml"
    path.write_text(PIPELINE.format(port=mariadb.port, db=fresh_db, warehouse=tmp_path / "warehouse"))
    return parse_pipeline(path.read_text(), path=str(path)), path, fresh_db


def change(mariadb, db: str, round_: int) -> None:
    mariadb.execute(f"UPDATE accounts SET balance = balance + {round_} WHERE id % 7 = {round_ % 7}", database=db)
    mariadb.execute(f"DELETE FROM accounts WHERE id % 50 = {round_}", database=db)
    mariadb.execute(f"INSERT INTO accounts VALUES ({1000 + round_}, 'new', {round_})", database=db)
    mariadb.execute(f"INSERT INTO events VALUES ('r{round_}', {round_}), ('r{round_}', {round_})", database=db)


def assert_lake_equals_mysql(mariadb, config, db: str, context: str = "") -> None:
    assert_same_rows(mariadb, config.sink.catalog_options, db, "accounts", context=context)
    assert_same_rows(mariadb, config.sink.catalog_options, db, "events", context=context)


def test_pipeline_upkeep_keeps_rows_and_checkpoint(mariadb, lake):
    config, _, db = lake
    sink = PaimonSink(config.sink.catalog_options)
    accounts = TableId(db, "accounts")
    run_micro_batch(config)
    compactions = 0
    for round_ in range(1, 6):
        change(mariadb, db, round_)
        result = run_micro_batch(config)
        table = result.tables[accounts]
        assert table.upkeep is not None and table.upkeep.skipped is None
        compactions += table.upkeep.compaction_snapshot_id is not None
        # the checkpoint read from the latest snapshot is the one this run committed
        checkpoint = read_checkpoint(sink.checkpoint(accounts))
        assert checkpoint.offset == table.offset and checkpoint.phase == "binlog"
        assert_lake_equals_mysql(mariadb, config, db, f"round {round_}")
    assert compactions >= 1
    files = TableFiles(sink._require(accounts, {}), table_dir(config.sink.catalog_options["warehouse"], accounts),
                       accounts)
    ids = files.snapshot_ids()
    assert len(ids) <= 4 and (files.dir / "snapshot" / "EARLIEST").read_text() == str(ids[0])
    kept = referenced(files, ids)
    assert on_disk(files.dir.parent.parent, accounts) == kept.names  # expired and orphan files are gone
    # a quiet run commits nothing and does no upkeep
    latest = ids[-1]
    assert run_micro_batch(config).tables[accounts].upkeep is None
    assert sink.latest_snapshot_id(accounts) == latest


def test_upkeep_cli_and_dagster_job(mariadb, lake, tmp_path):
    import dagster as dg

    from lakecdc.dagster import build_pipeline_definitions

    config, path, db = lake
    config = dataclasses.replace(config, upkeep=UpkeepConfig(enabled=False))
    run_micro_batch(config)
    for round_ in range(1, 3):
        change(mariadb, db, round_)
        run_micro_batch(config)
    sink = PaimonSink(config.sink.catalog_options)
    accounts, events = TableId(db, "accounts"), TableId(db, "events")
    assert sink.latest_snapshot_id(accounts) == 3

    with sink.lock(accounts, owner="a test holding the table"):
        listed = subprocess.run([CLI, "upkeep", str(path), "--table", str(accounts)], capture_output=True,
                                text=True)
        assert listed.returncode == 0, listed.stderr
        assert "upkeep skipped" in listed.stdout and "a test holding the table" in listed.stdout
    done = subprocess.run([CLI, "upkeep", "--json", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    import json

    by_table = {t["table"]: t for t in json.loads(done.stdout)["tables"]}
    assert set(by_table) == {str(accounts), str(events)}  # the pipeline's tables, found in the warehouse
    assert by_table[str(accounts)]["compaction_snapshot_id"] == 4  # 3 files >= the trigger of 3
    assert_lake_equals_mysql(mariadb, config, db)

    for round_ in range(9, 11):
        change(mariadb, db, round_)
        reached = run_micro_batch(config).tables[accounts].offset
    defs = build_pipeline_definitions(dataclasses.replace(
        config, upkeep=UpkeepConfig(enabled=False, schedule="0 3 * * *")))
    schedules = {s.name: s.cron_schedule for s in defs.schedules}
    assert schedules[f"{config.slug}_upkeep_schedule"] == "0 3 * * *"  # beside the reconcile job's own
    with dg.instance_for_test() as instance:
        outcome = defs.get_job_def(f"{config.slug}_upkeep").execute_in_process(instance=instance)
        assert outcome.success
        observed = [e for e in outcome.all_events if e.event_type_value == "ASSET_OBSERVATION"]
        assert len(observed) == 2
    assert_lake_equals_mysql(mariadb, config, db)
    assert read_checkpoint(sink.checkpoint(accounts)).offset == reached  # upkeep left the checkpoint alone
    change(mariadb, db, 12)
    run_micro_batch(config)
    assert_lake_equals_mysql(mariadb, config, db, "a run after the upkeep job")


@pytest.mark.parametrize("stage", ["during-upkeep", "during-upkeep-delete"])
def test_killed_during_upkeep_then_rerun_is_correct(mariadb, lake, stage):
    config, path, db = lake
    quiet = dataclasses.replace(config, upkeep=UpkeepConfig(enabled=False))
    run_micro_batch(quiet)
    for round_ in range(1, 4):  # enough commits that the next run's upkeep compacts and expires
        change(mariadb, db, round_)
        run_micro_batch(quiet)
    change(mariadb, db, 4)
    crashed = subprocess.run([CLI, "-v", "run", str(path)], capture_output=True, text=True, timeout=300,
                             env={**{k: v for k, v in os.environ.items() if k != "LAKECDC_FAILPOINT"},
                                  "LAKECDC_FAILPOINT": stage})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
    assert f"failpoint {stage} reached" in crashed.stderr
    assert_lake_equals_mysql(mariadb, config, db, f"right after the kill at {stage}")

    change(mariadb, db, 5)
    run_micro_batch(config)
    assert_lake_equals_mysql(mariadb, config, db, f"rerun after the kill at {stage}")
    sink = PaimonSink(config.sink.catalog_options)
    for table_id in (TableId(db, "accounts"), TableId(db, "events")):
        files = TableFiles(sink._require(table_id, {}), table_dir(config.sink.catalog_options["warehouse"],
                                                                  table_id), table_id)
        # the rerun's upkeep removed what the killed one left (orphans older than 0 s)
        assert on_disk(config.sink.catalog_options["warehouse"], table_id) == \
            referenced(files, files.snapshot_ids()).names


def test_row_count_comes_from_file_statistics_only_when_they_prove_it(tmp_path):
    """The row count after a commit is the sum of the files' row counts when no bucket holds overlapping key ranges
    or a retract row, and a read back otherwise; both equal the merged read."""
    from lakecdc.sink import native
    from lakecdc.sink.reader import counted_from_files

    catalog, table = pk_table(tmp_path, bucket="2")
    sink = catalog._sink

    def counts() -> tuple[int | None, int, int]:
        stored = sink._require(T, native.NATIVE_OPTIONS)
        return counted_from_files(T, stored), sink.row_count(T), len(api_rows(table))

    for low in (0, 100, 200):  # consecutive key ranges, as a chunked snapshot commits them
        table.write([Row.of_kind(RowKind.INSERT, i, "x", "ab"[i % 2]) for i in range(low, low + 100)])
    assert len(files_of(catalog).live_entries(files_of(catalog).snapshot(3))) == 3 * 2 * 2
    assert counts() == (300, 300, 300)
    table.write([Row.of_kind(RowKind.UPDATE_AFTER, 150, "y", "a"), Row.of_kind(RowKind.INSERT, 151, "y", "a")])
    assert counts() == (None, 301, 301)  # key 150 is in two files of its bucket: read back
    table.compact(full=True)
    assert counts() == (301, 301, 301)
    table.write([Row.of_kind(RowKind.DELETE, 999, "z", "b")])  # a delete of a missing key, in a file of its own
    assert counts() == (None, 301, 301)


def test_non_overlapping_files_move_up_a_level_instead_of_being_rewritten(tmp_path):
    """Files written in consecutive key ranges (a chunked snapshot) are not rewritten when their bucket reaches the
    trigger: upkeep moves them to the highest level as they are, after which reads take them without merging; the
    table then takes updates and deletes of those keys like any other, by every reader."""
    catalog, table = pk_table(tmp_path, bucket="2", **{"num-sorted-run.compaction-trigger": "3"})
    model = Model(table)
    for low in (0, 50, 100):
        batch = [Row.of_kind(RowKind.INSERT, i, f"v{i}", "ab"[i % 2]) for i in range(low, low + 50)]
        table.write(batch)
        model.rows.update({(i, "ab"[i % 2]): f"v{i}" for i in range(low, low + 50)})
    files = files_of(catalog)
    before = {r.name for r in files.live_entries(files.snapshot(3))}

    result = table.upkeep(orphan_older_than_seconds=0)

    assert result.compaction_snapshot_id is None and result.files_upgraded == len(before) == 12
    assert table.snapshots()[-1].properties[UPKEEP_PROPERTY] == "upgrade"
    files = files_of(catalog)
    live = files.live_entries(files.snapshot(result.upgrade_snapshot_id))
    assert {r.name for r in live} == before and {r.level for r in live} == {3}  # num-levels: trigger + 1
    assert_all_readers(table, catalog.warehouse, model.expected())
    splits = catalog._sink._require(T, native.NATIVE_OPTIONS).new_read_builder().new_scan().plan().splits()
    assert splits and all(s.raw_convertible for s in splits)
    assert table.upkeep(orphan_older_than_seconds=0).upgrade_snapshot_id is None  # nothing left to move
    # overlapping changes on top: merged with the upgraded files, then compacted by the trigger as before
    for _ in range(3):
        model.commit(changes=30)
    assert_all_readers(table, catalog.warehouse, model.expected())
    result = table.upkeep(orphan_older_than_seconds=0)
    assert result.compaction_snapshot_id is not None
    assert_all_readers(table, catalog.warehouse, model.expected())
    assert catalog._sink.row_count(T) == len(model.expected())


@pytest.mark.parametrize("bucket", ["-1", "1"])
def test_a_rewrite_flushes_the_writer_as_it_goes(tmp_path, monkeypatch, bucket):
    """A compaction's rewrite hands its rows to the Rust writer in flushed parts (to bound its memory): the rows,
    the buckets of a dynamic-bucket table and later upserts of the same keys stay right for every reader."""
    from lakecdc.sink import upkeep

    monkeypatch.setattr(upkeep, "_REWRITE_ROWS", 7)
    monkeypatch.setattr(upkeep, "_FLUSH_ROWS", 10)
    catalog, table = pk_table(tmp_path, bucket=bucket, **{"dynamic-bucket.target-row-num": "15",
                                                          "num-sorted-run.compaction-trigger": "3"})
    model = Model(table, partitions="ab")
    for _ in range(4):
        model.commit(changes=40)
    files = files_of(catalog)
    buckets_before = {(r.partition_values, r.bucket) for r in files.live_entries(files.snapshot(4))}
    result = table.upkeep(orphan_older_than_seconds=0)
    assert result.compaction_snapshot_id is not None
    files = files_of(catalog)
    rewritten = files.live_entries(files.snapshot(result.compaction_snapshot_id))
    if bucket == "1":  # flushed within the bucket: several files of consecutive keys
        assert len(rewritten) > 2
    else:  # each bucket rewritten whole by one writer, into the bucket it came from
        assert {(r.partition_values, r.bucket) for r in rewritten} <= buckets_before
        assert len(rewritten) == len({(r.partition_values, r.bucket) for r in rewritten})
    assert_all_readers(table, catalog.warehouse, model.expected())
    for _ in range(2):
        model.commit(changes=40)
    assert_all_readers(table, catalog.warehouse, model.expected())
    assert catalog._sink.row_count(T) == len(model.expected())
