"""Smoke test of the benchmark suite (bench/): every case runs end to end in --quick mode with tiny sizes, so the
bench code keeps working. No timing is asserted (speed is what the suite prints, not what tests check)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_suite_runs_every_case_on_tiny_tables():
    # the upkeep case belongs to bench/upkeep_bench.py (its own sizes); the dlt references run when dlt is installed
    command = [sys.executable, "-m", "bench", "--quick", "--no-install", "--cases",
               "snapshot,memory,binlog,transform,s3", "--rows", "3000", "--big-rows", "9000", "--changes", "2000",
               "--transform-rows", "2000", "--s3-rows", "2000",
               "--dlt-backends", "connectorx"]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    out = proc.stdout
    assert "snapshot of a 3,000-row orders table" in out
    assert "mariadb --batch --quick > /dev/null" in out and "dlt sql_table connectorx" in out
    assert "incremental snapshot, 1 reader" in out and "incremental snapshot, 4 readers" in out
    assert "3,000 rows   peak RSS" in out and "9,000 rows   peak RSS" in out
    assert "binlog micro-batch of 2,000 row changes (1,000 inserts, 600 updates, 400 deletes)" in out
    assert "python-mysql-replication, decoding only" in out
    assert "binlog decoder fallbacks: none" in out  # the bench workload decodes every event in C
    assert "tutorial transform over 2,000 rows" in out
    assert "snapshot of a 2,000-row orders table into s3:// on a local S3 server (moto) vs local disk" in out
    assert "the same micro-batch into a local-disk warehouse" in out
    assert out.rstrip().splitlines()[-1].startswith("suite finished")


def test_the_freshness_case_runs_both_modes():
    command = [sys.executable, "-m", "bench", "--no-install", "--cases", "freshness", "--freshness-seconds", "3",
               "--sensor-interval", "1"]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    out = proc.stdout
    assert "fixed cost of a run (lakecdc run, nothing to read, process start to exit)" in out
    assert "follow mode, checkpoint-interval 3 s: p50" in out and "sensor mode, interval 1 s: p50" in out
    assert "never readable" not in out  # every commit of the stream reached Paimon in both modes
