"""Dagster integration: one asset per Paimon table (mysql → paimon lineage, column lineage, asset checks), jobs,
sensors, schedules, resources, a ``dg`` Component, and an IO manager feeding downstream assets a table's changes
(see docs/dagster.md)."""

from lakecdc.dagster.changes import PaimonChanges, PaimonChangesIOManager
from lakecdc.dagster.definitions import build_definitions, build_pipeline_definitions
from lakecdc.dagster.resources import MySqlResource, PaimonCatalogResource
from lakecdc.dagster.translator import DagsterLakeCdcTranslator, MySqlTableProps, PaimonTableProps

__all__ = ["build_definitions", "build_pipeline_definitions", "MySqlResource", "PaimonCatalogResource",
           "DagsterLakeCdcTranslator", "MySqlTableProps", "PaimonTableProps", "PaimonChanges", "PaimonChangesIOManager"]
