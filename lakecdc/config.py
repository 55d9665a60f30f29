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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, overload

import yaml

from lakecdc.errors import PipelineConfigError, SinkError
from lakecdc.options import (ANY, BOOL, DURATION, INT, STRING, Option, Prefix, Where, check_keys, check_zone,
                             declarations, describe, duration_seconds, nested, option, read)
from lakecdc.sink.object_store import SECRET_S3_OPTIONS, canonical_s3_option
from lakecdc.sink.sink_options import OPTIONS as SINK_OPTIONS
from lakecdc.sink.sink_options import PaimonSinkOptions
from lakecdc.sink.sink_options import from_yaml as sink_options_from_yaml
from lakecdc.sink.tables import pipeline_options_problem
from lakecdc.source.options import OPTIONS as SOURCE_OPTIONS
from lakecdc.source.options import TLS_SECRETS, MySqlSourceOptions
from lakecdc.source.options import from_yaml as source_options_from_yaml
from lakecdc.transform import TransformContext, TransformRuleConfig, parse_table_options, validate_rule
from lakecdc.transform.metadata_columns import parse_metadata_columns
from lakecdc.transform.routes import Router
from lakecdc.transform.types import system_zone
from lakecdc.transform.udf import parse_udfs, udf_functions

# --- known keys -----------------------------------------------------------------------------------------------

_TRANSFORM_KEYS = {"source-table", "projection", "filter", "primary-keys", "partition-keys", "table-options",
                   "table-options.delimiter", "converter-after-transform", "description"}
_ROUTE_KEYS = {"source-table", "sink-table", "replace-symbol", "description"}
# pipeline.schema.change.behavior (lakecdc.runtime.schema_evolution applies them)
EXCEPTION, EVOLVE, TRY_EVOLVE, LENIENT, IGNORE = "exception", "evolve", "try_evolve", "lenient", "ignore"
SCHEMA_CHANGE_BEHAVIORS = (EXCEPTION, EVOLVE, TRY_EVOLVE, LENIENT, IGNORE)

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


# --- the pipeline block's options ------------------------------------------------------------------------------

def _cron(example: str):
    def check(schedule: str) -> str | None:
        if len(schedule.split()) in (5, 6):
            return None
        return f"expected a cron expression like '{example}' (minute hour day month weekday), got {schedule!r}"
    return check


def _running(status: str, where: Where) -> bool:
    if status.lower() not in ("running", "stopped"):
        raise where.error(f"expected running or stopped, got {status!r}")
    return status.lower() == "running"


def _resource_key(key: str) -> str | None:
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
        return None
    return f"a Dagster resource key must be a Python identifier, got {key!r}"


def _one_of(*choices: str, message: str | None = None):
    """A converter to one of ``choices`` (case-insensitive), or an error listing them."""
    def convert(value: str, where: Where) -> str:
        for choice in choices:
            if value.lower() == choice.lower():
                return choice
        raise where.error((message or "expected {choices}, got {value!r}").format(
            choices=" or ".join(choices), value=value))
    return convert


def _local_time_zone(zone: str, where: Where) -> str:
    if zone == "systemDefault":
        zone = system_zone()
    problem = check_zone(zone)
    if problem:
        raise where.error(problem)
    return zone


def _udfs(value: Any, where: Where) -> tuple:
    return parse_udfs(value, file=where.file, path=where.path)


def _owners(value: str, where: Where) -> tuple[str, ...]:
    """``a@x.com, team:data``: Dagster asset owners (an email address or ``team:<name>`` each)."""
    owners = tuple(o.strip() for o in value.split(",") if o.strip())
    for owner in owners:
        if not (re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", owner) or re.fullmatch(r"team:\S+", owner)):
            raise where.error(f"expected owners as email addresses or team:<name>, separated by commas, got "
                              f"{owner!r}")
    return owners


def _freshness(value: str, where: Where) -> float | str | None:
    """``none``, ``auto`` (derived from the sensor interval) or a duration (seconds)."""
    text = value.strip().lower()
    if text in ("none", "auto"):
        return None if text == "none" else "auto"
    seconds = duration_seconds(value, where)
    if seconds < 60:  # Dagster's own limit
        raise where.error(f"a freshness window must be at least 1 minute, got {value!r}")
    return seconds


@dataclass
class RouteConfig:
    index: int
    source_table: str
    sink_table: str
    replace_symbol: str | None = None
    description: str | None = None


def _pool(pool: str) -> str | None:
    if any(c.isspace() for c in pool):
        return f"a pool name cannot contain spaces, got {pool!r}"
    if pool == "per-table":
        return ("`per-table` is gone: a pipeline's tables are one Dagster op now, in one pool; use `per-pipeline` "
                "(the default, `lakecdc/<slug>`) or a pool name (see docs/dagster.md)")
    return None


@dataclass
class AutomationConfig:
    """lakecdc's own Dagster settings (``pipeline.lakecdc.*``): schedule, retries, pool, resource keys, alerts."""

    schedule: str | None = option("lakecdc.schedule", STRING, None, check=_cron("0 2 * * *"), default_doc="none",
                                  doc="cron expression of an optional schedule (a micro-batch of every table)")
    schedule_running: bool = option("lakecdc.schedule.default-status", STRING, True, convert=_running,
                                    default_doc="`running`", doc="`running` or `stopped`")
    # retries of transient source errors, with exponential backoff from retry_delay
    max_retries: int = option("lakecdc.retry.max-retries", INT, 3, minimum=0,
                              doc="retries of transient source errors (exponential backoff); others fail at once")
    retry_delay_seconds: float = option("lakecdc.retry.delay", DURATION, 10.0, default_doc="`10s`",
                                        doc="delay before the first retry")
    # "per-pipeline" = the pipeline's own Dagster pool (lakecdc/<slug>), else this named pool
    pool: str = option("lakecdc.pool", STRING, "per-pipeline", check=_pool,
                       doc="Dagster concurrency pool of the pipeline's op (and its re-snapshot and upkeep ops): "
                           "`per-pipeline` (`lakecdc/<slug>`) or a name")
    mysql_resource: str = option("lakecdc.resource.mysql", STRING, "mysql", check=_resource_key,
                                 doc="Dagster resource key that overrides the `source:` connection")
    paimon_resource: str = option("lakecdc.resource.paimon", STRING, "paimon", check=_resource_key,
                                  doc="Dagster resource key that overrides the `sink:` catalog")
    owners: tuple = option("lakecdc.owners", STRING, (), convert=_owners, default_doc="none",
                           doc="owners of the pipeline's Paimon assets in Dagster: email addresses or `team:<name>`, "
                               "separated by commas")
    # a Dagster freshness policy of the Paimon assets (lakecdc.dagster.translator.freshness_policy)
    freshness: float | str | None = option(
        "lakecdc.freshness.fail-window", STRING, None, convert=_freshness, default_doc="`none`",
        doc="a Dagster freshness policy on the Paimon assets: a duration (a table fails freshness when its last "
            "materialisation is older), or `auto`: 5 sensor intervals (warn after 2), at least 5 minutes. Dagster "
            "counts materialisations only, and a table materialises only when its source changes: use it for "
            "tables whose source changes at least that often ([dagster.md](dagster.md#automation))")
    alert_webhook: str | None = option("lakecdc.alert.webhook", STRING, None, repr=False, default_doc="none",
                                       check=lambda url: None if re.match(r"https?://", url) else
                                       "expected an http:// or https:// URL",
                                       doc="URL the failure sensor posts failed runs to (see [dagster.md](dagster.md))")


@dataclass
class UpkeepConfig:
    """``pipeline.lakecdc.upkeep.*``: table upkeep (compaction, manifest merging, snapshot expiry, orphan files;
    lakecdc.sink.upkeep) after a run's commits, and the schedule of the Dagster upkeep job."""

    # in the pipeline's runs (the CLI and the Dagster job run it regardless)
    enabled: bool = option("lakecdc.upkeep.enabled", BOOL, True,
                           doc="table upkeep (compaction, manifest merging, snapshot expiry, orphan files) after a "
                               "run's commits ([operations.md](operations.md#table-upkeep))")
    every_commits: int = option("lakecdc.upkeep.every-commits", INT, 1, minimum=1,
                                doc="a table's upkeep runs once it has this many new snapshots since its last upkeep")
    # orphan files younger than this are kept (Paimon: 1 day)
    orphan_older_than_seconds: float = option(
        "lakecdc.upkeep.orphan-files.older-than", DURATION, 86400.0, default_doc="`1d`",
        doc="unreferenced files younger than this are never removed (also the default of `lakecdc upkeep` and the "
            "Dagster upkeep job)")
    schedule: str | None = option("lakecdc.upkeep.schedule", STRING, None, check=_cron("0 3 * * *"),
                                  default_doc="none",
                                  doc="cron expression of a schedule for the Dagster job `<pipeline>_upkeep`")


def _schedule_or_off(example: str):
    """A converter to a cron expression, or None for ``none``/``off`` (no schedule)."""
    check = _cron(example)

    def convert(value: str, where: Where) -> str | None:
        if value.strip().lower() in ("none", "off"):
            return None
        problem = check(value)
        if problem:
            raise where.error(f"{problem}, or none")
        return value
    return convert


DEFAULT_RECONCILE_SCHEDULE = "0 4 * * *"


@dataclass
class ReconcileConfig:
    """``pipeline.lakecdc.reconcile.*``: the full reconciliation against MySQL (lakecdc.runtime.reconcile): the
    schedule of the Dagster job that runs it and how gently it reads MySQL."""

    schedule: str | None = option(
        "lakecdc.reconcile.schedule", STRING, DEFAULT_RECONCILE_SCHEDULE, convert=_schedule_or_off("0 4 * * *"),
        default_doc=f"`{DEFAULT_RECONCILE_SCHEDULE}`",
        doc="cron expression (in `local-time-zone`) of the schedule of the Dagster job `<pipeline>_reconcile`: the "
            "row count of every table against MySQL at its checkpoint and primary-key uniqueness over the whole "
            "table ([dagster.md](dagster.md#asset-checks)); `none` turns the schedule off (the job stays runnable "
            "from the UI, `lakecdc check` from the CLI)")
    pause_seconds: float = option(
        "lakecdc.reconcile.pause", DURATION, 0.05, default_doc="`50ms`",
        doc="the reconciliation reads MySQL in chunks of `scan.incremental.snapshot.chunk.size` rows, one statement "
            "each, and waits this long after each")


# Flink checkpointing has no default interval (it is off until set); Flink CDC's tutorial sets 3 s
DEFAULT_CHECKPOINT_INTERVAL_SECONDS = 3.0


@dataclass
class PipelineConfig:
    """A validated pipeline: the connectors' options, the transform and route rules, and the ``pipeline:`` block's
    options, each declared on the field it fills."""

    source: MySqlSourceOptions
    sink: PaimonSinkOptions
    transforms: list  # list[lakecdc.transform.TransformRuleConfig]
    routes: list[RouteConfig]
    name: str = option("name", STRING, "Flink CDC Pipeline Job",
                       doc="names the Dagster job, sensor and asset group")
    parallelism: int = option("parallelism", INT, 1, minimum=1,
                              doc="readers of an incremental snapshot: each reads chunks on its own connection, the "
                                  "rows still go through one writer per table; otherwise a micro-batch runs in one "
                                  "process")
    local_time_zone: str = option("local-time-zone", STRING, "UTC", convert=_local_time_zone,
                                  doc="zone for temporal functions (`systemDefault` = the machine's zone)")
    schema_change_behavior: str = option(
        "schema.change.behavior", STRING, LENIENT,
        convert=_one_of(*SCHEMA_CHANGE_BEHAVIORS, message="unknown value {value!r}; use one of "
                        + ", ".join(sorted(SCHEMA_CHANGE_BEHAVIORS))),
        doc="`exception`, `evolve`, `try_evolve`, `lenient` or `ignore`: what DDL in the binlog does to the Paimon "
            "tables ([schema-changes.md](schema-changes.md))")
    route_mode: str = option("route-mode", STRING, "ALL_MATCH", convert=_one_of("ALL_MATCH", "FIRST_MATCH"),
                             doc="`ALL_MATCH` or `FIRST_MATCH` (see *route*)")
    runtime_mode: str = option("execution.runtime-mode", STRING, "STREAMING", convert=_one_of("STREAMING", "BATCH"),
                               doc="validated; `BATCH` needs the source's `scan.startup.mode: snapshot`")
    # how often follow mode (lakecdc run --follow, the Dagster follow job) commits
    checkpoint_interval_seconds: float = option(
        "checkpoint-interval", DURATION, DEFAULT_CHECKPOINT_INTERVAL_SECONDS, default_doc="`3s`",
        check=lambda seconds: None if seconds > 0 else "expected a positive duration like 3s or 3000 (ms)",
        doc="follow mode (`lakecdc run --follow`, the Dagster follow job) commits this often; Flink's duration "
            "syntax (`3s`, `3000ms`, `3000` = milliseconds, `1min`); Flink checkpointing has no default, Flink "
            "CDC's tutorial uses 3 s ([operations.md](operations.md#follow-mode))")
    # lakecdc.transform.udf.UdfConfig items, callables loaded
    udfs: tuple = option(
        "user-defined-function", ANY, (), convert=_udfs,
        doc="list of `{name, classpath[, options]}`: `classpath: package.module:function` names a Python callable "
            "that takes one pyarrow array per argument and returns an array of the batch's length (a class is "
            "instantiated; `options`, a mapping, go to its `open(options)` method); its `result_type` attribute (a "
            "pyarrow type, or a function of the argument types) is the column type, STRING by default. A UDF wins "
            "over a built-in of the same name. Imported and checked when the file is loaded; Flink CDC's Java "
            "classes and inline `python-code` are refused")
    # 19 (UP_TO_19, default) or 38 (UP_TO_38)
    decimal_precision: int = option(
        "transform.decimal.precision.mode", STRING, 19, default_doc="`UP_TO_19`",
        convert=lambda mode, where: 38 if _one_of("UP_TO_19", "UP_TO_38")(mode, where) == "UP_TO_38" else 19,
        doc="`UP_TO_38` lets DECIMAL results of expressions (and CAST targets) have up to 38 digits instead of 19")
    upkeep: UpkeepConfig = nested(UpkeepConfig)
    reconcile: ReconcileConfig = nested(ReconcileConfig)
    # a chunked snapshot commits its progress after this many rows
    snapshot_commit_rows: int = option(
        "lakecdc.snapshot.commit-rows", INT, 1_000_000, minimum=1,
        doc="a chunked snapshot commits its rows and progress after at least this many rows (memory bound; resume "
            "point)")
    sensor_interval_seconds: float = option("lakecdc.sensor.interval", DURATION, 30.0, default_doc="`30s`",
                                            doc="how often the Dagster sensor checks the binlog head")
    sensor_running: bool = option("lakecdc.sensor.default-status", STRING, True, convert=_running,
                                  default_doc="`running`", doc="`running` or `stopped`")
    automation: AutomationConfig = nested(AutomationConfig)
    # FLIP-107 metadata columns (lakecdc.transform.metadata_columns)
    metadata_columns: tuple = option(
        "lakecdc.metadata-columns", ANY, (),
        convert=lambda value, where: parse_metadata_columns(value, file=where.file, path=where.path),
        doc="FLIP-107 metadata columns for every captured table: `change_time TIMESTAMP_LTZ(3) METADATA FROM "
            "'op_ts'` (persisted, part of `*`), `... VIRTUAL` (only for expressions); keys `op_ts`, "
            "`database_name`, `table_name`, `row_kind`; see "
            "[python-api.md](python-api.md#pipelines-table-options-and-metadata-columns)")
    path: str | None = None

    @property
    def slug(self) -> str:
        """A Dagster-safe identifier for the pipeline (job, sensor and group names)."""
        slug = re.sub(r"[^A-Za-z0-9_]+", "_", self.name).strip("_").lower()
        return slug or "pipeline"


# Flink operator settings a single-process micro-batch does not have: accepted, as written
_FLINK_ONLY = "accepted; a Flink operator setting that changes nothing here"
PIPELINE_ACCEPTED = tuple(Option(key, ANY, None, doc=_FLINK_ONLY) for key in (
    "sink.partitioning.strategy", "schema-operator.rpc-timeout", "operator.uid.prefix", "schema.operator.uid"))
PIPELINE_OPTIONS: tuple[Option | Prefix, ...] = (*declarations(PipelineConfig), *PIPELINE_ACCEPTED)

# the declared options of each block, as docs/pipeline-yaml.md shows them (scripts/options_doc.py renders them)
OPTION_TABLES = {"source": list(SOURCE_OPTIONS), "sink": list(SINK_OPTIONS), "pipeline": list(PIPELINE_OPTIONS)}


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


@dataclass(frozen=True)
class ConfigErrorLocation:
    """Where in which file a PipelineConfigError is, for a reader: the YAML line of its key path, or for an error
    inside a transform expression the line and column of the faulty part of the expression in the file; what is
    wrong and what to do."""

    file: str
    line: int | None  # 1-based line of the key (or of the expression's faulty part) in the file, None when unknown
    key: str  # the key path (``transform[0].projection``), "" for the whole file
    message: str
    column: int | None = None  # 1-based column in the file of an expression error's faulty part

    def where(self) -> str:
        """``FILE, line N, column M`` (as far as known)."""
        return self.file + (f", line {self.line}" if self.line else "") + \
            (f", column {self.column}" if self.line and self.column else "")

    def text(self) -> str:
        return f"{self.where()}" + (f" ({self.key})" if self.key else "") + f": {self.message}"


# the position inside the expression that lakecdc.transform.expressions.located_at adds to an expression error
_EXPRESSION_POSITION = re.compile(r" \[at line \d+, column \d+\]")


def locate_config_error(error: PipelineConfigError, text: str | None = None, *, file: str | None = None,
                        key_prefix: str = "") -> ConfigErrorLocation:
    """``error`` with the line of its key in the YAML ``text`` (read from ``error.file`` when not given); an error
    inside an expression (``error.offset``) with the file's line and column of its faulty part instead, so the
    position inside the (folded) expression leaves the message. ``file``/``key_prefix``: the file to name and where
    the pipeline sits in it, for a pipeline inside another YAML (a ``dg`` component's ``defs.yaml``:
    ``attributes.pipeline``)."""
    shown = file or error.file or "the pipeline file"
    if text is None and error.file:
        try:
            text = Path(error.file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            text = None
    key = ".".join(part for part in (key_prefix, error.path or "") if part)
    message = getattr(error, "message", str(error))
    if text is None or not key:
        return ConfigErrorLocation(shown, None, error.path or "", message)
    line, node = _yaml_key(text, key)
    offset = getattr(error, "offset", None)
    position = _scalar_position(text, node, offset) if offset is not None and node is not None else None
    if position is None:
        return ConfigErrorLocation(shown, line, error.path or "", message)
    return ConfigErrorLocation(shown, position[0], error.path or "", _EXPRESSION_POSITION.sub("", message),
                               column=position[1])


def yaml_line(text: str, key_path: str) -> int | None:
    """The 1-based line of the key a key path names in YAML ``text`` (``transform[0].projection``; keys may hold
    dots, ``pipeline.lakecdc.schedule``), or of the deepest part of it found; None when the text is not YAML."""
    return _yaml_key(text, key_path)[0]


def _yaml_key(text: str, key_path: str) -> tuple[int | None, yaml.Node | None]:
    """yaml_line's line, and the value node of the key when the whole path was found (else None)."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None, None
    line = None
    rest = key_path
    while node is not None and rest:
        index = re.match(r"\[(\d+)\]\.?", rest)
        if index:
            if not isinstance(node, yaml.SequenceNode) or int(index.group(1)) >= len(node.value):
                break
            node = node.value[int(index.group(1))]
            line, rest = node.start_mark.line + 1, rest[index.end():]
            continue
        if not isinstance(node, yaml.MappingNode):
            break
        # the longest key the path starts with ('table.properties.bucket' before 'table')
        matches = [(str(k.value), k, v) for k, v in node.value
                   if isinstance(k, yaml.ScalarNode) and (rest == str(k.value) or rest.startswith(f"{k.value}.")
                                                          or rest.startswith(f"{k.value}["))]
        if not matches:
            break
        key, key_node, node = max(matches, key=lambda m: len(m[0]))
        line, rest = key_node.start_mark.line + 1, rest[len(key):].lstrip(".")
    return line, (node if not rest else None)


def _scalar_position(text: str, node: yaml.Node, offset: int) -> tuple[int, int] | None:
    """The 1-based line and column in the file ``text`` of character ``offset`` of a scalar's value. YAML folding
    (plain and block scalars: ``>-``, ``|``) changes only line breaks and indentation, so the value's other
    characters are the file's, in order: walk both. None when they differ (escapes in a quoted scalar, a
    substituted ``${VAR}``): the key's line is named instead."""
    if not isinstance(node, yaml.ScalarNode) or not isinstance(node.value, str) or offset >= len(node.value):
        return None
    value = node.value
    while offset < len(value) and value[offset].isspace():  # a position between tokens: the next token
        offset += 1
    if offset >= len(value):
        return None
    start, end = node.start_mark.index, node.end_mark.index
    if node.style in ("|", ">"):
        start = text.index("\n", start, end) + 1 if "\n" in text[start:end] else end  # after the header line
    elif node.style in ("'", '"'):
        start += 1
    j = start
    for i in range(offset + 1):
        if value[i].isspace():
            continue
        while j < end and text[j].isspace():
            j += 1
        if j >= end:
            return None
        if node.style == "'" and value[i] == "'" and text.startswith("''", j):
            j += 1  # '' is a quote in a single-quoted scalar
        elif text[j] != value[i]:
            return None
        if i == offset:
            break
        j += 1
    return text.count("\n", 0, j) + 1, j - (text.rfind("\n", 0, j) + 1) + 1


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
    """Passwords come only from the environment: ``source.password`` (and the key store passwords of
    ``source.jdbc.properties.*``) must be empty or exactly one ``${VAR}`` (``${VAR:-}`` allowed: an empty default is
    no secret). A literal, or a non-empty default, would put a secret in a file that ends up in version control, in
    Dagster's UI (``lakecdc/pipeline_file``) and in backups."""
    source = raw.get("source")
    if not isinstance(source, dict):
        return
    for key in ("password", *TLS_SECRETS):
        value = source.get(key)
        if value is None or value == "" or (isinstance(value, str) and _PASSWORD_REF.fullmatch(value.strip())):
            continue
        if key == "password":
            raise PipelineConfigError(
                "a password written in the pipeline file is refused: passwords come only from environment variables. "
                "Write 'password: ${MYSQL_PASSWORD}' and export MYSQL_PASSWORD where the pipeline runs (a default "
                "such as ${MYSQL_PASSWORD:-secret} counts as written in the file), or bind a Dagster "
                "MySqlResource(password=dg.EnvVar(\"MYSQL_PASSWORD\"))", file=file, path="source.password")
        raise PipelineConfigError(
            f"a key store password written in the pipeline file is refused: it comes only from an environment "
            f"variable. Write '{key}: ${{MYSQL_KEY_STORE_PASSWORD}}' (any variable name) and export it where the "
            f"pipeline runs, or bind it as a Dagster MySqlResource field with dg.EnvVar", file=file,
            path=f"source.{key}")


def _check_storage_secret_sources(raw: dict, file: str | None) -> None:
    """S3 keys (``catalog.properties.s3.access-key`` / ``s3.secret-key`` / ``s3.session-token`` and their aliases)
    come only from the environment, like passwords: empty or exactly one ``${VAR}``."""
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

    def check_keys(self, raw: dict, path: str, known: set[str]) -> None:
        check_keys(raw, path, self.file, known)

    # a required option or one with a default is a str
    @overload
    def string(self, raw: dict, path: str, key: str, *, required: Literal[True], default: str | None = None,
               allow_empty: bool = False) -> str: ...

    @overload
    def string(self, raw: dict, path: str, key: str, *, required: bool = False, default: str,
               allow_empty: bool = False) -> str: ...

    @overload
    def string(self, raw: dict, path: str, key: str, *, required: bool = False, default: None = None,
               allow_empty: bool = False) -> str | None: ...

    def string(self, raw: dict, path: str, key: str, *, required: bool = False, default: str | None = None,
               allow_empty: bool = False) -> str | None:
        return Option(key, STRING, default, required=required, allow_empty=allow_empty).read(raw, path, self.file)

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
        check_keys(pipeline_raw, "pipeline", self.file, PIPELINE_OPTIONS)

        source = source_options_from_yaml(self.mapping(raw["source"], "source"), self.file)
        sink = sink_options_from_yaml(self.mapping(raw["sink"], "sink"), self.file)
        transforms = self.transforms(raw.get("transform"))
        routes = self.routes(raw.get("route"))

        for spec in PIPELINE_ACCEPTED:
            spec.read(pipeline_raw, "pipeline", self.file)
        values = read(PipelineConfig, pipeline_raw, "pipeline", self.file)
        if not source.schema_change_enabled:
            # Flink CDC's MySQL source then emits no schema change event at all: the Paimon tables keep the
            # schema they were created with, which is what the ignore behaviour does with every change
            values["schema_change_behavior"] = IGNORE
        if values["runtime_mode"] == "BATCH" and source.startup_mode != "snapshot":
            raise self.error("pipeline.execution.runtime-mode", "BATCH needs source scan.startup.mode: snapshot "
                                                                "(as in Flink CDC)")
        config = PipelineConfig(source=source, sink=sink, transforms=transforms, routes=routes, path=self.file,
                                **values)
        self.validate_transforms(config)
        self.validate_table_options(config)
        Router(config.routes, mode=config.route_mode, file=self.file)  # route patterns, before any connection
        return config

    def transforms(self, raw: Any) -> list:
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
        ctx = TransformContext(local_time_zone=config.local_time_zone, metadata_list=config.source.metadata_list,
                               source_file=self.file, metadata_columns=config.metadata_columns,
                               udfs=udf_functions(config.udfs), decimal_precision=config.decimal_precision)
        for rule in config.transforms:
            validate_rule(rule, ctx)

    def validate_table_options(self, config: PipelineConfig) -> None:
        """Refuse Paimon table options the storage library cannot honour correctly, or whose merge engine cannot
        take the -U/-D rows the pipeline writes (lakecdc.sink.options), before any run."""
        from lakecdc.sink.upkeep import policy_problem  # here: upkeep brings the Avro manifest code (start-up)

        # sink-level options apply to every table no rule gives table-options to; such tables take MySQL updates
        # (-U/+U) and deletes (-D), so the merge engine must take them (Flink's Paimon writer fails on the first)
        problem = pipeline_options_problem(config.sink.new_table_options, ("-U", "-D")) \
            or policy_problem(config.sink.new_table_options)
        if problem:
            raise self.error("sink.table.properties", problem + " (options: sink catalog.properties.table-default.*, "
                                                                "then table.properties)")
        for rule in config.transforms:
            options = dict(config.sink.new_table_options)
            options.update(parse_table_options(rule.table_options, rule.table_options_delimiter))
            problem = pipeline_options_problem(options, ("-U",) if rule.soft_delete else ("-U", "-D")) \
                or policy_problem(options)
            if problem:
                raise self.error(f"{rule.path}.table-options", problem + " (options: sink table-default.* and "
                                                                         "table.properties, then this rule's "
                                                                         "table-options)")


def transform_context(config: PipelineConfig):
    """The transform context a pipeline's rules are compiled with."""
    return TransformContext(local_time_zone=config.local_time_zone, metadata_list=config.source.metadata_list,
                            source_file=config.path, metadata_columns=config.metadata_columns,
                            udfs=udf_functions(config.udfs), decimal_precision=config.decimal_precision)
