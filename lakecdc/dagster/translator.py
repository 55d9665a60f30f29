"""The translator: the single override point for how a pipeline's tables appear in Dagster (asset keys, key
prefixes, group names, descriptions, tags, metadata), in the manner of ``DagsterSlingTranslator`` and
``DagsterDltTranslator``.

Every lakecdc Dagster object (assets, checks, jobs, sensors, the re-snapshot partitions) takes a table's key from
``translator.get_asset_spec(props).key``, so overriding ``get_asset_key`` (or ``get_asset_spec`` itself) renames a
table everywhere::

    class MyTranslator(DagsterLakeCdcTranslator):
        def get_asset_key(self, props):
            return dg.AssetKey(["lake", props.table.database, props.table.table])

    defs = build_definitions("pipelines", translator=MyTranslator())

Two MySQL servers with the same ``db.table`` (e.g. one pipeline per shard) need different keys:
``DagsterLakeCdcTranslator(key_prefix=["shard1"])`` keys them ``shard1/mysql/db/table`` and
``shard1/paimon/db/table``. The ``dg`` Component exposes ``key_prefix`` and ``group_name``.
"""

import dataclasses
import re
from datetime import timedelta
from typing import Optional, Sequence, Union

import dagster as dg

from lakecdc.config import PipelineConfig
from lakecdc.model import SourceTable, TableId
from lakecdc.transform.rules import select_rule

__all__ = ["DagsterLakeCdcTranslator", "PaimonTableProps", "MySqlTableProps", "AssetKeys", "code", "prose"]

# Tags on the pipeline's assets, ops, jobs and runs: which pipeline (its slug) and which Paimon table they belong to
PIPELINE_TAG = "lakecdc/pipeline"
TABLE_TAG = "lakecdc/table"
# why the binlog sensor started a run (``changes``, ``changes and checkpoint refresh``, ``checkpoint refresh only``)
# and which of its tables only get their checkpoint moved
RUN_REASON_TAG = "lakecdc/run_reason"
CHECKPOINT_REFRESH_TAG = "lakecdc/checkpoint_refresh"

# Markdown that the Dagster UI would interpret in plain text (``__namespace_name__`` turns bold).
_MARKDOWN = re.compile(r"([\\`*_{}\[\]<>()#+!|~])")


def code(text: object) -> str:
    """An identifier as Markdown inline code, so the UI shows it literally (``__table_name__`` is not bold)."""
    text = str(text)
    fence = "``" if "`" in text else "`"
    return f"{fence}{text}{fence}"


def prose(text: str) -> str:
    """Free text (a MySQL comment) with Markdown's special characters escaped."""
    return _MARKDOWN.sub(r"\\\1", text)


@dataclasses.dataclass(frozen=True)
class PaimonTableProps:
    """One Paimon table of a pipeline as the translator sees it. ``columns``: its Paimon column types as the
    pipeline would create them (``lakecdc describe``'s spelling), known when MySQL answered while the definitions
    loaded, else None."""

    pipeline: PipelineConfig
    table: TableId
    sources: tuple[TableId, ...]
    columns: Optional[dg.TableSchema] = None
    schema_unavailable: str = ""  # why ``columns`` is None


@dataclasses.dataclass(frozen=True)
class MySqlTableProps:
    """One MySQL source table of a pipeline. ``hostname``/``port`` are the server the pipeline reads (its YAML
    with the resources' overrides); ``schema`` is the table as MySQL described it while the definitions loaded
    (None when MySQL did not answer; ``schema_unavailable`` says why)."""

    pipeline: PipelineConfig
    table: TableId
    hostname: str
    port: int
    schema: Optional[SourceTable] = None
    schema_unavailable: str = ""


Props = Union[PaimonTableProps, MySqlTableProps]


class DagsterLakeCdcTranslator:
    """Turns lakecdc's tables into Dagster ``AssetSpec``s. Override ``get_asset_spec`` or one of the ``get_*``
    methods it calls; ``key_prefix`` goes before every key, ``group_name`` replaces the Paimon assets' group (default:
    the pipeline's slug) and ``source_group_name`` the MySQL assets' (default ``mysql``)."""

    def __init__(self, *, key_prefix: Union[str, Sequence[str]] = (), group_name: Optional[str] = None,
                 source_group_name: Optional[str] = None):
        self.key_prefix = [key_prefix] if isinstance(key_prefix, str) else list(key_prefix)
        self.group_name = group_name
        self.source_group_name = source_group_name

    def get_asset_spec(self, props: Props) -> dg.AssetSpec:
        is_paimon = isinstance(props, PaimonTableProps)
        return dg.AssetSpec(
            self.get_asset_key(props), group_name=self.get_group_name(props),
            description=self.get_description(props), metadata=self.get_metadata(props), tags=self.get_tags(props),
            kinds=self.get_kinds(props), owners=self.get_owners(props),
            freshness_policy=self.get_freshness_policy(props), skippable=is_paimon)

    def get_kinds(self, props: Props) -> set[str]:
        """The kind badges: ``paimon`` for a Paimon table, ``mysql`` for a MySQL table."""
        return {"paimon"} if isinstance(props, PaimonTableProps) else {"mysql"}

    def get_owners(self, props: Props) -> list[str]:
        """The Paimon assets' owners: ``pipeline.lakecdc.owners`` (the MySQL tables are not the pipeline's)."""
        return list(props.pipeline.automation.owners) if isinstance(props, PaimonTableProps) else []

    def get_freshness_policy(self, props: Props) -> Optional[dg.FreshnessPolicy]:
        """``pipeline.lakecdc.freshness.fail-window`` on the Paimon assets (see :func:`freshness_policy`)."""
        return freshness_policy(props.pipeline) if isinstance(props, PaimonTableProps) else None

    def get_asset_key(self, props: Props) -> dg.AssetKey:
        kind = "paimon" if isinstance(props, PaimonTableProps) else "mysql"
        return dg.AssetKey([*self.key_prefix, kind, props.table.database, props.table.table])

    def get_group_name(self, props: Props) -> str:
        if isinstance(props, PaimonTableProps):
            return self.group_name or props.pipeline.slug
        return self.source_group_name or "mysql"

    def get_description(self, props: Props) -> str:
        if isinstance(props, PaimonTableProps):
            feeds = ", ".join(code(s) for s in props.sources)
            text = (f"Paimon table {code(props.table)} in {code(warehouse(props.pipeline))}, fed by {feeds} "
                    f"(pipeline {code(props.pipeline.name)}). `dagster/row_count` counts every row of the merged "
                    "table.")
            if soft_deletes(props.pipeline, props.sources):
                text += (" Its transform is SOFT_DELETE: a MySQL delete marks the row deleted, so `dagster/row_count` "
                         "includes the rows marked deleted (the reconcile job's `row_count_matches_source` check "
                         "counts the others).")
        else:
            text = f"MySQL table {code(props.table)} on {code(f'{props.hostname}:{props.port}')}"
            if props.schema is not None and props.schema.comment:
                text += f": {prose(props.schema.comment)}"
        if props.schema_unavailable:
            text += f"\n\nColumns not shown: {prose(props.schema_unavailable)}"
        return text

    def get_tags(self, props: Props) -> dict[str, str]:
        return {PIPELINE_TAG: props.pipeline.slug} if isinstance(props, PaimonTableProps) else {}

    def get_metadata(self, props: Props) -> dict:
        metadata: dict[str, object]
        if isinstance(props, PaimonTableProps):
            metadata = {"dagster/table_name": paimon_table_name(warehouse(props.pipeline), props.table),
                        "lakecdc/pipeline": props.pipeline.name, "lakecdc/pipeline_file": props.pipeline.path or "",
                        "lakecdc/warehouse": warehouse(props.pipeline)}
            if props.columns is not None:
                metadata["dagster/column_schema"] = props.columns
            return metadata
        metadata = {"dagster/table_name": mysql_table_name(props.hostname, props.port, props.table)}
        if props.schema is not None:
            metadata["dagster/column_schema"] = mysql_column_schema(props.schema)
        return metadata


# ``auto`` freshness: a table whose source changes is materialised within a sensor interval plus its run; the
# windows leave room for slow runs and a busy daemon
AUTO_WARN_INTERVALS, AUTO_FAIL_INTERVALS, AUTO_MIN_FAIL_SECONDS = 2, 5, 300.0


def freshness_policy(config: PipelineConfig) -> Optional[dg.FreshnessPolicy]:
    """The time-window freshness policy ``pipeline.lakecdc.freshness.fail-window`` asks for: a duration, or
    ``auto``: warn after 2 sensor intervals, fail after 5 (at least 5 minutes). None when not set."""
    setting = config.automation.freshness
    if setting is None:
        return None
    if setting == "auto":
        interval = config.sensor_interval_seconds
        fail = max(AUTO_FAIL_INTERVALS * interval, AUTO_MIN_FAIL_SECONDS)
        warn = max(AUTO_WARN_INTERVALS * interval, 60.0)
        return dg.FreshnessPolicy.time_window(fail_window=timedelta(seconds=fail), warn_window=timedelta(seconds=warn))
    return dg.FreshnessPolicy.time_window(fail_window=timedelta(seconds=float(setting)))


def soft_deletes(config: PipelineConfig, sources: Sequence[TableId]) -> bool:
    """Whether the rule of one of ``sources`` has ``converter-after-transform: SOFT_DELETE`` (deletes mark rows)."""
    rules = (select_rule(config.transforms, source) for source in sources)
    return any(rule is not None and rule.soft_delete for rule in rules)


def warehouse(config: PipelineConfig) -> str:
    return config.sink.catalog_options.get("warehouse", "")


def paimon_table_name(warehouse_path: str, table: TableId) -> str:
    """Where the Paimon table lives: ``paimon:<warehouse>/<db>.<table>`` (distinct from its MySQL source's)."""
    return f"paimon:{warehouse_path.rstrip('/')}/{table}"


def mysql_table_name(hostname: str, port: int, table: TableId) -> str:
    """Where the MySQL table lives: ``mysql://<host>:<port>/<db>.<table>``."""
    return f"mysql://{hostname}:{port}/{table}"


def mysql_column_schema(schema: SourceTable) -> dg.TableSchema:
    """A MySQL table's columns with their MySQL types (``varchar(100)``), keys and comments."""
    keys = list(schema.primary_keys)
    columns = []
    for column in schema.columns:
        notes = ["primary key"] if column.name in keys else []
        if column.comment:
            notes.append(prose(column.comment))
        columns.append(dg.TableColumn(
            column.name, column.column_type, description=", ".join(notes) or None,
            constraints=dg.TableColumnConstraints(nullable=column.nullable,
                                                  unique=column.name in keys and len(keys) == 1)))
    return dg.TableSchema(columns=columns)


@dataclasses.dataclass(frozen=True)
class AssetKeys:
    """The asset keys of one pipeline's tables, as its translator named them."""

    paimon: dict[TableId, dg.AssetKey]
    mysql: dict[TableId, dg.AssetKey]

    @classmethod
    def default(cls, targets: Sequence[TableId] = (), sources: Sequence[TableId] = ()) -> "AssetKeys":
        """Keys of the default translator (``paimon/<db>/<table>``, ``mysql/<db>/<table>``)."""
        return cls({t: dg.AssetKey(["paimon", t.database, t.table]) for t in targets},
                   {s: dg.AssetKey(["mysql", s.database, s.table]) for s in sources})

    def table_of(self, key: dg.AssetKey) -> Optional[TableId]:
        """The Paimon table an asset key names, None when it is not one of this pipeline's Paimon assets."""
        for table, table_key in self.paimon.items():
            if table_key == key:
                return table
        return None
