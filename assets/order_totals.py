"""Downstream of the tutorial's Paimon table: the orders and their total per day, kept from the table's changes.

``analytics/daily_order_totals`` reads ``paimon/inventory/orders`` through ``PaimonChangesIOManager``: each
materialisation gets the changes committed since its own last successful materialisation (its Paimon consumer
``dagster-analytics.daily_order_totals``) and the totals it stored then, and adds the one to the other. It runs by
itself after every materialisation of the orders table (``AutomationCondition.eager()``, evaluated by the
``order_totals_automation`` sensor, running by default): no schedule.

The tutorial's table has the default changelog producer (``none``): its commits hold each changed order's new row
only. ``before_images=True`` has each change read look the previous row of those orders up (in the snapshot before
the commit), so an update comes as ``-U`` (old row) and ``+U`` (new row), a delete of a key as ``-D`` with the
deleted row: the totals need no copy of the orders. The tutorial's ``SOFT_DELETE`` keeps a deleted order as a row
with ``op_type = '-D'``, which counts for nothing; an order whose day changed leaves its old key with a ``-D``.
"""

from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.dagster import PaimonChanges, PaimonChangesIOManager

ORDERS = dg.AssetKey(["paimon", "inventory", "orders"])
TOTALS = dg.AssetKey(["analytics", "daily_order_totals"])
IO_MANAGER = "paimon_changes"
DELETED = "-D"  # the tutorial's op_type of a soft-deleted order
MONEY = pa.decimal128(18, 2)


def apply_changes(totals: pa.Table | None, rows: pa.Table) -> pa.Table:
    """order_day, orders, total after the change ``rows`` (with before images): each row of an order that is not
    soft-deleted adds itself (``+I``, ``+U``) or takes itself away (``-U``, ``-D``)."""
    live = rows.filter(pc.not_equal(rows.column("op_type"), DELETED))
    adds = pc.is_in(live.column("rowkind"), pa.array(["+I", "+U"]))
    price = live.column("price").cast(MONEY)
    delta = pa.table({"order_day": live.column("order_day"),
                      "orders": pc.if_else(adds, 1, -1).cast(pa.int64()),
                      "total": pc.if_else(adds, price, pc.negate(price))})
    if totals is not None:
        delta = pa.concat_tables([totals.cast(delta.schema), delta])
    summed = delta.group_by("order_day").aggregate([("orders", "sum"), ("total", "sum")])
    summed = summed.rename_columns({"orders_sum": "orders", "total_sum": "total"})
    summed = summed.filter(pc.not_equal(summed.column("orders"), 0))  # days whose orders are all gone
    return summed.select(["order_day", "orders", "total"]).cast(_SCHEMA).sort_by("order_day")


_SCHEMA = pa.schema([("order_day", pa.string()), ("orders", pa.int64()), ("total", MONEY)])


def daily_totals(orders: pa.Table) -> pa.Table:
    """The same totals computed from scratch from live orders (order_day, price): what the asset must equal."""
    grouped = orders.group_by("order_day").aggregate([("order_day", "count"), ("price", "sum")])
    totals = grouped.rename_columns({"order_day_count": "orders", "price_sum": "total"})
    return totals.select(["order_day", "orders", "total"]).cast(_SCHEMA).sort_by("order_day")


@dg.asset(key=TOTALS, group_name="analytics", io_manager_key=IO_MANAGER,
          ins={"orders": dg.AssetIn(ORDERS, input_manager_key=IO_MANAGER)},
          automation_condition=dg.AutomationCondition.eager(),
          description="Orders and their total per day, kept from the changes of paimon/inventory/orders")
def daily_order_totals(context: dg.AssetExecutionContext, orders: PaimonChanges) -> pa.Table:
    totals = apply_changes(None if orders.full else orders.previous, orders.rows)
    context.add_output_metadata({"days": totals.num_rows, "totals": dg.MetadataValue.md(_markdown(totals))})
    return totals


def _markdown(totals: pa.Table) -> str:
    lines = ["| order_day | orders | total |", "|---|---|---|"]
    lines += [f"| {r['order_day']} | {r['orders']} | {r['total']} |" for r in totals.to_pylist()]
    return "\n".join(lines)


# Evaluates the asset's automation condition; running from the start (Dagster's default automation sensor, which
# would otherwise pick the asset up, starts stopped), so no schedule and no switch in the UI is needed.
automation = dg.AutomationConditionSensorDefinition(
    "order_totals_automation", target=dg.AssetSelection.assets(TOTALS),
    default_status=dg.DefaultSensorStatus.RUNNING, minimum_interval_seconds=30)


def example_definitions(warehouse: str | Path) -> dg.Definitions:
    """The example asset, its automation sensor and its IO manager (change reads with before images), on the
    tutorial's warehouse."""
    return dg.Definitions(assets=[daily_order_totals], sensors=[automation],
                          resources={IO_MANAGER: PaimonChangesIOManager(warehouse=str(warehouse),
                                                                        before_images=True)})
