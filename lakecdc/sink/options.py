"""What Paimon table options mean for the rows a table can take, as far as the native (Rust) writer and readers
honour them (Paimon's table options, as pypaimon 2.1.0 and pypaimon-rust 0.4.0 apply them; every rule here is covered by
tests/test_paimon_api_semantics.py against real tables).

The point of this module is to refuse *before* anything is written. A retract row (``-U``/``-D``) that the merge
engine cannot take is dangerous with pypaimon-rust: inside one commit the writer merges it and fails, but a lone
retract row of a key is written as is, committed, and from then on **every read of the table fails**. So the
writer checks each batch with :func:`unsupported_row_kinds`, and the pipeline refuses such tables at validation.

Merge engines and their retract rows (Paimon semantics, verified on the native path):

* ``deduplicate``: takes every row kind.
* ``partial-update``: ``-U``/``-D`` only with ``ignore-delete``, ``partial-update.remove-record-on-delete`` (``-D``
  removes the row, ``-U`` is ignored) or a ``fields.<f>.sequence-group`` (the group's fields are retracted).
* ``aggregation``: ``-D`` removes the row with ``aggregation.remove-record-on-delete``; otherwise every retract row
  is retracted from each field, which needs a retractable function (``sum``, ``last_value``,
  ``last_non_null_value``) or ``fields.<f>.ignore-retract``. ``product`` is refused for retracts although Java
  allows it: the Rust merge gives a different result than Java (2·3 then -U 3/+U 5 → Rust 30, Java 90).
  ``collect``, ``merge_map`` and ``nested_update`` retracts are not verified on the native path and refused too.
* ``first-row``: refused altogether (its level-0 files are never read without a compaction).
* ``ignore-delete`` (or ``deduplicate.``/``partial-update.``/``first-row.ignore-delete``) drops ``-U`` and ``-D``
  at write; ``ignore-update-before`` drops ``-U``.
"""

from __future__ import annotations

from lakecdc.model import DELETE, UPDATE_BEFORE

TRUE = "true"

IGNORE_DELETE_KEYS = ("ignore-delete", "deduplicate.ignore-delete", "partial-update.ignore-delete",
                      "first-row.ignore-delete")

# Paimon's aggregate functions (pypaimon's list of supported functions, which the Rust merge implements too).
AGGREGATE_FUNCTIONS = frozenset([
    "primary_key", "last_value", "last_non_null_value", "first_value", "first_non_null_value", "sum", "max", "min",
    "bool_or", "bool_and", "listagg", "nested_update", "nested_partial_update", "collect", "product",
    "merge_map_with_keytime", "merge_map", "theta_sketch", "hll_sketch", "rbm32",
])
# Functions whose retraction lakecdc lets through (verified equal to Java on the native path).
RETRACTABLE_FUNCTIONS = frozenset(["sum", "last_value", "last_non_null_value"])
DEFAULT_AGGREGATE_FUNCTION = "last_non_null_value"

# Changelog producers that need a compaction to produce anything; pypaimon and pypaimon-rust never compact.
COMPACTION_CHANGELOG_PRODUCERS = ("lookup", "full-compaction")


def is_true(options: dict[str, str], key: str) -> bool:
    return str(options.get(key, "")).strip().lower() == TRUE


def ignores_delete(options: dict[str, str]) -> bool:
    """``ignore-delete`` (or one of its engine-specific fallback keys) is set: ``-U`` and ``-D`` are dropped."""
    return any(is_true(options, k) for k in IGNORE_DELETE_KEYS)


def merge_engine(options: dict[str, str]) -> str:
    return str(options.get("merge-engine", "deduplicate")).strip().lower()


def sequence_groups(options: dict[str, str]) -> dict[str, list[str]]:
    """``fields.<g1,g2>.sequence-group = a,b`` → {"g1,g2": ["a", "b"]}."""
    groups = {}
    for key, value in options.items():
        if key.startswith("fields.") and key.endswith(".sequence-group"):
            groups[key[len("fields."):-len(".sequence-group")]] = [v.strip() for v in str(value).split(",")
                                                                   if v.strip()]
    return groups


def aggregate_functions(options: dict[str, str], value_columns: list[str] | None) -> dict[str, str]:
    """Column → aggregate function of an aggregation table. Without ``value_columns`` (the schema is not known
    yet, as at pipeline validation) only the columns named in ``fields.<c>.aggregate-function`` are listed, plus
    ``*`` for the default of all others."""
    default = str(options.get("fields.default-aggregate-function", DEFAULT_AGGREGATE_FUNCTION)).strip().lower()
    explicit = {}
    for key, value in options.items():
        if key.startswith("fields.") and key.endswith(".aggregate-function"):
            explicit[key[len("fields."):-len(".aggregate-function")]] = str(value).strip().lower()
    if value_columns is None:
        return {**explicit, "*": default}
    return {c: explicit.get(c, default) for c in value_columns}


def unsupported_row_kinds(options: dict[str, str], value_columns: list[str] | None = None) -> dict[str, str]:
    """The retract row kinds (``-U``, ``-D``) a primary-key table with ``options`` cannot take, each with the
    reason and what to set instead. Empty when the table takes every row kind. ``value_columns`` are the non-key
    columns (for aggregation tables); None when unknown."""
    if ignores_delete(options):
        return {}
    kinds = [UPDATE_BEFORE, DELETE]
    if is_true(options, "ignore-update-before"):
        kinds.remove(UPDATE_BEFORE)
    engine = merge_engine(options)
    problems: dict[str, str] = {}
    if engine == "partial-update":
        if not is_true(options, "partial-update.remove-record-on-delete") and not sequence_groups(options):
            for kind in kinds:
                problems[kind] = ("merge-engine=partial-update cannot take -U/-D rows: set ignore-delete=true "
                                  "(keep the row as it is), partial-update.remove-record-on-delete=true (a -D "
                                  "removes the row) or a fields.<seq>.sequence-group (retract that group's fields)")
    elif engine == "aggregation":
        functions = aggregate_functions(options, value_columns)
        blocked = sorted(c for c, f in functions.items()
                         if f not in RETRACTABLE_FUNCTIONS and f != "primary_key"
                         and not is_true(options, f"fields.{c}.ignore-retract"))
        if blocked:
            names = ", ".join(f"{c} ({functions[c]})" if c != "*" else
                              f"the default function {functions[c]}" for c in blocked)
            why = (f"merge-engine=aggregation cannot retract {names}: only "
                   f"{', '.join(sorted(RETRACTABLE_FUNCTIONS))} are retracted by lakecdc; set "
                   f"fields.<column>.ignore-retract=true, or ignore-delete=true")
            for kind in kinds:
                if kind == DELETE and is_true(options, "aggregation.remove-record-on-delete"):
                    continue  # a -D removes the whole row instead of retracting fields
                problems[kind] = why + ("" if kind == UPDATE_BEFORE else
                                        ", or aggregation.remove-record-on-delete=true")
    elif engine == "first-row":
        for kind in kinds:
            problems[kind] = "merge-engine=first-row cannot take -U/-D rows: set ignore-delete=true"
    return problems
