"""The binlog case: row changes (half inserts, 30 % updates, 20 % deletes, 10,000 rows per transaction) on the
orders table the snapshot case landed, read by the whole ``lakecdc run`` command (process start to exit: imports,
connections, binlog -> transform -> committed Paimon, upkeep), against python-mysql-replication merely decoding the
same events (bench/pipeline_bench.py's ``decode_seconds``; target: 10x its rate, issue 17). The run's decoder
fallbacks (rows events decoded in Python instead of the columnar decoder) are printed: the workload has none.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from bench.common import DATABASE, Case, MariaDBServer, Reference, cli_run, median_seconds, pipeline_yaml, repeats_note
from bench.pipeline_bench import decode_seconds

TARGET = 10.0
TXN_ROWS = 10_000


def write_changes(server: MariaDBServer, table: str, rows: int, changes: int) -> tuple[str, int, dict]:
    """Inserts after the last id, updates of the first ids, deletes of the next ones; returns the binlog position
    before them and the counts."""
    inserts = changes // 2
    updates = changes * 3 // 10
    deletes = changes - inserts - updates
    if updates + deletes > rows:
        raise ValueError(f"{changes:,} changes need a table of at least {updates + deletes:,} rows (has {rows:,})")
    head = server.execute("SHOW MASTER STATUS")[0]
    name = f"{DATABASE}.{table}"

    def ranges(first: int, count: int):
        for start in range(first, first + count, TXN_ROWS):
            yield start, min(first + count - 1, start + TXN_ROWS - 1)

    for a, b in ranges(rows + 1, inserts):
        server.execute(f"INSERT INTO {name} SELECT seq, CONCAT('new-', seq), seq % 1000, "
                       f"TIMESTAMP'2026-06-01 00:00:00' + INTERVAL (seq % 86400) SECOND, 1 FROM seq_{a}_to_{b}",
                       database=DATABASE)
    for a, b in ranges(1, updates):
        server.execute(f"UPDATE {name} SET quantity = quantity + 1, amount = amount + 1 WHERE id BETWEEN {a} AND {b}")
    for a, b in ranges(updates + 1, deletes):
        server.execute(f"DELETE FROM {name} WHERE id BETWEEN {a} AND {b}")
    return head[0], int(head[1]), {"inserted": inserts, "updated": updates, "deleted": deletes}


def case(server: MariaDBServer, table: str, rows: int, changes: int, config, repeats: int = 1) -> Case:
    """``config``: the pipeline whose snapshot of ``bench.<table>`` is committed (the snapshot case's). lakecdc's
    run and the reference alternate ``repeats`` times; every lakecdc run starts from the committed snapshot (a copy
    of the warehouse as the snapshot left it)."""
    from lakecdc.source.rows_decoder import fallback_summary

    log_file, log_pos, counts = write_changes(server, table, rows, changes)
    warehouse = Path(config.sink.catalog_options["warehouse"])
    snapshot_state = warehouse.parent / f"{warehouse.name}-snapshot"
    shutil.copytree(warehouse, snapshot_state, symlinks=True)
    decodes: list[float] = []
    runs: list[float] = []
    tables: list[dict] = []
    for repeat in range(repeats):
        t_decode, decoded = decode_seconds(server, log_file, log_pos)
        if decoded != changes:
            raise RuntimeError(f"python-mysql-replication decoded {decoded} row changes, expected {changes}")
        decodes.append(t_decode)
        if repeat:
            shutil.rmtree(warehouse)
            shutil.copytree(snapshot_state, warehouse, symlinks=True)
        seconds, tables = cli_run(pipeline_yaml(server.port, table, warehouse))
        applied = {name: sum(t[name] for t in tables) for name in counts}
        if applied != counts:
            raise RuntimeError(f"lakecdc applied {applied}, expected {counts}")
        runs.append(seconds)
    shutil.rmtree(snapshot_state)
    title = (f"binlog micro-batch of {changes:,} row changes ({counts['inserted']:,} inserts, "
             f"{counts['updated']:,} updates, {counts['deleted']:,} deletes), whole `lakecdc run` -> committed Paimon")
    reference = Reference("python-mysql-replication, decoding only", median_seconds(decodes), changes, TARGET)
    fallbacks: dict[str, int] = {}  # rows events the columnar decoder left to python-mysql-replication
    for t in tables:
        for cause, events in t["decoder_fallbacks"].items():
            fallbacks[cause] = fallbacks.get(cause, 0) + events
    notes = ["lakecdc's time is the whole command, process start to exit (imports, connections, upkeep)"]
    notes += repeats_note(repeats, {"lakecdc": runs, "reference": decodes})
    notes += [f"binlog decoder fallbacks: {fallback_summary(fallbacks) or 'none'}"]
    notes += [f"upkeep after the commit: {t['upkeep']}" for t in tables if t.get("upkeep")]
    return Case(title, "changes/s", "lakecdc run (binlog micro-batch)", median_seconds(runs), changes, [reference],
                notes)
