"""Dagster integration: pipelines as assets (mysql → paimon lineage), jobs and binlog sensors."""

from lakecdc.dagster.definitions import build_definitions, build_pipeline_definitions

__all__ = ["build_definitions", "build_pipeline_definitions"]
