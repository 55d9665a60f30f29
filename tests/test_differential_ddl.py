"""Randomised differential test with schema changes: rounds of random DML mixed with random DDL (ADD COLUMN at a
random position, DROP COLUMN, widening MODIFY, RENAME COLUMN, CHANGE), each round followed by a micro-batch in
``evolve`` mode; after every round the Paimon table has MySQL's columns, in MySQL's order, and MySQL's rows.

Seeds are printed; replay one with LAKECDC_DDL_SEED=<seed>, run more with LAKECDC_LONG=1."""

import os
import random

import pytest

from lakecdc.config import parse_pipeline
from lakecdc.model import TableId
from lakecdc.runtime import run_micro_batch
from lakecdc.sink import PaimonSink
from lakecdc.sink.sql import run_sql

pytestmark = pytest.mark.slow  # random DDL workloads against MySQL

PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: root
  password: ""
  tables: {db}.t
  server-id: 5701
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {warehouse}
pipeline:
  name: ddl differential {db}
  schema.change.behavior: evolve
"""

if os.environ.get("LAKECDC_DDL_SEED"):
    SEEDS = [int(os.environ["LAKECDC_DDL_SEED"])]
elif os.environ.get("LAKECDC_LONG"):
    SEEDS = list(range(100, 150))
else:
    SEEDS = [101, 102]
ROUNDS = 5


class Model:
    """The random workload's view of the table: its columns (name → kind) in order."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.columns = {"c1": "INT", "c2": "VARCHAR(8)"}
        self.next_column = 3
        self.next_id = 1
        self.ids: set[int] = set()

    def value(self, kind: str):
        if self.rng.random() < 0.15:
            return "NULL"
        if kind.startswith("VARCHAR"):
            return "'" + "".join(self.rng.choice("abcxyz") for _ in range(self.rng.randint(0, 6))) + "'"
        if kind == "BIGINT":
            return str(self.rng.randint(-2**40, 2**40))
        return str(self.rng.randint(-1000, 1000))

    def dml(self, db: str) -> list[str]:
        out = []
        for _ in range(self.rng.randint(1, 12)):
            action = self.rng.random()
            if action < 0.45 or not self.ids:
                row_id = self.next_id if self.rng.random() < 0.8 or not self.ids else max(self.ids) + 1
                self.next_id = max(self.next_id, row_id) + 1
                names = ["id"] + list(self.columns)
                values = [str(row_id)] + [self.value(k) for k in self.columns.values()]
                out.append(f"INSERT INTO `{db}`.t ({', '.join(names)}) VALUES ({', '.join(values)})")
                self.ids.add(row_id)
            elif action < 0.8:
                row_id = self.rng.choice(sorted(self.ids))
                name, kind = self.rng.choice(list(self.columns.items()))
                out.append(f"UPDATE `{db}`.t SET {name} = {self.value(kind)} WHERE id = {row_id}")
            else:
                row_id = self.rng.choice(sorted(self.ids))
                out.append(f"DELETE FROM `{db}`.t WHERE id = {row_id}")
                self.ids.discard(row_id)
        return out

    def ddl(self, db: str) -> list[str]:
        action = self.rng.random()
        names = list(self.columns)
        if action < 0.35 or len(names) < 2:
            name = f"c{self.next_column}"
            self.next_column += 1
            kind = self.rng.choice(["INT", "VARCHAR(8)", "BIGINT"])
            where = self.rng.choice(["", " FIRST", f" AFTER {self.rng.choice(['id'] + names)}"])
            if where == " FIRST":
                where = " AFTER id"  # the key stays first, so rows compare by position
            self.columns = _insert(self.columns, name, kind, where)
            return [f"ALTER TABLE `{db}`.t ADD COLUMN {name} {kind}{where}"]
        if action < 0.55:
            name = self.rng.choice(names)
            del self.columns[name]
            return [f"ALTER TABLE `{db}`.t DROP COLUMN {name}"]
        if action < 0.75:
            name = self.rng.choice(names)
            kind = self.columns[name]
            wider = {"INT": "BIGINT", "VARCHAR(8)": "VARCHAR(20)", "BIGINT": "BIGINT", "VARCHAR(20)": "VARCHAR(20)"}
            self.columns[name] = wider[kind]
            return [f"ALTER TABLE `{db}`.t MODIFY COLUMN {name} {wider[kind]}"]
        old = self.rng.choice(names)
        new = f"c{self.next_column}"
        self.next_column += 1
        self.columns = {new if k == old else k: v for k, v in self.columns.items()}
        if self.rng.random() < 0.5:
            return [f"ALTER TABLE `{db}`.t RENAME COLUMN {old} TO {new}"]
        return [f"ALTER TABLE `{db}`.t CHANGE COLUMN {old} {new} {self.columns[new]}"]


def _insert(columns: dict, name: str, kind: str, where: str) -> dict:
    items = list(columns.items())
    if where.startswith(" AFTER "):
        after = where.split()[-1]
        index = 0 if after == "id" else [k for k, _ in items].index(after) + 1
        items.insert(index, (name, kind))
    else:
        items.append((name, kind))
    return dict(items)


def mysql_state(mariadb, db):
    columns = [r[0] for r in mariadb.execute(
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = 't' "
        "ORDER BY ORDINAL_POSITION", (db,))]
    rows = sorted(tuple(r) for r in mariadb.execute(f"SELECT * FROM `{db}`.t"))
    return columns, rows


# every seed with FULL row metadata; one each with MINIMAL (MySQL 8's default) and NO_LOG (MariaDB's): rows are
# then decoded by position with the schema history the DDL statements keep current
CASES = [("FULL", s) for s in SEEDS] + [("MINIMAL", SEEDS[0]), ("NO_LOG", SEEDS[-1])]


@pytest.mark.parametrize("row_metadata,seed", CASES)
def test_random_dml_and_ddl_match_mysql(source_server, source_db, tmp_path, row_metadata, seed):
    print(f"seed {seed} (replay: LAKECDC_DDL_SEED={seed}), binlog_row_metadata {row_metadata}")
    rng = random.Random(seed)
    mariadb, db = source_server, source_db
    mariadb.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, c1 INT, c2 VARCHAR(8))")
    model = Model(rng)
    for statement in model.dml(db):
        mariadb.execute(statement)
    config = parse_pipeline(PIPELINE.format(port=mariadb.port, db=db, warehouse=tmp_path / "warehouse"))
    run_micro_batch(config)
    table = TableId(db, "t")
    sink = PaimonSink(config.sink.catalog_options)
    for round_no in range(ROUNDS):
        statements = []
        for _ in range(rng.randint(1, 3)):
            statements += model.dml(db)
            if rng.random() < 0.6:
                statements += model.ddl(db)
        statements += model.dml(db)
        for statement in statements:
            mariadb.execute(statement)
        run_micro_batch(config)
        columns, rows = mysql_state(mariadb, db)
        paimon = sink.read_table(table)
        assert paimon.column_names == columns, (seed, round_no, statements)
        got = sorted(tuple(r.values()) for r in paimon.to_pylist())
        assert got == rows, (seed, round_no, statements)
        independent = run_sql(config.sink.catalog_options, f"SELECT * FROM {table}")
        assert sorted(tuple(r.values()) for r in independent.to_pylist()) == rows
