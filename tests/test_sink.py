"""Tests of the Paimon sink on real Paimon tables in tmp_path (no mocks). Every write is read back through
PaimonSink.read_table and through pypaimon-rust's standalone reader, which shares no code with pypaimon."""

from __future__ import annotations

import datetime as dt
import gc
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from lakecdc.errors import CommitConflictError, SinkError, TableLockedError
from lakecdc.model import OP_COLUMN, OP_TS_COLUMN, TableId
from lakecdc.sink import CHECKPOINT_KEY, PaimonSink, TableDescription, TableWriter
from lakecdc.sink.catalog import local_warehouse_path

REPO = Path(__file__).resolve().parents[1]
ORDERS = TableId("inv", "orders")

TUTORIAL_SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    ("product", pa.string()),
    ("price", pa.decimal128(10, 2)),
    ("created_at", pa.timestamp("ms")),
    ("source_table", pa.string()),
    ("source_ts", pa.int64()),
    ("op_type", pa.string()),
    ("product_upper", pa.string()),
    ("order_day", pa.string()),
])
COLS = TUTORIAL_SCHEMA.names


def row(id_, product, day="2024-01-01", price="9.99", op_type="+I"):
    return {"id": id_, "product": product, "price": Decimal(price),
            "created_at": dt.datetime(2024, 1, 1, 12, 0, 0, 123000), "source_table": "orders",
            "source_ts": 1700000000000 + id_, "op_type": op_type, "product_upper": product.upper(), "order_day": day}


def changes(*pairs) -> pa.Table:
    """pairs of (op, row dict) → a change batch in the model's layout (columns deliberately out of order)."""
    rows = [dict(r, **{OP_COLUMN: op, OP_TS_COLUMN: 0}) for op, r in pairs]
    schema = pa.schema(list(reversed(list(TUTORIAL_SCHEMA))) + [(OP_COLUMN, pa.string()), (OP_TS_COLUMN, pa.int64())])
    return pa.Table.from_pylist(rows, schema=schema)


def sort_rows(rows, keys=("id", "order_day")):
    return sorted(rows, key=lambda r: tuple(r[k] for k in keys))


def rust_read(warehouse, table_id: TableId) -> list[dict]:
    """pypaimon-rust standalone reader (independent of pypaimon's Python code)."""
    from pypaimon_rust.datafusion import PaimonCatalog

    table = PaimonCatalog({"warehouse": str(warehouse)}).get_table(f"{table_id.database}.{table_id.table}")
    rb = table.new_read_builder()
    batches = rb.new_read().read(rb.new_scan().plan().splits())
    return pa.Table.from_batches(batches).to_pylist() if batches else []


def assert_rows(sink: PaimonSink, warehouse, table_id, expected, keys=("id", "order_day")):
    expected = sort_rows(expected, keys)
    assert sort_rows(sink.read_table(table_id).to_pylist(), keys) == expected
    assert sort_rows(rust_read(warehouse, table_id), keys) == expected
    assert sink.row_count(table_id) == len(expected)


@pytest.fixture
def wh(tmp_path):
    return tmp_path / "warehouse"


def make_sink(wh, **kw) -> PaimonSink:
    return PaimonSink({"metastore": "filesystem", "warehouse": str(wh)}, **kw)


def create_orders(sink: PaimonSink, options=None) -> TableDescription:
    return sink.ensure_table(ORDERS, TUTORIAL_SCHEMA, ["id"], ["order_day"], options or {}, "orders from MySQL")


def run_child(code: str, *args) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *map(str, args)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


# ---------------------------------------------------------------------------------------------------- creation


def test_create_tutorial_table(wh):
    sink = make_sink(wh, table_properties={"bucket": "2", "changelog-producer": "input"})
    desc = sink.ensure_table(ORDERS, TUTORIAL_SCHEMA, ["id"], ["order_day"],
                             {"changelog-producer": "none", "sequence.field": "source_ts"}, "orders from MySQL")
    assert desc.created is True
    assert desc.primary_keys == ["id", "order_day"]  # partition key appended to the PK
    assert desc.partition_keys == ["order_day"]
    assert desc.schema.names == COLS  # same columns, same order, no row-kind column
    assert not desc.schema.field("id").nullable and not desc.schema.field("order_day").nullable
    assert all(desc.schema.field(c).nullable for c in COLS if c not in ("id", "order_day"))
    assert desc.schema.field("price").type == pa.decimal128(10, 2)
    assert desc.schema.field("created_at").type == pa.timestamp("ms")
    # table.properties first, transform table-options override; the native switches are not persisted
    assert desc.options == {"bucket": "2", "changelog-producer": "none", "sequence.field": "source_ts"}
    assert desc.comment == "orders from MySQL"
    assert sink.table_exists(ORDERS) and not sink.table_exists(TableId("inv", "nope"))
    stored = json.loads((wh / "inv.db" / "orders" / "schema" / "schema-0").read_text())
    assert stored["primaryKeys"] == ["id", "order_day"] and stored["partitionKeys"] == ["order_day"]
    assert not any("native" in k for k in stored["options"])
    assert [f["name"] for f in stored["fields"]] == COLS
    assert stored["fields"][0]["type"] == "BIGINT NOT NULL"
    assert stored["fields"][8]["type"] == "STRING NOT NULL"
    assert sink.describe(ORDERS) == TableDescription(**{**desc.__dict__, "created": False})
    assert sink.latest_snapshot_id(ORDERS) is None and sink.checkpoint(ORDERS) is None
    assert sink.read_table(ORDERS).num_rows == 0 and sink.row_count(ORDERS) == 0


def test_tables_are_created_as_pypaimons_catalog_creates_them(tmp_path):
    """ensure_table creates a filesystem-metastore table without pypaimon's catalog (lakecdc.sink.metadata): the
    same directories and schema file as the catalog's create_database and create_table, and the same refusals."""
    from lakecdc.sink.tables import build_schema

    ours_wh, theirs_wh = tmp_path / "ours", tmp_path / "theirs"
    ours, theirs = make_sink(ours_wh), make_sink(theirs_wh)
    options = {"bucket": "2", "changelog-producer": "input"}
    assert create_orders(ours, options).created and ours._catalog_instance is None
    paimon_schema = build_schema(ORDERS, TUTORIAL_SCHEMA, ["id"], ["order_day"], options, "orders from MySQL")
    theirs._catalog.create_database("inv", ignore_if_exists=True)
    theirs._catalog.create_table("inv.orders", paimon_schema, ignore_if_exists=False)

    def tree(root: Path) -> dict:
        return {str(p.relative_to(root)): (json.loads(p.read_text()) if p.is_file() else None)
                for p in sorted(root.rglob("*"))}

    ours_tree, theirs_tree = tree(ours_wh), tree(theirs_wh)
    for schema_file in (ours_tree["inv.db/orders/schema/schema-0"], theirs_tree["inv.db/orders/schema/schema-0"]):
        schema_file.pop("timeMillis")
    assert ours_tree == theirs_tree and "inv.db/orders/schema/schema-0" in ours_tree
    assert not create_orders(ours, options).created  # exists: described, not created again
    with pytest.raises(SinkError, match=r"inv\.events: cannot create it: Table Type: format-table"):
        ours.ensure_table(TableId("inv", "events"), TUTORIAL_SCHEMA, ["id"], [], {"type": "format-table"})
    with pytest.raises(SinkError, match=r"inv\.events: cannot create it: .*auto-create"):
        ours.ensure_table(TableId("inv", "events"), TUTORIAL_SCHEMA, ["id"], [], {"auto-create": "true"})
    assert ours.list_tables() == [ORDERS]


def test_metadata_reads_match_pypaimons_catalog(wh):
    """Tables, schemas and snapshots come from the metadata files without pypaimon's catalog
    (lakecdc.sink.metadata): the same answers as the catalog's tables, and managers built as pypaimon builds them."""
    from pypaimon.schema.schema_manager import SchemaManager
    from pypaimon.snapshot.snapshot_manager import SnapshotManager

    from lakecdc.sink.metadata import MainBranchSchemas, MainBranchSnapshots

    sink = make_sink(wh)
    create_orders(sink)
    other = TableId("other", "events")
    sink.ensure_table(other, TUTORIAL_SCHEMA, ["id"], [], {}, "")
    for pos in ("10", "20"):
        with sink.open_writer(ORDERS) as w:
            w.write(changes(("+I", row(int(pos), "a"))))
            w.commit({CHECKPOINT_KEY: "f.000001", "lakecdc.binlog.pos": pos})
    catalog = sink._catalog
    assert sink.list_tables() == sorted(TableId(d, t) for d in catalog.list_databases()
                                        for t in catalog.list_tables(d)) == [ORDERS, other]
    for table_id in (ORDERS, other):
        stored, loaded = sink._stored(table_id), sink._load(table_id)
        assert stored.table_schema == loaded.table_schema
        assert (stored.primary_keys, stored.partition_keys, stored.comment()) == \
            (loaded.primary_keys, loaded.partition_keys, loaded.comment())
        ours, theirs = stored.snapshot_manager(), loaded.snapshot_manager()
        assert isinstance(ours, MainBranchSnapshots)
        assert vars(MainBranchSnapshots(loaded.file_io, loaded.table_path)) == \
            vars(SnapshotManager(loaded.file_io, loaded.table_path, "main"))
        assert vars(MainBranchSchemas(loaded.file_io, loaded.table_path)) == \
            vars(SchemaManager(loaded.file_io, loaded.table_path, "main"))
        assert ours.get_latest_snapshot() == theirs.get_latest_snapshot()
        assert [ours.get_snapshot_by_id(i) for i in (1, 2, 3)] == [theirs.get_snapshot_by_id(i) for i in (1, 2, 3)]
    assert sink.latest_snapshot_id(ORDERS) == 2 and sink.latest_snapshot_id(other) is None
    assert sink.checkpoint(ORDERS) == {CHECKPOINT_KEY: "f.000001", "lakecdc.binlog.pos": "20"}
    assert [s.id for s in sink.snapshots(ORDERS)] == [1, 2]
    assert sink.paimon_types(ORDERS)["id"] == "BIGINT NOT NULL"
    assert not sink.table_exists(TableId("nope", "orders")) and not sink.table_exists(TableId("inv", "nope"))
    with pytest.raises(SinkError, match="does not exist"):
        sink.describe(TableId("inv", "nope"))


_METADATA_ONLY = """
    import sys
    from lakecdc.model import TableId
    from lakecdc.sink import PaimonSink
    sink = PaimonSink({"metastore": "filesystem", "warehouse": sys.argv[1]})
    table = TableId("inv", "orders")
    assert sink.list_tables() == [table] and sink.table_exists(table)
    assert sink.checkpoint(table)["lakecdc.binlog.pos"] == "10" and sink.latest_snapshot_id(table) == 1
    sink.describe(table)
    print(sorted(m for m in ("pandas", "polars", "pypaimon.catalog.catalog", "pyarrow.dataset", "requests")
                 if m in sys.modules))
"""


def test_metadata_questions_do_not_import_pypaimons_catalog(wh):
    """What a run with nothing to write asks the sink imports neither pypaimon's catalog nor pandas and polars
    (their import was most of the fixed cost of a run; docs/benchmarks.md), nor, on a local warehouse, requests."""
    sink = make_sink(wh)
    create_orders(sink)
    with sink.open_writer(ORDERS) as w:
        w.commit({CHECKPOINT_KEY: "f.000001", "lakecdc.binlog.pos": "10"})
    out, err = run_child(_METADATA_ONLY, wh).communicate(timeout=120)
    assert out.strip() == "[]", err


_WRITE_BEFORE_THE_CATALOG = """
    import sys
    import pyarrow as pa
    from lakecdc.model import OP_COLUMN, TableId
    from lakecdc.sink import PaimonSink
    HEAVY = ("polars", "pypaimon.catalog.catalog", "pyarrow.dataset")
    sink = PaimonSink({"metastore": "filesystem", "warehouse": sys.argv[1]})
    table = TableId("inv", "items")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
    sink.ensure_table(table, schema, ["id"], [], {}, "")
    writer = sink.open_writer(table)
    writer.write(pa.table({"id": pa.array(range(1000), pa.int64()), "name": pa.array(["x"] * 1000),
                           OP_COLUMN: pa.array(["+I"] * 1000)}))
    before_commit = sorted(m for m in HEAVY if m in sys.modules)
    snapshot_id = writer.commit({"k": "v"})
    print(before_commit, snapshot_id, sorted(m for m in HEAVY if m in sys.modules) == sorted(HEAVY))
"""


def test_a_first_write_imports_pypaimons_catalog_only_at_its_commit(wh):
    """Creating a table, opening its writer and writing do not import pypaimon's catalog (nor polars and
    pyarrow.dataset with it); the commit does, while the Rust writer prepares its files (lakecdc.sink.writer)."""
    out, err = run_child(_WRITE_BEFORE_THE_CATALOG, wh).communicate(timeout=120)
    assert out.split() == ["[]", "1", "True"], err
    assert sorted(r["id"] for r in rust_read(wh, TableId("inv", "items"))) == list(range(1000))


def test_existing_table_is_not_altered(wh):
    sink = make_sink(wh)
    first = create_orders(sink, {"bucket": "2"})
    other = pa.schema([("id", pa.int32()), ("x", pa.string())])
    again = make_sink(wh, table_properties={"bucket": "4"}).ensure_table(ORDERS, other, ["x"], [], {"a": "b"}, "new")
    assert again.created is False
    assert again.schema == first.schema and again.options == {"bucket": "2"}
    assert again.primary_keys == ["id", "order_day"] and again.comment == "orders from MySQL"
    assert sorted(os.listdir(wh / "inv.db" / "orders" / "schema")) == ["schema-0"]


def test_append_table_without_primary_key(wh):
    sink = make_sink(wh)
    desc = sink.ensure_table(ORDERS, TUTORIAL_SCHEMA, [], ["order_day"])
    assert desc.primary_keys == [] and desc.partition_keys == ["order_day"]
    assert desc.schema.field("id").nullable is False  # nullability of the source kept
    w = sink.open_writer(ORDERS)
    w.write(changes(("+I", row(1, "a")), ("+I", row(2, "b")), ("-U", row(1, "a")), ("+U", row(1, "a2")),
                    ("-D", row(2, "b"))))
    assert w.rows_written == 3
    w.commit({CHECKPOINT_KEY: "f1"})
    # Flink CDC's Paimon sink: the update appends a new row, the old one stays; deletes are dropped.
    assert_rows(sink, wh, ORDERS, [row(1, "a"), row(2, "b"), row(1, "a2")], keys=("id", "product"))


# -------------------------------------------------------------------------------------------------- changelog


@pytest.mark.parametrize("bucket", [None, "2"], ids=["dynamic-bucket", "bucket-2"])
def test_changelog_commits_read_back_by_both_readers(wh, bucket):
    sink = make_sink(wh, table_properties={"bucket": bucket} if bucket else None)
    create_orders(sink)
    d1, d2, d3, d4 = "2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"

    # commit 1: inserts
    w = sink.open_writer(ORDERS)
    assert isinstance(w, TableWriter) and w.is_primary_key_table
    w.write(changes(("+I", row(1, "apple")), ("+I", row(2, "pear")), ("+I", row(3, "plum")), ("+I", row(4, "fig", d2))))
    assert w.rows_written == 4
    s1 = w.commit({CHECKPOINT_KEY: "mysql-bin.000001", "lakecdc.binlog.pos": "100"})
    assert s1 == 1 == sink.latest_snapshot_id(ORDERS)
    live = {(1, d1): row(1, "apple"), (2, d1): row(2, "pear"), (3, d1): row(3, "plum"), (4, d2): row(4, "fig", d2)}
    assert_rows(sink, wh, ORDERS, list(live.values()))

    # commit 2: update (-U/+U) and delete
    w = sink.open_writer(ORDERS)
    w.write(changes(("-U", row(1, "apple")), ("+U", row(1, "apple", price="1.25", op_type="+U")),
                    ("-D", row(2, "pear"))))
    assert w.commit({CHECKPOINT_KEY: "mysql-bin.000001", "lakecdc.binlog.pos": "200"}) == 2
    live[(1, d1)] = row(1, "apple", price="1.25", op_type="+U")
    del live[(2, d1)]
    assert_rows(sink, wh, ORDERS, list(live.values()))

    # commit 3: re-insert of the deleted key; +I then -D of a new key in a new partition in one batch;
    # delete of a key that never existed (alone in its partition/bucket: the pure-Python writer's bug case)
    w = sink.open_writer(ORDERS)
    w.write(changes(("+I", row(2, "pear again")), ("+I", row(5, "kiwi", d3)), ("-D", row(5, "kiwi", d3)),
                    ("-D", row(99, "ghost", d4))))
    assert w.commit({CHECKPOINT_KEY: "mysql-bin.000002", "lakecdc.binlog.pos": "4"}) == 3
    live[(2, d1)] = row(2, "pear again")
    assert_rows(sink, wh, ORDERS, list(live.values()))

    # commit 4: several write() calls; later rows win for equal keys, also across calls
    w = sink.open_writer(ORDERS)
    w.write(changes(("-U", row(4, "fig", d2)), ("+U", row(4, "fig2", d2))))
    w.write(changes(("-U", row(4, "fig2", d2)), ("+U", row(4, "fig3", d2)), ("-D", row(3, "plum"))))
    w.write(changes(("+I", row(3, "plum again")), ("-D", row(1, "apple", price="1.25"))))
    assert w.rows_written == 7
    assert w.commit({CHECKPOINT_KEY: "mysql-bin.000002", "lakecdc.binlog.pos": "900"}) == 4
    live[(4, d2)] = row(4, "fig3", d2)
    live[(3, d1)] = row(3, "plum again")
    del live[(1, d1)]
    assert_rows(sink, wh, ORDERS, list(live.values()))
    assert sink.checkpoint(ORDERS) == {CHECKPOINT_KEY: "mysql-bin.000002", "lakecdc.binlog.pos": "900"}

    # projection
    assert sorted(sink.read_table(ORDERS, ["id", "product"]).to_pylist(), key=lambda r: r["id"]) == [
        {"id": 2, "product": "pear again"}, {"id": 3, "product": "plum again"}, {"id": 4, "product": "fig3"}]

    # pypaimon's view of the snapshots: one APPEND snapshot per commit, our commit user
    table = sink._load(ORDERS)
    snaps = [table.snapshot_manager().get_snapshot_by_id(i) for i in range(1, 5)]
    assert [s.commit_kind for s in snaps] == ["APPEND"] * 4
    assert {s.commit_user for s in snaps} == {sink.commit_user}


def test_checkpoint_only_commit_and_walk_back(wh):
    sink = make_sink(wh)
    create_orders(sink)
    w = sink.open_writer(ORDERS)
    w.write(changes(("+I", row(1, "a"))))
    w.commit({CHECKPOINT_KEY: "f.000001", "lakecdc.binlog.pos": "10"})
    w = sink.open_writer(ORDERS)  # nothing written: the checkpoint still advances
    assert w.rows_written == 0
    assert w.commit({CHECKPOINT_KEY: "f.000001", "lakecdc.binlog.pos": "20"}) == 2
    assert sink.checkpoint(ORDERS) == {CHECKPOINT_KEY: "f.000001", "lakecdc.binlog.pos": "20"}
    # a snapshot without the checkpoint key (like a maintenance snapshot) is skipped by checkpoint()
    w = sink.open_writer(ORDERS)
    w.write(changes(("+I", row(2, "b"))))
    assert w.commit({"maintenance": "yes"}) == 3
    assert sink.checkpoint(ORDERS) == {CHECKPOINT_KEY: "f.000001", "lakecdc.binlog.pos": "20"}
    w = sink.open_writer(ORDERS)
    assert w.commit({}) == 4
    assert sink.latest_snapshot_id(ORDERS) == 4
    assert sink.checkpoint(ORDERS) == {CHECKPOINT_KEY: "f.000001", "lakecdc.binlog.pos": "20"}
    assert_rows(sink, wh, ORDERS, [row(1, "a"), row(2, "b")])


def test_commit_user_is_prefix_plus_uuid(wh):
    sink = make_sink(wh, commit_user_prefix="lakecdc-job")
    create_orders(sink)
    w = sink.open_writer(ORDERS)
    w.commit({CHECKPOINT_KEY: "f"})
    user = sink._load(ORDERS).snapshot_manager().get_latest_snapshot().commit_user
    assert user == sink.commit_user and user.startswith("lakecdc-job") and len(user) == len("lakecdc-job") + 36


def test_file_uri_warehouse_and_writer_lifecycle(wh):
    sink = PaimonSink({"metastore": "filesystem", "warehouse": wh.as_uri()})
    create_orders(sink)
    with sink.open_writer(ORDERS) as w:
        w.write(changes(("+I", row(1, "a"))))
        w.commit({CHECKPOINT_KEY: "f"})
    with pytest.raises(SinkError, match="committed"):
        w.write(changes(("+I", row(2, "b"))))
    w = sink.open_writer(ORDERS)
    w.write(changes(("+I", row(2, "b"))))
    w.abort()  # nothing committed
    with pytest.raises(SinkError, match="aborted"):
        w.commit({})
    assert sink.latest_snapshot_id(ORDERS) == 1
    assert_rows(sink, wh, ORDERS, [row(1, "a")])


def test_writes_overlap_the_caller_and_a_failed_write_stops_the_commit(wh, monkeypatch):
    """write() returns while the Rust writer (on its own thread) still writes the batch; the next call waits for
    it. A write that fails there fails the next write/commit, and nothing is committed."""
    import threading

    from lakecdc.sink import native

    sink = make_sink(wh)
    create_orders(sink)
    real_write = native.write_with_row_kinds
    release, writer_threads = threading.Event(), set()

    def slow_write(write, batch, table_id, bucket=None):
        writer_threads.add(threading.current_thread().name)
        assert release.wait(30)
        real_write(write, batch, table_id, bucket)

    monkeypatch.setattr(native, "write_with_row_kinds", slow_write)
    w = sink.open_writer(ORDERS)
    w.write(changes(("+I", row(1, "a"))))  # returns although the writer is blocked
    assert w.rows_written == 1
    release.set()
    w.write(changes(("+I", row(2, "b"))))
    w.commit({CHECKPOINT_KEY: "f"})
    assert writer_threads and threading.current_thread().name not in writer_threads
    assert_rows(sink, wh, ORDERS, [row(1, "a"), row(2, "b")])

    def failing_write(write, batch, table_id, bucket=None):
        raise RuntimeError("disk full")

    monkeypatch.setattr(native, "write_with_row_kinds", failing_write)
    w = sink.open_writer(ORDERS)
    w.write(changes(("+I", row(3, "c"))))
    with pytest.raises(SinkError, match=r"inv\.orders: the Paimon writer refused the rows: disk full; nothing"):
        w.commit({CHECKPOINT_KEY: "g"})
    assert sink.latest_snapshot_id(ORDERS) == 1
    w = sink.open_writer(ORDERS)
    w.write(changes(("+I", row(3, "c"))))
    with pytest.raises(SinkError, match=r"inv\.orders: the Paimon writer refused the rows: disk full"):
        w.write(changes(("+I", row(4, "d"))))
    with pytest.raises(SinkError, match="failed"):
        w.commit({CHECKPOINT_KEY: "g"})
    assert sink.latest_snapshot_id(ORDERS) == 1
    assert_rows(sink, wh, ORDERS, [row(1, "a"), row(2, "b")])
    # The failures' tracebacks kept the frames that held the writers; collecting them here, on the main thread, must
    # not free a Rust writer (it may only be freed on its own thread: pyo3 reports it as an unraisable error).
    unraisable: list = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    gc.collect()
    assert not unraisable, [str(u.exc_value) for u in unraisable]


def test_a_forked_child_writes_with_its_own_writer_thread(wh):
    """Writer threads are kept per process; a child forked after the parent wrote (a prefork worker pool) starts
    its own instead of handing its writes to a thread that does not exist there."""
    sink = make_sink(wh)
    create_orders(sink)
    w = sink.open_writer(ORDERS)
    w.write(changes(("+I", row(1, "a"))))
    w.commit({CHECKPOINT_KEY: "f"})
    pid = os.fork()
    if pid == 0:  # the child: exit code 0 only when its commit landed
        code = 1
        try:
            child = make_sink(wh)
            cw = child.open_writer(ORDERS)
            cw.write(changes(("+I", row(2, "b"))))
            code = 0 if cw.commit({CHECKPOINT_KEY: "g"}) == 2 else 1
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the forked child's write hung (its writes went to a writer thread it does not have)")
    assert os.waitstatus_to_exitcode(done[1]) == 0
    assert_rows(sink, wh, ORDERS, [row(1, "a"), row(2, "b")])


def test_writer_casts_by_name(wh):
    sink = make_sink(wh)
    schema = pa.schema([("id", pa.uint32()), ("small", pa.uint8()), ("big", pa.uint64()), ("v", pa.large_string()),
                        ("p", pa.string())])
    desc = sink.ensure_table(TableId("db", "t"), schema, ["id"], [])
    assert [f.type for f in desc.schema] == [pa.int64(), pa.int16(), pa.decimal128(20, 0), pa.string(), pa.string()]
    w = sink.open_writer(TableId("db", "t"))
    data = pa.table({OP_COLUMN: ["+I", "+I"], "p": ["x", None], "v": pa.array(["a", "b"], pa.large_string()),
                     "big": pa.array([2**64 - 1, 0], pa.uint64()), "small": pa.array([255, 1], pa.uint8()),
                     "id": pa.array([4294967295, 1], pa.uint32())})
    w.write(data)
    w.commit({})
    got = sorted(sink.read_table(TableId("db", "t")).to_pylist(), key=lambda r: r["id"])
    assert got == [{"id": 1, "small": 1, "big": Decimal(0), "v": "b", "p": None},
                   {"id": 4294967295, "small": 255, "big": Decimal(2**64 - 1), "v": "a", "p": "x"}]
    assert sorted(rust_read(wh, TableId("db", "t")), key=lambda r: r["id"]) == got


def test_other_types_round_trip(wh):
    sink = make_sink(wh)
    t = TableId("db", "types")
    schema = pa.schema([("id", pa.int32()), ("flag", pa.bool_()), ("tiny", pa.int8()), ("f", pa.float32()),
                        ("d", pa.float64()), ("day", pa.date32()), ("tm", pa.time64("us")),
                        ("ts", pa.timestamp("us")), ("ltz", pa.timestamp("us", tz="UTC")), ("bin", pa.binary()),
                        ("arr", pa.list_(pa.int32())), ("big", pa.decimal128(38, 10))])
    sink.ensure_table(t, schema, ["id"], ["day"])
    stored = json.loads((wh / "db.db" / "types" / "schema" / "schema-0").read_text())
    assert [f["type"] for f in stored["fields"]][:10] == [
        "INT NOT NULL", "BOOLEAN", "TINYINT", "FLOAT", "DOUBLE", "DATE NOT NULL", "TIME(6)", "TIMESTAMP(6)",
        "TIMESTAMP_LTZ(6)", "BYTES"]
    value = {"id": 1, "flag": True, "tiny": -5, "f": 1.5, "d": 2.25, "day": dt.date(2024, 2, 29),
             "tm": dt.time(23, 59, 59, 999000), "ts": dt.datetime(2024, 2, 29, 1, 2, 3, 456789),
             "ltz": dt.datetime(2024, 2, 29, 1, 2, 3, 456789, tzinfo=dt.timezone.utc), "bin": b"\x00\xff",
             "arr": [1, None, 3], "big": Decimal("1234567890123456789012345678.0123456789")}
    data = pa.Table.from_pylist([dict(value, **{OP_COLUMN: "+I"}), dict(value, id=2, tm=None, **{OP_COLUMN: "+I"})],
                                schema=schema.append(pa.field(OP_COLUMN, pa.string())))
    w = sink.open_writer(t)
    w.write(data)
    w.commit({})
    got = sorted(sink.read_table(t).to_pylist(), key=lambda r: r["id"])
    for r in got:
        if r["ltz"] is not None:
            r["ltz"] = r["ltz"].astimezone(dt.timezone.utc)
    assert got == [value, dict(value, id=2, tm=None)]
    rust = sorted(rust_read(wh, t), key=lambda r: r["id"])
    for r in rust:
        r["ltz"] = r["ltz"].astimezone(dt.timezone.utc)
    assert rust == got


# ------------------------------------------------------------------------------------------------------ errors


def test_creation_errors_name_table_and_column(wh):
    sink = make_sink(wh)
    with pytest.raises(SinkError, match=r"inv\.orders.*primary key column 'nope'"):
        sink.ensure_table(ORDERS, TUTORIAL_SCHEMA, ["nope"], [])
    with pytest.raises(SinkError, match=r"inv\.orders.*partition key column 'day'"):
        sink.ensure_table(ORDERS, TUTORIAL_SCHEMA, ["id"], ["day"])
    with pytest.raises(SinkError, match=r"inv\.orders, column 'n'.*null"):
        sink.ensure_table(ORDERS, pa.schema([("id", pa.int64()), ("n", pa.null())]), ["id"], [])
    with pytest.raises(SinkError, match=r"inv\.orders.*merge-engine='foo'"):
        create_orders(sink, {"merge-engine": "foo"})
    with pytest.raises(SinkError, match=r"inv\.orders.*bucket='abc'"):
        make_sink(wh, table_properties={"bucket": "abc"}).ensure_table(ORDERS, TUTORIAL_SCHEMA, ["id"], [])
    with pytest.raises(SinkError, match=r"file\.format='orc'"):
        create_orders(sink, {"file.format": "orc"})
    with pytest.raises(SinkError, match=r"deletion-vectors"):
        create_orders(sink, {"deletion-vectors.enabled": "true"})
    with pytest.raises(SinkError, match=r"partition column 'f'"):
        sink.ensure_table(ORDERS, pa.schema([("id", pa.int64()), ("f", pa.float64())]), ["id"], ["f"])
    with pytest.raises(SinkError, match=r"'primary-key' is not allowed"):
        create_orders(sink, {"primary-key": "id"})
    assert not sink.table_exists(ORDERS)
    with pytest.raises(SinkError, match="does not exist"):
        sink.open_writer(ORDERS)
    with pytest.raises(SinkError, match="does not exist"):
        sink.describe(ORDERS)


def test_write_errors_name_the_column(wh):
    sink = make_sink(wh)
    create_orders(sink)
    good = changes(("+I", row(1, "a")))
    cases = [
        (good.drop_columns(["price"]), "column 'price' is missing"),
        (good.append_column("extra", pa.array([1])), "'extra'"),
        (good.drop_columns([OP_COLUMN]), OP_COLUMN),
        (good.set_column(good.schema.get_field_index(OP_COLUMN), OP_COLUMN, pa.array(["+X"])), "'\\+X'"),
        (good.set_column(good.schema.get_field_index("price"), "price", pa.array(["not a number"])), "column 'price'"),
        (good.set_column(good.schema.get_field_index("price"), "price", pa.array([Decimal("123456789.123")])),
         "column 'price'"),
        (good.set_column(good.schema.get_field_index("order_day"), "order_day", pa.array([None], pa.string())),
         "column 'order_day': NULL"),
    ]
    for data, message in cases:
        w = sink.open_writer(ORDERS)
        with pytest.raises(SinkError, match=message):
            w.write(data)
        w.abort()
    assert sink.latest_snapshot_id(ORDERS) is None
    w = sink.open_writer(ORDERS)
    w.write(good)
    assert w.commit({CHECKPOINT_KEY: "f"}) == 1
    assert_rows(sink, wh, ORDERS, [row(1, "a")])


class RecordedNativeTable:
    """Stands in for pypaimon_rust.datafusion.Table: records how a Rust table is opened."""
    calls: list = []

    @classmethod
    def from_resolved_schema(cls, location, schema_json, **kwargs):
        cls.calls.append((location, json.loads(schema_json), kwargs))
        return None


def native_table_arguments(open_native_table, monkeypatch) -> tuple:
    import pypaimon_rust.datafusion

    monkeypatch.setattr(pypaimon_rust.datafusion, "Table", RecordedNativeTable)
    RecordedNativeTable.calls = []
    open_native_table()
    monkeypatch.undo()
    (call,) = RecordedNativeTable.calls
    return call


@pytest.mark.parametrize("options, partition_keys", [
    ({}, []),
    ({"bucket": "4", "dynamic-partition-overwrite": "off"}, ["order_day"]),
    ({"merge-engine": "partial-update", "snapshot.ignore-empty-commit": "FALSE"}, []),
    ({"deletion-vectors.enabled": "true", "merge-engine": "aggregation"}, []),
    ({"deletion-vectors.enabled": "true"}, []),
    ({"file.format": "orc"}, []),
    ({"changelog-file.format": "avro"}, []),
    ({"changelog-file.format": "parquet", "data-evolution.row-sidecar.enabled": "true"}, []),
    ({"deletion-vectors.enabled": "true", "merge-engine": "partial-update"}, []),
    ({}, ["price"]),
])
def test_rust_writer_opens_as_pypaimon_opens_it(wh, monkeypatch, options, partition_keys):
    """lakecdc opens pypaimon-rust's writer from the stored schema (lakecdc.sink.native.RustWriteTarget): for every
    table setting, it refuses exactly the tables pypaimon would write with its Python writer, and opens the others
    with the arguments pypaimon's create_native_write_table gives the Rust table."""
    from pypaimon import CatalogFactory, Schema
    from pypaimon.write.native_commit import create_native_write_table
    from pypaimon.write.native_write import create_native_write

    from lakecdc.sink import _WRITE_OPTIONS, native

    schema = TUTORIAL_SCHEMA
    if "price" in partition_keys:
        schema = schema.set(schema.get_field_index("price"), pa.field("price", pa.float64(), nullable=False))
    catalog = CatalogFactory.create({"warehouse": str(wh)})
    catalog.create_database("inv", ignore_if_exists=True)
    catalog.create_table("inv.orders", Schema.from_pyarrow_schema(
        schema, primary_keys=["id", *partition_keys], partition_keys=partition_keys, options=options), False)
    sink = make_sink(wh)
    dynamic = {**_WRITE_OPTIONS, "num-sorted-run.compaction-trigger": "3"}
    target = sink._write_target(ORDERS, dynamic)
    table = sink._require(ORDERS, dynamic)
    assert target.table_schema == table.table_schema
    theirs = create_native_write(table, sink.commit_user)
    problem = native.rust_write_problem(target.table_schema)
    assert (problem is None) == (theirs is not None), problem
    if theirs is None:
        with pytest.raises(SinkError, match=r"inv\.orders: the native \(Rust\) Paimon writer is not active"):
            sink.open_writer(ORDERS)
        return
    theirs.close()
    assert native_table_arguments(target._open_native_table, monkeypatch) == \
        native_table_arguments(lambda: create_native_write_table(table), monkeypatch)
    assert target.table() is not None and target.table().table_schema == table.table_schema


def test_jdbc_metastore_writes_through_pypaimons_table(tmp_path):
    """A jdbc metastore keeps its tables in a database, so everything goes through pypaimon's catalog: the writer
    opens the Rust writer from pypaimon's table (RustWriteTarget.of_table), deletes included."""
    wh = tmp_path / "warehouse"
    sink = PaimonSink({"metastore": "jdbc", "uri": f"jdbc:sqlite:{tmp_path / 'catalog.db'}", "warehouse": str(wh)})
    create_orders(sink)
    for pairs, checkpoint in (((("+I", row(1, "a")), ("+I", row(2, "b"))), "f"),
                              ((("-D", row(1, "a")), ("+I", row(3, "c"))), "g")):
        with sink.open_writer(ORDERS) as w:
            w.write(changes(*pairs))
            w.commit({CHECKPOINT_KEY: checkpoint})
    assert sink.checkpoint(ORDERS) == {CHECKPOINT_KEY: "g"}
    assert sort_rows(sink.read_table(ORDERS).to_pylist()) == sort_rows([row(2, "b"), row(3, "c")])
    assert sink.row_count(ORDERS) == 2


def test_writer_refuses_without_the_native_writer(wh, monkeypatch):
    sink = make_sink(wh)
    create_orders(sink)
    # pypaimon-rust unavailable: pypaimon would silently fall back to its Python writer (which resurrects deletes)
    monkeypatch.setitem(sys.modules, "pypaimon_rust.datafusion", None)
    with pytest.raises(SinkError, match="native .*not active"):
        sink.open_writer(ORDERS)
    monkeypatch.undo()
    w = sink.open_writer(ORDERS)  # the failed attempt released the table lock
    w.write(changes(("+I", row(1, "a"))))
    assert w.commit({}) == 1


def test_writer_refuses_table_the_native_writer_cannot_write(wh):
    # A table created outside lakecdc with ORC files: pypaimon would pick its Python writer without telling.
    from pypaimon import CatalogFactory, Schema

    cat = CatalogFactory.create({"warehouse": str(wh)})
    cat.create_database("inv", ignore_if_exists=True)
    cat.create_table("inv.orc", Schema.from_pyarrow_schema(pa.schema([pa.field("id", pa.int64(), nullable=False)]),
                                                            primary_keys=["id"], options={"file.format": "orc"}), False)
    sink = make_sink(wh)
    with pytest.raises(SinkError, match=r"inv\.orc: the native \(Rust\) Paimon writer is not active"):
        sink.open_writer(TableId("inv", "orc"))
    assert sink.latest_snapshot_id(TableId("inv", "orc")) is None


def test_existing_table_with_options_lakecdc_cannot_honour_is_refused(wh):
    # A first-row table made by another tool: the native writer's level-0 files would never be read (the write
    # would "succeed" and read back empty), so the pipeline refuses it before writing anything.
    from pypaimon import CatalogFactory, Schema

    cat = CatalogFactory.create({"warehouse": str(wh)})
    cat.create_database("inv", ignore_if_exists=True)
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("x", pa.string())])
    cat.create_table("inv.first", Schema.from_pyarrow_schema(schema, primary_keys=["id"],
                                                               options={"merge-engine": "first-row"}), False)
    sink = make_sink(wh)
    with pytest.raises(SinkError, match=r"inv\.first: option merge-engine='first-row' is not supported.*exists "
                                        r"already"):
        sink.ensure_table(TableId("inv", "first"), schema, ["id"], [])
    assert sink.latest_snapshot_id(TableId("inv", "first")) is None


def test_append_table_with_fixed_buckets_needs_a_bucket_key(wh):
    schema = pa.schema([pa.field("at", pa.timestamp("s")), pa.field("what", pa.string())])
    with pytest.raises(SinkError, match=r"inv\.log: option bucket='2' is not supported: .*bucket-key"):
        make_sink(wh, table_properties={"bucket": "2"}).ensure_table(TableId("inv", "log"), schema, [], [])
    assert not make_sink(wh).table_exists(TableId("inv", "log"))


def test_sql_is_read_only_unless_write_and_then_takes_the_table_lock(wh):
    from lakecdc.sink.sql import run_sql

    sink = make_sink(wh)
    create_orders(sink)
    options = {"warehouse": str(wh)}
    assert run_sql(options, "SELECT count(*) AS n FROM inv.orders").to_pylist() == [{"n": 0}]
    for statement in ("CREATE TABLE inv.x (a INT)", "INSERT INTO inv.orders (id, order_day) VALUES (1, '2024-01-01')",
                      "DROP TABLE inv.orders", "SELECT 1; DROP TABLE inv.orders"):
        with pytest.raises(SinkError, match="read-only unless --write"):
            run_sql(options, statement)
    assert sink.table_exists(ORDERS) and not sink.table_exists(TableId("inv", "x"))
    with sink.lock(TableId("inv", "x"), owner="a pipeline run"):
        with pytest.raises(TableLockedError, match="a pipeline run"):
            run_sql(options, "CREATE TABLE inv.x (a INT)", write=True)
    assert not sink.table_exists(TableId("inv", "x"))
    run_sql(options, "CREATE TABLE inv.x (a INT)", write=True)
    assert run_sql(options, "INSERT INTO inv.x VALUES (1)", write=True).to_pylist() == [{"count": 1}]
    assert run_sql(options, "SELECT a FROM inv.x").to_pylist() == [{"a": 1}]
    with pytest.raises(SinkError, match=r"hints .*not supported"):
        run_sql(options, "SELECT * FROM inv.orders /*+ OPTIONS('ignore-delete'='true') */")


def test_unsupported_warehouses_are_refused():
    assert local_warehouse_path("/a/b") == Path("/a/b")
    assert local_warehouse_path("file:///a/b%20c") == Path("/a/b c")
    assert local_warehouse_path("s3://bucket/wh") is None
    # s3:// works (tests/test_s3.py); stores whose conditional commit lakecdc has not verified are refused
    for warehouse, why in (("hdfs://nn/wh", "HDFS warehouses are not supported"),
                           ("oss://bucket/wh", "OSS warehouses are not supported"),
                           ("gs://bucket/wh", "GCS warehouses are not supported")):
        with pytest.raises(SinkError, match=why):
            PaimonSink({"metastore": "filesystem", "warehouse": warehouse})
    with pytest.raises(SinkError, match="metastore"):
        PaimonSink({"metastore": "hive", "warehouse": "/tmp/x"})


# -------------------------------------------------------------------------------------------- lock and crashes

_HOLD_LOCK = """
    import sys, time
    from lakecdc.sink import PaimonSink
    from lakecdc.model import TableId
    sink = PaimonSink({"metastore": "filesystem", "warehouse": sys.argv[1]})
    with sink.lock(TableId("inv", "orders"), owner="child-job"):
        print("locked", flush=True)
        time.sleep(120)
"""


def test_lock_contention_and_release_on_sigkill(wh):
    sink = make_sink(wh)
    create_orders(sink)
    child = run_child(_HOLD_LOCK, wh)
    try:
        assert child.stdout.readline().strip() == "locked", child.stderr.read()
        with pytest.raises(TableLockedError, match=rf"inv\.orders.*pid {child.pid}.*child-job"):
            with sink.lock(ORDERS):
                pass
        with pytest.raises(TableLockedError, match=r"inv\.orders"):
            sink.open_writer(ORDERS)
        other = TableId("inv", "other")  # other tables are not affected
        with sink.lock(other):
            pass
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    with sink.lock(ORDERS, owner="parent"):  # the kernel released the dead holder's lock
        lock_file = wh / ".lakecdc" / "locks" / "inv.orders.lock"
        info = json.loads(lock_file.read_text())
        assert info["pid"] == os.getpid() and info["owner"] == "parent"
        with pytest.raises(TableLockedError):  # not re-entrant, also in one process
            with make_sink(wh).lock(ORDERS):
                pass
        w = sink.open_writer(ORDERS)  # uses the lock held by this sink
        w.write(changes(("+I", row(1, "a"))))
        assert w.commit({}) == 1
    w = sink.open_writer(ORDERS)  # takes the lock itself...
    with pytest.raises(TableLockedError):
        with sink.lock(ORDERS):
            pass
    w.abort()  # ... and releases it
    with sink.lock(ORDERS):
        pass


_CRASH_BEFORE_COMMIT = """
    import os, signal, sys
    import pyarrow as pa
    from lakecdc.sink import PaimonSink
    from lakecdc.model import TableId, OP_COLUMN
    sink = PaimonSink({"metastore": "filesystem", "warehouse": sys.argv[1]})
    t = TableId("inv", "orders")
    desc = sink.describe(t)
    rows = [{"id": i, "product": "crash", "order_day": "2024-01-01" if i % 2 else "2024-01-09", OP_COLUMN: "+I"}
            for i in range(1, 2001)]
    rows += [{"id": 1, "product": "x", "order_day": "2024-01-01", OP_COLUMN: "-D"}]
    data = pa.Table.from_pylist(rows)
    for f in desc.schema:
        if f.name not in data.column_names:
            data = data.append_column(f.name, pa.nulls(len(rows), f.type))
    w = sink.open_writer(t)
    w.write(data)
    w._drain()  # the write has reached the Rust writer, which lives on its own thread ...
    shard = w._shards[0]
    shard.submit(lambda: shard.write.prepare_commit()).result()  # ... and flushes its data files ...
    print("written", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # ... and the process dies before the commit
"""


def test_crash_between_write_and_commit_leaves_table_unchanged(wh):
    sink = make_sink(wh)
    create_orders(sink)
    w = sink.open_writer(ORDERS)
    w.write(changes(("+I", row(1, "a")), ("+I", row(2, "b"))))
    w.commit({CHECKPOINT_KEY: "f", "lakecdc.binlog.pos": "1"})
    files_before = set(wh.rglob("*.parquet"))

    child = run_child(_CRASH_BEFORE_COMMIT, wh)
    out, err = child.communicate(timeout=120)
    assert child.returncode == -signal.SIGKILL, err
    assert out.strip() == "written"
    assert set(wh.rglob("*.parquet")) - files_before, "the crashed writer left no data files; test is moot"

    assert sink.latest_snapshot_id(ORDERS) == 1
    assert sink.checkpoint(ORDERS) == {CHECKPOINT_KEY: "f", "lakecdc.binlog.pos": "1"}
    assert_rows(sink, wh, ORDERS, [row(1, "a"), row(2, "b")])

    w = sink.open_writer(ORDERS)  # lock was released by the kernel
    w.write(changes(("-U", row(2, "b")), ("+U", row(2, "b2")), ("+I", row(3, "c", "2024-01-09"))))
    assert w.commit({CHECKPOINT_KEY: "f", "lakecdc.binlog.pos": "2"}) == 2
    assert_rows(sink, wh, ORDERS, [row(1, "a"), row(2, "b2"), row(3, "c", "2024-01-09")])


def test_native_writer_speed_sanity(wh):
    """Not a benchmark: 100k upserts in one commit must be far from the pure-Python writer's speed."""
    sink = make_sink(wh)
    create_orders(sink)
    n = 100_000
    data = pa.table({"id": pa.array(range(n), pa.int64()), "product": pa.array(["p"] * n),
                     "order_day": pa.array([f"2024-01-{i % 28 + 1:02d}" for i in range(n)]),
                     OP_COLUMN: pa.array(["+I"] * n)})
    for f in TUTORIAL_SCHEMA:
        if f.name not in data.column_names:
            data = data.append_column(f.name, pa.nulls(n, f.type))
    start = time.monotonic()
    w = sink.open_writer(ORDERS)
    w.write(data)
    w.commit({})
    assert time.monotonic() - start < 30
    assert sink.row_count(ORDERS) == n
    assert len(rust_read(wh, ORDERS)) == n


def test_schema_change_must_follow_the_schema_the_checkpoint_was_loaded_with(wh):
    """A writer that loaded its state at schema 0 may only publish schema 1: after another writer's schema change
    its own fails with CommitConflictError (pypaimon would re-plan it on top of the other schema) and changes
    nothing; a fresh writer applies it."""
    from pypaimon.schema.data_types import AtomicType
    from pypaimon.schema.schema_change import SchemaChange

    create_orders(make_sink(wh))
    writer_a, writer_b = make_sink(wh), make_sink(wh)
    assert writer_a.checkpoint(ORDERS) is None  # loads its state: schema 0
    writer_b.checkpoint(ORDERS)
    writer_b.alter_table(ORDERS, [SchemaChange.add_column("from_b", AtomicType("INT"))])
    with pytest.raises(CommitConflictError, match=rf"table {ORDERS}: schema commit conflict: the table's latest "
                                                  r"schema is 1 after this writer planned its schema change from "
                                                  r"schema 0.*run the pipeline again"):
        writer_a.alter_table(ORDERS, [SchemaChange.add_column("from_a", AtomicType("INT"))])
    names = make_sink(wh).describe(ORDERS).schema.names
    assert "from_b" in names and "from_a" not in names
    writer_b.alter_table(ORDERS, [SchemaChange.add_column("again_b", AtomicType("INT"))])  # follows its own schema
    fresh = make_sink(wh)
    fresh.checkpoint(ORDERS)
    fresh.alter_table(ORDERS, [SchemaChange.add_column("from_a", AtomicType("INT"))])
    assert make_sink(wh).describe(ORDERS).schema.names[-3:] == ["from_b", "again_b", "from_a"]


# ------------------------------------------------------------------------------------- what a run's writers commit


def test_recorded_writes_keep_what_commits_as_paimon_stores_it_and_drop_what_aborts(wh):
    """record_writes keeps, per key, the last row a committed writer handed to Paimon (converted to the table's
    types: the timestamp's microseconds floored to TIMESTAMP(3)); an aborted writer's rows and an overwrite
    (upkeep's rewrite) are not kept; a TRUNCATE makes every key kept before it absent."""
    from lakecdc.sink.written import KIND_COLUMN

    sink = make_sink(wh)
    create_orders(sink)
    sink.checkpoint(ORDERS)
    recorded = sink.record_writes(ORDERS)
    aborted = sink.open_writer(ORDERS)
    aborted.write(changes(("+I", row(9, "lost"))))
    aborted.abort()
    late = dict(row(1, "a"), created_at=dt.datetime(2024, 1, 1, 12, 0, 0, 123456))
    with sink.open_writer(ORDERS) as writer:
        writer.write(changes(("+I", late), ("+I", row(2, "b")), ("-U", row(1, "a")), ("+U", row(1, "a2"))))
        first = writer.commit({})
    with sink.open_writer(ORDERS) as writer:
        writer.write(changes(("-D", row(2, "b"))))
        second = writer.commit({})
    kept = {r["id"]: r for r in recorded.rows.to_pylist()}
    assert set(kept) == {1, 2} and recorded.snapshot_ids == [first, second] and recorded.rows_committed == 5
    assert (kept[1]["product"], kept[1][KIND_COLUMN], kept[2][KIND_COLUMN]) == ("a2", 2, 3)  # +U, -D
    assert kept[1]["created_at"] == dt.datetime(2024, 1, 1, 12, 0, 0, 123000)  # as stored: TIMESTAMP(3)
    with sink.open_writer(ORDERS, overwrite={}) as writer:  # a rewrite of the live rows changes no row
        writer.write(changes(("+I", row(1, "a2"))))
        writer.commit({})
    assert recorded.snapshot_ids == [first, second]
    truncated = sink.truncate(ORDERS, {})
    assert recorded.snapshot_ids[-1] == truncated
    assert recorded.rows.column(KIND_COLUMN).to_pylist() == [3, 3]  # both keys now absent
    assert sink.stop_recording(ORDERS) is recorded and sink.stop_recording(ORDERS) is None
