"""Downstream of the tutorial's Paimon table: the total of the orders of each day, kept from the table's changes.

``analytics/daily_order_totals`` reads ``paimon/inventory/orders`` through ``PaimonChangesIOManager``: each
materialisation gets the changes committed since its own last successful materialisation (its Paimon consumer
``dagster-analytics.daily_order_totals``) and the value it stored then, and applies the one to the other. It runs
by itself after every materialisation of the orders table (``AutomationCondition.eager()``, with Dagster's
automation sensor on): no schedule.

The tutorial's table uses the default changelog producer (``none``): a change read shows the new row of an updated
order, not the old one, so the value kept is each live order's contribution (id, order day, price) beside the
totals, and an update replaces the order's contribution. A soft delete (the tutorial's ``SOFT_DELETE``: the row
stays, ``op_type = '-D'``) removes the contribution, and so does a ``-U``/``-D`` row (an order whose day changed
leaves its old key with a ``-D``). With ``changelog-producer: input`` the same code gets ``-U``/``+U`` pairs.
"""

from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.dagster import PaimonChanges, PaimonChangesIOManager

ORDERS = dg.AssetKey(["paimon", "inventory", "orders"])
TOTALS = dg.AssetKey(["analytics", "daily_order_totals"])
IO_MANAGER = "paimon_changes"
KEY = ["id", "order_day"]
DELETED = "-D"  # the tutorial's op_type of a soft-deleted order


def apply_changes(contributions: pa.Table | None, rows: pa.Table) -> pa.Table:
    """The live orders' (id, order_day, price) after the change ``rows`` (commit order): per key, its last change
    decides; an insert or update of an order not soft-deleted sets its contribution, anything else removes it."""
    numbered = rows.append_column("_n", pa.array(range(rows.num_rows), pa.int64()))
    last = numbered.group_by(KEY).aggregate([("_n", "max")]).column("_n_max")
    latest = numbered.take(last)
    live = latest.filter(pc.and_(pc.is_in(latest.column("rowkind"), pa.array(["+I", "+U"])),
                                 pc.not_equal(latest.column("op_type"), DELETED)))
    live = live.select([*KEY, "price"])
    if contributions is None:
        return live
    kept = contributions.join(latest.select(KEY), KEY, join_type="left anti")
    return pa.concat_tables([kept.select([*KEY, "price"]), live]).combine_chunks()


def daily_totals(contributions: pa.Table) -> pa.Table:
    """order_day, orders, total: the live orders of each day."""
    grouped = contributions.group_by("order_day").aggregate([("id", "count"), ("price", "sum")])
    totals = grouped.rename_columns({"id_count": "orders", "price_sum": "total"})
    return totals.select(["order_day", "orders", "total"]).sort_by("order_day")


@dg.asset(key=TOTALS, group_name="analytics", io_manager_key=IO_MANAGER,
          ins={"orders": dg.AssetIn(ORDERS, input_manager_key=IO_MANAGER)},
          automation_condition=dg.AutomationCondition.eager(),
          description="Orders and their total per day, kept from the changes of paimon/inventory/orders")
def daily_order_totals(context: dg.AssetExecutionContext, orders: PaimonChanges) -> dict:
    previous = None if orders.full or orders.previous is None else orders.previous["contributions"]
    contributions = apply_changes(previous, orders.rows)
    totals = daily_totals(contributions)
    context.add_output_metadata({"days": totals.num_rows, "orders": contributions.num_rows,
                                 "totals": dg.MetadataValue.md(_markdown(totals))})
    return {"contributions": contributions, "totals": totals}


def _markdown(totals: pa.Table) -> str:
    lines = ["| order_day | orders | total |", "|---|---|---|"]
    lines += [f"| {r['order_day']} | {r['orders']} | {r['total']} |" for r in totals.to_pylist()]
    return "\n".join(lines)


def example_definitions(warehouse: str | Path) -> dg.Definitions:
    """The example asset and its IO manager, on the tutorial's warehouse."""
    return dg.Definitions(assets=[daily_order_totals],
                          resources={IO_MANAGER: PaimonChangesIOManager(warehouse=str(warehouse))})
