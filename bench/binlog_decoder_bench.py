"""Micro-benchmark: decoding binlog rows events of an orders table, python-mysql-replication's per-row Python path
(``ev.rows``) against lakecdc's columnar decoder (lakecdc/source/rows_decoder.py) producing Arrow change batches.

Starts its own private MariaDB (tests/mariadb_server.py), writes 1,000,000 row changes by default (half inserts, 30 %
updates, 20 % deletes, 1,000 rows per transaction), then reads the same binlog range three times:

- ``stream only``: the events are fetched and parsed by python-mysql-replication, rows left undecoded (the floor
  both decoders share: transport, event headers, table maps);
- ``python-mysql-replication``: ``ev.rows`` of every rows event (decode only, no Arrow);
- ``lakecdc columnar``: ``decode_rows_event`` of every rows event and ``build_change_batch`` every 50,000 change
  rows, i.e. finished Arrow change batches (op and op_ts columns, UPDATE pairs, SourceTable types).

Usage: .venv/bin/python -m bench.binlog_decoder_bench [CHANGES]   (default 1,000,000)
"""

from __future__ import annotations

import sys
import time

from lakecdc.model import TableId
from lakecdc.source.charsets import install_binlog_decoding
from lakecdc.source.connection import connect
from lakecdc.source.options import MySqlSourceOptions
from lakecdc.source.rows_decoder import build_change_batch, columnar_available, decode_rows_event
from lakecdc.source.schema import describe_table
from tests.mariadb_server import MariaDBServer

TXN_ROWS = 1000
FLUSH_ROWS = 50_000  # like binlog.FLUSH_ROWS


def write_changes(server: MariaDBServer, changes: int) -> tuple[str, int]:
    """Inserts, updates and deletes on bench.orders; returns the binlog position before them."""
    server.execute("CREATE DATABASE bench")
    server.execute(
        "CREATE TABLE bench.orders (id BIGINT NOT NULL PRIMARY KEY, customer_id INT NOT NULL, "
        "product VARCHAR(100) NOT NULL, qty SMALLINT NOT NULL, price DECIMAL(10,2) NOT NULL, "
        "status ENUM('new','paid','shipped','cancelled') NOT NULL, note VARCHAR(255) NULL, "
        "created_at DATETIME(3) NOT NULL, updated_at TIMESTAMP(3) NULL)")
    inserts, updates = changes // 2, changes * 3 // 10
    deletes = changes - inserts - updates
    head = server.execute("SHOW MASTER STATUS")[0]
    conn = server.connect("bench")
    with conn.cursor() as cur:
        for lo in range(1, inserts + 1, TXN_ROWS):
            hi = min(lo + TXN_ROWS - 1, inserts)
            cur.execute(
                "INSERT INTO orders SELECT seq, seq % 9973, CONCAT('product-', seq % 1000), 1 + seq % 7, "
                "(seq % 10000) / 100, ELT(1 + seq % 4, 'new', 'paid', 'shipped', 'cancelled'), "
                "IF(seq % 3 = 0, NULL, CONCAT('note ', seq)), "
                "TIMESTAMP'2026-01-01 00:00:00' + INTERVAL (seq % 86400) SECOND + INTERVAL (seq % 1000) * 1000 "
                f"MICROSECOND, NULL FROM seq_{lo}_to_{hi}")
        for lo in range(1, updates + 1, TXN_ROWS):
            hi = min(lo + TXN_ROWS - 1, updates)
            cur.execute("UPDATE orders SET price = price + 1, status = 'paid', updated_at = NOW(3) "
                        f"WHERE id BETWEEN {lo} AND {hi}")
        for lo in range(inserts - deletes + 1, inserts + 1, TXN_ROWS):
            hi = min(lo + TXN_ROWS - 1, inserts)
            cur.execute(f"DELETE FROM orders WHERE id BETWEEN {lo} AND {hi}")
    conn.close()
    return head[0], int(head[1])


def stream(server: MariaDBServer, log_file: str, log_pos: int):
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    return BinLogStreamReader(
        connection_settings={"host": "127.0.0.1", "port": server.port, "user": "root", "passwd": ""},
        server_id=5999, log_file=log_file, log_pos=log_pos, resume_stream=True, blocking=False,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent], only_schemas=["bench"],
        only_tables=["orders"])


def time_stream_only(server, log_file, log_pos) -> tuple[float, int]:
    started = time.perf_counter()
    events = 0
    reader = stream(server, log_file, log_pos)
    for _event in reader:
        events += 1
    reader.close()
    return time.perf_counter() - started, events


def time_library(server, log_file, log_pos) -> tuple[float, int]:
    started = time.perf_counter()
    changes = 0
    reader = stream(server, log_file, log_pos)
    for event in reader:
        changes += len(event.rows)
    reader.close()
    return time.perf_counter() - started, changes


def time_columnar(server, log_file, log_pos, table) -> tuple[float, int, int]:
    started = time.perf_counter()
    changes = rows_out = 0
    pending, pending_rows = [], 0
    reader = stream(server, log_file, log_pos)
    for event in reader:
        decoded = decode_rows_event(event, table)
        changes += decoded.num_rows
        pending.append((decoded, event.timestamp * 1000))
        pending_rows += decoded.num_changes
        if pending_rows >= FLUSH_ROWS:
            rows_out += build_change_batch(table, pending).num_rows
            pending, pending_rows = [], 0
    if pending:
        rows_out += build_change_batch(table, pending).num_rows
    reader.close()
    return time.perf_counter() - started, changes, rows_out


def main() -> None:
    changes = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    if not columnar_available():
        sys.exit("the columnar decoder is not built: run scripts/setup.sh (or pip install -e .)")
    install_binlog_decoding()
    with MariaDBServer() as server:
        started = time.perf_counter()
        log_file, log_pos = write_changes(server, changes)
        print(f"wrote {changes:,} row changes in {time.perf_counter() - started:.1f} s")
        options = MySqlSourceOptions(hostname="127.0.0.1", port=server.port)
        conn = connect(options)
        table = describe_table(conn, TableId("bench", "orders"), options)
        conn.close()

        t_stream, events = time_stream_only(server, log_file, log_pos)
        t_lib, n_lib = time_library(server, log_file, log_pos)
        t_col, n_col, rows_out = time_columnar(server, log_file, log_pos, table)
        assert n_lib == n_col == changes, (n_lib, n_col, changes)

        print(f"{changes:,} binlog row changes ({events:,} rows events; {rows_out:,} change rows incl. -U/+U)")
        print(f"  stream only (no row decoding)   {changes / t_stream:>12,.0f} changes/s ({t_stream:.2f} s)")
        print(f"  python-mysql-replication ev.rows{changes / t_lib:>12,.0f} changes/s ({t_lib:.2f} s)")
        print(f"  lakecdc columnar -> Arrow       {changes / t_col:>12,.0f} changes/s ({t_col:.2f} s)")
        print(f"  ratio: {t_lib / t_col:.1f}x the python-mysql-replication decode-only rate "
              f"(decoding alone, stream time subtracted: {(t_lib - t_stream) / max(t_col - t_stream, 1e-9):.1f}x)")


if __name__ == "__main__":
    main()
