"""The transform layer: Flink CDC ``transform:`` rules (projection, filter, keys, options, SOFT_DELETE) applied to
change batches with Arrow.

Modules: ``rules`` (rule selection, validation, compilation, ``CompiledTransform.apply``), ``expressions``
(sqlglot parsing and compilation), ``functions`` (the function registry and its deviation table), ``nodes``
(compiled expression nodes), ``types`` (type rules, Java-style text), ``datefmt`` (Java date patterns).
"""

from lakecdc.transform.rules import (CompiledTransform, TransformContext, TransformRuleConfig, compile_transform,
                                     parse_table_options, select_rule, validate_rule)

__all__ = ["TransformRuleConfig", "TransformContext", "CompiledTransform", "compile_transform", "select_rule",
           "validate_rule", "parse_table_options"]
