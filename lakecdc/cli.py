"""Command line: ``lakecdc validate|run|status|describe|sql|upkeep|resnapshot|check PIPELINE.yaml``.

``run`` executes one micro-batch through the same code path as the Dagster asset. Errors are printed as one
clear line (file, key path, what to do) with exit code 2 for configuration errors and 1 for runtime failures.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import signal
import sys
import threading

from lakecdc.collector import freeze_after_imports, imports_outside_collection
from lakecdc.errors import LakeCdcError, PipelineConfigError, SinkError

# Each command imports the library modules it needs when it runs (lakecdc.model and everything below it load
# pyarrow, the runtime also pypaimon and the MySQL client): ``lakecdc --help`` starts without them.


def _load(path: str):
    with imports_outside_collection():  # the library's imports (lakecdc.collector)
        from lakecdc.config import load_pipeline

        return load_pipeline(path)


def cmd_validate(args: argparse.Namespace) -> int:
    from lakecdc.runtime.validate import validate_pipeline

    config = _load(args.pipeline)
    validation = validate_pipeline(config, connect=args.connect)  # raises before anything is called valid
    against = " against MySQL" if validation.connected else ""
    print(f"{args.pipeline}: pipeline {config.name!r} is valid{against} "
          f"({len(config.transforms)} transform rule(s), {len(config.routes)} route(s))")
    for table in validation.tables:
        sources = ", ".join(map(str, table.sources))
        print(f"  {sources} -> {table.target}  primary key ({', '.join(table.primary_keys)})"
              + (f", partitioned by ({', '.join(table.partition_keys)})" if table.partition_keys else ""))
    return 0


def _table_row(table) -> dict:
    return {
        "table": str(table.target), "phase": table.phase if table.committed else "unchanged",
        "snapshot_id": table.snapshot_id, "offset": str(table.offset) if table.offset else None,
        "inserted": table.counts.inserted, "updated": table.counts.updated, "deleted": table.counts.deleted,
        "row_count": table.row_count,
        "decoder_fallbacks": table.decoder_fallbacks,  # binlog rows events decoded in Python, per cause
        "upkeep": table.upkeep.summary() if table.upkeep is not None else None,  # table upkeep after the commit
        "ddl": [ddl.describe() for ddl in table.ddl],  # each DDL met: statement, binlog position, what Paimon did
    }


def _print_table(row: dict) -> None:
    print(f"  {row['table']}: {row['phase']}"
          + (f", snapshot {row['snapshot_id']} at {row['offset']}, +{row['inserted']} ~{row['updated']} "
             f"-{row['deleted']}" + (f", {row['row_count']} rows" if row["row_count"] is not None else "")
             if row["snapshot_id"] else ""), flush=True)
    for ddl in row["ddl"]:
        print(f"    {ddl}", flush=True)


def cmd_run(args: argparse.Namespace) -> int:
    config = _load(args.pipeline)
    if args.follow:
        return _follow(config, args)
    with imports_outside_collection():
        from lakecdc.runtime import run_micro_batch

    result = run_micro_batch(config)
    rows = [_table_row(table) for table in sorted(result.tables.values(), key=lambda t: str(t.target))]
    if args.json:
        print(json.dumps({"pipeline": config.name, "head": str(result.head), "tables": rows}, indent=2))
    else:
        print(f"pipeline {config.name!r}: binlog head {result.head}, {result.seconds:.1f}s")
        for row in rows:
            _print_table(row)
    return 0


def _follow(config, args: argparse.Namespace) -> int:
    """``run --follow``: commit every pipeline.checkpoint-interval until SIGINT/SIGTERM, then commit what was read
    and exit 0. Each commit is printed as it happens (one JSON object per line with --json)."""
    from lakecdc.runtime import follow_pipeline

    freeze_after_imports(False)  # a long-lived process: what is alive at a later import is not the import's
    stop = threading.Event()

    def request_stop(signum, frame) -> None:
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, request_stop)

    def on_commit(tables) -> None:
        for table in tables:
            row = _table_row(table)
            if args.json:
                print(json.dumps({"pipeline": config.name, **row}), flush=True)
            else:
                _print_table(row)

    if not args.json:
        print(f"pipeline {config.name!r}: following, a commit every {config.checkpoint_interval_seconds:g} s "
              "(SIGINT/SIGTERM: commit and stop)", flush=True)
    result = follow_pipeline(config, should_stop=stop.is_set, on_commit=on_commit)
    if not args.json:
        print(f"pipeline {config.name!r}: stopped after {result.seconds:.1f}s, {result.follow_commits} follow "
              "commit(s)", flush=True)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from lakecdc.runtime import pipeline_status

    config = _load(args.pipeline)
    status = pipeline_status(config, consumers=True)
    if args.json:
        print(json.dumps({
            "pipeline": status.pipeline, "head": str(status.head), "needs_run": status.needs_run,
            "tables": [{"table": str(t.target), "exists": t.exists, "snapshot_id": t.snapshot_id,
                        "checkpoint": str(t.checkpoint) if t.checkpoint else None, "lag": t.lag(status.head),
                        "behind": t.behind, "refresh_due": t.refresh_due,
                        "last_change": str(t.last_change) if t.last_change else None,
                        "consumers": [{"consumer": c.consumer_id, "next_snapshot": c.next_snapshot,
                                       "snapshots_behind": c.snapshots_behind, "changes_behind": c.changes_behind,
                                       "expired": c.expired} for c in t.consumers]}
                       for t in status.tables], "scanned_bytes": status.scanned_bytes}, indent=2))
        return 0
    print(f"pipeline {status.pipeline!r}: binlog head {status.head}")
    for table in status.tables:
        print(f"  {table.target}: snapshot {table.snapshot_id or '-'}, checkpoint {table.checkpoint or '-'}, "
              f"{table.lag(status.head)}")
        for consumer in table.consumers:
            print(f"    consumer {consumer.consumer_id}: {_consumer_lag(consumer)}")
    return 0


def _consumer_lag(consumer) -> str:
    if consumer.expired:
        return (f"next snapshot {consumer.next_snapshot} has expired: its next read fails (delete the consumer "
                f"to read the table again)")
    if consumer.snapshots_behind == 0:
        return f"up to date (next snapshot {consumer.next_snapshot})"
    changes = f", {consumer.changes_behind} change rows" if consumer.changes_behind is not None else ""
    return f"{consumer.snapshots_behind} snapshot(s) behind{changes} (next snapshot {consumer.next_snapshot})"


def cmd_upkeep(args: argparse.Namespace) -> int:
    from lakecdc.model import TableId
    from lakecdc.runtime.upkeep import upkeep_pipeline
    from lakecdc.sink.upkeep import parse_duration_ms

    config = _load(args.pipeline)
    try:
        tables = [TableId.parse(t) for t in args.table] if args.table else None
    except ValueError as exc:
        raise SinkError(f"--table: {exc}") from None
    older = parse_duration_ms(args.orphans_older_than, "--orphans-older-than") / 1000 \
        if args.orphans_older_than is not None else None
    wait = parse_duration_ms(args.wait, "--wait") / 1000
    results = upkeep_pipeline(config, tables, full_compaction=args.full, orphan_older_than_seconds=older,
                              wait_seconds=wait)
    if args.json:
        print(json.dumps({"pipeline": config.name, "tables": [{
            "table": str(r.table), "skipped": r.skipped, "compaction_snapshot_id": r.compaction_snapshot_id,
            "partitions_compacted": r.partitions_compacted, "files_rewritten": r.files_rewritten,
            "upgrade_snapshot_id": r.upgrade_snapshot_id, "files_upgraded": r.files_upgraded,
            "manifest_snapshot_id": r.manifest_snapshot_id, "manifests_before": r.manifests_before,
            "manifests_after": r.manifests_after, "expired_snapshots": r.expired_snapshots,
            "expired_files_deleted": r.expired_files_deleted, "orphan_files_deleted": r.orphan_files_deleted,
            "notes": r.notes} for r in results]}, indent=2))
    else:
        print(f"pipeline {config.name!r}: upkeep of {len(results)} table(s)")
        for result in results:
            print(f"  {result.summary()}")
    return 0


def cmd_resnapshot(args: argparse.Namespace) -> int:
    from lakecdc.model import TableId
    from lakecdc.runtime.resnapshots import resnapshot_or_snapshot

    config = _load(args.pipeline)
    try:
        target = TableId.parse(args.table)
    except ValueError as exc:
        raise PipelineConfigError(f"table {args.table!r}: {exc}") from None
    result = resnapshot_or_snapshot(config, target, args.partition)
    if result is None:
        print(f"{target}: nothing committed")
        return 0
    row = {"table": str(target), "phase": result.phase, "partition": getattr(result, "partition", None),
           "snapshot_id": result.snapshot_id, "offset": str(result.offset) if result.offset else None,
           "snapshot_offset": str(getattr(result, "snapshot_offset", None) or result.offset),
           "rows": getattr(result, "snapshot_rows", 0), "stale_deleted": getattr(result, "stale_deleted", 0),
           "schema_changes": getattr(result, "schema_changes", []), "row_count": result.row_count,
           "schema": [f"{f.name} {f.type}" for f in result.schema] if result.schema is not None else []}
    if args.json:
        print(json.dumps(row, indent=2))
        return 0
    print(f"{target}: {result.phase}{' of partition ' + row['partition'] if row['partition'] else ''}, snapshot "
          f"{result.snapshot_id} at {row['offset']} ({row['rows']} rows from MySQL at {row['snapshot_offset']}, "
          f"{row['stale_deleted']} stale rows deleted, {result.row_count} rows in the table)")
    for change in row["schema_changes"]:
        print(f"  schema: {change}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from lakecdc.model import TableId
    from lakecdc.runtime.reconcile import check_pipeline

    config = _load(args.pipeline)
    try:
        tables = [TableId.parse(t) for t in args.table] if args.table else None
    except ValueError as exc:
        raise PipelineConfigError(f"--table: {exc}") from None
    results = check_pipeline(config, tables)
    failed = [r for r in results if not r.passed]
    if args.json:
        print(json.dumps({"pipeline": config.name, "passed": not failed,
                          "checks": [r.to_json() for r in results]}, indent=2))
    else:
        for result in results:
            verdict = "ok  " if result.passed else ("FAIL" if result.evaluated else "ERR ")
            print(f"{verdict} {result.target} {result.check}: {result.description}")
        print(f"pipeline {config.name!r}: {len(results) - len(failed)} of {len(results)} checks passed")
    return 3 if failed else 0


def cmd_sql(args: argparse.Namespace) -> int:
    from lakecdc.sink.sql import format_table, run_sql

    config = _load(args.pipeline)
    print(format_table(run_sql(config.sink.catalog_options, args.query, write=args.write)))
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    from lakecdc.model import TableId
    from lakecdc.sink.sql import show_create_table

    config = _load(args.pipeline)
    table = TableId.parse(args.table)
    print(show_create_table(config.sink.catalog_options, table.database, table.table))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lakecdc", description="MySQL change data into Apache Paimon tables.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    commands = parser.add_subparsers(dest="command", required=True)
    validate = commands.add_parser("validate", help="check a pipeline file")
    validate.add_argument("pipeline")
    validate.add_argument("--connect", action="store_true",
                          help="also check the MySQL server and resolve tables, transforms and target tables")
    validate.set_defaults(func=cmd_validate)
    run = commands.add_parser("run", help="run one micro-batch (snapshot or binlog up to the current head)")
    run.add_argument("pipeline")
    run.add_argument("--json", action="store_true")
    run.add_argument("--follow", action="store_true",
                     help="keep the binlog connection open and commit every pipeline.checkpoint-interval (default "
                          "3 s) until SIGINT/SIGTERM, which commit what was read and stop")
    run.set_defaults(func=cmd_run)
    status = commands.add_parser("status", help="checkpoint, latest snapshot and lag of each table, and whether it "
                                                "is behind (a change or DDL after its checkpoint); its Paimon "
                                                "consumers and how far behind they are")
    status.add_argument("pipeline")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)
    describe = commands.add_parser("describe", help="print a Paimon table's definition (SHOW CREATE TABLE)")
    describe.add_argument("pipeline")
    describe.add_argument("table", help="database.table in the warehouse")
    describe.set_defaults(func=cmd_describe)
    sql = commands.add_parser("sql", help="query the pipeline's Paimon warehouse with SQL (DataFusion)")
    sql.add_argument("pipeline")
    sql.add_argument("query", help="e.g. \"SELECT * FROM inventory.orders ORDER BY id\"")
    sql.add_argument("--write", action="store_true",
                     help="allow INSERT/CREATE/DROP (takes the lock of each table the statement names)")
    sql.set_defaults(func=cmd_sql)
    upkeep = commands.add_parser("upkeep", help="compact small files, merge manifests, expire snapshots and remove "
                                                "orphan files of the pipeline's Paimon tables")
    upkeep.add_argument("pipeline")
    upkeep.add_argument("--table", action="append", default=[], metavar="DB.TABLE",
                        help="only this table (repeatable); default: every table the pipeline wrote")
    upkeep.add_argument("--full", action="store_true",
                        help="full compaction: rewrite every bucket with more than one file or deleted rows")
    upkeep.add_argument("--orphans-older-than", metavar="DURATION",
                        help="remove unreferenced files older than this (default: pipeline.lakecdc.upkeep."
                             "orphan-files.older-than, 1 d)")
    upkeep.add_argument("--wait", default="0 s", metavar="DURATION",
                        help="wait this long for a table another writer holds, then skip it (default: skip)")
    upkeep.add_argument("--json", action="store_true")
    upkeep.set_defaults(func=cmd_upkeep)
    resnapshot = commands.add_parser(
        "resnapshot", help="re-load one Paimon table (or one partition) from MySQL, in commit groups; also brings a "
                           "drifted table schema back to what the pipeline produces")
    resnapshot.add_argument("pipeline")
    resnapshot.add_argument("table", help="database.table in the warehouse")
    resnapshot.add_argument("--partition", metavar="KEY=VALUE",
                            help="only this Paimon partition, e.g. order_day=20260101 (k1=v1/k2=v2 for several keys)")
    resnapshot.add_argument("--json", action="store_true")
    resnapshot.set_defaults(func=cmd_resnapshot)
    check = commands.add_parser("check", help="full reconciliation against MySQL, as Dagster's reconcile job: row "
                                              "count at the checkpoint (MySQL read in chunks), unique primary keys "
                                              "(Paimon read bucket by bucket), and the schema against MySQL now "
                                              "(exit code 3 when one fails)")
    check.add_argument("pipeline")
    check.add_argument("--table", action="append", default=[], metavar="DB.TABLE",
                       help="only this table (repeatable); default: every table of the pipeline")
    check.add_argument("--json", action="store_true")
    check.set_defaults(func=cmd_check)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; ``argv`` None: this process's own command line (the ``lakecdc`` script, ``python -m
    lakecdc.cli``), after which the process ends (see :func:`_before_exit`)."""
    args = build_parser().parse_args(argv)
    if argv is None:
        freeze_after_imports()  # this process ends with the command (lakecdc.collector)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except PipelineConfigError as exc:
        from lakecdc.config import locate_config_error

        print(f"error: {locate_config_error(exc).text()}", file=sys.stderr)  # with the YAML line of the key
        return 2
    except LakeCdcError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if argv is None:
            _before_exit()


def _before_exit() -> None:
    """The process ends once the command returns: every object it holds goes to the garbage collector's permanent
    generation (``gc.freeze``), which the interpreter's shutdown does not collect. Its full collections over
    everything the imports and the run created took 0.3-0.6 s of a run with nothing to read (docs/benchmarks.md).
    The shutdown is otherwise the same: atexit handlers, thread joins, flushing stdout/stderr and the logs (the
    command has committed, closed and released what it wrote); objects left in reference cycles are freed by the
    process's exit instead of being finalized one by one."""
    gc.freeze()


if __name__ == "__main__":
    sys.exit(main())
