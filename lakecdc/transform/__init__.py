"""The transform layer: Flink CDC ``transform:`` rules (projection, filter, keys, options, SOFT_DELETE) applied to
change batches with Arrow.

Modules: ``rules`` (rule selection, validation, compilation, ``CompiledTransform.apply``), ``expressions``
(sqlglot parsing and compilation, error positions), ``functions`` (the function registry, one module per group of
functions), ``nodes`` (compiled expression nodes), ``types`` (Calcite type rules, Java-style text, time zones),
``datefmt`` (Java date patterns: formatting and parsing), ``udf`` (pipeline user-defined functions), ``routes``
(route rules, merged schemas of many-to-one routes), ``metadata_columns`` (FLIP-107 metadata columns).
docs/functions.md is the reference, with the compatibility table against Flink CDC.
"""

from lakecdc.transform.rules import (CompiledTransform, TransformContext, TransformRuleConfig, compile_transform,
                                     parse_table_options, select_rule, validate_rule)

__all__ = ["TransformRuleConfig", "TransformContext", "CompiledTransform", "compile_transform", "select_rule",
           "validate_rule", "parse_table_options"]
