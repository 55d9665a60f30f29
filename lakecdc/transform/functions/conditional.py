"""Conditional functions: ``CASE`` (both forms), ``IF``, ``COALESCE``, ``IFNULL``, ``NULLIF``.

The result type is the least restrictive common type of the branches (numbers widen, character results are
STRING); branches of different families are rejected when the rule is compiled. A NULL condition does not match.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.transform.functions.base import as_bool, function, require
from lakecdc.transform.functions.comparison import compare
from lakecdc.transform.nodes import Call, Node, eval_where
from lakecdc.transform.types import (binary_of, calcite_type, cast_array, common_decl, common_type, family,
                                     temporal_decl, temporal_precision)


def _branch_type(nodes: list[Node], what: str, max_precision: int) -> pa.DataType:
    """The least restrictive type of the branches; NULL (untyped) when every branch is, as the columns are while a
    rule is validated without its table's schema, so that an enclosing comparison or function still type-checks
    (an untyped output column becomes a nullable STRING)."""
    return common_type([n.dtype for n in nodes], what, max_precision)


def _typed(call: Call, branches: list[Node]) -> Call:
    """``call`` with the declared type Calcite's least restrictive type gives its branches (a capped temporal
    precision, a binary length, the integer type of TINYINT products)."""
    call.decl = common_decl([(n.dtype, n.decl) for n in branches], call.dtype)
    return call


def _cond(arr: pa.Array) -> pa.Array:
    """``isTrue(c)``: NULL conditions do not match."""
    return pc.fill_null(as_bool(arr), False)


def _cast_branch(arr: pa.Array, out: pa.DataType) -> pa.Array:
    return cast_array(arr, out) if not isinstance(out, pa.ExtensionType) else arr


def _first_non_null(arrays: list[pa.Array]) -> pa.Array:
    """``pc.coalesce``, also of VARIANT values (an extension type, coalesced on its storage)."""
    if arrays and isinstance(arrays[0].type, pa.ExtensionType):
        kind = arrays[0].type
        return pa.ExtensionArray.from_storage(kind, pc.coalesce(*[
            a.storage if isinstance(a.type, pa.ExtensionType) else a.cast(kind.storage_type) for a in arrays]))
    return pc.coalesce(*arrays)


def _choose(kernel, out: pa.DataType, *arrays: pa.Array) -> pa.Array:
    """``pc.if_else`` / ``pc.case_when`` over branch values, also of VARIANT values (an extension type: chosen on
    its storage, then wrapped again)."""
    if not isinstance(out, pa.ExtensionType):
        return kernel(*arrays)
    plain = [a.storage if isinstance(a.type, pa.ExtensionType) else
             a.cast(out.storage_type) if pa.types.is_null(a.type) else a for a in arrays]
    return pa.ExtensionArray.from_storage(out, kernel(*plain))


def _exact_type(out: pa.DataType, branches: list[Node]) -> pa.DataType:
    """The type CASE, COALESCE and IF carry their DECIMAL values in: the branches' largest scale. Flink CDC compiles
    them to Java ternaries that pass each branch's BigDecimal through as it is; the declared (least restrictive)
    type, whose scale may be smaller (``CASE ... THEN decimal_10_2 ELSE bigint END`` is DECIMAL(19, 0)), rounds
    only the output column. (IFNULL and the ARRAY/MAP/ROW constructors do convert their operands to the declared
    type, castToBigDecimal in JaninoCompiler, and round inside the expression.)"""
    if not pa.types.is_decimal(out):
        return out
    scale = max([out.scale] + [b.dtype.scale for b in branches if pa.types.is_decimal(b.dtype)])
    return out if scale == out.scale else pa.decimal128(38, scale)


@function("IF", min_args=3, max_args=3)
def _if(args, site):
    require(args[0], ("boolean",), "IF condition")
    out = _branch_type(args[1:], "IF", site.max_precision)
    inner = _exact_type(out, args[1:])

    def run(env, nodes):  # each branch only on the rows that take it (a ternary in Flink CDC's Java)
        cond = _cond(nodes[0].eval(env))
        return _choose(pc.if_else, inner, cond, _cast_branch(eval_where(nodes[1], env, cond), inner),
                       _cast_branch(eval_where(nodes[2], env, pc.invert(cond)), inner))
    call = Call(run, args, out, site.sql, lazy=True)
    # IF's type (TransformSqlReturnTypes.NUMERIC_FROM_ARG1_DEFAULT1): the least restrictive one of two numbers, else
    # the type of the first branch: IF(c, ts_0, ts_3) is TIMESTAMP(0), IF(c, binary_50, varbinary_50) BINARY(50)
    if all(family(a.dtype) in ("numeric", "null") for a in args[1:]):
        return _typed(call, args[1:])
    first = args[1]
    kind = family(first.dtype)
    if kind in ("timestamp", "timestamp_ltz", "time"):
        call.decl = temporal_decl(first.dtype, temporal_precision(first.dtype, first.decl))
    elif kind == "binary":
        var, length = binary_of(first.dtype, first.decl)
        call.decl = f"{'VARBINARY' if var else 'BINARY'}({length})"
    else:
        call.decl = first.decl
    return call


@function("CASE", min_args=2, max_args=None, operator=True)
def _case(args, site):
    """args = [cond1, value1, cond2, value2, ..., (else)]; no ELSE → NULL."""
    pairs = [(args[i], args[i + 1]) for i in range(0, len(args) - 1, 2)]
    default = args[-1] if len(args) % 2 else None
    for cond, _ in pairs:
        require(cond, ("boolean",), "CASE WHEN condition")
    values = [v for _, v in pairs] + ([default] if default is not None else [])
    out = _branch_type(values, "CASE", site.max_precision)
    inner = _exact_type(out, values)

    def run(env, nodes):
        # WHEN conditions and THEN values are evaluated only on the rows that reach them, as the nested
        # ternaries Flink CDC compiles CASE to.
        pending = pa.repeat(pa.scalar(True), env.num_rows)
        conds, vals = [], []
        for cond_node, value_node in pairs:
            cond = pc.and_(pending, _cond(eval_where(cond_node, env, pending)))
            conds.append(cond)
            vals.append(_cast_branch(eval_where(value_node, env, cond), inner))
            pending = pc.and_(pending, pc.invert(cond))
        if default is not None:
            vals.append(_cast_branch(eval_where(default, env, pending), inner))
        names = [f"c{i}" for i in range(len(conds))]
        return _choose(pc.case_when, inner, pa.StructArray.from_arrays(conds, names=names), *vals)
    return _typed(Call(run, args, out, site.sql, lazy=True), values)


@function("COALESCE", min_args=1, max_args=None)
def _coalesce(args, site):
    out = _branch_type(args, "COALESCE", site.max_precision)
    inner = _exact_type(out, args)  # Calcite rewrites COALESCE to a CASE
    return _typed(Call(lambda env, xs: _first_non_null([_cast_branch(x, inner) for x in xs]), args, out, site.sql),
                  args)


@function("IFNULL", min_args=2, max_args=2)
def _ifnull(args, site):
    """Like COALESCE, with Flink SQL's IFNULL type: a NOT NULL value keeps its own type (the replacement is never
    used); otherwise the common type, NOT NULL when the replacement is NOT NULL (Flink CDC's one exception)."""
    if not args[0].nullable and not pa.types.is_null(args[0].dtype):
        _branch_type(args, "IFNULL", site.max_precision)  # the same type check
        out = calcite_type(args[0].dtype, site.max_precision)
        # declared NOT NULL is not never NULL: LPAD('a', -1, 'x') and PARSE_JSON(NULL) are declared NOT NULL and give
        # NULL, and Flink CDC's ifNull(a, b) then takes b (converted to a's type)
        node = Call(lambda env, xs: _first_non_null([_cast_branch(xs[0], out), _cast_branch(xs[1], out)]), args, out,
                    site.sql, nullable=False)
        node.decl = args[0].decl
    else:
        out = _branch_type(args, "IFNULL", site.max_precision)
        node = _typed(Call(lambda env, xs: _first_non_null([_cast_branch(x, out) for x in xs]), args, out, site.sql,
                           nullable=args[0].nullable and args[1].nullable), args)
    node.declares_nullability = True  # the one computed column whose NOT NULL reaches the sink (Flink CDC)
    return node


@function("NULLIF", min_args=2, max_args=2)
def _nullif(args, site):
    """NULL when ``a`` equals ``b`` (numbers by value across types), else ``a``; the type of ``a``."""
    eq = compare("=", args[0], args[1], site.sql)
    # ARG0_FORCE_NULLABLE; an untyped first argument (NULL, or a column during schema-free validation) takes the
    # second one's type, so an enclosing IFNULL/COALESCE still type-checks.
    out = calcite_type(next((a.dtype for a in args if not pa.types.is_null(a.dtype)), pa.null()), site.max_precision)

    def run(env, xs):
        return pc.if_else(xs[1], pa.scalar(None, out), _cast_branch(xs[0], out))
    call = Call(run, [args[0], eq], out, site.sql)
    call.decl = args[0].decl  # ARG0_FORCE_NULLABLE
    return call
