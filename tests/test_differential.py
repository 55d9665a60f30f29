"""Randomised differential test: random transactions applied to MySQL in rounds, each round followed by a
micro-batch; after every round the Paimon tables (read by pypaimon-rust's SQL engine) equal the MySQL tables.

The seed of a failing case is in the test id, so it can be replayed with ``-k``.
"""

import random
from decimal import Decimal

import pytest

from lakecdc.config import parse_pipeline
from lakecdc.runtime import run_micro_batch
from lakecdc.sink.sql import run_sql

PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: root
  password: ""
  tables: {db}.items, {db}.pairs
  server-id: 5601
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {warehouse}
  table.properties.bucket: "{bucket}"
pipeline:
  name: differential {db}
"""

ITEMS = "id, k, v, amount, ts, flag"
PAIRS = "a, b, note"


def random_value(rng: random.Random, column: str):
    if rng.random() < 0.15:
        return None
    if column == "k":
        return rng.randint(-5, 5)
    if column == "v":
        return rng.choice(["", "x", "héllo", "😀 emoji", "a,b", "quote'd", "long" * 10])
    if column == "amount":
        return Decimal(rng.randint(-100000, 100000)) / 100
    if column == "ts":
        return f"2026-0{rng.randint(1, 9)}-1{rng.randint(0, 9)} 0{rng.randint(0, 9)}:30:00.{rng.randint(0, 999):03d}"
    if column == "flag":
        return rng.randint(0, 1)
    if column == "note":
        return rng.choice(["n1", "n2", None, "ü"])
    raise KeyError(column)


def random_statement(rng: random.Random, db: str, ids: set, pairs: set) -> tuple[str, tuple]:
    choice = rng.random()
    if choice < 0.35 or not ids:
        new_id = rng.randint(1, 60)
        values = tuple(random_value(rng, c) for c in ("k", "v", "amount", "ts", "flag"))
        return (f"INSERT IGNORE INTO `{db}`.items ({ITEMS}) VALUES (%s, %s, %s, %s, %s, %s)", (new_id, *values))
    if choice < 0.6:
        column = rng.choice(["k", "v", "amount", "ts", "flag"])
        return (f"UPDATE `{db}`.items SET {column} = %s WHERE id = %s",
                (random_value(rng, column), rng.choice(sorted(ids))))
    if choice < 0.68:  # primary-key change
        return (f"UPDATE IGNORE `{db}`.items SET id = %s WHERE id = %s", (rng.randint(61, 90), rng.choice(sorted(ids))))
    if choice < 0.72:  # many rows at once
        return (f"UPDATE `{db}`.items SET k = COALESCE(k, 0) + 1 WHERE id %% 3 = %s", (rng.randint(0, 2),))
    if choice < 0.85:
        return (f"DELETE FROM `{db}`.items WHERE id = %s", (rng.choice(sorted(ids)),))
    if choice < 0.95 or not pairs:
        return (f"INSERT IGNORE INTO `{db}`.pairs ({PAIRS}) VALUES (%s, %s, %s)",
                (rng.randint(1, 4), rng.randint(1, 4), random_value(rng, "note")))
    a, b = rng.choice(sorted(pairs))
    return (f"DELETE FROM `{db}`.pairs WHERE a = %s AND b = %s", (a, b))


def mysql_rows(conn, db, table, columns, order):
    with conn.cursor() as cur:
        cur.execute(f"SELECT {columns} FROM `{db}`.{table} ORDER BY {order}")
        return [tuple(_normal(v) for v in row) for row in cur.fetchall()]


def paimon_rows(config, db, table, columns, order):
    result = run_sql(config.sink.catalog_options, f"SELECT {columns} FROM {db}.{table} ORDER BY {order}")
    return [tuple(_normal(v) for v in row.values()) for row in result.to_pylist()]


def _normal(value):
    if isinstance(value, bool):
        return int(value)
    if hasattr(value, "isoformat"):
        return value.isoformat(sep=" ") if hasattr(value, "hour") else value.isoformat()
    return value


@pytest.mark.parametrize("seed, bucket", [(1, -1), (2, 2), (3, -1), (4, 3)])
def test_random_transactions_match_mysql(mariadb, fresh_db, tmp_path, seed, bucket):
    rng = random.Random(seed)
    db = fresh_db
    mariadb.execute(f"CREATE TABLE `{db}`.items (id INT PRIMARY KEY, k INT, v VARCHAR(40), amount DECIMAL(10,2), "
                    "ts DATETIME(3), flag TINYINT(1))")
    mariadb.execute(f"CREATE TABLE `{db}`.pairs (a INT, b INT, note VARCHAR(10), PRIMARY KEY (a, b))")
    config = parse_pipeline(PIPELINE.format(port=mariadb.port, db=db, warehouse=tmp_path / "wh", bucket=bucket))
    conn = mariadb.connect()
    conn.autocommit(False)
    try:
        for round_number in range(8):
            for _ in range(rng.randint(1, 12)):
                with conn.cursor() as cur:
                    cur.execute(f"SELECT id FROM `{db}`.items")
                    ids = {r[0] for r in cur.fetchall()}
                    cur.execute(f"SELECT a, b FROM `{db}`.pairs")
                    pairs = {(r[0], r[1]) for r in cur.fetchall()}
                    for _ in range(rng.choice([1, 1, 2, 5, 20])):
                        cur.execute(*random_statement(rng, db, ids, pairs))
                if rng.random() < 0.1:
                    conn.rollback()
                else:
                    conn.commit()
            run_micro_batch(config)
            context = f"seed {seed}, round {round_number}"
            assert paimon_rows(config, db, "items", ITEMS, "id") == mysql_rows(conn, db, "items", ITEMS, "id"), context
            assert paimon_rows(config, db, "pairs", PAIRS, "a, b") == mysql_rows(conn, db, "pairs", PAIRS, "a, b"), \
                context
    finally:
        conn.close()
