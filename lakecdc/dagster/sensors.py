"""The per-pipeline binlog sensor: requests a run when the binlog head is past a table's checkpoint (or a table
still needs its snapshot). The run key is the head offset, so one head position launches at most one run, and no
run is requested while another run of the pipeline is still going."""

import dagster as dg

from lakecdc.config import PipelineConfig
from lakecdc.errors import LakeCdcError
from lakecdc.runtime import pipeline_status

_ACTIVE = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
           dg.DagsterRunStatus.STARTED]


def build_binlog_sensor(config: PipelineConfig, job) -> dg.SensorDefinition:
    @dg.sensor(
        name=f"{config.slug}_binlog_sensor", job=job,
        minimum_interval_seconds=max(1, int(config.sensor_interval_seconds)),
        default_status=dg.DefaultSensorStatus.RUNNING if config.sensor_running else dg.DefaultSensorStatus.STOPPED,
        description=f"Starts a micro-batch of {config.name!r} when the MySQL binlog moves past the tables' checkpoints")
    def _sensor(context: dg.SensorEvaluationContext):
        active = context.instance.get_runs(
            filters=dg.RunsFilter(job_name=job.name, statuses=_ACTIVE), limit=1)
        if active:
            return dg.SkipReason(f"run {active[0].run_id} of this pipeline is still in progress")
        try:
            status = pipeline_status(config)
        except LakeCdcError as exc:
            return dg.SkipReason(f"cannot read the pipeline's state: {exc}")
        if not status.needs_run:
            return dg.SkipReason(f"all tables are at the binlog head {status.head}")
        behind = [f"{t.target} ({t.lag(status.head)})" for t in status.tables
                  if t.checkpoint is None or t.checkpoint < status.head]
        context.log.info("behind: " + ", ".join(behind))
        return dg.RunRequest(run_key=f"{status.head}", tags={"lakecdc/binlog_head": str(status.head),
                                                             "lakecdc/pipeline": config.slug})

    return _sensor
