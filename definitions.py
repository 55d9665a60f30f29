"""Dagster entry point: every pipeline YAML in ./assets (or $LAKECDC_PIPELINES_DIR) becomes assets, checks, jobs,
sensors and schedules. Used by `dagster dev` / `dagster-webserver` (workspace.yaml) and
`dagster asset materialize -m definitions`.

The connections come from the YAML files (their ``${VAR}`` references are read from the environment); the
resources below show in the UI's Resources tab and override the YAML per deployment. The MySQL password, when
``MYSQL_PASSWORD`` is set, comes through ``dg.EnvVar``: the UI shows the variable's name, never its value.
"""

import os
from pathlib import Path

import dagster as dg

from lakecdc.dagster import MySqlResource, PaimonCatalogResource, build_definitions

resources = {
    "mysql": MySqlResource(password=dg.EnvVar("MYSQL_PASSWORD")) if "MYSQL_PASSWORD" in os.environ
    else MySqlResource(),
    "paimon": PaimonCatalogResource(),
}

defs = build_definitions(os.environ.get("LAKECDC_PIPELINES_DIR") or Path(__file__).parent / "assets",
                         resources=resources)
