"""Materialisation metadata of a Paimon table asset: one commit's snapshot id, binlog offset, change counts, row
count, column schema, column lineage (from the transform expressions) and the Paimon partitions it changed.

Well-known Dagster keys (``dagster/row_count``, ``dagster/column_schema``, ``dagster/column_lineage``,
``dagster/table_name``, ``dagster/uri``) are rendered specially by the UI; lakecdc's own keys are ``lakecdc/*``.
"""

import re

import dagster as dg

from lakecdc.dagster.translator import code, mysql_column_schema, paimon_table_name
from lakecdc.model import BinlogOffset, TableCounts, TableId
from lakecdc.runtime.checkpoint import (PHASE, PHASE_BINLOG, PHASE_RESNAPSHOT, RUN_ID, counts_from_properties,
                                        offset_from_properties)
from lakecdc.runtime.connect import open_warehouse
from lakecdc.runtime.report import partition_name, quiet_text
from lakecdc.sink.sql import run_sql
from lakecdc.sink.upkeep import latest_change_snapshot_id
from lakecdc.source.rows_decoder import fallback_summary
from lakecdc.transform.types import type_name

SNAPSHOT_ID_KEY = "lakecdc/paimon_snapshot_id"
# The run-event tag Dagster stores a materialisation's data version under (what MaterializeResult.data_version
# sets; an op logging an AssetMaterialization must set it itself).
DATA_VERSION_TAG = "dagster/data_version"
PARTITIONS_KEY = "lakecdc/partitions_changed"
# A commit touching more partitions than this lists the largest ones only (the metadata stays readable).
MAX_PARTITIONS_LISTED = 100


def paimon_key(table: TableId) -> dg.AssetKey:
    """The default translator's key of a Paimon table (``paimon/<db>/<table>``)."""
    return dg.AssetKey(["paimon", table.database, table.table])


def mysql_key(table: TableId) -> dg.AssetKey:
    """The default translator's key of a MySQL table (``mysql/<db>/<table>``)."""
    return dg.AssetKey(["mysql", table.database, table.table])


def stored_table(catalog_options: dict[str, str] | None, target: TableId):
    """The table as stored now (its ``TableDescription``) and column → Paimon type (``lakecdc describe``'s spelling,
    without NOT NULL); (None, {}) when the table cannot be read (the schema then falls back to the run's)."""
    if not catalog_options:
        return None, {}
    try:
        sink = open_warehouse(catalog_options)
        description, types = sink.describe(target), sink.paimon_types(target)
    except Exception:  # noqa: BLE001 - the column schema is an extra; the commit is already done
        return None, {}
    return description, {name: without_not_null(text) for name, text in types.items()}


def without_not_null(paimon_type: str) -> str:
    """``VARCHAR(100) NOT NULL`` → ``VARCHAR(100)`` (the column schema shows nullability as a constraint)."""
    return re.sub(r"\s+NOT NULL$", "", paimon_type)


def column_schema(schema, primary_keys: list[str], partition_keys: list[str],
                  lineage: dict[str, list[str]] | None = None, types: dict[str, str] | None = None
                  ) -> dg.TableSchema:
    """The Paimon columns with their Paimon types (``types``: as stored, else each field's own), keys and origins.
    Identifiers are Markdown code, so ``__namespace_name__`` shows as written."""
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
            description.append("from " + ", ".join(code(origin) for origin in lineage[field.name]))
        columns.append(dg.TableColumn(field.name, (types or {}).get(field.name) or type_name(field),
                                      description=", ".join(description) or None, constraints=constraints))
    return dg.TableSchema(columns=columns)


def column_lineage(plan, source_keys: dict[TableId, dg.AssetKey] | None = None,
                   columns: set[str] | None = None) -> dg.TableColumnLineage:
    """Each target column → the MySQL columns its transform expression reads, for every source table routed into
    it (``source_keys``: the MySQL assets' keys, default the default translator's; ``columns``: only these target
    columns, those the table has). Columns computed only from metadata (``__table_name__``, ``op_ts``) or literals
    have no MySQL column."""
    deps: dict[str, list[dg.TableColumnDep]] = {}
    for source_plan in plan.sources:
        source_columns = set(source_plan.source.column_names)
        key = (source_keys or {}).get(source_plan.source.table_id) or mysql_key(source_plan.source.table_id)
        for column, names in source_plan.transform.column_sources().items():
            if columns is not None and column not in columns:
                continue
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


# Rows of one commit per Paimon row kind (lakecdc.runtime.report.count_partitions names them). These are rows
# written, not MySQL changes: a SOFT_DELETE table writes a MySQL delete as an insert (+I) of the marked row.
ROW_KINDS = (("inserted", "+I"), ("update_before", "-U"), ("updated", "+U"), ("deleted", "-D"))


def partitions_table(partitions: dict[str, dict[str, int]], rows_now: dict[str, int] | None) -> dg.MetadataValue:
    """The Paimon partitions one commit changed: the rows written to each per Paimon row kind (+I, -U, +U, -D)
    and, when it could be read, the partition's rows after the commit."""
    ordered = sorted(partitions.items(), key=lambda item: (-sum(item[1].values()), item[0]))[:MAX_PARTITIONS_LISTED]
    records = []
    for name, counts in ordered:
        record: dict[str, str | int] = {"partition": name}
        record.update({kind: counts.get(counted, 0) for counted, kind in ROW_KINDS})
        record["rows_written"] = sum(counts.values())
        if rows_now is not None:
            record["rows_now"] = rows_now.get(name, 0)
        records.append(dg.TableRecord(record))
    columns = [dg.TableColumn("partition", "string", description="Paimon partition")]
    columns += [dg.TableColumn(kind, "int", description=f"rows written with Paimon row kind {kind}")
                for _, kind in ROW_KINDS]
    columns.append(dg.TableColumn("rows_written", "int", description="rows written to the partition"))
    if rows_now is not None:
        columns.append(dg.TableColumn("rows_now", "int", description="rows of the partition after the commit"))
    return dg.MetadataValue.table(records, schema=dg.TableSchema(columns=columns))


def partition_rows(catalog_options: dict[str, str], target: TableId, partition_keys: list[str],
                   partitions: list[str]) -> dict[str, int] | None:
    """Rows per partition after the commit, for the given partitions, read by the independent reader (None when
    the read fails: the metadata then shows the changes only)."""
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


def materialization(result, plan=None, catalog_options: dict[str, str] | None = None, *,
                    key: dg.AssetKey | None = None, source_keys: dict[TableId, dg.AssetKey] | None = None,
                    ) -> dg.MaterializeResult:
    """One commit of a micro-batch or re-snapshot (a ``lakecdc.runtime.TableResult`` or a result with the same
    fields) as the materialisation of ``key`` (default: the default translator's key of the table). Nothing here
    reads the whole table: a routine run's metadata costs what it changed (the rows a SOFT_DELETE table holds
    unmarked are the reconcile job's ``paimon_active_rows``)."""
    metadata = {
        **_commit_metadata(result.snapshot_id, result.phase, result.offset, result.counts),
        "lakecdc/rows_written": dg.MetadataValue.int(result.rows_written),
        "lakecdc/source_tables": ", ".join(map(str, result.sources)),
        "lakecdc/primary_keys": ", ".join(result.primary_keys),
        "lakecdc/partition_keys": ", ".join(result.partition_keys),
    }
    if catalog_options:
        metadata["dagster/table_name"] = paimon_table_name(catalog_options.get("warehouse", ""), result.target)
    commits = getattr(result, "commits", 0)
    if commits > 1:  # a chunked snapshot commits in groups: the others are earlier snapshots of this run
        metadata["lakecdc/commits"] = dg.MetadataValue.int(commits)
    if result.phase == PHASE_RESNAPSHOT:
        metadata["lakecdc/resnapshot_partition"] = getattr(result, "partition", None) or "(whole table)"
        snapshot_offset = getattr(result, "snapshot_offset", None)
        if snapshot_offset is not None:
            metadata["lakecdc/resnapshot_offset"] = str(snapshot_offset)
        metadata["lakecdc/stale_rows_deleted"] = dg.MetadataValue.int(getattr(result, "stale_deleted", 0))
        # rows re-read and rewritten that Paimon already held with the same values: not in inserted/updated
        metadata["lakecdc/unchanged"] = dg.MetadataValue.int(getattr(result, "unchanged", 0))
        schema_changes = getattr(result, "schema_changes", None)
        if schema_changes:  # what the re-snapshot changed in the Paimon schema to match MySQL
            metadata[SCHEMA_CHANGES_KEY] = "; ".join(schema_changes)
    if getattr(result, "ddl", None):  # the DDL statements the run met, each with what Paimon did
        metadata[SCHEMA_CHANGES_KEY] = ddl_table(result.ddl)
    # The columns as the table has them after the run's last commit (and its upkeep), not as the run found it: a
    # DDL the run applied (ADD COLUMN) shows in this materialisation, with its lineage. The lineage is restricted to
    # the stored columns, so the two never disagree. A micro-batch's result has them (TableResult.paimon_types);
    # others are read from the table.
    if getattr(result, "paimon_types", None):
        stored, types = None, {name: without_not_null(text) for name, text in result.paimon_types.items()}
    else:
        stored, types = stored_table(catalog_options, result.target)
    schema = stored.schema if stored is not None else result.schema
    keys = list(stored.primary_keys) if stored is not None else result.primary_keys
    partition_keys = list(stored.partition_keys) if stored is not None else result.partition_keys
    origins = column_origins(plan) if plan is not None else None
    metadata["dagster/column_schema"] = column_schema(schema, keys, partition_keys, origins, types)
    if plan is not None:
        metadata["dagster/column_lineage"] = column_lineage(plan, source_keys, set(schema.names))
    if result.row_count is not None:
        metadata["dagster/row_count"] = dg.MetadataValue.int(result.row_count)
    upkeep = getattr(result, "upkeep", None)
    if upkeep is not None:  # table upkeep after the commit (lakecdc.sink.upkeep)
        metadata["lakecdc/upkeep"] = dg.MetadataValue.text(upkeep.summary())
    fallbacks = getattr(result, "decoder_fallbacks", None) or {}
    if result.phase == PHASE_BINLOG or fallbacks:  # binlog rows events decoded in Python (lakecdc.source.rows_decoder)
        metadata["lakecdc/decoder_fallbacks"] = dg.MetadataValue.int(sum(fallbacks.values()))
        if fallbacks:
            metadata["lakecdc/decoder_fallback_causes"] = dg.MetadataValue.text(fallback_summary(fallbacks))
    partitions = dict(getattr(result, "partitions", None) or {})
    resnapshotted = getattr(result, "partition", None) if result.phase == PHASE_RESNAPSHOT else None
    if resnapshotted and resnapshotted not in partitions:  # re-read, nothing to write: still the one it covered
        partitions[resnapshotted] = {}
    if result.partition_keys:
        # the re-snapshotted partition's rows after the run (it was read whole anyway); a routine run's commit
        # lists what it wrote, not the partitions' sizes, which only a read of each partition would tell
        rows_now = partition_rows(catalog_options, result.target, result.partition_keys, [resnapshotted]) \
            if catalog_options and resnapshotted else None
        metadata[PARTITIONS_KEY] = partitions_table(partitions, rows_now)
        metadata["lakecdc/partitions_changed_count"] = dg.MetadataValue.int(len(partitions))
    return dg.MaterializeResult(asset_key=key or paimon_key(result.target), metadata=metadata,
                                data_version=dg.DataVersion(f"snapshot-{result.snapshot_id}"))


CHECKPOINT_ONLY_KEY = "lakecdc/checkpoint_only"
SCHEMA_CHANGES_KEY = "lakecdc/schema_changes"
NO_NEW_CHANGES_KEY = "lakecdc/no_new_changes"


def ddl_table(ddl: list) -> dg.MetadataValue:
    """The DDL statements a commit met (``lakecdc.runtime.schema_evolution.AppliedDdl``): source table, statement,
    binlog position (the end of the statement) and what Paimon did."""
    records = [dg.TableRecord({"source": str(d.source), "statement": d.statement[:1000],
                               "binlog_position": str(d.offset), "paimon": d.outcome()}) for d in ddl]
    columns = [dg.TableColumn("source", "string", description="the MySQL table the statement changed"),
               dg.TableColumn("statement", "string", description="the DDL statement as the binlog has it"),
               dg.TableColumn("binlog_position", "string", description="the end of the statement in the binlog"),
               dg.TableColumn("paimon", "string", description="what lakecdc did to the Paimon table")]
    return dg.MetadataValue.table(records, schema=dg.TableSchema(columns=columns))


def quiet_observation(result, head: BinlogOffset | None, key: dg.AssetKey) -> dg.AssetObservation:
    """A run that had nothing to commit to a table: an observation of its asset with the checkpoint it stays at
    (the asset page then shows the run looked, and where the table stands)."""
    metadata: dict = {NO_NEW_CHANGES_KEY: dg.MetadataValue.text(quiet_text(result, head))}
    if getattr(result, "checkpoint", None) is not None:
        metadata["lakecdc/binlog_offset"] = str(result.checkpoint)
    if head is not None:
        metadata["lakecdc/binlog_read_to"] = str(head)
    return dg.AssetObservation(asset_key=key, metadata=metadata)


def source_event(read, key: dg.AssetKey, recorded_version: str | None
                 ) -> dg.AssetMaterialization | dg.AssetObservation:
    """A read of a MySQL table (``lakecdc.runtime.report.SourceRead``) as an event of its external asset.

    A read that found the table changed (a change the run wrote, a DDL) or that is the first one recorded is a
    **materialisation** of the external asset (how Dagster records that an external asset was updated): the data
    version is the commit position of the table's last change lakecdc knows of, and its metadata has the columns
    at that position (after a DDL, the new ones, without a reload of the definitions). A read that found nothing
    new is an **observation** with the same data version (``recorded_version``: the asset's latest). Both say where
    the binlog was read up to."""
    metadata: dict = {"lakecdc/binlog_read_to": str(read.read_to),
                      "lakecdc/last_change": str(read.last_change) if read.last_change is not None else
                      "none in this read"}
    if read.last_change is None and not read.ddl and recorded_version is not None:
        return dg.AssetObservation(asset_key=key, metadata=metadata, tags={DATA_VERSION_TAG: recorded_version},
                                   description="read by lakecdc: no change since the last one recorded")
    if read.ddl:
        metadata[SCHEMA_CHANGES_KEY] = ddl_table(read.ddl)
    if read.schema is not None:
        metadata["dagster/column_schema"] = mysql_column_schema(read.schema)
    changed = [offset for offset in (read.last_change, *(d.offset for d in read.ddl)) if offset is not None]
    version = f"binlog-{max(changed) if changed else read.read_to}"  # a first read: its state at read_to
    return dg.AssetMaterialization(asset_key=key, metadata=metadata, tags={DATA_VERSION_TAG: version},
                                   description="changes of this MySQL table read by lakecdc from the binlog (or "
                                               "its first read)")


def recorded_data_version(instance, key: dg.AssetKey) -> str | None:
    """The data version of the asset's latest materialisation or observation (whichever is newer), if any."""
    latest = [record for fetch in (instance.fetch_materializations, instance.fetch_observations)
              for record in fetch(key, limit=1).records]
    for record in sorted(latest, key=lambda r: r.storage_id, reverse=True):
        event = record.event_log_entry.asset_materialization or record.event_log_entry.asset_observation
        if event is not None and event.tags and event.tags.get(DATA_VERSION_TAG):
            return event.tags[DATA_VERSION_TAG]
    return None


def moves_checkpoint_only(result, stored_schema=None) -> bool:
    """A binlog commit that changed nothing in the table: one commit, no change, no row written and (when
    ``stored_schema`` is given) the schema the run started with. It only moves the checkpoint (an idle table's
    refresh after a binlog rotation, so a purge never strands it)."""
    counts = result.counts
    if result.phase != PHASE_BINLOG or getattr(result, "commits", 1) != 1 or result.rows_written:
        return False
    if counts.inserted or counts.updated or counts.deleted:
        return False
    schema = getattr(result, "schema", None)
    return stored_schema is None or schema is None or schema.equals(stored_schema)


def commit_event(result, plan=None, catalog_options: dict[str, str] | None = None, *,
                 key: dg.AssetKey | None = None, source_keys: dict[TableId, dg.AssetKey] | None = None,
                 ) -> dg.MaterializeResult | dg.AssetObservation:
    """What a commit is in Dagster: a materialisation (see :func:`materialization`), or, for a commit that only
    moved the checkpoint, an observation, so the asset's latest materialisation keeps the table's last change (its
    counts, columns and partitions) instead of a row of zeros."""
    if hasattr(result, "schema_changes"):  # a micro-batch's result says itself whether its DDL changed the table
        checkpoint_only = moves_checkpoint_only(result) and not result.schema_changes
    else:
        stored, _ = stored_table(catalog_options, result.target)
        checkpoint_only = moves_checkpoint_only(result, stored.schema if stored is not None else None)
    if checkpoint_only:
        metadata = {**_commit_metadata(result.snapshot_id, result.phase, result.offset, result.counts),
                    **({SCHEMA_CHANGES_KEY: ddl_table(result.ddl)} if getattr(result, "ddl", None) else {}),
                    CHECKPOINT_ONLY_KEY: dg.MetadataValue.text(
                        f"snapshot {result.snapshot_id} moved the checkpoint to {result.offset} with no change to "
                        "the table (" + ("a DDL the table did not take, see lakecdc/schema_changes"
                                         if getattr(result, "ddl", None) else "a binlog rotation or a long idle "
                                         "stretch") + "); the latest materialisation still shows the table's last "
                        "change")}
        return dg.AssetObservation(asset_key=key or paimon_key(result.target), metadata=metadata)
    return materialization(result, plan, catalog_options, key=key, source_keys=source_keys)


def _commit_metadata(snapshot_id: int, phase: str, offset: BinlogOffset, counts: TableCounts) -> dict:
    """The metadata every commit shows, whether the run recorded it or a later run recovered it."""
    return {
        SNAPSHOT_ID_KEY: dg.MetadataValue.int(snapshot_id),
        "lakecdc/phase": phase,
        "lakecdc/binlog_offset": str(offset),
        "lakecdc/binlog_file": offset.file,
        "lakecdc/binlog_pos": dg.MetadataValue.int(offset.pos),
        "lakecdc/gtid": offset.gtid or "",
        "lakecdc/inserted": dg.MetadataValue.int(counts.inserted),
        "lakecdc/updated": dg.MetadataValue.int(counts.updated),
        "lakecdc/deleted": dg.MetadataValue.int(counts.deleted),
    }


def as_asset_materialization(result: dg.MaterializeResult) -> dg.AssetMaterialization:
    """A MaterializeResult as the event an op logs (the re-snapshot job), keeping its data version."""
    tags = {DATA_VERSION_TAG: result.data_version.value} if result.data_version is not None else None
    if result.asset_key is None:
        raise ValueError("a materialisation logged by an op needs its asset key")
    return dg.AssetMaterialization(asset_key=result.asset_key, metadata=result.metadata, tags=tags)


def recorded_snapshot_id(instance, key: dg.AssetKey) -> int | None:
    """The newest Paimon snapshot Dagster recorded for the asset: in its latest materialisation, or in its latest
    observation (a commit that only moved the checkpoint)."""
    recorded = []
    event = instance.get_latest_materialization_event(key)
    if event is not None and event.asset_materialization is not None:
        recorded.append(event.asset_materialization.metadata.get(SNAPSHOT_ID_KEY))
    for record in instance.fetch_observations(key, limit=1).records:
        observation = record.event_log_entry.asset_observation
        if observation is not None:
            recorded.append(observation.metadata.get(SNAPSHOT_ID_KEY))
    ids = [entry.value for entry in recorded if entry is not None]
    return max(ids) if ids else None


def unrecorded_commit(instance, catalog_options: dict[str, str], target: TableId, key: dg.AssetKey | None = None,
                      *, run_id: str = "") -> dg.MaterializeResult | None:
    """A snapshot committed without Dagster recording it, as a materialisation of ``key`` (default: the default
    translator's key): one an earlier, crashed run made, or (its checkpoint's run id is ``run_id``) one made earlier
    in this run: by an attempt that failed before reporting it, or by the micro-batch of all the run's tables that
    failed after committing this table (each table then ran alone and found nothing new)."""
    key = key or paimon_key(target)

    sink = open_warehouse(catalog_options)
    if not sink.table_exists(target):
        return None
    properties = sink.checkpoint(target)
    offset = offset_from_properties(properties)
    snapshot_id = latest_change_snapshot_id(sink, target)  # upkeep snapshots (compaction, ...) are no commit
    if properties is None or offset is None or snapshot_id is None:
        return None
    recorded = recorded_snapshot_id(instance, key)
    if recorded is not None and recorded >= snapshot_id:
        return None
    return dg.MaterializeResult(
        asset_key=key,
        metadata={
            **_commit_metadata(snapshot_id, properties.get(PHASE, ""), offset, counts_from_properties(properties)),
            **({"lakecdc/committed_by": dg.MetadataValue.text(
                "earlier in this run (an attempt, or the micro-batch of all its tables, that failed after this "
                "commit)")}
               if run_id and properties.get(RUN_ID) == run_id else
               {"lakecdc/recovered": dg.MetadataValue.text(
                   "committed by an earlier run that stopped before Dagster recorded it")}),
            "dagster/table_name": paimon_table_name(catalog_options.get("warehouse", ""), target),
            "dagster/row_count": dg.MetadataValue.int(sink.row_count(target)),
        },
        data_version=dg.DataVersion(f"snapshot-{snapshot_id}"))
