"""Benchmark ``whole-database``: one pipeline capturing N tables of 1,000 rows, 1,000 row changes spread over all of
them, then the binlog run of every table two ways, each from the same committed state and the same changes:

- CLI: the whole ``lakecdc run`` command in its own process, start to exit;
- Dagster: every table asset materialised in one run (``dg.materialize`` of the pipeline's definitions, its
  default in-process executor), timed around the call in this process.

For each it prints the seconds and the MySQL connections the server counted (``SHOW GLOBAL STATUS LIKE 'Connections'``
before and after). As a reference for the Dagster run it also times Dagster's own floor: the same asset graph (the same
ops, asset specs and blocking checks, the MySQL source assets) whose op bodies do nothing but report every selected
asset materialised and every check passed, on a fresh instance of the same kind. What lakecdc's Dagster run costs above
that floor is lakecdc's; the floor is the cost of Dagster's bookkeeping (run creation with its planned events, one event
per output, materialisation and check, each stored in the instance). It also times a CLI run with no changes (the
marginal cost per idle table is the slope of that time over N) and, at each N, loading the definitions and one tick of
the binlog sensor.

It starts its own private MariaDB (tests/mariadb_server.py) and a warehouse in a temp dir.
Usage: .venv/bin/python -m bench.wholedb_bench [N ...]   (default 10 100 1000)
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, Case, bench_server
from tests.mariadb_server import MariaDBServer

PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: root
  password: ""
  tables: {db}.\\.*
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {warehouse}
pipeline:
  name: wholedb {db}
  lakecdc.sensor.default-status: stopped
  lakecdc.retry.max-retries: {retries}
  lakecdc.retry.delay: 100ms
"""
ROWS = 1000
CHANGES = 1000


def connections(server: MariaDBServer) -> int:
    return int(server.execute("SHOW GLOBAL STATUS LIKE 'Connections'")[0][1])


def create_tables(server: MariaDBServer, db: str, n: int) -> None:
    server.execute(f"CREATE DATABASE `{db}`")
    for i in range(n):
        server.execute(f"CREATE TABLE `{db}`.t{i} (id INT PRIMARY KEY, name VARCHAR(40), amount DECIMAL(10,2))")
        server.execute(f"INSERT INTO t{i} SELECT seq, CONCAT('name-', seq), seq / 10 FROM seq_1_to_{ROWS}",
                       database=db)


def change(server: MariaDBServer, db: str, n: int, round_: int) -> None:
    """CHANGES updates spread over all tables, 100 per transaction."""
    statements = [f"UPDATE `{db}`.t{c % n} SET amount = amount + 1 WHERE id = {1 + (c // n + round_ * 7) % ROWS}"
                  for c in range(CHANGES)]
    conn = server.connect(autocommit=False)
    try:
        with conn.cursor() as cur:
            for start in range(0, len(statements), 100):
                for statement in statements[start:start + 100]:
                    cur.execute(statement)
                conn.commit()
    finally:
        conn.close()


def cli_run(yaml_path: Path) -> float:
    started = time.perf_counter()
    subprocess.run([str(ROOT / ".venv" / "bin" / "lakecdc"), "run", str(yaml_path)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def measure(server: MariaDBServer, n: int, work: Path) -> dict[str, float]:
    import dagster as dg

    from lakecdc.dagster import build_definitions

    db = f"wholedb_{n}"
    create_tables(server, db, n)
    pipelines = work / f"pipelines_{n}"
    pipelines.mkdir()
    yaml_path = pipelines / "wholedb.yaml"
    yaml_path.write_text(PIPELINE.format(port=server.port, db=db, warehouse=work / f"warehouse_{n}", retries=0))
    out: dict[str, float] = {}
    cli_run(yaml_path)  # the snapshot

    out["cli_idle_s"] = cli_run(yaml_path)
    change(server, db, n, 0)
    before = connections(server)
    out["cli_binlog_s"] = cli_run(yaml_path)
    out["cli_binlog_connections"] = connections(server) - before

    started = time.perf_counter()
    defs = build_definitions(pipelines)
    out["load_definitions_s"] = time.perf_counter() - started
    assets = [a for a in defs.assets if isinstance(a, dg.AssetsDefinition)]
    change(server, db, n, 1)
    with dg.instance_for_test() as instance:
        before = connections(server)
        started = time.perf_counter()
        result = dg.materialize(assets, instance=instance, resources=defs.resources, raise_on_error=False)
        out["dagster_binlog_s"] = time.perf_counter() - started
        out["dagster_binlog_connections"] = connections(server) - before
        out["dagster_success"] = float(result.success)
        sensor = next(s for s in defs.sensors if s.name.endswith("_binlog_sensor"))
        before = connections(server)
        started = time.perf_counter()
        sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=defs))
        out["sensor_tick_s"] = time.perf_counter() - started
        out["sensor_tick_connections"] = connections(server) - before
    out["dagster_floor_s"] = dagster_floor(assets)
    out["dagster_floor_sources_s"] = dagster_floor(assets, source_events=True)
    return out


def noop_graph(assets: list, source_events: bool = False) -> list:
    """The same ops, asset specs and check specs as ``assets``, with bodies that only report every selected asset
    materialised and every selected check passed (Dagster's bookkeeping alone). ``source_events``: also one
    materialisation of each upstream (MySQL) asset of the selected ones, the event lakecdc records for each MySQL
    table a run reads (docs/dagster.md, *What the MySQL assets show*)."""
    import dagster as dg

    def noop(definition: dg.AssetsDefinition) -> dg.AssetsDefinition:
        @dg.multi_asset(name=definition.node_def.name, specs=list(definition.specs),
                        check_specs=list(definition.check_specs), can_subset=True)
        def _noop(context):
            if source_events:
                upstream = {dep for key in context.selected_asset_keys for dep in definition.asset_deps[key]}
                for key in sorted(upstream - set(definition.keys)):
                    context.log_event(dg.AssetMaterialization(asset_key=key))
            for key in sorted(context.selected_asset_keys):
                yield dg.MaterializeResult(asset_key=key)
            for check in sorted(context.selected_asset_check_keys):
                yield dg.AssetCheckResult(asset_key=check.asset_key, check_name=check.name, passed=True)
        return _noop

    return [noop(a) if a.is_executable else a for a in assets]


def dagster_floor(assets: list, source_events: bool = False) -> float:
    import dagster as dg

    graph = noop_graph(assets, source_events)
    with dg.instance_for_test() as instance:
        started = time.perf_counter()
        result = dg.materialize(graph, instance=instance, raise_on_error=True)
        elapsed = time.perf_counter() - started
    assert result.success
    return elapsed


def describe(n: int, out: dict[str, float]) -> list[str]:
    return [f"{n:,} tables: binlog run CLI {out['cli_binlog_s']:.2f} s ({out['cli_binlog_connections']:g} MySQL "
            f"connections), Dagster {out['dagster_binlog_s']:.2f} s ({out['dagster_binlog_connections']:g} "
            f"connections, {'succeeded' if out['dagster_success'] else 'FAILED'}): "
            f"{out['dagster_binlog_s'] / out['cli_binlog_s']:.2f}x (target <= 2x at 200 tables)",
            f"{n:,} tables: Dagster's floor (the same assets, ops and checks doing nothing) "
            f"{out['dagster_floor_s']:.2f} s = {out['dagster_floor_s'] / out['cli_binlog_s']:.2f}x the CLI run; "
            f"lakecdc's Dagster run above that floor {out['dagster_binlog_s'] - out['dagster_floor_s']:.2f} s "
            f"= {(out['dagster_binlog_s'] - out['dagster_floor_s']) / out['cli_binlog_s']:.2f}x the CLI run "
            f"(target <= 1x)",
            f"{n:,} tables: the floor with one event per MySQL table read too {out['dagster_floor_sources_s']:.2f} s; "
            f"lakecdc above it {out['dagster_binlog_s'] - out['dagster_floor_sources_s']:.2f} s "
            f"= {(out['dagster_binlog_s'] - out['dagster_floor_sources_s']) / out['cli_binlog_s']:.2f}x the CLI run",
            f"{n:,} tables: CLI run with nothing to read {out['cli_idle_s']:.2f} s; loading the definitions "
            f"{out['load_definitions_s']:.2f} s, one sensor tick {out['sensor_tick_s']:.2f} s "
            f"({out['sensor_tick_connections']:g} connections) (targets <= 3 s each at 1,000 tables)"]


def case(sizes: list[int]) -> Case:
    """The suite's ``whole-database`` case: every size on one private server."""
    logging.disable(logging.WARNING)
    os.environ.setdefault("DAGSTER_HOME", tempfile.mkdtemp(prefix="wholedb-dagster-"))
    lines: list[str] = []
    idle: list[tuple[int, float]] = []
    with tempfile.TemporaryDirectory(prefix="wholedb-") as tmp, bench_server() as server:
        for n in sizes:
            out = measure(server, n, Path(tmp))
            lines += describe(n, out)
            idle.append((n, out["cli_idle_s"]))
            print("\n".join(lines[-4:]), flush=True)
    if len(idle) > 1:
        (n0, s0), (n1, s1) = idle[0], idle[-1]
        lines.append(f"marginal cost of an idle table in a CLI run: {(s1 - s0) / (n1 - n0) * 1000:.1f} ms "
                     f"(from {n0:,} to {n1:,} tables; target <= 10 ms)")
    return Case(f"whole database: N tables of {ROWS:,} rows, {CHANGES:,} changes spread over them, CLI vs Dagster",
                "", "", None, 0, lines=lines)


def main(argv: list[str]) -> None:
    print("\n".join(case([int(a) for a in argv] or [10, 100, 1000]).render()), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
