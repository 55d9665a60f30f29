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
from lakecdc.source.connection import connect
from lakecdc.source.text_columns import text_columns
from lakecdc.source.types import table_codecs
from lakecdc.source.wire import read_columns, result_columns
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
