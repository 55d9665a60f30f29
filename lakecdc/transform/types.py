"""Type helpers of the transform layer: Arrow types as Flink CDC types, Calcite's result types, Java-style text,
time zones.

Flink CDC type ↔ Arrow type used here: BOOLEAN bool, TINYINT int8, SMALLINT int16, INT int32, BIGINT int64,
FLOAT float32, DOUBLE float64, DECIMAL(p,s) decimal128(p,s), CHAR/VARCHAR/STRING string, DATE date32,
TIME time32/time64, TIMESTAMP(p) naive timestamp, TIMESTAMP_LTZ(p) tz-aware timestamp (an instant),
BINARY/VARBINARY/BYTES binary, ARRAY list, MAP map, ROW struct, VARIANT ``VARIANT`` (an extension type holding
JSON text; an output column is Paimon's Variant encoding, ``VARIANT_STORAGE``). The NULL literal has Arrow type
``null``. The Arrow type is the type of the values; where the declared type says more (a precision, a length) a
node's ``decl`` and an output field's ``DECLARED_TYPE_KEY`` carry it (see "declared types" below).
"""

from __future__ import annotations

import decimal
import json
import os
import re
import struct
import zoneinfo

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.errors import ExpressionError
from lakecdc.model import DECLARED_TYPE_KEY

INT_TYPES = (pa.int8(), pa.int16(), pa.int32(), pa.int64())
_INT_RANK = {t: i for i, t in enumerate(INT_TYPES)}
_INT_DIGITS = {pa.int8(): 3, pa.int16(): 5, pa.int32(): 10, pa.int64(): 19}


class VariantType(pa.ExtensionType):
    """Flink CDC's VARIANT (PARSE_JSON results), stored as normalised JSON text."""

    def __init__(self):
        super().__init__(pa.string(), "lakecdc.variant")

    def __arrow_ext_serialize__(self) -> bytes:
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type, serialized):
        return cls()


VARIANT = VariantType()
try:
    pa.register_extension_type(VARIANT)
except pa.ArrowKeyError:  # already registered (module reloaded)
    pass


def variant_array(storage: pa.Array) -> pa.Array:
    return pa.ExtensionArray.from_storage(VARIANT, storage.cast(pa.string()))


# A VARIANT output column as Paimon stores it (and pypaimon / pypaimon-rust read it): the Variant binary encoding
# (Parquet's, Paimon's GenericVariant) in two byte arrays. Inside expressions a VARIANT stays normalised JSON text.
VARIANT_STORAGE = pa.struct([pa.field("value", pa.binary(), nullable=False),
                             pa.field("metadata", pa.binary(), nullable=False)])


def variant_field(name: str, nullable: bool = True) -> pa.Field:
    """A VARIANT output column (its declared type says VARIANT; pypaimon recognises the struct)."""
    return pa.field(name, VARIANT_STORAGE, nullable=nullable, metadata={DECLARED_TYPE_KEY: b"VARIANT"})


def is_variant_field(f: pa.Field) -> bool:
    return f.type == VARIANT_STORAGE and (f.metadata or {}).get(DECLARED_TYPE_KEY) == b"VARIANT"


def variant_to_storage(arr: pa.Array) -> pa.Array:
    """VARIANT values (JSON text) in Paimon's Variant encoding. JSON numbers with a fraction become Variant
    decimals when they fit 38 digits, else doubles, integers the smallest integer type (as Flink CDC's
    VariantBuilder parses JSON). Per row, with pypaimon's GenericVariant: Arrow has no Variant kernel, and the JSON
    these values come from (PARSE_JSON) is parsed per row already; each distinct text is encoded once."""
    from pypaimon.data.generic_variant import GenericVariant  # pypaimon's encoder (Paimon's GenericVariant port)

    encoded = arr.storage.dictionary_encode()
    rows = []
    for text in encoded.dictionary.to_pylist():
        variant = GenericVariant.from_python(json.loads(text, parse_float=json_fraction))
        rows.append({"value": variant.value(), "metadata": variant.metadata()})
    return pa.array(rows, VARIANT_STORAGE).take(encoded.indices)


def json_fraction(text: str) -> decimal.Decimal | float:
    """A JSON number with a fraction or an exponent as Flink CDC's VariantBuilder keeps it: a decimal when written
    without an exponent (``2.50`` keeps its scale), else a double."""
    return float(text) if "e" in text or "E" in text else decimal.Decimal(text)


def variant_from_storage(arr: pa.Array) -> pa.Array:
    """Paimon's Variant encoding back as VARIANT values (normalised JSON text): the inverse of
    ``variant_to_storage``, for reading a VARIANT column written by lakecdc."""
    from pypaimon.data.generic_variant import GenericVariant

    texts = [None if row is None else variant_json(GenericVariant.from_arrow_struct(row).to_python())
             for row in arr.to_pylist()]
    return variant_array(pa.array(texts, pa.string()))


def variant_json(value) -> str:
    """Compact JSON with sorted keys, decimals as written (the text a Variant prints)."""
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + variant_json(value[k])
                              for k in sorted(value)) + "}"
    if isinstance(value, list):
        return "[" + ",".join(variant_json(v) for v in value) + "]"
    if isinstance(value, decimal.Decimal):
        sign, digits, exponent = value.as_tuple()
        if isinstance(exponent, int) and exponent <= 0 and len(digits) <= 38:
            return format(value, "f")  # a Variant decimal (38 digits at most)
        return json.dumps(float(value))  # beyond: a double, as Flink CDC's VariantBuilder
    return json.dumps(value, ensure_ascii=False)


def family(t: pa.DataType) -> str:
    """The comparison/coercion family of a type."""
    if isinstance(t, VariantType):
        return "variant"
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
    if pa.types.is_map(t):
        return "map"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return "array"
    if pa.types.is_struct(t):
        return "row"
    if pa.types.is_interval(t):
        return "interval"
    return str(t)


def precision_of(t: pa.DataType) -> int:
    """Fractional-second digits of a TIME / TIMESTAMP type."""
    return {"s": 0, "ms": 3, "us": 6, "ns": 9}[t.unit]


def unit_for_precision(precision: int) -> str:
    return "s" if precision == 0 else "ms" if precision <= 3 else "us" if precision <= 6 else "ns"


def flink_name(t: pa.DataType) -> str:
    """The Flink CDC spelling of a type, for error messages."""
    if isinstance(t, VariantType):
        return "VARIANT"
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
        return f"TIMESTAMP_LTZ({precision_of(t)})" if t.tz else f"TIMESTAMP({precision_of(t)})"
    if pa.types.is_date(t):
        return "DATE"
    if pa.types.is_time(t):
        return f"TIME({precision_of(t)})"
    if pa.types.is_fixed_size_binary(t):
        return f"BINARY({t.byte_width})"
    if family(t) == "binary":
        return "BYTES"  # VARBINARY(2147483647), Paimon's BYTES
    if pa.types.is_map(t):
        return f"MAP<{flink_name(t.key_type)}, {flink_name(t.item_type)}>"
    if family(t) == "array":
        return f"ARRAY<{flink_name(t.value_type)}>"
    if pa.types.is_struct(t):
        return "ROW<" + ", ".join(f"{f.name} {flink_name(f.type)}" for f in t) + ">"
    return str(t).upper()


def type_name(column: pa.DataType | pa.Field) -> str:
    """The Paimon/Flink SQL spelling of a column's type, as ``SHOW CREATE TABLE`` (``lakecdc describe``) prints it
    without nullability: a field's declared sized type (``VARCHAR(100)``, which Arrow's string type cannot carry)
    when it has one, else the spelling of its Arrow type (``TIMESTAMP(3)``, ``DECIMAL(10, 2)``)."""
    if isinstance(column, pa.Field):
        declared = (column.metadata or {}).get(DECLARED_TYPE_KEY)
        if declared:
            return declared.decode()
        column = column.type
    return flink_name(column)


# ------------------------------------------------------------------------------------------- declared types
#
# A node's Arrow type is the type of its values; its declared type (the Paimon column type of an output column) is
# Calcite's, which Arrow cannot always say: a TIMESTAMP(3) whose values keep nanoseconds (Flink CDC's TimestampData
# holds them whatever the precision), BINARY(n)/VARBINARY(n) lengths, a TINYINT product computed as a Java int.
# ``Node.decl`` holds that text when it differs from what the Arrow type says.
#
# Calcite's type system (RelDataTypeSystemImpl of Calcite 1.32, which Flink CDC's FlinkCdcTypeSystem extends only for
# DECIMAL) caps every type it creates: TIME/TIMESTAMP/TIMESTAMP_LTZ at precision 3, BINARY/VARBINARY at 65536
# bytes (BYTES is VARBINARY(65536) inside an expression), and a CAST to TIMESTAMP without precision is TIMESTAMP(0).
# A column forwarded bare (``col`` or ``col AS alias``) keeps its own type; every computed column has the capped one.

MAX_DATETIME_PRECISION = 3
MAX_BINARY_LENGTH = 65536
_TEMPORAL_DECL = re.compile(r"^(TIMESTAMP_LTZ|TIMESTAMP|TIME)\((\d)\)$")
_BINARY_DECL = re.compile(r"^(VARBINARY|BINARY)\((\d+)\)$")
_NESTED_TEMPORAL = re.compile(r"\b(TIMESTAMP_LTZ|TIMESTAMP|TIME)\((\d)\)")
_NESTED_BINARY = re.compile(r"\b(VARBINARY|BINARY)\((\d+)\)")
_NESTED_BYTES = re.compile(r"\bBYTES\b")
_INT_DECL = {"TINYINT": pa.int8(), "SMALLINT": pa.int16(), "INT": pa.int32(), "BIGINT": pa.int64()}


def decl_for(dtype: pa.DataType, text: str | None) -> str | None:
    """The part of a declared type text (a source column's ``DECLARED_TYPE_KEY``) that matters to Calcite's type of
    an expression: a temporal precision or a binary length (CHAR/VARCHAR(n) results are STRING anyway)."""
    if text is None or family(dtype) not in ("timestamp", "timestamp_ltz", "time", "binary"):
        return None
    return text if _TEMPORAL_DECL.match(text) or _BINARY_DECL.match(text) else None


def declared_name(dtype: pa.DataType, decl: str | None) -> str:
    """A node's declared type as Flink CDC spells it (without nullability)."""
    return decl or flink_name(dtype)


def calcite_name(dtype: pa.DataType, decl: str | None) -> str:
    """The type Calcite gives an operand: the declared type with Calcite's caps (see above)."""
    name = declared_name(dtype, decl)
    # also the element, key, value and field types of ARRAY/MAP/ROW (ARRAY[ts_9] is ARRAY<TIMESTAMP(3)>)
    name = _NESTED_TEMPORAL.sub(lambda m: f"{m.group(1)}({min(int(m.group(2)), MAX_DATETIME_PRECISION)})", name)
    name = _NESTED_BYTES.sub(f"VARBINARY({MAX_BINARY_LENGTH})", name)
    return _NESTED_BINARY.sub(lambda m: f"{m.group(1)}({min(int(m.group(2)), MAX_BINARY_LENGTH)})", name)


def temporal_precision(dtype: pa.DataType, decl: str | None) -> int:
    """Calcite's precision of a TIME/TIMESTAMP/TIMESTAMP_LTZ operand (at most 3)."""
    match = _TEMPORAL_DECL.match(calcite_name(dtype, decl))
    return int(match.group(2)) if match else MAX_DATETIME_PRECISION


def temporal_decl(dtype: pa.DataType, precision: int) -> str:
    """``TIMESTAMP(p)`` / ``TIMESTAMP_LTZ(p)`` / ``TIME(p)`` for values of ``dtype``, capped as Calcite does."""
    kind = {"timestamp": "TIMESTAMP", "timestamp_ltz": "TIMESTAMP_LTZ", "time": "TIME"}[family(dtype)]
    return f"{kind}({min(precision, MAX_DATETIME_PRECISION)})"


def binary_of(dtype: pa.DataType, decl: str | None) -> tuple[bool, int]:
    """(variable width, length) of a binary operand as Calcite types it."""
    match = _BINARY_DECL.match(calcite_name(dtype, decl))
    if not match:
        return True, MAX_BINARY_LENGTH
    return match.group(1) == "VARBINARY", int(match.group(2))


def common_decl(operands: list[tuple[pa.DataType, str | None]], result: pa.DataType) -> str | None:
    """Calcite's least restrictive declared type of CASE/COALESCE/IFNULL branches whose common Arrow type is
    ``result``, when Arrow cannot say it: the highest (capped) precision of temporal branches; for binaries a
    VARBINARY if the first is one, else the later one's kind, of the longest length (SqlTypeFactoryImpl
    .leastRestrictiveSqlType); the integer type of the branches when their values are wider (a TINYINT product)."""
    typed = [(t, d) for t, d in operands if not pa.types.is_null(t)]
    if not typed:
        return None
    kind = family(result)
    if kind in ("timestamp", "timestamp_ltz", "time"):
        return temporal_decl(result, max(temporal_precision(t, d) for t, d in typed))
    if kind == "binary":
        var, length = binary_of(*typed[0])
        for t, d in typed[1:]:
            other_var, other_length = binary_of(t, d)
            var = var or other_var
            length = max(length, other_length)
        return f"{'VARBINARY' if var else 'BINARY'}({length})"
    if pa.types.is_integer(result):
        ints = [integer_decl(t, d) for t, d in typed]
        if all(pa.types.is_integer(t) for t in ints):
            widest = max(ints, key=lambda t: _INT_RANK.get(t, 3))
            if widest != result:
                return flink_name(widest)
    return None


def declared_element(operands: list[tuple[pa.DataType, str | None]], element: pa.DataType) -> pa.DataType:
    """The Arrow type of an ARRAY/MAP/ROW constructor's integer elements: the declared (least restrictive) integer
    type of the operands, narrower than their values' when an operand is a TINYINT/SMALLINT product computed as a
    Java int (``ARRAY[tinyint * tinyint]`` is ARRAY<TINYINT>, Calcite's type). Flink CDC's generated code passes
    such an Integer into the array unconverted (its type root is the element's, JaninoCompiler
    .generateImplicitTypeConvertMethod), and its output converter then refuses it ("Cannot convert ... to
    TINYINT"); lakecdc narrows it as Java's cast does, as it narrows a TINYINT product in an output column."""
    if not pa.types.is_integer(element):
        return element
    text = common_decl(operands, element)
    return _INT_DECL.get(text or "", element)


def element_decl(operands: list[tuple[pa.DataType, str | None]], element: pa.DataType) -> str | None:
    """The declared element (key, value) type of an ARRAY/MAP constructor when Arrow cannot say it: Calcite's least
    restrictive type of temporal or binary elements (``ARRAY[varbinary_50]`` is ``ARRAY<VARBINARY(50)>``), or the
    one declared type that nested elements share (``ARRAY[ARRAY[varbinary_50]]``)."""
    if family(element) in ("timestamp", "timestamp_ltz", "time", "binary"):
        return common_decl(operands, element)
    decls = {d for t, d in operands if not pa.types.is_null(t)}
    if family(element) in ("array", "map", "row") and len(decls) == 1:
        return decls.pop()
    return None


def nested_decls(decl: str | None) -> list[str] | None:
    """The declared element, key and value, or field types inside an ``ARRAY<...>``, ``MAP<...>`` or ``ROW<...>``
    declared type text (``MAP<STRING, DECIMAL(10, 2)>`` → ``STRING``, ``DECIMAL(10, 2)``); None for other texts."""
    match = re.match(r"^(ARRAY|MAP|ROW)<(.*)>$", decl or "")
    if not match:
        return None
    body, parts, depth, start = match.group(2), [], 0, 0
    for i, ch in enumerate(body):
        depth += 1 if ch in "<(" else -1 if ch in ">)" else 0
        if ch == "," and depth == 0:
            parts.append(body[start:i].strip())
            start = i + 1
    parts.append(body[start:].strip())
    return [p.split(" ", 1)[1] for p in parts] if match.group(1) == "ROW" else parts


def nested_decl(decl: str | None, index: int) -> str | None:
    """The declared type of element ``index`` of ``nested_decls(decl)`` (0: an ARRAY's element, 1: a MAP's value,
    k: a ROW's field k), None when the text has none."""
    parts = nested_decls(decl)
    return parts[index] if parts is not None and index < len(parts) else None


def integer_decl(dtype: pa.DataType, decl: str | None) -> pa.DataType:
    """The declared integer type of an integer operand (a TINYINT product is declared TINYINT, its values INT)."""
    return _INT_DECL.get(decl or "", dtype)


def declared_arrow(dtype: pa.DataType, decl: str | None) -> pa.DataType:
    """The Arrow type an output column of this declared type is written with: the declared integer type (values
    narrowed as Java's cast does); otherwise the value type, whose extra digits Paimon drops at its precision."""
    return integer_decl(dtype, decl) if pa.types.is_integer(dtype) else dtype


# -------------------------------------------------------------------------------------------- numeric types

def integer_decimal(t: pa.DataType) -> pa.DataType:
    """The DECIMAL Calcite uses for an exact operand: TINYINT (3,0), SMALLINT (5,0), INT (10,0), BIGINT (19,0)."""
    if pa.types.is_decimal(t):
        return t
    if pa.types.is_unsigned_integer(t):
        return pa.decimal128(20, 0)
    return pa.decimal128(_INT_DIGITS.get(t, 19), 0)


def capped_decimal(precision: int, scale: int, max_precision: int) -> pa.DataType:
    precision = max(1, min(precision, max_precision))
    return pa.decimal128(precision, max(0, min(scale, precision)))


def common_numeric(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """Calcite's least restrictive numeric type: any DOUBLE → DOUBLE; FLOAT (without DOUBLE) → FLOAT (DOUBLE with
    a DECIMAL); any DECIMAL → DECIMAL wide enough for both; integers → the wider integer."""
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
        da, db = integer_decimal(a), integer_decimal(b)
        scale = max(da.scale, db.scale)
        digits = max(da.precision - da.scale, db.precision - db.scale)
        return pa.decimal128(min(38, digits + scale), scale)
    if pa.types.is_unsigned_integer(a) or pa.types.is_unsigned_integer(b):
        return pa.int64() if max(a.bit_width, b.bit_width) < 64 else pa.decimal128(20, 0)
    return a if _INT_RANK[a] >= _INT_RANK[b] else b


def arithmetic_type(op: str, a: pa.DataType, b: pa.DataType, max_precision: int) -> pa.DataType:
    """Calcite's result type of ``a op b`` (op one of + - * / %) with Flink CDC's maximum DECIMAL precision
    (19 by default, 38 with ``transform.decimal.precision.mode: UP_TO_38``)."""
    if pa.types.is_null(a) and pa.types.is_null(b):
        return pa.int32()
    if pa.types.is_null(a):
        a = b
    if pa.types.is_null(b):
        b = a
    if op == "%" and not (pa.types.is_decimal(a) or pa.types.is_decimal(b)):
        return b if not pa.types.is_floating(a) or pa.types.is_floating(b) else common_numeric(a, b)
    if not (pa.types.is_decimal(a) or pa.types.is_decimal(b)) or pa.types.is_floating(a) or \
            pa.types.is_floating(b):
        return common_numeric(a, b)
    # Calcite's type system caps every DECIMAL type it creates, the operands' too: DECIMAL(20, 2) is DECIMAL(19, 2)
    # in UP_TO_19 before the result type is derived
    da, db = (capped_decimal(d.precision, d.scale, max_precision) for d in (integer_decimal(a), integer_decimal(b)))
    p1, s1, p2, s2 = da.precision, da.scale, db.precision, db.scale
    if op in ("+", "-"):
        scale = max(s1, s2)
        return capped_decimal(max(p1 - s1, p2 - s2) + scale + 1, scale, max_precision)
    if op == "*":
        return capped_decimal(p1 + p2, min(s1 + s2, max_precision), max_precision)
    if op == "/":
        whole = min(p1 - s1 + s2, max_precision)
        scale = min(max(6, s1 + p2 + 1), max_precision - whole, max_precision)
        return capped_decimal(whole + scale, scale, max_precision)
    scale = max(s1, s2)  # %
    return capped_decimal(min(p1 - s1, p2 - s2) + scale, scale, max_precision)


def calcite_type(t: pa.DataType, max_precision: int) -> pa.DataType:
    """The type Calcite gives an operand of type ``t``: its type factory caps every DECIMAL it creates at the
    pipeline's maximum precision (a DECIMAL(20, 2) column is DECIMAL(19, 2) inside an expression in UP_TO_19)."""
    if pa.types.is_decimal(t):
        return capped_decimal(t.precision, t.scale, max_precision)
    if pa.types.is_list(t):
        return pa.list_(calcite_type(t.value_type, max_precision))
    if pa.types.is_map(t):
        return pa.map_(calcite_type(t.key_type, max_precision), calcite_type(t.item_type, max_precision))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(calcite_type(f.type, max_precision)) for f in t])
    return t


def least_restrictive_exact(a: pa.DataType, b: pa.DataType, max_precision: int) -> pa.DataType:
    """Calcite's least restrictive type of two exact numbers, one a DECIMAL (SqlTypeFactoryImpl
    .leastRestrictiveSqlType): the whole digits of the wider one, capped at the maximum precision, then as many of
    the larger scale as still fit (DECIMAL(10, 2) with BIGINT is DECIMAL(19, 0) in UP_TO_19, DECIMAL(21, 2) in
    UP_TO_38)."""
    da, db = integer_decimal(a), integer_decimal(b)
    whole = min(max(da.precision - da.scale, db.precision - db.scale), max_precision)
    scale = min(max(da.scale, db.scale), max_precision - whole)
    return pa.decimal128(max(whole + scale, 1), scale)


def common_type(types: list[pa.DataType], what: str, max_precision: int = 38) -> pa.DataType:
    """Least restrictive common type of CASE/IF/COALESCE branches and ARRAY/MAP elements (Calcite's, with the
    pipeline's maximum DECIMAL precision); ExpressionError if there is none."""
    result = pa.null()
    for t in (calcite_type(t, max_precision) for t in types):
        if pa.types.is_null(result):
            result = t
            continue
        if pa.types.is_null(t) or t == result:
            continue
        fa, fb = family(result), family(t)
        if fa != fb:
            raise ExpressionError(f"{what}: incompatible types {flink_name(result)} and {flink_name(t)}")
        if fa == "numeric":
            exact = not (pa.types.is_floating(result) or pa.types.is_floating(t))
            decimal_ = pa.types.is_decimal(result) or pa.types.is_decimal(t)
            result = least_restrictive_exact(result, t, max_precision) if exact and decimal_ else \
                common_numeric(result, t)
        elif fa in ("timestamp", "timestamp_ltz", "time"):
            result = result if _unit_rank(result.unit) >= _unit_rank(t.unit) else t
        elif fa == "string":
            result = pa.string()
        elif fa == "binary":
            result = pa.binary()
        elif fa in ("array", "map", "row"):
            result = _common_nested(result, t, what, max_precision)
    return result


def _common_nested(a: pa.DataType, b: pa.DataType, what: str, max_precision: int) -> pa.DataType:
    """Calcite's least restrictive ARRAY/MAP/ROW type: element (key, value, field) types unified one by one
    (ARRAY[ARRAY[1], ARRAY[bigint_col]] is ARRAY<ARRAY<BIGINT>>)."""
    try:
        if family(a) == "array":
            return pa.list_(common_type([a.value_type, b.value_type], what, max_precision))
        if family(a) == "map":
            return pa.map_(common_type([a.key_type, b.key_type], what, max_precision),
                           common_type([a.item_type, b.item_type], what, max_precision))
        if a.num_fields == b.num_fields:
            return pa.struct([pa.field(fa.name, common_type([fa.type, fb.type], what, max_precision))
                              for fa, fb in zip(a, b)])
    except ExpressionError:
        pass
    raise ExpressionError(f"{what}: incompatible types {flink_name(a)} and {flink_name(b)}")


def _unit_rank(unit: str) -> int:
    return ("s", "ms", "us", "ns").index(unit)


def cast_array(arr: pa.Array, t: pa.DataType) -> pa.Array:
    """Convert an array to an equivalent type (promotion / common type); no Flink CAST semantics.

    A DECIMAL target keeps the exact value: the result is DECIMAL(38, scale of ``t``), not ``t`` itself, because
    inside an expression Flink CDC computes with unbounded BigDecimals and applies the declared precision only
    where a value leaves the expression (see ``exact_decimal``)."""
    if arr.type == t:
        return arr
    if pa.types.is_null(arr.type):
        return pa.nulls(len(arr), t)
    if pa.types.is_integer(t) and pa.types.is_integer(arr.type):
        return arr.cast(t, safe=False)
    if pa.types.is_decimal(t) and (pa.types.is_decimal(arr.type) or pa.types.is_integer(arr.type)):
        if pa.types.is_integer(arr.type):
            arr = arr.cast(integer_decimal(arr.type))
        return fit_decimal(arr, pa.decimal128(38, t.scale))
    if pa.types.is_floating(t) and pa.types.is_decimal(arr.type):
        return decimal_to_float(arr, t)
    if pa.types.is_floating(t) and pa.types.is_integer(arr.type):
        return arr.cast(t, safe=False)  # Java's widening to float/double: the nearest value, never an error
    return arr.cast(t)


def fit_decimal(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """A decimal array in ``target``: HALF_UP to its scale, NULL where the value needs more digits (Flink CDC's
    DecimalData.fromBigDecimal gives null on precision overflow). Works in 76-digit decimals, so values near the
    38-digit limit neither overflow the rounding nor the range check."""
    t = arr.type
    if t == target:
        return arr
    wide = pa.decimal256(76, target.scale)
    x = arr.cast(pa.decimal256(76, t.scale)) if t != pa.decimal256(76, t.scale) else arr
    if t.scale > target.scale:
        x = pc.round(x, ndigits=target.scale, round_mode="half_towards_infinity")
    x = x.cast(wide, safe=False)
    limit = pa.scalar(decimal.Decimal(10) ** (target.precision - target.scale), wide)
    fits = pc.less(pc.abs(x), limit)
    return pc.if_else(fits, x, pa.scalar(None, wide)).cast(target, safe=False)


def comparable_decimals(left: pa.Array, right: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Two exact numeric arrays (DECIMAL or integer) at one scale, in 76-digit decimals, so that comparing them is
    exact as BigDecimal.compareTo: neither side's digits are lost, whatever the precisions, scales or declared
    (capped) types (DECIMAL(38, 0) against DECIMAL(38, 2) needs 40 digits)."""
    types = [integer_decimal(x.type) for x in (left, right)]
    whole = max(t.precision - t.scale for t in types)
    scale = min(max(t.scale for t in types), 76 - whole)
    target = pa.decimal256(76, scale)

    def widen(arr: pa.Array, t: pa.DataType) -> pa.Array:
        if pa.types.is_integer(arr.type):
            arr = arr.cast(t)
        if t.scale > scale:  # only past 76 digits in all: the finer digits are rounded, as no output could hold them
            return fit_decimal(arr, pa.decimal128(min(38, whole + scale), scale)).cast(target)
        return arr.cast(target)
    return widen(left, types[0]), widen(right, types[1])


def exact_decimal(arr: pa.Array) -> pa.Array:
    """A decimal result kept exact between operators (Flink CDC evaluates DECIMAL with BigDecimal and applies the
    declared, possibly 19-digit, precision only to the output column): any DECIMAL(p <= 38, s) stays as it is;
    a 76-digit intermediate comes back to 38 digits (NULL beyond, which no output column could hold)."""
    t = arr.type
    if pa.types.is_decimal128(t):
        return arr
    scale = min(t.scale, 38)
    return fit_decimal(arr, pa.decimal128(38, scale))


def conform(arr: pa.Array, t: pa.DataType) -> pa.Array:
    """An array in its declared type ``t`` as an output value: DECIMAL values that do not fit become NULL (as
    DecimalData.fromBigDecimal), nested DECIMALs too; other types convert as ``cast_array``."""
    if arr.type == t:
        return arr
    if pa.types.is_decimal(t) and pa.types.is_decimal(arr.type):
        return fit_decimal(arr, t)
    if pa.types.is_decimal(t) and pa.types.is_integer(arr.type):
        return fit_decimal(arr.cast(integer_decimal(arr.type)), t)
    return cast_array(arr, t)


def decimal_to_float(arr: pa.Array, t: pa.DataType = pa.float64()) -> pa.Array:  # noqa: B008 - Arrow types are immutable
    """BigDecimal.doubleValue(): the nearest double. Arrow's decimal → double cast divides in floating point
    (29.90 → 29.900000000000002); parsing the exact decimal text rounds correctly."""
    return arr.cast(pa.string()).cast(pa.float64()).cast(t)


# ---------------------------------------------------------------------------------------------------- time zones

_OFFSET = re.compile(r"(?:UTC|GMT)?([+-])(\d{1,2})(?::?(\d{2}))?")
_UNIT_FACTOR = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def zone_offset_seconds(zone: str) -> int | None:
    """Fixed offset of ``+08:00``-style zones (also ``UTC+8``, ``GMT-05:30``, ``Z``); None for region names."""
    if zone in ("Z", "UTC", "GMT", "UT", "Etc/UTC"):
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
        return pc.add(naive, pa.scalar(offset * _UNIT_FACTOR[unit], pa.duration(unit)))
    return pc.local_timestamp(arr.cast(pa.timestamp(unit, tz=zone)))


def from_wall_clock(arr: pa.Array, zone: str, unit: str | None = None) -> pa.Array:
    """Naive wall-clock timestamps in ``zone`` as a tz-aware (UTC) array. A wall clock that falls in a
    daylight-saving gap moves forward by the gap, an ambiguous one takes the earlier offset (java.time rules)."""
    unit = unit or arr.type.unit
    offset = zone_offset_seconds(zone)
    arr = arr.cast(pa.timestamp(unit))
    if offset is not None:
        utc = pc.subtract(arr, pa.scalar(offset * _UNIT_FACTOR[unit], pa.duration(unit))) if offset else arr
        return utc.cast(pa.timestamp(unit, tz="UTC"))
    earliest = pc.assume_timezone(arr, zone, ambiguous="earliest", nonexistent="earliest")
    # nonexistent="earliest" maps a wall clock in a gap to the instant just before the gap; java.time instead
    # shifts the wall clock by the gap length, i.e. the same elapsed offset as before the transition.
    naive_back = to_wall_clock(earliest, zone)
    in_gap = pc.fill_null(pc.not_equal(naive_back.cast(pa.timestamp(unit)), arr), False)
    if pc.any(in_gap).as_py():
        before = pc.subtract(arr, pa.scalar(3 * 3600 * _UNIT_FACTOR[unit], pa.duration(unit)))
        offset_before = pc.subtract(before, pc.assume_timezone(before, zone, ambiguous="earliest",
                                                               nonexistent="earliest").cast(pa.timestamp(unit)))
        shifted = pc.subtract(arr, offset_before).cast(pa.timestamp(unit, tz="UTC"))
        earliest = pc.if_else(in_gap, shifted, earliest.cast(pa.timestamp(unit, tz="UTC")))
    return earliest.cast(pa.timestamp(unit, tz="UTC"))


# ------------------------------------------------------------------------------------------- Java-style text

def _pad(arr: pa.Array, width: int) -> pa.Array:
    return pc.utf8_lpad(arr.cast(pa.string()), width=width, padding="0")


def fraction_nanos(ts: pa.Array) -> pa.Array:
    """Nanosecond of second of each timestamp."""
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


def _java_time_of_day(ts: pa.Array) -> pa.Array:
    """HH:mm[:ss[.fraction]] as LocalTime.toString: seconds only when the seconds or the fraction are non-zero."""
    hm = pc.binary_join_element_wise(_pad(pc.hour(ts), 2), _pad(pc.minute(ts), 2), ":")
    nanos = fraction_nanos(ts)
    sec = pc.binary_join_element_wise(":", _pad(pc.second(ts), 2), _java_fraction(nanos), "")
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
    exponent = len(digits) - 1 + int(digits_tuple.exponent)  # a finite value: an int exponent
    sign = "-" if digits_tuple.sign else ""
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


def _java_double_text(arr: pa.Array) -> pa.Array:
    """Double.toString / Float.toString: '1.0', '29.9', '1.0E7', '1.0E-5', 'NaN', 'Infinity'."""
    single = pa.types.is_float32(arr.type)
    text = arr.cast(pa.string())  # Arrow prints the shortest text that round-trips, as Java does
    text = pc.if_else(pc.match_substring_regex(text, r"^-?[0-9]+$"), pc.binary_join_element_wise(text, ".0", ""),
                      text)
    absval = pc.abs(arr)
    sci = pc.fill_null(pc.and_(pc.is_finite(arr), pc.or_(
        pc.greater_equal(absval, 1e7), pc.and_(pc.less(absval, 1e-3), pc.not_equal(absval, 0)))), False)
    if pc.any(sci).as_py():
        # Per-row Python only for the values Java prints in scientific notation (|x| >= 1e7 or < 1e-3): Arrow has
        # no kernel for Java's "d.dddE±n" form, and such values are a small minority of real data.
        values = text.to_pylist()
        for i, (flag, value) in enumerate(zip(sci.to_pylist(), arr.to_pylist())):
            if flag:
                values[i] = _java_scientific(value, single)
        text = pa.array(values, pa.string())
    text = pc.replace_substring_regex(text, r"^-?nan$", "NaN")
    text = pc.replace_substring_regex(text, r"^inf$", "Infinity")
    return pc.replace_substring_regex(text, r"^-inf$", "-Infinity")


def time_as_timestamp(arr: pa.Array) -> pa.Array:
    """A TIME array as timestamps on 1970-01-01 (same unit), so the temporal kernels apply."""
    t = arr.type
    if pa.types.is_time64(t):
        return arr.cast(pa.int64()).cast(pa.timestamp(t.unit))
    return arr.cast(pa.int32()).cast(pa.int64()).cast(pa.timestamp(t.unit))


def timestamp_as_time(ts: pa.Array, unit: str) -> pa.Array:
    """The time-of-day of naive timestamps as TIME of ``unit``."""
    ts = ts.cast(pa.timestamp(unit), safe=False)
    day = pc.floor_temporal(ts, unit="day")
    ticks = pc.subtract(ts.cast(pa.int64()), day.cast(pa.int64()))
    if unit in ("s", "ms"):
        return ticks.cast(pa.int32()).cast(pa.time32(unit))
    return ticks.cast(pa.time64(unit))


def java_to_string(arr: pa.Array, zone: str = "UTC") -> pa.Array:
    """Each value as Java's ``toString()`` of the Flink CDC runtime object (NULL stays NULL).

    BOOLEAN 'true'; DECIMAL keeps its scale ('29.90'); DOUBLE '1.0'/'1.0E7'; DATE '2026-01-01';
    TIMESTAMP LocalDateTime ('2026-01-01T12:00', seconds/fraction only when non-zero); TIMESTAMP_LTZ the same
    text of its UTC wall clock (LocalZonedTimestampData.toString); TIME LocalTime ('09:30'); BINARY decoded as
    UTF-8; VARIANT its JSON."""
    t = arr.type
    fam = family(t)
    if fam == "string":
        return arr.cast(pa.string())
    if fam == "variant":
        return arr.storage
    if fam == "null":
        return pa.nulls(len(arr), pa.string())
    if pa.types.is_floating(t):
        return _java_double_text(arr)
    if fam in ("boolean", "numeric", "date"):
        return arr.cast(pa.string())
    if fam in ("timestamp", "timestamp_ltz"):
        ts = arr.cast(pa.timestamp(t.unit)) if t.tz else arr
        date = pc.strftime(pc.floor_temporal(ts, unit="day").cast(pa.timestamp("s")), "%Y-%m-%d")
        # LocalZonedTimestampData.toString is the UTC LocalDateTime's text, without a zone suffix
        tod = _java_time_of_day(ts)
        return pc.binary_join_element_wise(date, "T", tod, "")
    if fam == "time":
        return _java_time_of_day(time_as_timestamp(arr))
    if fam == "binary":
        return utf8_decode(arr)
    raise ExpressionError(f"cannot convert {flink_name(t)} to a string")


def utf8_decode(arr: pa.Array) -> pa.Array:
    """Bytes as UTF-8 text; malformed sequences become U+FFFD as in Java's ``new String(bytes, UTF_8)``."""
    try:
        return arr.cast(pa.binary()).cast(pa.string())
    except pa.ArrowInvalid:
        # Only batches holding malformed UTF-8 take this per-row path: Arrow has no replacing decoder.
        return pa.array([None if v is None else v.decode("utf-8", errors="replace") for v in arr.to_pylist()],
                        pa.string())


def decimal_literal_type(text: str) -> pa.DataType:
    """Calcite's type of an exact numeric literal with a point: DECIMAL(digits, digits after the point)."""
    digits = text.lstrip("+-")
    whole, _, frac = digits.partition(".")
    whole = whole.lstrip("0")
    precision = max(1, len(whole) + len(frac))
    if precision > 38:
        raise ExpressionError(f"numeric literal {text} has more than 38 digits")
    return pa.decimal128(max(precision, len(frac)), len(frac))
