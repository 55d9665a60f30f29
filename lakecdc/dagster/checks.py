"""Blocking asset checks of each Paimon table: the check specs and the conversion of the library's results
(lakecdc.runtime.verify, which ``lakecdc check`` runs too) to ``AssetCheckResult``.

Every failed check is ERROR severity: a real difference (duplicate keys, a row count that differs at the
checkpoint, schema drift) and a check that could not be evaluated both block downstream assets.
"""

import dataclasses

import dagster as dg

from lakecdc.config import PipelineConfig
from lakecdc.model import TableId
from lakecdc.runtime import verify
from lakecdc.source import MySqlSource
from lakecdc.runtime.verify import PK_UNIQUE, ROW_COUNT, SCHEMA, CheckResult, check_names, has_filter

__all__ = ["PK_UNIQUE", "ROW_COUNT", "SCHEMA", "has_filter", "check_specs", "TableState", "evaluate",
           "asset_check_result"]

_DESCRIPTIONS = {
    PK_UNIQUE: "No two rows of the merged Paimon table share a primary key",
    ROW_COUNT: "Active Paimon rows equal the MySQL rows at the committed binlog offset (exact; changes made while "
               "counting are the stated tolerance)",
    SCHEMA: "The columns and types produced from the current MySQL schema equal the stored Paimon table's",
}


def check_specs(config: PipelineConfig, key: dg.AssetKey, sources: list[TableId]) -> list[dg.AssetCheckSpec]:
    return [dg.AssetCheckSpec(name, asset=key, blocking=True, description=_DESCRIPTIONS[name])
            for name in check_names(config, sources)]


@dataclasses.dataclass
class TableState:
    """The library's table state (plan from MySQL now, stored table, checkpoint) and the asset key it reports to."""

    state: verify.TableState
    key: dg.AssetKey

    @classmethod
    def load(cls, config: PipelineConfig, target: TableId, key: dg.AssetKey, *,
             source: MySqlSource | None = None, plan=None) -> "TableState":
        """``source``: the MySQL source to plan the table and run the checks through (a shared connection);
        ``plan``: a plan of many tables made once (without it, or when it lacks the table, only this table is
        planned)."""
        return cls(verify.TableState.load(config, target, source=source, plan=plan), key)

    @property
    def plan(self):
        return self.state.plan


def evaluate(state: TableState, names: set[str]) -> list[dg.AssetCheckResult]:
    """The results of the selected checks (every selected check yields a result: Dagster requires it)."""
    return [asset_check_result(state.key, result) for result in verify.evaluate(state.state, names)]


def _metadata_value(value):
    if isinstance(value, bool):
        return dg.MetadataValue.bool(value)
    if isinstance(value, int):
        return dg.MetadataValue.int(value)
    return dg.MetadataValue.text(str(value))


def asset_check_result(key: dg.AssetKey, result: CheckResult) -> dg.AssetCheckResult:
    metadata = {name: _metadata_value(value) for name, value in result.metadata.items()}
    metadata["evaluated"] = dg.MetadataValue.bool(result.evaluated)
    if not result.applicable:
        metadata["applicable"] = dg.MetadataValue.bool(False)
    return dg.AssetCheckResult(asset_key=key, check_name=result.check, passed=result.passed,
                               severity=dg.AssetCheckSeverity.ERROR, description=result.description,
                               metadata=metadata)
