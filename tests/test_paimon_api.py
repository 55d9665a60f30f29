"""lakecdc.paimon against real Paimon tables in tmp_path: seed 001's Flink API examples in Python (write Alice/Bob
with an update and read back 100 and 5; a CDC record stream that adds ``dt``), inputs and their schema check,
bounded reads (projection, where, limit, time travel, output formats), change reads, overwrite and parallelism.
Results are read back through lakecdc and through pypaimon-rust's standalone reader (shares no code with the
writer path)."""

from __future__ import annotations

import datetime as dt
import time
from decimal import Decimal

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

from lakecdc.paimon import Catalog, CdcRecord, Row, RowKind, SinkError


@pytest.fixture
def catalog(tmp_path):
    return Catalog(tmp_path / "warehouse")


def rust_rows(catalog: Catalog, identifier: str, keys) -> list[tuple]:
    """The merged rows as pypaimon-rust's standalone reader sees them, as sorted tuples of ``keys``."""
    from pypaimon_rust.datafusion import PaimonCatalog

    table = PaimonCatalog({"warehouse": catalog.warehouse}).get_table(identifier)
    builder = table.new_read_builder()
    batches = builder.new_read().read(builder.new_scan().plan().splits())
    rows = pa.Table.from_batches(batches).to_pylist() if batches else []
    return sorted(tuple(r[k] for k in keys) for r in rows)


def rows_of(result, keys) -> list[tuple]:
    return sorted(tuple(r[k] for k in keys) for r in result.to_pylist())


def my_table(catalog: Catalog):
    return catalog.create_table("my_db.my_table", [("f0", "STRING"), ("f1", "INT")], primary_keys=["f0"],
                                options={"bucket": "2"})


# ------------------------------------------------------------------------------------------------ seed 001


def test_seed_write_alice_bob_with_an_update_reads_100_and_5(catalog):
    table = my_table(catalog)
    result = table.write([Row.of_kind(RowKind.INSERT, "Alice", 12), Row.of_kind(RowKind.INSERT, "Bob", 5),
                          Row.of_kind(RowKind.UPDATE_BEFORE, "Alice", 12),
                          Row.of_kind(RowKind.UPDATE_AFTER, "Alice", 100)],
                         schema=pa.schema([pa.field("f0", pa.string(), nullable=False), ("f1", pa.int32())]))
    assert (result.snapshot_id, result.rows_written) == (1, 4)
    assert rows_of(table.read(), ["f0", "f1"]) == [("Alice", 100), ("Bob", 5)]
    assert rust_rows(catalog, "my_db.my_table", ["f0", "f1"]) == [("Alice", 100), ("Bob", 5)]
    assert table.describe().options == {"bucket": "2"}  # the native switches are not persisted
    assert [s.commit_kind for s in table.snapshots()] == ["APPEND"]


def test_seed_cdc_record_stream_adds_dt(catalog):
    catalog.create_table("my_db.cdc_orders", [("order_id", "BIGINT"), ("price", "DOUBLE")],
                         primary_keys=["order_id"], options={"bucket": "2"})
    table = catalog.get_table("my_db.cdc_orders")
    records = [
        CdcRecord.builder(RowKind.INSERT).field("order_id", "BIGINT", "123").field("price", "DOUBLE", "62.2").build(),
        CdcRecord.builder(RowKind.INSERT).field("order_id", "BIGINT", "245").field("price", "DOUBLE", "82.1")
        .field("dt", "TIMESTAMP", "2023-06-12 20:21:12").build(),
    ]
    assert table.write_cdc_records(records).snapshot_id == 1
    described = table.describe()
    assert described.schema.names == ["order_id", "price", "dt"]
    assert described.schema.field("dt").type == pa.timestamp("us") and described.schema.field("dt").nullable
    expected = [(123, 62.2, None), (245, 82.1, dt.datetime(2023, 6, 12, 20, 21, 12))]
    assert rows_of(table.read(), ["order_id", "price", "dt"]) == expected
    assert rust_rows(catalog, "my_db.cdc_orders", ["order_id", "price", "dt"]) == expected
    # a later record without dt, and a delete: missing fields are NULL, deletes work
    table.write_cdc_records([
        CdcRecord.builder("+U").field("order_id", "BIGINT", "123").field("price", "DOUBLE", "70").build(),
        CdcRecord.builder(RowKind.DELETE).field("order_id", "BIGINT", "245").build(),
    ])
    assert rows_of(table.read(), ["order_id", "price", "dt"]) == [(123, 70.0, None)]


# ------------------------------------------------------------------------------------------------- CDC


def test_cdc_type_widening_narrowing_and_refusals(catalog):
    table = catalog.create_table("d.t", [("id", "INT"), ("n", "INT"), ("s", "STRING"), ("amount", "DECIMAL(10, 2)")],
                                 primary_keys=["id"], options={"bucket": "1"})

    def rec(kind="+I", **fields):
        builder = CdcRecord.builder(kind)
        for name, (type_, value) in fields.items():
            builder.field(name, type_, value)
        return builder.build()

    table.write_cdc_records([rec(id=("INT", "1"), n=("BIGINT", "5000000000"), s=("VARCHAR(3)", "abc"),
                                 amount=("DECIMAL(12, 3)", "1.125"))])
    schema = table.schema
    assert schema.field("n").type == pa.int64()  # INT → BIGINT: widened
    assert schema.field("s").type == pa.string()  # VARCHAR(3) narrower than STRING: ignored
    assert schema.field("amount").type == pa.decimal128(12, 3)  # DECIMAL widened
    table.write_cdc_records([rec(id=("INT", "2"), n=("SMALLINT", "7"))])  # narrower: column kept, value cast
    assert table.schema.field("n").type == pa.int64()
    assert rows_of(table.read(), ["id", "n", "s", "amount"]) == [
        (1, 5000000000, "abc", Decimal("1.125")), (2, 7, None, None)]
    before = table.latest_snapshot_id()
    with pytest.raises(SinkError, match=r"Cannot convert field n from type BIGINT to STRING of Paimon table d\.t"):
        table.write_cdc_records([rec(id=("INT", "3"), n=("STRING", "x"))])
    with pytest.raises(SinkError, match=r"field 'n': value 'x1' cannot be read as int64"):
        table.write_cdc_records([rec(id=("INT", "3"), n=("BIGINT", "7")), rec(id=("INT", "4"), n=("BIGINT", "x1"))])
    with pytest.raises(SinkError, match=r"field id is a primary-key or partition column"):
        table.write_cdc_records([rec(id=("BIGINT", "3"))])
    with pytest.raises(SinkError, match=r"unknown or unsupported type 'NOPE'"):
        CdcRecord.builder("+I").field("x", "NOPE", "1")
    with pytest.raises(SinkError, match=r"values are string-encoded"):
        CdcRecord.builder("+I").field("x", "INT", 1)
    assert table.latest_snapshot_id() == before  # nothing of the refused writes was committed
    assert table.schema.names == ["id", "n", "s", "amount"]


def test_cdc_value_types(catalog):
    table = catalog.create_table("d.types", [("id", "INT")], primary_keys=["id"])
    record = (CdcRecord.builder("+I").field("id", "INT", "1").field("b", "BOOLEAN", "TRUE")
              .field("d", "DATE", "2024-02-29").field("t", "TIME", "10:11:12.345")
              .field("ts", "TIMESTAMP(3)", "2024-02-29T10:11:12.345678").field("bin", "BYTES", "AAEC")
              .field("f", "FLOAT", "1.5").field("ltz", "TIMESTAMP_LTZ(3)", "2024-01-01 00:00:00").build())
    table.write_cdc_records([record])
    row = table.read().to_pylist()[0]
    assert row["b"] is True and row["d"] == dt.date(2024, 2, 29) and row["t"] == dt.time(10, 11, 12, 345000)
    assert row["ts"] == dt.datetime(2024, 2, 29, 10, 11, 12, 345000)  # finer digits truncated
    assert row["bin"] == b"\x00\x01\x02" and row["f"] == 1.5
    assert row["ltz"] == dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    with pytest.raises(SinkError, match=r"field 'b': value 'yes'"):
        table.write_cdc_records([CdcRecord.builder("+I").field("id", "INT", "2").field("b", "BOOLEAN", "yes")
                                 .build()])


def test_cdc_adds_columns_to_a_partial_update_table(catalog):
    table = catalog.create_table("d.pu", [("id", "INT"), ("a", "STRING")], primary_keys=["id"],
                                 options={"merge-engine": "partial-update", "bucket": "1"})
    table.write_cdc_records([CdcRecord.builder("+I").field("id", "INT", "1").field("a", "STRING", "x").build()])
    table.write_cdc_records([CdcRecord.builder("+I").field("id", "INT", "1").field("extra", "INT", "9").build()])
    assert table.schema.names == ["id", "a", "extra"]
    assert table.read().to_pylist() == [{"id": 1, "a": "x", "extra": 9}]  # the missing a did not overwrite


# ---------------------------------------------------------------------------------------------- inputs


def test_every_input_form_and_its_row_kinds(catalog):
    table = my_table(catalog)
    table.write([("a", 1), ["b", 2], {"f0": "c", "f1": 3}, {"f0": "z", "f1": 0, "rowkind": "-D"}])
    table.write(pa.table({"f0": ["d"], "f1": pa.array([4], pa.int64())}))  # int64 → int32, by name
    table.write(pa.RecordBatch.from_pydict({"f1": [5, 1], "f0": ["e", "a"], "op": ["+I", "-D"]}),
                row_kind_column="op")
    table.write(pd.DataFrame({"f0": ["f", "b"], "f1": [6, 20], "rowkind": ["+I", "+U"]}))
    table.write(pl.DataFrame({"f0": ["g"], "f1": [7]}))
    expected = [("b", 20), ("c", 3), ("d", 4), ("e", 5), ("f", 6), ("g", 7)]
    assert rows_of(table.read(), ["f0", "f1"]) == expected
    assert rust_rows(catalog, "my_db.my_table", ["f0", "f1"]) == expected


@pytest.mark.parametrize("data, message", [
    ([("a",)], r"1 value\(s\) for 2 column\(s\)"),
    ([{"f0": "a", "nope": 1}], r"unknown column\(s\) \['nope'\]"),
    (pa.table({"f0": ["a"]}), r"column 'f1' is missing"),
    (pa.table({"f0": ["a"], "f1": [1], "x": [1]}), r"column\(s\) 'x' are not columns"),
    ([("a", 2**40)], r"column 'f1': values do not fit type int32"),
    (pa.table({"f0": ["a"], "f1": [2**40]}), r"column 'f1': cannot convert int64"),
    ([(None, 1)], r"column 'f0': NULL in a NOT NULL column"),
    ([Row.of_kind("+I", "a", 1)] + [{"f0": "b", "f1": 1, "rowkind": "?"}], r"unknown row kind '\?'"),
    (pa.table({"f0": ["a"], "f1": [1], "rowkind": ["+X"]}), r"holds '\+X'"),
    ("not rows", r"expected rows"),
])
def test_schema_check_refuses_before_writing(catalog, data, message):
    table = my_table(catalog)
    table.write([("keep", 1)])
    with pytest.raises(SinkError, match=message):
        table.write(data)
    assert table.latest_snapshot_id() == 1
    assert rows_of(table.read(), ["f0", "f1"]) == [("keep", 1)]


def test_input_schema_must_match_the_table(catalog):
    table = my_table(catalog)
    with pytest.raises(SinkError, match=r"must be the table's columns in the table's order"):
        table.write([(1, "a")], schema=[("f1", "INT"), ("f0", "STRING")])
    with pytest.raises(SinkError, match=r"input schema field 'f1' is int64"):
        table.write([("a", 1)], schema=[("f0", "STRING NOT NULL"), ("f1", "BIGINT")])
    with pytest.raises(SinkError, match=r"column 'f1' is int64, the input schema says int32"):
        table.write(pa.table({"f0": ["a"], "f1": [1]}), schema=[("f0", "STRING NOT NULL"), ("f1", "INT")])
    assert table.latest_snapshot_id() is None


def test_a_write_block_without_commit_writes_nothing(catalog, tmp_path):
    table = my_table(catalog)
    with table.new_write() as write:
        write.write([("a", 1)])
    with pytest.raises(RuntimeError):
        with table.new_write() as write:
            write.write([("b", 1)])
            raise RuntimeError("boom")
    assert table.latest_snapshot_id() is None
    result = table.new_write()
    result.write([("c", 1)])
    assert result.commit({"k": "v"}).snapshot_id == 1
    assert table.snapshots()[0].properties == {"k": "v"}


# ------------------------------------------------------------------------------------------- overwrite


def test_overwrite_only_when_asked(catalog):
    flat = my_table(catalog)
    flat.write([("a", 1), ("b", 2)])
    flat.write([("c", 3)])  # default: appends changes
    assert rows_of(flat.read(), ["f0", "f1"]) == [("a", 1), ("b", 2), ("c", 3)]
    flat.write([("d", 4)], overwrite=True)
    assert rows_of(flat.read(), ["f0", "f1"]) == [("d", 4)]
    assert [s.commit_kind for s in flat.snapshots()] == ["APPEND", "APPEND", "OVERWRITE"]

    parts = catalog.create_table("d.parts", [("id", "INT"), ("v", "STRING"), ("dt", "STRING")],
                                 primary_keys=["id", "dt"], partition_keys=["dt"], options={"bucket": "2"})
    parts.write([(1, "a", "x"), (2, "b", "x"), (3, "c", "y")])
    parts.write([(9, "n", "x")], overwrite=True)  # dynamic partition overwrite: only partition x
    assert rows_of(parts.read(), ["id", "v", "dt"]) == [(3, "c", "y"), (9, "n", "x")]
    parts.write([(7, "s", "y")], overwrite={"dt": "y"})
    assert rows_of(parts.read(), ["id", "v", "dt"]) == [(7, "s", "y"), (9, "n", "x")]
    assert rust_rows(catalog, "d.parts", ["id", "v", "dt"]) == [(7, "s", "y"), (9, "n", "x")]
    with pytest.raises(SinkError, match="overwrite must be True, False or a dict"):
        parts.write([(1, "a", "x")], overwrite="yes")


# ------------------------------------------------------------------------------------------ parallelism


def test_parallel_writers_commit_one_snapshot_with_the_same_result(catalog):
    table = catalog.create_table("d.par", [("id", "BIGINT"), ("v", "STRING"), ("dt", "STRING")],
                                 primary_keys=["id", "dt"], partition_keys=["dt"], options={"bucket": "4"})
    n = 3000
    ids = list(range(n))
    table.write(pa.table({"id": ids, "v": [f"v{i}" for i in ids], "dt": [f"d{i % 3}" for i in ids]}),
                parallelism=3)
    updates = pa.table({"id": [1, 1, 2, 4, 5], "v": ["v1", "w1", "w2", "v4", "x"], "dt": ["d1", "d1", "d2", "d1", "d2"],
                        "rowkind": ["-U", "+U", "+U", "-D", "+I"]})
    result = table.write(updates, parallelism=2)
    assert result.snapshot_id == 2 and len(table.snapshots()) == 2
    expected = {(i, f"v{i}", f"d{i % 3}") for i in ids} - {(1, "v1", "d1"), (2, "v2", "d2"), (4, "v4", "d1"),
                                                            (5, "v5", "d2")}
    expected |= {(1, "w1", "d1"), (2, "w2", "d2"), (5, "x", "d2")}
    assert rows_of(table.read(), ["id", "v", "dt"]) == sorted(expected)
    assert rust_rows(catalog, "d.par", ["id", "v", "dt"]) == sorted(expected)

    append = catalog.create_table("d.app", [("id", "INT")])
    append.write([(i,) for i in range(10)], parallelism=4)
    assert rows_of(append.read(), ["id"]) == [(i,) for i in range(10)]

    dynamic = catalog.create_table("d.dyn", [("id", "INT")], primary_keys=["id"])
    with pytest.raises(SinkError, match=r"parallelism 2 needs a fixed bucket count"):
        dynamic.write([(1,)], parallelism=2)
    with pytest.raises(SinkError, match=r"parallelism must be an integer >= 1"):
        table.write([(1, "a", "d1")], parallelism=0)


# ---------------------------------------------------------------------------------------------- reads


@pytest.fixture
def products(catalog):
    table = catalog.create_table(
        "shop.products",
        pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("price", pa.decimal128(10, 2)),
                   ("added", pa.date32()), ("at", pa.timestamp("ms")), ("flag", pa.bool_()),
                   pa.field("cat", pa.string(), nullable=False)]),
        primary_keys=["id", "cat"], partition_keys=["cat"], options={"bucket": "2"})
    rows = [(1, "apple", Decimal("1.50"), dt.date(2024, 1, 1), dt.datetime(2024, 1, 1, 8), True, "fruit"),
            (2, "banana", Decimal("0.25"), dt.date(2024, 1, 2), dt.datetime(2024, 1, 2, 8), False, "fruit"),
            (3, "carrot", None, dt.date(2024, 1, 3), None, None, "veg"),
            (4, "apricot", Decimal("3.00"), dt.date(2024, 1, 4), dt.datetime(2024, 1, 4, 8), True, "fruit"),
            (5, "leek", Decimal("2.00"), None, dt.datetime(2024, 1, 5, 8), False, "veg")]
    table.write(rows)
    return table


@pytest.mark.parametrize("where, ids", [
    ("price > 1", [1, 4, 5]),
    ("1 < price", [1, 4, 5]),
    ("price <= 1.5 AND cat = 'fruit'", [1, 2]),
    ("price <> 2", [1, 2, 4]),
    ("price != 2", [1, 2, 4]),
    ("id IN (1, 3, 9)", [1, 3]),
    ("id NOT IN (1, 3)", [2, 4, 5]),
    ("price NOT IN (1.5)", [2, 4, 5]),  # NULL price is not NOT IN
    ("NOT id IN (1, 2, 3)", [4, 5]),
    ("id BETWEEN 2 AND 4", [2, 3, 4]),
    ("price IS NULL", [3]),
    ("price IS NOT NULL AND NOT price IS NULL", [1, 2, 4, 5]),
    ("name LIKE 'ap%'", [1, 4]),
    ("name LIKE '%an%'", [2]),
    ("name LIKE 'c_rrot'", [3]),
    ("(id = 1 OR id = 5) AND flag = FALSE", [5]),
    ("id = 1 OR name LIKE '%e%'", [1, 5]),
    ("added >= DATE '2024-01-03'", [3, 4]),
    ("at < TIMESTAMP '2024-01-02 08:00:00'", [1]),
    ("at >= '2024-01-04 08:00:00'", [4, 5]),
    ("flag", None),
])
def test_where_filters_exactly(products, where, ids):
    if ids is None:
        with pytest.raises(SinkError, match=r"is not supported \(supported:"):
            products.read(where=where)
        return
    assert sorted(r["id"] for r in products.read(where=where).to_pylist()) == ids


@pytest.mark.parametrize("where, message", [
    ("nope = 1", r"unknown column 'nope'"),
    ("id = name", r"must compare one column with one literal"),
    ("id = 'x'", r"literal 'x' does not fit column 'id'"),
    ("id = ", r"cannot parse where"),
    ("name LIKE 5", r"LIKE needs a string pattern"),
    ("", r"where must be a non-empty SQL condition"),
])
def test_where_errors_name_the_problem(products, where, message):
    with pytest.raises(SinkError, match=message):
        products.read(where=where)


def test_projection_limit_and_outputs(products):
    result = products.read(columns=["name"], where="cat = 'veg'")
    assert result.schema.names == ["name"]
    assert sorted(r["name"] for r in result.to_pylist()) == ["carrot", "leek"]
    assert products.read(limit=2).num_rows == 2
    assert products.read(limit=0).num_rows == 0
    limited = products.read(columns=["id"], where="cat = 'fruit'", limit=2).to_pylist()
    assert len(limited) == 2 and {r["id"] for r in limited} <= {1, 2, 4}
    with pytest.raises(SinkError, match=r"no column\(s\) 'nope'"):
        products.read(columns=["nope"])
    with pytest.raises(SinkError, match=r"limit must be an integer >= 0"):
        products.read(limit=-1)

    everything = products.read(where="id <= 2")
    frame = everything.to_pandas()
    assert sorted(frame["name"]) == ["apple", "banana"]
    assert sorted(everything.to_polars()["id"].to_list()) == [1, 2]
    import duckdb

    con = duckdb.connect()
    everything.to_duckdb("p", connection=con)
    assert con.sql("SELECT sum(price) AS s FROM p").fetchall() == [(Decimal("1.75"),)]
    assert products.read().to_duckdb().aggregate("count(*)").fetchall() == [(5,)]


def test_time_travel_by_snapshot_and_timestamp(catalog):
    table = my_table(catalog)
    table.write([("a", 1), ("b", 2)])
    time.sleep(0.02)
    table.write([Row.of_kind("-D", "a", 1), ("c", 3)])
    first, second = table.snapshots()
    assert rows_of(table.read(snapshot_id=1), ["f0", "f1"]) == [("a", 1), ("b", 2)]
    assert rows_of(table.read(snapshot_id=2), ["f0", "f1"]) == [("b", 2), ("c", 3)]
    assert rows_of(table.read(timestamp_ms=first.time_millis), ["f0"]) == [("a",), ("b",)]
    assert rows_of(table.read(timestamp_ms=second.time_millis - 1), ["f0"]) == [("a",), ("b",)]
    assert rows_of(table.read(timestamp_ms=second.time_millis + 10_000), ["f0"]) == [("b",), ("c",)]
    assert rows_of(table.read(snapshot_id=1, where="f1 > 1"), ["f0"]) == [("b",)]
    with pytest.raises(SinkError, match=r"snapshot 3 does not exist \(latest: 2\)"):
        table.read(snapshot_id=3)
    with pytest.raises(SinkError, match=r"no snapshot at or before timestamp"):
        table.read(timestamp_ms=first.time_millis - 1)
    with pytest.raises(SinkError, match="not both"):
        table.read(snapshot_id=1, timestamp_ms=first.time_millis)


def test_read_changes_between_snapshots(catalog):
    table = catalog.create_table("d.ch", [("id", "INT"), ("v", "STRING")], primary_keys=["id"],
                                 options={"bucket": "1"})
    table.write([(1, "a"), (2, "b"), (3, "c")])
    table.write([Row.of_kind("-U", 1, "a"), Row.of_kind("+U", 1, "a2"), Row.of_kind("-D", 2, "b")])
    table.write([(4, "d")])

    def kinds(result):
        return [(r["rowkind"], r["id"], r.get("v")) for r in result.to_pylist()]

    # default changelog producer: the data files, one merged row per key and commit
    assert kinds(table.read_changes(1, 2)) == [("+U", 1, "a2"), ("-D", 2, "b")]
    assert kinds(table.read_changes(1)) == [("+U", 1, "a2"), ("-D", 2, "b"), ("+I", 4, "d")]
    assert kinds(table.read_changes(1, ignore_delete=True)) == [("+U", 1, "a2"), ("+I", 4, "d")]
    assert kinds(table.read_changes(0, 1, columns=["id"])) == [("+I", 1, None), ("+I", 2, None), ("+I", 3, None)]
    assert kinds(table.read_changes(0, where="v >= 'b'")) == [("+I", 2, "b"), ("+I", 3, "c"), ("-D", 2, "b"),
                                                             ("+I", 4, "d")]
    narrowed = table.read_changes(0, columns=["id"], where="v = 'b'")
    assert narrowed.schema.names == ["rowkind", "id"] and kinds(narrowed) == [("+I", 2, None), ("-D", 2, None)]
    empty = table.read_changes(2, 2)
    assert empty.num_rows == 0 and empty.schema.names == ["rowkind", "id", "v"]
    for start, end in ((3, 2), (0, 4), (-1, 1)):
        with pytest.raises(SinkError, match=r"need 0 <= start <= end <= 3"):
            table.read_changes(start, end)
    with pytest.raises(SinkError, match=r"mode 'diff' is not one of"):
        table.read_changes(0, mode="diff")
