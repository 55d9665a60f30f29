"""Transform rules on Arrow change batches (no database): the Flink CDC tutorial, UPDATE splitting, SOFT_DELETE,
functions, output types and validation errors."""

import datetime as dt
from decimal import Decimal as D

import pyarrow as pa
import pytest

from lakecdc.errors import ExpressionError, PipelineConfigError
from lakecdc.model import OP_COLUMN, ChangeBatch, SourceColumn, SourceTable, TableId
from lakecdc.transform import (TransformContext, TransformRuleConfig, compile_transform, select_rule,
                               validate_rule)

# --------------------------------------------------------------------------------------------------- helpers

ORDERS = SourceTable(
    TableId("inventory", "orders"),
    (SourceColumn("id", "bigint", pa.int64(), False),
     SourceColumn("product", "varchar(100)", pa.string(), False),
     SourceColumn("price", "decimal(10,2)", pa.decimal128(10, 2), False),
     SourceColumn("created_at", "datetime(3)", pa.timestamp("ms"), False)),
    primary_keys=("id",))

TUTORIAL = TransformRuleConfig(
    index=0, source_table="inventory.orders",
    projection="""*,
      CONCAT_WS('.', __namespace_name__, __schema_name__, __table_name__) AS source_table,
      op_ts AS source_ts,
      __data_event_type__ AS op_type,
      UPPER(product) AS product_upper,
      DATE_FORMAT(created_at, 'yyyyMMdd') AS order_day""",
    primary_keys="id, order_day", partition_keys="order_day", converter_after_transform="SOFT_DELETE")

OP_TS_CTX = TransformContext(metadata_list=frozenset({"op_ts"}))


def batch(table: SourceTable, rows: list[tuple]) -> ChangeBatch:
    """rows = (source values..., op, op_ts)."""
    schema = table.change_schema()
    cols = list(zip(*rows)) if rows else [[] for _ in schema]
    return ChangeBatch(table, pa.Table.from_arrays([pa.array(list(c), f.type) for c, f in zip(cols, schema)],
                                                   schema=schema))


def order(id_, product, price, created, op="+I", ts=0):
    return (id_, product, D(price), dt.datetime.fromisoformat(created), op, ts)


def rows(table: pa.Table, *names):
    return [tuple(r[n] for n in names) for r in table.to_pylist()]


def source_of(columns: dict[str, pa.Array]) -> SourceTable:
    return SourceTable(TableId("db", "t"), tuple(SourceColumn(name, "x", arr.type, True)
                                                 for name, arr in columns.items()))


def evaluate(expr: str, tz: str = "UTC", **columns):
    """Evaluate one expression over +I rows made of ``columns`` (name → pa.Array); returns (values, field)."""
    if not columns:
        columns = {"dummy": pa.array([1], pa.int32())}
    src = source_of(columns)
    n = len(next(iter(columns.values())))
    data = pa.table({**columns, OP_COLUMN: pa.array(["+I"] * n), "__lakecdc_op_ts__": pa.array([0] * n, pa.int64())})
    rule = TransformRuleConfig(index=0, source_table="db.t", projection=f"{expr} AS r")
    ct = compile_transform(rule, src, TransformContext(local_time_zone=tz))
    out = ct.apply(ChangeBatch(src, data))
    return out.column("r").to_pylist(), ct.output_schema.field("r")


def value(expr: str, **columns):
    return evaluate(expr, **columns)[0][0]


# ------------------------------------------------------------------------------------------ tutorial scenario

def test_tutorial_output_schema():
    ct = compile_transform(TUTORIAL, ORDERS, OP_TS_CTX)
    assert ct.output_schema == pa.schema([
        pa.field("id", pa.int64(), nullable=False),
        pa.field("product", pa.string(), nullable=False),
        pa.field("price", pa.decimal128(10, 2), nullable=False),
        pa.field("created_at", pa.timestamp("ms"), nullable=False),
        pa.field("source_table", pa.string(), nullable=True),
        pa.field("source_ts", pa.int64(), nullable=False),
        pa.field("op_type", pa.string(), nullable=False),
        pa.field("product_upper", pa.string(), nullable=True),
        pa.field("order_day", pa.string(), nullable=False),
    ])
    assert ct.primary_keys == ["id", "order_day"]
    assert ct.partition_keys == ["order_day"]
    assert ct.converter == "SOFT_DELETE"
    assert ct.table_options == {}


def test_tutorial_snapshot_rows():
    ct = compile_transform(TUTORIAL, ORDERS, OP_TS_CTX)
    out = ct.apply(batch(ORDERS, [order(101, "book", "29.90", "2026-01-01 12:00:00"),
                                  order(102, "pen", "5.00", "2026-01-02 09:30:00")]))
    assert out.schema.names == ct.output_schema.names + [OP_COLUMN]
    assert out.to_pylist() == [
        {"id": 101, "product": "book", "price": D("29.90"), "created_at": dt.datetime(2026, 1, 1, 12),
         "source_table": "inventory.orders", "source_ts": 0, "op_type": "+I", "product_upper": "BOOK",
         "order_day": "20260101", OP_COLUMN: "+I"},
        {"id": 102, "product": "pen", "price": D("5.00"), "created_at": dt.datetime(2026, 1, 2, 9, 30),
         "source_table": "inventory.orders", "source_ts": 0, "op_type": "+I", "product_upper": "PEN",
         "order_day": "20260102", OP_COLUMN: "+I"},
    ]


def test_tutorial_binlog_phase():
    ct = compile_transform(TUTORIAL, ORDERS, OP_TS_CTX)
    ts = 1_767_600_000_000
    out = ct.apply(batch(ORDERS, [
        order(101, "book", "29.90", "2026-01-01 12:00:00", "-U", ts),
        order(101, "notebook", "39.90", "2026-01-01 12:00:00", "+U", ts),
        order(102, "pen", "5.00", "2026-01-02 09:30:00", "-D", ts + 1000),
        order(103, "pencil", "3.50", "2026-01-03 12:00:00", "+I", ts + 2000),
    ]))
    assert rows(out, "id", "product_upper", "price", "order_day", "op_type", "source_ts", OP_COLUMN) == [
        (101, "BOOK", D("29.90"), "20260101", "-U", ts, "-U"),
        (101, "NOTEBOOK", D("39.90"), "20260101", "+U", ts, "+U"),
        (102, "PEN", D("5.00"), "20260102", "-D", ts + 1000, "+I"),  # SOFT_DELETE: delete → insert of before
        (103, "PENCIL", D("3.50"), "20260103", "+I", ts + 2000, "+I"),
    ]
    again = ct.apply(batch(ORDERS, [order(102, "blue pen", "6.00", "2026-01-02 09:30:00", "+I", ts + 5000)]))
    assert rows(again, "id", "product_upper", "order_day", "op_type", OP_COLUMN) == [
        (102, "BLUE PEN", "20260102", "+I", "+I")]


def test_without_soft_delete_delete_stays_delete():
    rule = TransformRuleConfig(index=0, source_table="inventory.orders", projection="id, __data_event_type__ AS k")
    ct = compile_transform(rule, ORDERS, TransformContext())
    out = ct.apply(batch(ORDERS, [order(102, "pen", "5.00", "2026-01-02 09:30:00", "-D", 5)]))
    assert rows(out, "id", "k", OP_COLUMN) == [(102, "-D", "-D")]


def test_empty_batch():
    ct = compile_transform(TUTORIAL, ORDERS, OP_TS_CTX)
    out = ct.apply(batch(ORDERS, []))
    assert out.num_rows == 0
    assert out.schema.names[-1] == OP_COLUMN


def test_pass_through_rule_none():
    ct = compile_transform(None, ORDERS, TransformContext())
    assert ct.output_schema == ORDERS.arrow_schema()
    assert ct.primary_keys == ["id"] and ct.partition_keys == [] and ct.converter is None
    out = ct.apply(batch(ORDERS, [order(1, "a", "1.00", "2026-01-01 00:00:00", "-D", 9)]))
    assert rows(out, "id", OP_COLUMN) == [(1, "-D")]


# ---------------------------------------------------------------------------------------- filter & splitting

def _split(filter_text, before_product, after_product, converter=None):
    rule = TransformRuleConfig(index=0, source_table="inventory.orders",
                               projection="id, product, __data_event_type__ AS k", filter=filter_text,
                               converter_after_transform=converter)
    ct = compile_transform(rule, ORDERS, TransformContext())
    out = ct.apply(batch(ORDERS, [
        order(1, before_product, "1.00", "2026-01-01 00:00:00", "-U", 5),
        order(1, after_product, "1.00", "2026-01-01 00:00:00", "+U", 5),
    ]))
    return rows(out, "product", "k", OP_COLUMN)


def test_update_both_images_pass():
    assert _split("product LIKE 'keep%'", "keep1", "keep2") == [("keep1", "-U", "-U"), ("keep2", "+U", "+U")]


def test_update_only_before_passes_becomes_delete():
    assert _split("product LIKE 'keep%'", "keep1", "drop") == [("keep1", "-U", "-D")]


def test_update_only_before_passes_with_soft_delete_becomes_insert():
    assert _split("product LIKE 'keep%'", "keep1", "drop", "soft_delete") == [("keep1", "-U", "+I")]


def test_update_only_after_passes_becomes_insert():
    assert _split("product LIKE 'keep%'", "drop", "keep2") == [("keep2", "+U", "+I")]


def test_update_neither_passes_is_dropped():
    assert _split("product LIKE 'keep%'", "drop", "drop2") == []


def test_insert_and_delete_filtered_and_order_kept():
    rule = TransformRuleConfig(index=0, source_table="inventory.orders", filter="id > 1")
    ct = compile_transform(rule, ORDERS, TransformContext())
    out = ct.apply(batch(ORDERS, [
        order(1, "a", "1.00", "2026-01-01 00:00:00", "+I"),
        order(2, "b", "1.00", "2026-01-01 00:00:00", "+I"),
        order(1, "a", "1.00", "2026-01-01 00:00:00", "-D"),
        order(3, "c", "1.00", "2026-01-01 00:00:00", "-D"),
        order(3, "x", "1.00", "2026-01-01 00:00:00", "-U"),
        order(3, "y", "1.00", "2026-01-01 00:00:00", "+U"),
        order(4, "d", "1.00", "2026-01-01 00:00:00", "+I"),
    ]))
    assert out.schema.names == ORDERS.column_names + [OP_COLUMN]  # filter-only rule keeps all columns
    assert rows(out, "id", "product", OP_COLUMN) == [(2, "b", "+I"), (3, "c", "-D"), (3, "x", "-U"),
                                                     (3, "y", "+U"), (4, "d", "+I")]


def test_filter_sees_projected_values_first_then_source_then_metadata():
    # UPPER(product) AS product shadows the source column; price is projected out but still usable
    rule = TransformRuleConfig(index=0, source_table="inventory.orders", projection="id, UPPER(product) AS product",
                               filter="product = 'BOOK' AND price > 10 AND __table_name__ = 'orders'")
    ct = compile_transform(rule, ORDERS, TransformContext())
    out = ct.apply(batch(ORDERS, [order(1, "book", "29.90", "2026-01-01 00:00:00"),
                                  order(2, "book", "5.00", "2026-01-01 00:00:00"),
                                  order(3, "pen", "29.90", "2026-01-01 00:00:00")]))
    assert rows(out, "id", "product") == [(1, "BOOK")]


def test_filter_null_result_drops_row():
    src = source_of({"a": pa.array([1], pa.int32()), "b": pa.array(["x"])})
    rule = TransformRuleConfig(index=0, source_table="db.t", filter="b LIKE 'x%' AND a IS NOT NULL")
    ct = compile_transform(rule, src, TransformContext())
    data = pa.table({"a": pa.array([1, None, 3], pa.int32()), "b": pa.array(["x1", "x2", None]),
                     OP_COLUMN: ["+I"] * 3, "__lakecdc_op_ts__": pa.array([0] * 3, pa.int64())})
    assert ct.apply(ChangeBatch(src, data)).column("a").to_pylist() == [1]


def test_malformed_update_pair_is_reported():
    rule = TransformRuleConfig(index=0, source_table="inventory.orders", filter="id > 0")
    ct = compile_transform(rule, ORDERS, TransformContext())
    with pytest.raises(Exception, match="-U row immediately followed"):
        ct.apply(batch(ORDERS, [order(1, "a", "1.00", "2026-01-01 00:00:00", "-U")]))


# --------------------------------------------------------------------------------------- projection rules

def test_star_in_place_and_duplicate_replaces_in_place():
    rule = TransformRuleConfig(index=0, source_table="inventory.orders",
                               projection="UPPER(product) AS u, *, UPPER(product) AS product")
    ct = compile_transform(rule, ORDERS, TransformContext())
    assert ct.output_schema.names == ["u", "id", "product", "price", "created_at"]
    assert ct.output_schema.field("product") == pa.field("product", pa.string(), nullable=True)
    out = ct.apply(batch(ORDERS, [order(1, "book", "1.00", "2026-01-01 00:00:00")]))
    assert rows(out, "u", "product") == [("BOOK", "BOOK")]


def test_rename_keeps_type_and_nullability_and_backticks():
    rule = TransformRuleConfig(index=0, source_table="inventory.orders",
                               projection="id, price AS `unit-price`, created_at created, `product`")
    ct = compile_transform(rule, ORDERS, TransformContext())
    assert list(ct.output_schema) == [pa.field("id", pa.int64(), False),
                                      pa.field("unit-price", pa.decimal128(10, 2), False),
                                      pa.field("created", pa.timestamp("ms"), False),
                                      pa.field("product", pa.string(), False)]


def test_metadata_columns_types_and_values():
    rule = TransformRuleConfig(index=0, source_table="inventory.orders",
                               projection="id, __namespace_name__, __schema_name__, __table_name__, "
                                          "__data_event_type__, op_ts")
    ct = compile_transform(rule, ORDERS, OP_TS_CTX)
    assert list(ct.output_schema)[1:] == [pa.field("__namespace_name__", pa.string(), True),
                                          pa.field("__schema_name__", pa.string(), False),
                                          pa.field("__table_name__", pa.string(), False),
                                          pa.field("__data_event_type__", pa.string(), False),
                                          pa.field("op_ts", pa.int64(), False)]
    out = ct.apply(batch(ORDERS, [order(1, "a", "1.00", "2026-01-01 00:00:00", "+I", 7)]))
    assert rows(out, "__namespace_name__", "__schema_name__", "__table_name__", "__data_event_type__",
                "op_ts") == [(None, "inventory", "orders", "+I", 7)]


def test_computed_types():
    src = source_of({"i": pa.array([1], pa.int32()), "b": pa.array([1], pa.int64()),
                     "d": pa.array([1.5]), "m": pa.array([D("1.25")], pa.decimal128(10, 2)),
                     "s": pa.array(["x"])})
    rule = TransformRuleConfig(index=0, source_table="db.t", projection=(
        "i + 1 AS a, b + 17 AS c, d / (d * d) AS e, UPPER(s) AS f, CAST(i AS VARCHAR) AS g, "
        "CASE WHEN i > 0 THEN 'Type-A' ELSE 'Type-B' END AS h, 2147483648 AS j, 2147483647 AS k, "
        "i > 0 AS l, CAST(m AS DECIMAL(5, 1)) AS n, IFNULL(s, 'z') AS o, COALESCE(s, 'z') AS p"))
    schema = compile_transform(rule, src, TransformContext()).output_schema
    assert [(f.name, f.type, f.nullable) for f in schema] == [
        ("a", pa.int32(), True), ("c", pa.int64(), True), ("e", pa.float64(), True), ("f", pa.string(), True),
        ("g", pa.string(), True), ("h", pa.string(), True), ("j", pa.int64(), True), ("k", pa.int32(), True),
        ("l", pa.bool_(), True), ("n", pa.decimal128(5, 1), True), ("o", pa.string(), False),
        ("p", pa.string(), True)]


def test_primary_and_partition_keys_replace_upstream_and_table_options():
    rule = TransformRuleConfig(index=0, source_table="inventory.orders",
                               projection="id, product, CAST(price AS DOUBLE) AS p",
                               primary_keys=" product ", partition_keys="product, id",
                               table_options="bucket = 4, changelog-producer=input", )
    ct = compile_transform(rule, ORDERS, TransformContext())
    assert ct.primary_keys == ["product"] and ct.partition_keys == ["product", "id"]
    assert ct.table_options == {"bucket": "4", "changelog-producer": "input"}
    rule2 = TransformRuleConfig(index=0, source_table="inventory.orders", table_options="a=1,2;b=x=y",
                                table_options_delimiter=";")
    assert compile_transform(rule2, ORDERS, TransformContext()).table_options == {"a": "1,2", "b": "x=y"}


def test_computed_primary_key_becomes_not_null_and_null_values_fail():
    src = source_of({"k": pa.array(["a"])})
    rule = TransformRuleConfig(index=0, source_table="db.t", projection="k, UPPER(k) AS uk", primary_keys="uk")
    ct = compile_transform(rule, src, TransformContext())
    assert ct.output_schema.field("uk").nullable is False
    data = pa.table({"k": pa.array([None], pa.string()), OP_COLUMN: ["+I"],
                     "__lakecdc_op_ts__": pa.array([0], pa.int64())})
    with pytest.raises(ExpressionError, match="primary key column 'uk' is NULL"):
        ct.apply(ChangeBatch(src, data))


def test_select_rule_first_match_wins():
    rules = [TransformRuleConfig(index=0, source_table="inventory.orders", filter="id > 100"),
             TransformRuleConfig(index=1, source_table=r"inventory.\.*"),
             TransformRuleConfig(index=2, source_table="other.orders")]
    assert select_rule(rules, TableId("inventory", "orders")).index == 0
    assert select_rule(rules, TableId("INVENTORY", "customers")).index == 1
    assert select_rule(rules, TableId("other", "orders")).index == 2
    assert select_rule(rules, TableId("x", "y")) is None


# ------------------------------------------------------------------------------------------------ functions

def test_concat_ws_nulls():
    cols = {"a": pa.array(["x", None, None, "x"]), "b": pa.array([None, None, "y", "y"]),
            "sep": pa.array([".", ".", None, "-"])}
    assert evaluate("CONCAT_WS('.', a, b)", **cols)[0] == ["x", "", "y", "x.y"]
    assert evaluate("CONCAT_WS(sep, a, b)", **cols)[0] == ["x", "", None, "x-y"]
    assert evaluate("CONCAT_WS('.', a, NULL, b, 1)", **cols)[0] == ["x.1", "1", "y.1", "x.y.1"]
    assert evaluate("CONCAT_WS(NULL, a)", **cols)[0] == [None] * 4


def test_concat_and_pipes_render_null_as_text():
    cols = {"a": pa.array(["x", None]), "n": pa.array([1009, None], pa.int32())}
    assert evaluate("'id -> ' || n", **cols)[0] == ["id -> 1009", "id -> null"]
    assert evaluate("CONCAT(a, '.', n, '.', TRUE)", **cols)[0] == ["x.1009.true", "null.null.true"]
    assert value("CONCAT(__namespace_name__, '.', __schema_name__)") == "null.db"
    assert value("CONCAT(CAST(1.5 AS DOUBLE), '/', 2.50)") == "1.5/2.50"


def test_upper_lower_null_safe():
    assert evaluate("UPPER(s)", s=pa.array(["book", None]))[0] == ["BOOK", None]
    assert evaluate("lower(s)", s=pa.array(["BoOk", None]))[0] == ["book", None]


@pytest.mark.parametrize("pattern, expected", [
    ("yyyyMMdd", "20260102"),
    ("yyyy-MM-dd HH:mm:ss", "2026-01-02 09:05:07"),
    ("yyyy-MM-dd'T'HH:mm:ss.SSS", "2026-01-02T09:05:07.045"),
    ("yy/M/d H:m:s", "26/1/2 9:5:7"),
    ("MMM dd, yyyy hh:mm a", "Jan 02, 2026 09:05 AM"),
    ("MMMM E EEEE", "January Fri Friday"),
    ("'Day' D 'of' yyyy", "Day 2 of 2026"),
    ("HH 'o''clock'", "09 o'clock"),
    ("''yyyy''", "'2026'"),
    ("dd.MM.yyyy", "02.01.2026"),
])
def test_date_format_patterns(pattern, expected):
    sql_pattern = pattern.replace("'", "''")
    ts = pa.array([dt.datetime(2026, 1, 2, 9, 5, 7, 45_000), None], pa.timestamp("ms"))
    assert evaluate(f"DATE_FORMAT(ts, '{sql_pattern}')", ts=ts)[0] == [expected, None]


def test_date_format_pm_and_12_hour():
    ts = pa.array([dt.datetime(2026, 1, 2, 0, 30), dt.datetime(2026, 1, 2, 12, 0), dt.datetime(2026, 1, 2, 23, 1)],
                  pa.timestamp("us"))
    assert evaluate("DATE_FORMAT(ts, 'hh:mm a|K|k')", ts=ts)[0] == ["12:30 AM|0|24", "12:00 PM|0|12",
                                                                    "11:01 PM|11|23"]


def test_date_format_timestamp_ltz_uses_local_time_zone():
    instant = pa.array([dt.datetime(2026, 1, 1, 20, 30, tzinfo=dt.timezone.utc)], pa.timestamp("ms", tz="UTC"))
    fmt = "DATE_FORMAT(ts, 'yyyy-MM-dd HH:mm')"
    assert evaluate(fmt, tz="UTC", ts=instant)[0] == ["2026-01-01 20:30"]
    assert evaluate(fmt, tz="Asia/Shanghai", ts=instant)[0] == ["2026-01-02 04:30"]
    assert evaluate(fmt, tz="+05:30", ts=instant)[0] == ["2026-01-02 02:00"]
    assert evaluate(fmt, tz="America/New_York", ts=instant)[0] == ["2026-01-01 15:30"]
    # a zone-less TIMESTAMP is formatted as its wall clock, whatever the local time zone
    naive = pa.array([dt.datetime(2026, 1, 1, 20, 30)], pa.timestamp("ms"))
    assert evaluate(fmt, tz="Asia/Shanghai", ts=naive)[0] == ["2026-01-01 20:30"]


def test_date_format_date():
    assert evaluate("DATE_FORMAT(d, 'yyyy/MM/dd')", d=pa.array([dt.date(2026, 3, 4)], pa.date32()))[0] == [
        "2026/03/04"]


def test_comparisons_null_behaviour():
    cols = {"a": pa.array([1, None, 3], pa.int32()), "b": pa.array([1, 2, None], pa.int64())}
    assert evaluate("a = b", **cols)[0] == [True, False, False]
    # Flink CDC's code (!valueEquals), its documentation's function column and its spec tests: TRUE when either side
    # is NULL, the negation of =
    assert evaluate("a <> b", **cols)[0] == [False, True, True]
    assert evaluate("a < b", **cols)[0] == [False, False, False]
    assert evaluate("a >= b", **cols)[0] == [True, False, False]
    assert evaluate("a = NULL", **cols)[0] == [False, False, False]
    assert evaluate("a <> NULL", **cols)[0] == [True, True, True]
    assert evaluate("a != b", **cols)[0] == [False, True, True]


def test_numeric_comparison_by_value():
    cols = {"m": pa.array([D("29.90")], pa.decimal128(10, 2)), "i": pa.array([3], pa.int32()),
            "b": pa.array([3], pa.int64())}
    assert value("m = 29.9", **cols) is True
    assert value("i = b", **cols) is True
    assert value("m > 29", **cols) is True
    assert value("CAST(i AS DOUBLE) = 3", **cols) is True


def test_logic_three_valued():
    cols = {"x": pa.array([True, False, None, None, True]), "y": pa.array([None, None, None, True, True])}
    assert evaluate("x AND y", **cols)[0] == [None, False, None, None, True]
    assert evaluate("x OR y", **cols)[0] == [True, None, None, True, True]
    assert evaluate("NOT x", **cols)[0] == [False, True, None, None, False]
    assert evaluate("x IS NULL", **cols)[0] == [False, False, True, True, False]
    assert evaluate("x IS NOT NULL", **cols)[0] == [True, True, False, False, True]
    assert evaluate("x IS TRUE", **cols)[0] == [True, False, False, False, True]
    assert evaluate("x IS NOT FALSE", **cols)[0] == [True, False, True, True, True]


def test_arithmetic_and_promotion():
    cols = {"i": pa.array([7, -7, None], pa.int32()), "j": pa.array([2, 2, 2], pa.int32()),
            "d": pa.array([2.0, 2.0, 2.0]), "m": pa.array([D("1.10"), D("2.00"), None], pa.decimal128(10, 2))}
    assert evaluate("i / j", **cols) == ([3, -3, None], pa.field("r", pa.int32()))
    assert evaluate("i % j", **cols)[0] == [1, -1, None]
    assert evaluate("i / d", **cols)[0] == [3.5, -3.5, None]
    assert evaluate("i + 1", **cols)[0] == [8, -6, None]
    assert evaluate("-i * 2", **cols)[0] == [-14, 14, None]
    res, field = evaluate("m + i", **cols)
    assert res == [D("8.10"), D("-5.00"), None] and pa.types.is_decimal(field.type) and field.type.scale == 2
    assert evaluate("m * 2", **cols)[0] == [D("2.20"), D("4.00"), None]
    assert value("2147483647 + 1") == -2147483648  # INT arithmetic wraps like Java
    with pytest.raises(ExpressionError, match="division by zero"):
        evaluate("i / 0", **cols)


def test_cast():
    assert value("CAST('1' AS BOOLEAN)") is False
    assert value("CAST('TRUE' AS BOOLEAN)") is True
    assert value("CAST(2 AS BOOLEAN)") is True
    assert value("TRY_CAST('yes' AS BOOLEAN)") is True
    assert value("CAST('-12.13' AS INT)") == -12
    assert value("CAST('128' AS TINYINT)") == -128
    assert value("CAST('abc' AS INT)") is None
    assert value("TRY_CAST('12.5' AS INT)") is None
    assert value("CAST(TRUE AS INT)") == 1
    assert value("CAST(-6.7 AS DECIMAL(1, 0))") == D("-7")
    assert value("CAST(-10.11 AS DECIMAL(1, 0))") is None
    assert value("CAST(2.345 AS DECIMAL(10, 2))") == D("2.35")
    assert value("CAST('3.14159' AS DECIMAL(5, 3))") == D("3.142")
    assert value("CAST(12.9 AS BIGINT)") == 12
    assert value("CAST('1.5' AS DOUBLE)") == 1.5
    assert value("CAST(1 AS DOUBLE)") == 1.0
    assert value("CAST(CAST(1 AS DOUBLE) AS STRING)") == "1.0"
    assert value("CAST(2.50 AS VARCHAR(10))") == "2.50"
    assert value("CAST(NULL AS INT)") is None
    ts = pa.array([dt.datetime(1970, 1, 1, 0, 0, 1, 234_000)], pa.timestamp("ms"))
    assert evaluate("CAST(ts AS STRING)", ts=ts)[0] == ["1970-01-01T00:00:01.234"]
    assert value("CAST('2024-01-02' AS TIMESTAMP)") == dt.datetime(2024, 1, 2)
    assert value("CAST('2024-01-02T03:04:05.5' AS TIMESTAMP(3))") == dt.datetime(2024, 1, 2, 3, 4, 5, 500_000)
    assert value("CAST('2024-01-02T03:04:05+08:00' AS TIMESTAMP)") == dt.datetime(2024, 1, 2, 3, 4, 5)
    assert value("TRY_CAST('not a time' AS TIMESTAMP)") is None
    with pytest.raises(ExpressionError, match="Unable to parse given string as timestamp"):
        value("CAST('not a time' AS TIMESTAMP)")  # fails the batch, as it fails Flink CDC's job
    instant = pa.array([dt.datetime(2026, 1, 1, 20, 30, tzinfo=dt.timezone.utc)], pa.timestamp("ms", tz="UTC"))
    assert evaluate("CAST(ts AS TIMESTAMP(3))", tz="+08:00", ts=instant)[0] == [dt.datetime(2026, 1, 2, 4, 30)]


def test_conditionals():
    cols = {"a": pa.array([1, 2, None], pa.int32()), "s": pa.array(["x", None, None])}
    assert evaluate("CASE WHEN a = 1 THEN 'one' WHEN a > 1 THEN 'many' ELSE 'none' END", **cols)[0] == [
        "one", "many", "none"]
    assert evaluate("CASE a WHEN 1 THEN 10 WHEN 2 THEN 20 END", **cols)[0] == [10, 20, None]
    assert evaluate("IF(a > 1, 'big', 'small')", **cols)[0] == ["small", "big", "small"]
    assert evaluate("COALESCE(s, CAST(a AS STRING), 'z')", **cols)[0] == ["x", "2", "z"]
    assert evaluate("IFNULL(a, 0)", **cols)[0] == [1, 2, 0]
    assert evaluate("NULLIF(a, 1)", **cols)[0] == [None, 2, None]


def test_in_and_between():
    cols = {"a": pa.array([1, 2, None], pa.int32())}
    assert evaluate("a IN (1, 3)", **cols)[0] == [True, False, False]
    # Flink CDC's in(): Arrays.asList(items).contains(v), so a NULL v is found among NULL items; NOT IN and NOT BETWEEN
    # are the negations (TRUE for a NULL v)
    assert evaluate("a IN (2, NULL)", **cols)[0] == [False, True, True]
    assert evaluate("a NOT IN (2, NULL)", **cols)[0] == [True, False, False]
    assert evaluate("a NOT IN (2, 3)", **cols)[0] == [True, False, True]
    assert evaluate("a BETWEEN 2 AND 5", **cols)[0] == [False, True, False]
    assert evaluate("a NOT BETWEEN 2 AND 5", **cols)[0] == [True, False, True]


def test_like_is_sql_like():
    # Deviation by choice: SQL LIKE (documented meaning), not Flink 3.6's Java-regex substring search.
    cols = {"s": pa.array(["Alice", "ali", None, "a_%b", "x\ny"])}
    assert evaluate("s LIKE 'A%'", **cols)[0] == [True, False, None, False, False]
    assert evaluate("s LIKE 'li'", **cols)[0] == [False, False, None, False, False]
    assert evaluate("s LIKE '_li%'", **cols)[0] == [True, True, None, False, False]
    assert evaluate("s NOT LIKE 'A%'", **cols)[0] == [False, True, None, True, True]
    assert evaluate("s LIKE 'a!_!%%' ESCAPE '!'", **cols)[0] == [False, False, None, True, False]
    assert evaluate("s LIKE 'x%y'", **cols)[0] == [False, False, None, False, True]


def test_literals():
    assert evaluate("'it''s'")[0] == ["it's"]
    assert evaluate("'a\\b'")[0] == ["a\\b"]
    assert evaluate("TRUE")[0] == [True]
    res, field = evaluate("2.10")
    assert res == [D("2.10")] and field.type == pa.decimal128(3, 2)
    assert evaluate("1.5e3")[0] == [1500.0]
    assert evaluate("NULL")[1] == pa.field("r", pa.string(), True)


def test_more_functions():
    cols = {"s": pa.array(["  Hello ", None]), "n": pa.array([-2.5, None])}
    assert evaluate("TRIM(s)", **cols)[0] == ["Hello", None]
    assert evaluate("CHAR_LENGTH(s)", **cols)[0] == [8, None]
    assert evaluate("SUBSTR(TRIM(s), 2, 3)", **cols)[0] == ["ell", None]
    assert evaluate("SUBSTRING(TRIM(s) FROM -2 FOR 2)", **cols)[0] == ["lo", None]
    assert evaluate("REPLACE(s, 'l', 'L')", **cols)[0] == ["  HeLLo ", None]
    assert evaluate("ABS(n)", **cols)[0] == [2.5, None]
    assert evaluate("ROUND(n)", **cols)[0] == [-3.0, None]
    assert evaluate("CEIL(n)", **cols)[0] == [-2.0, None]
    assert evaluate("FLOOR(n)", **cols)[0] == [-3.0, None]
    assert value("ROUND(CAST(5.555 AS DECIMAL(10, 3)), 2)") == D("5.56")
    assert value("MOD(-7, 3)") == -1


def test_udf_hook_wins_over_builtin():
    def shout(arr):
        import pyarrow.compute as pc
        return pc.binary_join_element_wise(pc.utf8_upper(arr), "!", "")
    shout.result_type = pa.string()
    src = source_of({"s": pa.array(["a"])})
    rule = TransformRuleConfig(index=0, source_table="db.t", projection="upper(s) AS r")
    ctx = TransformContext(udfs={"UPPER": shout})
    validate_rule(rule, ctx)
    data = pa.table({"s": ["hi"], OP_COLUMN: ["+I"], "__lakecdc_op_ts__": pa.array([0], pa.int64())})
    assert compile_transform(rule, src, ctx).apply(ChangeBatch(src, data)).column("r").to_pylist() == ["HI!"]


# ---------------------------------------------------------------------------------------- validation errors

def _invalid(ctx=None, **kwargs):
    rule = TransformRuleConfig(index=3, source_table=kwargs.pop("source_table", "inventory.orders"), **kwargs)
    ctx = ctx or TransformContext(source_file="pipe.yaml")
    with pytest.raises(PipelineConfigError) as err:
        validate_rule(rule, ctx)
        compile_transform(rule, ORDERS, ctx)
    return str(err.value)


def test_error_syntax():
    msg = _invalid(projection="id, UPPER(product AS x")
    assert msg.startswith("pipe.yaml: transform[3].projection: ") and "syntax error" in msg


def test_error_projection_without_alias():
    msg = _invalid(projection="id, 1 + 1")
    assert "transform[3].projection" in msg and "Unrecognized projection expression: 1 + 1" in msg


def test_error_unknown_function():
    msg = _invalid(projection="id, FOO_BAR(product) AS x")
    assert "transform[3].projection" in msg and "unknown function FOO_BAR" in msg
    msg = _invalid(filter="NOPE(id) > 1")
    assert "transform[3].filter" in msg and "unknown function NOPE" in msg


def test_error_wrong_arity():
    assert "UPPER expects 1 argument" in _invalid(projection="id, UPPER(product, id) AS x")


def test_error_reserved_metadata_alias():
    msg = _invalid(projection="id, product AS __table_name__")
    assert "transform[3].projection" in msg and "__table_name__ is reserved" in msg


def test_error_op_ts_without_metadata_list():
    msg = _invalid(projection="id, op_ts AS ts")
    assert "transform[3].projection" in msg and "metadata.list" in msg and "op_ts" in msg
    assert "transform[3].filter" in _invalid(filter="op_ts > 0")


def test_error_bad_converter():
    msg = _invalid(converter_after_transform="HARD_DELETE")
    assert "transform[3].converter-after-transform" in msg and "HARD_DELETE" in msg


def test_error_bad_table_options():
    msg = _invalid(table_options="bucket=4,oops")
    assert "transform[3].table-options" in msg and "'oops'" in msg


def test_error_unsupported_cast_target():
    msg = _invalid(projection="id, CAST(created_at AS DATE) AS d")
    assert "transform[3].projection" in msg and "Unsupported data type cast" in msg


def test_error_unsupported_date_pattern_letter():
    msg = _invalid(projection="id, DATE_FORMAT(created_at, 'yyyy z') AS d")
    assert "transform[3].projection" in msg and "'z'" in msg


def test_error_bad_selector():
    assert "transform[3].source-table" in _invalid(source_table="inventory.order[")


def test_error_unknown_column_lists_available():
    msg = _invalid(projection="id, UPPER(produkt) AS x")
    assert "transform[3].projection" in msg and "'produkt'" in msg
    assert "available columns: id, product, price, created_at" in msg
    msg = _invalid(filter="nope > 1")
    assert "transform[3].filter" in msg and "'nope'" in msg


def test_error_keys_not_in_output():
    msg = _invalid(projection="id, product", primary_keys="id, order_day")
    assert "transform[3].primary-keys" in msg and "'order_day'" in msg
    msg = _invalid(projection="id, product", partition_keys="price")
    assert "transform[3].partition-keys" in msg and "'price'" in msg
    msg = _invalid(projection="product")
    assert "transform[3].projection" in msg and "primary key column 'id'" in msg


def test_error_type_mismatch():
    assert "cannot compare" in _invalid(filter="product = 1")
    assert "UPPER expects STRING" in _invalid(projection="id, UPPER(id) AS u")
    assert "BOOLEAN" in _invalid(filter="id + 1")


# ------------------------------------------------------------------------------------------------- VARIANT

def test_variant_columns_through_paimon(tmp_path):
    """PARSE_JSON / TRY_PARSE_JSON / subscripting as VARIANT output columns: declared VARIANT, written by lakecdc's
    sink (pypaimon-rust's writer) in Paimon's Variant encoding, read back by pypaimon and by pypaimon-rust; a
    filter reads the projected VARIANT; UPDATE and DELETE of a primary-key table apply."""
    from pypaimon_rust.datafusion import PaimonCatalog

    from lakecdc.sink import PaimonSink
    from lakecdc.transform.types import type_name, variant_from_storage

    docs = SourceTable(TableId("db", "docs"), (SourceColumn("id", "bigint", pa.int64(), False),
                                               SourceColumn("body", "json", pa.string())), primary_keys=("id",))
    rule = TransformRuleConfig(index=0, source_table="db.docs", projection=(
        "id, PARSE_JSON(body) AS doc, TRY_PARSE_JSON(body)['a'][2] AS a2, PARSE_JSON(body)['k'] AS k"),
        filter="k IS NULL OR CAST(k AS STRING) <> '0'")
    compiled = compile_transform(rule, docs, TransformContext())
    assert [type_name(f) for f in compiled.output_schema] == ["BIGINT", "VARIANT", "VARIANT", "VARIANT"]
    first = compiled.apply(batch(docs, [(1, '{"k": 1, "a": [1, 2.50, {"x": "y"}]}', "+I", 0),
                                        (2, "[1, 2]", "+I", 0), (3, None, "+I", 0), (4, '{"k": 0}', "+I", 0)]))
    assert first.column("id").to_pylist() == [1, 2, 3]  # the filter read k = 0 and dropped row 4
    second = compiled.apply(batch(docs, [(1, '{"k": 1, "a": [1, 2.50, {"x": "y"}]}', "-U", 0),
                                         (1, '{"k": "new"}', "+U", 0), (2, "[1, 2]", "-D", 0)]))

    sink = PaimonSink({"metastore": "filesystem", "warehouse": str(tmp_path)})
    table_id = TableId("db", "docs")
    sink.ensure_table(table_id, compiled.output_schema, ["id"], [], {}, "")
    assert sink.paimon_types(table_id)["doc"] == "VARIANT"
    for out in (first, second):
        writer = sink.open_writer(table_id)
        writer.write(out)
        writer.commit({})

    def texts(table: pa.Table) -> list[tuple]:
        table = table.sort_by("id")
        return list(zip(table.column("id").to_pylist(),
                        *[variant_from_storage(table.column(c).combine_chunks()).storage.to_pylist()
                          for c in ("doc", "a2", "k")]))

    expected = [(1, '{"k":"new"}', None, '"new"'), (3, None, None, None)]
    assert texts(sink.read_table(table_id)) == expected
    rust = PaimonCatalog({"warehouse": str(tmp_path)}).get_table("db.docs")
    builder = rust.new_read_builder()
    assert texts(pa.Table.from_batches(builder.new_read().read(builder.new_scan().plan().splits()))) == expected
    # the first commit's document kept its structure and its decimal
    assert texts(first)[0] == (1, '{"a":[1,2.50,{"x":"y"}],"k":1}', "2.50", "1")


@pytest.mark.parametrize("keys", [{"primary_keys": "doc"}, {"primary_keys": "id", "partition_keys": "doc"}])
def test_variant_key_is_refused(keys):
    docs = SourceTable(TableId("db", "docs"), (SourceColumn("id", "bigint", pa.int64(), False),
                                               SourceColumn("body", "json", pa.string())), primary_keys=("id",))
    rule = TransformRuleConfig(index=0, source_table="db.docs", projection="id, PARSE_JSON(body) AS doc", **keys)
    with pytest.raises(PipelineConfigError, match="'doc' is a VARIANT, which Paimon cannot use"):
        compile_transform(rule, docs, TransformContext())
