"""Dagster entry point: every pipeline YAML in ./assets (or $LAKECDC_PIPELINES_DIR) becomes assets, a job and a
binlog sensor. Used by `dagster dev` (workspace.yaml) and `dagster asset materialize -m definitions`."""

import os
from pathlib import Path

from lakecdc.dagster import build_definitions

defs = build_definitions(os.environ.get("LAKECDC_PIPELINES_DIR") or Path(__file__).parent / "assets")
