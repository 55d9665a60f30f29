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
import zoneinfo
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lakecdc.errors import PipelineConfigError
from lakecdc.model import TableId

# --- known keys -----------------------------------------------------------------------------------------------

_SOURCE_KEYS = {
    "type", "name", "hostname", "port", "username", "password", "tables", "tables.exclude", "server-id",
    "server-time-zone", "scan.startup.mode", "scan.incremental.snapshot.chunk.size", "scan.snapshot.fetch.size",
    "scan.incremental.snapshot.chunk.key-column", "chunk-meta.group.size",
    "chunk-key.even-distribution.factor.upper-bound", "chunk-key.even-distribution.factor.lower-bound",
    "scan.incremental.close-idle-reader.enabled", "scan.incremental.snapshot.unbounded-chunk-first.enabled",
    "scan.incremental.snapshot.backfill.skip", "scan.newly-added-table.enabled",
    "scan.binlog.newly-added-table.enabled", "schema-change.enabled", "metadata.list", "include-comments.enabled",
    "treat-tinyint1-as-boolean.enabled", "use.legacy.json.format", "scan.parse.online.schema.changes.enabled",
    "connect.timeout", "connect.max-retries", "connection.pool.size", "heartbeat.interval",
    "scan.startup.specific-offset.file", "scan.startup.specific-offset.pos", "scan.startup.specific-offset.gtid-set",
    "scan.startup.specific-offset.skip-events", "scan.startup.specific-offset.skip-rows",
    "scan.startup.timestamp-millis",
}
_SOURCE_PREFIXES = ("jdbc.properties.", "debezium.")
# Accepted because they only tune Flink's parallel snapshot machinery, which a single-process micro-batch does
# not have; they change no result.
_SOURCE_TUNING_ONLY = {
    "scan.snapshot.fetch.size", "chunk-meta.group.size", "chunk-key.even-distribution.factor.upper-bound",
    "chunk-key.even-distribution.factor.lower-bound", "scan.incremental.close-idle-reader.enabled",
    "scan.incremental.snapshot.unbounded-chunk-first.enabled", "connection.pool.size", "heartbeat.interval",
    "scan.incremental.snapshot.chunk.size", "connect.max-retries",
}
_SINK_KEYS = {"type", "name", "partition.key", "commit.user-prefix", "commit.user", "include.schema.changes",
              "exclude.schema.changes"}
_SINK_PREFIXES = ("catalog.properties.", "table.properties.")
_TRANSFORM_KEYS = {"source-table", "projection", "filter", "primary-keys", "partition-keys", "table-options",
                   "table-options.delimiter", "converter-after-transform", "description"}
_ROUTE_KEYS = {"source-table", "sink-table", "replace-symbol", "description"}
_PIPELINE_KEYS = {
    "name", "parallelism", "local-time-zone", "schema.change.behavior", "execution.runtime-mode", "route-mode",
    "transform.decimal.precision.mode", "sink.partitioning.strategy", "schema-operator.rpc-timeout",
    "operator.uid.prefix", "schema.operator.uid", "user-defined-function",
    # lakecdc's own keys
    "lakecdc.sensor.interval", "lakecdc.sensor.default-status",
}
_SCHEMA_CHANGE_BEHAVIORS = {"exception", "evolve", "try_evolve", "lenient", "ignore"}

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|min|m|h)?\s*$")


# --- the parsed pipeline ---------------------------------------------------------------------------------------

@dataclass
class SourceConfig:
    hostname: str
    port: int
    username: str
    password: str = field(repr=False)
    tables: str
    tables_exclude: str | None
    server_id: int
    server_time_zone: str
    metadata_list: frozenset[str]
    startup_mode: str
    treat_tinyint1_as_boolean: bool
    connect_timeout: float
    options: dict[str, Any] = field(repr=False, default_factory=dict)


@dataclass
class SinkConfig:
    catalog_options: dict[str, str]
    table_properties: dict[str, str]
    partition_keys: dict[TableId, list[str]]
    commit_user_prefix: str
    name: str | None = None


@dataclass
class RouteConfig:
    index: int
    source_table: str
    sink_table: str
    replace_symbol: str | None = None
    description: str | None = None


@dataclass
class PipelineConfig:
    name: str
    source: SourceConfig
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
    return parse_pipeline(text, path=path, env=env)


def parse_pipeline(text: str, *, path: str | None = None, env: dict[str, str] | None = None) -> PipelineConfig:
    env = dict(os.environ) if env is None else env
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise PipelineConfigError(f"not valid YAML{where}: {problem}", file=path) from None
    if not isinstance(raw, dict):
        raise PipelineConfigError("the pipeline must be a YAML mapping with source, sink and pipeline", file=path)
    raw = _substitute_env(raw, env, path, "")
    return _Parser(path).pipeline(raw)


def _substitute_env(value: Any, env: dict[str, str], file: str | None, key_path: str) -> Any:
    if isinstance(value, dict):
        return {k: _substitute_env(v, env, file, _join(key_path, str(k))) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute_env(v, env, file, f"{key_path}[{i}]") for i, v in enumerate(value)]
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
            raise self.error(path, f"expected a mapping of options, got {_kind(raw)}")
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
            raise self.error(_join(path, key), f"expected a string, got {_kind(value)}")
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
            raise self.error(_join(path, key), f"expected an integer, got {_kind(value)}")
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
        factor = {"ms": 0.001, "s": 1, "sec": 1, "min": 60, "m": 60, "h": 3600}[unit]
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

        source = self.source(self.mapping(raw["source"], "source"))
        sink = self.sink(self.mapping(raw["sink"], "sink"))
        transforms = self.transforms(raw.get("transform"))
        routes = self.routes(raw.get("route"))

        name = self.string(pipeline_raw, "pipeline", "name", default="Flink CDC Pipeline Job")
        local_tz = self.string(pipeline_raw, "pipeline", "local-time-zone", default="UTC")
        if local_tz == "systemDefault":
            from lakecdc.transform.types import system_zone

            local_tz = system_zone()
        _check_zone(self, "pipeline.local-time-zone", local_tz)
        behavior = (self.string(pipeline_raw, "pipeline", "schema.change.behavior", default="lenient") or "").lower()
        if behavior not in _SCHEMA_CHANGE_BEHAVIORS:
            raise self.error("pipeline.schema.change.behavior",
                             f"unknown value {behavior!r}; use one of {', '.join(sorted(_SCHEMA_CHANGE_BEHAVIORS))}")
        runtime_mode = (self.string(pipeline_raw, "pipeline", "execution.runtime-mode", default="STREAMING") or "")
        if runtime_mode.upper() not in ("STREAMING", "BATCH"):
            raise self.error("pipeline.execution.runtime-mode", f"expected STREAMING or BATCH, got {runtime_mode!r}")
        route_mode = (self.string(pipeline_raw, "pipeline", "route-mode", default="ALL_MATCH") or "").upper()
        if route_mode != "ALL_MATCH" and route_mode != "FIRST_MATCH":
            raise self.error("pipeline.route-mode", f"expected ALL_MATCH or FIRST_MATCH, got {route_mode!r}")
        if pipeline_raw.get("user-defined-function"):
            raise self.error("pipeline.user-defined-function",
                             "user-defined functions are not supported yet; remove the option")
        parallelism = self.integer(pipeline_raw, "pipeline", "parallelism", 1, minimum=1)
        interval = self.duration_seconds(pipeline_raw, "pipeline", "lakecdc.sensor.interval", 30.0)
        status = (self.string(pipeline_raw, "pipeline", "lakecdc.sensor.default-status", default="running") or "")
        if status.lower() not in ("running", "stopped"):
            raise self.error("pipeline.lakecdc.sensor.default-status", f"expected running or stopped, got {status!r}")

        config = PipelineConfig(
            name=name, source=source, sink=sink, transforms=transforms, routes=routes,
            local_time_zone=local_tz, schema_change_behavior=behavior, parallelism=parallelism,
            sensor_interval_seconds=interval, sensor_running=status.lower() == "running", route_mode=route_mode,
            path=self.file)
        self.validate_transforms(config)
        return config

    def source(self, raw: dict) -> SourceConfig:
        path = "source"
        kind = self.string(raw, path, "type", required=True)
        if kind.lower() != "mysql":
            raise self.error("source.type", f"only the 'mysql' source is supported, got {kind!r}")
        self.check_keys(raw, path, _SOURCE_KEYS, _SOURCE_PREFIXES)
        mode = (self.string(raw, path, "scan.startup.mode", default="initial") or "").lower()
        if mode not in ("initial", "snapshot", "latest-offset", "earliest-offset", "specific-offset", "timestamp"):
            raise self.error("source.scan.startup.mode", f"unknown startup mode {mode!r}")
        if mode != "initial":
            raise self.error("source.scan.startup.mode",
                             f"startup mode {mode!r} is not supported yet; only 'initial' (snapshot, then binlog)")
        for key in ("scan.newly-added-table.enabled", "scan.binlog.newly-added-table.enabled",
                    "scan.parse.online.schema.changes.enabled", "include-comments.enabled"):
            if self.boolean(raw, path, key, False):
                raise self.error(f"source.{key}", "not supported yet; remove the option or set it to false")
        if "scan.incremental.snapshot.chunk.key-column" in raw:
            raise self.error("source.scan.incremental.snapshot.chunk.key-column",
                             "not supported yet: tables are snapshotted whole")
        for key in raw:
            if key.startswith("debezium.") or key.startswith("jdbc.properties."):
                raise self.error(f"source.{key}", "pass-through driver options are not supported yet")
        server_id_text = self.string(raw, path, "server-id", default="5400") or "5400"
        server_id = self._server_id(server_id_text)
        metadata = self.string(raw, path, "metadata.list", default="") or ""
        metadata_list = frozenset(m.strip() for m in metadata.split(",") if m.strip())
        for key in metadata_list:
            if key not in ("op_ts", "table_name", "database_name"):
                raise self.error("source.metadata.list",
                                 f"[{key}] cannot be found in mysql metadata (available: op_ts, table_name, "
                                 "database_name)")
        zone = self.string(raw, path, "server-time-zone", default="UTC")
        _check_zone(self, "source.server-time-zone", zone)
        self.integer(raw, path, "scan.incremental.snapshot.chunk.size", 8096, minimum=2)
        self.integer(raw, path, "scan.snapshot.fetch.size", 1024, minimum=2)
        return SourceConfig(
            hostname=self.string(raw, path, "hostname", required=True),
            port=self.integer(raw, path, "port", 3306, minimum=1),
            username=self.string(raw, path, "username", required=True),
            password=self.string(raw, path, "password", default="", allow_empty=True) or "",
            tables=self.string(raw, path, "tables", required=True),
            tables_exclude=self.string(raw, path, "tables.exclude"),
            server_id=server_id,
            server_time_zone=zone,
            metadata_list=metadata_list,
            startup_mode=mode,
            treat_tinyint1_as_boolean=self.boolean(raw, path, "treat-tinyint1-as-boolean.enabled", True),
            connect_timeout=self.duration_seconds(raw, path, "connect.timeout", 30.0),
            options=dict(raw),
        )

    def _server_id(self, text: str) -> int:
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text)
        if not match:
            raise self.error("source.server-id", f"expected an id like 5400 or a range like 5400-5404, got {text!r}")
        first = int(match.group(1))
        if match.group(2) is not None and int(match.group(2)) < first:
            raise self.error("source.server-id", f"the range {text!r} ends before it starts")
        if not 1 <= first <= 2**32 - 1:
            raise self.error("source.server-id", f"server ids are 1..4294967295, got {first}")
        return first

    def sink(self, raw: dict) -> SinkConfig:
        path = "sink"
        kind = self.string(raw, path, "type", required=True)
        if kind.lower() != "paimon":
            raise self.error("sink.type", f"only the 'paimon' sink is supported, got {kind!r}")
        self.check_keys(raw, path, _SINK_KEYS, _SINK_PREFIXES)
        catalog = {k[len("catalog.properties."):]: _option_text(v) for k, v in raw.items()
                   if k.startswith("catalog.properties.")}
        table_props = {k[len("table.properties."):]: _option_text(v) for k, v in raw.items()
                       if k.startswith("table.properties.")}
        metastore = catalog.get("metastore")
        if not metastore:
            raise self.error("sink.catalog.properties.metastore", "required option is missing (use: filesystem)")
        if metastore != "filesystem":
            raise self.error("sink.catalog.properties.metastore",
                             f"only the 'filesystem' metastore is supported, got {metastore!r}")
        if not catalog.get("warehouse"):
            raise self.error("sink.catalog.properties.warehouse", "required option is missing")
        for key in ("include.schema.changes", "exclude.schema.changes"):
            if key in raw:
                raise self.error(f"sink.{key}", "not supported yet (schema changes arrive with a later release)")
        prefix = raw.get("commit.user-prefix", raw.get("commit.user", "admin"))
        return SinkConfig(
            catalog_options=catalog, table_properties=table_props,
            partition_keys=self._partition_keys(self.string(raw, path, "partition.key", default="") or ""),
            commit_user_prefix=str(prefix), name=self.string(raw, path, "name"))

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
            raise self.error("transform", f"expected a list of rules, got {_kind(raw)}")
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
            raise self.error("route", f"expected a list of rules, got {_kind(raw)}")
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

        ctx = TransformContext(local_time_zone=config.local_time_zone, metadata_list=config.source.metadata_list,
                               source_file=self.file)
        for rule in config.transforms:
            validate_rule(rule, ctx)


def transform_context(config: PipelineConfig):
    """The transform context a pipeline's rules are compiled with."""
    from lakecdc.transform import TransformContext

    return TransformContext(local_time_zone=config.local_time_zone, metadata_list=config.source.metadata_list,
                            source_file=config.path)


def _check_zone(parser: _Parser, path: str, zone: str) -> None:
    if re.fullmatch(r"[+-]\d{2}:\d{2}", zone) or zone in ("UTC", "Z"):
        return
    try:
        zoneinfo.ZoneInfo(zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise parser.error(path, f"unknown time zone {zone!r} (use an IANA name like Europe/Berlin or +02:00)") \
            from None


def _option_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "a boolean"
    return f"{type(value).__name__} {value!r}"


def _closest(key: str, known: set[str]) -> str | None:
    import difflib

    matches = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.75)
    return matches[0] if matches else None
