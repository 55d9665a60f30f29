"""Builds Dagster ``Definitions`` from every pipeline YAML in a directory: per pipeline a multi-asset of its
Paimon tables, the external MySQL source assets, a job and a binlog sensor."""

import os
from pathlib import Path

import dagster as dg

from lakecdc.config import PipelineConfig, load_pipeline
from lakecdc.dagster.assets import build_pipeline_assets
from lakecdc.dagster.sensors import build_binlog_sensor
from lakecdc.errors import PipelineConfigError

PIPELINES_DIR_ENV = "LAKECDC_PIPELINES_DIR"


def pipeline_files(directory: str | os.PathLike) -> list[Path]:
    directory = Path(directory)
    if not directory.is_dir():
        raise PipelineConfigError(f"the pipelines directory {directory} does not exist (set {PIPELINES_DIR_ENV})")
    return sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())


def build_pipeline_definitions(config: PipelineConfig) -> dg.Definitions:
    asset, source_specs = build_pipeline_assets(config)
    job = dg.define_asset_job(f"{config.slug}_job", selection=dg.AssetSelection.assets(asset),
                              description=f"One micro-batch of the lakecdc pipeline {config.name!r}",
                              tags={"lakecdc/pipeline": config.slug})
    return dg.Definitions(assets=[asset, *source_specs], jobs=[job], sensors=[build_binlog_sensor(config, job)])


def build_definitions(directory: str | os.PathLike | None = None) -> dg.Definitions:
    """Definitions for every pipeline file in ``directory`` (default: ``$LAKECDC_PIPELINES_DIR``)."""
    directory = directory or os.environ.get(PIPELINES_DIR_ENV)
    if not directory:
        raise PipelineConfigError(f"no pipelines directory given (set {PIPELINES_DIR_ENV})")
    configs = [load_pipeline(path) for path in pipeline_files(directory)]
    slugs = [c.slug for c in configs]
    for slug in set(slugs):
        if slugs.count(slug) > 1:
            names = [c.path for c in configs if c.slug == slug]
            raise PipelineConfigError(f"pipelines {', '.join(names)} have the same name; give each a unique "
                                      "pipeline.name")
    parts = [build_pipeline_definitions(c) for c in configs]
    # Source specs shared by several pipelines must appear once.
    merged = dg.Definitions.merge(*parts) if parts else dg.Definitions()
    assets, seen = [], set()
    for asset in merged.assets or []:
        key = getattr(asset, "key", None)
        if isinstance(asset, dg.AssetSpec):
            if key in seen:
                continue
            seen.add(key)
        assets.append(asset)
    return dg.Definitions(assets=assets, jobs=merged.jobs, sensors=merged.sensors,
                          executor=dg.in_process_executor)
