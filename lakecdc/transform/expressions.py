"""Parse transform expressions (projection select-lists and filters) with sqlglot and compile them to nodes.

Parsing uses a Spark-based sqlglot dialect (``read="spark"`` handles back-tick identifiers, ``||`` as string
concatenation and Flink's special forms) with these changes so the tree keeps what the user wrote:

* ``''`` inside a string literal is an escaped quote (SQL/Calcite), not two adjacent literals to concatenate
  (``DATE_FORMAT(ts, 'yyyy-MM-dd''T''HH')`` keeps the Java pattern ``yyyy-MM-dd'T'HH``); backslash is literal;
  double quotes are not string literals.
* No per-name function builders: every plain call ``NAME(args)`` arrives as ``Anonymous`` with its arguments in
  source order (no dialect rewrites such as DATE_FORMAT → TimeToStr, CONCAT_WS argument shuffles or swapped
  TIMESTAMPDIFF operands) and is looked up in ``functions.FUNCTIONS`` by upper-case name.
* ``CAST`` stays ``Cast`` (Spark turns it into ``TryCast``); ``TRY_CAST`` stays ``TryCast``.
* Calcite forms Spark lacks: ``POSITION(a IN b FROM p)`` and ``CASE v WHEN x1, x2 THEN ...``.

Identifiers are case-sensitive; function names and keywords (``LOCALTIMESTAMP``, the unit of ``TIMESTAMPDIFF``)
are case-insensitive. Errors carry the line and column of the sub-expression they are about.
"""

from __future__ import annotations

import decimal
from dataclasses import dataclass
from typing import Callable, ClassVar

import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError, TokenError
from sqlglot.parsers.spark import SparkParser
from sqlglot.tokens import TokenType

from lakecdc.errors import ExpressionError
from lakecdc.transform import functions as fn
from lakecdc.transform.functions import comparison, structs, temporal
from lakecdc.transform.functions.base import Site, require
from lakecdc.transform.nodes import Literal, Node
from lakecdc.transform.types import capped_decimal, decimal_literal_type, unit_for_precision


class FlinkCdcSql(Spark):
    """sqlglot dialect for Flink CDC transform expressions (see the module docstring)."""

    class Tokenizer(Spark.Tokenizer):
        QUOTES = ["'"]
        STRING_ESCAPES = ["'"]

    class Parser(SparkParser):
        STRICT_CAST = True
        FUNCTIONS: ClassVar[dict[str, Callable]] = {}

        def _parse_position(self, haystack_first: bool = False) -> exp.StrPosition:
            args = self._parse_csv(self._parse_bitwise)
            if self._match(TokenType.IN):
                haystack = self._parse_bitwise()
                start = self._parse_bitwise() if self._match(TokenType.FROM) else None
                return self.expression(exp.StrPosition(this=haystack, substr=args[0] if args else None,
                                                       position=start))
            return self.expression(exp.StrPosition(this=args[1] if len(args) > 1 else None,
                                                   substr=args[0] if args else None,
                                                   position=args[2] if len(args) > 2 else None))

        def _parse_escape(self, this: exp.Expr | None) -> exp.Expr | None:
            # Calcite takes any character expression after ESCAPE (``ESCAPE CAST(NULL AS STRING)``), not only a
            # string literal or NULL
            if not self._match(TokenType.ESCAPE):
                return this
            return self.expression(exp.Escape(this=this, expression=self._parse_primary() or self._parse_bitwise()))

        def _parse_case(self) -> exp.Expr | None:
            if self._match(TokenType.DOT, advance=False):
                self._retreat(self._index - 1)
                return None
            ifs = []
            default = None
            subject = self._parse_disjunction()
            while self._match(TokenType.WHEN):
                conditions = [self._parse_disjunction()]
                while subject is not None and self._match(TokenType.COMMA):
                    conditions.append(self._parse_disjunction())
                condition = conditions[0] if len(conditions) == 1 else exp.Tuple(expressions=conditions)
                self._match(TokenType.THEN)
                ifs.append(self.expression(exp.If(this=condition, true=self._parse_disjunction())))
            if self._match(TokenType.ELSE):
                default = self._parse_disjunction()
            if not self._match(TokenType.END):
                self.raise_error("Expected END after CASE", self._prev)
            return self.expression(exp.Case(this=subject, ifs=ifs, default=default))


# Flink CDC's metadata columns, usable in every projection and filter
NAMESPACE_NAME, SCHEMA_NAME, TABLE_NAME = "__namespace_name__", "__schema_name__", "__table_name__"
DATA_EVENT_TYPE = "__data_event_type__"  # the row kind of the change (+I, -U, +U, -D)
METADATA_COLUMNS = (NAMESPACE_NAME, SCHEMA_NAME, TABLE_NAME, DATA_EVENT_TYPE)
OP_TS = "op_ts"
NILADIC_KEYWORDS = ("LOCALTIMESTAMP", "LOCALTIME", "CURRENT_TIME", "CURRENT_DATE", "CURRENT_TIMESTAMP")
_UNIT_FUNCTIONS = ("TIMESTAMPDIFF", "TIMESTAMP_DIFF", "TIMESTAMPADD")
_PREFIX = "SELECT "


MAX_DEPTH = 200  # nesting levels of one expression: compiling recurses once per level


def _parse_select(text: str) -> exp.Select:
    sql = f"{_PREFIX}{text}\nFROM __lakecdc_input__"
    try:
        tree = sqlglot.parse_one(sql, dialect=FlinkCdcSql)
    except ParseError as exc:
        details = exc.errors[0] if exc.errors else {}
        offset = _syntax_error_offset(sql, details, text)
        problem = details.get("description") or _first_line(exc)
        if offset is None:
            raise ExpressionError(f"syntax error in {text!r}: {problem}") from None
        excerpt = " ".join(text[offset:].split())  # where it stopped, on one line
        excerpt = excerpt if len(excerpt) <= 40 else excerpt[:37] + "..."
        raise located_at(ExpressionError(f"syntax error: {problem}, at {excerpt!r}"), text, offset) from None
    except TokenError as exc:
        raise ExpressionError(f"syntax error in {text!r}: {_first_line(exc)}") from None
    except RecursionError:
        raise ExpressionError(f"expression nests too deeply ({len(text)} characters): split it into several "
                              "projected columns") from None
    _check_depth(tree, text)
    if not isinstance(tree, exp.Select):
        raise ExpressionError(f"syntax error in {text!r}: expected only an expression list, found STATEMENT")
    extra = [k for k, v in tree.args.items() if v and k not in ("expressions", "from", "from_")]
    if extra:
        raise ExpressionError(f"syntax error in {text!r}: expected only an expression list, found "
                              f"{', '.join(extra).upper()}")
    return tree


def _check_depth(tree: exp.Expr, text: str) -> None:
    """Refuse expressions nested deeper than MAX_DEPTH (e.g. thousands of chained ``+``), which would exhaust
    the stack when compiled, with a clear error instead of a RecursionError."""
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ExpressionError(f"expression nests more than {MAX_DEPTH} levels deep (e.g. a long chain of "
                                  f"operators) in {text[:80]!r}...: split it into several projected columns")
        stack.extend((child, depth + 1) for child in node.iter_expressions())


def _syntax_error_offset(sql: str, details: dict, text: str) -> int | None:
    """Where in ``text`` (the expression inside ``sql``) sqlglot's parse error is: the start of the token it
    stopped at, or, when it stopped past the expression's end (an unclosed parenthesis), the innermost ``(`` left
    open. None when it cannot tell."""
    line, col, token = details.get("line"), details.get("col"), details.get("highlight") or ""
    if not isinstance(line, int) or not isinstance(col, int):
        return None
    lines = sql.split("\n")
    end = sum(len(part) + 1 for part in lines[:line - 1]) + col - 1  # sqlglot's col: the token's last character
    offset = end - max(len(token), 1) + 1 - len(_PREFIX)
    if 0 <= offset < len(text.rstrip()):
        return offset
    try:
        tokens = FlinkCdcSql().tokenize(text)
    except TokenError:
        return None
    open_parens: list[int] = []
    for tok in tokens:
        if tok.token_type == TokenType.L_PAREN:
            open_parens.append(tok.start)
        elif tok.token_type == TokenType.R_PAREN and open_parens:
            open_parens.pop()
    return open_parens[-1] if open_parens else None


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


@dataclass
class ProjectionItem:
    """One select-list item: ``*``, a bare identifier, or ``expr AS alias``."""

    star: bool
    expr: exp.Expression | None
    alias: str | None  # output name (None for '*')
    bare_column: str | None  # the referenced name when the expression is a bare identifier

    @property
    def expression(self) -> exp.Expression:
        """The item's expression (every item but ``*`` has one)."""
        if self.expr is None:
            raise ExpressionError("* has no expression")
        return self.expr

    @property
    def output_name(self) -> str:
        """The item's output column name (every item but ``*`` has one)."""
        if self.alias is None:
            raise ExpressionError("* has no output name")
        return self.alias


def normalise_projection(text: str) -> str:
    """The YAML parser of Flink CDC turns ``\\*`` into ``*`` (a leading ``*`` is a YAML alias); a space keeps the
    character positions of error messages."""
    return text.replace("\\*", " *")


def parse_projection(text: str) -> list[ProjectionItem]:
    """Parse a projection; ExpressionError for syntax errors and items that are neither a column nor aliased."""
    text = normalise_projection(text)
    tree = _parse_select(text)
    items = []
    for node in tree.expressions:
        if isinstance(node, exp.Star):
            items.append(ProjectionItem(True, None, None, None))
            continue
        if isinstance(node, exp.Column) and isinstance(node.this, exp.Star):
            raise located(ExpressionError(f"qualified '*' is not supported: {sql_text(node)}"), node, text)
        if isinstance(node, exp.Alias):
            alias = node.alias
            inner = node.this
            bare = inner.name if _is_bare_column(inner) else None
            items.append(ProjectionItem(False, inner, alias, bare))
            continue
        if _is_bare_column(node) and node.name.upper() not in NILADIC_KEYWORDS:
            items.append(ProjectionItem(False, node, node.name, node.name))
            continue
        raise located(ExpressionError(f"Unrecognized projection expression: {sql_text(node)}. "
                                      "Should be <EXPR> AS <IDENTIFIER>"), node, text)
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


# --------------------------------------------------------------------------------------------- positions

def _start(node: exp.Expression) -> int | None:
    starts = [n.meta["start"] for n in node.walk() if isinstance(n, exp.Expression) and "start" in n.meta]
    return min(starts) if starts else None


def located(error: ExpressionError, node: exp.Expression, text: str | None) -> ExpressionError:
    """Add the line and column of ``node`` inside the rule text to ``error`` (once: the innermost wins)."""
    if getattr(error, "located", False) or text is None:
        return error
    start = _start(node)
    if start is None:
        return error
    fragment = sql_text(node)
    message = str(error)
    if fragment not in message:
        error = ExpressionError(f"{message} (in {fragment})")
    return located_at(error, text, max(0, min(start - len(_PREFIX), len(text))))


def located_at(error: ExpressionError, text: str, offset: int) -> ExpressionError:
    """``error`` at ``offset`` (0-based) of the rule text: its line and column there are added to the message, and
    the offset kept, so the config layer can name the line and column in the YAML file."""
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    located_error = ExpressionError(f"{error} [at line {line}, column {column}]")
    located_error.located = True
    located_error.line, located_error.column, located_error.offset = line, column, offset
    return located_error


# ------------------------------------------------------------------------------------------------- compiler

_BINARY = {exp.EQ: "=", exp.NEQ: "<>", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<=",
           exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%", exp.DPipe: "||",
           exp.And: "AND", exp.Or: "OR", exp.NullSafeEQ: "IS NOT DISTINCT FROM",
           exp.NullSafeNEQ: "IS DISTINCT FROM"}

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
# CAST(x AS TIMESTAMP) is declared TIMESTAMP(0) (Calcite's default precision) while its values keep their fraction,
# as Flink CDC's TimestampData does: text is parsed to microseconds (nanoseconds for TIMESTAMP(7..9)).
DEFAULT_CAST_TIMESTAMP_PRECISION = 0
_TEXT_TIMESTAMP_UNIT_PRECISION = 6


def cast_target(dt: exp.DataType) -> tuple[pa.DataType, str | None]:
    """The Arrow type of a CAST target's values and its declared type where Arrow cannot say it (TIMESTAMP(p) of
    microsecond values); ExpressionError for targets Flink CDC cannot cast to. (fn.cast caps a DECIMAL's declared
    precision at the pipeline's maximum and a TIMESTAMP's at 3, as Calcite's type system does.)"""
    try:
        params = [int(p.this.this) if isinstance(p, exp.DataTypeParam) else int(p.this)
                  for p in dt.expressions] if dt.expressions else []
    except (TypeError, ValueError):  # ARRAY<INT>, ROW<...>: nested types are no CAST target
        raise ExpressionError(f"Unsupported data type cast to {dt.sql(dialect=FlinkCdcSql)}; supported targets: "
                              f"{fn.CAST_TARGETS}") from None
    if dt.this in _CAST_TYPES:
        return _CAST_TYPES[dt.this], None
    if dt.this in _DECIMAL_TYPES:
        precision = params[0] if params else 10
        scale = params[1] if len(params) > 1 else 0
        if not 1 <= precision <= 38 or not 0 <= scale <= precision:
            raise ExpressionError(f"invalid DECIMAL({precision}, {scale})")
        # The written precision: CAST computes its value with it (castToBigDecimal(x, p, s), 10 when none is
        # written); the declared type is capped at the pipeline's maximum by fn.cast, which also gives a DECIMAL
        # written without precision Calcite's default one.
        return pa.decimal128(precision, scale), None if params else fn.UNSIZED_DECIMAL
    if dt.this in _TIMESTAMP_TYPES:
        precision = params[0] if params else DEFAULT_CAST_TIMESTAMP_PRECISION
        if not 0 <= precision <= 9:
            raise ExpressionError(f"invalid TIMESTAMP({precision})")
        unit = unit_for_precision(max(precision, _TEXT_TIMESTAMP_UNIT_PRECISION))
        return pa.timestamp(unit), f"TIMESTAMP({precision})"
    # Spark's dialect prints TIME as TIMESTAMP: name the type written
    written = "TIME" if dt.this == exp.DataType.Type.TIME else dt.sql(dialect=FlinkCdcSql)
    raise ExpressionError(f"Unsupported data type cast to {written}; supported targets: {fn.CAST_TARGETS}")


class UnitKeyword(Node):
    """The time unit argument of TIMESTAMPDIFF / TIMESTAMPADD (a keyword, not a column)."""

    def __init__(self, unit: str):
        self.unit_keyword = unit
        self.dtype = pa.null()
        self.sql = unit


class Compiler:
    """Turns a sqlglot expression into a ``Node``; ``resolve(name)`` maps identifiers to column nodes.
    ``text`` is the rule text the expression was parsed from (for error positions)."""

    def __init__(self, resolve: Callable[[str], Node], udfs: dict[str, Callable] | None = None, *,
                 max_precision: int = 19, text: str | None = None):
        self.resolve = resolve
        self.udfs = udfs or {}
        self.max_precision = max_precision
        self.text = text

    def site(self, sql: str) -> Site:
        return Site(sql, self.max_precision)

    def compile(self, node: exp.Expression) -> Node:
        try:
            return self._compile(node)
        except ExpressionError as error:
            raise located(error, node, self.text) from None

    def _compile(self, node: exp.Expression) -> Node:
        sql = sql_text(node)
        if isinstance(node, exp.Paren):
            return self.compile(node.this)
        if isinstance(node, exp.Column):
            if node.table or not isinstance(node.this, exp.Identifier):
                raise ExpressionError(f"qualified column names are not supported: {sql}")
            if not node.this.quoted and node.name.upper() in NILADIC_KEYWORDS:
                return self.function(node.name, [], sql)
            return self.resolve(node.name)
        if isinstance(node, exp.Literal):
            return _literal(node, sql, max_precision=self.max_precision)
        if isinstance(node, exp.Boolean):
            return Literal(bool(node.this), pa.bool_(), sql)
        if isinstance(node, exp.Null):
            return Literal(None, pa.null(), sql)
        if isinstance(node, exp.HexString):
            return Literal(bytes.fromhex(node.this), pa.binary(), sql)
        if isinstance(node, exp.Neg):
            inner = node.this
            if isinstance(inner, exp.Literal) and not inner.is_string:
                return _literal(inner, sql, negate=True, max_precision=self.max_precision)
            return self.call(fn.OPERATORS["NEG"], [self.compile(inner)], sql)
        for cls, op in _BINARY.items():
            if type(node) is cls:
                return self.call(fn.OPERATORS[op], [self.compile(node.this), self.compile(node.expression)], sql)
        if isinstance(node, exp.Not):
            return self._not(node, sql)
        if isinstance(node, exp.Is):
            return self._is(node, sql)
        if isinstance(node, exp.In):
            return self._in(node, "IN", sql)
        if isinstance(node, exp.Between):
            return self._between(node, False, sql)
        if isinstance(node, exp.Escape) and isinstance(node.this, (exp.Like, exp.SimilarTo)):
            return self._pattern(node.this, node.expression, sql)
        if isinstance(node, (exp.Like, exp.SimilarTo)):
            return self._pattern(node, None, sql)
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
            target, decl = cast_target(node.to)
            return fn.cast(self.compile(node.this), target, isinstance(node, exp.TryCast), sql, self.site(sql),
                           decl=decl)
        if isinstance(node, exp.Substring):
            operands = [node.this, node.args.get("start"), node.args.get("length")]
            return self.function("SUBSTRING", [a for a in operands if a is not None], sql)
        if isinstance(node, exp.Trim):
            return self._trim(node, sql)
        if isinstance(node, exp.Overlay):
            operands = [node.this, node.expression, node.args.get("from_") or node.args.get("from"),
                        node.args.get("for_") or node.args.get("for")]
            return self.function("OVERLAY", [a for a in operands if a is not None], sql)
        if isinstance(node, exp.StrPosition):
            operands = [node.args.get("substr"), node.this, node.args.get("position")]
            return self.function("POSITION", [a for a in operands if a is not None], sql)
        if isinstance(node, (exp.Ceil, exp.Floor)):
            if node.args.get("decimals") is not None or node.args.get("to") is not None:
                raise ExpressionError(f"{sql}: CEIL/FLOOR take one argument")
            return self.function("CEIL" if isinstance(node, exp.Ceil) else "FLOOR", [node.this], sql)
        if isinstance(node, exp.Extract):
            unit = node.this.name if isinstance(node.this, (exp.Var, exp.Column, exp.Identifier)) else str(node.this)
            return temporal.extract(unit, self.compile(node.expression), self.site(sql))
        if isinstance(node, exp.Interval):
            return self._interval(node, sql)
        if isinstance(node, exp.Array):
            return self.function("ARRAY", list(node.expressions), sql)
        if isinstance(node, exp.Bracket):
            return self._bracket(node, sql)
        if isinstance(node, (exp.CurrentDate, exp.CurrentTimestamp, exp.CurrentTime)):
            if node.this is not None:
                raise ExpressionError(f"{sql}: takes no arguments")
            name = {exp.CurrentDate: "CURRENT_DATE", exp.CurrentTimestamp: "CURRENT_TIMESTAMP",
                    exp.CurrentTime: "CURRENT_TIME"}[type(node)]
            return self.function(name, [], sql)
        if isinstance(node, exp.Anonymous):
            return self.function(node.name, list(node.expressions), sql)
        if isinstance(node, exp.Func):
            name = node.sql_name() if hasattr(node, "sql_name") else type(node).__name__
            raise ExpressionError(f"unsupported function or expression {name}: {sql}")
        raise ExpressionError(f"unsupported expression: {sql}")

    # ----------------------------------------------------------------------------------------- helpers
    def function(self, name: str, args: list[exp.Expression], sql: str) -> Node:
        definition = fn.lookup_function(name, self.udfs)
        if definition is None:
            raise ExpressionError(f"unknown function {name.upper()} in {sql}")
        if name.upper() in _UNIT_FUNCTIONS and args and name.upper() not in {u.upper() for u in self.udfs}:
            compiled = [self._unit(args[0])] + [self.compile(a) for a in args[1:]]
            return self.call(definition, compiled, sql)
        return self.call(definition, [self.compile(a) for a in args], sql)

    def call(self, definition: fn.FunctionDef, args: list[Node], sql: str) -> Node:
        definition.check_arity(len(args))
        return fn.calcite_nullability(definition, args, definition.build(args, self.site(sql)))

    def _unit(self, node: exp.Expression) -> Node:
        if isinstance(node, (exp.Column, exp.Var)) and not getattr(node.this, "quoted", False):
            return UnitKeyword(node.name.upper())
        if isinstance(node, exp.Literal) and node.is_string:  # TIMESTAMP_DIFF('SECOND', a, b): a unit as text
            return UnitKeyword(node.this.strip().upper())
        raise ExpressionError(f"expected a time unit (SECOND, MINUTE, HOUR, DAY, MONTH, YEAR), got {sql_text(node)}")

    def _not(self, node: exp.Not, sql: str) -> Node:
        inner = node.this
        if isinstance(inner, exp.In):
            return self._in(inner, "NOT IN", sql)
        if isinstance(inner, exp.Between):
            return self._between(inner, True, sql)
        if isinstance(inner, exp.Escape) and isinstance(inner.this, (exp.Like, exp.SimilarTo)):
            matched = self._pattern(inner.this, inner.expression, sql, force_negate=True)
            return matched
        if isinstance(inner, (exp.Like, exp.SimilarTo)):
            return self._pattern(inner, None, sql, force_negate=True)
        if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
            return self.call(fn.OPERATORS["IS NOT NULL"], [self.compile(inner.this)], sql)
        return self.call(fn.OPERATORS["NOT"], [self.compile(inner)], sql)

    def _is(self, node: exp.Is, sql: str) -> Node:
        target = node.expression
        if isinstance(target, exp.Null):
            return self.call(fn.OPERATORS["IS NULL"], [self.compile(node.this)], sql)
        if isinstance(target, exp.Boolean):
            name = "IS TRUE" if target.this else "IS FALSE"
            return self.call(fn.OPERATORS[name], [self.compile(node.this)], sql)
        raise ExpressionError(f"unsupported IS expression: {sql}")

    def _in(self, node: exp.In, op: str, sql: str) -> Node:
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            raise ExpressionError(f"IN with a subquery is not supported: {sql}")
        args = [self.compile(node.this)] + [self.compile(e) for e in node.expressions]
        return self.call(fn.OPERATORS[op], args, sql)

    def _between(self, node: exp.Between, negate: bool, sql: str) -> Node:
        args = [self.compile(node.this), self.compile(node.args["low"]), self.compile(node.args["high"])]
        name = ("NOT " if negate else "") + "BETWEEN" + (" SYMMETRIC" if node.args.get("symmetric") else "")
        return self.call(fn.OPERATORS[name], args, sql)

    def _pattern(self, node: exp.Expression, escape: exp.Expression | None, sql: str,
                 force_negate: bool = False) -> Node:
        name = "LIKE" if isinstance(node, exp.Like) else "SIMILAR TO"
        args = [self.compile(node.this), self.compile(node.expression)]
        if escape is not None:
            args.append(self.compile(escape))
        result = self.call(fn.OPERATORS[name], args, sql)
        negate = bool(node.args.get("negate")) != force_negate
        return comparison.negated(result, self.site(sql)) if negate else result

    def _trim(self, node: exp.Trim, sql: str) -> Node:
        position = node.args.get("position")
        chars = node.expression
        if position is None and chars is None:
            # Flink CDC compiles TRIM(s) to Java's String.trim().
            return self.function("TRIM", [node.this], sql)
        side = str(position).upper() if position is not None else "BOTH"
        value = self.compile(node.this)
        chars_node = self.compile(chars) if chars is not None else Literal(" ", pa.string(), "' '")
        require(value, ("string",), "TRIM")
        require(chars_node, ("string",), "TRIM characters")
        return fn.strings.trim_chars(side, [value, chars_node], self.site(sql))

    def _interval(self, node: exp.Interval, sql: str) -> Node:
        value = node.this
        if isinstance(value, exp.Literal):
            text = value.this
        elif isinstance(value, exp.Neg) and isinstance(value.this, exp.Literal):
            text = "-" + value.this.this
        else:
            raise ExpressionError(f"an INTERVAL value must be a literal: {sql}")
        unit = node.args.get("unit")
        if isinstance(unit, exp.IntervalSpan):
            start, end = unit.this.name, unit.expression.name
        elif unit is not None:
            start, end = unit.name, None
        else:
            raise ExpressionError(f"an INTERVAL needs a unit: {sql}")
        return temporal.interval_literal(text, start, end, sql)

    def _bracket(self, node: exp.Bracket, sql: str) -> Node:
        container = node.this
        if isinstance(container, exp.Column) and not container.table and not container.this.quoted \
                and container.name.upper() == "MAP":
            return self.function("MAP", list(node.expressions), sql)
        if len(node.expressions) != 1:
            raise ExpressionError(f"one index expected in {sql}")
        return structs.item(self.compile(container), self.compile(node.expressions[0]), self.site(sql))

    def _case(self, node: exp.Case, sql: str) -> Node:
        subject = node.this
        args: list[Node] = []
        subject_node = self.compile(subject) if subject is not None else None
        for branch in node.args.get("ifs") or []:
            condition = branch.this
            if subject_node is not None:  # CASE v WHEN x[, y] → v = x OR v = y (Flink CDC's '=' semantics)
                values = condition.expressions if isinstance(condition, exp.Tuple) else [condition]
                checks = [fn.compare("=", subject_node, self.compile(v), sql) for v in values]
                cond = checks[0]
                for extra in checks[1:]:
                    cond = self.call(fn.OPERATORS["OR"], [cond, extra], sql)
            else:
                cond = self.compile(condition)
            args.append(cond)
            args.append(self.compile(branch.args["true"]))
        default = node.args.get("default")
        if default is not None:
            args.append(self.compile(default))
        return self.call(fn.OPERATORS["CASE"], args, sql)


def _literal(node: exp.Literal, sql: str, negate: bool = False, max_precision: int = 38) -> Literal:
    text = node.this
    if node.is_string:
        return Literal(text, pa.string(), sql)
    if negate:
        text = "-" + text
    lowered = text.lower()
    if "e" in lowered:
        return Literal(float(text), pa.float64(), sql)
    if "." in text:
        exact = decimal_literal_type(text)  # declared capped at the pipeline's maximum, the value keeps its digits
        return Literal(decimal.Decimal(text), capped_decimal(exact.precision, exact.scale, max_precision), sql,
                       value_type=exact)
    value = int(text)
    if -2 ** 31 <= value < 2 ** 31:
        return Literal(value, pa.int32(), sql)
    if -2 ** 63 <= value < 2 ** 63:
        return Literal(value, pa.int64(), sql)
    raise ExpressionError(f"integer literal {text} is out of the BIGINT range")


# ------------------------------------------------------------------------------------ schema-free checks

def check_tree(node: exp.Expression, udfs: dict[str, Callable] | None = None, *, text: str | None = None,
               max_precision: int = 19) -> list[str]:
    """Schema-free checks of one expression: unknown functions, bad arity, unsupported syntax, CAST targets,
    literal patterns. Returns the identifiers it references."""
    names: list[str] = []
    probe = Compiler(lambda name: _Probe(name, names), udfs, max_precision=max_precision, text=text)
    for sub in node.walk():
        if isinstance(sub, exp.Anonymous) and fn.lookup_function(sub.name, probe.udfs) is None:
            raise located(ExpressionError(f"unknown function {sub.name.upper()} in {sql_text(sub)}"), sub, text)
    probe.compile(node)
    return names


class _Probe(Node):
    """Stand-in column used by ``check_tree``: untyped (every function accepts it), records its name. What fails
    with probes is independent of the schema."""

    def __init__(self, name: str, sink: list[str]):
        sink.append(name)
        self.dtype = pa.null()
        self.sql = name
