"""Materialisation metadata of a Paimon table asset: one commit's snapshot id, binlog offset, change counts, row
count, column schema, column lineage (from the transform expressions) and the Paimon partitions it changed.

Well-known Dagster keys (``dagster/row_count``, ``dagster/column_schema``, ``dagster/column_lineage``,
``dagster/table_name``, ``dagster/uri``) are rendered specially by the UI; lakecdc's own keys are ``lakecdc/*``.
"""

import dagster as dg

from lakecdc.model import TableId

SNAPSHOT_ID_KEY = "lakecdc/paimon_snapshot_id"
PARTITIONS_KEY = "lakecdc/partitions_changed"
# A commit touching more partitions than this lists the largest ones only (the metadata stays readable).
MAX_PARTITIONS_LISTED = 100


def paimon_key(table: TableId) -> dg.AssetKey:
    return dg.AssetKey(["paimon", table.database, table.table])


def mysql_key(table: TableId) -> dg.AssetKey:
    return dg.AssetKey(["mysql", table.database, table.table])


def table_of(key: dg.AssetKey) -> TableId:
    return TableId(key.path[1], key.path[2])


def type_name(arrow_type) -> str:
    """The Paimon/Flink SQL spelling of a column type (what users see in SHOW CREATE TABLE)."""
    import pyarrow as pa

    from lakecdc.transform.types import flink_name

    name = flink_name(arrow_type)
    if pa.types.is_timestamp(arrow_type) or pa.types.is_time(arrow_type):
        precision = {"s": 0, "ms": 3, "us": 6, "ns": 9}[arrow_type.unit]
        name = f"{name}({precision})"
    return name


def column_schema(schema, primary_keys: list[str], partition_keys: list[str],
                  lineage: dict[str, list[str]] | None = None) -> dg.TableSchema:
    columns = []
    for field in schema:
        constraints = dg.TableColumnConstraints(nullable=field.nullable,
                                                unique=field.name in primary_keys and len(primary_keys) == 1)
        description = []
        if field.name in primary_keys:
            description.append("primary key")
        if field.name in partition_keys:
            description.append("partition key")
        if lineage and lineage.get(field.name):
            description.append("from " + ", ".join(lineage[field.name]))
        columns.append(dg.TableColumn(field.name, type_name(field.type), description=", ".join(description) or None,
                                      constraints=constraints))
    return dg.TableSchema(columns=columns)


def column_lineage(plan) -> dg.TableColumnLineage:
    """Each target column → the MySQL columns its transform expression reads, for every source table routed into
    it. Columns computed only from metadata (``__table_name__``, ``op_ts``) or literals have no MySQL column."""
    deps: dict[str, list[dg.TableColumnDep]] = {}
    for source_plan in plan.sources:
        source_columns = set(source_plan.source.column_names)
        key = mysql_key(source_plan.source.table_id)
        for column, names in source_plan.transform.column_sources().items():
            for name in names:
                if name in source_columns:
                    deps.setdefault(column, []).append(dg.TableColumnDep(asset_key=key, column_name=name))
    return dg.TableColumnLineage(deps_by_column=deps)


def column_origins(plan) -> dict[str, list[str]]:
    """Target column → readable origins (``db.table.column`` or a metadata column name), for the schema view."""
    origins: dict[str, list[str]] = {}
    for source_plan in plan.sources:
        source_columns = set(source_plan.source.column_names)
        for column, names in source_plan.transform.column_sources().items():
            for name in names:
                text = f"{source_plan.source.table_id}.{name}" if name in source_columns else name
                if text not in origins.setdefault(column, []):
                    origins[column].append(text)
    return origins


def partitions_table(partitions: dict[str, dict[str, int]], rows_now: dict[str, int] | None) -> dg.MetadataValue:
    """The Paimon partitions one commit changed, with the rows of each change kind and the partition's rows after
    the commit."""
    ordered = sorted(partitions.items(), key=lambda item: (-sum(item[1].values()), item[0]))[:MAX_PARTITIONS_LISTED]
    records = []
    for name, counts in ordered:
        record = {"partition": name, "inserted": counts.get("inserted", 0), "updated": counts.get("updated", 0),
                  "deleted": counts.get("deleted", 0), "rows_written": sum(counts.values())}
        if rows_now is not None:
            record["rows_now"] = rows_now.get(name, 0)
        records.append(dg.TableRecord(record))
    columns = [dg.TableColumn("partition", "string"), dg.TableColumn("inserted", "int"),
               dg.TableColumn("updated", "int"), dg.TableColumn("deleted", "int"),
               dg.TableColumn("rows_written", "int")]
    if rows_now is not None:
        columns.append(dg.TableColumn("rows_now", "int"))
    return dg.MetadataValue.table(records, schema=dg.TableSchema(columns=columns))


def partition_rows(catalog_options: dict[str, str], target: TableId, partition_keys: list[str],
                   partitions: list[str]) -> dict[str, int] | None:
    """Rows per partition after the commit, for the given partitions, read by the independent reader (None when
    the read fails: the metadata then shows the changes only)."""
    from lakecdc.runtime.report import partition_name
    from lakecdc.sink.sql import run_sql

    if not partition_keys or not partitions or len(partitions) > MAX_PARTITIONS_LISTED:
        return None
    ident = lambda name: '"' + name.replace('"', '""') + '"'  # noqa: E731
    columns = ", ".join(f"CAST({ident(k)} AS VARCHAR) AS p{i}" for i, k in enumerate(partition_keys))
    groups = ", ".join(f"p{i}" for i in range(len(partition_keys)))
    query = (f"SELECT {columns}, COUNT(*) AS n FROM {ident(target.database)}.{ident(target.table)} "
             f"GROUP BY {groups}")
    try:
        table = run_sql(catalog_options, query)
    except Exception:  # noqa: BLE001 - DataFusion errors; the counts are an extra
        return None
    wanted = set(partitions)
    counts = {}
    for row in table.to_pylist():
        name = partition_name(partition_keys, [row[f"p{i}"] for i in range(len(partition_keys))])
        if name in wanted:
            counts[name] = row["n"]
    return counts


def materialization(result, plan=None, catalog_options: dict[str, str] | None = None) -> dg.MaterializeResult:
    """One commit of a micro-batch (a ``lakecdc.runtime.TableResult``) as a materialisation."""
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
    }
    origins = column_origins(plan) if plan is not None else None
    metadata["dagster/column_schema"] = column_schema(result.schema, result.primary_keys, result.partition_keys,
                                                      origins)
    if plan is not None:
        metadata["dagster/column_lineage"] = column_lineage(plan)
    if result.row_count is not None:
        metadata["dagster/row_count"] = dg.MetadataValue.int(result.row_count)
    upkeep = getattr(result, "upkeep", None)
    if upkeep is not None:  # table upkeep after the commit (lakecdc.sink.maintenance)
        metadata["lakecdc/upkeep"] = dg.MetadataValue.text(upkeep.summary())
    partitions = getattr(result, "partitions", None)
    if result.partition_keys:
        rows_now = partition_rows(catalog_options, result.target, result.partition_keys, list(partitions or {})) \
            if catalog_options and partitions else None
        metadata[PARTITIONS_KEY] = partitions_table(partitions or {}, rows_now)
        metadata["lakecdc/partitions_changed_count"] = dg.MetadataValue.int(len(partitions or {}))
    return dg.MaterializeResult(asset_key=paimon_key(result.target), metadata=metadata,
                                data_version=dg.DataVersion(f"snapshot-{result.snapshot_id}"))


def recorded_snapshot_id(instance, key: dg.AssetKey) -> int | None:
    event = instance.get_latest_materialization_event(key)
    if event is None or event.asset_materialization is None:
        return None
    entry = event.asset_materialization.metadata.get(SNAPSHOT_ID_KEY)
    return entry.value if entry is not None else None


def unrecorded_commit(instance, catalog_options: dict[str, str], target: TableId) -> dg.MaterializeResult | None:
    """A snapshot that an earlier, crashed run committed without Dagster recording it, as a materialisation."""
    from lakecdc.runtime.checkpoint import (BINLOG_FILE, BINLOG_GTID, BINLOG_POS, DELETED, INSERTED, PHASE,
                                            UPDATED, offset_from_properties)
    from lakecdc.sink import PaimonSink
    from lakecdc.sink.maintenance import latest_change_snapshot_id

    sink = PaimonSink(catalog_options)
    if not sink.table_exists(target):
        return None
    properties = sink.checkpoint(target)
    offset = offset_from_properties(properties)
    snapshot_id = latest_change_snapshot_id(sink, target)  # upkeep snapshots (compaction, ...) are no commit
    if offset is None or snapshot_id is None:
        return None
    recorded = recorded_snapshot_id(instance, paimon_key(target))
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
