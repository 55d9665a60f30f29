"""The columnar binlog rows decoder (lakecdc/source/rows_decoder.py + _rowsdecoder.c) against the library path.

Rows of every supported column type are written to the private MariaDB (inserts, updates, a primary key change,
deletes, NULLs, zero dates, extreme values, several character sets), the binlog is read with python-mysql-replication
and each rows event is decoded twice: columnar, and through ``ev.rows`` + the codecs of lakecdc/source/types.py
(what binlog._build_batch does). The change batches must be equal, column by column.
"""

from __future__ import annotations

import itertools
import logging
from decimal import Decimal

import pyarrow as pa
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from lakecdc.errors import SourceError
from lakecdc.model import OP_COLUMN, SourceTable, TableId
from lakecdc.source import rows_decoder
from lakecdc.source.connection import connect
from lakecdc.source.options import MySqlSourceOptions
from lakecdc.source.rows_decoder import build_change_batch, columnar_available, decode_rows_event
from lakecdc.source.schema import describe_table
from tests.test_source_types import COLUMNS

_ROWS_EVENTS = [WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent]
_server_ids = itertools.count(6100)

ENUM300 = [f"e{i:03d}" for i in range(300)]
SET64 = [f"s{i}" for i in range(64)]


def _enum(values: list[str]) -> str:
    return ", ".join(f"'{v}'" for v in values)


# More types and shapes than test_source_types.COLUMNS: odd fractional precisions, zero values in NOT NULL columns,
# length prefixes of 2-4 bytes, 2- and 8-byte ENUM/SET, other character sets. Row 3 (index 2) is NULL where allowed.
EXTRA_COLUMNS = [
    ("dt2", "DATETIME(2)", ["'2026-01-02 03:04:05.67'", "'1000-01-01 00:00:00.01'", "NULL", "'0000-00-00 00:00:00'"]),
    ("dt5", "DATETIME(5)", ["'2026-01-02 03:04:05.12345'", "'9999-12-31 23:59:59.99999'", "NULL",
                            "'1970-01-01 00:00:00.00001'"]),
    ("dtz_nn", "DATETIME NOT NULL", ["'0000-00-00 00:00:00'", "'2026-01-01 00:00:00'", "'1970-01-01 00:00:00'",
                                     "'2000-00-00 00:00:00'"]),
    ("dte_part", "DATE", ["'2026-00-00'", "'2026-01-00'", "NULL", "'0000-01-01'"]),
    ("tm1", "TIME(1)", ["'-00:00:00.1'", "'12:00:00.9'", "NULL", "'-100:59:59.5'"]),
    ("tm2", "TIME(2)", ["'-00:00:01.01'", "'00:00:00.99'", "NULL", "'-596:31:23.64'"]),
    ("tm5", "TIME(5)", ["'-12:34:56.12345'", "'00:00:00.00001'", "NULL", "'-00:00:00.00001'"]),
    ("ts1", "TIMESTAMP(1) NULL", ["'2026-01-01 00:00:00.1'", "'1970-01-01 08:00:01.9'", "NULL",
                                  "'2038-01-19 11:14:07.5'"]),
    ("ts4", "TIMESTAMP(4) NULL", ["'2026-01-01 00:00:00.1234'", "'2000-01-01 00:00:00.0001'", "NULL",
                                  "'0000-00-00 00:00:00'"]),
    ("tsz", "TIMESTAMP NULL", ["'0000-00-00 00:00:00'", "'2026-01-01 00:00:00'", "NULL", "'1970-01-01 08:00:01'"]),
    ("dec0", "DECIMAL(30,0)", ["123456789012345678901234567890", "-1", "NULL", "-999999999999999999999999999999"]),
    ("dec18", "DECIMAL(18,9)", ["-123456789.123456789", "0.000000001", "NULL", "999999999.999999999"]),
    ("decf", "DECIMAL(10,10)", ["0.1234567891", "-0.0000000001", "NULL", "0"]),
    ("dec650", "DECIMAL(65,0)", ["-" + "9" * 65, "1", "NULL", "12345678901234567890123456789012345678901234567890"]),
    ("dec651", "DECIMAL(65,1)", ["0.5", "-0.5", "NULL", "1" * 64 + ".9"]),
    ("decu", "DECIMAL(5,2) UNSIGNED", ["999.99", "0", "NULL", "0.01"]),
    ("bit8", "BIT(8)", ["b'11111111'", "b'0'", "NULL", "b'10000000'"]),
    ("bit9", "BIT(9)", ["b'100000000'", "b'1'", "NULL", "b'111111111'"]),
    ("bit64", "BIT(64)", ["b'" + "1" * 64 + "'", "b'0'", "NULL", "b'1" + "0" * 63 + "'"]),
    ("boo", "BOOLEAN", ["TRUE", "FALSE", "NULL", "-1"]),
    ("ti1u", "TINYINT(1) UNSIGNED", ["255", "0", "NULL", "1"]),
    ("f51", "FLOAT(5,1)", ["1234.5", "-0.05", "NULL", "0.15"]),
    ("ch100", "CHAR(100)", ["REPEAT('😀', 100)", "'x'", "NULL", "'  lead'"]),
    ("vc300", "VARCHAR(300)", ["REPEAT('ü', 300)", "''", "NULL", "'z'"]),
    ("ttx", "TINYTEXT", ["REPEAT('a', 255)", "''", "NULL", "'é'"]),
    ("mtx", "MEDIUMTEXT", ["REPEAT('日本', 40000)", "''", "NULL", "'m'"]),
    ("lbl", "LONGBLOB", ["REPEAT(X'00FF', 40000)", "X''", "NULL", "X'01'"]),
    ("cp1251", "VARCHAR(10) CHARACTER SET cp1251", ["'Привет'", "''", "NULL", "'ёЁ'"]),
    ("koi", "VARCHAR(10) CHARACTER SET koi8r", ["'Привет'", "''", "NULL", "'ж'"]),
    ("l1b", "VARCHAR(10) CHARACTER SET latin1 COLLATE latin1_bin", ["'Ærøskøbing'", "''", "NULL", "'ß'"]),
    ("asc", "VARCHAR(10) CHARACTER SET ascii", ["'plain'", "''", "NULL", "'~'"]),
    ("u8mb3", "VARCHAR(10) CHARACTER SET utf8mb3", ["'Grüße'", "''", "NULL", "'€'"]),
    ("ucs2", "VARCHAR(10) CHARACTER SET ucs2", ["'Ωμέγα'", "''", "NULL", "'a'"]),
    ("u32", "VARCHAR(10) CHARACTER SET utf32", ["'😀x'", "''", "NULL", "'b'"]),
    ("sjis", "VARCHAR(10) CHARACTER SET sjis", ["'日本語'", "''", "NULL", "'ｱ'"]),
    ("en300", f"ENUM({_enum(ENUM300)})", ["'e299'", "'e000'", "NULL", "''"]),
    ("set64", f"SET({_enum(SET64)})", ["'s63,s0'", "''", "NULL", "'" + ",".join(SET64) + "'"]),
    ("enl1", "ENUM('x','y') CHARACTER SET latin1", ["'y'", "'x'", "NULL", "''"]),
    ("ls", "LINESTRING", ["ST_GeomFromText('LINESTRING(0 0,1 1,2 2)')", "ST_GeomFromText('LINESTRING(0 0,1 0)')",
                          "NULL", "ST_GeomFromText('LINESTRING(-1.5 2,3 -4.25)', 4326)"]),
    ("mp", "MULTIPOLYGON", ["ST_GeomFromText('MULTIPOLYGON(((0 0,1 0,1 1,0 0)),((5 5,6 5,6 6,5 5)))')",
                            "ST_GeomFromText('MULTIPOLYGON(((0 0,1 0,1 1,0 0)))')", "NULL",
                            "ST_GeomFromText('MULTIPOLYGON(((0 0,2 0,2 2,0 0),(0.5 0.5,1 0.5,1 1,0.5 0.5)))')"]),
]
ALL_COLUMNS = COLUMNS + EXTRA_COLUMNS
BASE = {"dte_nn": "'2000-01-01'", "dtz_nn": "'2000-01-01 00:00:00'"}  # NOT NULL columns of the update base row


# ------------------------------------------------------------------------------------------------------ helpers


def _options(mariadb) -> MySqlSourceOptions:
    return MySqlSourceOptions(hostname="127.0.0.1", port=mariadb.port)


def _describe(mariadb, db: str, table: str) -> SourceTable:
    options = _options(mariadb)
    conn = connect(options)
    try:
        return describe_table(conn, TableId(db, table), options)
    finally:
        conn.close()


def _head(mariadb) -> tuple[str, int]:
    row = mariadb.execute("SHOW MASTER STATUS")[0]
    return row[0], int(row[1])


def _writer(mariadb, db: str):
    conn = mariadb.connect(db)
    with conn.cursor() as cur:
        cur.execute("SET sql_mode = ''")  # zero dates, '' in an ENUM
        cur.execute("SET time_zone = '+08:00'")
    return conn


def _read(mariadb, start: tuple[str, int], db: str, tables: list[SourceTable], skip_rows: int = 0) -> dict:
    """Every rows event of ``db`` after ``start``, decoded for each of ``tables`` columnar and by the library path.
    Returns {table index: (columnar parts, library parts)} plus "raw": [(event class, ev.rows, ts)]."""
    out: dict = {i: ([], []) for i in range(len(tables))}
    out["raw"] = []
    stream = BinLogStreamReader(
        connection_settings={"host": "127.0.0.1", "port": mariadb.port, "user": "root", "passwd": ""},
        server_id=next(_server_ids), log_file=start[0], log_pos=start[1], resume_stream=True, blocking=False,
        is_mariadb=False, only_events=_ROWS_EVENTS, only_schemas=[db])
    try:
        for ev in stream:
            ts = ev.timestamp * 1000
            for i, table in enumerate(tables):
                out[i][0].append((decode_rows_event(ev, table, skip_rows=skip_rows), ts))
            for i, table in enumerate(tables):  # ev.rows from here on
                out[i][1].append((decode_rows_event(ev, table, skip_rows=skip_rows, columnar=False), ts))
            out["raw"].append((type(ev), ev.rows[skip_rows:], ts))
    finally:
        stream.close()
    return out


def _assert_same(table: SourceTable, columnar: list, library: list) -> pa.Table:
    got = build_change_batch(table, columnar)
    want = build_change_batch(table, library)
    assert got.schema.equals(want.schema), (got.schema, want.schema)
    assert got.num_rows == want.num_rows
    for name in want.column_names:
        a, b = got.column(name).combine_chunks(), want.column(name).combine_chunks()
        assert a.equals(b), (name, a.to_pylist() if not pa.types.is_time(a.type) else a, b)
    assert got.equals(want)
    return got


def _create_alltypes(mariadb, db: str) -> None:
    ddl = ", ".join(f"`{c}` {t}" for c, t, _ in ALL_COLUMNS)
    mariadb.execute(f"CREATE TABLE alltypes (id INT PRIMARY KEY, {ddl})", database=db)


def _insert(cur, row_id: int, k: int) -> None:
    names = ", ".join(f"`{c}`" for c, _, _ in ALL_COLUMNS)
    cur.execute(f"INSERT INTO alltypes (id, {names}) VALUES ({row_id}, {', '.join(v[k] for _, _, v in ALL_COLUMNS)})")


# ------------------------------------------------------------------------------------------------------ tests


def test_the_extension_is_built():
    assert columnar_available(), "lakecdc/source/_rowsdecoder.c is not built: run scripts/setup.sh"


def test_every_type_decodes_like_the_library(mariadb, fresh_db):
    db = fresh_db
    _create_alltypes(mariadb, db)
    table = _describe(mariadb, db, "alltypes")
    start = _head(mariadb)
    conn = _writer(mariadb, db)
    names = ", ".join(f"`{c}`" for c, _, _ in ALL_COLUMNS)
    with conn.cursor() as cur:
        for k in range(4):
            _insert(cur, 1 + k, k)
        base = ", ".join(BASE.get(c, "NULL") for c, _, _ in ALL_COLUMNS)
        cur.execute(f"INSERT INTO alltypes (id, {names}) VALUES (10, {base}), (11, {base}), (12, {base})")
        for k in range(4):  # one multi-row UPDATE event per k: NULL -> value, value -> value
            assignments = ", ".join(f"`{c}` = {v[k]}" for c, _, v in ALL_COLUMNS)
            cur.execute(f"UPDATE alltypes SET {assignments} WHERE id BETWEEN 10 AND 12")
        cur.execute("UPDATE alltypes SET id = id + 100 WHERE id IN (1, 2)")  # primary key changes
        cur.execute("UPDATE alltypes SET ti = ti - 1, id = IF(id = 3, 203, id) WHERE id IN (3, 4)")  # mixed
        cur.execute("DELETE FROM alltypes WHERE id IN (101, 4, 10)")
        cur.execute("DELETE FROM alltypes")
    conn.close()

    events = _read(mariadb, start, db, [table])
    columnar, library = events[0]
    assert all(d.columnar for d, _ in columnar), [d.kind for d, _ in columnar if not d.columnar]
    assert [d.num_rows for d, _ in columnar] == [d.num_rows for d, _ in library]
    assert [d.num_changes for d, _ in columnar] == [d.num_changes for d, _ in library]
    assert columnar[0][0].column_names == tuple(table.column_names)
    got = _assert_same(table, columnar, library)
    ops = got.column(OP_COLUMN).to_pylist()
    ids = got.column("id").to_pylist()
    changes = list(zip(ops, ids))
    assert changes[:7] == [("+I", 1), ("+I", 2), ("+I", 3), ("+I", 4), ("+I", 10), ("+I", 11), ("+I", 12)]
    assert ("-D", 1) in changes and ("+I", 101) in changes and ("-U", 4) in changes and ("+U", 4) in changes
    pk_change = changes.index(("-D", 3))
    assert changes[pk_change + 1] == ("+I", 203)
    # the images of one event, by name
    update = next(d for d, _ in columnar if d.kind == "update")
    assert update.before["id"].to_pylist() == [10] == update.after["id"].to_pylist()  # large rows: 1 per event
    assert set(update.after) == set(table.column_names)


def test_skip_rows_drops_the_first_rows_of_the_event(mariadb, fresh_db):
    db = fresh_db
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))", database=db)
    table = _describe(mariadb, db, "t")
    start = _head(mariadb)
    mariadb.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')", database=db)
    mariadb.execute("UPDATE t SET v = CONCAT(v, '!')", database=db)
    events = _read(mariadb, start, db, [table], skip_rows=2)
    columnar, library = events[0]
    assert [d.num_rows for d, _ in columnar] == [1, 1]
    got = _assert_same(table, columnar, library)
    assert got.column("id").to_pylist() == [3, 3, 3]
    assert got.column(OP_COLUMN).to_pylist() == ["+I", "-U", "+U"]


def test_columns_are_matched_by_name_across_schema_changes(mariadb, fresh_db):
    db = fresh_db
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(10), b INT)", database=db)
    old = _describe(mariadb, db, "t")
    start = _head(mariadb)
    mariadb.execute("INSERT INTO t VALUES (1, 'one', 10)", database=db)
    mariadb.execute("ALTER TABLE t ADD COLUMN c DATETIME(3) FIRST", database=db)
    mariadb.execute("INSERT INTO t (id, a, b, c) VALUES (2, 'two', 20, '2026-01-01 00:00:00.5')", database=db)
    mariadb.execute("ALTER TABLE t DROP COLUMN a", database=db)
    mariadb.execute("INSERT INTO t (id, b, c) VALUES (3, 30, NULL)", database=db)
    mariadb.execute("UPDATE t SET b = b + 1", database=db)
    new = _describe(mariadb, db, "t")
    events = _read(mariadb, start, db, [old, new])
    for i, table in enumerate((old, new)):
        columnar, library = events[i]
        assert all(d.columnar for d, _ in columnar)
        got = _assert_same(table, columnar, library)
        assert got.num_rows == 3 + 2 * 3
    by_old = build_change_batch(old, events[0][0])
    assert by_old.column("a").to_pylist()[:3] == ["one", "two", None]  # the dropped column is NULL afterwards
    by_new = build_change_batch(new, events[1][0])
    assert by_new.column("c").to_pylist()[0] is None  # the added column is NULL before
    assert by_new.column_names[:3] == ["c", "id", "b"]


def test_events_the_decoder_does_not_model_take_the_library_path(mariadb, fresh_db, caplog):
    """Events written before ALTER ... MODIFY DECIMAL(10,2) -> DECIMAL(12,3) do not have the SourceTable's
    decimal type: those go through ev.rows, the others stay columnar, and one batch holds both in binlog order."""
    db = fresh_db
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, price DECIMAL(10,2), note VARCHAR(20))", database=db)
    start = _head(mariadb)
    mariadb.execute("INSERT INTO t VALUES (1, 1.25, 'old'), (2, NULL, 'old')", database=db)
    mariadb.execute("ALTER TABLE t MODIFY price DECIMAL(12,3)", database=db)
    mariadb.execute("INSERT INTO t VALUES (3, 3.125, 'new')", database=db)
    mariadb.execute("UPDATE t SET note = 'upd'", database=db)
    table = _describe(mariadb, db, "t")
    with caplog.at_level(logging.WARNING, logger=rows_decoder.__name__):
        events = _read(mariadb, start, db, [table])
    columnar, library = events[0]
    assert [d.columnar for d, _ in columnar] == [False, True, True]
    assert [d.fallback for d, _ in columnar] == [
        "column: column 'price' (decimal(12,3)) with binlog type 246 into Arrow decimal128(12, 3)", None, None]
    assert {d.fallback for d, _ in library} == {rows_decoder.FALLBACK_REQUESTED}
    assert any("decoded by python-mysql-replication" in r.getMessage() for r in caplog.records)
    got = _assert_same(table, columnar, library)
    assert got.column("price").to_pylist()[:3] == [Decimal("1.250"), None, Decimal("3.125")]


def test_values_beyond_the_target_type_fail_like_the_library_path(mariadb, fresh_db):
    """A TIME beyond Paimon's TIME range: the columnar decoder hands the event to the library path, so the batch
    fails with the codec's error, naming the column."""
    db = fresh_db
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, d TIME)", database=db)
    table = _describe(mariadb, db, "t")
    start = _head(mariadb)
    mariadb.execute("INSERT INTO t VALUES (1, '800:00:00')", database=db)
    events = _read(mariadb, start, db, [table])
    columnar, library = events[0]
    assert not columnar[0][0].columnar
    assert columnar[0][0].fallback == "value: TIME beyond the range of Paimon's TIME"  # the column index dropped
    for parts in (columnar, library):
        with pytest.raises(SourceError, match="column 'd'"):
            build_change_batch(table, parts)


def test_minimal_row_images_decode_like_the_library(mariadb, fresh_db):
    """binlog_row_image=MINIMAL (not what the pipeline asks for, but the column bitmaps must still be honoured):
    absent columns are NULL."""
    db = fresh_db
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(10), b BIGINT, c DATE)", database=db)
    table = _describe(mariadb, db, "t")
    start = _head(mariadb)
    conn = mariadb.connect(db)
    with conn.cursor() as cur:
        cur.execute("SET SESSION binlog_row_image = 'MINIMAL'")
        cur.execute("INSERT INTO t VALUES (1, 'x', 5, '2026-01-01'), (2, NULL, 6, NULL)")
        cur.execute("UPDATE t SET b = b * 2")
        cur.execute("UPDATE t SET id = 3 WHERE id = 2")
        cur.execute("DELETE FROM t WHERE id = 1")
    conn.close()
    events = _read(mariadb, start, db, [table])
    columnar, library = events[0]
    assert all(d.columnar for d, _ in columnar)
    got = _assert_same(table, columnar, library)
    # a MINIMAL after image lacks the key, which reads as a key change (why the pipeline requires FULL)
    assert got.column(OP_COLUMN).to_pylist() == ["+I", "+I", "-D", "+I", "-D", "+I", "-D", "+I", "-D"]
    assert got.column("a").to_pylist() == ["x", None, None, None, None, None, None, None, None]


def test_many_events_into_one_batch(mariadb, fresh_db):
    """Several hundred events of different kinds and sizes concatenate into one single-chunk batch."""
    db = fresh_db
    mariadb.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, s VARCHAR(200), d DECIMAL(12,2), f DOUBLE, "
                    "e ENUM('a','b'), st SET('x','y'), ok BOOL)", database=db)
    table = _describe(mariadb, db, "t")
    start = _head(mariadb)
    conn = mariadb.connect(db)
    with conn.cursor() as cur:
        for lo in range(1, 3001, 300):
            cur.execute("INSERT INTO t SELECT seq, IF(seq % 7 = 0, NULL, REPEAT('v', seq % 150)), seq / 100, "
                        "seq * 1.5, IF(seq % 2, 'a', 'b'), IF(seq % 3, 'x,y', ''), seq % 2 "
                        f"FROM seq_{lo}_to_{lo + 299}")
        cur.execute("UPDATE t SET s = CONCAT('u', id), ok = NOT ok WHERE id % 5 = 0")
        cur.execute("DELETE FROM t WHERE id % 11 = 0")
    conn.close()
    events = _read(mariadb, start, db, [table])
    columnar, library = events[0]
    assert len(columnar) > 10 and all(d.columnar for d, _ in columnar)
    got = _assert_same(table, columnar, library)
    assert got.num_rows == 3000 + 2 * 600 + 272
    assert all(got.column(i).num_chunks == 1 for i in range(got.num_columns))


class _Column:
    """A table-map column as python-mysql-replication describes it (for events no server here can write)."""

    def __init__(self, type_: int, name: str, **attrs):
        self.type, self.name, self.unsigned, self.character_set_name = type_, name, False, None
        self.enum_values = self.set_values = None
        self.__dict__.update(attrs)


def test_mysql_binary_json_is_rendered_like_the_library():
    """MySQL 8 logs JSON in its binary format (MariaDB logs text, covered above): the column is decoded per value
    with the library's parser and rendered by the codec. Built from synthetic row images (no MySQL server here)."""
    import struct

    from pymysqlreplication.packet import parse_json

    from lakecdc.model import SourceColumn
    from lakecdc.source.types import table_codecs

    columns = [_Column(3, "id"), _Column(245, "js", length_size=4)]
    table = SourceTable(TableId("db", "t"), (SourceColumn("id", "int(11)", pa.int32(), False),
                                             SourceColumn("js", "json", pa.string())), ("id",))
    obj = struct.pack("<HH", 1, 12) + struct.pack("<HH", 11, 1) + bytes([0x05]) + struct.pack("<H", 1) + b"a"
    values = [b"\x0c\x06h\xc3\xa9llo", b"\x05\x2a\x00", b"\x04\x01", b"\x00" + obj, b"", None]
    body = b""
    for i, value in enumerate(values):
        body += bytes([0 if value is not None else 2]) + struct.pack("<i", i)
        if value is not None:
            body += struct.pack("<I", len(value)) + value
    plan = rows_decoder._build_plan(columns, table)
    rows = plan.plan.decode(body, 0, len(body), 0, b"\x03")
    decoded = rows_decoder.DecodedRows(table, "insert", ("id", "js"), rows.num_rows, rows.num_changes, _rows=rows,
                                       _plan=plan)
    got = build_change_batch(table, [(decoded, 0)]).column("js").to_pylist()
    codec = table_codecs(table)[1]
    want = [None if not v else codec.binlog_value(parse_json(v[0], v[1:]), None) for v in values]
    assert got == want == ["héllo", "42", "True", '{"a": 1}', None, None]


def test_corrupt_or_truncated_events_never_break_the_decoder(mariadb, fresh_db):
    """Every truncation and random byte flips of real row images: the C decoder either returns rows whose Arrow
    arrays validate, or refuses the event (Unsupported, handed to the library) — never a crash or a bad buffer."""
    import random
    import struct

    from lakecdc.source import _rowsdecoder

    db = fresh_db
    _create_alltypes(mariadb, db)
    table = _describe(mariadb, db, "alltypes")
    start = _head(mariadb)
    conn = _writer(mariadb, db)
    with conn.cursor() as cur:
        for k in (0, 1, 3):
            _insert(cur, 1 + k, k)
        cur.execute("UPDATE alltypes SET ti = 1 WHERE id = 2")
    conn.close()
    bodies = []
    stream = BinLogStreamReader(
        connection_settings={"host": "127.0.0.1", "port": mariadb.port, "user": "root", "passwd": ""},
        server_id=next(_server_ids), log_file=start[0], log_pos=start[1], resume_stream=True, blocking=False,
        is_mariadb=False, only_events=_ROWS_EVENTS, only_schemas=[db])
    for ev in stream:
        data, lo, hi, *bitmaps = rows_decoder._raw_body(ev)
        kind = rows_decoder._KIND_CODE[rows_decoder.event_kind(ev)]
        bodies.append((rows_decoder._plan_for(ev, table), bytes(data[lo:hi]), kind, bitmaps))
    stream.close()
    rng = random.Random(7)
    outcomes = {"rows": 0, "refused": 0}

    def attempt(info, body, kind, bitmaps):
        try:
            rows = info.plan.decode(body, 0, len(body), kind, *bitmaps)
        except _rowsdecoder.Unsupported:
            outcomes["refused"] += 1
            return
        outcomes["rows"] += 1
        decoded = rows_decoder.DecodedRows(table, "update" if kind == 1 else "insert", (), rows.num_rows,
                                           rows.num_changes, _rows=rows, _plan=info)
        try:
            batch = build_change_batch(table, [(decoded, 0)])
        except (SourceError, UnicodeDecodeError, IndexError, ValueError, struct.error) as exc:
            if isinstance(exc, pa.ArrowException):
                raise
            return  # a post-processed column (geometry, other charsets) refuses the garbage in Python
        for column in batch.columns:
            for chunk in column.chunks:
                if pa.types.is_time(chunk.type):  # TIME holds signed durations by design, outside [0, 24h)
                    chunk = chunk.view(pa.int32() if pa.types.is_time32(chunk.type) else pa.int64())
                chunk.validate(full=True)

    for info, body, kind, bitmaps in bodies:
        for cut in range(0, len(body), max(1, len(body) // 60)):
            attempt(info, body[:cut], kind, bitmaps)
        for _ in range(60):
            mutated = bytearray(body)
            for _ in range(rng.randint(1, 4)):
                mutated[rng.randrange(len(mutated))] = rng.randrange(256)
            attempt(info, bytes(mutated), kind, bitmaps)
    assert outcomes["rows"] > 0 and outcomes["refused"] > 0, outcomes


def test_without_the_extension_every_event_takes_the_library_path(mariadb, fresh_db, monkeypatch, caplog):
    db = fresh_db
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))", database=db)
    table = _describe(mariadb, db, "t")
    start = _head(mariadb)
    mariadb.execute("INSERT INTO t VALUES (1, 'a')", database=db)
    mariadb.execute("UPDATE t SET v = 'b'", database=db)
    monkeypatch.setattr(rows_decoder, "_ext", None)
    monkeypatch.setattr(rows_decoder, "_warned", set())
    with caplog.at_level(logging.WARNING, logger=rows_decoder.__name__):
        events = _read(mariadb, start, db, [table])
    columnar, library = events[0]
    assert not any(d.columnar for d, _ in columnar)
    assert {d.fallback for d, _ in columnar} == {rows_decoder.FALLBACK_NOT_BUILT}
    assert sum("columnar binlog decoder is not built" in r.getMessage() for r in caplog.records) == 1
    assert build_change_batch(table, columnar).equals(build_change_batch(table, library))
