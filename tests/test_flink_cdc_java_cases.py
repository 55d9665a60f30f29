"""Flink CDC's own Java transform tests, ported as data: each case is an expression, the input row it reads and the
value (and, where the Java test says it, the declared type) Flink CDC's test expects, with the Java file and test
method it came from. The expected values are copied from the Java test source (Apache Flink CDC master @ 23fb108e9),
not from lakecdc's output.

Sources (flink-cdc-runtime/src/test/java/org/apache/flink/cdc/runtime/... and flink-cdc-composer/src/test/java/...):
functions/impl/{StringFunctionsTest, ComparisonFunctionsTest, LogicalFunctionsTest, CastingFunctionsTest,
TemporalFunctionsTest, StructFunctionsTest}.java call the runtime functions directly: each call is written here as
the SQL expression that compiles to it (a Java ``null`` argument is a NULL column of the right type, a ``byte[]`` an
``X'..'`` literal). operators/transform/PostTransformOperatorTest.java and parser/TransformParserTest.java give
projections and filters over typed columns; composer/flink/FlinkPipelineTransformITCase.java gives projections with
the rows a pipeline prints.

Not ported: UDFs (FlinkPipelineUdfITCase, UDF cases of the other files), AI functions, metadata columns other than the
ones MySQL gives, schema evolution and operator plumbing (covered by tests/test_transform.py and
tests/test_flink_cdc_specs.py), TIMESTAMP WITH TIME ZONE inputs (MySQL has none), and Java calls with no SQL form
(``array(1, "two", null)``: mixed element types do not type-check in SQL).

Every case passes except the ones marked ``deviation``: each names the documented difference of docs/functions.md
("Compatibility with Flink CDC") it stands for, and is a strict xfail (a case that starts to pass must lose its mark).
An ``ERROR`` expectation means Flink CDC fails (the job, at runtime or validation): lakecdc must refuse it too, at
validation or at runtime.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass
from decimal import Decimal as D
from typing import Any

import pyarrow as pa
import pytest

from lakecdc.errors import ExpressionError, PipelineConfigError
from lakecdc.model import ChangeBatch, SourceColumn, SourceTable, TableId
from lakecdc.transform import TransformContext, TransformRuleConfig, compile_transform
from lakecdc.transform.types import is_variant_field, type_name, variant_from_storage

UTC = dt.timezone.utc
EMOJI, EMOJI2, PLANE2 = "\U0001F600", "\U0001F601", "\U0002F600"  # "\uD83D\uDE00", "\uD83D\uDE01", "\uD87D\uDE00"

# The one input row: name, MySQL type (which gives the Flink CDC type), Arrow type the MySQL source gives, value.
COLUMNS = [
    ("col1", "varchar(10)", pa.string(), "1"),  # PostTransformOperatorTest's CONDITION_SCHEMA
    ("ns", "varchar(10)", pa.string(), None),  # a Java null String
    ("ni", "int", pa.int32(), None),  # a Java null Integer
    ("nb", "tinyint(1)", pa.bool_(), None),  # a Java null Boolean
    ("nbin", "varbinary(10)", pa.binary(), None),  # a Java null byte[]
    ("nd", "date", pa.date32(), None),
    ("nltz", "timestamp(3)", pa.timestamp("ms", tz="UTC"), None),
    ("date_col", "date", pa.date32(), dt.date(2024, 2, 29)),
    ("date_0131", "date", pa.date32(), dt.date(2024, 1, 31)),
    ("date_0228", "date", pa.date32(), dt.date(2024, 2, 28)),
    ("time_col", "time", pa.time32("s"), dt.time(23, 58, 57)),
    ("time_2330", "time", pa.time32("s"), dt.time(23, 30)),
    ("time_noon", "time", pa.time32("s"), dt.time(12, 0)),
    ("timestamp_col", "datetime(6)", pa.timestamp("us"), dt.datetime(2024, 12, 31, 23, 58, 57)),
    ("timestamp_ltz_col", "timestamp(6)", pa.timestamp("us", tz="UTC"), dt.datetime(2023, 12, 31, 16, 30, tzinfo=UTC)),
    # TransformParserTest's columns
    ("name", "varchar(50)", pa.string(), "Alice"),
    ("sex", "char(1)", pa.string(), "F"),
    ("address", "binary(50)", pa.binary(50), b"a" * 50),
    ("phone", "varbinary(50)", pa.binary(), b"123"),
    ("deposit", "decimal(10,2)", pa.decimal128(10, 2), D("12.34")),
    ("deposit20", "decimal(20,2)", pa.decimal128(20, 2), D("12.34")),
    ("birthday", "datetime(3)", pa.timestamp("ms"), dt.datetime(2000, 1, 2, 3, 4, 5, 6000)),
    ("birthday_ltz", "timestamp(3)", pa.timestamp("ms", tz="UTC"), dt.datetime(2000, 1, 2, 3, 4, 5, tzinfo=UTC)),
    ("update_time", "time(3)", pa.time32("ms"), dt.time(1, 2, 3, 4000)),
    ("age", "int", pa.int32(), 17),
    ("weight", "double", pa.float64(), 70.0),
    ("height", "double", pa.float64(), 2.0),
    ("op_type", "tinyint", pa.int8(), 1),
    ("text", "longtext", pa.string(), "12"),
    ("nullable_int", "int", pa.int32(), 5),
    ("not_null_int", "int", pa.int32(), 6),
    ("nullable_bigint", "bigint", pa.int64(), 7),
    ("bid", "bigint", pa.int64(), 2),
    # PostTransformOperatorTest's CAST_SCHEMA, COMPARE_DATA_SCHEMA, TIMESTAMPDIFF_DATA_SCHEMA, TIMESTAMPADD_DATA_SCHEMA,
    # FROM_UNIX_TIME_SCHEMA, UNIX_TIMESTAMP_SCHEMA (NULL unless a case's rows set them)
    ("castInt", "int", pa.int32(), None),
    ("castBoolean", "tinyint(1)", pa.bool_(), None),
    ("castTinyint", "tinyint", pa.int8(), None),
    ("castSmallint", "smallint", pa.int16(), None),
    ("castBigint", "bigint", pa.int64(), None),
    ("castFloat", "float", pa.float32(), None),
    ("castDouble", "double", pa.float64(), None),
    ("castDecimal", "decimal(4,2)", pa.decimal128(4, 2), None),
    ("castTimestamp", "datetime(3)", pa.timestamp("ms"), None),
    ("c1", "float", pa.float32(), None),
    ("c2", "double", pa.float64(), None),
    ("c3", "datetime(6)", pa.timestamp("us"), None),
    ("time_interval_unit", "varchar(10)", pa.string(), None),
    ("start_timestamp", "datetime(6)", pa.timestamp("us"), None),
    ("end_timestamp", "datetime(6)", pa.timestamp("us"), None),
    ("start_timestamp_ltz", "timestamp(6)", pa.timestamp("us", tz="UTC"), None),
    ("end_timestamp_ltz", "timestamp(6)", pa.timestamp("us", tz="UTC"), None),
    ("interval_value", "int", pa.int32(), None),
    ("time_point_timestamp", "datetime", pa.timestamp("s"), None),
    ("time_point_timestamp_ltz", "timestamp", pa.timestamp("s", tz="UTC"), None),
    ("seconds", "bigint", pa.int64(), None),
    ("format_str", "varchar(30)", pa.string(), None),
    ("date_time_str", "varchar(40)", pa.string(), None),
    ("unix_timestamp_format", "varchar(40)", pa.string(), None),
    # JaninoCompilerTest's columns (its ``id`` is ``jid`` here: ``id`` is this table's key; its BOOLEAN a, b, c are
    # ``ba``, ``bb``, ``bc``)
    ("jid", "int", pa.int32(), None),
    ("uid", "int", pa.int32(), None),
    ("a", "int", pa.int32(), None),
    ("b", "int", pa.int32(), None),
    ("c", "int", pa.int32(), None),
    ("ba", "tinyint(1)", pa.bool_(), None),
    ("bb", "tinyint(1)", pa.bool_(), None),
    ("bc", "tinyint(1)", pa.bool_(), None),
    ("left_bool", "tinyint(1)", pa.bool_(), None),
    ("right_bool", "tinyint(1)", pa.bool_(), None),
    ("divisor", "int", pa.int32(), None),
    ("nullable_bool", "tinyint(1)", pa.bool_(), None),
    ("input_value", "varchar(20)", pa.string(), None),
    ("testJsonStr", "varchar(400)", pa.string(), None),
    # TransformParserTest.testStringFunctionArgumentValidation's binary columns
    ("binary_value", "varbinary(16)", pa.binary(), b"\x01\x02\x03\x04"),
    ("binary_part", "binary(2)", pa.binary(2), b"\x02\x03"),
    # PostTransformOperatorTest's binary_string_functions, binary_overlay_position_base64 and regexp_table
    ("value_", "varbinary(16)", pa.binary(), b"\x01\x02\x03\x04"),
    ("prefix_", "varbinary(4)", pa.binary(), b"\x01\x02"),
    ("suffix_", "varbinary(4)", pa.binary(), b"\x03\x04"),
    ("replacement_", "varbinary(4)", pa.binary(), b"\x08\x09"),
    ("needle_", "varbinary(4)", pa.binary(), b"\x02\x03"),
    ("encoded_", "longtext", pa.string(), "wyg="),
    ("text_value", "longtext", pa.string(), "100-200, 300-400"),
]
NOT_NULL = {"not_null_int"}


def input_table() -> SourceTable:
    columns = [SourceColumn("id", "int", pa.int32(), False)]
    columns += [SourceColumn(n, mysql, arrow, n not in NOT_NULL) for n, mysql, arrow, _ in COLUMNS]
    return SourceTable(TableId("db", "java_cases"), tuple(columns), primary_keys=("id",))


def input_batch(rows: tuple[dict[str, Any], ...] = ({},)) -> ChangeBatch:
    """One row per entry of ``rows``: the columns' default values, with the entry's values instead."""
    table = input_table()
    n = len(rows)
    arrays = [pa.array(range(1, n + 1), pa.int32())]
    arrays += [pa.array([row.get(name, value) for row in rows], arrow) for name, _, arrow, value in COLUMNS]
    arrays += [pa.array(["+I"] * n), pa.array([0] * n, pa.int64())]
    return ChangeBatch(table, pa.Table.from_arrays(arrays, schema=table.change_schema()))


class _Error:
    def __repr__(self) -> str:
        return "ERROR"


ERROR = _Error()  # Flink CDC fails on this expression


class _Any:
    def __repr__(self) -> str:
        return "ANY"


ANY = _Any()  # the Java test checks only the declared type
NAN = float("nan")
INF = float("inf")


@dataclass(frozen=True)
class JavaCase:
    source: str  # Java file and test method
    expr: str  # the projection expression (or, with condition=True, a filter that must keep the row)
    expected: Any = True
    dtype: str | None = None  # the declared type Flink CDC's test gives, with " NOT NULL" where it says so
    tz: str = "UTC"
    condition: bool = False  # PostTransformOperatorTest.testExpressionConditionTransform: filter and IF(expr)
    deviation: str | None = None  # the documented difference of docs/functions.md this case stands for
    rows: tuple[dict[str, Any], ...] = ({},)  # the input rows (column values); expected is then one value per row

    @property
    def id(self) -> str:
        return f"{self.source.split('#')[0].removesuffix('.java')}: {self.expr}"


def cases(source: str, rows: list[tuple], **common) -> list[JavaCase]:
    """rows: (expression, expected[, dtype]) or JavaCase keyword dicts."""
    out = []
    for row in rows:
        if isinstance(row, dict):
            out.append(JavaCase(source=source, **{**common, **row}))
        else:
            expr, expected, *rest = row
            out.append(JavaCase(source, expr, expected, rest[0] if rest else None, **common))
    return out


def table(source: str, exprs: list[str], rows: list[dict[str, Any]], expected: list[list[Any]],
          dtypes: list[str | None] | None = None, **common) -> list[JavaCase]:
    """A Java test of one projection over several rows: ``expected[r][e]`` is expression e's value in row r."""
    return [JavaCase(source, expr, [row[e] for row in expected], (dtypes or [None] * len(exprs))[e],
                     rows=tuple(rows), **common) for e, expr in enumerate(exprs)]


def dev(expr: str, expected: Any, reason: str, **kw) -> dict:
    return {"expr": expr, "expected": expected, "deviation": reason, **kw}


T, F, N = True, False, None
NUMERIC_EQUALS = ("docs/functions.md: `=`, `<>`, `IN` compare numbers by value across types (Flink CDC: Java equals, "
                  "BIGINT 3 <> INT 3)")
DECIMAL_LITERAL = ("docs/functions.md: a decimal literal is an exact DECIMAL (Flink CDC's generated Java evaluates it "
                   "as a double: ceil(2.4) is the DOUBLE 3.0, lakecdc's the DECIMAL 3)")
LIKE_REGEX = "docs/functions.md: `s LIKE p` without ESCAPE is SQL LIKE (Flink CDC: a Java regex search)"
BAD_REGEX = "docs/functions.md: an invalid literal pattern is refused at validation (Flink CDC: NULL for every row)"
STRING_FN = "functions/impl/StringFunctionsTest.java"

STRING_CASES = (
    cases(f"{STRING_FN}#testStringFunctions", [
        ("OVERLAY('abcdef' PLACING 'ZZ' FROM 3)", "abZZef"),
        ("OVERLAY('abcdef' PLACING 'ZZ' FROM 3 FOR 2)", "abZZef"),
        ("OVERLAY('abcdef' PLACING 'ZZ' FROM 0 FOR 2)", "abcdef"),
        ("OVERLAY(X'01020304' PLACING X'0809' FROM 2)", b"\x01\x08\x09\x04"),
        ("OVERLAY(X'01020304' PLACING X'0809' FROM 2 FOR 2)", b"\x01\x08\x09\x04"),
        ("POSITION('cd' IN 'abcdef')", 3),
        ("POSITION('xy' IN 'abcdef')", 0),
        ("POSITION('' IN 'abcdef')", 1),
        ("POSITION('cd' IN 'abcdef' FROM 4)", 0),
        ("POSITION(X'0203' IN X'01020304')", 2),
        ("POSITION(X'0203' IN X'01020304' FROM 3)", 0),
        ("LOCATE('cd', 'abcdef')", 3),
        ("LOCATE('', 'abcdef', 4)", 1),
        ("INSTR('abcabc', 'bc')", 2),
        ("LTRIM('  abc  ')", "abc  "),
        ("RTRIM('  abc  ')", "  abc"),
        ("BTRIM('  abc  ')", "abc"),
        ("BTRIM('xyabcxy', 'xy')", "abc"),
        ("CONCAT_WS(',', 'a', NULL, 'b')", "a,b"),
        ("CONCAT_WS(',', NULL, NULL)", ""),
        ("CONCAT_WS('~', 'AA', NULL, 'BB', '', 'CC')", "AA~BB~~CC"),
        ("LPAD('hi', 5, '?')", "???hi"),
        ("RPAD('hi', 5, '?')", "hi???"),
        ("LPAD('hello', 2, '?')", "he"),
        ("LPAD('hi', -1, '?')", N),
        ("LPAD('hi', 5, '')", N),
        ("REPLACE('hello', 'l', 'x')", "hexxo"),
        ("REPEAT('ab', 3)", "ababab"),
        ("REPEAT('ab', 0)", ""),
        ("LEFT('abcdef', 2)", "ab"),
        ("RIGHT('abcdef', 2)", "ef"),
        ("LEFT('abcdef', 0)", ""),
        ("RIGHT('abcdef', -1)", ""),
        ("STARTSWITH('abcdef', 'abc')", T),
        ("ENDSWITH('abcdef', 'def')", T),
        ("STARTSWITH(X'010203', X'0102')", T),
        ("STARTSWITH(X'010203', X'0203')", F),
        ("ENDSWITH(X'010203', X'0203')", T),
        ("ENDSWITH(X'010203', X'0102')", F),
        ("TO_BASE64('hello')", "aGVsbG8="),
        ("TO_BASE64(X'C328')", "wyg="),
        ("FROM_BASE64('aGVsbG8=')", "hello"),
    ])
    + cases(f"{STRING_FN}#testFromBase64ReplacesMalformedUtf8", [
        ("FROM_BASE64('wyg=')", "\ufffd("),
        ("TO_BASE64(FROM_BASE64('wyg='))", "77+9KA=="),
        ("FROM_BASE64_BINARY('wyg=')", b"\xc3\x28"),
    ])
    + cases(f"{STRING_FN}#testStringFunctionsReturnNullOnNullInput", [
        ("CONCAT_WS(ns, 'a')", N),
        ("OVERLAY(ns PLACING 'x' FROM 1)", N),
        ("OVERLAY(nbin PLACING X'01' FROM 1)", N),
        ("POSITION(ns IN 'abc')", N),
        ("POSITION(nbin IN X'01')", N),
        ("LOCATE('a', ns)", N),
        ("INSTR('abc', ns)", N),
        ("LTRIM(ns)", N),
        ("RTRIM(ns)", N),
        ("BTRIM(ns)", N),
        ("LPAD(ns, 1, '?')", N),
        ("RPAD('a', ni, '?')", N),
        ("REPLACE('a', ns, 'b')", N),
        ("REPEAT(ns, 1)", N),
        ("LEFT(ns, 1)", N),
        ("RIGHT('a', ni)", N),
        ("STARTSWITH(ns, 'a')", N),
        ("ENDSWITH('a', ns)", N),
        ("STARTSWITH(nbin, X'01')", N),
        ("ENDSWITH(X'01', nbin)", N),
        ("TO_BASE64(ns)", N),
        ("TO_BASE64(nbin)", N),
        ("FROM_BASE64(ns)", N),
        ("FROM_BASE64_BINARY(ns)", N),
    ])
    + cases(f"{STRING_FN}#testStringFunctionsCountUnicodeCodePoints", [
        (f"POSITION('x' IN '{EMOJI}x')", 2),
        (f"LOCATE('x', '{EMOJI}x')", 2),
        (f"INSTR('{EMOJI}x', 'x')", 2),
        (f"LEFT('{EMOJI}x', 1)", EMOJI),
        (f"RIGHT('x{EMOJI}', 1)", EMOJI),
        (f"LTRIM('{EMOJI2}x', '{EMOJI}')", f"{EMOJI2}x"),
        (f"RTRIM('x{PLANE2}', '{EMOJI}')", f"x{PLANE2}"),
        (f"BTRIM('{EMOJI}x{EMOJI}', '{EMOJI}')", "x"),
    ])
    + cases(f"{STRING_FN}#testLegacyLikeUsesJavaRegex", [
        dev("'Alice' LIKE 'A.*'", T, LIKE_REGEX),
        dev("'xabcy' LIKE 'abc'", T, LIKE_REGEX),
        dev("'Alice' LIKE 'A%'", F, LIKE_REGEX),
        dev("'Alice' NOT LIKE 'A.*'", F, LIKE_REGEX),
    ])
    + cases(f"{STRING_FN}#testLikeEscape", [
        ("'A%' LIKE 'A$%' ESCAPE '$'", T),
        ("'A_' LIKE 'A$_' ESCAPE '$'", T),
        ("'Alice' LIKE 'A$%' ESCAPE '$'", F),
    ])
    + cases(f"{STRING_FN}#testLikeEscapeNullReturnsUnknown", [("'Alice' LIKE 'A%' ESCAPE NULL", N)])
    + cases(f"{STRING_FN}#testRegexpReplaceKeepsLiteralReplacement", [
        ("REGEXP_REPLACE('a', 'a', '$1')", "$1"),
        ("REGEXP_REPLACE('a', 'a', '\\')", "\\"),
    ])
    + cases(f"{STRING_FN}#testSimilarTo", [
        ("'Alice' SIMILAR TO '(A|B)%'", T),
        ("'Carol' SIMILAR TO '(A|B)%'", F),
        ("'Alice' NOT SIMILAR TO '(A|B)%'", F),
    ])
    + cases(f"{STRING_FN}#testSimilarToNullReturnsUnknown", [
        ("ns SIMILAR TO '(A|B)%'", N),
        ("'Alice' SIMILAR TO ns", N),
        ("ns NOT SIMILAR TO '(A|B)%'", N),
    ])
    + cases(f"{STRING_FN}#testRegexpFunctionsNullArguments", [
        ("REGEXP_EXTRACT(ns, 'a')", N),
        ("REGEXP_EXTRACT('a', ns)", N),
        ("REGEXP_EXTRACT_ALL(ns, 'a')", N),
        ("REGEXP_EXTRACT_ALL('a', ns)", N),
        ("REGEXP_EXTRACT_ALL('a', 'a', ni)", N),
        ("REGEXP_COUNT(ns, 'a')", N),
        ("REGEXP_COUNT('a', ns)", N),
        ("REGEXP_INSTR(ns, 'a')", N),
        ("REGEXP_INSTR('a', ns)", N),
        ("REGEXP_SUBSTR(ns, 'a')", N),
        ("REGEXP_SUBSTR('a', ns)", N),
    ])
    + cases(f"{STRING_FN}#testRegexpFunctions", [
        ("REGEXP_EXTRACT('foothebar', 'foo(.*?)(bar)', 2)", "bar"),
        ("REGEXP_EXTRACT('foothebar', 'foo(.*?)(bar)')", "foothebar"),
        ("REGEXP_EXTRACT('foothebar', 'foo(.*?)(bar)', 3)", N),
        ("REGEXP_EXTRACT('foobar', '(foo)|(bar)', 2)", N),
        ("REGEXP_EXTRACT('abcd', 'z', 0)", N),
        dev("REGEXP_EXTRACT('abcd', '(', 0)", N, BAD_REGEX),
        ("REGEXP_EXTRACT('abcd', 'a', -1)", N),
        ("REGEXP_EXTRACT_ALL('100-200, 300-400', '(\\d+)-(\\d+)')", ["100", "300"]),
        ("REGEXP_EXTRACT_ALL('100-200, 300-400', '(\\d+)-(\\d+)', 0)", ["100-200", "300-400"]),
        ("REGEXP_EXTRACT_ALL('100-200, 300-400', '(\\d+)-(\\d+)', 2)", ["200", "400"]),
        ("REGEXP_EXTRACT_ALL('abcdeabde', '(abcdeabde)|([a-z]*)', 2)", [N, ""]),
        ("REGEXP_EXTRACT_ALL('100-200', '[a-z]', 0)", []),
        ("REGEXP_EXTRACT_ALL('abcdeabde', 'abcdeabde')", N),
        ("REGEXP_EXTRACT_ALL('abcdeabde', '(abcdeabde)', 2)", N),
        dev("REGEXP_EXTRACT_ALL('abcdeabde', '(', 0)", N, BAD_REGEX),
        ("REGEXP_EXTRACT_ALL('abcdeabde', '(abcdeabde)', -1)", N),
        ("REGEXP_COUNT('abc123xyz456', '\\d')", 6),
        ("REGEXP_COUNT('abcd', 'z')", 0),
        dev("REGEXP_COUNT('abcd', '(')", N, BAD_REGEX),
        ("REGEXP_INSTR('hello world! Hello everyone!', 'Hello')", 14),
        ("REGEXP_INSTR('abcd', 'z')", 0),
        dev("REGEXP_INSTR('abcd', '(')", N, BAD_REGEX),
        ("REGEXP_SUBSTR('100-200, 300-400', '(\\d+)-(\\d+)')", "100-200"),
        ("REGEXP_SUBSTR('abcd', 'z')", N),
        dev("REGEXP_SUBSTR('abcd', '(')", N, BAD_REGEX),
    ])
)

CMP_FN = "functions/impl/ComparisonFunctionsTest.java"
COMPARISON_CASES = (
    cases(f"{CMP_FN}#testLegacyNullComparisonBehavior", [
        ("ni = 1", F), ("1 = ni", F), ("ni < 1", F), ("1 <= ni", F), ("ni > 1", F), ("1 >= ni", F),
    ])
    + cases(f"{CMP_FN}#testThreeValuedLogicalOperators", [
        ("TRUE AND nb", N), ("FALSE AND nb", F), ("FALSE OR nb", N), ("TRUE OR nb", T), ("NOT nb", N),
    ])
    + cases(f"{CMP_FN}#testLogicalOperatorsShortCircuitRightOperand", [
        ("FALSE AND 1 / CAST(0 AS INT) > 0", F), ("TRUE OR 1 / CAST(0 AS INT) > 0", T),
    ])
    + cases(f"{CMP_FN}#testLegacyBetweenNullBehavior", [
        ("ni BETWEEN 1 AND 3", F), ("ni NOT BETWEEN 1 AND 3", T),
    ])
    + cases(f"{CMP_FN}#testLegacyInNullBehavior", [
        ("1 IN (1, NULL)", T), ("1 IN (2, NULL)", F), ("ni IN (1, 2)", F), ("1 NOT IN (2, NULL)", T),
    ])
    + cases(f"{CMP_FN}#testDistinctFromNeverReturnsUnknown", [
        ("ni IS DISTINCT FROM ni", F), ("ni IS DISTINCT FROM 1", T), ("1 IS DISTINCT FROM 1", F),
        ("ni IS NOT DISTINCT FROM ni", T), ("ni IS NOT DISTINCT FROM 1", F),
    ])
)

LOGIC_FN = "functions/impl/LogicalFunctionsTest.java"
LOGICAL_CASES = (
    cases(f"{LOGIC_FN}#testIfNull", [("IFNULL(1, 2)", 1), ("IFNULL(ni, 2)", 2), ("IFNULL(ni, ni)", N)])
    + cases(f"{LOGIC_FN}#testNullIf", [
        ("NULLIF(1, 1)", N),
        ("NULLIF(1, 2)", 1),
        ("NULLIF(ni, 1)", N),
        ("NULLIF(1, ni)", 1),
        ("NULLIF(1, CAST(1 AS BIGINT))", N),
        ("NULLIF(CAST('1.00' AS DECIMAL(3, 2)), CAST(1 AS BIGINT))", N),
        ("NULLIF(1, CAST(1.0 AS DOUBLE))", N),
        ("NULLIF(CAST(16777217 AS BIGINT), CAST(16777217 AS FLOAT))", 16777217),
        ("NULLIF(X'0102', X'0102')", N),
    ])
    + cases(f"{LOGIC_FN}#testNullIfFloatingPointValues", [
        ("NULLIF(CAST('-0.0' AS FLOAT), CAST('0.0' AS FLOAT))", N),
        ("NULLIF(CAST('-0.0' AS DOUBLE), CAST('0.0' AS DOUBLE))", N),
        ("NULLIF(CAST('NaN' AS FLOAT), CAST('NaN' AS FLOAT))", NAN),
        ("NULLIF(CAST('NaN' AS DOUBLE), CAST('NaN' AS DOUBLE))", NAN),
        ("NULLIF(CAST('Infinity' AS FLOAT), CAST('Infinity' AS FLOAT))", N),
        ("NULLIF(CAST('Infinity' AS DOUBLE), CAST('Infinity' AS DOUBLE))", N),
        ("NULLIF(CAST('Infinity' AS DOUBLE), CAST('-Infinity' AS DOUBLE))", INF),
    ])
)

CAST_FN = "functions/impl/CastingFunctionsTest.java"
CASTING_CASES = (
    cases(f"{CAST_FN}#testTryCastSupportedTypes", [
        ("TRY_CAST('true' AS BOOLEAN)", T),
        ("TRY_CAST('1' AS TINYINT)", 1, "TINYINT"),
        ("TRY_CAST('2' AS SMALLINT)", 2, "SMALLINT"),
        ("TRY_CAST('3' AS INT)", 3, "INT"),
        ("TRY_CAST('4' AS BIGINT)", 4, "BIGINT"),
        ("TRY_CAST('5.5' AS FLOAT)", 5.5, "FLOAT"),
        ("TRY_CAST('6.5' AS DOUBLE)", 6.5, "DOUBLE"),
        ("TRY_CAST('7.50' AS DECIMAL(3, 2))", D("7.50"), "DECIMAL(3, 2)"),
        ("TRY_CAST(8 AS STRING)", "8"),
        ("TRY_CAST('2024-01-02T03:04:05' AS TIMESTAMP)", dt.datetime(2024, 1, 2, 3, 4, 5)),
        ("TRY_CAST('yes' AS BOOLEAN)", T),
        ("TRY_CAST('no' AS BOOLEAN)", F),
        ("TRY_CAST(128 AS TINYINT)", -128),
        ("TRY_CAST(CAST(1.5 AS DOUBLE) AS INT)", 1),
    ])
    + cases(f"{CAST_FN}#testTryCastInvalidDataReturnsNull", [
        ("TRY_CAST('invalid' AS BOOLEAN)", N),
        ("TRY_CAST('128' AS TINYINT)", N),
        ("TRY_CAST('32768' AS SMALLINT)", N),
        ("TRY_CAST('1.5' AS INT)", N),
        ("TRY_CAST('9223372036854775808' AS BIGINT)", N),
        ("TRY_CAST('invalid' AS INT)", N),
        ("TRY_CAST('invalid' AS DOUBLE)", N),
        ("TRY_CAST('invalid' AS DECIMAL(10, 2))", N),
        ("TRY_CAST('invalid-timestamp' AS TIMESTAMP)", N),
        ("TRY_CAST(ns AS INT)", N),
        ("TRY_CAST(ns AS TIMESTAMP)", N),
    ])
    + cases(f"{CAST_FN}#testExistingCastFailureBehaviorIsUnchanged", [
        ("CAST('invalid' AS BOOLEAN)", F),
        ("CAST('128' AS TINYINT)", -128),
        ("CAST('1.5' AS INT)", 1),
        ("CAST('invalid-timestamp' AS TIMESTAMP)", ERROR),
    ])
)

TEMPORAL_FN = "functions/impl/TemporalFunctionsTest.java"
TEMPORAL_CASES = (
    cases(f"{TEMPORAL_FN}#testExtractDateParts", [
        (f"EXTRACT({unit} FROM date_col)", value) for unit, value in
        [("YEAR", 2024), ("QUARTER", 1), ("MONTH", 2), ("WEEK", 9), ("DAY", 29), ("DOY", 60), ("DOW", 5),
         ("HOUR", 0), ("MINUTE", 0), ("SECOND", 0)]
    ])
    + cases(f"{TEMPORAL_FN}#testExtractTimeParts", [
        ("EXTRACT(HOUR FROM time_col)", 23), ("EXTRACT(MINUTE FROM time_col)", 58),
        ("EXTRACT(SECOND FROM time_col)", 57),
    ])
    + cases(f"{TEMPORAL_FN}#testExtractTimestampParts", [
        ("EXTRACT(YEAR FROM timestamp_col)", 2024), ("EXTRACT(WEEK FROM timestamp_col)", 1),
        ("EXTRACT(HOUR FROM timestamp_col)", 23),
    ])
    + cases(f"{TEMPORAL_FN}#testExtractTimestampLtzUsesPipelineTimeZone", [
        ("EXTRACT(YEAR FROM timestamp_ltz_col)", 2023),
        {"expr": "EXTRACT(YEAR FROM timestamp_ltz_col)", "expected": 2024, "tz": "Asia/Shanghai"},
        {"expr": "EXTRACT(HOUR FROM timestamp_ltz_col)", "expected": 0, "tz": "Asia/Shanghai"},
    ])
    + cases(f"{TEMPORAL_FN}#testExtractNullAndUnsupportedParts", [
        ("EXTRACT(YEAR FROM nd)", N),
        ("EXTRACT(YEAR FROM time_noon)", ERROR),
        ("EXTRACT(MILLISECOND FROM timestamp_col)", ERROR),
    ])
    + cases(f"{TEMPORAL_FN}#testTemporalPlusMonths", [
        ("date_0131 + INTERVAL '1' MONTH", dt.date(2024, 2, 29)),
        ("TO_TIMESTAMP('2024-01-31 12:34:56') + INTERVAL '13' MONTH", dt.datetime(2025, 2, 28, 12, 34, 56)),
        ("TO_TIMESTAMP_LTZ('2024-01-31 12:34:56.000') - INTERVAL '1' MONTH",
         dt.datetime(2023, 12, 31, 12, 34, 56, tzinfo=UTC)),
        ("time_noon + INTERVAL '12' MONTH", dt.time(12, 0)),
        ("nd + INTERVAL '1' MONTH", N),
    ])
    + cases(f"{TEMPORAL_FN}#testTemporalPlusMillis", [
        ("date_0228 + INTERVAL '24' HOUR", dt.date(2024, 2, 29)),
        ("date_0228 + INTERVAL '12' HOUR", dt.date(2024, 2, 28)),
        ("time_2330 + INTERVAL '2' HOUR", dt.time(1, 30)),
        ("TO_TIMESTAMP('2024-02-28 23:30:00') + INTERVAL '2' HOUR", dt.datetime(2024, 2, 29, 1, 30)),
        ("TO_TIMESTAMP_LTZ('2024-02-28 23:30:00.000') + INTERVAL '2' HOUR",
         dt.datetime(2024, 2, 29, 1, 30, tzinfo=UTC)),
        ("nltz + INTERVAL '0.001' SECOND", N),
    ])
)

STRUCT_FN = "functions/impl/StructFunctionsTest.java"
NULL_ARRAY = "CASE WHEN FALSE THEN ARRAY[1] END"
EMPTY_ARRAY = "REGEXP_EXTRACT_ALL('100-200', '[a-z]', 0)"  # an empty ARRAY<STRING>
STRUCT_CASES = (
    cases(f"{STRUCT_FN}#testCollectionConstructors", [
        ("ARRAY[1, 2, NULL]", [1, 2, N], "ARRAY<INT>"),
        ("MAP['one', 1, 'two', 2, 'one', 3]['one']", 3),
        ("MAP['one', 1, 'two', 2, 'one', 3]['two']", 2),
        ("CARDINALITY(MAP['one', 1, 'two', 2, 'one', 3])", 2),
    ])
    + cases(f"{STRUCT_FN}#testInvalidMapConstructor", [("MAP['one', 1, 'two']", ERROR)])
    + cases(f"{STRUCT_FN}#testCardinality", [
        ("CARDINALITY(ARRAY[1, 2, 3])", 3),
        ("CARDINALITY(MAP['one', 1, 'two', 2])", 2),
        (f"CARDINALITY({NULL_ARRAY})", N),
        ("CARDINALITY(CASE WHEN FALSE THEN MAP['one', 1] END)", N),
    ])
    + cases(f"{STRUCT_FN}#testArrayContains", [
        ("ARRAY_CONTAINS(ARRAY[1, NULL], CAST(1 AS BIGINT))", T),
        ("ARRAY_CONTAINS(ARRAY[1, NULL], NULL)", T),
        ("ARRAY_CONTAINS(ARRAY[X'0102', NULL], X'0102')", T),
        ("ARRAY_CONTAINS(ARRAY[ARRAY[2]], ARRAY[CAST(2 AS BIGINT)])", T),
        ("ARRAY_CONTAINS(ARRAY[1, NULL], 4)", F),
        (f"ARRAY_CONTAINS({NULL_ARRAY}, 1)", N),
    ])
    + cases(f"{STRUCT_FN}#testArrayPosition", [
        ("ARRAY_POSITION(ARRAY[1, NULL, 2, 1], CAST(1 AS BIGINT))", 1),
        ("ARRAY_POSITION(ARRAY[1, NULL, CAST(2 AS BIGINT), 1], 2)", 3),
        ("ARRAY_POSITION(ARRAY[1, NULL, 2, 1], 3)", 0),
        ("ARRAY_POSITION(ARRAY[1, NULL, 2, 1], NULL)", N),
        (f"ARRAY_POSITION({NULL_ARRAY}, 1)", N),
    ])
    + cases(f"{STRUCT_FN}#testElement", [
        (f"ELEMENT({NULL_ARRAY})", N),
        (f"ELEMENT({EMPTY_ARRAY})", N),
        ("ELEMENT(ARRAY['one'])", "one"),
        ("ELEMENT(ARRAY['one', 'two'])", ERROR),
    ])
    + cases(f"{STRUCT_FN}#ListAccessTests", [
        ("ARRAY['one', 'two', 'three'][1]", "one"),
        ("ARRAY['one', 'two', 'three'][2]", "two"),
        ("ARRAY['one', 'two', 'three'][3]", "three"),
        ("ARRAY[10, 20, 30][0]", N),
        ("ARRAY[10, 20, 30][-1]", N),
        ("ARRAY[10, 20, 30][4]", N),
        ("ARRAY[10, 20, 30][100]", N),
        ("(CASE WHEN FALSE THEN ARRAY['one'] END)[1]", N),
        ("ARRAY['one', 'two', 'three'][ni]", N),
        (f"{EMPTY_ARRAY}[1]", N),
        ("ARRAY['first', NULL, 'third'][1]", "first"),
        ("ARRAY['first', NULL, 'third'][2]", N),
        ("ARRAY['first', NULL, 'third'][3]", "third"),
    ])
    + cases(f"{STRUCT_FN}#MapAccessTests", [
        ("MAP['a', 1, 'b', 2, 'c', 3]['a']", 1),
        ("MAP['a', 1, 'b', 2, 'c', 3]['b']", 2),
        ("MAP['a', 1, 'b', 2, 'c', 3]['c']", 3),
        ("MAP[1, 'one', 2, 'two', 3, 'three'][1]", "one"),
        ("MAP[1, 'one', 2, 'two', 3, 'three'][2]", "two"),
        ("MAP[1, 'one', 2, 'two', 3, 'three'][3]", "three"),
        ("MAP['exists', 1]['nonexistent']", N),
        ("(CASE WHEN FALSE THEN MAP['a', 1] END)['a']", N),
        ("MAP['a', 1][ns]", N),
        ("MAP['key1', 'value1', 'key2', NULL]['key1']", "value1"),
        ("MAP['key1', 'value1', 'key2', NULL]['key2']", N),
    ])
    + cases(f"{STRUCT_FN}#VariantAccessTests", [  # VARIANT results compared as the JSON values they hold
        ("PARSE_JSON('[1, 2, 3]')[1]", 1),
        ("PARSE_JSON('[1, 2, 3]')[2]", 2),
        ("PARSE_JSON('[1, 2, 3]')[3]", 3),
        ("PARSE_JSON('[10, 20, 30]')[0]", N),
        ("PARSE_JSON('[10, 20, 30]')[-1]", N),
        ("PARSE_JSON('[10, 20, 30]')[4]", N),
        ("PARSE_JSON('[10, 20, 30]')[100]", N),
        ("PARSE_JSON('{\"name\": \"Alice\", \"age\": 30}')['name']", "Alice"),
        ("PARSE_JSON('{\"name\": \"Alice\", \"age\": 30}')['age']", 30),
        ("PARSE_JSON('{\"exists\": \"value\"}')['nonexistent']", N),
        ("TRY_PARSE_JSON(ns)[1]", N),
        ("TRY_PARSE_JSON(ns)['key']", N),
        ("PARSE_JSON('[1]')[ni]", N),
        ("PARSE_JSON('{\"key\": \"value\"}')[ns]", N),
        ("PARSE_JSON('[1]')['key']", N),
        ("PARSE_JSON('{\"key\": \"value\"}')[1]", N),
        ("PARSE_JSON('{\"data\": [1, {\"nested\": \"value\"}]}')['data']", [1, {"nested": "value"}]),
        ("PARSE_JSON('{\"data\": [1, {\"nested\": \"value\"}]}')['data'][2]", {"nested": "value"}),
        ("PARSE_JSON('{\"data\": [1, {\"nested\": \"value\"}]}')['data'][2]['nested']", "value"),
        ("PARSE_JSON('42')[1]", N),
        ("PARSE_JSON('\"hello\"')[1]", N),
        ("PARSE_JSON('42')['key']", N),
        ("PARSE_JSON('\"hello\"')['key']", N),
    ])
)

POST = "operators/transform/PostTransformOperatorTest.java"
# testBuildInFunctionTransform: each expression is the filter of a rule projecting ``col1, IF(expr, true, false)``
# over one row (col1 = '1'); the row passes with TRUE
BUILT_IN_CONDITIONS = [
    "TO_TIMESTAMP('1970-01-01 00:00:00') = TO_TIMESTAMP('1970-01-01', 'yyyy-MM-dd')",
    "TIMESTAMPDIFF(DAY, TO_TIMESTAMP('1970-01-01 00:00:00'), TO_TIMESTAMP('1970-01-02 00:00:00')) = 1",
    "2 between 1 and 3", "4 not between 1 and 3", "2 in (1, 2, 3)", "4 not in (1, 2, 3)",
    "CHAR_LENGTH('abc') = 3", "trim(' abc ') = 'abc'", "REGEXP_REPLACE('123abc', '[a-zA-Z]', '') = '123'",
    "concat('123', 'abc') = '123abc'", "upper('abc') = 'ABC'", "lower('ABC') = 'abc'",
    "OVERLAY('abcdef' PLACING 'ZZ' FROM 3) = 'abZZef'", "OVERLAY('abcdef' PLACING 'ZZ' FROM 3 FOR 2) = 'abZZef'",
    "POSITION('cd' IN 'abcdef') = 3", f"POSITION('x' IN '{EMOJI}x') = 2", "LOCATE('cd', 'abcdef') = 3",
    "LOCATE('cd', 'abcdef', 4) = 0", "LOCATE('', 'abcdef', 4) = 1", "INSTR('abcabc', 'bc') = 2",
    "LTRIM('  abc  ') = 'abc  '", "RTRIM('  abc  ') = '  abc'", "BTRIM('  abc  ') = 'abc'",
    f"LTRIM('{EMOJI2}x', '{EMOJI}') = '{EMOJI2}x'", f"RTRIM('x{PLANE2}', '{EMOJI}') = 'x{PLANE2}'",
    "BTRIM('xyabcxy', 'xy') = 'abc'", "CONCAT_WS(',', 'a', null, 'b') = 'a,b'", "LPAD('hi', 5, '?') = '???hi'",
    "RPAD('hi', 5, '?') = 'hi???'", "REPLACE('hello', 'l', 'x') = 'hexxo'", "REPEAT('ab', 3) = 'ababab'",
    "LEFT('abcdef', 2) = 'ab'", "RIGHT('abcdef', 2) = 'ef'", f"LEFT('{EMOJI}x', 1) = '{EMOJI}'",
    f"RIGHT('x{EMOJI}', 1) = '{EMOJI}'", "STARTSWITH('abcdef', 'abc')", "ENDSWITH('abcdef', 'def')",
    "TO_BASE64('hello') = 'aGVsbG8='", "FROM_BASE64('aGVsbG8=') = 'hello'",
    "TO_BASE64(FROM_BASE64('wyg=')) = '77+9KA=='",
    "SUBSTR('ABC', -1) = 'C'", "SUBSTR('ABC', -2, 2) = 'BC'", "SUBSTR('ABC', 0) = 'ABC'", "SUBSTR('ABC', 1) = 'ABC'",
    "SUBSTR('ABC', 2, 2) = 'BC'", "SUBSTR('ABC', 2, 100) = 'BC'", "SUBSTRING('ABC', -1) = 'C'",
    "SUBSTRING('ABC', -2, 2) = 'BC'", "SUBSTRING('ABC', 0) = 'ABC'", "SUBSTRING('ABC', 1) = 'ABC'",
    "SUBSTRING('ABC', 2, 2) = 'BC'", "SUBSTRING('ABC', 2, 100) = 'BC'", "SUBSTRING('ABC' FROM -1) = 'C'",
    "SUBSTRING('ABC' FROM -2 FOR 2) = 'BC'", "SUBSTRING('ABC' FROM 0) = 'ABC'", "SUBSTRING('ABC' FROM 1) = 'ABC'",
    "SUBSTRING('ABC' FROM 2 FOR 2) = 'BC'", "SUBSTRING('ABC' FROM 2 FOR 100) = 'BC'",
    "'ABC' like '^[a-zA-Z]'", "'123' not like '^[a-zA-Z]'",
    "abs(2) = 2", "ceil(2.4) = 3.0", "ceiling(2.4) = 3.0", "floor(2.5) = 2.0", "round(3.1415926, 2) = 3.14",
    "IF(2>0,1,0) = 1", "COALESCE(null,1,2) = 1",
    "TRY_CAST('invalid' AS INT) IS NULL", "TRY_CAST('invalid' AS BOOLEAN) IS NULL",
    "TRY_CAST('128' AS TINYINT) IS NULL", "TRY_CAST('1.5' AS INT) IS NULL",
    "TRY_CAST('invalid-timestamp' AS TIMESTAMP) IS NULL", "IFNULL(TRY_CAST('invalid' AS INT), 42) = 42",
    "NULLIF(1, 1) IS NULL", "NULLIF(1, 2) = 1", "NULLIF(CAST(1 AS INT), CAST(1 AS BIGINT)) IS NULL",
    "NULLIF(NULL, 1) IS NULL", "NULLIF(1, NULL) = 1",
    "NULLIF(CAST(16777217 AS BIGINT), CAST(16777217 AS FLOAT)) = CAST(16777217 AS BIGINT)",
    "NULLIF(CAST('-0.0' AS DOUBLE), CAST('0.0' AS DOUBLE)) IS NULL",
    "NULLIF(CAST('NaN' AS DOUBLE), CAST('NaN' AS DOUBLE)) IS NOT NULL",
    "NULLIF(CAST('Infinity' AS DOUBLE), CAST('Infinity' AS DOUBLE)) IS NULL",
    "1 + 1 = 2", "1 - 1 = 0", "1 * 1 = 1", "3 % 2 = 1", "1 < 2", "1 <= 1", "1 > 0", "1 >= 1",
    "case 1 when 1 then 'a' when 2 then 'b' else 'c' end = 'a'", "case col1 when '1' then true else false end",
    "case when col1 = '1' then true else false end", "cast(col1 as int) = 1", "cast('true' as boolean)",
    "cast(col1 as tinyint) = cast(1 as tinyint)", "cast(col1 as smallint) = cast(1 as smallint)",
    "cast(col1 as bigint) = cast(1 as bigint)", "cast(col1 as float) = cast(1 as float)",
    "cast(col1 as double) = cast(1 as double)", "cast('1' as char) = '1'", "cast(col1 as varchar) = '1'",
    "cast(col1 as DECIMAL(4,2)) = cast(1.0 as DECIMAL(4,2))", "cast(null as int) is null",
    "cast(null as boolean) is null", "cast(null as tinyint) is null", "cast(null as smallint) is null",
    "cast(null as bigint) is null", "cast(null as float) is null", "cast(null as double) is null",
    "cast(null as char) is null", "cast(null as varchar) is null", "cast(null as DECIMAL(4,2)) is null",
    "cast(null as TIMESTAMP(3)) is null",
]
# ('123' NOT LIKE '^[a-zA-Z]' is TRUE as SQL LIKE too: no deviation shows)
CONDITION_DEVIATIONS = {"'ABC' like '^[a-zA-Z]'": LIKE_REGEX}
POST_CASES = [JavaCase(f"{POST}#testBuildInFunctionTransform", c, T, condition=True,
                       deviation=CONDITION_DEVIATIONS.get(c)) for c in BUILT_IN_CONDITIONS]




def ms(millis: int) -> dt.datetime:
    """TimestampData.fromMillis(millis)"""
    return dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=millis)


def ltz_ms(millis: int) -> dt.datetime:
    """LocalZonedTimestampData.fromEpochMillis(millis)"""
    return ms(millis).replace(tzinfo=UTC)


def _timestampdiff_rows() -> list[tuple[str, tuple[dict[str, Any], ...], list[Any]]]:
    """testTimestampdiffTransformData's rows by unit: 1970-01-01 to 2025-01-01 for every unit (rows 1-6), to
    9999-12-31 23:59:59 for YEAR (row 7: 8029) and SECOND (row 8: NULL, past the INT range), and a NULL end (row 9,
    YEAR: NULL); each row evaluates every pair of TIMESTAMP / TIMESTAMP_LTZ columns."""
    def row(end: int | None) -> dict[str, Any]:
        start = {"start_timestamp": ms(0), "start_timestamp_ltz": ltz_ms(0)}
        return start if end is None else {**start, "end_timestamp": ms(end), "end_timestamp_ltz": ltz_ms(end)}
    y2025, y9999 = 1735689600000, 253402271999000
    out = []
    for unit, value in [("SECOND", 1735689600), ("MINUTE", 28928160), ("HOUR", 482136), ("DAY", 20089),
                        ("MONTH", 660), ("YEAR", 55)]:
        rows, expected = [row(y2025)], [value]
        if unit in ("SECOND", "YEAR"):
            rows.append(row(y9999))
            expected.append(N if unit == "SECOND" else 8029)
        if unit == "YEAR":
            rows.append(row(None))
            expected.append(N)
        out.append((unit, tuple(rows), expected if len(rows) > 1 else expected[0]))
    return out


TIME_POINTS = {"time_point_timestamp": dt.datetime(1970, 1, 1), "time_point_timestamp_ltz": dt.datetime(1970, 1, 1,
                                                                                                        tzinfo=UTC)}
CAST_TARGETS = ["int", "boolean", "tinyint", "smallint", "bigint", "float", "double", "char", "varchar",
                "DECIMAL(4,2)"]
# testCastTransform: row k sets one source column; the projection casts it to every type (a NULL where the Java
# projection's CASE takes another column, as castFloat in row 3). Expected: insertEventExpect1..10.
ONE = [1, False, 1, 1, 1, 1.0, 1.0, "1", "1", D("1.00")]
CAST_ROWS = [  # (source expression, row values, expected per target; None where the Java CASE reads another column)
    ("col1", {}, ONE),
    ("castInt", {"castInt": 1}, [1, True, 1, 1, 1, 1.0, 1.0, "1", "1", D("1.00")]),
    ("castBoolean", {"castBoolean": True}, [1, True, 1, 1, 1, None, None, "true", "true", None]),
    ("castTinyint", {"castTinyint": 1}, [1, True, 1, 1, 1, 1.0, 1.0, "1", "1", D("1.00")]),
    ("castSmallint", {"castSmallint": 1}, [1, True, 1, 1, 1, 1.0, 1.0, "1", "1", D("1.00")]),
    ("castBigint", {"castBigint": 1}, [1, True, 1, 1, 1, 1.0, 1.0, "1", "1", D("1.00")]),
    ("castFloat", {"castFloat": 1.0}, [None, True, None, None, None, 1.0, 1.0, "1.0", "1.0", D("1.00")]),
    ("castDouble", {"castDouble": 1.0}, [None, True, None, None, None, 1.0, 1.0, "1.0", "1.0", D("1.00")]),
    ("castDecimal", {"castDecimal": D("1.00")}, [None, True, None, None, None, 1.0, 1.0, "1.00", "1.00", D("1.00")]),
]
POST_CAST_CASES = [
    JavaCase(f"{POST}#testCastTransform", f"cast({column} as {target})", value, rows=(row,))
    for column, row, values in CAST_ROWS for target, value in zip(CAST_TARGETS, values) if value is not None
] + cases(f"{POST}#testCastTransform", [
    {"expr": "cast(castTimestamp as varchar)", "expected": "1970-01-01T00:00:01.234",
     "rows": ({"castTimestamp": ms(1234)},)},
    ("cast('1970-01-01T00:00:01.234' as TIMESTAMP(3))", ms(1234), "TIMESTAMP(3)"),
])
POST_DATA_CASES = (
    cases(f"{POST}#testBinaryStartsWithAndEndsWithTransform", [
        {"expr": "STARTSWITH(value_, prefix_) AND ENDSWITH(value_, suffix_)", "condition": True},
    ])
    + cases(f"{POST}#testBinaryOverlayPositionAndBase64Transform", [
        ("OVERLAY(value_ PLACING replacement_ FROM 2 FOR 2)", b"\x01\x08\x09\x04", "VARBINARY(20)"),
        ("POSITION(needle_ IN value_)", 2, "INT"),
        ("TO_BASE64(value_)", "AQIDBA==", "STRING"),
        ("FROM_BASE64_BINARY(encoded_)", b"\xc3\x28", "VARBINARY(65536)"),
    ])
    + cases(f"{POST}#testRegexpExtractAllProjection", [
        ("REGEXP_EXTRACT_ALL(text_value, '([0-9]+)-([0-9]+)')", ["100", "300"], "ARRAY<STRING>"),
    ])
    + cases(f"{POST}#testNullCastTransform", [
        (f"cast(ns as {t})", N) for t in ["int", "boolean", "tinyint", "smallint", "bigint", "float", "double",
                                          "char", "varchar", "DECIMAL(4,2)", "TIMESTAMP(3)"]
    ])
    + POST_CAST_CASES
    + cases(f"{POST}#testCastErrorTransform", [
        {"expr": f"cast(castFloat as {t})", "expected": v, "rows": ({"castFloat": 1.0},)}
        for t, v in [("int", 1), ("boolean", T), ("tinyint", 1), ("smallint", 1), ("bigint", 1), ("float", 1.0),
                     ("double", 1.0), ("char", "1.0"), ("varchar", "1.0"), ("DECIMAL(4,2)", D("1.00"))]
    ] + [{"expr": "cast(castFloat as TIMESTAMP(3))", "expected": ERROR, "rows": ({"castFloat": 1.0},)}])
    + cases(f"{POST}#testCompareTransform", [
        ("2.1 > 1", T), ("'2024-01-01 00:00:00' < '2024-08-01 00:00:00'", T), ("LOCALTIME <= CURRENT_TIME", T),
        ("TO_TIMESTAMP('2024-01-01 00:00:00') <= TO_TIMESTAMP('2024-08-01 00:00:00')", T),
        ("TO_DATE(DATE_FORMAT(LOCALTIMESTAMP, 'yyyy-MM-dd')) >= TO_DATE(DATE_FORMAT(LOCALTIMESTAMP, 'yyyy-MM-dd'))",
         T),
    ])
    + cases(f"{POST}#testCompareErrorTransform", [("2.1 > TO_TIMESTAMP('2024-01-01 00:00:00')", ERROR)])
    + table(f"{POST}#testCompareDataTransform",
            ["c1 < 5", "c2 > 2.5", "c3 <= TO_TIMESTAMP('2024-01-01 00:00:00')"],
            [{"c1": 4.0, "c2": 3.5, "c3": ms(1672502400000)}, {"c1": 10.0, "c2": 0.0, "c3": ms(1730390400000)}, {}],
            [[T, T, T], [F, F, F], [F, F, F]], ["BOOLEAN"] * 3)
    + cases(f"{POST}#testTimestampTransform", [
        ("IF(DATE_FORMAT(CAST(CURRENT_TIMESTAMP AS TIMESTAMP), 'yyyy-MM-dd HH:mm:ss') = "
         "DATE_FORMAT(CAST(NOW() AS TIMESTAMP), 'yyyy-MM-dd HH:mm:ss'), 1, 0)", 1, "INT"),
        {"expr": "LOCALTIMESTAMP = CAST(CURRENT_TIMESTAMP AS TIMESTAMP)", "expected": T, "condition": True},
    ])
    + [JavaCase(f"{POST}#testFromUnixTimeTransform", expr, text, "STRING", tz=tz,
                rows=({"seconds": secs, "format_str": "yyyy-MM-dd HH:mm:ss"},))
       for tz, secs, text in [("UTC", 0, "1970-01-01 00:00:00"), ("UTC", 44, "1970-01-01 00:00:44"),
                              ("Europe/Berlin", 44, "1970-01-01 01:00:44"),
                              ("Asia/Shanghai", 44, "1970-01-01 08:00:44")]
       for expr in ("FROM_UNIXTIME(seconds)", "FROM_UNIXTIME(seconds, format_str)")]
    + [c for tz, method, rows, expected in [
        ("Europe/Berlin", "testUnixTimestampTransformInBerlin",
         [("1970-01-01 08:00:01.001", "yyyy-MM-dd HH:mm:ss.SSS"),
          ("1970-01-01 08:00:01.001 +0800", "yyyy-MM-dd HH:mm:ss.SSS X"),
          ("1970-01-01 08:00:01.001 +0800", "yyyy-MM-dd HH:mm:ss.SSS"),
          ("1970-01-01 08:00:01.001", "yyyy-MM-dd HH:mm:ss.SSS X")],
         [[25201, 25201], [25201, 1], [25201, 25201], [25201, -9223372036854775808]]),
        ("Asia/Shanghai", "testUnixTimestampTransformInShanghai",
         [("1970-01-01 08:00:01.001", "yyyy-MM-dd HH:mm:ss.SSS"),
          ("1970-01-01 08:00:01.001 +0100", "yyyy-MM-dd HH:mm:ss.SSS X"),
          ("1970-01-01 08:00:01.001 +0100", "yyyy-MM-dd HH:mm:ss.SSS"),
          ("1970-01-01 08:00:01.001", "yyyy-MM-dd HH:mm:ss.SSS X")],
         [[1, 1], [1, 25201], [1, 1], [1, -9223372036854775808]])]
       for c in table(f"{POST}#{method}",
                      ["UNIX_TIMESTAMP(date_time_str)", "UNIX_TIMESTAMP(date_time_str, unix_timestamp_format)"],
                      [{"date_time_str": text, "unix_timestamp_format": fmt} for text, fmt in rows], expected,
                      ["BIGINT", "BIGINT"], tz=tz)]
    + cases(f"{POST}#testTimestampAddTransform", [
        (f"DATE_FORMAT(TIMESTAMPADD({unit}, {n}, TO_TIMESTAMP('2024-10-01 00:00:00')), 'yyyy-MM-dd HH:mm:ss')", text)
        for unit, n, text in [
            ("SECOND", 1, "2024-10-01 00:00:01"), ("MINUTE", 1, "2024-10-01 00:01:00"),
            ("HOUR", 1, "2024-10-01 01:00:00"), ("DAY", 1, "2024-10-02 00:00:00"),
            ("MONTH", 1, "2024-11-01 00:00:00"), ("YEAR", 1, "2025-10-01 00:00:00"),
            ("SECOND", -1, "2024-09-30 23:59:59"), ("MINUTE", -1, "2024-09-30 23:59:00"),
            ("HOUR", -1, "2024-09-30 23:00:00"), ("DAY", -1, "2024-09-30 00:00:00"),
            ("MONTH", -1, "2024-09-01 00:00:00"), ("YEAR", -1, "2023-10-01 00:00:00")]
    ])
    + cases(f"{POST}#testTimezoneTransform", [
        ("DATE_FORMAT(TO_TIMESTAMP('2024-08-01 00:00:00'), 'yyyy-MM-dd HH:mm:ss')", "2024-08-01 00:00:00", "STRING"),
    ])
    + cases(f"{POST}#testTimestampdiffTransform", [
        ("TIMESTAMPDIFF(SECOND, LOCALTIMESTAMP, CAST(CURRENT_TIMESTAMP AS TIMESTAMP))", 0, "INT"),
    ] + [(f"TIMESTAMPDIFF({unit}, LOCALTIMESTAMP, CAST({now} AS TIMESTAMP))", 0, "INT")
         for unit in ("MINUTE", "HOUR", "DAY", "MONTH", "YEAR") for now in ("CURRENT_TIMESTAMP", "NOW()")])
    + [JavaCase(f"{POST}#testTimestampdiffTransformData", f"TIMESTAMPDIFF({unit}, {a}, {b})", expected, "INT",
                rows=rows)
       for a, b in [("start_timestamp", "end_timestamp"), ("start_timestamp", "end_timestamp_ltz"),
                    ("start_timestamp_ltz", "end_timestamp"), ("start_timestamp_ltz", "end_timestamp_ltz")]
       for unit, rows, expected in _timestampdiff_rows()]
    + [JavaCase(f"{POST}#testTimestampaddTransformData", f"TIMESTAMPADD({unit}, interval_value, {column})",
                [result, N], declared, rows=({"interval_value": value, **TIME_POINTS}, TIME_POINTS))
       for unit, value in [("SECOND", 1735689600), ("MINUTE", 28928160), ("HOUR", 482136), ("DAY", 20089),
                           ("MONTH", 660), ("YEAR", 55)]
       for column, declared, result in [("time_point_timestamp", "TIMESTAMP(0)", ms(1735689600000)),
                                        ("time_point_timestamp_ltz", "TIMESTAMP_LTZ(0)", ltz_ms(1735689600000))]]
)

JANINO = "parser/JaninoCompilerTest.java"
JSON_STR = ('{"name":"Bob","age":30,"is_active":true,"email":"zhangsan@example.com","hobbies":["reading","coding",'
            '"traveling"],"address":{"street":"MainSt","city":"Beijing","zip":"100000"}}')
DUPLICATED_JSON_STR = JSON_STR.replace('{"name":"Bob",', '{"name":"Bob","name":"Mark",')
JANINO_CASES = (
    cases(f"{JANINO}#testBuiltInFunction", [
        dev("ceil(2.4)", 3.0, DECIMAL_LITERAL),
        {"expr": "PARSE_JSON(testJsonStr)", "expected": json.loads(JSON_STR), "rows": ({"testJsonStr": JSON_STR},)},
        {"expr": "PARSE_JSON(testJsonStr, true)", "expected": {**json.loads(JSON_STR), "name": "Mark"},
         "rows": ({"testJsonStr": DUPLICATED_JSON_STR},)},  # the last of duplicate keys is kept
        {"expr": "PARSE_JSON(testJsonStr)", "expected": ERROR, "rows": ({"testJsonStr": DUPLICATED_JSON_STR},)},
        {"expr": "PARSE_JSON(testJsonStr)", "expected": [N, N], "rows": ({"testJsonStr": None}, {"testJsonStr": ""})},
        {"expr": "PARSE_JSON(testJsonStr)", "expected": ERROR, "rows": ({"testJsonStr": "invalidJson"},)},
        {"expr": "TRY_PARSE_JSON(testJsonStr)", "expected": [N, N, json.loads(JSON_STR), N, N],
         "rows": tuple({"testJsonStr": v} for v in (None, "", JSON_STR, DUPLICATED_JSON_STR, "invalidJson"))},
        {"expr": "TRY_PARSE_JSON(testJsonStr, true)", "expected": {**json.loads(JSON_STR), "name": "Mark"},
         "rows": ({"testJsonStr": DUPLICATED_JSON_STR},)},
    ])
    + cases(f"{JANINO}#testTranslatedLogicalExpressionCompilesWithJanino", [
        {"expr": "jid = 1 and 1 / uid > 0", "expected": F, "rows": ({"jid": 2, "uid": 0},)},
        {"expr": "jid = 1 or 1 / uid > 0", "expected": T, "rows": ({"jid": 1, "uid": 0},)},
        {"expr": "left_bool and right_bool", "expected": T, "rows": ({"left_bool": T, "right_bool": T, "divisor": 0},)},
        {"expr": "left_bool and 1 / divisor > 0", "expected": F,
         "rows": ({"left_bool": F, "right_bool": T, "divisor": 0},)},
        {"expr": "left_bool or 1 / divisor > 0", "expected": T,
         "rows": ({"left_bool": T, "right_bool": F, "divisor": 0},)},
        ("nullable_bool or false", N),
    ])
    + cases(f"{JANINO}#testTranslatedNestedExpressionPreservesSemantics", [
        {"expr": "(a + b) * c = 9", "expected": T, "rows": ({"a": 1, "b": 2, "c": 3},)},
        {"expr": "a / (b * c) = 2", "expected": T, "rows": ({"a": 12, "b": 2, "c": 3},)},
        {"expr": "a - (b - c) = 6", "expected": T, "rows": ({"a": 10, "b": 6, "c": 2},)},
        {"expr": "IF(a > b, a, b) + c = 13", "expected": T, "rows": ({"a": 10, "b": 2, "c": 3},)},
        {"expr": "c * IF(a > b, a, b) = 30", "expected": T, "rows": ({"a": 10, "b": 2, "c": 3},)},
        {"expr": "(ba OR bb) AND bc", "expected": F, "rows": ({"ba": T, "bb": F, "bc": F},)},
    ])
    + cases(f"{JANINO}#testTranslatedNullFunctionsCompileWithJanino", [
        {"expr": "IFNULL(TRY_CAST(input_value AS INT), 42) = 42", "expected": [T, F],
         "rows": ({"input_value": "invalid"}, {"input_value": "7"})},
        {"expr": "NULLIF(CAST(input_value AS INT), CAST(1 AS BIGINT)) IS NULL", "expected": [T, F],
         "rows": ({"input_value": "1"}, {"input_value": "2"})},
    ])
    + cases(f"{JANINO}#testLargeNumericLiterals", [
        (lit, value) for lit, value in [
            ("0", 0), ("1", 1), ("2147483647", 2147483647), ("-2147483648", -2147483648),
            ("2147483648", 2147483648), ("-2147483649", -2147483649), ("9223372036854775807", 9223372036854775807),
            ("-9223372036854775808", -9223372036854775808)]
    ])
)

IT = "composer/flink/FlinkPipelineTransformITCase.java"
# testTransformWithTemporalFunction (local-time-zone America/Los_Angeles): its verifyDataRecord's relations
IT_TEMPORAL = cases(f"{IT}#testTransformWithTemporalFunction", [
    {"expr": "LOCALTIME = CURRENT_TIME", "condition": True},
    {"expr": "CAST(CURRENT_TIMESTAMP AS TIMESTAMP) = CAST(NOW() AS TIMESTAMP)", "condition": True},
    {"expr": "CAST(NOW() AS TIMESTAMP) = LOCALTIMESTAMP", "condition": True},
    # LOCALTIME is the time of day of LOCALTIMESTAMP, milliseconds included; CURRENT_DATE its date
    {"expr": "CAST(LOCALTIME AS STRING) = SUBSTR(CAST(LOCALTIMESTAMP AS STRING), 12)", "condition": True},
    {"expr": "CURRENT_DATE = TO_DATE(LOCALTIMESTAMP)", "condition": True},
    {"expr": "LOCALTIME", "expected": ANY, "dtype": "TIME(0)"},
    {"expr": "CURRENT_DATE", "expected": ANY, "dtype": "DATE"},
    {"expr": "LOCALTIMESTAMP", "expected": ANY, "dtype": "TIMESTAMP(3)"},
], tz="America/Los_Angeles")
IT_LITERALS = cases(f"{IT}#testTransformWithLargeLiterals", [  # its CreateTableEvent and every row
    ("2147483647", 2147483647, "INT"),
    ("2147483648", 2147483648, "BIGINT"),
    ("-2147483648", -2147483648, "INT"),
    ("-2147483649", -2147483649, "BIGINT"),
    ("CAST(1234567890123456789 AS DECIMAL(19, 0))", D("1234567890123456789"), "DECIMAL(19, 0)"),
])

PARSER = "parser/TransformParserTest.java"
PARSER_CASES = (
    cases(f"{PARSER}#testGenerateDatePartFunctionProjectionColumns", [
        ("YEAR(date_col)", 2024, "BIGINT"), ("HOUR(time_col)", 23, "BIGINT"),
        ("EXTRACT(DAY FROM timestamp_col)", 31, "BIGINT"), ("EXTRACT(HOUR FROM timestamp_ltz_col)", 16, "BIGINT"),
    ])
    + cases(f"{PARSER}#testGenerateIntervalArithmeticProjectionColumns", [
        ("date_col + INTERVAL '1' DAY", dt.date(2024, 3, 1), "DATE"),
        ("time_col + INTERVAL '2:03' HOUR TO MINUTE", dt.time(2, 1, 57), "TIME(0)"),
        ("timestamp_col - INTERVAL '1-2' YEAR TO MONTH", dt.datetime(2023, 10, 31, 23, 58, 57), "TIMESTAMP(3)"),
        ("INTERVAL '3' DAY + timestamp_ltz_col", dt.datetime(2024, 1, 3, 16, 30, tzinfo=UTC), "TIMESTAMP_LTZ(3)"),
    ])
    + cases(f"{PARSER}#testCollectionConstructorsAndFunctions", [
        ("ARRAY[1, bid]", [1, 2], "ARRAY<BIGINT>"),
        ("MAP['one', 1, 'id', bid]['id']", 2, "BIGINT"),
        ("ROW(bid, ARRAY[1])[2]", [1], "ARRAY<INT>"),
        ("ELEMENT(ARRAY[bid])", 2, "BIGINT"),
        ("ARRAY[ARRAY[1], ARRAY[bid]]", [[1], [2]], "ARRAY<ARRAY<BIGINT>>"),
        ("CARDINALITY(ARRAY[1, 2])", 2, "INT"),
        ("ARRAY_CONTAINS(ARRAY[1, 2], 2)", T, "BOOLEAN"),
        ("ARRAY_POSITION(ARRAY[1, 2], 2)", 2, "INT"),
    ])
    + cases(f"{PARSER}#testCollectionConstructorWithIncompatibleElementTypes", [("ARRAY[1, TRUE]", ERROR)])
    + cases(f"{PARSER}#testTranslateCollectionFunctionsToJaninoExpression", [
        ("MAP['one', 1]['one']", 1, "INT"), ("ROW(bid, ARRAY[1])[1]", 2, "BIGINT"),
    ])
    + cases(f"{PARSER}#testGenerateProjectionColumns", [
        ("upper(name)", "ALICE", "STRING"),
        ("age + 1", 18, "INT"),
        ("weight / (height * height)", 17.5, "DOUBLE"),
        ("REGEXP_EXTRACT_ALL(name, '([0-9]+)-([0-9]+)')", [], "ARRAY<STRING>"),
        ("__data_event_type__", "+I", "STRING NOT NULL"),
        ("__schema_name__", "db", "STRING NOT NULL"),
        ("__table_name__", "java_cases", "STRING NOT NULL"),
    ])
    + cases(f"{PARSER}#testNullHelperAndTryCastTypeInference", [
        ("TRY_CAST(text AS INT)", 12, "INT"),
        ("NULLIF(nullable_int, 1)", 5, "INT"),
        ("IFNULL(nullable_int, 1)", 5, "INT NOT NULL"),
        ("IFNULL(nullable_int, nullable_bigint)", 5, "BIGINT"),
        ("IFNULL(not_null_int, nullable_bigint)", 6, "INT NOT NULL"),
        ("IFNULL(nullable_int, TO_DATE('2024-01-01'))", ERROR),
        ("TRY_CAST(text AS ARRAY<INT>)", ERROR),
    ])
    + cases(f"{PARSER}#testGenerateProjectionColumnsWithPrecision", [
        ("UPPER(name)", "ALICE", "STRING"),
        ("UPPER(sex)", "F", "STRING"),
        ("COALESCE(address, address)", b"a" * 50, "BINARY(50)"),
        ("COALESCE(phone, phone)", b"123", "VARBINARY(50)"),
        ("COALESCE(deposit, deposit)", D("12.34"), "DECIMAL(10, 2)"),
        ("COALESCE(birthday, birthday)", dt.datetime(2000, 1, 2, 3, 4, 5, 6000), "TIMESTAMP(3)"),
        ("COALESCE(birthday_ltz, birthday_ltz)", dt.datetime(2000, 1, 2, 3, 4, 5, tzinfo=UTC), "TIMESTAMP_LTZ(3)"),
        ("COALESCE(update_time, update_time)", dt.time(1, 2, 3, 4000), "TIME(3)"),
    ])
    + cases(f"{PARSER}#testGenerateProjectionColumnsWithDecimalPrecisionMode", [
        ("deposit20 + CAST(1 AS DECIMAL(1, 0))", D("13.34"), "DECIMAL(19, 2)"),
        ("age IS DISTINCT FROM 1", T, "BOOLEAN"),
    ])
    + cases(f"{PARSER}#testStringFunctionArgumentValidation", [  # its s is ``text`` here
        ("INSTR(text, 'a', 1)", ERROR),
        ("LPAD(text, true, 'x')", ERROR),
        ("OVERLAY(text PLACING binary_part FROM 1)", ERROR),
        ("POSITION(binary_part IN binary_value)", ANY, "INT"),
        ("POSITION('a' IN text FROM 2)", ANY, "INT"),
        ("OVERLAY(binary_value PLACING binary_part FROM 1)", ANY, "VARBINARY(18)"),
        ("TO_BASE64(binary_value)", ANY, "STRING"),
        ("FROM_BASE64_BINARY(text)", ANY, "VARBINARY(65536)"),
    ])
    + cases(f"{PARSER}#testTranslateFilterToJaninoExpressionError", [  # its dt, dt1, dt2: date and timestamp columns
        ("INTERVAL '1' DAY - date_col", ERROR),
        ("TIMESTAMPDIFF(SECONDS, start_timestamp, end_timestamp)", ERROR),
        ("TIMESTAMPDIFF(QUARTER, start_timestamp, end_timestamp)", ERROR),
        ("TIMESTAMPADD(SECONDS, start_timestamp, end_timestamp)", ERROR),
        ("TIMESTAMPADD(QUARTER, start_timestamp, end_timestamp)", ERROR),
    ])
    + cases(f"{PARSER}#testLargeNumericalLiterals", [
        ("bid > 2147483647", F), ("bid < -2147483648", F), ("bid > 2147483648", F), ("bid > -2147483649", T),
        ("bid < 9223372036854775807", T), ("bid > -9223372036854775808", T),
        ("bid > 9223372036854775808", ERROR), ("bid < -9223372036854775809", ERROR),
    ])
)

CASES: list[JavaCase] = (STRING_CASES + COMPARISON_CASES + LOGICAL_CASES + CASTING_CASES + TEMPORAL_CASES
                         + STRUCT_CASES + POST_CASES + POST_DATA_CASES + JANINO_CASES + PARSER_CASES
                         + IT_TEMPORAL + IT_LITERALS)


# --------------------------------------------------------------------------------------------- evaluation

def same(expected: Any, actual: Any) -> bool:
    if isinstance(expected, float) and isinstance(actual, float):
        return (math.isnan(expected) and math.isnan(actual)) or expected == actual
    if isinstance(expected, D) and isinstance(actual, D):
        return expected == actual and expected.as_tuple().exponent == actual.as_tuple().exponent
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(same(e, a) for e, a in zip(expected, actual))
    if isinstance(expected, dt.datetime) and isinstance(actual, dt.datetime):
        return expected == actual and (expected.tzinfo is None) == (actual.tzinfo is None)
    if expected is None or actual is None:
        return expected is None and actual is None
    return type(expected) is type(actual) and expected == actual


def evaluate(case: JavaCase) -> tuple[Any, str]:
    """The value lakecdc gives the case's expression on the input row, and its declared type; ERROR when lakecdc
    refuses it (at validation or at runtime)."""
    if case.condition:
        rule = TransformRuleConfig(index=0, source_table="db.java_cases",
                                   projection=f"id, IF({case.expr}, true, false) AS c", filter=case.expr)
    else:
        rule = TransformRuleConfig(index=0, source_table="db.java_cases", projection=f"id, {case.expr} AS c")
    try:
        compiled = compile_transform(rule, input_table(), TransformContext(local_time_zone=case.tz))
        out = compiled.apply(input_batch(case.rows))
    except (PipelineConfigError, ExpressionError):
        return ERROR, ""
    field = compiled.output_schema.field("c")
    declared = type_name(field) + ("" if field.nullable else " NOT NULL")
    if case.condition:  # the filter kept the row and the projection saw TRUE; else FALSE
        return out.column("c").to_pylist() == [True], declared
    column = out.column("c").combine_chunks()
    if is_variant_field(field):
        values = [None if t is None else json.loads(t) for t in variant_from_storage(column).storage.to_pylist()]
    else:
        values = column.to_pylist()
    return (values[0] if len(case.rows) == 1 else values), declared


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=[pytest.mark.xfail(strict=True, reason=c.deviation)]
                                               if c.deviation else []) for c in CASES])
def test_java_case(case: JavaCase):
    actual, declared = evaluate(case)
    if case.expected is ERROR:
        assert actual is ERROR, f"{case.source}: Flink CDC fails on {case.expr}; lakecdc gives {actual!r}"
        return
    assert actual is not ERROR, f"{case.source}: lakecdc refuses {case.expr}"
    assert case.expected is ANY or same(case.expected, actual), \
        f"{case.source}: expected {case.expected!r}, got {actual!r}"
    if case.dtype is not None:
        assert declared == case.dtype, f"{case.source}: declared {declared}, Flink CDC {case.dtype}"


def test_case_count():
    """Each case cites its Java test; docs/functions.md states how many there are and how many deviate."""
    from pathlib import Path

    assert all(c.source.split("#")[0].endswith(".java") and "#" in c.source for c in CASES)
    total = len(CASES) + len(IT_PARAMS) + len(EVENT_CASES)
    deviating = sum(1 for c in CASES if c.deviation) + sum(len(c.deviations) for c in IT_CASES)
    docs = (Path(__file__).resolve().parent.parent / "docs" / "functions.md").read_text()
    assert f"{total:,} cases. All give Flink CDC's values and declared types except {deviating}," in \
        " ".join(docs.split()), (total, deviating)


# ------------------------------------------------------------------------------ FlinkPipelineTransformITCase
#
# Pipeline tests of composer/flink/FlinkPipelineTransformITCase.java: a projection and filter over the values source's
# two tables, with the events Flink CDC's values sink prints (copied verbatim). Each output column is a case: its
# declared type (CreateTableEvent) and its value in every emitted row (DataChangeEvent ``after``, INSERT and UPDATE;
# a DELETE repeats an earlier row).

VALUES_TABLES = {  # ValuesDataSourceHelper's TRANSFORM_TABLE: mytable1 with its UPDATE's after image as a third row
    "mytable1": (SourceTable(TableId("default_schema", "mytable1"), (
        SourceColumn("id", "int", pa.int32(), False), SourceColumn("name", "longtext", pa.string()),
        SourceColumn("age", "int", pa.int32())), primary_keys=("id",)),
        [(1, "Alice", 18), (2, "Bob", 20), (2, "Bob", 30)]),
    "mytable2": (SourceTable(TableId("default_schema", "mytable2"), (
        SourceColumn("id", "bigint", pa.int64(), False), SourceColumn("name", "varchar(255)", pa.string()),
        SourceColumn("age", "tinyint", pa.int8()), SourceColumn("description", "longtext", pa.string())),
        primary_keys=("id",)),
        [(3, "Carol", 15, "student"), (4, "Derrida", 25, "student")]),
}



def _values_table(name: str, columns: list[tuple[str, str, pa.DataType]], rows: list[tuple]) -> tuple:
    """A values-source table: (column, MySQL type giving the Flink type, Arrow type); the first is the key."""
    cols = tuple(SourceColumn(n, mysql, arrow, i != 0) for i, (n, mysql, arrow) in enumerate(columns))
    return SourceTable(TableId("default_schema", name), cols, primary_keys=(columns[0][0],)), rows


NUMERIC_COLUMNS = [("id", "int", pa.int32()), ("tinyint_col", "tinyint", pa.int8()),
                   ("smallint_col", "smallint", pa.int16()), ("int_col", "int", pa.int32()),
                   ("bigint_col", "bigint", pa.int64()), ("float_col", "float", pa.float32()),
                   ("double_col", "double", pa.float64())]
SOURCES = {
    "transform": VALUES_TABLES,
    # generateFloorCeilAndRoundEvents
    "floor_ceil_round": {"mytable1": _values_table(
        "mytable1", NUMERIC_COLUMNS + [("decimal_col", "decimal(10,3)", pa.decimal128(10, 3))],
        [(1, 1, 1, 1, 1, 1.1, 1.1, D("1.100")), (4, 4, 4, 4, 4, 4.44, 4.44, D("4.440")),
         (5, 5, 5, 5, 5, 5.555, 5.555, D("5.555")),
         (9, 9, 9, 9, 9, 9999999.999, 9999999.999, D("9999999.999")), (0,) + (None,) * 7])},
    # generateAbsEvents
    "abs": {"mytable1": _values_table(
        "mytable1", NUMERIC_COLUMNS + [("decimal_col", "decimal(10,2)", pa.decimal128(10, 2))],
        [(1, 1, 1, 1, 1, 1.1, 1.1, D("1.10")), (-4, -4, -4, -4, -4, -4.44, -4.44, D("-4.44")),
         (-9, -9, -9, -9, -9, -99999999.99, -99999999.99, D("-99999999.99")), (0,) + (None,) * 7])},
    # generateNumericCastingEvents
    "numeric_casting": {"tbl": _values_table(
        "tbl", [("id", "bigint", pa.int64()), ("tiny_c", "tinyint", pa.int8()), ("small_c", "smallint", pa.int16()),
                ("int_c", "int", pa.int32()), ("bigint_c", "bigint", pa.int64()), ("float_c", "float", pa.float32()),
                ("double_c", "double", pa.float64()), ("decimal_c", "decimal(10,2)", pa.decimal128(10, 2)),
                ("valid_char_c", "varchar(17)", pa.string()), ("invalid_char_c", "varchar(17)", pa.string())],
        [(-1, -2, -3, -4, -5, -6.7, -8.9, D("-10.11"), "-12.13", "foo"),
         (0, 0, 0, 0, 0, 0.0, 0.0, D("0.00"), "0", "bar"),
         (1, 2, 3, 4, 5, 6.7, 8.9, D("10.11"), "12.13", "baz"), (2,) + (None,) * 9])},
    # testDateAndTimeCastingFunctions's my_table (its TIME(9) column left out: MySQL's TIME ends at 6 digits)
    "date_time": {"my_table": _values_table(
        "my_table", [("id", "int", pa.int32()), ("date_0", "date", pa.date32()), ("time_0", "time", pa.time32("s")),
                     ("time_3", "time(3)", pa.time32("ms")), ("time_6", "time(6)", pa.time64("us"))],
        [(1, dt.date(1999, 12, 31), dt.time(21, 48, 25), dt.time(21, 48, 25, 123000), dt.time(21, 48, 25, 123456)),
         (2, None, None, None, None)])},
}


def _timestamps_source(zone: str) -> dict:
    """testTransformWithTimestamps's mytable1: a TIMESTAMP(6) and a TIMESTAMP_LTZ(6) whose instants are wall clocks
    of the pipeline's zone (its toInstant(text, timezone))."""
    from zoneinfo import ZoneInfo

    def instant(text: str) -> dt.datetime:
        return dt.datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(zone)).astimezone(UTC)
    return {"mytable1": _values_table(
        "mytable1", [("id", "int", pa.int32()), ("ts", "datetime(6)", pa.timestamp("us")),
                     ("ts_ltz", "timestamp(6)", pa.timestamp("us", tz="UTC"))],
        [(1, dt.datetime(2023, 11, 27, 20, 12, 31), instant("2020-07-17 18:00:22")),
         (2, dt.datetime(2018, 2, 1, 4, 14, 1), instant("2019-12-31 21:00:22")), (3, None, None)])}


for _zone in ("America/Los_Angeles", "UTC", "Asia/Shanghai"):
    SOURCES[f"timestamps {_zone}"] = _timestamps_source(_zone)


@dataclass(frozen=True)
class ITCase:
    method: str
    projection: str | None
    filter: str | None
    lines: list[str]  # the printed events, as in the Java test
    deviations: tuple[tuple[str, str], ...] = ()  # (output column, documented reason)
    sources: str = "transform"  # the values source's tables (SOURCES)
    precision: int = 19  # pipeline.transform.decimal.precision.mode (UP_TO_19 / UP_TO_38)
    label: str = ""
    not_applicable: tuple[str, ...] = ()  # printed columns lakecdc's MySQL source cannot have (left out of both sides)
    tz: str = "UTC"  # pipeline.local-time-zone


def _printed_columns(line: str) -> list[tuple[str, str]]:
    body = line.split("columns={", 1)[1].split("}, primaryKeys=", 1)[0]
    out = []
    for item in body.split(",`"):
        name, _, kind = item.strip("`").partition("` ")
        out.append((name, kind))
    return out


def _split_row(text: str) -> list[str]:
    """The fields of a printed row: split at ", " outside JSON brackets and quotes (a VARIANT prints as JSON)."""
    fields, depth, quoted, start, k = [], 0, False, 0, 0
    while k < len(text):
        ch = text[k]
        if quoted:
            k += 2 if ch == "\\" else 1
            quoted = ch != '"'
            continue
        if ch == '"':
            quoted = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        elif depth == 0 and text.startswith(", ", k):
            fields.append(text[start:k])
            start = k + 2
            k += 1
        k += 1
    return fields + [text[start:]] if text else []


def _expected_by_table(case: ITCase) -> dict[str, tuple[list[tuple[str, str]], list[list[str]]]]:
    """table → (printed columns, printed after-rows of its INSERT and UPDATE events)."""
    out: dict[str, tuple[list[tuple[str, str]], list[list[str]]]] = {}
    keep: dict[str, list[int]] = {}
    for line in case.lines:
        table = line.split("tableId=", 1)[1].split(",", 1)[0].rsplit(".", 1)[1]
        if line.startswith("CreateTableEvent"):
            columns = _printed_columns(line)
            keep[table] = [k for k, (name, _) in enumerate(columns) if name not in case.not_applicable]
            out[table] = ([columns[k] for k in keep[table]], [])
        elif ", op=INSERT" in line or ", op=UPDATE" in line:
            row = _split_row(line.split("after=[", 1)[1].rsplit("], op=", 1)[0])
            out[table][1].append([row[k] for k in keep[table]])
    return out


def _run_it(case: ITCase, table: str) -> tuple[list[tuple[str, str]], list[list[str]]]:
    """lakecdc's declared columns and rendered rows for one source table of the case."""
    from tests.flink_printing import render

    src, rows = SOURCES[case.sources][table]
    rule = TransformRuleConfig(index=0, source_table=f"default_schema.{table}", projection=case.projection,
                               filter=case.filter)
    compiled = compile_transform(rule, src, TransformContext(decimal_precision=case.precision,
                                                             local_time_zone=case.tz))
    columns = [pa.array([r[i] for r in rows], c.arrow_type) for i, c in enumerate(src.columns)]
    data = pa.Table.from_arrays(columns + [pa.array(["+I"] * len(rows)), pa.array([0] * len(rows), pa.int64())],
                                schema=src.change_schema())
    out = compiled.apply(ChangeBatch(src, data))
    declared = [(f.name, type_name(f) + ("" if f.nullable else " NOT NULL")) for f in compiled.output_schema]
    rendered = [render(variant_from_storage(out.column(f.name).combine_chunks()) if is_variant_field(f)
                       else out.column(f.name).combine_chunks()) for f in compiled.output_schema]
    return declared, [[col[r] for col in rendered] for r in range(out.num_rows)]


def it_params() -> list:
    params = []
    for case in IT_CASES:
        expected = _expected_by_table(case)
        names = [name for name, _ in next(iter(expected.values()))[0]]
        reasons = dict(case.deviations)
        for name in dict.fromkeys(n for cols, _ in expected.values() for n, _ in cols):
            marks = [pytest.mark.xfail(strict=True, reason=reasons[name])] if name in reasons else []
            label = f" {case.label}" if case.label else ""
            params.append(pytest.param(case, name, id=f"{case.method}{label}: {name}", marks=marks))
        assert names
    return params


def test_it_case(case: ITCase, column: str):
    for table, (columns, rows) in _expected_by_table(case).items():
        declared, actual = _run_it(case, table)
        names = [n for n, _ in columns]
        if column not in names:
            continue
        k = names.index(column)
        assert [n for n, _ in declared] == names, f"{IT}#{case.method} {table}: columns {declared}"
        assert declared[k][1] == columns[k][1], f"{IT}#{case.method} {table}.{column}: declared {declared[k][1]}"
        assert [r[k] for r in actual] == [r[k] for r in rows], \
            f"{IT}#{case.method} {table}.{column}: expected {[r[k] for r in rows]}, got {[r[k] for r in actual]}"
IT_CASES = [
    ITCase('testCalculatedColumns',
        '*, id || name AS uid, age * 2 AS double_age',
        None,
        [
            'CreateTableEvent{tableId=default_namespace.default_schema.mytable1, schema=columns={`id` INT NOT NULL,`'
            'name` STRING,`age` INT,`uid` STRING,`double_age` INT}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[1, Alice, 18, 1Ali'
            'ce, 36], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[2, Bob, 20, 2Bob, '
            '40], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[2, Bob, 20, 2Bob, 40], after'
            '=[2, Bob, 30, 2Bob, 60], op=UPDATE, meta=()}',
            'CreateTableEvent{tableId=default_namespace.default_schema.mytable2, schema=columns={`id` BIGINT NOT NUL'
            'L,`name` VARCHAR(255),`age` TINYINT,`description` STRING,`uid` STRING,`double_age` INT}, primaryKeys=id'
            ', options=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable2, before=[], after=[3, Carol, 15, stud'
            'ent, 3Carol, 30], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable2, before=[], after=[4, Derrida, 25, st'
            'udent, 4Derrida, 50], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable2, before=[4, Derrida, 25, student, 4De'
            'rrida, 50], after=[], op=DELETE, meta=()}',
        ],),
    ITCase('testMultipleReferencedColumnsInProjection',
        '*, CAST(age * age * age AS INT) AS cubic_age',
        None,
        [
            'CreateTableEvent{tableId=default_namespace.default_schema.mytable1, schema=columns={`id` INT NOT NULL,`'
            'name` STRING,`age` INT,`cubic_age` INT}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[1, Alice, 18, 5832'
            '], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[2, Bob, 20, 8000],'
            ' op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[2, Bob, 20, 8000], after=[2,'
            ' Bob, 30, 27000], op=UPDATE, meta=()}',
            'CreateTableEvent{tableId=default_namespace.default_schema.mytable2, schema=columns={`id` BIGINT NOT NUL'
            'L,`name` VARCHAR(255),`age` TINYINT,`description` STRING,`cubic_age` INT}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable2, before=[], after=[3, Carol, 15, stud'
            'ent, 3375], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable2, before=[], after=[4, Derrida, 25, st'
            'udent, 15625], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable2, before=[4, Derrida, 25, student, 156'
            '25], after=[], op=DELETE, meta=()}',
        ],),
    ITCase('testMultipleReferencedColumnsInFilter',
        None,
        'id > 2 AND id < 4',
        [
            'CreateTableEvent{tableId=default_namespace.default_schema.mytable1, schema=columns={`id` INT NOT NULL,`'
            'name` STRING,`age` INT}, primaryKeys=id, options=()}',
            'CreateTableEvent{tableId=default_namespace.default_schema.mytable2, schema=columns={`id` BIGINT NOT NUL'
            'L,`name` VARCHAR(255),`age` TINYINT,`description` STRING}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable2, before=[], after=[3, Carol, 15, stud'
            'ent], op=INSERT, meta=()}',
        ],),
    ITCase('testFilteringRules',
        None,
        'CHAR_LENGTH(name) > 3',
        [
            'CreateTableEvent{tableId=default_namespace.default_schema.mytable1, schema=columns={`id` INT NOT NULL,`'
            'name` STRING,`age` INT}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[1, Alice, 18], op='
            'INSERT, meta=()}',
            'CreateTableEvent{tableId=default_namespace.default_schema.mytable2, schema=columns={`id` BIGINT NOT NUL'
            'L,`name` VARCHAR(255),`age` TINYINT,`description` STRING}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable2, before=[], after=[3, Carol, 15, stud'
            'ent], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable2, before=[], after=[4, Derrida, 25, st'
            'udent], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable2, before=[4, Derrida, 25, student], af'
            'ter=[], op=DELETE, meta=()}',
        ],),
    ITCase('testBuiltinComparisonFunctions',
        "*, id = 2 AS col1, id <> 3 AS col2, id > 2 as col3, id >= 2 as col4, id < 3 as col5, id <= 4 as col6, name "
        "IS NULL as col7, name IS NOT NULL as col8, id BETWEEN 1 AND 3 as col9, id NOT BETWEEN 2 AND 4 as col10, nam"
        "e LIKE 'li' as col11, name LIKE 'ro' as col12, CAST(id AS INT) IN (1, 3, 5) as col13, name IN ('Bob', 'Derr"
        "ida') AS col14",
        None,
        [
            'CreateTableEvent{tableId=default_namespace.default_schema.mytable1, schema=columns={`id` INT NOT NULL,`'
            'name` STRING,`age` INT,`col1` BOOLEAN,`col2` BOOLEAN,`col3` BOOLEAN,`col4` BOOLEAN,`col5` BOOLEAN,`col6'
            '` BOOLEAN,`col7` BOOLEAN,`col8` BOOLEAN,`col9` BOOLEAN,`col10` BOOLEAN,`col11` BOOLEAN,`col12` BOOLEAN,'
            '`col13` BOOLEAN,`col14` BOOLEAN}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[1, Alice, 18, fals'
            'e, true, false, false, true, true, false, true, true, true, true, false, true, false], op=INSERT, meta='
            '()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[2, Bob, 20, true, '
            'true, false, true, true, true, false, true, true, false, false, false, false, true], op=INSERT, meta=()'
            '}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[2, Bob, 20, true, true, fals'
            'e, true, true, true, false, true, true, false, false, false, false, true], after=[2, Bob, 30, true, tru'
            'e, false, true, true, true, false, true, true, false, false, false, false, true], op=UPDATE, meta=()}',
            'CreateTableEvent{tableId=default_namespace.default_schema.mytable2, schema=columns={`id` BIGINT NOT NUL'
            'L,`name` VARCHAR(255),`age` TINYINT,`description` STRING,`col1` BOOLEAN,`col2` BOOLEAN,`col3` BOOLEAN,`'
            'col4` BOOLEAN,`col5` BOOLEAN,`col6` BOOLEAN,`col7` BOOLEAN,`col8` BOOLEAN,`col9` BOOLEAN,`col10` BOOLEA'
            'N,`col11` BOOLEAN,`col12` BOOLEAN,`col13` BOOLEAN,`col14` BOOLEAN}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable2, before=[], after=[3, Carol, 15, stud'
            'ent, false, true, true, true, false, true, false, true, true, false, false, true, true, false], op=INSE'
            'RT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable2, before=[], after=[4, Derrida, 25, st'
            'udent, false, true, true, true, false, true, false, true, false, false, false, false, false, true], op='
            'INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable2, before=[4, Derrida, 25, student, fal'
            'se, true, true, true, false, true, false, true, false, false, false, false, false, true], after=[], op='
            'DELETE, meta=()}',
        ],
        deviations=(('col2', NUMERIC_EQUALS), ('col11', LIKE_REGEX), ('col12', LIKE_REGEX))),
    ITCase('testBuiltinLogicalFunctions',
        "*, id = 2 OR true as col1, id <> 3 OR false as col2, name = 'Alice' AND true as col4, name <> 'Bob' AND fal"
        "se as col5, NOT id = 1 as col6, id = 3 IS FALSE as col7, name = 'Derrida' IS TRUE as col8, name <> 'Carol' "
        "IS NOT FALSE as col9, name <> 'Eve' IS NOT TRUE as col10",
        None,
        [
            'CreateTableEvent{tableId=default_namespace.default_schema.mytable1, schema=columns={`id` INT NOT NULL,`'
            'name` STRING,`age` INT,`col1` BOOLEAN,`col2` BOOLEAN,`col4` BOOLEAN,`col5` BOOLEAN,`col6` BOOLEAN,`col7'
            '` BOOLEAN,`col8` BOOLEAN,`col9` BOOLEAN,`col10` BOOLEAN}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[1, Alice, 18, true'
            ', true, true, false, false, true, false, true, false], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[2, Bob, 20, true, '
            'true, false, false, true, true, false, true, false], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[2, Bob, 20, true, true, fals'
            'e, false, true, true, false, true, false], after=[2, Bob, 30, true, true, false, false, true, true, fal'
            'se, true, false], op=UPDATE, meta=()}',
            'CreateTableEvent{tableId=default_namespace.default_schema.mytable2, schema=columns={`id` BIGINT NOT NUL'
            'L,`name` VARCHAR(255),`age` TINYINT,`description` STRING,`col1` BOOLEAN,`col2` BOOLEAN,`col4` BOOLEAN,`'
            'col5` BOOLEAN,`col6` BOOLEAN,`col7` BOOLEAN,`col8` BOOLEAN,`col9` BOOLEAN,`col10` BOOLEAN}, primaryKeys'
            '=id, options=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable2, before=[], after=[3, Carol, 15, stud'
            'ent, true, true, false, false, true, true, false, false, false], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable2, before=[], after=[4, Derrida, 25, st'
            'udent, true, true, false, false, true, true, true, true, false], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable2, before=[4, Derrida, 25, student, tru'
            'e, true, false, false, true, true, true, true, false], after=[], op=DELETE, meta=()}',
        ],
        deviations=(('col2', NUMERIC_EQUALS), ('col7', NUMERIC_EQUALS))),
    ITCase('testBuiltinArithmeticFunctions',
        '*, id + 17 AS col1, id - 17 AS col2, id * 17 AS col3, CAST(id AS DOUBLE) / 1.7 AS col4, CAST(id AS INT) % 3'
        ' AS col5, ABS(id - 17) AS col6, CEIL(CAST(id AS DOUBLE) / 1.7) AS col7, FLOOR(CAST(id AS DOUBLE) / 1.7) AS '
        'col8, ROUND(CAST(id AS DOUBLE) / 1.7, 0) AS col9, CHAR_LENGTH(UUID()) AS col10',
        None,
        [
            'CreateTableEvent{tableId=default_namespace.default_schema.mytable1, schema=columns={`id` INT NOT NULL,`'
            'name` STRING,`age` INT,`col1` INT,`col2` INT,`col3` INT,`col4` DOUBLE,`col5` INT,`col6` INT,`col7` DOUB'
            'LE,`col8` DOUBLE,`col9` DOUBLE,`col10` INT}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[1, Alice, 18, 18, '
            '-16, 17, 0.5882352941176471, 1, 16, 1.0, 0.0, 1.0, 36], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[2, Bob, 20, 19, -1'
            '5, 34, 1.1764705882352942, 2, 15, 2.0, 1.0, 1.0, 36], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[2, Bob, 20, 19, -15, 34, 1.1'
            '764705882352942, 2, 15, 2.0, 1.0, 1.0, 36], after=[2, Bob, 30, 19, -15, 34, 1.1764705882352942, 2, 15, '
            '2.0, 1.0, 1.0, 36], op=UPDATE, meta=()}',
            'CreateTableEvent{tableId=default_namespace.default_schema.mytable2, schema=columns={`id` BIGINT NOT NUL'
            'L,`name` VARCHAR(255),`age` TINYINT,`description` STRING,`col1` BIGINT,`col2` BIGINT,`col3` BIGINT,`col'
            '4` DOUBLE,`col5` INT,`col6` BIGINT,`col7` DOUBLE,`col8` DOUBLE,`col9` DOUBLE,`col10` INT}, primaryKeys='
            'id, options=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable2, before=[], after=[3, Carol, 15, stud'
            'ent, 20, -14, 51, 1.7647058823529411, 0, 14, 2.0, 1.0, 2.0, 36], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable2, before=[], after=[4, Derrida, 25, st'
            'udent, 21, -13, 68, 2.3529411764705883, 1, 13, 3.0, 2.0, 2.0, 36], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable2, before=[4, Derrida, 25, student, 21,'
            ' -13, 68, 2.3529411764705883, 1, 13, 3.0, 2.0, 2.0, 36], after=[], op=DELETE, meta=()}',
        ],),
    ITCase('testBuiltinStringFunctions',
        "*, 'Dear ' || name AS col1, CHAR_LENGTH(name) AS col2, UPPER(name) AS col3, LOWER(name) AS col4, TRIM(name)"
        " AS col5, REGEXP_REPLACE(name, 'Al|Bo', '**') AS col6, SUBSTR(name, 1, 1) AS col7, SUBSTR(name, 2, 1) AS co"
        "l8, SUBSTR(name, 3) AS col9, CONCAT(name, ' - ', CAST(id AS VARCHAR)) AS col10",
        None,
        [
            'CreateTableEvent{tableId=default_namespace.default_schema.mytable1, schema=columns={`id` INT NOT NULL,`'
            'name` STRING,`age` INT,`col1` STRING,`col2` INT,`col3` STRING,`col4` STRING,`col5` STRING,`col6` STRING'
            ',`col7` STRING,`col8` STRING,`col9` STRING,`col10` STRING}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[1, Alice, 18, Dear'
            ' Alice, 5, ALICE, alice, Alice, **ice, A, l, ice, Alice - 1], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[2, Bob, 20, Dear B'
            'ob, 3, BOB, bob, Bob, **b, B, o, b, Bob - 2], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[2, Bob, 20, Dear Bob, 3, BOB'
            ', bob, Bob, **b, B, o, b, Bob - 2], after=[2, Bob, 30, Dear Bob, 3, BOB, bob, Bob, **b, B, o, b, Bob - '
            '2], op=UPDATE, meta=()}',
            'CreateTableEvent{tableId=default_namespace.default_schema.mytable2, schema=columns={`id` BIGINT NOT NUL'
            'L,`name` VARCHAR(255),`age` TINYINT,`description` STRING,`col1` STRING,`col2` INT,`col3` STRING,`col4` '
            'STRING,`col5` STRING,`col6` STRING,`col7` STRING,`col8` STRING,`col9` STRING,`col10` STRING}, primaryKe'
            'ys=id, options=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable2, before=[], after=[3, Carol, 15, stud'
            'ent, Dear Carol, 5, CAROL, carol, Carol, Carol, C, a, rol, Carol - 3], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable2, before=[], after=[4, Derrida, 25, st'
            'udent, Dear Derrida, 7, DERRIDA, derrida, Derrida, Derrida, D, e, rrida, Derrida - 4], op=INSERT, meta='
            '()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable2, before=[4, Derrida, 25, student, Dea'
            'r Derrida, 7, DERRIDA, derrida, Derrida, Derrida, D, e, rrida, Derrida - 4], after=[], op=DELETE, meta='
            '()}',
        ],),
]

IT_CASES += [
    ITCase('testFloorCeilAndRoundFunction',
        '*, CEIL(tinyint_col)   AS ceil_tinyint,CEIL(smallint_col)  AS ceil_smallint,CEIL(int_col)       AS ceil_int'
        ',CEIL(bigint_col)    AS ceil_bigint,CEIL(float_col)     AS ceil_float,CEIL(double_col)    AS ceil_double,CE'
        'IL(decimal_col)   AS ceil_decimal,CEILING(tinyint_col)   AS ceiling_tinyint,CEILING(smallint_col)  AS ceili'
        'ng_smallint,CEILING(int_col)       AS ceiling_int,CEILING(bigint_col)    AS ceiling_bigint,CEILING(float_co'
        'l)     AS ceiling_float,CEILING(double_col)    AS ceiling_double,CEILING(decimal_col)   AS ceiling_decimal,'
        'FLOOR(tinyint_col)  AS floor_tinyint,FLOOR(smallint_col) AS floor_smallint,FLOOR(int_col)      AS floor_int'
        ',FLOOR(bigint_col)   AS floor_bigint,FLOOR(float_col)    AS floor_float,FLOOR(double_col)   AS floor_double'
        ',FLOOR(decimal_col)  AS floor_decimal,ROUND(tinyint_col, 2)  AS round_tinyint,ROUND(smallint_col, 2) AS rou'
        'nd_smallint,ROUND(int_col, 2)      AS round_int,ROUND(bigint_col, 2)   AS round_bigint,ROUND(float_col, 2) '
        '   AS round_float,ROUND(double_col, 2)   AS round_double,ROUND(decimal_col, 2)  AS round_decimal,ROUND(tiny'
        'int_col, 0)  AS round_0_tinyint,ROUND(smallint_col, 0) AS round_0_smallint,ROUND(int_col, 0)      AS round_'
        '0_int,ROUND(bigint_col, 0)   AS round_0_bigint,ROUND(float_col, 0)    AS round_0_float,ROUND(double_col, 0)'
        '   AS round_0_double,ROUND(decimal_col, 0)  AS round_0_decimal',
        None,
        [
            'CreateTableEvent{tableId=default_namespace.default_schema.mytable1, schema=columns={`id` INT NOT NULL,`'
            'tinyint_col` TINYINT,`smallint_col` SMALLINT,`int_col` INT,`bigint_col` BIGINT,`float_col` FLOAT,`doubl'
            'e_col` DOUBLE,`decimal_col` DECIMAL(10, 3),`ceil_tinyint` TINYINT,`ceil_smallint` SMALLINT,`ceil_int` I'
            'NT,`ceil_bigint` BIGINT,`ceil_float` FLOAT,`ceil_double` DOUBLE,`ceil_decimal` DECIMAL(10, 0),`ceiling_'
            'tinyint` TINYINT,`ceiling_smallint` SMALLINT,`ceiling_int` INT,`ceiling_bigint` BIGINT,`ceiling_float` '
            'FLOAT,`ceiling_double` DOUBLE,`ceiling_decimal` DECIMAL(10, 0),`floor_tinyint` TINYINT,`floor_smallint`'
            ' SMALLINT,`floor_int` INT,`floor_bigint` BIGINT,`floor_float` FLOAT,`floor_double` DOUBLE,`floor_decima'
            'l` DECIMAL(10, 0),`round_tinyint` TINYINT,`round_smallint` SMALLINT,`round_int` INT,`round_bigint` BIGI'
            'NT,`round_float` FLOAT,`round_double` DOUBLE,`round_decimal` DECIMAL(10, 2),`round_0_tinyint` TINYINT,`'
            'round_0_smallint` SMALLINT,`round_0_int` INT,`round_0_bigint` BIGINT,`round_0_float` FLOAT,`round_0_dou'
            'ble` DOUBLE,`round_0_decimal` DECIMAL(8, 0)}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[1, 1, 1, 1, 1, 1.1'
            ', 1.1, 1.100, 1, 1, 1, 1, 2.0, 2.0, 2, 1, 1, 1, 1, 2.0, 2.0, 2, 1, 1, 1, 1, 1.0, 1.0, 1, 1, 1, 1, 1, 1.'
            '1, 1.1, 1.10, 1, 1, 1, 1, 1.0, 1.0, 1], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[4, 4, 4, 4, 4, 4.4'
            '4, 4.44, 4.440, 4, 4, 4, 4, 5.0, 5.0, 5, 4, 4, 4, 4, 5.0, 5.0, 5, 4, 4, 4, 4, 4.0, 4.0, 4, 4, 4, 4, 4, '
            '4.44, 4.44, 4.44, 4, 4, 4, 4, 4.0, 4.0, 4], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[5, 5, 5, 5, 5, 5.5'
            '55, 5.555, 5.555, 5, 5, 5, 5, 6.0, 6.0, 6, 5, 5, 5, 5, 6.0, 6.0, 6, 5, 5, 5, 5, 5.0, 5.0, 5, 5, 5, 5, 5'
            ', 5.56, 5.56, 5.56, 5, 5, 5, 5, 6.0, 6.0, 6], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[9, 9, 9, 9, 9, 1.0'
            'E7, 9999999.999, 9999999.999, 9, 9, 9, 9, 1.0E7, 1.0E7, 10000000, 9, 9, 9, 9, 1.0E7, 1.0E7, 10000000, 9'
            ', 9, 9, 9, 1.0E7, 9999999.0, 9999999, 9, 9, 9, 9, 1.0E7, 1.0E7, 10000000.00, 9, 9, 9, 9, 1.0E7, 1.0E7, '
            '10000000], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[0, null, null, nul'
            'l, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null'
            ', null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null,'
            ' null, null, null, null, null], op=INSERT, meta=()}',
        ],
        sources='floor_ceil_round'),
    ITCase('testAbsFunction',
        '*, ABS(tinyint_col)   AS abs_tinyint,ABS(smallint_col)  AS abs_smallint,ABS(int_col)       AS abs_int,ABS(b'
        'igint_col)    AS abs_bigint,ABS(float_col)     AS abs_float,ABS(double_col)    AS abs_double,ABS(decimal_co'
        'l)   AS abs_decimal',
        None,
        [
            'CreateTableEvent{tableId=default_namespace.default_schema.mytable1, schema=columns={`id` INT NOT NULL,`'
            'tinyint_col` TINYINT,`smallint_col` SMALLINT,`int_col` INT,`bigint_col` BIGINT,`float_col` FLOAT,`doubl'
            'e_col` DOUBLE,`decimal_col` DECIMAL(10, 2),`abs_tinyint` TINYINT,`abs_smallint` SMALLINT,`abs_int` INT,'
            '`abs_bigint` BIGINT,`abs_float` FLOAT,`abs_double` DOUBLE,`abs_decimal` DECIMAL(10, 2)}, primaryKeys=id'
            ', options=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[1, 1, 1, 1, 1, 1.1'
            ', 1.1, 1.10, 1, 1, 1, 1, 1.1, 1.1, 1.10], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[-4, -4, -4, -4, -4'
            ', -4.44, -4.44, -4.44, 4, 4, 4, 4, 4.44, 4.44, 4.44], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[-9, -9, -9, -9, -9'
            ', -1.0E8, -9.999999999E7, -99999999.99, 9, 9, 9, 9, 1.0E8, 9.999999999E7, 99999999.99], op=INSERT, meta'
            '=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[0, null, null, nul'
            'l, null, null, null, null, null, null, null, null, null, null, null], op=INSERT, meta=()}',
        ],
        sources='abs'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_19]',
        '*',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` TINYINT,`small_c` SM'
            'ALLINT,`int_c` INT,`bigint_c` BIGINT,`float_c` FLOAT,`double_c` DOUBLE,`decimal_c` DECIMAL(10, 2),`vali'
            'd_char_c` VARCHAR(17),`invalid_char_c` VARCHAR(17)}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2, -3, -4, -5, -6.7, -8.9, -10.11, -12.13, f'
            'oo], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0, 0, 0, 0, 0.0, 0.0, 0.00, 0, bar], op=INSERT'
            ', meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2, 3, 4, 5, 6.7, 8.9, 10.11, 12.13, baz], op=I'
            'NSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', label='*'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_38]',
        '*',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` TINYINT,`small_c` SM'
            'ALLINT,`int_c` INT,`bigint_c` BIGINT,`float_c` FLOAT,`double_c` DOUBLE,`decimal_c` DECIMAL(10, 2),`vali'
            'd_char_c` VARCHAR(17),`invalid_char_c` VARCHAR(17)}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2, -3, -4, -5, -6.7, -8.9, -10.11, -12.13, f'
            'oo], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0, 0, 0, 0, 0.0, 0.0, 0.00, 0, bar], op=INSERT'
            ', meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2, 3, 4, 5, 6.7, 8.9, 10.11, 12.13, baz], op=I'
            'NSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', precision=38, label='*'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_19]',
        'id, CAST(tiny_c AS BOOLEAN) AS tiny_c, CAST(small_c AS BOOLEAN) AS small_c, CAST(int_c AS BOOLEAN) AS int_c'
        ', CAST(bigint_c AS BOOLEAN) AS bigint_c, CAST(float_c AS BOOLEAN) AS float_c, CAST(double_c AS BOOLEAN) AS '
        'double_c, CAST(decimal_c AS BOOLEAN) AS decimal_c, CAST(valid_char_c AS BOOLEAN) AS valid_char_c, CAST(inva'
        'lid_char_c AS BOOLEAN) AS invalid_char_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` BOOLEAN,`small_c` BO'
            'OLEAN,`int_c` BOOLEAN,`bigint_c` BOOLEAN,`float_c` BOOLEAN,`double_c` BOOLEAN,`decimal_c` BOOLEAN,`vali'
            'd_char_c` BOOLEAN,`invalid_char_c` BOOLEAN}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, true, true, true, true, true, true, true, fal'
            'se, false], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, false, false, false, false, false, false, fals'
            'e, false, false], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, true, true, true, true, true, true, true, fals'
            'e, false], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', label='BOOLEAN'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_38]',
        'id, CAST(tiny_c AS BOOLEAN) AS tiny_c, CAST(small_c AS BOOLEAN) AS small_c, CAST(int_c AS BOOLEAN) AS int_c'
        ', CAST(bigint_c AS BOOLEAN) AS bigint_c, CAST(float_c AS BOOLEAN) AS float_c, CAST(double_c AS BOOLEAN) AS '
        'double_c, CAST(decimal_c AS BOOLEAN) AS decimal_c, CAST(valid_char_c AS BOOLEAN) AS valid_char_c, CAST(inva'
        'lid_char_c AS BOOLEAN) AS invalid_char_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` BOOLEAN,`small_c` BO'
            'OLEAN,`int_c` BOOLEAN,`bigint_c` BOOLEAN,`float_c` BOOLEAN,`double_c` BOOLEAN,`decimal_c` BOOLEAN,`vali'
            'd_char_c` BOOLEAN,`invalid_char_c` BOOLEAN}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, true, true, true, true, true, true, true, fal'
            'se, false], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, false, false, false, false, false, false, fals'
            'e, false, false], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, true, true, true, true, true, true, true, fals'
            'e, false], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', precision=38, label='BOOLEAN'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_19]',
        'id, CAST(tiny_c AS TINYINT) AS tiny_c, CAST(small_c AS TINYINT) AS small_c, CAST(int_c AS TINYINT) AS int_c'
        ', CAST(bigint_c AS TINYINT) AS bigint_c, CAST(float_c AS TINYINT) AS float_c, CAST(double_c AS TINYINT) AS '
        'double_c, CAST(decimal_c AS TINYINT) AS decimal_c, CAST(valid_char_c AS TINYINT) AS valid_char_c, CAST(inva'
        'lid_char_c AS TINYINT) AS invalid_char_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` TINYINT,`small_c` TI'
            'NYINT,`int_c` TINYINT,`bigint_c` TINYINT,`float_c` TINYINT,`double_c` TINYINT,`decimal_c` TINYINT,`vali'
            'd_char_c` TINYINT,`invalid_char_c` TINYINT}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2, -3, -4, -5, -6, -8, -10, -12, null], op=I'
            'NSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0, 0, 0, 0, 0, 0, 0, 0, null], op=INSERT, meta'
            '=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2, 3, 4, 5, 6, 8, 10, 12, null], op=INSERT, me'
            'ta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', label='TINYINT'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_38]',
        'id, CAST(tiny_c AS TINYINT) AS tiny_c, CAST(small_c AS TINYINT) AS small_c, CAST(int_c AS TINYINT) AS int_c'
        ', CAST(bigint_c AS TINYINT) AS bigint_c, CAST(float_c AS TINYINT) AS float_c, CAST(double_c AS TINYINT) AS '
        'double_c, CAST(decimal_c AS TINYINT) AS decimal_c, CAST(valid_char_c AS TINYINT) AS valid_char_c, CAST(inva'
        'lid_char_c AS TINYINT) AS invalid_char_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` TINYINT,`small_c` TI'
            'NYINT,`int_c` TINYINT,`bigint_c` TINYINT,`float_c` TINYINT,`double_c` TINYINT,`decimal_c` TINYINT,`vali'
            'd_char_c` TINYINT,`invalid_char_c` TINYINT}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2, -3, -4, -5, -6, -8, -10, -12, null], op=I'
            'NSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0, 0, 0, 0, 0, 0, 0, 0, null], op=INSERT, meta'
            '=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2, 3, 4, 5, 6, 8, 10, 12, null], op=INSERT, me'
            'ta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', precision=38, label='TINYINT'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_19]',
        'id, CAST(tiny_c AS SMALLINT) AS tiny_c, CAST(small_c AS SMALLINT) AS small_c, CAST(int_c AS SMALLINT) AS in'
        't_c, CAST(bigint_c AS SMALLINT) AS bigint_c, CAST(float_c AS SMALLINT) AS float_c, CAST(double_c AS SMALLIN'
        'T) AS double_c, CAST(decimal_c AS SMALLINT) AS decimal_c, CAST(valid_char_c AS SMALLINT) AS valid_char_c, C'
        'AST(invalid_char_c AS SMALLINT) AS invalid_char_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` SMALLINT,`small_c` S'
            'MALLINT,`int_c` SMALLINT,`bigint_c` SMALLINT,`float_c` SMALLINT,`double_c` SMALLINT,`decimal_c` SMALLIN'
            'T,`valid_char_c` SMALLINT,`invalid_char_c` SMALLINT}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2, -3, -4, -5, -6, -8, -10, -12, null], op=I'
            'NSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0, 0, 0, 0, 0, 0, 0, 0, null], op=INSERT, meta'
            '=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2, 3, 4, 5, 6, 8, 10, 12, null], op=INSERT, me'
            'ta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', label='SMALLINT'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_38]',
        'id, CAST(tiny_c AS SMALLINT) AS tiny_c, CAST(small_c AS SMALLINT) AS small_c, CAST(int_c AS SMALLINT) AS in'
        't_c, CAST(bigint_c AS SMALLINT) AS bigint_c, CAST(float_c AS SMALLINT) AS float_c, CAST(double_c AS SMALLIN'
        'T) AS double_c, CAST(decimal_c AS SMALLINT) AS decimal_c, CAST(valid_char_c AS SMALLINT) AS valid_char_c, C'
        'AST(invalid_char_c AS SMALLINT) AS invalid_char_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` SMALLINT,`small_c` S'
            'MALLINT,`int_c` SMALLINT,`bigint_c` SMALLINT,`float_c` SMALLINT,`double_c` SMALLINT,`decimal_c` SMALLIN'
            'T,`valid_char_c` SMALLINT,`invalid_char_c` SMALLINT}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2, -3, -4, -5, -6, -8, -10, -12, null], op=I'
            'NSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0, 0, 0, 0, 0, 0, 0, 0, null], op=INSERT, meta'
            '=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2, 3, 4, 5, 6, 8, 10, 12, null], op=INSERT, me'
            'ta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', precision=38, label='SMALLINT'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_19]',
        'id, CAST(tiny_c AS INT) AS tiny_c, CAST(small_c AS INT) AS small_c, CAST(int_c AS INT) AS int_c, CAST(bigin'
        't_c AS INT) AS bigint_c, CAST(float_c AS INT) AS float_c, CAST(double_c AS INT) AS double_c, CAST(decimal_c'
        ' AS INT) AS decimal_c, CAST(valid_char_c AS INT) AS valid_char_c, CAST(invalid_char_c AS INT) AS invalid_ch'
        'ar_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` INT,`small_c` INT,`i'
            'nt_c` INT,`bigint_c` INT,`float_c` INT,`double_c` INT,`decimal_c` INT,`valid_char_c` INT,`invalid_char_'
            'c` INT}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2, -3, -4, -5, -6, -8, -10, -12, null], op=I'
            'NSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0, 0, 0, 0, 0, 0, 0, 0, null], op=INSERT, meta'
            '=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2, 3, 4, 5, 6, 8, 10, 12, null], op=INSERT, me'
            'ta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', label='INT'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_38]',
        'id, CAST(tiny_c AS INT) AS tiny_c, CAST(small_c AS INT) AS small_c, CAST(int_c AS INT) AS int_c, CAST(bigin'
        't_c AS INT) AS bigint_c, CAST(float_c AS INT) AS float_c, CAST(double_c AS INT) AS double_c, CAST(decimal_c'
        ' AS INT) AS decimal_c, CAST(valid_char_c AS INT) AS valid_char_c, CAST(invalid_char_c AS INT) AS invalid_ch'
        'ar_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` INT,`small_c` INT,`i'
            'nt_c` INT,`bigint_c` INT,`float_c` INT,`double_c` INT,`decimal_c` INT,`valid_char_c` INT,`invalid_char_'
            'c` INT}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2, -3, -4, -5, -6, -8, -10, -12, null], op=I'
            'NSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0, 0, 0, 0, 0, 0, 0, 0, null], op=INSERT, meta'
            '=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2, 3, 4, 5, 6, 8, 10, 12, null], op=INSERT, me'
            'ta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', precision=38, label='INT'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_19]',
        'id, CAST(tiny_c AS BIGINT) AS tiny_c, CAST(small_c AS BIGINT) AS small_c, CAST(int_c AS BIGINT) AS int_c, C'
        'AST(bigint_c AS BIGINT) AS bigint_c, CAST(float_c AS BIGINT) AS float_c, CAST(double_c AS BIGINT) AS double'
        '_c, CAST(decimal_c AS BIGINT) AS decimal_c, CAST(valid_char_c AS BIGINT) AS valid_char_c, CAST(invalid_char'
        '_c AS BIGINT) AS invalid_char_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` BIGINT,`small_c` BIG'
            'INT,`int_c` BIGINT,`bigint_c` BIGINT,`float_c` BIGINT,`double_c` BIGINT,`decimal_c` BIGINT,`valid_char_'
            'c` BIGINT,`invalid_char_c` BIGINT}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2, -3, -4, -5, -6, -8, -10, -12, null], op=I'
            'NSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0, 0, 0, 0, 0, 0, 0, 0, null], op=INSERT, meta'
            '=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2, 3, 4, 5, 6, 8, 10, 12, null], op=INSERT, me'
            'ta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', label='BIGINT'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_38]',
        'id, CAST(tiny_c AS BIGINT) AS tiny_c, CAST(small_c AS BIGINT) AS small_c, CAST(int_c AS BIGINT) AS int_c, C'
        'AST(bigint_c AS BIGINT) AS bigint_c, CAST(float_c AS BIGINT) AS float_c, CAST(double_c AS BIGINT) AS double'
        '_c, CAST(decimal_c AS BIGINT) AS decimal_c, CAST(valid_char_c AS BIGINT) AS valid_char_c, CAST(invalid_char'
        '_c AS BIGINT) AS invalid_char_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` BIGINT,`small_c` BIG'
            'INT,`int_c` BIGINT,`bigint_c` BIGINT,`float_c` BIGINT,`double_c` BIGINT,`decimal_c` BIGINT,`valid_char_'
            'c` BIGINT,`invalid_char_c` BIGINT}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2, -3, -4, -5, -6, -8, -10, -12, null], op=I'
            'NSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0, 0, 0, 0, 0, 0, 0, 0, null], op=INSERT, meta'
            '=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2, 3, 4, 5, 6, 8, 10, 12, null], op=INSERT, me'
            'ta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', precision=38, label='BIGINT'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_19]',
        'id, CAST(tiny_c AS FLOAT) AS tiny_c, CAST(small_c AS FLOAT) AS small_c, CAST(int_c AS FLOAT) AS int_c, CAST'
        '(bigint_c AS FLOAT) AS bigint_c, CAST(float_c AS FLOAT) AS float_c, CAST(double_c AS FLOAT) AS double_c, CA'
        'ST(decimal_c AS FLOAT) AS decimal_c, CAST(valid_char_c AS FLOAT) AS valid_char_c, CAST(invalid_char_c AS FL'
        'OAT) AS invalid_char_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` FLOAT,`small_c` FLOA'
            'T,`int_c` FLOAT,`bigint_c` FLOAT,`float_c` FLOAT,`double_c` FLOAT,`decimal_c` FLOAT,`valid_char_c` FLOA'
            'T,`invalid_char_c` FLOAT}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2.0, -3.0, -4.0, -5.0, -6.7, -8.9, -10.11, -'
            '12.13, null], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, null],'
            ' op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2.0, 3.0, 4.0, 5.0, 6.7, 8.9, 10.11, 12.13, nu'
            'll], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', label='FLOAT'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_38]',
        'id, CAST(tiny_c AS FLOAT) AS tiny_c, CAST(small_c AS FLOAT) AS small_c, CAST(int_c AS FLOAT) AS int_c, CAST'
        '(bigint_c AS FLOAT) AS bigint_c, CAST(float_c AS FLOAT) AS float_c, CAST(double_c AS FLOAT) AS double_c, CA'
        'ST(decimal_c AS FLOAT) AS decimal_c, CAST(valid_char_c AS FLOAT) AS valid_char_c, CAST(invalid_char_c AS FL'
        'OAT) AS invalid_char_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` FLOAT,`small_c` FLOA'
            'T,`int_c` FLOAT,`bigint_c` FLOAT,`float_c` FLOAT,`double_c` FLOAT,`decimal_c` FLOAT,`valid_char_c` FLOA'
            'T,`invalid_char_c` FLOAT}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2.0, -3.0, -4.0, -5.0, -6.7, -8.9, -10.11, -'
            '12.13, null], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, null],'
            ' op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2.0, 3.0, 4.0, 5.0, 6.7, 8.9, 10.11, 12.13, nu'
            'll], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', precision=38, label='FLOAT'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_19]',
        'id, CAST(tiny_c AS DOUBLE) AS tiny_c, CAST(small_c AS DOUBLE) AS small_c, CAST(int_c AS DOUBLE) AS int_c, C'
        'AST(bigint_c AS DOUBLE) AS bigint_c, CAST(float_c AS DOUBLE) AS float_c, CAST(double_c AS DOUBLE) AS double'
        '_c, CAST(decimal_c AS DOUBLE) AS decimal_c, CAST(valid_char_c AS DOUBLE) AS valid_char_c, CAST(invalid_char'
        '_c AS DOUBLE) AS invalid_char_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` DOUBLE,`small_c` DOU'
            'BLE,`int_c` DOUBLE,`bigint_c` DOUBLE,`float_c` DOUBLE,`double_c` DOUBLE,`decimal_c` DOUBLE,`valid_char_'
            'c` DOUBLE,`invalid_char_c` DOUBLE}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2.0, -3.0, -4.0, -5.0, -6.699999809265137, -'
            '8.9, -10.11, -12.13, null], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, null],'
            ' op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2.0, 3.0, 4.0, 5.0, 6.699999809265137, 8.9, 10'
            '.11, 12.13, null], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', label='DOUBLE'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_38]',
        'id, CAST(tiny_c AS DOUBLE) AS tiny_c, CAST(small_c AS DOUBLE) AS small_c, CAST(int_c AS DOUBLE) AS int_c, C'
        'AST(bigint_c AS DOUBLE) AS bigint_c, CAST(float_c AS DOUBLE) AS float_c, CAST(double_c AS DOUBLE) AS double'
        '_c, CAST(decimal_c AS DOUBLE) AS decimal_c, CAST(valid_char_c AS DOUBLE) AS valid_char_c, CAST(invalid_char'
        '_c AS DOUBLE) AS invalid_char_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` DOUBLE,`small_c` DOU'
            'BLE,`int_c` DOUBLE,`bigint_c` DOUBLE,`float_c` DOUBLE,`double_c` DOUBLE,`decimal_c` DOUBLE,`valid_char_'
            'c` DOUBLE,`invalid_char_c` DOUBLE}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2.0, -3.0, -4.0, -5.0, -6.699999809265137, -'
            '8.9, -10.11, -12.13, null], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, null],'
            ' op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2.0, 3.0, 4.0, 5.0, 6.699999809265137, 8.9, 10'
            '.11, 12.13, null], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', precision=38, label='DOUBLE'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_19]',
        'id, CAST(tiny_c AS DECIMAL(1, 0)) AS tiny_c, CAST(small_c AS DECIMAL(1, 0)) AS small_c, CAST(int_c AS DECIM'
        'AL(1, 0)) AS int_c, CAST(bigint_c AS DECIMAL(1, 0)) AS bigint_c, CAST(float_c AS DECIMAL(1, 0)) AS float_c,'
        ' CAST(double_c AS DECIMAL(1, 0)) AS double_c, CAST(decimal_c AS DECIMAL(1, 0)) AS decimal_c, CAST(valid_cha'
        'r_c AS DECIMAL(1, 0)) AS valid_char_c, CAST(invalid_char_c AS DECIMAL(1, 0)) AS invalid_char_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` DECIMAL(1, 0),`small'
            '_c` DECIMAL(1, 0),`int_c` DECIMAL(1, 0),`bigint_c` DECIMAL(1, 0),`float_c` DECIMAL(1, 0),`double_c` DEC'
            'IMAL(1, 0),`decimal_c` DECIMAL(1, 0),`valid_char_c` DECIMAL(1, 0),`invalid_char_c` DECIMAL(1, 0)}, prim'
            'aryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2, -3, -4, -5, -7, -9, null, null, null], op'
            '=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0, 0, 0, 0, 0, 0, 0, 0, null], op=INSERT, meta'
            '=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2, 3, 4, 5, 7, 9, null, null, null], op=INSERT'
            ', meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', label='DECIMAL(1, 0)'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_38]',
        'id, CAST(tiny_c AS DECIMAL(1, 0)) AS tiny_c, CAST(small_c AS DECIMAL(1, 0)) AS small_c, CAST(int_c AS DECIM'
        'AL(1, 0)) AS int_c, CAST(bigint_c AS DECIMAL(1, 0)) AS bigint_c, CAST(float_c AS DECIMAL(1, 0)) AS float_c,'
        ' CAST(double_c AS DECIMAL(1, 0)) AS double_c, CAST(decimal_c AS DECIMAL(1, 0)) AS decimal_c, CAST(valid_cha'
        'r_c AS DECIMAL(1, 0)) AS valid_char_c, CAST(invalid_char_c AS DECIMAL(1, 0)) AS invalid_char_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` DECIMAL(1, 0),`small'
            '_c` DECIMAL(1, 0),`int_c` DECIMAL(1, 0),`bigint_c` DECIMAL(1, 0),`float_c` DECIMAL(1, 0),`double_c` DEC'
            'IMAL(1, 0),`decimal_c` DECIMAL(1, 0),`valid_char_c` DECIMAL(1, 0),`invalid_char_c` DECIMAL(1, 0)}, prim'
            'aryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2, -3, -4, -5, -7, -9, null, null, null], op'
            '=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0, 0, 0, 0, 0, 0, 0, 0, null], op=INSERT, meta'
            '=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2, 3, 4, 5, 7, 9, null, null, null], op=INSERT'
            ', meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', precision=38, label='DECIMAL(1, 0)'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_19]',
        'id, CAST(tiny_c AS DECIMAL(2, 0)) AS tiny_c, CAST(small_c AS DECIMAL(2, 0)) AS small_c, CAST(int_c AS DECIM'
        'AL(2, 0)) AS int_c, CAST(bigint_c AS DECIMAL(2, 0)) AS bigint_c, CAST(float_c AS DECIMAL(2, 0)) AS float_c,'
        ' CAST(double_c AS DECIMAL(2, 0)) AS double_c, CAST(decimal_c AS DECIMAL(2, 0)) AS decimal_c, CAST(valid_cha'
        'r_c AS DECIMAL(2, 0)) AS valid_char_c, CAST(invalid_char_c AS DECIMAL(2, 0)) AS invalid_char_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` DECIMAL(2, 0),`small'
            '_c` DECIMAL(2, 0),`int_c` DECIMAL(2, 0),`bigint_c` DECIMAL(2, 0),`float_c` DECIMAL(2, 0),`double_c` DEC'
            'IMAL(2, 0),`decimal_c` DECIMAL(2, 0),`valid_char_c` DECIMAL(2, 0),`invalid_char_c` DECIMAL(2, 0)}, prim'
            'aryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2, -3, -4, -5, -7, -9, -10, -12, null], op=I'
            'NSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0, 0, 0, 0, 0, 0, 0, 0, null], op=INSERT, meta'
            '=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2, 3, 4, 5, 7, 9, 10, 12, null], op=INSERT, me'
            'ta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', label='DECIMAL(2, 0)'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_38]',
        'id, CAST(tiny_c AS DECIMAL(2, 0)) AS tiny_c, CAST(small_c AS DECIMAL(2, 0)) AS small_c, CAST(int_c AS DECIM'
        'AL(2, 0)) AS int_c, CAST(bigint_c AS DECIMAL(2, 0)) AS bigint_c, CAST(float_c AS DECIMAL(2, 0)) AS float_c,'
        ' CAST(double_c AS DECIMAL(2, 0)) AS double_c, CAST(decimal_c AS DECIMAL(2, 0)) AS decimal_c, CAST(valid_cha'
        'r_c AS DECIMAL(2, 0)) AS valid_char_c, CAST(invalid_char_c AS DECIMAL(2, 0)) AS invalid_char_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` DECIMAL(2, 0),`small'
            '_c` DECIMAL(2, 0),`int_c` DECIMAL(2, 0),`bigint_c` DECIMAL(2, 0),`float_c` DECIMAL(2, 0),`double_c` DEC'
            'IMAL(2, 0),`decimal_c` DECIMAL(2, 0),`valid_char_c` DECIMAL(2, 0),`invalid_char_c` DECIMAL(2, 0)}, prim'
            'aryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2, -3, -4, -5, -7, -9, -10, -12, null], op=I'
            'NSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0, 0, 0, 0, 0, 0, 0, 0, null], op=INSERT, meta'
            '=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2, 3, 4, 5, 7, 9, 10, 12, null], op=INSERT, me'
            'ta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', precision=38, label='DECIMAL(2, 0)'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_19]',
        'id, CAST(tiny_c AS DECIMAL(3, 1)) AS tiny_c, CAST(small_c AS DECIMAL(3, 1)) AS small_c, CAST(int_c AS DECIM'
        'AL(3, 1)) AS int_c, CAST(bigint_c AS DECIMAL(3, 1)) AS bigint_c, CAST(float_c AS DECIMAL(3, 1)) AS float_c,'
        ' CAST(double_c AS DECIMAL(3, 1)) AS double_c, CAST(decimal_c AS DECIMAL(3, 1)) AS decimal_c, CAST(valid_cha'
        'r_c AS DECIMAL(3, 1)) AS valid_char_c, CAST(invalid_char_c AS DECIMAL(3, 1)) AS invalid_char_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` DECIMAL(3, 1),`small'
            '_c` DECIMAL(3, 1),`int_c` DECIMAL(3, 1),`bigint_c` DECIMAL(3, 1),`float_c` DECIMAL(3, 1),`double_c` DEC'
            'IMAL(3, 1),`decimal_c` DECIMAL(3, 1),`valid_char_c` DECIMAL(3, 1),`invalid_char_c` DECIMAL(3, 1)}, prim'
            'aryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2.0, -3.0, -4.0, -5.0, -6.7, -8.9, -10.1, -1'
            '2.1, null], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, null],'
            ' op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2.0, 3.0, 4.0, 5.0, 6.7, 8.9, 10.1, 12.1, null'
            '], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', label='DECIMAL(3, 1)'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_38]',
        'id, CAST(tiny_c AS DECIMAL(3, 1)) AS tiny_c, CAST(small_c AS DECIMAL(3, 1)) AS small_c, CAST(int_c AS DECIM'
        'AL(3, 1)) AS int_c, CAST(bigint_c AS DECIMAL(3, 1)) AS bigint_c, CAST(float_c AS DECIMAL(3, 1)) AS float_c,'
        ' CAST(double_c AS DECIMAL(3, 1)) AS double_c, CAST(decimal_c AS DECIMAL(3, 1)) AS decimal_c, CAST(valid_cha'
        'r_c AS DECIMAL(3, 1)) AS valid_char_c, CAST(invalid_char_c AS DECIMAL(3, 1)) AS invalid_char_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` DECIMAL(3, 1),`small'
            '_c` DECIMAL(3, 1),`int_c` DECIMAL(3, 1),`bigint_c` DECIMAL(3, 1),`float_c` DECIMAL(3, 1),`double_c` DEC'
            'IMAL(3, 1),`decimal_c` DECIMAL(3, 1),`valid_char_c` DECIMAL(3, 1),`invalid_char_c` DECIMAL(3, 1)}, prim'
            'aryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2.0, -3.0, -4.0, -5.0, -6.7, -8.9, -10.1, -1'
            '2.1, null], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, null],'
            ' op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2.0, 3.0, 4.0, 5.0, 6.7, 8.9, 10.1, 12.1, null'
            '], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', precision=38, label='DECIMAL(3, 1)'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_19]',
        'id, CAST(tiny_c AS DECIMAL(19, 10)) AS tiny_c, CAST(small_c AS DECIMAL(19, 10)) AS small_c, CAST(int_c AS D'
        'ECIMAL(19, 10)) AS int_c, CAST(bigint_c AS DECIMAL(19, 10)) AS bigint_c, CAST(float_c AS DECIMAL(19, 10)) A'
        'S float_c, CAST(double_c AS DECIMAL(19, 10)) AS double_c, CAST(decimal_c AS DECIMAL(19, 10)) AS decimal_c, '
        'CAST(valid_char_c AS DECIMAL(19, 10)) AS valid_char_c, CAST(invalid_char_c AS DECIMAL(19, 10)) AS invalid_c'
        'har_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` DECIMAL(19, 10),`sma'
            'll_c` DECIMAL(19, 10),`int_c` DECIMAL(19, 10),`bigint_c` DECIMAL(19, 10),`float_c` DECIMAL(19, 10),`dou'
            'ble_c` DECIMAL(19, 10),`decimal_c` DECIMAL(19, 10),`valid_char_c` DECIMAL(19, 10),`invalid_char_c` DECI'
            'MAL(19, 10)}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2.0000000000, -3.0000000000, -4.0000000000, '
            '-5.0000000000, -6.7000000000, -8.9000000000, -10.1100000000, -12.1300000000, null], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0.0000000000, 0.0000000000, 0.0000000000, 0.00'
            '00000000, 0.0000000000, 0.0000000000, 0.0000000000, 0.0000000000, null], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2.0000000000, 3.0000000000, 4.0000000000, 5.00'
            '00000000, 6.7000000000, 8.9000000000, 10.1100000000, 12.1300000000, null], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', label='DECIMAL(19, 10)'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_38]',
        'id, CAST(tiny_c AS DECIMAL(19, 10)) AS tiny_c, CAST(small_c AS DECIMAL(19, 10)) AS small_c, CAST(int_c AS D'
        'ECIMAL(19, 10)) AS int_c, CAST(bigint_c AS DECIMAL(19, 10)) AS bigint_c, CAST(float_c AS DECIMAL(19, 10)) A'
        'S float_c, CAST(double_c AS DECIMAL(19, 10)) AS double_c, CAST(decimal_c AS DECIMAL(19, 10)) AS decimal_c, '
        'CAST(valid_char_c AS DECIMAL(19, 10)) AS valid_char_c, CAST(invalid_char_c AS DECIMAL(19, 10)) AS invalid_c'
        'har_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` DECIMAL(19, 10),`sma'
            'll_c` DECIMAL(19, 10),`int_c` DECIMAL(19, 10),`bigint_c` DECIMAL(19, 10),`float_c` DECIMAL(19, 10),`dou'
            'ble_c` DECIMAL(19, 10),`decimal_c` DECIMAL(19, 10),`valid_char_c` DECIMAL(19, 10),`invalid_char_c` DECI'
            'MAL(19, 10)}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2.0000000000, -3.0000000000, -4.0000000000, '
            '-5.0000000000, -6.7000000000, -8.9000000000, -10.1100000000, -12.1300000000, null], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0.0000000000, 0.0000000000, 0.0000000000, 0.00'
            '00000000, 0.0000000000, 0.0000000000, 0.0000000000, 0.0000000000, null], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2.0000000000, 3.0000000000, 4.0000000000, 5.00'
            '00000000, 6.7000000000, 8.9000000000, 10.1100000000, 12.1300000000, null], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', precision=38, label='DECIMAL(19, 10)'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_38]',
        'id, CAST(tiny_c AS DECIMAL(38, 0)) AS tiny_c, CAST(small_c AS DECIMAL(38, 0)) AS small_c, CAST(int_c AS DEC'
        'IMAL(38, 0)) AS int_c, CAST(bigint_c AS DECIMAL(38, 0)) AS bigint_c, CAST(float_c AS DECIMAL(38, 0)) AS flo'
        'at_c, CAST(double_c AS DECIMAL(38, 0)) AS double_c, CAST(decimal_c AS DECIMAL(38, 0)) AS decimal_c, CAST(va'
        'lid_char_c AS DECIMAL(38, 0)) AS valid_char_c, CAST(invalid_char_c AS DECIMAL(38, 0)) AS invalid_char_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` DECIMAL(38, 0),`smal'
            'l_c` DECIMAL(38, 0),`int_c` DECIMAL(38, 0),`bigint_c` DECIMAL(38, 0),`float_c` DECIMAL(38, 0),`double_c'
            '` DECIMAL(38, 0),`decimal_c` DECIMAL(38, 0),`valid_char_c` DECIMAL(38, 0),`invalid_char_c` DECIMAL(38, '
            '0)}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2, -3, -4, -5, -7, -9, -10, -12, null], op=I'
            'NSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0, 0, 0, 0, 0, 0, 0, 0, null], op=INSERT, meta'
            '=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2, 3, 4, 5, 7, 9, 10, 12, null], op=INSERT, me'
            'ta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', precision=38, label='DECIMAL(38, 0)'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_38]',
        'id, CAST(tiny_c AS DECIMAL(38, 10)) AS tiny_c, CAST(small_c AS DECIMAL(38, 10)) AS small_c, CAST(int_c AS D'
        'ECIMAL(38, 10)) AS int_c, CAST(bigint_c AS DECIMAL(38, 10)) AS bigint_c, CAST(float_c AS DECIMAL(38, 10)) A'
        'S float_c, CAST(double_c AS DECIMAL(38, 10)) AS double_c, CAST(decimal_c AS DECIMAL(38, 10)) AS decimal_c, '
        'CAST(valid_char_c AS DECIMAL(38, 10)) AS valid_char_c, CAST(invalid_char_c AS DECIMAL(38, 10)) AS invalid_c'
        'har_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` DECIMAL(38, 10),`sma'
            'll_c` DECIMAL(38, 10),`int_c` DECIMAL(38, 10),`bigint_c` DECIMAL(38, 10),`float_c` DECIMAL(38, 10),`dou'
            'ble_c` DECIMAL(38, 10),`decimal_c` DECIMAL(38, 10),`valid_char_c` DECIMAL(38, 10),`invalid_char_c` DECI'
            'MAL(38, 10)}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2.0000000000, -3.0000000000, -4.0000000000, '
            '-5.0000000000, -6.7000000000, -8.9000000000, -10.1100000000, -12.1300000000, null], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0.0000000000, 0.0000000000, 0.0000000000, 0.00'
            '00000000, 0.0000000000, 0.0000000000, 0.0000000000, 0.0000000000, null], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2.0000000000, 3.0000000000, 4.0000000000, 5.00'
            '00000000, 6.7000000000, 8.9000000000, 10.1100000000, 12.1300000000, null], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', precision=38, label='DECIMAL(38, 10)'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_38]',
        'id, CAST(tiny_c AS DECIMAL(38, 18)) AS tiny_c, CAST(small_c AS DECIMAL(38, 18)) AS small_c, CAST(int_c AS D'
        'ECIMAL(38, 18)) AS int_c, CAST(bigint_c AS DECIMAL(38, 18)) AS bigint_c, CAST(float_c AS DECIMAL(38, 18)) A'
        'S float_c, CAST(double_c AS DECIMAL(38, 18)) AS double_c, CAST(decimal_c AS DECIMAL(38, 18)) AS decimal_c, '
        'CAST(valid_char_c AS DECIMAL(38, 18)) AS valid_char_c, CAST(invalid_char_c AS DECIMAL(38, 18)) AS invalid_c'
        'har_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` DECIMAL(38, 18),`sma'
            'll_c` DECIMAL(38, 18),`int_c` DECIMAL(38, 18),`bigint_c` DECIMAL(38, 18),`float_c` DECIMAL(38, 18),`dou'
            'ble_c` DECIMAL(38, 18),`decimal_c` DECIMAL(38, 18),`valid_char_c` DECIMAL(38, 18),`invalid_char_c` DECI'
            'MAL(38, 18)}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2.000000000000000000, -3.000000000000000000,'
            ' -4.000000000000000000, -5.000000000000000000, -6.700000000000000000, -8.900000000000000000, -10.110000'
            '000000000000, -12.130000000000000000, null], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0.000000000000000000, 0.000000000000000000, 0.'
            '000000000000000000, 0.000000000000000000, 0.000000000000000000, 0.000000000000000000, 0.000000000000000'
            '000, 0.000000000000000000, null], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2.000000000000000000, 3.000000000000000000, 4.'
            '000000000000000000, 5.000000000000000000, 6.700000000000000000, 8.900000000000000000, 10.11000000000000'
            '0000, 12.130000000000000000, null], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', precision=38, label='DECIMAL(38, 18)'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_19]',
        'id, CAST(tiny_c AS DECIMAL(38, 0)) AS tiny_c, CAST(small_c AS DECIMAL(38, 0)) AS small_c, CAST(int_c AS DEC'
        'IMAL(38, 0)) AS int_c, CAST(bigint_c AS DECIMAL(38, 0)) AS bigint_c, CAST(float_c AS DECIMAL(38, 0)) AS flo'
        'at_c, CAST(double_c AS DECIMAL(38, 0)) AS double_c, CAST(decimal_c AS DECIMAL(38, 0)) AS decimal_c, CAST(va'
        'lid_char_c AS DECIMAL(38, 0)) AS valid_char_c, CAST(invalid_char_c AS DECIMAL(38, 0)) AS invalid_char_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` DECIMAL(19, 0),`smal'
            'l_c` DECIMAL(19, 0),`int_c` DECIMAL(19, 0),`bigint_c` DECIMAL(19, 0),`float_c` DECIMAL(19, 0),`double_c'
            '` DECIMAL(19, 0),`decimal_c` DECIMAL(19, 0),`valid_char_c` DECIMAL(19, 0),`invalid_char_c` DECIMAL(19, '
            '0)}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2, -3, -4, -5, -7, -9, -10, -12, null], op=I'
            'NSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0, 0, 0, 0, 0, 0, 0, 0, null], op=INSERT, meta'
            '=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2, 3, 4, 5, 7, 9, 10, 12, null], op=INSERT, me'
            'ta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', label='DECIMAL(38, 0)'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_19]',
        'id, CAST(tiny_c AS DECIMAL(38, 10)) AS tiny_c, CAST(small_c AS DECIMAL(38, 10)) AS small_c, CAST(int_c AS D'
        'ECIMAL(38, 10)) AS int_c, CAST(bigint_c AS DECIMAL(38, 10)) AS bigint_c, CAST(float_c AS DECIMAL(38, 10)) A'
        'S float_c, CAST(double_c AS DECIMAL(38, 10)) AS double_c, CAST(decimal_c AS DECIMAL(38, 10)) AS decimal_c, '
        'CAST(valid_char_c AS DECIMAL(38, 10)) AS valid_char_c, CAST(invalid_char_c AS DECIMAL(38, 10)) AS invalid_c'
        'har_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` DECIMAL(19, 10),`sma'
            'll_c` DECIMAL(19, 10),`int_c` DECIMAL(19, 10),`bigint_c` DECIMAL(19, 10),`float_c` DECIMAL(19, 10),`dou'
            'ble_c` DECIMAL(19, 10),`decimal_c` DECIMAL(19, 10),`valid_char_c` DECIMAL(19, 10),`invalid_char_c` DECI'
            'MAL(19, 10)}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2.0000000000, -3.0000000000, -4.0000000000, '
            '-5.0000000000, -6.7000000000, -8.9000000000, -10.1100000000, -12.1300000000, null], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0.0000000000, 0.0000000000, 0.0000000000, 0.00'
            '00000000, 0.0000000000, 0.0000000000, 0.0000000000, 0.0000000000, null], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2.0000000000, 3.0000000000, 4.0000000000, 5.00'
            '00000000, 6.7000000000, 8.9000000000, 10.1100000000, 12.1300000000, null], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', label='DECIMAL(38, 10)'),
    ITCase('testNumericCastingsWithTruncation[UP_TO_19]',
        'id, CAST(tiny_c AS DECIMAL(38, 18)) AS tiny_c, CAST(small_c AS DECIMAL(38, 18)) AS small_c, CAST(int_c AS D'
        'ECIMAL(38, 18)) AS int_c, CAST(bigint_c AS DECIMAL(38, 18)) AS bigint_c, CAST(float_c AS DECIMAL(38, 18)) A'
        'S float_c, CAST(double_c AS DECIMAL(38, 18)) AS double_c, CAST(decimal_c AS DECIMAL(38, 18)) AS decimal_c, '
        'CAST(valid_char_c AS DECIMAL(38, 18)) AS valid_char_c, CAST(invalid_char_c AS DECIMAL(38, 18)) AS invalid_c'
        'har_c',
        None,
        [
            'CreateTableEvent{tableId=ns.scm.tbl, schema=columns={`id` BIGINT NOT NULL,`tiny_c` DECIMAL(19, 18),`sma'
            'll_c` DECIMAL(19, 18),`int_c` DECIMAL(19, 18),`bigint_c` DECIMAL(19, 18),`float_c` DECIMAL(19, 18),`dou'
            'ble_c` DECIMAL(19, 18),`decimal_c` DECIMAL(19, 18),`valid_char_c` DECIMAL(19, 18),`invalid_char_c` DECI'
            'MAL(19, 18)}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[-1, -2.000000000000000000, -3.000000000000000000,'
            ' -4.000000000000000000, -5.000000000000000000, -6.700000000000000000, -8.900000000000000000, null, null'
            ', null], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[0, 0.000000000000000000, 0.000000000000000000, 0.'
            '000000000000000000, 0.000000000000000000, 0.000000000000000000, 0.000000000000000000, 0.000000000000000'
            '000, 0.000000000000000000, null], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[1, 2.000000000000000000, 3.000000000000000000, 4.'
            '000000000000000000, 5.000000000000000000, 6.700000000000000000, 8.900000000000000000, null, null, null]'
            ', op=INSERT, meta=()}',
            'DataChangeEvent{tableId=ns.scm.tbl, before=[], after=[2, null, null, null, null, null, null, null, null'
            ', null], op=INSERT, meta=()}',
        ],
        sources='numeric_casting', label='DECIMAL(38, 18)'),
]

IT_CASES += [
    ITCase("testDateAndTimeCastingFunctions",
           "*,CAST(date_0 AS VARCHAR) AS date_0_str,CAST(time_0 AS VARCHAR) AS time_0_str,"
           "CAST(time_3 AS VARCHAR) AS time_3_str,CAST(time_6 AS VARCHAR) AS time_6_str",  # without time_9
           None, [
               "CreateTableEvent{tableId=default_namespace.default_schema.my_table, schema=columns={`id` INT NOT NULL,"
               "`date_0` DATE,`time_0` TIME(0),`time_3` TIME(3),`time_6` TIME(6),`time_9` TIME(9),`date_0_str` STRING,"
               "`time_0_str` STRING,`time_3_str` STRING,`time_6_str` STRING,`time_9_str` STRING}, primaryKeys=id, "
               "options=()}",
               "DataChangeEvent{tableId=default_namespace.default_schema.my_table, before=[], after=[1, 1999-12-31, "
               "21:48:25, 21:48:25.123, 21:48:25.123, 21:48:25.123, 1999-12-31, 21:48:25, 21:48:25.123, 21:48:25.123, "
               "21:48:25.123], op=INSERT, meta=()}",
               "DataChangeEvent{tableId=default_namespace.default_schema.my_table, before=[], after=[2, null, null, "
               "null, null, null, null, null, null, null, null], op=INSERT, meta=()}"],
           sources="date_time", not_applicable=("time_9", "time_9_str")),
]

IT_CASES += [
    ITCase("testTransformWithTimestamps",
           "id, DATE_FORMAT(ts, 'yyyy~MM~dd') AS df1, DATE_FORMAT(ts_ltz, 'yyyy~MM~dd') AS df2, "
           "DATE_FORMAT(ts, 'yyyy->MM->dd / HH->mm->ss') AS df3, "
           "DATE_FORMAT(ts_ltz, 'yyyy->MM->dd / HH->mm->ss') AS df4, "
           "DATE_FORMAT(TIMESTAMPADD(SECOND, 17, ts), 'yyyy->MM->dd / HH->mm->ss') AS df5, "
           "DATE_FORMAT(TIMESTAMPADD(SECOND, 17, ts_ltz), 'yyyy->MM->dd / HH->mm->ss') AS df6", None, [
               "CreateTableEvent{tableId=default_namespace.default_schema.mytable1, schema=columns={`id` INT NOT NULL,"
               "`df1` STRING,`df2` STRING,`df3` STRING,`df4` STRING,`df5` STRING,`df6` STRING}, primaryKeys=id, "
               "options=()}",
               "DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[1, 2023~11~27, "
               "2020~07~17, 2023->11->27 / 20->12->31, 2020->07->17 / 18->00->22, 2023->11->27 / 20->12->48, "
               "2020->07->17 / 18->00->39], op=INSERT, meta=()}",
               "DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[2, 2018~02~01, "
               "2019~12~31, 2018->02->01 / 04->14->01, 2019->12->31 / 21->00->22, 2018->02->01 / 04->14->18, "
               "2019->12->31 / 21->00->39], op=INSERT, meta=()}",
               "DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[3, null, null, "
               "null, null, null, null], op=INSERT, meta=()}"],
           sources=f"timestamps {zone}", tz=zone, label=zone)
    for zone in ("America/Los_Angeles", "UTC", "Asia/Shanghai")
]

IT_CASES += [
    ITCase('testTransformWithVariantFunctions',
        'id, parse_json(message) as variantVal, parse_json(duplicatedMessage, true) as duplicatedVariantVal, try_par'
        'se_json(message) as variantVal2, try_parse_json(duplicatedMessage, true) as duplicatedVariantVal2, try_pars'
        'e_json(invalidMessage) as invalidVariantVal',
        None,
        [
            'CreateTableEvent{tableId=default_namespace.default_schema.mytable1, schema=columns={`id` INT NOT NULL,`'
            'variantVal` VARIANT,`duplicatedVariantVal` VARIANT,`variantVal2` VARIANT,`duplicatedVariantVal2` VARIAN'
            'T,`invalidVariantVal` VARIANT}, primaryKeys=id, options=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[1, {"address":{"ci'
            'ty":"Beijing","street":"MainSt","zip":"100000"},"age":30,"email":"zhangsan@example.com","hobbies":["rea'
            'ding","coding","traveling"],"is_active":true,"name":"Bob"}, {"address":{"city":"Beijing","street":"Main'
            'St","zip":"100000"},"age":30,"email":"zhangsan@example.com","hobbies":["reading","coding","traveling"],'
            '"is_active":true,"name":"Bob"}, {"address":{"city":"Beijing","street":"MainSt","zip":"100000"},"age":30'
            ',"email":"zhangsan@example.com","hobbies":["reading","coding","traveling"],"is_active":true,"name":"Bob'
            '"}, {"address":{"city":"Beijing","street":"MainSt","zip":"100000"},"age":30,"email":"zhangsan@example.c'
            'om","hobbies":["reading","coding","traveling"],"is_active":true,"name":"Bob"}, null], op=INSERT, meta=('
            ')}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[2, {"address":{"ci'
            'ty":"Beijing","street":"MainSt","zip":"100000"},"age":40,"email":"lisi@example.com","hobbies":["reading'
            '","coding","traveling"],"is_active":true,"name":"Mark"}, {"address":{"city":"Beijing","street":"MainSt"'
            ',"zip":"100000"},"age":40,"email":"lisi@example.com","hobbies":["reading","coding","traveling"],"is_act'
            'ive":true,"name":"Mark"}, {"address":{"city":"Beijing","street":"MainSt","zip":"100000"},"age":40,"emai'
            'l":"lisi@example.com","hobbies":["reading","coding","traveling"],"is_active":true,"name":"Mark"}, {"add'
            'ress":{"city":"Beijing","street":"MainSt","zip":"100000"},"age":40,"email":"lisi@example.com","hobbies"'
            ':["reading","coding","traveling"],"is_active":true,"name":"Mark"}, null], op=INSERT, meta=()}',
            'DataChangeEvent{tableId=default_namespace.default_schema.mytable1, before=[], after=[3, null, null, nul'
            'l, null, null], op=INSERT, meta=()}',
        ],
        sources='variant'),
]
VARIANT_MESSAGES = [
    '{"name":"Bob","age":30,"is_active":true,"email":"zhangsan@example.com","hobbies":["reading","coding","traveling'
    '"],"address":{"street":"MainSt","city":"Beijing","zip":"100000"}}',
    '{"name":"Bob","name":"Bob","age":30,"is_active":true,"email":"zhangsan@example.com","hobbies":["reading","codin'
    'g","traveling"],"address":{"street":"MainSt","city":"Beijing","zip":"100000"}}',
    'invalidJson',
    '{"name":"Mark","age":40,"is_active":true,"email":"lisi@example.com","hobbies":["reading","coding","traveling"],'
    '"address":{"street":"MainSt","city":"Beijing","zip":"100000"}}',
    '{"name":"Mark","name":"Mark","age":40,"is_active":true,"email":"lisi@example.com","hobbies":["reading","coding"'
    ',"traveling"],"address":{"street":"MainSt","city":"Beijing","zip":"100000"}}',
    'invalidJson',
]

SOURCES["variant"] = {"mytable1": _values_table(  # testTransformWithVariantFunctions's mytable1
    "mytable1", [("id", "int", pa.int32()), ("message", "longtext", pa.string()),
                 ("duplicatedMessage", "longtext", pa.string()), ("invalidMessage", "longtext", pa.string())],
    [(1, *VARIANT_MESSAGES[0:3]), (2, *VARIANT_MESSAGES[3:6]), (3, None, None, None)])}

IT_PARAMS = it_params()
test_it_case = pytest.mark.parametrize("case, column", IT_PARAMS)(test_it_case)


# -------------------------------------------------------------------------- UnifiedTransformOperatorTest
#
# operators/transform/UnifiedTransformOperatorTest.java: a projection and filter over a stream of change events;
# Flink CDC's expected post-transform schema and events (an UPDATE whose new image fails the filter becomes a DELETE
# of the old one). Events are (op, values): +I, -U/+U (an update), -D.

UNIFIED = "operators/transform/UnifiedTransformOperatorTest.java"
PEOPLE = [("id", "int", pa.int32(), True), ("name", "longtext", pa.string(), True), ("age", "int", pa.int32(), True)]
PEOPLE_EVENTS = [("+I", (1000, "Alice", 17)), ("+I", (2000, "Bob", 18)),
                 ("-U", (2000, "Bob", 18)), ("+U", (2000, "Barcarolle", 16)),
                 ("+I", (50, "Carol", 19)), ("-D", (1000, "Alice", 17))]
REFERENCES = [("id", "longtext", pa.string(), False), ("name", "longtext", pa.string(), False),
              ("age", "int", pa.int32(), False), ("ref1", "longtext", pa.string(), True),
              ("ref2", "int", pa.int32(), True)]


SQUARES = [("col1", "int", pa.int32(), False), ("col2", "int", pa.int32(), True),
           ("square_col2", "int", pa.int32(), True)]  # PostTransformOperatorTest's COLUMN_SQUARE_SCHEMA
SQUARES_SCHEMA = [("col1", "INT NOT NULL"), ("col2", "INT"), ("square_col2", "INT")]
SQUARE_UPDATES = [("-U", (1, 1, None)), ("+U", (1, 6, None)),  # both images pass the filter
                  ("-U", (2, 1, None)), ("+U", (2, 4, None)),  # the old one only: a DELETE
                  ("-U", (3, 4, None)), ("+U", (3, 6, None)),  # the new one only: an INSERT
                  ("-U", (4, 4, None)), ("+U", (4, 5, None))]  # neither


@dataclass(frozen=True)
class EventCase:
    method: str
    projection: str
    filter: str | None
    columns: list[tuple[str, str, pa.DataType, bool]]  # name, MySQL type, Arrow type, nullable; the first is the key
    events: list[tuple[str, tuple]]
    schema: list[tuple[str, str]]  # Flink CDC's post-transform columns
    expected: list[tuple[str, tuple]]
    source: str = UNIFIED
    keyless: bool = False  # no primary key (else the first column)
    table: str = "t"  # the source table's name (database my_branch)


EVENT_CASES = [
    EventCase("testDataChangeEventTransform", "id, age, id + age as computed", "id > 100", PEOPLE, PEOPLE_EVENTS,
              [("id", "INT NOT NULL"), ("age", "INT"), ("computed", "INT")],
              [("+I", (1000, 17, 1017)), ("+I", (2000, 18, 2018)), ("-U", (2000, 18, 2018)), ("+U", (2000, 16, 2016)),
               ("-D", (1000, 17, 1017))]),
    EventCase("testSchemaNullabilityTransform", "id, name, age, id + age as computed", "id > 100",
              [PEOPLE[0], ("name", "longtext", pa.string(), False), ("age", "int", pa.int32(), False)],
              PEOPLE_EVENTS,
              [("id", "INT NOT NULL"), ("name", "STRING NOT NULL"), ("age", "INT NOT NULL"), ("computed", "INT")],
              [("+I", (1000, "Alice", 17, 1017)), ("+I", (2000, "Bob", 18, 2018)), ("-U", (2000, "Bob", 18, 2018)),
               ("+U", (2000, "Barcarolle", 16, 2016)), ("-D", (1000, "Alice", 17, 1017))]),
    EventCase("testReduceColumnsTransform", "id, upper(id) as uid, age + 1 as newage, lower(ref1) as lowerref",
              "newage > 17 and ref2 > 17", REFERENCES,
              [("+I", ("id001", "Alice", 17, "Reference001", 2021)), ("+I", ("id002", "Bob", 15, "Reference002", 2017)),
               ("+I", ("id003", "Bill", 18, "Reference003", 0)), ("+I", ("id004", "Carol", 18, "Reference004", 2018)),
               ("-U", ("id004", "Carol", 18, "Reference004", 2018)),
               ("+U", ("id004", "Colin", 18, "NeoReference004", 2018)),
               ("-U", ("id004", "Colin", 18, "NeoReference004", 2018)),
               ("+U", ("id004", "Colin", 10, "NeoReference004", 2018)),
               ("-D", ("id001", "Alice", 17, "Reference001", 2021))],
              [("id", "STRING NOT NULL"), ("uid", "STRING"), ("newage", "INT"), ("lowerref", "STRING")],
              [("+I", ("id001", "ID001", 18, "reference001")), ("+I", ("id004", "ID004", 19, "reference004")),
               ("-U", ("id004", "ID004", 19, "reference004")), ("+U", ("id004", "ID004", 19, "neoreference004")),
               ("-D", ("id004", "ID004", 19, "neoreference004")), ("-D", ("id001", "ID001", 18, "reference001"))]),
    EventCase("testWildcardTransform", "*, id + age as computed", "id > 100", PEOPLE, PEOPLE_EVENTS,
              [("id", "INT NOT NULL"), ("name", "STRING"), ("age", "INT"), ("computed", "INT")],
              [("+I", (1000, "Alice", 17, 1017)), ("+I", (2000, "Bob", 18, 2018)), ("-U", (2000, "Bob", 18, 2018)),
               ("+U", (2000, "Barcarolle", 16, 2016)), ("-D", (1000, "Alice", 17, 1017))]),
    EventCase("testWildcardTransform", "id + age as computed, *", "id > 100", PEOPLE, PEOPLE_EVENTS,
              [("computed", "INT"), ("id", "INT NOT NULL"), ("name", "STRING"), ("age", "INT")],
              [("+I", (1017, 1000, "Alice", 17)), ("+I", (2018, 2000, "Bob", 18)), ("-U", (2018, 2000, "Bob", 18)),
               ("+U", (2016, 2000, "Barcarolle", 16)), ("-D", (1017, 1000, "Alice", 17))]),
    EventCase("testTransformWithCast",
              "id, age + 1 as newage, CAST(CAST(id AS INT) + age AS BIGINT) as longevity, CAST(age AS VARCHAR) as "
              "string_age", "newage > 17 and ref2 > 17", REFERENCES,
              [("+I", ("1001", "Alice", 17, "Reference001", 2021)), ("+I", ("1002", "Bob", 15, "Reference002", 2017)),
               ("+I", ("1003", "Bill", 18, "Reference003", 0)), ("+I", ("1004", "Carol", 18, "Reference004", 2018)),
               ("-U", ("1004", "Carol", 18, "Reference004", 2018)),
               ("+U", ("1004", "Colin", 19, "NeoReference004", 2018)),
               ("-U", ("1004", "Colin", 19, "NeoReference004", 2018)),
               ("+U", ("1004", "Colin", 10, "NeoReference004", 2018)),
               ("-D", ("1001", "Alice", 17, "Reference001", 2021))],
              [("id", "STRING NOT NULL"), ("newage", "INT"), ("longevity", "BIGINT"), ("string_age", "STRING")],
              [("+I", ("1001", 18, 1018, "17")), ("+I", ("1004", 19, 1022, "18")), ("-U", ("1004", 19, 1022, "18")),
               ("+U", ("1004", 20, 1023, "19")), ("-D", ("1004", 20, 1023, "19")), ("-D", ("1001", 18, 1018, "17"))]),
    # PostTransformOperatorTest: unquoted foo-bar is foo - bar; f0..f2 replace the source's columns in place
    EventCase("testColumnNameMapping", "*, class, foo-bar AS f0, bar-foo AS f1, `foo-bar`-`bar-foo` AS f2",
              "`foo-bar`-`bar-foo` <> 0",
              [(n, "int", pa.int32(), True) for n in ("foo", "bar", "foo-bar", "bar-foo")]
              + [("class", "longtext", pa.string(), True)] + [(n, "int", pa.int32(), True) for n in ("f0", "f1", "f2")],
              [("+I", (1, 2, 3, 4, "class0", None, None, None)), ("-U", (1, 2, 3, 4, "class0", None, None, None)),
               ("+U", (2, 4, 6, 8, "class1", None, None, None))],
              [(n, "INT") for n in ("foo", "bar", "foo-bar", "bar-foo")] + [("class", "STRING")]
              + [(n, "INT") for n in ("f0", "f1", "f2")],
              [("+I", (1, 2, 3, 4, "class0", -1, 1, -1)), ("-U", (1, 2, 3, 4, "class0", -1, 1, -1)),
               ("+U", (2, 4, 6, 8, "class1", -2, 2, -2))], source=POST, keyless=True),
    EventCase("testDataChangeEventTransform", "*, concat(col1,col2) col12", "col1 = '1'",
              [("col1", "longtext", pa.string(), False), ("col2", "longtext", pa.string(), True),
               ("col12", "longtext", pa.string(), True)],
              [("+I", ("1", "2", None)), ("+I", ("2", "2", None)), ("-U", ("1", "2", None)), ("+U", ("1", "3", None))],
              [("col1", "STRING NOT NULL"), ("col2", "STRING"), ("col12", "STRING")],
              [("+I", ("1", "2", "12")), ("-U", ("1", "2", "12")), ("+U", ("1", "3", "13"))], source=POST),
    EventCase("testDataChangeEventTransformWithDuplicateColumns", "col1, col2, col2 * col2 as square_col2",
              "col2 < 3 OR col2 > 5", SQUARES, [("+I", (1, 1, None)), ("+I", (6, 6, None)), ("+I", (4, 4, None))],
              SQUARES_SCHEMA, [("+I", (1, 1, 1)), ("+I", (6, 6, 36))], source=POST),
    EventCase("testUpdateEventFilterOpTypeConversion", "col1, col2, col2 * col2 as square_col2",
              "col2 < 3 OR col2 > 5", SQUARES, SQUARE_UPDATES, SQUARES_SCHEMA,
              [("-U", (1, 1, 1)), ("+U", (1, 6, 36)), ("-D", (2, 1, 1)), ("+I", (3, 6, 36))], source=POST),
    EventCase("testUpdateEventFilterOpTypeConversionWithDataEventType",
              "col1, col2, col2 * col2 as square_col2, __data_event_type__ as event_type",
              "col2 < 3 OR col2 > 5", SQUARES, SQUARE_UPDATES, SQUARES_SCHEMA + [("event_type", "STRING NOT NULL")],
              [("-U", (1, 1, 1, "-U")), ("+U", (1, 6, 36, "+U")), ("-D", (2, 1, 1, "-U")), ("+I", (3, 6, 36, "+U"))],
              source=POST),
    EventCase("testReduceSchemaTransform",
              "id, upper(id) as uid, age + 1 as newage, lower(ref1) as ref1, 17 as seventeen",
              "newage > 17 and ref2 > 17",
              [("id", "longtext", pa.string(), False), ("age", "int", pa.int32(), True),
               ("ref1", "longtext", pa.string(), True), ("ref2", "int", pa.int32(), True)],
              [("+I", ("id001", 17, "Reference", 42)), ("-U", ("id001", 17, "Reference", 42)),
               ("+U", ("id001", 18, "UpdatedReference", 41))],
              [("id", "STRING NOT NULL"), ("uid", "STRING"), ("newage", "INT"), ("ref1", "STRING"),
               ("seventeen", "INT")],
              [("+I", ("id001", "ID001", 18, "reference", 17)), ("-U", ("id001", "ID001", 18, "reference", 17)),
               ("+U", ("id001", "ID001", 19, "updatedreference", 17))], source=POST),
    EventCase("testWildcardSchemaTransform", "*, age + 1 as newage", "newage > 17",
              [("id", "longtext", pa.string(), False), ("age", "int", pa.int32(), True),
               ("name", "longtext", pa.string(), True)],
              [("+I", ("id001", 17, "Alice")), ("-U", ("id001", 17, "Alice")), ("+U", ("id001", 18, "Arisu"))],
              [("id", "STRING NOT NULL"), ("age", "INT"), ("name", "STRING"), ("newage", "INT")],
              [("+I", ("id001", 17, "Alice", 18)), ("-U", ("id001", 17, "Alice", 18)),
               ("+U", ("id001", 18, "Arisu", 19))],
              source=POST),
    # (testMetadataTransform and testSoftDeleteTransform print the namespace my_company, which MySQL has not)
    EventCase("testMetadataASTransform",
              "sid, name, UPPER(name) as name_upper, __table_name__ as tbname, concat(__table_name__,'_',sid) as "
              "tbname_sid, concat(sid,'_',__table_name__) as sid_tbname,concat(__table_name__,'_',name) as "
              "tbname_name, concat(name,'_',__table_name__) as name_tbname", "sid < 3",
              [("sid", "int", pa.int32(), False), ("name", "longtext", pa.string(), True)]
              + [(n, "longtext", pa.string(), True) for n in ("name_upper", "tbname", "tbname_sid", "sid_tbname",
                                                               "tbname_name", "name_tbname")],
              [("+I", (1, "abc", None, None, None, None, None, None))],
              [("sid", "INT NOT NULL"), ("name", "STRING"), ("name_upper", "STRING"), ("tbname", "STRING NOT NULL"),
               ("tbname_sid", "STRING"), ("sid_tbname", "STRING"), ("tbname_name", "STRING"),
               ("name_tbname", "STRING")],
              [("+I", (1, "abc", "ABC", "metadata_as_table", "metadata_as_table_1", "1_metadata_as_table",
                       "metadata_as_table_abc", "abc_metadata_as_table"))], source=POST, table="metadata_as_table"),
]


@pytest.mark.parametrize("case", EVENT_CASES, ids=[f"{c.method}: {c.projection}" for c in EVENT_CASES])
def test_event_case(case: EventCase):
    from lakecdc.model import OP_COLUMN, OP_TS_COLUMN

    src = SourceTable(TableId("my_branch", case.table), tuple(SourceColumn(n, mysql, arrow, nullable)
                                                      for n, mysql, arrow, nullable in case.columns),
                      primary_keys=() if case.keyless else (case.columns[0][0],))
    rule = TransformRuleConfig(index=0, source_table=f"my_branch.{case.table}", projection=case.projection,
                               filter=case.filter)
    compiled = compile_transform(rule, src, TransformContext())
    arrays = [pa.array([values[k] for _, values in case.events], arrow)
              for k, (_, _, arrow, _) in enumerate(case.columns)]
    arrays += [pa.array([op for op, _ in case.events]), pa.array([0] * len(case.events), pa.int64())]
    out = compiled.apply(ChangeBatch(src, pa.Table.from_arrays(arrays, schema=src.change_schema())))
    declared = [(f.name, type_name(f) + ("" if f.nullable else " NOT NULL")) for f in compiled.output_schema]
    assert declared == case.schema, f"{case.source}#{case.method}: schema {declared}"
    names = [f.name for f in compiled.output_schema]
    rows = [(op, tuple(out.column(n)[r].as_py() for n in names))
            for r, op in enumerate(out.column(OP_COLUMN).to_pylist())]
    assert OP_TS_COLUMN not in names
    assert rows == case.expected, f"{case.source}#{case.method}: events {rows}"
