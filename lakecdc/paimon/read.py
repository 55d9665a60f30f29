"""Read results (to Arrow, pandas, polars, DuckDB) and ``where`` filters: a small SQL boolean expression compiled
once into a pypaimon predicate (pushed into the scan: partitions and files are pruned) and into a pyarrow
expression applied to the rows read (so the result is exact whatever the pushdown prunes).

Supported in ``where``: ``=``, ``<>``/``!=``, ``<``, ``<=``, ``>``, ``>=`` between a column and a literal,
``IN (...)``, ``NOT IN (...)``, ``BETWEEN a AND b``, ``IS [NOT] NULL``, ``LIKE 'pattern'``, ``AND``, ``OR`` and
parentheses. Literals: numbers, strings, ``TRUE``/``FALSE``, ``DATE '...'``, ``TIMESTAMP '...'``; each is
converted to the column's type (a string literal compared with a timestamp column is parsed as a timestamp).
NULL comparisons follow SQL: a row whose value is NULL never satisfies a comparison, ``IN`` or ``NOT IN``.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.errors import SinkError

_COMPARISONS = {  # sqlglot node name → (pypaimon builder method, python operator, mirrored method)
    "EQ": ("equal", operator.eq, "equal"),
    "NEQ": ("not_equal", operator.ne, "not_equal"),
    "LT": ("less_than", operator.lt, "greater_than"),
    "LTE": ("less_or_equal", operator.le, "greater_or_equal"),
    "GT": ("greater_than", operator.gt, "less_than"),
    "GTE": ("greater_or_equal", operator.ge, "less_or_equal"),
}
SUPPORTED = ("=, <>, !=, <, <=, >, >= (column against a literal), IN, NOT IN, BETWEEN, IS [NOT] NULL, LIKE, AND, "
             "OR, parentheses")


@dataclass
class Where:
    """A compiled ``where`` filter."""

    text: str
    pushdown: Callable[[Any], Any]  # pypaimon PredicateBuilder → Predicate
    expression: pc.Expression  # exact filter on the rows read
    columns: list[str]  # the columns it reads

    def apply(self, table: pa.Table) -> pa.Table:
        return table.filter(self.expression) if table.num_rows else table


def compile_where(text: str, schema: pa.Schema, table_name: str) -> Where:
    """Compile ``text`` against the table's Arrow ``schema``; SinkError naming the problem otherwise."""
    import sqlglot
    from sqlglot import exp

    if not isinstance(text, str) or not text.strip():
        raise SinkError(f"table {table_name}: where must be a non-empty SQL condition, got {text!r}")
    try:
        tree = sqlglot.parse_one(text)
    except sqlglot.errors.ParseError as error:
        raise SinkError(f"table {table_name}: cannot parse where {text!r}: {str(error).splitlines()[0]}") from None
    compiler = _Compiler(schema, table_name, text, exp)
    pushdown, expression = compiler.compile(tree)
    return Where(text, pushdown, expression, list(dict.fromkeys(compiler.used)))


class _Compiler:
    def __init__(self, schema: pa.Schema, table_name: str, text: str, exp):
        self.schema = schema
        self.table_name = table_name
        self.text = text
        self.exp = exp
        self.used: list[str] = []

    def fail(self, why: str) -> SinkError:
        return SinkError(f"table {self.table_name}, where {self.text!r}: {why} (supported: {SUPPORTED})")

    def compile(self, node) -> tuple[Callable, pc.Expression]:
        exp = self.exp
        if isinstance(node, exp.Paren):
            return self.compile(node.this)
        if isinstance(node, (exp.And, exp.Or)):
            left, right = self.compile(node.this), self.compile(node.expression)
            if isinstance(node, exp.And):
                return (lambda pb: _combine(pb.and_predicates, left[0](pb), right[0](pb), either=True),
                        left[1] & right[1])
            return (lambda pb: _combine(pb.or_predicates, left[0](pb), right[0](pb), either=False),
                    left[1] | right[1])
        if type(node).__name__ in _COMPARISONS:
            return self.comparison(node)
        if isinstance(node, exp.In):
            return self.is_in(node, negate=False)
        if isinstance(node, exp.Not) and isinstance(node.this, exp.In):
            return self.is_in(node.this, negate=True)
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            name = self.column(node.this)
            return (lambda pb: pb.is_null(name), pc.field(name).is_null())
        if isinstance(node, exp.Not) and isinstance(node.this, exp.Is) and isinstance(node.this.expression, exp.Null):
            name = self.column(node.this.this)
            return (lambda pb: pb.is_not_null(name), pc.field(name).is_valid())
        if isinstance(node, exp.Between):
            name = self.column(node.this)
            low, high = self.literal(node.args["low"], name), self.literal(node.args["high"], name)
            field = pc.field(name)
            return (lambda pb: pb.between(name, low.as_py(), high.as_py()), (field >= low) & (field <= high))
        if isinstance(node, exp.Like):
            return self.like(node)
        raise self.fail(f"{node.sql()!r} is not supported")

    def column(self, node) -> str:
        if not isinstance(node, self.exp.Column) or node.table:
            raise self.fail(f"expected a column name, got {node.sql()!r}")
        name = node.name
        if name not in self.schema.names:
            raise self.fail(f"unknown column {name!r} (columns: {', '.join(self.schema.names)})")
        self.used.append(name)
        return name

    def literal(self, node, column: str) -> pa.Scalar:
        """The literal as a scalar of the column's type."""
        exp = self.exp
        negate = False
        if isinstance(node, exp.Neg):
            node, negate = node.this, True
        if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.is_string:
            value: Any = node.this.this  # DATE '...' / TIMESTAMP '...': parsed by the cast to the column type
        elif isinstance(node, exp.Literal):
            value = node.this if node.is_string else _number(node.this)
        elif isinstance(node, exp.Boolean):
            value = bool(node.this)
        else:
            raise self.fail(f"expected a literal, got {node.sql()!r}")
        if negate:
            if isinstance(value, str):
                raise self.fail(f"cannot negate {node.sql()!r}")
            value = -value
        target = self.schema.field(column).type
        if pa.types.is_decimal(target) and isinstance(value, (int, float)):
            value = Decimal(str(value))  # an int64/double scalar does not cast to a small DECIMAL
        try:
            return pa.scalar(value).cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as error:
            raise self.fail(f"literal {value!r} does not fit column {column!r} of type {target}: {error}") from None

    def comparison(self, node) -> tuple[Callable, pc.Expression]:
        method, op, mirrored = _COMPARISONS[type(node).__name__]
        left, right = node.this, node.expression
        if isinstance(left, self.exp.Column) and not isinstance(right, self.exp.Column):
            name, scalar = self.column(left), self.literal(right, self.column(left))
        elif isinstance(right, self.exp.Column) and not isinstance(left, self.exp.Column):
            name = self.column(right)
            scalar, method = self.literal(left, name), mirrored
            op = {operator.lt: operator.gt, operator.le: operator.ge, operator.gt: operator.lt,
                  operator.ge: operator.le}.get(op, op)
        else:
            raise self.fail(f"{node.sql()!r} must compare one column with one literal")
        return (lambda pb: getattr(pb, method)(name, scalar.as_py()), op(pc.field(name), scalar))

    def is_in(self, node, negate: bool) -> tuple[Callable, pc.Expression]:
        name = self.column(node.this)
        if node.args.get("query") is not None or not node.expressions:
            raise self.fail(f"{node.sql()!r}: IN needs a list of literals")
        scalars = [self.literal(v, name) for v in node.expressions]
        values = pa.array([s.as_py() for s in scalars], self.schema.field(name).type)
        field = pc.field(name)
        if negate:  # SQL: NULL NOT IN (...) is not true
            return (lambda pb: pb.is_not_in(name, values.to_pylist()), ~field.isin(values) & field.is_valid())
        return (lambda pb: pb.is_in(name, values.to_pylist()), field.isin(values))

    def like(self, node) -> tuple[Callable, pc.Expression]:
        name = self.column(node.this)
        pattern = node.expression
        if not (isinstance(pattern, self.exp.Literal) and pattern.is_string):
            raise self.fail(f"LIKE needs a string pattern, got {pattern.sql()!r}")
        if not pa.types.is_string(self.schema.field(name).type):
            raise self.fail(f"LIKE needs a string column, {name!r} is {self.schema.field(name).type}")
        text = pattern.this
        expression = pc.match_like(pc.field(name), text)
        prefix = text[:-1]
        if text.endswith("%") and not any(c in prefix for c in "%_\\"):
            return (lambda pb: pb.startswith(name, prefix), expression)
        return (lambda pb: None, expression)  # general patterns are filtered on the rows read only


def _combine(combine: Callable, left, right, either: bool):
    """AND pushes down whichever side can be pushed; OR only when both can (None = not pushed down)."""
    if left is not None and right is not None:
        return combine([left, right])
    return (left if left is not None else right) if either else None


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        return float(text)


class ReadResult:
    """Rows read from a table (already in memory as one Arrow table), in the format the caller wants."""

    def __init__(self, table: pa.Table):
        self._table = table

    @property
    def num_rows(self) -> int:
        return self._table.num_rows

    @property
    def schema(self) -> pa.Schema:
        return self._table.schema

    def to_arrow(self) -> pa.Table:
        return self._table

    def to_pylist(self) -> list[dict]:
        return self._table.to_pylist()

    def to_pandas(self):
        """A pandas DataFrame."""
        return self._table.to_pandas()

    def to_polars(self):
        """A polars DataFrame."""
        import polars as pl

        return pl.from_arrow(self._table)

    def to_duckdb(self, name: str = "paimon_table", connection=None):
        """Register the rows as view ``name`` in a DuckDB connection (a new in-memory one by default) and return
        the DuckDB relation; query it with ``connection.sql(f"SELECT ... FROM {name}")`` or the relation API."""
        import duckdb

        con = connection if connection is not None else duckdb.connect()
        con.register(name, self._table)
        return con.table(name)

    def __len__(self) -> int:
        return self._table.num_rows

    def __repr__(self) -> str:
        return f"ReadResult({self._table.num_rows} rows: {', '.join(self._table.column_names)})"
