"""Benchmark ``routine``: what routine work costs at two table sizes, a large (3,000,000 rows) and a small (30,000
rows) orders table, each in its own pipeline, measured with the commands a user runs (each in its own process,
start to exit):

- the Dagster micro-batch: ``dagster asset materialize -m definitions --select paimon/bench/<table>`` (the table's
  asset with its blocking checks) after 10 row changes; the large table's median as a ratio to the small one's,
  runs alternating (target: at most 1.5x);
- the MySQL rows such a micro-batch reads: ``SHOW GLOBAL STATUS`` ``Rows_read`` and ``Innodb_rows_read`` (MySQL's;
  MariaDB 10.11, the bench's server, has no such counter) just before and just after the command (nothing else uses
  the server meanwhile; the 10 changes are made before the first reading); target: at most 10,000 on the large
  table;
- the peak memory of a re-snapshot of the large table (``lakecdc resnapshot``, the whole process's peak RSS) against
  its first snapshot's (``lakecdc run``); target: at most 1.25 x the first snapshot's + 50 MiB.

For context it also counts the upkeep compactions among the measured micro-batches (each rewrites the table's live
rows: a micro-batch that does one costs more) and times ``lakecdc run`` of 10 changes on each table (the CLI's
micro-batch).

Each figure is printed with its target and ``met`` / ``NOT MET``. It starts its own private MariaDB and a warehouse
and Dagster instance in a temp dir.

Usage: .venv/bin/python -m bench.routine_bench [LARGE_ROWS SMALL_ROWS [REPEATS]]   (default 3,000,000 30,000 3)
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import (DATABASE, Case, MariaDBServer, Measured, bench_server, create_orders, installed_env,
                          measured_run, median_seconds, pipeline_yaml)

CHANGES = 10
TIME_RATIO_TARGET = 1.5
ROWS_READ_TARGET = 10_000
MEMORY_FACTOR, MEMORY_SLACK_MIB = 1.25, 50
BIN = Path(sys.executable).parent
STATUS = ("Rows_read", "Innodb_rows_read")


@dataclass
class Table:
    """One orders table with its own pipeline file (in its own directory: Dagster loads only that pipeline)."""

    name: str
    rows: int
    pipelines: Path
    server_id: int

    @property
    def yaml(self) -> Path:
        return self.pipelines / "orders.yaml"

    @property
    def asset(self) -> str:
        return f"paimon/{DATABASE}/{self.name}"


def rows_read(server: MariaDBServer) -> dict[str, int]:
    placeholders = ", ".join(f"'{name}'" for name in STATUS)
    return {name: int(value) for name, value in
            server.execute(f"SHOW GLOBAL STATUS WHERE Variable_name IN ({placeholders})")}


def change(server: MariaDBServer, table: Table, round_: int) -> None:
    """CHANGES single-row updates spread over the table, in one transaction."""
    ids = sorted({1 + (i * table.rows // CHANGES + round_ * 7) % table.rows for i in range(CHANGES)})
    conn = server.connect(autocommit=False)
    try:
        with conn.cursor() as cur:
            for row_id in ids:
                cur.execute(f"UPDATE {DATABASE}.{table.name} SET quantity = quantity + 1 WHERE id = {row_id}")
        conn.commit()
    finally:
        conn.close()


def run(command: list[str], env: dict[str, str], what: str) -> Measured:
    done = measured_run(command, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return done


def lakecdc(table: Table, env: dict[str, str], *args: str) -> Measured:
    return run([str(BIN / "lakecdc"), *args[:1], str(table.yaml), *args[1:]], env, f"lakecdc {args[0]}")


def dagster_micro_batch(server: MariaDBServer, table: Table, env: dict[str, str]) -> tuple[Measured, dict]:
    """The Dagster micro-batch of the table's asset and the MySQL rows read while it ran."""
    before = rows_read(server)
    done = run([str(BIN / "dagster"), "asset", "materialize", "-m", "definitions", "--select", table.asset],
               {**env, "LAKECDC_PIPELINES_DIR": str(table.pipelines)}, f"dagster asset materialize {table.asset}")
    after = rows_read(server)
    if "ASSET_CHECK_EVALUATION" not in done.stdout + done.stderr:
        raise RuntimeError(f"the materialisation of {table.asset} evaluated no asset check:\n{done.stderr[-3000:]}")
    # MariaDB 10.11 counts Rows_read only (Innodb_rows_read is MySQL's): a counter the server lacks is left out
    return done, {name: after[name] - before[name] for name in STATUS if name in before and name in after}


def verdict(met: bool) -> str:
    return "met" if met else "NOT MET"


@dataclass
class Figures:
    """What was measured on one table."""

    rows: int
    first_snapshot: Measured  # lakecdc run of the empty warehouse
    dagster_seconds: list[float] = field(default_factory=list)  # one Dagster micro-batch each
    rows_read: list[dict[str, int]] = field(default_factory=list)  # status counter -> rows, per micro-batch
    cli_seconds: float = 0.0  # lakecdc run of CHANGES changes
    resnapshot: Measured | None = None  # lakecdc resnapshot (the large table only)
    compactions: int = 0  # upkeep compactions (lakecdc.upkeep = compact) among the measured micro-batches


def snapshots(table: Table) -> list:
    """The table's Paimon snapshots (pypaimon Snapshot objects), oldest first."""
    from lakecdc.config import load_pipeline
    from lakecdc.model import TableId
    from lakecdc.sink import PaimonSink

    return PaimonSink(load_pipeline(table.yaml).sink.catalog_options).snapshots(TableId(DATABASE, table.name))


def compactions_since(table: Table, snapshot_id: int) -> int:
    """Upkeep compactions committed after ``snapshot_id`` (a compaction rewrites the table's live rows, so a
    micro-batch that does one costs more)."""
    from lakecdc.sink.upkeep import COMPACT, UPKEEP_PROPERTY

    return sum(1 for s in snapshots(table)
               if s.id > snapshot_id and (s.properties or {}).get(UPKEEP_PROPERTY) == COMPACT)


def measure(server: MariaDBServer, large: Table, small: Table, repeats: int,
            env: dict[str, str]) -> tuple[Figures, Figures]:
    figures = {t.name: Figures(t.rows, lakecdc(t, env, "run")) for t in (small, large)}  # the first snapshots
    for t in (small, large):  # Dagster's first run also reports the CLI's commits: not measured
        change(server, t, 0)
        dagster_micro_batch(server, t, env)
    before = {t.name: snapshots(t)[-1].id for t in (small, large)}
    for round_ in range(1, repeats + 1):
        for t in (small, large):
            change(server, t, round_)
            done, counted = dagster_micro_batch(server, t, env)
            figures[t.name].dagster_seconds.append(done.seconds)
            figures[t.name].rows_read.append(counted)
    for t in (small, large):
        figures[t.name].compactions = compactions_since(t, before[t.name])
    for t in (small, large):
        change(server, t, repeats + 1)
        figures[t.name].cli_seconds = lakecdc(t, env, "run").seconds
    figures[large.name].resnapshot = lakecdc(large, env, "resnapshot", f"{DATABASE}.{large.name}")
    return figures[large.name], figures[small.name]


def report(large: Figures, small: Figures) -> list[str]:
    """Each figure with its target and whether it is met."""
    assert large.resnapshot is not None
    repeats = len(large.dagster_seconds)
    lines = []
    medians = [median_seconds(f.dagster_seconds) for f in (small, large)]
    ratio = medians[1] / medians[0]
    runs = "; ".join(f"{f.rows:,} rows {', '.join(f'{s:.2f}' for s in f.dagster_seconds)}" for f in (small, large))
    lines.append(f"Dagster micro-batch of {CHANGES} changes (dagster asset materialize, asset and blocking checks, "
                 f"whole command, median of {repeats}): {small.rows:,} rows {medians[0]:.2f} s, {large.rows:,} rows "
                 f"{medians[1]:.2f} s = {ratio:.2f}x (target <= {TIME_RATIO_TARGET:g}x): "
                 f"{verdict(ratio <= TIME_RATIO_TARGET)}")
    lines.append(f"  runs (s): {runs}; upkeep compactions among them (each rewrites the table's live rows): "
                 f"{small.rows:,} rows {small.compactions}, {large.rows:,} rows {large.compactions}")
    for f in (small, large):
        worst = {name: max(r[name] for r in f.rows_read) for name in f.rows_read[0]}
        target = "" if f is small else \
            f" (target <= {ROWS_READ_TARGET:,}): {verdict(max(worst.values()) <= ROWS_READ_TARGET)}"
        lines.append(f"MySQL rows read per Dagster micro-batch, {f.rows:,}-row table (largest of {repeats}): "
                     + ", ".join(f"{name} {worst[name]:,}" if name in worst else
                                 f"{name} not counted by this server" for name in STATUS)
                     + target)
    first, again = large.first_snapshot, large.resnapshot
    limit = MEMORY_FACTOR * first.peak_mib + MEMORY_SLACK_MIB
    lines.append(f"peak RSS of the {large.rows:,}-row table's re-snapshot (lakecdc resnapshot, whole process) "
                 f"{again.peak_mib:,.0f} MiB ({again.seconds:.1f} s) vs its first snapshot (lakecdc run) "
                 f"{first.peak_mib:,.0f} MiB ({first.seconds:.1f} s); target <= {MEMORY_FACTOR:g} x "
                 f"{first.peak_mib:,.0f} + {MEMORY_SLACK_MIB} = {limit:,.0f} MiB: {verdict(again.peak_mib <= limit)}")
    lines.append(f"for context: lakecdc run of {CHANGES} changes (whole command) {small.rows:,} rows "
                 f"{small.cli_seconds:.2f} s, {large.rows:,} rows {large.cli_seconds:.2f} s; first snapshot of the "
                 f"{small.rows:,}-row table {small.first_snapshot.seconds:.1f} s, peak RSS "
                 f"{small.first_snapshot.peak_mib:,.0f} MiB")
    return lines


def case(large_rows: int = 3_000_000, small_rows: int = 30_000, repeats: int = 3) -> Case:
    """The suite's ``routine`` case, on its own private server."""
    with tempfile.TemporaryDirectory(prefix="lakecdc-bench-routine-") as tmp, bench_server() as server:
        work = Path(tmp)
        home = work / "dagster_home"
        home.mkdir()
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        env = {**installed_env(), "DAGSTER_HOME": str(home)}
        tables = []
        for name, rows, server_id in (("routine_large", large_rows, 5993), ("routine_small", small_rows, 5994)):
            print(f"loading {rows:,} orders into {DATABASE}.{name} ...", flush=True)
            print(f"loaded in {create_orders(server, name, rows):.1f} s", flush=True)
            table = Table(name, rows, work / name, server_id)
            table.pipelines.mkdir()
            table.yaml.write_text(pipeline_yaml(server.port, name, work / "warehouse", server_id=server_id))
            tables.append(table)
        lines = report(*measure(server, tables[0], tables[1], repeats, env))
    return Case(f"routine work at two table sizes ({large_rows:,} and {small_rows:,} rows): Dagster micro-batch, "
                f"MySQL rows read, re-snapshot memory", "", "", None, 0, lines=lines)


def main(argv: list[str]) -> None:
    sizes = [int(a.replace(",", "").replace("_", "")) for a in argv]
    print("\n".join(case(*sizes).render()), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
