"""User-defined functions: ``pipeline.user-defined-function: [{name, classpath[, options]}]``.

Flink CDC names a Java class; lakecdc names a Python callable, ``classpath: package.module:function`` (or
``package.module.function``). The callable receives one pyarrow array per argument (all of the batch's length)
and returns a pyarrow array of the same length. Its result type is its ``result_type`` attribute: a pyarrow
DataType, or a function of the argument types returning one; without it the result is STRING. If the classpath
names a class, it is instantiated without arguments and the instance is called. ``options`` (a mapping of
strings) are handed to the UDF's ``open(options)`` method when it has one, once when the pipeline is loaded.

A UDF wins over a built-in function of the same (case-insensitive) name, as in Flink CDC. Everything is checked
when the pipeline file is loaded: the module imports, the name resolves to a callable, ``open`` succeeds.
"""

from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from lakecdc.errors import PipelineConfigError

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class UdfConfig:
    name: str
    classpath: str
    options: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    function: Callable | None = field(default=None, repr=False, hash=False, compare=False)


def parse_udfs(raw: Any, *, file: str | None, path: str) -> tuple[UdfConfig, ...]:
    """Validate the YAML list and load every callable; PipelineConfigError naming the item otherwise."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise PipelineConfigError("expected a list of {name, classpath[, options]} items", file=file, path=path)
    udfs: list[UdfConfig] = []
    for index, item in enumerate(raw):
        item_path = f"{path}[{index}]"
        if not isinstance(item, dict):
            raise PipelineConfigError("expected a mapping with name and classpath", file=file, path=item_path)
        unknown = sorted(set(item) - {"name", "classpath", "options"})
        if "python-code" in unknown:
            raise PipelineConfigError("inline python-code UDFs are not supported; put the function in a module "
                                      "and name it in classpath: package.module:function", file=file,
                                      path=f"{item_path}.python-code")
        if unknown:
            raise PipelineConfigError(f"unknown option(s) {', '.join(unknown)} (expected name, classpath, options)",
                                      file=file, path=f"{item_path}.{unknown[0]}")
        name = item.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise PipelineConfigError(f"expected a function name (letters, digits, _), got {name!r}", file=file,
                                      path=f"{item_path}.name")
        if any(u.name.upper() == name.upper() for u in udfs):
            raise PipelineConfigError(f"function {name} is defined twice", file=file, path=f"{item_path}.name")
        classpath = item.get("classpath")
        if not isinstance(classpath, str) or not classpath.strip():
            raise PipelineConfigError("required option is missing", file=file, path=f"{item_path}.classpath")
        options = item.get("options") or {}
        if not isinstance(options, dict):
            raise PipelineConfigError("expected a mapping of option names to values", file=file,
                                      path=f"{item_path}.options")
        options = {str(k): ("true" if v is True else "false" if v is False else str(v)) for k, v in options.items()}
        function = load_callable(classpath.strip(), options, file=file, path=f"{item_path}.classpath")
        udfs.append(UdfConfig(name, classpath.strip(), options, function))
    return tuple(udfs)


def load_callable(classpath: str, options: dict[str, str], *, file: str | None, path: str) -> Callable:
    """Import ``module:attr`` (or ``module.attr``), instantiate classes, call ``open(options)``."""
    if ":" in classpath:
        module_name, _, attribute = classpath.partition(":")
    else:
        module_name, _, attribute = classpath.rpartition(".")
    if not module_name or not attribute:
        raise PipelineConfigError(f"classpath {classpath!r} must name a Python callable as package.module:function",
                                  file=file, path=path)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure of user code is a configuration error
        hint = " (Flink CDC's Java classes cannot be used: write the UDF in Python)" \
            if module_name.startswith(("org.", "com.")) else ""
        raise PipelineConfigError(f"cannot import module {module_name!r} of UDF {classpath!r}: "
                                  f"{type(exc).__name__}: {exc}{hint}", file=file, path=path) from None
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise PipelineConfigError(f"module {module_name!r} has no attribute {attribute!r}", file=file, path=path)
        target = getattr(target, part)
    if inspect.isclass(target):
        try:
            target = target()
        except Exception as exc:  # noqa: BLE001
            raise PipelineConfigError(f"cannot create UDF {classpath!r}: {type(exc).__name__}: {exc}", file=file,
                                      path=path) from None
    if not callable(target):
        raise PipelineConfigError(f"{classpath!r} is not callable", file=file, path=path)
    opener = getattr(target, "open", None)
    if callable(opener):
        try:
            opener(dict(options))
        except Exception as exc:  # noqa: BLE001
            raise PipelineConfigError(f"UDF {classpath!r}: open(options) failed: {type(exc).__name__}: {exc}",
                                      file=file, path=path) from None
    elif options:
        raise PipelineConfigError(f"UDF {classpath!r} has options but no open(options) method to receive them",
                                  file=file, path=path.rsplit(".", 1)[0] + ".options")
    return target


def udf_functions(udfs: tuple[UdfConfig, ...] | list[UdfConfig]) -> dict[str, Callable]:
    """name → callable, the form ``TransformContext.udfs`` takes."""
    return {u.name: _loaded(u) for u in udfs}


def _loaded(udf: UdfConfig) -> Callable:
    if udf.function is None:  # parse_udfs loads every function
        raise PipelineConfigError(f"UDF {udf.name!r} ({udf.classpath}) is not loaded")
    return udf.function
