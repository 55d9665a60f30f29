"""The ``dg`` Component: a ``defs.yaml`` with ``type: lakecdc.CdcPipelineComponent`` declares one pipeline, with the
Flink CDC pipeline YAML inline (``attributes.pipeline``) or in a file next to it (``attributes.pipeline_file``)::

    type: lakecdc.CdcPipelineComponent
    attributes:
      pipeline:                      # exactly what Flink CDC's pipeline YAML holds
        source: {type: mysql, hostname: "{{ env('MYSQL_HOST') }}", port: 3306, username: cdc,
                 password: "${MYSQL_PASSWORD}", tables: inventory.orders}
        sink: {type: paimon, catalog.properties.metastore: filesystem, catalog.properties.warehouse: /lake}
        pipeline: {name: inventory to lake}
      mysql: {password_env: MYSQL_PASSWORD}     # optional: connection overrides as Dagster resources
      paimon: {warehouse_env: LAKECDC_WAREHOUSE}
      key_prefix: [shard1]                       # optional: keys shard1/mysql/<db>/<table>, shard1/paimon/...
      group_name: lake                           # optional: the Paimon assets' group (default: pipeline slug)

``{{ env('X') }}`` is Dagster's template (resolved when the definitions load); ``${X}`` is lakecdc's (resolved
from the environment of the process that loads them, like ``lakecdc run``). Passwords should come through
``password_env`` (a Dagster ``EnvVar``: the UI shows its name, never its value) or ``${X}``.

``dg scaffold defs lakecdc.CdcPipelineComponent <name>`` writes a starter ``defs.yaml``;
``dg check defs`` validates the pipeline (errors name the YAML key), ``dg list defs`` lists its assets, checks,
jobs and sensors, and ``dg launch --assets 'key:"paimon/<db>/<table>"'`` runs a micro-batch.
"""

import dataclasses
from pathlib import Path
from typing import Any, Optional, Union

import dagster as dg
import yaml
from pydantic import ConfigDict

from lakecdc.config import locate_config_error, parse_pipeline
from lakecdc.dagster.definitions import build_definitions_from_configs
from lakecdc.dagster.invalid import invalid_pipeline_defs, raise_config_errors
from lakecdc.dagster.resources import MySqlResource, PaimonCatalogResource
from lakecdc.dagster.translator import DagsterLakeCdcTranslator
from lakecdc.errors import PipelineConfigError

STARTER_PIPELINE = {
    "source": {"type": "mysql", "hostname": "${MYSQL_HOST:-127.0.0.1}", "port": "${MYSQL_PORT:-3306}",
               "username": "${MYSQL_USER:-root}", "password": "${MYSQL_PASSWORD:-}", "tables": "inventory.orders",
               "server-id": "5400-5404", "metadata.list": "op_ts"},
    "transform": [{"source-table": "inventory.orders",
                   "projection": "*, __data_event_type__ AS op_type, UPPER(product) AS product_upper",
                   "converter-after-transform": "SOFT_DELETE"}],
    "sink": {"type": "paimon", "catalog.properties.metastore": "filesystem",
             "catalog.properties.warehouse": "${LAKECDC_WAREHOUSE:-/tmp/lakecdc/warehouse}"},
    "pipeline": {"name": "inventory to paimon", "lakecdc.sensor.interval": "30s"},
}


class MySqlSettings(dg.Model, dg.Resolvable):
    """Overrides of the pipeline's MySQL connection, bound as a ``MySqlResource``."""

    model_config = ConfigDict(extra="forbid")
    hostname: Optional[str] = None
    port: Optional[int] = None
    username: Optional[str] = None
    password_env: Optional[str] = None  # name of the environment variable holding the password

    def resource(self):
        return MySqlResource(hostname=self.hostname, port=self.port, username=self.username,
                             password=dg.EnvVar(self.password_env) if self.password_env else None)


class PaimonSettings(dg.Model, dg.Resolvable):
    """Overrides of the pipeline's Paimon catalog, bound as a ``PaimonCatalogResource``."""

    model_config = ConfigDict(extra="forbid")
    warehouse: Optional[str] = None
    warehouse_env: Optional[str] = None  # name of the environment variable holding the warehouse

    def resource(self):
        return PaimonCatalogResource(warehouse=dg.EnvVar(self.warehouse_env) if self.warehouse_env
                                     else self.warehouse)


class CdcPipelineScaffolder(dg.Scaffolder):
    """``dg scaffold defs lakecdc.CdcPipelineComponent NAME``: a defs.yaml with a starter pipeline to edit."""

    def scaffold(self, request: dg.ScaffoldRequest) -> None:
        dg.scaffold_component(request, {"pipeline": STARTER_PIPELINE})


@dg.scaffold_with(CdcPipelineScaffolder)
class CdcPipelineComponent(dg.Component, dg.Model, dg.Resolvable):
    """A lakecdc pipeline (MySQL → Paimon, Flink CDC pipeline YAML) as Dagster assets, checks, jobs and sensors."""

    model_config = ConfigDict(extra="forbid")
    pipeline: Optional[dict[str, Any]] = None
    pipeline_file: Optional[str] = None
    mysql: Optional[MySqlSettings] = None
    paimon: Optional[PaimonSettings] = None
    key_prefix: Optional[Union[str, list[str]]] = None  # before every asset key (two servers, one db.table)
    group_name: Optional[str] = None  # the Paimon assets' group (default: the pipeline's slug)
    source_group_name: Optional[str] = None  # the MySQL assets' group (default: mysql)

    def get_translator(self) -> DagsterLakeCdcTranslator:
        """The translator of this component's assets; override it in a subclass to rename them further."""
        return DagsterLakeCdcTranslator(key_prefix=self.key_prefix or (), group_name=self.group_name,
                                        source_group_name=self.source_group_name)

    def load_config(self, base_dir: Path, defs_file: str):
        if (self.pipeline is None) == (self.pipeline_file is None):
            raise PipelineConfigError("give exactly one of 'pipeline' (the pipeline YAML inline) and "
                                      "'pipeline_file' (a path relative to defs.yaml)", file=defs_file)
        if self.pipeline_file is not None:
            path = (base_dir / self.pipeline_file).resolve()
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise PipelineConfigError(f"cannot read the pipeline file: {exc.strerror}", file=str(path)) from None
            return parse_pipeline(text, path=str(path))
        text = yaml.safe_dump(self.pipeline, sort_keys=False)
        return parse_pipeline(text, path=f"{defs_file} (attributes.pipeline)")

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        """The pipeline's definitions; a pipeline that does not load fails alone (an asset showing its error, see
        lakecdc.dagster.invalid), except under ``dg check defs``, which it fails."""
        defs_file = str(context.path / "defs.yaml")
        try:
            return self._build_defs(context, defs_file)
        except PipelineConfigError as exc:
            if raise_config_errors():
                raise
            if self.pipeline is not None:  # inline: the key sits under attributes.pipeline in defs.yaml
                return invalid_pipeline_defs(locate_config_error(
                    exc, _read(defs_file), file=defs_file, key_prefix="attributes.pipeline"))
            return invalid_pipeline_defs(locate_config_error(exc))

    def _build_defs(self, context: dg.ComponentLoadContext, defs_file: str) -> dg.Definitions:
        config = self.load_config(context.path, defs_file)
        resources = None
        if self.mysql is not None or self.paimon is not None:
            # Keys unique to this pipeline: two components binding different servers must not collide.
            keys = {"mysql_resource": f"{config.slug}_mysql", "paimon_resource": f"{config.slug}_paimon"}
            config = dataclasses.replace(config, automation=dataclasses.replace(config.automation, **keys))
            resources = {}
            if self.mysql is not None:
                resources[keys["mysql_resource"]] = self.mysql.resource()
            if self.paimon is not None:
                resources[keys["paimon_resource"]] = self.paimon.resource()
        defs = build_definitions_from_configs([config], resources, self.get_translator())
        # A dg project's definitions carry their own executor; keep the default one of the project.
        return dg.Definitions(assets=defs.assets, asset_checks=defs.asset_checks, jobs=defs.jobs,
                              sensors=defs.sensors, schedules=defs.schedules, resources=defs.resources)


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
