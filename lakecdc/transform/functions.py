"""Built-in functions and operators of transform expressions, in a registry keyed by upper-case name.

Each entry type-checks its (already compiled) arguments and returns a ``Call`` node that evaluates whole columns
with ``pyarrow.compute``. Adding a function = adding one ``@function(...)`` builder; UDFs from the pipeline
(``TransformContext.udfs``) are looked up first, so a UDF can replace a built-in of the same name.

Deviations from Flink CDC 3.6 (for the compatibility table):

=================================  ===========================================  ==================================
Expression                         Flink CDC 3.6                                lakecdc
=================================  ===========================================  ==================================
``UPPER/LOWER/TRIM/CHAR_LENGTH/``  NULL input → NPE, job fails                  NULL
``SUBSTR(NULL, ...)``
``a + - * / % b`` with a NULL      NullPointerException, job fails             NULL
``AND / OR / NOT`` with NULL       NPE in 3.6 (3-valued logic on master)        SQL three-valued logic (as master)
``a = b``, ``IN``                  Java ``equals``: INT 3 = BIGINT 3 is FALSE,  numeric values compared by value
                                   DECIMAL 1.0 = 1.00 FALSE, DECIMAL col =      (3 = 3, 1.0 = 1.00, price = 29.90
                                   decimal literal FALSE                        TRUE); NULL handling as Flink:
                                                                                ``=``/``IN``/``<`` → FALSE,
                                                                                ``<>`` → TRUE
comparing different type families  ``=`` FALSE, ``<`` runtime failure           rejected when the rule is compiled
(STRING vs INT, TIMESTAMP vs LTZ)
``s LIKE p`` (no ESCAPE)           Java regex substring search                  SQL LIKE (``%``, ``_``), the
                                   (``'Alice' LIKE 'A%'`` = FALSE)              documented meaning; NULL → NULL.
                                                                                Pattern must be a literal.
``CAST(str AS TIMESTAMP)``         only ``yyyy-MM-dd`` / ISO ``T`` forms; else  also ``yyyy-MM-dd HH:mm:ss``;
                                   job fails                                    unparseable → NULL
``CAST(str AS DECIMAL)``           exact BigDecimal parse                       parsed through DOUBLE (15-16
                                                                                significant digits)
``DATE_FORMAT(DATE, 'HH')``        DateTimeFormatter error, job fails           formats midnight (00)
``DATE_FORMAT`` pattern            any expression; any Java letter              literal only; letters of
                                                                                ``datefmt.SUPPORTED_LETTERS``
``SUBSTR/REPLACE/LTRIM...`` args   any expression                               positions / search text literal
``CHAR_LENGTH``                    UTF-16 code units                            code points
``UPPER('ß')``                     Java locale rules ('SS')                     Unicode simple case mapping
integer ``x / 0``, ``x % 0``       ArithmeticException, job fails               ExpressionError (batch fails)
=================================  ===========================================  ==================================
"""

from __future__ import annotations

import decimal
import re
from dataclasses import dataclass
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.errors import ExpressionError
from lakecdc.transform import datefmt
from lakecdc.transform.nodes import Call, EvalEnv, Literal, Node
from lakecdc.transform.types import (cast_array, common_numeric, common_type, family, flink_name, java_to_string,
                                     to_wall_clock)

Builder = Callable[[list[Node], str], Node]


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
    def register(build: Builder) -> Builder:
        table = OPERATORS if operator else FUNCTIONS
        for name in names:
            table[name.upper()] = FunctionDef(name.upper(), build, min_args, max_args)
        return build
    return register


def udf_function(name: str, fn: Callable) -> FunctionDef:
    """A pipeline UDF: called with the argument arrays, returns an array of ``fn.result_type`` (default STRING)."""
    result_type = getattr(fn, "result_type", None) or pa.string()

    def build(args: list[Node], sql: str) -> Node:
        return Call(lambda env, arrays: fn(*arrays), args, result_type, sql)

    return FunctionDef(name.upper(), build, 0, None)


def lookup_function(name: str, udfs: dict[str, Callable] | None = None) -> FunctionDef | None:
    """UDFs (case-insensitive) win over built-ins of the same name."""
    for udf_name, fn in (udfs or {}).items():
        if udf_name.upper() == name.upper():
            return udf_function(udf_name, fn)
    return FUNCTIONS.get(name.upper())


# ------------------------------------------------------------------------------------------------------ helpers

def _fam(node: Node) -> str:
    return family(node.dtype)


def _require(node: Node, families: tuple[str, ...], what: str) -> None:
    fam = _fam(node)
    if fam != "null" and fam not in families:
        raise ExpressionError(f"{what} expects {' or '.join(f.upper() for f in families)}, got "
                              f"{flink_name(node.dtype)} ({node.sql})")


def _const(node: Node, what: str):
    if not node.is_const:
        raise ExpressionError(f"{what} must be a literal, got {node.sql}")
    return node.const


def _false(n: int) -> pa.Array:
    return pa.repeat(pa.scalar(False), n)


def _true(n: int) -> pa.Array:
    return pa.repeat(pa.scalar(True), n)


def _comparison_type(a: Node, b: Node, op: str) -> pa.DataType | None:
    """The type both sides are converted to; None if one side is the NULL literal."""
    fa, fb = _fam(a), _fam(b)
    if "null" in (fa, fb):
        return None
    if fa != fb:
        raise ExpressionError(f"cannot compare {flink_name(a.dtype)} with {flink_name(b.dtype)} in "
                              f"{a.sql} {op} {b.sql}")
    if fa == "numeric":
        return common_numeric(a.dtype, b.dtype)
    if fa in ("timestamp", "timestamp_ltz", "time"):
        return common_type([a.dtype, b.dtype], op)
    if fa == "string":
        return pa.string()
    if fa == "binary":
        return pa.binary()
    if fa == "boolean" or fa == "date":
        return a.dtype
    raise ExpressionError(f"cannot compare values of type {flink_name(a.dtype)} ({a.sql} {op} {b.sql})")


_CMP = {"=": (pc.equal, False), "<>": (pc.not_equal, True), "<": (pc.less, False), ">": (pc.greater, False),
        "<=": (pc.less_equal, False), ">=": (pc.greater_equal, False)}


def compare(op: str, a: Node, b: Node, sql: str) -> Node:
    """Flink CDC comparison: never NULL; a NULL operand gives FALSE, except ``<>`` which gives TRUE."""
    kernel, on_null = _CMP[op]
    target = _comparison_type(a, b, op)
    if target is None:
        return Call(lambda env, arrays: (_true if on_null else _false)(env.num_rows), [a, b], pa.bool_(), sql)

    def run(env: EvalEnv, arrays: list[pa.Array]) -> pa.Array:
        left, right = (cast_array(x, target) for x in arrays)
        return pc.fill_null(kernel(left, right), on_null)

    return Call(run, [a, b], pa.bool_(), sql)


def _make_cmp(op: str) -> Builder:
    return lambda args, sql: compare(op, args[0], args[1], sql)


for _op in _CMP:
    function(_op, min_args=2, max_args=2, operator=True)(_make_cmp(_op))


# ---------------------------------------------------------------------------------------------------- logic

def _bool_args(args: list[Node], what: str) -> None:
    for a in args:
        _require(a, ("boolean",), what)


def _as_bool(arr: pa.Array) -> pa.Array:
    return pa.nulls(len(arr), pa.bool_()) if pa.types.is_null(arr.type) else arr


@function("AND", min_args=2, max_args=2, operator=True)
def _and(args, sql):
    _bool_args(args, "AND")
    return Call(lambda env, xs: pc.and_kleene(_as_bool(xs[0]), _as_bool(xs[1])), args, pa.bool_(), sql)


@function("OR", min_args=2, max_args=2, operator=True)
def _or(args, sql):
    _bool_args(args, "OR")
    return Call(lambda env, xs: pc.or_kleene(_as_bool(xs[0]), _as_bool(xs[1])), args, pa.bool_(), sql)


@function("NOT", operator=True)
def _not(args, sql):
    _bool_args(args, "NOT")
    return Call(lambda env, xs: pc.invert(_as_bool(xs[0])), args, pa.bool_(), sql)


@function("IS NULL", operator=True)
def _is_null(args, sql):
    return Call(lambda env, xs: pc.is_null(xs[0]), args, pa.bool_(), sql)


@function("IS NOT NULL", operator=True)
def _is_not_null(args, sql):
    return Call(lambda env, xs: pc.is_valid(xs[0]), args, pa.bool_(), sql)


def _is_bool(value: bool, negate: bool) -> Builder:
    def build(args, sql):
        _bool_args(args, sql)

        def run(env, xs):
            hit = pc.fill_null(pc.equal(_as_bool(xs[0]), value), False)
            return pc.invert(hit) if negate else hit
        return Call(run, args, pa.bool_(), sql)
    return build


for _name, _value, _negate in (("IS TRUE", True, False), ("IS NOT TRUE", True, True),
                               ("IS FALSE", False, False), ("IS NOT FALSE", False, True)):
    function(_name, operator=True)(_is_bool(_value, _negate))


@function("BETWEEN", min_args=3, max_args=3, operator=True)
def _between(args, sql):
    """``lo <= v AND v <= hi`` with FALSE for NULL (so NOT BETWEEN on NULL is TRUE, as in Flink CDC)."""
    ge = compare(">=", args[0], args[1], sql)
    le = compare("<=", args[0], args[2], sql)
    return Call(lambda env, xs: pc.and_(xs[0], xs[1]), [ge, le], pa.bool_(), sql)


@function("IN", min_args=2, max_args=None, operator=True)
def _in(args, sql):
    """``v IN (a, b)``: any ``v = x`` (NULL v → FALSE, NULL items never match) — never NULL, as in Flink CDC."""
    checks = [compare("=", args[0], item, sql) for item in args[1:]]

    def run(env, xs):
        result = xs[0]
        for x in xs[1:]:
            result = pc.or_(result, x)
        return result
    return Call(run, checks, pa.bool_(), sql)


def like_regex(pattern: str, escape: str | None) -> str:
    """SQL LIKE pattern → anchored RE2 regex (``%`` any text, ``_`` one character, escape char optional)."""
    out, i = ["(?s)^"], 0
    while i < len(pattern):
        ch = pattern[i]
        if escape is not None and ch == escape:
            if i + 1 >= len(pattern):
                raise ExpressionError(f"LIKE pattern {pattern!r} ends with the escape character")
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    out.append("$")
    return "".join(out)


@function("LIKE", min_args=2, max_args=3, operator=True)
def _like(args, sql):
    """SQL LIKE (the documented meaning), not Flink CDC 3.6's Java-regex substring search; NULL → NULL."""
    _require(args[0], ("string",), "LIKE")
    pattern = _const(args[1], "LIKE pattern")
    escape = _const(args[2], "LIKE escape") if len(args) > 2 else None
    if pattern is None or (len(args) > 2 and escape is None):
        return Literal(None, pa.bool_(), sql)
    if escape is not None and len(escape) != 1:
        raise ExpressionError(f"LIKE escape must be one character, got {escape!r}")
    regex = like_regex(pattern, escape)
    return Call(lambda env, xs: pc.match_substring_regex(xs[0].cast(pa.string()), regex), args[:1], pa.bool_(), sql)


# ---------------------------------------------------------------------------------------------- arithmetic

def _numeric_result(op: Callable, a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """The Arrow result type of ``op`` on the promoted operand types (decimal precision rules of Arrow)."""
    target = common_numeric(a, b)
    if pa.types.is_decimal(target):
        da = a if pa.types.is_decimal(a) else cast_type_for_decimal(a)
        db = b if pa.types.is_decimal(b) else cast_type_for_decimal(b)
        try:
            return op(pa.array([], da), pa.array([], db)).type
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return pa.float64()
    return target


def cast_type_for_decimal(t: pa.DataType) -> pa.DataType:
    if pa.types.is_null(t):
        return pa.decimal128(1, 0)
    return common_numeric(t, pa.decimal128(1, 0))


def _arith(op_name: str, kernel: Callable) -> Builder:
    def build(args, sql):
        a, b = args
        for x in args:
            _require(x, ("numeric",), f"operator {op_name}")
        if _fam(a) == "null" and _fam(b) == "null":
            return Literal(None, pa.int32(), sql)
        out = _numeric_result(kernel, a.dtype, b.dtype)

        def operand(arr: pa.Array) -> pa.Array:
            if pa.types.is_null(arr.type):
                return pa.nulls(len(arr), out)
            if pa.types.is_decimal(out):
                return arr if pa.types.is_decimal(arr.type) else arr.cast(cast_type_for_decimal(arr.type))
            return cast_array(arr, out)

        def run(env, xs):
            try:
                return kernel(operand(xs[0]), operand(xs[1]))
            except pa.ArrowInvalid as exc:
                raise ExpressionError(f"{sql}: {exc}") from None
        return Call(run, args, out, sql)
    return build


def _java_mod(x: pa.Array, y: pa.Array) -> pa.Array:
    """Java ``%``: ``x - y * trunc(x / y)``, so the remainder has the sign of the dividend."""
    quotient = pc.divide(x, y)  # integer division truncates toward zero
    if pa.types.is_floating(quotient.type):
        quotient = pc.trunc(quotient)
    return pc.subtract(x, pc.multiply(y, quotient))


for _sym, _kernel in (("+", pc.add), ("-", pc.subtract), ("*", pc.multiply), ("/", pc.divide)):
    function(_sym, min_args=2, max_args=2, operator=True)(_arith(_sym, _kernel))


@function("%", min_args=2, max_args=2, operator=True)
def _mod_op(args, sql):
    for x in args:
        _require(x, ("numeric",), "operator %")
    if any(pa.types.is_decimal(x.dtype) for x in args):
        out = common_numeric(args[0].dtype, args[1].dtype)
    else:
        out = common_numeric(args[0].dtype, args[1].dtype) if _fam(args[1]) != "null" else args[0].dtype

    def run(env, xs):
        x, y = (pa.nulls(len(a), out) if pa.types.is_null(a.type) else a.cast(out) for a in xs)
        try:
            if pa.types.is_decimal(out):  # DECIMAL remainder computed in DOUBLE, then rounded back
                return _java_mod(x.cast(pa.float64()), y.cast(pa.float64())).cast(out, safe=False)
            return _java_mod(x, y)
        except pa.ArrowInvalid as exc:
            raise ExpressionError(f"{sql}: {exc}") from None
    return Call(run, args, out, sql)


function("MOD", min_args=2, max_args=2)(_mod_op)


@function("NEG", operator=True)
def _neg(args, sql):
    _require(args[0], ("numeric",), "unary minus")
    return Call(lambda env, xs: pc.negate(xs[0]), args, args[0].dtype if _fam(args[0]) != "null" else pa.int32(), sql)


@function("ABS")
def _abs(args, sql):
    _require(args[0], ("numeric",), "ABS")
    return Call(lambda env, xs: pc.abs(xs[0]), args, args[0].dtype, sql)


def _ceil_floor(kernel: Callable, name: str) -> Builder:
    def build(args, sql):
        _require(args[0], ("numeric",), name)
        t = args[0].dtype
        if pa.types.is_integer(t) or pa.types.is_null(t):
            return Call(lambda env, xs: xs[0], args, t, sql)
        out = pa.decimal128(t.precision, 0) if pa.types.is_decimal(t) else t
        return Call(lambda env, xs: kernel(xs[0]).cast(out), args, out, sql)
    return build


function("CEIL", "CEILING")(_ceil_floor(pc.ceil, "CEIL"))
function("FLOOR")(_ceil_floor(pc.floor, "FLOOR"))


@function("ROUND", min_args=1, max_args=2)
def _round(args, sql):
    """HALF_UP (away from zero) to ``d`` digits; DECIMAL(p,s) → DECIMAL(p-s+d+1, d) when d < s."""
    _require(args[0], ("numeric",), "ROUND")
    digits = int(_const(args[1], "ROUND digits")) if len(args) > 1 else 0
    t = args[0].dtype
    if pa.types.is_integer(t) and digits >= 0 or pa.types.is_null(t):
        return Call(lambda env, xs: xs[0], args[:1], t, sql)
    out = t
    if pa.types.is_decimal(t) and digits < t.scale:
        out = pa.decimal128(min(38, max(1, t.precision - t.scale + digits + 1)), max(digits, 0))

    def run(env, xs):
        rounded = pc.round(xs[0], ndigits=digits, round_mode="half_towards_infinity")
        return rounded.cast(out, safe=False) if pa.types.is_decimal(out) else rounded.cast(out)
    return Call(run, args[:1], out, sql)


# ------------------------------------------------------------------------------------------------- strings

def _string_fn(name: str, kernel: Callable) -> Builder:
    def build(args, sql):
        _require(args[0], ("string",), name)
        return Call(lambda env, xs: kernel(xs[0].cast(pa.string())), args, pa.string(), sql)
    return build


function("UPPER")(_string_fn("UPPER", pc.utf8_upper))
function("LOWER")(_string_fn("LOWER", pc.utf8_lower))
_JAVA_WHITESPACE = "".join(chr(i) for i in range(33))
function("TRIM")(_string_fn("TRIM", lambda s: pc.utf8_trim(s, characters=_JAVA_WHITESPACE)))


@function("CHAR_LENGTH", "CHARACTER_LENGTH")
def _char_length(args, sql):
    _require(args[0], ("string",), "CHAR_LENGTH")
    return Call(lambda env, xs: pc.utf8_length(xs[0].cast(pa.string())).cast(pa.int32()), args, pa.int32(), sql)


def _side_trim(name: str, kernel: Callable) -> Builder:
    def build(args, sql):
        _require(args[0], ("string",), name)
        chars = _const(args[1], f"{name} characters") if len(args) > 1 else " "
        if chars is None:
            return Literal(None, pa.string(), sql)
        if chars == "":
            return Call(lambda env, xs: xs[0].cast(pa.string()), args[:1], pa.string(), sql)
        return Call(lambda env, xs: kernel(xs[0].cast(pa.string()), characters=chars), args[:1], pa.string(), sql)
    return build


function("LTRIM", min_args=1, max_args=2)(_side_trim("LTRIM", pc.utf8_ltrim))
function("RTRIM", min_args=1, max_args=2)(_side_trim("RTRIM", pc.utf8_rtrim))
function("BTRIM", min_args=1, max_args=2)(_side_trim("BTRIM", pc.utf8_trim))


@function("SUBSTR", "SUBSTRING", min_args=2, max_args=3)
def _substr(args, sql):
    """1-based; pos 0 = 1; negative pos counts from the end; past the end → ''; position/length literals."""
    _require(args[0], ("string",), "SUBSTR")
    pos = _const(args[1], "SUBSTR position")
    length = _const(args[2], "SUBSTR length") if len(args) > 2 else None
    if pos is None or (len(args) > 2 and length is None):
        return Literal(None, pa.string(), sql)
    pos = int(pos)
    if length is not None and int(length) < 0:
        raise ExpressionError(f"{sql}: negative substring length {length}")
    start = pos - 1 if pos > 0 else pos
    big = 2 ** 62
    if length is None:
        stop = big
    else:
        stop = start + int(length)
        if start < 0 and stop >= 0:
            stop = big
    return Call(lambda env, xs: pc.utf8_slice_codeunits(xs[0].cast(pa.string()), start=start, stop=stop),
                args[:1], pa.string(), sql)


@function("REPLACE", min_args=3, max_args=3)
def _replace(args, sql):
    _require(args[0], ("string",), "REPLACE")
    old, new = _const(args[1], "REPLACE search text"), _const(args[2], "REPLACE replacement")
    if old is None or new is None:
        return Literal(None, pa.string(), sql)
    if old == "":
        return Call(lambda env, xs: xs[0].cast(pa.string()), args[:1], pa.string(), sql)
    return Call(lambda env, xs: pc.replace_substring(xs[0].cast(pa.string()), pattern=old, replacement=new),
                args[:1], pa.string(), sql)


def _concat(args: list[Node], sql: str) -> Node:
    """Flink CDC 3.6 ``||`` / CONCAT: NULL is rendered as the text 'null', other values as Java toString()."""
    def run(env, xs):
        texts = [pc.fill_null(java_to_string(x, env.zone), "null") for x in xs]
        if len(texts) == 1:
            return texts[0]
        return pc.binary_join_element_wise(*texts, "")
    return Call(run, args, pa.string(), sql)


function("||", min_args=2, max_args=2, operator=True)(_concat)
function("CONCAT", min_args=1, max_args=None)(_concat)


@function("CONCAT_WS", min_args=1, max_args=None)
def _concat_ws(args, sql):
    """Join the non-NULL arguments with the separator; NULL separator → NULL; all arguments NULL → ''."""
    def run(env, xs):
        sep = xs[0].cast(pa.string()) if not pa.types.is_null(xs[0].type) else pa.nulls(env.num_rows, pa.string())
        acc = pa.nulls(env.num_rows, pa.string())
        # Not binary_join_element_wise(null_handling="skip"): pyarrow 19 drops rows whose inputs are all NULL.
        for x in xs[1:]:
            text = java_to_string(x, env.zone)
            joined = pc.binary_join_element_wise(acc, text, sep)
            acc = pc.if_else(pc.is_null(text), acc, pc.if_else(pc.is_null(acc), text, joined))
        acc = pc.fill_null(acc, "")
        return pc.if_else(pc.is_null(sep), pa.scalar(None, pa.string()), acc)
    return Call(run, args, pa.string(), sql)


# ------------------------------------------------------------------------------------------------ temporal

@function("DATE_FORMAT", min_args=2, max_args=2)
def _date_format(args, sql):
    """TIMESTAMP: its wall clock; TIMESTAMP_LTZ: wall clock in local-time-zone; DATE: midnight. NULL → NULL."""
    _require(args[0], ("timestamp", "timestamp_ltz", "date"), "DATE_FORMAT")
    pattern = _const(args[1], "DATE_FORMAT pattern")
    if pattern is not None and not isinstance(pattern, str):
        raise ExpressionError(f"DATE_FORMAT pattern must be a string literal, got {args[1].sql}")
    items = datefmt.parse_pattern(pattern) if pattern is not None else []
    if pattern is None or _fam(args[0]) == "null":
        return Literal(None, pa.string(), sql)
    fam = _fam(args[0])

    def run(env, xs):
        ts = xs[0]
        if fam == "timestamp_ltz":
            ts = to_wall_clock(ts, env.zone)
        elif fam == "date":
            ts = ts.cast(pa.timestamp("s"))
        return datefmt.format_wall_clock(ts, items)
    return Call(run, args[:1], pa.string(), sql)


# --------------------------------------------------------------------------------------------- conditional

def _branch_type(nodes: list[Node], what: str) -> pa.DataType:
    t = common_type([n.dtype for n in nodes], what)
    return pa.string() if pa.types.is_null(t) else t


def _cond(arr: pa.Array) -> pa.Array:
    """``isTrue(c)``: NULL conditions do not match."""
    return pc.fill_null(_as_bool(arr), False)


@function("IF", min_args=3, max_args=3)
def _if(args, sql):
    _require(args[0], ("boolean",), "IF condition")
    out = _branch_type(args[1:], "IF")

    def run(env, xs):
        return pc.if_else(_cond(xs[0]), cast_array(xs[1], out), cast_array(xs[2], out))
    return Call(run, args, out, sql)


@function("CASE", min_args=2, max_args=None, operator=True)
def _case(args, sql):
    """args = [cond1, value1, cond2, value2, ..., (else)]; no ELSE → NULL."""
    pairs = [(args[i], args[i + 1]) for i in range(0, len(args) - 1, 2)]
    default = args[-1] if len(args) % 2 else None
    for cond, _ in pairs:
        _require(cond, ("boolean",), "CASE WHEN condition")
    values = [v for _, v in pairs] + ([default] if default is not None else [])
    out = _branch_type(values, "CASE")

    def run(env, xs):
        conds = [_cond(xs[i]) for i in range(0, 2 * len(pairs), 2)]
        vals = [cast_array(xs[i], out) for i in range(1, 2 * len(pairs), 2)]
        if default is not None:
            vals.append(cast_array(xs[-1], out))
        names = [f"c{i}" for i in range(len(conds))]
        return pc.case_when(pa.StructArray.from_arrays(conds, names=names), *vals)
    return Call(run, args, out, sql)


@function("COALESCE", min_args=1, max_args=None)
def _coalesce(args, sql):
    out = _branch_type(args, "COALESCE")
    return Call(lambda env, xs: pc.coalesce(*[cast_array(x, out) for x in xs]), args, out, sql)


@function("IFNULL", min_args=2, max_args=2)
def _ifnull(args, sql):
    """Like COALESCE, but declared NOT NULL when the replacement is NOT NULL (Flink CDC's one exception)."""
    out = _branch_type(args, "IFNULL")
    return Call(lambda env, xs: pc.coalesce(*[cast_array(x, out) for x in xs]), args, out, sql,
                nullable=args[1].nullable)


@function("NULLIF", min_args=2, max_args=2)
def _nullif(args, sql):
    eq = compare("=", args[0], args[1], sql)
    out = args[0].dtype if not pa.types.is_null(args[0].dtype) else pa.string()

    def run(env, xs):
        return pc.if_else(xs[1], pa.scalar(None, out), cast_array(xs[0], out))
    return Call(run, [args[0], eq], out, sql)


# ----------------------------------------------------------------------------------------------------- CAST

CAST_TARGETS = "BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, DECIMAL(p, s), CHAR, VARCHAR, STRING, TIMESTAMP"

_INT_RE = r"^[+-]?[0-9]+$"
_NUM_RE = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
_INT_RANGE = {8: (-2 ** 7, 2 ** 7 - 1), 16: (-2 ** 15, 2 ** 15 - 1), 32: (-2 ** 31, 2 ** 31 - 1),
              64: (-2 ** 63, 2 ** 63 - 1)}


def _strings_matching(s: pa.Array, regex: str) -> tuple[pa.Array, pa.Array]:
    ok = pc.fill_null(pc.match_substring_regex(s, regex), False)
    return ok, pc.if_else(ok, s, pa.scalar(None, pa.string()))


def _to_integer(arr: pa.Array, target: pa.DataType, strict: bool) -> pa.Array:
    t = arr.type
    fam = family(t)
    if fam == "boolean":
        return arr.cast(pa.int8()).cast(target)
    if pa.types.is_integer(t):
        return arr.cast(target, safe=False)  # Java narrowing wraps
    if pa.types.is_floating(t):
        return pc.trunc(arr.cast(pa.float64())).cast(pa.int64(), safe=False).cast(target, safe=False)
    if pa.types.is_decimal(t):
        whole = arr.cast(pa.decimal128(t.precision, 0), safe=False)  # truncates toward zero
        return whole.cast(pa.int64(), safe=False).cast(target, safe=False)
    # strings
    s = pc.utf8_trim_whitespace(arr.cast(pa.string()))
    if strict:  # TRY_CAST: integer text in range only
        ok, ints = _strings_matching(s, _INT_RE)
        short = pc.less_equal(pc.utf8_length(ints), 18)
        values = pc.if_else(short, ints, pa.scalar(None, pa.string())).cast(pa.int64())
        lo, hi = _INT_RANGE[target.bit_width]
        in_range = pc.and_(pc.greater_equal(values, lo), pc.less_equal(values, hi))
        return pc.if_else(in_range, values, pa.scalar(None, pa.int64())).cast(target, safe=False)
    ok_int, ints = _strings_matching(s, _INT_RE)
    short = pc.fill_null(pc.less_equal(pc.utf8_length(ints), 18), False)
    as_int = pc.if_else(short, ints, pa.scalar(None, pa.string())).cast(pa.int64())
    ok_num, nums = _strings_matching(s, _NUM_RE)
    as_num = pc.trunc(nums.cast(pa.float64())).cast(pa.int64(), safe=False)
    return pc.if_else(short, as_int, as_num).cast(target, safe=False)


def _to_floating(arr: pa.Array, target: pa.DataType) -> pa.Array:
    fam = family(arr.type)
    if fam == "boolean":
        return arr.cast(pa.int8()).cast(target)
    if fam == "numeric":
        return arr.cast(target, safe=False)
    s = pc.utf8_trim_whitespace(arr.cast(pa.string()))
    _, nums = _strings_matching(s, _NUM_RE)
    return nums.cast(pa.float64()).cast(target)


def _to_decimal(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """HALF_UP to the scale; values that do not fit the precision → NULL."""
    p, s = target.precision, target.scale
    t = arr.type
    fam = family(t)
    if fam == "boolean":
        arr, t = arr.cast(pa.int8()), pa.int8()
    elif fam == "string":
        _, nums = _strings_matching(pc.utf8_trim_whitespace(arr.cast(pa.string())), _NUM_RE)
        arr, t = nums.cast(pa.float64()), pa.float64()
    limit = 10 ** (p - s)
    if pa.types.is_floating(t):
        x = pc.round(arr.cast(pa.float64()), ndigits=s, round_mode="half_towards_infinity")
        fits = pc.less(pc.abs(x), float(limit))
        x = pc.if_else(fits, x, pa.scalar(None, pa.float64()))
        return x.cast(pa.decimal128(38, s), safe=False).cast(target, safe=False)
    if pa.types.is_integer(t):
        arr, t = arr.cast(pa.decimal128(20, 0)), pa.decimal128(20, 0)
    rounded = pc.round(arr, ndigits=s, round_mode="half_towards_infinity") if t.scale > s else arr
    wide = pa.decimal128(38, s)
    x = rounded.cast(pa.decimal128(min(38, rounded.type.precision + max(0, s - t.scale)), max(s, t.scale)),
                     safe=False).cast(wide, safe=False)
    fits = pc.less(pc.abs(x), pa.scalar(decimal.Decimal(limit), pa.decimal128(38, 0)).cast(wide))
    return pc.if_else(fits, x, pa.scalar(None, wide)).cast(target, safe=False)


_TS_DATE_RE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
_TS_LOCAL_RE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,9})?)?$"
_TS_SUFFIX_RE = r"^(.*[T ][0-9:.]+)(Z|[+-][0-9]{2}(:?[0-9]{2})?(\[[^\]]+\])?|\[[^\]]+\])$"


def _parse_timestamps(s: pa.Array, unit: str) -> pa.Array:
    """ISO-ish text → naive timestamps; anything else → NULL."""
    target = pa.timestamp(unit)
    try:
        return s.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    # Per-row fallback only for batches holding invalid calendar values (Arrow's cast fails the whole array).
    import datetime as _dt
    out = []
    for value in s.to_pylist():
        try:
            out.append(None if value is None else _dt.datetime.fromisoformat(value))
        except ValueError:
            out.append(None)
    return pa.array(out, target)


def _to_timestamp(arr: pa.Array, target: pa.DataType, zone: str) -> pa.Array:
    fam = family(arr.type)
    unit = target.unit
    if fam == "timestamp":
        return arr.cast(target, safe=False)
    if fam == "timestamp_ltz":
        return to_wall_clock(arr, zone).cast(target, safe=False)
    if fam == "date":
        return arr.cast(pa.timestamp("s")).cast(target)
    s = pc.utf8_trim_whitespace(arr.cast(pa.string()))
    instant = pc.fill_null(pc.match_substring_regex(s, r"Z$"), False)
    local = pc.replace_substring_regex(s, _TS_SUFFIX_RE, r"\1")
    ok = pc.fill_null(pc.or_(pc.match_substring_regex(local, _TS_DATE_RE),
                             pc.match_substring_regex(local, _TS_LOCAL_RE)), False)
    local = pc.if_else(ok, pc.replace_substring(local, " ", "T"), pa.scalar(None, pa.string()))
    parsed = _parse_timestamps(local, "ns").cast(target, safe=False)
    if pc.any(instant).as_py():
        converted = to_wall_clock(parsed.cast(pa.timestamp(unit, tz="UTC")), zone)
        parsed = pc.if_else(instant, converted, parsed)
    return parsed


def _to_boolean(arr: pa.Array, strict: bool) -> pa.Array:
    fam = family(arr.type)
    if fam == "boolean":
        return arr
    if fam == "numeric":
        return pc.not_equal(arr, pa.scalar(0, arr.type) if not pa.types.is_decimal(arr.type) else 0)
    s = pc.utf8_lower(arr.cast(pa.string()))
    if not strict:
        return pc.equal(s, "true")  # Boolean.valueOf: only 'true' (any case) is TRUE
    s = pc.utf8_trim_whitespace(s)
    yes = pc.is_in(s, value_set=pa.array(["t", "true", "y", "yes", "1"]))
    no = pc.is_in(s, value_set=pa.array(["f", "false", "n", "no", "0"]))
    return pc.if_else(yes, True, pc.if_else(no, False, pa.scalar(None, pa.bool_())))


def cast(node: Node, target: pa.DataType, try_cast: bool, sql: str) -> Node:
    """Flink CDC CAST / TRY_CAST to ``target`` (one of ``CAST_TARGETS`` as an Arrow type)."""
    fam = _fam(node)
    tfam = family(target)
    if fam == "null":
        return Literal(None, target, sql)
    allowed = {
        "string": ("boolean", "numeric", "string", "date", "time", "timestamp", "timestamp_ltz", "binary"),
        "boolean": ("boolean", "numeric", "string"),
        "numeric": ("boolean", "numeric", "string"),
        "timestamp": ("timestamp", "timestamp_ltz", "date", "string"),
    }[tfam]
    if fam not in allowed:
        raise ExpressionError(f"cannot cast {flink_name(node.dtype)} to {flink_name(target)} ({sql})")

    def run(env, xs):
        arr = xs[0]
        if tfam == "string":
            return java_to_string(arr, env.zone)
        if tfam == "boolean":
            return _to_boolean(arr, try_cast)
        if pa.types.is_integer(target):
            return _to_integer(arr, target, try_cast)
        if pa.types.is_floating(target):
            return _to_floating(arr, target)
        if pa.types.is_decimal(target):
            return _to_decimal(arr, target)
        return _to_timestamp(arr, target, env.zone)

    return Call(run, [node], target, sql)
