"""Dagster integration: one asset per Paimon table (mysql → paimon lineage, column lineage, asset checks), jobs,
sensors, schedules, resources and a ``dg`` Component (see docs/dagster.md)."""

from lakecdc.dagster.definitions import build_definitions, build_pipeline_definitions
from lakecdc.dagster.resources import MySqlResource, PaimonCatalogResource
from lakecdc.dagster.translator import DagsterLakeCdcTranslator, MySqlTableProps, PaimonTableProps

__all__ = ["build_definitions", "build_pipeline_definitions", "MySqlResource", "PaimonCatalogResource",
           "DagsterLakeCdcTranslator", "MySqlTableProps", "PaimonTableProps"]
