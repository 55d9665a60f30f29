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
from typing import Any, Callable, Optional

import dagster as dg
from pydantic import Field

from lakecdc.config import PipelineConfig
from lakecdc.errors import PipelineConfigError
from lakecdc.sink.object_store import SECRET_S3_OPTIONS, canonical_s3_option
from lakecdc.source.options import JDBC, tls_with


class MySqlResource(dg.ConfigurableResource):
    """The MySQL/MariaDB server of a pipeline's ``source:`` block. Unset fields keep the YAML's values; the TLS fields
    override the ``jdbc.properties.*`` option of the same name (Connector/J's, see docs/pipeline-yaml.md) and are
    validated as the YAML's are."""

    hostname: Optional[str] = Field(default=None, description="Server host name (overrides source.hostname)")
    port: Optional[int] = Field(default=None, description="Server port (overrides source.port)")
    username: Optional[str] = Field(default=None, description="User (overrides source.username)")
    password: Optional[str] = Field(default=None, description="Password; pass dg.EnvVar('...') for secrets")
    server_time_zone: Optional[str] = Field(default=None, description="Overrides source.server-time-zone")
    ssl_mode: Optional[str] = Field(default=None, description="jdbc.properties.sslMode: DISABLED, PREFERRED, "
                                                              "REQUIRED, VERIFY_CA or VERIFY_IDENTITY")
    trust_certificate_key_store_url: Optional[str] = Field(
        default=None, description="jdbc.properties.trustCertificateKeyStoreUrl: the CA to trust, file:/path")
    trust_certificate_key_store_type: Optional[str] = Field(
        default=None, description="jdbc.properties.trustCertificateKeyStoreType: PEM or PKCS12")
    trust_certificate_key_store_password: Optional[str] = Field(
        default=None, description="jdbc.properties.trustCertificateKeyStorePassword; pass dg.EnvVar('...')")
    fallback_to_system_trust_store: Optional[bool] = Field(
        default=None, description="jdbc.properties.fallbackToSystemTrustStore")
    client_certificate_key_store_url: Optional[str] = Field(
        default=None, description="jdbc.properties.clientCertificateKeyStoreUrl: certificate and key, file:/path")
    client_certificate_key_store_type: Optional[str] = Field(
        default=None, description="jdbc.properties.clientCertificateKeyStoreType: PEM or PKCS12")
    client_certificate_key_store_password: Optional[str] = Field(
        default=None, description="jdbc.properties.clientCertificateKeyStorePassword; pass dg.EnvVar('...')")
    allow_public_key_retrieval: Optional[bool] = Field(
        default=None, description="jdbc.properties.allowPublicKeyRetrieval (caching_sha2_password without TLS)")
    server_rsa_public_key_file: Optional[str] = Field(
        default=None, description="jdbc.properties.serverRSAPublicKeyFile: the server's RSA public key, file:/path")

    def apply(self, config: PipelineConfig) -> PipelineConfig:
        return _overridden(config, self, lambda value: value)


# the fields that override an option of the source block of the same meaning; the TLS fields, jdbc.properties.*
_SOURCE_FIELDS = ("hostname", "port", "username", "password", "server_time_zone")
_TLS_FIELDS = {
    "ssl_mode": "sslMode",
    "trust_certificate_key_store_url": "trustCertificateKeyStoreUrl",
    "trust_certificate_key_store_type": "trustCertificateKeyStoreType",
    "trust_certificate_key_store_password": "trustCertificateKeyStorePassword",
    "fallback_to_system_trust_store": "fallbackToSystemTrustStore",
    "client_certificate_key_store_url": "clientCertificateKeyStoreUrl",
    "client_certificate_key_store_type": "clientCertificateKeyStoreType",
    "client_certificate_key_store_password": "clientCertificateKeyStorePassword",
    "allow_public_key_retrieval": "allowPublicKeyRetrieval",
    "server_rsa_public_key_file": "serverRSAPublicKeyFile",
}
_SECRET_FIELDS = ("password", "trust_certificate_key_store_password", "client_certificate_key_store_password")


def _overridden(config: PipelineConfig, mysql: MySqlResource, value_of: Callable[[Any], Any]) -> PipelineConfig:
    """``config`` with the fields ``mysql`` sets (each read through ``value_of``) replacing the source's options."""
    changes = {name: value_of(getattr(mysql, name)) for name in _SOURCE_FIELDS}
    changes = {name: value for name, value in changes.items() if value is not None}
    if "port" in changes:
        changes["port"] = int(changes["port"])
    tls = {JDBC + key: value_of(getattr(mysql, name)) for name, key in _TLS_FIELDS.items()}
    if any(value is not None for value in tls.values()):
        changes["tls"] = tls_with(config.source.tls, tls, "MySqlResource")
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


def _s3_key_fields(resource) -> list[tuple[str, Optional[str]]]:
    """(catalog option, field value) of the resource's S3 key fields."""
    return [("s3.access-key", resource.s3_access_key), ("s3.secret-key", resource.s3_secret_key),
            ("s3.session-token", resource.s3_session_token)]


def check_secrets(resources: dict) -> None:
    """Refuse secrets given as plain text: Dagster shows resource config in the UI (the Resources page, the run's
    config), so a MySqlResource password and a PaimonCatalogResource's S3 keys must be ``dg.EnvVar``, which the UI
    shows by name only; S3 keys inside ``catalog_options`` (a plain dict, which cannot hold an EnvVar) are refused."""
    from lakecdc.dagster.changes import PaimonChangesIOManager  # same S3 fields (here: no import at start-up)

    for key, resource in resources.items():
        if isinstance(resource, (PaimonCatalogResource, PaimonChangesIOManager)):
            kind = type(resource).__name__
            for option in resource.catalog_options:
                canonical = canonical_s3_option(option)
                if canonical is not None and canonical in SECRET_S3_OPTIONS:
                    raise PipelineConfigError(
                        f"resource {key!r}: {kind}(catalog_options={{'{option}': ...}}) would show an "
                        f"S3 key in the Dagster UI; pass it as {kind}("
                        f"s3_{canonical[3:].replace('-', '_')}=dg.EnvVar(\"...\")) instead")
            for option, value in _s3_key_fields(resource):
                if value and not isinstance(value, dg.EnvVar):
                    raise PipelineConfigError(
                        f"resource {key!r}: {kind}'s {option} is given as plain text, which Dagster "
                        f"would show in its UI; pass it as dg.EnvVar(\"...\") and export that variable")
        if not isinstance(resource, MySqlResource):
            continue
        for name in _SECRET_FIELDS:
            value = getattr(resource, name)
            if value and not isinstance(value, dg.EnvVar):
                raise PipelineConfigError(
                    f"resource {key!r}: MySqlResource({name}=...) is given as plain text, which Dagster would show in "
                    f"its UI; pass it as MySqlResource({name}=dg.EnvVar(\"MYSQL_PASSWORD\")) (any variable name) "
                    f"and export that variable")


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
    return _overridden(config, mysql, _known_now)


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
