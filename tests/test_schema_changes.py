"""Schema changes from the binlog to Paimon (issue 4) against the private MariaDB and real Paimon files: the
reference scenario of Flink CDC's SchemaEvolveE2eITCase in every schema.change.behavior, transforms with and
without ``*``, the Paimon sink's schema-change and type-mapping tables (seed 004), an ALTER in the middle of a
micro-batch, and a restart right after a DDL. Every evolved table is also read by pypaimon-rust's standalone
DataFusion reader, which must agree with pypaimon."""

import datetime as dt
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from lakecdc.config import parse_pipeline
from lakecdc.model import BinlogOffset, TableId
from lakecdc.runtime import run_micro_batch
from lakecdc.runtime.checkpoint import read_checkpoint
from lakecdc.runtime.schema_evolution import SchemaChangeError
from lakecdc.sink import PaimonSink
from lakecdc.sink.evolution import ADD, ColumnChange, apply_column_changes, readable_type_change
from lakecdc.sink.sql import run_sql

PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: root
  password: ""
  tables: {db}.\\.*
  server-id: 5601
{source_extra}
{transform}
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {warehouse}
{sink_extra}
pipeline:
  name: schema {db}
  schema.change.behavior: {mode}
"""

MEMBERS = ("CREATE TABLE `{db}`.members (id INT NOT NULL PRIMARY KEY, name VARCHAR(17) COMMENT 'member name', "
           "age INT) COMMENT 'club members'")
SEED_ROWS = "INSERT INTO `{db}`.members VALUES (1008, 'Alice', 21), (1009, 'Bob', 20), (1010, 'Carol', 19)"

# Flink CDC's reference scenario (SchemaEvolveE2eITCase), in three micro-batches
BATCH_ALTERS = [
    "ALTER TABLE `{db}`.members ADD COLUMN gender TINYINT AFTER age",
    "INSERT INTO `{db}`.members VALUES (1012, 'Eve', 17, 0)",
    "ALTER TABLE `{db}`.members CHANGE COLUMN age precise_age DOUBLE",
    "ALTER TABLE `{db}`.members RENAME COLUMN gender TO biological_sex",
    "ALTER TABLE `{db}`.members DROP COLUMN biological_sex",
    "INSERT INTO `{db}`.members VALUES (1013, 'Fiona', 16)",
]
BATCH_TRUNCATE = [
    "TRUNCATE TABLE `{db}`.members",
    "INSERT INTO `{db}`.members VALUES (1014, 'Gem', 17)",
]
BATCH_DROP = ["DROP TABLE `{db}`.members"]


COMMENTS = "  include-comments.enabled: true"


def make_config(mariadb, db, tmp_path, mode, transform="", sink_extra="", source_extra=""):
    text = PIPELINE.format(port=mariadb.port, db=db, warehouse=tmp_path / "warehouse", mode=mode,
                           transform=transform, sink_extra=sink_extra, source_extra=source_extra)
    path = tmp_path / "pipeline.yaml"
    path.write_text(text)
    return parse_pipeline(text, path=str(path))


def run(mariadb, db, config, statements):
    for statement in statements:
        mariadb.execute(statement.format(db=db))
    return run_micro_batch(config)


def paimon_state(config, table: TableId):
    """(column → Paimon type, rows sorted by id) as pypaimon reads them; pypaimon-rust must read the same rows."""
    sink = PaimonSink(config.sink.catalog_options)
    types = sink.paimon_types(table)
    rows = sorted(sink.read_table(table).to_pylist(), key=lambda r: r["id"])
    independent = run_sql(config.sink.catalog_options, f"SELECT * FROM {table} ORDER BY id").to_pylist()
    assert independent == rows
    return types, [tuple(r.values()) for r in rows]


@pytest.fixture
def members(mariadb, fresh_db):
    mariadb.execute(MEMBERS.format(db=fresh_db))
    mariadb.execute(SEED_ROWS.format(db=fresh_db))
    return TableId(fresh_db, "members")


INITIAL_TYPES = {"id": "INT NOT NULL", "name": "VARCHAR(17)", "age": "INT"}


def test_evolve_follows_every_change(mariadb, fresh_db, members, tmp_path):
    config = make_config(mariadb, fresh_db, tmp_path, "evolve", source_extra=COMMENTS)
    run_micro_batch(config)
    assert paimon_state(config, members)[0] == INITIAL_TYPES

    run(mariadb, fresh_db, config, BATCH_ALTERS)
    types, rows = paimon_state(config, members)
    assert types == {"id": "INT NOT NULL", "name": "VARCHAR(17)", "precise_age": "DOUBLE"}
    assert rows == [(1008, "Alice", 21.0), (1009, "Bob", 20.0), (1010, "Carol", 19.0), (1012, "Eve", 17.0),
                    (1013, "Fiona", 16.0)]
    sink = PaimonSink(config.sink.catalog_options)
    assert sink.describe(members).comment == "club members"

    run(mariadb, fresh_db, config, BATCH_TRUNCATE)
    assert paimon_state(config, members)[1] == [(1014, "Gem", 17.0)]

    run(mariadb, fresh_db, config, BATCH_DROP)
    assert not sink.table_exists(members)


# After each statement of the reference scenario (evolve): the Paimon schema and rows Flink CDC's sink has then.
EVOLVE_STEPS = [
    ({"id": "INT NOT NULL", "name": "VARCHAR(17)", "age": "INT", "gender": "TINYINT"},
     [(1008, "Alice", 21, None), (1009, "Bob", 20, None), (1010, "Carol", 19, None)]),
    ({"id": "INT NOT NULL", "name": "VARCHAR(17)", "age": "INT", "gender": "TINYINT"},
     [(1008, "Alice", 21, None), (1009, "Bob", 20, None), (1010, "Carol", 19, None), (1012, "Eve", 17, 0)]),
    ({"id": "INT NOT NULL", "name": "VARCHAR(17)", "precise_age": "DOUBLE", "gender": "TINYINT"},
     [(1008, "Alice", 21.0, None), (1009, "Bob", 20.0, None), (1010, "Carol", 19.0, None), (1012, "Eve", 17.0, 0)]),
    ({"id": "INT NOT NULL", "name": "VARCHAR(17)", "precise_age": "DOUBLE", "biological_sex": "TINYINT"},
     [(1008, "Alice", 21.0, None), (1009, "Bob", 20.0, None), (1010, "Carol", 19.0, None), (1012, "Eve", 17.0, 0)]),
    ({"id": "INT NOT NULL", "name": "VARCHAR(17)", "precise_age": "DOUBLE"},
     [(1008, "Alice", 21.0), (1009, "Bob", 20.0), (1010, "Carol", 19.0), (1012, "Eve", 17.0)]),
    ({"id": "INT NOT NULL", "name": "VARCHAR(17)", "precise_age": "DOUBLE"},
     [(1008, "Alice", 21.0), (1009, "Bob", 20.0), (1010, "Carol", 19.0), (1012, "Eve", 17.0), (1013, "Fiona", 16.0)]),
    ({"id": "INT NOT NULL", "name": "VARCHAR(17)", "precise_age": "DOUBLE"}, []),
    ({"id": "INT NOT NULL", "name": "VARCHAR(17)", "precise_age": "DOUBLE"}, [(1014, "Gem", 17.0)]),
]


def test_evolve_with_a_micro_batch_after_every_statement(mariadb, fresh_db, members, tmp_path):
    """Issue 13: a micro-batch that consumes only DDL keeps the new schema history and moves the checkpoint past
    it, so the next statement is decoded with the right schema. Each step ends as Flink CDC's sink does."""
    config = make_config(mariadb, fresh_db, tmp_path, "evolve")
    run_micro_batch(config)
    sink = PaimonSink(config.sink.catalog_options)
    statements = BATCH_ALTERS + BATCH_TRUNCATE
    for statement, (types, rows) in zip(statements, EVOLVE_STEPS, strict=True):
        mariadb.execute(statement.format(db=fresh_db))
        head = mariadb.execute("SHOW MASTER STATUS")[0]
        result = run_micro_batch(config).tables[members]
        assert result.committed, statement
        assert paimon_state(config, members) == (types, rows), statement
        checkpoint = read_checkpoint(sink.checkpoint(members))
        assert checkpoint.offset >= BinlogOffset(head[0], int(head[1])), statement
        recorded = [c["name"] for c in checkpoint.schemas[members]["columns"]]
        assert recorded == [c.split(" ")[0] for c in mysql_columns(mariadb, members)], statement
    assert not run_micro_batch(config).tables[members].committed  # nothing new: no commit
    run(mariadb, fresh_db, config, BATCH_DROP)
    assert not sink.table_exists(members)


def test_evolve_with_the_whole_scenario_in_one_micro_batch(mariadb, fresh_db, members, tmp_path):
    config = make_config(mariadb, fresh_db, tmp_path, "evolve")
    run_micro_batch(config)
    run(mariadb, fresh_db, config, BATCH_ALTERS + BATCH_TRUNCATE)
    assert paimon_state(config, members) == EVOLVE_STEPS[-1]
    run(mariadb, fresh_db, config, BATCH_DROP)
    assert not PaimonSink(config.sink.catalog_options).table_exists(members)


def mysql_columns(mariadb, table: TableId) -> list[str]:
    return [f"{name} {kind}" for name, kind in mariadb.execute(
        "SELECT column_name, column_type FROM information_schema.columns WHERE table_schema = %s AND "
        "table_name = %s ORDER BY ordinal_position", (table.database, table.table))]


def test_lenient_keeps_every_column_and_row(mariadb, fresh_db, members, tmp_path):
    config = make_config(mariadb, fresh_db, tmp_path, "lenient")
    run_micro_batch(config)
    run(mariadb, fresh_db, config, BATCH_ALTERS)
    types, rows = paimon_state(config, members)
    assert types == {"id": "INT NOT NULL", "name": "VARCHAR(17)", "age": "DOUBLE", "gender": "TINYINT",
                     "precise_age": "DOUBLE", "biological_sex": "TINYINT"}
    assert rows == [(1008, "Alice", 21.0, None, None, None), (1009, "Bob", 20.0, None, None, None),
                    (1010, "Carol", 19.0, None, None, None), (1012, "Eve", 17.0, 0, None, None),
                    (1013, "Fiona", None, None, 16.0, None)]
    # TRUNCATE and DROP TABLE are excluded by default in lenient mode
    run(mariadb, fresh_db, config, BATCH_TRUNCATE)
    rows = paimon_state(config, members)[1]
    assert rows[-1] == (1014, "Gem", None, None, 17.0, None) and len(rows) == 6
    run(mariadb, fresh_db, config, BATCH_DROP)
    assert len(paimon_state(config, members)[1]) == 6


def test_ignore_keeps_the_creation_schema(mariadb, fresh_db, members, tmp_path):
    config = make_config(mariadb, fresh_db, tmp_path, "ignore")
    run_micro_batch(config)
    run(mariadb, fresh_db, config, BATCH_ALTERS + BATCH_TRUNCATE + BATCH_DROP)
    types, rows = paimon_state(config, members)
    assert types == INITIAL_TYPES
    assert rows == [(1008, "Alice", 21), (1009, "Bob", 20), (1010, "Carol", 19), (1012, "Eve", 17),
                    (1013, "Fiona", None), (1014, "Gem", None)]


def test_exception_fails_at_the_first_change_after_committing_the_rows_before_it(mariadb, fresh_db, members,
                                                                                 tmp_path):
    config = make_config(mariadb, fresh_db, tmp_path, "exception")
    run_micro_batch(config)
    mariadb.execute(f"INSERT INTO `{fresh_db}`.members VALUES (1011, 'Derrida', 18)")
    with pytest.raises(SchemaChangeError, match="Unexpected schema change events occurred in EXCEPTION mode.*"
                                                "ADD COLUMN gender"):
        run(mariadb, fresh_db, config, BATCH_ALTERS)
    types, rows = paimon_state(config, members)
    assert types == INITIAL_TYPES
    assert rows[-1] == (1011, "Derrida", 18) and len(rows) == 4
    with pytest.raises(SchemaChangeError):  # and it stays there
        run_micro_batch(config)


# MySQL rounds 20.5 to 21 when the column becomes INT; the readers would truncate the stored 20.5 to 20
DOUBLE_THEN_INT = [
    "ALTER TABLE `{db}`.members MODIFY COLUMN age DOUBLE",
    "UPDATE `{db}`.members SET age = 20.5 WHERE id = 1009",
    "ALTER TABLE `{db}`.members MODIFY COLUMN age INT",
]


def test_try_evolve_tolerates_what_readers_could_not_read_as_mysql(mariadb, fresh_db, members, tmp_path):
    config = make_config(mariadb, fresh_db, tmp_path, "try_evolve")
    run_micro_batch(config)
    run(mariadb, fresh_db, config, [
        "ALTER TABLE `{db}`.members MODIFY COLUMN name VARCHAR(5)",  # narrowing, every name fits: applied
        *DOUBLE_THEN_INT,  # INT → DOUBLE applied, DOUBLE → INT tolerated: the column stays DOUBLE
        "INSERT INTO `{db}`.members VALUES (1015, 'Zed', 5)",
    ])
    types, rows = paimon_state(config, members)
    assert types == {"id": "INT NOT NULL", "name": "VARCHAR(5)", "age": "DOUBLE"}
    assert rows == [(1008, "Alice", 21.0), (1009, "Bob", 20.5), (1010, "Carol", 19.0), (1015, "Zed", 5.0)]


def test_evolve_refuses_what_readers_could_not_read_as_mysql(mariadb, fresh_db, members, tmp_path):
    config = make_config(mariadb, fresh_db, tmp_path, "evolve")
    run_micro_batch(config)
    with pytest.raises(SchemaChangeError, match=r"table \S+members: column 'age' cannot change from DOUBLE to INT: "
                                                r"stored values such as 20.5 would be truncated"):
        run(mariadb, fresh_db, config, DOUBLE_THEN_INT)
    types, rows = paimon_state(config, members)  # committed up to the statement before
    assert types == {**INITIAL_TYPES, "age": "DOUBLE"} and rows[1] == (1009, "Bob", 20.5)


def test_evolve_with_excluded_drops(mariadb, fresh_db, members, tmp_path):
    config = make_config(mariadb, fresh_db, tmp_path, "evolve", sink_extra="  exclude.schema.changes: [drop]")
    run_micro_batch(config)
    run(mariadb, fresh_db, config, BATCH_ALTERS)
    types, rows = paimon_state(config, members)
    assert types == {"id": "INT NOT NULL", "name": "VARCHAR(17)", "precise_age": "DOUBLE", "biological_sex": "TINYINT"}
    assert rows[-1] == (1013, "Fiona", 16.0, None)
    run(mariadb, fresh_db, config, BATCH_DROP)
    assert PaimonSink(config.sink.catalog_options).table_exists(members)


def test_include_only_add_column(mariadb, fresh_db, members, tmp_path):
    config = make_config(mariadb, fresh_db, tmp_path, "evolve", sink_extra="  include.schema.changes: [add.column]")
    run_micro_batch(config)
    run(mariadb, fresh_db, config, BATCH_ALTERS[:3])  # add gender, insert, change age → precise_age DOUBLE
    types, rows = paimon_state(config, members)
    assert types == {"id": "INT NOT NULL", "name": "VARCHAR(17)", "age": "INT", "gender": "TINYINT"}
    assert rows[-1] == (1012, "Eve", 17, 0)


# -------------------------------------------------------------------------------------------------- transforms

STAR_WITH_COMPUTED = """
transform:
  - source-table: {db}.members
    projection: "*, 'id -> ' || CAST(id AS STRING) AS uid"
"""
NO_STAR = """
transform:
  - source-table: {db}.members
    projection: id, name, age
"""


def test_new_column_lands_inside_the_star_block(mariadb, fresh_db, members, tmp_path):
    config = make_config(mariadb, fresh_db, tmp_path, "evolve", transform=STAR_WITH_COMPUTED.format(db=fresh_db))
    run_micro_batch(config)
    run(mariadb, fresh_db, config, ["ALTER TABLE `{db}`.members ADD COLUMN last VARCHAR(17)",
                                    "INSERT INTO `{db}`.members VALUES (1016, 'Jazz', 30, 'Last')",
                                    "ALTER TABLE `{db}`.members ADD COLUMN first INT FIRST",
                                    "INSERT INTO `{db}`.members VALUES (7, 1017, 'Kim', 31, 'K')"])
    types, rows = paimon_state(config, members)
    assert list(types) == ["first", "id", "name", "age", "last", "uid"]
    assert rows[-2:] == [(None, 1016, "Jazz", 30, "Last", "id -> 1016"), (7, 1017, "Kim", 31, "K", "id -> 1017")]


def test_projection_without_star_drops_column_changes(mariadb, fresh_db, members, tmp_path):
    config = make_config(mariadb, fresh_db, tmp_path, "evolve", transform=NO_STAR.format(db=fresh_db))
    run_micro_batch(config)
    run(mariadb, fresh_db, config, ["ALTER TABLE `{db}`.members ADD COLUMN extra INT",
                                    "ALTER TABLE `{db}`.members MODIFY COLUMN age BIGINT",
                                    "INSERT INTO `{db}`.members VALUES (1018, 'Lou', 5000000000, 1)"])
    types, rows = paimon_state(config, members)
    assert types == {"id": "INT NOT NULL", "name": "VARCHAR(17)", "age": "BIGINT"}
    assert rows[-1] == (1018, "Lou", 5000000000)
    with pytest.raises(SchemaChangeError, match="no longer compiles"):  # a referenced column disappears
        run(mariadb, fresh_db, config, ["ALTER TABLE `{db}`.members DROP COLUMN age"])


# ------------------------------------------------------------------------------------------ batches and restarts


def test_alter_in_the_middle_of_a_micro_batch(mariadb, fresh_db, members, tmp_path):
    """Rows before and after an ALTER in one read: each decoded with its own schema, committed in binlog order."""
    config = make_config(mariadb, fresh_db, tmp_path, "evolve")
    run_micro_batch(config)
    db = fresh_db
    mariadb.execute(f"UPDATE `{db}`.members SET age = 22 WHERE id = 1008")
    mariadb.execute(f"ALTER TABLE `{db}`.members ADD COLUMN email VARCHAR(40) COMMENT 'mail' AFTER name")
    mariadb.execute(f"UPDATE `{db}`.members SET email = 'bob@x' WHERE id = 1009")
    mariadb.execute(f"ALTER TABLE `{db}`.members DROP COLUMN age")
    mariadb.execute(f"INSERT INTO `{db}`.members VALUES (1019, 'Max', 'max@x')")
    result = run_micro_batch(config)
    assert result.tables[members].commits == 3  # before the ADD, before the DROP, the rest
    types, rows = paimon_state(config, members)
    assert types == {"id": "INT NOT NULL", "name": "VARCHAR(17)", "email": "VARCHAR(40)"}
    assert rows == [(1008, "Alice", None), (1009, "Bob", "bob@x"), (1010, "Carol", None), (1019, "Max", "max@x")]
    sink = PaimonSink(config.sink.catalog_options)
    history = sink.snapshots(members)
    assert [s.properties["lakecdc.binlog.pos"] for s in history[-3:]] == sorted(
        (s.properties["lakecdc.binlog.pos"] for s in history[-3:]), key=int)
    show = run_sql(config.sink.catalog_options, f"SELECT * FROM {members} WHERE id = 1008").to_pylist()
    assert show == [{"id": 1008, "name": "Alice", "email": None}]


def test_restart_right_after_a_ddl(mariadb, fresh_db, members, tmp_path):
    """Killed right after the Paimon schema changed, before the commit: the rerun replays the DDL (already
    reflected: skipped) and the rows, with the same result as an uninterrupted run."""
    config = make_config(mariadb, fresh_db, tmp_path, "evolve")
    path = Path(config.path)
    run_micro_batch(config)
    for statement in BATCH_ALTERS:
        mariadb.execute(statement.format(db=fresh_db))
    env = dict(os.environ, LAKECDC_FAILPOINT="after-schema-change")
    crashed = subprocess.run([sys.executable, "-m", "lakecdc.cli", "run", str(path)], env=env, capture_output=True,
                             text=True, timeout=300)
    assert crashed.returncode == -9, crashed.stderr[-2000:]
    run_micro_batch(config)
    types, rows = paimon_state(config, members)
    assert types == {"id": "INT NOT NULL", "name": "VARCHAR(17)", "precise_age": "DOUBLE"}
    assert rows == [(1008, "Alice", 21.0), (1009, "Bob", 20.0), (1010, "Carol", 19.0), (1012, "Eve", 17.0),
                    (1013, "Fiona", 16.0)]
    assert run_micro_batch(config).tables[members].counts.inserted == 0


def test_table_recreated_in_the_binlog(mariadb, fresh_db, members, tmp_path):
    config = make_config(mariadb, fresh_db, tmp_path, "evolve")
    run_micro_batch(config)
    run(mariadb, fresh_db, config, [
        "DROP TABLE `{db}`.members",
        "CREATE TABLE `{db}`.members (id INT NOT NULL PRIMARY KEY, nick VARCHAR(8))",
        "INSERT INTO `{db}`.members VALUES (1, 'a')",
    ])
    types, rows = paimon_state(config, members)
    assert types == {"id": "INT NOT NULL", "nick": "VARCHAR(8)"}
    assert rows == [(1, "a")]


# ------------------------------------------------------------------------------------------ seed 004 tables

TYPES_DDL = """CREATE TABLE `{db}`.types (
  id INT NOT NULL PRIMARY KEY COMMENT 'key',
  c_tinyint TINYINT, c_smallint SMALLINT, c_int INT, c_bigint BIGINT, c_float FLOAT, c_double DOUBLE,
  c_decimal DECIMAL(12, 3), c_boolean BOOLEAN, c_binary BINARY(4), c_varbinary VARBINARY(16), c_blob BLOB,
  c_char CHAR(3), c_varchar VARCHAR(20) COMMENT 'a varchar', c_text TEXT, c_date DATE, c_time TIME(3),
  c_datetime DATETIME(6), c_timestamp TIMESTAMP(3) NULL, c_json JSON
) COMMENT 'every type'"""

EXPECTED_TYPES = {
    "id": "INT NOT NULL", "c_tinyint": "TINYINT", "c_smallint": "SMALLINT", "c_int": "INT", "c_bigint": "BIGINT",
    "c_float": "FLOAT", "c_double": "DOUBLE", "c_decimal": "DECIMAL(12, 3)", "c_boolean": "BOOLEAN",
    "c_binary": "BINARY(4)", "c_varbinary": "VARBINARY(16)", "c_blob": "BYTES", "c_char": "CHAR(3)",
    "c_varchar": "VARCHAR(20)", "c_text": "STRING", "c_date": "DATE", "c_time": "TIME(3)",
    "c_datetime": "TIMESTAMP(6)", "c_timestamp": "TIMESTAMP_LTZ(3)", "c_json": "STRING",
}


def test_type_mapping_table_and_comments(mariadb, fresh_db, tmp_path):
    mariadb.execute(TYPES_DDL.format(db=fresh_db))
    mariadb.execute(f"INSERT INTO `{fresh_db}`.types (id, c_varchar, c_char) VALUES (1, 'v', 'c')")
    config = make_config(mariadb, fresh_db, tmp_path, "lenient", source_extra=COMMENTS)
    run_micro_batch(config)
    table = TableId(fresh_db, "types")
    sink = PaimonSink(config.sink.catalog_options)
    assert sink.paimon_types(table) == EXPECTED_TYPES
    description = sink.describe(table)
    assert description.comment == "every type"
    paimon_schema = sink._require(table, {}).table_schema
    comments = {f.name: f.description for f in paimon_schema.fields}
    assert comments["id"] == "key" and comments["c_varchar"] == "a varchar"
    assert run_sql(config.sink.catalog_options, f"SELECT id, c_varchar, c_char FROM {table}").to_pylist() == [
        {"id": 1, "c_varchar": "v", "c_char": "c"}]


def test_comments_stay_out_without_include_comments(mariadb, fresh_db, members, tmp_path):
    """include-comments.enabled defaults to false, as in Flink CDC's MySQL source: no table or column comment
    reaches Paimon, neither at creation nor from later DDL (ALTER TABLE ... COMMENT gives no event, a column
    comment changes nothing); the columns themselves still follow."""
    config = make_config(mariadb, fresh_db, tmp_path, "evolve")
    assert config.source.include_comments is False
    run_micro_batch(config)
    sink = PaimonSink(config.sink.catalog_options)

    def comments():
        fields = sink._require(members, {}).table_schema.fields
        return sink.describe(members).comment, {f.name: f.description for f in fields}

    assert comments() == ("", {"id": None, "name": None, "age": None})
    run(mariadb, fresh_db, config, [
        "ALTER TABLE `{db}`.members COMMENT 'renamed club'",
        "ALTER TABLE `{db}`.members MODIFY COLUMN name VARCHAR(20) COMMENT 'longer name'",
        "ALTER TABLE `{db}`.members ADD COLUMN city VARCHAR(9) COMMENT 'home town'",
        "INSERT INTO `{db}`.members VALUES (1011, 'Dan', 30, 'Bern')",
    ])
    assert comments() == ("", {"id": None, "name": None, "age": None, "city": None})
    types, rows = paimon_state(config, members)
    assert types == {**INITIAL_TYPES, "name": "VARCHAR(20)", "city": "VARCHAR(9)"}
    assert rows[-1] == (1011, "Dan", 30, "Bern")


def test_every_time_precision_is_kept(mariadb, fresh_db, tmp_path):
    """DATETIME(p)/TIMESTAMP(p)/TIME(p) keep p in Paimon, as Flink CDC's Paimon sink does, also for a column
    added later; the values keep their digits."""
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.prec (id INT PRIMARY KEY, d2 DATETIME(2), t4 TIMESTAMP(4) NULL, "
                    f"tm1 TIME(1), d6 DATETIME(6))")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.prec VALUES (1, '2024-01-02 03:04:05.67', '2024-01-02 03:04:05.1234', "
                    f"'12:34:56.7', '2024-01-02 03:04:05.123456')")
    config = make_config(mariadb, fresh_db, tmp_path, "evolve")
    run_micro_batch(config)
    table = TableId(fresh_db, "prec")
    mariadb.execute(f"ALTER TABLE `{fresh_db}`.prec ADD COLUMN d5 DATETIME(5)")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.prec (id, d5) VALUES (2, '2024-01-02 03:04:05.12345')")
    run_micro_batch(config)
    sink = PaimonSink(config.sink.catalog_options)
    assert sink.paimon_types(table) == {"id": "INT NOT NULL", "d2": "TIMESTAMP(2)", "t4": "TIMESTAMP_LTZ(4)",
                                        "tm1": "TIME(1)", "d6": "TIMESTAMP(6)", "d5": "TIMESTAMP(5)"}
    rows = sorted(sink.read_table(table).to_pylist(), key=lambda r: r["id"])
    assert rows[0]["d2"] == dt.datetime(2024, 1, 2, 3, 4, 5, 670000)
    assert rows[0]["t4"].replace(tzinfo=None) == dt.datetime(2024, 1, 2, 3, 4, 5, 123400)
    assert rows[1]["d5"] == dt.datetime(2024, 1, 2, 3, 4, 5, 123450)


def test_partition_key_option_joins_the_primary_key(mariadb, fresh_db, members, tmp_path):
    config = make_config(mariadb, fresh_db, tmp_path, "evolve",
                         sink_extra=f"  partition.key: {fresh_db}.members:age")
    run_micro_batch(config)
    sink = PaimonSink(config.sink.catalog_options)
    description = sink.describe(members)
    assert description.partition_keys == ["age"] and description.primary_keys == ["id", "age"]
    assert sink.paimon_types(members)["age"] == "INT NOT NULL"


def test_table_properties_on_every_new_table_and_append_tables(mariadb, fresh_db, members, tmp_path):
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.events (at DATETIME, what VARCHAR(10))")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.events VALUES ('2024-01-01 00:00:00', 'a')")
    config = make_config(mariadb, fresh_db, tmp_path, "evolve",
                         sink_extra="  table.properties.target-file-size: 64mb",
                         source_extra=f"  scan.incremental.snapshot.chunk.key-column: {fresh_db}.events:at\n")
    run_micro_batch(config)
    sink = PaimonSink(config.sink.catalog_options)
    for name in ("members", "events"):
        assert sink.describe(TableId(fresh_db, name)).options["target-file-size"] == "64mb"
    events = sink.describe(TableId(fresh_db, "events"))
    assert events.primary_keys == []  # no primary key upstream: an append table
    mariadb.execute(f"ALTER TABLE `{fresh_db}`.events ADD COLUMN who INT FIRST")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.events VALUES (5, '2024-01-02 00:00:00', 'b')")
    run_micro_batch(config)
    types, _ = sink.paimon_types(TableId(fresh_db, "events")), None
    assert list(types) == ["who", "at", "what"]


def test_zero_date_defaults_are_rewritten(mariadb, fresh_db, members, tmp_path):
    config = make_config(mariadb, fresh_db, tmp_path, "evolve")
    run_micro_batch(config)
    mariadb.execute("SET SESSION sql_mode = ''")
    mariadb.execute(f"ALTER TABLE `{fresh_db}`.members ADD COLUMN joined DATETIME NOT NULL "
                    "DEFAULT '0000-00-00 00:00:00'")
    run_micro_batch(config)
    sink = PaimonSink(config.sink.catalog_options)
    field = next(f for f in sink._require(members, {}).table_schema.fields if f.name == "joined")
    assert field.default_value == "1970-01-01 00:00:00"
    # existing rows hold MySQL's zero date, which lakecdc reads as NULL (as a snapshot would)
    assert [row[-1] for row in paimon_state(config, members)[1]] == [None, None, None]


def test_sink_schema_change_table(tmp_path):
    """Seed 004's schema-change table at the sink level: ADD COLUMN at the four positions (skipped when it
    exists), DROP COLUMN (skipped when missing), RENAME, ALTER TYPE with comment, TRUNCATE, DROP TABLE, ALTER
    TABLE COMMENT."""
    from lakecdc.sink.evolution import ALTER_TYPE, COMMENT, DROP, RENAME

    sink = PaimonSink({"metastore": "filesystem", "warehouse": str(tmp_path / "wh")})
    table = TableId("db", "t")
    schema = pa.schema([pa.field("id", pa.int32(), False), pa.field("a", pa.string()), pa.field("b", pa.int32())])
    sink.ensure_table(table, schema, ["id"], [], {"bucket": "1"}, "")
    writer = sink.open_writer(table)
    writer.write(pa.table({"id": [1], "a": ["x"], "b": [2], "__lakecdc_op__": ["+I"]}))
    writer.commit({})
    changes = [
        ColumnChange(ADD, "f", pa.field("f", pa.int8()), ("FIRST", "")),
        ColumnChange(ADD, "l", pa.field("l", pa.int8()), ("LAST", "")),
        ColumnChange(ADD, "aft", pa.field("aft", pa.int8()), ("AFTER", "a")),
        ColumnChange(ADD, "bef", pa.field("bef", pa.int8()), ("BEFORE", "b")),
        ColumnChange(ADD, "a", pa.field("a", pa.int8()), ("LAST", "")),  # exists: skipped
        ColumnChange(DROP, "l"), ColumnChange(DROP, "missing"),  # missing: skipped
        ColumnChange(RENAME, "aft", new_name="after_a"),
        ColumnChange(ALTER_TYPE, "b", pa.field("b", pa.int64()), comment="now bigint"),
        ColumnChange(COMMENT, comment="a table"),
    ]
    applied = apply_column_changes(sink, table, changes)
    assert len(applied) == 8
    assert sink.paimon_types(table) == {"f": "TINYINT", "id": "INT NOT NULL", "a": "STRING", "after_a": "TINYINT",
                                        "bef": "TINYINT", "b": "BIGINT"}
    assert sink.describe(table).comment == "a table"
    assert apply_column_changes(sink, table, changes[4:7]) == []  # already reflected: skipped
    replay = [ColumnChange(ADD, "x", pa.field("x", pa.int8())), ColumnChange(RENAME, "x", new_name="y")]
    marker = BinlogOffset("mysql-bin.000001", 400)
    assert len(apply_column_changes(sink, table, replay, applied_at=marker)) == 2
    assert apply_column_changes(sink, table, replay, applied_at=marker) == []  # a replay of the same DDL
    rows = run_sql(sink.catalog_options, "SELECT * FROM db.t").to_pylist()
    assert rows == [{"f": None, "id": 1, "a": "x", "after_a": None, "bef": None, "b": 2, "y": None}]
    assert sink.read_table(table).to_pylist() == rows
    sink.truncate(table, {})
    assert sink.read_table(table).num_rows == 0
    sink.drop_table(table)
    assert not sink.table_exists(table)


def _field(arrow_type, declared=None):
    from lakecdc.model import DECLARED_TYPE_KEY

    return pa.field("v", arrow_type, metadata={DECLARED_TYPE_KEY: declared.encode()} if declared else None)


_TYPES = {
    "TINYINT": _field(pa.int8()), "SMALLINT": _field(pa.int16()), "INT": _field(pa.int32()),
    "BIGINT": _field(pa.int64()), "FLOAT": _field(pa.float32()), "DOUBLE": _field(pa.float64()),
    "DECIMAL(12, 2)": _field(pa.decimal128(12, 2)), "DECIMAL(5, 1)": _field(pa.decimal128(5, 1)),
    "BOOLEAN": _field(pa.bool_()), "CHAR(3)": _field(pa.string(), "CHAR(3)"),
    "VARCHAR(20)": _field(pa.string(), "VARCHAR(20)"), "VARCHAR(5)": _field(pa.string(), "VARCHAR(5)"),
    "STRING": _field(pa.string()), "BINARY(2)": _field(pa.binary(), "BINARY(2)"),
    "VARBINARY(9)": _field(pa.binary(), "VARBINARY(9)"), "BYTES": _field(pa.binary()), "DATE": _field(pa.date32()),
    "TIME(0)": _field(pa.time32("ms"), "TIME(0)"), "TIME(3)": _field(pa.time32("ms"), "TIME(3)"),
    "TIMESTAMP(0)": _field(pa.timestamp("us"), "TIMESTAMP(0)"),
    "TIMESTAMP(6)": _field(pa.timestamp("us"), "TIMESTAMP(6)"),
    "TIMESTAMP_LTZ(3)": _field(pa.timestamp("us", tz="UTC"), "TIMESTAMP_LTZ(3)"),
    "TIMESTAMP_LTZ(6)": _field(pa.timestamp("us", tz="UTC"), "TIMESTAMP_LTZ(6)"),
}
_TS = dt.datetime(2024, 1, 2, 10, 11, 12)
_TS6 = dt.datetime(2024, 1, 2, 10, 11, 12, 345678)

# (old type, stored values, new type, values both readers must return after the change, a row written after it)
# -- every kind of change lakecdc applies, each checked with pypaimon and pypaimon-rust (docs/schema-changes.md)
APPLIED_TYPE_CHANGES = [
    ("TINYINT", [7, -3], "INT", [7, -3], 70000),
    ("INT", [7, -3], "BIGINT", [7, -3], 5000000000),
    ("BIGINT", [7, -3], "INT", [7, -3], 8),  # narrowing: every stored value fits
    ("INT", [7, -3], "TINYINT", [7, -3], 8),
    ("SMALLINT", [7, 0], "BOOLEAN", [True, False], True),
    ("BOOLEAN", [True, False], "INT", [1, 0], 9),
    ("INT", [7, -3], "DOUBLE", [7.0, -3.0], 1.5),
    ("BIGINT", [7, -3], "FLOAT", [7.0, -3.0], 1.5),
    ("INT", [7, -3], "DECIMAL(12, 2)", [Decimal("7.00"), Decimal("-3.00")], Decimal("1.25")),
    ("INT", [7, -3], "VARCHAR(20)", ["7", "-3"], "x"),
    ("INT", [7, -3], "STRING", ["7", "-3"], "x"),
    ("FLOAT", [1.5, -2.25], "DOUBLE", [1.5, -2.25], 0.1),
    ("DOUBLE", [1.5, -2.25], "FLOAT", [1.5, -2.25], 3.5),
    ("DOUBLE", [3.0, -2.0], "INT", [3, -2], 4),  # integral values only
    ("DOUBLE", [1.25, -1.25], "DECIMAL(5, 1)", [Decimal("1.3"), Decimal("-1.3")], Decimal("2.5")),
    ("DECIMAL(12, 2)", [Decimal("7.25"), Decimal("-7.25")], "DECIMAL(5, 1)", [Decimal("7.3"), Decimal("-7.3")],
     Decimal("1.5")),  # rounded half up, as MySQL does
    ("DECIMAL(5, 1)", [Decimal("7.2"), None], "DECIMAL(12, 2)", [Decimal("7.20"), None], Decimal("1.25")),
    ("DECIMAL(12, 2)", [Decimal("7.00"), Decimal("-3.00")], "INT", [7, -3], 4),
    ("DECIMAL(12, 2)", [Decimal("7.25"), Decimal("-0.50")], "DOUBLE", [7.25, -0.5], 1.5),
    ("DECIMAL(12, 2)", [Decimal("7.00"), Decimal("-0.50")], "VARCHAR(20)", ["7.00", "-0.50"], "x"),
    ("VARCHAR(20)", ["7", "-3"], "INT", [7, -3], 4),
    ("STRING", ["7.25", "-1"], "DECIMAL(5, 1)", [Decimal("7.3"), Decimal("-1.0")], Decimal("2.5")),
    ("VARCHAR(20)", ["1.5", "-2"], "DOUBLE", [1.5, -2.0], 0.5),
    ("VARCHAR(20)", ["0", "1"], "BOOLEAN", [False, True], True),
    ("VARCHAR(20)", ["2024-01-02", "1999-12-31"], "DATE", [dt.date(2024, 1, 2), dt.date(1999, 12, 31)],
     dt.date(2000, 1, 1)),
    ("STRING", ["2024-01-02 10:11:12", "2024-01-02 10:11:12.345678"], "TIMESTAMP(6)", [_TS, _TS6], _TS),
    ("VARCHAR(20)", ["ab", "abcde"], "VARCHAR(5)", ["ab", "abcde"], "xyz"),  # narrowing: every value fits
    ("VARCHAR(20)", ["ab", "abc"], "CHAR(3)", ["ab", "abc"], "xyz"),
    ("CHAR(3)", ["ab", "abc"], "STRING", ["ab", "abc"], "longer"),
    ("STRING", ["é", "ab"], "VARBINARY(9)", ["é".encode(), b"ab"], b"\x00\x01"),
    ("VARBINARY(9)", [b"ab", b"xy"], "BINARY(2)", [b"ab", b"xy"], b"cd"),  # every value is 2 bytes long
    ("BINARY(2)", [b"ab", b"xy"], "VARCHAR(20)", ["ab", "xy"], "x"),
    ("BINARY(2)", [b"ab", None], "BYTES", [b"ab", None], b"longer"),
    ("DATE", [dt.date(2024, 1, 2), None], "TIMESTAMP(6)", [dt.datetime(2024, 1, 2), None], _TS6),
    ("DATE", [dt.date(2024, 1, 2), None], "STRING", ["2024-01-02", None], "x"),
    ("TIME(3)", [dt.time(10, 11, 12, 345000), None], "STRING", ["10:11:12.345", None], "x"),
    ("TIMESTAMP(0)", [_TS, None], "TIMESTAMP(6)", [_TS, None], _TS6),
    ("TIMESTAMP(6)", [_TS, None], "TIMESTAMP(0)", [_TS, None], _TS),  # no fractional second to round
    ("TIMESTAMP(6)", [_TS6, dt.datetime(1960, 5, 6, 23, 59, 59)], "DATE",
     [dt.date(2024, 1, 2), dt.date(1960, 5, 6)], dt.date(2000, 1, 1)),
    ("TIMESTAMP(6)", [_TS, None], "TIME(0)", [dt.time(10, 11, 12), None], dt.time(1, 2, 3)),
    ("TIMESTAMP_LTZ(3)", [_TS.replace(microsecond=345000, tzinfo=dt.timezone.utc), None], "TIMESTAMP_LTZ(6)",
     [_TS.replace(microsecond=345000, tzinfo=dt.timezone.utc), None], _TS6.replace(tzinfo=dt.timezone.utc)),
]

# (old type, stored values, new type, the reason in the error) -- refused, before anything is committed
REFUSED_TYPE_CHANGES = [
    ("INT", [7], "DATE", "Paimon has no cast from INT to DATE"),
    ("INT", [7], "BINARY(2)", "Paimon has no cast from INT to BINARY"),
    ("DOUBLE", [1.5], "BOOLEAN", "Paimon has no cast from DOUBLE to BOOLEAN"),
    ("TIMESTAMP(6)", [_TS], "VARCHAR(20)", "Paimon has no cast from TIMESTAMP to VARCHAR(20)"),
    ("TIME(0)", [dt.time(1, 2, 3)], "TIME(3)", "Paimon has no cast between TIME precisions"),
    ("INT", [7], "DECIMAL(5, 1)", "the readers cannot convert the stored INT values to DECIMAL(5, 1)"),
    ("VARCHAR(20)", ["10:11:12"], "TIME(0)", "the readers cannot convert the stored VARCHAR values"),
    ("DOUBLE", [3.0], "STRING", "3.0 where MySQL has '3'"),
    ("BOOLEAN", [True], "VARCHAR(20)", "'true'/'false' where MySQL has '1'/'0'"),
    ("BIGINT", [20240102101112], "TIMESTAMP(0)", "seconds or microseconds since 1970"),
    ("TIMESTAMP(0)", [_TS], "BIGINT", "milliseconds or microseconds since 1970"),
    ("TIMESTAMP(0)", [_TS], "STRING", "ISO form"),
    ("TIMESTAMP(6)", [_TS], "TIMESTAMP_LTZ(6)", "time zone of the session"),
    ("DOUBLE", [1.5], "INT", "1.5 would be truncated or wrapped where MySQL rounds"),
    ("DECIMAL(12, 2)", [Decimal("7.50")], "INT", "Decimal('7.50') would be truncated"),
    ("BIGINT", [5000000000], "INT", "5000000000 would be truncated or wrapped"),
    ("DOUBLE", [1e300], "FLOAT", "beyond FLOAT's range"),
    ("DOUBLE", [123456.0], "DECIMAL(5, 1)", "do not fit DECIMAL(5, 1)"),
    ("VARCHAR(20)", [" 7"], "INT", "would read NULL for it (Failed to parse string: ' 7'"),
    ("VARCHAR(20)", ["2"], "BOOLEAN", "would read NULL for it (Failed to parse value: 2)"),
    ("VARCHAR(20)", ["abcdef"], "VARCHAR(5)", "longer than 5 characters"),
    ("VARCHAR(20)", ["ab "], "CHAR(3)", "end with spaces"),
    ("VARCHAR(20)", ["a"], "BINARY(2)", "MySQL pads BINARY(2)"),
    ("BYTES", [b"\xff"], "STRING", "would read NULL for it (Invalid UTF8"),
    ("TIMESTAMP(6)", [_TS6], "TIMESTAMP(0)", "fractional seconds MySQL rounds"),
    ("TIMESTAMP(6)", [dt.datetime(2024, 1, 2, 23, 59, 59, 600000)], "DATE", "fractional seconds MySQL rounds"),
]


def _typed_table(tmp_path, old: str, values: list):
    sink = PaimonSink({"metastore": "filesystem", "warehouse": str(tmp_path / "wh")})
    table = TableId("db", "t")
    field = _TYPES[old]
    sink.ensure_table(table, pa.schema([pa.field("id", pa.int32(), False), field]), ["id"], [], {"bucket": "1"}, "")
    writer = sink.open_writer(table)
    writer.write(pa.table({"id": list(range(1, len(values) + 1)), "v": pa.array(values, field.type),
                           "__lakecdc_op__": ["+I"] * len(values)}))
    writer.commit({})
    return sink, table


def _both_readers(sink, table) -> list:
    rows = [r["v"] for r in sorted(sink.read_table(table).to_pylist(), key=lambda r: r["id"])]
    assert [r["v"] for r in run_sql(sink.catalog_options, "SELECT id, v FROM db.t ORDER BY id").to_pylist()] == rows
    return rows


@pytest.mark.parametrize("old,values,new,expected,later", APPLIED_TYPE_CHANGES,
                         ids=[f"{c[0]}->{c[2]}" for c in APPLIED_TYPE_CHANGES])
def test_type_changes_are_applied_when_readers_read_what_mysql_converted(tmp_path, old, values, new, expected,
                                                                         later):
    """Both readers read the files written before the change as MySQL converted the rows, and the rows written
    after it."""
    from lakecdc.sink.evolution import ALTER_TYPE

    sink, table = _typed_table(tmp_path, old, values)
    assert len(apply_column_changes(sink, table, [ColumnChange(ALTER_TYPE, "v", _TYPES[new])])) == 1
    assert sink.paimon_types(table)["v"] == new
    assert _both_readers(sink, table) == expected
    writer = sink.open_writer(table)
    writer.write(pa.table({"id": [99], "v": pa.array([later], _TYPES[new].type), "__lakecdc_op__": ["+I"]}))
    writer.commit({})
    assert _both_readers(sink, table) == [*expected, later]


@pytest.mark.parametrize("old,values,new,reason", REFUSED_TYPE_CHANGES,
                         ids=[f"{c[0]}->{c[2]}" for c in REFUSED_TYPE_CHANGES])
def test_type_changes_readers_could_not_read_as_mysql_are_refused(tmp_path, old, values, new, reason):
    """The error names the table, the column, both types, why and what to do; the table stays as it was
    (``try_evolve`` skips the change with a warning instead)."""
    from lakecdc.sink.evolution import ALTER_TYPE, UnsupportedSchemaChange

    sink, table = _typed_table(tmp_path, old, values)
    schemas = len(list((tmp_path / "wh" / "db.db" / "t" / "schema").iterdir()))
    change = ColumnChange(ALTER_TYPE, "v", _TYPES[new])
    with pytest.raises(UnsupportedSchemaChange) as error:
        apply_column_changes(sink, table, [change])
    message = str(error.value)
    assert reason in message, message
    assert message.startswith(f"table db.t: column 'v' cannot change from {old} to {new}: ")
    assert "lakecdc resnapshot" in message and "try_evolve" in message
    assert sink.paimon_types(table)["v"] == old
    assert len(list((tmp_path / "wh" / "db.db" / "t" / "schema").iterdir())) == schemas
    warnings = []
    assert apply_column_changes(sink, table, [change], tolerate_unsupported=True,
                                warn=lambda *args: warnings.append(args[0] % args[1:])) == []
    assert warnings and "keeps running in tolerant mode" in warnings[0]


def test_static_type_change_rules():
    """readable_type_change (used by the schema check) agrees with the tables above where no stored value is
    involved."""
    for old, _, new, *_ in APPLIED_TYPE_CHANGES:
        assert readable_type_change(old, new), (old, new)
    assert not readable_type_change("INT", "DATE") and not readable_type_change("TIME(0)", "TIME(3)")
