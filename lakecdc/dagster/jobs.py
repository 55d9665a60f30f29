"""Jobs of a pipeline: the micro-batch job over all its tables, the follow job (``<pipeline>_follow``: follow mode,
a long-running run that commits every ``pipeline.checkpoint-interval``), the table upkeep job
(``<pipeline>_upkeep``), the reconcile job (``<pipeline>_reconcile``: every table's row count against MySQL and
primary-key uniqueness over the whole table, on ``pipeline.lakecdc.reconcile.schedule``), and for each partitioned
Paimon table a re-snapshot job of some of its Paimon partitions.

The re-snapshot job is how a user re-loads partitions from the UI: open the job's *Launchpad*, name the partitions in
its run config, *Launch run*. The run re-snapshots them one after the other, each in commit groups, in the
pipeline's concurrency pool; it holds only that table's lock.
"""

import signal
import threading
import time
import zoneinfo
from types import FrameType
from typing import Any, Callable, Optional

import dagster as dg
from pydantic import Field

from lakecdc.config import PipelineConfig
from lakecdc.dagster.assets import (ReportingError, declared_partition_keys, observe_sources, plans_without_run,
                                    pool_name, report, run_table, table_lineage)
from lakecdc.dagster.checks import asset_check_evaluation, asset_check_result, reconcile_check_specs
from lakecdc.runtime import follow_pipeline
from lakecdc.runtime.connect import open_sink
from lakecdc.runtime.reconcile import reconcile_pipeline
from lakecdc.runtime.upkeep import upkeep_pipeline
from lakecdc.runtime.verify import RUN_CHECKS, verify_run
from lakecdc.dagster.failures import as_failure, retry_policy
from lakecdc.dagster.metadata import as_asset_materialization, commit_event
from lakecdc.dagster.translator import PIPELINE_TAG, TABLE_TAG, AssetKeys
from lakecdc.dagster.resources import effective_config, resource_keys
from lakecdc.errors import LakeCdcError, PipelineConfigError
from lakecdc.model import TableId



def build_pipeline_job(config: PipelineConfig, assets: list[dg.AssetsDefinition]):
    """The micro-batch of every table with the checks of its commit; the reconciliation (the reconcile job's checks
    of the same assets) is left out."""
    run_checks = [key for asset in assets for key in asset.check_keys]
    return dg.define_asset_job(
        f"{config.slug}_job",
        selection=dg.AssetSelection.assets(*assets).without_checks() | dg.AssetSelection.checks(*run_checks),
        description=f"One micro-batch of every table of the lakecdc pipeline {config.name!r}",
        tags={PIPELINE_TAG: config.slug})


def resnapshot_job_name(target: TableId) -> str:
    return f"resnapshot__{target.database}__{target.table}".replace("-", "_")


class ResnapshotRunConfig(dg.Config):
    """Run config of a re-snapshot job: the Paimon partitions to re-read from MySQL."""

    partitions: list[str] = Field(description="Paimon partitions of the table to re-snapshot, one after the other, "
                                              "spelled as Paimon and lakecdc list them (the materialisations' "
                                              "lakecdc/partitions_changed), e.g. order_day=20260101")


def build_resnapshot_job(config: PipelineConfig, target: TableId, sources: list[TableId], *,
                         use_resources: bool = False, keys: Optional[AssetKeys] = None) -> dg.JobDefinition:
    """A job that re-snapshots the Paimon partitions its run config names, one after the other, each a
    materialisation of the table's asset. ``keys``: the pipeline's asset keys (default: the default translator's).

    Not a Dagster partitioned job: Dagster shows an op job's partitions as "missing" until a run of that job took
    them, which says nothing true of a table whose every partition lakecdc's commits have written; and a dynamic
    partition picker offers to create partitions, which only Paimon's data makes. The op has no output, so no IO
    manager stores anything."""
    pipeline = config
    keys = keys or AssetKeys.default([target], sources)
    example = "=".join((declared_partition_keys(config, target, sources) or ["key"])[:1] + ["value"])

    @dg.op(name=f"{resnapshot_job_name(target)}_op", pool=pool_name(config), retry_policy=retry_policy(config),
           required_resource_keys=resource_keys(config) if use_resources else set(), tags={TABLE_TAG: str(target)},
           out={}, description=f"Re-snapshot Paimon partitions of {target} from MySQL")
    def _resnapshot(context: dg.OpExecutionContext, config: ResnapshotRunConfig):
        partitions = [p.strip() for p in config.partitions if p.strip()]
        if not partitions:
            raise dg.Failure(f"name the Paimon partitions of {target} to re-snapshot in the run config: "
                             f"partitions: [{example}]", allow_retries=False)
        effective = effective_config(pipeline, context.resources)
        plans, plan_error = plans_without_run(effective, [target])  # the schema check's, from MySQL now
        for partition in partitions:
            committed = run_table(context, effective, target, resnapshot=True, partition=partition)
            if committed is not None:  # the MySQL table read, on its asset (lakecdc.runtime.report.resnapshot_reads)
                observe_sources(context, [committed], None, keys)
            for event in report(context, effective, target, committed, with_checks=set(RUN_CHECKS),
                                expect_materialization=False, keys=keys, result=committed, plan=plans.get(target),
                                plan_error=plan_error, as_output=False):
                context.log_event(event)  # materialisations and check evaluations: events, not outputs

    @dg.job(name=resnapshot_job_name(target), executor_def=dg.in_process_executor,
            tags={PIPELINE_TAG: config.slug, TABLE_TAG: str(target)},
            description=f"Re-snapshot Paimon partitions of {target} from MySQL (pipeline {config.name!r}): name them "
                        f"in the launchpad's run config (partitions: [{example}]); the pipeline's other tables keep "
                        "flowing")
    def _job():
        _resnapshot()

    return _job


class FollowRunConfig(dg.Config):
    """Run config of the follow job (all optional: by default it follows until the run is cancelled)."""

    max_commits: int = 0  # stop after this many commits after the first micro-batch (0: no limit)
    max_seconds: float = 0.0  # stop at the first checkpoint after this long (0: no limit)


def follow_job_name(config: PipelineConfig) -> str:
    return f"{config.slug}_follow"


def build_follow_job(config: PipelineConfig, *, use_resources: bool = False,
                     keys: Optional[AssetKeys] = None) -> dg.JobDefinition:
    """Follow mode as a long-running job (lakecdc.runtime.follow_pipeline): one run holds the locks of every table
    of the pipeline, takes the snapshots still needed, then commits every ``pipeline.checkpoint-interval``; each
    commit of each table is recorded as a materialisation of its asset (``keys``: the pipeline's asset keys, default
    the default translator's), followed by the checks of that commit (lakecdc.runtime.verify, as after a
    micro-batch): a failed one stops the follow at its next checkpoint and fails the run. Cancelling the run
    (SIGINT/SIGTERM to the run worker) lets it commit what it read up to the binlog head, then ends the op cleanly
    (the run succeeds; its log says the cancel stopped it). Each commit also observes the MySQL tables it read."""
    pipeline = config

    lineage = table_lineage(config)
    keys = keys or AssetKeys.default(sorted(lineage), sorted({s for feeds in lineage.values() for s in feeds}))

    @dg.op(name=f"{follow_job_name(config)}_op", tags={PIPELINE_TAG: config.slug}, out={},  # nothing to store
           required_resource_keys=resource_keys(config) if use_resources else set(),
           description=f"Follow the binlog of {config.name!r} and commit every "
                       f"{config.checkpoint_interval_seconds:g} s until the run is cancelled")
    def _follow(context: dg.OpExecutionContext, config: FollowRunConfig):
        effective = effective_config(pipeline, context.resources)
        sink = open_sink(effective)
        started = time.monotonic()
        commits = [0]
        failed_checks: list[str] = []
        interrupted = threading.Event()

        def should_stop() -> bool:
            return interrupted.is_set() or bool(failed_checks) or (0 < config.max_commits <= commits[0]) or \
                (0 < config.max_seconds <= time.monotonic() - started)

        def on_commit(tables) -> None:
            observe_sources(context, tables, None, keys)
            for table in tables:
                key = keys.paimon.get(table.target)
                if key is None:  # a table the pipeline did not have when the definitions were loaded
                    context.log.warning(f"{table.target}: committed snapshot {table.snapshot_id}; no asset for it "
                                        "until the code location is reloaded")
                    continue
                event = commit_event(table, table.plan, effective.sink.catalog_options, key=key,
                                     source_keys=keys.mysql)
                # a commit that only moved the checkpoint is an observation (the last change stays the latest)
                context.log_event(event if isinstance(event, dg.AssetObservation) else as_asset_materialization(event))
                for checked in verify_run(effective, sink, table.target, table, table.plan):
                    # dagster logs check evaluations too, though log_event's annotation leaves them out
                    context.log_event(asset_check_evaluation(key, checked, blocking=True))  # type: ignore[arg-type]
                    if not checked.passed:
                        failed_checks.append(f"{table.target} {checked.check}: {checked.description}")
            if any(t.phase != "snapshot" for t in tables):
                commits[0] += 1

        with _stop_on_interrupt(interrupted):
            try:
                result = follow_pipeline(effective, should_stop=should_stop, on_commit=on_commit,
                                         run_id=context.run.run_id, log=context.log, record_writes=True)
            except LakeCdcError as exc:
                raise as_failure(exc) from None
        why = "the run was cancelled (Terminate), so it committed what it had read up to the binlog head and " \
              "stopped cleanly" if interrupted.is_set() else "it reached max_commits or max_seconds"
        context.log.info(f"pipeline {pipeline.name!r}: follow stopped after {result.follow_commits} commit(s): "
                         f"{why}")
        if failed_checks:
            raise dg.Failure(description="a commit's check failed, so the follow stopped:\n" + "\n".join(
                f"- {line}" for line in failed_checks), allow_retries=False)

    @dg.job(name=follow_job_name(config), executor_def=dg.in_process_executor, tags={PIPELINE_TAG: config.slug},
            description=f"Follow mode of {config.name!r}: one long-running run that commits every "
                        f"pipeline.checkpoint-interval ({config.checkpoint_interval_seconds:g} s) and records each "
                        "commit as a materialisation; Terminate the run to stop it (it commits first and ends "
                        "as a success)")
    def _job():
        _follow()

    return _job


class _stop_on_interrupt:
    """While following, SIGINT/SIGTERM (how Dagster cancels a run) only ask the follow to stop at its next
    checkpoint: the op commits, says why it stopped and returns, so a cancel is a clean stop (no step failure, no
    interrupt trace; the run ends as a success). Dagster's own handler is put back afterwards and never sees the
    signal. Outside the main thread signals cannot be caught: the interrupt then stops the run at once (the commits
    already made stay consistent; what was read since the last one is read again by the next run)."""

    def __init__(self, interrupted: threading.Event):
        self.interrupted = interrupted
        self.previous: dict[int, Callable[[int, FrameType | None], Any] | int | None] = {}  # signal.getsignal's

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self.previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        self.interrupted.set()

    def __exit__(self, *exc):
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        return False


class UpkeepRunConfig(dg.Config):
    """Run config of the upkeep job (all optional)."""

    full_compaction: bool = False
    wait_seconds: float = 60.0
    orphan_older_than_seconds: Optional[float] = None


def upkeep_job_name(config: PipelineConfig) -> str:
    return f"{config.slug}_upkeep"


def build_upkeep_job(config: PipelineConfig, targets: list[TableId], *,
                     use_resources: bool = False, keys: Optional[AssetKeys] = None) -> dg.JobDefinition:
    """Table upkeep of every Paimon table of the pipeline (lakecdc.sink.upkeep): one op per table in the
    pipeline's concurrency pool, so with a pool limit it queues behind the pipeline's micro-batch instead of
    colliding with it; a table still locked after ``wait_seconds`` is skipped with a warning. Each table reports an
    observation of its asset with what upkeep did."""
    pipeline = config
    keys = keys or AssetKeys.default(targets)

    def table_op(target: TableId):
        @dg.op(name=f"upkeep__{target.database}__{target.table}".replace("-", "_"), pool=pool_name(config),
               required_resource_keys=resource_keys(config) if use_resources else set(),
               tags={TABLE_TAG: str(target)}, out={},  # no output: nothing for an IO manager to store
               description=f"Compact, merge manifests, expire snapshots and remove orphan files of {target}")
        def _upkeep(context: dg.OpExecutionContext, config: UpkeepRunConfig):
            effective = effective_config(pipeline, context.resources)
            try:
                [result] = upkeep_pipeline(effective, [target], full_compaction=config.full_compaction,
                                           orphan_older_than_seconds=config.orphan_older_than_seconds,
                                           wait_seconds=config.wait_seconds, log=context.log)
            except LakeCdcError as exc:
                raise dg.Failure(description=f"{target}: upkeep failed: {exc}", allow_retries=False) from None
            if result.skipped:
                context.log.warning(result.summary())
            context.log_event(dg.AssetObservation(asset_key=keys.paimon[target], metadata=upkeep_metadata(result)))

        return _upkeep

    ops = [table_op(target) for target in sorted(targets)]

    @dg.job(name=upkeep_job_name(config), executor_def=dg.in_process_executor, tags={PIPELINE_TAG: config.slug},
            description=f"Table upkeep of the Paimon tables of {config.name!r}: compaction of small files, manifest "
                        "merging, snapshot expiry (snapshot.num-retained.*, snapshot.time-retained) and orphan "
                        "file removal")
    def _job():
        for op in ops:
            op()

    return _job


def upkeep_metadata(result) -> dict:
    return {
        "lakecdc/upkeep": dg.MetadataValue.text(result.summary()),
        "lakecdc/upkeep_skipped": dg.MetadataValue.text(result.skipped or ""),
        "lakecdc/compaction_snapshot_id": dg.MetadataValue.int(result.compaction_snapshot_id or 0),
        "lakecdc/files_rewritten": dg.MetadataValue.int(result.files_rewritten),
        "lakecdc/files_upgraded": dg.MetadataValue.int(result.files_upgraded),
        "lakecdc/manifests": dg.MetadataValue.int(result.manifests_after),
        "lakecdc/expired_snapshots": dg.MetadataValue.int(len(result.expired_snapshots)),
        "lakecdc/files_deleted": dg.MetadataValue.int(result.expired_files_deleted + result.orphan_files_deleted),
    }


def build_upkeep_schedule(config: PipelineConfig, job) -> dg.ScheduleDefinition | None:
    """``pipeline.lakecdc.upkeep.schedule``: the upkeep job on a cron schedule (e.g. nightly)."""
    return _cron_schedule(config, job, config.upkeep.schedule, f"{config.slug}_upkeep_schedule",
                          "pipeline.lakecdc.upkeep.schedule",
                          f"Table upkeep of {config.name!r} on the cron schedule {config.upkeep.schedule}")


def reconcile_job_name(config: PipelineConfig) -> str:
    return f"{config.slug}_reconcile"


def build_reconcile_checks(config: PipelineConfig, lineage: dict[TableId, list[TableId]], keys: AssetKeys, *,
                           use_resources: bool = False) -> dg.AssetChecksDefinition | None:
    """The reconciliation checks of every Paimon table of the pipeline (lakecdc.runtime.reconcile), non-blocking, in
    one op of their own (outside the pipeline's pool: they only read): the reconcile job runs them, and so does
    *Execute* on a check of the asset page. None for a pipeline without tables."""
    pipeline = config
    specs = [spec for target, feeds in sorted(lineage.items())
             for spec in reconcile_check_specs(config, keys.paimon[target], feeds)]
    if not specs:
        return None
    table_of = {key: target for target, key in keys.paimon.items()}

    @dg.multi_asset_check(
        name=f"{reconcile_job_name(config)}_checks", specs=specs, can_subset=True,
        required_resource_keys=resource_keys(config) if use_resources else set(),
        op_tags={PIPELINE_TAG: config.slug},
        description=f"Reconciliation of the Paimon tables of {config.name!r} against MySQL: row count at the "
                    "checkpoint (MySQL read in chunks) and primary-key uniqueness (Paimon read bucket by bucket)")
    def _reconcile(context: dg.AssetCheckExecutionContext):
        if context.job_def.asset_layer.selected_asset_keys:
            # a run that materialises tables (the UI's Materialize selects every check of its assets): the
            # reconciliation is the reconcile job's, never part of a micro-batch
            context.log.info(f"reconciliation skipped in a run that materialises tables: run the job "
                             f"{reconcile_job_name(pipeline)}, or Execute the check")
            return
        effective = effective_config(pipeline, context.resources)
        wanted: dict[TableId, set[str]] = {}
        for check in context.selected_asset_check_keys:
            wanted.setdefault(table_of[check.asset_key], set()).add(check.name)
        try:
            results = reconcile_pipeline(effective, sorted(wanted), names=wanted, log=context.log)
        except LakeCdcError as exc:
            raise as_failure(ReportingError(f"reconciliation of {pipeline.name!r} failed: {exc}")) from None
        for result in results:
            yield asset_check_result(keys.paimon[result.target], result)

    return _reconcile


def build_reconcile_job(config: PipelineConfig, checks: dg.AssetChecksDefinition):
    return dg.define_asset_job(
        reconcile_job_name(config), selection=dg.AssetSelection.checks(checks),
        description=f"Reconciliation of every Paimon table of {config.name!r} against MySQL: row count at the "
                    "checkpoint, MySQL read in chunks with a pause between statements, and primary-key uniqueness, "
                    "Paimon read bucket by bucket (non-blocking checks on the tables' assets)",
        tags={PIPELINE_TAG: config.slug})


def build_reconcile_schedule(config: PipelineConfig, job) -> dg.ScheduleDefinition | None:
    """``pipeline.lakecdc.reconcile.schedule`` (daily by default; ``none``: no schedule)."""
    return _cron_schedule(config, job, config.reconcile.schedule, f"{config.slug}_reconcile_schedule",
                          "pipeline.lakecdc.reconcile.schedule",
                          f"Reconciliation of {config.name!r} against MySQL on the cron schedule "
                          f"{config.reconcile.schedule}")


def _cron_schedule(config: PipelineConfig, job, cron: str | None, name: str, option_path: str,
                   description: str) -> dg.ScheduleDefinition | None:
    if not cron:
        return None
    try:
        zone = config.local_time_zone if config.local_time_zone in zoneinfo.available_timezones() else "UTC"
        return dg.ScheduleDefinition(name=name, job=job, cron_schedule=cron, execution_timezone=zone,
                                     tags={PIPELINE_TAG: config.slug}, default_status=dg.DefaultScheduleStatus.RUNNING,
                                     description=description)
    except dg.DagsterInvalidDefinitionError as exc:
        raise PipelineConfigError(f"invalid cron schedule {cron!r}: {exc}", file=config.path,
                                  path=option_path) from None
