"""Built-in functions and operators of transform expressions, in a registry keyed by upper-case name.

Each entry type-checks its (already compiled) arguments and returns a ``Call`` node that evaluates whole columns
with ``pyarrow.compute``. Adding a function = adding one ``@function(...)`` builder in the module of its group
(``comparison``, ``arithmetic``, ``strings``, ``regex``, ``temporal``, ``conditional``, ``casts``, ``structs``).
Pipeline UDFs (``TransformContext.udfs``) are looked up first, so a UDF replaces a built-in of the same name.

Every behaviour that differs from Flink CDC is listed, with an example, in the compatibility table of
docs/functions.md.
"""

from __future__ import annotations

from typing import Callable

import pyarrow as pa

from lakecdc.errors import ExpressionError
from lakecdc.transform.functions import (arithmetic, casts, comparison, conditional, regex, strings,  # noqa: F401
                                         structs, temporal)
from lakecdc.transform.functions.base import (FUNCTIONS, OPERATORS, Builder, FunctionDef, Site,  # noqa: F401
                                              calcite_nullability, function)
from lakecdc.transform.functions.casts import CAST_TARGETS, UNSIZED_DECIMAL, cast  # noqa: F401
from lakecdc.transform.functions.comparison import compare, like_regex  # noqa: F401
from lakecdc.transform.nodes import Call, Node


def udf_result_type(fn: Callable, args: list[Node], name: str) -> pa.DataType:
    """A UDF's ``result_type``: an Arrow type, or a callable taking the argument types (default STRING)."""
    declared = getattr(fn, "result_type", None)
    if declared is None:
        return pa.string()
    if isinstance(declared, pa.DataType):
        return declared
    if callable(declared):
        types = [a.dtype for a in args]
        try:
            result = declared(types)
        except Exception:  # noqa: BLE001
            if any(pa.types.is_null(t) for t in types):
                return pa.string()  # schema-free validation: argument types are not known yet
            raise
        if isinstance(result, pa.DataType):
            return result
    raise ExpressionError(f"UDF {name}: result_type must be a pyarrow DataType or a function of the argument "
                          f"types returning one, got {declared!r}")


def udf_function(name: str, fn: Callable) -> FunctionDef:
    """A pipeline UDF: called with the argument arrays, returns an array of its ``result_type`` (default STRING)."""
    def build(args: list[Node], site: Site) -> Node:
        result_type = udf_result_type(fn, args, name)

        def run(env, arrays):
            try:
                result = fn(*arrays)
            except Exception as exc:  # noqa: BLE001 - the user's code: report it with the expression
                raise ExpressionError(f"{site.sql}: UDF {name} failed: {type(exc).__name__}: {exc}") from exc
            if isinstance(result, pa.ChunkedArray):
                result = result.combine_chunks()
            if not isinstance(result, pa.Array):
                try:
                    result = pa.array(result, type=result_type)
                except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
                    raise ExpressionError(f"{site.sql}: UDF {name} must return a pyarrow array, got "
                                          f"{type(result).__name__}: {exc}") from None
            if len(result) != env.num_rows:
                raise ExpressionError(f"{site.sql}: UDF {name} returned {len(result)} values for {env.num_rows} rows")
            if result.type != result_type:
                try:
                    result = result.cast(result_type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                    raise ExpressionError(f"{site.sql}: UDF {name} returned {result.type}, not its result_type "
                                          f"{result_type}: {exc}") from None
            return result
        return Call(run, args, result_type, site.sql)

    return FunctionDef(name.upper(), build, 0, None)


def lookup_function(name: str, udfs: dict[str, Callable] | None = None) -> FunctionDef | None:
    """UDFs (case-insensitive) win over built-ins of the same name."""
    for udf_name, fn in (udfs or {}).items():
        if udf_name.upper() == name.upper():
            return udf_function(udf_name, fn)
    return FUNCTIONS.get(name.upper())
