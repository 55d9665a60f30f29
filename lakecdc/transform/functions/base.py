"""The function registry and the helpers every function module uses.

A builder receives the compiled argument nodes and the call ``Site`` (the expression text and the pipeline's
maximum DECIMAL precision), type-checks the arguments and returns a ``Call`` node whose function evaluates whole
columns. Arguments that a kernel needs as a single value (a regex, a date pattern, a position) may still be columns:
``with_scalars`` evaluates the kernel once per distinct value of those arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.errors import ExpressionError
from lakecdc.transform.nodes import Call, EvalEnv, Literal, Node
from lakecdc.transform.types import exact_decimal, family, flink_name


@dataclass(frozen=True)
class Site:
    """Where a function is called: the SQL text of the call and the maximum DECIMAL precision (19 or 38)."""

    sql: str
    max_precision: int = 19


Builder = Callable[[list[Node], Site], Node]


@dataclass(frozen=True)
class FunctionDef:
    name: str
    build: Builder
    min_args: int
    max_args: int | None  # None = any number

    def check_arity(self, count: int) -> None:
        if count < self.min_args or (self.max_args is not None and count > self.max_args):
            if self.max_args == self.min_args:
                expected = str(self.min_args)
            elif self.max_args is None:
                expected = f"at least {self.min_args}"
            else:
                expected = f"{self.min_args} to {self.max_args}"
            raise ExpressionError(f"function {self.name} expects {expected} argument(s), got {count}")


FUNCTIONS: dict[str, FunctionDef] = {}
"""User-callable functions, by upper-case name."""

OPERATORS: dict[str, FunctionDef] = {}
"""Operators and syntax forms (``=``, ``+``, ``||``, ``AND``, ``IS NULL``, ``LIKE``, ``IN``, ``BETWEEN``, ``CASE``),
by their SQL spelling."""


def function(*names: str, min_args: int = 1, max_args: int | None = 1, operator: bool = False):
    """Register a builder under one or more (case-insensitive) names."""
    def register(build: Builder) -> Builder:
        table = OPERATORS if operator else FUNCTIONS
        for name in names:
            table[name.upper()] = FunctionDef(name.upper(), build, min_args, max_args)
        return build
    return register


# Calcite's nullability of a built-in call's result (the return type inference of Flink CDC's operator table). Every
# computed output column is declared nullable except IFNULL's, so this shows only through IFNULL: IFNULL(ts,
# LOCALTIMESTAMP) and IFNULL(UPPER('x'), s) are NOT NULL. NOT NULL when every operand is (…_NULLABLE, ARG0,
# TO_NULLABLE inferences):
NOT_NULL_WITH_OPERANDS = frozenset({
    "=", "<>", "<", ">", "<=", ">=", "AND", "OR", "NOT", "LIKE", "SIMILAR TO", "IN", "NOT IN", "BETWEEN",
    "NOT BETWEEN", "BETWEEN SYMMETRIC", "NOT BETWEEN SYMMETRIC", "+", "-", "*", "/", "%", "MOD", "NEG", "||",
    "ABS", "CEIL", "CEILING", "FLOOR", "ROUND", "UPPER", "LOWER", "TRIM", "LTRIM", "RTRIM", "BTRIM", "CHAR_LENGTH",
    "CHARACTER_LENGTH", "CONCAT", "CONCAT_WS", "LPAD", "RPAD", "REPLACE", "REPEAT", "LEFT", "RIGHT", "STARTSWITH",
    "ENDSWITH", "TO_BASE64", "FROM_BASE64", "FROM_BASE64_BINARY", "LOCATE", "INSTR", "POSITION", "OVERLAY",
    "REGEXP_REPLACE", "YEAR", "QUARTER", "MONTH", "WEEK", "DAYOFYEAR", "DAYOFMONTH", "DAYOFWEEK", "HOUR", "MINUTE",
    "SECOND", "UNIX_TIMESTAMP", "TIMESTAMPADD", "IF", "COALESCE", "CARDINALITY", "ARRAY_CONTAINS",
    "ARRAY_POSITION"})
# NOT NULL whatever the operands (BOOLEAN_NOT_NULL, explicit types: ReturnTypes.explicit(VARIANT) of PARSE_JSON and
# TRY_PARSE_JSON, value constructors); a declaration, not a promise: PARSE_JSON(NULL) still gives NULL:
NEVER_NULL = frozenset({
    "IS NULL", "IS NOT NULL", "IS TRUE", "IS NOT TRUE", "IS FALSE", "IS NOT FALSE", "IS DISTINCT FROM",
    "IS NOT DISTINCT FROM", "UUID", "LOCALTIMESTAMP", "CURRENT_TIMESTAMP", "NOW", "CURRENT_TIME", "LOCALTIME",
    "CURRENT_DATE", "ARRAY", "MAP", "ROW", "PARSE_JSON", "TRY_PARSE_JSON"})
# Every other built-in (REGEXP_EXTRACT, SUBSTR, TO_TIMESTAMP, DATE_FORMAT, TIMESTAMPDIFF, NULLIF, TRY_CAST, ELEMENT,
# subscripts: FORCE_NULLABLE) stays nullable; CAST, IFNULL and CASE decide their own.


def calcite_nullability(definition: FunctionDef, args: Sequence[Node], node: Node) -> Node:
    """``node`` (the call of built-in ``definition`` on ``args``) declared NOT NULL where Calcite declares it."""
    name = definition.name
    builtin = FUNCTIONS.get(name) is definition or OPERATORS.get(name) is definition  # not a UDF of that name
    if not builtin or not node.nullable or any(node is a for a in args):
        return node
    operands = [a for a in args if not hasattr(a, "unit_keyword")]  # TIMESTAMPADD's unit is no operand
    if name == "CASE":  # the THEN and ELSE values; without ELSE, NULL
        values = list(args[1::2]) + ([args[-1]] if len(args) % 2 else [])
        node.nullable = not len(args) % 2 or any(v.nullable for v in values)
    elif name in NEVER_NULL or (name in NOT_NULL_WITH_OPERANDS and not any(a.nullable for a in operands)):
        node.nullable = False
    return node


# ------------------------------------------------------------------------------------------------- type checks

def fam(node: Node) -> str:
    return family(node.dtype)


def require(node: Node, families: tuple[str, ...], what: str) -> None:
    """Type check at compile time: NULL literals and untyped validation probes pass every check."""
    f = fam(node)
    if f != "null" and f not in families:
        names = " or ".join(x.upper().replace("TIMESTAMP_LTZ", "TIMESTAMP_LTZ") for x in families)
        raise ExpressionError(f"{what} expects {names}, got {flink_name(node.dtype)} ({node.sql})")


def const(node: Node, what: str):
    if not node.is_const:
        raise ExpressionError(f"{what} must be a literal, got {node.sql}")
    return node.const


def is_null_literal(node: Node) -> bool:
    return node.is_const and node.const is None


def null_of(dtype: pa.DataType, site: Site) -> Node:
    """A typed NULL result (a call on a NULL literal)."""
    return Literal(None, dtype, site.sql)


def false_array(n: int) -> pa.Array:
    return pa.repeat(pa.scalar(False), n)


def as_bool(arr: pa.Array) -> pa.Array:
    return pa.nulls(len(arr), pa.bool_()) if pa.types.is_null(arr.type) else arr


def as_string(arr: pa.Array) -> pa.Array:
    if pa.types.is_null(arr.type):
        return pa.nulls(len(arr), pa.string())
    return arr if arr.type == pa.string() else arr.cast(pa.string())


def where_null(mask: pa.Array, values: pa.Array) -> pa.Array:
    """``values`` with NULL where ``mask`` is TRUE."""
    return pc.if_else(pc.fill_null(mask, False), pa.scalar(None, values.type), values)


def data_error(site: Site, message: str, value: Any = None) -> ExpressionError:
    """A value that Flink CDC would fail the job on: the batch fails with the expression and the value."""
    shown = f" (value {value!r})" if value is not None else ""
    return ExpressionError(f"{site.sql}: {message}{shown}")


def first_value(arr: pa.Array, mask: pa.Array) -> Any:
    """The first value of ``arr`` where ``mask`` is TRUE (for error messages)."""
    picked = arr.filter(pc.fill_null(mask, False))
    return picked[0].as_py() if len(picked) else None


def scatter(base: pa.Array, mask: pa.Array, values: Sequence) -> pa.Array:
    """``base`` with the rows selected by ``mask`` replaced, in order, by ``values``."""
    replacement = values if isinstance(values, pa.Array) else pa.array(list(values), base.type)
    return pc.replace_with_mask(base, pc.fill_null(mask, False), replacement.cast(base.type))


# ------------------------------------------------------------------------------------ per-value evaluation

ScalarKernel = Callable[[EvalEnv, list[pa.Array], list[Any]], pa.Array]


def with_scalars(args: list[Node], fixed: Sequence[int], kernel: ScalarKernel, dtype: pa.DataType, site: Site,
                 *, null_if_scalar_null: bool = True, nullable: bool = True) -> Node:
    """A call whose kernel needs the arguments at positions ``fixed`` as Python values.

    ``kernel(env, arrays, scalars)`` gets the other arguments as arrays (in order) and the fixed ones as values.
    Literal fixed arguments: one kernel call per batch. Column fixed arguments: the rows are grouped by the
    combination of their values (Arrow ``group_by``) and the kernel runs once per group; most real columns used
    as patterns hold few distinct values. A NULL fixed value gives NULL for its rows unless
    ``null_if_scalar_null`` is false (then the kernel sees None)."""
    fixed = tuple(fixed)
    varying = [i for i in range(len(args)) if i not in fixed]
    if all(args[i].is_const for i in fixed):
        values = [args[i].const for i in fixed]
        if null_if_scalar_null and any(v is None for v in values):
            return null_of(dtype, site)
        vary_nodes = [args[i] for i in varying]
        return Call(lambda env, xs: kernel(env, xs, values), vary_nodes, dtype, site.sql, nullable=nullable)

    def run(env: EvalEnv, xs: list[pa.Array]) -> pa.Array:
        keys = [xs[i] for i in fixed]
        arrays = [xs[i] for i in varying]
        return grouped(env, keys, arrays, lambda sub_env, sub, values: (
            pa.nulls(sub_env.num_rows, dtype) if null_if_scalar_null and any(v is None for v in values)
            else kernel(sub_env, sub, values)), dtype)

    return Call(run, args, dtype, site.sql, nullable=nullable)


def grouped(env: EvalEnv, keys: list[pa.Array], arrays: list[pa.Array], kernel: ScalarKernel,
            dtype: pa.DataType) -> pa.Array:
    """Evaluate ``kernel`` once per distinct combination of ``keys`` and scatter the results back in row order."""
    n = env.num_rows
    if n == 0:
        return pa.nulls(0, dtype)
    key_names = [f"k{i}" for i in range(len(keys))]
    table = pa.table({**{name: _groupable(k) for name, k in zip(key_names, keys)},
                      "__row": pa.array(np.arange(n, dtype=np.int64))})
    groups = table.group_by(key_names, use_threads=False).aggregate([("__row", "list")])
    if groups.num_rows == 1:
        values = [keys[i][0].as_py() for i in range(len(keys))]
        return _as_type(kernel(env, arrays, values), dtype, n)
    results, positions = [], []
    rows_column = groups.column("__row_list")
    for g in range(groups.num_rows):
        rows = rows_column[g].values
        first = rows[0].as_py()
        values = [keys[i][first].as_py() for i in range(len(keys))]
        sub_env = EvalEnv(num_rows=len(rows), source={}, metadata={}, zone=env.zone, now_ms=env.now_ms)
        sub = [a.take(rows) for a in arrays]
        results.append(_as_type(kernel(sub_env, sub, values), dtype, len(rows)))
        positions.append(rows.to_numpy(zero_copy_only=False))
    combined = pa.concat_arrays(results)
    order = np.argsort(np.concatenate(positions), kind="stable")
    return combined.take(pa.array(order))


def _groupable(arr: pa.Array) -> pa.Array:
    """Arrow's group_by does not take every type as a key; encode the others as text."""
    t = arr.type
    if pa.types.is_null(t) or pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_floating(t) \
            or pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_decimal(t) \
            or pa.types.is_temporal(t):
        return arr
    if isinstance(t, pa.ExtensionType):
        return arr.storage
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t) or pa.types.is_struct(t):
        # Arrow casts no nested type to text: the values' repr, per row (nested keys, such as an ARRAY_CONTAINS
        # needle of arrays, are rare)
        return pa.array([None if v is None else repr(v) for v in arr.to_pylist()], pa.string())
    return pc.cast(arr, pa.string())


def _as_type(result, dtype: pa.DataType, n: int) -> pa.Array:
    if isinstance(result, pa.ChunkedArray):
        result = result.combine_chunks()
    if isinstance(result, pa.Scalar):
        result = pa.repeat(result, n) if result.is_valid else pa.nulls(n, dtype)
    if result.type != dtype:
        if pa.types.is_null(result.type):
            return pa.nulls(len(result), dtype)
        if pa.types.is_decimal(dtype) and pa.types.is_decimal(result.type):
            return exact_decimal(result)
        if isinstance(dtype, pa.ExtensionType):
            return pa.ExtensionArray.from_storage(dtype, result.cast(dtype.storage_type))
        result = result.cast(dtype)
    return result
