"""Asset checks of each Paimon table: the specs and the conversion of the library's results to Dagster's.

* The checks of a run's own commit (lakecdc.runtime.verify: ``changed_rows_match``, ``changed_keys_unique``,
  ``schema_matches_source``) are blocking specs of the pipeline's op: every materialisation runs them, and a
  failure stops what is downstream of the table.
* The reconciliation against MySQL (lakecdc.runtime.reconcile: ``row_count_matches_source``,
  ``primary_key_unique``) is non-blocking and belongs to its own op, ``<pipeline>_reconcile``: the reconcile job
  runs it, on ``pipeline.lakecdc.reconcile.schedule`` or from the UI.

Every failed check is ERROR severity: a real difference and a check that could not be evaluated both fail.
"""

import dagster as dg

from lakecdc.config import PipelineConfig
from lakecdc.model import TableId
from lakecdc.runtime.reconcile import PK_UNIQUE, ROW_COUNT, reconcile_check_names
from lakecdc.runtime.verify import CHANGED_KEYS_UNIQUE, CHANGED_ROWS, RUN_CHECKS, SCHEMA, CheckResult

__all__ = ["run_check_specs", "reconcile_check_specs", "asset_check_result", "asset_check_evaluation",
           "RUN_CHECKS", "CHANGED_ROWS", "CHANGED_KEYS_UNIQUE", "SCHEMA", "ROW_COUNT", "PK_UNIQUE"]

_DESCRIPTIONS = {
    CHANGED_ROWS: "Every key the run wrote holds the run's last row of it in the snapshot it committed, or is absent "
                  "after a delete (read back by key; a bounded sample of large runs)",
    CHANGED_KEYS_UNIQUE: "No key the run wrote is held by two rows of the snapshot it committed",
    SCHEMA: "The columns and types produced from the source schemas the run reached equal the stored Paimon "
            "table's",
    ROW_COUNT: "Reconciliation (the reconcile job): active Paimon rows equal the MySQL rows at the committed binlog "
               "offset, MySQL read in chunks (exact; changes made while a chunk was read are the stated tolerance)",
    PK_UNIQUE: "Reconciliation (the reconcile job): no two rows of the Paimon table share a primary key, read "
               "bucket by bucket",
}


def run_check_specs(key: dg.AssetKey) -> list[dg.AssetCheckSpec]:
    """The blocking checks of a run's commit, on the pipeline's op."""
    return [dg.AssetCheckSpec(name, asset=key, blocking=True, description=_DESCRIPTIONS[name]) for name in RUN_CHECKS]


def reconcile_check_specs(config: PipelineConfig, key: dg.AssetKey, sources: list[TableId]) -> list[dg.AssetCheckSpec]:
    """The reconciliation checks of a table, on the reconcile op (no row count when a filter drops rows)."""
    return [dg.AssetCheckSpec(name, asset=key, blocking=False, description=_DESCRIPTIONS[name])
            for name in reconcile_check_names(config, sources)]


def _metadata(result: CheckResult) -> dict:
    metadata = {name: _metadata_value(value) for name, value in result.metadata.items()}
    metadata["evaluated"] = dg.MetadataValue.bool(result.evaluated)
    if not result.applicable:
        metadata["applicable"] = dg.MetadataValue.bool(False)
    return metadata


def _metadata_value(value):
    if isinstance(value, bool):
        return dg.MetadataValue.bool(value)
    if isinstance(value, int):
        return dg.MetadataValue.int(value)
    return dg.MetadataValue.text(str(value))


def asset_check_result(key: dg.AssetKey, result: CheckResult) -> dg.AssetCheckResult:
    """A check's result as the op yields it (its output: what a downstream step in the run waits for)."""
    return dg.AssetCheckResult(asset_key=key, check_name=result.check, passed=result.passed,
                               severity=dg.AssetCheckSeverity.ERROR, description=result.description,
                               metadata=_metadata(result))


def asset_check_evaluation(key: dg.AssetKey, result: CheckResult, *, blocking: bool) -> dg.AssetCheckEvaluation:
    """A check's result as an event of an op that does not own the check (the follow and re-snapshot jobs)."""
    return dg.AssetCheckEvaluation(asset_key=key, check_name=result.check, passed=result.passed,
                                   severity=dg.AssetCheckSeverity.ERROR, description=result.description,
                                   metadata=_metadata(result), blocking=blocking)
