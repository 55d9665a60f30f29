"""Dagster assets for one pipeline: a multi-asset whose outputs are the pipeline's Paimon tables (keyed
``paimon/<db>/<table>``), depending on external ``mysql/<db>/<table>`` assets, so lineage reads mysql → paimon.

One materialisation is one micro-batch; each Paimon table that got a new snapshot is reported with its snapshot
id, binlog offset, change counts, row count and column schema. A commit that a crashed run made but Dagster never
recorded is reported by the next run, so the UI never misses a snapshot.
"""

import re

import dagster as dg

from lakecdc.config import PipelineConfig
from lakecdc.errors import LakeCdcError, PipelineConfigError, SourceError, TableLockedError
from lakecdc.model import TableId
from lakecdc.runtime import TableResult, run_micro_batch
from lakecdc.runtime.checkpoint import (BINLOG_FILE, BINLOG_GTID, BINLOG_POS, DELETED, INSERTED, PHASE, UPDATED,
                                        offset_from_properties)
from lakecdc.selectors import TableSelector
from lakecdc.transform.routes import Router

SNAPSHOT_ID_KEY = "lakecdc/paimon_snapshot_id"
_LITERAL_PART = re.compile(r"^[A-Za-z0-9_$]+$")


def paimon_key(table: TableId) -> dg.AssetKey:
    return dg.AssetKey(["paimon", table.database, table.table])


def mysql_key(table: TableId) -> dg.AssetKey:
    return dg.AssetKey(["mysql", table.database, table.table])


def table_of(key: dg.AssetKey) -> TableId:
    return TableId(key.path[1], key.path[2])


def _literal_tables(selector: str) -> list[TableId] | None:
    """The tables a selector names when it is a plain list of ``db.table`` (no regex), else None."""
    tables = []
    for pattern in (p.strip() for p in re.split(r"(?<!\\),", selector)):
        parts = pattern.split(".")
        if len(parts) != 2 or not all(_LITERAL_PART.match(p) for p in parts):
            return None
        tables.append(TableId(parts[0], parts[1]))
    return tables


def discover_tables(config: PipelineConfig) -> list[TableId]:
    """The captured source tables, known at definition time without a database when ``tables`` lists plain names;
    regex selectors are resolved against the live server."""
    literal = _literal_tables(config.source.tables)
    if literal is not None:
        if config.source.tables_exclude:
            exclude = TableSelector(config.source.tables_exclude)
            literal = [t for t in literal if not exclude.matches(t)]
        return sorted(set(literal))
    from lakecdc.runtime.plan import captured_tables, source_options
    from lakecdc.source import MySqlSource

    try:
        return captured_tables(config, MySqlSource(source_options(config)).list_tables())
    except SourceError as exc:
        raise PipelineConfigError(
            f"'tables' uses patterns, so the table list is read from MySQL when the definitions load, and that "
            f"failed: {exc}. Start the server or list the tables by name", file=config.path,
            path="source.tables") from None


def table_lineage(config: PipelineConfig) -> dict[TableId, list[TableId]]:
    """Target Paimon table → the source tables that feed it."""
    router = Router(config.routes, mode=config.route_mode, file=config.path)
    lineage: dict[TableId, list[TableId]] = {}
    for source in discover_tables(config):
        for target in router.targets(source):
            lineage.setdefault(target, []).append(source)
    return lineage


def _type_name(arrow_type) -> str:
    """The Paimon/Flink SQL spelling of a column type (what users see in SHOW CREATE TABLE)."""
    import pyarrow as pa

    from lakecdc.transform.types import flink_name

    name = flink_name(arrow_type)
    if pa.types.is_timestamp(arrow_type) or pa.types.is_time(arrow_type):
        precision = {"s": 0, "ms": 3, "us": 6, "ns": 9}[arrow_type.unit]
        name = f"{name}({precision})"
    return name


def _column_schema(result: TableResult) -> dg.TableSchema:
    columns = []
    for field in result.schema:
        constraints = dg.TableColumnConstraints(nullable=field.nullable,
                                                unique=field.name in result.primary_keys and
                                                len(result.primary_keys) == 1)
        description = []
        if field.name in result.primary_keys:
            description.append("primary key")
        if field.name in result.partition_keys:
            description.append("partition key")
        columns.append(dg.TableColumn(field.name, _type_name(field.type), description=", ".join(description) or None,
                                      constraints=constraints))
    return dg.TableSchema(columns=columns)


def _materialization(result: TableResult) -> dg.MaterializeResult:
    offset = result.offset
    metadata = {
        SNAPSHOT_ID_KEY: dg.MetadataValue.int(result.snapshot_id),
        "lakecdc/phase": result.phase,
        "lakecdc/binlog_offset": str(offset),
        "lakecdc/binlog_file": offset.file,
        "lakecdc/binlog_pos": dg.MetadataValue.int(offset.pos),
        "lakecdc/gtid": offset.gtid or "",
        "lakecdc/inserted": dg.MetadataValue.int(result.counts.inserted),
        "lakecdc/updated": dg.MetadataValue.int(result.counts.updated),
        "lakecdc/deleted": dg.MetadataValue.int(result.counts.deleted),
        "lakecdc/rows_written": dg.MetadataValue.int(result.rows_written),
        "lakecdc/source_tables": ", ".join(map(str, result.sources)),
        "lakecdc/primary_keys": ", ".join(result.primary_keys),
        "lakecdc/partition_keys": ", ".join(result.partition_keys),
        "dagster/table_name": str(result.target),
        "dagster/column_schema": _column_schema(result),
    }
    if result.row_count is not None:
        metadata["dagster/row_count"] = dg.MetadataValue.int(result.row_count)
    return dg.MaterializeResult(asset_key=paimon_key(result.target), metadata=metadata,
                                data_version=dg.DataVersion(f"snapshot-{result.snapshot_id}"))


def _unrecorded_commit(context: dg.AssetExecutionContext, config: PipelineConfig, target: TableId):
    """A snapshot that an earlier, crashed run committed without Dagster recording it, as a materialisation."""
    from lakecdc.sink import PaimonSink

    sink = PaimonSink(config.sink.catalog_options, config.sink.table_properties, config.sink.commit_user_prefix)
    if not sink.table_exists(target):
        return None
    properties = sink.checkpoint(target)
    offset = offset_from_properties(properties)
    snapshot_id = sink.latest_snapshot_id(target)
    if offset is None or snapshot_id is None:
        return None
    event = context.instance.get_latest_materialization_event(paimon_key(target))
    recorded = None
    if event is not None and event.asset_materialization is not None:
        entry = event.asset_materialization.metadata.get(SNAPSHOT_ID_KEY)
        recorded = entry.value if entry is not None else None
    if recorded is not None and recorded >= snapshot_id:
        return None
    return dg.MaterializeResult(
        asset_key=paimon_key(target),
        metadata={
            SNAPSHOT_ID_KEY: dg.MetadataValue.int(snapshot_id),
            "lakecdc/phase": properties.get(PHASE, ""),
            "lakecdc/binlog_offset": str(offset),
            "lakecdc/binlog_file": properties[BINLOG_FILE],
            "lakecdc/binlog_pos": dg.MetadataValue.int(int(properties[BINLOG_POS])),
            "lakecdc/gtid": properties.get(BINLOG_GTID, ""),
            "lakecdc/inserted": dg.MetadataValue.int(int(properties.get(INSERTED, 0))),
            "lakecdc/updated": dg.MetadataValue.int(int(properties.get(UPDATED, 0))),
            "lakecdc/deleted": dg.MetadataValue.int(int(properties.get(DELETED, 0))),
            "lakecdc/recovered": dg.MetadataValue.text(
                "committed by an earlier run that stopped before Dagster recorded it"),
            "dagster/table_name": str(target),
            "dagster/row_count": dg.MetadataValue.int(sink.row_count(target)),
        },
        data_version=dg.DataVersion(f"snapshot-{snapshot_id}"))


def build_pipeline_assets(config: PipelineConfig) -> tuple[dg.AssetsDefinition, list[dg.AssetSpec]]:
    lineage = table_lineage(config)
    sources = sorted({s for feeds in lineage.values() for s in feeds})
    source_specs = [
        dg.AssetSpec(mysql_key(s), group_name="mysql", kinds={"mysql"},
                     description=f"MySQL table {s} on {config.source.hostname}:{config.source.port}")
        for s in sources
    ]
    specs = [
        dg.AssetSpec(
            paimon_key(target), deps=[mysql_key(s) for s in feeds], group_name=config.slug, kinds={"paimon"},
            skippable=True,
            description=f"Paimon table {target}, fed by {', '.join(map(str, feeds))} (pipeline {config.name!r})",
            metadata={"dagster/table_name": str(target), "lakecdc/pipeline": config.name,
                      "lakecdc/pipeline_file": config.path or ""},
            tags={"lakecdc/pipeline": config.slug})
        for target, feeds in sorted(lineage.items())
    ]

    @dg.multi_asset(name=config.slug, specs=specs, can_subset=True,
                    description=f"One micro-batch of the lakecdc pipeline {config.name!r}",
                    op_tags={"lakecdc/pipeline": config.slug})
    def _pipeline_asset(context: dg.AssetExecutionContext):
        targets = {table_of(key) for key in context.selected_asset_keys}
        try:
            result = run_micro_batch(config, targets=targets, run_id=context.run.run_id, log=context.log)
        except (PipelineConfigError, TableLockedError) as exc:
            raise dg.Failure(str(exc), allow_retries=False) from None
        except LakeCdcError as exc:
            raise dg.Failure(str(exc)) from None
        for target in sorted(targets):
            table = result.tables.get(target)
            if table is not None and table.committed:
                yield _materialization(table)
                continue
            late = _unrecorded_commit(context, config, target)
            if late is not None:
                yield late
            else:
                context.log.info(f"{target}: no new changes")

    return _pipeline_asset, source_specs
