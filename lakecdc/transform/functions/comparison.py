"""Comparison and logical operators: ``= <> < > <= >=``, ``[NOT] BETWEEN``, ``[NOT] IN``, ``IS [NOT] DISTINCT FROM``,
``[NOT] LIKE [ESCAPE]``, ``[NOT] SIMILAR TO [ESCAPE]``, ``IS [NOT] NULL/TRUE/FALSE/UNKNOWN``, ``AND``, ``OR``, ``NOT``.

Comparisons are Flink CDC's (ComparisonFunctions, as its documentation's function column names them): never NULL;
``=``, ``<``, ``>``, ``<=``, ``>=`` and BETWEEN give FALSE for a NULL operand, while ``<>`` (``!valueEquals``),
NOT BETWEEN (``!betweenAsymmetric``) and NOT IN (``!in``) are the negations and so TRUE; IN is Java's
``Arrays.asList(items).contains(v)``, which also finds a NULL ``v`` among NULL items. Numbers compare by value across
types (INT 3 = BIGINT 3; Java's ``equals`` would not). Comparing different type families (STRING with INT, TIMESTAMP
with TIMESTAMP_LTZ) is rejected when the rule is compiled. LIKE is SQL LIKE; logic is SQL three-valued.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.errors import ExpressionError
from lakecdc.transform.functions.base import (Site, as_bool, false_array, fam, function, is_null_literal, null_of,
                                              require, with_scalars)
from lakecdc.transform.nodes import Call, Node, eval_where
from lakecdc.transform.types import cast_array, common_numeric, common_type, comparable_decimals, flink_name

_ORDERED = ("numeric", "string", "boolean", "date", "time", "timestamp", "timestamp_ltz", "binary")


def comparison_type(a: Node, b: Node, op: str) -> pa.DataType | None:
    """The type both sides are converted to; None if one side is the NULL literal."""
    fa, fb = fam(a), fam(b)
    if "null" in (fa, fb):
        return None
    if fa != fb:
        hint = ""
        if "string" in (fa, fb) and {fa, fb} & {"timestamp", "date", "time"}:
            hint = " (convert the text with TO_TIMESTAMP / TO_DATE or CAST first)"
        raise ExpressionError(f"cannot compare {flink_name(a.dtype)} with {flink_name(b.dtype)} in "
                              f"{a.sql} {op} {b.sql}{hint}")
    if fa not in _ORDERED:
        raise ExpressionError(f"cannot compare values of type {flink_name(a.dtype)} ({a.sql} {op} {b.sql})")
    if fa == "numeric":
        common = common_numeric(a.dtype, b.dtype)
        if pa.types.is_float32(common) and not (pa.types.is_float32(a.dtype) and pa.types.is_float32(b.dtype)):
            return pa.float64()  # by exact value: 16777217 (BIGINT) is not 16777216.0 (FLOAT)
        return common
    if fa in ("timestamp", "timestamp_ltz", "time"):
        return common_type([a.dtype, b.dtype], op)
    if fa == "string":
        return pa.string()
    if fa == "binary":
        return pa.binary()
    return a.dtype


_CMP = {"=": pc.equal, "<>": pc.not_equal, "<": pc.less, ">": pc.greater, "<=": pc.less_equal,
        ">=": pc.greater_equal}


def comparable(left: pa.Array, right: pa.Array, target: pa.DataType) -> tuple[pa.Array, pa.Array]:
    """Both sides' values in one type. DECIMAL comparisons are exact on the values (BigDecimal.compareTo), not on
    the declared types: a value keeps its digits inside an expression even where its declared type is capped at 19
    digits, and the common type of DECIMAL(38, 0) and DECIMAL(38, 2) would need 40."""
    if pa.types.is_decimal(target):
        return comparable_decimals(left, right)
    return cast_array(left, target), cast_array(right, target)


def compare(op: str, a: Node, b: Node, sql: str) -> Node:
    """``a op b``: never NULL. A NULL operand gives FALSE, except for ``<>``, which is ``!valueEquals(a, b)`` in
    Flink CDC's generated code and so TRUE (its documentation's function column and its own spec tests agree)."""
    if op == "<>":
        comparison_type(a, b, op)  # refused types are named with the operator written
        return negated(compare("=", a, b, sql), Site(sql))
    kernel = _CMP[op]
    target = comparison_type(a, b, op)
    if target is None:
        return Call(lambda env, arrays: false_array(env.num_rows), [a, b], pa.bool_(), sql)

    def run(env, arrays):
        left, right = comparable(arrays[0], arrays[1], target)
        return pc.fill_null(kernel(left, right), False)

    return Call(run, [a, b], pa.bool_(), sql)


def _make_cmp(op: str):
    return lambda args, site: compare(op, args[0], args[1], site.sql)


for _op in _CMP:
    function(_op, min_args=2, max_args=2, operator=True)(_make_cmp(_op))


@function("IS DISTINCT FROM", min_args=2, max_args=2, operator=True)
def _is_distinct(args, site):
    return _distinct(args, site, negate=False)


@function("IS NOT DISTINCT FROM", min_args=2, max_args=2, operator=True)
def _is_not_distinct(args, site):
    return _distinct(args, site, negate=True)


def _distinct(args: list[Node], site: Site, negate: bool, op: str = "IS DISTINCT FROM") -> Node:
    """NULL-safe equality: two NULLs are not distinct; numbers compare by value."""
    a, b = args
    target = comparison_type(a, b, op)

    def run(env, xs):
        if target is None:
            same = pc.and_(pc.is_null(xs[0]), pc.is_null(xs[1]))
        else:
            left, right = comparable(xs[0], xs[1], target)
            both_null = pc.and_(pc.is_null(left), pc.is_null(right))
            same = pc.or_(both_null, pc.fill_null(pc.equal(left, right), False))
        return same if negate else pc.invert(same)
    return Call(run, args, pa.bool_(), site.sql)


# ---------------------------------------------------------------------------------------------------- logic

def _bool_args(args: list[Node], what: str) -> None:
    for a in args:
        require(a, ("boolean",), what)


@function("AND", min_args=2, max_args=2, operator=True)
def _and(args, site):
    _bool_args(args, "AND")

    def run(env, nodes):  # the right side only where the left is not FALSE (Java's &&)
        left = as_bool(nodes[0].eval(env))
        right = as_bool(eval_where(nodes[1], env, pc.fill_null(left, True)))
        return pc.and_kleene(left, right)
    return Call(run, args, pa.bool_(), site.sql, lazy=True)


@function("OR", min_args=2, max_args=2, operator=True)
def _or(args, site):
    _bool_args(args, "OR")

    def run(env, nodes):  # the right side only where the left is not TRUE (Java's ||)
        left = as_bool(nodes[0].eval(env))
        right = as_bool(eval_where(nodes[1], env, pc.invert(pc.fill_null(left, False))))
        return pc.or_kleene(left, right)
    return Call(run, args, pa.bool_(), site.sql, lazy=True)


@function("NOT", operator=True)
def _not(args, site):
    _bool_args(args, "NOT")
    return Call(lambda env, xs: pc.invert(as_bool(xs[0])), args, pa.bool_(), site.sql)


@function("IS NULL", operator=True)
def _is_null(args, site):
    return Call(lambda env, xs: pc.is_null(xs[0]), args, pa.bool_(), site.sql)


@function("IS NOT NULL", operator=True)
def _is_not_null(args, site):
    return Call(lambda env, xs: pc.is_valid(xs[0]), args, pa.bool_(), site.sql)


def _is_bool(value: bool, negate: bool):
    def build(args, site):
        _bool_args(args, site.sql)

        def run(env, xs):
            hit = pc.fill_null(pc.equal(as_bool(xs[0]), value), False)
            return pc.invert(hit) if negate else hit
        return Call(run, args, pa.bool_(), site.sql)
    return build


for _name, _value, _negate in (("IS TRUE", True, False), ("IS NOT TRUE", True, True),
                               ("IS FALSE", False, False), ("IS NOT FALSE", False, True)):
    function(_name, operator=True)(_is_bool(_value, _negate))


# ------------------------------------------------------------------------------------------ BETWEEN / IN

def _all(nodes: list[Node], combine, site: Site) -> Node:
    def run(env, xs):
        result = xs[0]
        for x in xs[1:]:
            result = combine(result, x)
        return result
    return Call(run, nodes, pa.bool_(), site.sql)


@function("BETWEEN", min_args=3, max_args=3, operator=True)
def _between(args, site):
    """``lo <= v AND v <= hi``; FALSE when any operand is NULL."""
    return _all([compare(">=", args[0], args[1], site.sql), compare("<=", args[0], args[2], site.sql)], pc.and_,
                site)


@function("NOT BETWEEN", min_args=3, max_args=3, operator=True)
def _not_between(args, site):
    """``!betweenAsymmetric(v, lo, hi)`` (Flink CDC): TRUE when v is NULL."""
    return negated(_between(args, site), site)


@function("BETWEEN SYMMETRIC", min_args=3, max_args=3, operator=True)
def _between_symmetric(args, site):
    v, lo, hi = args
    forward = _between([v, lo, hi], site)
    backward = _between([v, hi, lo], site)
    return _all([forward, backward], pc.or_, site)


@function("NOT BETWEEN SYMMETRIC", min_args=3, max_args=3, operator=True)
def _not_between_symmetric(args, site):
    return negated(_between_symmetric(args, site), site)  # as NOT BETWEEN: TRUE when v is NULL


@function("IN", min_args=2, max_args=None, operator=True)
def _in(args, site):
    """``v IN (a, b)``: Flink CDC's ``Arrays.asList(a, b).contains(v)``: TRUE when v equals an item (by value), or
    when v and an item are both NULL (``NULL IN (1, NULL)``); never NULL (``1 IN (2, NULL)`` is FALSE)."""
    return _all([_distinct([args[0], item], site, negate=True, op="IN") for item in args[1:]], pc.or_, site)


@function("NOT IN", min_args=2, max_args=None, operator=True)
def _not_in(args, site):
    """``!in(v, a, b)`` (Flink CDC): ``1 NOT IN (2, NULL)`` and ``NULL NOT IN (1, 2)`` are TRUE."""
    return negated(_in(args, site), site)


# ------------------------------------------------------------------------------------ LIKE / SIMILAR TO

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


_SIMILAR_META = set("|*+?{}()[]")


def similar_regex(pattern: str, escape: str | None) -> str:
    """SQL SIMILAR TO pattern → anchored RE2 regex: ``%``/``_`` wildcards, ``| * + ? {m,n} ( ) [...]`` as in
    regular expressions, every other character literal."""
    out, i, in_class = ["(?s)^(?:"], 0, False
    while i < len(pattern):
        ch = pattern[i]
        if escape is not None and ch == escape:
            if i + 1 >= len(pattern):
                raise ExpressionError(f"SIMILAR TO pattern {pattern!r} ends with the escape character")
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        if in_class:
            out.append("\\" + ch if ch in "\\[" else ch)
            in_class = ch != "]"
        elif ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        elif ch == "[":
            out.append("[")
            in_class = True
        elif ch in _SIMILAR_META:
            out.append(ch)
        else:
            out.append(re.escape(ch))
        i += 1
    out.append(")$")
    return "".join(out)


def _pattern_match(name: str, to_regex):
    def build(args, site):
        require(args[0], ("string",), name)
        require(args[1], ("string",), f"{name} pattern")
        if len(args) > 2:
            require(args[2], ("string",), f"{name} escape")
        if any(is_null_literal(a) for a in args):
            return null_of(pa.bool_(), site)
        if args[1].is_const:
            escape = args[2].const if len(args) > 2 and args[2].is_const else None
            if escape is not None and len(escape) != 1:
                raise ExpressionError(f"{name} escape must be one character, got {escape!r}")
            to_regex(args[1].const, escape)  # a malformed literal pattern is a compile-time error

        def kernel(env, xs, values):
            pattern, escape = values[0], values[1] if len(values) > 1 else None
            if escape is not None and len(escape) != 1:
                raise ExpressionError(f"{site.sql}: {name} escape must be one character, got {escape!r}")
            return pc.match_substring_regex(xs[0].cast(pa.string()), to_regex(pattern, escape))
        return with_scalars(args, range(1, len(args)), kernel, pa.bool_(), site)
    return build


function("LIKE", min_args=2, max_args=3, operator=True)(_pattern_match("LIKE", like_regex))
function("SIMILAR TO", min_args=2, max_args=3, operator=True)(_pattern_match("SIMILAR TO", similar_regex))


def negated(node: Node, site: Site) -> Node:
    """``NOT`` of a (possibly NULL) boolean node."""
    return Call(lambda env, xs: pc.invert(as_bool(xs[0])), [node], pa.bool_(), site.sql)
