"""Flink CDC table selectors (transform ``source-table``, MySQL ``tables`` / ``tables.exclude``).

Syntax (Flink CDC ``Selectors`` / ``Predicates``): the text is split on unescaped ``,`` into patterns (``\\,`` is a
literal comma); each pattern is split on unescaped ``.`` into parts; ``\\.`` inside a part becomes the regex ``.``
(any character, so ``\\.*`` means "anything"); every other backslash sequence is kept as a regex escape. Each part is
a case-insensitive regex that must match the whole name.

MySQL table ids are ``database.table``, so a pattern has two parts (``app_db.\\.*``, ``db[1-2].order_[0-9]+``). A
one-part (``orders``) or three-part (``ns.db.orders``) pattern matches no MySQL table in Flink CDC (those forms are
for sources with other id shapes); lakecdc refuses them with an error instead of silently matching nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lakecdc.errors import PipelineConfigError
from lakecdc.model import TableId


def _split_unescaped(text: str, sep: str) -> list[str]:
    """Split on ``sep`` not preceded by a backslash; escapes are kept in the pieces."""
    pieces, current, i = [], [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            current.append(text[i:i + 2])
            i += 2
            continue
        if ch == sep:
            pieces.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    pieces.append("".join(current))
    return pieces


def _part_regex(part: str) -> str:
    """``\\.`` → ``.`` (regex any char), ``\\,`` → ``,``; other escapes stay regex escapes."""
    out, i = [], 0
    while i < len(part):
        if part[i] == "\\" and i + 1 < len(part) and part[i + 1] in ".,":
            out.append("." if part[i + 1] == "." else ",")
            i += 2
        elif part[i] == "\\" and i + 1 < len(part):
            out.append(part[i:i + 2])
            i += 2
        else:
            out.append(part[i])
            i += 1
    return "".join(out)


@dataclass(frozen=True)
class _Pattern:
    text: str
    parts: tuple[re.Pattern, ...]

    def matches(self, table_id: TableId) -> bool:
        return (self.parts[0].fullmatch(table_id.database) is not None
                and self.parts[1].fullmatch(table_id.table) is not None)


class TableSelector:
    """A comma-separated list of table patterns; ``matches`` is true if any pattern matches."""

    def __init__(self, text: str, *, file: str | None = None, path: str | None = None):
        self.text = text
        patterns = []
        for raw in _split_unescaped(text, ","):
            raw = raw.strip()
            if not raw:
                continue
            parts = _split_unescaped(raw, ".")
            if len(parts) != 2:
                raise PipelineConfigError(
                    f"table selector {text!r}: pattern {raw!r} has {len(parts)} dot-separated part(s); MySQL tables "
                    "are 'database.table' (Flink CDC matches no MySQL table with a "
                    f"{'one' if len(parts) == 1 else str(len(parts))}-part pattern). Write e.g. "
                    "'mydb.orders' or '\\.*.orders', and escape a regex dot as '\\.'", file=file, path=path)
            compiled = []
            for part in parts:
                regex = _part_regex(part.strip())
                try:
                    compiled.append(re.compile(regex, re.IGNORECASE))
                except re.error as exc:
                    raise PipelineConfigError(
                        f"table selector {text!r}: invalid regular expression {regex!r} in pattern {raw!r}: {exc}",
                        file=file, path=path) from None
            patterns.append(_Pattern(raw, tuple(compiled)))
        if not patterns:
            raise PipelineConfigError(f"table selector {text!r} is empty", file=file, path=path)
        self.patterns: tuple[_Pattern, ...] = tuple(patterns)

    def matches(self, table_id: TableId) -> bool:
        return any(p.matches(table_id) for p in self.patterns)

    def __repr__(self) -> str:
        return f"TableSelector({self.text!r})"
