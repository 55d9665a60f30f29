"""Runtime: one micro-batch of a pipeline from checkpoint to commit, the status of its tables, re-snapshots and the
checks of its tables against MySQL (the operations the CLI and Dagster wrap)."""

from lakecdc.runtime.micro_batch import RunResult, TableResult, follow_pipeline, run_micro_batch
from lakecdc.runtime.resnapshot import ResnapshotResult, resnapshot, resnapshot_or_snapshot
from lakecdc.runtime.status import PipelineStatus, TableStatus, pipeline_status
from lakecdc.runtime.verify import CheckResult, check_pipeline

__all__ = ["RunResult", "TableResult", "run_micro_batch", "follow_pipeline", "PipelineStatus", "TableStatus",
           "pipeline_status", "ResnapshotResult", "resnapshot", "resnapshot_or_snapshot", "CheckResult",
           "check_pipeline"]
