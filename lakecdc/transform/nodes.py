"""Compiled expression nodes: each has an output type, a declared nullability and evaluates a whole column.

``EvalEnv`` carries one batch's columns (source columns, metadata, and for filters the projected columns) plus the
evaluation time and zone; ``Node.eval`` returns a ``pa.Array`` of ``env.num_rows`` values of ``Node.dtype``.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.errors import ExpressionError
from lakecdc.transform.types import exact_decimal

NO_CONST = object()


def current_millis() -> int:
    """The evaluation time of a batch (epoch milliseconds); tests replace it to freeze the clock."""
    return time.time_ns() // 1_000_000


@dataclass
class EvalEnv:
    """The columns one evaluation can read, all of length ``num_rows``.

    ``now_ms`` is the one evaluation time of the batch: Flink CDC gives every event one ``epochTime`` shared by
    its columns and its before/after images; here a whole batch shares it."""

    num_rows: int
    source: dict[str, pa.Array]
    metadata: dict[str, Callable[[], pa.Array]]
    outputs: dict[str, pa.Array] = field(default_factory=dict)
    zone: str = "UTC"
    now_ms: int = 0
    _meta_cache: dict[str, pa.Array] = field(default_factory=dict)

    def meta(self, name: str) -> pa.Array:
        if name not in self._meta_cache:
            self._meta_cache[name] = self.metadata[name]()
        return self._meta_cache[name]

    def _taken_meta(self, name: str, rows: pa.Array) -> pa.Array:
        return self.meta(name).take(rows)

    def subset(self, rows: pa.Array) -> "EvalEnv":
        """The same columns restricted to ``rows`` (indices), taken lazily when an expression reads them."""
        return EvalEnv(num_rows=len(rows), source=_Taken(self.source, rows),
                       metadata={name: functools.partial(self._taken_meta, name, rows) for name in self.metadata},
                       outputs=_Taken(self.outputs, rows), zone=self.zone, now_ms=self.now_ms)


class _Taken(dict):
    """A column mapping whose arrays are taken at some rows on first access."""

    def __init__(self, columns: dict[str, pa.Array], rows: pa.Array):
        super().__init__()
        self._columns = columns
        self._rows = rows

    def __missing__(self, name: str) -> pa.Array:
        value = self._columns[name].take(self._rows)
        self[name] = value
        return value

    def __contains__(self, name: object) -> bool:
        return name in self._columns


def eval_where(node: "Node", env: EvalEnv, mask: pa.Array) -> pa.Array:
    """``node`` evaluated for the rows where ``mask`` is TRUE (the values of the other rows are unspecified).

    Flink CDC's generated Java evaluates the right side of AND/OR and the branches of CASE/IF only for the rows that
    reach them, so a division by zero or an unparseable value on the other rows does not fail the job. The whole
    column is evaluated first (the fast path: kernels run once, nothing is gathered); only when that fails are the
    selected rows evaluated on their own, so an error is raised only when a selected row causes it."""
    mask = pc.fill_null(mask, False)
    count = pc.sum(mask.cast(pa.int64())).as_py() or 0
    if count == 0:
        return pa.nulls(env.num_rows, node.dtype)
    try:
        return node.eval(env)
    except (ExpressionError, pa.ArrowException):
        if count == env.num_rows:
            raise
    rows = pc.indices_nonzero(mask)  # some row failed: evaluate only the rows that reach the expression
    values = node.eval(env.subset(rows))
    # row i of the result is values[k] where rows[k] == i: scatter via a running index of the mask
    index = pc.subtract(pc.cumulative_sum(mask.cast(pa.int64())), 1)
    return values.take(pc.if_else(mask, index, pa.scalar(None, pa.int64())))


class Node:
    """A compiled expression."""

    dtype: pa.DataType
    nullable: bool = True
    const: Any = NO_CONST  # the Python value when the expression is a literal
    sql: str = ""
    # Calcite's nullability (``nullable``) is declared on the output column only for IFNULL (Flink CDC makes every
    # other computed column nullable); inside an expression it decides IFNULL's own nullability.
    declares_nullability: bool = False
    # The declared (Calcite) type's text where the Arrow type ``dtype`` of the values cannot say it: TIMESTAMP(3)
    # over nanosecond values, VARBINARY(65536), TINYINT over Java-int values (lakecdc.transform.types).
    decl: str | None = None

    @property
    def is_const(self) -> bool:
        return self.const is not NO_CONST

    def eval(self, env: EvalEnv) -> pa.Array:  # pragma: no cover - every concrete node overrides it
        raise TypeError(f"{type(self).__name__} is a placeholder node and has no value")


class Literal(Node):
    """A constant. ``value_type`` (default ``dtype``) is the type of its value when the declared type is narrower
    (a 20-digit DECIMAL literal is declared DECIMAL(19, s) in UP_TO_19 but keeps its digits, as a BigDecimal)."""

    def __init__(self, value: Any, dtype: pa.DataType, sql: str = "", value_type: pa.DataType | None = None):
        self.const = value
        self.dtype = dtype
        self.nullable = value is None
        self.sql = sql
        self._value_type = value_type or dtype
        self._scalar: pa.Scalar | None = None

    @property
    def scalar(self) -> pa.Scalar | None:
        """The value as an Arrow scalar (None for NULL), made at first use: pyarrow imports pandas at its first
        conversion of a Python value, a third of a second that compiling the transforms of a run with nothing to
        read does not need (docs/benchmarks.md, the fixed cost of a run)."""
        if self._scalar is None and not (pa.types.is_null(self.dtype) or self.const is None):
            self._scalar = pa.scalar(self.const, self._value_type)
        return self._scalar

    def eval(self, env: EvalEnv) -> pa.Array:
        if self.scalar is None:
            return pa.nulls(env.num_rows, self.dtype)
        return pa.repeat(self.scalar, env.num_rows)


class ColumnRef(Node):
    """A reference to a source column, a metadata column or (in filters) a projected column."""

    def __init__(self, kind: str, name: str, dtype: pa.DataType, nullable: bool):
        self.kind = kind  # "source" | "metadata" | "output"
        self.name = name
        self.dtype = dtype
        self.nullable = nullable
        self.sql = name

    def eval(self, env: EvalEnv) -> pa.Array:
        if self.kind == "source":
            return env.source[self.name]
        if self.kind == "output":
            return env.outputs[self.name]
        return env.meta(self.name)


class Call(Node):
    """A function or operator applied to argument nodes: ``fn(env, [arg arrays]) -> array``."""

    def __init__(self, fn: Callable[[EvalEnv, list[pa.Array]], pa.Array], args: list[Node], dtype: pa.DataType,
                 sql: str = "", nullable: bool = True, lazy: bool = False):
        self.fn = fn
        self.args = args
        self.dtype = dtype
        self.nullable = nullable
        self.sql = sql
        self.lazy = lazy  # lazy calls receive the argument nodes instead of evaluated arrays

    def eval(self, env: EvalEnv) -> pa.Array:
        if self.lazy:
            result = self.fn(env, self.args)
        else:
            result = self.fn(env, [a.eval(env) for a in self.args])
        if isinstance(result, pa.ChunkedArray):
            result = result.combine_chunks()
        if isinstance(result, pa.Scalar):
            result = pa.repeat(result, env.num_rows) if result.is_valid else pa.nulls(env.num_rows, result.type)
        if result.type != self.dtype:
            if pa.types.is_null(result.type):
                result = pa.nulls(len(result), self.dtype)
            elif pa.types.is_decimal(self.dtype) and pa.types.is_decimal(result.type):
                result = exact_decimal(result)  # the declared precision applies to output values only
            elif isinstance(self.dtype, pa.ExtensionType):
                result = pa.ExtensionArray.from_storage(self.dtype, result.cast(self.dtype.storage_type))
            else:
                result = result.cast(self.dtype)
        return result
