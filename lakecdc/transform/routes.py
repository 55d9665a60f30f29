"""Route rules (Flink CDC ``route:``): which Paimon table each captured MySQL table lands in, and how several
source tables routed into one Paimon table are merged.

Routing follows Flink CDC's TableIdRouter: the ``source-table`` text is split on ``,`` (each part trimmed) into
alternatives of one regex, an escaped ``\\.`` is any character and a plain ``.`` a literal dot; it must match the
whole ``db.table``, case-sensitively. The target is ``sink-table`` with ``replace-symbol`` replaced by the source
table name, or else ``sink-table`` as a Java regex replacement (``$1`` refers to a group of the pattern). In
``ALL_MATCH`` mode a table matching several rules goes to every sink table; ``FIRST_MATCH`` takes the first. Tables
matching no rule keep their own name.

Merging (many-to-one, SchemaMergingUtils): the Paimon table gets the widest common schema of its sources, in the
order the sources are planned: the first source's columns, then columns the others add, appended at the end.
Types widen along Flink CDC's merging tree (TINYINT → SMALLINT → INT → BIGINT → DECIMAL(38, 0) → DOUBLE → STRING,
FLOAT → DOUBLE, DECIMALs to a DECIMAL holding both, DATE → TIMESTAMP → TIMESTAMP_LTZ, anything else → STRING),
nullability is OR-ed. Rows are coerced by column name into that schema; a column a source lacks is NULL.
Deviation: a column missing from some source is made nullable (Flink CDC keeps its declared NOT NULL and then
fails writing the NULL); a primary-key column must exist in every source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.errors import PipelineConfigError
from lakecdc.model import OP_COLUMN, TableId, paimon_name_problem
from lakecdc.transform.functions.strings import base64_encode
from lakecdc.transform.types import (decimal_to_float, family, flink_name, integer_decimal, java_to_string,
                                     precision_of, to_wall_clock)

_DOT = "\x00dot\x00"


def route_regex(pattern: str) -> str:
    """TableIdRouter.convertTableListToRegExpPattern."""
    alternatives = "|".join(part.strip() for part in pattern.split(","))
    return alternatives.replace("\\.", _DOT).replace(".", "\\.").replace(_DOT, ".")


def _java_replacement(template: str) -> list[str | int]:
    """A java.util.regex replacement: ``$n`` group references, ``\\x`` a literal x."""
    parts: list[str | int] = []
    text: list[str] = []
    i = 0
    while i < len(template):
        ch = template[i]
        if ch == "\\" and i + 1 < len(template):
            text.append(template[i + 1])
            i += 2
            continue
        if ch == "$":
            j = i + 1
            while j < len(template) and template[j].isdigit():
                j += 1
            if j == i + 1:
                raise ValueError(f"illegal group reference in {template!r}")
            if text:
                parts.append("".join(text))
                text = []
            parts.append(int(template[i + 1:j]))
            i = j
            continue
        text.append(ch)
        i += 1
    if text:
        parts.append("".join(text))
    return parts


@dataclass
class CompiledRoute:
    index: int
    regex: re.Pattern
    sink_table: str
    replace_symbol: str | None
    replacement: list

    def matches(self, source: TableId) -> bool:
        return self.regex.fullmatch(str(source)) is not None

    def target_text(self, source: TableId) -> str:
        if self.replace_symbol is not None:
            return self.sink_table.replace(self.replace_symbol, source.table)

        def expand(match: re.Match) -> str:
            return "".join(p if isinstance(p, str) else (match.group(p) or "") for p in self.replacement)
        # Matcher.replaceAll on the whole id (the pattern matches all of it; an empty match may follow, as in Java)
        return self.regex.sub(expand, str(source))


class Router:
    """Maps a source table to its sink tables."""

    def __init__(self, routes: list, *, mode: str = "ALL_MATCH", file: str | None = None):
        self.mode = mode.upper()
        self.file = file
        self.routes: list[CompiledRoute] = []
        for route in routes:
            path = f"route[{route.index}]"
            try:
                regex = re.compile(route_regex(route.source_table))
            except re.error as exc:
                raise PipelineConfigError(
                    f"invalid table pattern {route.source_table!r}: {exc} (a '.' separates database and table; "
                    "write '\\.' for the regex any-character)", file=file, path=f"{path}.source-table") from None
            try:
                replacement = _java_replacement(route.sink_table) if route.replace_symbol is None else []
            except ValueError as exc:
                raise PipelineConfigError(str(exc), file=file, path=f"{path}.sink-table") from None
            for part in replacement:
                if isinstance(part, int) and part > regex.groups:
                    raise PipelineConfigError(f"sink-table refers to group ${part} but the source-table pattern "
                                              f"has {regex.groups} group(s)", file=file, path=f"{path}.sink-table")
            self.routes.append(CompiledRoute(route.index, regex, route.sink_table, route.replace_symbol,
                                             replacement))

    def targets(self, source: TableId) -> list[TableId]:
        found: list[TableId] = []
        for route in self.routes:
            if not route.matches(source):
                continue
            text = route.target_text(source)
            try:
                target = TableId.parse(text)
            except ValueError:
                raise PipelineConfigError(f"table {source} is routed to {text!r}, which is not 'database.table'",
                                          file=self.file, path=f"route[{route.index}].sink-table") from None
            if target.table.count(".") or not target.database:
                raise PipelineConfigError(f"table {source} is routed to {text!r}, which is not 'database.table'",
                                          file=self.file, path=f"route[{route.index}].sink-table")
            if target not in found:
                found.append(target)
            if self.mode == "FIRST_MATCH":
                break
        for target in found or [source]:
            self._check_name(source, target)
        return found or [source]

    def _check_name(self, source: TableId, target: TableId) -> None:
        """A MySQL name Paimon cannot take (``../x``, ``a.b``, ``t$1``, ...) is refused before anything is written,
        so no table path can leave its database directory; a route gives such a table a plain name."""
        problem = paimon_name_problem(target)
        if problem:
            raise PipelineConfigError(
                f"table {source} would land in the Paimon table {target.database!r}.{target.table!r}, but {problem}: "
                f"Paimon names cannot hold path separators, dots, backticks, '$' or control characters. Route it to "
                f"a plain name (route: - source-table: {source.database}.<regex> / sink-table: "
                f"<database>.<table>) or exclude it with tables.exclude", file=self.file, path="route")


# ---------------------------------------------------------------------------------------- schema merging

_TREE = {
    "string": ["string"],
    "boolean": ["string"],
    "binary": ["string"],
    "float64": ["float64", "string"],
    "float32": ["float32", "float64", "string"],
    "decimal": ["string"],
    "int64": ["int64", "decimal", "float64", "string"],
    "int32": ["int32", "int64", "decimal", "float64", "string"],
    "int16": ["int16", "int32", "int64", "decimal", "float32", "float64", "string"],
    "int8": ["int8", "int16", "int32", "int64", "decimal", "float32", "float64", "string"],
    "timestamp_ltz": ["timestamp_ltz", "string"],
    "timestamp": ["timestamp", "timestamp_ltz", "string"],
    "date": ["date", "timestamp", "timestamp_ltz", "string"],
    "time": ["string"],
}
_TREE_TYPES = {"string": pa.string(), "float64": pa.float64(), "float32": pa.float32(),
               "decimal": pa.decimal128(38, 0), "int64": pa.int64(), "int32": pa.int32(), "int16": pa.int16(),
               "int8": pa.int8(), "timestamp_ltz": pa.timestamp("ns", tz="UTC"), "timestamp": pa.timestamp("ns"),
               "date": pa.date32()}


def _tree_key(t: pa.DataType) -> str:
    kind = family(t)
    if kind == "numeric":
        if pa.types.is_decimal(t):
            return "decimal"
        if pa.types.is_floating(t):
            return "float32" if pa.types.is_float32(t) else "float64"
        return str(t)
    if kind in _TREE:
        return kind
    return "complex"


def merge_types(current: pa.DataType, target: pa.DataType) -> pa.DataType:
    """SchemaMergingUtils.getLeastCommonType (without nullability, handled by the caller)."""
    if current == target:
        return current
    cf, tf = family(current), family(target)
    if cf in ("timestamp", "timestamp_ltz") and tf in ("timestamp", "timestamp_ltz"):
        unit = current.unit if precision_of(current) >= precision_of(target) else target.unit
        return pa.timestamp(unit, tz="UTC" if "timestamp_ltz" in (cf, tf) else None)
    if pa.types.is_decimal(current) or pa.types.is_decimal(target):
        return _merge_decimal(current, target)
    current_tree = _TREE.get(_tree_key(current), ["string"])
    target_tree = _TREE.get(_tree_key(target), ["string"])
    for key in current_tree:
        if key in target_tree:
            if key in ("timestamp", "timestamp_ltz"):  # the tree's TIMESTAMP types have the maximum precision
                return pa.timestamp("us", tz="UTC" if key == "timestamp_ltz" else None)
            return _TREE_TYPES[key]
    return pa.string()


def _merge_decimal(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    if pa.types.is_decimal(a) and pa.types.is_decimal(b):
        digits = max(a.precision - a.scale, b.precision - b.scale)
        scale = max(a.scale, b.scale)
        if digits + scale > 38:
            raise ValueError(f"Failed to merge {flink_name(a)} and {flink_name(b)} into a DECIMAL: "
                             f"{digits + scale} digits required, 38 available")
        return pa.decimal128(digits + scale, scale)
    dec, other = (a, b) if pa.types.is_decimal(a) else (b, a)
    if pa.types.is_integer(other):
        precision = max(dec.precision, dec.scale + integer_decimal(other).precision)
        return pa.decimal128(precision, dec.scale) if precision <= 38 else pa.string()
    return pa.string()


def merge_schemas(schemas: list[tuple[str, pa.Schema]], primary_keys: list[str], *, file: str | None,
                  target: TableId) -> pa.Schema:
    """The widest common schema of the ``(source name, schema)`` list, in order (getLeastCommonSchema)."""
    merged: dict[str, pa.Field] = {}
    order: list[str] = []
    present: dict[str, int] = {}
    for _source_name, schema in schemas:
        for f in schema:
            present[f.name] = present.get(f.name, 0) + 1
            if f.name not in merged:
                merged[f.name] = f
                order.append(f.name)
                continue
            current = merged[f.name]
            try:
                dtype = merge_types(current.type, f.type)
            except ValueError as exc:
                raise PipelineConfigError(f"tables routed into {target}: column {f.name!r}: {exc}", file=file,
                                          path="route") from None
            merged[f.name] = pa.field(f.name, dtype, nullable=current.nullable or f.nullable)
    for key in primary_keys:
        if present.get(key, 0) != len(schemas):
            missing = [name for name, schema in schemas if key not in schema.names]
            raise PipelineConfigError(f"tables routed into {target}: primary key column {key!r} is missing from "
                                      f"{', '.join(missing)}; every merged table needs the primary key columns",
                                      file=file, path="route")
    fields = []
    for name in order:
        f = merged[name]
        if present[name] != len(schemas) and name not in primary_keys:
            f = f.with_nullable(True)  # rows of the sources without this column carry NULL
        fields.append(f)
    return pa.schema(fields)


# ---------------------------------------------------------------------------------------------- coercion

def coerce_table(table: pa.Table, target: pa.Schema, zone: str, extra: list[str]) -> pa.Table:
    """Rows of one source as rows of the merged schema: by column name, widened as SchemaMergingUtils.coerceRow
    does, missing columns NULL. ``extra`` are system columns (the row kind) kept at the end."""
    columns, fields = [], []
    for f in target:
        if f.name in table.column_names:
            columns.append(coerce_array(table.column(f.name).combine_chunks(), f.type, zone))
        else:
            columns.append(pa.nulls(table.num_rows, f.type))
        fields.append(f)
    for name in extra:
        columns.append(table.column(name))
        fields.append(table.schema.field(name))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def coerce_array(arr: pa.Array, target: pa.DataType, zone: str) -> pa.Array:
    """One column into the merged type (coerceObject)."""
    source = arr.type
    if source == target:
        return arr
    kind, target_kind = family(source), family(target)
    if target_kind == "string":
        if kind == "binary":
            return base64_encode(arr)  # SchemaMergingUtils "hexlify" is base64
        return java_to_string(arr, zone)
    if target_kind == "numeric":
        if pa.types.is_floating(target) and pa.types.is_decimal(source):
            return decimal_to_float(arr, target)
        return arr.cast(target)
    if target_kind == "timestamp":
        if kind == "timestamp_ltz":
            return to_wall_clock(arr, zone).cast(target)
        return arr.cast(pa.timestamp("s")).cast(target) if kind == "date" else arr.cast(target)
    if target_kind == "timestamp_ltz":
        if kind == "timestamp":
            # coerceToLocalZonedTimestamp takes the wall clock's epoch value as the instant (no zone shift)
            return arr.cast(pa.timestamp(source.unit, tz="UTC")).cast(target)
        if kind == "date":
            return arr.cast(pa.timestamp("s")).cast(pa.timestamp("s", tz="UTC")).cast(target)
        return arr.cast(target)
    return pc.cast(arr, target)


class CoercedTransform:
    """A compiled transform whose rows are coerced into the merged schema of the Paimon table it is routed into;
    everything else is the wrapped transform's."""

    def __init__(self, inner, schema: pa.Schema, zone: str):
        self._inner = inner
        self.output_schema = schema
        self._zone = zone

    def apply(self, batch) -> pa.Table:
        return coerce_table(self._inner.apply(batch), self.output_schema, self._zone, [OP_COLUMN])

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def __repr__(self) -> str:
        return f"CoercedTransform({self._inner!r} → {self.output_schema.names})"
