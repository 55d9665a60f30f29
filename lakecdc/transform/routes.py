"""Route rules: which Paimon table each captured MySQL table lands in (Flink CDC ``route:``).

Semantics follow Flink CDC's TableIdRouter: the ``source-table`` pattern becomes one regex (``,`` separates
alternatives, an escaped ``\\.`` is any character, a plain ``.`` is a literal dot), matched case-sensitively
against ``db.table``. ``sink-table`` may use ``replace-symbol`` (replaced by the source table name) or regex
groups ``$1``. In ``ALL_MATCH`` mode a table matching several rules goes to every sink table; ``FIRST_MATCH``
takes the first. Tables matching no rule keep their own name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lakecdc.errors import PipelineConfigError
from lakecdc.model import TableId


def _route_regex(pattern: str) -> str:
    out = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern) and pattern[i + 1] == ".":
            out.append(".")
            i += 2
            continue
        if ch == "\\" and i + 1 < len(pattern):
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if ch == ".":
            out.append(r"\.")
        elif ch == ",":
            out.append("|")
        else:
            out.append(ch)
        i += 1
    return "".join(out)


@dataclass
class CompiledRoute:
    index: int
    regex: re.Pattern
    sink_table: str
    replace_symbol: str | None

    def target(self, source: TableId) -> TableId | None:
        match = self.regex.fullmatch(str(source))
        if not match:
            return None
        if self.replace_symbol:
            text = self.sink_table.replace(self.replace_symbol, source.table)
        elif self.regex.groups:
            text = match.expand(re.sub(r"\$(\d+)", r"\\g<\1>", self.sink_table))
        else:
            text = self.sink_table
        return TableId.parse(text)


class Router:
    """Maps a source table to its sink tables."""

    def __init__(self, routes: list, *, mode: str = "ALL_MATCH", file: str | None = None):
        self.mode = mode.upper()
        self.routes: list[CompiledRoute] = []
        for route in routes:
            try:
                regex = re.compile(_route_regex(route.source_table))
            except re.error as exc:
                raise PipelineConfigError(f"invalid table pattern {route.source_table!r}: {exc}", file=file,
                                          path=f"route[{route.index}].source-table") from None
            if route.replace_symbol and regex.groups:
                raise PipelineConfigError("regex groups cannot be combined with replace-symbol", file=file,
                                          path=f"route[{route.index}]")
            self.routes.append(CompiledRoute(route.index, regex, route.sink_table, route.replace_symbol))

    def targets(self, source: TableId) -> list[TableId]:
        found: list[TableId] = []
        for route in self.routes:
            target = route.target(source)
            if target is None:
                continue
            if target not in found:
                found.append(target)
            if self.mode == "FIRST_MATCH":
                break
        return found or [source]
