"""Dagster assets of one pipeline: one asset per Paimon table (keyed ``paimon/<db>/<table>``) depending on the
external ``mysql/<db>/<table>`` assets it is fed from, so lineage reads mysql → paimon.

Each table is its own op, so it has its own retries, failures, materialisation and blocking checks. The binlog is
read once per run all the same: the run's first table step makes one micro-batch of every table the run selected
(lakecdc.runtime.shared_run; tables locked by another writer are left to their own steps), and each step reports
its table's commit with snapshot id, binlog offset, change counts, row count, column schema, column lineage and the
partitions it changed, followed by the table's blocking asset checks. A table whose step finds it left out, or the
run's micro-batch failed, runs alone, so a failing table fails alone. A commit that a crashed run made but Dagster
never recorded is reported by the next run.

Run config (``Materialize`` → launchpad): ``resnapshot: true`` re-snapshots the table in one commit, and with
``partition: k=v`` only that Paimon partition (see ``lakecdc.runtime.resnapshots``).
"""

import dataclasses
import hashlib
import json
import re
from typing import Optional

import dagster as dg
from pydantic import Field

from lakecdc.config import PipelineConfig
from lakecdc.dagster.checks import TableState, check_specs, evaluate
from lakecdc.dagster.failures import as_failure, retry_policy
from lakecdc.dagster.metadata import (CHECKPOINT_ONLY_KEY, column_origins, column_schema, commit_event, paimon_key,
                                      unrecorded_commit, without_not_null)
from lakecdc.dagster.resources import effective_config, resource_keys
from lakecdc.dagster.translator import (PIPELINE_TAG, TABLE_TAG, AssetKeys, DagsterLakeCdcTranslator, MySqlTableProps,
                                        PaimonTableProps)
from lakecdc.errors import LakeCdcError, PipelineConfigError, SourceError
from lakecdc.model import TableId
from lakecdc.runtime import run_micro_batch
from lakecdc.runtime.connect import open_source, shared_source
from lakecdc.runtime.shared_run import micro_batch_once
from lakecdc.runtime.plan import build_plan, captured_tables
from lakecdc.runtime.resnapshots import resnapshot_or_snapshot
from lakecdc.runtime.verify import expected_types, plan_at_checkpoint, soft_delete_column
from lakecdc.selectors import TableSelector
from lakecdc.transform.rules import select_rule
from lakecdc.transform.routes import Router

__all__ = ["discover_tables", "table_lineage", "build_pipeline_assets", "PipelineAssets", "TableRunConfig",
           "pool_name", "declared_partition_keys", "partitions_name", "load_time_plan"]
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


def pool_name(config: PipelineConfig, target: TableId) -> str:
    """The Dagster concurrency pool of a table's writers (limit it to 1 in dagster.yaml, see docs/dagster.md)."""
    if config.automation.pool == "per-table":
        return f"lakecdc/{target}"
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


def partitions_name(target: TableId, key: Optional[dg.AssetKey] = None) -> str:
    """The name of the Dagster dynamic partitions that list a table's Paimon partitions (``key``: the table's
    asset key, default the default translator's)."""
    return f"{(key or paimon_key(target)).to_python_identifier()}__partitions"


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
    """Run config of a Paimon table asset (all optional: a plain materialisation is one micro-batch)."""

    resnapshot: bool = Field(default=False, description="Re-snapshot the table from MySQL in one commit (rows "
                                                        "gone from MySQL are deleted); other tables are untouched")
    partition: str = Field(default="", description="With resnapshot: only this Paimon partition, spelled like "
                                                   "the UI lists it, e.g. order_day=20260101")


def run_selection(context, config: PipelineConfig, keys: AssetKeys) -> set[TableId]:
    """The Paimon tables of this pipeline the Dagster run materialises as plain micro-batches (its asset selection,
    every table when it has none; tables the run re-snapshots are left to their own steps)."""
    selection = context.run.asset_selection or None  # empty: the whole job (dg.materialize without selection)
    steps = set(context.run.step_keys_to_execute or ())
    ops = (context.run.run_config or {}).get("ops", {})
    tables = set()
    for target, key in keys.paimon.items():
        if selection is not None and key not in selection:
            continue
        if steps and key.to_python_identifier() not in steps:  # a re-execution of some steps only
            continue
        op_config = (ops.get(key.to_python_identifier()) or {}).get("config") or {}
        if op_config.get("resnapshot") or op_config.get("partition"):
            continue
        tables.add(target)
    return tables


def run_table(context, config: PipelineConfig, target: TableId, resnapshot: bool = False, partition: str = "",
              keys: Optional[AssetKeys] = None):
    """Run one table's micro-batch (or re-snapshot) and return what it committed, or None (also when the run's
    micro-batch committed it in another process: :func:`report` finds that commit in the table). A plain micro-batch
    comes from the run's one micro-batch of all its tables when that covered the table. Errors become Dagster
    Failures; only transient source errors may be retried."""
    if partition and not resnapshot:
        raise dg.Failure("'partition' only applies with 'resnapshot: true'", allow_retries=False)
    try:
        if resnapshot:
            return resnapshot_or_snapshot(config, target, partition or None, run_id=context.run.run_id,
                                          log=context.log)
        # the run's one micro-batch of all its tables (lakecdc.runtime.shared_run), made by its first step
        shared = micro_batch_once(config, run_selection(context, config, keys or AssetKeys.default([target]))
                                  | {target}, context.run.run_id, context.log)
        if target in shared.covered:
            if shared.result is None:  # made in another process: its commit is reported from the table
                return None
            result = shared.result
        else:  # locked by another writer when the micro-batch started, or the micro-batch failed
            result = run_micro_batch(config, targets={target}, run_id=context.run.run_id, log=context.log)
    except dg.Failure:
        raise
    except Exception as exc:  # classified: transient source errors retry, everything else fails at once
        raise as_failure(exc) from (None if isinstance(exc, LakeCdcError) else exc)
    table = result.tables.get(target)
    return table if table is not None and table.committed else None


def report(context, config: PipelineConfig, target: TableId, committed, *, with_checks: set[str],
           expect_materialization: bool, keys: Optional[AssetKeys] = None):
    """Yield the materialisation of ``committed`` (or of an unrecorded earlier commit) and the check results.
    ``keys``: the pipeline's asset keys (default: the default translator's). Only this table is planned, and MySQL
    is queried through the process's shared connection (:func:`shared_source`)."""
    keys = keys or AssetKeys.default([target])
    key = keys.paimon[target]
    source = shared_source(config)
    state = TableState.load(config, target, key, source=source)
    if committed is not None:
        marker = soft_delete_column(config, state.plan) if state.plan is not None else None
        event = commit_event(committed, committed_plan(config, target, state, source), config.sink.catalog_options,
                             key=key, source_keys=keys.mysql, soft_delete_marker=marker or None)
        register_partitions(context.instance, target, committed, key)
        if isinstance(event, dg.AssetObservation):  # only the checkpoint moved: the last change stays the latest
            context.log.info(f"{target}: {event.metadata[CHECKPOINT_ONLY_KEY].value}")
            context.log_event(event)
        else:
            yield event
    elif expect_materialization:
        late = unrecorded_commit(context.instance, config.sink.catalog_options, target, key,
                                 run_id=context.run.run_id)
        if late is not None:
            yield late
        else:
            context.log.info(f"{target}: no new changes")
    yield from evaluate(state, with_checks)


def committed_plan(config: PipelineConfig, target: TableId, state: TableState, source=None):
    """The plan the column lineage of a commit comes from: compiled against the source schemas the table's
    checkpoint records (those of its last commit), else against MySQL now."""
    try:
        return plan_at_checkpoint(config, target, state.state.checkpoint, source=source) or state.plan
    except LakeCdcError:  # the lineage is an extra; the commit is already done
        return state.plan


def register_partitions(instance, target: TableId, committed, key: dg.AssetKey) -> None:
    """Add the Paimon partitions a commit touched to the table's dynamic partitions (the re-snapshot job's)."""
    partitions = getattr(committed, "partitions", None)
    if not partitions:
        return
    name = partitions_name(target, key)
    known = set(instance.get_dynamic_partitions(name))
    new = sorted(p for p in partitions if p not in known)
    if new:
        instance.add_dynamic_partitions(name, new)


def build_table_asset(config: PipelineConfig, target: TableId, feeds: list[TableId], spec: dg.AssetSpec,
                      keys: AssetKeys, *, use_resources: bool = False) -> dg.AssetsDefinition:
    """The asset of one Paimon table: ``spec`` (from the translator) plus lineage, code version and checks."""
    key = spec.key
    pipeline = config
    spec = spec.replace_attributes(deps=[keys.mysql[s] for s in feeds],
                                   code_version=code_version(config, target, feeds))

    # A multi-asset of one table (not @asset) so that its checks can run alone ("Execute check" in the UI).
    @dg.multi_asset(
        name=key.to_python_identifier(), specs=[spec], check_specs=check_specs(config, key, feeds), can_subset=True,
        op_tags={PIPELINE_TAG: config.slug, TABLE_TAG: str(target)}, pool=pool_name(config, target),
        retry_policy=retry_policy(config), required_resource_keys=resource_keys(config) if use_resources else set())
    def _table_asset(context: dg.AssetExecutionContext, config: TableRunConfig):
        effective = effective_config(pipeline, context.resources)
        selected = key in context.selected_asset_keys
        committed = (run_table(context, effective, target, config.resnapshot, config.partition, keys)
                     if selected else None)
        checks = {k.name for k in context.selected_asset_check_keys}
        try:
            yield from report(context, effective, target, committed, with_checks=checks,
                              expect_materialization=selected, keys=keys)
        except Exception as exc:  # reporting after a commit: never retried (the commit is already done)
            raise dg.Failure(description=f"{target}: reporting the commit failed: {exc}", allow_retries=False) \
                from exc

    return _table_asset


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
    """A pipeline's Paimon table assets, the external MySQL source assets and the keys its translator gave them."""

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
    assets = [build_table_asset(config, target, feeds, spec, keys, use_resources=use_resources)
              for target, (feeds, spec) in targets.items()]
    return PipelineAssets(assets, source_specs, keys)
