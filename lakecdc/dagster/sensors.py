"""Automation of a pipeline: the binlog sensor, an optional cron schedule and a run-failure alert.

The binlog sensor (interval ``pipeline.lakecdc.sensor.interval``) requests a run for the tables that are behind (a
committed change or DDL of their source tables after their checkpoint, or their snapshot to take; see
lakecdc.runtime.status) or due a checkpoint refresh (idle, checkpoint in an older binlog file or 64 MiB behind), and
that no active run of the pipeline is writing (a micro-batch or a re-snapshot), so one busy table never holds up the
others. Writes to other databases start nothing. The run key is the head offset plus the tables, so one head position
starts at most one run per set of tables. Its cursor records the head it saw, the tables it requested, the binlog head
at which it last requested each table, and the binlog scan (so the next tick scans only the binlog written since):
``{"head": "binlog.000003:1234", "requested": ["inventory.orders"], "requested_at": {...},
"scan": {"from": ..., "to": ..., "changed": {...}, "xa": {...}, "tables": [...]}}``.
"""

import json
import time
import urllib.request
import zoneinfo
from dataclasses import dataclass, field

import dagster as dg

from lakecdc.config import PipelineConfig
from lakecdc.dagster.jobs import PIPELINE_TAG, TABLE_TAG
from lakecdc.dagster.translator import CHECKPOINT_REFRESH_TAG, RUN_REASON_TAG, AssetKeys
from lakecdc.dagster.resources import effective_config, resource_keys
from lakecdc.errors import LakeCdcError, PipelineConfigError
from lakecdc.model import BinlogOffset, TableId
from lakecdc.runtime import pipeline_status
from lakecdc.source.activity import BinlogActivity, parse_offset

_ACTIVE = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
           dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]


def busy_tables(instance, config: PipelineConfig, tables: list[TableId], keys: AssetKeys | None = None
                ) -> dict[TableId, str]:
    """Tables an active run writes → that run's id: runs of the pipeline's jobs, and any other run selecting its
    assets (*Materialize* in the UI or ``dagster asset materialize`` run the implicit asset job, without the
    pipeline's tag). ``keys``: the pipeline's asset keys (default: the default translator's)."""
    keys = keys or AssetKeys.default(tables)
    busy: dict[TableId, str] = {}
    runs = instance.get_runs(filters=dg.RunsFilter(statuses=_ACTIVE))
    for run in runs:
        if not concerns_pipeline(run, config, tables, keys):
            continue
        if run.tags.get(TABLE_TAG):
            written = [TableId.parse(run.tags[TABLE_TAG])]
        elif run.asset_selection:
            written = [t for t in map(keys.table_of, run.asset_selection) if t is not None]
        else:
            written = list(tables)
        for table in written:
            busy.setdefault(table, run.run_id)
    return busy


def build_binlog_sensor(config: PipelineConfig, job, tables: list[TableId], *,
                        use_resources: bool = False, keys: AssetKeys | None = None) -> dg.SensorDefinition:
    pipeline = config
    keys = keys or AssetKeys.default(tables)

    @dg.sensor(
        name=f"{config.slug}_binlog_sensor", job=job,
        required_resource_keys=resource_keys(config) if use_resources else set(),
        minimum_interval_seconds=max(1, int(config.sensor_interval_seconds)),
        default_status=dg.DefaultSensorStatus.RUNNING if config.sensor_running else dg.DefaultSensorStatus.STOPPED,
        description=f"Starts a micro-batch of {config.name!r} for the tables with a change or DDL after their "
                    "checkpoint (and idle tables due a checkpoint refresh), except tables an active run is writing")
    def _sensor(context: dg.SensorEvaluationContext):
        effective = effective_config(pipeline, context.resources)

        previous = _read_cursor(context.cursor)
        try:
            status = pipeline_status(effective, activity=previous.activity)
        except LakeCdcError as exc:
            return dg.SkipReason(f"cannot read the pipeline's state: {exc}")
        busy = busy_tables(context.instance, pipeline, [t.target for t in status.tables], keys)
        wanted = [t for t in status.tables if _wanted(t, status.head, previous.requested_at.get(t.target))]
        # checkpoint refreshes that can wait ride along with a run that has real work, instead of a run of their own
        now = time.time()

        def can_wait(table) -> bool:
            since = previous.refresh_waiting_since.get(table.target, now)
            return table.refresh_can_wait(status.head) and now - since < REFRESH_MAX_WAIT_SECONDS

        waiting_refresh = [] if any(t.target not in busy and not can_wait(t) for t in wanted) \
            else [t for t in wanted if can_wait(t)]
        wanted = [t for t in wanted if t not in waiting_refresh]
        ready = sorted(t.target for t in wanted if t.target not in busy)
        requested_at = {t: o for t, o in previous.requested_at.items()
                        if any(s.target == t and s.needs_run(status.head) for s in status.tables)}
        requested_at.update({t: status.head for t in ready})
        cursor = json.dumps({
            "head": str(status.head), "requested": [str(t) for t in ready],
            "requested_at": {str(t): str(o) for t, o in sorted(requested_at.items())},
            "scan": status.activity.to_json() if status.activity is not None else None,
            "refresh_waiting_since": {str(t.target): previous.refresh_waiting_since.get(t.target, now)
                                      for t in waiting_refresh}})
        scanned = f"scanned {status.scanned_bytes} binlog bytes"
        if not wanted:
            folded = (f"; due a checkpoint refresh, left for the next run with changes: "
                      f"{', '.join(str(t.target) for t in waiting_refresh)}") if waiting_refresh else ""
            return dg.SensorResult(skip_reason=f"no table needs a new run: none has a change after its checkpoint "
                                               f"or its last requested run (head {status.head}, {scanned}){folded}",
                                   cursor=cursor)
        if not ready:
            waiting = ", ".join(f"{t.target} (run {busy[t.target]})" for t in wanted)
            return dg.SensorResult(skip_reason=f"tables behind are being written: {waiting}", cursor=cursor)
        context.log.info(f"{scanned}; runs for: " + ", ".join(f"{t.target} ({t.lag(status.head)})" for t in wanted
                                                               if t.target in ready))
        refresh_only = sorted(str(t.target) for t in wanted if t.target in ready and not t.behind)
        request = dg.RunRequest(
            run_key=f"{status.head}|{','.join(map(str, ready))}", asset_selection=[keys.paimon[t] for t in ready],
            tags={"lakecdc/binlog_head": str(status.head), PIPELINE_TAG: pipeline.slug,
                  **run_reason_tags(refresh_only, len(ready))})
        return dg.SensorResult(run_requests=[request], cursor=cursor)

    return _sensor


CHECKPOINT_REFRESH_ONLY = "checkpoint refresh only"
# How long an idle table's checkpoint refresh may wait for a run with real work before it gets a run of its own:
# a binlog file's purge comes with a rotation (expire_logs_days, binlog_expire_logs_seconds), so a refresh left
# waiting across days of an idle pipeline could find its checkpoint's file purged by the rotation that makes it
# urgent (checkpoint.idle_checkpoint_urgent). An hour folds the refresh into the next run in a busy pipeline and
# bounds the exposure in an idle one.
REFRESH_MAX_WAIT_SECONDS = 3600


def run_reason_tags(refresh_only: list[str], tables: int) -> dict[str, str]:
    """Why the sensor started a run: the tables with changes, and which (if any) only get their checkpoint moved
    (idle tables due a checkpoint refresh: the run commits nothing but their new checkpoint)."""
    if not refresh_only:
        return {RUN_REASON_TAG: "changes"}
    reason = CHECKPOINT_REFRESH_ONLY if len(refresh_only) == tables else "changes and checkpoint refresh"
    return {RUN_REASON_TAG: reason, CHECKPOINT_REFRESH_TAG: ", ".join(refresh_only)}


@dataclass
class _Cursor:
    activity: BinlogActivity | None = None  # what the last tick's binlog scan found
    requested_at: dict = field(default_factory=dict)  # table → binlog head when the sensor last requested its run
    # table → when (epoch seconds) its checkpoint refresh started waiting for a run with real work
    refresh_waiting_since: dict = field(default_factory=dict)


def _read_cursor(text: str | None) -> _Cursor:
    """The previous tick's cursor; an unreadable or older-format cursor starts afresh (a full scan)."""
    try:
        data = json.loads(text) if text else {}
        scan = data.get("scan")
        return _Cursor(BinlogActivity.from_json(scan) if scan else None,
                       {TableId.parse(t): parse_offset(o) for t, o in data.get("requested_at", {}).items()},
                       {TableId.parse(t): float(s) for t, s in data.get("refresh_waiting_since", {}).items()})
    except (ValueError, KeyError, TypeError, AttributeError):
        return _Cursor()


def _wanted(table, head: BinlogOffset, requested_at: BinlogOffset | None) -> bool:
    """Whether to request a run for a table now. A run requested at head H covers everything up to H, so a table
    still behind afterwards (its run failed, or found nothing to commit) is asked for again only for a change after
    H, or once per binlog file: a failing table does not start (and alert) a run on every tick."""
    if table.finished or not table.needs_run(head):
        return False
    if table.snapshot_pending or table.checkpoint is None:
        return True  # each run continues the snapshot (the run key still starts one run per head)
    if requested_at is None or requested_at.file != head.file:
        return True
    return table.last_change is not None and table.last_change > requested_at


def _schedule_zone(config: PipelineConfig) -> str:
    zone = config.local_time_zone
    return zone if zone in zoneinfo.available_timezones() else "UTC"


def build_schedule(config: PipelineConfig, job) -> dg.ScheduleDefinition | None:
    """The optional cron schedule (``pipeline.lakecdc.schedule``): a micro-batch of every table, e.g. for sources
    whose binlog should be read at fixed times instead of continuously."""
    automation = config.automation
    if not automation.schedule:
        return None
    try:
        return dg.ScheduleDefinition(
            name=f"{config.slug}_schedule", job=job, cron_schedule=automation.schedule,
            execution_timezone=_schedule_zone(config), tags={PIPELINE_TAG: config.slug},
            default_status=dg.DefaultScheduleStatus.RUNNING if automation.schedule_running
            else dg.DefaultScheduleStatus.STOPPED,
            description=f"Micro-batch of every table of {config.name!r} on the cron schedule {automation.schedule}")
    except dg.DagsterInvalidDefinitionError as exc:
        raise PipelineConfigError(f"invalid cron schedule {automation.schedule!r}: {exc}", file=config.path,
                                  path="pipeline.lakecdc.schedule") from None


def failure_text(config: PipelineConfig, context) -> dict:
    """The alert for a failed run: pipeline, run, job and the steps' error messages (lakecdc's messages never hold
    a password)."""
    run = context.dagster_run
    errors = []
    for event in context.get_step_failure_events():
        error = event.event_specific_data.error if event.event_specific_data else None
        errors.append(f"{event.step_key}: {error.message.strip() if error else event.message}")
    if not errors and context.failure_event is not None:
        errors.append(context.failure_event.message or "run failed")
    text = f"lakecdc pipeline {config.name!r}: run {run.run_id} of {run.job_name} failed: " + " | ".join(errors)
    return {"text": text, "pipeline": config.name, "run_id": run.run_id, "job": run.job_name, "errors": errors,
            "tables": run.tags.get(TABLE_TAG) or ", ".join("/".join(k.path) for k in (run.asset_selection or []))}


def concerns_pipeline(run, config: PipelineConfig, tables: list[TableId], keys: AssetKeys | None = None) -> bool:
    """Whether a run wrote (or tried to write) the pipeline's tables: its jobs, or any job selecting its assets
    (e.g. *Materialize* in the UI runs the implicit asset job)."""
    if run.tags.get(PIPELINE_TAG) == config.slug:
        return True
    keys = keys or AssetKeys.default(tables)
    ours = {keys.paimon[t] for t in tables if t in keys.paimon}
    return bool(run.asset_selection and set(run.asset_selection) & ours)


def build_failure_sensor(config: PipelineConfig, tables: list[TableId], *,
                         keys: AssetKeys | None = None) -> dg.SensorDefinition:
    """Logs every failed run that wrote the pipeline's tables and, with ``pipeline.lakecdc.alert.webhook``, posts it
    as JSON (``{"text": ..., "pipeline": ..., "run_id": ..., "errors": [...]}``, the shape Slack/Teams webhooks
    take)."""
    pipeline = config

    @dg.run_failure_sensor(name=f"{config.slug}_failure_alert", default_status=dg.DefaultSensorStatus.RUNNING,
                           description=f"Alerts on failed runs of {config.name!r}"
                                       + (" (webhook)" if config.automation.alert_webhook else " (log only)"))
    def _alert(context: dg.RunFailureSensorContext):
        if not concerns_pipeline(context.dagster_run, pipeline, tables, keys):
            return
        alert = failure_text(pipeline, context)
        context.log.error(alert["text"])
        webhook = pipeline.automation.alert_webhook
        if webhook:
            request = urllib.request.Request(webhook, data=json.dumps(alert).encode(), method="POST",
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - user-configured URL
                response.read()

    return _alert
