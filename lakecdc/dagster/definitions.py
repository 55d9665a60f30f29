"""Builds Dagster ``Definitions`` from pipeline YAML: per pipeline one op (a multi-asset with one asset per Paimon
table, and the blocking checks of each run's commit), the external MySQL source assets, a job, a follow job (follow
mode), a binlog sensor, an optional schedule, a failure alert, a table upkeep job (optionally scheduled), the
reconcile job with its checks and daily schedule, and a re-snapshot job per partitioned table; plus the MySQL and
Paimon resources the pipelines read their connections from."""

import os
from pathlib import Path

import dagster as dg

from lakecdc.config import PipelineConfig, load_pipeline, locate_config_error
from lakecdc.dagster.assets import build_pipeline_assets, declared_partition_keys, table_lineage
from lakecdc.dagster.invalid import invalid_pipeline_defs, raise_config_errors
from lakecdc.dagster.jobs import (build_follow_job, build_pipeline_job, build_reconcile_checks, build_reconcile_job,
                                  build_reconcile_schedule, build_resnapshot_job, build_upkeep_job,
                                  build_upkeep_schedule)
from lakecdc.dagster.resources import check_secrets, default_resources, load_time_config
from lakecdc.dagster.sensors import build_binlog_sensor, build_failure_sensor, build_schedule
from lakecdc.dagster.translator import DagsterLakeCdcTranslator
from lakecdc.errors import PipelineConfigError

PIPELINES_DIR_ENV = "LAKECDC_PIPELINES_DIR"


def pipeline_files(directory: str | os.PathLike) -> list[Path]:
    directory = Path(directory)
    if not directory.is_dir():
        raise PipelineConfigError(f"the pipelines directory {directory} does not exist (set {PIPELINES_DIR_ENV})")
    return sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())


def _pipeline_parts(config: PipelineConfig, use_resources: bool, translator: DagsterLakeCdcTranslator,
                    resources: dict | None) -> dg.Definitions:
    """Everything of one pipeline except resources."""
    built = build_pipeline_assets(config, use_resources=use_resources, translator=translator,
                                  load_config=load_time_config(config, resources))
    keys = built.keys
    job = build_pipeline_job(config, built.assets)
    lineage = table_lineage(config)
    resnapshot_jobs = [build_resnapshot_job(config, target, feeds, use_resources=use_resources, keys=keys)
                       for target, feeds in sorted(lineage.items()) if declared_partition_keys(config, target, feeds)]
    schedule = build_schedule(config, job)
    upkeep_job = build_upkeep_job(config, sorted(lineage), use_resources=use_resources, keys=keys)
    upkeep_schedule = build_upkeep_schedule(config, upkeep_job)
    follow_job = build_follow_job(config, use_resources=use_resources, keys=keys)
    reconcile = build_reconcile_checks(config, lineage, keys, use_resources=use_resources)
    reconcile_job = build_reconcile_job(config, reconcile) if reconcile is not None else None
    reconcile_schedule = build_reconcile_schedule(config, reconcile_job) if reconcile_job is not None else None
    return dg.Definitions(
        assets=[*built.assets, *built.source_specs], asset_checks=[reconcile] if reconcile is not None else [],
        jobs=[j for j in (job, follow_job, upkeep_job, reconcile_job, *resnapshot_jobs) if j is not None],
        sensors=[build_binlog_sensor(config, job, sorted(lineage), use_resources=use_resources, keys=keys),
                 build_failure_sensor(config, sorted(lineage), keys=keys)],
        schedules=[s for s in (schedule, upkeep_schedule, reconcile_schedule) if s is not None])


def _shared_sources(assets) -> list:
    """The assets with each MySQL source spec once (pipelines reading one table share its asset). Two specs with
    one key that name different servers are refused: they are two tables."""
    kept: list = []
    seen: dict[dg.AssetKey, object] = {}  # key → the MySQL table it names
    for asset in assets or []:
        if isinstance(asset, dg.AssetSpec):
            where = asset.metadata.get("dagster/table_name")
            if asset.key in seen:
                if seen[asset.key] != where:
                    raise PipelineConfigError(
                        f"two pipelines name different MySQL tables ({seen[asset.key]} and {where}) with the asset "
                        f"key {asset.key.to_user_string()}; give their assets a key prefix (the component's "
                        f"key_prefix, or build_definitions(translator=DagsterLakeCdcTranslator(key_prefix=...)))")
                continue
            seen[asset.key] = where
        kept.append(asset)
    return kept


def _without_duplicate_names(configs: list, isolate: bool) -> list:
    """Pipelines that share a name would share their Dagster names (op, jobs, sensors): each of them is refused,
    naming the others. ``isolate``: each becomes a file that fails alone (its ConfigErrorLocation); else the error
    fails the load."""
    valid = [c for c in configs if isinstance(c, PipelineConfig)]
    slugs = [c.slug for c in valid]
    clashing = {slug for slug in slugs if slugs.count(slug) > 1}
    if not clashing:
        return configs
    kept = []
    for config in configs:
        if not isinstance(config, PipelineConfig) or config.slug not in clashing:
            kept.append(config)
            continue
        names = [c.path or c.name for c in valid if c.slug == config.slug]
        error = PipelineConfigError(
            f"pipelines {', '.join(names)} have the same name ({config.name!r}, Dagster name {config.slug}); give "
            "each a unique pipeline.name", file=config.path, path="pipeline.name")
        if not isolate:
            raise error
        kept.append(locate_config_error(error))
    return kept


def _merge(configs: list, resources: dict | None, translator: DagsterLakeCdcTranslator | None = None, *,
           isolate: bool = False) -> dg.Definitions:
    """``configs``: parsed pipelines, or the ConfigErrorLocation of a file that did not parse (it fails alone).
    ``isolate``: a pipeline whose definitions fail to build fails alone too (else its error fails the load)."""
    if resources is not None:
        check_secrets(resources)  # before anything reads a resource's values
    configs = _without_duplicate_names(configs, isolate)
    translator = translator or DagsterLakeCdcTranslator()
    parts = []
    loaded = []
    for config in configs:
        if not isinstance(config, PipelineConfig):
            parts.append(invalid_pipeline_defs(config))
            continue
        try:  # the transforms compiled against MySQL fail here (a misspelt partition key)
            parts.append(_pipeline_parts(config, resources is not None, translator, resources))
            loaded.append(config)
        except PipelineConfigError as exc:
            if not isolate:
                raise
            parts.append(invalid_pipeline_defs(locate_config_error(exc)))
    merged = dg.Definitions.merge(*parts) if parts else dg.Definitions()
    assets = _shared_sources(merged.assets)
    # Without resources the pipelines run exactly as their YAML says (and `dg.materialize(defs.assets)` works
    # alone); with them, every key a pipeline reads is bound, unset ones to a no-override default.
    bound = {}
    if resources is not None:
        bound = default_resources(loaded)
        bound.update(resources)
        check_secrets(bound)
    return dg.Definitions(assets=assets, asset_checks=merged.asset_checks, jobs=merged.jobs, sensors=merged.sensors,
                          schedules=merged.schedules, resources=bound, executor=dg.in_process_executor)


def _load_or_locate(path: Path):
    """The pipeline of ``path``, or where and why it does not load (raised under ``dg check defs``)."""
    try:
        return load_pipeline(path)
    except PipelineConfigError as exc:
        if raise_config_errors():
            raise
        return locate_config_error(exc)


def build_pipeline_definitions(config: PipelineConfig, resources: dict | None = None,
                               translator: DagsterLakeCdcTranslator | None = None) -> dg.Definitions:
    """Definitions of one pipeline; ``resources`` override the default (no-override) MySQL/Paimon resources,
    ``translator`` names the assets (see lakecdc.dagster.translator)."""
    return _merge([config], resources, translator)


def build_definitions(directory: str | os.PathLike | None = None, resources: dict | None = None,
                      translator: DagsterLakeCdcTranslator | None = None) -> dg.Definitions:
    """Definitions for every pipeline file in ``directory`` (default: ``$LAKECDC_PIPELINES_DIR``).
    ``resources`` (e.g. ``{"mysql": MySqlResource(password=dg.EnvVar("MYSQL_PASSWORD"))}``) override the
    connections of the YAML files for this deployment; ``translator`` (a ``DagsterLakeCdcTranslator``) names the
    assets: key prefix, groups, descriptions, tags, metadata. A file that does not load (or whose transforms do not
    fit the MySQL tables) fails alone: it becomes an asset showing its error (lakecdc.dagster.invalid), and the
    others load; under ``dg check defs`` its error fails the load."""
    directory = directory or os.environ.get(PIPELINES_DIR_ENV)
    if not directory:
        raise PipelineConfigError(f"no pipelines directory given (set {PIPELINES_DIR_ENV})")
    return _merge([_load_or_locate(path) for path in pipeline_files(directory)], resources, translator,
                  isolate=not raise_config_errors())


def build_definitions_from_configs(configs: list[PipelineConfig], resources: dict | None = None,
                                   translator: DagsterLakeCdcTranslator | None = None) -> dg.Definitions:
    """Definitions of already parsed pipelines (the Component uses this)."""
    return _merge(list(configs), resources, translator)
