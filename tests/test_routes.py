"""Route rules (lakecdc.transform.routes): table-id routing as Flink CDC's TableIdRouter, the widest common schema
of tables merged into one Paimon table, row coercion, and a real many-to-one pipeline run against MariaDB."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal as D

import pyarrow as pa
import pytest

from lakecdc.config import RouteConfig, parse_pipeline
from lakecdc.errors import PipelineConfigError
from lakecdc.model import TableId
from lakecdc.transform.routes import Router, coerce_array, merge_schemas, merge_types, route_regex


def route(index, source, sink, symbol=None):
    return RouteConfig(index=index, source_table=source, sink_table=sink, replace_symbol=symbol)


def targets(router, name):
    return [str(t) for t in router.targets(TableId.parse(name))]


# ---------------------------------------------------------------------------------------------- routing

def test_source_table_pattern_conversion():
    assert route_regex("db.t1, db.t2") == r"db\.t1|db\.t2"  # ',' alternatives, trimmed; '.' a literal dot
    assert route_regex(r"db\.*.orders_\.*") == r"db.*\.orders_.*"  # '\.' is the regex any-character


def test_exact_comma_list_case_sensitive_and_unmatched():
    router = Router([route(0, "shop.orders, shop.customers", "lake.merged")])
    assert targets(router, "shop.orders") == ["lake.merged"]
    assert targets(router, "shop.customers") == ["lake.merged"]
    assert targets(router, "SHOP.orders") == ["SHOP.orders"]  # case-sensitive, unlike transform selectors
    assert targets(router, "shop.orders2") == ["shop.orders2"]  # full match; unmatched tables keep their id


def test_replace_symbol_and_regex_groups():
    router = Router([route(0, r"shop_\.*.orders_\.*", "ods.<>", "<>")])
    assert targets(router, "shop_eu.orders_2024") == ["ods.orders_2024"]
    groups = Router([route(0, r"db_(\.*).(\.*)_tbl", "sink_db_$1.sink_table_$2")])
    assert targets(groups, "db_a.x_tbl") == ["sink_db_a.sink_table_x"]
    literal_dollar = Router([route(0, r"db.(\.*)", "lake.t_\\$_$1")])
    assert literal_dollar.routes[0].target_text(TableId.parse("db.orders")) == "lake.t_$_orders"
    with pytest.raises(PipelineConfigError, match=r"contains '\$'"):  # Paimon reads t_$_x as a system table
        literal_dollar.targets(TableId.parse("db.orders"))


def test_all_match_fans_out_first_match_stops():
    rules = [route(0, r"shop.\.*", "lake.all"), route(1, "shop.orders", "lake.orders")]
    assert targets(Router(rules), "shop.orders") == ["lake.all", "lake.orders"]
    assert targets(Router(rules, mode="FIRST_MATCH"), "shop.orders") == ["lake.all"]
    assert targets(Router(rules, mode="first_match"), "shop.items") == ["lake.all"]


def test_route_errors_name_the_rule():
    with pytest.raises(PipelineConfigError) as err:
        Router([route(3, "shop.(orders", "lake.x")], file="p.yaml")
    assert str(err.value).startswith("p.yaml: route[3].source-table: invalid table pattern")
    with pytest.raises(PipelineConfigError, match=r"route\[0\]\.sink-table: sink-table refers to group \$2"):
        Router([route(0, r"shop.(\.*)", "lake.$2")])
    router = Router([route(1, r"shop.(\.*)", "$1")])
    with pytest.raises(PipelineConfigError, match=r"route\[1\]\.sink-table: .*not 'database.table'"):
        router.targets(TableId("shop", "orders"))


# --------------------------------------------------------------------------------------- type merging

@pytest.mark.parametrize("a, b, merged", [
    (pa.int8(), pa.int16(), pa.int16()),
    (pa.int32(), pa.int64(), pa.int64()),
    (pa.int64(), pa.int32(), pa.int64()),
    (pa.int32(), pa.float32(), pa.float64()),  # INT's merging tree has DOUBLE, not FLOAT
    (pa.int16(), pa.float32(), pa.float32()),
    (pa.float32(), pa.float64(), pa.float64()),
    (pa.int64(), pa.decimal128(10, 2), pa.decimal128(21, 2)),
    (pa.decimal128(10, 2), pa.decimal128(12, 4), pa.decimal128(12, 4)),
    (pa.decimal128(10, 2), pa.float64(), pa.string()),
    (pa.string(), pa.int32(), pa.string()),
    (pa.bool_(), pa.int32(), pa.string()),
    (pa.date32(), pa.timestamp("ms"), pa.timestamp("us")),
    (pa.timestamp("ms"), pa.timestamp("us", tz="UTC"), pa.timestamp("us", tz="UTC")),
    (pa.timestamp("s"), pa.timestamp("ms"), pa.timestamp("ms")),
    (pa.time32("ms"), pa.time32("ms"), pa.time32("ms")),
    (pa.binary(), pa.string(), pa.string()),
])
def test_merge_types(a, b, merged):
    assert merge_types(a, b) == merged


def test_merge_schemas_union_order_nullability_and_keys():
    first = pa.schema([pa.field("id", pa.int32(), False), pa.field("a", pa.int32(), False),
                       pa.field("b", pa.string())])
    second = pa.schema([pa.field("id", pa.int64(), False), pa.field("c", pa.float64(), False),
                        pa.field("a", pa.int32(), False)])
    merged = merge_schemas([("db.t1", first), ("db.t2", second)], ["id"], file=None, target=TableId("x", "y"))
    assert list(merged) == [pa.field("id", pa.int64(), False), pa.field("a", pa.int32(), False),
                            pa.field("b", pa.string(), True),  # missing from db.t2: NULL there
                            pa.field("c", pa.float64(), True)]
    with pytest.raises(PipelineConfigError, match="primary key column 'a' is missing from db.t3"):
        merge_schemas([("db.t1", first), ("db.t3", pa.schema([pa.field("id", pa.int32(), False)]))], ["id", "a"],
                      file=None, target=TableId("x", "y"))


def test_coerce_values_as_flink_cdc():
    assert coerce_array(pa.array([1, None], pa.int32()), pa.decimal128(12, 2), "UTC").to_pylist() == [D("1.00"), None]
    assert coerce_array(pa.array([1.0, 2.5]), pa.string(), "UTC").to_pylist() == ["1.0", "2.5"]
    assert coerce_array(pa.array([True]), pa.string(), "UTC").to_pylist() == ["true"]
    assert coerce_array(pa.array([b"hi"]), pa.string(), "UTC").to_pylist() == ["aGk="]  # base64, as Flink CDC
    assert coerce_array(pa.array([dt.date(2024, 1, 2)]), pa.string(), "UTC").to_pylist() == ["2024-01-02"]
    instant = pa.array([dt.datetime(2024, 1, 1, 20, tzinfo=dt.timezone.utc)], pa.timestamp("ms", tz="UTC"))
    assert coerce_array(instant, pa.timestamp("us"), "Asia/Shanghai").to_pylist() == [dt.datetime(2024, 1, 2, 4)]
    wall = pa.array([dt.datetime(2024, 1, 1, 20)], pa.timestamp("ms"))
    assert coerce_array(wall, pa.timestamp("us", tz="UTC"), "Asia/Shanghai").to_pylist() == [
        dt.datetime(2024, 1, 1, 20, tzinfo=dt.timezone.utc)]  # the wall clock's epoch value, no zone shift


# --------------------------------------------------------------------------------------------- pipeline

PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: root
  password: ""
  tables: {db}.orders_\\.*
  server-id: 5801
transform:
  - source-table: {db}.orders_\\.*
    projection: "*, __table_name__ AS src"
    primary-keys: src, id
route:
  - source-table: {db}.orders_\\.*
    sink-table: {db}.all_orders
    description: every shard into one table
  - source-table: {db}.orders_(\\.*)
    sink-table: {db}.shard_$1
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {warehouse}
pipeline:
  name: routes {db}
  route-mode: {mode}
"""


def _shards(mariadb, db):
    mariadb.execute(f"CREATE TABLE `{db}`.orders_a (id INT PRIMARY KEY, amount DECIMAL(10,2), note VARCHAR(10))")
    mariadb.execute(f"CREATE TABLE `{db}`.orders_b (id INT PRIMARY KEY, amount DECIMAL(12,4), qty SMALLINT, "
                    "note INT)")
    mariadb.execute(f"INSERT INTO `{db}`.orders_a VALUES (1, 10.50, 'x'), (2, NULL, NULL)")
    mariadb.execute(f"INSERT INTO `{db}`.orders_b VALUES (1, 2.1234, 3, 42)")


def _rows(config, table):
    from lakecdc.sink.sql import run_sql

    result = run_sql(config.sink.catalog_options, f"SELECT * FROM {table} ORDER BY src, id")
    return [tuple(r.values()) for r in result.to_pylist()]


def test_many_to_one_merges_the_widest_schema(mariadb, fresh_db, tmp_path):
    from lakecdc.runtime import run_micro_batch

    _shards(mariadb, fresh_db)
    config = parse_pipeline(PIPELINE.format(port=mariadb.port, db=fresh_db, warehouse=tmp_path / "wh",
                                            mode="FIRST_MATCH"))
    first = run_micro_batch(config)
    merged = TableId(fresh_db, "all_orders")
    assert set(first.tables) == {merged}  # FIRST_MATCH: the shard routes never apply
    assert [(f.name, f.type, f.nullable) for f in first.tables[merged].schema] == [
        ("id", pa.int32(), False), ("amount", pa.decimal128(12, 4), True), ("note", pa.string(), True),
        ("src", pa.string(), False), ("qty", pa.int16(), True)]
    assert first.tables[merged].primary_keys == ["src", "id"]
    assert _rows(config, f"{fresh_db}.all_orders") == [
        (1, D("10.5000"), "x", "orders_a", None), (2, None, None, "orders_a", None),
        (1, D("2.1234"), "42", "orders_b", 3)]  # INT note as its text, qty NULL for the shard without it

    mariadb.execute(f"UPDATE `{fresh_db}`.orders_b SET note = 7, qty = NULL WHERE id = 1")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.orders_a VALUES (3, 99.99, 'new')")
    mariadb.execute(f"DELETE FROM `{fresh_db}`.orders_a WHERE id = 2")
    run_micro_batch(config)
    assert _rows(config, f"{fresh_db}.all_orders") == [
        (1, D("10.5000"), "x", "orders_a", None), (3, D("99.9900"), "new", "orders_a", None),
        (1, D("2.1234"), "7", "orders_b", None)]


def test_all_match_fans_out_to_merged_and_group_named_tables(mariadb, fresh_db, tmp_path):
    from lakecdc.runtime import run_micro_batch

    _shards(mariadb, fresh_db)
    text = PIPELINE.format(port=mariadb.port, db=fresh_db, warehouse=tmp_path / "wh", mode="ALL_MATCH")
    with pytest.raises(PipelineConfigError, match="routed into tables with different merged schemas"):
        run_micro_batch(parse_pipeline(text))  # a shard cannot be coerced into two different schemas
    # With projections that agree, every shard goes to the merged table and to its own table.
    text = text.replace('projection: "*, __table_name__ AS src"',
                        'projection: "id, CAST(amount AS DECIMAL(12, 4)) AS amount, __table_name__ AS src"')
    config = parse_pipeline(text)
    result = run_micro_batch(config)
    assert set(result.tables) == {TableId(fresh_db, "all_orders"), TableId(fresh_db, "shard_a"),
                                  TableId(fresh_db, "shard_b")}
    assert _rows(config, f"{fresh_db}.shard_b") == [(1, D("2.1234"), "orders_b")]
    assert len(_rows(config, f"{fresh_db}.all_orders")) == 3
