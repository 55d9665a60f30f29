"""Connection settings as Dagster resources, so one pipeline YAML runs in dev and prod against different servers.

The pipeline YAML keeps its full ``source:`` and ``sink:`` blocks (they are what ``lakecdc run`` uses); a resource
field that is set overrides the YAML's value when Dagster runs the pipeline, and a field left unset keeps it.
Secrets belong in ``dg.EnvVar``: Dagster then shows the variable's name, never its value, in the UI::

    MySqlResource(hostname=dg.EnvVar("MYSQL_HOST"), password=dg.EnvVar("MYSQL_PASSWORD"))
    PaimonCatalogResource(warehouse=dg.EnvVar("LAKECDC_WAREHOUSE"))

Every asset, check and sensor of a pipeline reads the resources under the keys ``pipeline.lakecdc.resource.mysql``
and ``.paimon`` name (default ``mysql`` and ``paimon``).
"""

import dataclasses
from typing import Any, Optional

import dagster as dg
from pydantic import Field

from lakecdc.config import PipelineConfig
from lakecdc.errors import PipelineConfigError
from lakecdc.sink.object_store import SECRET_S3_OPTIONS, canonical_s3_option


class MySqlResource(dg.ConfigurableResource):
    """The MySQL/MariaDB server of a pipeline's ``source:`` block. Unset fields keep the YAML's values."""

    hostname: Optional[str] = Field(default=None, description="Server host name (overrides source.hostname)")
    port: Optional[int] = Field(default=None, description="Server port (overrides source.port)")
    username: Optional[str] = Field(default=None, description="User (overrides source.username)")
    password: Optional[str] = Field(default=None, description="Password; pass dg.EnvVar('...') for secrets")
    server_time_zone: Optional[str] = Field(default=None, description="Overrides source.server-time-zone")

    def apply(self, config: PipelineConfig) -> PipelineConfig:
        changes: dict[str, Any] = {name: value for name, value in (
            ("hostname", self.hostname), ("port", self.port), ("username", self.username),
            ("password", self.password), ("server_time_zone", self.server_time_zone)) if value is not None}
        if not changes:
            return config
        return dataclasses.replace(config, source=dataclasses.replace(config.source, **changes))


class PaimonCatalogResource(dg.ConfigurableResource):
    """The Paimon catalog of a pipeline's ``sink:`` block. Unset fields keep the YAML's values."""

    warehouse: Optional[str] = Field(default=None, description="Warehouse path or URI (overrides "
                                                                "catalog.properties.warehouse)")
    catalog_options: dict[str, str] = Field(default_factory=dict,
                                            description="Extra catalog.properties.* (override the YAML's); no S3 "
                                                        "keys here: use the s3_* fields with dg.EnvVar")
    # S3 keys are fields of their own (not catalog_options entries) so that they can be dg.EnvVar, which Dagster
    # shows by name only; check_secrets refuses them as plain text.
    s3_access_key: Optional[str] = Field(default=None, description="catalog.properties.s3.access-key; "
                                                                   "pass dg.EnvVar('...')")
    s3_secret_key: Optional[str] = Field(default=None, description="catalog.properties.s3.secret-key; "
                                                                   "pass dg.EnvVar('...')")
    s3_session_token: Optional[str] = Field(default=None, description="catalog.properties.s3.session-token; "
                                                                      "pass dg.EnvVar('...')")

    def apply(self, config: PipelineConfig) -> PipelineConfig:
        options = dict(config.sink.catalog_options)
        options.update(self.catalog_options)
        if self.warehouse:
            options["warehouse"] = self.warehouse
        for option, value in _s3_key_fields(self):
            if value:
                options[option] = value
        if options == config.sink.catalog_options:
            return config
        return dataclasses.replace(config, sink=dataclasses.replace(config.sink, catalog_options=options))


def _s3_key_fields(resource: "PaimonCatalogResource") -> list[tuple[str, Optional[str]]]:
    """(catalog option, field value) of the resource's S3 key fields."""
    return [("s3.access-key", resource.s3_access_key), ("s3.secret-key", resource.s3_secret_key),
            ("s3.session-token", resource.s3_session_token)]


def check_secrets(resources: dict) -> None:
    """Refuse secrets given as plain text: Dagster shows resource config in the UI (the Resources page, the run's
    config), so a MySqlResource password and a PaimonCatalogResource's S3 keys must be ``dg.EnvVar``, which the UI
    shows by name only; S3 keys inside ``catalog_options`` (a plain dict, which cannot hold an EnvVar) are refused."""
    for key, resource in resources.items():
        if isinstance(resource, PaimonCatalogResource):
            for option in resource.catalog_options:
                canonical = canonical_s3_option(option)
                if canonical is not None and canonical in SECRET_S3_OPTIONS:
                    raise PipelineConfigError(
                        f"resource {key!r}: PaimonCatalogResource(catalog_options={{'{option}': ...}}) would show an "
                        f"S3 key in the Dagster UI; pass it as PaimonCatalogResource("
                        f"s3_{canonical[3:].replace('-', '_')}=dg.EnvVar(\"...\")) instead")
            for option, value in _s3_key_fields(resource):
                if value and not isinstance(value, dg.EnvVar):
                    raise PipelineConfigError(
                        f"resource {key!r}: PaimonCatalogResource's {option} is given as plain text, which Dagster "
                        f"would show in its UI; pass it as dg.EnvVar(\"...\") and export that variable")
        password = getattr(resource, "password", None) if isinstance(resource, MySqlResource) else None
        if password and not isinstance(password, dg.EnvVar):
            raise PipelineConfigError(
                f"resource {key!r}: MySqlResource(password=...) is given as plain text, which Dagster would show in "
                f"its UI; pass it as MySqlResource(password=dg.EnvVar(\"MYSQL_PASSWORD\")) and export "
                f"MYSQL_PASSWORD")


def resource_keys(config: PipelineConfig) -> set[str]:
    return {config.automation.mysql_resource, config.automation.paimon_resource}


def default_resources(configs: list[PipelineConfig]) -> dict[str, dg.ConfigurableResource]:
    """A no-override resource for every key the pipelines use (they then run exactly as their YAML says)."""
    resources: dict[str, dg.ConfigurableResource] = {}
    for config in configs:
        resources.setdefault(config.automation.mysql_resource, MySqlResource())
        resources.setdefault(config.automation.paimon_resource, PaimonCatalogResource())
    return resources


def _known_now(value):
    """A resource field's value as far as it is known while the definitions load: an ``EnvVar`` is read from this
    process's environment (None when unset)."""
    if isinstance(value, dg.EnvVar):
        return value.get_value()
    return value


def load_time_config(config: PipelineConfig, resources: dict | None) -> PipelineConfig:
    """The pipeline with its MySQL resource's overrides applied as far as they are known while the definitions
    load: the server the MySQL assets' descriptions name and their column schemas are read from. (Runs apply the
    resources as Dagster resolves them, see ``effective_config``.)"""
    mysql = (resources or {}).get(config.automation.mysql_resource)
    if not isinstance(mysql, MySqlResource):
        return config
    changes = {name: _known_now(getattr(mysql, name)) for name in
               ("hostname", "port", "username", "password", "server_time_zone")}
    changes = {name: value for name, value in changes.items() if value is not None}
    if "port" in changes:
        changes["port"] = int(changes["port"])
    if not changes:
        return config
    return dataclasses.replace(config, source=dataclasses.replace(config.source, **changes))


def effective_config(config: PipelineConfig, resources) -> PipelineConfig:
    """The pipeline as it runs here: the YAML with the bound resources' overrides applied. ``resources`` is a
    Dagster resources object (``context.resources``)."""
    mysql = getattr(resources, config.automation.mysql_resource, None)
    paimon = getattr(resources, config.automation.paimon_resource, None)
    if isinstance(mysql, MySqlResource):
        config = mysql.apply(config)
    if isinstance(paimon, PaimonCatalogResource):
        config = paimon.apply(config)
    return config
