"""Randomised differential test: random transactions applied to MySQL in rounds, each round followed by a
micro-batch; after every round each Paimon table (read by pypaimon-rust's SQL engine) equals its MySQL table.

The workload: inserts, updates (to and from NULL), primary-key changes (also of a composite key and of a
case-insensitive text key), deletes, re-inserts of deleted keys, statements touching many rows, rolled-back
transactions, rounds without any change, tiny rounds (one statement) and large ones (thousands of rows), over three
tables with different keys and bucket settings.

Seeds: 8 in CI (three rounds each; the seed sets the table's bucket setting and the shapes of the second and third
round, so that the eight seeds between them pair every bucket setting and round shape; see ``round_size``), 200 with
``LAKECDC_LONG=1`` (more rounds, every shape drawn), or ``LAKECDC_SEED=n[,m]`` to replay; the seed and round are in
the test id and every assertion message.

Binlog forms real servers write, drawn per round and statement from a second generator of the seed (so the
workload itself does not depend on them): rounds logged with MariaDB's compressed events (log_bin_compress), writer
sessions with binlog_row_image NOBLOB or MINIMAL for the statements whose images stay whole under it (tables without
BLOB/TEXT columns; INSERTs that set every column), statements and DDL with leading, inline and executable comments,
and a trigger (every DELETE of ``items`` counts into ``tags``) whose rows the binlog logs with the statement's.

Schema changes: ``ROUND_DDL`` is the hook for DDL in rounds: each function there gets ``(rng, db, round)`` and
returns statements run before that round's transactions. Columns are compared as MySQL has them at that moment.
"""

import os
import random
from decimal import Decimal
from typing import Callable

import pytest

from tests.crosscheck import assert_same_rows, seeds
from lakecdc.config import parse_pipeline
from lakecdc.runtime import run_micro_batch

pytestmark = pytest.mark.slow  # random workloads against MySQL

PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: root
  password: ""
  tables: {db}.items, {db}.pairs, {db}.tags
  server-id: 5601
  scan.incremental.snapshot.chunk.size: 64
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {warehouse}
  table.properties.bucket: "{bucket}"
pipeline:
  name: differential {db}
"""

TABLES = {
    "items": "CREATE TABLE items (id INT PRIMARY KEY, k INT, v VARCHAR(40), amount DECIMAL(10,2), ts DATETIME(3), "
             "flag TINYINT(1), blob_col VARBINARY(64))",
    "pairs": "CREATE TABLE pairs (a INT, b INT, note VARCHAR(10), PRIMARY KEY (a, b))",
    "tags": "CREATE TABLE tags (name VARCHAR(16) PRIMARY KEY, hits BIGINT NOT NULL, label TEXT)",
}
LONG = os.environ.get("LAKECDC_LONG", "") not in ("", "0")
ROUNDS = 8 if LONG else 3
SEEDS = seeds(8, 200)
BUCKETS = (-1, 2, -1, 3)
NAMES = ["a", "A", "b", "ß", "ss", "é", "e", "x y", "Zed", "zed", "😀", "t'q"]



def add_and_widen_columns(rng: random.Random, db: str, round_number: int) -> list[str]:
    """Schema changes the workload survives (it names its columns): a new nullable column at a random position
    (lenient mode puts it last in Paimon; columns are compared by name), then wider types."""
    if round_number == 1 and rng.random() < 0.7:
        where = rng.choice(["FIRST", "AFTER k", "AFTER blob_col", ""])
        return [f"ALTER TABLE `{db}`.items ADD COLUMN extra INT {where}".strip()]
    if round_number == 2 and rng.random() < 0.7:
        return [f"ALTER TABLE `{db}`.items MODIFY COLUMN k BIGINT", f"ALTER TABLE `{db}`.pairs MODIFY COLUMN note "
                "VARCHAR(30)"]
    return []


# DDL in rounds: functions (rng, db, round) -> statements run before the round's transactions
ROUND_DDL: list[Callable[[random.Random, str, int], list[str]]] = [add_and_widen_columns]


def random_value(rng: random.Random, column: str):
    if rng.random() < 0.15:
        return None
    if column == "k":
        return rng.randint(-5, 5)
    if column == "v":
        return rng.choice(["", "x", "héllo", "😀 emoji", "a,b", "quote'd", "back`tick", "long" * 10])
    if column == "amount":
        return Decimal(rng.randint(-100000, 100000)) / 100
    if column == "ts":
        return f"2026-0{rng.randint(1, 9)}-1{rng.randint(0, 9)} 0{rng.randint(0, 9)}:30:00.{rng.randint(0, 999):03d}"
    if column == "flag":
        return rng.randint(0, 1)
    if column == "blob_col":
        return rng.choice([b"", b"\x00\xff", bytes(range(64)), b"abc"])
    if column in ("note", "label"):
        return rng.choice(["n1", "n2", "ü", "", "x" * 10])
    raise KeyError(column)


ITEM_VALUES = ("k", "v", "amount", "ts", "flag", "blob_col")


TRIGGER = ("CREATE TRIGGER items_deleted AFTER DELETE ON items FOR EACH ROW INSERT INTO tags VALUES ('deleted', 1, "
           "NULL) ON DUPLICATE KEY UPDATE hits = hits + 1")


class Forms:
    """The binlog forms of one seed: compressed rounds, partial-image sessions, comments."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed * 7919 + 1)

    def compressed_round(self) -> bool:
        return self.rng.random() < 0.5

    def commented(self, statement: str) -> str:
        choice = self.rng.random()
        if choice < 0.2:
            return f"/* app:{self.rng.randint(1, 99)} */ {statement}"
        if choice < 0.3:
            return f"{statement} -- from the workload"
        if choice < 0.35:
            return f"/*!40000 {statement} */"
        return statement

    def row_image(self, statement: str, db: str, items_widened: bool) -> str:
        """A session binlog_row_image under which this statement's images stay whole (``items_widened``: a DDL
        added a column to items, which the workload's INSERTs do not set)."""
        if self.rng.random() < 0.6:
            return "FULL"
        if statement.startswith(f"INSERT IGNORE INTO `{db}`.items (id, ") and not items_widened:
            return self.rng.choice(["NOBLOB", "MINIMAL"])  # sets every column; items has no BLOB/TEXT column
        if f"`{db}`.pairs" in statement or (f"`{db}`.items" in statement and not statement.startswith("DELETE")):
            return "NOBLOB"  # no BLOB/TEXT column (a DELETE of items fires the trigger, which writes tags' TEXT)
        return "FULL"


class Workload:
    """Random statements over the three tables; remembers deleted keys so that some get inserted again."""

    def __init__(self, rng: random.Random, db: str):
        self.rng, self.db = rng, db
        self.deleted: list[int] = []

    def statement(self, cur) -> tuple[str, tuple]:
        rng, db = self.rng, self.db
        cur.execute(f"SELECT id FROM `{db}`.items")
        ids = sorted(r[0] for r in cur.fetchall())
        choice = rng.random()
        if choice < 0.25 or not ids:
            new_id = self.deleted.pop(rng.randrange(len(self.deleted))) if self.deleted and rng.random() < 0.4 \
                else rng.randint(1, 60)
            values = tuple(random_value(rng, c) for c in ITEM_VALUES)
            return (f"INSERT IGNORE INTO `{db}`.items (id, {', '.join(ITEM_VALUES)}) VALUES "
                    f"(%s, %s, %s, %s, %s, %s, %s)", (new_id, *values))
        if choice < 0.45:
            column = rng.choice(ITEM_VALUES)
            return f"UPDATE `{db}`.items SET {column} = %s WHERE id = %s", (random_value(rng, column), rng.choice(ids))
        if choice < 0.5:  # primary-key change
            return f"UPDATE IGNORE `{db}`.items SET id = %s WHERE id = %s", (rng.randint(1, 90), rng.choice(ids))
        if choice < 0.53:  # many rows at once
            return f"UPDATE `{db}`.items SET k = COALESCE(k, 0) + 1 WHERE id %% 3 = %s", (rng.randint(0, 2),)
        if choice < 0.63:
            victim = rng.choice(ids)
            self.deleted.append(victim)
            return f"DELETE FROM `{db}`.items WHERE id = %s", (victim,)
        if choice < 0.72:
            return (f"INSERT INTO `{db}`.pairs VALUES (%s, %s, %s) ON DUPLICATE KEY UPDATE note = VALUES(note)",
                    (rng.randint(1, 4), rng.randint(1, 4), random_value(rng, "note")))
        if choice < 0.76:  # composite-key change
            return (f"UPDATE IGNORE `{db}`.pairs SET b = %s WHERE a = %s", (rng.randint(1, 6), rng.randint(1, 4)))
        if choice < 0.8:
            return (f"DELETE FROM `{db}`.pairs WHERE a = %s AND b = %s", (rng.randint(1, 4), rng.randint(1, 4)))
        if choice < 0.9:
            return (f"INSERT INTO `{db}`.tags VALUES (%s, %s, %s) ON DUPLICATE KEY UPDATE hits = hits + 1, "
                    f"label = VALUES(label)", (rng.choice(NAMES), rng.randint(0, 2**40), random_value(rng, "label")))
        if choice < 0.95:  # text-key change (case-insensitive collation: 'a' and 'A' are one key in MySQL)
            return (f"UPDATE IGNORE `{db}`.tags SET name = %s WHERE name = %s", (rng.choice(NAMES), rng.choice(NAMES)))
        return f"DELETE FROM `{db}`.tags WHERE name = %s", (rng.choice(NAMES),)

    def large(self, cur) -> None:
        """Thousands of rows in one transaction."""
        rng, db = self.rng, self.db
        kind = rng.choice(["insert", "update", "delete-reinsert"])
        if kind == "insert":
            start = rng.randint(1000, 5000)
            cur.execute(f"INSERT IGNORE INTO `{db}`.items (id, k, v, amount) SELECT seq, seq % 7, IF(seq % 5 = 0, "
                        f"NULL, CONCAT('bulk', seq)), seq / 100 FROM seq_{start}_to_{start + rng.randint(500, 3000)}")
        elif kind == "update":
            cur.execute(f"UPDATE `{db}`.items SET amount = COALESCE(amount, 0) + 1, v = NULL WHERE MOD(id, 2) = 0")
        else:
            cur.execute(f"DELETE FROM `{db}`.items WHERE id > 900")
            cur.execute(f"INSERT INTO `{db}`.items (id, k) SELECT seq, 1 FROM seq_1000_to_2500")


def round_size(rng: random.Random, round_number: int, seed: int) -> str:
    """CI's three rounds: a normal one (the first run snapshots it), then a tiny, empty or normal one (by ``seed % 3``)
    and a large or normal one (by ``seed // 3 % 2``): with the bucket setting (``seed % 4``), seeds 1-8 pair every
    bucket setting with both third-round shapes and every second-round shape with both third-round shapes. The long
    mode draws every round."""
    if round_number < 3 and not LONG:
        return ("normal", ("tiny", "empty", "normal")[seed % 3], ("large", "normal")[seed // 3 % 2])[round_number]
    return rng.choices(["empty", "tiny", "normal", "large"], weights=(1, 2, 6, 1))[0]


# FULL row metadata with every seed (and the first seed on an s3:// warehouse too: a private S3 server, see
# tests/test_s3.py); MINIMAL (MySQL 8's default) and NO_LOG (MariaDB's) with two seeds each, not the same two
CASES = [("FULL", s, "local") for s in SEEDS] + [("FULL", SEEDS[0], "s3")] + \
    [(m, SEEDS[i % len(SEEDS)], "local") for m, first in (("MINIMAL", 0), ("NO_LOG", 2)) for i in (first, first + 1)]


@pytest.mark.parametrize("row_metadata,seed,storage", CASES)
def test_random_transactions_match_mysql(source_server, source_db, tmp_path, row_metadata, seed, storage, request):
    rng = random.Random(seed)
    mariadb, db = source_server, source_db
    for create in TABLES.values():
        mariadb.execute(create, database=db)
    mariadb.execute(TRIGGER, database=db)
    forms = Forms(seed)
    items_widened = False
    compress_setting = mariadb.execute("SELECT @@GLOBAL.log_bin_compress, @@GLOBAL.log_bin_compress_min_len")[0]
    bucket = BUCKETS[seed % len(BUCKETS)]
    warehouse = tmp_path / "wh"
    if storage == "s3":
        s3 = request.getfixturevalue("s3_server")
        warehouse = s3.warehouse_yaml(f"s3://{s3.new_bucket()}/wh")
    config = parse_pipeline(PIPELINE.format(port=mariadb.port, db=db, warehouse=warehouse, bucket=bucket))
    workload = Workload(rng, db)
    conn = mariadb.connect(db)
    conn.autocommit(False)
    try:
        for round_number in range(ROUNDS):
            context = f"seed {seed} (replay: LAKECDC_SEED={seed}), bucket {bucket}, round {round_number}"
            compressed = forms.compressed_round()
            mariadb.execute(f"SET GLOBAL log_bin_compress = {'ON' if compressed else 'OFF'}")
            mariadb.execute("SET GLOBAL log_bin_compress_min_len = 10")
            context += ", compressed" if compressed else ""
            for hook in ROUND_DDL:
                for statement in hook(rng, db, round_number):
                    conn.commit()  # DDL waits for every open transaction on the table (metadata lock)
                    with conn.cursor() as cur:
                        cur.execute(forms.commented(statement))
                    items_widened = items_widened or "ADD COLUMN" in statement

            def execute(cur, statement: str, args: tuple, widened: bool = items_widened) -> None:
                cur.execute(f"SET SESSION binlog_row_image = '{forms.row_image(statement, db, widened)}'")
                cur.execute(forms.commented(statement), args)

            size = round_size(rng, round_number, seed)
            with conn.cursor() as cur:
                if size == "tiny":
                    execute(cur, *workload.statement(cur))
                    conn.commit()
                elif size == "large":
                    cur.execute("SET SESSION binlog_row_image = 'FULL'")
                    workload.large(cur)
                    conn.commit()
                elif size == "normal":
                    for _ in range(rng.randint(1, 10)):
                        for _ in range(rng.choice([1, 1, 2, 5, 20])):
                            execute(cur, *workload.statement(cur))
                        if rng.random() < 0.1:
                            conn.rollback()
                        else:
                            conn.commit()
            conn.commit()  # also ends the read view of the comparisons below
            run_micro_batch(config)
            for table in TABLES:
                assert_same_rows(conn, config.sink.catalog_options, db, table, context=f"{context} ({size})")
    finally:
        conn.close()
        mariadb.execute("SET GLOBAL log_bin_compress = %s, GLOBAL log_bin_compress_min_len = %s", compress_setting)
