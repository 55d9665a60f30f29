"""Benchmark: one snapshot micro-batch and one binlog micro-batch of an orders table, MySQL → committed Paimon,
each next to a reference measured in the same run on the same data:

- snapshot: ``mariadb --batch --quick`` dumping the same table to /dev/null;
- binlog: python-mysql-replication merely decoding the same row events (no transform, no write).

It starts its own private MariaDB (tests/mariadb_server.py) and warehouse in a temp dir.
Usage: .venv/bin/python -m bench.pipeline_bench [ROWS]   (default 200,000)
"""

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lakecdc.config import parse_pipeline
from lakecdc.runtime import run_micro_batch
from tests.mariadb_server import MariaDBServer

PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: root
  password: ""
  tables: bench.orders
  metadata.list: op_ts
transform:
  - source-table: bench.orders
    projection: "*, op_ts AS source_ts, __data_event_type__ AS op_type, UPPER(product) AS product_upper,
      DATE_FORMAT(created_at, 'yyyyMMdd') AS order_day"
    primary-keys: id, order_day
    partition-keys: order_day
    converter-after-transform: SOFT_DELETE
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {warehouse}
pipeline:
  name: bench
"""


def load(server: MariaDBServer, rows: int) -> None:
    server.execute("CREATE DATABASE bench")
    server.execute("CREATE TABLE bench.orders (id BIGINT NOT NULL PRIMARY KEY, product VARCHAR(100) NOT NULL, "
                   "price DECIMAL(10,2) NOT NULL, created_at DATETIME(3) NOT NULL)")
    server.execute(
        "INSERT INTO bench.orders SELECT seq, CONCAT('product-', seq % 1000), (seq % 10000) / 100, "
        "TIMESTAMP'2026-01-01 00:00:00' + INTERVAL (seq % 30) DAY + INTERVAL (seq % 86400) SECOND "
        f"FROM seq_1_to_{rows}", database="bench")


def dump_seconds(server: MariaDBServer) -> float:
    client = shutil.which("mariadb") or "/usr/bin/mariadb"
    started = time.perf_counter()
    subprocess.run([client, "--no-defaults", "--protocol=tcp", "-h127.0.0.1", f"-P{server.port}", "-uroot",
                    "--batch", "--quick", "-e", "SELECT * FROM bench.orders"], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def decode_seconds(server: MariaDBServer, log_file: str, log_pos: int) -> tuple[float, int]:
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    started = time.perf_counter()
    stream = BinLogStreamReader(
        connection_settings={"host": "127.0.0.1", "port": server.port, "user": "root", "passwd": ""},
        server_id=5999, log_file=log_file, log_pos=log_pos, resume_stream=True, blocking=False,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent])
    changes = 0
    for event in stream:
        changes += len(event.rows)
    stream.close()
    return time.perf_counter() - started, changes


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    with MariaDBServer() as server, tempfile.TemporaryDirectory() as tmp:
        load(server, rows)
        config = parse_pipeline(PIPELINE.format(port=server.port, warehouse=Path(tmp) / "warehouse"))

        t_dump = dump_seconds(server)
        started = time.perf_counter()
        run_micro_batch(config)
        t_snapshot = time.perf_counter() - started

        head = server.execute("SHOW MASTER STATUS")[0]
        # Changes: updates of every other row, deletes of every tenth.
        server.execute("UPDATE bench.orders SET price = price + 1 WHERE id % 2 = 0")
        server.execute("DELETE FROM bench.orders WHERE id % 10 = 1")
        t_decode, changes = decode_seconds(server, head[0], int(head[1]))
        started = time.perf_counter()
        run_micro_batch(config)
        t_binlog = time.perf_counter() - started

        print(f"snapshot of {rows:,} rows, MySQL -> committed Paimon")
        print(f"  lakecdc                    {rows / t_snapshot:>10,.0f} rows/s ({t_snapshot:.2f} s)")
        print(f"  mariadb --batch dump       {rows / t_dump:>10,.0f} rows/s ({t_dump:.2f} s)")
        print(f"  ratio: {t_dump / t_snapshot:.2f}x of the dump rate")
        print(f"binlog micro-batch of {changes:,} row changes, binlog -> committed Paimon")
        print(f"  lakecdc                    {changes / t_binlog:>10,.0f} changes/s ({t_binlog:.2f} s)")
        print(f"  python-mysql-replication   {changes / t_decode:>10,.0f} changes/s ({t_decode:.2f} s, decode only)")
        print(f"  ratio: {t_decode / t_binlog:.2f}x of the decode-only rate")


if __name__ == "__main__":
    main()
