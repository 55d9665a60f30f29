"""Which source rows can land in one Paimon partition: a range of a source column that a re-snapshot of that
partition pushes into its chunk statements (lakecdc.source.chunk_sql renders it), so that it reads the partition's
rows, not the whole table.

A partition column pushes down when its expression is

* a source column of an integer, CHAR/VARCHAR or DATE type (whose text is the partition's): ``col = value``, or
  ``col IS NULL`` for the NULL partition;
* ``DATE_FORMAT(col, 'pattern')`` of a DATETIME or DATE column, where the pattern is numeric fields from the year
  down without a gap (``yyyy``, ``MM``, ``dd``, ``HH``, ``mm``, ``ss``, with any literal text between them): the
  formatted value grows with ``col``, so one partition value is one half-open range of ``col``,
  ``[start, start + one unit of the last field)`` (a day wider on each side when the pipeline's time zone has
  daylight-saving shifts, which move a wall clock in a gap).

Anything else pushes nothing down (the re-snapshot then reads every chunk). A condition only narrows what is read:
the transform's output is still filtered to the partition exactly, so a condition wider than the partition costs
rows read, never a wrong row.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lakecdc.transform.datefmt import Field, parse_pattern
from lakecdc.transform.nodes import Call, ColumnRef
from lakecdc.transform.routes import CoercedTransform
from lakecdc.transform.rules import CompiledTransform
from lakecdc.transform.types import zone_offset_seconds

Transform = CompiledTransform | CoercedTransform  # a source table's compiled transform, routed or not

# the numeric fields of a monotone pattern, most significant first: (letter, digits)
_FIELDS = (("y", 4), ("M", 2), ("d", 2), ("H", 2), ("m", 2), ("s", 2))
# DATE_FORMAT(<column>, '<literal pattern>') as the expression's text (a literal pattern is compiled into the call,
# which keeps the column as its one argument)
_DATE_FORMAT = re.compile(r"(?is)^\s*DATE_FORMAT\s*\(\s*[^,]+,\s*'((?:[^']|'')*)'\s*\)\s*$")
_TEXT_TYPES = ("char", "varchar")


@dataclass(frozen=True)
class ColumnRange:
    """Values of one source column: NULL (``is_null``), one value (``equals``, as text the server compares), or the
    half-open range ``[start, end)``."""

    column: str
    is_null: bool = False
    equals: str | None = None
    start: Any = None
    end: Any = None

    def describe(self) -> str:
        if self.is_null:
            return f"{self.column} IS NULL"
        if self.equals is not None:
            return f"{self.column} = {self.equals!r}"
        return f"{self.column} in [{self.start}, {self.end})"


def partition_ranges(transform: Transform, spec: dict[str, str | None]) -> list[ColumnRange]:
    """Ranges of ``transform``'s source columns that every row of the partition ``spec`` ({column: value text, None
    for NULL}) lies in (all of them); empty when no partition column pushes down."""
    return [r for r in (_column_range(transform, column, value) for column, value in spec.items()) if r]


def _column_range(transform: Transform, column: str, value: str | None) -> ColumnRange | None:
    node = transform.column_expression(column)
    if isinstance(node, ColumnRef) and node.kind == "source":
        return _identity(transform, node.name, value)
    match = _DATE_FORMAT.match(node.sql or "") if isinstance(node, Call) else None
    if isinstance(node, Call) and match and len(node.args) == 1:
        ref = node.args[0]
        if isinstance(ref, ColumnRef) and ref.kind == "source":
            return _date_format(transform, ref.name, match.group(1).replace("''", "'"), value)
    return None


def _source_type(transform: Transform, name: str) -> tuple[str, pa.DataType]:
    column = transform.source.column(name)
    return column.column_type.split("(")[0].split()[0].lower(), column.arrow_type


def _identity(transform: Transform, name: str, value: str | None) -> ColumnRange | None:
    if value is None:
        return ColumnRange(name, is_null=True)
    data_type, arrow_type = _source_type(transform, name)
    integer = pa.types.is_integer(arrow_type) and re.fullmatch(r"-?\d+", value) is not None
    date = data_type == "date" and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value) is not None
    if integer or data_type in _TEXT_TYPES or date:
        return ColumnRange(name, equals=value)
    return None


def _date_format(transform: Transform, name: str, pattern_text: str,
                 value: str | None) -> ColumnRange | None:
    data_type, _ = _source_type(transform, name)
    if data_type not in ("datetime", "date"):
        return None
    if value is None:
        return ColumnRange(name, is_null=True)
    bounds = _range(pattern_text, value)
    if bounds is None:
        return None
    start, end = bounds
    if zone_offset_seconds(transform.zone) is None:  # daylight saving: a wall clock in a gap moves forward
        start, end = start - dt.timedelta(days=1), end + dt.timedelta(days=1)
    if data_type == "date":
        return ColumnRange(name, start=start.date(), end=_date_after(end))
    return ColumnRange(name, start=start, end=end)


def _date_after(end: dt.datetime) -> dt.date:
    """The first date not before ``end`` (a DATE column's exclusive bound)."""
    return end.date() if end.time() == dt.time() else end.date() + dt.timedelta(days=1)


def _range(pattern_text: str, value: str) -> tuple[dt.datetime, dt.datetime] | None:
    """[start, end) of the wall clocks that ``pattern_text`` formats as ``value``, when the pattern is monotone."""
    try:
        pattern = parse_pattern(pattern_text)
    except Exception:  # noqa: BLE001 - any pattern this module does not understand pushes nothing down
        return None
    regex: list[str] = []
    letters: list[str] = []
    for item in pattern.items:
        if isinstance(item, Field):
            expected = _FIELDS[len(letters)] if len(letters) < len(_FIELDS) else None
            if expected is None or item.letter != expected[0] or item.count != expected[1]:
                return None
            regex.append(rf"(\d{{{expected[1]}}})")
            letters.append(item.letter)
        else:
            regex.append(re.escape(item))
    match = re.fullmatch("".join(regex), value)
    if not letters or match is None:
        return None
    numbers = [int(g) for g in match.groups()]
    parts: dict[str, Any] = dict(zip(letters, numbers))
    try:
        start = dt.datetime(parts["y"], parts.get("M", 1), parts.get("d", 1), parts.get("H", 0), parts.get("m", 0),
                            parts.get("s", 0))
    except ValueError:  # not a date (a 13th month): no row formats to it
        return None
    return start, _next(start, letters[-1])


def _next(start: dt.datetime, letter: str) -> dt.datetime:
    if letter == "y":
        return start.replace(year=start.year + 1)
    if letter == "M":
        return start.replace(year=start.year + start.month // 12, month=start.month % 12 + 1)
    return start + {"d": dt.timedelta(days=1), "H": dt.timedelta(hours=1), "m": dt.timedelta(minutes=1),
                    "s": dt.timedelta(seconds=1)}[letter]
