"""Benchmark: the tutorial's transform rule over N rows against the same work hand-written with pyarrow.compute.

Prints rows/s for both and their ratio (measured in the same run, so machine noise affects both alike).
Usage: .venv/bin/python -m bench.transform_bench [ROWS]
"""

import sys
import time
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.model import OP_COLUMN, OP_TS_COLUMN, ChangeBatch, SourceColumn, SourceTable, TableId
from lakecdc.transform import TransformContext, TransformRuleConfig, compile_transform

PROJECTION = """*,
  CONCAT_WS('.', __namespace_name__, __schema_name__, __table_name__) AS source_table,
  op_ts AS source_ts,
  __data_event_type__ AS op_type,
  UPPER(product) AS product_upper,
  DATE_FORMAT(created_at, 'yyyyMMdd') AS order_day"""


def make_batch(rows: int) -> ChangeBatch:
    table = SourceTable(TableId("inventory", "orders"), (
        SourceColumn("id", "bigint", pa.int64(), False),
        SourceColumn("product", "varchar(100)", pa.string(), False),
        SourceColumn("price", "decimal(10,2)", pa.decimal128(10, 2), False),
        SourceColumn("created_at", "datetime(3)", pa.timestamp("ms"), False),
    ), ("id",))
    rng = np.random.default_rng(7)
    products = np.array(["book", "pen", "pencil", "notebook", "blue pen"])
    start = np.datetime64("2026-01-01T00:00:00.000")
    data = pa.table({
        "id": pa.array(np.arange(rows, dtype=np.int64)),
        "product": pa.array(products[rng.integers(0, len(products), rows)]),
        "price": pa.array([Decimal("29.90")] * rows, pa.decimal128(10, 2)),
        "created_at": pa.array(start + rng.integers(0, 86_400_000 * 60, rows).astype("timedelta64[ms]")),
        OP_COLUMN: pa.array(["+I"] * rows),
        OP_TS_COLUMN: pa.array(np.full(rows, 1_767_225_600_000, dtype=np.int64)),
    })
    return ChangeBatch(table, data)


def hand_written(batch: ChangeBatch) -> pa.Table:
    data = batch.data
    rows = data.num_rows
    return pa.table({
        "id": data["id"], "product": data["product"], "price": data["price"], "created_at": data["created_at"],
        "source_table": pa.repeat(pa.scalar("inventory.orders"), rows),
        "source_ts": data[OP_TS_COLUMN],
        "op_type": data[OP_COLUMN],
        "product_upper": pc.utf8_upper(data["product"]),
        "order_day": pc.strftime(data["created_at"], format="%Y%m%d"),
        OP_COLUMN: data[OP_COLUMN],
    })


def best_of(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def measure(rows: int) -> tuple[float, float]:
    """Best-of-3 seconds of the compiled tutorial rule and of the hand-written reference over ``rows`` rows (their
    results are checked equal first)."""
    batch = make_batch(rows)
    rule = TransformRuleConfig(index=0, source_table="inventory.orders", projection=PROJECTION,
                               primary_keys="id, order_day", partition_keys="order_day",
                               converter_after_transform="SOFT_DELETE")
    compiled = compile_transform(rule, batch.table, TransformContext(metadata_list=frozenset({"op_ts"})))
    ours = compiled.apply(batch)
    reference = hand_written(batch)
    assert ours.column("order_day").equals(reference.column("order_day"))
    assert ours.column("product_upper").equals(reference.column("product_upper"))
    return best_of(lambda: compiled.apply(batch)), best_of(lambda: hand_written(batch))


def case(rows: int):
    """The suite's transform case (bench/__main__.py)."""
    from bench.common import Case, Reference

    t_ours, t_ref = measure(rows)
    return Case(f"tutorial transform over {rows:,} rows (best of 3)", "rows/s", "lakecdc transform rule", t_ours,
                rows, [Reference("hand-written pyarrow.compute", t_ref, rows)])


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    t_ours, t_ref = measure(rows)
    print(f"tutorial transform, {rows:,} rows")
    print(f"  lakecdc transform      {rows / t_ours:>12,.0f} rows/s  ({t_ours:.3f} s)")
    print(f"  hand-written pyarrow   {rows / t_ref:>12,.0f} rows/s  ({t_ref:.3f} s)")
    print(f"  ratio lakecdc/reference: {t_ref / t_ours:.2f}x of the reference speed")


if __name__ == "__main__":
    main()
