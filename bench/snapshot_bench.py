"""The snapshot case: an orders table, MySQL -> committed Paimon through the whole ``lakecdc run`` command in its own
process (start to exit: imports, connections, the incremental (lock-free) snapshot's chunked read, Paimon primary-key
table, commit, upkeep), with 1 chunk reader and again with 2 and 4 (``pipeline.parallelism``), against three references
on the same table in the same run:

- ``mariadb --batch --quick`` dumping the table to /dev/null (the server and wire floor; target: 0.6x its rate);
- dlt's ``sql_table`` with the pyarrow backend writing Parquet to a local directory (target: 3x its rate);
- the same with the connectorx backend (Rust, straight to Arrow; target: at least its rate, although lakecdc also
  buckets, sorts and commits a primary-key table).

The dlt references run in child processes (bench/dlt_reference.py) and are skipped when dlt or connectorx is not
installed (``pip install -e '.[bench]'``; bench/run.sh installs them).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from bench.common import (DATABASE, ROOT, Case, MariaDBServer, Reference, cli_run, median_seconds, pipeline_yaml,
                          repeats_note, timed, upkeep_timer)

DUMP_TARGET, PYARROW_TARGET, CONNECTORX_TARGET = 0.6, 3.0, 1.0


def dump_seconds(server: MariaDBServer, table: str) -> float:
    """``mariadb --batch --quick`` printing every row of the table to /dev/null."""
    client = shutil.which("mariadb") or "/usr/bin/mariadb"
    seconds, _ = timed(subprocess.run, [client, "--no-defaults", "--protocol=tcp", "-h127.0.0.1",
                                        f"-P{server.port}", "-uroot", "--batch", "--quick", "-e",
                                        f"SELECT * FROM {DATABASE}.{table}"],
                       stdout=subprocess.DEVNULL, check=True)
    return seconds


def dlt_available(backend: str) -> str | None:
    """None when dlt (and connectorx for that backend) can be imported, else what is missing."""
    missing = [name for name in ("dlt", "connectorx" if backend == "connectorx" else None)
               if name and importlib.util.find_spec(name) is None]
    return ", ".join(missing) or None


def dlt_reference(port: int, table: str, rows: int, backend: str, target: float) -> tuple[Reference, float | None]:
    """dlt's run of the table (bench/dlt_reference.py, own process): the reference (its ``pipeline.run``) and the
    seconds of its whole process, or None when skipped."""
    label = f"dlt sql_table {backend} -> Parquet files"
    missing = dlt_available(backend)
    if missing:
        return Reference(label, None, rows, target,
                         note=f"skipped: {missing} not installed (pip install -e '.[bench]')"), None
    with tempfile.TemporaryDirectory(prefix="lakecdc-bench-dlt-") as tmp:
        whole, proc = timed(subprocess.run, [sys.executable, "-m", "bench.dlt_reference", "--port", str(port),
                                             "--table", table, "--backend", backend, "--dir", tmp],
                            cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"dlt reference ({backend}) failed:\n{proc.stderr[-3000:]}")
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    if got["rows"] != rows:
        raise RuntimeError(f"dlt ({backend}) wrote {got['rows']} rows, expected {rows}")
    return Reference(label, got["seconds"], rows, target), whole


def warm_imports() -> None:
    """Import what a micro-batch imports lazily (pypaimon, pypaimon-rust): a process pays it once, not per batch;
    the dlt references are timed without their imports too."""
    import lakecdc.sink.catalog  # noqa: F401
    import lakecdc.sink.writer  # noqa: F401


def run_snapshot(server: MariaDBServer, table: str, warehouse: Path, upkeep_seconds: list | None = None):
    """One snapshot micro-batch of ``bench.<table>`` into ``warehouse``: (seconds, RunResult, config); the seconds of
    its upkeep step are added to ``upkeep_seconds``."""
    from lakecdc.config import parse_pipeline
    from lakecdc.runtime import run_micro_batch

    warm_imports()
    config = parse_pipeline(pipeline_yaml(server.port, table, warehouse))
    with upkeep_timer(upkeep_seconds if upkeep_seconds is not None else []):
        seconds, result = timed(run_micro_batch, config)
    return seconds, result, config


READERS = (2, 4)  # pipeline.parallelism of the extra runs (the case itself runs with 1 reader)


def readers_notes(server: MariaDBServer, table: str, rows: int, warehouse: Path, one_reader: float,
                  repeats: int) -> list[str]:
    """The same ``lakecdc run`` with 2 and 4 chunk readers (pipeline.parallelism; the incremental snapshot reads a
    commit group's chunks on that many connections at once, the rows still go through one writer): one line each,
    with the 1-reader run of the case for comparison."""
    lines = [f"incremental snapshot, 1 reader: {one_reader:.2f} s, {rows / one_reader:,.0f} rows/s"]
    for readers in READERS:
        runs = []
        for repeat in range(repeats):
            into = warehouse.parent / f"{warehouse.name}-readers-{readers}-{repeat}"
            seconds, tables = cli_run(pipeline_yaml(server.port, table, into, readers=readers))
            shutil.rmtree(into)
            if sum(t["inserted"] for t in tables) != rows:
                raise RuntimeError(f"lakecdc with {readers} readers wrote the wrong number of rows of {table}")
            runs.append(seconds)
        seconds = median_seconds(runs)
        lines.append(f"incremental snapshot, {readers} readers: {seconds:.2f} s, {rows / seconds:,.0f} rows/s "
                     f"({one_reader / seconds:.2f}x 1 reader)")
    return lines


def case(server: MariaDBServer, table: str, rows: int, warehouse: Path,
         dlt_backends: tuple[str, ...] = ("pyarrow", "connectorx"), repeats: int = 1) -> tuple[Case, object]:
    """The snapshot case: the whole ``lakecdc run`` command, process start to exit (imports, connections, the
    snapshot, the commit, table upkeep), as a user runs it, ``repeats`` times alternating with the references (each
    run into a fresh warehouse; the last one's is ``warehouse``). Also returns the pipeline config (the binlog case
    continues on ``warehouse``)."""
    from lakecdc.config import parse_pipeline

    targets = {"pyarrow": PYARROW_TARGET, "connectorx": CONNECTORX_TARGET}
    dumps: list[float] = []
    runs: list[float] = []
    dlt: dict[str, list[tuple[Reference, float | None]]] = {b: [] for b in dlt_backends}
    tables: list[dict] = []
    for repeat in range(repeats):
        dumps.append(dump_seconds(server, table))
        into = warehouse if repeat == repeats - 1 else warehouse.parent / f"{warehouse.name}-run-{repeat}"
        seconds, tables = cli_run(pipeline_yaml(server.port, table, into))
        if into != warehouse:
            shutil.rmtree(into)
        written = sum(t["inserted"] for t in tables)
        if written != rows:
            raise RuntimeError(f"lakecdc wrote {written} rows of {table}, expected {rows}")
        runs.append(seconds)
        for backend in dlt_backends:
            dlt[backend].append(dlt_reference(server.port, table, rows, backend, targets[backend]))
    seconds = median_seconds(runs)
    references = [Reference("mariadb --batch --quick > /dev/null", median_seconds(dumps), rows, DUMP_TARGET)]
    notes = ["lakecdc's time is the whole command, process start to exit (imports, connections, upkeep)"]
    samples = {"lakecdc": runs, "dump": dumps}
    samples.update({f"dlt {b}": [r.seconds for r, _ in got if r.seconds is not None] for b, got in dlt.items()})
    notes += repeats_note(repeats, samples)
    for backend, measured in dlt.items():
        reference = measured[0][0]
        if reference.seconds is not None:
            reference = replace(reference, seconds=median_seconds([r.seconds for r, _ in measured if r.seconds]))
            whole = median_seconds([w for _, w in measured if w is not None])
            notes.append(f"dlt {backend}: its pipeline.run {reference.seconds:.2f} s (the reference above); its "
                         f"whole process (interpreter start, imports, set-up) {whole:.2f} s, lakecdc = "
                         f"{whole / seconds:.2f}x that")
        references.append(reference)
    notes += [f"upkeep after the commit: {t['upkeep']}" for t in tables if t.get("upkeep")]
    notes += readers_notes(server, table, rows, warehouse, seconds, repeats)
    title = f"snapshot of a {rows:,}-row orders table, MySQL -> committed Paimon (primary-key table)"
    yaml_text = pipeline_yaml(server.port, table, warehouse)
    return (Case(title, "rows/s", "lakecdc run (snapshot micro-batch)", seconds, rows, references, notes),
            parse_pipeline(yaml_text))
