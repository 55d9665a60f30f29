"""Every form a real server writes reaches Paimon exactly, or stops the run with nothing committed: MariaDB's
compressed binlog events (log_bin_compress) and partial row images written by sessions with binlog_row_image NOBLOB
or MINIMAL (event types lakecdc does not read, and MySQL's compressed transactions: tests/test_source_events.py).

Against the private MariaDB (under FULL, MINIMAL and NO_LOG row metadata where the decoding depends on it) and real
Paimon files; each case is compared with MySQL."""

from __future__ import annotations

import contextlib

import pytest

from lakecdc.config import parse_pipeline
from lakecdc.errors import SourceError
from lakecdc.model import TableId
from lakecdc.runtime import run_micro_batch
from lakecdc.sink import PaimonSink
from lakecdc.source import compressed_events
from tests.crosscheck import assert_same_rows

PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: root
  password: ""
  tables: {db}.\\.*
  server-id: 5830
  scan.incremental.snapshot.chunk.key-column: {db}.log:id
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {warehouse}
transform:
  # MySQL's table has no key (so NOBLOB logs whole before images); Paimon's is keyed on id, to compare row for row
  - source-table: {db}.log
    primary-keys: id
pipeline:
  name: forms {db}
"""


@pytest.fixture
def lake(source_server, source_db, tmp_path):
    """(server, db, config): ``docs`` has a primary key and a TEXT column, ``log`` has no key in MySQL (its ids are
    unique; Paimon's table is keyed on them)."""
    source_server.execute("CREATE TABLE docs (id INT PRIMARY KEY, n INT, body TEXT, note VARCHAR(300))",
                          database=source_db)
    source_server.execute("CREATE TABLE log (id INT, n INT, body TEXT)", database=source_db)
    path = tmp_path / "pipeline.yaml"
    path.write_text(PIPELINE.format(port=source_server.port, db=source_db, warehouse=tmp_path / "wh"))
    return source_server, source_db, parse_pipeline(path.read_text())


@contextlib.contextmanager
def global_setting(server, name: str, value):
    old = server.execute(f"SELECT @@GLOBAL.{name}")[0][0]
    server.execute(f"SET GLOBAL {name} = %s", (value,))
    try:
        yield
    finally:
        server.execute(f"SET GLOBAL {name} = %s", (old,))


def session(server, db: str, **settings):
    """A connection to ``db`` whose session sets ``settings`` (SET SESSION name = value)."""
    conn = server.connect(db)
    with conn.cursor() as cur:
        for name, value in settings.items():
            cur.execute(f"SET SESSION {name} = %s", (value,))
    return conn


def run_statements(conn, statements: list[str]) -> None:
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)
    conn.commit()
    conn.close()


def binlog_event_types(server) -> set[str]:
    """The event types of every binlog file of the server, as SHOW BINLOG EVENTS names them."""
    types: set[str] = set()
    for name, *_ in server.execute("SHOW BINARY LOGS"):
        types.update(row[2] for row in server.execute(f"SHOW BINLOG EVENTS IN '{name}'"))
    return types


def latest(config, db: str, table: str):
    return PaimonSink(config.sink.catalog_options).latest_snapshot_id(TableId(db, table))


# ------------------------------------------------------------------------------------------- compressed events


@pytest.mark.parametrize("row_metadata", ["FULL", "MINIMAL", "NO_LOG"])
def test_compressed_events_land_exactly(lake, row_metadata):
    """With log_bin_compress=ON, inserts, updates, deletes (large and small rows) and a DDL, all written as compressed
    events, land in Paimon as MySQL has them."""
    server, db, config = lake
    server.execute("INSERT INTO docs VALUES (1, 1, 'one', 'a'), (2, 2, 'two', 'b')", database=db)
    run_micro_batch(config)
    with global_setting(server, "log_bin_compress", "ON"), global_setting(server, "log_bin_compress_min_len", 10):
        run_statements(server.connect(db), [
            "INSERT INTO docs VALUES (3, 3, REPEAT('x', 5000), 'c'), (4, 4, 'four', REPEAT('y', 300))",
            "UPDATE docs SET n = n + 10, body = CONCAT(body, '!') WHERE id IN (1, 3)",
            "DELETE FROM docs WHERE id = 2",
            "INSERT INTO log VALUES (1, 1, REPEAT('z', 2000)), (2, 1, 'two')",
            "ALTER TABLE docs ADD COLUMN extra VARCHAR(40) /* a comment: long enough to be compressed */",
            "INSERT INTO docs (id, n, body, note, extra) VALUES (5, 5, 'five', 'e', 'set')",
            "UPDATE docs SET extra = 'changed' WHERE id = 4",
        ])
    types = binlog_event_types(server)
    assert {"Write_rows_compressed_v1", "Update_rows_compressed_v1", "Delete_rows_compressed_v1",
            "Query_compressed"} <= types, types
    run_micro_batch(config)
    assert_same_rows(server, config.sink.catalog_options, db, "docs")
    assert_same_rows(server, config.sink.catalog_options, db, "log")


def test_compressed_packet_rewrite_keeps_position_and_checksum():
    """A compressed rows event is rewritten to the plain event with the same end position, its size in the file
    kept for positions, and a valid checksum; a form lakecdc does not know is an error, not a skip."""
    import struct
    import zlib

    from pymysql.protocol import MysqlPacket

    rows = b"\x00" * 3 + b"\x01\x02\x03"
    compressed = bytes([0x81, len(rows)]) + zlib.compress(rows)
    body = b"\x12\x00\x00\x00\x00\x00" + b"\x01\x00" + b"\x02" + b"\x03" + compressed
    header = struct.pack("<IBIIIH", 7, 0xA6, 1, 19 + len(body) + 4, 1234, 0)
    event = header + body
    packet = MysqlPacket(b"\x00" + event + struct.pack("<I", zlib.crc32(event)), None)
    plain = compressed_events.uncompressed_packet(packet)
    data = plain.get_all_data()
    _ts, event_type, _sid, size, end, _flags = struct.unpack_from("<IBIIIH", data, 1)
    assert (event_type, end, size) == (0x17, 1234, len(data) - 1)
    assert data[1 + 19 + 10:-4] == rows
    assert struct.unpack("<I", data[-4:])[0] == zlib.crc32(data[1:-4])
    assert plain.stored_event_size == len(event) + 4

    bad = bytes([0x91, len(rows)]) + zlib.compress(rows)  # algorithm 1: not zlib
    event = header[:9] + struct.pack("<I", 19 + 10 + len(bad)) + header[13:] + body[:10] + bad
    with pytest.raises(SourceError, match="compression algorithm 1"):
        compressed_events.uncompressed_packet(MysqlPacket(b"\x00" + event, None))
    plain_event = MysqlPacket(b"\x00" + struct.pack("<IBIIIH", 7, 0x17, 1, 19, 1234, 0), None)
    assert compressed_events.uncompressed_packet(plain_event) is plain_event


# ------------------------------------------------------------------------------------------ partial row images


@pytest.mark.parametrize("row_metadata", ["FULL", "MINIMAL", "NO_LOG"])
@pytest.mark.parametrize("image,statement,setting", [
    ("NOBLOB", "UPDATE docs SET n = n + 1 WHERE id = 1", "NOBLOB"),  # the TEXT column is left out
    ("NOBLOB", "DELETE FROM docs WHERE id = 1", "NOBLOB"),
    ("MINIMAL", "UPDATE docs SET n = n + 1 WHERE id = 1", "MINIMAL"),
    ("MINIMAL", "INSERT INTO docs (id, n) VALUES (7, 7)", "MINIMAL"),  # body and note: defaults, not logged
    ("MINIMAL", "DELETE FROM docs WHERE id = 1", "MINIMAL"),
])
def test_partial_row_image_stops_before_committing(lake, row_metadata, image, statement, setting):
    server, db, config = lake
    server.execute("INSERT INTO docs VALUES (1, 1, 'one', 'a')", database=db)
    run_micro_batch(config)
    server.execute("INSERT INTO docs VALUES (2, 2, 'two', 'b')", database=db)  # a full image before it
    before = latest(config, db, "docs")
    run_statements(session(server, db, binlog_row_image=image), [statement])
    with pytest.raises(SourceError) as failure:
        run_micro_batch(config)
    message = str(failure.value)
    assert f"{db}.docs" in message and f"binlog_row_image={setting}" in message and "re-snapshot" in message, message
    assert "lacks column(s)" in message and ":" in message.split("ending at ")[1]  # names the binlog position
    assert latest(config, db, "docs") == before  # nothing of the batch committed, not even the row before it


def test_full_image_inserts_under_a_minimal_session_land(lake):
    """MINIMAL logs every column an INSERT sets: an INSERT that sets them all is whole, and lands."""
    server, db, config = lake
    run_micro_batch(config)
    run_statements(session(server, db, binlog_row_image="MINIMAL"),
                   ["INSERT INTO docs VALUES (1, 1, 'one', 'a'), (2, 2, NULL, 'b')"])
    run_micro_batch(config)
    assert_same_rows(server, config.sink.catalog_options, db, "docs")


@pytest.mark.parametrize("row_metadata", ["FULL", "NO_LOG"])
@pytest.mark.parametrize("image", ["NOBLOB", "MINIMAL"])
def test_partial_session_on_a_table_without_key_lands(lake, row_metadata, image):
    """Without a primary key every column identifies the row: MariaDB then logs whole images under NOBLOB and
    MINIMAL too, and the changes land exactly."""
    server, db, config = lake
    server.execute("INSERT INTO log VALUES (1, 1, 'kept text'), (2, 2, NULL), (3, 3, 'not updated')", database=db)
    run_micro_batch(config)
    run_statements(session(server, db, binlog_row_image=image),
                   ["UPDATE log SET n = n + 10 WHERE id < 3", "UPDATE log SET body = 'new', n = 0 WHERE id = 3",
                    "DELETE FROM log WHERE id = 2", "INSERT INTO log VALUES (4, 4, 'four')"])
    run_micro_batch(config)
    assert_same_rows(server, config.sink.catalog_options, db, "log")


def test_after_image_takes_unlogged_columns_from_the_before_image():
    """MySQL's MINIMAL on a table without primary key logs whole before images and only the changed columns after
    (MariaDB logs whole images there): each after row takes the missing columns from its own before row."""
    import pyarrow as pa

    from lakecdc.source.row_images import ImageGaps, fill_after_from_before

    gaps = ImageGaps("update", before=(), after=("body",))
    assert gaps.fillable_after == ("body",) and gaps.unknown == ()
    assert ImageGaps("update", before=("body",), after=("body",)).fillable_after == ()
    changes = pa.table({"id": [1, 1, 2, 3], "body": ["a", None, "b", None], "op": ["-U", "+U", "-D", "+I"]})
    filled = fill_after_from_before(changes, gaps.fillable_after)
    assert filled.column("body").to_pylist() == ["a", "a", "b", "b"]
    assert filled.column("id").to_pylist() == [1, 1, 2, 3]


# ------------------------------------------------------------------------------------ statements with comments


@pytest.mark.parametrize("statement", [
    "/* app:checkout */ INSERT INTO docs VALUES (5, 5, 'five', 'e')",
    "-- a note\nUPDATE docs SET n = n + 1",
    "# a note\nUPDATE docs SET n = n + 1",
    "/*!40000 DELETE FROM docs WHERE id = 1 */",
    "SET STATEMENT max_statement_time = 10 FOR INSERT INTO docs VALUES (6, 6, 'six', 'f')",
    "INSERT /* inline */ INTO docs VALUES (7, 7, 'seven', 'g')",
])
def test_commented_statement_logged_dml_fails_before_committing(lake, statement):
    server, db, config = lake
    server.execute("INSERT INTO docs VALUES (1, 1, 'one', 'a')", database=db)
    run_micro_batch(config)
    before = latest(config, db, "docs")
    run_statements(session(server, db, binlog_format="STATEMENT"), [statement])
    with pytest.raises(SourceError, match=rf"statement-logged change of {db}\.docs .*STATEMENT format"):
        run_micro_batch(config)
    assert latest(config, db, "docs") == before


@pytest.mark.parametrize("row_metadata", ["FULL", "MINIMAL", "NO_LOG"])
def test_commented_and_versioned_ddl_is_applied(lake, row_metadata):
    """DDL behind a comment or inside an executable comment changes the schema history as the server executed it:
    the rows after it decode with the new columns (under MINIMAL / NO_LOG only the history names them)."""
    server, db, config = lake
    server.execute("INSERT INTO docs VALUES (1, 1, 'one', 'a')", database=db)
    run_micro_batch(config)
    run_statements(server.connect(db), [
        "/* migration 42 */ ALTER TABLE docs ADD COLUMN extra INT",
        "INSERT INTO docs VALUES (2, 2, 'two', 'b', 20)",
        "/*!50100 ALTER TABLE docs ADD COLUMN more VARCHAR(10) */",
        "/*M!100100 ALTER TABLE docs DROP COLUMN note */",
        "/*!99999 ALTER TABLE docs DROP COLUMN n */",  # a version above the server's: not executed
        "INSERT INTO docs VALUES (3, 3, 'three', 30, 'x')",
    ])
    run_micro_batch(config)
    assert_same_rows(server, config.sink.catalog_options, db, "docs")


# ------------------------------------------------------------------------------------------------------ triggers


@pytest.fixture
def triggered(lake):
    """A table in another database whose trigger copies each insert into the captured ``docs``."""
    server, db, config = lake
    other = f"{db}_src"
    server.execute(f"CREATE DATABASE `{other}`")
    server.execute(f"CREATE TABLE `{other}`.src (id INT PRIMARY KEY, n INT)")
    server.execute(f"CREATE TRIGGER `{other}`.copy AFTER INSERT ON `{other}`.src FOR EACH ROW "
                   f"INSERT INTO `{db}`.docs (id, n, body, note) VALUES (NEW.id, NEW.n, 'copied', 'trigger')")
    try:
        yield server, db, config, other
    finally:
        server.execute(f"DROP DATABASE `{other}`")


def test_trigger_writes_are_captured_in_row_format(triggered):
    server, db, config, other = triggered
    run_micro_batch(config)
    server.execute(f"INSERT INTO `{other}`.src VALUES (1, 10), (2, 20)")
    run_micro_batch(config)
    assert_same_rows(server, config.sink.catalog_options, db, "docs")
    assert len(server.execute(f"SELECT * FROM `{db}`.docs")) == 2


def test_statement_logged_write_whose_trigger_writes_a_captured_table_fails(triggered):
    """A statement-logged INSERT into an uncaptured table fires its trigger when replayed, so the trigger's rows
    are not in the binlog: the run stops before committing, naming the captured table and the trigger's table."""
    server, db, config, other = triggered
    run_micro_batch(config)
    before = latest(config, db, "docs")
    run_statements(session(server, other, binlog_format="STATEMENT"), ["INSERT INTO src VALUES (3, 30)"])
    with pytest.raises(SourceError, match=rf"statement-logged change of {db}\.docs \(through a trigger of "
                                          rf"{other}\.src\)"):
        run_micro_batch(config)
    assert latest(config, db, "docs") == before


@pytest.mark.parametrize("statement,flavor,version,executed", [
    ("/* a */ INSERT INTO t VALUES ('/* kept */', \"#kept\", `a--b`)", "mysql", (8, 0, 36),
     "INSERT INTO t VALUES ('/* kept */', \"#kept\", `a--b`)"),
    ("UPDATE t SET a = 'it''s -- kept' -- gone\nWHERE b = 1 # gone", "mysql", (8, 0, 36),
     "UPDATE t SET a = 'it''s -- kept'  WHERE b = 1"),
    ("SELECT 5--1", "mysql", (8, 0, 36), "SELECT 5--1"),  # '--' without a space is an operator
    ("/*!40000 ALTER TABLE t DISABLE KEYS */", "mariadb", (10, 11, 19), "ALTER TABLE t DISABLE KEYS"),
    ("/*!80013 ALTER TABLE t ADD c INT */", "mysql", (8, 0, 36), "ALTER TABLE t ADD c INT"),
    ("/*!80013 ALTER TABLE t ADD c INT */", "mariadb", (10, 11, 19), ""),  # MySQL-only version numbers
    ("/*!80040 ALTER TABLE t ADD c INT */", "mysql", (8, 0, 36), ""),  # newer than the server
    ("/*M!100100 ALTER TABLE t ADD c INT */", "mariadb", (10, 11, 19), "ALTER TABLE t ADD c INT"),
    ("/*M!100100 ALTER TABLE t ADD c INT */", "mysql", (8, 0, 36), ""),
])
def test_statements_as_executed(statement, flavor, version, executed):
    from lakecdc.source.sql_text import executed_statement

    assert executed_statement(statement, flavor=flavor, version=version) == executed


def test_set_statement_prefix():
    from lakecdc.source.sql_text import without_set_statement

    assert without_set_statement("SET STATEMENT sql_mode = 'a FOR b', x = 1 FOR DELETE FROM t") == "DELETE FROM t"
    assert without_set_statement("SET @a = 1") == "SET @a = 1"
