"""``CAST`` and ``TRY_CAST`` with Flink CDC's CastingFunctions semantics.

Targets: BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, DECIMAL(p, s), CHAR/VARCHAR/STRING, TIMESTAMP(p);
any other target is refused when the rule is compiled, as in Flink CDC. CAST of text that is not a number gives
NULL; CAST of text that is not an ISO date/time to TIMESTAMP fails the batch (it fails Flink CDC's job), TRY_CAST
gives NULL.
"""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.errors import ExpressionError
from lakecdc.transform import datefmt
from lakecdc.transform.functions.base import Site, data_error, fam, first_value, grouped, scatter, where_null
from lakecdc.transform.nodes import Call, EvalEnv, Literal, Node
from lakecdc.transform.types import (capped_decimal, decimal_to_float, family, fit_decimal, flink_name,
                                     java_to_string, precision_of, to_wall_clock)

CAST_TARGETS = "BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, DECIMAL(p, s), CHAR, VARCHAR, STRING, TIMESTAMP"

_JAVA_SPACE = "".join(chr(i) for i in range(33))
_INT_RE = r"^[+-]?[0-9]+$"
_FLOAT_RE = r"^[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)$"
_PLAIN_DECIMAL_RE = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)$"
_EXP_DECIMAL_RE = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)[eE][+-]?[0-9]+$"
_RANGES = {8: (-2 ** 7, 2 ** 7 - 1), 16: (-2 ** 15, 2 ** 15 - 1), 32: (-2 ** 31, 2 ** 31 - 1),
           64: (-2 ** 63, 2 ** 63 - 1)}
_ALLOWED = {
    "string": ("boolean", "numeric", "string", "date", "time", "timestamp", "timestamp_ltz", "binary", "variant"),
    "boolean": ("boolean", "numeric", "string"),
    "numeric": ("boolean", "numeric", "string"),
    "timestamp": ("timestamp", "timestamp_ltz", "date", "string"),
}


def _matching(s: pa.Array, regex: str) -> pa.Array:
    return pc.fill_null(pc.match_substring_regex(s, regex), False)


def _keep(mask: pa.Array, values: pa.Array) -> pa.Array:
    return pc.if_else(mask, values, pa.scalar(None, values.type))


def _java_trim(s: pa.Array) -> pa.Array:
    return pc.utf8_trim(s, characters=_JAVA_SPACE)


def _parse_double(s: pa.Array) -> pa.Array:
    """Double.valueOf: surrounding whitespace ignored, 'NaN', 'Infinity', a trailing d/f; else NULL."""
    s = _java_trim(s)
    ok = _matching(s, _FLOAT_RE)
    text = pc.replace_substring_regex(_keep(ok, s), "[fFdD]$", "")
    return text.cast(pa.float64())


# --------------------------------------------------------------------------------------------------- integers

def _saturate(values: pa.Array, bits: int) -> pa.Array:
    """Java's (int)/(long) cast of a double: truncate, NaN → 0, saturate at the range."""
    lo, hi = _RANGES[bits]
    truncated = pc.trunc(values)
    truncated = pc.if_else(pc.is_nan(truncated), 0.0, truncated)
    clipped = pc.min_element_wise(pc.max_element_wise(truncated, float(lo), skip_nulls=False), float(hi),
                                 skip_nulls=False)
    out = clipped.cast(pa.int64(), safe=False)
    if bits == 64:  # float(2**63 - 1) rounds up to 2**63
        out = pc.if_else(pc.greater_equal(truncated, 9.223372036854775807e18), hi, out)
    return out


def _double_to_integer(values: pa.Array, target: pa.DataType) -> pa.Array:
    """Double.byteValue() etc.: (int) cast with saturation, then narrowing (which wraps)."""
    bits = target.bit_width
    if bits == 64:
        return _saturate(values, 64)
    return _saturate(values, 32).cast(pa.int32()).cast(target, safe=False)


def _to_integer(arr: pa.Array, target: pa.DataType, strict: bool) -> pa.Array:
    t = arr.type
    fam_ = family(t)
    bits = target.bit_width
    lo, hi = _RANGES[bits]
    if fam_ == "boolean":
        return arr.cast(pa.int8()).cast(target)
    if pa.types.is_integer(t):
        return arr.cast(target, safe=False)  # Java narrowing wraps
    if pa.types.is_floating(t):
        return _double_to_integer(arr.cast(pa.float64()), target)
    if pa.types.is_decimal(t):
        whole = arr.cast(pa.decimal128(t.precision, 0), safe=False)  # BigDecimal.intValue truncates, then wraps
        return whole.cast(pa.int64(), safe=False).cast(target, safe=False)
    s = arr.cast(pa.string())
    if strict:  # TRY_CAST: Integer.valueOf(s.trim()); anything else is NULL
        s = _java_trim(s)
    exact_text = _matching(s, _INT_RE)
    short = pc.and_(exact_text, pc.fill_null(pc.less_equal(pc.utf8_length(s), 20), False))
    as_int = _keep(short, s).cast(pa.decimal128(21, 0)) if len(s) else pa.array([], pa.decimal128(21, 0))
    in_range = pc.fill_null(pc.and_(pc.greater_equal(as_int, pa.scalar(decimal.Decimal(lo), pa.decimal128(21, 0))),
                                    pc.less_equal(as_int, pa.scalar(decimal.Decimal(hi), pa.decimal128(21, 0)))),
                            False)
    exact = _keep(in_range, as_int).cast(pa.int64()).cast(target, safe=False)
    if strict:
        return exact
    fallback = _double_to_integer(_parse_double(s), target)  # Integer.valueOf failed: Double.valueOf(s).intValue()
    return pc.if_else(in_range, exact, fallback)


# ------------------------------------------------------------------------------------------------- floating

def _to_floating(arr: pa.Array, target: pa.DataType, strict: bool) -> pa.Array:
    fam_ = family(arr.type)
    if fam_ == "boolean":
        return arr.cast(pa.int8()).cast(target)
    if pa.types.is_decimal(arr.type):
        return decimal_to_float(arr, target)
    if fam_ == "numeric":
        return arr.cast(target, safe=False)
    return _parse_double(arr.cast(pa.string())).cast(target)


# -------------------------------------------------------------------------------------------------- decimals

def decimal_from_text(s: pa.Array, target: pa.DataType, env: EvalEnv | None = None) -> pa.Array:
    """``new BigDecimal(s, new MathContext(p)).setScale(s, HALF_UP)``, NULL when it overflows ``p`` digits or when
    ``s`` is not a number. The value is rounded to ``p`` significant digits first, then to the scale, exactly as
    BigDecimal does (two HALF_UP roundings; only the first dropped digit matters for each)."""
    p, scale = target.precision, target.scale
    plain = _matching(s, _PLAIN_DECIMAL_RE)
    negative = pc.starts_with(s, "-")
    body = pc.replace_substring_regex(_keep(plain, s), "^[+-]", "")
    whole = pc.replace_substring_regex(body, r"\..*$", "")
    frac = pc.replace_substring_regex(body, r"^[^.]*\.?", "")
    whole = pc.replace_substring_regex(whole, "^0+", "")
    # digits before the point (k > 0), or minus the zeros after the point before the first significant digit
    k = pc.utf8_length(whole)
    lead_zeros = pc.utf8_length(pc.replace_substring_regex(frac, "^(0*).*$", r"\1"))
    sig_start = pc.if_else(pc.greater(k, 0), k, pc.negate(lead_zeros))
    keep = pc.subtract(pa.scalar(p, pa.int32()), sig_start.cast(pa.int32()))  # fraction digits kept by MathContext

    def by_keep(sub_env, xs, values):
        kept = values[0]
        w, f, neg = xs
        if kept is None:
            return pa.nulls(len(w), target)
        kept = int(kept)
        if kept < scale:  # more integer digits than the precision allows: overflow
            return pa.nulls(len(w), target)
        int_digits = max(p - kept, 1)
        # One digit past the kept ones decides the first rounding; decimal128 holds 38 digits in all.
        digits = max(min(kept + 1, 38 - int_digits), min(scale + 1, 38 - int_digits))
        frac_part = pc.utf8_rpad(pc.utf8_slice_codeunits(f, 0, digits), width=digits, padding="0")
        text = pc.binary_join_element_wise(pc.if_else(pc.equal(w, ""), "0", w), frac_part, ".")
        width = int_digits + digits
        try:
            value = text.cast(pa.decimal128(width, digits))
        except pa.ArrowInvalid:
            return pa.nulls(len(w), target)
        first = pc.round(value, ndigits=min(kept, digits), round_mode="half_towards_infinity") \
            if kept < digits else value
        signed = pc.if_else(neg, pc.negate(first), first)
        return fit_decimal(signed, target)

    env = env or EvalEnv(num_rows=len(s), source={}, metadata={})
    result = grouped(env, [pc.if_else(plain, keep, pa.scalar(None, pa.int32()))], [whole, frac, negative],
                     by_keep, target)
    exponent = _matching(s, _EXP_DECIMAL_RE)
    if pc.any(exponent).as_py():
        # Scientific notation ('1.5E3', what Double.toString prints for large values) is rare in data: Python's
        # decimal module with Java's MathContext rules handles those rows.
        values = [_decimal_with_context(v, p, scale) for v in s.filter(exponent).to_pylist()]
        result = scatter(result, exponent, pa.array(values, target))
    return result


def _decimal_with_context(text: str, precision: int, scale: int):
    context = decimal.Context(prec=precision, rounding=decimal.ROUND_HALF_UP)
    value = context.create_decimal(text).quantize(decimal.Decimal(1).scaleb(-scale), rounding=decimal.ROUND_HALF_UP)
    if len(value.as_tuple().digits) > precision or abs(value) >= decimal.Decimal(10) ** (precision - scale):
        return None
    return value


def _to_decimal(arr: pa.Array, target: pa.DataType, strict: bool, env: EvalEnv) -> pa.Array:
    fam_ = family(arr.type)
    t = arr.type
    if fam_ == "boolean":
        arr, t = arr.cast(pa.int8()), pa.int8()
    if pa.types.is_integer(t):
        return fit_decimal(arr.cast(pa.decimal128(20, 0)), target)
    if pa.types.is_decimal(t) and target.precision >= t.precision - t.scale + target.scale:
        return fit_decimal(arr, target)  # no significant digit is lost to MathContext: a plain rescale
    if pa.types.is_floating(t):
        text = java_to_string(arr)  # String.valueOf(float/double): the shortest text of the value
        text = pc.if_else(pc.is_nan(arr.cast(pa.float64())), pa.scalar(None, pa.string()), text)
        return decimal_from_text(text, target, env)
    text = arr.cast(pa.string())
    if strict:
        text = _java_trim(text)
    return decimal_from_text(text, target, env)


# ------------------------------------------------------------------------------------------------ timestamps

_ISO_RE = (r"^(?P<y>[0-9]{4})-(?P<mo>[0-9]{2})-(?P<d>[0-9]{2})"
           r"(?P<t>T(?P<h>[0-9]{2}):(?P<mi>[0-9]{2})(?::(?P<s>[0-9]{2})(?:\.(?P<f>[0-9]{1,9}))?)?"
           r"(?P<z>Z|[+-][0-9]{2}(?::?[0-9]{2}(?::?[0-9]{2})?)?(?:\[[^\]]+\])?)?)?$")


def _int_field(struct: pa.Array, name: str, default: int) -> np.ndarray:
    values = struct.field(name)
    values = pc.if_else(pc.equal(values, ""), pa.scalar(None, pa.string()), values)
    return pc.fill_null(values.cast(pa.int64()), default).to_numpy(zero_copy_only=False)


def parse_iso_timestamps(s: pa.Array, unit: str, zone: str) -> tuple[pa.Array, pa.Array]:
    """Flink CDC's CAST(text AS TIMESTAMP): 'yyyy-MM-dd' (midnight), ISO local date-time ('2024-01-02T03:04[:05
    [.fff]]'), an ISO instant ('...Z', converted to the local time zone) or an ISO date-time with an offset (its
    local part kept). Strict calendar checks. Returns (timestamps of ``unit``, ok)."""
    struct = pc.extract_regex(s, _ISO_RE)
    ok = pc.fill_null(struct.is_valid(), False)
    year, month, day = (_int_field(struct, n, 1) for n in ("y", "mo", "d"))
    hour, minute, second = (_int_field(struct, n, 0) for n in ("h", "mi", "s"))
    fraction = pc.utf8_rpad(pc.fill_null(struct.field("f"), ""), width=9, padding="0")
    nanos = pc.fill_null(fraction.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    valid = (month >= 1) & (month <= 12) & (day >= 1) & (day <= datefmt.month_length(year, month)) \
        & (hour <= 23) & (minute <= 59) & (second <= 59)
    ok = pc.and_(ok, pa.array(valid))
    days = datefmt.days_from_civil(year, np.clip(month, 1, 12), day)
    micros = pa.array((days * 86400 + hour * 3600 + minute * 60 + second) * 1_000_000 + nanos // 1000)
    local = pc.if_else(ok, micros, 0).cast(pa.timestamp("us"))
    instant = pc.fill_null(pc.equal(struct.field("z"), "Z"), False)
    if pc.any(instant).as_py():
        converted = to_wall_clock(local.cast(pa.timestamp("us", tz="UTC")), zone).cast(pa.timestamp("us"))
        local = pc.if_else(instant, converted, local)
    return local.cast(pa.timestamp(unit), safe=False), ok


def _to_timestamp(arr: pa.Array, target: pa.DataType, strict: bool, site: Site, zone: str) -> pa.Array:
    fam_ = family(arr.type)
    if fam_ == "timestamp":
        return arr.cast(target, safe=False)
    if fam_ == "timestamp_ltz":
        return to_wall_clock(arr, zone).cast(target, safe=False)
    if fam_ == "date":
        return arr.cast(pa.timestamp("s")).cast(target)
    s = arr.cast(pa.string())
    values, ok = parse_iso_timestamps(s, target.unit, zone)
    bad = pc.and_(pc.is_valid(s), pc.invert(ok))
    if not strict and pc.any(bad).as_py():
        raise data_error(site, "Unable to parse given string as timestamp (CAST takes 'yyyy-MM-dd' or ISO "
                               "'yyyy-MM-ddTHH:mm:ss' text; use TO_TIMESTAMP for other patterns or TRY_CAST for "
                               "NULL)", first_value(s, bad))
    return where_null(pc.invert(ok), values)


# ---------------------------------------------------------------------------------------------------- boolean

def _to_boolean(arr: pa.Array, strict: bool) -> pa.Array:
    fam_ = family(arr.type)
    if fam_ == "boolean":
        return arr
    if fam_ == "numeric":
        zero = pa.scalar(0, arr.type) if not pa.types.is_decimal(arr.type) else \
            pa.scalar(decimal.Decimal(0), arr.type)
        return pc.not_equal(arr, zero)
    s = pc.utf8_lower(arr.cast(pa.string()))
    if not strict:
        return pc.equal(s, "true")  # Boolean.valueOf: only 'true' (any case) is TRUE
    yes = pc.is_in(s, value_set=pa.array(["t", "true", "y", "yes", "1"]))
    no = pc.is_in(s, value_set=pa.array(["f", "false", "n", "no", "0"]))
    return where_null(pc.is_null(s), pc.if_else(yes, True, pc.if_else(no, False, pa.scalar(None, pa.bool_()))))


# ------------------------------------------------------------------------------------------------------- CAST

UNSIZED_DECIMAL = "DECIMAL"  # cast_target's declared-type marker of a DECIMAL written without precision


def cast(node: Node, target: pa.DataType, try_cast: bool, sql: str, site: Site | None = None,
         decl: str | None = None) -> Node:
    """Flink CDC CAST / TRY_CAST to ``target`` (one of ``CAST_TARGETS`` as an Arrow type; ``decl`` the declared
    TIMESTAMP(p) when the values are kept finer, see cast_target)."""
    site = site or Site(sql)
    source_family = fam(node)
    target_family = family(target)
    declared = capped_decimal(target.precision, target.scale, site.max_precision) \
        if pa.types.is_decimal(target) else target
    if decl == UNSIZED_DECIMAL:
        # CAST(x AS DECIMAL): Calcite's default DECIMAL precision is the maximum (RelDataTypeSystemImpl
        # .getDefaultPrecision), so DECIMAL(19, 0) or DECIMAL(38, 0), while Flink CDC's generated Java casts with
        # precision 10 (JaninoCompiler): values of more than 10 digits are NULL
        declared, decl = pa.decimal128(site.max_precision, 0), None
    if target_family == "timestamp" and source_family in ("timestamp", "timestamp_ltz") and \
            precision_of(node.dtype) > precision_of(target):
        declared = target = pa.timestamp(node.dtype.unit)  # a LocalDateTime is kept as it is, nanoseconds included
    if source_family == "null":
        result: Node = Literal(None, declared, sql)
        result.decl = decl
        return result
    if source_family not in _ALLOWED[target_family]:
        raise ExpressionError(f"cannot cast {flink_name(node.dtype)} to {flink_name(target)} ({sql})")

    def run(env, xs):
        arr = xs[0]
        if target_family == "string":
            return java_to_string(arr, env.zone)
        if target_family == "boolean":
            return _to_boolean(arr, try_cast)
        if pa.types.is_integer(target):
            return _to_integer(arr, target, try_cast)
        if pa.types.is_floating(target):
            return _to_floating(arr, target, try_cast)
        if pa.types.is_decimal(target):
            return _to_decimal(arr, target, try_cast, env)
        return _to_timestamp(arr, target, try_cast, site, env.zone)

    # CAST of a NOT NULL value is NOT NULL (Calcite), which IFNULL's type sees; TRY_CAST may give NULL
    call = Call(run, [node], declared, sql, nullable=try_cast or node.nullable)
    call.decl = decl
    return call
