"""Collections and JSON: ``ARRAY[...]``, ``MAP[...]``, ``ROW(...)``, ``x[i]`` / ``m[k]`` / ``v[i|k]``,
``CARDINALITY``, ``ARRAY_CONTAINS``, ``ARRAY_POSITION``, ``ELEMENT``, ``PARSE_JSON``, ``TRY_PARSE_JSON``.

Arrays are 1-based; an index out of range or a missing key gives NULL. A VARIANT (PARSE_JSON) is kept as
normalised JSON text inside expressions (indexed, CAST to STRING, compared by filters); a VARIANT output column is
written to Paimon in the Variant binary encoding (lakecdc.transform.types.variant_to_storage).
"""

from __future__ import annotations

import decimal
import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.errors import ExpressionError
from lakecdc.transform.functions.base import (Site, as_string, data_error, fam, first_value, function,
                                              is_null_literal, null_of, require, where_null, with_scalars)
from lakecdc.transform.functions.comparison import comparable, comparison_type
from lakecdc.transform.nodes import Call, Node
from lakecdc.transform.types import (VARIANT, calcite_type, common_numeric, common_type, conform, declared_element,
                                     element_decl, family, flink_name, java_to_string, json_fraction, nested_decl,
                                     nested_decls, variant_array, variant_json)


# ------------------------------------------------------------------------------------------- constructors

@function("ARRAY", min_args=1, max_args=None)
def _array(args, site):
    # NULL only while validating without a schema
    element = common_type([a.dtype for a in args], "ARRAY", site.max_precision)
    element = declared_element([(a.dtype, a.decl) for a in args], element)
    out = pa.list_(element)
    decl = element_decl([(a.dtype, a.decl) for a in args], element)

    def run(env, xs):
        n = env.num_rows
        columns = [conform(x, element) for x in xs]
        values = pa.concat_arrays(columns)
        # row r takes element r of every column: interleave with a take
        order = (np.arange(len(columns))[None, :] * n + np.arange(n)[:, None]).reshape(-1)
        flat = values.take(pa.array(order))
        offsets = pa.array(np.arange(0, n * len(columns) + 1, len(columns), dtype=np.int32))
        return pa.ListArray.from_arrays(offsets, flat, type=out)
    call = Call(run, args, out, site.sql)
    call.decl = f"ARRAY<{decl}>" if decl else None
    return call


@function("MAP", min_args=2, max_args=None)
def _map(args, site):
    if len(args) % 2:
        raise ExpressionError(f"MAP[...] needs key/value pairs, got {len(args)} values")
    keys, values = args[0::2], args[1::2]
    if all(k.is_const for k in keys):
        # A repeated literal key keeps its first place and its last value (Java's Map.put, as Flink CDC).
        last = {}
        for k, v in zip(keys, values):
            last[k.const] = v
        keys = [next(k for k in keys if k.const == key) for key in last]
        values = list(last.values())
        args = [x for pair in zip(keys, values) for x in pair]
    key_type = declared_element([(k.dtype, k.decl) for k in keys],
                                common_type([k.dtype for k in keys], "MAP keys", site.max_precision))
    value_type = declared_element([(v.dtype, v.decl) for v in values],
                                  common_type([v.dtype for v in values], "MAP values", site.max_precision))
    out = pa.map_(pa.string() if pa.types.is_null(key_type) else key_type, value_type)

    def run(env, xs):
        n = env.num_rows
        pairs = len(keys)
        key_cols = [conform(x, out.key_type) for x in xs[0::2]]
        value_cols = [conform(x, value_type) for x in xs[1::2]]
        order = pa.array((np.arange(pairs)[None, :] * n + np.arange(n)[:, None]).reshape(-1))
        flat_keys = pa.concat_arrays(key_cols).take(order)
        flat_values = pa.concat_arrays(value_cols).take(order)
        offsets = pa.array(np.arange(0, n * pairs + 1, pairs, dtype=np.int32))
        return pa.MapArray.from_arrays(offsets, flat_keys, flat_values, type=out)
    call = Call(run, args, out, site.sql)
    key_decl = element_decl([(k.dtype, k.decl) for k in keys], out.key_type)
    value_decl = element_decl([(v.dtype, v.decl) for v in values], value_type)
    if key_decl or value_decl:
        call.decl = f"MAP<{key_decl or flink_name(out.key_type)}, {value_decl or flink_name(value_type)}>"
    return call


@function("ROW", min_args=1, max_args=None)
def _row(args, site):
    """ROW(a, b, ...) with fields f0, f1, ..."""
    fields = [pa.field(f"f{i}", declared_element([(a.dtype, a.decl)], calcite_type(a.dtype, site.max_precision))
                       if not pa.types.is_null(a.dtype) else pa.string()) for i, a in enumerate(args)]
    out = pa.struct(fields)

    def run(env, xs):
        return pa.StructArray.from_arrays([conform(x, f.type) for x, f in zip(xs, fields)], fields=fields)
    call = Call(run, args, out, site.sql)
    decls = [element_decl([(a.dtype, a.decl)], f.type) for a, f in zip(args, fields)]
    if any(decls):
        call.decl = "ROW<" + ", ".join(f"{f.name} {d or flink_name(f.type)}" for f, d in zip(fields, decls)) + ">"
    return call


# ---------------------------------------------------------------------------------------------- item access

def item(container: Node, key: Node, site: Site) -> Node:
    """``container[key]``: arrays and rows by 1-based position, maps and variants by key or position."""
    kind = fam(container)
    if kind == "array":
        require(key, ("numeric",), "array index")
        element = container.dtype.value_type

        def run_array(env, xs, values):
            index = int(values[0])
            arr = xs[0]
            lengths = pc.fill_null(pc.list_value_length(arr), 0)
            inside = pc.and_(pc.greater_equal(pa.scalar(index, pa.int64()), 1),
                             pc.less_equal(pa.scalar(index, pa.int64()), lengths.cast(pa.int64())))
            if index < 1 or not pc.any(inside).as_py():
                return pa.nulls(len(arr), element)
            safe = pc.if_else(inside, arr, pa.scalar([None] * index, arr.type)) if index > 0 else arr
            return where_null(pc.invert(inside), pc.list_element(safe, index - 1))
        node = with_scalars([container, key], (1,), run_array, element, site)
        node.decl = nested_decl(container.decl, 0)  # ARRAY<VARBINARY(50)>[1] is VARBINARY(50)
        return node
    if kind == "map":
        value_type = container.dtype.item_type
        comparison_type(_typed(container.dtype.key_type), key, "[]")

        def run_map(env, xs, values):
            found = pc.map_lookup(xs[0], pa.scalar(values[0], container.dtype.key_type), "first")
            return found
        node = with_scalars([container, key], (1,), run_map, value_type, site)
        node.decl = nested_decl(container.decl, 1)
        return node
    if kind == "row":
        require(key, ("numeric",), "ROW field position")
        if not key.is_const:
            raise ExpressionError(f"a ROW field position must be a literal: {site.sql}")
        position = int(key.const)
        if not 1 <= position <= container.dtype.num_fields:
            raise ExpressionError(f"Cannot infer type of field at position {position} within ROW type "
                                  f"{flink_name(container.dtype)}: positions are 1 to "
                                  f"{container.dtype.num_fields} ({site.sql})")
        field = container.dtype.field(position - 1)
        node = Call(lambda env, xs: pc.struct_field(xs[0], [position - 1]), [container], field.type, site.sql)
        fields = nested_decls(container.decl)
        node.decl = fields[position - 1] if fields and len(fields) == container.dtype.num_fields else None
        return node
    if kind == "variant":
        require(key, ("numeric", "string"), "VARIANT index")

        def run_variant(env, xs, values):
            return variant_item(xs[0], values[0])
        return with_scalars([container, key], (1,), run_variant, VARIANT, site)
    if kind == "null":  # NULL, or an untyped column while validating without a schema: keep it untyped, so a
        return null_of(pa.null(), site)  # chained subscript (m['k'][1]) type-checks too
    raise ExpressionError(f"{flink_name(container.dtype)} cannot be indexed with [] ({site.sql})")


class _TypedProbe(Node):
    def __init__(self, dtype: pa.DataType):
        self.dtype = dtype
        self.sql = flink_name(dtype)


def _typed(dtype: pa.DataType) -> Node:
    return _TypedProbe(dtype)


def variant_item(arr: pa.Array, key) -> pa.Array:
    """Object member / 1-based array element of JSON values (per row: Arrow has no JSON kernels; VARIANT values
    come from PARSE_JSON, which is per row for the same reason)."""
    out: list[str | None] = []
    for text in arr.storage.to_pylist():
        if text is None:
            out.append(None)
            continue
        value = json.loads(text, parse_float=json_fraction)
        picked = None
        if isinstance(key, str) and isinstance(value, dict):
            picked = value.get(key)
        elif isinstance(key, int) and not isinstance(key, bool) and isinstance(value, list) and \
                1 <= key <= len(value):
            picked = value[key - 1]
        out.append(None if picked is None else _normal_json(picked))
    return variant_array(pa.array(out, pa.string()))


# ------------------------------------------------------------------------------------- collection functions

@function("CARDINALITY")
def _cardinality(args, site):
    require(args[0], ("array", "map"), "CARDINALITY")

    def run(env, xs):
        arr = xs[0]
        if isinstance(arr, pa.MapArray):  # a map's entries are a list of key/value structs
            arr = pa.ListArray.from_arrays(arr.offsets, pa.nulls(len(arr.keys), pa.null()), mask=arr.is_null())
        return pc.list_value_length(arr).cast(pa.int32())
    return Call(run, args, pa.int32(), site.sql)


_NESTED = ("array", "map", "row")


def _java_value_equals(left, right) -> bool:
    """Flink CDC's StructFunctions.valueEquals on Python values of ARRAY/MAP/ROW elements: numbers by value
    (numberEquals), lists and rows element by element, maps by entries whatever their order."""
    if left is None or right is None:
        return left is None and right is None
    if isinstance(left, (int, float, decimal.Decimal)) and not isinstance(left, bool) and \
            isinstance(right, (int, float, decimal.Decimal)) and not isinstance(right, bool):
        if isinstance(left, float) or isinstance(right, float):
            return float(left) == float(right) or (left != left and right != right)
        return decimal.Decimal(left) == decimal.Decimal(right)
    if isinstance(left, dict) and isinstance(right, dict):  # a ROW
        left, right = list(left.values()), list(right.values())
    if isinstance(left, list) and isinstance(right, list):
        if left and isinstance(left[0], tuple) or right and isinstance(right[0], tuple):  # MAP entries
            return len(left) == len(right) and all(
                any(_java_value_equals(k, k2) and _java_value_equals(v, v2) for k2, v2 in right) for k, v in left)
        return len(left) == len(right) and all(_java_value_equals(a, b) for a, b in zip(left, right))
    return type(left) is type(right) and left == right


def _element_equal(arr: pa.Array, needle) -> pa.Array:
    """Per list element: equals the needle (NULL elements never match)."""
    values = pc.list_flatten(arr)
    parents = pc.list_parent_indices(arr)
    if family(values.type) in _NESTED:
        # nested elements compare recursively (valueEquals); per element, as ARRAY_CONTAINS of arrays is rare
        hits = pa.array([v is not None and _java_value_equals(v, needle) for v in values.to_pylist()], pa.bool_())
        return values, parents, hits
    if family(values.type) == "numeric" and not isinstance(needle, (str, bytes, bool)):
        # by value, as the comparisons: 1.5 is not the INT 1, 3000000000 is no INT at all
        needles = pa.array([needle] * len(values))
        left, right = comparable(values, needles, common_numeric(values.type, needles.type))
        return values, parents, pc.fill_null(pc.equal(left, right), False)
    hits = pc.fill_null(pc.equal(values, pa.scalar(needle, values.type)), False)
    return values, parents, hits


def _check_needle(args: list[Node], name: str) -> None:
    """The needle must be comparable with the elements: an ARRAY, MAP or ROW element with a value of the same kind
    (compared recursively at run time), any other element as the comparisons require."""
    if fam(args[0]) != "array" or pa.types.is_null(args[0].dtype.value_type):
        return
    element = _typed(args[0].dtype.value_type)
    if fam(element) in _NESTED or fam(args[1]) in _NESTED:
        if fam(args[1]) not in (fam(element), "null"):
            raise ExpressionError(f"cannot compare {flink_name(element.dtype)} with {flink_name(args[1].dtype)} in "
                                  f"{name}({args[0].sql}, {args[1].sql})")
        return
    comparison_type(element, args[1], name)


@function("ARRAY_CONTAINS", min_args=2, max_args=2)
def _array_contains(args, site):
    require(args[0], ("array",), "ARRAY_CONTAINS")
    _check_needle(args, "ARRAY_CONTAINS")

    def run(env, xs, values):
        arr = xs[0]
        if values[0] is None:  # Flink CDC's valueEquals(null, null): a NULL element matches a NULL needle
            values_ = pc.list_flatten(arr)
            parents = pc.list_parent_indices(arr)
            hits = pc.is_null(values_)
        else:
            _, parents, hits = _element_equal(arr, values[0])
        counts = np.bincount(parents.to_numpy(zero_copy_only=False)[hits.to_numpy(zero_copy_only=False)],
                             minlength=len(arr))
        return where_null(pc.is_null(arr), pa.array(counts > 0))
    return with_scalars(args, (1,), run, pa.bool_(), site, null_if_scalar_null=False)


@function("ARRAY_POSITION", min_args=2, max_args=2)
def _array_position(args, site):
    """1-based position of the first equal element, 0 when absent."""
    require(args[0], ("array",), "ARRAY_POSITION")
    _check_needle(args, "ARRAY_POSITION")

    def run(env, xs, values):
        arr = xs[0]
        _, parents, hits = _element_equal(arr, values[0])
        parent = parents.to_numpy(zero_copy_only=False)
        hit = hits.to_numpy(zero_copy_only=False)
        offsets = arr.offsets.to_numpy(zero_copy_only=False)[:-1] - arr.offsets[0].as_py()
        positions = np.zeros(len(arr), dtype=np.int64)
        rows, first = np.unique(parent[hit], return_index=True)  # first hit of each row, in element order
        positions[rows] = np.arange(len(parent))[hit][first] - offsets[rows] + 1
        return where_null(pc.is_null(arr), pa.array(positions).cast(pa.int32()))
    return with_scalars(args, (1,), run, pa.int32(), site)


@function("ELEMENT")
def _element(args, site):
    """The only element of an array; NULL for an empty array; more than one element fails the batch."""
    require(args[0], ("array",), "ELEMENT")
    element = args[0].dtype.value_type if fam(args[0]) == "array" else pa.string()

    def run(env, xs):
        arr = xs[0]
        lengths = pc.fill_null(pc.list_value_length(arr), 0)
        many = pc.greater(lengths, 1)
        if pc.any(many).as_py():
            raise data_error(site, "ELEMENT of an array with more than one element", first_value(arr, many))
        one = pc.equal(lengths, 1)
        safe = pc.if_else(one, arr, pa.scalar([None], arr.type))
        return where_null(pc.invert(one), pc.list_element(safe, 0))
    node = Call(run, args, element, site.sql)
    node.decl = nested_decl(args[0].decl, 0)
    return node


# ---------------------------------------------------------------------------------------------------- JSON

class _DuplicateKey(ValueError):
    pass


def _pairs_no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise _DuplicateKey("duplicate key")
    return dict(pairs)


def _normal_json(value) -> str:
    return variant_json(value)


def parse_json_column(arr: pa.Array, allow_duplicates: bool, strict: bool, site: Site) -> pa.Array:
    """JSON text → VARIANT (normalised JSON); NULL or '' → NULL. Invalid JSON fails the batch (PARSE_JSON) or
    gives NULL (TRY_PARSE_JSON). Per row: Arrow has no JSON kernel for a column of documents."""
    hook = None if allow_duplicates else _pairs_no_duplicates
    out: list[str | None] = []
    for text in (as_string(arr) if family(arr.type) in ("string", "null") else java_to_string(arr)).to_pylist():
        if text is None or text == "":
            out.append(None)
            continue
        try:
            # numbers with a fraction stay decimals (2.50 keeps its scale), as Flink CDC's Variant keeps them
            out.append(_normal_json(json.loads(text, object_pairs_hook=hook, parse_float=json_fraction)))
        except (ValueError, RecursionError):
            if strict:
                raise data_error(site, "Failed to parse json string", text) from None
            out.append(None)
    return variant_array(pa.array(out, pa.string()))


def _parse_json(strict: bool):
    def build(args, site):
        # Flink CDC also parses the text of a number or boolean (PARSE_JSON(id) → the JSON number)
        require(args[0], ("string", "numeric", "boolean"), "PARSE_JSON")
        if len(args) > 1:
            require(args[1], ("boolean",), "PARSE_JSON allowDuplicateKeys")
        if is_null_literal(args[0]):
            return null_of(VARIANT, site)

        def run(env, xs, values):
            allow = bool(values[0]) if values else False
            return parse_json_column(xs[0], allow, strict, site)
        return with_scalars(args, tuple(range(1, len(args))), run, VARIANT, site, null_if_scalar_null=False)
    return build


function("PARSE_JSON", min_args=1, max_args=2)(_parse_json(True))
function("TRY_PARSE_JSON", min_args=1, max_args=2)(_parse_json(False))
