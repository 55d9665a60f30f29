"""Paimon consumers (issue 36): the tutorial's table written by the pipeline from the private MariaDB, read by a
downstream Dagster asset (assets/order_totals.py) and by Python consumers at different speeds, with upkeep
expiring snapshots in between; plus the consumer API on a table written through lakecdc.paimon.

One module-scoped tutorial setup; every run of the pipeline is a real micro-batch and every read a real change read
of the Paimon files."""

import os
import random
import shutil
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import assets.order_totals as order_totals
from lakecdc.cli import main as cli_main
from lakecdc.config import load_pipeline
from lakecdc.dagster import build_definitions
from lakecdc.errors import SinkError
from lakecdc.model import TableId
from lakecdc.paimon import Catalog, Row, RowKind
from lakecdc.sink import PaimonSink
from lakecdc.sink.consumers import consumer_lags, load_checkpoint
from lakecdc.sink.upkeep import upkeep_table

ROOT = Path(__file__).resolve().parent.parent
ORDERS = TableId("inventory", "orders")
ORDERS_KEY = order_totals.ORDERS
TOTALS_KEY = order_totals.TOTALS
TOTALS_CONSUMER = "dagster-analytics.daily_order_totals"
CREATE_ORDERS = """CREATE TABLE inventory.orders (id BIGINT NOT NULL, product VARCHAR(100) NOT NULL,
  price DECIMAL(10, 2) NOT NULL, created_at DATETIME(3) NOT NULL, PRIMARY KEY (id))"""
DAYS = ["2026-01-01", "2026-01-02", "2026-01-03"]
# Upkeep that expires everything it may: only consumers and the checkpoint snapshot hold snapshots back.
EXPIRE_ALL = {"snapshot.num-retained.min": "1", "snapshot.time-retained": "0 s", "snapshot.expire.limit": "1000"}


@pytest.fixture(scope="module")
def lake(mariadb, tmp_path_factory):
    """The tutorial pipeline on inventory.orders (10 orders), its definitions with the example asset, a warehouse
    and a Dagster instance."""
    tmp = tmp_path_factory.mktemp("consumers")
    env = {"MYSQL_HOST": "127.0.0.1", "MYSQL_PORT": str(mariadb.port), "MYSQL_USER": "root", "MYSQL_PASSWORD": "",
           "LAKECDC_WAREHOUSE": str(tmp / "warehouse")}
    pipelines = tmp / "pipelines"
    pipelines.mkdir()
    shutil.copy(ROOT / "assets" / "tutorial.yaml", pipelines / "tutorial.yaml")
    mariadb.execute("DROP DATABASE IF EXISTS inventory")
    mariadb.execute("CREATE DATABASE inventory")
    mariadb.execute(CREATE_ORDERS)
    values = ", ".join(f"({i}, 'p{i}', {i}.50, '{DAYS[i % 3]} 10:00:00')" for i in range(1, 11))
    mariadb.execute(f"INSERT INTO inventory.orders VALUES {values}")
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        config = load_pipeline(pipelines / "tutorial.yaml")
        defs = dg.Definitions.merge(build_definitions(pipelines),
                                    order_totals.example_definitions(env["LAKECDC_WAREHOUSE"]))
        with dg.DagsterInstance.ephemeral() as instance:  # in memory: no SQLite writes per event
            yield config, defs, instance, PaimonSink(config.sink.catalog_options), pipelines / "tutorial.yaml"
    mariadb.execute("DROP DATABASE IF EXISTS inventory")


def materialize(defs, instance, selection):
    result = dg.materialize([*defs.assets, *defs.asset_checks], instance=instance, selection=selection,
                            resources=defs.resources, raise_on_error=False)
    return result, {e.asset_key: e.materialization.metadata for e in result.get_asset_materialization_events()}


def workload(mariadb, rng: random.Random, next_id: list[int], deleted: list[int]) -> None:
    """Random inserts, price updates, day changes (the Paimon key changes), deletes (soft deletes in the tutorial's
    table) and re-inserts of deleted orders; a few statements each."""
    ids = [r[0] for r in mariadb.execute("SELECT id FROM inventory.orders")]
    statements = []
    kinds = ["insert", "update", "move", "delete"]
    ops = kinds + rng.choices(kinds, k=rng.randint(0, 3))  # every kind at least once
    rng.shuffle(ops)
    for op in ops + ["reinsert"]:  # last: an order deleted in this batch or an earlier one comes back
        if op == "reinsert" and deleted:
            again = deleted.pop()
            statements.append(f"INSERT INTO inventory.orders VALUES ({again}, 'r{again}', {rng.randint(1, 99)}.50, "
                              f"'{rng.choice(DAYS)} 09:00:00')")
            ids.append(again)
        elif op in ("insert", "reinsert") or not ids:
            next_id[0] += 1
            statements.append(f"INSERT INTO inventory.orders VALUES ({next_id[0]}, 'n{next_id[0]}', "
                              f"{rng.randint(1, 99)}.25, '{rng.choice(DAYS)} 08:00:00')")
            ids.append(next_id[0])
        elif op == "update":
            statements.append(f"UPDATE inventory.orders SET price = {rng.randint(1, 99)}.75 "
                              f"WHERE id = {rng.choice(ids)}")
        elif op == "move":
            statements.append(f"UPDATE inventory.orders SET created_at = '{rng.choice(DAYS)} 18:00:00' "
                              f"WHERE id = {rng.choice(ids)}")
        else:
            victim = rng.choice(ids)
            ids.remove(victim)
            deleted.append(victim)
            statements.append(f"DELETE FROM inventory.orders WHERE id = {victim}")
    for statement in statements:
        mariadb.execute(statement)


def recomputed(sink: PaimonSink) -> pa.Table:
    """Per-day totals of the whole Paimon table (live, not soft-deleted orders), computed from scratch."""
    rows = sink.read_table(ORDERS, ["id", "order_day", "price", "op_type"])
    live = rows.filter(pc.not_equal(rows.column("op_type"), order_totals.DELETED))
    return order_totals.daily_totals(live.select(["order_day", "price"])).to_pylist()


def stored_totals(sink: PaimonSink) -> list[dict]:
    return load_checkpoint(sink, TOTALS_CONSUMER).value.to_pylist()


class PythonConsumer:
    """A consumer through lakecdc.paimon keeping the same totals as the example asset."""

    def __init__(self, table, consumer_id: str):
        self.table, self.consumer_id, self.totals = table, consumer_id, None

    def step(self) -> list[dict]:
        changes = self.table.read_changes(consumer_id=self.consumer_id, before_images=True)
        self.totals = order_totals.apply_changes(None if changes.full else self.totals, changes.to_arrow())
        changes.commit()
        return self.totals.to_pylist()


def snapshot_ids(sink: PaimonSink) -> list[int]:
    return [s.id for s in sink.snapshots(ORDERS)]


def test_downstream_asset_and_consumers_follow_random_batches_exactly_once(lake, mariadb, monkeypatch):
    config, defs, instance, sink, _ = lake
    rng = random.Random(36)
    next_id, deleted = [100], []
    catalog = Catalog(config.sink.catalog_options["warehouse"])
    consumed_to = 0  # the last snapshot the asset's consumer has read
    expired_any = False
    for batch in range(3):
        if batch:
            workload(mariadb, rng, next_id, deleted)
        failing = batch == 2
        if failing:  # the asset fails after reading its input: nothing of what it read may count
            def broken(*args):
                raise RuntimeError("downstream failure")
            monkeypatch.setattr(order_totals, "apply_changes", broken)
        result, metadata = materialize(defs, instance, [ORDERS_KEY, TOTALS_KEY])
        latest = sink.latest_snapshot_id(ORDERS)
        assert ORDERS_KEY in metadata
        if batch == 0:  # the table exists now
            table = catalog.get_table("inventory.orders")
            fast, slow = PythonConsumer(table, "fast"), PythonConsumer(table, "slow")
        if failing:
            assert not result.success and TOTALS_KEY not in metadata
            assert sink.consumers(ORDERS).get(TOTALS_CONSUMER).next_snapshot == consumed_to + 1
            monkeypatch.undo()
            # the retry (the asset alone) gets the same changes, and those committed since
            result, metadata = materialize(defs, instance, [TOTALS_KEY])
        assert result.success
        changes = metadata[TOTALS_KEY]
        prefix = "lakecdc/changes/inventory.orders"
        assert changes[f"{prefix}/snapshots"].value == f"({consumed_to}, {latest}]"
        assert changes[f"{prefix}/full_read"].value == (batch == 0)
        if batch:  # the rows by kind are what a change read of the same range returns
            expected = table.read_changes(consumed_to, latest, before_images=True).to_arrow().column("rowkind")
            assert changes[f"{prefix}/rows"].value == {c["values"]: c["counts"]
                                                       for c in pc.value_counts(expected).to_pylist()}
        consumed_to = latest
        assert sink.consumers(ORDERS).get(TOTALS_CONSUMER).next_snapshot == latest + 1
        truth = recomputed(sink)
        assert stored_totals(sink) == truth, batch

        # Two Python consumers at different speeds, each equal to the recompute whenever it reads.
        assert fast.step() == truth
        if batch % 2 == 0:
            assert slow.step() == truth
        lags = {c.consumer_id: c for c in consumer_lags(sink, ORDERS)}
        assert lags["fast"].snapshots_behind == 0 and lags[TOTALS_CONSUMER].changes_behind == 0

        # Upkeep expiring all it may: never a snapshot some consumer has not read, nor the one it read last
        # (where its next read looks the previous rows up).
        before = snapshot_ids(sink)
        upkept = upkeep_table(sink, ORDERS, options=EXPIRE_ALL)
        assert upkept.skipped is None
        last_read = min(c.next_snapshot for c in sink.consumers(ORDERS).all()) - 1
        kept = snapshot_ids(sink)
        assert [i for i in before if i >= last_read] == [i for i in kept if i in before and i >= last_read]
        expired_any = expired_any or bool(upkept.expired_snapshots)
        assert all(i < last_read for i in upkept.expired_snapshots)
    assert expired_any  # the fast readers let upkeep expire snapshots

    # The slow consumer catches up across the upkeep snapshots and the expired history before it.
    assert slow.step() == recomputed(sink)


def test_consumer_files_are_paimons(lake):
    """Files lakecdc writes are what pypaimon's ConsumerManager reads, and the other way round."""
    from pypaimon import CatalogFactory
    from pypaimon.consumer import Consumer, ConsumerManager

    config, defs, instance, sink, _ = lake
    paimon_table = CatalogFactory.create({"warehouse": config.sink.catalog_options["warehouse"]}) \
        .get_table("inventory.orders")
    manager = ConsumerManager(paimon_table.file_io, paimon_table.table_path)
    ours = {c.consumer_id: c.next_snapshot for c in sink.consumers(ORDERS).all()}
    assert TOTALS_CONSUMER in ours and manager.consumers() == ours
    assert manager.min_next_snapshot() == min(ours.values())

    table = Catalog(config.sink.catalog_options["warehouse"]).get_table("inventory.orders")
    latest = sink.latest_snapshot_id(ORDERS)
    manager.reset_consumer("flink-job", Consumer(next_snapshot=latest))  # as a Flink job would leave it
    changes = table.read_changes(consumer_id="flink-job")
    assert (changes.start_snapshot_id, changes.end_snapshot_id, changes.full) == (latest - 1, latest, False)
    changes.commit()
    assert manager.consumer("flink-job").next_snapshot == latest + 1
    path = Path(str(paimon_table.table_path).removeprefix("file://")) / "consumer" / "consumer-flink-job"
    assert path.read_text() == '{"nextSnapshot": %d}' % (latest + 1)
    assert table.delete_consumer("flink-job") and manager.consumer("flink-job") is None


def test_automation_requests_the_downstream_asset_and_status_shows_its_lag(lake, mariadb, capsys):
    """AutomationCondition.eager(): a materialisation of the table requests the downstream asset, no schedule; until
    it runs, `lakecdc status` (pipeline_status) shows its consumer behind by what the table committed."""
    from lakecdc.runtime import pipeline_status

    config, defs, instance, sink, path = lake
    first = dg.evaluate_automation_conditions(defs=defs, instance=instance)
    latest = sink.latest_snapshot_id(ORDERS)
    sink.consumers(ORDERS).reset("gone", 1)  # expired by the first test's upkeep
    mariadb.execute("INSERT INTO inventory.orders VALUES (900, 'auto', 1.00, '2026-01-01 07:00:00')")
    mariadb.execute("UPDATE inventory.orders SET price = price + 1 WHERE id = 1")
    result, _ = materialize(defs, instance, [ORDERS_KEY])
    assert result.success
    after = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=first.cursor)
    assert after.total_requested == 1 and after.get_num_requested(TOTALS_KEY) == 1

    lags = {c.consumer_id: c for c in pipeline_status(config, consumers=True).tables[0].consumers}
    now = sink.latest_snapshot_id(ORDERS)
    behind = lags[TOTALS_CONSUMER]
    assert (behind.next_snapshot, behind.snapshots_behind) == (latest + 1, now - latest)
    # the change rows those snapshots committed: what a change read of them returns
    table = Catalog(config.sink.catalog_options["warehouse"]).get_table("inventory.orders")
    assert behind.changes_behind == table.read_changes(latest, now).num_rows > 0 and not behind.expired
    assert lags["gone"].expired and lags["gone"].changes_behind is None
    capsys.readouterr()
    assert cli_main(["status", str(path)]) == 0
    printed = capsys.readouterr().out
    assert (f"consumer {TOTALS_CONSUMER}: {now - latest} snapshot(s) behind, {behind.changes_behind} change rows "
            f"(next snapshot {latest + 1})") in printed
    assert "consumer gone: next snapshot 1 has expired" in printed
    assert sink.consumers(ORDERS).delete("gone")


def test_follow_mode_and_the_sensors_run_feed_the_downstream_exactly_once(lake, mariadb, tmp_path):
    """The table written by follow mode (commits every 500 ms, a random batch of changes after each of the first
    ones) and then by the run the binlog sensor requests: the downstream asset, materialised after each, reads
    exactly the snapshots committed since its last run and equals the full recompute."""
    from lakecdc.runtime import follow_pipeline

    config, defs, instance, sink, path = lake
    rng = random.Random(3636)
    next_id, deleted = [2000], []

    def downstream_equals_recompute(context: str) -> None:
        consumed_to = sink.consumers(ORDERS).get(TOTALS_CONSUMER).next_snapshot - 1
        result, metadata = materialize(defs, instance, [TOTALS_KEY])
        assert result.success, context
        latest = sink.latest_snapshot_id(ORDERS)
        assert metadata[TOTALS_KEY]["lakecdc/changes/inventory.orders/snapshots"].value == \
            f"({consumed_to}, {latest}]", context
        assert stored_totals(sink) == recomputed(sink), context

    # Follow mode: three follow commits, a random batch written after each of the first two.
    following = tmp_path / "tutorial.yaml"
    following.write_text(path.read_text() + "  checkpoint-interval: 500ms\n")
    commits: list = []

    def on_commit(tables) -> None:
        commits.append(tables)
        if len(commits) < 3:
            workload(mariadb, rng, next_id, deleted)

    workload(mariadb, rng, next_id, deleted)
    follow_pipeline(load_pipeline(following), should_stop=lambda: len(commits) >= 3, on_commit=on_commit)
    assert sum(t.counts.inserted + t.counts.updated + t.counts.deleted for r in commits for t in r) > 0
    downstream_equals_recompute("after follow mode")

    # The binlog sensor: its tick requests the table with changes; that run, then the downstream asset.
    sensor = defs.resolve_sensor_def(f"{config.slug}_binlog_sensor")
    quiet = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=defs))
    assert quiet.run_requests == [], quiet.skip_message
    workload(mariadb, rng, next_id, deleted)
    tick = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=defs, cursor=quiet.cursor))
    [request] = tick.run_requests
    assert list(request.asset_selection) == [ORDERS_KEY], tick.skip_message
    result, _ = materialize(defs, instance, list(request.asset_selection))
    assert result.success
    downstream_equals_recompute("after the sensor's run")


def test_consumer_api_on_a_python_written_table(tmp_path):
    """Consumers through lakecdc.paimon without a pipeline: exact -U/+U with changelog-producer input,
    ignore_delete, ignore-progress, an expired consumer's error, consumer.expiration-time, a conflicting commit."""
    catalog = Catalog(tmp_path / "warehouse")
    events = catalog.create_table("db.events", [("id", "INT"), ("v", "INT")], primary_keys=["id"],
                                  options={"bucket": "1", "changelog-producer": "input", **EXPIRE_ALL,
                                           "consumer.expiration-time": "1 h"})
    events.write([(1, 10), (2, 20)])
    first = events.read_changes(consumer_id="a")
    assert first.full
    assert first.to_pylist() == [{"rowkind": "+I", "id": 1, "v": 10}, {"rowkind": "+I", "id": 2, "v": 20}]
    assert first.commit() == 2
    events.write([Row.of_kind(RowKind.UPDATE_BEFORE, 1, 10), Row.of_kind(RowKind.UPDATE_AFTER, 1, 11),
                  Row.of_kind(RowKind.DELETE, 2, 20)])
    history = events.read_changes(consumer_id="a", ignore_delete=True)
    assert [(r["rowkind"], r["id"], r["v"]) for r in history.to_pylist()] == [("+U", 1, 11)]
    events.write([(3, 30)])
    again = events.read_changes(consumer_id="a")  # nothing committed yet: from the same snapshot, every kind
    assert (again.start_snapshot_id, again.end_snapshot_id) == (1, 3)
    assert again.counts() == {"+I": 1, "-U": 1, "+U": 1, "-D": 1}
    assert history.commit() == 3
    with pytest.raises(SinkError, match="moved from snapshot 2 to 3"):
        again.commit()  # the other read's commit moved the consumer meanwhile: refused, nothing written
    assert events.read_changes(consumer_id="a").to_pylist() == [{"rowkind": "+I", "id": 3, "v": 30}]
    assert events.read_changes(consumer_id="a", ignore_progress=True).full

    # An abandoned consumer (file older than consumer.expiration-time) is removed before snapshots expire.
    events.reset_consumer("abandoned", 1)
    old = tmp_path / "warehouse" / "db.db" / "events" / "consumer" / "consumer-abandoned"
    os.utime(old, (old.stat().st_mtime - 7200, old.stat().st_mtime - 7200))
    done = events.expire_snapshots()
    assert done.expired_consumers == ["abandoned"] and done.expired_snapshots == [1]  # "a" read 2, reads 3
    assert [c.consumer_id for c in events.consumers()] == ["a"]
    # A consumer set back to an expired snapshot is told so, and how to read the table again.
    events.reset_consumer("late", 1)
    with pytest.raises(SinkError, match=r"has not read snapshot 1, which has expired .*delete_consumer\('late'\)"):
        events.read_changes(consumer_id="late")
    assert events.delete_consumer("late") and events.read_changes(consumer_id="late").full


def test_consumers_on_an_s3_warehouse(s3_warehouse):
    """The same consumer files on an s3:// warehouse: written as objects, read back by pypaimon's ConsumerManager,
    honoured and expired by upkeep; the Dagster IO manager's checkpoint lands in the bucket too."""
    from pypaimon import CatalogFactory
    from pypaimon.consumer import ConsumerManager

    options = {k: v for k, v in s3_warehouse.items() if k not in ("warehouse", "metastore")}
    catalog = Catalog(s3_warehouse["warehouse"], options=options)
    table = catalog.create_table("db.s3", [("id", "INT"), ("v", "INT")], primary_keys=["id"],
                                 options={"bucket": "1", **EXPIRE_ALL})
    table.write([(0, 0), (1, 1)])
    first = table.read_changes(consumer_id="reader")
    assert first.full and first.num_rows == 2 and first.commit() == 2
    table.write([Row.of_kind(RowKind.DELETE, 0, 0)])
    table.write([(5, 5)])
    paimon_table = CatalogFactory.create(dict(s3_warehouse)).get_table("db.s3")
    assert ConsumerManager(paimon_table.file_io, paimon_table.table_path).consumers() == {"reader": 2}
    assert table.expire_snapshots().expired_snapshots == []  # the consumer read 1 and reads 2, 3
    changes = table.read_changes(consumer_id="reader", before_images=True)
    assert [(r["rowkind"], r["id"], r["v"]) for r in changes.to_pylist()] == [("-D", 0, 0), ("+I", 5, 5)]
    changes.commit()
    assert [(c.consumer_id, c.next_snapshot) for c in table.consumers()] == [("reader", 4)]
    assert table.expire_snapshots().expired_snapshots == [1, 2]
    sink = PaimonSink(dict(s3_warehouse))
    from lakecdc.sink.consumers import ConsumerRead, save_checkpoint

    read = ConsumerRead(TableId("db", "s3"), "reader", changes.to_arrow(), 3, 3, False, 4)
    save_checkpoint(sink, "reader", {"n": 1}, [read], load_checkpoint(sink, "reader"))
    saved = load_checkpoint(sink, "reader")
    assert (saved.positions, saved.value) == ({"db.s3": 4}, {"n": 1})
    assert table.delete_consumer("reader") and table.consumers() == []


def test_the_io_managers_s3_keys_must_be_env_vars():
    from lakecdc.dagster import PaimonChangesIOManager
    from lakecdc.dagster.resources import check_secrets
    from lakecdc.errors import PipelineConfigError

    with pytest.raises(PipelineConfigError, match="PaimonChangesIOManager's s3.secret-key is given as plain text"):
        check_secrets({"paimon_changes": PaimonChangesIOManager(warehouse="s3://b/w", s3_secret_key="plain")})
    check_secrets({"paimon_changes": PaimonChangesIOManager(warehouse="s3://b/w",
                                                            s3_secret_key=dg.EnvVar("LAKE_SECRET"))})


def test_a_downstream_of_an_input_changelog_table_keeping_history(tmp_path):
    """changelog-producer input, read with ignore_delete (seed 002's consumer that keeps history): the downstream
    asset gets the +I/+U rows only, each once, and a downstream of it loads its stored value."""
    from lakecdc.dagster import PaimonChanges, PaimonChangesIOManager

    events = Catalog(tmp_path / "warehouse").create_table(
        "db.events", [("id", "INT"), ("v", "INT")], primary_keys=["id"],
        options={"bucket": "1", "changelog-producer": "input"})
    events.write([(1, 10), (2, 20)])
    upstream = dg.AssetSpec(["paimon", "db", "events"])

    @dg.asset(key="history", io_manager_key="changes",
              ins={"events": dg.AssetIn(upstream.key, input_manager_key="changes")})
    def history(events: PaimonChanges) -> list:
        kept = [] if events.full else events.previous
        return kept + [(r["rowkind"], r["id"], r["v"]) for r in events.rows.to_pylist()]

    @dg.asset(key="history_size", io_manager_key="changes")
    def history_size(history: list) -> int:
        return len(history)

    @dg.asset(key="history_size_doubled", io_manager_key="changes")  # reads an asset that read no Paimon input
    def history_size_doubled(history_size: int) -> int:
        return 2 * history_size

    resources = {"changes": PaimonChangesIOManager(warehouse=str(tmp_path / "warehouse"), ignore_delete=True)}
    sink = PaimonSink({"warehouse": str(tmp_path / "warehouse")})

    def result_of(consumer_id: str):
        return load_checkpoint(sink, consumer_id).value

    with dg.DagsterInstance.ephemeral() as instance:  # in memory: no SQLite writes per event
        def run():
            result = dg.materialize([upstream, history, history_size, history_size_doubled], instance=instance,
                                    resources=resources, selection=[history.key, history_size.key,
                                                                    history_size_doubled.key])
            assert result.success
            return result.output_for_node("history"), \
                result.asset_materializations_for_node("history")[0].metadata

        value, metadata = run()
        assert value == [("+I", 1, 10), ("+I", 2, 20)]
        assert metadata["lakecdc/changes/db.events/full_read"].value is True
        events.write([Row.of_kind(RowKind.UPDATE_BEFORE, 1, 10), Row.of_kind(RowKind.UPDATE_AFTER, 1, 11),
                      Row.of_kind(RowKind.DELETE, 2, 20)])
        value, metadata = run()
        assert value == [("+I", 1, 10), ("+I", 2, 20), ("+U", 1, 11)]
        assert metadata["lakecdc/changes/db.events/snapshots"].value == "(1, 2]"
        assert metadata["lakecdc/changes/db.events/rows"].value == {"+U": 1}
        assert run()[0] == value  # nothing new: nothing applied twice
        assert result_of("dagster-history_size") == 3 and result_of("dagster-history_size_doubled") == 6


def test_before_images_make_a_delta_read_an_exact_changelog(tmp_path):
    """changelog-producer none: each commit's merged rows, with before images, become what the writes meant."""
    table = Catalog(tmp_path / "warehouse").create_table("db.t", [("id", "INT"), ("v", "INT")], primary_keys=["id"],
                                                         options={"bucket": "1"})  # one bucket: rows in key order
    table.write([(1, 10), (2, 20)])
    table.write([Row.of_kind(RowKind.UPDATE_BEFORE, 1, 10), Row.of_kind(RowKind.UPDATE_AFTER, 1, 11),
                 Row.of_kind(RowKind.DELETE, 2, 20), (3, 30)])
    table.write([Row.of_kind(RowKind.DELETE, 9, 0), (1, 12)])  # a delete of a key never written; an upsert
    merged = [(r["rowkind"], r["id"], r["v"]) for r in table.read_changes(1, 3).to_pylist()]
    assert merged == [("+U", 1, 11), ("-D", 2, 20), ("+I", 3, 30), ("+I", 1, 12), ("-D", 9, 0)]
    exact = [(r["rowkind"], r["id"], r["v"]) for r in table.read_changes(0, 3, before_images=True).to_pylist()]
    assert exact == [("+I", 1, 10), ("+I", 2, 20), ("-U", 1, 10), ("+U", 1, 11), ("-D", 2, 20), ("+I", 3, 30),
                     ("-U", 1, 11), ("+U", 1, 12)]
    only_v = table.read_changes(2, 3, columns=["v"], before_images=True, ignore_delete=True).to_pylist()
    assert only_v == [{"rowkind": "+U", "v": 12}]
