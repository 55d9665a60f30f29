"""Transform rules (the YAML ``transform:`` list): rule selection, validation, compilation and batch application.

Semantics follow Flink CDC 3.6+ (its transform documentation and code): the first rule whose ``source-table`` matches
is the table's only rule; the projection is evaluated per image, then the filter on the projected row (names resolve to
projected columns, then source columns, then metadata), then UPDATE splitting (an UPDATE whose before image alone
passes becomes a DELETE, whose after image alone passes becomes an INSERT), then the ``SOFT_DELETE`` converter
(a DELETE becomes an INSERT of the projected before image; ``__data_event_type__`` keeps the original kind).

Deviations (for the compatibility table): ``__namespace_name__`` is declared nullable (it is NULL for MySQL, whose
tables have no namespace; Flink declares it NOT NULL, which Paimon's writer then refuses to fill with NULL); a
source column named ``op_ts`` shadows the ``op_ts`` metadata column; a projection that drops an upstream primary-key
column without ``primary-keys`` is rejected (Flink produces an inconsistent schema); a NULL value in a primary-key
column fails the batch with a message.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.errors import ExpressionError, LakeCdcError, PipelineConfigError
from lakecdc.model import (DECLARED_TYPE_KEY, DELETE, INSERT, OP_COLUMN, OP_TS_COLUMN, UPDATE_AFTER, UPDATE_BEFORE,
                           ChangeBatch, SourceColumn, SourceTable, TableId)
from lakecdc.selectors import TableSelector
from lakecdc.transform.metadata_columns import MetadataColumn, check_declared_metadata
from lakecdc.transform.expressions import (DATA_EVENT_TYPE, METADATA_COLUMNS, NAMESPACE_NAME, OP_TS, SCHEMA_NAME,
                                           TABLE_NAME, Compiler, ProjectionItem, check_tree, located,
                                           normalise_projection, parse_filter, parse_projection)
from lakecdc.transform.nodes import ColumnRef, EvalEnv, Node, current_millis
from lakecdc.transform.types import (VARIANT, calcite_name, conform, decl_for, declared_arrow, family, flink_name,
                                     is_variant_field, resolve_zone, variant_field, variant_to_storage)

SOFT_DELETE = "SOFT_DELETE"


@dataclass
class TransformRuleConfig:
    """One item of the YAML ``transform:`` list (keys already checked by the config layer)."""

    index: int
    source_table: str
    projection: str | None = None
    filter: str | None = None
    primary_keys: str | None = None
    partition_keys: str | None = None
    table_options: str | None = None
    table_options_delimiter: str = ","
    converter_after_transform: str | None = None
    description: str | None = None

    @property
    def path(self) -> str:
        return f"transform[{self.index}]"

    @property
    def soft_delete(self) -> bool:
        """``converter-after-transform: SOFT_DELETE``: a MySQL delete marks the row deleted instead of removing it."""
        return (self.converter_after_transform or "").strip().upper() == SOFT_DELETE


@dataclass
class TransformContext:
    """Pipeline-level settings the rules are validated and compiled with."""

    local_time_zone: str = "UTC"
    metadata_list: frozenset[str] = frozenset()
    udfs: dict[str, Callable] = field(default_factory=dict)
    source_file: str | None = None
    # pipeline.lakecdc.metadata-columns (FLIP-107 style, see lakecdc.transform.metadata_columns)
    metadata_columns: tuple[MetadataColumn, ...] = ()
    # pipeline.transform.decimal.precision.mode: UP_TO_19 (default) or UP_TO_38
    decimal_precision: int = 19


@functools.lru_cache(maxsize=256)
def _selector(text: str) -> TableSelector:
    return TableSelector(text)


def select_rule(rules: list[TransformRuleConfig], table_id: TableId) -> TransformRuleConfig | None:
    """The first rule (YAML order) whose ``source-table`` matches ``table_id``; None = pass-through."""
    for rule in rules:
        if _selector(rule.source_table).matches(table_id):
            return rule
    return None


# ------------------------------------------------------------------------------------------------ validation

def _error(ctx: TransformContext, path: str, message: str, cause: Exception | None = None) -> PipelineConfigError:
    """The config error at ``path``; an expression error ``cause`` gives its position in the expression."""
    return PipelineConfigError(message, file=ctx.source_file, path=path, offset=getattr(cause, "offset", None))


def _key_list(text: str | None) -> list[str] | None:
    if text is None or not text.strip():
        return None
    return [k.strip() for k in text.split(",")]


def parse_table_options(text: str | None, delimiter: str = ",") -> dict[str, str]:
    """``k1=v1,k2=v2`` → dict (split on the delimiter, then on the first ``=``; both sides trimmed)."""
    options: dict[str, str] = {}
    if text is None or not text.strip():
        return options
    for item in text.split(delimiter or ","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"table option {item.strip()!r} is not 'key=value' (options are separated by "
                             f"{delimiter!r}; set table-options.delimiter if values contain it)")
        options[key.strip()] = value.strip()
    return options


def _converter(rule: TransformRuleConfig, ctx: TransformContext) -> str | None:
    value = rule.converter_after_transform
    if value is None or not value.strip():
        return None
    if value.strip().upper() != SOFT_DELETE:
        raise _error(ctx, f"{rule.path}.converter-after-transform",
                     f"Failed to find the converter {value.strip()!r}; the only converter is SOFT_DELETE")
    return SOFT_DELETE


def _check_op_ts(names: list[str], ctx: TransformContext, path: str) -> None:
    if OP_TS in names and OP_TS not in ctx.metadata_list and all(c.name != OP_TS for c in ctx.metadata_columns):
        raise _error(ctx, path, "op_ts is used but the source's metadata.list does not contain op_ts "
                                "(add 'metadata.list: op_ts' to the source block)")


def validate_rule(rule: TransformRuleConfig, ctx: TransformContext) -> None:
    """Schema-free checks of one rule: selector, syntax, functions, aliases, metadata, converter, options."""
    TableSelector(rule.source_table, file=ctx.source_file, path=f"{rule.path}.source-table")
    if rule.projection is not None and rule.projection.strip():
        path = f"{rule.path}.projection"
        try:
            items = parse_projection(rule.projection)
        except ExpressionError as exc:
            raise _error(ctx, path, str(exc), exc) from None
        names: list[str] = []
        for item in items:
            if item.star:
                continue
            if item.alias in METADATA_COLUMNS and item.bare_column != item.alias:
                error = located(ExpressionError(f"Column name {item.alias} is reserved and shading it is not "
                                                f"allowed (in {item.expression.sql()} AS {item.alias})"),
                                item.expression,
                                normalise_projection(rule.projection))
                raise _error(ctx, path, str(error), error)
            try:
                names += check_tree(item.expression, ctx.udfs, text=normalise_projection(rule.projection),
                                    max_precision=ctx.decimal_precision)
            except ExpressionError as exc:
                raise _error(ctx, path, str(exc), exc) from None
        _check_op_ts(names, ctx, path)
    if rule.filter is not None and rule.filter.strip():
        path = f"{rule.path}.filter"
        try:
            names = check_tree(parse_filter(rule.filter), ctx.udfs, text=rule.filter,
                               max_precision=ctx.decimal_precision)
        except ExpressionError as exc:
            raise _error(ctx, path, str(exc), exc) from None
        _check_op_ts(names, ctx, path)
    _converter(rule, ctx)
    try:
        parse_table_options(rule.table_options, rule.table_options_delimiter)
    except ValueError as exc:
        raise _error(ctx, f"{rule.path}.table-options", str(exc)) from None
    for key in ("primary_keys", "partition_keys"):
        keys = _key_list(getattr(rule, key))
        if keys and any(not k for k in keys):
            raise _error(ctx, f"{rule.path}.{key.replace('_', '-')}",
                         f"empty column name in {getattr(rule, key)!r}")


# ----------------------------------------------------------------------------------------------- compilation

_META_TYPES = {NAMESPACE_NAME: (pa.string(), True), SCHEMA_NAME: (pa.string(), False),
               TABLE_NAME: (pa.string(), False), DATA_EVENT_TYPE: (pa.string(), False),
               OP_TS: (pa.int64(), False)}


class CompiledTransform:
    """A rule compiled against one source schema: the output schema plus ``apply`` for change batches."""

    def __init__(self, *, rule_path: str, source: SourceTable, columns: list[tuple[pa.Field, Node]],
                 filter_node: Node | None, primary_keys: list[str], partition_keys: list[str],
                 table_options: dict[str, str], converter: str | None, zone: str,
                 metadata_columns: tuple[MetadataColumn, ...] = ()):
        self.rule_path = rule_path
        self.source = source
        self._columns = columns
        self._filter = filter_node
        self.output_schema = pa.schema([f for f, _ in columns])
        self.primary_keys = primary_keys
        self.partition_keys = partition_keys
        self.table_options = table_options
        self.converter = converter
        self._zone = zone
        self.metadata_columns = metadata_columns
        self.star = False  # the projection has * (or there is no rule): schema changes pass through (as in Flink CDC)

    def __repr__(self) -> str:
        return f"CompiledTransform({self.rule_path}, {self.source.table_id}, {self.output_schema.names})"

    def column_sources(self) -> dict[str, list[str]]:
        """Output column → the source and metadata columns its expression reads, in first-use order (a literal
        reads none). A stable accessor for column lineage; callers tell metadata names from source columns."""
        return {f.name: _referenced_columns(node) for f, node in self._columns}

    def column_expression(self, name: str) -> Node | None:
        """The compiled expression of output column ``name`` (None: no such column)."""
        return next((node for f, node in self._columns if f.name == name), None)

    @property
    def zone(self) -> str:
        """The pipeline's local time zone the expressions are evaluated in."""
        return self._zone

    def apply(self, batch: ChangeBatch) -> pa.Table:
        """Project, filter, split UPDATEs and convert; returns the output columns plus ``OP_COLUMN``."""
        data = batch.data
        n = data.num_rows
        table_id = batch.table.table_id
        ops = data.column(OP_COLUMN).combine_chunks().cast(pa.string())
        source = {name: _time_of_day_millis(data.column(name).combine_chunks()) for name in data.column_names
                  if name not in (OP_COLUMN, OP_TS_COLUMN)}
        metadata: dict[str, Callable[[], pa.Array]] = {
            NAMESPACE_NAME: lambda: pa.nulls(n, pa.string()),
            SCHEMA_NAME: lambda: pa.repeat(pa.scalar(table_id.database), n),
            TABLE_NAME: lambda: pa.repeat(pa.scalar(table_id.table), n),
            DATA_EVENT_TYPE: lambda: ops,
            OP_TS: lambda: data.column(OP_TS_COLUMN).combine_chunks().cast(pa.int64()),
            **{c.name: functools.partial(c.values, data, table_id, ops) for c in self.metadata_columns},
        }
        env = EvalEnv(num_rows=n, source=source, metadata=metadata, zone=self._zone, now_ms=current_millis())
        arrays = []
        try:
            for f, node in self._columns:
                arr = node.eval(env)
                if is_variant_field(f):  # filters read the JSON form, Paimon gets the Variant encoding
                    env.outputs[f.name] = arr
                    arrays.append(variant_to_storage(arr))
                    continue
                if arr.type != f.type:
                    arr = conform(arr, f.type)
                arrays.append(arr)
                env.outputs[f.name] = arr
            keep = None
            if self._filter is not None:
                keep = pc.fill_null(self._filter.eval(env).cast(pa.bool_()), False)
        except KeyError as exc:
            raise ExpressionError(f"{self.rule_path}: column {exc} is missing from the batch of "
                                  f"{table_id}") from None
        except ExpressionError as exc:
            raise ExpressionError(f"{self.rule_path} on {table_id}: {exc}") from None

        out_ops = self._row_kinds(ops, keep, table_id)
        table = pa.Table.from_arrays(arrays + [out_ops], schema=self.output_schema.append(
            pa.field(OP_COLUMN, pa.string(), nullable=False)))
        if keep is not None:
            table = table.filter(keep)
        for name in self.primary_keys:
            nulls = table.column(name).null_count
            if nulls:
                raise ExpressionError(f"{self.rule_path} on {table_id}: primary key column {name!r} is NULL in "
                                      f"{nulls} row(s)")
        return table

    def _row_kinds(self, ops: pa.Array, keep: pa.Array | None, table_id: TableId) -> pa.Array:
        out = ops
        if keep is not None and len(ops):
            is_before = pc.equal(ops, UPDATE_BEFORE)
            is_after = pc.equal(ops, UPDATE_AFTER)
            next_op = pa.concat_arrays([ops[1:], pa.array([""])])
            prev_op = pa.concat_arrays([pa.array([""]), ops[:-1]])
            paired = pc.and_(pc.or_(pc.invert(is_before), pc.equal(next_op, UPDATE_AFTER)),
                             pc.or_(pc.invert(is_after), pc.equal(prev_op, UPDATE_BEFORE)))
            if not pc.all(paired).as_py():
                raise LakeCdcError(f"{self.rule_path} on {table_id}: malformed change batch, an UPDATE is not a "
                                   "-U row immediately followed by its +U row")
            next_keep = pa.concat_arrays([keep[1:], pa.array([False])])
            prev_keep = pa.concat_arrays([pa.array([False]), keep[:-1]])
            # 3.6+ UPDATE splitting: only the before image passes → DELETE; only the after image → INSERT.
            out = pc.if_else(pc.and_(is_before, pc.invert(next_keep)), DELETE, out)
            out = pc.if_else(pc.and_(is_after, pc.invert(prev_keep)), INSERT, out)
        if self.converter == SOFT_DELETE:
            out = pc.if_else(pc.equal(out, DELETE), INSERT, out)
        return out


def _referenced_columns(node: Node) -> list[str]:
    """Names of the columns a compiled expression reads (walks ``Call`` arguments; lazy calls keep them too)."""
    names: list[str] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, ColumnRef):
            if current.name not in names:
                names.append(current.name)
            continue
        stack.extend(reversed(list(getattr(current, "args", None) or [])))
    return names


def _available(source: SourceTable, ctx: TransformContext) -> str:
    meta = list(METADATA_COLUMNS) + ([OP_TS] if OP_TS in ctx.metadata_list else [])
    meta += [c.name for c in ctx.metadata_columns if c.name not in meta]
    return f"available columns: {', '.join(source.column_names)}; metadata columns: {', '.join(meta)}"


def compile_transform(rule: TransformRuleConfig | None, source: SourceTable,
                      ctx: TransformContext) -> CompiledTransform:
    """Compile ``rule`` (None = pass-through) against the schema of ``source``."""
    if rule is None:
        rule = TransformRuleConfig(index=-1, source_table=str(source.table_id))
        rule_path = "transform (pass-through)"
    else:
        validate_rule(rule, ctx)
        rule_path = rule.path
    try:
        zone = resolve_zone(ctx.local_time_zone)
    except ExpressionError as exc:
        raise PipelineConfigError(str(exc), file=ctx.source_file, path="pipeline.local-time-zone") from None
    source_fields = {c.name: c for c in source.columns}

    check_declared_metadata(ctx.metadata_columns, source, ctx.source_file)
    declared = {c.name: c for c in ctx.metadata_columns}

    def metadata_ref(name: str, path: str) -> Node | None:
        if name in declared:  # declared columns shadow the built-in op_ts
            return ColumnRef("metadata", name, declared[name].arrow_type, declared[name].nullable)
        if name in METADATA_COLUMNS:
            dtype, nullable = _META_TYPES[name]
            return ColumnRef("metadata", name, dtype, nullable)
        if name == OP_TS:
            _check_op_ts([OP_TS], ctx, path)
            return ColumnRef("metadata", OP_TS, pa.int64(), False)
        return None

    def projection_resolver(path: str):
        def resolve(name: str) -> Node:
            if name in source_fields:
                return _source_ref(source_fields[name])
            ref = metadata_ref(name, path)
            if ref is None:
                raise ExpressionError(f"unknown column {name!r} in {rule_path}; {_available(source, ctx)}")
            return ref
        return resolve

    # --- projection
    path = f"{rule_path}.projection"
    text = rule.projection if rule.projection is not None and rule.projection.strip() else "*"
    try:
        items = parse_projection(text)
    except ExpressionError as exc:
        raise _error(ctx, path, str(exc), exc) from None
    compiler = Compiler(projection_resolver(path), ctx.udfs, max_precision=ctx.decimal_precision,
                        text=normalise_projection(text))
    names: list[str] = []
    columns: dict[str, tuple[pa.Field, Node]] = {}

    def put(name: str, f: pa.Field, node: Node) -> None:
        if name not in columns:
            names.append(name)
        columns[name] = (f, node)  # a later item with the same name replaces the earlier one in place

    for item in items:
        if item.star:
            for c in source.columns:
                put(c.name, _source_field(c), _source_ref(c))
            for m in ctx.metadata_columns:  # FLIP-107: * includes the persisted (non-VIRTUAL) metadata columns
                if not m.virtual:
                    put(m.name, m.field, ColumnRef("metadata", m.name, m.arrow_type, m.nullable))
            continue
        try:
            node = compiler.compile(item.expression)
            output = _output_field(item, node)
        except ExpressionError as exc:
            exc = located(exc, item.expression, normalise_projection(text))
            raise _error(ctx, path, str(exc), exc) from None
        if item.bare_column is not None and isinstance(node, ColumnRef) and node.kind == "source":
            output = _source_field(source_fields[node.name]).with_name(output.name)  # comment, VARCHAR(n)
        put(item.output_name, output, node)

    # --- keys
    pk_path = f"{rule_path}.primary-keys"
    primary_keys = _key_list(rule.primary_keys)
    if primary_keys is None:
        primary_keys = list(source.primary_keys)
        for key in primary_keys:
            if key not in columns:
                raise PipelineConfigError(
                    f"the projection drops primary key column {key!r} of {source.table_id}; add it to the "
                    f"projection or set primary-keys (output columns: {', '.join(names)})",
                    file=ctx.source_file, path=path)
    partition_keys = _key_list(rule.partition_keys) or []
    for key_path, keys, what in ((pk_path, primary_keys, "primary key"),
                                 (f"{rule_path}.partition-keys", partition_keys, "partition key")):
        for key in keys:
            if key not in columns:
                raise PipelineConfigError(f"{what} column {key!r} is not an output column of the projection "
                                          f"(output columns: {', '.join(names)})", file=ctx.source_file,
                                          path=key_path)
            if is_variant_field(columns[key][0]):  # Paimon keys and partitions on atomic types only
                raise PipelineConfigError(f"{what} column {key!r} is a VARIANT, which Paimon cannot use as a "
                                          f"{what}: key on another column, or CAST({key} AS STRING) AS ...",
                                          file=ctx.source_file, path=key_path)
    for key in primary_keys:
        f, node = columns[key]
        columns[key] = (f.with_nullable(False), node)

    # --- filter
    filter_node = None
    if rule.filter is not None and rule.filter.strip():
        fpath = f"{rule_path}.filter"
        outputs = {name: columns[name][0] for name in names}

        def filter_resolve(name: str) -> Node:
            if name in outputs:
                dtype = VARIANT if is_variant_field(outputs[name]) else outputs[name].type
                ref = ColumnRef("output", name, dtype, outputs[name].nullable)
                ref.decl = decl_for(ref.dtype, (outputs[name].metadata or {}).get(DECLARED_TYPE_KEY, b"").decode()
                                    or None)
                return ref
            return projection_resolver(fpath)(name)

        try:
            filter_node = Compiler(filter_resolve, ctx.udfs, max_precision=ctx.decimal_precision,
                                   text=rule.filter).compile(parse_filter(rule.filter))
            if family(filter_node.dtype) not in ("boolean", "null"):
                raise ExpressionError(f"the filter must be a BOOLEAN expression, got "
                                      f"{flink_name(filter_node.dtype)}: {rule.filter.strip()}")
        except ExpressionError as exc:
            raise _error(ctx, fpath, str(exc), exc) from None

    try:
        options = parse_table_options(rule.table_options, rule.table_options_delimiter)
    except ValueError as exc:
        raise PipelineConfigError(str(exc), file=ctx.source_file, path=f"{rule_path}.table-options") from None
    compiled = CompiledTransform(rule_path=rule_path, source=source, columns=[columns[n] for n in names],
                                 filter_node=filter_node, primary_keys=primary_keys, partition_keys=partition_keys,
                                 table_options=options, converter=_converter(rule, ctx), zone=zone,
                                 metadata_columns=ctx.metadata_columns)
    compiled.star = any(item.star for item in items)  # as in Flink CDC: new upstream columns reach the sink via * only
    return compiled


def _source_field(c: SourceColumn) -> pa.Field:
    """A source column forwarded as an output column: its type, comment and declared type (a VARIANT as Paimon's
    Variant encoding)."""
    f = c.sink_field()
    return variant_field(c.name).with_metadata({**(f.metadata or {}), DECLARED_TYPE_KEY: b"VARIANT"}) \
        if family(c.arrow_type) == "variant" else f


def _source_ref(c: SourceColumn) -> ColumnRef:
    """A source column as an operand: its values, and its declared precision or length (TIMESTAMP(0) over
    nanosecond values, BINARY(640)) for Calcite's types of the expressions that read it."""
    ref = ColumnRef("source", c.name, c.arrow_type, c.nullable)
    ref.decl = decl_for(c.arrow_type, c.declared_type)
    return ref


def _time_of_day_millis(arr: pa.Array) -> pa.Array:
    """A TIME column's values as Flink CDC holds them: its TimeData keeps milliseconds of day (fromNanoOfDay and
    fromMicroOfDay floor), so a TIME(6) value's microseconds never reach an expression (``CAST(time_6 AS
    VARCHAR)`` is ``21:48:25.123``, FlinkPipelineTransformITCase.testDateAndTimeCastingFunctions); Paimon stores
    TIME as milliseconds of day too."""
    if not pa.types.is_time64(arr.type):
        return arr
    return arr.cast(pa.time32("ms"), safe=False).cast(arr.type)


def _output_field(item: ProjectionItem, node: Node) -> pa.Field:
    """Flink CDC's projection types: bare references keep type and nullability; computed columns are nullable (IFNULL
    excepted), of Calcite's type (a capped TIMESTAMP(3) precision, VARBINARY(n) lengths: the declared type travels
    as field metadata to the Paimon column, the values keep their digits as Flink CDC's do); CHAR/VARCHAR results
    are STRING; an untyped NULL becomes a nullable STRING."""
    kind = family(node.dtype)
    if kind == "variant":  # NOT NULL as IFNULL declares it (IFNULL(v, PARSE_JSON('{}')), an explicit VARIANT)
        return variant_field(item.output_name, nullable=not node.declares_nullability or node.nullable)
    if kind == "interval":
        raise ExpressionError(f"column {item.alias!r} is an INTERVAL ({node.sql}); add it to a date or time")
    dtype = pa.string() if pa.types.is_null(node.dtype) else node.dtype
    if item.bare_column is not None and isinstance(node, ColumnRef):
        return pa.field(item.alias, dtype, nullable=node.nullable)
    nullable = node.nullable if node.declares_nullability else True
    declared = calcite_name(dtype, node.decl)
    dtype = declared_arrow(dtype, node.decl)
    metadata = {DECLARED_TYPE_KEY: declared.encode()} if declared != flink_name(dtype) else None
    return pa.field(item.alias, dtype, nullable=nullable, metadata=metadata)
