"""Flink CDC table selector syntax (lakecdc.selectors.TableSelector)."""

import pytest

from lakecdc.errors import PipelineConfigError
from lakecdc.model import TableId
from lakecdc.selectors import TableSelector


def ids(*names):
    return [TableId.parse(n) for n in names]


def matching(selector, *names):
    s = TableSelector(selector)
    return [str(t) for t in ids(*names) if s.matches(t)]


def test_exact_two_part_pattern():
    assert matching("inventory.orders", "inventory.orders", "inventory.orders2", "other.orders") == [
        "inventory.orders"]


def test_escaped_dot_is_any_character():
    assert matching(r"app_db.\.*", "app_db.a", "app_db.orders_1", "app_dbx.a") == ["app_db.a", "app_db.orders_1"]
    # \. inside a part is the regex '.', so it matches any single character, including a literal dot's place
    assert matching(r"db.order\.x", "db.order_x", "db.orderAx", "db.orderx") == ["db.order_x", "db.orderAx"]


def test_plain_dot_splits_database_and_table():
    # unescaped '.' separates the parts: 'a.b' means database a, table b, never the regex '.'
    assert matching("inventory.orders", "inventoryXorders.t") == []


def test_regex_parts_full_match():
    assert matching("db[1-2].order_[0-9]+", "db1.order_1", "db2.order_22", "db3.order_1", "db1.order_x",
                    "db1.order_1x") == ["db1.order_1", "db2.order_22"]
    # [app|web] is a character class, as in the Flink CDC docs
    assert matching(r"[app|web].order_\.*", "a.order_1", "w.order_2", "app.order_1") == ["a.order_1", "w.order_2"]


def test_case_insensitive():
    assert matching("Inventory.ORDERS", "inventory.orders", "INVENTORY.Orders") == [
        "inventory.orders", "INVENTORY.Orders"]


def test_comma_separated_patterns_and_whitespace():
    assert matching("db.a, db.b ,other.\\.*", "db.a", "db.b", "db.c", "other.x") == ["db.a", "db.b", "other.x"]


def test_escaped_comma_is_literal():
    # '\,' is a literal comma inside a regex (here a quantifier {1,2}), not a pattern separator
    assert matching(r"db.t[0-9]{1\,2}", "db.t1", "db.t12", "db.t123") == ["db.t1", "db.t12"]


@pytest.mark.parametrize("selector", ["orders", "ns.db.orders", "db.a, orders"])
def test_one_and_three_part_patterns_are_refused(selector):
    # Flink CDC matches no MySQL table (database.table) with them: an error instead of silently matching nothing
    with pytest.raises(PipelineConfigError) as err:
        TableSelector(selector, file="p.yaml", path="source.tables")
    assert "p.yaml: source.tables:" in str(err.value) and "'database.table'" in str(err.value)


def test_first_matching_transform_rule_with_regex_selectors():
    from lakecdc.transform import TransformRuleConfig, select_rule

    rules = [TransformRuleConfig(index=0, source_table=r"shop.order_[0-9]+", filter="id > 1"),
             TransformRuleConfig(index=1, source_table=r"SHOP.\.*"),
             TransformRuleConfig(index=2, source_table=r"shop.order_1")]
    assert select_rule(rules, TableId("shop", "order_1")).index == 0  # first match wins, later rules ignored
    assert select_rule(rules, TableId("Shop", "customers")).index == 1  # case-insensitive
    assert select_rule(rules, TableId("other", "order_1")) is None


def test_invalid_regex_names_selector():
    with pytest.raises(PipelineConfigError) as err:
        TableSelector("db.order_[0-9", path="transform[0].source-table")
    assert "db.order_[0-9" in str(err.value)
    assert "transform[0].source-table" in str(err.value)


def test_too_many_parts_and_empty():
    with pytest.raises(PipelineConfigError):
        TableSelector("a.b.c.d")
    with pytest.raises(PipelineConfigError):
        TableSelector(" , ")
