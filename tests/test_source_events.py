"""Every event the server sends reaches a decision, proven through the real stream: a test-only TCP proxy
(tests/binlog_proxy.py) between lakecdc and the private MariaDB rewrites the binlog dump as it passes.

- An event of a type lakecdc does not know, put where a transaction's rows events (V1 and MariaDB's compressed
  forms), its statement or its compressed statement were, stops the run with an error naming the type, the binlog
  position and what to do; nothing of the run is committed (the Paimon table and its checkpoint stay as they were);
  a later run straight to the server then lands everything, since the checkpoint did not move.
- MySQL 8's compressed transactions (binlog_transaction_compression: one TRANSACTION_PAYLOAD event per transaction,
  zstd) are decoded: real rows events of the test server (presenting itself as MySQL 8), wrapped by the proxy into
  payload events laid out as MySQL writes them (inside: BEGIN, table maps, V2 rows events, Xid; no checksums),
  land exactly, with the checkpoint at the payload's end; a payload lakecdc cannot decode stops the run like an
  unknown type.
- The statement-logging events that only feed a statement (INTVAR, RAND, USER_VAR, the file blocks of LOAD DATA)
  are passed over when the statement is not a captured table's.
"""

from __future__ import annotations

import contextlib

import pytest

from lakecdc.config import parse_pipeline
from lakecdc.errors import SourceError
from lakecdc.model import BinlogOffset, TableId
from lakecdc.runtime import run_micro_batch
from lakecdc.runtime.checkpoint import read_checkpoint
from lakecdc.sink import PaimonSink
from lakecdc.source.activity import EVERYTHING, scan_activity
from lakecdc.source.options import MySqlSourceOptions
from tests.binlog_proxy import (ROWS_V1_TO_V2, BinlogProxy, PayloadWrapper, TypeRewriter, event_type,
                                payload_event, query_event, with_type)
from tests.crosscheck import assert_same_rows
from tests.test_source_binlog_forms import global_setting

UNKNOWN = 0x7F

PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: root
  password: ""
  tables: {db}.\\.*
  server-id: 5840
  scan.incremental.snapshot.chunk.key-column: {db}.log:id
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {warehouse}
pipeline:
  name: events {db}
"""


@pytest.fixture
def lake(source_server, source_db, tmp_path):
    """(server, db, config(port)): ``items`` has a primary key, ``log`` none (an append table: inserts only);
    ``config(port)`` is the pipeline read from ``port`` (the server's, or a proxy's), with one warehouse."""
    source_server.execute("CREATE TABLE items (id INT PRIMARY KEY, v INT, note VARCHAR(300))", database=source_db)
    source_server.execute("CREATE TABLE log (id INT, note VARCHAR(300))", database=source_db)
    source_server.execute("INSERT INTO items VALUES (1, 10, 'a'), (2, 20, 'b'), (3, 30, 'c')", database=source_db)

    def config(port: int):
        return parse_pipeline(PIPELINE.format(port=port, db=source_db, warehouse=tmp_path / "wh"))

    return source_server, source_db, config


def head(server) -> BinlogOffset:
    file, pos = server.execute("SHOW MASTER STATUS")[0][:2]
    return BinlogOffset(file, int(pos))


def state(config, db: str, table: str):
    """The Paimon table's latest snapshot id and its checkpoint properties."""
    sink = PaimonSink(config.sink.catalog_options)
    return sink.latest_snapshot_id(TableId(db, table)), dict(sink.checkpoint(TableId(db, table)))


def statements(server, db: str, sql: list[str], compressed: bool = False) -> tuple[BinlogOffset, BinlogOffset]:
    """Runs ``sql`` (each statement its own transaction; ``compressed``: with MariaDB's log_bin_compress on);
    returns the binlog head before and after."""
    before = head(server)
    with (global_setting(server, "log_bin_compress", "ON") if compressed else contextlib.nullcontext()), \
            (global_setting(server, "log_bin_compress_min_len", 10) if compressed else contextlib.nullcontext()):
        conn = server.connect(db)
        with conn.cursor() as cur:
            for statement in sql:
                cur.execute(statement)
        conn.close()
    return before, head(server)


def fails_through(proxy_rewrite, server, config, match: str):
    """Runs a micro-batch through a proxy that rewrites with ``proxy_rewrite``: it must fail with SourceError
    matching ``match``; returns the message."""
    with BinlogProxy(server.port, proxy_rewrite) as proxy:
        with pytest.raises(SourceError, match=match) as failure:
            run_micro_batch(config(proxy.port))
        assert proxy.dumps >= 1
    return str(failure.value)


# --------------------------------------------------------------------------------------- unknown event types

KINDS = {
    # kind: (event types the server writes for it, statement, MariaDB's compressed forms on)
    "write rows": ({0x17}, "INSERT INTO items VALUES (7, 70, 'g'), (8, 80, 'h')", False),
    "update rows": ({0x18}, "UPDATE items SET v = v + 1 WHERE id < 3", False),
    "delete rows": ({0x19}, "DELETE FROM items WHERE id = 2", False),
    "compressed write rows": ({0xA6}, "INSERT INTO items VALUES (7, 70, REPEAT('g', 200))", True),
    "compressed update rows": ({0xA7}, "UPDATE items SET note = REPEAT('u', 200) WHERE id < 3", True),
    "compressed delete rows": ({0xA8}, "DELETE FROM items WHERE id = 2", True),
    "query (DDL)": ({0x02}, "ALTER TABLE items ADD COLUMN w INT", False),
    "compressed query (DDL)": ({0xA5}, "ALTER TABLE items ADD COLUMN w INT /* long enough to be compressed */", True),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_an_unknown_event_type_stops_the_run_with_nothing_committed(lake, kind):
    """One transaction's event becomes type 0x7F on its way to lakecdc, between two ordinary transactions."""
    server, db, config = lake
    types, statement, compressed = KINDS[kind]
    direct = config(server.port)
    run_micro_batch(direct)  # the snapshot
    server.execute("INSERT INTO items VALUES (100, 1, 'before'), (101, 1, 'before')", database=db)
    after, until = statements(server, db, [statement], compressed)
    server.execute("INSERT INTO items (id, v, note) VALUES (102, 1, 'after')", database=db)
    before = state(direct, db, "items")

    rewriter = TypeRewriter(types, UNKNOWN, after.pos, until.pos)
    message = fails_through(rewriter, server, config, match="type 127 \\(0x7f\\), which lakecdc does not read")
    assert len(rewriter.rewritten) == 1  # the proxy met the event once, in the one dump of the run
    assert f"{until.file}:{rewriter.rewritten[0]}" in message and "Nothing from this point on is committed" in message
    assert state(direct, db, "items") == before  # no Paimon commit, the checkpoint where it was

    run_micro_batch(direct)  # straight to the server: from the same checkpoint, everything lands
    assert_same_rows(server, direct.sink.catalog_options, db, "items")


def test_the_activity_scan_counts_an_unknown_event_for_every_table(lake):
    """The sensor's scan cannot read an unknown event's rows: it counts it as a change of every table, so the run
    that reports it is started."""
    server, db, config = lake
    after, until = statements(server, db, ["INSERT INTO items VALUES (9, 90, 'i')"])
    options = config(server.port).source
    items = TableId(db, "items")
    assert set(scan_activity(options, {items}, after, until).changed) == {items}
    with BinlogProxy(server.port, TypeRewriter({0x17}, UNKNOWN, after.pos, until.pos)) as proxy:
        proxied = MySqlSourceOptions(**{**vars(options), "port": proxy.port})
        assert set(scan_activity(proxied, {TableId(db, "log")}, after, until).changed) == {EVERYTHING}


def test_statement_logging_events_elsewhere_are_passed_over(lake, tmp_path):
    """A writer logging statements (binlog_format STATEMENT) into a table the pipeline does not capture writes
    INTVAR, RAND and USER_VAR events and, for LOAD DATA, BEGIN_LOAD_QUERY and APPEND_BLOCK events: none carries
    a captured table's rows (the statements they feed are judged themselves), so the run goes on."""
    server, db, config = lake
    direct = config(server.port)
    run_micro_batch(direct)
    other = f"{db}_elsewhere"
    server.execute(f"CREATE DATABASE `{other}`")
    try:
        server.execute(f"CREATE TABLE `{other}`.t (id INT AUTO_INCREMENT PRIMARY KEY, r DOUBLE, u INT, s TEXT)")
        data = tmp_path / "big.tsv"
        data.write_text("".join(f"\\N\t0\t{i}\t{'x' * 200}\n" for i in range(3000)))  # several file blocks
        start = head(server)
        conn = server.connect(other, local_infile=True)
        with conn.cursor() as cur:
            cur.execute("SET SESSION binlog_format = 'STATEMENT'")
            cur.execute("SET @u = 7")
            cur.execute("INSERT INTO t (r, u) VALUES (RAND(), @u)")
            cur.execute(f"LOAD DATA LOCAL INFILE '{data}' INTO TABLE t")
        conn.close()
        server.execute("INSERT INTO items VALUES (9, 90, 'i')", database=db)
        logged = {row[2] for row in server.execute(f"SHOW BINLOG EVENTS IN '{start.file}' FROM {start.pos}")}
        assert {"Intvar", "RAND", "User var", "Begin_load_query", "Append_block", "Execute_load_query"} <= logged
        run_micro_batch(direct)
        assert_same_rows(server, direct.sink.catalog_options, db, "items")
    finally:
        server.execute(f"DROP DATABASE `{other}`")


def test_every_event_type_is_decided():
    """Each type python-mysql-replication parses is read by the binlog reader (its class asked for), ignorable, or
    delivered to it to stop at; types it does not parse arrive as NotImplementedEvent."""
    from lakecdc.source.binlog import READ_EVENT_CLASSES
    from lakecdc.source.connection import library_event_classes, undecided_event_classes
    from lakecdc.source.event_types import READ, is_ignorable, unread_event_problem

    for event_type_, cls in library_event_classes().items():
        if event_type_ in READ:
            assert cls in READ_EVENT_CLASSES, (event_type_, cls)
        else:
            assert is_ignorable(event_type_) or cls in undecided_event_classes(), (event_type_, cls)
    assert undecided_event_classes()[0].__name__ == "NotImplementedEvent"
    assert unread_event_problem(0x7F, "b.000001:9", flags=0x80) is None  # the server's LOG_EVENT_IGNORABLE_F
    assert unread_event_problem(0x1A, "b.000001:9", flags=0x80)  # an INCIDENT never passes


# ----------------------------------------------------------------------------- MySQL 8 compressed transactions


@pytest.mark.parametrize("row_metadata", ["MYSQL8"])
def test_compressed_transactions_land_exactly(lake, row_metadata):
    """Inserts, updates, deletes, a transaction over both tables and a large one (30,000 rows in many rows
    events), each as one TRANSACTION_PAYLOAD event: Paimon equals MySQL, the checkpoint is the last payload's end,
    the events inside it start where the payload starts in the file, and the sensor's scan attributes each
    payload to its tables."""
    from lakecdc.source.connection import event_start, open_binlog_stream
    from pymysqlreplication.row_event import WriteRowsEvent

    server, db, config = lake
    direct = config(server.port)
    run_micro_batch(direct)
    after, until = statements(server, db, [
        "INSERT INTO items VALUES (10, 100, 'j'), (11, 110, 'k')",
        "UPDATE items SET v = v * 2, note = CONCAT(note, '!') WHERE id IN (1, 10)",
        "DELETE FROM items WHERE id = 2",
        "BEGIN", "INSERT INTO log VALUES (1, 'one'), (2, 'two')", "UPDATE items SET v = 0 WHERE id = 3",
        "INSERT INTO log VALUES (3, 'three')", "COMMIT",
        "INSERT INTO items SELECT 1000 + seq, seq, REPEAT('z', 50) FROM seq_1_to_30000",
    ])
    wrapper = PayloadWrapper(after.pos, until.pos)
    with BinlogProxy(server.port, wrapper) as proxy:
        result = run_micro_batch(config(proxy.port))
        assert len(wrapper.wrapped) == 5
        assert result.tables[TableId(db, "items")].rows_written > 30_000
        # inner events: each ends where its payload ends and starts where it starts
        stream = open_binlog_stream(config(proxy.port).source, only_events=[WriteRowsEvent], log_file=after.file,
                                    log_pos=after.pos, resume_stream=True, blocking=False, is_mariadb=False,
                                    server_id=5841)
        try:
            seen = {(event_start(ev), ev.packet.log_pos) for ev in stream if ev.packet.log_pos <= until.pos}
        finally:
            stream.close()
        assert seen <= set(wrapper.wrapped) and len(seen) == 3  # the inserts' payloads
        # the sensor's scan reads inside the payloads too: each table exactly, none counted as unknown
        scan = scan_activity(config(proxy.port).source, {TableId(db, "items"), TableId(db, "log")}, after, until)
        log_commit = BinlogOffset(until.file, wrapper.wrapped[3][1])  # the transaction over both tables
        assert scan.changed == {TableId(db, "items"): until, TableId(db, "log"): log_commit}
    for table in ("items", "log"):
        assert_same_rows(server, direct.sink.catalog_options, db, table)
        checkpoint = read_checkpoint(state(direct, db, table)[1])
        assert (checkpoint.offset.file, checkpoint.offset.pos) == (until.file, until.pos)
    server.execute("INSERT INTO items VALUES (12, 120, 'l')", database=db)  # and straight to the server after it
    run_micro_batch(direct)
    assert_same_rows(server, direct.sink.catalog_options, db, "items")


def _unknown_compression(wrapper: PayloadWrapper):
    def rewrite(event: bytes) -> list[bytes]:
        out = wrapper(event)
        return [e[:19] + bytes([2, 1, 7]) + e[22:] if event_type(e) == 0x28 else e for e in out]
    return rewrite


def _corrupt_zstd(wrapper: PayloadWrapper):
    def rewrite(event: bytes) -> list[bytes]:
        out = wrapper(event)
        return [e.replace(b"\x28\xb5\x2f\xfd", b"\x28\xb5\x2f\xfe", 1) if event_type(e) == 0x28 else e for e in out]
    return rewrite


def _unknown_inner_type(events: list[bytes]) -> list[bytes]:
    return [with_type(e, UNKNOWN) if event_type(e) in ROWS_V1_TO_V2.values() else e for e in events]


_PAYLOAD = r"TRANSACTION_PAYLOAD_EVENT, type 40 \(0x28\)\) could not be decoded: "
UNDECODABLE = {
    "compression type": _PAYLOAD + "its compression type is 7",
    "corrupt": _PAYLOAD + "its compressed data is corrupt",
    "unknown event inside": r"type 127 \(0x7f\), which lakecdc does not read",
}


@pytest.mark.parametrize("row_metadata", ["MYSQL8"])
@pytest.mark.parametrize("problem", list(UNDECODABLE))
def test_a_payload_that_cannot_be_decoded_stops_the_run(lake, row_metadata, problem):
    server, db, config = lake
    direct = config(server.port)
    run_micro_batch(direct)
    server.execute("INSERT INTO items VALUES (100, 1, 'before')", database=db)
    after, until = statements(server, db, ["INSERT INTO items VALUES (7, 70, 'g')"])
    before = state(direct, db, "items")
    wrapper = PayloadWrapper(after.pos, until.pos, inner=_unknown_inner_type if problem.startswith("unknown") else None)
    rewrite = {"compression type": _unknown_compression, "corrupt": _corrupt_zstd}.get(problem, lambda w: w)(wrapper)
    message = fails_through(rewrite, server, config, match=UNDECODABLE[problem])
    assert wrapper.wrapped and f"{until.file}:{wrapper.wrapped[0][1]}" in message
    assert state(direct, db, "items") == before
    run_micro_batch(direct)
    assert_same_rows(server, direct.sink.catalog_options, db, "items")


def test_payload_layout_and_positions():
    """A payload event as MySQL lays it out (fields in MySQL's order, padded with a field of an unknown type) is
    read back into its events, each with the payload's end position, its start at the payload's start and a valid
    checksum; no compression (255) is read too."""
    import struct
    import zlib

    from pymysql.protocol import MysqlPacket

    from lakecdc.source.compressed_events import payload_packets

    xid = struct.pack("<IBIIIH", 5, 0x10, 1, 27, 0, 0) + struct.pack("<Q", 42)
    inner = [query_event(b"BEGIN", xid), xid]
    for compression in (0, 255):
        event = payload_event(inner, inner[0], end=5000, size=400, compression=compression)
        event = event[:9] + struct.pack("<I", len(event) + 4) + event[13:]
        event += struct.pack("<I", zlib.crc32(event))
        assert len(event) == 400
        packets = list(payload_packets(MysqlPacket(b"\x00" + event, None)))
        assert [p.get_all_data()[5] for p in packets] == [0x02, 0x10]
        for packet, original in zip(packets, inner):
            data = packet.get_all_data()[1:]
            _ts, _type, _sid, size, end, _flags = struct.unpack_from("<IBIIIH", data)
            assert (size, end, packet.stored_event_size) == (len(data), 5000, 400)
            assert data[19:-4] == original[19:] and struct.unpack("<I", data[-4:])[0] == zlib.crc32(data[:-4])
