"""Arithmetic: ``+ - * / %``, unary minus, ``MOD``, ``ABS``, ``CEIL``/``CEILING``, ``FLOOR``, ``ROUND``, ``UUID``.

Result types are Calcite's (INT + INT → INT, INT + BIGINT → BIGINT, DECIMAL precision rules capped at 19 or 38);
values follow the Java operators Flink CDC compiles to: integer overflow wraps, integer division truncates, ``%``
has the sign of the dividend, DECIMAL division truncates to the scale of the dividend. A NULL operand gives NULL
(Flink CDC 3.6 fails the job). Integer division by zero fails the batch, as it fails Flink CDC's job.
"""

from __future__ import annotations

import decimal as _d
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.errors import ExpressionError
from lakecdc.transform.functions.base import (Site, data_error, fam, function, is_null_literal, null_of, require)
from lakecdc.transform.functions.temporal import interval_arithmetic
from lakecdc.transform.nodes import Call, Node
from lakecdc.transform.types import (arithmetic_type, calcite_type, capped_decimal, cast_array, decimal_to_float,
                                     exact_decimal, fit_decimal, flink_name, integer_decimal, integer_decl)
from lakecdc.transform.types import common_numeric

_KERNELS = {"+": pc.add, "-": pc.subtract, "*": pc.multiply}


def _decimal_operand(arr: pa.Array) -> pa.Array:
    return arr if pa.types.is_decimal(arr.type) else arr.cast(integer_decimal(arr.type))


def _wide(arr: pa.Array, headroom: int = 0) -> pa.Array:
    """The same values as a 256-bit decimal (``headroom`` more digits), so a result may exceed 38 digits."""
    t = arr.type
    return arr.cast(pa.decimal256(t.precision + headroom, t.scale))


def decimal_arithmetic(op: str, x: pa.Array, y: pa.Array, site: Site) -> pa.Array:
    """Exact DECIMAL ``x op y`` as Java's BigDecimal: ``+ - *`` exact, ``/`` truncated (RoundingMode.DOWN) to
    the scale of the dividend, ``%`` with the sign of the dividend. The value stays exact; the declared type of
    the expression applies when it becomes an output value (``exact_decimal``)."""
    try:
        if op == "/":
            return exact_decimal(_decimal_divide(x, y, site))
        if op == "%":
            return exact_decimal(_decimal_mod(x, y, site))
        return exact_decimal(_KERNELS[op](_wide(x), _wide(y)))
    except pa.ArrowInvalid:
        return _decimal_arithmetic_rows(op, x, y, site)


def _decimal_arithmetic_rows(op: str, x: pa.Array, y: pa.Array, site: Site) -> pa.Array:
    """Per-row BigDecimal arithmetic for operands too wide for Arrow's 76-digit kernels (both near 38 digits):
    rare enough that a Python loop costs nothing in practice, and it keeps such rows exact instead of failing."""
    context = _d.Context(prec=200, rounding=_d.ROUND_DOWN)
    scale = {"+": max(x.type.scale, y.type.scale), "-": max(x.type.scale, y.type.scale),
             "*": min(38, x.type.scale + y.type.scale), "/": x.type.scale, "%": max(x.type.scale, y.type.scale)}[op]
    out: list[_d.Decimal | None] = []
    for a, b in zip(x.to_pylist(), y.to_pylist()):
        if a is None or b is None:
            out.append(None)
            continue
        if op in "/%" and b == 0:
            raise _division_by_zero(site, x, y)
        if op == "/":
            value = context.divide(a, b).quantize(_d.Decimal(1).scaleb(-scale), rounding=_d.ROUND_DOWN,
                                                  context=context)
        elif op == "%":
            value = context.remainder(a, b)
        else:
            value = {"+": context.add, "-": context.subtract, "*": context.multiply}[op](a, b)
        value = value.quantize(_d.Decimal(1).scaleb(-scale), rounding=_d.ROUND_HALF_UP, context=context)
        out.append(value if len(value.as_tuple().digits) <= 38 else None)
    return pa.array(out, pa.decimal128(38, scale))


def _division_by_zero(site: Site, left: pa.Array, right: pa.Array) -> ExpressionError:
    return data_error(site, "division by zero (Flink CDC fails the job with an ArithmeticException)")


def binary_arithmetic(op: str, a: Node, b: Node, site: Site) -> Node:
    if op in "+-" and "interval" in (fam(a), fam(b)):
        return interval_arithmetic(op, a, b, site)
    for x in (a, b):
        require(x, ("numeric",), f"operator {op}")
    declared = arithmetic_type(op, integer_decl(a.dtype, a.decl), integer_decl(b.dtype, b.decl), site.max_precision)
    if is_null_literal(a) or is_null_literal(b):
        return null_of(declared, site)
    decimal_result = pa.types.is_decimal(declared)
    # Calcite declares TINYINT * TINYINT as TINYINT (SMALLINT likewise), but the generated Java computes on the
    # unboxed values with binary numeric promotion: an int, which wraps only at 32 bits (CAST(age * age * age AS
    # INT) with age 15 is 3375). The values stay INT; the declared type narrows them where they become an output.
    out = pa.int32() if declared in (pa.int8(), pa.int16()) else declared

    def run(env, xs):
        x, y = xs
        if decimal_result:
            return decimal_arithmetic(op, _decimal_operand(x), _decimal_operand(y), site)
        if op == "%":
            return _java_mod(cast_array(x, _mod_type(x.type, y.type)), cast_array(y, _mod_type(x.type, y.type)),
                             site).cast(out, safe=False)
        x, y = cast_array(x, out), cast_array(y, out)
        if op == "/":
            return _divide(x, y, site)
        return _KERNELS[op](x, y)  # unchecked kernels: integer overflow wraps like Java
    call = Call(run, [a, b], out, site.sql, nullable=a.nullable or b.nullable)
    call.decl = flink_name(declared) if out != declared else None
    return call


def _mod_type(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    return common_numeric(a, b)


def _divide(x: pa.Array, y: pa.Array, site: Site) -> pa.Array:
    try:
        return pc.divide(x, y)  # integers: truncating division; floating point: IEEE (x/0 = Infinity)
    except pa.ArrowInvalid as exc:
        if "divide by zero" in str(exc).lower():
            raise _division_by_zero(site, x, y) from None
        raise ExpressionError(f"{site.sql}: {exc}") from None


def _decimal_divide(x: pa.Array, y: pa.Array, site: Site) -> pa.Array:
    """``x.divide(y, RoundingMode.DOWN)``: the quotient truncated to the scale of the dividend."""
    zero = pc.fill_null(pc.equal(y, pa.scalar(0, pa.int8()).cast(y.type)), False)
    if pc.any(pc.and_(zero, pc.is_valid(x))).as_py():
        raise _division_by_zero(site, x, y)
    safe_y = pc.if_else(zero, pa.scalar(1, pa.int8()).cast(y.type), y)
    quotient = pc.divide(_wide(x), _wide(safe_y))  # Arrow truncates the quotient, as RoundingMode.DOWN
    scale = x.type.scale
    truncated = quotient.cast(pa.decimal256(quotient.type.precision, scale), safe=False)
    return pc.if_else(zero, pa.scalar(None, truncated.type), truncated)


def _decimal_mod(x: pa.Array, y: pa.Array, site: Site) -> pa.Array:
    """Exact ``x - y * trunc(x / y)`` (the sign of the dividend, as BigDecimal.remainder)."""
    zero = pc.fill_null(pc.equal(y, pa.scalar(0, pa.int8()).cast(y.type)), False)
    if pc.any(pc.and_(zero, pc.is_valid(x))).as_py():
        raise _division_by_zero(site, x, y)
    safe_y = pc.if_else(zero, pa.scalar(1, pa.int8()).cast(y.type), y)
    x, safe_y = _wide(x), _wide(safe_y)
    quotient = pc.divide(x, safe_y)
    whole = quotient.cast(pa.decimal256(quotient.type.precision, 0), safe=False)
    return pc.subtract(x, pc.multiply(safe_y, whole))


def _java_mod(x: pa.Array, y: pa.Array, site: Site) -> pa.Array:
    """Java ``%``: ``x - y * trunc(x / y)``, so the remainder has the sign of the dividend."""
    quotient = _divide(x, y, site)
    if pa.types.is_floating(quotient.type):
        quotient = pc.trunc(quotient)
    return pc.subtract(x, pc.multiply(y, quotient))


def _arith(op: str):
    return lambda args, site: binary_arithmetic(op, args[0], args[1], site)


for _op in ("+", "-", "*", "/", "%"):
    function(_op, min_args=2, max_args=2, operator=True)(_arith(_op))
function("MOD", min_args=2, max_args=2)(_arith("%"))


def _as_arg0(call: Call, arg: Node) -> Call:
    """A result of the operand's type (Calcite's ARG0) keeps its declared type: -(ti * ti) is a TINYINT whose values
    are Java ints (see binary_arithmetic)."""
    if call.dtype == arg.dtype:
        call.decl = arg.decl
    return call


def _same_type(node: Node, site: Site) -> pa.DataType:
    """The type of a sign operation (unary minus, ABS): the operand's, a DECIMAL capped at the pipeline's maximum
    precision (ABS(DECIMAL(20, 2)) is DECIMAL(19, 2) in UP_TO_19)."""
    t = node.dtype
    if pa.types.is_null(t):
        return pa.int32()
    return capped_decimal(t.precision, t.scale, site.max_precision) if pa.types.is_decimal(t) else t


@function("NEG", operator=True)
def _neg(args, site):
    require(args[0], ("numeric",), "unary minus")
    return _as_arg0(Call(lambda env, xs: pc.negate(xs[0]), args, _same_type(args[0], site), site.sql), args[0])


@function("ABS")
def _abs(args, site):
    require(args[0], ("numeric",), "ABS")
    return _as_arg0(Call(lambda env, xs: pc.abs(xs[0]), args, _same_type(args[0], site), site.sql), args[0])


def _whole(arr: pa.Array) -> pa.Array:
    """An integral decimal array rescaled to scale 0 (exact)."""
    return arr.cast(pa.decimal256(arr.type.precision, 0), safe=False)


def _ceil_floor(kernel, name: str):
    def build(args, site):
        require(args[0], ("numeric",), name)
        t = args[0].dtype
        if pa.types.is_null(t):
            return null_of(pa.int32(), site)
        if pa.types.is_integer(t):
            return _as_arg0(Call(lambda env, xs: xs[0], args, t, site.sql), args[0])
        if pa.types.is_decimal(t):
            # DECIMAL(p, s) → DECIMAL(p, 0), capped at the pipeline's maximum precision (Calcite's type system)
            out = capped_decimal(t.precision, 0, site.max_precision)
            return Call(lambda env, xs: exact_decimal(_whole(kernel(_wide(xs[0], 1)))), args, out, site.sql)
        return Call(lambda env, xs: kernel(xs[0]), args, t, site.sql)
    return build


function("CEIL", "CEILING")(_ceil_floor(pc.ceil, "CEIL"))
function("FLOOR")(_ceil_floor(pc.floor, "FLOOR"))


def round_decimal_type(t: pa.DataType, digits: int, max_precision: int = 38) -> pa.DataType:
    """Flink's findRoundDecimalType: rounding may add a digit in front."""
    p, s = t.precision, t.scale
    if digits >= s:
        return t
    if digits < 0:
        return capped_decimal(1 + p - s, 0, max_precision)
    return capped_decimal(1 + p - s + digits, digits, max_precision)


@function("ROUND", min_args=1, max_args=2)
def _round(args, site):
    """HALF_UP to ``d`` digits on the decimal value (a DOUBLE is rounded through its shortest decimal text, as
    ``BigDecimal.valueOf(double)`` does, so ROUND(5.555, 2) = 5.56)."""
    require(args[0], ("numeric",), "ROUND")
    if len(args) > 1:
        require(args[1], ("numeric",), "ROUND digits")
        if not args[1].is_const:
            raise ExpressionError(f"ROUND digits must be a literal (it decides the result type), got {args[1].sql}")
        if args[1].const is None:
            return null_of(args[0].dtype if fam(args[0]) != "null" else pa.int32(), site)
        digits = int(args[1].const)
    else:
        digits = 0
    t = args[0].dtype
    if pa.types.is_null(t):
        return null_of(pa.int32(), site)
    if pa.types.is_integer(t):
        if digits >= 0:
            return _as_arg0(Call(lambda env, xs: xs[0], args[:1], t, site.sql), args[0])
        return _as_arg0(Call(lambda env, xs: pc.round(xs[0], ndigits=digits, round_mode="half_towards_infinity"),
                             args[:1], t, site.sql), args[0])
    if pa.types.is_decimal(t):
        # of the operand's Calcite type, capped first: ROUND(DECIMAL(20, 2), 0) is DECIMAL(18, 0) in UP_TO_19
        out = round_decimal_type(calcite_type(t, site.max_precision), digits, site.max_precision)

        def run_decimal(env, xs):
            rounded = pc.round(_wide(xs[0], 1), ndigits=digits, round_mode="half_towards_infinity")
            return fit_decimal(rounded, pa.decimal128(38, max(0, min(digits, rounded.type.scale))))
        return Call(run_decimal, args[:1], out, site.sql)

    def run_float(env, xs):
        return round_float(xs[0], digits)
    return Call(run_float, args[:1], t, site.sql)


def round_float(arr: pa.Array, digits: int) -> pa.Array:
    """HALF_UP rounding of FLOAT/DOUBLE values on their shortest decimal text."""
    values = arr.cast(pa.float64())
    small = pc.fill_null(pc.and_(pc.is_finite(values), pc.less(pc.abs(values), 1e17)), False)
    if not pc.any(small).as_py():
        return arr
    scale = 17
    text = pc.if_else(small, values, pa.scalar(0.0)).cast(arr.type).cast(pa.string())
    exact = text.cast(pa.decimal128(38, scale))
    rounded = pc.round(exact, ndigits=max(min(digits, scale), -17), round_mode="half_towards_infinity")
    back = decimal_to_float(rounded, arr.type)
    return pc.if_else(small, back, arr)


@function("UUID", min_args=0, max_args=0)
def _uuid(args, site):
    """A random RFC 4122 version 4 UUID per row."""
    def run(env, xs):
        return random_uuids(env.num_rows)
    return Call(run, [], pa.string(), site.sql)


def random_uuids(n: int) -> pa.Array:
    raw = np.frombuffer(os.urandom(16 * n), dtype=np.uint8).reshape(n, 16).copy()
    raw[:, 6] = (raw[:, 6] & 0x0F) | 0x40  # version 4
    raw[:, 8] = (raw[:, 8] & 0x3F) | 0x80  # RFC 4122 variant
    hex_bytes = raw.tobytes().hex().encode("ascii")
    fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(32), n, [None, pa.py_buffer(hex_bytes)])
    texts = fixed.cast(pa.binary()).cast(pa.string())
    pieces = [pc.utf8_slice_codeunits(texts, a, b) for a, b in ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32))]
    return pc.binary_join_element_wise(*pieces, "-")
