"""Pipeline YAML validation: every error names the file and the key path, and secrets never leak."""

from pathlib import Path

import pytest

from lakecdc.config import load_pipeline, locate_config_error, parse_pipeline
from lakecdc.errors import PipelineConfigError
from lakecdc.model import TableId

ROOT = Path(__file__).resolve().parent.parent

BASE = """
source:
  type: mysql
  hostname: localhost
  port: 3306
  username: root
  password: ${SECRET_PW}
  tables: inventory.orders
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: /tmp/wh
pipeline:
  name: test
"""


def parse(text, **env):
    return parse_pipeline(text, path="p.yaml", env={"SECRET_PW": "hunter2", **env})


def error_of(text, **env) -> str:
    with pytest.raises(PipelineConfigError) as info:
        parse(text, **env)
    message = str(info.value)
    assert "hunter2" not in message
    return message


def test_tutorial_yaml_loads():
    config = load_pipeline(ROOT / "assets" / "tutorial.yaml")
    assert config.name == "Enrich MySQL orders with soft deletes"
    assert config.source.tables == "inventory.orders"
    assert config.source.server_id == 5400
    assert config.source.metadata_list == frozenset({"op_ts"})
    assert config.schema_change_behavior == "evolve"
    assert config.transforms[0].primary_keys == "id, order_day"
    assert config.transforms[0].converter_after_transform == "SOFT_DELETE"
    assert config.sink.catalog_options["metastore"] == "filesystem"
    assert config.slug == "enrich_mysql_orders_with_soft_deletes"


def test_env_substitution_and_defaults():
    config = parse(BASE.replace("port: 3306", "port: ${PORT:-3307}"))
    assert config.source.password == "hunter2"
    assert config.source.port == 3307
    assert "hunter2" not in repr(config.source)
    config = parse(BASE.replace("port: 3306", "port: ${PORT:-3307}"), PORT="4000")
    assert config.source.port == 4000


def test_missing_env_variable_names_key_path():
    message = error_of(BASE.replace("${SECRET_PW}", "${NOT_SET_ANYWHERE}"))
    assert "p.yaml: source.password:" in message and "NOT_SET_ANYWHERE" in message


@pytest.mark.parametrize("change, expected", [
    (("  tables: inventory.orders\n", "  tables: inventory.orders\n  tabels: x\n"),
     "source.tabels: unknown option (did you mean 'tables'?)"),
    (("  hostname: localhost\n", ""), "source.hostname: required option is missing"),
    (("port: 3306", "port: abc"), "source.port: expected an integer"),
    (("type: mysql", "type: postgres"), "source.type: only the 'mysql' source"),
    (("type: paimon", "type: kafka"), "sink.type: only the 'paimon' sink"),
    (("  catalog.properties.metastore: filesystem\n", ""), "sink.catalog.properties.metastore: required"),
    (("  name: test\n", "  name: test\n  schema.change.behavior: sometimes\n"),
     "pipeline.schema.change.behavior: unknown value"),
    (("  name: test\n", "  name: test\n  local-time-zone: Mars/Olympus\n"), "pipeline.local-time-zone"),
    (("pipeline:\n  name: test\n", "pipelines:\n  name: test\n"), "pipelines: unknown option"),
    (("  tables: inventory.orders\n", "  tables: inventory.orders\n  server-id: 54x\n"), "source.server-id"),
    (("  tables: inventory.orders\n", "  tables: inventory.orders\n  metadata.list: op_ts,row_time\n"),
     "[row_time] cannot be found in mysql metadata"),
    (("  tables: inventory.orders\n", "  tables: inventory.orders\n  scan.startup.mode: specific-offset\n"),
     "source.scan.startup.mode: specific-offset needs scan.startup.specific-offset.gtid-set"),
    (("  tables: inventory.orders\n", "  tables: inventory.orders\n  scan.startup.mode: timestamp\n"),
     "source.scan.startup.timestamp-millis: required by scan.startup.mode: timestamp"),
    (("  tables: inventory.orders\n", "  tables: inventory.orders\n  scan.startup.specific-offset.pos: 4\n"),
     "source.scan.startup.specific-offset.pos: only used with scan.startup.mode: specific-offset"),
    (("  tables: inventory.orders\n", "  tables: inventory.orders\n  scan.startup.mode: specific-offset\n"
      "  scan.startup.specific-offset.gtid-set: 0-1-x\n"), "source.scan.startup.specific-offset.gtid-set: invalid"),
    (("  tables: inventory.orders\n", "  tables: inventory.orders\n  scan.newly-added-table.enabled: true\n"
      "  scan.binlog.newly-added-table.enabled: true\n"), "cannot be enabled together"),
    (("  tables: inventory.orders\n", "  tables: inventory.orders\n"
      "  scan.incremental.snapshot.chunk.key-column: inventory.orders\n"), "expected 'database.table:column'"),
])
def test_errors_name_file_and_path(change, expected):
    old, new = change
    assert old in BASE
    message = error_of(BASE.replace(old, new))
    assert message.startswith("p.yaml: ")
    assert expected in message


def test_transform_errors_name_rule_and_key():
    text = BASE + """
transform:
  - source-table: inventory.orders
    projection: "*, NO_SUCH_FUNCTION(product) AS x"
"""
    message = error_of(text)
    assert "transform[0].projection" in message and "NO_SUCH_FUNCTION" in message.upper()
    message = error_of(BASE + """
transform:
  - source-table: inventory.orders
    projetcion: "*"
""")
    assert "transform[0].projetcion: unknown option" in message


def test_bad_yaml_names_line():
    message = error_of("source: [unclosed\n")
    assert message.startswith("p.yaml: not valid YAML at line")


def test_partition_key_option():
    config = parse(BASE.replace("  catalog.properties.warehouse: /tmp/wh\n",
                                "  catalog.properties.warehouse: /tmp/wh\n  partition.key: a.b:c1,c2;d.e:f\n"))
    assert config.sink.partition_keys == {TableId("a", "b"): ["c1", "c2"], TableId("d", "e"): ["f"]}
    assert "sink.partition.key" in error_of(BASE.replace(
        "  catalog.properties.warehouse: /tmp/wh\n", "  catalog.properties.warehouse: /tmp/wh\n  partition.key: ab\n"))


# ----------------------------------------------------------------------- options as Flink CDC means them (issue 16)

def test_schema_change_disabled_means_no_schema_change_reaches_the_sink():
    config = parse(BASE.replace("  tables: inventory.orders",
                                "  tables: inventory.orders\n  schema-change.enabled: false"))
    assert config.schema_change_behavior == "ignore"
    assert parse(BASE).schema_change_behavior == "lenient"


def test_include_comments_enabled_defaults_to_false():
    config = parse(BASE.replace("  tables: inventory.orders", "  tables: inventory.orders\n"
                                                              "  include-comments.enabled: true"))
    assert config.source.include_comments is True
    assert parse(BASE).source.include_comments is False


def test_sink_level_merge_engine_that_cannot_take_updates_fails_validation():
    text = BASE.replace("  catalog.properties.warehouse: /tmp/wh",
                        "  catalog.properties.warehouse: /tmp/wh\n  table.properties.merge-engine: partial-update")
    message = error_of(text)
    assert "sink.table.properties" in message and "partial-update" in message and "ignore-delete" in message
    # with ignore-delete the same engine takes them (they are dropped)
    parse(text.replace("merge-engine: partial-update", "merge-engine: partial-update\n"
                                                       "  table.properties.ignore-delete: 'true'"))


# ------------------------------------------------------------- options are declared once, by their connector (issue 15)

def test_the_docs_option_tables_are_rendered_from_the_declarations():
    """docs/pipeline-yaml.md's option tables are what the declarations render: a declared option is documented, a
    documented one is declared (run scripts/options_doc.py after changing a declaration)."""
    from lakecdc.config import OPTION_TABLES
    from lakecdc.options import render_doc

    doc = (ROOT / "docs" / "pipeline-yaml.md").read_text(encoding="utf-8")
    assert render_doc(doc, OPTION_TABLES) == doc, "docs/pipeline-yaml.md is stale: run scripts/options_doc.py"
    for name, specs in OPTION_TABLES.items():
        assert f"<!-- options: {name} " in doc
        for spec in specs:
            assert f"| `{spec.key}`" in doc


@pytest.mark.parametrize("section, anchor", [("source", "  tables: inventory.orders\n"),
                                             ("sink", "  catalog.properties.warehouse: /tmp/wh\n"),
                                             ("pipeline", "  name: test\n")])
def test_the_parser_reads_the_declared_options(section, anchor):
    """Every declared option of a block, written with the default the docs show, is accepted and changes nothing;
    a key that is not declared is refused naming the closest declared one."""
    from lakecdc.config import OPTION_TABLES
    from lakecdc.options import Option
    from lakecdc.source.options import REFUSED, StartupConfig, declarations

    plain = parse(BASE)
    mode_only = declarations(StartupConfig)[1:]  # refused unless scan.startup.mode needs them
    written = [spec for spec in OPTION_TABLES[section] if isinstance(spec, Option) and spec.default_text[0] == "`"
               and spec not in (*REFUSED, *mode_only) and f"\n  {spec.key}:" not in BASE]
    assert written
    lines = "".join(f"  {spec.key}: '{spec.default_text.strip('`')}'\n" for spec in written)
    assert parse(BASE.replace(anchor, anchor + lines)) == plain
    for spec in written:
        message = error_of(BASE.replace(anchor, f"{anchor}  {spec.key}s: 1\n"))
        assert f"{section}.{spec.key}s: unknown option (did you mean '{spec.key}'?)" in message


@pytest.mark.parametrize("style", ["folded", "literal", "plain", "single-quoted", "filter", "double-quoted"])
def test_expression_error_names_the_file_line_and_column(style):
    """An error inside a transform expression is located in the file: the faulty part of the expression, through
    YAML's folding of block and multi-line plain scalars and a single-quoted scalar's '' (a double-quoted one with
    escapes would name the key's line)."""
    expression = {"folded": "projection: >-\n      id,\n      UPPER(product AS up,\n      'x''s' AS q",
                  "literal": "projection: |\n      id,\n      UPPER(product AS up,\n      'x''s' AS q",
                  "plain": "projection: id,\n      UPPER(product AS up,\n      'x''s' AS q",
                  "single-quoted": "projection: 'id,\n      UPPER(product AS up,\n      ''x''''s'' AS q'",
                  "filter": "filter: id > 0 AND\n      FOO(product) > 1",
                  "double-quoted": 'projection: "id,\\tUPPER(product AS up"'}[style]
    text = BASE.replace("pipeline:", f"transform:\n  - source-table: inventory.orders\n    {expression}\npipeline:")
    with pytest.raises(PipelineConfigError) as info:
        parse(text)
    location = locate_config_error(info.value, text)
    lines = text.splitlines()
    faulty = "FOO(" if style == "filter" else "(product AS"  # the unknown function; the parenthesis left open
    line = next(i for i, line in enumerate(lines, 1) if faulty in line)
    if style == "double-quoted":  # the escape \t is one character of the value: the key's line, no column
        assert (location.line, location.column) == (line, None), location
        return
    assert (location.line, location.column) == (line, lines[line - 1].index(faulty) + 1), location
    assert "[at line" not in location.message and f"line {line}, column {location.column}" in location.text()
