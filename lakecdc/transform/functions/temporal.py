"""Temporal functions: the current time (``LOCALTIMESTAMP``, ``LOCALTIME``, ``CURRENT_TIME``, ``CURRENT_DATE``,
``CURRENT_TIMESTAMP``, ``NOW``, ``UNIX_TIMESTAMP()``), ``UNIX_TIMESTAMP``, ``FROM_UNIXTIME``, ``DATE_FORMAT``,
``DATE_FORMAT_TZ``, ``TO_DATE``, ``TO_TIMESTAMP``, ``TO_TIMESTAMP_LTZ``, ``TIMESTAMPDIFF``/``TIMESTAMP_DIFF``,
``TIMESTAMPADD``, ``DATE_ADD``, ``EXTRACT`` and its shorthands (``YEAR`` … ``SECOND``), and INTERVAL arithmetic.

The pipeline's ``local-time-zone`` is ``env.zone``. A TIMESTAMP is a wall clock (interpreted in the local time zone
where Flink CDC does so), a TIMESTAMP_LTZ an instant. Patterns are Java patterns (see ``datefmt``).
"""

from __future__ import annotations

import datetime as _dt

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.errors import ExpressionError
from lakecdc.transform import datefmt
from lakecdc.transform.functions.base import (Site, as_string, data_error, fam, first_value, function,
                                              is_null_literal, null_of, require, where_null, with_scalars)
from lakecdc.transform.nodes import Call, EvalEnv, Literal, Node
from lakecdc.transform.types import (flink_name, from_wall_clock, resolve_zone, temporal_decl, temporal_precision,
                                     time_as_timestamp, timestamp_as_time, to_wall_clock, zone_offset_seconds)

LONG_MIN = -(2 ** 63)
_FACTOR = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
TIMESTAMP_3 = pa.timestamp("ms")
LTZ_3 = pa.timestamp("ms", tz="UTC")


def _now_instant(env: EvalEnv) -> pa.Array:
    return pa.repeat(pa.scalar(env.now_ms, LTZ_3), env.num_rows)


def _now_wall(env: EvalEnv) -> pa.Array:
    return to_wall_clock(_now_instant(env), env.zone)


# ------------------------------------------------------------------------------------------------ current time

@function("LOCALTIMESTAMP", min_args=0, max_args=0)
def _localtimestamp(args, site):
    return Call(lambda env, xs: _now_wall(env), [], TIMESTAMP_3, site.sql)


@function("LOCALTIME", "CURRENT_TIME", min_args=0, max_args=0)
def _localtime(args, site):
    """Declared TIME(0) (Calcite), the value the wall clock's time of day with its milliseconds: Flink CDC's
    localtime() is LOCALTIMESTAMP's toLocalTime(), kept as milliseconds of day
    (FlinkPipelineTransformITCase.testTransformWithTemporalFunction: LOCALTIME is the LOCALTIMESTAMP's time)."""
    call = Call(lambda env, xs: timestamp_as_time(_now_wall(env), "ms"), [], pa.time32("ms"), site.sql)
    call.decl = "TIME(0)"
    return call


@function("CURRENT_DATE", min_args=0, max_args=0)
def _current_date(args, site):
    return Call(lambda env, xs: _now_wall(env).cast(pa.date32()), [], pa.date32(), site.sql)


@function("CURRENT_TIMESTAMP", "NOW", min_args=0, max_args=0)
def _current_timestamp(args, site):
    return Call(lambda env, xs: _now_instant(env), [], LTZ_3, site.sql)


# ----------------------------------------------------------------------------------------- helper conversions

def _pattern(node: Node | None, default: str, style: str, what: str, *, parsing: bool = False):
    """A literal pattern parsed at compile time (errors surface at validation); None for column patterns."""
    if node is None:
        return datefmt.parse_pattern(default, style, for_parsing=parsing)
    require(node, ("string",), f"{what} pattern")
    if node.is_const and node.const is not None:
        return datefmt.parse_pattern(node.const, style, for_parsing=parsing)
    return None


def _zone_of(value: str, site: Site) -> str:
    try:
        return resolve_zone(value)
    except ExpressionError:
        raise data_error(site, "unknown time zone", value) from None


def _offsets(instants: pa.Array, zone: str) -> pa.Array:
    """Seconds east of UTC of ``zone`` at each instant."""
    fixed = zone_offset_seconds(zone)
    if fixed is not None:
        return pa.repeat(pa.scalar(fixed, pa.int64()), len(instants))
    unit = instants.type.unit
    wall = to_wall_clock(instants, zone).cast(pa.int64())
    utc = instants.cast(pa.timestamp(unit)).cast(pa.int64())
    return pc.divide(pc.subtract(wall, utc), _FACTOR[unit])


def _instant_of(ts: pa.Array, zone: str) -> pa.Array:
    """TIMESTAMP (wall clock in ``zone``) or TIMESTAMP_LTZ → instant."""
    if ts.type.tz:
        return ts
    return from_wall_clock(ts, zone)


# ------------------------------------------------------------------------------------------------ formatting

@function("DATE_FORMAT", min_args=2, max_args=2)
def _date_format(args, site):
    """TIMESTAMP / TIMESTAMP_LTZ: SimpleDateFormat in the local time zone; DATE / TIME: DateTimeFormatter."""
    value = args[0]
    require(value, ("timestamp", "timestamp_ltz", "date", "time"), "DATE_FORMAT")
    kind = fam(value)
    style = datefmt.JAVA_TIME if kind in ("date", "time") else datefmt.SIMPLE
    literal = _pattern(args[1], "", style, "DATE_FORMAT")
    if literal is not None:
        _check_pattern_fits(literal, kind, site)
    if kind == "null" or is_null_literal(args[1]):
        return null_of(pa.string(), site)

    def run(env, xs, values):
        pattern = literal or datefmt.parse_pattern(values[0], style)
        _check_pattern_fits(pattern, kind, site)
        return format_value(xs[0], kind, pattern, env.zone)
    return with_scalars(args, (1,), run, pa.string(), site)


def _check_pattern_fits(pattern: datefmt.Pattern, kind: str, site: Site) -> None:
    """java.time refuses to print fields a LocalDate / LocalTime does not have (Flink CDC fails the job)."""
    if kind == "date" and (pattern.has_time or pattern.has_zone):
        raise ExpressionError(f"{site.sql}: a DATE has no time-of-day or zone fields to format with "
                              f"{pattern.text!r} (Flink CDC fails with 'Unsupported field')")
    if kind == "time" and (pattern.has_date or pattern.has_zone):
        raise ExpressionError(f"{site.sql}: a TIME has no date or zone fields to format with {pattern.text!r} "
                              "(Flink CDC fails with 'Unsupported field')")


def format_value(arr: pa.Array, kind: str, pattern: datefmt.Pattern, zone: str) -> pa.Array:
    if kind == "date":
        return datefmt.format_wall_clock(arr.cast(pa.timestamp("s")), pattern)
    if kind == "time":
        return datefmt.format_wall_clock(time_as_timestamp(arr), pattern)
    if kind == "timestamp_ltz":
        instants = arr
        wall = to_wall_clock(arr, zone)
    else:
        # LocalDateTime → atZone(local-time-zone) → formatted in that zone: the same wall clock, except a wall
        # clock inside a daylight-saving gap, which moves forward.
        instants = from_wall_clock(arr, zone) if pattern.has_zone or zone_offset_seconds(zone) is None else None
        wall = to_wall_clock(instants, zone) if instants is not None else arr
    offsets = _offsets(instants, zone) if pattern.has_zone else None
    return datefmt.format_wall_clock(wall, pattern, offsets)


@function("DATE_FORMAT_TZ", min_args=2, max_args=3)
def _date_format_tz(args, site):
    """DateTimeFormatter in ``zone``: a TIMESTAMP_LTZ is converted to the zone, a TIMESTAMP is taken as a wall
    clock of that zone (no shift). Default pattern 'yyyy-MM-dd HH:mm:ss'."""
    require(args[0], ("timestamp", "timestamp_ltz"), "DATE_FORMAT_TZ")
    pattern_node = args[1] if len(args) == 3 else None
    zone_node = args[-1]
    require(zone_node, ("string",), "DATE_FORMAT_TZ zone")
    literal = _pattern(pattern_node, "yyyy-MM-dd HH:mm:ss", datefmt.JAVA_TIME, "DATE_FORMAT_TZ")
    if zone_node.is_const and zone_node.const is not None:
        try:
            resolve_zone(zone_node.const)
        except ExpressionError as exc:
            raise ExpressionError(f"DATE_FORMAT_TZ: {exc}") from None
    kind = fam(args[0])
    if kind == "null" or any(is_null_literal(a) for a in args[1:]):
        return null_of(pa.string(), site)
    fixed = [1, 2] if len(args) == 3 else [1]

    def run(env, xs, values):
        zone = _zone_of(values[-1], site)
        pattern = literal or datefmt.parse_pattern(values[0], datefmt.JAVA_TIME)
        ts = xs[0]
        instants = ts if kind == "timestamp_ltz" else from_wall_clock(ts, zone)
        wall = to_wall_clock(instants, zone)
        offsets = _offsets(instants, zone) if pattern.has_zone else None
        return datefmt.format_wall_clock(wall, pattern, offsets)
    return with_scalars(args, fixed, run, pa.string(), site)


@function("FROM_UNIXTIME", min_args=1, max_args=2)
def _from_unixtime(args, site):
    """Epoch seconds formatted with SimpleDateFormat in the local time zone (default 'yyyy-MM-dd HH:mm:ss')."""
    require(args[0], ("numeric",), "FROM_UNIXTIME")
    if fam(args[0]) == "numeric" and not pa.types.is_integer(args[0].dtype):
        raise ExpressionError(f"FROM_UNIXTIME expects INT or BIGINT seconds, got {flink_name(args[0].dtype)}")
    pattern_node = args[1] if len(args) > 1 else None
    literal = _pattern(pattern_node, "yyyy-MM-dd HH:mm:ss", datefmt.SIMPLE, "FROM_UNIXTIME")
    if is_null_literal(args[0]) or (pattern_node is not None and is_null_literal(pattern_node)):
        return null_of(pa.string(), site)

    def run(env, xs, values):
        pattern = literal or datefmt.parse_pattern(values[0], datefmt.SIMPLE)
        seconds = xs[0].cast(pa.int64())
        instants = pc.multiply(seconds, 1000).cast(LTZ_3)
        wall = to_wall_clock(instants, env.zone)
        offsets = _offsets(instants, env.zone) if pattern.has_zone else None
        return datefmt.format_wall_clock(wall, pattern, offsets)
    if pattern_node is None:
        return with_scalars(args + [Literal("yyyy-MM-dd HH:mm:ss", pa.string())], (1,), run, pa.string(), site)
    return with_scalars(args, (1,), run, pa.string(), site)


# ----------------------------------------------------------------------------------------------------- parsing

def _now_year(env: EvalEnv) -> int:
    return _dt.datetime.fromtimestamp(env.now_ms / 1000, _dt.timezone.utc).year


def _simple_parse(text: pa.Array, pattern: datefmt.Pattern, env: EvalEnv) -> tuple[pa.Array, pa.Array]:
    """SimpleDateFormat.parse in the local time zone (lenient, trailing text ignored). Returns (instants in
    microseconds UTC, ok)."""
    parsed = datefmt.parse_columns(as_string(text), pattern, full_match=False, now_year=_now_year(env))
    micros, ok = datefmt.lenient_wall_clock(parsed)
    wall = micros.cast(pa.timestamp("us"))
    instants = from_wall_clock(wall, env.zone, "us")
    if parsed.offset is not None:
        explicit = pa.array(parsed.offset_present)
        shifted = pc.subtract(micros, pa.array(parsed.offset * 1_000_000)).cast(pa.timestamp("us", tz="UTC"))
        instants = pc.if_else(explicit, shifted, instants)
    return instants, ok


@function("UNIX_TIMESTAMP", min_args=0, max_args=2)
def _unix_timestamp(args, site):
    """No argument: the evaluation time in epoch seconds. With a text: SimpleDateFormat (default
    'yyyy-MM-dd HH:mm:ss') in the local time zone, a zone in the text wins; unparseable text gives
    -9223372036854775808 (Long.MIN_VALUE), as in Flink CDC."""
    if not args:
        return Call(lambda env, xs: pa.repeat(pa.scalar(env.now_ms // 1000, pa.int64()), env.num_rows), [],
                    pa.int64(), site.sql)
    require(args[0], ("string",), "UNIX_TIMESTAMP")
    pattern_node = args[1] if len(args) > 1 else Literal("yyyy-MM-dd HH:mm:ss", pa.string())
    literal = _pattern(pattern_node, "", datefmt.SIMPLE, "UNIX_TIMESTAMP", parsing=True)
    if is_null_literal(args[0]) or is_null_literal(pattern_node):
        return null_of(pa.int64(), site)

    def run(env, xs, values):
        pattern = literal or datefmt.parse_pattern(values[0], datefmt.SIMPLE, for_parsing=True)
        text = as_string(xs[0])
        instants, ok = _simple_parse(text, pattern, env)
        millis = instants.cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64())
        seconds = pc.divide(millis, 1000)  # Java long division truncates toward zero, like Arrow's
        result = pc.if_else(ok, seconds, pa.scalar(LONG_MIN, pa.int64()))
        return where_null(pc.is_null(text), result)
    return with_scalars([args[0], pattern_node], (1,), run, pa.int64(), site)


@function("TO_TIMESTAMP", min_args=1, max_args=2)
def _to_timestamp(args, site):
    """SimpleDateFormat (default 'yyyy-MM-dd HH:mm:ss') in the local time zone → TIMESTAMP(3); unparseable text
    fails the batch, as it fails Flink CDC's job."""
    require(args[0], ("string",), "TO_TIMESTAMP")
    pattern_node = args[1] if len(args) > 1 else Literal("yyyy-MM-dd HH:mm:ss", pa.string())
    literal = _pattern(pattern_node, "", datefmt.SIMPLE, "TO_TIMESTAMP", parsing=True)
    if is_null_literal(args[0]) or is_null_literal(pattern_node):
        return null_of(TIMESTAMP_3, site)

    def run(env, xs, values):
        pattern = literal or datefmt.parse_pattern(values[0], datefmt.SIMPLE, for_parsing=True)
        text = as_string(xs[0])
        instants, ok = _simple_parse(text, pattern, env)
        bad = pc.and_(pc.is_valid(text), pc.invert(ok))
        if pc.any(bad).as_py():
            raise data_error(site, f"text does not match the pattern {pattern.text!r} (Flink CDC fails the job; "
                                   "fix the data or the pattern)", first_value(text, bad))
        wall = to_wall_clock(instants, env.zone)
        return where_null(pc.is_null(text), wall.cast(TIMESTAMP_3, safe=False))
    return with_scalars([args[0], pattern_node], (1,), run, TIMESTAMP_3, site)


@function("TO_DATE", min_args=1, max_args=2)
def _to_date(args, site):
    """TO_DATE(text[, pattern='yyyy-MM-dd']): DateTimeFormatter, the whole text; unparseable → NULL.
    TO_DATE(timestamp): the date part (a TIMESTAMP_LTZ's date in UTC)."""
    kind = fam(args[0])
    if kind in ("timestamp", "timestamp_ltz"):
        if len(args) > 1:
            raise ExpressionError("TO_DATE(timestamp) takes one argument")
        return Call(lambda env, xs: xs[0].cast(pa.timestamp(xs[0].type.unit)).cast(pa.date32()), args,
                    pa.date32(), site.sql)
    require(args[0], ("string", "timestamp", "timestamp_ltz"), "TO_DATE")
    pattern_node = args[1] if len(args) > 1 else Literal("yyyy-MM-dd", pa.string())
    literal = _pattern(pattern_node, "", datefmt.JAVA_TIME, "TO_DATE", parsing=True)
    if is_null_literal(args[0]) or is_null_literal(pattern_node):
        return null_of(pa.date32(), site)

    def run(env, xs, values):
        pattern = literal or datefmt.parse_pattern(values[0], datefmt.JAVA_TIME, for_parsing=True)
        text = as_string(xs[0])
        parsed = datefmt.parse_columns(text, pattern, full_match=True, now_year=_now_year(env))
        micros, ok = datefmt.smart_wall_clock(parsed)
        dates = pc.divide(micros, 86_400_000_000)
        days = pc.if_else(pc.less(micros, 0), pc.subtract(pc.divide(pc.add(micros, 1), 86_400_000_000), 1),
                          dates)
        result = days.cast(pa.int32()).cast(pa.date32())
        return where_null(pc.invert(ok), result)
    return with_scalars([args[0], pattern_node], (1,), run, pa.date32(), site)


@function("TO_TIMESTAMP_LTZ", min_args=1, max_args=3)
def _to_timestamp_ltz(args, site):
    """TO_TIMESTAMP_LTZ(epoch[, precision]): epoch milliseconds (precision 3, the default) or seconds (0).
    TO_TIMESTAMP_LTZ(text[, pattern='yyyy-MM-dd HH:mm:ss.SSS'[, zone='UTC']]): DateTimeFormatter, the text is a
    wall clock of ``zone``; unparseable text fails the batch, as it fails Flink CDC's job."""
    kind = fam(args[0])
    if kind == "numeric" or (kind == "null" and len(args) == 2 and fam(args[1]) == "numeric"):
        return _ltz_from_epoch(args, site)
    require(args[0], ("string",), "TO_TIMESTAMP_LTZ")
    pattern_node = args[1] if len(args) > 1 else Literal("yyyy-MM-dd HH:mm:ss.SSS", pa.string())
    zone_node = args[2] if len(args) > 2 else Literal("UTC", pa.string())
    require(zone_node, ("string",), "TO_TIMESTAMP_LTZ zone")
    literal = _pattern(pattern_node, "", datefmt.JAVA_TIME, "TO_TIMESTAMP_LTZ", parsing=True)
    if literal is not None and not (literal.has_date and literal.has_time):
        raise ExpressionError(f"TO_TIMESTAMP_LTZ pattern {literal.text!r} needs date and time fields "
                              "(Flink CDC parses a LocalDateTime)")
    if zone_node.is_const and zone_node.const is not None:
        resolve_zone(zone_node.const)
    if kind == "null" or is_null_literal(pattern_node) or is_null_literal(zone_node):
        return null_of(LTZ_3, site)

    def run(env, xs, values):
        pattern = literal or datefmt.parse_pattern(values[0], datefmt.JAVA_TIME, for_parsing=True)
        zone = _zone_of(values[1], site)
        text = as_string(xs[0])
        parsed = datefmt.parse_columns(text, pattern, full_match=True, now_year=_now_year(env))
        micros, ok = datefmt.smart_wall_clock(parsed)
        bad = pc.and_(pc.is_valid(text), pc.invert(ok))
        if pc.any(bad).as_py():
            raise data_error(site, f"text does not match the pattern {pattern.text!r} (Flink CDC fails the job)",
                             first_value(text, bad))
        instants = from_wall_clock(micros.cast(pa.timestamp("us")), zone, "us")
        return where_null(pc.is_null(text), instants.cast(LTZ_3, safe=False))
    return with_scalars([args[0], pattern_node, zone_node], (1, 2), run, LTZ_3, site)


def _ltz_from_epoch(args: list[Node], site: Site) -> Node:
    if fam(args[0]) != "null" and not pa.types.is_integer(args[0].dtype):
        raise ExpressionError(f"TO_TIMESTAMP_LTZ expects an INT/BIGINT epoch, got {flink_name(args[0].dtype)}")
    if len(args) > 2:
        raise ExpressionError("TO_TIMESTAMP_LTZ(epoch, precision) takes two arguments")
    if len(args) == 2:
        require(args[1], ("numeric",), "TO_TIMESTAMP_LTZ precision")
        if args[1].is_const and args[1].const not in (0, 3, None):
            raise ExpressionError(f"TO_TIMESTAMP_LTZ precision must be 0 or 3, got {args[1].const}")
    precision = args[1] if len(args) == 2 else Literal(3, pa.int32())

    def run(env, xs, values):
        if values[0] not in (0, 3):
            raise data_error(site, "TO_TIMESTAMP_LTZ precision must be 0 or 3", values[0])
        epoch = xs[0].cast(pa.int64())
        millis = epoch if values[0] == 3 else pc.multiply(epoch, 1000)
        return millis.cast(LTZ_3)
    return with_scalars([args[0], precision], (1,), run, LTZ_3, site)


# ------------------------------------------------------------------------------------------ TIMESTAMPDIFF/ADD

UNITS = ("SECOND", "MINUTE", "HOUR", "DAY", "MONTH", "YEAR")
_INT_MAX = 2 ** 31 - 1


def unit_name(node: Node, function_name: str) -> str:
    """The time unit argument (a bare keyword such as DAY) of TIMESTAMPDIFF / TIMESTAMPADD."""
    unit = getattr(node, "unit_keyword", None)
    if unit is None:
        raise ExpressionError(f"{function_name} expects a time unit (SECOND, MINUTE, HOUR, DAY, MONTH or YEAR) as "
                              f"its first argument, got {node.sql}")
    unit = unit.upper()
    if unit not in UNITS:
        raise ExpressionError(f"Unsupported timestamp interval unit {unit} in {function_name}. Supported units are: "
                              f"{', '.join(UNITS)}")
    return unit


def _fields(ts: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    year = pc.fill_null(pc.year(ts), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    month = pc.fill_null(pc.month(ts), 1).to_numpy(zero_copy_only=False).astype(np.int64)
    return year, month


@function("TIMESTAMPDIFF", "TIMESTAMP_DIFF", min_args=3, max_args=3)
def _timestampdiff(args, site):
    """Whole units from t1 to t2 (INT). SECOND..DAY: elapsed milliseconds / 1000 truncated, then divided; NULL if
    the seconds exceed the INT range. MONTH / YEAR: difference of the calendar fields (days and times ignored).
    TIMESTAMP arguments are wall clocks of the local time zone, TIMESTAMP_LTZ ones instants (fields in UTC)."""
    unit = unit_name(args[0], "TIMESTAMPDIFF")
    for a in args[1:]:
        require(a, ("timestamp", "timestamp_ltz"), "TIMESTAMPDIFF")
    if is_null_literal(args[1]) or is_null_literal(args[2]):
        return null_of(pa.int32(), site)

    def run(env, xs):
        t1, t2 = xs
        if unit in ("MONTH", "YEAR"):
            f1 = t1.cast(pa.timestamp(t1.type.unit)) if t1.type.tz else t1
            f2 = t2.cast(pa.timestamp(t2.type.unit)) if t2.type.tz else t2
            y1, m1 = _fields(f1)
            y2, m2 = _fields(f2)
            diff = (y2 * 12 + m2) - (y1 * 12 + m1) if unit == "MONTH" else y2 - y1
            result = pa.array(diff.astype(np.int64)).cast(pa.int32(), safe=False)
            return where_null(pc.or_(pc.is_null(t1), pc.is_null(t2)), result)
        ms1 = _instant_of(t1, env.zone).cast(pa.timestamp("ms", tz="UTC"), safe=False).cast(pa.int64())
        ms2 = _instant_of(t2, env.zone).cast(pa.timestamp("ms", tz="UTC"), safe=False).cast(pa.int64())
        seconds = pc.divide(pc.subtract(ms2, ms1), 1000)
        too_big = pc.greater(seconds, _INT_MAX)
        as_int = seconds.cast(pa.int32(), safe=False)  # Java (int) cast wraps
        divisor = {"SECOND": 1, "MINUTE": 60, "HOUR": 3600, "DAY": 86400}[unit]
        result = pc.divide(as_int, divisor) if divisor > 1 else as_int
        return where_null(too_big, result)
    return Call(run, args[1:], pa.int32(), site.sql)


def add_months(ts: pa.Array, months: pa.Array) -> pa.Array:
    """Naive timestamps plus whole months; the day is clamped to the month's last day (Jan 31 + 1 month =
    Feb 28/29), the time of day is kept."""
    unit = ts.type.unit
    factor = _FACTOR[unit]
    year, month = _fields(ts)
    day = pc.fill_null(pc.day(ts), 1).to_numpy(zero_copy_only=False).astype(np.int64)
    delta = pc.fill_null(months.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    total = year * 12 + (month - 1) + delta
    new_year, new_month = np.floor_divide(total, 12), np.mod(total, 12) + 1
    new_day = np.minimum(day, datefmt.month_length(new_year, new_month))
    days = datefmt.days_from_civil(new_year, new_month, new_day)
    midnight = pc.floor_temporal(ts, unit="day")
    time_of_day = pc.subtract(ts.cast(pa.int64()), midnight.cast(pa.int64()))
    result = pc.add(pa.array(days * 86400 * factor), time_of_day).cast(pa.timestamp(unit))
    return where_null(pc.or_(pc.is_null(ts), pc.is_null(months)), result)


def _add_ticks(ts: pa.Array, ticks: pa.Array) -> pa.Array:
    unit = ts.type.unit
    return pc.add(ts.cast(pa.int64()), ticks).cast(pa.timestamp(unit, tz=ts.type.tz))


def add_unit(ts: pa.Array, amount: pa.Array, unit: str, zone: str) -> pa.Array:
    """java.util.Calendar.add(unit, amount): TIMESTAMP values in the local time zone, TIMESTAMP_LTZ in UTC."""
    is_ltz = bool(ts.type.tz)
    t_unit = ts.type.unit
    amount = amount.cast(pa.int64())
    if unit in ("MONTH", "YEAR"):
        months = amount if unit == "MONTH" else pc.multiply(amount, 12)
        if is_ltz:
            return add_months(ts.cast(pa.timestamp(t_unit)), months).cast(ts.type)
        return _normalize_wall(add_months(ts, months), zone)
    if unit == "DAY":
        ticks = pc.multiply(amount, 86400 * _FACTOR[t_unit])
        if is_ltz:
            return _add_ticks(ts, ticks)
        return _normalize_wall(_add_ticks(ts, ticks), zone)
    seconds = {"SECOND": 1, "MINUTE": 60, "HOUR": 3600}[unit]
    ticks = pc.multiply(amount, seconds * _FACTOR[t_unit])
    if is_ltz or zone_offset_seconds(zone) is not None:
        return _add_ticks(ts, ticks)
    instants = from_wall_clock(ts, zone)
    return to_wall_clock(_add_ticks(instants, ticks), zone).cast(ts.type)


def _normalize_wall(ts: pa.Array, zone: str) -> pa.Array:
    """A wall clock that falls into a daylight-saving gap moves forward by the gap (Calendar's lenient rule)."""
    if zone_offset_seconds(zone) is not None:
        return ts
    return to_wall_clock(from_wall_clock(ts, zone), zone).cast(ts.type)


@function("TIMESTAMPADD", min_args=3, max_args=3)
def _timestampadd(args, site):
    unit = unit_name(args[0], "TIMESTAMPADD")
    require(args[1], ("numeric",), "TIMESTAMPADD amount")
    if fam(args[1]) == "numeric" and not pa.types.is_integer(args[1].dtype):
        raise ExpressionError(f"TIMESTAMPADD expects an INT amount, got {flink_name(args[1].dtype)}")
    require(args[2], ("timestamp", "timestamp_ltz"), "TIMESTAMPADD")
    out = args[2].dtype if fam(args[2]) != "null" else TIMESTAMP_3
    if is_null_literal(args[1]) or is_null_literal(args[2]):
        return null_of(out, site)

    def run(env, xs):
        amount, ts = xs
        if ts.type.unit in ("us", "ns"):
            # DateTimeUtils.timestampAdd goes through java.util.Date/Calendar: the result keeps milliseconds only
            ts = pc.floor_temporal(ts, unit="millisecond")
        result = add_unit(ts, amount, unit, env.zone)
        return where_null(pc.or_(pc.is_null(amount), pc.is_null(ts)), result)
    call = Call(run, args[1:], out, site.sql)
    call.decl = same_temporal_type(args[2])  # ARG2_TIMESTAMP_FORCE_NULLABLE
    return call


@function("DATE_ADD", min_args=2, max_args=2)
def _date_add(args, site):
    """The date plus ``days`` as 'yyyy-MM-dd' text (a STRING, as in Flink CDC). TIMESTAMP: its date; TIMESTAMP_LTZ:
    its date in the local time zone; DATE; STRING 'yyyy-MM-dd' or 'yyyy-MM-dd HH:mm:ss' (other text fails the
    batch, as it fails Flink CDC's job)."""
    require(args[0], ("timestamp", "timestamp_ltz", "date", "string"), "DATE_ADD")
    require(args[1], ("numeric",), "DATE_ADD days")
    kind = fam(args[0])
    if kind == "null" or is_null_literal(args[1]):
        return null_of(pa.string(), site)

    def run(env, xs):
        value, days = xs
        if kind == "string":
            dates = _date_from_text(as_string(value), site)
        elif kind == "timestamp_ltz":
            dates = to_wall_clock(value, env.zone).cast(pa.date32())
        elif kind == "timestamp":
            dates = value.cast(pa.date32())
        else:
            dates = value
        shifted = pc.add(dates.cast(pa.int32()).cast(pa.int64()), days.cast(pa.int64()))
        result = pc.strftime(shifted.cast(pa.int32()).cast(pa.date32()).cast(pa.timestamp("s")), "%Y-%m-%d")
        return where_null(pc.is_null(days), result)
    return Call(run, args, pa.string(), site.sql)


def _date_from_text(text: pa.Array, site: Site) -> pa.Array:
    length = pc.utf8_length(text)
    short = datefmt.parse_pattern("yyyy-MM-dd", datefmt.JAVA_TIME, for_parsing=True)
    long = datefmt.parse_pattern("yyyy-MM-dd HH:mm:ss", datefmt.JAVA_TIME, for_parsing=True)
    results = []
    ok_all = pa.repeat(pa.scalar(False), len(text))
    for pattern, size in ((short, 10), (long, 19)):
        parsed = datefmt.parse_columns(text, pattern, full_match=True, now_year=2000)
        micros, ok = datefmt.smart_wall_clock(parsed)
        ok = pc.and_(ok, pc.fill_null(pc.equal(length, size), False))
        days = pc.if_else(ok, micros, 0).cast(pa.timestamp("us")).cast(pa.date32())
        results.append((ok, days))
        ok_all = pc.or_(ok_all, ok)
    bad = pc.and_(pc.is_valid(text), pc.invert(ok_all))
    if pc.any(bad).as_py():
        raise data_error(site, "Unparseable timestamp (DATE_ADD takes 'yyyy-MM-dd' or 'yyyy-MM-dd HH:mm:ss' text)",
                         first_value(text, bad))
    combined = pc.if_else(results[0][0], results[0][1], results[1][1])
    return where_null(pc.is_null(text), combined)


# ----------------------------------------------------------------------------------------------------- EXTRACT

_EXTRACT_UNITS = {"YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "DOY", "DOW", "HOUR", "MINUTE", "SECOND"}
_SHORTHANDS = {"YEAR": "YEAR", "QUARTER": "QUARTER", "MONTH": "MONTH", "WEEK": "WEEK", "DAYOFYEAR": "DOY",
               "DAYOFMONTH": "DAY", "DAYOFWEEK": "DOW", "HOUR": "HOUR", "MINUTE": "MINUTE", "SECOND": "SECOND"}
_DATE_PARTS = {"YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "DOY", "DOW"}


def extract(unit: str, value: Node, site: Site) -> Node:
    """EXTRACT(unit FROM value) as BIGINT: WEEK is the ISO week, DOW counts from Sunday = 1; a DATE has 0 hours,
    minutes and seconds; a TIMESTAMP_LTZ is taken in the local time zone."""
    unit = unit.upper()
    if unit not in _EXTRACT_UNITS:
        raise ExpressionError(f"EXTRACT unit {unit} is not supported; use one of {', '.join(sorted(_EXTRACT_UNITS))}")
    require(value, ("timestamp", "timestamp_ltz", "date", "time"), f"EXTRACT({unit})")
    kind = fam(value)
    if kind == "time" and unit in _DATE_PARTS:
        raise ExpressionError(f"EXTRACT({unit} FROM ...) of a TIME value is not supported (a TIME has no date)")
    if kind == "null":
        return null_of(pa.int64(), site)

    def run(env, xs):
        arr = xs[0]
        if kind == "timestamp_ltz":
            ts = to_wall_clock(arr, env.zone)
        elif kind == "date":
            ts = arr.cast(pa.timestamp("s"))
        elif kind == "time":
            ts = time_as_timestamp(arr)
        else:
            ts = arr
        if unit == "YEAR":
            out = pc.year(ts)
        elif unit == "QUARTER":
            out = pc.quarter(ts)
        elif unit == "MONTH":
            out = pc.month(ts)
        elif unit == "WEEK":
            out = pc.iso_week(ts)
        elif unit == "DAY":
            out = pc.day(ts)
        elif unit == "DOY":
            out = pc.day_of_year(ts)
        elif unit == "DOW":
            out = pc.add(pc.day_of_week(ts, count_from_zero=True, week_start=7), 1)
        elif unit == "HOUR":
            out = pc.hour(ts)
        elif unit == "MINUTE":
            out = pc.minute(ts)
        else:
            out = pc.second(ts)
        return out.cast(pa.int64())
    return Call(run, [value], pa.int64(), site.sql, nullable=value.nullable)  # BIGINT_NULLABLE


def _shorthand(unit: str):
    return lambda args, site: extract(unit, args[0], site)


for _name, _unit in _SHORTHANDS.items():
    function(_name)(_shorthand(_unit))


# ---------------------------------------------------------------------------------------------------- INTERVAL

class IntervalLiteral(Node):
    """``INTERVAL 'v' unit``: a number of months (year-month intervals) or milliseconds (day-time intervals)."""

    def __init__(self, months: int, millis: int, year_month: bool, sql: str):
        self.months, self.millis, self.year_month = months, millis, year_month
        self.dtype = pa.month_day_nano_interval()
        self.nullable = False
        self.sql = sql

    def eval(self, env):  # pragma: no cover - only used through interval arithmetic
        raise ExpressionError(f"an INTERVAL can only be added to or subtracted from a date or time: {self.sql}")


_YM_UNITS = {"YEAR": 12, "MONTH": 1}
_DT_UNITS = {"DAY": 86_400_000, "HOUR": 3_600_000, "MINUTE": 60_000, "SECOND": 1000}


def interval_literal(text: str, start: str, end: str | None, sql: str) -> IntervalLiteral:
    """Parse the value of ``INTERVAL 'text' start [TO end]`` (SQL interval literal syntax)."""
    start, end = start.upper().rstrip("S"), (end.upper().rstrip("S") if end else None)
    value = text.strip()
    sign = -1 if value.startswith("-") else 1
    value = value.lstrip("+-")
    try:
        if start in _YM_UNITS and end in (None, "MONTH"):
            if end == "MONTH" and start == "YEAR":
                years, _, months = value.partition("-")
                return IntervalLiteral(sign * (int(years) * 12 + int(months or 0)), 0, True, sql)
            return IntervalLiteral(sign * int(value) * _YM_UNITS[start], 0, True, sql)
        if start in _DT_UNITS:
            millis = _day_time_millis(value, start, end)
            return IntervalLiteral(0, sign * millis, False, sql)
    except ValueError:
        pass
    raise ExpressionError(f"invalid interval literal {sql}")


def _day_time_millis(value: str, start: str, end: str | None) -> int:
    order = ["DAY", "HOUR", "MINUTE", "SECOND"]
    units = order[order.index(start):order.index(end) + 1] if end else [start]
    parts: list[str] = []
    rest = value
    if units[0] == "DAY" and len(units) > 1:
        day, _, rest = rest.partition(" ")
        parts.append(day)
    parts += rest.split(":") if len(units) > len(parts) else []
    if len(parts) != len(units):
        raise ValueError(value)
    total = 0.0
    for unit, part in zip(units, parts):
        total += float(part) * _DT_UNITS[unit]
    return int(round(total))


def interval_arithmetic(op: str, left: Node, right: Node, site: Site) -> Node:
    """``t ± INTERVAL``, ``INTERVAL + t``: year-month intervals add calendar months (day clamped to the month's
    end), day-time intervals add milliseconds; a DATE moves by whole days, a TIME ignores year-month intervals,
    a TIMESTAMP_LTZ does month arithmetic in UTC."""
    if isinstance(left, IntervalLiteral) and isinstance(right, IntervalLiteral):
        raise ExpressionError(f"adding two intervals is not supported: {site.sql}")
    if isinstance(left, IntervalLiteral):
        if op == "-":
            raise ExpressionError(f"INTERVAL - value is not supported, write value - INTERVAL: {site.sql}")
        left, right = right, left
    interval = right
    if not isinstance(interval, IntervalLiteral):
        raise ExpressionError(f"operator {op} with an INTERVAL needs an INTERVAL literal: {site.sql}")
    require(left, ("timestamp", "timestamp_ltz", "date", "time"), f"operator {op} with an INTERVAL")
    sign = -1 if op == "-" else 1
    kind = fam(left)
    if kind == "null":
        return null_of(TIMESTAMP_3, site)

    def run(env, xs):
        arr = xs[0]
        n = len(arr)
        if interval.year_month:
            if kind == "time":
                return arr
            months = pa.repeat(pa.scalar(sign * interval.months, pa.int64()), n)
            if kind == "date":
                return add_months(arr.cast(pa.timestamp("s")), months).cast(pa.date32())
            if kind == "timestamp_ltz":
                return add_months(arr.cast(pa.timestamp(arr.type.unit)), months).cast(arr.type)
            return add_months(arr, months)
        millis = sign * interval.millis
        if kind == "date":
            days = int(millis / 86_400_000)  # whole days, truncated toward zero
            return pc.add(arr.cast(pa.int32()), pa.scalar(days, pa.int32())).cast(pa.date32())
        if kind == "time":
            ts = time_as_timestamp(arr)
            factor = _FACTOR[ts.type.unit]
            ticks = pc.add(ts.cast(pa.int64()), millis * factor // 1000)
            day = 86400 * factor
            wrapped = pc.subtract(ticks, pc.multiply(pc.floor(pc.divide(ticks.cast(pa.float64()), day)).cast(
                pa.int64()), day))
            return timestamp_as_time(wrapped.cast(pa.timestamp(ts.type.unit)), ts.type.unit).cast(arr.type)
        factor = _FACTOR[arr.type.unit]
        return _add_ticks(arr, pa.repeat(pa.scalar(millis * factor // 1000, pa.int64()), n))
    call = Call(run, [left], left.dtype, site.sql)
    call.decl = same_temporal_type(left)  # Calcite: datetime ± interval has the datetime operand's type
    return call


def same_temporal_type(node: Node) -> str | None:
    """The declared type of a result typed as its temporal operand: the operand's capped precision (a TIMESTAMP(0)
    column stays TIMESTAMP(0) though its values may hold a fraction)."""
    if fam(node) not in ("timestamp", "timestamp_ltz", "time"):
        return None
    return temporal_decl(node.dtype, temporal_precision(node.dtype, node.decl))

