"""Validation of a pipeline file (``lakecdc validate``): the YAML alone, or with ``connect`` also against MySQL (the
server's settings, the transforms compiled against the source tables, each table's Paimon options now that its keys
and columns are known). A pipeline is valid only when every step passed: the caller reports it after this
returns, never before (a broken file is never called valid)."""

from __future__ import annotations

from dataclasses import dataclass, field

from lakecdc.config import PipelineConfig
from lakecdc.errors import PipelineConfigError, SinkError
from lakecdc.model import TableId


@dataclass
class ValidatedTable:
    """One Paimon table of a pipeline validated against MySQL."""

    target: TableId
    sources: list[TableId]
    primary_keys: list[str]
    partition_keys: list[str]


@dataclass
class Validation:
    """A pipeline that passed validation; ``tables`` only when it was validated against MySQL (``connected``)."""

    config: PipelineConfig
    connected: bool
    tables: list[ValidatedTable] = field(default_factory=list)


def validate_pipeline(config: PipelineConfig, *, connect: bool = False) -> Validation:
    """Validate a parsed pipeline (parsing already checked the YAML); with ``connect``, also against MySQL.
    Raises PipelineConfigError (naming the file and key) or SourceError; returns only for a valid pipeline."""
    if not connect:
        return Validation(config, connected=False)
    from lakecdc.runtime.connect import open_source
    from lakecdc.runtime.plan import build_plan
    from lakecdc.sink.tables import validate_options

    source = open_source(config)
    source.share_connection()  # the server checks and every table's description on one connection
    try:
        source.check_server()
        plan = build_plan(config, source)
    finally:
        source.close()
    tables = []
    for target, target_plan in sorted(plan.targets.items()):
        try:  # the options each table gets, now that its keys and columns are known (e.g. append + bucket)
            validate_options(target, {**config.sink.new_table_options, **target_plan.options},
                             has_primary_key=bool(target_plan.primary_keys), columns=target_plan.schema.names)
        except SinkError as error:
            raise PipelineConfigError(str(error), file=config.path, path="sink.table.properties") from None
        tables.append(ValidatedTable(target, [s.source.table_id for s in target_plan.sources],
                                     list(target_plan.primary_keys), list(target_plan.partition_keys)))
    return Validation(config, connected=True, tables=tables)
