"""The snapshot fast path (lakecdc.source.wire + text_columns): rows read from the wire into Arrow columns must equal,
value for value and type for type, what the exact path gives (PyMySQL's row tuples + the column codecs), for every
column type, for NULLs and empty values, for every length encoding up to rows of more than 16 MiB (several packets),
and a streamed result left half-read must not break the connection."""

from __future__ import annotations

import threading

import pyarrow as pa
import pymysql
import pytest

from lakecdc.errors import SourceError
from lakecdc.model import TableId
from lakecdc.source import MySqlSource, MySqlSourceOptions
from lakecdc.source.chunks import ChunkProgress, chunk_key_for
from lakecdc.source import _textrows as _ext
from lakecdc.source.connection import connect
from lakecdc.source.text_columns import text_columns
from lakecdc.source.types import table_codecs
from lakecdc.source.wire import read_columns, result_columns
from tests.conftest import new_database
from tests.test_source_types import COLUMNS, ROWS, insert, writer


def options(mariadb, **kw) -> MySqlSourceOptions:
    return MySqlSourceOptions(hostname=mariadb.host, port=mariadb.port, username=mariadb.user,
                              password=mariadb.password, **kw)


def select_sql(table) -> str:
    columns = ", ".join(f"`{c.name}`" for c in table.columns)
    return f"SELECT {columns} FROM `{table.table_id.database}`.`{table.table_id.table}` ORDER BY 1"


def exact_path(opts, table) -> list[pa.Array]:
    """The snapshot reader's former path: PyMySQL row tuples, then each column's codec."""
    conn = connect(opts)
    try:
        with conn.cursor() as cur:
            cur.execute(select_sql(table))
            rows = cur.fetchall()
    finally:
        conn.close()
    return [codec.to_array(codec.snapshot_values(list(values)))
            for codec, values in zip(table_codecs(table), zip(*rows))]


def fast_path(opts, table, batch_rows=1000):
    """The raw columns of the same SELECT and their decoders."""
    conn = connect(opts, streaming=True)
    try:
        cur = conn.cursor()
        cur.execute(select_sql(table))
        decoders = text_columns(list(table.columns), result_columns(cur).converters)
        blocks = list(read_columns(cur, batch_rows))
        cur.close()
    finally:
        conn.close()
    return decoders, blocks


def test_every_type_decodes_from_the_wire_as_the_exact_path_does(mariadb, fresh_db):
    ddl = ", ".join(f"`{c}` {t}" for c, t, _ in COLUMNS)
    mariadb.execute(f"CREATE TABLE alltypes (id INT PRIMARY KEY, {ddl})", database=fresh_db)
    conn = writer(mariadb, fresh_db)
    with conn.cursor() as cur:
        for k in range(ROWS):
            insert(cur, 1 + k, k)
    conn.close()
    opts = options(mariadb)
    table = MySqlSource(opts).describe_table(TableId(fresh_db, "alltypes"))
    expected = exact_path(opts, table)
    decoders, blocks = fast_path(opts, table)
    assert len(blocks) == 1
    fast = {d.column.name for d in decoders if d.fast is not None}
    # the hot types take the fast path (the rest is decoded exactly, column by column)
    assert {"id", "b1", "ti", "biu", "dec10", "dec38", "dec65", "f", "dbl", "yr", "dt3", "ts6", "vc", "emoji", "l1",
            "gbk", "u16", "tx", "js", "en", "vb", "bl", "bn"} <= fast
    for decoder, raw, want in zip(decoders, blocks[0], expected):
        got = decoder.to_array(raw)
        assert got.type == want.type, decoder.column.name
        assert got.to_pylist() == want.to_pylist(), decoder.column.name
        assert decoder.exact(raw).equals(want), decoder.column.name


def test_length_encodings_nulls_and_rows_longer_than_a_packet(mariadb, fresh_db):
    mariadb.execute("CREATE TABLE big (id INT PRIMARY KEY, a LONGBLOB, b TEXT)", database=fresh_db)
    # field lengths around every length-encoding boundary (1, 2, 3 and 8 byte lengths) and rows of 2-3 packets;
    # row 9's payload is exactly 0xFFFFFF bytes (2 + 4 + 16777209): an empty packet ends it
    lengths = {1: 0, 2: 250, 3: 251, 4: 65535, 5: 65536, 6: 16777215, 7: 16777216, 8: 33554440, 9: 16777209}
    for i, n in lengths.items():
        mariadb.execute(f"INSERT INTO big VALUES ({i}, REPEAT(CHAR(65 + {i} USING binary), {n}), "
                        f"IF({i} % 2, NULL, 'é'))", database=fresh_db)
    mariadb.execute("INSERT INTO big VALUES (10, NULL, '')", database=fresh_db)
    opts = options(mariadb)
    table = MySqlSource(opts).describe_table(TableId(fresh_db, "big"))
    expected = exact_path(opts, table)
    decoders, blocks = fast_path(opts, table, batch_rows=3)
    assert [len(b[0]) for b in blocks] == [3, 3, 3, 1]
    for index, decoder in enumerate(decoders):
        got = pa.concat_arrays([decoder.to_array(block[index]) for block in blocks])
        assert got.equals(expected[index]), decoder.column.name
    sizes = [None if v is None else len(v) for v in pa.concat_arrays([b[1] for b in blocks]).to_pylist()]
    assert sizes == [*lengths.values(), None]


def test_a_result_left_half_read_is_drained_and_the_snapshot_goes_on(mariadb, fresh_db):
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))", database=fresh_db)
    mariadb.execute("INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_20000", database=fresh_db)
    source = MySqlSource(options(mariadb, snapshot_batch_rows=1000))
    table = source.describe_table(TableId(fresh_db, "t"))
    with source.snapshot([table]) as snap:
        batches = snap.read(table.table_id)
        first = next(batches)
        assert first.num_rows == 1000
        batches.close()  # 19,000 rows still on the wire: drained
        key = chunk_key_for(table, source.options)
        assert key is not None and key.unique
        rows = [b for b in snap.read_chunks(table.table_id, key, ChunkProgress.not_started(key), 10**6, 3000)]
        ids = pa.concat_arrays([b.data.column("id").combine_chunks() for b in rows])
        assert ids.to_pylist() == list(range(1, 20001))
        assert snap.progress.done


def test_a_failing_read_raises_in_the_caller(mariadb, fresh_db):
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY)", database=fresh_db)
    source = MySqlSource(options(mariadb))
    table = source.describe_table(TableId(fresh_db, "t"))
    with source.snapshot([table]) as snap:
        mariadb.execute("DROP TABLE t", database=fresh_db)
        with pytest.raises(SourceError, match=f"snapshot of {fresh_db}.t"):
            list(snap.read(table.table_id))


def test_the_wire_reader_leaves_pymysql_in_step(mariadb):
    conn = mariadb.connect("mysql", cursorclass=pymysql.cursors.SSCursor)
    try:
        for _ in range(3):  # results that fit in PyMySQL's read-ahead buffer, then the next statement
            cur = conn.cursor()
            cur.execute("SELECT seq, NULL, '' FROM seq_1_to_5")
            columns = list(read_columns(cur, 2))
            cur.close()
            assert [c[0].to_pylist() for c in columns] == [[b"1", b"2"], [b"3", b"4"], [b"5"]]
            assert columns[0][1].null_count == 2 and columns[0][2].to_pylist() == [b"", b""]
        with conn.cursor(pymysql.cursors.Cursor) as plain:
            plain.execute("SELECT 42")
            assert plain.fetchall() == ((42,),)
    finally:
        conn.close()


def test_closing_the_snapshot_mid_read_stops_its_read_thread(mariadb, fresh_db):
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))", database=fresh_db)
    mariadb.execute("INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_50000", database=fresh_db)
    source = MySqlSource(options(mariadb, snapshot_batch_rows=500))
    table = source.describe_table(TableId(fresh_db, "t"))
    with pytest.raises(RuntimeError, match="the caller failed"):
        with source.snapshot([table]) as snap:
            for _ in snap.read(table.table_id):
                raise RuntimeError("the caller failed")  # the read thread is a batch ahead, rows still coming
    assert not [t for t in threading.enumerate() if t.name == "lakecdc-snapshot-read"]
    with source.snapshot([table]) as snap:  # the server is fine and the next snapshot reads everything
        assert sum(b.num_rows for b in snap.read(table.table_id)) == 50000


# ------------------------------------------------------------------------------------------------------------------
# The C scanner (TextRows in lakecdc/source/_textrows.c) on bytes the server sent


def raw_result(mariadb, database: str, sql: str) -> tuple[bytes, int, int]:
    """The row packets of ``sql``'s result as the server sent them, up to and with its EOF packet: (bytes, the
    sequence id of the first row packet, the column count). Read off the socket after PyMySQL read the column
    descriptions, the way lakecdc.source.wire reads them."""
    conn = mariadb.connect(database, cursorclass=pymysql.cursors.SSCursor)
    try:
        cur = conn.cursor()
        cur.execute(sql)
        count, seq = cur._result.field_count, conn._next_seq_id
        data = bytearray(conn._rfile.read1(1 << 16))
        at, continued = 0, False
        while True:  # walk the packets until the EOF packet (a short payload starting 0xFE, not a row's tail)
            while len(data) < at + 4 or len(data) < at + 4 + int.from_bytes(data[at:at + 3], "little"):
                data += conn._rfile.raw.read(1 << 20)
            size = int.from_bytes(data[at:at + 3], "little")
            if not continued and size < 9 and data[at + 4] == 0xFE:
                return bytes(data[:at + 4 + size]), seq, count
            at, continued = at + 4 + size, size == 0xFFFFFF
    finally:
        cur._result.unbuffered_active = False  # read here, not by PyMySQL: the connection is closed unread
        conn._force_close()


def scan_all(raw: bytes, seq: int, count: int, cuts: list[int], max_rows: int = 1 << 40) -> tuple[list, list]:
    """Scan ``raw`` as it would arrive in pieces ending at ``cuts`` (the scanner must stop at a packet it does not
    have whole and go on from there): the blocks of at most ``max_rows`` rows as pyarrow arrays, and the final
    (status, position)."""
    rows = _ext.TextRows(count)
    blocks, pos, ends = [], 0, sorted(set(cuts) | {len(raw)})
    for end in ends:
        while True:
            status, pos, seq, _ = rows.scan(raw, pos, end, seq, max_rows, 1 << 30)
            if status == _ext.SCAN_FULL:
                blocks.append(taken(rows))
                continue
            break
        if status == _ext.SCAN_END:
            break
        assert status == _ext.SCAN_MORE, status
    if rows.num_rows:
        blocks.append(taken(rows))
    return blocks, [status, pos]


def taken(rows) -> list[pa.Array]:
    n, columns = rows.take()
    return [pa.Array.from_buffers(pa.binary(), n, [None if v is None else pa.py_buffer(v), pa.py_buffer(o),
                                                   pa.py_buffer(d)], null_count=nulls)
            for v, nulls, o, d in columns]


def joined(blocks: list) -> list[list]:
    return [pa.concat_arrays([b[i] for b in blocks]).to_pylist() for i in range(len(blocks[0]))]


def expected_values(mariadb, database: str, sql: str) -> list[list]:
    """The same result through PyMySQL, each value as its text-protocol bytes (None for NULL)."""
    conn = mariadb.connect(database, conv={})  # no converters: every value stays bytes or str
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            rows = cur.fetchall()
    finally:
        conn.close()
    return [[None if v is None else (v if isinstance(v, bytes) else v.encode()) for v in column]
            for column in zip(*rows)]


MANY = 400  # columns of the wide table


@pytest.fixture(scope="module")
def scanner_db(mariadb):
    """Tables whose rows exercise the scanner: NULLs and empty strings in every position, each length encoding
    (1 byte, 0xFC + 2, 0xFD + 3, and fields of 16 MiB and more, the 0xFE + 8 form), rows longer than a packet
    (16 MiB - 1 bytes of payload) spanning two and three packets, and a row of 400 columns."""
    with new_database(mariadb) as db:
        mariadb.execute("CREATE TABLE lens (id INT PRIMARY KEY, a LONGBLOB, b TEXT, c VARCHAR(10))", database=db)
        lengths = [0, 1, 250, 251, 252, 65535, 65536, 70000, 16777215, 16777216, 20000000, 33554440]
        for i, n in enumerate(lengths):
            mariadb.execute(f"INSERT INTO lens VALUES ({i + 1}, REPEAT('x', {n}), "
                            f"IF({i} % 3 = 0, NULL, IF({i} % 3 = 1, '', 'é')), IF({i} % 2, NULL, ''))", database=db)
        mariadb.execute("INSERT INTO lens VALUES (100, NULL, NULL, NULL), (101, '', '', '')", database=db)
        columns = ", ".join(f"c{i} VARCHAR(3)" for i in range(MANY))
        mariadb.execute(f"CREATE TABLE wide (id INT PRIMARY KEY, {columns})", database=db)
        for r in range(5):
            values = ", ".join("NULL" if (i + r) % 3 == 0 else "''" if (i + r) % 3 == 1 else f"'{i % 1000}'"
                               for i in range(MANY))
            mariadb.execute(f"INSERT INTO wide VALUES ({r}, {values})", database=db)
        yield db


@pytest.mark.parametrize("table", ["lens", "wide"])
def test_the_scanner_gives_the_servers_fields_however_the_bytes_arrive(mariadb, scanner_db, table):
    sql = f"SELECT * FROM {table} ORDER BY id"
    raw, seq, count = raw_result(mariadb, scanner_db, sql)
    want = expected_values(mariadb, scanner_db, sql)
    whole, end = scan_all(raw, seq, count, [])
    assert end == [_ext.SCAN_END, len(raw) - 9]  # stopped at the EOF packet (5-byte payload)
    assert joined(whole) == want
    # every row reported its nulls and empty strings apart
    assert sum(c.null_count for c in whole[0]) == sum(v is None for column in want for v in column)
    # the bytes arriving in pieces: cut inside packet headers, inside fields, inside a 16 MiB row's packets, and
    # block sizes that end blocks anywhere
    step = max(1, len(raw) // 97)
    cuts = sorted({*range(1, len(raw), step), *range(1, 12), *(len(raw) - k for k in range(1, 12))})
    for max_rows in (1, 3, 1000):
        blocks, end = scan_all(raw, seq, count, cuts, max_rows)
        assert end == [_ext.SCAN_END, len(raw) - 9]
        assert joined(blocks) == want
        assert [len(b[0]) for b in blocks] == [min(max_rows, len(want[0]) - i) for i in
                                               range(0, len(want[0]), max_rows)]


def test_the_scanner_reports_protocol_errors_in_the_servers_bytes(mariadb, scanner_db):
    raw, seq, count = raw_result(mariadb, scanner_db, "SELECT id, c FROM lens ORDER BY id")
    first = 4 + int.from_bytes(raw[:3], "little")  # the second packet's header
    rows = _ext.TextRows(count)

    def scan(data: bytes, start_seq: int = seq):
        rows.clear()
        return rows.scan(data, 0, len(data), start_seq, 1 << 40, 1 << 30)

    # a packet out of sequence: the scan stops at it and names the id it got
    bad = bytearray(raw)
    bad[first + 3] = (seq + 7) % 256
    assert scan(bytes(bad)) == (_ext.SCAN_SEQUENCE, first, (seq + 1) % 256, (seq + 7) % 256)
    assert rows.num_rows == 0  # rows before the error are dropped: the connection is closed
    assert scan(raw, (seq + 1) % 256)[0] == _ext.SCAN_SEQUENCE
    # the first row's second field longer than the row (fewer fields), a row with an extra field, a 0xFF length
    row = bytearray(raw[4:first])
    id_field = 1 + row[0]
    longer = row[:id_field] + bytes([row[id_field] + 5]) + row[id_field + 1:]
    extra = row + b"\x01z"
    invalid = row[:id_field] + b"\xff" + row[id_field + 1:]

    def packet(payload: bytes) -> bytes:
        return len(payload).to_bytes(3, "little") + bytes([seq]) + payload

    assert scan(packet(longer))[0] == _ext.SCAN_FEWER
    assert scan(packet(extra))[0] == _ext.SCAN_MORE_FIELDS
    assert scan(packet(invalid))[0] == _ext.SCAN_BAD_LENGTH
    assert scan(packet(bytes(row[:id_field])))[0] == _ext.SCAN_FEWER  # the row ends before its second field
    # an error packet ends the result like the EOF packet; the scan stops at its header
    error = packet(b"\xff\x15\x05#HY000boom")
    assert scan(raw[:first] + error[:3] + bytes([(seq + 1) % 256]) + error[4:])[:2] == (_ext.SCAN_END, first)


def test_an_error_in_the_middle_of_a_result_is_the_servers_and_the_connection_goes_on(mariadb):
    conn = mariadb.connect("mysql", cursorclass=pymysql.cursors.SSCursor)
    try:
        cur = conn.cursor()
        cur.execute("SELECT seq, REPEAT('x', 100) FROM seq_1_to_5000000")
        columns = read_columns(cur, 1000)
        assert len(next(columns)[0]) == 1000
        mariadb.execute(f"KILL QUERY {conn.thread_id()}")
        with pytest.raises(pymysql.MySQLError) as raised:
            for _ in columns:  # the rows already sent, then the server's error packet
                pass
        assert raised.value.args[0] == 1317  # ER_QUERY_INTERRUPTED
        cur.close()
        with conn.cursor(pymysql.cursors.Cursor) as plain:
            plain.execute("SELECT 42")
            assert plain.fetchall() == ((42,),)
    finally:
        conn.close()


def test_a_statement_with_several_results_leaves_the_next_ones_to_pymysql(mariadb, fresh_db):
    """A CALL's results: the server sends the next result (and the CALL's closing OK packet) right behind the first
    one's EOF packet, in the same socket read; those bytes must reach PyMySQL, not be dropped with the reader's
    buffer (PyMySQL would then wait for packets the server already sent: read_timeout turns that wait into an
    error instead of a hang)."""
    mariadb.execute("CREATE PROCEDURE two() BEGIN SELECT seq, NULL FROM seq_1_to_3; "
                    "SELECT CONCAT('r', seq) FROM seq_1_to_2; END", database=fresh_db)
    conn = mariadb.connect(fresh_db, cursorclass=pymysql.cursors.SSCursor, read_timeout=30)
    try:
        for _ in range(2):
            cur = conn.cursor()
            cur.execute("CALL two()")
            first = list(read_columns(cur, 10))
            assert [c.to_pylist() for c in first[0]] == [[b"1", b"2", b"3"], [None, None, None]]
            assert cur._result.has_next
            assert cur.nextset()  # the second result's header, read by PyMySQL
            second = list(read_columns(cur, 10))
            assert second[0][0].to_pylist() == [b"r1", b"r2"]
            cur.close()  # the CALL's OK packet
        with conn.cursor(pymysql.cursors.Cursor) as plain:
            plain.execute("SELECT 42")
            assert plain.fetchall() == ((42,),)
    finally:
        conn.close()
