"""Dagster assets of one pipeline: one asset per Paimon table (keyed ``paimon/<db>/<table>``) depending on the
external ``mysql/<db>/<table>`` assets it is fed from, so lineage reads mysql → paimon; all of them, with every
table's blocking checks, are ONE op: a subsettable multi-asset (``<slug>_tables``), the shape of dagster-sling's,
dagster-dlt's and dagster-airbyte's connections.

A run of the op makes one micro-batch of the tables it selected (one plan, one binlog read:
lakecdc.runtime.table_runs), which returns the plan it committed with and what each table's commits wrote; then it
reports table by table from those, planning nothing again: its commit with snapshot id, binlog offset, change
counts, row count, column schema, column lineage and the partitions it changed (an observation when only the
checkpoint moved, the commit of a crashed earlier run when Dagster never recorded it), followed by the checks of its
commit (lakecdc.runtime.verify: the keys it wrote read back, their uniqueness, the schema). A table's
materialisation and check results are the op's outputs only when a later step of the run reads them; otherwise they
are events, which spares Dagster the outputs nobody reads (a failed blocking check fails the step all the same).
Checks selected alone ("Execute check") run without a micro-batch. Failures stay per table: when the micro-batch
fails as a whole each table runs alone, and a table that fails (its own error, or held by another writer until the
end) is not reported; after every other table, one Failure names each failed table, and Dagster shows those failed
(planned in a failed run, not materialised) while the others keep their materialisations. The specs are skippable:
a table the run does not yield skips only what is downstream of it.

The reconciliation against MySQL (row count, uniqueness over the whole table) is not in this op: it is the
reconcile job's (lakecdc.dagster.jobs).

Run config (``Materialize`` → launchpad, ``ops: {<slug>_tables: {config: ...}}``): ``resnapshot: true`` re-snapshots
every selected table, each in one commit, and with ``partition: k=v`` (exactly one table selected) only that Paimon
partition (see ``lakecdc.runtime.resnapshots``).
"""

import contextlib
import dataclasses
import hashlib
import json
import re
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Iterator, Optional

import dagster as dg
from pydantic import Field

from lakecdc.config import PipelineConfig
from lakecdc.dagster.checks import asset_check_evaluation, asset_check_result, run_check_specs
from lakecdc.dagster.failures import as_failure, retry_policy
from lakecdc.dagster.metadata import (CHECKPOINT_ONLY_KEY, as_asset_materialization, column_origins, column_schema,
                                      commit_event, quiet_observation, recorded_data_version,
                                      source_event, unrecorded_commit, without_not_null)
from lakecdc.dagster.resources import effective_config, resource_keys
from lakecdc.dagster.translator import (CHECKPOINT_REFRESH_TAG, PIPELINE_TAG, RUN_REASON_TAG, AssetKeys,
                                        DagsterLakeCdcTranslator, MySqlTableProps, PaimonTableProps)
from lakecdc.errors import LakeCdcError, PipelineConfigError, SourceError
from lakecdc.model import BinlogOffset, TableId
from lakecdc.runtime.checkpoint import PHASE_RESNAPSHOT
from lakecdc.runtime.connect import open_sink, open_source, shared_source
from lakecdc.runtime.plan import TargetPlan, build_plan, captured_tables
from lakecdc.runtime.report import resnapshot_reads, source_reads
from lakecdc.runtime.table_runs import TableRuns, resnapshot_tables, run_tables
from lakecdc.runtime.verify import expected_types, verify_run
from lakecdc.selectors import TableSelector
from lakecdc.transform.rules import select_rule
from lakecdc.transform.routes import Router

__all__ = ["discover_tables", "table_lineage", "build_pipeline_assets", "PipelineAssets", "TableRunConfig",
           "pool_name", "pipeline_op_name", "declared_partition_keys", "load_time_plan"]
# Reading the MySQL schemas while the definitions load must not hold the code location up for long.
LOAD_CONNECT_TIMEOUT_SECONDS = 5.0

_LITERAL_PART = re.compile(r"^[A-Za-z0-9_$]+$")


def _literal_tables(selector: str) -> list[TableId] | None:
    """The tables a selector names when it is a plain list of ``db.table`` (no regex), else None."""
    tables = []
    for pattern in (p.strip() for p in re.split(r"(?<!\\),", selector)):
        parts = pattern.split(".")
        if len(parts) != 2 or not all(_LITERAL_PART.match(p) for p in parts):
            return None
        tables.append(TableId(parts[0], parts[1]))
    return tables


def discover_tables(config: PipelineConfig) -> list[TableId]:
    """The captured source tables, known at definition time without a database when ``tables`` lists plain names;
    regex selectors are resolved against the live server."""
    literal = _literal_tables(config.source.tables)
    if literal is not None:
        if config.source.tables_exclude:
            exclude = TableSelector(config.source.tables_exclude)
            literal = [t for t in literal if not exclude.matches(t)]
        return sorted(set(literal))

    try:
        return captured_tables(config, open_source(config).list_tables())
    except SourceError as exc:
        raise PipelineConfigError(
            f"'tables' uses patterns, so the table list is read from MySQL when the definitions load, and that "
            f"failed: {exc}. Start the server or list the tables by name", file=config.path,
            path="source.tables") from None


def table_lineage(config: PipelineConfig) -> dict[TableId, list[TableId]]:
    """Target Paimon table → the source tables that feed it."""
    router = Router(config.routes, mode=config.route_mode, file=config.path)
    lineage: dict[TableId, list[TableId]] = {}
    for source in discover_tables(config):
        for target in router.targets(source):
            lineage.setdefault(target, []).append(source)
    return lineage


def pool_name(config: PipelineConfig) -> str:
    """The Dagster concurrency pool of the pipeline's writers: its op, its re-snapshot and upkeep ops (give it a
    limit in dagster.yaml, see docs/dagster.md)."""
    if config.automation.pool == "per-pipeline":
        return f"lakecdc/{config.slug}"
    return config.automation.pool


def declared_partition_keys(config: PipelineConfig, target: TableId, sources: list[TableId]) -> list[str]:
    """The partition keys the YAML gives the table (sink partition.key, else the transform's partition-keys)."""
    if target in config.sink.partition_keys:
        return list(config.sink.partition_keys[target])
    for source in sources:
        rule = select_rule(config.transforms, source)
        if rule is not None and rule.partition_keys and rule.partition_keys.strip():
            return [k.strip() for k in rule.partition_keys.split(",") if k.strip()]
    return []


def code_version(config: PipelineConfig, target: TableId, sources: list[TableId]) -> str:
    """A hash of everything in the YAML that shapes this table, so an edited transform shows as a code change."""
    rules = [select_rule(config.transforms, s) for s in sources]
    shape = {
        "rules": [None if r is None else {k: v for k, v in dataclasses.asdict(r).items()
                                          if k not in ("index", "description")} for r in rules],
        "routes": [dataclasses.asdict(r) for r in config.routes],
        "partition_keys": config.sink.partition_keys.get(target),
        "table_properties": config.sink.table_properties,
        "metadata_list": sorted(config.source.metadata_list),
        "local_time_zone": config.local_time_zone,
    }
    return hashlib.sha1(json.dumps(shape, sort_keys=True, default=str).encode()).hexdigest()[:12]


class TableRunConfig(dg.Config):
    """Run config of a pipeline's op (all optional: a plain materialisation is one micro-batch of the selected
    tables)."""

    resnapshot: bool = Field(default=False, description="Re-snapshot every selected table from MySQL, each in its "
                                                        "commit groups (rows gone from MySQL are deleted); tables "
                                                        "not selected are untouched")
    partition: str = Field(default="", description="With resnapshot, and exactly one table selected: only this "
                                                   "Paimon partition, spelled like the UI lists it, e.g. "
                                                   "order_day=20260101")


def pipeline_op_name(config: PipelineConfig) -> str:
    """The name of the pipeline's one op (run config goes under ``ops: {<name>: {config: ...}}``)."""
    return f"{config.slug}_tables"


def check_run_config(targets: list[TableId], resnapshot: bool, partition: str) -> None:
    """Refuse run config that does not fit the selection, before anything is written."""
    if partition and not resnapshot:
        raise dg.Failure("'partition' only applies with 'resnapshot: true'", allow_retries=False)
    if partition and len(targets) != 1:
        names = ", ".join(map(str, targets)) or "none"
        raise dg.Failure(f"'partition: {partition}' re-snapshots one partition of one table, but the run selects "
                         f"{len(targets)} tables ({names}): select exactly one table", allow_retries=False)


def run_tables_of_run(context, config: PipelineConfig, targets: list[TableId], resnapshot: bool = False,
                      partition: str = "") -> TableRuns:
    """The selected tables' micro-batch (one for all, lakecdc.runtime.table_runs, keeping what each table's commits
    wrote for their checks) or re-snapshots; a table that fails is in ``errors``, the others in ``committed``."""
    check_run_config(targets, resnapshot, partition)
    if resnapshot:
        return resnapshot_tables(config, targets, partition or None, run_id=context.run.run_id, log=context.log)
    return run_tables(config, targets, run_id=context.run.run_id, log=context.log, record_writes=True)


def run_table(context, config: PipelineConfig, target: TableId, resnapshot: bool = False, partition: str = ""):
    """Run one table's micro-batch (or re-snapshot) and return what it committed, or None. Its error becomes a
    Dagster Failure; only transient source errors may be retried."""
    runs = run_tables_of_run(context, config, [target], resnapshot, partition)
    if runs.errors:
        raise tables_failure(runs.errors)
    return runs.committed.get(target)


def tables_failure(errors: dict[TableId, BaseException]) -> dg.Failure:
    """One Failure naming each failed table with its error; retried only when every error is transient (a retry
    re-runs the op's tables: those already committed have nothing new)."""
    if len(errors) == 1:
        [(target, error)] = errors.items()
        failure = as_failure(error)
        text = str(failure.description or "")
        description = text if str(target) in text else f"{target}: {text}"
        return dg.Failure(description=description, allow_retries=failure.allow_retries,
                          metadata={**failure.metadata, "lakecdc/failed_tables": dg.MetadataValue.text(str(target))})
    failures = {target: as_failure(error) for target, error in sorted(errors.items())}
    lines = "\n".join(f"- {target}: {failure.description}" for target, failure in failures.items())
    transient = all(f.allow_retries for f in failures.values())
    return dg.Failure(
        description=f"{len(errors)} tables failed (the others of the run committed):\n{lines}",
        allow_retries=transient,
        metadata={"lakecdc/transient": dg.MetadataValue.bool(transient),
                  "lakecdc/failed_tables": dg.MetadataValue.text(", ".join(map(str, failures)))})


def report(context, config: PipelineConfig, target: TableId, committed, *, with_checks: set[str],
           expect_materialization: bool, keys: Optional[AssetKeys] = None, sink=None, result=None,
           plan: Optional[TargetPlan] = None, plan_error: str = "", as_output: bool = True,
           checked: Optional[Future] = None, head: Optional[BinlogOffset] = None):
    """Yield the materialisation of ``committed`` (or of an unrecorded earlier commit) and the results of the
    selected checks of the run's commit (lakecdc.runtime.verify.verify_run). ``result``: the table's result of the
    run (``committed`` when it committed; None when no run wrote the table here); ``plan``: the target's plan the
    run committed with (for a check run alone, from MySQL now; ``plan_error``: why there is none): lineage and
    checks use it, nothing is planned here.
    ``as_output``: the materialisation and the checks' results are the op's outputs (a step of the run reads
    them); else events, which Dagster records without an output's bookkeeping (a failed blocking check still fails
    the step). ``keys``: the pipeline's asset keys (default: the default
    translator's); ``sink``: the op's (one per run); ``checked``: the checks' results already under way
    (:func:`verify_in_background`); ``head``: where the run read the binlog up to (a table with nothing new is
    observed with its checkpoint and this)."""
    keys = keys or AssetKeys.default([target])
    key = keys.paimon[target]
    sink = sink or open_sink(config)
    if committed is not None:
        event = commit_event(committed, plan, config.sink.catalog_options, key=key, source_keys=keys.mysql)
        if isinstance(event, dg.AssetObservation):  # only the checkpoint moved: the last change stays the latest
            context.log.info(f"{target}: {event.metadata[CHECKPOINT_ONLY_KEY].value}")
            context.log_event(event)
        else:
            yield event if as_output else as_asset_materialization(event)
    elif expect_materialization:
        late = unrecorded_commit(context.instance, config.sink.catalog_options, target, key,
                                 run_id=context.run.run_id)
        if late is not None:
            yield late if as_output else as_asset_materialization(late)
        elif result is not None:  # nothing new: the run's summary line says so; the asset page shows it too
            context.log_event(quiet_observation(result, head, key))
    if with_checks:
        results = checked.result() if checked is not None else \
            verify_run(config, sink, target, result, plan, with_checks, plan_error=plan_error)
        for one in results:
            yield asset_check_result(key, one) if as_output else asset_check_evaluation(key, one, blocking=True)


def observe_sources(context, tables, head: Optional[BinlogOffset], keys: AssetKeys) -> None:
    """An event of each MySQL table the run read (lakecdc.runtime.report.source_reads; re-snapshots':
    resnapshot_reads), before the Paimon tables' materialisations (metadata.source_event: a materialisation of the
    external asset when the read found it changed, else an observation), with its last change as the data version."""
    resnapshots = [t for t in tables if getattr(t, "phase", None) == PHASE_RESNAPSHOT]
    reads = {**source_reads([t for t in tables if t not in resnapshots], head), **resnapshot_reads(resnapshots)}
    for source, read in sorted(reads.items()):
        key = keys.mysql.get(source)
        if key is not None:  # the recorded version is only needed for a read that found nothing new (an observation)
            found_nothing = read.last_change is None and not read.ddl
            recorded = recorded_data_version(context.instance, key) if found_nothing else None
            context.log_event(source_event(read, key, recorded))


class ReportingError(LakeCdcError):
    """Reporting a table failed after its commit (not transient: a retry would not re-report the commit)."""


def plans_without_run(config: PipelineConfig, targets: list[TableId]) -> tuple[dict[TableId, TargetPlan], str]:
    """The plans (from MySQL now) of tables checked without a run of theirs (checks selected without a
    materialisation, a re-snapshot): one plan for all of them. (plans, "") or, when planning fails, ({}, why): their
    schema checks then say they could not look."""
    if not targets:
        return {}, ""
    try:
        plan = build_plan(config, shared_source(config), targets=set(targets)).restrict(set(targets))
    except LakeCdcError as exc:
        return {}, str(exc)
    return dict(plan.targets), ""


# Threads reading the tables' keys back while the op hands the previous tables' events to Dagster (whose event
# storage waits on its database most of the time).
VERIFY_THREADS = 2


@contextlib.contextmanager
def verify_in_background(config: PipelineConfig, sink, checks: dict[TableId, set[str]], results: dict,
                         plans: dict[TableId, TargetPlan], plan_error: str) -> Iterator[dict[TableId, Future]]:
    """The checks of each table of ``checks`` started in VERIFY_THREADS threads, in the order the op reports the
    tables; yields each table's Future of its results."""
    sink.prepare_writes()  # pypaimon's catalog, created once before the threads share the sink
    with ThreadPoolExecutor(VERIFY_THREADS, thread_name_prefix="lakecdc-verify") as pool:
        futures = {t: pool.submit(verify_run, config, sink, t, results.get(t), plans.get(t), names,
                                  plan_error=plan_error) for t, names in checks.items()}
        try:
            yield futures
        finally:
            for future in futures.values():
                future.cancel()


def outputs_read_in_run(context, selected: list[TableId], keys: AssetKeys) -> set[TableId]:
    """The selected tables whose asset output a later step of this run reads (an asset downstream of the table in
    the same run); the others are reported as events, without an output nothing reads. The run's job is the subset
    it executes, so its asset graph holds only the run's assets."""
    graph = context.job_def.asset_layer.asset_graph
    return {t for t in selected if graph.get(keys.paimon[t]).child_keys}


def materialize_tables(context, config: PipelineConfig, targets: list[TableId], checks: dict[TableId, set[str]],
                       *, resnapshot: bool = False, partition: str = "", keys: AssetKeys):
    """The body of a pipeline's op: one micro-batch (or re-snapshot) of the selected ``targets``, then table by
    table its materialisation and its selected ``checks`` (a table may have checks selected and no
    materialisation: "Execute check"), from the plan the micro-batch committed with. A table that failed is not
    reported; after every other table, one Failure names each failed table with its error (Dagster shows those
    failed: planned in a failed run, not materialised)."""
    refreshed = context.run.tags.get(CHECKPOINT_REFRESH_TAG)
    if refreshed:  # the sensor's tags: say once, up front, why this run has little or nothing to commit
        context.log.info(f"started by the binlog sensor ({context.run.tags.get(RUN_REASON_TAG)}): {refreshed} had "
                         "no changes but their checkpoints are due a refresh (their binlog file is no longer the "
                         "newest): the run only moves those checkpoints")
    runs = run_tables_of_run(context, config, targets, resnapshot, partition)
    failed: dict[TableId, BaseException] = dict(runs.errors)
    plans = dict(runs.plans)  # a micro-batch's; a re-snapshot, or checks selected alone, plan here (once)
    unplanned = sorted(t for t in set(targets) | set(checks) if t not in failed and t not in plans)
    planned, plan_error = plans_without_run(config, unplanned)
    plans.update(planned)
    sink = open_sink(config)
    read = outputs_read_in_run(context, targets, keys)
    reported = [t for t in sorted(set(targets) | set(checks)) if t not in failed]
    results = {t: runs.results.get(t, runs.committed.get(t)) if t in targets else None for t in reported}
    observe_sources(context, [r for t, r in results.items()
                              if t in runs.results or getattr(r, "phase", None) == PHASE_RESNAPSHOT], runs.head, keys)
    with verify_in_background(config, sink, {t: checks[t] for t in reported if checks.get(t)}, results, plans,
                              plan_error) as checked:
        for target in reported:
            try:
                yield from report(context, config, target, runs.committed.get(target),
                                  with_checks=checks.get(target, set()), expect_materialization=target in targets,
                                  keys=keys, sink=sink, result=results[target], plan=plans.get(target),
                                  plan_error=plan_error, as_output=target in read, checked=checked.get(target),
                                  head=runs.head)
            except Exception as exc:  # noqa: BLE001 - reporting after a commit fails this table alone, never retried
                failed[target] = ReportingError(f"{target}: reporting the commit failed: {exc}")
    as_events = [t for t in reported if checks.get(t) and t not in read and t not in failed]
    if as_events:
        context.log.info(f"the checks of {len(as_events)} table(s) are recorded as check evaluations, not as outputs: "
                         "no step of this run reads them (Dagster then lists those outputs as not yielded)")
    if failed:
        for target, error in sorted(failed.items()):
            context.log.error(f"{target} failed: {error}")
        raise tables_failure(failed)


def build_pipeline_asset(config: PipelineConfig, targets: dict[TableId, tuple[list[TableId], dg.AssetSpec]],
                         keys: AssetKeys, *, use_resources: bool = False) -> dg.AssetsDefinition:
    """The pipeline's one op: a subsettable multi-asset of every Paimon table (``targets``: table → (its source
    tables, its spec from the translator)) with every table's blocking checks."""
    pipeline = config
    specs, checks = [], []
    for target, (feeds, spec) in sorted(targets.items()):
        specs.append(spec.replace_attributes(deps=[keys.mysql[s] for s in feeds], skippable=True,
                                             code_version=code_version(config, target, feeds)))
        checks.extend(run_check_specs(spec.key))
    table_of = {spec.key: target for target, (_, spec) in targets.items()}

    @dg.multi_asset(
        name=pipeline_op_name(config), specs=specs, check_specs=checks, can_subset=True,
        op_tags={PIPELINE_TAG: config.slug}, pool=pool_name(config), retry_policy=retry_policy(config),
        required_resource_keys=resource_keys(config) if use_resources else set(),
        description=f"One micro-batch of the selected Paimon tables of the lakecdc pipeline {config.name!r} (one "
                    "binlog read), then each table's materialisation and blocking checks")
    def _pipeline_asset(context: dg.AssetExecutionContext, config: TableRunConfig):
        effective = effective_config(pipeline, context.resources)
        selected = sorted(table_of[k] for k in context.selected_asset_keys if k in table_of)
        selected_checks: dict[TableId, set[str]] = {}
        for check in context.selected_asset_check_keys:
            selected_checks.setdefault(table_of[check.asset_key], set()).add(check.name)
        yield from materialize_tables(context, effective, selected, selected_checks, resnapshot=config.resnapshot,
                                      partition=config.partition, keys=keys)

    return _pipeline_asset


def load_time_plan(config: PipelineConfig):
    """The pipeline's plan from MySQL as the definitions load (its schemas become the assets' column schemas, and
    a transform that does not fit the tables, e.g. a misspelt partition key, fails loading, so ``dg check defs``
    reports it). Returns (plan, "") or, when MySQL does not answer, (None, why)."""
    source = open_source(config, connect_timeout=LOAD_CONNECT_TIMEOUT_SECONDS, connect_max_retries=0)
    source.share_connection()  # one connection for every table's description, not one per table
    try:
        return build_plan(config, source), ""
    except SourceError as exc:
        return None, (f"MySQL did not answer while the definitions loaded ({exc}); they appear after the next "
                      "reload of the definitions with MySQL up")
    finally:
        source.close()


def target_columns(config: PipelineConfig, plan, target: TableId) -> Optional[dg.TableSchema]:
    """The Paimon columns the pipeline creates for ``target``, typed as Paimon stores them (the types the
    ``schema_matches_source`` check expects), from the plan."""
    target_plan = plan.targets.get(target) if plan is not None else None
    if target_plan is None:
        return None
    try:
        types = {name: without_not_null(text) for name, text in expected_types(target_plan).items()}
    except LakeCdcError:  # a type Paimon cannot store: the run says so; the UI falls back to the Arrow types
        types = {}
    return column_schema(target_plan.schema, target_plan.primary_keys, target_plan.partition_keys,
                         column_origins(target_plan), types)


@dataclasses.dataclass
class PipelineAssets:
    """A pipeline's op (one multi-asset of its Paimon tables; none without tables), the external MySQL source assets
    and the keys its translator gave them."""

    assets: list[dg.AssetsDefinition]
    source_specs: list[dg.AssetSpec]
    keys: AssetKeys


def build_pipeline_assets(config: PipelineConfig, *, use_resources: bool = False,
                          translator: Optional[DagsterLakeCdcTranslator] = None,
                          load_config: Optional[PipelineConfig] = None) -> PipelineAssets:
    """The Paimon table assets of a pipeline and the external MySQL source assets they depend on, named by
    ``translator``. With ``use_resources`` the assets read their connections from the MySQL/Paimon resources (see
    resources.py); ``load_config`` is the pipeline with the resources' overrides as far as they are known while
    the definitions load (the server the descriptions name and the schemas are read from)."""
    translator = translator or DagsterLakeCdcTranslator()
    load_config = load_config or config
    lineage = table_lineage(config)
    plan, unavailable = load_time_plan(load_config)
    sources = sorted({s for feeds in lineage.values() for s in feeds})
    source_specs = []
    for source in sources:
        schema = plan.sources[source].source if plan is not None and source in plan.sources else None
        props = MySqlTableProps(config, source, load_config.source.hostname, load_config.source.port, schema,
                                "" if schema is not None else unavailable or "the table is not in MySQL")
        source_specs.append(translator.get_asset_spec(props))
    targets = {}
    for target, feeds in sorted(lineage.items()):
        columns = target_columns(load_config, plan, target)
        targets[target] = (feeds, translator.get_asset_spec(PaimonTableProps(
            config, target, tuple(feeds), columns, "" if columns is not None else unavailable)))
    keys = AssetKeys({t: spec.key for t, (_, spec) in targets.items()},
                     {s: spec.key for s, spec in zip(sources, source_specs)})
    assets = [build_pipeline_asset(config, targets, keys, use_resources=use_resources)] if targets else []
    return PipelineAssets(assets, source_specs, keys)
