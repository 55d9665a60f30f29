"""Runtime: one micro-batch of a pipeline from checkpoint to commit, the status of its tables, re-snapshots, the
checks of a run's commits and the reconciliation of whole tables against MySQL (the operations the CLI and Dagster
wrap).

The names below are imported from their modules at first use, so that ``lakecdc run`` loads the micro-batch's
modules without those of the status, the re-snapshot and the checks (the fixed cost of a run, docs/benchmarks.md).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for type checkers; at run time __getattr__ imports them
    from lakecdc.runtime.micro_batch import RunResult, TableResult, follow_pipeline, run_micro_batch  # noqa: F401
    from lakecdc.runtime.resnapshots import ResnapshotResult, resnapshot, resnapshot_or_snapshot  # noqa: F401
    from lakecdc.runtime.status import PipelineStatus, TableStatus, pipeline_status  # noqa: F401
    from lakecdc.runtime.validate import Validation, validate_pipeline  # noqa: F401
    from lakecdc.runtime.reconcile import check_pipeline, reconcile_pipeline  # noqa: F401
    from lakecdc.runtime.verify import CheckResult, verify_run  # noqa: F401

# heavy: lazy for start-up time
_EXPORTS = {
    "lakecdc.runtime.micro_batch": ("RunResult", "TableResult", "run_micro_batch", "follow_pipeline"),
    "lakecdc.runtime.status": ("PipelineStatus", "TableStatus", "pipeline_status"),
    "lakecdc.runtime.resnapshots": ("ResnapshotResult", "resnapshot", "resnapshot_or_snapshot"),
    "lakecdc.runtime.verify": ("CheckResult", "verify_run"),
    "lakecdc.runtime.reconcile": ("check_pipeline", "reconcile_pipeline"),
    "lakecdc.runtime.validate": ("Validation", "validate_pipeline"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = list(_MODULE_OF)


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
