"""Tests of the MySQL source layer against a private MariaDB (tests/mariadb_server.py): server checks, schema,
snapshot, binlog reads, resume, concurrency and purged binlogs."""

from __future__ import annotations

import datetime as dt
import random
import threading
import time
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pymysql
import pytest

from lakecdc.errors import BinlogPurgedError, SourceError
from lakecdc.model import OP_COLUMN, OP_TS_COLUMN, BinlogOffset, TableId
from lakecdc.source import BinlogReader, MySqlSource, MySqlSourceOptions, InitialLoadReader, parse_server_id

TUTORIAL_DDL = """CREATE TABLE orders (
  id BIGINT NOT NULL,
  product VARCHAR(100) NOT NULL,
  price DECIMAL(10, 2) NOT NULL,
  created_at DATETIME(3) NOT NULL,
  PRIMARY KEY (id)
)"""


def options(mariadb, **kw) -> MySqlSourceOptions:
    kw.setdefault("server_id", 5400)
    return MySqlSourceOptions(hostname=mariadb.host, port=mariadb.port, username=mariadb.user,
                              password=mariadb.password, **kw)


@pytest.fixture
def source(mariadb) -> MySqlSource:
    return MySqlSource(options(mariadb))


@pytest.fixture
def orders(mariadb, fresh_db, source):
    """The tutorial table with its two orders; yields (TableId, connection)."""
    conn = mariadb.connect(fresh_db)
    with conn.cursor() as cur:
        cur.execute(TUTORIAL_DDL)
        cur.execute("INSERT INTO orders VALUES (101, 'book', 29.90, '2026-01-01 12:00:00'), "
                    "(102, 'pen', 5.00, '2026-01-02 09:30:00')")
    yield TableId(fresh_db, "orders"), conn
    conn.close()


def run(conn, *statements):
    with conn.cursor() as cur:
        for s in statements:
            cur.execute(s)


def rows_of(batches, with_ts=False):
    """[(op, {col: value})] in order, from change batches (system columns split off)."""
    out = []
    for b in batches:
        for r in b.data.to_pylist():
            op, ts = r.pop(OP_COLUMN), r.pop(OP_TS_COLUMN)
            out.append((op, r, ts) if with_ts else (op, r))
    return out


def read_all(source, tables, starts, stop):
    reader = source.read_binlog({t.table_id: t for t in tables}, starts, stop)
    batches = list(reader)
    return reader, batches


# --------------------------------------------------------------------------------------------------- options



def test_connections_share_one_tls_context_and_a_shared_connection_is_reopened(mariadb, source):
    """PyMySQL's preferred-TLS context (no certificate check) is built once for all connections; between
    share_connection() and close() the short calls use one connection, reopened when the server dropped it."""
    import ssl

    from lakecdc.source.connection import connect

    first, second = connect(source.options), connect(source.options)
    try:
        assert first.ctx is second.ctx
        assert first.ctx.verify_mode == ssl.CERT_NONE and not first.ctx.check_hostname
    finally:
        first.close()
        second.close()
    source.share_connection()
    try:
        source.check_server()
        shared = source._shared
        tables = source.list_tables()
        assert source._shared is shared and source.head_offset().pos > 0
        mariadb.execute(f"KILL {shared.thread_id()}")  # the server drops it between two calls
        assert source.list_tables() == tables and source._shared is not shared
    finally:
        source.close()
    assert source._shared is None and source.list_tables() == tables

def test_options_hide_password_and_parse_server_id():
    o = MySqlSourceOptions(hostname="h", password="s3cret-pw")
    assert "s3cret-pw" not in repr(o)
    assert parse_server_id("5400-5404") == 5400
    assert parse_server_id(5401) == 5401
    with pytest.raises(SourceError):
        parse_server_id("5404-5400")


# --------------------------------------------------------------------------------------------------- server checks


def test_check_server_ok(source):
    source.check_server()
    assert source.flavor() == "mariadb"


@pytest.mark.parametrize("metadata", ["MINIMAL", "NO_LOG"])
def test_check_server_accepts_any_row_metadata(mariadb, source, metadata):
    """MySQL 8's default (MINIMAL) and MariaDB's (NO_LOG) are fine: columns are named from the schema history."""
    old = mariadb.execute("SELECT @@GLOBAL.binlog_row_metadata")[0][0]
    mariadb.execute(f"SET GLOBAL binlog_row_metadata = '{metadata}'")
    try:
        source.check_server()
    finally:
        mariadb.execute(f"SET GLOBAL binlog_row_metadata = '{old}'")


@pytest.mark.parametrize("variable,bad_value", [
    ("binlog_format", "STATEMENT"),
    ("binlog_row_image", "MINIMAL"),
])
def test_check_server_names_bad_setting(mariadb, source, variable, bad_value):
    old = mariadb.execute(f"SELECT @@GLOBAL.{variable}")[0][0]
    mariadb.execute(f"SET GLOBAL {variable} = '{bad_value}'")
    try:
        with pytest.raises(SourceError) as err:
            source.check_server()
        message = str(err.value)
        assert variable in message and bad_value in message
        assert f"SET GLOBAL {variable}=" in message
    finally:
        mariadb.execute(f"SET GLOBAL {variable} = '{old}'")
    source.check_server()


def test_check_server_privileges(mariadb):
    mariadb.execute("CREATE USER IF NOT EXISTS 'cdc'@'127.0.0.1' IDENTIFIED BY 'cdc-secret-pw'")
    try:
        mariadb.execute("GRANT SELECT ON *.* TO 'cdc'@'127.0.0.1'")
        cdc = MySqlSource(MySqlSourceOptions(hostname=mariadb.host, port=mariadb.port, username="cdc",
                                             password="cdc-secret-pw", server_id=5490))
        with pytest.raises(SourceError, match="BINLOG MONITOR"):
            cdc.check_server()
        mariadb.execute("GRANT BINLOG MONITOR ON *.* TO 'cdc'@'127.0.0.1'")
        with pytest.raises(SourceError, match="REPLICATION SLAVE"):
            cdc.check_server()
        mariadb.execute("GRANT REPLICATION SLAVE ON *.* TO 'cdc'@'127.0.0.1'")
        cdc.check_server()
    finally:
        mariadb.execute("DROP USER IF EXISTS 'cdc'@'127.0.0.1'")


def test_connection_errors_name_address_not_password(mariadb):
    bad_pw = MySqlSource(MySqlSourceOptions(hostname=mariadb.host, port=mariadb.port, username="root",
                                            password="wrong-pw-123", connect_timeout=5))
    with pytest.raises(SourceError) as err:
        bad_pw.check_server()
    assert f"{mariadb.host}:{mariadb.port}" in str(err.value) and "1045" in str(err.value)
    assert "wrong-pw-123" not in str(err.value)
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    nobody = MySqlSource(MySqlSourceOptions(hostname="127.0.0.1", port=closed_port, password="pw-xyz",
                                            connect_timeout=2))
    with pytest.raises(SourceError) as err:
        nobody.head_offset()
    assert f"127.0.0.1:{closed_port}" in str(err.value) and "pw-xyz" not in str(err.value)


# --------------------------------------------------------------------------------------------------- schema


def test_describe_tutorial_table(source, orders):
    table_id, _ = orders
    table = source.describe_table(table_id)
    assert table.table_id == table_id
    assert table.primary_keys == ("id",)
    assert table.arrow_schema() == pa.schema([
        pa.field("id", pa.int64(), nullable=False),
        pa.field("product", pa.string(), nullable=False),
        pa.field("price", pa.decimal128(10, 2), nullable=False),
        pa.field("created_at", pa.timestamp("ms"), nullable=False),
    ])
    assert [c.column_type for c in table.columns] == ["bigint(20)", "varchar(100)", "decimal(10,2)", "datetime(3)"]
    assert table_id in source.list_tables()
    assert not any(t.database in ("mysql", "information_schema", "performance_schema", "sys")
                   for t in source.list_tables())
    with pytest.raises(SourceError, match="does not exist"):
        source.describe_table(TableId(table_id.database, "nope"))


def test_describe_tables_at_once_equals_one_by_one(mariadb, fresh_db, source, monkeypatch):
    """A plan of many tables describes them with three queries per database (lakecdc.source.schema.describe_tables):
    the same tables as one by one, names that differ only in case kept apart, and the same errors."""
    import lakecdc.source.schema as schema_module

    conn = mariadb.connect(fresh_db)
    run(conn, "CREATE TABLE Orders (id INT PRIMARY KEY, v VARCHAR(10) COMMENT 'upper')",
        "CREATE TABLE orders (a INT, b INT, c DATETIME(3) NOT NULL, PRIMARY KEY (b, a)) COMMENT 'lower'",
        "CREATE TABLE nokey (x TEXT, y DECIMAL(20, 4) DEFAULT 1.5)",
        "CREATE VIEW a_view AS SELECT 1 AS one")
    ids = [TableId(fresh_db, name) for name in ("orders", "nokey", "Orders")]
    monkeypatch.setattr(schema_module, "DESCRIBE_BATCH", 2)  # more tables than one batch holds
    together = source.describe_tables(ids)
    assert list(together) == [TableId(fresh_db, "orders"), TableId(fresh_db, "nokey"), TableId(fresh_db, "Orders")]
    for table_id in ids:
        assert together[table_id] == source.describe_table(table_id)
    assert [c.name for c in together[TableId(fresh_db, "Orders")].columns] == ["id", "v"]
    assert together[TableId(fresh_db, "orders")].primary_keys == ("b", "a")
    assert together[TableId(fresh_db, "nokey")].primary_keys == ()
    with pytest.raises(SourceError, match="does not exist"):
        source.describe_tables(ids + [TableId(fresh_db, "ORDERS")])
    with pytest.raises(SourceError, match="not a base table"):
        source.describe_tables(ids + [TableId(fresh_db, "a_view")])


def test_type_mapping(mariadb, fresh_db, source):
    run(mariadb.connect(fresh_db), """CREATE TABLE t (
        b1 TINYINT(1), ti TINYINT NOT NULL, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
        mi MEDIUMINT, i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED, yr YEAR,
        f FLOAT, f72 FLOAT(7,2), d DOUBLE, r REAL, dec1 DECIMAL(10,2), dec2 DECIMAL(50,10),
        dte DATE, tm TIME(3), tm0 TIME, tm6 TIME(6), dt0 DATETIME, dt3 DATETIME(3), dt6 DATETIME(6),
        ts0 TIMESTAMP NULL, ts6 TIMESTAMP(6) NULL,
        c CHAR(3), v VARCHAR(5), tx TEXT, js JSON, en ENUM('a','b'), st SET('a','b'),
        bn BINARY(4), vb VARBINARY(4), bl BLOB, bit1 BIT(1), bit9 BIT(9), geo GEOMETRY, pt POINT)""")
    table = source.describe_table(TableId(fresh_db, "t"))
    got = {c.name: c.arrow_type for c in table.columns}
    assert got == {
        "b1": pa.bool_(), "ti": pa.int8(), "tiu": pa.int16(), "si": pa.int16(), "siu": pa.int32(),
        "mi": pa.int32(), "i": pa.int32(), "iu": pa.int64(), "bi": pa.int64(), "biu": pa.decimal128(20, 0),
        "yr": pa.int32(), "f": pa.float32(), "f72": pa.float64(), "d": pa.float64(), "r": pa.float64(),
        "dec1": pa.decimal128(10, 2), "dec2": pa.string(), "dte": pa.date32(), "tm": pa.time32("ms"),
        "tm0": pa.time32("s"), "tm6": pa.time64("us"),
        "dt0": pa.timestamp("s"), "dt3": pa.timestamp("ms"), "dt6": pa.timestamp("us"),
        "ts0": pa.timestamp("s", tz="UTC"), "ts6": pa.timestamp("us", tz="UTC"),
        "c": pa.string(), "v": pa.string(), "tx": pa.string(), "js": pa.string(), "en": pa.string(),
        "st": pa.list_(pa.string()), "bn": pa.binary(4), "vb": pa.binary(), "bl": pa.binary(), "bit1": pa.bool_(),
        "bit9": pa.binary(2), "geo": pa.string(), "pt": pa.string(),
    }
    assert not table.column("ti").nullable and table.column("b1").nullable
    assert table.primary_keys == ()
    off = MySqlSource(options(mariadb, treat_tinyint1_as_boolean=False))
    assert off.describe_table(TableId(fresh_db, "t")).column("b1").arrow_type == pa.int8()

    # types without a faithful mapping are refused, naming the column
    run(mariadb.connect(fresh_db), "CREATE TABLE u (id INT PRIMARY KEY, ident UUID)",
        "CREATE TABLE e (id INT PRIMARY KEY, grade ENUM('é', 'b') CHARACTER SET latin1)",
        "CREATE TABLE k (id INT PRIMARY KEY, name VARCHAR(5) CHARACTER SET keybcs2)")
    with pytest.raises(SourceError, match="'ident'"):
        source.describe_table(TableId(fresh_db, "u"))
    with pytest.raises(SourceError, match="'grade' is ENUM in character set latin1"):
        source.describe_table(TableId(fresh_db, "e"))
    with pytest.raises(SourceError, match="'name' uses the character set keybcs2"):
        source.describe_table(TableId(fresh_db, "k"))


# --------------------------------------------------------------------------------------------------- snapshot


def test_snapshot_tutorial_rows(source, orders):
    table_id, _ = orders
    table = source.describe_table(table_id)
    head_before = source.head_offset()
    with source.snapshot([table]) as snap:
        assert isinstance(snap, InitialLoadReader)
        assert snap.offset.same_position(head_before)
        assert snap.offset.gtid and snap.offset.gtid == head_before.gtid
        batches = list(snap.read(table_id))
    assert len(batches) == 1
    assert batches[0].data.schema == table.change_schema()
    assert rows_of(batches, with_ts=True) == [
        ("+I", {"id": 101, "product": "book", "price": Decimal("29.90"),
                "created_at": dt.datetime(2026, 1, 1, 12, 0)}, 0),
        ("+I", {"id": 102, "product": "pen", "price": Decimal("5.00"),
                "created_at": dt.datetime(2026, 1, 2, 9, 30)}, 0),
    ]


def test_snapshot_batches_and_multiple_tables(mariadb, fresh_db):
    conn = mariadb.connect(fresh_db)
    run(conn, "CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(10))", "CREATE TABLE b (id INT PRIMARY KEY)",
        "INSERT INTO a VALUES " + ",".join(f"({i}, 'v{i}')" for i in range(5)), "INSERT INTO b VALUES (1)")
    source = MySqlSource(options(mariadb, snapshot_batch_rows=2))
    ta, tb = (source.describe_table(TableId(fresh_db, n)) for n in "ab")
    with source.snapshot([ta, tb]) as snap:
        run(conn, "INSERT INTO a VALUES (99, 'late')", "DELETE FROM b")  # after the snapshot: invisible
        batches_a = list(snap.read(ta.table_id))
        batches_b = list(snap.read(tb.table_id))
    assert [b.num_rows for b in batches_a] == [2, 2, 1]
    assert [r["id"] for _, r in rows_of(batches_a)] == [0, 1, 2, 3, 4]
    assert rows_of(batches_b) == [("+I", {"id": 1})]


# --------------------------------------------------------------------------------------------------- binlog


def test_binlog_insert_update_delete(source, orders):
    table_id, conn = orders
    table = source.describe_table(table_id)
    start = source.head_offset()
    t0 = int(time.time())
    run(conn, "INSERT INTO orders VALUES (103, 'ink', 7.25, '2026-01-03 10:00:00.250')",
        "UPDATE orders SET price = 31.00 WHERE id = 101",
        "DELETE FROM orders WHERE id = 102")
    run(conn, "BEGIN", "INSERT INTO orders VALUES (104, 'rolled back', 1, '2026-01-01')", "ROLLBACK")
    stop = source.head_offset()
    reader, batches = read_all(source, [table], {table_id: start}, stop)
    assert isinstance(reader, BinlogReader)
    assert all(b.data.schema == table.change_schema() and b.table == table for b in batches)
    changes = rows_of(batches, with_ts=True)
    book = {"id": 101, "product": "book", "created_at": dt.datetime(2026, 1, 1, 12, 0)}
    assert [(op, r) for op, r, _ in changes] == [
        ("+I", {"id": 103, "product": "ink", "price": Decimal("7.25"),
                "created_at": dt.datetime(2026, 1, 3, 10, 0, 0, 250000)}),
        ("-U", {**book, "price": Decimal("29.90")}),
        ("+U", {**book, "price": Decimal("31.00")}),
        ("-D", {"id": 102, "product": "pen", "price": Decimal("5.00"),
                "created_at": dt.datetime(2026, 1, 2, 9, 30)}),
    ]
    for _, _, ts in changes:
        assert ts % 1000 == 0 and t0 - 2 <= ts // 1000 <= time.time() + 2
    assert reader.end_offset == stop and reader.rows_read == 4
    # the same rows from a snapshot look identical
    with source.snapshot([table]) as snap:
        snap_rows = [r for _, r in rows_of(snap.read(table_id))]
    assert snap_rows == [{**book, "price": Decimal("31.00")}, changes[0][1]]


def test_primary_key_change_is_delete_insert(source, orders):
    table_id, conn = orders
    table = source.describe_table(table_id)
    start = source.head_offset()
    run(conn, "UPDATE orders SET id = 201 WHERE id = 101", "UPDATE orders SET product = 'pencil' WHERE id = 102")
    _, batches = read_all(source, [table], {table_id: start}, source.head_offset())
    assert [(op, r["id"], r["product"]) for op, r in rows_of(batches)] == [
        ("-D", 101, "book"), ("+I", 201, "book"), ("-U", 102, "pen"), ("+U", 102, "pencil")]


def test_two_tables_with_different_start_offsets(mariadb, fresh_db, source):
    conn = mariadb.connect(fresh_db)
    run(conn, "CREATE TABLE a (id INT PRIMARY KEY)", "CREATE TABLE b (id INT PRIMARY KEY)",
        "CREATE TABLE other (id INT PRIMARY KEY)")
    ta, tb = (source.describe_table(TableId(fresh_db, n)) for n in "ab")
    start_a = source.head_offset()
    run(conn, "INSERT INTO a VALUES (1)", "INSERT INTO b VALUES (1)", "INSERT INTO other VALUES (1)")
    run(conn, "BEGIN", "INSERT INTO a VALUES (2)", "INSERT INTO b VALUES (2)", "COMMIT")
    start_b = source.head_offset()
    run(conn, "INSERT INTO a VALUES (3)", "INSERT INTO b VALUES (3)", "INSERT INTO other VALUES (3)")
    stop = source.head_offset()
    reader, batches = read_all(source, [ta, tb], {ta.table_id: start_a, tb.table_id: start_b}, stop)
    got = {}
    for b in batches:
        assert b.data.column(OP_COLUMN).to_pylist() == ["+I"] * b.num_rows
        got.setdefault(b.table.table_id.table, []).extend(b.data.column("id").to_pylist())
    assert got == {"a": [1, 2, 3], "b": [3]}
    assert reader.end_offset == stop


def test_bounded_read_stops_at_stop_while_writes_continue(mariadb, fresh_db, source):
    conn = mariadb.connect(fresh_db)
    run(conn, "CREATE TABLE a (id INT PRIMARY KEY)")
    table = source.describe_table(TableId(fresh_db, "a"))
    start = source.head_offset()
    run(conn, *[f"INSERT INTO a VALUES ({i})" for i in range(10)])
    stop = source.head_offset()
    stop_writing = threading.Event()

    def writer():
        c = mariadb.connect(fresh_db)
        i = 1000
        while not stop_writing.is_set():
            run(c, f"INSERT INTO a VALUES ({i})")
            i += 1
        c.close()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        time.sleep(0.2)
        reader, batches = read_all(source, [table], {table.table_id: start}, stop)
    finally:
        stop_writing.set()
        thread.join()
    assert [r["id"] for _, r in rows_of(batches)] == list(range(10))
    assert reader.end_offset == stop
    # batches are flushed every `flush_rows` rows (at commits)
    small = BinlogReader(source.options, {table.table_id: table}, {table.table_id: start}, stop, flush_rows=3)
    assert [b.num_rows for b in small] == [3, 3, 3, 1] and small.rows_read == 10
    # empty read: start == stop
    reader, batches = read_all(source, [table], {table.table_id: stop}, stop)
    assert batches == [] and reader.end_offset == stop


def test_resume_from_end_offset_repeats_nothing(mariadb, fresh_db, source):
    conn = mariadb.connect(fresh_db)
    run(conn, "CREATE TABLE a (id INT PRIMARY KEY, n INT)")
    table = source.describe_table(TableId(fresh_db, "a"))
    tables = {table.table_id: table}
    first = source.head_offset()
    offset = first
    expected_ops = []
    for round_ in range(4):
        run(conn, f"INSERT INTO a VALUES ({round_}, 0)", f"UPDATE a SET n = n + 1 WHERE id <= {round_}")
        if round_ == 2:
            run(conn, "FLUSH BINARY LOGS")  # a rotation between two reads
            run(conn, "DELETE FROM a WHERE id = 0")
        stop = source.head_offset()
        reader = source.read_binlog(tables, {table.table_id: offset}, stop)
        expected_ops.extend(rows_of(list(reader)))
        assert reader.end_offset == stop
        offset = reader.end_offset
    _, whole = read_all(source, [table], {table.table_id: first}, source.head_offset())
    assert rows_of(whole) == expected_ops
    # reading again from the final checkpoint yields nothing
    reader, batches = read_all(source, [table], {table.table_id: offset}, source.head_offset())
    assert batches == []


def test_end_offset_at_eof_is_last_transaction(mariadb, fresh_db, source):
    conn = mariadb.connect(fresh_db)
    run(conn, "CREATE TABLE a (id INT PRIMARY KEY)")
    table = source.describe_table(TableId(fresh_db, "a"))
    start = source.head_offset()
    run(conn, "INSERT INTO a VALUES (1)")
    head = source.head_offset()
    future = BinlogOffset(head.file, head.pos + 10_000_000)  # beyond the end: the read ends at EOF
    reader, batches = read_all(source, [table], {table.table_id: start}, future)
    assert [r["id"] for _, r in rows_of(batches)] == [1]
    assert reader.end_offset.same_position(head) and reader.end_offset.gtid == head.gtid


def test_snapshot_during_writes_plus_binlog_equals_final_table(mariadb, fresh_db, source):
    conn = mariadb.connect(fresh_db)
    run(conn, "CREATE TABLE s (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(20))",
        "INSERT INTO s VALUES " + ",".join(f"({i}, 0, 'n{i}')" for i in range(300)))
    table = source.describe_table(TableId(fresh_db, "s"))
    stop_writing = threading.Event()
    commits = {1: 0, 2: 0}

    def writer(seed):
        rnd = random.Random(seed)
        c = mariadb.connect(fresh_db)
        c.autocommit(False)
        with c.cursor() as cur:
            while not stop_writing.is_set():
                try:
                    for _ in range(rnd.randint(1, 4)):
                        k = rnd.randrange(400)
                        action = rnd.random()
                        if action < 0.4:
                            cur.execute("INSERT INTO s VALUES (%s, %s, 'w') ON DUPLICATE KEY UPDATE v = v + 1",
                                        (k, rnd.randrange(100)))
                        elif action < 0.8:
                            cur.execute("UPDATE s SET v = v + 1, note = %s WHERE id = %s", (f"u{seed}", k))
                        else:
                            cur.execute("DELETE FROM s WHERE id = %s", (k,))
                    c.commit()
                    commits[seed] += 1
                except pymysql.err.OperationalError as error:
                    if error.args[0] not in (1205, 1213):  # lock wait timeout, deadlock: the two writers collided
                        raise
                    c.rollback()  # the server rolled it back: nothing of it is in the binlog; go on
        c.close()

    threads = [threading.Thread(target=writer, args=(s,)) for s in (1, 2)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.3)
        with source.snapshot([table]) as snap:
            state = {}
            for batch in snap.read(table.table_id):
                for r in batch.data.to_pylist():
                    state[r["id"]] = {k: v for k, v in r.items() if k not in (OP_COLUMN, OP_TS_COLUMN)}
                time.sleep(0.1)
            offset = snap.offset
        time.sleep(0.3)
    finally:
        stop_writing.set()
        for t in threads:
            t.join()
    assert all(n > 10 for n in commits.values()), commits  # both writers kept writing during the snapshot
    reader, batches = read_all(source, [table], {table.table_id: offset}, source.head_offset())
    violations = 0
    for op, r in rows_of(batches):
        key = r["id"]
        if op == "+I":
            violations += key in state
            state[key] = r
        elif op in ("-U", "-D"):
            violations += state.get(key) != r
            state.pop(key, None)
        else:
            state[key] = r
    assert violations == 0
    final = {r[0]: {"id": r[0], "v": r[1], "note": r[2]}
             for r in mariadb.execute("SELECT id, v, note FROM s", database=fresh_db)}
    assert state == final


def test_purged_binlog_raises(mariadb, fresh_db, source):
    conn = mariadb.connect(fresh_db)
    run(conn, "CREATE TABLE a (id INT PRIMARY KEY)")
    table = source.describe_table(TableId(fresh_db, "a"))
    old = source.head_offset()
    run(conn, "INSERT INTO a VALUES (1)", "FLUSH BINARY LOGS")
    current = source.head_offset()
    assert current.file != old.file
    mariadb.purge_binary_logs_to(current.file)
    with pytest.raises(BinlogPurgedError, match="snapshot"):
        list(source.read_binlog({table.table_id: table}, {table.table_id: old}, current))


# --------------------------------------------------------------------------------------------------- values


ALL_TYPES_DDL = """CREATE TABLE v (
  id INT PRIMARY KEY, b1 TINYINT(1), ti TINYINT, tiu TINYINT UNSIGNED, bu BIGINT UNSIGNED,
  f FLOAT, f2 FLOAT(7,2), dbl DOUBLE, dec50 DECIMAL(50,10), dec0 DECIMAL(10,0), dte DATE,
  tm6 TIME(6), tm1 TIME(1), tm0 TIME, tm3 TIME(3), dt0 DATETIME, dt3 DATETIME(3), dt6 DATETIME(6),
  ts3 TIMESTAMP(3) NULL, ts0 TIMESTAMP NULL, ch CHAR(5), bin4 BINARY(4), vb VARBINARY(10), bl BLOB, tx TEXT,
  js JSON, en ENUM('x','y',''), st SET('c','a','b'), bit1 BIT(1), bit10 BIT(10), yr YEAR,
  latin VARCHAR(10) CHARSET latin1, emoji VARCHAR(10), dn DATE NOT NULL, dtn DATETIME NOT NULL, dz DATE)"""

ALL_TYPES_ROWS = [
    "(1, 1, -5, 250, 18446744073709551615, 3.14159, 3.14159, 2.5, "
    "-12345678901234567890123456789012345678.1234567890, 12, '2026-01-02', '-596:31:23.647000', '-00:00:01.5', "
    "'-01:00:00', '-00:00:00.001', '2026-01-01 12:00:00', '2026-01-01 12:00:00.123', '9999-12-31 23:59:59.999999', "
    "'2026-01-01 12:00:00.123', '2026-01-01 12:00:00', 'ab  ', X'0102', X'00ff00', X'00ff', 'txt', "
    "'{\"k\": \"v\"}', 'y', 'a,c', b'1', b'1010101010', 2026, 'café', 'upd 😀', '0000-00-00', "
    "'0000-00-00 00:00:00', '0000-00-00')",
    "(2, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL, '12:34:56.789012', '00:00:00.1', '596:00:00', '23:59:59.999', NULL, "
    "NULL, NULL, NULL, NULL, '', '', '', '', '', '[]', '', '', b'0', b'0', 0, '', '', '2026-01-01', "
    "'2026-01-01', NULL)",
    "(3, 5, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '-00:00:00.000001', '-12:00:00.9', NULL, "
    "'-00:00:01.999', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
    "NULL, NULL, NULL, '2026-01-01', '2026-01-01', NULL)",
    "(4, NULL, 127, 255, 1, -1.5, 1e10, -1e-300, 0.0000000001, -9999999999, '1000-01-01', '-00:00:00.1', "
    "'-00:00:00.5', '-00:00:01', '-595:00:00.5', '1000-01-01 00:00:00', '2038-01-19 03:14:07.999', "
    "'1970-01-01 00:00:00.000001', '2038-01-19 03:14:07.999', '1970-01-01 00:00:01', 'x', X'FFFFFFFF', "
    "X'', X'', REPEAT('é', 100), '{\"a\": [1, 2.5, null]}', 'x', 'c,a,b', b'0', b'1111111111', 1901, 'x', "
    "'😀', '2026-01-01', '2026-01-01', NULL)",
]


def test_binlog_values_equal_snapshot_values_for_all_types(mariadb, fresh_db, source):
    conn = mariadb.connect(fresh_db)
    run(conn, "SET time_zone = '+08:00'", "SET sql_mode = ''", ALL_TYPES_DDL)  # writer zone must not matter
    table = source.describe_table(TableId(fresh_db, "v"))
    start = source.head_offset()
    for row in ALL_TYPES_ROWS:
        run(conn, "INSERT INTO v VALUES " + row)
    run(conn, "UPDATE v SET ti = ti")  # no-op updates are not logged
    run(conn, "UPDATE v SET ch = CONCAT(IFNULL(ch, ''), '!')")
    stop = source.head_offset()
    _, batches = read_all(source, [table], {table.table_id: start}, stop)
    changes = rows_of(batches)
    assert [op for op, _ in changes] == ["+I"] * 4 + ["-U", "+U"] * 4
    with source.snapshot([table]) as snap:
        snap_data = pa.concat_tables(b.data for b in snap.read(table.table_id)).sort_by("id")
    snapshot = [r for _, r in rows_of([type(batches[0])(table, snap_data)])]
    inserted = [r for op, r in changes if op == "+I"]
    before = [r for op, r in changes if op == "-U"]
    after = [r for op, r in changes if op == "+U"]
    assert [{**r, "ch": None} for r in inserted] == [{**r, "ch": None} for r in before]
    for got, want in zip(after, snapshot):
        assert got == want, {k: (got[k], want[k]) for k in got if got[k] != want[k]}
    # spot checks of the normalised values
    r1, r2, r3, r4 = snapshot
    assert r1["b1"] is True and r3["b1"] is True and r2["b1"] is False
    assert r1["bu"] == Decimal(18446744073709551615)
    assert r1["dec50"] == "-12345678901234567890123456789012345678.1234567890" and r2["dec50"] == "0.0000000000"
    binlog_time = pa.concat_tables(b.data for b in batches).filter(
        pc.equal(pa.concat_tables(b.data for b in batches)[OP_COLUMN], "+U"))
    for col, ints, want in [("tm6", pa.int64(), [-2147483647000, 45296789012, -1, -100000]),
                            ("tm1", pa.int32(), [-1500, 100, -43200900, -500]),
                            ("tm3", pa.int32(), [-1, 86399999, -1999, -2142000500]),
                            ("tm0", pa.int32(), [-3600, 2145600, None, -1])]:
        assert binlog_time[col].combine_chunks().view(ints).to_pylist() == want, col
        assert snap_data[col].combine_chunks().view(ints).to_pylist() == want, col
    assert r1["ts3"] == dt.datetime(2026, 1, 1, 4, 0, 0, 123000, tzinfo=dt.timezone.utc)
    assert r1["bin4"] == b"\x01\x02\x00\x00" and r2["bin4"] == b"\x00" * 4 and r2["vb"] == b""
    assert r1["st"] == ["c", "a"] and r2["st"] == [] and r4["st"] == ["c", "a", "b"] and r3["st"] is None
    assert r1["bit1"] is True and r1["bit10"] == b"\x02\xaa" and r2["bit10"] == b"\x00\x00"
    assert r2["yr"] == 0 and r4["yr"] == 1901
    assert r1["dn"] == dt.date(1970, 1, 1) and r1["dtn"] == dt.datetime(1970, 1, 1) and r1["dz"] is None
    assert r1["f"] == pytest.approx(3.14159, rel=1e-6) and r1["emoji"] == "upd 😀"


def test_time_outside_paimon_range_is_refused_naming_the_column(mariadb, fresh_db, source):
    """Paimon stores TIME as 32-bit milliseconds: a MySQL TIME beyond ±596:31:23.647 cannot be stored. Snapshot and
    binlog both refuse it, naming the column, instead of wrapping it silently."""
    conn = mariadb.connect(fresh_db)
    run(conn, "CREATE TABLE t (id INT PRIMARY KEY, span TIME)", "INSERT INTO t VALUES (1, '596:31:23')")
    table = source.describe_table(TableId(fresh_db, "t"))
    start = source.head_offset()
    run(conn, "INSERT INTO t VALUES (2, '-700:00:00')")
    with source.snapshot([table]) as snap, pytest.raises(SourceError, match=r"column 'span': TIME value -700:00:00"):
        list(snap.read(table.table_id))
    with pytest.raises(SourceError, match="column 'span'.*outside ±596:31:23.647"):
        list(source.read_binlog({table.table_id: table}, {table.table_id: start}, source.head_offset()))


def test_other_character_sets_decode_like_the_snapshot(mariadb, fresh_db, source):
    """python-mysql-replication decodes utf16/utf32/ucs2 with the wrong byte order and leaves unknown names as
    bytes; lakecdc's charset table makes binlog strings equal to snapshot strings."""
    conn = mariadb.connect(fresh_db)
    run(conn, "CREATE TABLE c (id INT PRIMARY KEY, u16 VARCHAR(10) CHARSET utf16, u32 VARCHAR(10) CHARSET utf32, "
              "ucs VARCHAR(10) CHARSET ucs2, gbk VARCHAR(10) CHARSET gbk, cyr VARCHAR(10) CHARSET cp1251, "
              "l1 VARCHAR(10) CHARSET latin1, sj VARCHAR(10) CHARSET sjis, u16le TEXT CHARSET utf16le, "
              "en ENUM('x', 'y') CHARSET latin1, st SET('p', 'q') CHARSET gbk)")
    table = source.describe_table(TableId(fresh_db, "c"))
    start = source.head_offset()
    run(conn, "INSERT INTO c VALUES (1, '😀ab', '😀', 'é', '中文', 'Привет', 'café €', 'ｶﾀｶﾅ', 'ü😀', 'y', 'p,q')")
    _, batches = read_all(source, [table], {table.table_id: start}, source.head_offset())
    with source.snapshot([table]) as snap:
        snapshot = rows_of(snap.read(table.table_id))
    assert rows_of(batches) == snapshot == [("+I", {
        "id": 1, "u16": "😀ab", "u32": "😀", "ucs": "é", "gbk": "中文", "cyr": "Привет", "l1": "café €", "sj": "ｶﾀｶﾅ",
        "u16le": "ü😀", "en": "y", "st": ["p", "q"]})]
