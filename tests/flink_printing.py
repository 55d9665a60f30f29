"""Values as Flink CDC's test sinks print them (the ``DataChangeEvent{... after=[...]}`` lines of its tests), shared
by the modules that compare lakecdc's output with those lines (tests/test_flink_cdc_specs.py,
tests/test_flink_cdc_java_cases.py)."""

from __future__ import annotations

import base64

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.transform.types import VariantType, flink_name, java_to_string


def render(arr: pa.Array) -> list[str]:
    """Each value as Flink CDC's values sink prints it (BinaryRecordData fields through their toString)."""
    t = arr.type
    nulls = arr.is_null().to_pylist()
    if pa.types.is_null(t):
        return ["null"] * len(arr)
    if isinstance(t, VariantType):
        texts = arr.storage.to_pylist()
    elif pa.types.is_binary(t):
        texts = [None if v is None else base64.b64encode(v).decode() for v in arr.to_pylist()]
    elif pa.types.is_map(t):
        keys, items = render(arr.keys), render(arr.items)
        offsets = arr.offsets.to_pylist()
        texts = ["{" + ", ".join(f"{keys[i]} -> {items[i]}" for i in range(offsets[r], offsets[r + 1])) + "}"
                 for r in range(len(arr))]
    elif pa.types.is_list(t):
        values = render(arr.values)
        offsets = arr.offsets.to_pylist()
        texts = ["[" + ", ".join(values[offsets[r]:offsets[r + 1]]) + "]" for r in range(len(arr))]
    elif pa.types.is_struct(t):
        fields = [render(pc.struct_field(arr, [i])) for i in range(t.num_fields)]
        texts = ["{" + ", ".join(f"{t.field(i).name}: {flink_name(t.field(i).type)} -> {fields[i][r]}"
                                 for i in range(t.num_fields)) + "}" for r in range(len(arr))]
    elif pa.types.is_decimal(t):
        texts = [None if v is None else format(v, "f") for v in arr.to_pylist()]
    else:
        texts = java_to_string(arr).to_pylist()
    return ["null" if n else v for n, v in zip(nulls, texts)]
