"""A pipeline file that does not load fails alone: the other pipelines of the code location load and run, and the
broken one shows in the UI as one asset (``lakecdc_invalid/<file>``, group ``lakecdc_invalid_pipelines``) whose
description names the file, the YAML line of the key at fault, what is wrong and what to do, in plain Markdown
instead of a Dagster traceback.

``dg check defs`` (and ``dagster definitions validate``) still fail on it: they set ``DAGSTER_IS_DEFS_VALIDATION_CLI``,
and while it is set the error is raised as before (:func:`raise_config_errors`).
"""

import logging
import os
import re

import dagster as dg

from lakecdc.config import ConfigErrorLocation
from lakecdc.dagster.translator import code, prose

__all__ = ["INVALID_GROUP", "VALIDATION_ENV", "raise_config_errors", "invalid_pipeline_key", "invalid_pipeline_defs"]

INVALID_GROUP = "lakecdc_invalid_pipelines"
# Set by `dg check defs` and `dagster definitions validate` while they load the definitions.
VALIDATION_ENV = "DAGSTER_IS_DEFS_VALIDATION_CLI"

logger = logging.getLogger("lakecdc.dagster")


def raise_config_errors() -> bool:
    """Whether a broken pipeline file fails the whole load (under ``dg check defs``) instead of failing alone."""
    return os.environ.get(VALIDATION_ENV, "") not in ("", "0")


def invalid_pipeline_key(file: str) -> dg.AssetKey:
    """``lakecdc_invalid/<file name>`` (a component's ``defs.yaml``: ``<its folder>_defs_yaml``; characters other
    than letters, digits and _ become _)."""
    path = file.split(" (")[0]
    name = os.path.basename(path)
    if name in ("defs.yaml", "defs.yml"):
        name = f"{os.path.basename(os.path.dirname(path))}_{name}"
    name = re.sub(r"[^A-Za-z0-9_]", "_", name) or "pipeline"
    return dg.AssetKey(["lakecdc_invalid", name])


def invalid_pipeline_defs(location: ConfigErrorLocation) -> dg.Definitions:
    """The definitions of a pipeline file that does not load: one non-materialisable asset carrying the error."""
    where = code(location.file) + (f", line {location.line}" if location.line else "") + \
        (f", key {code(location.key)}" if location.key else "")
    description = (
        f"**This pipeline file does not load**: {where}.\n\n"
        f"{prose(location.message)}\n\n"
        "Its tables, jobs and sensors are missing until it is fixed; the other pipelines of this code location load "
        f"and run. Fix the file, check it with `lakecdc validate --connect {location.file.split(' (')[0]}` (or "
        "`dg check defs`), then reload the code location (*Deployment* → *Reload*).")
    metadata: dict = {"lakecdc/pipeline_file": dg.MetadataValue.path(location.file),
                      "lakecdc/error": dg.MetadataValue.text(location.message),
                      "lakecdc/yaml_key": dg.MetadataValue.text(location.key)}
    if location.line:
        metadata["lakecdc/yaml_line"] = dg.MetadataValue.int(location.line)
    logger.error("lakecdc: pipeline file not loaded: %s", location.text())
    return dg.Definitions(assets=[dg.AssetSpec(invalid_pipeline_key(location.file), group_name=INVALID_GROUP,
                                               description=description, metadata=metadata, kinds={"lakecdc"},
                                               tags={"lakecdc/invalid": "true"})])
