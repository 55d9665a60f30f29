"""Jobs of a pipeline: the micro-batch job over all its tables, and for each partitioned Paimon table a
re-snapshot job partitioned by the table's Paimon partitions.

The re-snapshot job is how a user re-loads one partition from the UI: open the job, pick partitions in its
Partitions tab, *Launch backfill*. Each run re-snapshots one partition of the one table in one commit, in the
table's concurrency pool, while the other tables' micro-batches go on. Its partitions are filled in by the
table's own materialisations (every commit adds the Paimon partitions it touched).
"""

import dagster as dg

from lakecdc.config import PipelineConfig
from lakecdc.dagster.assets import partitions_name, pool_name, report, run_table
from lakecdc.dagster.checks import PK_UNIQUE, ROW_COUNT, SCHEMA, has_filter
from lakecdc.dagster.failures import retry_policy
from lakecdc.dagster.metadata import paimon_key
from lakecdc.dagster.resources import effective_config, resource_keys
from lakecdc.model import TableId

TABLE_TAG = "lakecdc/table"
PIPELINE_TAG = "lakecdc/pipeline"


def build_pipeline_job(config: PipelineConfig, assets: list[dg.AssetsDefinition]):
    return dg.define_asset_job(
        f"{config.slug}_job", selection=dg.AssetSelection.assets(*assets),
        description=f"One micro-batch of every table of the lakecdc pipeline {config.name!r}",
        tags={PIPELINE_TAG: config.slug})


def resnapshot_job_name(target: TableId) -> str:
    return f"resnapshot__{target.database}__{target.table}".replace("-", "_")


def build_resnapshot_job(config: PipelineConfig, target: TableId, sources: list[TableId], *,
                         use_resources: bool = False) -> dg.JobDefinition:
    """A job partitioned by ``target``'s Paimon partitions; each run re-snapshots one partition."""
    pipeline = config
    partitions = dg.DynamicPartitionsDefinition(name=partitions_name(target))
    checks = {PK_UNIQUE, SCHEMA} | (set() if has_filter(config, sources) else {ROW_COUNT})

    @dg.op(name=f"{resnapshot_job_name(target)}_op", pool=pool_name(config, target), retry_policy=retry_policy(config),
           required_resource_keys=resource_keys(config) if use_resources else set(), tags={TABLE_TAG: str(target)},
           description=f"Re-snapshot one Paimon partition of {target} from MySQL in one commit")
    def _resnapshot(context: dg.OpExecutionContext):
        effective = effective_config(pipeline, context.resources)
        committed = run_table(context, effective, target, resnapshot=True, partition=context.partition_key)
        for event in report(context, effective, target, committed, with_checks=checks, expect_materialization=False):
            if isinstance(event, dg.MaterializeResult):
                context.log_event(dg.AssetMaterialization(asset_key=paimon_key(target), metadata=event.metadata))
            else:
                context.log_event(dg.AssetCheckEvaluation(
                    asset_key=event.asset_key, check_name=event.check_name, passed=event.passed,
                    metadata=event.metadata, severity=event.severity, description=event.description))

    @dg.job(name=resnapshot_job_name(target), partitions_def=partitions, executor_def=dg.in_process_executor,
            tags={PIPELINE_TAG: config.slug, TABLE_TAG: str(target)},
            description=f"Re-snapshot one Paimon partition of {target} (pipeline {config.name!r}): pick partitions "
                        "and launch a backfill; the pipeline's other tables keep flowing")
    def _job():
        _resnapshot()

    return _job
