"""A pipeline file that does not load fails alone: the other pipelines of the code location load and run, and the
broken one shows in the UI as one asset (``lakecdc_broken/<file>``, group ``lakecdc_broken_pipelines``, kind
``broken``) whose description names the file, the line (and for an expression, the column) at fault, what is wrong
and what to do, instead of a Dagster traceback.

``dg check defs`` (and ``dagster definitions validate``) still fail on it: they set ``DAGSTER_IS_DEFS_VALIDATION_CLI``,
and while it is set the error is raised as before (:func:`raise_config_errors`).
"""

import logging
import os
import re

import dagster as dg

from lakecdc.config import ConfigErrorLocation

__all__ = ["INVALID_GROUP", "VALIDATION_ENV", "raise_config_errors", "invalid_pipeline_key", "invalid_pipeline_defs"]

INVALID_GROUP = "lakecdc_broken_pipelines"
# the kind badge the graph and the catalog show on it
BROKEN_KIND = "broken"
# Set by `dg check defs` and `dagster definitions validate` while they load the definitions.
VALIDATION_ENV = "DAGSTER_IS_DEFS_VALIDATION_CLI"

logger = logging.getLogger("lakecdc.dagster")


def raise_config_errors() -> bool:
    """Whether a broken pipeline file fails the whole load (under ``dg check defs``) instead of failing alone."""
    return os.environ.get(VALIDATION_ENV, "") not in ("", "0")


def invalid_pipeline_key(file: str) -> dg.AssetKey:
    """``lakecdc_broken/<file name>`` (a component's ``defs.yaml``: ``<its folder>_defs_yaml``; characters other
    than letters, digits and _ become _)."""
    path = file.split(" (")[0]
    name = os.path.basename(path)
    if name in ("defs.yaml", "defs.yml"):
        name = f"{os.path.basename(os.path.dirname(path))}_{name}"
    name = re.sub(r"[^A-Za-z0-9_]", "_", name) or "pipeline"
    return dg.AssetKey(["lakecdc_broken", name])


def invalid_pipeline_defs(location: ConfigErrorLocation) -> dg.Definitions:
    """The definitions of a pipeline file that does not load: one non-materialisable asset carrying the error."""
    path = location.file.split(" (")[0]
    metadata: dict = {"lakecdc/pipeline_file": dg.MetadataValue.path(location.file),
                      "lakecdc/error": dg.MetadataValue.text(location.message),
                      "lakecdc/yaml_key": dg.MetadataValue.text(location.key)}
    if location.line:
        metadata["lakecdc/yaml_line"] = dg.MetadataValue.int(location.line)
    if location.line and location.column:
        metadata["lakecdc/yaml_column"] = dg.MetadataValue.int(location.column)
    logger.error("lakecdc: pipeline file not loaded: %s", location.text())
    return dg.Definitions(assets=[dg.AssetSpec(invalid_pipeline_key(location.file), group_name=INVALID_GROUP,
                                               description=broken_description(location, path), metadata=metadata,
                                               kinds={BROKEN_KIND}, tags={"lakecdc/broken": "true"})])


def broken_description(location: ConfigErrorLocation, path: str) -> str:
    """The asset's description, readable both where the UI shows it as plain text (the catalog list, the graph
    node) and where it renders Markdown (the asset page): prose without Markdown markup, and what is quoted from
    the file or the error (paths, expressions with ``*`` and ``__name__``) as indented code blocks, which Markdown
    shows verbatim and plain text shows as it is."""
    where = location.where() + (f" (key {location.key})" if location.key else "")
    message = "\n".join(f"    {line}" for line in location.message.splitlines() or [""])
    return (f"Broken pipeline file: it does not load, so its tables, jobs and sensors are missing until it is "
            f"fixed. The other pipelines of this code location load and run.\n\n"
            f"    {where}:\n{message}\n\n"
            f"Fix the file, check it with\n\n    lakecdc validate --connect {path}\n\n"
            "(or dg check defs), then reload the code location (Deployment, then Reload).")
