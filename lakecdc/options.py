"""Option declarations, as Flink CDC's ``ConfigOption`` (key, type, default, description, fallback keys).

Each block of a pipeline YAML is owned by the code that uses it: the ``source:`` options by lakecdc.source
(``MySqlSourceOptions``), the ``sink:`` options by lakecdc.sink (``PaimonSinkOptions``), the ``pipeline:`` options by
lakecdc.config. Each option is declared once, on the dataclass field it fills::

    port: int = option("port", INT, 3306, minimum=1, doc="...")

The declaration carries the YAML key, the kind of value, the default, the validation and the line
docs/pipeline-yaml.md shows (its tables are rendered from the declarations: :func:`markdown_table`). :func:`read`
turns a YAML block into the values of such a dataclass; every error names the file and the key path. This module
is neutral (it imports no layer), so the connectors and lakecdc.config can all use it.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import zoneinfo
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from lakecdc.errors import PipelineConfigError

# kinds of option values
STRING = "string"
INT = "int"
FLOAT = "float"
BOOL = "bool"
DURATION = "duration"  # Flink's duration syntax; read as seconds
ANY = "any"  # any YAML value (a list, ...), handed to ``convert`` as written

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|min|m|h|d)?\s*$")
_DURATION_UNITS = {"ms": 0.001, "s": 1, "sec": 1, "min": 60, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class Where:
    """The file and key path a value came from: what every error about it names."""

    file: str | None
    path: str

    def error(self, message: str) -> PipelineConfigError:
        return PipelineConfigError(message, file=self.file, path=self.path)


@dataclass(frozen=True)
class Option:
    """One YAML option: its key, the kind of value, the default and how it is validated.

    ``convert(value, where)`` turns the value read as ``kind`` into the field's value (or raises ``where.error``);
    ``check(value)`` returns what is wrong with it, or None. ``fallback_keys`` are older spellings read when
    ``key`` is absent. ``into`` spreads a converted tuple over several fields (``server-id`` → first and last id).
    """

    key: str
    kind: str = STRING
    default: Any = None
    doc: str = ""
    required: bool = False
    minimum: float | None = None
    allow_empty: bool = False
    fallback_keys: tuple[str, ...] = ()
    convert: Callable[[Any, Where], Any] | None = None
    check: Callable[[Any], str | None] | None = None
    into: tuple[str, ...] = ()
    default_doc: str | None = None  # the docs' default column (markdown), when the default itself reads badly there

    def read(self, raw: dict, section: str, file: str | None) -> Any:
        """The option's value in the YAML block ``raw`` (``section`` is its key path), validated."""
        key = next((k for k in (self.key, *self.fallback_keys) if raw.get(k) is not None), self.key)
        where = Where(file, _join(section, key))
        value = raw.get(key)
        if value is None:
            if self.required:
                raise where.error("required option is missing")
            return self.default
        value = _read_kind(self, value, where)
        if value is None:  # an empty string
            return self.default
        if self.minimum is not None and value < self.minimum:
            raise where.error(f"must be at least {self.minimum}, got {value}")
        if self.check is not None:
            problem = self.check(value)
            if problem:
                raise where.error(problem)
        return self.convert(value, where) if self.convert is not None else value

    @property
    def default_text(self) -> str:
        if self.default_doc is not None:
            return self.default_doc
        if self.required:
            return "required"
        if self.default is None or (not self.default and not isinstance(self.default, (bool, int, float))):
            return "—"
        return f"`{option_text(self.default)}`"


@dataclass(frozen=True)
class Prefix:
    """Options under a key prefix (``catalog.properties.*``) passed on as a mapping of text values, the prefix
    removed, or refused (``refused`` says why)."""

    prefix: str
    doc: str = ""
    refused: str | None = None

    def read(self, raw: dict, section: str, file: str | None) -> dict[str, str]:
        found = {k: v for k, v in raw.items() if isinstance(k, str) and k.startswith(self.prefix)}
        if self.refused and found:
            raise Where(file, _join(section, next(iter(found)))).error(self.refused)
        return {k[len(self.prefix):]: option_text(v) for k, v in found.items()}

    @property
    def key(self) -> str:
        return self.prefix + "*"


def option(key: str, kind: str = STRING, default: Any = dataclasses.MISSING, *, repr: bool = True,
           **declaration: Any) -> Any:
    """A dataclass field declared as the YAML option ``key`` (see :class:`Option`). Without ``default`` the field
    must be given when the dataclass is built in code, as the option must be in YAML."""
    required = declaration.pop("required", False) or default is dataclasses.MISSING
    spec = Option(key, kind, None if default is dataclasses.MISSING else default, required=required, **declaration)
    if isinstance(default, (list, dict, set)):
        return dataclasses.field(default_factory=lambda: type(default)(default), repr=repr,
                                 metadata={"option": spec})
    return dataclasses.field(default=default, repr=repr, metadata={"option": spec})


def prefixed(prefix: str, *, doc: str = "", repr: bool = True) -> Any:
    """A dataclass field holding the options under ``prefix`` (see :class:`Prefix`)."""
    return dataclasses.field(default_factory=dict, repr=repr, metadata={"option": Prefix(prefix, doc)})


def nested(cls: type) -> Any:
    """A dataclass field holding another declared dataclass, whose options sit in the same YAML block."""
    return dataclasses.field(default_factory=cls, metadata={"nested": cls})


def declarations(cls: type) -> list[Option | Prefix]:
    """Every option ``cls`` (a dataclass) declares, nested ones included, in declaration order."""
    found: list[Option | Prefix] = []
    for f in dataclasses.fields(cls):
        if "nested" in f.metadata:
            found += declarations(f.metadata["nested"])
        elif "option" in f.metadata:
            found.append(f.metadata["option"])
    return found


def read(cls: type, raw: dict, section: str, file: str | None) -> dict[str, Any]:
    """The field values of ``cls`` from the YAML block ``raw``: each declared option read and validated, nested
    declared dataclasses built. Fields without a declaration are left out (they keep their defaults)."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if "nested" in f.metadata:
            values[f.name] = f.metadata["nested"](**read(f.metadata["nested"], raw, section, file))
            continue
        spec = f.metadata.get("option")
        if spec is None:
            continue
        value = spec.read(raw, section, file)
        if isinstance(spec, Option) and spec.into and isinstance(value, tuple):
            values.update(zip(spec.into, value))
        else:
            values[f.name] = value
    return values


def check_keys(raw: dict, section: str, file: str | None, known: Iterable[Option | Prefix | str]) -> None:
    """Every key of ``raw`` is a declared option (or under a declared prefix); an unknown one is an error naming the
    closest declared key."""
    keys: set[str] = set()
    for spec in known:
        if isinstance(spec, Option):
            keys.update((spec.key, *spec.fallback_keys))
        elif isinstance(spec, str):
            keys.add(spec)
    prefixes = tuple(spec.prefix for spec in known if isinstance(spec, Prefix))
    for key in raw:
        if not isinstance(key, str):
            raise Where(file, section).error(f"option names must be strings, got {key!r}")
        if key in keys or any(key.startswith(p) and len(key) > len(p) for p in prefixes):
            continue
        matches = difflib.get_close_matches(key, sorted(keys), n=1, cutoff=0.75)
        raise Where(file, _join(section, key)).error(
            "unknown option" + (f" (did you mean '{matches[0]}'?)" if matches else ""))


def check_zone(zone: str) -> str | None:
    """What is wrong with a time zone name (IANA or an offset such as +02:00), or None."""
    if re.fullmatch(r"[+-]\d{2}:\d{2}", zone) or zone in ("UTC", "Z"):
        return None
    try:
        zoneinfo.ZoneInfo(zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return f"unknown time zone {zone!r} (use an IANA name like Europe/Berlin or +02:00)"
    return None


def option_text(value: Any) -> str:
    """A YAML scalar as the text a Paimon or driver option takes (booleans as ``true``/``false``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def describe(value: Any) -> str:
    """What a YAML value is, for errors (``a mapping``, ``int 3``)."""
    if value is None:
        return "nothing"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "a boolean"
    return f"{type(value).__name__} {value!r}"


def markdown_table(specs: list[Option | Prefix]) -> str:
    """The docs/pipeline-yaml.md table of the options: key, default, what lakecdc does with it."""
    lines = ["| option | default | lakecdc |", "|---|---|---|"]
    for spec in specs:
        if isinstance(spec, Prefix):
            lines.append(f"| `{spec.key}` | | {f'refused: {spec.refused}' if spec.refused else spec.doc} |")
            continue
        keys = ", ".join(f"`{k}`" for k in (spec.key, *spec.fallback_keys))
        lines.append(f"| {keys} | {spec.default_text} | {spec.doc} |")
    return "\n".join(lines)


def _read_kind(spec: Option, value: Any, where: Where) -> Any:
    """``value`` as the option's kind; None for an empty string where that means "not given"."""
    if spec.kind == STRING:
        if isinstance(value, (bool, dict, list)):
            raise where.error(f"expected a string, got {describe(value)}")
        value = str(value)
        if not spec.allow_empty and not value.strip():
            if spec.required:
                raise where.error("must not be empty")
            return None
        return value
    if spec.kind in (INT, FLOAT):
        name = "an integer" if spec.kind == INT else "a number"
        if isinstance(value, bool) or not isinstance(value, (int, float, str)) \
                or (spec.kind == INT and isinstance(value, float)):
            raise where.error(f"expected {name}, got {describe(value)}")
        try:
            return int(str(value).strip()) if spec.kind == INT else float(str(value).strip())
        except ValueError:
            raise where.error(f"expected {name}, got {value!r}") from None
    if spec.kind == BOOL:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise where.error(f"expected true or false, got {value!r}")
    if spec.kind == DURATION:
        return duration_seconds(value, where)
    return value


def duration_seconds(value: Any, where: Where) -> float:
    """Flink's duration syntax (``30s``, ``500ms``, ``2min``; a bare number is milliseconds) in seconds."""
    match = _DURATION.match(str(value))
    if not match:
        raise where.error(f"expected a duration like 30s, 500ms or 2min, got {value!r}")
    return float(match.group(1)) * _DURATION_UNITS[match.group(2) or "ms"]


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


_DOC_BLOCK = re.compile(r"(<!-- options: (\w+) .*?-->\n)(.*?)(<!-- /options -->)", re.S)


def render_doc(text: str, tables: dict[str, list[Option | Prefix]]) -> str:
    """``text`` (docs/pipeline-yaml.md) with each ``<!-- options: NAME ... -->`` … ``<!-- /options -->`` block
    replaced by the table of the options ``tables[NAME]`` declares."""
    return _DOC_BLOCK.sub(lambda m: f"{m.group(1)}{markdown_table(tables[m.group(2)])}\n{m.group(4)}", text)
