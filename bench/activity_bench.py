"""How fast the binlog activity scan reads (lakecdc.source.activity: the sensor's and ``lakecdc status``'s check of
which tables are behind), next to python-mysql-replication reading the same events with ``only_events``.

``.venv/bin/python -m bench.activity_bench [BULK_ROWS] [SMALL_TRANSACTIONS]`` starts a private MariaDB, writes two
stretches of binlog to a database the scan does not look for — bulk (INSERT ... SELECT: big rows events) and small
(one-row autocommit transactions: four events each, the worst case per byte) — and prints bytes/s and events/s.
"""

from __future__ import annotations

import sys
import time

from bench.common import bench_server
from lakecdc.model import TableId
from lakecdc.source.activity import scan_activity
from lakecdc.source.connection import connect, head_offset
from lakecdc.source.options import MySqlSourceOptions


def _library_scan(server, start, stop) -> int:
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import GtidEvent, MariadbGtidEvent, QueryEvent, RotateEvent, XidEvent
    from pymysqlreplication.row_event import TableMapEvent

    stream = BinLogStreamReader(
        connection_settings=dict(host="127.0.0.1", port=server.port, user="root", password=""), server_id=4242,
        log_file=start.file, log_pos=start.pos, resume_stream=True, blocking=False,
        only_events=[TableMapEvent, QueryEvent, XidEvent, MariadbGtidEvent, GtidEvent, RotateEvent])
    events = 0
    try:
        for _ in stream:
            events += 1
            if stream.log_file == stop.file and stream.log_pos >= stop.pos:
                break
    finally:
        stream.close()
    return events


def main(argv: list[str]) -> None:
    bulk_rows = int(argv[0]) if argv else 1_000_000
    small = int(argv[1]) if len(argv) > 1 else 50_000
    with bench_server() as server:
        options = MySqlSourceOptions(hostname="127.0.0.1", port=server.port)

        def head():
            conn = connect(options)
            try:
                return head_offset(conn, options)
            finally:
                conn.close()

        server.execute("CREATE DATABASE noise")
        server.execute("CREATE TABLE noise.big (id INT PRIMARY KEY, a VARCHAR(64), b DECIMAL(12,2), c DATETIME, "
                       "d INT)")
        server.execute("CREATE TABLE noise.small (id INT PRIMARY KEY AUTO_INCREMENT, a VARCHAR(64), d INT)")
        server.execute("CREATE PROCEDURE noise.fill(n INT) BEGIN DECLARE i INT DEFAULT 0; WHILE i < n DO "
                       "INSERT INTO noise.small (a, d) VALUES ('x', i); SET i = i + 1; END WHILE; END")
        start = head()
        server.execute(f"INSERT INTO noise.big SELECT seq, CONCAT('customer-', seq), seq / 100, NOW(), seq "
                       f"FROM seq_1_to_{bulk_rows}", database="noise")
        middle = head()
        server.execute(f"CALL noise.fill({small})")
        end = head()
        captured = {TableId("shop", f"t{i}") for i in range(50)}  # tables the noise never touches
        print(f"activity scan (private MariaDB, {bulk_rows:,} bulk rows, {small:,} one-row transactions)")
        for label, (a, b) in {"bulk rows events": (start, middle), "small transactions": (middle, end)}.items():
            best = None
            for _ in range(3):
                began = time.perf_counter()
                result = scan_activity(options, captured, a, b)
                seconds = time.perf_counter() - began
                best = seconds if best is None else min(best, seconds)
            assert result.changed == {}, result.changed
            size = result.bytes_scanned
            print(f"  {label:20s} lakecdc scan: {size / 1e6:7.1f} MB, {result.events:8,} events in {best:6.2f} s = "
                  f"{size / best / 1e6:6.1f} MB/s, {result.events / best:9,.0f} events/s")
            began = time.perf_counter()
            events = _library_scan(server, a, b)
            seconds = time.perf_counter() - began
            print(f"  {label:20s} python-mysql-replication only_events: {events:8,} events in {seconds:6.2f} s = "
                  f"{size / seconds / 1e6:6.1f} MB/s ({seconds / best:.0f}x slower)")


if __name__ == "__main__":
    main(sys.argv[1:])
