"""The s3 case: the snapshot micro-batch of the orders table into an ``s3://`` warehouse on a local S3 server
(moto's S3 backend behind a single-threaded server, tests/s3_server.py) against the same micro-batch into a
local-disk warehouse, in the same run.

The ratio is what an object store's request-per-file traffic and lakecdc's conditional commit cost on one machine,
with a server written in Python; it says nothing about AWS itself (network latency, S3's throughput).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from bench.common import Case, MariaDBServer, Reference
from bench.snapshot_bench import run_snapshot


def case(server: MariaDBServer, table: str, rows: int) -> Case:
    from tests.s3_server import ACCESS_KEY, KEY_ENV, SECRET_ENV, SECRET_KEY, S3Server

    os.environ.setdefault(KEY_ENV, ACCESS_KEY)
    os.environ.setdefault(SECRET_ENV, SECRET_KEY)
    with tempfile.TemporaryDirectory(prefix="lakecdc-bench-s3-") as tmp, S3Server() as s3:
        local_seconds, local, _ = run_snapshot(server, table, Path(tmp) / "warehouse")
        warehouse = s3.warehouse_yaml(f"s3://{s3.new_bucket()}/warehouse")
        s3_seconds, remote, _ = run_snapshot(server, table, warehouse)
    for result in (local, remote):
        written = sum(t.rows_written for t in result.tables.values())
        if written != rows:
            raise RuntimeError(f"lakecdc wrote {written} rows of {table}, expected {rows}")
    title = f"snapshot of a {rows:,}-row orders table into s3:// on a local S3 server (moto) vs local disk"
    return Case(title, "rows/s", "lakecdc snapshot micro-batch into s3://", s3_seconds, rows,
                [Reference("the same micro-batch into a local-disk warehouse", local_seconds, rows, None)],
                ["both include table upkeep after the commit; the S3 server is moto's, single-threaded, in Python"])
