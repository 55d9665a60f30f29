"""Transform rules through real pipeline runs (private MariaDB → Paimon): filters with UPDATE splitting and
SOFT_DELETE, first-matching rules with table-options and a custom delimiter, and pipeline UDFs (plus their
configuration errors)."""

from __future__ import annotations

from decimal import Decimal as D

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lakecdc.config import parse_pipeline
from lakecdc.errors import PipelineConfigError
from lakecdc.model import TableId

# ----------------------------------------------------------------------------------------------- UDFs


def shout(values: pa.Array) -> pa.Array:
    """STRING → STRING (no result_type: STRING)."""
    return pc.binary_join_element_wise(pc.utf8_upper(values), "!", "")


class Scale:
    """A class UDF with options: open() receives them once."""

    result_type = pa.int64()

    def open(self, options: dict) -> None:
        self.factor = int(options["factor"])

    def __call__(self, values: pa.Array) -> pa.Array:
        return pc.multiply(values.cast(pa.int64()), self.factor)


def same_type_plus_one(values: pa.Array) -> pa.Array:
    return pc.add(values, 1)


same_type_plus_one.result_type = lambda types: types[0]


def not_an_array(values):
    return "oops"


# ------------------------------------------------------------------------------------------- pipelines

BASE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: root
  password: ""
  tables: {db}.\\.*
  server-id: 5901
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {warehouse}
"""

RULES = """
transform:
  - source-table: {db}.items
    description: visible expensive items, upper-cased names; deletes kept as rows
    projection: id, UPPER(name) AS name, price, __data_event_type__ AS op
    filter: name <> 'HIDDEN' AND price > 10
    table-options: bucket=1;file.format=parquet
    table-options.delimiter: ";"
    converter-after-transform: SOFT_DELETE
  - source-table: {db}.\\.*
    projection: "*, 'catch-all' AS rule"
pipeline:
  name: rules {db}
"""


def _run(config):
    from lakecdc.runtime import run_micro_batch

    return run_micro_batch(config)


def _select(config, sql):
    from lakecdc.sink.sql import run_sql

    return [tuple(r.values()) for r in run_sql(config.sink.catalog_options, sql).to_pylist()]


def test_filter_update_splitting_soft_delete_and_first_match(mariadb, fresh_db, tmp_path):
    db = fresh_db
    mariadb.execute(f"CREATE TABLE `{db}`.items (id INT PRIMARY KEY, name VARCHAR(20), price DECIMAL(10,2))")
    mariadb.execute(f"CREATE TABLE `{db}`.notes (id INT PRIMARY KEY, body VARCHAR(20))")
    mariadb.execute(f"INSERT INTO `{db}`.items VALUES (1, 'apple', 5.00), (2, 'pear', 20.00), (3, 'hidden', 50)")
    mariadb.execute(f"INSERT INTO `{db}`.notes VALUES (1, 'hello')")
    config = parse_pipeline(BASE.format(port=mariadb.port, db=db, warehouse=tmp_path / "wh") + RULES.format(db=db))
    first = _run(config)
    items, notes = TableId(db, "items"), TableId(db, "notes")
    # the first matching rule is the table's only rule: items has no 'rule' column, notes has
    assert first.tables[items].schema.names == ["id", "name", "price", "op"]
    assert first.tables[notes].schema.names == ["id", "body", "rule"]
    from lakecdc.sink import PaimonSink

    options = PaimonSink(config.sink.catalog_options).describe(items).options
    assert options.get("bucket") == "1" and options.get("file.format") == "parquet"
    # the filter sees the projected (upper-cased) name: 'hidden' → 'HIDDEN' is filtered out
    assert _select(config, f"SELECT id, name, price, op FROM {db}.items ORDER BY id") == [
        (2, "PEAR", D("20.00"), "+I")]
    assert _select(config, f"SELECT * FROM {db}.notes") == [(1, "hello", "catch-all")]

    mariadb.execute(f"UPDATE `{db}`.items SET price = 15 WHERE id = 1")  # only the after image passes: INSERT
    mariadb.execute(f"UPDATE `{db}`.items SET price = 5 WHERE id = 2")  # only the before image: DELETE → kept
    mariadb.execute(f"DELETE FROM `{db}`.items WHERE id = 3")  # never passed the filter: nothing
    mariadb.execute(f"INSERT INTO `{db}`.items VALUES (4, 'kiwi', 30)")
    mariadb.execute(f"UPDATE `{db}`.items SET name = 'kiwi2' WHERE id = 4")  # both images pass: UPDATE
    _run(config)
    # __data_event_type__ keeps the original row kind (-U/+U) after the split; SOFT_DELETE keeps the deleted row
    assert _select(config, f"SELECT id, name, price, op FROM {db}.items ORDER BY id") == [
        (1, "APPLE", D("15.00"), "+U"), (2, "PEAR", D("20.00"), "-U"), (4, "KIWI2", D("30.00"), "+U")]


UDF_PIPELINE = """
transform:
  - source-table: {db}.people
    projection: id, shout(name) AS loud, UPPER(name) AS upper_name, SCALE(age) AS scaled, PLUS1(age) AS next_age
    filter: PLUS1(age) > 20
pipeline:
  name: udfs {db}
  user-defined-function:
    - name: shout
      classpath: tests.test_transform_pipeline:shout
    - name: upper
      classpath: tests.test_transform_pipeline.shout
    - name: scale
      classpath: tests.test_transform_pipeline:Scale
      options:
        factor: 10
    - name: plus1
      classpath: tests.test_transform_pipeline:same_type_plus_one
"""


def test_udfs_in_a_pipeline_run(mariadb, fresh_db, tmp_path):
    db = fresh_db
    mariadb.execute(f"CREATE TABLE `{db}`.people (id INT PRIMARY KEY, name VARCHAR(20), age SMALLINT)")
    mariadb.execute(f"INSERT INTO `{db}`.people VALUES (1, 'ada', 36), (2, 'bob', 19), (3, NULL, 40)")
    config = parse_pipeline(BASE.format(port=mariadb.port, db=db, warehouse=tmp_path / "wh")
                            + UDF_PIPELINE.format(db=db))
    result = _run(config)
    schema = result.tables[TableId(db, "people")].schema
    assert [(f.name, f.type) for f in schema] == [("id", pa.int32()), ("loud", pa.string()),
                                                  ("upper_name", pa.string()), ("scaled", pa.int64()),
                                                  ("next_age", pa.int16())]
    # a UDF named like a built-in (UPPER) replaces it
    assert _select(config, f"SELECT * FROM {db}.people ORDER BY id") == [
        (1, "ADA!", "ADA!", 360, 37), (3, None, None, 400, 41)]


@pytest.mark.parametrize("item, path, message", [
    ("{name: f, classpath: no_such_module_xyz:f}", "pipeline.user-defined-function[0].classpath",
     "cannot import module 'no_such_module_xyz'"),
    ("{name: f, classpath: 'org.apache.flink.cdc.udf.Foo'}", "pipeline.user-defined-function[0].classpath",
     "write the UDF in Python"),
    ("{name: f, classpath: 'tests.test_transform_pipeline:nope'}", "pipeline.user-defined-function[0].classpath",
     "has no attribute 'nope'"),
    ("{name: f, classpath: 'tests.test_transform_pipeline:BASE'}", "pipeline.user-defined-function[0].classpath",
     "is not callable"),
    ("{name: f, classpath: 'tests.test_transform_pipeline:shout', options: {a: 1}}",
     "pipeline.user-defined-function[0].options", "no open(options) method"),
    ("{name: f, python-code: 'def f(x): return x'}", "pipeline.user-defined-function[0].python-code",
     "inline python-code UDFs are not supported"),
    ("{name: 'bad name', classpath: 'tests.test_transform_pipeline:shout'}", "pipeline.user-defined-function[0].name",
     "expected a function name"),
])
def test_udf_configuration_errors(item, path, message):
    text = BASE.format(port=3306, db="d", warehouse="/tmp/wh") + f"""
pipeline:
  name: bad
  user-defined-function:
    - {item}
"""
    with pytest.raises(PipelineConfigError) as err:
        parse_pipeline(text, path="p.yaml")
    assert str(err.value).startswith(f"p.yaml: {path}: ") and message in str(err.value)


def test_udf_runtime_contract_errors():
    from lakecdc.model import OP_COLUMN, OP_TS_COLUMN, ChangeBatch, SourceColumn, SourceTable
    from lakecdc.transform import TransformContext, TransformRuleConfig, compile_transform
    from lakecdc.errors import ExpressionError

    src = SourceTable(TableId("db", "t"), (SourceColumn("s", "x", pa.string()),))
    rule = TransformRuleConfig(index=0, source_table="db.t", projection="BAD(s) AS r")
    compiled = compile_transform(rule, src, TransformContext(udfs={"bad": not_an_array}))
    data = pa.table({"s": ["a", "b"], OP_COLUMN: ["+I", "+I"], OP_TS_COLUMN: pa.array([0, 0], pa.int64())})
    with pytest.raises(ExpressionError, match="UDF bad returned 4 values for 2 rows|UDF bad must return"):
        compiled.apply(ChangeBatch(src, data))


def test_decimal_precision_mode_option():
    text = BASE.format(port=3306, db="d", warehouse="/tmp/wh") + """
pipeline:
  name: wide
  transform.decimal.precision.mode: UP_TO_38
"""
    assert parse_pipeline(text).decimal_precision == 38
    with pytest.raises(PipelineConfigError, match="pipeline.transform.decimal.precision.mode: expected UP_TO_19"):
        parse_pipeline(text.replace("UP_TO_38", "UP_TO_99"))


def test_catalog_table_defaults_are_the_lowest_layer(mariadb, fresh_db, tmp_path):
    """``catalog.properties.table-default.*`` gives every new table its options as Paimon's catalog does: below
    ``table.properties``, which is below a transform's ``table-options``."""
    from lakecdc.sink import PaimonSink

    db = fresh_db
    for name in ("plain", "props", "ruled"):
        mariadb.execute(f"CREATE TABLE `{db}`.{name} (id INT PRIMARY KEY, v INT)")
    yaml = BASE.format(port=mariadb.port, db=db, warehouse=tmp_path / "wh").replace(
        "  type: paimon\n",
        "  type: paimon\n  catalog.properties.table-default.bucket: 4\n"
        "  catalog.properties.table-default.file.format: orc\n  table.properties.file.format: parquet\n")
    yaml += f"""
transform:
  - source-table: {db}.ruled
    table-options: bucket=2
pipeline:
  name: defaults {db}
"""
    config = parse_pipeline(yaml)
    _run(config)
    sink = PaimonSink(config.sink.catalog_options)
    options = {name: sink.describe(TableId(db, name)).options for name in ("plain", "props", "ruled")}
    assert options["plain"]["bucket"] == "4" and options["plain"]["file.format"] == "parquet"
    assert options["ruled"]["bucket"] == "2" and options["ruled"]["file.format"] == "parquet"


@pytest.mark.parametrize("key", ["cache-enabled", "lock.enabled", "uri", "table-default."])
def test_catalog_options_lakecdc_does_not_act_on_are_refused(tmp_path, key):
    yaml = BASE.format(port=3306, db="db", warehouse=tmp_path / "wh").replace(
        "  type: paimon\n", f"  type: paimon\n  catalog.properties.{key}: 'true'\n")
    with pytest.raises(PipelineConfigError) as failure:
        parse_pipeline(yaml + "pipeline:\n  name: refused\n")
    assert f"sink.catalog.properties.{key}" in str(failure.value) and "refused" in str(failure.value)
