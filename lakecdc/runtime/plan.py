"""Resolves a pipeline against the live source: which MySQL tables are captured, how each is transformed and
which Paimon table it lands in. Everything here runs before any data is read or written, so every
configuration error surfaces first.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

import pyarrow as pa

from lakecdc.config import PipelineConfig, transform_context
from lakecdc.errors import PipelineConfigError
from lakecdc.model import SourceTable, TableId
from lakecdc.selectors import TableSelector
from lakecdc.source import MySqlSource
from lakecdc.transform import CompiledTransform, compile_transform, select_rule
from lakecdc.transform.expressions import DATA_EVENT_TYPE, parse_projection
from lakecdc.transform.rules import SOFT_DELETE
from lakecdc.transform.routes import CoercedTransform, Router, merge_schemas


@dataclass
class SourcePlan:
    """One captured MySQL table and its compiled transform."""

    source: SourceTable
    transform: CompiledTransform | CoercedTransform  # coerced: routed with other tables into one (merged) schema
    targets: list[TableId]


@dataclass
class TargetPlan:
    """One Paimon table and the source tables that feed it."""

    target: TableId
    schema: pa.Schema
    primary_keys: list[str]
    partition_keys: list[str]
    options: dict[str, str]
    comment: str
    sources: list[SourcePlan] = field(default_factory=list)


@dataclass
class PipelinePlan:
    sources: dict[TableId, SourcePlan]
    targets: dict[TableId, TargetPlan]

    def restrict(self, targets: set[TableId]) -> "PipelinePlan":
        """Only the given Paimon tables (a Dagster asset subset); unknown names are an error."""
        unknown = targets - set(self.targets)
        if unknown:
            raise PipelineConfigError(f"the pipeline does not write {', '.join(sorted(map(str, unknown)))}")
        kept_sources = {}
        for source_id, plan in self.sources.items():
            wanted = [t for t in plan.targets if t in targets]
            if wanted:
                kept_sources[source_id] = SourcePlan(plan.source, plan.transform, wanted)
        # the targets list the same SourcePlan objects as ``sources``: a run updates those (a DDL recompiles a
        # transform, a table's rows are coerced into its stored schema) and every view of the plan must see it
        kept_targets = {t: dataclasses.replace(p, sources=[kept_sources[s.source.table_id] for s in p.sources])
                        for t, p in self.targets.items() if t in targets}
        return PipelinePlan(kept_sources, kept_targets)


def planned_targets(config: PipelineConfig, source: MySqlSource) -> set[TableId]:
    """The Paimon tables the captured tables route into, without describing or compiling anything (to find the
    checkpoints, whose schema history the plan is then built with)."""
    router = Router(config.routes, mode=config.route_mode, file=config.path)
    return {t for table_id in _matching(config, source.list_tables()) for t in router.targets(table_id)}


def _matching(config: PipelineConfig, available: list[TableId]) -> list[TableId]:
    include = TableSelector(config.source.tables)
    exclude = TableSelector(config.source.tables_exclude) if config.source.tables_exclude else None
    return sorted(t for t in available if include.matches(t) and not (exclude and exclude.matches(t)))


def captured_tables(config: PipelineConfig, available: list[TableId]) -> list[TableId]:
    """The tables matched by ``tables`` minus ``tables.exclude``, in a stable order."""
    exclude = TableSelector(config.source.tables_exclude) if config.source.tables_exclude else None
    found = _matching(config, available)
    if not found:
        raise PipelineConfigError(
            f"cannot find any table by the option 'tables' ({config.source.tables!r}"
            + (f", minus 'tables.exclude' {config.source.tables_exclude!r}" if exclude else "")
            + "): check the database and table names, and that the user may read them",
            file=config.path, path="source.tables")
    return found


def build_plan(config: PipelineConfig, source: MySqlSource,
               schemas: dict[TableId, SourceTable] | None = None, *,
               targets: set[TableId] | None = None) -> PipelinePlan:
    """The plan for the live source. ``schemas``: source schemas to use instead of today's information_schema
    (the schema history of the checkpoints, for tables whose binlog is read from an older position).
    ``targets``: plan only what these Paimon tables need (their source tables, and the other tables those sources
    are routed into, so that merged schemas come out as in the whole plan): describing and compiling one table
    instead of every captured one is what keeps per-table work (a table's checks, its reporting) from growing with
    the pipeline. The result may hold more targets than asked; ``restrict`` it."""
    ctx = transform_context(config)
    router = Router(config.routes, mode=config.route_mode, file=config.path)
    sources: dict[TableId, SourcePlan] = {}
    planned: dict[TableId, TargetPlan] = {}
    schemas = schemas or {}
    # A table dropped upstream after its checkpoint is still read (from its schema history) up to its DROP TABLE,
    # so the rows written before the drop are not lost.
    captured = captured_tables(config, sorted(set(source.list_tables()) | set(schemas)))
    if targets is not None:
        captured = _feeding(router, captured, targets)
    described = source.describe_tables([t for t in captured if t not in schemas])
    for table_id in captured:
        table = schemas.get(table_id) or described[table_id]
        transform = compile_transform(select_rule(config.transforms, table_id), table, ctx)
        plan = SourcePlan(table, transform, router.targets(table_id))
        sources[table_id] = plan
        for target in plan.targets:
            partition_keys = config.sink.partition_keys.get(target, transform.partition_keys)
            existing = planned.get(target)
            if existing is None:
                planned[target] = TargetPlan(target, transform.output_schema, list(transform.primary_keys),
                                             list(partition_keys), dict(transform.table_options), table.comment,
                                             [plan])
                continue
            existing.sources.append(plan)
    _merge_routed_schemas(config, planned)
    return PipelinePlan(sources, planned)


def _feeding(router: Router, captured: list[TableId], targets: set[TableId]) -> list[TableId]:
    """The captured tables routed into ``targets``, closed over the routes: a source routed into a wanted table
    and into another brings that table's other sources too (routing needs no description, only names)."""
    routes = {table_id: set(router.targets(table_id)) for table_id in captured}
    wanted = set(targets)
    while True:
        feeding = [t for t in captured if routes[t] & wanted]
        reached = set().union(*(routes[t] for t in feeding)) if feeding else set()
        if reached <= wanted:
            return feeding
        wanted |= reached


def _merge_routed_schemas(config: PipelineConfig, targets: dict[TableId, TargetPlan]) -> None:
    """Many-to-one routes: the Paimon table gets the widest common schema of its sources (keys, partitions and
    options of the first one), and each source's rows are coerced into it (lakecdc.transform.routes)."""
    for target_plan in targets.values():
        if len(target_plan.sources) > 1:
            schemas = [(str(p.source.table_id), p.transform.output_schema) for p in target_plan.sources]
            target_plan.schema = merge_schemas(schemas, target_plan.primary_keys, file=config.path,
                                               target=target_plan.target)
    feeds: dict[TableId, tuple[SourcePlan, list[TargetPlan]]] = {}
    for target_plan in targets.values():
        for source_plan in target_plan.sources:
            feeds.setdefault(source_plan.source.table_id, (source_plan, []))[1].append(target_plan)
    for source_plan, fed in feeds.values():
        wanted = {str(t.schema) for t in fed}
        if len(wanted) > 1:
            raise PipelineConfigError(
                f"table {source_plan.source.table_id} is routed into tables with different merged schemas "
                f"({', '.join(str(t.target) for t in fed)}); lakecdc coerces a table's rows into one schema only: "
                "use route-mode FIRST_MATCH or make the projections agree", file=config.path, path="route")
        schema = fed[0].schema
        if not source_plan.transform.output_schema.equals(schema):
            source_plan.transform = CoercedTransform(source_plan.transform, schema,
                                                     getattr(source_plan.transform, "_zone", "UTC"))


def soft_delete_column(config: PipelineConfig, plan: TargetPlan) -> str | None | Literal[False]:
    """For a SOFT_DELETE table, the output column carrying ``__data_event_type__`` unchanged (None when it has
    none); False when the table does not soft-delete."""
    soft = [s for s in plan.sources if s.transform.converter == SOFT_DELETE]
    if not soft:
        return False
    rule = select_rule(config.transforms, soft[0].source.table_id)
    if rule is None or not rule.projection:
        return None
    for item in parse_projection(rule.projection):
        if not item.star and item.bare_column == DATA_EVENT_TYPE:
            return item.alias
    return None
