"""Online schema-change tools (issue 25, item 4) and DDL lakecdc cannot interpret without column names in the binlog
(item 5), against the private MariaDB under binlog_row_metadata FULL, MINIMAL and NO_LOG, with real Paimon files.

gh-ost and pt-online-schema-change are not installed: each test runs the statements the tool runs, in its order,
by hand (shadow table, ALTER on it, row copy in key ranges, the application's writes carried over to the shadow
table by binlog replay or by triggers, the RENAME cut-over, cleanup), while the application keeps writing to the
table. With ``scan.parse.online.schema.changes.enabled`` the Paimon table ends equal to MySQL in every
schema.change.behavior that allows the change, whether one micro-batch reads the whole migration or one runs after
each of its steps (the cut-over in a later run than the ALTER)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from lakecdc.config import parse_pipeline
from lakecdc.errors import SourceError
from lakecdc.model import OnlineSchemaChange, TableId
from lakecdc.runtime import run_micro_batch
from lakecdc.runtime.checkpoint import read_checkpoint
from lakecdc.runtime.schema_evolution import SchemaChangeError
from lakecdc.sink import PaimonSink
from lakecdc.sink.sql import run_sql
from lakecdc.source.ddl import UNPARSED_DDL, parse_ddl
from lakecdc.source.options import MySqlSourceOptions
from lakecdc.source.schema import source_table_from_json

PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: root
  password: ""
  tables: {db}.\\.*
  server-id: 5830
  scan.parse.online.schema.changes.enabled: {online}
{source_extra}
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {warehouse}
pipeline:
  name: online {db} {name}
  schema.change.behavior: {mode}
"""

ROW_METADATA = ["FULL", "MINIMAL", "NO_LOG"]
COLUMNS = "id, name, qty"  # the columns the tools copy (those of the table before the ALTER)
CHANGE = "ADD COLUMN note VARCHAR(30), MODIFY COLUMN qty BIGINT"


def make_config(server, db, tmp_path, mode: str, name: str, online: bool = True, source_extra: str = ""):
    text = PIPELINE.format(port=server.port, db=db, warehouse=tmp_path / name, mode=mode, name=name,
                           online=str(online).lower(), source_extra=source_extra)
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return parse_pipeline(text, path=str(path))


@pytest.fixture
def orders(source_server, source_db):
    source_server.execute("CREATE TABLE orders (id INT NOT NULL PRIMARY KEY, name VARCHAR(20), qty INT)",
                          database=source_db)
    source_server.execute("INSERT INTO orders VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30), (4, 'd', 40), "
                          "(5, 'e', 50), (6, 'f', 60)", database=source_db)
    return TableId(source_db, "orders")


# ------------------------------------------------------------------------------------------------ the tools


class Tool:
    """One tool's statements, in the steps the tests cut micro-batches between. ``write(sql, *shadow)`` runs an
    application write on ``orders`` and what the tool does with it on the shadow table (gh-ost: replayed from the
    binlog as REPLACE INTO / DELETE; pt-osc: its triggers do it in the same transaction)."""

    shadow = ""

    def __init__(self, server, db):
        self.server, self.db = server, db

    def sql(self, *statements: str) -> None:
        for statement in statements:
            self.server.execute(statement, database=self.db)

    def copy(self, low: int, high: int) -> None:
        raise NotImplementedError

    def write(self, statement: str, *replayed: str) -> None:
        self.sql(statement)

    def steps(self):
        """The migration as a list of callables (a micro-batch may run after each)."""
        return [self.start, self.copy_rows, self.cut_over, self.clean_up]

    def copy_rows(self) -> None:
        self.copy(1, 4)
        self.write("UPDATE orders SET qty = qty + 100 WHERE id = 2",
                   f"REPLACE INTO `{self.shadow}` ({COLUMNS}) VALUES (2, 'b', 120)")
        self.write("DELETE FROM orders WHERE id = 3", f"DELETE FROM `{self.shadow}` WHERE id = 3")
        self.copy(5, 7)
        self.write("INSERT INTO orders VALUES (8, 'h', 80)",
                   f"REPLACE INTO `{self.shadow}` ({COLUMNS}) VALUES (8, 'h', 80)")

    def after_cut_over(self) -> None:
        # the table has the new schema: these rows are decoded with it
        self.sql("INSERT INTO orders VALUES (9, 'i', 90, 'new')", "UPDATE orders SET note = 'x' WHERE id = 1",
                 "UPDATE orders SET qty = 11 WHERE id = 5")


class GhOst(Tool):
    shadow = "_orders_gho"

    def start(self) -> None:
        db = self.db
        self.sql(f"DROP TABLE IF EXISTS `{db}`.`_orders_gho`", f"DROP TABLE IF EXISTS `{db}`.`_orders_del`",
                 f"DROP TABLE IF EXISTS `{db}`.`_orders_ghc`",
                 f"create /* gh-ost */ table `{db}`.`_orders_ghc` (id bigint unsigned auto_increment, last_update "
                 "timestamp not null DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, hint varchar(64) "
                 "charset ascii not null, value varchar(4096) charset ascii not null, primary key(id), unique key "
                 "hint_uidx(hint)) auto_increment=256",
                 f"create /* gh-ost */ table `{db}`.`_orders_gho` like `{db}`.`orders`",
                 f"alter /* gh-ost */ table `{db}`.`_orders_gho` {CHANGE.lower()}",
                 f"insert /* gh-ost */ into `{db}`.`_orders_ghc` (id, hint, value) values (2, 'state', "
                 "'GhostTableMigrated') on duplicate key update last_update=NOW(), value=VALUES(value)")
        self.write("INSERT INTO orders VALUES (7, 'g', 70)",
                   f"REPLACE INTO `{self.shadow}` ({COLUMNS}) VALUES (7, 'g', 70)")

    def write(self, statement: str, *replayed: str) -> None:
        self.sql(statement, *replayed)  # gh-ost applies the binlog event to the ghost table a moment later

    def copy(self, low: int, high: int) -> None:
        self.sql(f"insert /* gh-ost `{self.db}`.`orders` */ ignore into `{self.db}`.`_orders_gho` ({COLUMNS}) "
                 f"(select {COLUMNS} from `{self.db}`.`orders` force index (`PRIMARY`) where ((`id` >= {low}) and "
                 f"(`id` <= {high})) lock in share mode)")

    def cut_over(self) -> None:
        db = self.db
        # the sentry table that blocks a premature rename, then the atomic swap
        self.sql(f"create /* gh-ost */ table `{db}`.`_orders_del` (id int auto_increment primary key) "
                 "engine=InnoDB comment='ghost-cut-over-sentry'", f"drop /* gh-ost */ table if exists `{db}`."
                 "`_orders_del`",
                 f"rename /* gh-ost */ table `{db}`.`orders` to `{db}`.`_orders_del`, `{db}`.`_orders_gho` to "
                 f"`{db}`.`orders`")
        self.after_cut_over()

    def clean_up(self) -> None:
        self.sql(f"drop /* gh-ost */ table if exists `{self.db}`.`_orders_ghc`",
                 f"drop /* gh-ost */ table if exists `{self.db}`.`_orders_del`",
                 "DELETE FROM orders WHERE id = 4")


class PtOsc(Tool):
    shadow = "_orders_new"

    def start(self) -> None:
        db, new = self.db, f"`{self.db}`.`_orders_new`"
        self.sql(f"CREATE TABLE {new} LIKE `{db}`.`orders`", f"ALTER TABLE {new} {CHANGE.lower()}",
                 f"CREATE TRIGGER `pt_osc_{db}_orders_del` AFTER DELETE ON `{db}`.`orders` FOR EACH ROW DELETE "
                 f"IGNORE FROM {new} WHERE {new}.`id` <=> OLD.`id`",
                 f"CREATE TRIGGER `pt_osc_{db}_orders_upd` AFTER UPDATE ON `{db}`.`orders` FOR EACH ROW BEGIN "
                 f"DELETE IGNORE FROM {new} WHERE !(OLD.`id` <=> NEW.`id`) AND {new}.`id` <=> OLD.`id`; REPLACE "
                 f"INTO {new} ({COLUMNS}) VALUES (NEW.`id`, NEW.`name`, NEW.`qty`); END",
                 f"CREATE TRIGGER `pt_osc_{db}_orders_ins` AFTER INSERT ON `{db}`.`orders` FOR EACH ROW REPLACE "
                 f"INTO {new} ({COLUMNS}) VALUES (NEW.`id`, NEW.`name`, NEW.`qty`)")
        self.write("INSERT INTO orders VALUES (7, 'g', 70)")

    def write(self, statement: str, *replayed: str) -> None:
        self.sql(statement)  # the triggers write the shadow table in the same transaction

    def copy(self, low: int, high: int) -> None:
        self.sql(f"INSERT LOW_PRIORITY IGNORE INTO `{self.db}`.`_orders_new` ({COLUMNS}) SELECT {COLUMNS} FROM "
                 f"`{self.db}`.`orders` FORCE INDEX(`PRIMARY`) WHERE ((`id` >= '{low}')) AND ((`id` <= '{high}')) "
                 f"LOCK IN SHARE MODE /*pt-online-schema-change 4242 copy nibble*/")

    def cut_over(self) -> None:
        db = self.db
        self.sql(f"ANALYZE TABLE `{db}`.`_orders_new` /* pt-online-schema-change */",
                 f"RENAME TABLE `{db}`.`orders` TO `{db}`.`_orders_old`, `{db}`.`_orders_new` TO `{db}`.`orders`")
        self.after_cut_over()

    def clean_up(self) -> None:
        db = self.db
        self.sql(f"DROP TABLE IF EXISTS `{db}`.`_orders_old`", *self.drop_triggers(), "DELETE FROM orders WHERE id = 4")

    def drop_triggers(self) -> list[str]:
        db = self.db
        return [f"DROP TRIGGER IF EXISTS `{db}`.`pt_osc_{db}_orders_{kind}`" for kind in ("del", "upd", "ins")]


TOOLS = {"gh-ost": GhOst, "pt-osc": PtOsc}


# ------------------------------------------------------------------------------------------------ comparisons


def mysql_table(server, table: TableId) -> tuple[list[tuple[str, str]], list[tuple]]:
    columns = [(n, t) for n, t in server.execute(
        "SELECT column_name, column_type FROM information_schema.columns WHERE table_schema = %s AND table_name = %s "
        "ORDER BY ordinal_position", (table.database, table.table))]
    return columns, [tuple(r) for r in server.execute(f"SELECT * FROM `{table.database}`.`{table.table}` ORDER BY id")]


def paimon_table(config, table: TableId) -> tuple[dict[str, str], list[tuple]]:
    """(column → Paimon type, rows by id) as pypaimon reads them; pypaimon-rust must read the same rows."""
    sink = PaimonSink(config.sink.catalog_options)
    rows = sorted(sink.read_table(table).to_pylist(), key=lambda r: r["id"])
    assert run_sql(config.sink.catalog_options, f"SELECT * FROM {table} ORDER BY id").to_pylist() == rows
    return sink.paimon_types(table), [tuple(r.values()) for r in rows]


EXPECTED_TYPES = {
    "evolve": {"id": "INT NOT NULL", "name": "VARCHAR(20)", "qty": "BIGINT", "note": "VARCHAR(30)"},
    "try_evolve": {"id": "INT NOT NULL", "name": "VARCHAR(20)", "qty": "BIGINT", "note": "VARCHAR(30)"},
    "lenient": {"id": "INT NOT NULL", "name": "VARCHAR(20)", "qty": "BIGINT", "note": "VARCHAR(30)"},
    "ignore": {"id": "INT NOT NULL", "name": "VARCHAR(20)", "qty": "INT"},
}


def assert_equal_to_mysql(server, config, table: TableId, mode: str, also: list[TableId] = ()) -> None:
    columns, rows = mysql_table(server, table)
    assert [c for c, _ in columns] == ["id", "name", "qty", "note"]
    assert ("qty", "bigint(20)") in columns
    types, paimon_rows = paimon_table(config, table)
    assert types == EXPECTED_TYPES[mode]
    # ignore keeps the creation schema: MySQL's rows seen through it
    assert paimon_rows == [row[:len(types)] for row in rows]
    # no table of the tool reached Paimon
    assert sorted(PaimonSink(config.sink.catalog_options).list_tables()) == sorted([table, *also])


# ------------------------------------------------------------------------------------------------ item 4


@pytest.mark.parametrize("row_metadata", ROW_METADATA)
@pytest.mark.parametrize("mode", ["evolve", "try_evolve", "lenient", "ignore"])
@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_migration_ends_equal_to_mysql(source_server, source_db, orders, tmp_path, tool, mode, row_metadata):
    """The whole migration in one micro-batch (``one``), and a micro-batch after each of its steps (``steps``):
    both Paimon tables end with MySQL's rows, and with the schema the behaviour gives the change."""
    server, db = source_server, source_db
    one = make_config(server, db, tmp_path, mode, "one")
    steps = make_config(server, db, tmp_path, mode, "steps")
    run_micro_batch(one)
    run_micro_batch(steps)
    migration = TOOLS[tool](server, db)
    for step in migration.steps():
        step()
        run_micro_batch(steps)
        if step == migration.start:
            # the migration is recorded in the schema history between micro-batches; Paimon is unchanged
            checkpoint = read_checkpoint(PaimonSink(steps.sink.catalog_options).checkpoint(orders))
            recorded = checkpoint.schemas[orders]
            assert recorded["online_change"]["shadow"] == migration.shadow
            assert [c["name"] for c in recorded["columns"]] == ["id", "name", "qty"]
            assert paimon_table(steps, orders)[0] == {"id": "INT NOT NULL", "name": "VARCHAR(20)", "qty": "INT"}
    run_micro_batch(one)
    for config in (one, steps):
        assert_equal_to_mysql(server, config, orders, mode)
        checkpoint = read_checkpoint(PaimonSink(config.sink.catalog_options).checkpoint(orders))
        assert "online_change" not in checkpoint.schemas[orders]
        assert [c["name"] for c in checkpoint.schemas[orders]["columns"]] == ["id", "name", "qty", "note"]
    assert not run_micro_batch(one).tables[orders].committed  # nothing new


@pytest.mark.parametrize("row_metadata", ["FULL", "NO_LOG"])
def test_killed_right_after_the_cut_over_changed_paimon(source_server, source_db, orders, tmp_path, row_metadata):
    """A run killed right after the cut-over changed the Paimon schema, before its commit: the rerun reads the
    migration again from the checkpoint (the record of it included), skips the change already made and ends as an
    uninterrupted run."""
    server, db = source_server, source_db
    config = make_config(server, db, tmp_path, "evolve", "killed")
    run_micro_batch(config)
    migration = GhOst(server, db)
    migration.start()
    migration.copy_rows()
    run_micro_batch(config)
    migration.cut_over()
    env = dict(os.environ, LAKECDC_FAILPOINT="after-schema-change")
    crashed = subprocess.run([sys.executable, "-m", "lakecdc.cli", "run", config.path], env=env,
                             capture_output=True, text=True, timeout=300)
    assert crashed.returncode == -9, crashed.stderr[-2000:]
    assert paimon_table(config, orders)[0] == EXPECTED_TYPES["evolve"]  # changed, nothing committed after it
    run_micro_batch(config)
    migration.clean_up()
    run_micro_batch(config)
    assert_equal_to_mysql(server, config, orders, "evolve")


@pytest.mark.parametrize("row_metadata", ROW_METADATA)
@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_exception_mode_fails_at_the_cut_over(source_server, source_db, orders, tmp_path, tool, row_metadata):
    """exception allows no change: the run fails at the RENAME that swaps the shadow table in (not at the ALTER on
    the shadow table, which changes nothing in MySQL's table yet), after committing every row before it."""
    server, db = source_server, source_db
    config = make_config(server, db, tmp_path, "exception", "exception")
    run_micro_batch(config)
    migration = TOOLS[tool](server, db)
    migration.start()
    migration.copy_rows()
    run_micro_batch(config)  # the ALTER on the shadow table is no change of the table yet
    migration.cut_over()
    with pytest.raises(SchemaChangeError, match=r"Unexpected schema change events occurred in EXCEPTION mode: .*"
                                                rf"{migration.shadow}.* on {db}\.orders .*add column note"):
        run_micro_batch(config)
    types, rows = paimon_table(config, orders)
    assert types == {"id": "INT NOT NULL", "name": "VARCHAR(20)", "qty": "INT"}
    assert rows == [(1, "a", 10), (2, "b", 120), (4, "d", 40), (5, "e", 50), (6, "f", 60), (7, "g", 70),
                    (8, "h", 80)]
    with pytest.raises(SchemaChangeError):  # and it stays there
        run_micro_batch(config)


@pytest.mark.parametrize("row_metadata", ROW_METADATA)
def test_renamed_column_through_gh_ost(source_server, source_db, orders, tmp_path, row_metadata):
    """A column renamed by the migration (gh-ost --approve-renamed-columns copies ``name`` into ``title``) keeps
    its binlog type, so without FULL row metadata only the ALTER on the shadow table tells the rows' new names."""
    server, db = source_server, source_db
    config = make_config(server, db, tmp_path, "evolve", "rename")
    run_micro_batch(config)
    sql = GhOst(server, db).sql
    sql(f"create /* gh-ost */ table `{db}`.`_orders_gho` like `{db}`.`orders`",
        f"alter /* gh-ost */ table `{db}`.`_orders_gho` change column name title varchar(20)",
        f"insert ignore into `{db}`.`_orders_gho` (id, title, qty) (select id, name, qty from `{db}`.`orders`)")
    run_micro_batch(config)
    sql(f"rename /* gh-ost */ table `{db}`.`orders` to `{db}`.`_orders_del`, `{db}`.`_orders_gho` to `{db}`.`orders`",
        "UPDATE orders SET title = 'z' WHERE id = 1", f"drop table `{db}`.`_orders_del`")
    run_micro_batch(config)
    types, rows = paimon_table(config, orders)
    assert types == {"id": "INT NOT NULL", "title": "VARCHAR(20)", "qty": "INT"}
    assert rows == mysql_table(server, orders)[1] and rows[0] == (1, "z", 10)


@pytest.mark.parametrize("newly_added", ["scan.newly-added-table.enabled", "scan.binlog.newly-added-table.enabled"])
@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_tool_tables_are_not_captured_as_new_tables(source_server, source_db, orders, tmp_path, tool, newly_added):
    """``tables`` matches the tools' tables too (``db.\\.*``); with tables created later captured, the shadow,
    changelog and old tables stay the tool's: no Paimon table for them, and the migration still ends equal."""
    server, db = source_server, source_db
    config = make_config(server, db, tmp_path, "evolve", "newly-added", source_extra=f"  {newly_added}: true")
    run_micro_batch(config)
    server.execute("CREATE TABLE later (id INT PRIMARY KEY)", database=db)  # a new table is still captured
    migration = TOOLS[tool](server, db)
    for step in migration.steps()[:-1]:  # the tool's tables exist at each run
        step()
        run_micro_batch(config)
    assert_equal_to_mysql(server, config, orders, "evolve", also=[TableId(db, "later")])


@pytest.mark.parametrize("row_metadata", ROW_METADATA)
def test_given_up_migration_changes_nothing(source_server, source_db, orders, tmp_path, row_metadata):
    """A migration dropped before its cut-over (gh-ost interrupted, pt-osc --no-swap-tables) leaves the table and
    Paimon as they were, and its record leaves the schema history."""
    server, db = source_server, source_db
    config = make_config(server, db, tmp_path, "evolve", "given-up")
    run_micro_batch(config)
    migration = PtOsc(server, db)
    migration.start()
    run_micro_batch(config)
    # pt-osc's clean-up after a failure: the triggers, then the new table
    migration.sql(*migration.drop_triggers(), f"DROP TABLE IF EXISTS `{db}`.`_orders_new`",
                  "INSERT INTO orders VALUES (10, 'j', 100)")
    run_micro_batch(config)
    checkpoint = read_checkpoint(PaimonSink(config.sink.catalog_options).checkpoint(orders))
    assert "online_change" not in checkpoint.schemas[orders]
    types, rows = paimon_table(config, orders)
    assert types == {"id": "INT NOT NULL", "name": "VARCHAR(20)", "qty": "INT"}
    assert rows == mysql_table(server, orders)[1]


# ------------------------------------------------------------------------------------------------ option off


@pytest.mark.parametrize("row_metadata", ROW_METADATA)
@pytest.mark.parametrize("mode", ["evolve", "lenient"])
def test_without_the_option_the_cut_over_stops_the_run(source_server, source_db, orders, tmp_path, mode,
                                                       row_metadata):
    """Without scan.parse.online.schema.changes.enabled the RENAME puts a table lakecdc did not follow in place of
    the captured one: evolve and exception stop at it, naming the option; ignore, lenient and try_evolve go on only
    where the server logs column names, and then the first row of the new schema stops the run (here: a column
    more). Rows before the RENAME are committed."""
    server, db = source_server, source_db
    config = make_config(server, db, tmp_path, mode, "off", online=False)
    run_micro_batch(config)
    migration = GhOst(server, db)
    migration.start()
    migration.copy_rows()
    migration.cut_over()
    if mode == "lenient" and row_metadata == "FULL":
        with pytest.raises(SourceError, match=rf"rows event of {db}\.orders .* 4 columns .*schema history has 3"):
            run_micro_batch(config)
    else:
        expected = "does not log column names" if row_metadata != "FULL" else r"schema\.change\.behavior evolve"
        with pytest.raises(SchemaChangeError, match=rf"RENAME TABLE puts {db}\._orders_gho in place of the captured "
                                                    rf"table {db}\.orders.*scan\.parse\.online\.schema\.changes\."
                                                    rf"enabled: true.*{expected}"):
            run_micro_batch(config)
    rows = paimon_table(config, orders)[1]
    assert rows[-1] == (8, "h", 80) and len(rows) == 7  # up to the statement before the RENAME


# ------------------------------------------------------------------------------------------------ item 5

UNPARSED_RENAME = "ALTER TABLE orders RENAME COLUMN name TO title, ADD CHECK (qty >= 0)"  # sqlglot cannot parse it


@pytest.mark.parametrize("row_metadata", ROW_METADATA)
@pytest.mark.parametrize("mode", ["evolve", "exception", "try_evolve", "lenient", "ignore"])
def test_unparsed_ddl_without_column_names_stops_every_mode(source_server, source_db, orders, tmp_path, mode,
                                                            row_metadata):
    """A statement lakecdc cannot interpret that keeps every binlog type (here a rename): without FULL row
    metadata the rows after it would be named from the old schema, so every mode stops at it; with FULL the
    tolerant modes go on and the first row (named ``title`` in the binlog) stops them."""
    server, db = source_server, source_db
    config = make_config(server, db, tmp_path, mode, "unparsed", online=False)
    run_micro_batch(config)
    server.execute("UPDATE orders SET qty = 11 WHERE id = 1", database=db)
    server.execute(UNPARSED_RENAME, database=db)
    server.execute("UPDATE orders SET title = 'z' WHERE id = 2", database=db)
    if row_metadata != "FULL":
        with pytest.raises(SchemaChangeError, match=r"cannot interpret the DDL statement 'ALTER TABLE orders RENAME "
                                                    rf"COLUMN .* on {db}\.orders .*does not log column names.*every "
                                                    rf"schema\.change\.behavior \({mode}\).*Re-snapshot"):
            run_micro_batch(config)
    elif mode in ("evolve", "exception"):
        with pytest.raises(SchemaChangeError, match=rf"schema\.change\.behavior {mode}"):
            run_micro_batch(config)
    else:
        with pytest.raises(SourceError, match=rf"rows event of {db}\.orders .*named 'title' in the binlog"):
            run_micro_batch(config)
    rows = paimon_table(config, orders)[1]
    assert rows[:2] == [(1, "a", 11), (2, "b", 20)]  # committed up to the statement before it


# ------------------------------------------------------------------------------------------------ parsing


def _options(online: bool = True) -> MySqlSourceOptions:
    return MySqlSourceOptions(hostname="127.0.0.1", parse_online_schema_changes=online)


def _orders_table(options: MySqlSourceOptions):
    return source_table_from_json({"table": "db.orders", "primary_keys": ["id"], "columns": [
        {"name": "id", "type": "int(11)", "nullable": False}, {"name": "name", "type": "varchar(20)",
                                                               "charset": "utf8mb4"},
        {"name": "qty", "type": "int(11)"}]}, options)


def test_shadow_table_statements_are_recorded_until_the_cut_over():
    options = _options()
    table = _orders_table(options)
    tables = {table.table_id: table}
    orders = table.table_id
    for statement in ("create table `_orders_ghc` (id int)", "insert into _orders_gho values (1)",
                      "DROP TABLE IF EXISTS `db`.`_orders_gho`"):
        assert parse_ddl(statement, "db", tables, options).schemas == {}
    created = parse_ddl("create /* gh-ost */ table `db`.`_orders_gho` like `db`.`orders`", "db", tables, options)
    assert created.events == [] and created.schemas[orders].online_change == OnlineSchemaChange("_orders_gho")
    tables = {orders: created.schemas[orders]}
    altered = parse_ddl("alter /* gh-ost */ table _orders_gho add column note varchar(30)", "db", tables, options)
    assert altered.events == []  # the table itself is unchanged until the cut-over
    assert altered.schemas[orders].columns == table.columns
    assert altered.schemas[orders].online_change.statements == (
        ("db", "alter /* gh-ost */ table _orders_gho add column note varchar(30)"),)
    # the record survives the checkpoint's JSON
    assert source_table_from_json(altered.schemas[orders].to_json(), options) == altered.schemas[orders]
    tables = {orders: altered.schemas[orders]}
    swap = parse_ddl("rename /* gh-ost */ table `db`.`orders` to `db`.`_orders_del`, `db`.`_orders_gho` to "
                     "`db`.`orders`", "db", tables, options)
    assert [e.describe() for e in swap.events] == ["add column note varchar(30) LAST"]
    assert swap.schemas[orders].column_names == ["id", "name", "qty", "note"]
    assert swap.schemas[orders].online_change is None
    assert "_orders_gho add column note" in swap.statements[orders]


def test_other_renames_onto_a_captured_table_are_not_guessed():
    for online in (True, False):
        options = _options(online)
        table = _orders_table(options)
        tables = {table.table_id: table}
        for statement, hint in [("RENAME TABLE orders TO orders_old, orders_v2 TO orders", "re-snapshot db.orders"),
                                ("ALTER TABLE `db`.`orders_v2` RENAME TO `db`.`orders`", "re-snapshot db.orders"),
                                ("RENAME TABLE orders TO _orders_old, _orders_new TO orders",
                                 "was not read" if online else "scan.parse.online.schema.changes.enabled: true")]:
            parsed = parse_ddl(statement, "db", tables, options)
            assert [e.type for e in parsed.events] == [UNPARSED_DDL], statement
            assert hint in parsed.events[0].describe()
            assert parsed.schemas[table.table_id] == table
    # renaming the captured table away is still no event (tests/test_source_nothing_skipped.py)
    assert parse_ddl("RENAME TABLE orders TO orders_old", "db", tables, options).schemas == {}


def test_pt_osc_shadow_table_spelled_out():
    """pt-online-schema-change creates its new table from SHOW CREATE TABLE: a copy of the table (followed), or,
    when the columns differ, not a copy (its cut-over is then not followed)."""
    options = _options()
    table = _orders_table(options)
    tables = {table.table_id: table}
    copy = ("CREATE TABLE `db`.`_orders_new` (\n  `id` int(11) NOT NULL,\n  `name` varchar(20) DEFAULT NULL,\n  `qty` "
            "int(11) DEFAULT NULL,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4")
    assert parse_ddl(copy, "db", tables, options).schemas[table.table_id].online_change == \
        OnlineSchemaChange("_orders_new")
    other = copy.replace("`qty` int(11)", "`qty` bigint(20)")
    assert parse_ddl(other, "db", tables, options).schemas[table.table_id].online_change is None


def test_shadow_alter_lakecdc_cannot_interpret():
    """An ALTER on the shadow table that lakecdc cannot interpret is recorded; the cut-over then gives one
    unparsed.ddl event saying which statement, and keeps the old schema (lakecdc.runtime.schema_evolution decides
    whether the run may go on)."""
    options = _options()
    table = _orders_table(options)
    orders = table.table_id
    tables = {orders: table}
    for statement in ("CREATE TABLE _orders_new LIKE orders", "ALTER TABLE _orders_new ADD COLUMN w INT, "
                                                             "ADD CHECK (w >= 0)"):
        tables = {orders: parse_ddl(statement, "db", tables, options).schemas[orders]}
    swap = parse_ddl("RENAME TABLE orders TO _orders_old, _orders_new TO orders", "db", tables, options)
    assert [e.type for e in swap.events] == [UNPARSED_DDL]
    assert "cannot interpret 'ALTER TABLE _orders_new ADD COLUMN w INT" in swap.events[0].describe()
    assert swap.schemas[orders] == table
