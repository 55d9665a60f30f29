"""Runtime: one micro-batch of a pipeline from checkpoint to commit, and the status of its tables."""

from lakecdc.runtime.micro_batch import RunResult, TableResult, run_micro_batch
from lakecdc.runtime.status import PipelineStatus, TableStatus, pipeline_status

__all__ = ["RunResult", "TableResult", "run_micro_batch", "PipelineStatus", "TableStatus", "pipeline_status"]
