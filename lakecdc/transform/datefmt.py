"""Java date/time patterns, evaluated on whole columns: formatting (DATE_FORMAT, FROM_UNIXTIME, DATE_FORMAT_TZ) and
parsing (TO_TIMESTAMP, UNIX_TIMESTAMP, TO_DATE, TO_TIMESTAMP_LTZ).

Flink CDC uses two Java pattern dialects: ``java.text.SimpleDateFormat`` ("simple": DATE_FORMAT of timestamps,
FROM_UNIXTIME, TO_TIMESTAMP, UNIX_TIMESTAMP) and ``java.time.format.DateTimeFormatter`` ("java_time": DATE_FORMAT
of DATE/TIME values, DATE_FORMAT_TZ, TO_DATE, TO_TIMESTAMP_LTZ). A pattern is parsed once into fields and literal
text. Formatting computes each field for the whole column with Arrow kernels and joins the pieces; parsing turns
the pattern into one regular expression with a group per field, extracts the groups with Arrow and computes the
instant with vectorised calendar arithmetic.

Letters (counts as in Java; names are English, Java's default locale on the Flink CDC images):

======  ===================================================  ===================================================
letter  simple (SimpleDateFormat)                            java_time (DateTimeFormatter)
======  ===================================================  ===================================================
G       era AD/BC                                            era AD/BC
y       year (``yy``: two digits)                            year of era (``yy``: two digits, 2000-2099)
u       day number of week (1 = Monday)                      year
M, L    month: 1, 01, Jan, January                           same
d, D    day of month, day of year                            same
Q, q    —                                                    quarter: 1, 01, Q1, 1st quarter
E       Mon, Monday                                          same
a       AM / PM                                              same
H k K h hour 0-23, 1-24, 0-11, 1-12                          same
m, s    minute, second                                       same
S       milliseconds as a number (``SSS`` = 000-999)         fraction of second, ``count`` digits
n       —                                                    nano of second
Z       offset ``+0800``                                     offset ``+0800`` (``ZZZZZ``: ``+08:00``)
X       offset ``+08``, ``+0800``, ``+08:00``, ``Z`` for UTC   same;  x  the same without ``Z``
'text'  literal text; ``''`` is a single quote               same
======  ===================================================  ===================================================

Other ASCII letters are rejected when the rule is validated (week fields, zone names …); every other character
is literal. Parsing supports y u M L d H k K h a m s S X Z x and literal text (plus E, skipped).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.errors import ExpressionError
from lakecdc.transform.types import fraction_nanos

SIMPLE = "simple"
JAVA_TIME = "java_time"
_FORMAT_LETTERS = {SIMPLE: "GyuMLdDEaHkKhmsSZX", JAVA_TIME: "GuyMLdDQqEaHkKhmsSnZXx"}
_PARSE_LETTERS = {SIMPLE: "yMLdEaHkKhmsSZX", JAVA_TIME: "uyMLdEaHkKhmsSZXx"}
_DATE_LETTERS = set("GyuMLdDQqE")
_TIME_LETTERS = set("aHkKhmsSn")
_ZONE_LETTERS = set("ZXx")
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


@dataclass(frozen=True)
class Field:
    letter: str
    count: int


@dataclass(frozen=True)
class Pattern:
    text: str
    style: str
    items: tuple  # Field | str

    @property
    def fields(self) -> list[Field]:
        return [i for i in self.items if isinstance(i, Field)]

    def uses(self, letters: set[str]) -> bool:
        return any(f.letter in letters for f in self.fields)

    @property
    def has_date(self) -> bool:
        return self.uses(_DATE_LETTERS)

    @property
    def has_time(self) -> bool:
        return self.uses(_TIME_LETTERS)

    @property
    def has_zone(self) -> bool:
        return self.uses(_ZONE_LETTERS)


def parse_pattern(pattern: str, style: str = SIMPLE, *, for_parsing: bool = False) -> Pattern:
    """Split a Java pattern into fields and literal strings; ExpressionError on unsupported letters."""
    allowed = (_PARSE_LETTERS if for_parsing else _FORMAT_LETTERS)[style]
    items: list = []
    literal: list[str] = []

    def flush() -> None:
        if literal:
            items.append("".join(literal))
            literal.clear()

    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "'":
            if i + 1 < n and pattern[i + 1] == "'":
                literal.append("'")
                i += 2
                continue
            j = i + 1
            while True:
                if j >= n:
                    raise ExpressionError(f"date pattern {pattern!r}: unterminated quote")
                if pattern[j] == "'":
                    if j + 1 < n and pattern[j + 1] == "'":
                        literal.append("'")
                        j += 2
                        continue
                    break
                literal.append(pattern[j])
                j += 1
            i = j + 1
            continue
        if ("a" <= ch <= "z") or ("A" <= ch <= "Z"):
            if ch not in allowed:
                what = "parsing" if for_parsing else "formatting"
                raise ExpressionError(
                    f"date pattern {pattern!r}: pattern letter {ch!r} is not supported for {what} (supported: "
                    f"{', '.join(allowed)}; quote literal text as 'T')")
            j = i
            while j < n and pattern[j] == ch:
                j += 1
            flush()
            items.append(Field(ch, j - i))
            i = j
            continue
        literal.append(ch)
        i += 1
    flush()
    return Pattern(pattern, style, tuple(items))


# ------------------------------------------------------------------------------------------------ formatting

def _num(values: pa.Array, count: int) -> pa.Array:
    text = values.cast(pa.string())
    if count <= 1:
        return text
    negative = pc.less(values, 0)
    padded = pc.utf8_lpad(text, width=count, padding="0")
    if pc.any(pc.fill_null(negative, False)).as_py():
        absolute = pc.utf8_lpad(pc.abs(values).cast(pa.string()), width=count, padding="0")
        padded = pc.if_else(negative, pc.binary_join_element_wise("-", absolute, ""), padded)
    return padded


def _names(index: pa.Array, names: list[str], count: int) -> pa.Array:
    """Month/day names by 0-based index: full for 4+ letters, else the 3-letter abbreviation."""
    table = pa.array(names if count >= 4 else [name[:3] for name in names])
    return table.take(index)


def _offset_text(offsets: pa.Array, f: Field) -> pa.Array:
    """Zone offsets (seconds) as Z / X / x text."""
    sign = pc.if_else(pc.less(offsets, 0), "-", "+")
    total = pc.abs(offsets)
    hours = _num(pc.divide(total, 3600), 2)
    minutes = _num(pc.divide(pc.subtract(total, pc.multiply(pc.divide(total, 3600), 3600)), 60), 2)
    if f.letter == "Z":
        if f.count >= 5:
            text = pc.binary_join_element_wise(sign, hours, ":", minutes, "")
            return pc.if_else(pc.equal(offsets, 0), "Z", text)
        return pc.binary_join_element_wise(sign, hours, minutes, "")
    if f.count == 1:
        text = pc.if_else(pc.equal(minutes, "00"), pc.binary_join_element_wise(sign, hours, ""),
                          pc.binary_join_element_wise(sign, hours, minutes, ""))
    elif f.count in (2, 4):
        text = pc.binary_join_element_wise(sign, hours, minutes, "")
    else:
        text = pc.binary_join_element_wise(sign, hours, ":", minutes, "")
    if f.letter == "X":
        return pc.if_else(pc.equal(offsets, 0), "Z", text)
    return text


def _field(ts: pa.Array, f: Field, style: str, offsets: pa.Array | None) -> pa.Array:
    c, letter = f.count, f.letter
    if letter == "G":
        return pc.if_else(pc.greater(pc.year(ts), 0), "AD", "BC")
    if letter == "y" or (letter == "u" and style == JAVA_TIME):
        year = pc.year(ts)
        if c == 2:
            return _num(pc.subtract(year, pc.multiply(pc.divide(year, 100), 100)), 2)
        return _num(year, c)
    if letter == "u":
        return _num(pc.day_of_week(ts, count_from_zero=False, week_start=1), c)
    if letter in "ML":
        if c >= 3:
            return _names(pc.subtract(pc.month(ts), 1), MONTHS, c)
        return _num(pc.month(ts), c)
    if letter in "Qq":
        quarter = pc.quarter(ts)
        if c <= 2:
            return _num(quarter, c)
        if c == 3:
            return pc.binary_join_element_wise("Q", quarter.cast(pa.string()), "")
        return pa.array(["1st quarter", "2nd quarter", "3rd quarter", "4th quarter"]).take(pc.subtract(quarter, 1))
    if letter == "d":
        return _num(pc.day(ts), c)
    if letter == "D":
        return _num(pc.day_of_year(ts), c)
    if letter == "E":
        return _names(pc.day_of_week(ts, count_from_zero=True, week_start=1), DAYS, c)
    if letter == "H":
        return _num(pc.hour(ts), c)
    if letter == "k":
        hour = pc.hour(ts)
        return _num(pc.if_else(pc.equal(hour, 0), 24, hour), c)
    if letter in "hK":
        hour12 = pc.subtract(pc.hour(ts), pc.multiply(pc.divide(pc.hour(ts), 12), 12))
        if letter == "h":
            hour12 = pc.if_else(pc.equal(hour12, 0), 12, hour12)
        return _num(hour12, c)
    if letter == "m":
        return _num(pc.minute(ts), c)
    if letter == "s":
        return _num(pc.second(ts), c)
    if letter == "S":
        if style == SIMPLE:
            return _num(pc.divide(fraction_nanos(ts), 1_000_000), c)
        digits = _num(fraction_nanos(ts), 9)
        return pc.utf8_slice_codeunits(digits, 0, c) if c <= 9 else pc.utf8_rpad(digits, width=c, padding="0")
    if letter == "n":
        return _num(fraction_nanos(ts), c)
    if letter == "a":
        return pc.if_else(pc.less(pc.hour(ts), 12), "AM", "PM")
    if letter in "ZXx":
        if offsets is None:
            raise ExpressionError(f"pattern letter {letter!r} needs a value with a time zone")
        return _offset_text(offsets, f)
    raise ExpressionError(f"pattern letter {letter!r} is not supported")  # pragma: no cover


def format_wall_clock(ts: pa.Array, pattern: Pattern, offsets: pa.Array | None = None) -> pa.Array:
    """Format naive (wall clock) timestamps; ``offsets`` (seconds east of UTC) feed the zone letters. NULL stays
    NULL."""
    items = pattern.items
    if not items:
        return pc.if_else(pc.is_valid(ts), "", pa.scalar(None, pa.string()))
    if all(isinstance(item, str) for item in items):
        return pc.if_else(pc.is_valid(ts), "".join(items), pa.scalar(None, pa.string()))
    parts = [item if isinstance(item, str) else _field(ts, item, pattern.style, offsets) for item in items]
    if len(parts) == 1:
        return parts[0]
    # NULL timestamps give NULL fields, and emit_null makes the whole text NULL.
    return pc.binary_join_element_wise(*parts, "", null_handling="emit_null")


# ---------------------------------------------------------------------------------------------------- parsing

_NUMERIC = set("yuMLdHkKhmsSn")


@dataclass(frozen=True)
class Parsed:
    """Parsed components (int64 arrays; NULL where absent) and the rows that matched the pattern."""

    ok: pa.Array
    year: np.ndarray
    month: np.ndarray
    day: np.ndarray
    hour: np.ndarray
    minute: np.ndarray
    second: np.ndarray
    nanos: np.ndarray
    offset: np.ndarray | None  # seconds east of UTC, when the pattern has a zone field
    offset_present: np.ndarray | None


def _field_regex(f: Field, style: str, abutting: bool, index: int) -> str:
    name = f"f{index}"
    c = f.count
    if f.letter in "ML" and c >= 3:
        names = "|".join(MONTHS + [m[:3] for m in MONTHS]) if style == SIMPLE else \
            "|".join(MONTHS if c >= 4 else [m[:3] for m in MONTHS])
        return f"(?P<{name}>(?i:{names}))"
    if f.letter == "E":
        names = "|".join(DAYS + [d[:3] for d in DAYS])
        return f"(?P<{name}>(?i:{names}))"
    if f.letter == "a":
        return f"(?P<{name}>(?i:AM|PM))"
    if f.letter in "ZXx":
        return f"(?P<{name}>Z|[+-][0-9]{{2}}(?::?[0-9]{{2}})?)"
    if style == SIMPLE:
        if f.letter == "y" and c == 2:
            return f"(?P<{name}>[0-9]{{2}})" if abutting else f"(?P<{name}>[0-9]+)"
        return f"(?P<{name}>[0-9]{{{c}}})" if abutting else f"(?P<{name}>[0-9]+)"
    # java.time: fixed widths for 2-letter fields, minimum widths otherwise
    if f.letter == "S":
        return f"(?P<{name}>[0-9]{{{c}}})"
    if f.letter in "yu" and c == 2:
        return f"(?P<{name}>[0-9]{{2}})"
    if c == 2 or (abutting and f.letter not in "yu"):
        return f"(?P<{name}>[0-9]{{{c}}})"
    if f.letter in "yu":
        return f"(?P<{name}>[0-9]{{{max(c, 1)},19}})"
    return f"(?P<{name}>[0-9]{{1,19}})"


def _parse_regex(pattern: Pattern, anchored_end: bool) -> str:
    items = list(pattern.items)
    parts = ["(?s)^"]
    for index, item in enumerate(items):
        if isinstance(item, str):
            parts.append("".join("\\" + ch if not ch.isalnum() and ch != " " else ch for ch in item))
            continue
        following = items[index + 1] if index + 1 < len(items) else None
        abutting = isinstance(following, Field) and following.letter in _NUMERIC and item.letter in _NUMERIC
        parts.append(_field_regex(item, pattern.style, abutting, index))
    if anchored_end:
        parts.append("$")
    return "".join(parts)


def _ints(struct: pa.Array, name: str) -> np.ndarray:
    values = struct.field(name)
    values = pc.if_else(pc.equal(values, ""), pa.scalar(None, pa.string()), values)
    return pc.fill_null(values.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)


def parse_columns(text: pa.Array, pattern: Pattern, *, full_match: bool, now_year: int) -> Parsed:
    """Extract the pattern's fields from every row. Unmatched rows have ``ok`` FALSE; component defaults are
    1970-01-01 00:00:00."""
    n = len(text)
    regex = _parse_regex(pattern, anchored_end=full_match)
    if not pattern.fields:
        ok = pc.fill_null(pc.match_substring_regex(text, regex), False)
        zeros = np.zeros(n, np.int64)
        return Parsed(ok, zeros + 1970, zeros + 1, zeros + 1, zeros, zeros, zeros, zeros, None, None)
    struct = pc.extract_regex(text, regex)
    ok = pc.fill_null(struct.is_valid(), False)
    zeros = np.zeros(n, dtype=np.int64)
    year, month, day = zeros + 1970, zeros + 1, zeros + 1
    hour, minute, second, nanos = zeros.copy(), zeros.copy(), zeros.copy(), zeros.copy()
    pm = None
    twelve = False
    offset = offset_present = None
    for index, item in enumerate(pattern.items):
        if not isinstance(item, Field):
            continue
        name, letter, c = f"f{index}", item.letter, item.count
        if letter in "yu":
            raw = struct.field(name)
            year = _ints(struct, name)
            if c == 2:
                two_digit = pc.fill_null(pc.equal(pc.utf8_length(raw), 2), False).to_numpy(zero_copy_only=False)
                if pattern.style == SIMPLE:
                    # SimpleDateFormat: the century that puts the year within 80 years before / 20 after now
                    base = np.where(year + 2000 > now_year + 20, 1900, 2000)
                else:
                    base = np.int64(2000)
                year = np.where(two_digit, year + base, year)
        elif letter in "ML":
            if c >= 3:
                raw = pc.utf8_slice_codeunits(pc.utf8_lower(struct.field(name)), 0, 3)
                lookup = pa.array([m[:3].lower() for m in MONTHS])
                month = pc.fill_null(pc.index_in(raw, value_set=lookup), 0).to_numpy(zero_copy_only=False) + 1
            else:
                month = _ints(struct, name)
        elif letter == "d":
            day = _ints(struct, name)
        elif letter in "Hk":
            hour = _ints(struct, name)
            if letter == "k":
                hour = np.where(hour == 24, 0, hour)
        elif letter in "hK":
            hour = _ints(struct, name)
            twelve = True
            if letter == "h":
                hour = np.where(hour == 12, 0, hour)
        elif letter == "a":
            pm = pc.fill_null(pc.equal(pc.utf8_upper(struct.field(name)), "PM"), False).to_numpy(
                zero_copy_only=False)
        elif letter == "m":
            minute = _ints(struct, name)
        elif letter == "s":
            second = _ints(struct, name)
        elif letter == "S":
            value = _ints(struct, name)
            nanos = value * 1_000_000 if pattern.style == SIMPLE else value * 10 ** (9 - min(c, 9))
        elif letter in "ZXx":
            raw = struct.field(name)
            # rows that did not match have no zone (their struct children hold no value, not even a valid one)
            present = pc.and_(ok, pc.fill_null(pc.is_valid(raw), False))
            sign = pc.if_else(pc.starts_with(raw, "-"), -1, 1)
            digits = pc.replace_substring(pc.replace_substring(raw, ":", ""), "Z", "+00")
            digits = pc.if_else(present, digits, "+00")
            hours = pc.utf8_slice_codeunits(digits, 1, 3)
            mins = pc.utf8_slice_codeunits(digits, 3, 5)
            mins = pc.if_else(pc.equal(mins, ""), "0", mins)
            seconds = pc.multiply(sign, pc.add(pc.multiply(hours.cast(pa.int64()), 3600),
                                               pc.multiply(mins.cast(pa.int64()), 60)))
            offset = pc.fill_null(seconds, 0).to_numpy(zero_copy_only=False)
            offset_present = present.to_numpy(zero_copy_only=False)
    if pm is not None and twelve:
        hour = np.where(pm, hour + 12, hour)
    elif pm is not None:
        hour = np.where(pm & (hour < 12), hour + 12, hour)
    return Parsed(ok, year, month, day, hour, minute, second, nanos, offset, offset_present)


def days_from_civil(year: np.ndarray, month: np.ndarray, day: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 of a proleptic Gregorian date (month 1-12; day may run past the month end)."""
    y = year - (month <= 2)
    era = np.floor_divide(y, 400)
    yoe = y - era * 400
    mp = (month + 9) % 12
    doy = (153 * mp + 2) // 5
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468 + (day - 1)


def month_length(year: np.ndarray, month: np.ndarray) -> np.ndarray:
    leap = ((year % 4 == 0) & (year % 100 != 0)) | (year % 400 == 0)
    lengths = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])
    return lengths[np.clip(month, 1, 12) - 1] + ((month == 2) & leap)


def lenient_wall_clock(p: Parsed) -> tuple[pa.Array, pa.Array]:
    """SimpleDateFormat's lenient calendar: out-of-range fields roll over (month 13 → January of the next year,
    February 30 → March 1/2). Returns (microseconds since the epoch as naive wall clock, ok)."""
    months = p.month - 1
    year = p.year + np.floor_divide(months, 12)
    month = np.mod(months, 12) + 1
    days = days_from_civil(year, month, np.ones_like(month)) + (p.day - 1)
    seconds = days * 86400 + p.hour * 3600 + p.minute * 60 + p.second
    return _micros(seconds, p.nanos), p.ok


def smart_wall_clock(p: Parsed, *, need_date: bool = True) -> tuple[pa.Array, pa.Array]:
    """DateTimeFormatter's SMART resolver: month 1-12, day 1-31 (clamped to the month's last day), hour 0-23,
    minute and second 0-59; anything else fails the row."""
    valid = (p.month >= 1) & (p.month <= 12) & (p.day >= 1) & (p.day <= 31) & (p.hour >= 0) & (p.hour <= 23) \
        & (p.minute >= 0) & (p.minute <= 59) & (p.second >= 0) & (p.second <= 59)
    month = np.clip(p.month, 1, 12)
    day = np.minimum(p.day, month_length(p.year, month))
    days = days_from_civil(p.year, month, day)
    seconds = days * 86400 + p.hour * 3600 + p.minute * 60 + p.second
    ok = pc.and_(p.ok, pa.array(valid))
    return _micros(seconds, p.nanos), ok


def _micros(seconds: np.ndarray, nanos: np.ndarray) -> pa.Array:
    """Microseconds (not nanoseconds: 64-bit nanoseconds end in 2262, and 9999-12-31 is a common sentinel)."""
    return pa.array(seconds * 1_000_000 + nanos // 1000, pa.int64())
