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


def test_routine_case_measures_the_command_and_judges_each_figure():
    """The routine case's pieces without its servers (its whole run takes a minute even at tiny sizes, Dagster's
    command included): a command's peak RSS is its own, not that of the bench process it was started from, and
    every figure is printed with its target and verdict."""
    from bench.common import Measured, measured_run
    from bench.routine_bench import Figures, report

    ballast = bytearray(400 * 2**20)  # this process far above the command measured
    ballast[::4096] = b"1" * len(ballast[::4096])
    done = measured_run([sys.executable, "-c", "x = bytearray(64 * 2**20); x[::4096] = b'1' * len(x[::4096])"])
    assert done.returncode == 0 and 64 < done.peak_mib < 200, done
    assert measured_run([sys.executable, "-c", "raise SystemExit(3)"]).returncode == 3
    del ballast

    def figures(rows, seconds, read, first_mib, again_mib=None):
        return Figures(rows, Measured(10.0, first_mib, 0, "", ""), seconds, [{"Rows_read": n} for n in read], 2.0,
                       None if again_mib is None else Measured(20.0, again_mib, 0, "", ""))

    lines = report(figures(3_000_000, [7.0, 7.2, 9.0], [2_999_999, 3_000_000, 3_000_001], 595, 2_074),
                   figures(30_000, [4.6, 4.7, 4.8], [30_000, 30_000, 30_000], 300))
    assert "30,000 rows 4.70 s, 3,000,000 rows 7.20 s = 1.53x (target <= 1.5x): NOT MET" in lines[0]
    assert lines[3].endswith("Rows_read 3,000,001, Innodb_rows_read not counted by this server (target <= 10,000): "
                             "NOT MET")
    assert "2,074 MiB (20.0 s) vs its first snapshot (lakecdc run) 595 MiB (10.0 s); target <= 1.25 x 595 + 50 = " \
           "794 MiB: NOT MET" in lines[4]
    lines = report(figures(3_000_000, [5.0], [12], 595, 700), figures(30_000, [4.0], [10], 300))
    assert [line.rsplit(": ", 1)[1] for line in (lines[0], lines[3], lines[4])] == ["met"] * 3
