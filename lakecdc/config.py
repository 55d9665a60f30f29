"""Reads and validates a Flink CDC 3.x pipeline YAML (``source``, ``transform``, ``route``, ``sink``, ``pipeline``).

Everything is checked before anything runs: unknown keys, missing required options, wrong types and bad
values are errors that name the file and the key path (``transform[0].projection``). ``${VAR}`` and
``${VAR:-default}`` in string values are replaced from the environment, so secrets stay out of the file.
Options that Flink CDC accepts but lakecdc does not implement yet are refused with a clear message instead of
being silently ignored.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lakecdc.errors import PipelineConfigError
from lakecdc.model import TableId
from lakecdc.options import check_zone, describe, option_text
from lakecdc.source.options import OPTIONS as SOURCE_OPTIONS
from lakecdc.source.options import MySqlSourceOptions
from lakecdc.source.options import from_yaml as source_options_from_yaml
from lakecdc.transform.metadata_columns import parse_metadata_columns

# --- known keys -----------------------------------------------------------------------------------------------

_SINK_KEYS = {"type", "name", "partition.key", "commit.user-prefix", "commit.user", "include.schema.changes",
              "exclude.schema.changes"}
_SINK_PREFIXES = ("catalog.properties.", "table.properties.")
_TRANSFORM_KEYS = {"source-table", "projection", "filter", "primary-keys", "partition-keys", "table-options",
                   "table-options.delimiter", "converter-after-transform", "description"}
_ROUTE_KEYS = {"source-table", "sink-table", "replace-symbol", "description"}
_PIPELINE_KEYS = {
    "name", "parallelism", "local-time-zone", "schema.change.behavior", "execution.runtime-mode", "route-mode",
    "transform.decimal.precision.mode", "sink.partitioning.strategy", "schema-operator.rpc-timeout",
    "operator.uid.prefix", "schema.operator.uid", "user-defined-function", "checkpoint-interval",
    # lakecdc's own keys
    "lakecdc.sensor.interval", "lakecdc.sensor.default-status",
    "lakecdc.schedule", "lakecdc.schedule.default-status", "lakecdc.retry.max-retries", "lakecdc.retry.delay",
    "lakecdc.pool", "lakecdc.resource.mysql", "lakecdc.resource.paimon", "lakecdc.alert.webhook",
    "lakecdc.metadata-columns",
    "lakecdc.snapshot.commit-rows",
    "lakecdc.upkeep.enabled", "lakecdc.upkeep.every-commits", "lakecdc.upkeep.orphan-files.older-than",
    "lakecdc.upkeep.schedule",
}
_SCHEMA_CHANGE_BEHAVIORS = {"exception", "evolve", "try_evolve", "lenient", "ignore"}

# the declared options of each block, as docs/pipeline-yaml.md shows them (scripts/options_doc.py renders them)
OPTION_TABLES = {"source": list(SOURCE_OPTIONS)}

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|min|m|h|d)?\s*$")


# --- the parsed pipeline ---------------------------------------------------------------------------------------

@dataclass
class SinkConfig:
    catalog_options: dict[str, str] = field(repr=False)  # may hold S3 keys (from ${VAR})
    table_properties: dict[str, str]
    partition_keys: dict[TableId, list[str]]
    commit_user_prefix: str
    name: str | None = None
    # include.schema.changes / exclude.schema.changes, expanded to event types (None: the option is absent)
    include_schema_changes: tuple[str, ...] | None = None
    exclude_schema_changes: tuple[str, ...] | None = None


@dataclass
class RouteConfig:
    index: int
    source_table: str
    sink_table: str
    replace_symbol: str | None = None
    description: str | None = None


@dataclass
class AutomationConfig:
    """lakecdc's own Dagster settings (``pipeline.lakecdc.*``): schedule, retries, pool, resource keys, alerts."""

    schedule: str | None = None  # cron; None = no schedule
    schedule_running: bool = True
    max_retries: int = 3  # retries of transient source errors, with exponential backoff from retry_delay
    retry_delay_seconds: float = 10.0
    pool: str = "per-table"  # "per-table" = one Dagster pool per Paimon table, else one named pool
    mysql_resource: str = "mysql"
    paimon_resource: str = "paimon"
    alert_webhook: str | None = field(default=None, repr=False)


@dataclass
class UpkeepConfig:
    """``pipeline.lakecdc.upkeep.*``: table upkeep (compaction, manifest merging, snapshot expiry, orphan files;
    lakecdc.sink.upkeep) after a run's commits, and the schedule of the Dagster upkeep job."""

    enabled: bool = True  # in the pipeline's runs (the CLI and the Dagster job run it regardless)
    every_commits: int = 1  # upkeep of a table once this many snapshots were committed since its last upkeep
    orphan_older_than_seconds: float = 86400.0  # orphan files younger than this are kept (Paimon: 1 day)
    schedule: str | None = None  # cron of the Dagster upkeep job; None = no schedule


# Flink checkpointing has no default interval (it is off until set); Flink CDC's tutorial sets 3 s
DEFAULT_CHECKPOINT_INTERVAL_SECONDS = 3.0


@dataclass
class PipelineConfig:
    name: str
    source: MySqlSourceOptions
    sink: SinkConfig
    transforms: list  # list[lakecdc.transform.TransformRuleConfig]
    routes: list[RouteConfig]
    local_time_zone: str
    schema_change_behavior: str
    parallelism: int
    sensor_interval_seconds: float
    sensor_running: bool
    route_mode: str = "ALL_MATCH"
    path: str | None = None
    automation: AutomationConfig = field(default_factory=AutomationConfig)
    # pipeline.lakecdc.metadata-columns: FLIP-107 metadata columns (lakecdc.transform.metadata_columns)
    metadata_columns: tuple = ()
    # pipeline.lakecdc.snapshot.commit-rows: a chunked snapshot commits its progress after this many rows
    snapshot_commit_rows: int = 250_000
    # pipeline.user-defined-function (lakecdc.transform.udf.UdfConfig items, callables loaded)
    udfs: tuple = ()
    # pipeline.transform.decimal.precision.mode: 19 (UP_TO_19, default) or 38 (UP_TO_38)
    decimal_precision: int = 19
    # pipeline.lakecdc.upkeep.*
    upkeep: UpkeepConfig = field(default_factory=UpkeepConfig)
    # pipeline.checkpoint-interval: how often follow mode (lakecdc run --follow, the Dagster follow job) commits
    checkpoint_interval_seconds: float = DEFAULT_CHECKPOINT_INTERVAL_SECONDS

    @property
    def slug(self) -> str:
        """A Dagster-safe identifier for the pipeline (job, sensor and group names)."""
        slug = re.sub(r"[^A-Za-z0-9_]+", "_", self.name).strip("_").lower()
        return slug or "pipeline"


# --- loading ---------------------------------------------------------------------------------------------------

def load_pipeline(path: str | os.PathLike, env: dict[str, str] | None = None) -> PipelineConfig:
    """Read, substitute and validate one pipeline file."""
    path = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise PipelineConfigError(f"cannot read the pipeline file: {exc.strerror}", file=path) from None
    except UnicodeDecodeError as exc:
        raise PipelineConfigError(f"the pipeline file is not UTF-8 text (invalid byte at offset {exc.start}); save "
                                  "it as UTF-8", file=path) from None
    return parse_pipeline(text, path=path, env=env)


def parse_pipeline(text: str, *, path: str | None = None, env: dict[str, str] | None = None) -> PipelineConfig:
    env = dict(os.environ) if env is None else env
    try:
        raw = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise PipelineConfigError(f"not valid YAML{where}: {problem}", file=path) from None
    if not isinstance(raw, dict):
        raise PipelineConfigError("the pipeline must be a YAML mapping with source, sink and pipeline", file=path)
    _check_password_source(raw, path)
    _check_storage_secret_sources(raw, path)
    try:
        raw = _substitute_env(raw, env, path, "")
    except RecursionError:
        raise PipelineConfigError("the YAML nests too deeply (an alias that contains itself?)", file=path) from None
    return _Parser(path).pipeline(raw)


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader, except that a key written twice in one mapping is an error: PyYAML keeps the last
    one silently, so a second ``source:`` or ``password:`` further down would quietly replace the first."""


def _unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # '<<: *defaults' may be overridden by explicit keys
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            first = seen.get(key)
        except TypeError:  # an unhashable key: reported as such later
            continue
        if first is not None:
            raise yaml.constructor.ConstructorError(
                None, None, f"the key {key!r} is given twice (first at line {first + 1}); keep one",
                key_node.start_mark)
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)

_PASSWORD_REF = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?::-)?\}")


def _check_password_source(raw: dict, file: str | None) -> None:
    """Passwords come only from the environment: ``source.password`` must be empty or exactly one ``${VAR}``
    (``${VAR:-}`` allowed: an empty default is no secret). A literal, or a non-empty default, would put a secret in a
    file that ends up in version control, in Dagster's UI (``lakecdc/pipeline_file``) and in backups."""
    source = raw.get("source")
    value = source.get("password") if isinstance(source, dict) else None
    if value is None or value == "" or (isinstance(value, str) and _PASSWORD_REF.fullmatch(value.strip())):
        return
    raise PipelineConfigError(
        "a password written in the pipeline file is refused: passwords come only from environment variables. "
        "Write 'password: ${MYSQL_PASSWORD}' and export MYSQL_PASSWORD where the pipeline runs (a default such as "
        "${MYSQL_PASSWORD:-secret} counts as written in the file), or bind a Dagster "
        "MySqlResource(password=dg.EnvVar(\"MYSQL_PASSWORD\"))", file=file, path="source.password")


def _check_storage_secret_sources(raw: dict, file: str | None) -> None:
    """S3 keys (``catalog.properties.s3.access-key`` / ``s3.secret-key`` / ``s3.session-token`` and their aliases)
    come only from the environment, like passwords: empty or exactly one ``${VAR}``."""
    from lakecdc.errors import SinkError
    from lakecdc.sink.object_store import SECRET_S3_OPTIONS, canonical_s3_option

    sink = raw.get("sink")
    if not isinstance(sink, dict):
        return
    for key, value in sink.items():
        if not str(key).startswith("catalog.properties."):
            continue
        try:
            canonical = canonical_s3_option(str(key)[len("catalog.properties."):])
        except SinkError:
            continue  # reported with the other sink options
        if canonical not in SECRET_S3_OPTIONS or value is None or value == "" \
                or (isinstance(value, str) and _PASSWORD_REF.fullmatch(value.strip())):
            continue
        raise PipelineConfigError(
            f"an S3 key written in the pipeline file is refused: {canonical} comes only from an environment "
            f"variable. Write '{key}: ${{S3_SECRET_KEY}}' (any variable name) and export it where the pipeline "
            f"runs, or leave the keys out to use the AWS default credential chain", file=file, path=f"sink.{key}")


_SUBSTITUTE_BUDGET = 100_000  # values a pipeline may expand to: YAML aliases can nest exponentially


def _substitute_env(value: Any, env: dict[str, str], file: str | None, key_path: str,
                    budget: list[int] | None = None) -> Any:
    budget = budget if budget is not None else [_SUBSTITUTE_BUDGET]
    budget[0] -= 1
    if budget[0] < 0:
        raise PipelineConfigError(f"the YAML expands to more than {_SUBSTITUTE_BUDGET} values (aliases nested in "
                                  "aliases?); a pipeline is a few dozen options: remove the aliases", file=file)
    if isinstance(value, dict):
        return {k: _substitute_env(v, env, file, _join(key_path, str(k)), budget) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute_env(v, env, file, f"{key_path}[{i}]", budget) for i, v in enumerate(value)]
    if isinstance(value, str):
        def replace(match: re.Match) -> str:
            name, default = match.group(1), match.group(2)
            if name in env:
                return env[name]
            if default is not None:
                return default
            raise PipelineConfigError(
                f"environment variable {name} is not set (export it, or write ${{{name}:-default}})",
                file=file, path=key_path)
        return _ENV_REF.sub(replace, value)
    return value


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


class _Parser:
    def __init__(self, file: str | None):
        self.file = file

    def error(self, path: str, message: str) -> PipelineConfigError:
        return PipelineConfigError(message, file=self.file, path=path)

    # generic helpers
    def mapping(self, raw: Any, path: str) -> dict:
        if not isinstance(raw, dict):
            raise self.error(path, f"expected a mapping of options, got {describe(raw)}")
        return raw

    def check_keys(self, raw: dict, path: str, known: set[str], prefixes: tuple[str, ...] = ()) -> None:
        for key in raw:
            if not isinstance(key, str):
                raise self.error(path, f"option names must be strings, got {key!r}")
            if key in known or any(key.startswith(p) and len(key) > len(p) for p in prefixes):
                continue
            hint = _closest(key, known)
            raise self.error(_join(path, key), "unknown option" + (f" (did you mean '{hint}'?)" if hint else ""))

    def string(self, raw: dict, path: str, key: str, *, required: bool = False, default: str | None = None,
               allow_empty: bool = False) -> str | None:
        if key not in raw or raw[key] is None:
            if required:
                raise self.error(_join(path, key), "required option is missing")
            return default
        value = raw[key]
        if isinstance(value, bool) or isinstance(value, (dict, list)):
            raise self.error(_join(path, key), f"expected a string, got {describe(value)}")
        value = str(value)
        if not allow_empty and not value.strip():
            if required:
                raise self.error(_join(path, key), "must not be empty")
            return default
        return value

    def integer(self, raw: dict, path: str, key: str, default: int, *, minimum: int | None = None) -> int:
        if key not in raw or raw[key] is None:
            return default
        value = raw[key]
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise self.error(_join(path, key), f"expected an integer, got {describe(value)}")
        try:
            number = int(str(value).strip())
        except ValueError:
            raise self.error(_join(path, key), f"expected an integer, got {value!r}") from None
        if minimum is not None and number < minimum:
            raise self.error(_join(path, key), f"must be at least {minimum}, got {number}")
        return number

    def boolean(self, raw: dict, path: str, key: str, default: bool) -> bool:
        if key not in raw or raw[key] is None:
            return default
        value = raw[key]
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise self.error(_join(path, key), f"expected true or false, got {value!r}")

    def duration_seconds(self, raw: dict, path: str, key: str, default: float) -> float:
        if key not in raw or raw[key] is None:
            return default
        match = _DURATION.match(str(raw[key]))
        if not match:
            raise self.error(_join(path, key), f"expected a duration like 30s, 500ms or 2min, got {raw[key]!r}")
        number, unit = float(match.group(1)), (match.group(2) or "ms")
        factor = {"ms": 0.001, "s": 1, "sec": 1, "min": 60, "m": 60, "h": 3600, "d": 86400}[unit]
        return number * factor

    # sections
    def pipeline(self, raw: dict) -> PipelineConfig:
        self.check_keys(raw, "", {"source", "sink", "transform", "route", "pipeline"})
        for section in ("source", "sink"):
            if section not in raw:
                raise self.error(section, "required section is missing")
        pipeline_raw = raw.get("pipeline")
        if pipeline_raw is None:
            raise self.error("pipeline", "required section is missing (it needs at least a name)")
        pipeline_raw = self.mapping(pipeline_raw, "pipeline")
        self.check_keys(pipeline_raw, "pipeline", _PIPELINE_KEYS)

        source = source_options_from_yaml(self.mapping(raw["source"], "source"), self.file)
        sink = self.sink(self.mapping(raw["sink"], "sink"))
        transforms = self.transforms(raw.get("transform"))
        routes = self.routes(raw.get("route"))

        name = self.string(pipeline_raw, "pipeline", "name", default="Flink CDC Pipeline Job")
        local_tz = self.string(pipeline_raw, "pipeline", "local-time-zone", default="UTC")
        if local_tz == "systemDefault":
            from lakecdc.transform.types import system_zone

            local_tz = system_zone()
        problem = check_zone(local_tz)
        if problem:
            raise self.error("pipeline.local-time-zone", problem)
        behavior = (self.string(pipeline_raw, "pipeline", "schema.change.behavior", default="lenient") or "").lower()
        if behavior not in _SCHEMA_CHANGE_BEHAVIORS:
            raise self.error("pipeline.schema.change.behavior",
                             f"unknown value {behavior!r}; use one of {', '.join(sorted(_SCHEMA_CHANGE_BEHAVIORS))}")
        if not source.schema_change_enabled:
            # Flink CDC's MySQL source then emits no schema change event at all: the Paimon tables keep the
            # schema they were created with, which is what the ignore behaviour does with every change
            behavior = "ignore"
        runtime_mode = (self.string(pipeline_raw, "pipeline", "execution.runtime-mode", default="STREAMING") or "")
        if runtime_mode.upper() not in ("STREAMING", "BATCH"):
            raise self.error("pipeline.execution.runtime-mode", f"expected STREAMING or BATCH, got {runtime_mode!r}")
        if runtime_mode.upper() == "BATCH" and source.startup_mode != "snapshot":
            raise self.error("pipeline.execution.runtime-mode", "BATCH needs source scan.startup.mode: snapshot "
                                                                "(as in Flink CDC)")
        route_mode = (self.string(pipeline_raw, "pipeline", "route-mode", default="ALL_MATCH") or "").upper()
        if route_mode != "ALL_MATCH" and route_mode != "FIRST_MATCH":
            raise self.error("pipeline.route-mode", f"expected ALL_MATCH or FIRST_MATCH, got {route_mode!r}")
        from lakecdc.transform.udf import parse_udfs

        udfs = parse_udfs(pipeline_raw.get("user-defined-function"), file=self.file,
                          path="pipeline.user-defined-function")
        precision_mode = (self.string(pipeline_raw, "pipeline", "transform.decimal.precision.mode",
                                      default="UP_TO_19") or "").upper()
        if precision_mode not in ("UP_TO_19", "UP_TO_38"):
            raise self.error("pipeline.transform.decimal.precision.mode",
                             f"expected UP_TO_19 or UP_TO_38, got {precision_mode!r}")
        parallelism = self.integer(pipeline_raw, "pipeline", "parallelism", 1, minimum=1)
        interval = self.duration_seconds(pipeline_raw, "pipeline", "lakecdc.sensor.interval", 30.0)
        checkpoint_interval = self.duration_seconds(pipeline_raw, "pipeline", "checkpoint-interval",
                                                    DEFAULT_CHECKPOINT_INTERVAL_SECONDS)
        if checkpoint_interval <= 0:
            raise self.error("pipeline.checkpoint-interval", f"expected a positive duration like 3s or 3000 (ms), "
                                                             f"got {pipeline_raw['checkpoint-interval']!r}")
        status = (self.string(pipeline_raw, "pipeline", "lakecdc.sensor.default-status", default="running") or "")
        if status.lower() not in ("running", "stopped"):
            raise self.error("pipeline.lakecdc.sensor.default-status", f"expected running or stopped, got {status!r}")

        config = PipelineConfig(
            name=name, source=source, sink=sink, transforms=transforms, routes=routes,
            local_time_zone=local_tz, schema_change_behavior=behavior, parallelism=parallelism,
            sensor_interval_seconds=interval, sensor_running=status.lower() == "running", route_mode=route_mode,
            path=self.file, automation=self.automation(pipeline_raw),
            snapshot_commit_rows=self.integer(pipeline_raw, "pipeline", "lakecdc.snapshot.commit-rows", 250_000,
                                              minimum=1),
            metadata_columns=parse_metadata_columns(pipeline_raw.get("lakecdc.metadata-columns"), file=self.file,
                                                    path="pipeline.lakecdc.metadata-columns"),
            udfs=udfs, decimal_precision=38 if precision_mode == "UP_TO_38" else 19,
            upkeep=self.upkeep(pipeline_raw), checkpoint_interval_seconds=checkpoint_interval)
        self.validate_transforms(config)
        self.validate_table_options(config)
        from lakecdc.transform.routes import Router

        Router(config.routes, mode=config.route_mode, file=self.file)  # route patterns, before any connection
        return config

    def upkeep(self, raw: dict) -> UpkeepConfig:
        path = "pipeline"
        schedule = self.string(raw, path, "lakecdc.upkeep.schedule")
        if schedule is not None and len(schedule.split()) not in (5, 6):
            raise self.error("pipeline.lakecdc.upkeep.schedule",
                             f"expected a cron expression like '0 3 * * *' (minute hour day month weekday), got "
                             f"{schedule!r}")
        return UpkeepConfig(
            enabled=self.boolean(raw, path, "lakecdc.upkeep.enabled", True),
            every_commits=self.integer(raw, path, "lakecdc.upkeep.every-commits", 1, minimum=1),
            orphan_older_than_seconds=self.duration_seconds(raw, path, "lakecdc.upkeep.orphan-files.older-than",
                                                            86400.0),
            schedule=schedule)

    def automation(self, raw: dict) -> AutomationConfig:
        path = "pipeline"
        schedule = self.string(raw, path, "lakecdc.schedule")
        if schedule is not None and len(schedule.split()) not in (5, 6):
            raise self.error("pipeline.lakecdc.schedule",
                             f"expected a cron expression like '0 2 * * *' (minute hour day month weekday), got "
                             f"{schedule!r}")
        status = (self.string(raw, path, "lakecdc.schedule.default-status", default="running") or "").lower()
        if status not in ("running", "stopped"):
            raise self.error("pipeline.lakecdc.schedule.default-status", f"expected running or stopped, got {status!r}")
        pool = self.string(raw, path, "lakecdc.pool", default="per-table") or "per-table"
        if any(c.isspace() for c in pool):
            raise self.error("pipeline.lakecdc.pool", f"a pool name cannot contain spaces, got {pool!r}")
        keys = {}
        for kind in ("mysql", "paimon"):
            key = self.string(raw, path, f"lakecdc.resource.{kind}", default=kind) or kind
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                raise self.error(f"pipeline.lakecdc.resource.{kind}",
                                 f"a Dagster resource key must be a Python identifier, got {key!r}")
            keys[kind] = key
        webhook = self.string(raw, path, "lakecdc.alert.webhook")
        if webhook is not None and not re.match(r"https?://", webhook):
            raise self.error("pipeline.lakecdc.alert.webhook", "expected an http:// or https:// URL")
        return AutomationConfig(
            schedule=schedule, schedule_running=status == "running",
            max_retries=self.integer(raw, path, "lakecdc.retry.max-retries", 3, minimum=0),
            retry_delay_seconds=self.duration_seconds(raw, path, "lakecdc.retry.delay", 10.0),
            pool=pool, mysql_resource=keys["mysql"], paimon_resource=keys["paimon"], alert_webhook=webhook)

    def sink(self, raw: dict) -> SinkConfig:
        path = "sink"
        kind = self.string(raw, path, "type", required=True)
        if kind.lower() != "paimon":
            raise self.error("sink.type", f"only the 'paimon' sink is supported, got {kind!r}")
        self.check_keys(raw, path, _SINK_KEYS, _SINK_PREFIXES)
        catalog = {k[len("catalog.properties."):]: option_text(v) for k, v in raw.items()
                   if k.startswith("catalog.properties.")}
        table_props = {k[len("table.properties."):]: option_text(v) for k, v in raw.items()
                       if k.startswith("table.properties.")}
        metastore = catalog.get("metastore")
        if not metastore:
            raise self.error("sink.catalog.properties.metastore", "required option is missing (use: filesystem)")
        if metastore != "filesystem":
            raise self.error("sink.catalog.properties.metastore",
                             f"only the 'filesystem' metastore is supported, got {metastore!r}")
        if not catalog.get("warehouse"):
            raise self.error("sink.catalog.properties.warehouse", "required option is missing")
        self._check_warehouse(catalog)
        include = self._schema_change_types(raw, "include.schema.changes")
        exclude = self._schema_change_types(raw, "exclude.schema.changes")
        prefix = raw.get("commit.user-prefix", raw.get("commit.user", "admin"))
        return SinkConfig(
            catalog_options=catalog, table_properties=table_props,
            partition_keys=self._partition_keys(self.string(raw, path, "partition.key", default="") or ""),
            commit_user_prefix=str(prefix), name=self.string(raw, path, "name"),
            include_schema_changes=include, exclude_schema_changes=exclude)

    def _check_warehouse(self, catalog: dict[str, str]) -> None:
        """Local paths, file:// and s3:// warehouses (docs/operations.md, "Object-store warehouses"); S3 options
        under Paimon's names or their aliases."""
        from lakecdc.errors import SinkError
        from lakecdc.sink import object_store

        warehouse = catalog["warehouse"].strip()
        problem = object_store.warehouse_problem(warehouse)
        if problem:
            raise self.error("sink.catalog.properties.warehouse", problem)
        if object_store.is_object_store(warehouse):
            try:
                object_store.S3Settings.from_options(catalog)
            except SinkError as exc:
                raise self.error("sink", str(exc)) from None

    def _schema_change_types(self, raw: dict, key: str) -> tuple[str, ...] | None:
        """A list of schema change event types or families (Flink CDC: ``[column, drop.table]``), expanded."""
        from lakecdc.source.ddl import EVENT_FAMILIES, EVENT_TYPES

        if key not in raw or raw[key] is None:
            return None
        value = raw[key]
        items = value if isinstance(value, list) else str(value).strip("[]").split(",")
        expanded: list[str] = []
        for item in items:
            tag = str(item).strip().strip("'\"").lower()
            if not tag:
                continue
            if tag in EVENT_TYPES:
                expanded.append(tag)
            elif tag in EVENT_FAMILIES:
                expanded += EVENT_FAMILIES[tag]
            else:
                raise self.error(f"sink.{key}", f"unknown schema change type {item!r}; use event types "
                                                f"({', '.join(EVENT_TYPES)}) or families "
                                                f"({', '.join(sorted(EVENT_FAMILIES))})")
        return tuple(dict.fromkeys(expanded))

    def _partition_keys(self, text: str) -> dict[TableId, list[str]]:
        result: dict[TableId, list[str]] = {}
        for item in (p.strip() for p in text.split(";")):
            if not item:
                continue
            if item.count(":") != 1:
                raise self.error("sink.partition.key", f"expected 'db.table:col1,col2' items, got {item!r}")
            table, columns = item.split(":")
            try:
                table_id = TableId.parse(table.strip())
            except ValueError as exc:
                raise self.error("sink.partition.key", str(exc)) from None
            result[table_id] = [c.strip() for c in columns.split(",") if c.strip()]
        return result

    def transforms(self, raw: Any) -> list:
        from lakecdc.transform import TransformRuleConfig

        if raw is None:
            return []
        if not isinstance(raw, list):
            raise self.error("transform", f"expected a list of rules, got {describe(raw)}")
        rules = []
        for index, item in enumerate(raw):
            path = f"transform[{index}]"
            item = self.mapping(item, path)
            self.check_keys(item, path, _TRANSFORM_KEYS)
            rules.append(TransformRuleConfig(
                index=index,
                source_table=self.string(item, path, "source-table", required=True),
                projection=self.string(item, path, "projection"),
                filter=self.string(item, path, "filter"),
                primary_keys=self.string(item, path, "primary-keys"),
                partition_keys=self.string(item, path, "partition-keys"),
                table_options=self.string(item, path, "table-options"),
                table_options_delimiter=self.string(item, path, "table-options.delimiter", default=",",
                                                    allow_empty=False),
                converter_after_transform=self.string(item, path, "converter-after-transform"),
                description=self.string(item, path, "description"),
            ))
        return rules

    def routes(self, raw: Any) -> list[RouteConfig]:
        if raw is None:
            return []
        if not isinstance(raw, list):
            raise self.error("route", f"expected a list of rules, got {describe(raw)}")
        routes = []
        for index, item in enumerate(raw):
            path = f"route[{index}]"
            item = self.mapping(item, path)
            self.check_keys(item, path, _ROUTE_KEYS)
            sink_table = self.string(item, path, "sink-table", required=True)
            if sink_table.count(".") != 1:
                raise self.error(f"{path}.sink-table", f"expected 'database.table', got {sink_table!r}")
            routes.append(RouteConfig(
                index=index, source_table=self.string(item, path, "source-table", required=True),
                sink_table=sink_table, replace_symbol=self.string(item, path, "replace-symbol"),
                description=self.string(item, path, "description")))
        return routes

    def validate_transforms(self, config: PipelineConfig) -> None:
        from lakecdc.transform import TransformContext, validate_rule

        from lakecdc.transform.udf import udf_functions

        ctx = TransformContext(local_time_zone=config.local_time_zone, metadata_list=config.source.metadata_list,
                               source_file=self.file, metadata_columns=config.metadata_columns,
                               udfs=udf_functions(config.udfs), decimal_precision=config.decimal_precision)
        for rule in config.transforms:
            validate_rule(rule, ctx)

    def validate_table_options(self, config: PipelineConfig) -> None:
        """Refuse Paimon table options the storage library cannot honour correctly, or whose merge engine cannot
        take the -U/-D rows the pipeline writes (lakecdc.sink.options), before any run."""
        from lakecdc.sink.upkeep import policy_problem
        from lakecdc.sink.tables import pipeline_options_problem
        from lakecdc.transform import parse_table_options
        from lakecdc.transform.rules import SOFT_DELETE

        # sink-level options apply to every table no rule gives table-options to; such tables take MySQL updates
        # (-U/+U) and deletes (-D), so the merge engine must take them (Flink's Paimon writer fails on the first)
        problem = pipeline_options_problem(config.sink.table_properties, ("-U", "-D")) \
            or policy_problem(config.sink.table_properties)
        if problem:
            raise self.error("sink.table.properties", problem)
        for rule in config.transforms:
            options = dict(config.sink.table_properties)
            options.update(parse_table_options(rule.table_options, rule.table_options_delimiter))
            soft_delete = (rule.converter_after_transform or "").strip().upper() == SOFT_DELETE
            problem = pipeline_options_problem(options, ("-U",) if soft_delete else ("-U", "-D")) \
                or policy_problem(options)
            if problem:
                raise self.error(f"{rule.path}.table-options", problem + " (options: sink table.properties, then "
                                                                         "this rule's table-options)")


def transform_context(config: PipelineConfig):
    """The transform context a pipeline's rules are compiled with."""
    from lakecdc.transform import TransformContext
    from lakecdc.transform.udf import udf_functions

    return TransformContext(local_time_zone=config.local_time_zone, metadata_list=config.source.metadata_list,
                            source_file=config.path, metadata_columns=config.metadata_columns,
                            udfs=udf_functions(config.udfs), decimal_precision=config.decimal_precision)


def _closest(key: str, known: set[str]) -> str | None:
    import difflib

    matches = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.75)
    return matches[0] if matches else None
