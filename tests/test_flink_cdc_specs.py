"""Flink CDC's own transform spec cases (TransformSpecsITCase) run on lakecdc's engine: the same input rows, the
same projection/filter/primary key/precision mode/time zone, and a comparison of the output schema and of every emitted
event with what Flink CDC prints.

The input rows are those of TransformSpecsITCase (one INSERT, an UPDATE, a DELETE, then an all-NULL row inserted
and deleted), as Arrow columns with the declared types (CHAR(140), BINARY(640), TIMESTAMP(0) ...) of the MySQL
columns that give Flink's types. Timestamps are stored in nanoseconds, since Flink's test values of TIMESTAMP(0) and
TIMESTAMP(6) columns carry nanoseconds, and the declared type, not the storage unit, is the column's type (as in
Flink CDC, where a TimestampData holds nanoseconds whatever its column's precision). The output schema is compared
with the declared types lakecdc gives Paimon (``type_name``), lengths and precisions included. Two input columns
have no MySQL counterpart: TIMESTAMP WITH TIME ZONE (MySQL has none; the cases reading it are not applicable) and
VARIANT (MySQL JSON arrives as STRING), which is given as the engine's VARIANT (normalised JSON text) so that its
cases run. VARIANT output columns are in Paimon's Variant encoding and decoded to their JSON text here.

The spec files are Flink CDC's, not lakecdc's, so they are not in this repository: set LAKECDC_FLINK_CDC_SPECS to
the folder ``flink-cdc-composer/src/test/resources/specs`` of an Apache Flink CDC checkout to run them (without it
the module is skipped; the behaviours these cases found are pinned by lakecdc's own tests, the CONFORMANCE table of
tests/test_transform_functions.py).

Every case passes except the ones in KNOWN_DIFFERENCES, each with its reason (a documented deviation of
docs/functions.md, or a missing feature). Those are strict xfails: a case that starts to pass must leave the list.
"""

from __future__ import annotations

import os
import datetime as dt
import re
from dataclasses import dataclass, field
from decimal import Decimal as D
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from lakecdc.errors import ExpressionError, PipelineConfigError
from lakecdc.model import OP_COLUMN, ChangeBatch, SourceColumn, SourceTable, TableId
from lakecdc.transform import TransformContext, TransformRuleConfig, compile_transform
from lakecdc.transform.types import VARIANT, is_variant_field, type_name, variant_array, variant_from_storage
from tests.flink_printing import render

SPECS_ENV = "LAKECDC_FLINK_CDC_SPECS"
SPEC_DIR = Path(os.environ.get(SPECS_ENV, ""))
if not os.environ.get(SPECS_ENV) or not any(SPEC_DIR.glob("*.yaml")):
    pytest.skip(f"{SPECS_ENV} does not name Flink CDC's spec folder (flink-cdc-composer/src/test/resources/specs)",
                allow_module_level=True)
UTC = dt.timezone.utc


def _ts(millis: int, nano_of_milli: int) -> int:
    """TimestampData.fromMillis(millis, nanoOfMillisecond) as epoch nanoseconds."""
    return millis * 1_000_000 + nano_of_milli


# name, Flink type as printed, MySQL column type (its declared type), Arrow type, row 1, row 2 (row 3 is all NULL but
# id_ = 0). Timestamps are stored in nanoseconds whatever their declared precision: Flink's test values of TIMESTAMP(0)
# and TIMESTAMP(6) columns carry nanoseconds, and a lakecdc column, like a Flink CDC one, holds the value it is given.
INPUT = [
    ("id_", "BIGINT NOT NULL", "bigint", pa.int64(), 1, -1),
    ("bool_", "BOOLEAN", "boolean", pa.bool_(), True, False),
    ("tinyint_", "TINYINT", "tinyint", pa.int8(), 2, -2),
    ("smallint_", "SMALLINT", "smallint", pa.int16(), 3, -3),
    ("int_", "INT", "int", pa.int32(), 4, -4),
    ("bigint_", "BIGINT", "bigint", pa.int64(), 5, -5),
    ("float_", "FLOAT", "float", pa.float32(), 7.7, -7.7),
    ("double_", "DOUBLE", "double", pa.float64(), 88.88, -88.88),
    ("decimal_10_0_", "DECIMAL(10, 0)", "decimal(10,0)", pa.decimal128(10, 0), D("1234567890"), D("-9876543210")),
    ("decimal_20_2_", "DECIMAL(20, 2)", "decimal(20,2)", pa.decimal128(20, 2), D("123456789012345678.90"),
     D("-987654321098765432.10")),
    ("char_", "CHAR(140)", "char(140)", pa.string(), "Alice", "爱丽丝"),
    ("varchar_", "VARCHAR(140)", "varchar(140)", pa.string(), "Zorro", "疯帽子"),
    ("string_", "STRING", "longtext", pa.string(), "From A to Z is Lie", "天地玄黄宇宙洪荒"),
    ("binary_", "BINARY(640)", "binary(640)", pa.binary(), "Lorem ipsum".encode(), "一二三四五".encode()),
    ("varbinary_", "VARBINARY(640)", "varbinary(640)", pa.binary(), "dolor sit amet".encode(), "六七八九十".encode()),
    ("bytes_", "BYTES", "longblob", pa.binary(), "amet consectetuer".encode(), "吾輩は猫である".encode()),
    ("timestamp_0_", "TIMESTAMP(0)", "datetime(0)", pa.timestamp("ns"), _ts(123456789, 123456), _ts(723456789, 723456)),
    ("timestamp_6_", "TIMESTAMP(6)", "datetime(6)", pa.timestamp("ns"), _ts(234567891, 234561), _ts(834567891, 834561)),
    ("timestamp_9_", "TIMESTAMP(9)", "datetime(9)", pa.timestamp("ns"), _ts(345678912, 345612), _ts(945678912, 945612)),
    ("timestamp_ltz_0_", "TIMESTAMP_LTZ(0)", "timestamp(0)", pa.timestamp("ns", tz="UTC"), _ts(123456789, 123456),
     _ts(723456789, 723456)),
    ("timestamp_ltz_6_", "TIMESTAMP_LTZ(6)", "timestamp(6)", pa.timestamp("ns", tz="UTC"), _ts(234567891, 234561),
     _ts(834567891, 834561)),
    ("timestamp_ltz_9_", "TIMESTAMP_LTZ(9)", "timestamp(9)", pa.timestamp("ns", tz="UTC"), _ts(345678912, 345612),
     _ts(945678912, 945612)),
    ("date_", "DATE", "date", pa.date32(), dt.date(2000, 12, 31), dt.date(2001, 1, 1)),
    ("time_0_", "TIME(0)", "time(0)", pa.time32("s"), dt.time(19, 43, 17), dt.time(12, 34, 45)),
    ("time_6_", "TIME(6)", "time(6)", pa.time64("us"), dt.time(21, 45, 3), dt.time(23, 45, 7)),
    ("time_9_", "TIME(9)", "time(9)", pa.time64("ns"), dt.time(3, 59, 59), dt.time(2, 30, 5)),
    ("array_int_", "ARRAY<INT>", "", pa.list_(pa.int32()), [1, 1, 2, 3, 5, 8, 13], [2, 3, 5, 7, 11, 13, 17, 19]),
    ("array_string_", "ARRAY<STRING>", "", pa.list_(pa.string()), ["one", "one", "two", "three", "five"],
     ["二", "san", "五", "qi", "十一"]),
    ("map_int_string_", "MAP<INT, STRING>", "", pa.map_(pa.int32(), pa.string()),
     [(1, "one"), (2, "two"), (3, "three")], [(1, "yi"), (2, "er"), (3, "san")]),
    # entries in the order Flink CDC prints this map (its hash order): a map's entry order carries no meaning
    ("map_string_array_string_", "MAP<STRING, ARRAY<STRING>>", "", pa.map_(pa.string(), pa.list_(pa.string())),
     [("two", ["T", "W", "O"]), ("one", ["O", "N", "E"]), ("three", ["T", "H", "R", "E", "E"])],
     [("二", ["E", "R"]), ("三", ["S", "A", "N"]), ("一", ["Y", "I"])]),
    ("complex_row_", "ROW<`name` STRING, `length` INT>", "", pa.struct([("name", pa.string()), ("length", pa.int32())]),
     {"name": "Alice", "length": 5}, {"name": "Derrida", "length": 7}),
    # lakecdc's MySQL source gives no VARIANT column (MySQL JSON arrives as STRING, as in Flink CDC's MySQL source);
    # the engine's VARIANT (PARSE_JSON's values: normalised JSON text) stands in for Flink's test values
    ("variant_", "VARIANT", "", VARIANT, '{"array":[1,2,{"kk":1.123}],"k":1,"object":{"k":"hello"}}',
     '[{"k":1},"hello",{"k":2}]'),
]
NOT_APPLICABLE_COLUMNS = {
    "timestamp_tz_0_": "MySQL has no TIMESTAMP WITH TIME ZONE",
    "timestamp_tz_6_": "MySQL has no TIMESTAMP WITH TIME ZONE",
    "timestamp_tz_9_": "MySQL has no TIMESTAMP WITH TIME ZONE",
}


def input_table() -> SourceTable:
    columns = [SourceColumn(name, mysql, arrow, not flink.endswith("NOT NULL"))
               for name, flink, mysql, arrow, *_ in INPUT]
    return SourceTable(TableId("bar", "baz"), tuple(columns))


def input_batch(non_null: bool) -> ChangeBatch:
    """+I r1, -U r1, +U r2, -D r2, then (unless non_null) +I r3, -D r3."""
    table = input_table()
    rows = [1, 1, 2, 2] + ([] if non_null else [3, 3])
    ops = ["+I", "-U", "+U", "-D", "+I", "-D"][:len(rows)]
    arrays = []
    for name, _, _, arrow, first, second in INPUT:
        values = [first, second, 0 if name == "id_" else None]
        column = [values[r - 1] for r in rows]
        arrays.append(variant_array(pa.array(column, pa.string())) if arrow == VARIANT else pa.array(column, arrow))
    arrays += [pa.array(ops), pa.array([0] * len(rows), pa.int64())]
    return ChangeBatch(table, pa.Table.from_arrays(arrays, schema=table.change_schema()))


# --------------------------------------------------------------------------------------------- rendering

def _values(table: pa.Table, name: str) -> pa.Array:
    """An output column's values; a VARIANT column (Paimon's Variant encoding) decoded to its JSON text."""
    values = table.column(name).combine_chunks()
    return variant_from_storage(values) if is_variant_field(table.schema.field(name)) else values


def events(table: pa.Table) -> list[str]:
    """The DataChangeEvent lines of an output table (a -U row followed by +U is one UPDATE)."""
    columns = [render(_values(table, name)) for name in table.column_names if name != OP_COLUMN]
    rows = ["[" + ", ".join(col[r] for col in columns) + "]" for r in range(table.num_rows)]
    ops = table.column(OP_COLUMN).to_pylist()
    lines, r = [], 0
    while r < len(ops):
        if ops[r] == "-U" and r + 1 < len(ops) and ops[r + 1] == "+U":
            before, after, op, r = rows[r], rows[r + 1], "UPDATE", r + 2
        elif ops[r] in ("-D", "-U"):
            before, after, op, r = rows[r], "[]", "DELETE", r + 1
        else:
            before, after, op, r = "[]", rows[r], "INSERT", r + 1
        lines.append(f"DataChangeEvent{{tableId=foo.bar.baz, before={before}, after={after}, op={op}, meta=()}}")
    return lines


def expected_columns(create_line: str) -> list[tuple[str, str]]:
    """(name, type [NOT NULL]) of a printed CreateTableEvent; comments and defaults dropped."""
    body = re.search(r"columns=\{(.*)\}, primaryKeys=", create_line).group(1)
    columns = []
    for item in re.split(r",(?=`)", body):
        name, _, rest = item[1:].partition("` ")
        text = rest.split(" '", 1)[0].strip().replace("`", "")
        columns.append((name, text))
    return columns


def actual_columns(schema: pa.Schema) -> list[tuple[str, str]]:
    return [(f.name, type_name(f) + ("" if f.nullable else " NOT NULL")) for f in schema]


# ------------------------------------------------------------------------------------------------ specs

@dataclass
class Spec:
    group: str
    name: str
    raw: dict = field(repr=False)

    @property
    def id(self) -> str:
        return f"{self.group}::{self.name}"


def load_specs() -> list[Spec]:
    specs = []
    for path in sorted(SPEC_DIR.glob("*.yaml")):
        for raw in yaml.safe_load(path.read_text()):
            specs.append(Spec(path.stem, raw["do"], raw))
    return specs


SPECS = load_specs()


def not_applicable(spec: Spec) -> str | None:
    if spec.raw.get("ignore"):
        return f"ignored by Flink CDC itself ({spec.raw['ignore']})"
    text = " ".join(str(spec.raw.get(k) or "") for k in ("projection", "filter"))
    for column, reason in NOT_APPLICABLE_COLUMNS.items():
        if re.search(rf"(?<![\w`]){column}(?![\w`])", text):  # the column itself, not an alias containing its name
            return f"reads {column}: {reason}"
    if "*" in (spec.raw.get("projection") or "*"):
        return "'*' includes the TIMESTAMP WITH TIME ZONE input columns"
    return None


def run_spec(spec: Spec) -> tuple[list, list] | Exception:
    raw = spec.raw
    projection = ", ".join(line.strip() for line in str(raw.get("projection") or "").splitlines() if line.strip())
    rule = TransformRuleConfig(index=0, source_table="bar.baz", projection=projection or None,
                               filter=raw.get("filter"), primary_keys=raw.get("primary-key"),
                               partition_keys=raw.get("partition-key"), table_options=raw.get("table-options"),
                               converter_after_transform=raw.get("converters"))
    context = TransformContext(local_time_zone=raw.get("time-zone", "UTC"),
                               decimal_precision=38 if raw.get("decimal-precision-mode") == "up_to_38" else 19)
    try:
        compiled = compile_transform(rule, input_table(), context)
        out = compiled.apply(input_batch(str(raw.get("non-null")).lower() == "true"))
    except (ExpressionError, PipelineConfigError) as exc:
        return exc
    return actual_columns(compiled.output_schema), events(out)


# Cases that differ from Flink CDC, each with the reason. Deviations are documented in docs/functions.md.
KNOWN_DIFFERENCES: dict[str, str] = {
    "meta::Append Metadata Columns": "deviation: __namespace_name__ is declared nullable: MySQL tables have no "
                                     "namespace, so its value is NULL, which Paimon's writer refuses in the NOT NULL "
                                     "column Flink CDC declares (its spec runs a source with the namespace 'foo')",
}


def compare(spec: Spec) -> str | None:
    """None when lakecdc gives what Flink CDC gives, else what differs."""
    result = run_spec(spec)
    if spec.raw.get("expect-error"):
        return None if isinstance(result, Exception) else "expected an error, got a result"
    if isinstance(result, Exception):
        return f"error: {result}"
    columns, lines = result
    expected = str(spec.raw["expect"]).splitlines()
    want_columns = expected_columns(expected[0])
    if columns != want_columns:
        diff = [(w, c) for w, c in zip(want_columns, columns) if w != c] or [(want_columns, columns)]
        return f"schema: expected/got {diff}"
    if lines != expected[1:]:
        diff = [(w, g) for w, g in zip(expected[1:], lines) if w != g] or [(expected[1:], lines)]
        return f"events: expected/got {diff[0]}"
    return None


APPLICABLE = [s for s in SPECS if not_applicable(s) is None]


@pytest.mark.parametrize("spec", APPLICABLE, ids=[s.id for s in APPLICABLE])
def test_flink_cdc_spec(spec: Spec):
    if spec.id in KNOWN_DIFFERENCES:
        pytest.xfail(KNOWN_DIFFERENCES[spec.id])
    problem = compare(spec)
    assert problem is None, problem


def test_known_differences_still_differ():
    """A known difference that no longer differs must leave KNOWN_DIFFERENCES (the list stays honest)."""
    fixed = [name for name in KNOWN_DIFFERENCES
             if compare(next(s for s in SPECS if s.id == name)) is None]
    assert fixed == []


def test_spec_files_are_all_loaded():
    assert {s.group for s in SPECS} == {"arithmetic", "basic", "casting", "comparison", "condition", "decimal",
                                        "logical", "meta", "nested", "regression", "string", "temporal"}
    assert len(SPECS) >= 180
