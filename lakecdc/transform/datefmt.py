"""Java date/time patterns (SimpleDateFormat / DateTimeFormatter) for DATE_FORMAT, evaluated on whole columns.

A pattern is parsed once into fields and literal text; formatting computes each field for the whole column with
Arrow kernels and joins the pieces. Supported letters (counts as in Java):

=======  ==========================================================================
y        year: ``yy`` two digits, any other count the full year zero-padded to the count
M        month: ``M`` 1-12, ``MM`` 01-12, ``MMM`` Jan, ``MMMM`` January
d        day of month (padded to the count)
D        day of year
H / k    hour 0-23 / 1-24;  h / K  hour 1-12 / 0-11
m, s     minute, second
S        milliseconds, padded to the count (SimpleDateFormat meaning: ``SSS`` = 000-999)
a        AM / PM
E        ``E``-``EEE`` Mon, ``EEEE`` Monday;   u  day number of week (1 = Monday)
'text'   literal text; ``''`` is a single quote (also inside quoted text)
=======  ==========================================================================

Other ASCII letters (zones ``z``/``Z``/``X``, week fields, eras...) are rejected when the rule is validated;
every other character is literal. Names are English (Java's default locale on the Flink CDC images).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.errors import ExpressionError

SUPPORTED_LETTERS = "yMdDHkhKmsSaEu"


@dataclass(frozen=True)
class Field:
    letter: str
    count: int


def parse_pattern(pattern: str) -> list[Field | str]:
    """Split a Java pattern into fields and literal strings; ExpressionError on unsupported letters."""
    items: list[Field | str] = []
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
            if ch not in SUPPORTED_LETTERS:
                raise ExpressionError(
                    f"date pattern {pattern!r}: pattern letter {ch!r} is not supported (supported: "
                    f"{', '.join(SUPPORTED_LETTERS)}; quote literal text as 'T')")
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
    return items


def _num(values: pa.Array, count: int) -> pa.Array:
    text = values.cast(pa.string())
    return pc.utf8_lpad(text, width=count, padding="0") if count > 1 else text


def _field(ts: pa.Array, f: Field) -> pa.Array:
    c = f.count
    if f.letter == "y":
        year = pc.year(ts)
        if c == 2:
            return _num(pc.subtract(year, pc.multiply(pc.divide(year, 100), 100)), 2)
        return _num(year, c)
    if f.letter == "M":
        if c >= 4:
            return pc.strftime(ts, "%B")
        if c == 3:
            return pc.strftime(ts, "%b")
        return _num(pc.month(ts), c)
    if f.letter == "d":
        return _num(pc.day(ts), c)
    if f.letter == "D":
        return _num(pc.day_of_year(ts), c)
    if f.letter == "H":
        return _num(pc.hour(ts), c)
    if f.letter == "k":
        hour = pc.hour(ts)
        return _num(pc.if_else(pc.equal(hour, 0), 24, hour), c)
    if f.letter in "hK":
        hour12 = pc.subtract(pc.hour(ts), pc.multiply(pc.divide(pc.hour(ts), 12), 12))
        if f.letter == "h":
            hour12 = pc.if_else(pc.equal(hour12, 0), 12, hour12)
        return _num(hour12, c)
    if f.letter == "m":
        return _num(pc.minute(ts), c)
    if f.letter == "s":
        return _num(pc.second(ts), c)
    if f.letter == "S":
        if ts.type.unit == "s":
            return _num(pc.multiply(pc.second(ts), 0), c)
        return _num(pc.millisecond(ts), c)
    if f.letter == "a":
        return pc.if_else(pc.less(pc.hour(ts), 12), "AM", "PM")
    if f.letter == "E":
        return pc.strftime(ts, "%A" if c >= 4 else "%a")
    if f.letter == "u":
        return _num(pc.day_of_week(ts, count_from_zero=False, week_start=1), c)
    raise ExpressionError(f"pattern letter {f.letter!r} is not supported")  # pragma: no cover


def format_wall_clock(ts: pa.Array, items: list[Field | str]) -> pa.Array:
    """Format naive (wall clock) timestamps with a parsed pattern; NULL stays NULL."""
    if not items:
        return pc.if_else(pc.is_valid(ts), "", pa.scalar(None, pa.string()))
    if all(isinstance(item, str) for item in items):
        return pc.if_else(pc.is_valid(ts), "".join(items), pa.scalar(None, pa.string()))
    parts = [item if isinstance(item, str) else _field(ts, item) for item in items]
    if len(parts) == 1:
        return parts[0]
    # NULL timestamps give NULL fields, and emit_null makes the whole text NULL.
    return pc.binary_join_element_wise(*parts, "", null_handling="emit_null")
