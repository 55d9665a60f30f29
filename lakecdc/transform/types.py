"""Type helpers of the transform layer: Arrow types as Flink CDC types, common types, Java-style text, time zones.

Flink CDC type ↔ Arrow type used here: BOOLEAN bool, TINYINT int8, SMALLINT int16, INT int32, BIGINT int64,
FLOAT float32, DOUBLE float64, DECIMAL(p,s) decimal128(p,s), CHAR/VARCHAR/STRING string, DATE date32,
TIME time32/time64, TIMESTAMP(p) naive timestamp, TIMESTAMP_LTZ(p) tz-aware timestamp (an instant),
BINARY/VARBINARY/BYTES binary. The NULL literal has Arrow type ``null``.
"""

from __future__ import annotations

import decimal
import os
import re
import struct
import zoneinfo

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.errors import ExpressionError

INT_TYPES = (pa.int8(), pa.int16(), pa.int32(), pa.int64())
_INT_RANK = {t: i for i, t in enumerate(INT_TYPES)}


def family(t: pa.DataType) -> str:
    """The comparison/coercion family of a type."""
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "numeric"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_timestamp(t):
        return "timestamp_ltz" if t.tz else "timestamp"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_time(t):
        return "time"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "binary"
    return str(t)


def flink_name(t: pa.DataType) -> str:
    """The Flink CDC spelling of a type, for error messages."""
    if pa.types.is_null(t):
        return "NULL"
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    if t in _INT_RANK:
        return ("TINYINT", "SMALLINT", "INT", "BIGINT")[_INT_RANK[t]]
    if pa.types.is_unsigned_integer(t):
        return f"UNSIGNED {t}"
    if pa.types.is_float32(t):
        return "FLOAT"
    if pa.types.is_floating(t):
        return "DOUBLE"
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision}, {t.scale})"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "STRING"
    if pa.types.is_timestamp(t):
        return "TIMESTAMP_LTZ" if t.tz else "TIMESTAMP"
    if pa.types.is_date(t):
        return "DATE"
    if pa.types.is_time(t):
        return "TIME"
    if family(t) == "binary":
        return "BINARY"
    return str(t).upper()


def _decimal_of_int(t: pa.DataType) -> pa.DataType:
    return pa.decimal128({pa.int8(): 3, pa.int16(): 5, pa.int32(): 10}.get(t, 19), 0)


def _as_decimal(t: pa.DataType) -> pa.DataType:
    if pa.types.is_decimal(t):
        return t
    if pa.types.is_unsigned_integer(t):
        return pa.decimal128(20, 0)
    return _decimal_of_int(t)


def common_numeric(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """The type both numeric operands are converted to for arithmetic/comparison (Java/Calcite-like promotion):
    any DOUBLE → DOUBLE; FLOAT (without DOUBLE) → FLOAT; any DECIMAL → DECIMAL wide enough for both;
    integers → the wider integer."""
    if pa.types.is_null(a):
        return b
    if pa.types.is_null(b):
        return a
    if pa.types.is_float64(a) or pa.types.is_float64(b):
        return pa.float64()
    if pa.types.is_floating(a) or pa.types.is_floating(b):
        other = b if pa.types.is_floating(a) else a
        return pa.float64() if pa.types.is_decimal(other) else pa.float32()
    if pa.types.is_decimal(a) or pa.types.is_decimal(b):
        da, db = _as_decimal(a), _as_decimal(b)
        scale = max(da.scale, db.scale)
        digits = max(da.precision - da.scale, db.precision - db.scale)
        return pa.decimal128(min(38, digits + scale), scale)
    if pa.types.is_unsigned_integer(a) or pa.types.is_unsigned_integer(b):
        return pa.int64() if max(a.bit_width, b.bit_width) < 64 else pa.decimal128(20, 0)
    return a if _INT_RANK[a] >= _INT_RANK[b] else b


def common_type(types: list[pa.DataType], what: str) -> pa.DataType:
    """Least restrictive common type of CASE/IF/COALESCE branches; ExpressionError if there is none."""
    result = pa.null()
    for t in types:
        if pa.types.is_null(result):
            result = t
            continue
        if pa.types.is_null(t) or t == result:
            continue
        fa, fb = family(result), family(t)
        if fa != fb:
            raise ExpressionError(f"{what}: incompatible types {flink_name(result)} and {flink_name(t)}")
        if fa == "numeric":
            result = common_numeric(result, t)
        elif fa in ("timestamp", "timestamp_ltz", "time"):
            result = result if _unit_rank(result.unit) >= _unit_rank(t.unit) else t
        elif fa == "string":
            result = pa.string()
        elif fa == "binary":
            result = pa.binary()
    return result


def _unit_rank(unit: str) -> int:
    return ("s", "ms", "us", "ns").index(unit)


def cast_array(arr: pa.Array, t: pa.DataType) -> pa.Array:
    """Convert an array to an equivalent type (promotion / common type); no Flink CAST semantics."""
    if arr.type == t:
        return arr
    if pa.types.is_null(arr.type):
        return pa.nulls(len(arr), t)
    return arr.cast(t, safe=False) if pa.types.is_integer(t) and pa.types.is_integer(arr.type) else arr.cast(t)


# ---------------------------------------------------------------------------------------------------- time zones

_OFFSET = re.compile(r"(?:UTC|GMT)?([+-])(\d{1,2})(?::?(\d{2}))?")


def zone_offset_seconds(zone: str) -> int | None:
    """Fixed offset of ``+08:00``-style zones (also ``UTC+8``, ``GMT-05:30``, ``Z``); None for region names."""
    if zone in ("Z", "UTC", "GMT"):
        return 0
    m = _OFFSET.fullmatch(zone)
    if not m:
        return None
    seconds = int(m.group(2)) * 3600 + int(m.group(3) or 0) * 60
    return -seconds if m.group(1) == "-" else seconds


def resolve_zone(zone: str) -> str:
    """Validate a pipeline ``local-time-zone`` and return it (``systemDefault`` → the machine's zone)."""
    if not zone or zone == "systemDefault":
        return system_zone()
    if zone_offset_seconds(zone) is not None:
        return zone
    try:
        zoneinfo.ZoneInfo(zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ExpressionError(f"unknown time zone {zone!r}") from None
    return zone


def system_zone() -> str:
    """The machine's time zone (TZ, else /etc/localtime), as Flink's systemDefault."""
    tz = os.environ.get("TZ")
    if tz:
        return tz.lstrip(":")
    try:
        link = os.path.realpath("/etc/localtime")
        if "zoneinfo/" in link:
            return link.split("zoneinfo/", 1)[1]
    except OSError:
        pass
    return "UTC"


def to_wall_clock(arr: pa.Array, zone: str) -> pa.Array:
    """A TIMESTAMP_LTZ (tz-aware) array as naive wall-clock timestamps in ``zone``."""
    unit = arr.type.unit
    offset = zone_offset_seconds(zone)
    if offset is not None:
        naive = arr.cast(pa.timestamp(unit))  # the UTC wall clock, same stored value
        if offset == 0:
            return naive
        factor = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[unit]
        return pc.add(naive, pa.scalar(offset * factor, pa.duration(unit)))
    return pc.local_timestamp(arr.cast(pa.timestamp(unit, tz=zone)))


def from_wall_clock(arr: pa.Array, zone: str, unit: str) -> pa.Array:
    """Naive wall-clock timestamps in ``zone`` as a tz-aware (UTC) array."""
    offset = zone_offset_seconds(zone)
    arr = arr.cast(pa.timestamp(unit))
    if offset is not None:
        factor = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[unit]
        utc = pc.subtract(arr, pa.scalar(offset * factor, pa.duration(unit))) if offset else arr
        return utc.cast(pa.timestamp(unit, tz="UTC"))
    return pc.assume_timezone(arr, zone, ambiguous="earliest", nonexistent="latest").cast(
        pa.timestamp(unit, tz="UTC"))


# ------------------------------------------------------------------------------------------- Java-style text

def _pad(arr: pa.Array, width: int) -> pa.Array:
    return pc.utf8_lpad(arr.cast(pa.string()), width=width, padding="0")


def _fraction_nanos(ts: pa.Array) -> pa.Array:
    unit = ts.type.unit
    if unit == "s":
        return pc.multiply(pc.hour(ts), 0)
    nanos = pc.multiply(pc.millisecond(ts), 1_000_000)
    if unit in ("us", "ns"):
        nanos = pc.add(nanos, pc.multiply(pc.microsecond(ts), 1000))
    if unit == "ns":
        nanos = pc.add(nanos, pc.nanosecond(ts))
    return nanos


def _java_fraction(nanos: pa.Array) -> pa.Array:
    """'.SSS' / '.SSSSSS' / '.SSSSSSSSS' as java.time prints a nano-of-second (empty when 0)."""
    milli_exact = pc.equal(pc.multiply(pc.divide(nanos, 1_000_000), 1_000_000), nanos)
    micro_exact = pc.equal(pc.multiply(pc.divide(nanos, 1000), 1000), nanos)
    as_ms = pc.binary_join_element_wise(".", _pad(pc.divide(nanos, 1_000_000), 3), "")
    as_us = pc.binary_join_element_wise(".", _pad(pc.divide(nanos, 1000), 6), "")
    as_ns = pc.binary_join_element_wise(".", _pad(nanos, 9), "")
    text = pc.if_else(milli_exact, as_ms, pc.if_else(micro_exact, as_us, as_ns))
    return pc.if_else(pc.equal(nanos, 0), "", text)


def _java_time_of_day(ts: pa.Array, always_seconds: bool) -> pa.Array:
    """HH:mm[:ss[.fraction]] as LocalTime.toString (seconds only when non-zero) or ISO_INSTANT (always)."""
    hm = pc.binary_join_element_wise(_pad(pc.hour(ts), 2), _pad(pc.minute(ts), 2), ":")
    nanos = _fraction_nanos(ts)
    sec = pc.binary_join_element_wise(":", _pad(pc.second(ts), 2), _java_fraction(nanos), "")
    if always_seconds:
        return pc.binary_join_element_wise(hm, sec, "")
    show = pc.or_(pc.not_equal(pc.second(ts), 0), pc.not_equal(nanos, 0))
    return pc.binary_join_element_wise(hm, pc.if_else(show, sec, ""), "")


def _shortest_repr(value: float, single: bool) -> str:
    if not single:
        return repr(value)
    for digits in range(1, 10):  # shortest text that round-trips through a 32-bit float
        text = f"{value:.{digits}g}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == value:
            return text
    return repr(value)


def _java_scientific(value: float, single: bool) -> str:
    digits_tuple = decimal.Decimal(_shortest_repr(value, single)).normalize().as_tuple()
    digits = "".join(map(str, digits_tuple.digits))
    exponent = len(digits) - 1 + digits_tuple.exponent
    sign = "-" if digits_tuple.sign else ""
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


def _java_double_text(arr: pa.Array) -> pa.Array:
    """Double.toString / Float.toString: '1.0', '29.9', '1.0E7', '1.0E-5', 'NaN', 'Infinity'."""
    text = arr.cast(pa.string())
    text = pc.if_else(pc.match_substring_regex(text, r"^-?[0-9]+$"), pc.binary_join_element_wise(text, ".0", ""),
                      text)
    absval = pc.abs(arr)
    sci = pc.fill_null(pc.and_(pc.is_finite(arr), pc.or_(
        pc.greater_equal(absval, 1e7), pc.and_(pc.less(absval, 1e-3), pc.not_equal(absval, 0)))), False)
    if pc.any(sci).as_py():
        # Per-row Python only for the values Java prints in scientific notation (|x| >= 1e7 or < 1e-3): Arrow has
        # no kernel for Java's "d.dddE±n" form, and such values are a small minority of real data.
        single = pa.types.is_float32(arr.type)
        values = text.to_pylist()
        for i, (flag, value) in enumerate(zip(sci.to_pylist(), arr.to_pylist())):
            if flag:
                values[i] = _java_scientific(value, single)
        text = pa.array(values, pa.string())
    text = pc.replace_substring_regex(text, r"^nan$", "NaN")
    text = pc.replace_substring_regex(text, r"^inf$", "Infinity")
    return pc.replace_substring_regex(text, r"^-inf$", "-Infinity")


def java_to_string(arr: pa.Array, zone: str = "UTC") -> pa.Array:
    """Each value as Java's ``toString()`` of the Flink CDC runtime object (NULL stays NULL).

    BOOLEAN 'true'; DECIMAL keeps its scale ('29.90'); DOUBLE '1.0'/'1.0E7'; DATE '2026-01-01';
    TIMESTAMP LocalDateTime ('2026-01-01T12:00', seconds/fraction only when non-zero); TIMESTAMP_LTZ Instant
    ('2026-01-01T12:00:00Z', in UTC); TIME LocalTime ('09:30'); BINARY decoded as UTF-8."""
    t = arr.type
    fam = family(t)
    if fam == "string":
        return arr.cast(pa.string())
    if fam == "null":
        return pa.nulls(len(arr), pa.string())
    if pa.types.is_floating(t):
        return _java_double_text(arr)
    if fam in ("boolean", "numeric", "date"):
        return arr.cast(pa.string())
    if fam in ("timestamp", "timestamp_ltz"):
        ts = arr.cast(pa.timestamp(t.unit)) if t.tz else arr
        date = pc.strftime(pc.floor_temporal(ts, unit="day").cast(pa.timestamp("s")), "%Y-%m-%d")
        tod = _java_time_of_day(ts, always_seconds=bool(t.tz))
        text = pc.binary_join_element_wise(date, "T", tod, "Z" if t.tz else "", "")
        return text
    if fam == "time":
        unit = t.unit
        ts = arr.cast(pa.int64()).cast(pa.timestamp(unit)) if pa.types.is_time64(t) else \
            arr.cast(pa.int32()).cast(pa.int64()).cast(pa.timestamp(unit))
        return _java_time_of_day(ts, always_seconds=False)
    if fam == "binary":
        return arr.cast(pa.binary()).cast(pa.string())
    raise ExpressionError(f"cannot convert {flink_name(t)} to a string")


def decimal_literal_type(text: str) -> pa.DataType:
    """Calcite's type of an exact numeric literal with a point: DECIMAL(digits, digits after the point)."""
    digits = text.lstrip("+-")
    whole, _, frac = digits.partition(".")
    whole = whole.lstrip("0")
    precision = max(1, len(whole) + len(frac))
    if precision > 38:
        raise ExpressionError(f"numeric literal {text} has more than 38 digits")
    return pa.decimal128(precision, len(frac))

