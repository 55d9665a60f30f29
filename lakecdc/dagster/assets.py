"""Dagster assets of one pipeline: one asset per Paimon table (keyed ``paimon/<db>/<table>``) depending on the
external ``mysql/<db>/<table>`` assets it is fed from, so lineage reads mysql → paimon.

Each table is its own op, so it has its own concurrency pool (two runs never write one table at once), its own
retries and its own failures: a table that fails or waits for its pool does not hold up the others. One
materialisation is one micro-batch of that table: its Paimon commit is reported with snapshot id, binlog offset,
change counts, row count, column schema, column lineage and the partitions it changed, followed by the table's
blocking asset checks. A commit that a crashed run made but Dagster never recorded is reported by the next run.

Run config (``Materialize`` → launchpad): ``resnapshot: true`` re-snapshots the table in one commit, and with
``partition: k=v`` only that Paimon partition (see ``lakecdc.runtime.resnapshot``).
"""

import dataclasses
import hashlib
import json
import re

import dagster as dg
from pydantic import Field

from lakecdc.config import PipelineConfig
from lakecdc.dagster.checks import TableState, check_specs, evaluate
from lakecdc.dagster.failures import as_failure, retry_policy
from lakecdc.dagster.metadata import materialization, mysql_key, paimon_key, table_of, unrecorded_commit
from lakecdc.dagster.resources import effective_config, resource_keys
from lakecdc.errors import LakeCdcError, PipelineConfigError, SourceError
from lakecdc.model import TableId
from lakecdc.selectors import TableSelector
from lakecdc.transform.rules import select_rule
from lakecdc.transform.routes import Router

__all__ = ["paimon_key", "mysql_key", "table_of", "discover_tables", "table_lineage", "build_pipeline_assets",
           "TableRunConfig", "pool_name", "declared_partition_keys", "partitions_name"]

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
    from lakecdc.runtime.plan import captured_tables, source_options
    from lakecdc.source import MySqlSource

    try:
        return captured_tables(config, MySqlSource(source_options(config)).list_tables())
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


def partitions_name(target: TableId) -> str:
    """The name of the Dagster dynamic partitions that list a table's Paimon partitions."""
    return f"{paimon_key(target).to_python_identifier()}__partitions"


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


def run_table(context, config: PipelineConfig, target: TableId, resnapshot: bool = False, partition: str = ""):
    """Run one table's micro-batch (or re-snapshot) and return what it committed, or None. Errors become
    Dagster Failures; only transient source errors may be retried."""
    from lakecdc.runtime.resnapshot import resnapshot_or_snapshot
    from lakecdc.runtime import run_micro_batch

    if partition and not resnapshot:
        raise dg.Failure("'partition' only applies with 'resnapshot: true'", allow_retries=False)
    try:
        if resnapshot:
            return resnapshot_or_snapshot(config, target, partition or None, run_id=context.run.run_id,
                                          log=context.log)
        result = run_micro_batch(config, targets={target}, run_id=context.run.run_id, log=context.log)
    except dg.Failure:
        raise
    except Exception as exc:  # classified: transient source errors retry, everything else fails at once
        raise as_failure(exc) from (None if isinstance(exc, LakeCdcError) else exc)
    table = result.tables.get(target)
    return table if table is not None and table.committed else None


def report(context, config: PipelineConfig, target: TableId, committed, *, with_checks: set[str],
           expect_materialization: bool):
    """Yield the materialisation of ``committed`` (or of an unrecorded earlier commit) and the check results."""
    key = paimon_key(target)
    state = TableState.load(config, target, key)
    if committed is not None:
        result = materialization(committed, state.plan, config.sink.catalog_options)
        register_partitions(context.instance, config, target, committed)
        yield result
    elif expect_materialization:
        late = unrecorded_commit(context.instance, config.sink.catalog_options, target)
        if late is not None:
            yield late
        else:
            context.log.info(f"{target}: no new changes")
    yield from evaluate(state, with_checks)


def register_partitions(instance, config: PipelineConfig, target: TableId, committed) -> None:
    """Add the Paimon partitions a commit touched to the table's dynamic partitions (the re-snapshot job's)."""
    partitions = getattr(committed, "partitions", None)
    if not partitions:
        return
    name = partitions_name(target)
    known = set(instance.get_dynamic_partitions(name))
    new = sorted(p for p in partitions if p not in known)
    if new:
        instance.add_dynamic_partitions(name, new)


def build_table_asset(config: PipelineConfig, target: TableId, feeds: list[TableId], *,
                      use_resources: bool = False) -> dg.AssetsDefinition:
    key = paimon_key(target)
    pipeline = config

    spec = dg.AssetSpec(
        key, deps=[mysql_key(s) for s in feeds], group_name=config.slug, kinds={"paimon"}, skippable=True,
        description=f"Paimon table {target}, fed by {', '.join(map(str, feeds))} (pipeline {config.name!r})",
        metadata={"dagster/table_name": str(target), "lakecdc/pipeline": config.name,
                  "lakecdc/pipeline_file": config.path or "",
                  "lakecdc/warehouse": config.sink.catalog_options.get("warehouse", "")},
        tags={"lakecdc/pipeline": config.slug}, code_version=code_version(config, target, feeds))

    # A multi-asset of one table (not @asset) so that its checks can run alone ("Execute check" in the UI).
    @dg.multi_asset(
        name=key.to_python_identifier(), specs=[spec], check_specs=check_specs(config, key, feeds), can_subset=True,
        op_tags={"lakecdc/pipeline": config.slug, "lakecdc/table": str(target)}, pool=pool_name(config, target),
        retry_policy=retry_policy(config), required_resource_keys=resource_keys(config) if use_resources else set())
    def _table_asset(context: dg.AssetExecutionContext, config: TableRunConfig):
        effective = effective_config(pipeline, context.resources)
        selected = key in context.selected_asset_keys
        committed = run_table(context, effective, target, config.resnapshot, config.partition) if selected else None
        checks = {k.name for k in context.selected_asset_check_keys}
        try:
            yield from report(context, effective, target, committed, with_checks=checks,
                              expect_materialization=selected)
        except Exception as exc:  # reporting after a commit: never retried (the commit is already done)
            raise dg.Failure(description=f"{target}: reporting the commit failed: {exc}", allow_retries=False) \
                from exc

    return _table_asset


def build_pipeline_assets(config: PipelineConfig, *, use_resources: bool = False
                          ) -> tuple[list[dg.AssetsDefinition], list[dg.AssetSpec]]:
    """The Paimon table assets of a pipeline and the external MySQL source assets they depend on. With
    ``use_resources`` the assets read their connections from the MySQL/Paimon resources (see resources.py)."""
    lineage = table_lineage(config)
    sources = sorted({s for feeds in lineage.values() for s in feeds})
    source_specs = [
        dg.AssetSpec(mysql_key(s), group_name="mysql", kinds={"mysql"},
                     description=f"MySQL table {s} on {config.source.hostname}:{config.source.port}",
                     metadata={"dagster/table_name": str(s)})
        for s in sources
    ]
    assets = [build_table_asset(config, target, feeds, use_resources=use_resources)
              for target, feeds in sorted(lineage.items())]
    return assets, source_specs
