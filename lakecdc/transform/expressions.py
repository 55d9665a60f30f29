"""Parse transform expressions (projection select-lists and filters) with sqlglot and compile them to nodes.

Parsing uses a Spark-based sqlglot dialect (``read="spark"`` handles back-tick identifiers, ``||`` as string
concatenation and Flink's special forms) with three changes so the tree keeps what the user wrote:

* ``''`` inside a string literal is an escaped quote (SQL/Calcite), not two adjacent literals to concatenate
  (``DATE_FORMAT(ts, 'yyyy-MM-dd''T''HH')`` keeps the Java pattern ``yyyy-MM-dd'T'HH``); backslash is literal;
  double quotes are not string literals.
* No per-name function builders: every plain call ``NAME(args)`` arrives as ``Anonymous`` with its arguments in
  source order (no dialect rewrites such as DATE_FORMAT → TimeToStr, CONCAT_WS argument shuffles or swapped
  TIMESTAMPDIFF operands) and is looked up in ``functions.FUNCTIONS`` by upper-case name.
* ``CAST`` stays ``Cast`` (Spark turns it into ``TryCast``); ``TRY_CAST`` stays ``TryCast``.

Identifiers are case-sensitive; function names are case-insensitive.
"""

from __future__ import annotations

import decimal
from dataclasses import dataclass
from typing import Callable

import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError, TokenError
from sqlglot.parsers.spark import SparkParser

from lakecdc.errors import ExpressionError
from lakecdc.transform import functions as fn
from lakecdc.transform.nodes import Literal, Node
from lakecdc.transform.types import decimal_literal_type


class FlinkCdcSql(Spark):
    """sqlglot dialect for Flink CDC transform expressions (see the module docstring)."""

    class Tokenizer(Spark.Tokenizer):
        QUOTES = ["'"]
        STRING_ESCAPES = ["'"]

    class Parser(SparkParser):
        STRICT_CAST = True
        FUNCTIONS: dict = {}


METADATA_COLUMNS = ("__namespace_name__", "__schema_name__", "__table_name__", "__data_event_type__")
OP_TS = "op_ts"


def _parse_select(text: str) -> exp.Select:
    try:
        tree = sqlglot.parse_one(f"SELECT {text}\nFROM __lakecdc_input__", dialect=FlinkCdcSql)
    except (ParseError, TokenError) as exc:
        raise ExpressionError(f"syntax error in {text!r}: {_first_line(exc)}") from None
    extra = [k for k, v in tree.args.items() if v and k not in ("expressions", "from", "from_")] \
        if isinstance(tree, exp.Select) else ["statement"]
    if extra:
        raise ExpressionError(f"syntax error in {text!r}: expected only an expression list, found "
                              f"{', '.join(extra).upper()}")
    return tree


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


@dataclass
class ProjectionItem:
    """One select-list item: ``*``, a bare identifier, or ``expr AS alias``."""

    star: bool
    expr: exp.Expression | None
    alias: str | None  # output name (None for '*')
    bare_column: str | None  # the referenced name when the expression is a bare identifier


def parse_projection(text: str) -> list[ProjectionItem]:
    """Parse a projection; ExpressionError for syntax errors and items that are neither a column nor aliased."""
    text = text.replace("\\*", "*")
    tree = _parse_select(text)
    items = []
    for node in tree.expressions:
        if isinstance(node, exp.Star):
            items.append(ProjectionItem(True, None, None, None))
            continue
        if isinstance(node, exp.Column) and isinstance(node.this, exp.Star):
            raise ExpressionError(f"qualified '*' is not supported: {node.sql(dialect=FlinkCdcSql)}")
        if isinstance(node, exp.Alias):
            alias = node.alias
            inner = node.this
            bare = inner.name if _is_bare_column(inner) else None
            items.append(ProjectionItem(False, inner, alias, bare))
            continue
        if _is_bare_column(node):
            items.append(ProjectionItem(False, node, node.name, node.name))
            continue
        raise ExpressionError(f"Unrecognized projection expression: {node.sql(dialect=FlinkCdcSql)}. "
                              "Should be <EXPR> AS <IDENTIFIER>")
    return items


def parse_filter(text: str) -> exp.Expression:
    tree = _parse_select(text)
    if len(tree.expressions) != 1:
        raise ExpressionError(f"a filter is one boolean expression, got {len(tree.expressions)} in {text!r}")
    node = tree.expressions[0]
    if isinstance(node, exp.Alias):
        raise ExpressionError(f"a filter cannot have an alias: {text!r}")
    return node


def _is_bare_column(node: exp.Expression) -> bool:
    return isinstance(node, exp.Column) and not node.table and isinstance(node.this, exp.Identifier)


def sql_text(node: exp.Expression) -> str:
    return node.sql(dialect=FlinkCdcSql)


# ------------------------------------------------------------------------------------------------- compiler

_BINARY = {exp.EQ: "=", exp.NEQ: "<>", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<=",
           exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%", exp.DPipe: "||",
           exp.And: "AND", exp.Or: "OR"}

_CAST_TYPES: dict = {
    exp.DataType.Type.BOOLEAN: pa.bool_(), exp.DataType.Type.TINYINT: pa.int8(),
    exp.DataType.Type.SMALLINT: pa.int16(), exp.DataType.Type.INT: pa.int32(),
    exp.DataType.Type.BIGINT: pa.int64(), exp.DataType.Type.FLOAT: pa.float32(),
    exp.DataType.Type.DOUBLE: pa.float64(), exp.DataType.Type.TEXT: pa.string(),
    exp.DataType.Type.VARCHAR: pa.string(), exp.DataType.Type.CHAR: pa.string(),
    exp.DataType.Type.NCHAR: pa.string(), exp.DataType.Type.NVARCHAR: pa.string(),
}
_DECIMAL_TYPES = {exp.DataType.Type.DECIMAL}
# Spark reads TIMESTAMP as its (zoned) TIMESTAMP type; in Flink CDC it is the zone-less TIMESTAMP.
_TIMESTAMP_TYPES = {exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPTZ, exp.DataType.Type.DATETIME,
                    exp.DataType.Type.TIMESTAMPNTZ}


def cast_target(dt: exp.DataType) -> pa.DataType:
    """The Arrow type of a CAST target; ExpressionError for targets Flink CDC cannot cast to."""
    params = [int(p.this.this) if isinstance(p, exp.DataTypeParam) else int(p.this)
              for p in dt.expressions] if dt.expressions else []
    if dt.this in _CAST_TYPES:
        return _CAST_TYPES[dt.this]
    if dt.this in _DECIMAL_TYPES:
        precision = params[0] if params else 10
        scale = params[1] if len(params) > 1 else 0
        if not 1 <= precision <= 38 or not 0 <= scale <= precision:
            raise ExpressionError(f"invalid DECIMAL({precision}, {scale})")
        return pa.decimal128(precision, scale)
    if dt.this in _TIMESTAMP_TYPES:
        precision = params[0] if params else 6
        return pa.timestamp("s" if precision == 0 else "ms" if precision <= 3 else "us" if precision <= 6 else "ns")
    raise ExpressionError(f"Unsupported data type cast to {dt.sql(dialect=FlinkCdcSql)}; supported targets: "
                          f"{fn.CAST_TARGETS}")


class Compiler:
    """Turns a sqlglot expression into a ``Node``; ``resolve(name)`` maps identifiers to column nodes."""

    def __init__(self, resolve: Callable[[str], Node], udfs: dict[str, Callable] | None = None):
        self.resolve = resolve
        self.udfs = udfs or {}

    def compile(self, node: exp.Expression) -> Node:
        sql = sql_text(node)
        if isinstance(node, exp.Paren):
            return self.compile(node.this)
        if isinstance(node, exp.Column):
            if node.table or not isinstance(node.this, exp.Identifier):
                raise ExpressionError(f"qualified column names are not supported: {sql}")
            return self.resolve(node.name)
        if isinstance(node, exp.Literal):
            return _literal(node, sql)
        if isinstance(node, exp.Boolean):
            return Literal(bool(node.this), pa.bool_(), sql)
        if isinstance(node, exp.Null):
            return Literal(None, pa.null(), sql)
        if isinstance(node, exp.Neg):
            inner = node.this
            if isinstance(inner, exp.Literal) and not inner.is_string:
                return _literal(inner, sql, negate=True)
            return self.call(fn.OPERATORS["NEG"], [self.compile(inner)], sql)
        for cls, op in _BINARY.items():
            if type(node) is cls:
                return self.call(fn.OPERATORS[op], [self.compile(node.this), self.compile(node.expression)], sql)
        if isinstance(node, exp.Not):
            return self.call(fn.OPERATORS["NOT"], [self.compile(node.this)], sql)
        if isinstance(node, exp.Is):
            target = node.expression
            if isinstance(target, exp.Null):
                return self.call(fn.OPERATORS["IS NULL"], [self.compile(node.this)], sql)
            if isinstance(target, exp.Boolean):
                name = "IS TRUE" if target.this else "IS FALSE"
                return self.call(fn.OPERATORS[name], [self.compile(node.this)], sql)
            raise ExpressionError(f"unsupported IS expression: {sql}")
        if isinstance(node, exp.In):
            if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
                raise ExpressionError(f"IN with a subquery is not supported: {sql}")
            args = [self.compile(node.this)] + [self.compile(e) for e in node.expressions]
            return self.call(fn.OPERATORS["IN"], args, sql)
        if isinstance(node, exp.Between):
            args = [self.compile(node.this), self.compile(node.args["low"]), self.compile(node.args["high"])]
            return self.call(fn.OPERATORS["BETWEEN"], args, sql)
        if isinstance(node, exp.Escape) and isinstance(node.this, exp.Like):
            like = node.this
            result = self.call(fn.OPERATORS["LIKE"], [self.compile(like.this), self.compile(like.expression),
                                                      self.compile(node.expression)], sql)
            return self.call(fn.OPERATORS["NOT"], [result], sql) if like.args.get("negate") else result
        if isinstance(node, exp.Like):
            result = self.call(fn.OPERATORS["LIKE"], [self.compile(node.this), self.compile(node.expression)], sql)
            return self.call(fn.OPERATORS["NOT"], [result], sql) if node.args.get("negate") else result
        if isinstance(node, exp.If):
            args = [self.compile(node.this), self.compile(node.args["true"])]
            false = node.args.get("false")
            args.append(self.compile(false) if false is not None else Literal(None, pa.null(), "NULL"))
            return self.call(fn.FUNCTIONS["IF"], args, sql)
        if isinstance(node, exp.Case):
            return self._case(node, sql)
        if isinstance(node, (exp.Cast, exp.TryCast)):
            if node.args.get("format"):
                raise ExpressionError(f"CAST ... FORMAT is not supported: {sql}")
            target = cast_target(node.to)
            return fn.cast(self.compile(node.this), target, isinstance(node, exp.TryCast), sql)
        if isinstance(node, exp.Substring):
            args = [node.this, node.args.get("start"), node.args.get("length")]
            return self.function("SUBSTRING", [a for a in args if a is not None], sql)
        if isinstance(node, exp.Trim):
            # Flink CDC 3.6 compiles every TRIM form to String.trim() (LEADING/TRAILING/'x' are ignored).
            return self.function("TRIM", [node.this], sql)
        if isinstance(node, (exp.Ceil, exp.Floor)):
            args = [node.this] + ([node.args["decimals"]] if node.args.get("decimals") is not None else [])
            return self.function("CEIL" if isinstance(node, exp.Ceil) else "FLOOR", args, sql)
        if isinstance(node, exp.Anonymous):
            return self.function(node.name, list(node.expressions), sql)
        if isinstance(node, exp.Func):
            name = node.sql_name() if hasattr(node, "sql_name") else type(node).__name__
            raise ExpressionError(f"unsupported function or expression {name}: {sql}")
        raise ExpressionError(f"unsupported expression: {sql}")

    def function(self, name: str, args: list[exp.Expression], sql: str) -> Node:
        definition = fn.lookup_function(name, self.udfs)
        if definition is None:
            raise ExpressionError(f"unknown function {name.upper()} in {sql}")
        return self.call(definition, [self.compile(a) for a in args], sql)

    def call(self, definition: fn.FunctionDef, args: list[Node], sql: str) -> Node:
        definition.check_arity(len(args))
        return definition.build(args, sql)

    def _case(self, node: exp.Case, sql: str) -> Node:
        subject = node.this
        args: list[Node] = []
        subject_node = self.compile(subject) if subject is not None else None
        for branch in node.args.get("ifs") or []:
            cond = self.compile(branch.this)
            if subject_node is not None:  # CASE v WHEN x → v = x (Flink CDC's '=' semantics)
                cond = fn.compare("=", subject_node, cond, sql)
            args.append(cond)
            args.append(self.compile(branch.args["true"]))
        default = node.args.get("default")
        if default is not None:
            args.append(self.compile(default))
        return self.call(fn.OPERATORS["CASE"], args, sql)


def _literal(node: exp.Literal, sql: str, negate: bool = False) -> Literal:
    text = node.this
    if node.is_string:
        return Literal(text, pa.string(), sql)
    if negate:
        text = "-" + text
    lowered = text.lower()
    if "e" in lowered:
        return Literal(float(text), pa.float64(), sql)
    if "." in text:
        return Literal(decimal.Decimal(text), decimal_literal_type(text), sql)
    value = int(text)
    if -2 ** 31 <= value < 2 ** 31:
        return Literal(value, pa.int32(), sql)
    if -2 ** 63 <= value < 2 ** 63:
        return Literal(value, pa.int64(), sql)
    raise ExpressionError(f"integer literal {text} is out of the BIGINT range")


# ------------------------------------------------------------------------------------ schema-free checks

def check_tree(node: exp.Expression, udfs: dict[str, Callable] | None = None) -> list[str]:
    """Schema-free checks of one expression: unknown functions, bad arity, unsupported syntax, CAST targets.
    Returns the identifiers it references."""
    names: list[str] = []
    probe = Compiler(lambda name: _Probe(name, names), udfs)
    _walk_check(node, probe)
    return names


class _Probe(Node):
    """Stand-in column used by ``check_tree``: any type, records its name."""

    def __init__(self, name: str, sink: list[str]):
        sink.append(name)
        self.dtype = pa.null()
        self.sql = name


def _walk_check(node: exp.Expression, probe: Compiler) -> None:
    # Columns compile to untyped (NULL-typed) stand-ins, which every function accepts: what fails here is
    # independent of the schema (unknown functions, arity, literal-only arguments, CAST targets, date patterns).
    for sub in node.walk():
        if isinstance(sub, exp.Anonymous):
            definition = fn.lookup_function(sub.name, probe.udfs)
            if definition is None:
                raise ExpressionError(f"unknown function {sub.name.upper()} in {sql_text(sub)}")
    probe.compile(node)
