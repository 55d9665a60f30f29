"""Asset checks of a Paimon table, evaluated right after each materialisation (blocking: a failure stops the
assets downstream) and on demand from the UI.

* ``primary_key_unique``: the merged table, read by pypaimon-rust's independent reader, has no two rows with one
  primary key.
* ``row_count_matches_source``: active rows in Paimon (soft-deleted rows excluded) equal the MySQL rows at the
  table's committed binlog offset. MySQL is counted now, and the changes between the checkpoint and the count
  are read back from the binlog, so the comparison is exact even when the source is busy; when the binlog moved
  *while* counting, those concurrent changes are the tolerance, stated in the metadata. Only defined when no
  transform rule of the table filters rows (a filtered table is not comparable row for row).
* ``schema_matches_source``: the columns and Paimon types the pipeline would produce from the MySQL schema *now*
  equal the stored table's (a column added or dropped in MySQL, or a changed type, fails it before the next run
  does).
"""

import dataclasses

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.config import PipelineConfig
from lakecdc.errors import LakeCdcError
from lakecdc.model import BinlogOffset, TableId
from lakecdc.dagster.resnapshot import soft_delete_column
from lakecdc.transform.rules import select_rule

PK_UNIQUE = "primary_key_unique"
ROW_COUNT = "row_count_matches_source"
SCHEMA = "schema_matches_source"
# Reading more binlog than this to reconcile a count would make the check slower than the run it checks.
MAX_RECONCILE_BYTES = 64 * 1024 * 1024


def has_filter(config: PipelineConfig, sources: list[TableId]) -> bool:
    for source in sources:
        rule = select_rule(config.transforms, source)
        if rule is not None and rule.filter and rule.filter.strip():
            return True
    return False


def check_specs(config: PipelineConfig, key: dg.AssetKey, sources: list[TableId]) -> list[dg.AssetCheckSpec]:
    specs = [
        dg.AssetCheckSpec(PK_UNIQUE, asset=key, blocking=True,
                          description="No two rows of the merged Paimon table share a primary key"),
        dg.AssetCheckSpec(SCHEMA, asset=key, blocking=True,
                          description="The columns and types produced from the current MySQL schema equal the "
                                      "stored Paimon table's"),
    ]
    if not has_filter(config, sources):
        specs.insert(1, dg.AssetCheckSpec(
            ROW_COUNT, asset=key, blocking=True,
            description="Active Paimon rows equal the MySQL rows at the committed binlog offset (exact; changes "
                        "made while counting are the stated tolerance)"))
    return specs


@dataclasses.dataclass
class TableState:
    """What the checks look at: the live plan for the table (from MySQL now) and the stored Paimon table."""

    config: PipelineConfig
    target: TableId
    key: dg.AssetKey
    plan: object | None  # lakecdc.runtime.plan.TargetPlan
    plan_error: str | None
    stored: object | None  # lakecdc.sink.TableDescription
    checkpoint: BinlogOffset | None
    snapshot_pending: bool = False  # a chunked snapshot is still being read

    @classmethod
    def load(cls, config: PipelineConfig, target: TableId, key: dg.AssetKey) -> "TableState":
        from lakecdc.runtime.checkpoint import offset_from_properties
        from lakecdc.runtime.plan import build_plan, source_options
        from lakecdc.sink import PaimonSink
        from lakecdc.source import MySqlSource

        plan, plan_error = None, None
        try:
            plan = build_plan(config, MySqlSource(source_options(config))).restrict({target}).targets[target]
        except LakeCdcError as exc:
            plan_error = str(exc)
        sink = PaimonSink(config.sink.catalog_options)
        stored = sink.describe(target) if sink.table_exists(target) else None
        properties = sink.checkpoint(target) if stored is not None else None
        pending = bool((properties or {}).get("lakecdc.snapshot.pending"))
        return cls(config, target, key, plan, plan_error, stored, offset_from_properties(properties), pending)


def evaluate(state: TableState, names: set[str]) -> list[dg.AssetCheckResult]:
    """The results of the selected checks (every selected check yields a result: Dagster requires it)."""
    results = []
    for name, check in ((PK_UNIQUE, primary_key_unique), (ROW_COUNT, row_count_matches_source),
                        (SCHEMA, schema_matches_source)):
        if name not in names:
            continue
        try:
            results.append(check(state))
        except LakeCdcError as exc:
            results.append(_result(state, name, False, f"could not be evaluated: {exc}",
                                   severity=dg.AssetCheckSeverity.WARN))
    return results


def _result(state: TableState, name: str, passed: bool, description: str, metadata: dict | None = None,
            severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(asset_key=state.key, check_name=name, passed=passed, severity=severity,
                               description=description, metadata=metadata or {})


def _sql(state: TableState, query: str) -> pa.Table:
    from lakecdc.sink.sql import run_sql

    try:
        return run_sql(state.config.sink.catalog_options, query)
    except Exception as exc:  # DataFusion raises its own exception types
        raise LakeCdcError(f"reading {state.target} back failed: {exc}") from None


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _table_ref(table: TableId) -> str:
    return f"{_ident(table.database)}.{_ident(table.table)}"


def primary_key_unique(state: TableState) -> dg.AssetCheckResult:
    if state.stored is None:
        return _result(state, PK_UNIQUE, False, f"the Paimon table {state.target} does not exist yet",
                       severity=dg.AssetCheckSeverity.WARN)
    keys = list(state.stored.primary_keys)
    if not keys:
        return _result(state, PK_UNIQUE, True, "append table without a primary key: nothing to check",
                       {"primary_keys": ""})
    columns = ", ".join(_ident(k) for k in keys)
    duplicates = _sql(state, f"SELECT {columns}, COUNT(*) AS copies FROM {_table_ref(state.target)} "
                             f"GROUP BY {columns} HAVING COUNT(*) > 1 LIMIT 5")
    metadata = {"primary_keys": ", ".join(keys), "duplicate_keys_shown": duplicates.num_rows}
    if duplicates.num_rows:
        sample = "; ".join(str(row) for row in duplicates.to_pylist())
        return _result(state, PK_UNIQUE, False, f"duplicate primary keys, e.g. {sample}",
                       {**metadata, "sample": sample})
    return _result(state, PK_UNIQUE, True, f"every ({', '.join(keys)}) is unique", metadata)


def row_count_matches_source(state: TableState) -> dg.AssetCheckResult:
    if state.stored is None or state.checkpoint is None:
        return _result(state, ROW_COUNT, False, f"{state.target} has no committed checkpoint yet",
                       severity=dg.AssetCheckSeverity.WARN)
    if state.snapshot_pending:
        return _result(state, ROW_COUNT, False, f"the snapshot of {state.target} is still in progress (it resumes "
                       "with the next run)", severity=dg.AssetCheckSeverity.WARN)
    if state.plan is None:
        return _result(state, ROW_COUNT, False, f"cannot read the source tables: {state.plan_error}")
    if not state.stored.primary_keys:
        return _result(state, ROW_COUNT, False, "append table: every change adds a row, so its row count is not "
                       "comparable with MySQL's", severity=dg.AssetCheckSeverity.WARN)
    deleted_marker = soft_delete_column(state.config, state.plan)
    if deleted_marker is None:
        return _result(state, ROW_COUNT, False, "SOFT_DELETE table without a column holding __data_event_type__: "
                       "deleted rows cannot be told from active ones", severity=dg.AssetCheckSeverity.WARN)
    where = f" WHERE {_ident(deleted_marker)} <> '-D'" if deleted_marker else ""
    paimon_rows = _sql(state, f"SELECT COUNT(*) AS n FROM {_table_ref(state.target)}{where}").column(0)[0].as_py()

    count = _count_at_checkpoint(state)
    if count is None:
        return _result(state, ROW_COUNT, False, "the source moved more than 64 MiB of binlog since the checkpoint; "
                       "the count was not reconciled (run the pipeline, then the check)",
                       {"paimon_active_rows": paimon_rows}, severity=dg.AssetCheckSeverity.WARN)
    expected, tolerance, metadata = count
    difference = paimon_rows - expected
    metadata = {**metadata, "paimon_active_rows": dg.MetadataValue.int(paimon_rows),
                "expected_rows_at_checkpoint": dg.MetadataValue.int(expected),
                "difference": dg.MetadataValue.int(difference), "tolerance": dg.MetadataValue.int(tolerance),
                "checkpoint": str(state.checkpoint)}
    passed = abs(difference) <= tolerance
    how = "exact" if tolerance == 0 else f"within ±{tolerance} (rows changed in MySQL while counting)"
    if passed:
        return _result(state, ROW_COUNT, True, f"{paimon_rows} active rows in Paimon, {expected} in MySQL at "
                                               f"{state.checkpoint} ({how})", metadata)
    return _result(state, ROW_COUNT, False, f"{paimon_rows} active rows in Paimon but {expected} in MySQL at "
                                            f"{state.checkpoint} (difference {difference:+d}, tolerance {tolerance})",
                   metadata)


def _count_at_checkpoint(state: TableState):
    """(expected MySQL rows at the checkpoint, tolerance, metadata), or None when reconciling would read too much
    binlog. MySQL rows are counted between two reads of the binlog head; the binlog changes from the checkpoint to
    the first head are undone from the count (inserts minus deletes), and changes between the two heads (made
    while counting) become the tolerance."""
    from lakecdc.runtime.plan import source_options
    from lakecdc.source import MySqlSource
    from lakecdc.source.connection import connect, query
    from lakecdc.source.snapshot import quote_identifier

    options = source_options(state.config)
    source = MySqlSource(options)
    sources = {s.source.table_id: s.source for s in state.plan.sources}
    before = source.head_offset()
    if _too_far(state.checkpoint, before):
        return None
    conn = connect(options)
    try:
        mysql_rows = 0
        for table_id in sorted(sources):
            sql = f"SELECT COUNT(*) FROM {quote_identifier(table_id.database)}.{quote_identifier(table_id.table)}"
            mysql_rows += int(query(conn, sql, options=options)[0][0])
    finally:
        conn.close()
    after = source.head_offset()
    net_since, changes_since = _binlog_changes(source, sources, state.checkpoint, before)
    _, tolerance = _binlog_changes(source, sources, before, after)
    metadata = {"mysql_rows_now": dg.MetadataValue.int(mysql_rows), "counted_at": str(before),
                "net_inserts_since_checkpoint": dg.MetadataValue.int(net_since),
                "source_quiet": dg.MetadataValue.bool(changes_since == 0 and tolerance == 0)}
    return mysql_rows - net_since, tolerance, metadata


def _too_far(start: BinlogOffset, stop: BinlogOffset) -> bool:
    if stop <= start:
        return False
    return start.file != stop.file or stop.pos - start.pos > MAX_RECONCILE_BYTES


def _binlog_changes(source, tables: dict, start: BinlogOffset, stop: BinlogOffset) -> tuple[int, int]:
    """(inserts − deletes, inserts + deletes) of ``tables`` in the binlog after ``start`` up to ``stop``."""
    if stop <= start:
        return 0, 0
    reader = source.read_binlog(tables, {t: start for t in tables}, stop)
    inserts = deletes = 0
    for batch in reader:
        kinds = batch.data.column("__lakecdc_op__")
        inserts += pc.sum(pc.equal(kinds, "+I")).as_py() or 0
        deletes += pc.sum(pc.equal(kinds, "-D")).as_py() or 0
    return inserts - deletes, inserts + deletes


def expected_columns(plan) -> list[tuple[str, str]]:
    """(column, Paimon type) the pipeline produces for the table from the current MySQL schema."""
    from lakecdc.dagster.metadata import type_name
    from lakecdc.sink.tables import paimon_arrow_type

    keys = set(plan.primary_keys) | set(plan.partition_keys) if plan.primary_keys else set()
    columns = []
    for f in plan.schema:
        nullable = f.nullable and f.name not in keys
        columns.append((f.name, type_name(paimon_arrow_type(plan.target, f.name, f.type)) +
                        ("" if nullable else " NOT NULL")))
    return columns


def stored_columns(stored) -> list[tuple[str, str]]:
    from lakecdc.dagster.metadata import type_name

    return [(f.name, type_name(f.type) + ("" if f.nullable else " NOT NULL")) for f in stored.schema]


_NEXT_RUN = {
    "evolve": "schema.change.behavior evolve: the next run applies the DDL it reads from the binlog",
    "try_evolve": "schema.change.behavior try_evolve: the next run applies what Paimon readers can read back",
    "lenient": "schema.change.behavior lenient: the next run adds new columns, nullable",
    "ignore": "schema.change.behavior ignore: the table keeps its schema, new columns are not captured",
    "exception": "schema.change.behavior exception: the next run stops at the DDL",
}


def _comparable(type_text: str, behavior: str) -> str:
    return type_text.replace(" NOT NULL", "") if behavior == "lenient" else type_text


def schema_matches_source(state: TableState) -> dg.AssetCheckResult:
    if state.plan is None:
        return _result(state, SCHEMA, False, f"the pipeline cannot be planned against MySQL now: {state.plan_error}")
    if state.stored is None:
        return _result(state, SCHEMA, False, f"the Paimon table {state.target} does not exist yet",
                       severity=dg.AssetCheckSeverity.WARN)
    expected = dict(expected_columns(state.plan))
    stored = dict(stored_columns(state.stored))
    behavior = state.config.schema_change_behavior
    added = [c for c in expected if c not in stored]
    # lenient mode keeps dropped and renamed columns (nullable) and adds new ones nullable: only missing columns and
    # other types count there
    dropped = [c for c in stored if c not in expected] if behavior != "lenient" else []
    changed = [f"{c}: {stored[c]} in Paimon, {expected[c]} from MySQL" for c in expected
               if c in stored and _comparable(stored[c], behavior) != _comparable(expected[c], behavior)]
    metadata = {"source_tables": ", ".join(str(s.source.table_id) for s in state.plan.sources),
                "columns_from_source": dg.MetadataValue.int(len(expected)),
                "columns_in_paimon": dg.MetadataValue.int(len(stored))}
    problems = []
    if added:
        problems.append(f"new in MySQL, missing in Paimon: {', '.join(added)}")
    if dropped:
        problems.append(f"in Paimon, no longer produced from MySQL: {', '.join(dropped)}")
    if changed:
        problems.append(f"type changed: {'; '.join(changed)}")
    if problems:
        # Drift is expected between a DDL and the run that reads it; whether it closes depends on the behaviour
        return _result(state, SCHEMA, False, f"schema drift ({_NEXT_RUN.get(behavior, '')}): " + " | ".join(problems),
                       {**metadata, "added": ", ".join(added), "dropped": ", ".join(dropped),
                        "changed": "; ".join(changed), "schema_change_behavior": behavior},
                       severity=dg.AssetCheckSeverity.WARN)
    return _result(state, SCHEMA, True, f"{len(expected)} columns in sync with MySQL", metadata)
