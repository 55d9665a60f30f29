"""Every MySQL/MariaDB column type, end to end: rows snapshotted, the same rows inserted and updated through the
binlog, all landed in Paimon by the pipeline; the Paimon values (read with pypaimon and with pypaimon-rust's
standalone reader) of snapshot rows and binlog rows are equal, and equal to what MySQL returns, column by column.

The server runs in time zone +05:00 (``server-time-zone: +05:00``) and the writer session in +08:00, so TIMESTAMP
values are checked as instants whatever the zones are.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from lakecdc.config import parse_pipeline
from lakecdc.model import TableId
from lakecdc.runtime import run_micro_batch
from lakecdc.sink import PaimonSink
from lakecdc.sink.sql import run_sql

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)

# (column, DDL type, [SQL literal of row 1, 2, 3, 4]); row 3 holds NULLs where the column allows them
COLUMNS = [
    ("b1", "TINYINT(1)", ["5", "0", "NULL", "1"]),
    ("ti", "TINYINT", ["-128", "0", "NULL", "127"]),
    ("tiu", "TINYINT UNSIGNED", ["255", "0", "NULL", "1"]),
    ("si", "SMALLINT", ["-32768", "0", "NULL", "32767"]),
    ("siu", "SMALLINT UNSIGNED", ["65535", "0", "NULL", "1"]),
    ("mi", "MEDIUMINT", ["-8388608", "0", "NULL", "8388607"]),
    ("miu", "MEDIUMINT UNSIGNED", ["16777215", "0", "NULL", "1"]),
    ("i", "INT", ["-2147483648", "0", "NULL", "2147483647"]),
    ("iu", "INT UNSIGNED", ["4294967295", "0", "NULL", "1"]),
    ("bi", "BIGINT", ["-9223372036854775808", "0", "NULL", "9223372036854775807"]),
    ("biu", "BIGINT UNSIGNED", ["18446744073709551615", "0", "NULL", "1"]),
    ("dec10", "DECIMAL(10,2)", ["-12345678.90", "0", "NULL", "0.01"]),
    ("dec38", "DECIMAL(38,10)", ["1234567890123456789012345678.0123456789", "0", "NULL", "-0.0000000001"]),
    ("dec65", "DECIMAL(65,30)",
     ["-12345678901234567890123456789012345.123456789012345678901234567890", "0", "NULL",
      "0.000000000000000000000000000001"]),
    ("f", "FLOAT", ["3.14159", "0", "NULL", "-1.5e10"]),
    ("f72", "FLOAT(7,2)", ["3.14159", "0", "NULL", "-12345.67"]),
    ("dbl", "DOUBLE", ["-1.7976931348623157e308", "0", "NULL", "2.2250738585072014e-308"]),
    ("bit1", "BIT(1)", ["b'1'", "b'0'", "NULL", "b'1'"]),
    ("bit10", "BIT(10)", ["b'1010101010'", "b'0'", "NULL", "b'1111111111'"]),
    ("yr", "YEAR", ["2155", "0", "NULL", "1901"]),
    ("dte", "DATE", ["'0000-00-00'", "'2026-01-02'", "NULL", "'1000-01-01'"]),
    ("dte_nn", "DATE NOT NULL", ["'0000-00-00'", "'1970-01-01'", "'2026-02-28'", "'9999-12-31'"]),
    ("tm0", "TIME", ["'-596:00:00'", "'00:00:00'", "NULL", "'596:31:23'"]),
    ("tm3", "TIME(3)", ["'-00:00:01.5'", "'23:59:59.999'", "NULL", "'-12:00:00.001'"]),
    ("tm6", "TIME(6)", ["'12:34:56.789012'", "'-00:00:00.000001'", "NULL", "'100:00:00.5'"]),
    ("dt0", "DATETIME", ["'1000-01-01 00:00:00'", "'2026-01-01 00:00:00'", "NULL", "'9999-12-31 23:59:59'"]),
    ("dt3", "DATETIME(3)", ["'9999-12-31 23:59:59.999'", "'2026-01-01 12:00:00.123'", "NULL", "'1970-01-01 00:00:00'"]),
    ("dt6", "DATETIME(6)", ["'2026-03-04 05:06:07.000001'", "'2026-01-01 00:00:00'", "NULL",
                            "'1969-12-31 23:59:59.999999'"]),
    ("dtz", "DATETIME", ["'0000-00-00 00:00:00'", "'2026-01-01 00:00:01'", "NULL", "'2000-02-29 12:00:00'"]),
    ("ts0", "TIMESTAMP NULL", ["'2038-01-19 11:14:07'", "'1970-01-01 08:00:01'", "NULL", "'2026-06-01 08:00:00'"]),
    ("ts3", "TIMESTAMP(3) NULL", ["'2026-01-01 00:00:00.123'", "'2000-01-01 00:00:00'", "NULL",
                                  "'2026-03-29 02:30:00.5'"]),
    ("ts6", "TIMESTAMP(6) NULL", ["'2026-06-30 23:59:59.999999'", "'2026-01-01 00:00:00.000001'", "NULL",
                                  "'2001-09-09 09:46:40'"]),
    ("ch", "CHAR(5)", ["'ab  '", "''", "NULL", "'😀'"]),
    ("vc", "VARCHAR(20)", ["'quote''d'", "''", "NULL", "'tab\\tnewline\\n'"]),
    ("tx", "TEXT", ["REPEAT('é', 300)", "''", "NULL", "'x'"]),
    ("emoji", "VARCHAR(10)", ["'a😀b🇩🇪'", "''", "NULL", "'𝄞'"]),
    ("l1", "VARCHAR(10) CHARACTER SET latin1", ["'café €'", "''", "NULL", "'ÿ'"]),
    ("gbk", "VARCHAR(10) CHARACTER SET gbk", ["'中文'", "''", "NULL", "'汉'"]),
    ("u16", "VARCHAR(10) CHARACTER SET utf16", ["'😀é'", "''", "NULL", "'z'"]),
    ("bn", "BINARY(4)", ["X'0102'", "''", "NULL", "X'FFFFFFFF'"]),
    ("vb", "VARBINARY(10)", ["X'00FF00'", "X''", "NULL", "X'7F'"]),
    ("bl", "BLOB", ["X'00'", "X''", "NULL", "REPEAT(X'AB', 1000)"]),
    ("en", "ENUM('a','b','c')", ["'c'", "''", "NULL", "'a'"]),
    ("st", "SET('x','y','z')", ["'z,x'", "''", "NULL", "'x,y,z'"]),
    ("js", "JSON", ["'{\"k\": [1, 2.5, null], \"s\": \"é\"}'", "'[]'", "NULL", "'\"text\"'"]),
    ("geo", "GEOMETRY",
     ["ST_GeomFromText('POLYGON((0 0,10 0,10 10,0 10,0 0),(1 1,2 1,2 2,1 1))', 4326)",
      "ST_GeomFromText('MULTIPOINT(1 1,2 2)')", "NULL",
      "ST_GeomFromText('GEOMETRYCOLLECTION(POINT(1 2),LINESTRING(0 0,1.5 1),"
      "MULTIPOLYGON(((0 0,1 0,1 1,0 0))))')"]),
    ("pt", "POINT", ["POINT(1.5, -2)", "POINT(0, 0)", "NULL", "ST_GeomFromText('POINT(-0.25 1e-5)', 3857)"]),
]
ROWS = 4
# the base row that the binlog UPDATEs start from (NOT NULL columns need a value)
BASE = {"dte_nn": "'2000-01-01'"}

# How MySQL shows a value, where the driver's Python value is not directly comparable with the Paimon value.
MYSQL_EXPRESSION = {
    "f": "CAST(f AS DOUBLE)",  # the exact float32 (the text protocol rounds it)
    "bit1": "bit1 + 0", "bit10": "bit10 + 0",
    "tm0": "TIME_TO_SEC(tm0)", "tm3": "TIME_TO_SEC(tm3)", "tm6": "TIME_TO_SEC(tm6)",
    "ts0": "UNIX_TIMESTAMP(ts0)", "ts3": "UNIX_TIMESTAMP(ts3)", "ts6": "UNIX_TIMESTAMP(ts6)",
    "geo": "JSON_OBJECT('geojson', ST_AsGeoJSON(geo), 'srid', ST_SRID(geo))",
    "pt": "JSON_OBJECT('geojson', ST_AsGeoJSON(pt), 'srid', ST_SRID(pt))",
}

# Paimon types of the mapping table (Flink CDC's MySqlTypeUtils; see docs/pipeline-yaml.md for the deviations)
PAIMON_TYPES = {
    "b1": "BOOLEAN", "ti": "TINYINT", "tiu": "SMALLINT", "si": "SMALLINT", "siu": "INT", "mi": "INT", "miu": "INT",
    "i": "INT", "iu": "BIGINT", "bi": "BIGINT", "biu": "DECIMAL(20, 0)", "dec10": "DECIMAL(10, 2)",
    "dec38": "DECIMAL(38, 10)", "dec65": "STRING", "f": "FLOAT", "f72": "DOUBLE", "dbl": "DOUBLE",
    "bit1": "BOOLEAN", "bit10": "BINARY(2)", "yr": "INT", "dte": "DATE", "dte_nn": "DATE NOT NULL",
    "tm0": "TIME(0)", "tm3": "TIME(3)", "tm6": "TIME(6)", "dt0": "TIMESTAMP(0)", "dt3": "TIMESTAMP(3)",
    "dt6": "TIMESTAMP(6)", "dtz": "TIMESTAMP(0)", "ts0": "TIMESTAMP_LTZ(0)",
    "ts3": "TIMESTAMP_LTZ(3)", "ts6": "TIMESTAMP_LTZ(6)", "ch": "CHAR(5)",
    "vc": "VARCHAR(20)", "tx": "STRING", "emoji": "VARCHAR(10)", "l1": "VARCHAR(10)", "gbk": "VARCHAR(10)",
    "u16": "VARCHAR(10)", "bn": "BINARY(4)", "vb": "VARBINARY(10)", "bl": "BYTES", "en": "STRING",
    "st": "ARRAY<STRING>", "js": "STRING",
    "geo": "STRING", "pt": "STRING",
}

PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: root
  password: ""
  tables: {db}.alltypes
  server-id: 5801
  server-time-zone: "+05:00"
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {warehouse}
pipeline:
  name: types {db}
"""


@pytest.fixture
def server_in_plus_five(source_server):
    mariadb = source_server
    old = mariadb.execute("SELECT @@GLOBAL.time_zone")[0][0]
    mariadb.execute("SET GLOBAL time_zone = '+05:00'")
    try:
        yield
    finally:
        mariadb.execute(f"SET GLOBAL time_zone = '{old}'")


def writer(mariadb, db):
    conn = mariadb.connect(db)
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+08:00'")  # the writer's zone must not matter
        cur.execute("SET sql_mode = ''")  # zero dates, '' in an ENUM
    return conn


def insert(cur, row_id: int, k: int) -> None:
    names = ", ".join(c for c, _, _ in COLUMNS)
    values = ", ".join(v[k] for _, _, v in COLUMNS)
    cur.execute(f"INSERT INTO alltypes (id, {names}) VALUES ({row_id}, {values})")


def paimon_type_names(warehouse: Path, db: str) -> dict[str, str]:
    schema_dir = warehouse / f"{db}.db" / "alltypes" / "schema"
    latest = max(schema_dir.iterdir(), key=lambda p: int(p.name.split("-")[1]))
    names = {}
    for f in json.loads(latest.read_text())["fields"]:
        t = f["type"]
        names[f["name"]] = t if isinstance(t, str) else f"{t['type']}<{t['element']}>"
    return names


def python_rows(table: pa.Table) -> dict[int, dict]:
    """Rows by id; TIME columns as signed milliseconds (pyarrow would wrap a negative TIME into a time of day)."""
    arrays = {}
    for name in table.column_names:
        column = table.column(name).combine_chunks()
        if pa.types.is_time32(column.type):
            column = column.view(pa.int32())
        arrays[name] = column.to_pylist()
    return {row_id: {n: arrays[n][i] for n in arrays} for i, row_id in enumerate(arrays["id"])}


def mysql_value(column: str, value, ddl: str):
    """What MySQL returned, in the form lakecdc maps it to (the documented mapping of each type)."""
    if value is None:
        return None
    if column == "b1":
        return value != 0
    if column == "bit1":
        return value == 1
    if column == "bit10":
        return int(value).to_bytes(2, "big")
    if column == "dec65":
        return format(value, "f")
    if column in ("tm0", "tm3", "tm6"):  # Paimon TIME: milliseconds, finer digits truncated toward zero
        return int(Decimal(value) * 1000)
    if column.startswith("ts"):
        return EPOCH + dt.timedelta(microseconds=int(Decimal(value) * 1_000_000))
    if column in ("dte", "dte_nn", "dtz") and isinstance(value, str) and value.startswith("0000"):
        return dt.date(1970, 1, 1) if "NOT NULL" in ddl else None  # zero dates: NULL, or the epoch if NOT NULL
    if column == "st":
        return value.split(",") if value else []
    if column in ("geo", "pt"):
        shown = json.loads(value)
        return None if shown["geojson"] is None else {**json.loads(shown["geojson"]), "srid": shown["srid"]}
    return value


def paimon_value(column: str, value):
    if column in ("geo", "pt") and value is not None:
        shape = json.loads(value)
        return shape
    if column.startswith("ts") and value is not None:
        return value.astimezone(dt.timezone.utc)
    return value


@pytest.mark.parametrize("row_metadata,decoder", [
    ("FULL", "columnar"), ("MINIMAL", "columnar"), ("NO_LOG", "columnar"), ("NO_LOG", "library"),
])
def test_every_type_is_identical_from_snapshot_and_binlog(source_server, source_db, tmp_path, server_in_plus_five,
                                                          row_metadata, decoder, monkeypatch):
    """Under every binlog_row_metadata (names, signedness, charsets, ENUM/SET labels from the schema history), with
    the columnar decoder and with python-mysql-replication's own row decoding."""
    mariadb, db = source_server, source_db
    if decoder == "library":
        from lakecdc.source import rows_decoder

        monkeypatch.setattr(rows_decoder, "_ext", None)
    ddl = ", ".join(f"`{c}` {t}" for c, t, _ in COLUMNS)
    mariadb.execute(f"CREATE TABLE alltypes (id INT PRIMARY KEY, {ddl})", database=db)
    conn = writer(mariadb, db)
    with conn.cursor() as cur:
        for k in range(ROWS):
            insert(cur, 1 + k, k)  # rows 1..4: read by the snapshot
    text = PIPELINE.format(port=mariadb.port, db=db, warehouse=tmp_path / "warehouse")
    config = parse_pipeline(text)
    target = TableId(db, "alltypes")
    first = run_micro_batch(config).tables[target]
    assert first.phase == "snapshot" and first.counts.inserted == ROWS

    with conn.cursor() as cur:
        for k in range(ROWS):
            insert(cur, 101 + k, k)  # rows 101..104: binlog inserts
            base = ", ".join(BASE.get(c, "NULL") for c, _, _ in COLUMNS)
            cur.execute(f"INSERT INTO alltypes (id, {', '.join(c for c, _, _ in COLUMNS)}) VALUES ({201 + k}, {base})")
        for k in range(ROWS):  # rows 201..204: binlog updates to the same values
            assignments = ", ".join(f"`{c}` = {v[k]}" for c, _, v in COLUMNS)
            cur.execute(f"UPDATE alltypes SET {assignments} WHERE id = {201 + k}")
    second = run_micro_batch(config).tables[target]
    assert second.phase == "binlog" and second.counts.inserted == 2 * ROWS and second.counts.updated == ROWS

    assert paimon_type_names(tmp_path / "warehouse", db) == {"id": "INT NOT NULL", **PAIMON_TYPES}

    sink = PaimonSink(config.sink.catalog_options)
    by_pypaimon = python_rows(sink.read_table(target))
    by_rust = python_rows(run_sql(config.sink.catalog_options, f"SELECT * FROM {db}.alltypes"))
    assert by_rust == by_pypaimon
    expressions = ", ".join(MYSQL_EXPRESSION.get(c, f"`{c}`") for c, _, _ in COLUMNS)
    mysql = {r[0]: r[1:] for r in mariadb.execute(f"SELECT id, {expressions} FROM alltypes", database=db)}
    assert sorted(by_rust) == sorted(mysql) == [1, 2, 3, 4, 101, 102, 103, 104, 201, 202, 203, 204]
    for k in range(ROWS):
        snapshot_row, inserted_row, updated_row = (by_rust[base + k] for base in (1, 101, 201))
        for position, (column, ddl_type, _) in enumerate(COLUMNS):
            got = [paimon_value(column, row[column]) for row in (snapshot_row, inserted_row, updated_row)]
            assert got[0] == got[1] == got[2], (column, k + 1, got)
            want = mysql_value(column, mysql[1 + k][position], ddl_type)
            assert got[0] == want, (column, k + 1, got[0], want)
            for binlog_id in (101 + k, 201 + k):  # MySQL agrees that the rows are the same
                assert mysql[binlog_id][position] == mysql[1 + k][position], (column, binlog_id)


@pytest.mark.parametrize("row_metadata", ["FULL", "NO_LOG"])
def test_latin1_bytes_cp1252_leaves_undefined_are_read_alike(source_server, source_db, tmp_path, row_metadata):
    """MySQL's latin1 maps 0x81, 0x8D, 0x8F, 0x90 and 0x9D to C1 controls (Python's cp1252 has no mapping for
    them): the binlog must decode them as the snapshot does (NO_LOG: the character set from the schema history)."""
    mariadb, db = source_server, source_db
    mariadb.execute("CREATE TABLE alltypes (id INT PRIMARY KEY, l1 VARCHAR(10) CHARACTER SET latin1)", database=db)
    value = "CONVERT(X'418190' USING latin1)"
    mariadb.execute(f"INSERT INTO alltypes VALUES (1, {value})", database=db)
    config = parse_pipeline(PIPELINE.format(port=mariadb.port, db=db, warehouse=tmp_path / "warehouse"))
    run_micro_batch(config)
    mariadb.execute(f"INSERT INTO alltypes VALUES (2, {value})", database=db)
    run_micro_batch(config)
    rows = run_sql(config.sink.catalog_options, f"SELECT id, l1 FROM {db}.alltypes ORDER BY id").to_pylist()
    assert rows == [{"id": 1, "l1": "A\x81\x90"}, {"id": 2, "l1": "A\x81\x90"}]


def test_malformed_geometry_is_a_source_error_naming_the_column():
    import struct

    from lakecdc.errors import SourceError
    from lakecdc.source.types import geometry_json

    point = struct.pack("<IBIdd", 4326, 1, 1, 1.5, -2.0)
    assert geometry_json(point, column="pt") == '{"coordinates":[1.5,-2],"type":"Point","srid":4326}'
    for bad in (point[:-3], struct.pack("<IBI", 0, 1, 2) + struct.pack("<I", 5), struct.pack("<IBI", 0, 1, 99)):
        with pytest.raises(SourceError, match=r"column 'pt': malformed geometry value"):
            geometry_json(bad, column="pt")
