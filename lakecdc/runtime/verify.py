"""The checks of a run's own commits: what Dagster runs as blocking asset checks with every materialisation. They
read neither the MySQL table nor the whole Paimon table; their cost follows what the run wrote.

* ``changed_rows_match``: every primary key the run wrote holds, in the snapshot the run committed last, exactly
  the last row the run handed to Paimon for it (as Paimon stores it: after the transform, converted to the table's
  types), or is absent when that row was a delete. The run keeps those rows while it writes them
  (lakecdc.sink.written: at most 10,000 keys from its first commit and 1,000 from each later one, the first ones
  written) and the check reads exactly those keys back (lakecdc.sink.reader.read_keys: buckets and data files
  pruned). An append table has no key to read back: each snapshot the run committed must have added exactly the
  rows the run wrote into it (the snapshots' delta record counts, metadata only).
* ``changed_keys_unique``: none of those keys is held by two rows.
* ``schema_matches_source``: the columns and Paimon types the pipeline produces from the source schemas the run
  reached (its plan after the DDL it read) equal the stored table's, as far as ``schema.change.behavior`` promises
  they follow MySQL.

The whole-table checks (row count against MySQL, primary-key uniqueness over every bucket) are the reconciliation
(lakecdc.runtime.reconcile), a scheduled job of its own.

A failed check is a real difference or a check that could not look (``evaluated`` False): both fail, so blocking
checks stop downstream work. A check that cannot apply to a table by its nature passes and says so
(``applicable`` False).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.config import PipelineConfig
from lakecdc.errors import LakeCdcError
from lakecdc.model import TableId
from lakecdc.runtime.checkpoint import PHASE_RESNAPSHOT
from lakecdc.runtime.plan import TargetPlan
from lakecdc.runtime.schema_evolution import IGNORE, LENIENT, TRY_EVOLVE, included_types
from lakecdc.sink import PaimonSink
from lakecdc.sink.evolution import holds_every_value, paimon_type, readable_type_change
from lakecdc.sink.options import merge_engine
from lakecdc.sink.written import (FIRST_COMMIT_KEYS, KIND_COLUMN, LATER_COMMIT_KEYS, RETRACT_KINDS, SEGMENT_COLUMN,
                                  WrittenRows)
from lakecdc.source.ddl import ADD_COLUMN, ALTER_COLUMN_TYPE, DROP_COLUMN, RENAME_COLUMN
from lakecdc.transform.routes import merge_schemas
from lakecdc.transform.rules import select_rule

CHANGED_ROWS = "changed_rows_match"
CHANGED_KEYS_UNIQUE = "changed_keys_unique"
SCHEMA = "schema_matches_source"
RUN_CHECKS = (CHANGED_ROWS, CHANGED_KEYS_UNIQUE, SCHEMA)
MISMATCHES_SHOWN = 5  # differences a failed check lists


@dataclass
class CheckResult:
    """The outcome of one check of one table. ``evaluated`` is False when the check could not look (it then fails
    too); ``applicable`` is False when it cannot apply to this table (it then passes and says why)."""

    check: str
    target: TableId
    passed: bool
    description: str
    evaluated: bool = True
    applicable: bool = True
    metadata: dict[str, int | str | bool] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"table": str(self.target), "check": self.check, "passed": self.passed, "evaluated": self.evaluated,
                "applicable": self.applicable, "description": self.description, "metadata": self.metadata}


def not_evaluated(name: str, target: TableId, why: str) -> CheckResult:
    return CheckResult(name, target, False, f"could not be evaluated: {why}", evaluated=False)


def not_applicable(name: str, target: TableId, why: str, **metadata) -> CheckResult:
    return CheckResult(name, target, True, f"not applicable: {why}", applicable=False, metadata=dict(metadata))


@dataclass
class SchemaDrift:
    """Expected (from the source schemas) against stored Paimon columns, as Paimon types (``INT NOT NULL``)."""

    expected: dict[str, str]
    stored: dict[str, str]
    added: list[str]  # produced from MySQL, missing in Paimon
    dropped: list[str]  # in Paimon, no longer produced
    changed: list[str]  # produced with another type

    @property
    def drifted(self) -> bool:
        return bool(self.added or self.dropped or self.changed)

    def describe(self) -> str:
        problems = []
        if self.added:
            problems.append(f"new in MySQL, missing in Paimon: {', '.join(self.added)}")
        if self.dropped:
            problems.append(f"in Paimon, no longer produced from MySQL: {', '.join(self.dropped)}")
        if self.changed:
            problems.append("type changed: " + "; ".join(
                f"{c}: {self.stored[c]} in Paimon, {self.expected[c]} from MySQL" for c in self.changed))
        return " | ".join(problems)


def has_filter(config: PipelineConfig, sources: list[TableId]) -> bool:
    """Whether a transform rule filters rows of one of ``sources`` (then Paimon holds fewer rows than MySQL)."""
    for source in sources:
        rule = select_rule(config.transforms, source)
        if rule is not None and rule.filter and rule.filter.strip():
            return True
    return False


# ------------------------------------------------------------------------------------------- a run's checks


def verify_run(config: PipelineConfig, sink: PaimonSink, target: TableId, result, plan: TargetPlan | None,
               names: set[str] | list[str] | tuple[str, ...] = RUN_CHECKS, *,
               plan_error: str = "") -> list[CheckResult]:
    """The selected checks of what one run (or one follow commit) did to ``target``: ``result`` is its
    ``TableResult`` (with ``written``: the run recorded its writes), ``plan`` the target's plan the run committed
    with. Without a result (no run: a check executed alone) the row checks say there is nothing to check and the
    schema check compares ``plan`` (from MySQL now; None with ``plan_error`` when it could not be made) with the
    stored table. An error inside a check is a failed result."""
    results = []
    rows = unique = None
    if CHANGED_ROWS in names or CHANGED_KEYS_UNIQUE in names:
        try:
            rows, unique = check_written(sink, target, result)
        except LakeCdcError as exc:
            rows = not_evaluated(CHANGED_ROWS, target, str(exc))
            unique = not_evaluated(CHANGED_KEYS_UNIQUE, target, str(exc))
    if CHANGED_ROWS in names:
        results.append(rows)
    if CHANGED_KEYS_UNIQUE in names:
        results.append(unique)
    if SCHEMA in names:
        try:
            stored = getattr(result, "paimon_types", None) or \
                (sink.paimon_types(target) if sink.table_exists(target) else None)
            results.append(schema_check(config, target, plan, stored, reached="the source schemas the run reached"
                                        if result is not None else "MySQL's schema now", plan_error=plan_error))
        except LakeCdcError as exc:
            results.append(not_evaluated(SCHEMA, target, str(exc)))
    return [r for r in results if r is not None]


def check_written(sink: PaimonSink, target: TableId, result) -> tuple[CheckResult, CheckResult]:
    """(changed_rows_match, changed_keys_unique) of what ``result`` says the run wrote to ``target``."""
    written: WrittenRows | None = getattr(result, "written", None) if result is not None else None
    if result is None:
        why = ("this check verifies the rows a run commits, and no run wrote the table here: materialise the table "
               "to check its commit (the reconcile job checks the whole table)")
        return not_applicable(CHANGED_ROWS, target, why), not_applicable(CHANGED_KEYS_UNIQUE, target, why)
    if getattr(result, "phase", None) == PHASE_RESNAPSHOT:
        why = ("a re-snapshot rewrites the table (or partition) from MySQL in commit groups; the reconcile job checks "
               "its rows against MySQL")
        return not_applicable(CHANGED_ROWS, target, why), not_applicable(CHANGED_KEYS_UNIQUE, target, why)
    if written is None:
        why = f"the run's writes to {target} were not kept, so its commit cannot be read back"
        return not_evaluated(CHANGED_ROWS, target, why), not_evaluated(CHANGED_KEYS_UNIQUE, target, why)
    if written.error is not None:
        return not_evaluated(CHANGED_ROWS, target, written.error), not_evaluated(CHANGED_KEYS_UNIQUE, target,
                                                                                 written.error)
    if not written.snapshot_ids:
        why = "the run committed nothing to this table"
        return not_applicable(CHANGED_ROWS, target, why), not_applicable(CHANGED_KEYS_UNIQUE, target, why)
    if not sink.table_exists(target):
        why = f"{target} was dropped by the run (DROP TABLE upstream)"
        return not_applicable(CHANGED_ROWS, target, why), not_applicable(CHANGED_KEYS_UNIQUE, target, why)
    if not written.primary_keys:
        return _append_rows(sink, target, written), not_applicable(
            CHANGED_KEYS_UNIQUE, target, "an append table has no primary key")
    return _keyed_rows(sink, target, written)


def _append_rows(sink: PaimonSink, target: TableId, written: WrittenRows) -> CheckResult:
    """An append table: each snapshot the run committed added exactly the rows the run wrote into it."""
    manager = sink.snapshot_manager(target)
    wrong = []
    for snapshot_id in written.snapshot_ids:
        if snapshot_id not in written.rows_per_snapshot:
            continue  # a TRUNCATE TABLE's snapshot
        snapshot = manager.get_snapshot_by_id(snapshot_id) if manager is not None else None
        if snapshot is None:
            return not_evaluated(CHANGED_ROWS, target, f"snapshot {snapshot_id} of the run has expired")
        if snapshot.delta_record_count != written.rows_per_snapshot[snapshot_id]:
            wrong.append(f"snapshot {snapshot_id} added {snapshot.delta_record_count} rows, the run wrote "
                         f"{written.rows_per_snapshot[snapshot_id]}")
    metadata: dict = {"rows_written": written.rows_committed, "snapshots": len(written.snapshot_ids),
                      "snapshot_id": written.last_snapshot_id or 0}
    if wrong:
        return CheckResult(CHANGED_ROWS, target, False, "append table: " + "; ".join(wrong), metadata=metadata)
    return CheckResult(CHANGED_ROWS, target, True, f"append table: the run's {len(written.snapshot_ids)} "
                       f"snapshot(s) added exactly the {written.rows_committed} rows it wrote (their delta record "
                       "counts; an append table has no key to read back)", metadata=metadata)


def _unverifiable_values(options: dict[str, str]) -> str | None:
    """Why the stored row of a key need not be the last row written to it (None: it must be)."""
    engine = merge_engine(options)
    if engine != "deduplicate":
        return f"the merge engine {engine} merges the rows of a key, so Paimon holds no single row written"
    if options.get("sequence.field"):
        return (f"sequence.field {options['sequence.field']} lets a stored row with a higher sequence value win "
                "over the run's")
    return None


def _keyed_rows(sink: PaimonSink, target: TableId, written: WrittenRows) -> tuple[CheckResult, CheckResult]:
    keys = written.primary_keys
    snapshot_id = written.last_snapshot_id
    assert snapshot_id is not None and written.rows is not None or written.keys == 0
    sample = _sample_text(written)
    metadata: dict = {"snapshot_id": snapshot_id or 0, "rows_written": written.rows_committed,
                      "keys_checked": written.keys, "keys_not_checked": written.keys_skipped,
                      "sampled": written.sampled}
    if written.keys == 0:
        why = "the run wrote no row (its commit moved the checkpoint only)"
        return (CheckResult(CHANGED_ROWS, target, True, why, metadata=metadata),
                CheckResult(CHANGED_KEYS_UNIQUE, target, True, why, metadata=metadata))
    assert written.rows is not None and snapshot_id is not None
    expected = written.rows
    read = sink.read_keys(target, expected.select(keys), snapshot_id)
    actual = read.rows
    metadata.update({"reads": read.reads, "buckets_read": read.buckets, "files_read": read.files})
    how = f"read back from snapshot {snapshot_id} ({read.buckets} bucket(s), {read.files} data file(s))"
    unique = _unique_keys(target, actual, keys, sample, how, metadata)
    why_not = _unverifiable_values(sink.describe(target).options)
    if why_not is not None:
        return not_applicable(CHANGED_ROWS, target, why_not, **metadata), unique
    return _matching_rows(target, expected, actual, keys, written.segments, sample, how, metadata), unique


def _sample_text(written: WrittenRows) -> str:
    if not written.sampled:
        return f"all {written.keys} key(s) the run wrote"
    return (f"{written.keys} of the keys the run wrote (the first {FIRST_COMMIT_KEYS} of its first commit and "
            f"{LATER_COMMIT_KEYS} of each later one; {written.keys_skipped} more not checked)")


def _unique_keys(target: TableId, actual: pa.Table, keys: list[str], sample: str, how: str,
                 metadata: dict) -> CheckResult:
    counts = actual.group_by(keys, use_threads=False).aggregate([([], "count_all")])
    duplicates = counts.filter(pc.greater(counts.column("count_all"), 1))
    if duplicates.num_rows:
        shown = "; ".join(str(row) for row in duplicates.slice(0, MISMATCHES_SHOWN).to_pylist())
        return CheckResult(CHANGED_KEYS_UNIQUE, target, False, f"{duplicates.num_rows} of {sample} are held by more "
                           f"than one row, {how}: {shown}",
                           metadata={**metadata, "duplicate_keys": duplicates.num_rows, "sample": shown})
    return CheckResult(CHANGED_KEYS_UNIQUE, target, True, f"each of {sample} is held by at most one row, {how}",
                       metadata={**metadata, "duplicate_keys": 0})


def _matching_rows(target: TableId, expected: pa.Table, actual: pa.Table, keys: list[str],
                   segments: list[list[str]], sample: str, how: str, metadata: dict) -> CheckResult:
    """Each expected key's last row against the rows read back: present with equal values, or absent."""
    present = pc.invert(pc.is_in(expected.column(KIND_COLUMN), value_set=pa.array(RETRACT_KINDS, pa.int8())))
    left = expected.select(keys).append_column("__e", pa.array(range(expected.num_rows), pa.int64()))
    right = actual.select(keys).cast(left.select(keys).schema) \
        .append_column("__a", pa.array(range(actual.num_rows), pa.int64()))
    # the first row read of each expected key (a key held twice is the uniqueness check's), in expected's order
    pairs = left.join(right, keys, join_type="left outer").group_by("__e", use_threads=False) \
        .aggregate([("__a", "min")]).sort_by("__e")
    found = pairs.column("__a_min").combine_chunks()
    missing = pc.and_(present, pc.is_null(found))
    lingering = pc.and_(pc.invert(present), pc.is_valid(found))
    problems = []
    for label, mask in (("missing in Paimon", missing), ("still in Paimon after the run deleted it", lingering)):
        rows = expected.select(keys).filter(mask)
        if rows.num_rows:
            problems.append(f"{rows.num_rows} {label}, e.g. {rows.slice(0, MISMATCHES_SHOWN).to_pylist()}")
    both = pc.and_(present, pc.is_valid(found))
    e_rows, a_rows = pairs.column("__e").filter(both), found.filter(both)
    differing = _differing_columns(expected.take(e_rows), actual.take(a_rows), keys, segments)
    for column, (values_written, values_read, n) in differing.items():
        problems.append(f"{column}: {n} key(s) differ, e.g. written {values_written!r}, read {values_read!r}")
    checked = int(pc.sum(both).as_py() or 0)
    deleted = int(pc.sum(pc.invert(present)).as_py() or 0)
    metadata = {**metadata, "keys_present": checked, "keys_deleted": deleted}
    if problems:
        text = "; ".join(problems)
        return CheckResult(CHANGED_ROWS, target, False, f"{sample}, {how}, against the run's last row of each: "
                           + text, metadata={**metadata, "differences": text[:2000]})
    return CheckResult(CHANGED_ROWS, target, True, f"{sample}, {how}: {checked} hold the run's last row of the key, "
                       f"{deleted} are absent after the run deleted them", metadata=metadata)


def _differing_columns(expected: pa.Table, actual: pa.Table, keys: list[str],
                       segments: list[list[str]]) -> dict[str, tuple]:
    """Column → (a value written, the value read, keys differing), for the value columns of ``expected`` (the rows
    written, aligned with ``actual``, the rows read). A column is compared only for rows written while the table had
    it (a column added by a DDL during the run is not in the rows written before)."""
    differing = {}
    segment = expected.column(SEGMENT_COLUMN)
    for name in actual.column_names:
        if name in keys or name not in expected.column_names:
            continue
        had = pc.is_in(segment, value_set=pa.array([i for i, cols in enumerate(segments) if name in cols],
                                                   pa.int32()))
        equal = _equal(expected.column(name), actual.column(name))
        differ = pc.and_(had, pc.invert(equal))
        n = int(pc.sum(differ).as_py() or 0)
        if n:
            first = pc.index(differ, True).as_py()
            differing[name] = (expected.column(name)[first].as_py(), actual.column(name)[first].as_py(), n)
    return differing


def _equal(written: pa.ChunkedArray, read: pa.ChunkedArray) -> pa.Array:
    """Row by row: the two values are equal, NULL equal to NULL and NaN to NaN."""
    if written.type != read.type:
        written = written.cast(read.type)
    both_null = pc.and_(pc.is_null(written), pc.is_null(read))
    try:
        same = pc.fill_null(pc.equal(written, read), False)
    except pa.ArrowNotImplementedError:  # nested types: a Python comparison, of at most the sampled keys
        same = pa.array([a == b for a, b in zip(written.to_pylist(), read.to_pylist())], pa.bool_())
    if pa.types.is_floating(read.type):
        same = pc.or_(same, pc.fill_null(pc.and_(pc.is_nan(written), pc.is_nan(read)), False))
    return pc.or_(same, both_null)


# ------------------------------------------------------------------------------------------- schema


def produced_plan(plan: TargetPlan) -> TargetPlan:
    """``plan`` with the schema its sources' transforms produce now: a DDL a run applied recompiled a source's
    transform (its rows are then coerced into the stored table), which the target's schema does not follow."""
    schemas = [(str(s.source.table_id), getattr(s.transform, "_inner", s.transform).output_schema)
               for s in plan.sources]
    if not schemas:
        return plan
    schema = schemas[0][1] if len(schemas) == 1 else merge_schemas(schemas, plan.primary_keys, file=None,
                                                                   target=plan.target)
    return dataclasses.replace(plan, schema=schema)


def expected_types(plan: TargetPlan) -> dict[str, str]:
    """Column → Paimon type (``INT NOT NULL``) the pipeline produces for the table from the plan's source schemas,
    spelt as the stored table's (``PaimonSink.paimon_types``)."""
    keys = set(plan.primary_keys) | set(plan.partition_keys) if plan.primary_keys else set()
    return {f.name: str(paimon_type(plan.target, f.with_nullable(f.nullable and f.name not in keys)))
            for f in plan.schema}


def _without_null(type_text: str) -> str:
    return type_text.replace(" NOT NULL", "")


def schema_drift(plan: TargetPlan, stored: dict[str, str], behavior: str = "") -> SchemaDrift:
    """How the stored table's columns (``PaimonSink.paimon_types``) differ from what ``plan`` produces. In lenient
    mode columns are kept when dropped upstream and added nullable, so only missing columns and other base types
    count there."""
    expected = expected_types(plan)
    comparable = _without_null if behavior == LENIENT else (lambda t: t)
    added = [c for c in expected if c not in stored]
    dropped = [c for c in stored if c not in expected] if behavior != LENIENT else []
    changed = [c for c in expected if c in stored and comparable(stored[c]) != comparable(expected[c])]
    return SchemaDrift(expected, dict(stored), added, dropped, changed)


_NEXT_RUN = {
    "evolve": "schema.change.behavior evolve: the next run applies the DDL it reads from the binlog; if it does "
              "not, `lakecdc resnapshot` brings the table back to MySQL's schema",
    "try_evolve": "schema.change.behavior try_evolve: the next run applies what Paimon readers can read back",
    "lenient": "schema.change.behavior lenient: the next run adds new columns, nullable",
    "exception": "schema.change.behavior exception: the next run stops at the DDL",
}


def kept_by_design(config: PipelineConfig, drift: SchemaDrift) -> SchemaDrift:
    """The part of ``drift`` that the runs never close because ``schema.change.behavior`` or
    ``include/exclude.schema.changes`` keep those changes out of the table (ignore: all of it; excluded add, drop,
    rename or type changes; try_evolve: type changes lakecdc refuses whatever the stored values)."""
    if config.schema_change_behavior == IGNORE:
        return drift
    included = included_types(config)
    renames_out = RENAME_COLUMN not in included
    added = drift.added if ADD_COLUMN not in included or renames_out else []
    dropped = drift.dropped if DROP_COLUMN not in included or renames_out else []
    if ALTER_COLUMN_TYPE not in included:
        changed = drift.changed
    elif config.schema_change_behavior == TRY_EVOLVE:
        changed = [c for c in drift.changed
                   if not readable_type_change(_without_null(drift.stored[c]), _without_null(drift.expected[c]))]
    else:
        changed = []
    return SchemaDrift(drift.expected, drift.stored, added, dropped, changed)


def schema_check(config: PipelineConfig, target: TableId, plan: TargetPlan | None, stored: dict[str, str] | None,
                 *, reached: str, plan_error: str = "") -> CheckResult:
    """``schema_matches_source``: the columns ``plan`` produces (``reached`` says from which source schemas)
    against the ``stored`` Paimon types."""
    if plan is None:
        return not_evaluated(SCHEMA, target, f"the pipeline cannot be planned against MySQL: {plan_error}"
                             if plan_error else f"no plan of {target}")
    if stored is None:
        return not_evaluated(SCHEMA, target, f"the Paimon table {target} does not exist yet")
    behavior = config.schema_change_behavior
    drift = schema_drift(produced_plan(plan), stored, behavior)
    metadata: dict = {"source_tables": ", ".join(str(s.source.table_id) for s in plan.sources),
                      "columns_from_source": len(drift.expected), "columns_in_paimon": len(drift.stored),
                      "schema_change_behavior": behavior, "compared_with": reached}
    if not drift.drifted:
        return CheckResult(SCHEMA, target, True, f"{len(drift.expected)} columns in sync with {reached}",
                           metadata=metadata)
    kept = kept_by_design(config, drift)
    # a column stored wider than produced holds every value (a table created by an earlier release, which declared
    # some computed columns with more precision: TIMESTAMP(6) where Flink CDC declares TIMESTAMP(3))
    wider = [c for c in drift.changed
             if holds_every_value(_without_null(drift.stored[c]), _without_null(drift.expected[c]))]
    failing = SchemaDrift(drift.expected, drift.stored, [c for c in drift.added if c not in kept.added],
                          [c for c in drift.dropped if c not in kept.dropped],
                          [c for c in drift.changed if c not in kept.changed and c not in wider])
    if wider:
        metadata["wider_in_paimon"] = "; ".join(f"{c}: {drift.stored[c]} holds {drift.expected[c]}" for c in wider)
    metadata.update({"added": ", ".join(drift.added), "dropped": ", ".join(drift.dropped),
                     "changed": "; ".join(drift.changed), "kept_by_behavior": kept.describe()})
    if not failing.drifted and not kept.drifted:  # only wider stored types: every produced value fits
        return CheckResult(SCHEMA, target, True, f"{len(drift.expected)} columns in sync with {reached}; stored "
                           f"wider than produced, holding every value: {metadata['wider_in_paimon']}",
                           metadata=metadata)
    if not failing.drifted:  # what the table's schema-change settings keep out: as asked
        return CheckResult(SCHEMA, target, True, f"schema.change.behavior {behavior} (and the included "
                           f"schema changes) keep these differences from {reached} by design: {kept.describe()}",
                           applicable=False, metadata=metadata)
    return CheckResult(SCHEMA, target, False, f"schema drift from {reached} ({_NEXT_RUN.get(behavior, '')}): "
                       + failing.describe(), metadata=metadata)
