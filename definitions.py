"""Dagster entry point: every pipeline YAML in ./assets (or $LAKECDC_PIPELINES_DIR) becomes assets, checks, jobs,
sensors and schedules. Used by `dagster dev` / `dagster-webserver` (workspace.yaml) and
`dagster asset materialize -m definitions`.

Next to the tutorial pipeline it loads assets/order_totals.py: ``analytics/daily_order_totals``, an asset
downstream of ``paimon/inventory/orders`` that keeps per-day order totals from the table's changes (docs/dagster.md,
*Downstream assets*), on the tutorial's warehouse (``LAKECDC_WAREHOUSE``), when the pipelines are ./assets.

The connections come from the YAML files (their ``${VAR}`` references are read from the environment); the
resources below show in the UI's Resources tab and override the YAML per deployment. The MySQL password, when
``MYSQL_PASSWORD`` is set, comes through ``dg.EnvVar``: the UI shows the variable's name, never its value.
"""

import os
from pathlib import Path

import dagster as dg

from assets.order_totals import example_definitions
from lakecdc.dagster import MySqlResource, PaimonCatalogResource, build_definitions

resources = {
    "mysql": MySqlResource(password=dg.EnvVar("MYSQL_PASSWORD")) if "MYSQL_PASSWORD" in os.environ
    else MySqlResource(),
    "paimon": PaimonCatalogResource(),
}

ASSETS = Path(__file__).resolve().parent / "assets"
PIPELINES = Path(os.environ.get("LAKECDC_PIPELINES_DIR") or ASSETS).resolve()
# the tutorial YAML's default warehouse when LAKECDC_WAREHOUSE is not set
WAREHOUSE = os.environ.get("LAKECDC_WAREHOUSE") or "/tmp/lakecdc-tutorial/warehouse"

defs = build_definitions(PIPELINES, resources=resources)
if PIPELINES == ASSETS:
    defs = dg.Definitions.merge(defs, example_definitions(WAREHOUSE))
