"""Metadata columns declared in the pipeline, FLIP-107 style (``pipeline.lakecdc.metadata-columns``): parsing and
validation, the transform (``*`` includes persisted columns, VIRTUAL ones only serve expressions), and a pipeline
run against the private MariaDB whose Paimon table holds exactly the persisted metadata column."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from lakecdc.config import parse_pipeline
from lakecdc.errors import PipelineConfigError
from lakecdc.model import OP_COLUMN, OP_TS_COLUMN, ChangeBatch, SourceColumn, SourceTable, TableId
from lakecdc.transform import TransformContext, TransformRuleConfig, compile_transform
from lakecdc.transform.metadata_columns import parse_metadata_columns

UTC = dt.timezone.utc
DECLARATIONS = [
    "change_time TIMESTAMP_LTZ(3) METADATA FROM 'op_ts'",
    "op_ts BIGINT METADATA",
    {"name": "source_db", "type": "STRING", "from": "database_name", "virtual": True},
    "`kind` STRING NOT NULL METADATA FROM 'row_kind' VIRTUAL",
]
ORDERS = SourceTable(TableId("shop", "orders"),
                     (SourceColumn("id", "int", pa.int32(), False), SourceColumn("status", "varchar(9)", pa.string())),
                     ("id",))


def columns(declarations=DECLARATIONS):
    return parse_metadata_columns(declarations, file="p.yaml", path="pipeline.lakecdc.metadata-columns")


def test_declarations_string_and_mapping_forms():
    change_time, op_ts, source_db, kind = columns()
    assert (change_time.name, change_time.key, change_time.virtual) == ("change_time", "op_ts", False)
    assert change_time.arrow_type == pa.timestamp("ms", tz="UTC")
    assert (op_ts.name, op_ts.key, op_ts.arrow_type, op_ts.virtual) == ("op_ts", "op_ts", pa.int64(), False)
    assert (source_db.key, source_db.virtual, source_db.arrow_type) == ("database_name", True, pa.string())
    assert (kind.name, kind.key, kind.virtual, kind.nullable) == ("kind", "row_kind", True, False)
    assert columns(None) == ()


@pytest.mark.parametrize("declarations, message", [
    (["x BIGINT METADATA FROM 'offset'"], r"\[offset\] cannot be found in mysql metadata"),
    (["op_ts STRING METADATA"], r"metadata key 'op_ts' cannot be read as STRING; declare it as BIGINT"),
    (["db INT METADATA FROM 'database_name'"], r"declare it as STRING"),
    (["x NOPE METADATA FROM 'op_ts'"], r"unknown type 'NOPE'"),
    (["__table_name__ STRING METADATA FROM 'table_name'"], r"reserved and shading it is not allowed"),
    (["a BIGINT METADATA FROM 'op_ts'", "a BIGINT METADATA FROM 'op_ts'"], r"\[1\]: column 'a' is declared twice"),
    (["change_time TIMESTAMP_LTZ(3) FROM 'op_ts'"], r"expected \"<name> <type> METADATA"),
    ([{"name": "a", "type": "BIGINT", "from": "op_ts", "virtual": "yes"}], r"virtual must be true or false"),
    ([{"name": "a", "kind": "BIGINT"}], r"unknown key\(s\) kind"),
    ("op_ts BIGINT METADATA", r"expected a list of column declarations"),
])
def test_bad_declarations_name_the_item(declarations, message):
    with pytest.raises(PipelineConfigError, match=r"p.yaml: pipeline.lakecdc.metadata-columns.*" + message):
        columns(declarations)


def change_batch(rows):
    """rows of (op, id, status, op_ts)"""
    data = pa.table({"id": pa.array([r[1] for r in rows], pa.int32()), "status": [r[2] for r in rows],
                     OP_COLUMN: [r[0] for r in rows], OP_TS_COLUMN: pa.array([r[3] for r in rows], pa.int64())})
    return ChangeBatch(ORDERS, data)


def compile_rule(projection=None, filter_=None, declarations=DECLARATIONS):
    ctx = TransformContext(metadata_columns=columns(declarations), source_file="p.yaml")
    rule = None
    if projection or filter_:
        rule = TransformRuleConfig(index=0, source_table="shop.orders", projection=projection, filter=filter_)
    return compile_transform(rule, ORDERS, ctx)


ROWS = [("+I", 1, "new", 0), ("-U", 1, "new", 1_700_000_000_000), ("+U", 1, "paid", 1_700_000_000_000),
        ("-D", 2, "old", 1_700_000_001_000)]


def test_star_and_pass_through_include_only_persisted_metadata_columns():
    for transform in (compile_rule(), compile_rule(projection="*")):
        assert transform.output_schema.names == ["id", "status", "change_time", "op_ts"]
        out = transform.apply(change_batch(ROWS))
        assert out.column("change_time").to_pylist() == [
            dt.datetime(1970, 1, 1, tzinfo=UTC), dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC),
            dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC), dt.datetime(2023, 11, 14, 22, 13, 21, tzinfo=UTC)]
        assert out.column("op_ts").to_pylist() == [0, 1_700_000_000_000, 1_700_000_000_000, 1_700_000_001_000]


def test_virtual_columns_serve_expressions_and_filters():
    transform = compile_rule(projection="id, UPPER(source_db) AS db, kind AS k", filter_="source_db = 'shop'")
    assert transform.output_schema.names == ["id", "db", "k"]
    out = transform.apply(change_batch(ROWS))
    assert out.select(["id", "db", "k", OP_COLUMN]).to_pylist() == [
        {"id": 1, "db": "SHOP", "k": "+I", OP_COLUMN: "+I"}, {"id": 1, "db": "SHOP", "k": "-U", OP_COLUMN: "-U"},
        {"id": 1, "db": "SHOP", "k": "+U", OP_COLUMN: "+U"}, {"id": 2, "db": "SHOP", "k": "-D", OP_COLUMN: "-D"}]
    dropped = compile_rule(projection="*", filter_="source_db <> 'shop'").apply(change_batch(ROWS))
    assert dropped.num_rows == 0


def test_a_declared_name_may_not_shadow_a_source_column():
    with pytest.raises(PipelineConfigError, match=r"metadata column\(s\) status have the name of a column of "
                                                  r"shop.orders"):
        compile_rule(declarations=["status STRING METADATA FROM 'table_name'"])


PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: root
  tables: {db}.orders
  server-id: 5611
transform:
  - source-table: {db}.orders
    projection: \\*, CONCAT(source_db, '.', source_table) AS origin
    filter: source_table = 'orders'
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {warehouse}
pipeline:
  name: meta {db}
  lakecdc.metadata-columns:
    - change_time TIMESTAMP_LTZ(3) METADATA FROM 'op_ts'
    - source_db STRING METADATA FROM 'database_name' VIRTUAL
    - source_table STRING METADATA FROM 'table_name' VIRTUAL
"""


def test_pipeline_persists_metadata_columns_but_not_virtual_ones(mariadb, fresh_db, tmp_path):
    from lakecdc.paimon import Catalog
    from lakecdc.runtime import run_micro_batch

    mariadb.execute(f"CREATE TABLE `{fresh_db}`.orders (id INT PRIMARY KEY, status VARCHAR(9))")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.orders VALUES (1, 'new'), (2, 'new')")
    config = parse_pipeline(PIPELINE.format(port=mariadb.port, db=fresh_db, warehouse=tmp_path / "wh"))
    run_micro_batch(config)
    table = Catalog(tmp_path / "wh").get_table(f"{fresh_db}.orders")
    schema = table.schema
    assert schema.names == ["id", "status", "change_time", "origin"]  # no source_db / source_table
    assert schema.field("change_time").type == pa.timestamp("ms", tz="UTC")
    epoch = dt.datetime(1970, 1, 1, tzinfo=UTC)
    origin = f"{fresh_db}.orders"
    rows = sorted(table.read().to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": 1, "status": "new", "change_time": epoch, "origin": origin},
                    {"id": 2, "status": "new", "change_time": epoch, "origin": origin}]

    before = dt.datetime.now(UTC).replace(microsecond=0) - dt.timedelta(seconds=2)
    mariadb.execute(f"UPDATE `{fresh_db}`.orders SET status = 'paid' WHERE id = 1")
    mariadb.execute(f"DELETE FROM `{fresh_db}`.orders WHERE id = 2")
    run_micro_batch(config)
    rows = table.read().to_pylist()
    assert [(r["id"], r["status"], r["origin"]) for r in rows] == [(1, "paid", origin)]
    assert before <= rows[0]["change_time"] <= dt.datetime.now(UTC) + dt.timedelta(seconds=2)
    kinds = [(r["rowkind"], r["id"]) for r in table.read_changes(1).to_pylist()]
    assert kinds == [("+U", 1), ("-D", 2)] or sorted(kinds) == [("+U", 1), ("-D", 2)]
