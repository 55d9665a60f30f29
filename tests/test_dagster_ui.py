"""The real Dagster UI, headless: `dagster-webserver` and `dagster-daemon` on a loopback port against definitions.py
(workspace.yaml), the tutorial pipeline (next to a broken pipeline file, which fails alone) launched and inspected
through GraphQL: the asset graph's mysql → paimon edge, both assets' definitions (column schemas with the types
`lakecdc describe` prints, where each table lives, Markdown-safe descriptions), the latest materialisation's
metadata, the asset checks, the binlog sensor's cursor after a real tick, the new column in the run that applies
ADD COLUMN, the checks passing after FLUSH BINARY LOGS, the reconcile job, a partition re-snapshot (no Dagster
partitions: nothing missing, nothing to create; the partition's rows in its log; no stored output), the SOFT_DELETE
note only on a SOFT_DELETE table. Headless Chromium (installed by scripts/setup.sh; the test fails without it) renders
the pages and the test asserts what they show: the table's columns (with the new one), each check's result, the
re-snapshot job's pages, the broken file in the catalog list and on its page (plain text, its group and kind, the
file's line and column of the faulty expression); and renders the asset lineage page to a PNG."""

import html.parser
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
LOCATION = "lakecdc"
REPOSITORY = "__repository__"
SLUG = "enrich_mysql_orders_with_soft_deletes"
ORDERS_PATH = ["paimon", "inventory", "orders"]
DAGSTER_YAML = """concurrency:
  pools:
    default_limit: 1
telemetry:
  enabled: false
"""
CREATE_ORDERS = """CREATE TABLE inventory.orders (id BIGINT NOT NULL, product VARCHAR(100) NOT NULL,
  price DECIMAL(10, 2) NOT NULL, created_at DATETIME(3) NOT NULL, PRIMARY KEY (id))"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Dagster:
    """A headless webserver (+ daemon) and a GraphQL client for it."""

    def __init__(self, env: dict, port: int):
        self.env, self.port = env, port
        self.url = f"http://127.0.0.1:{port}/graphql"
        self.processes = []
        self.logs = []

    def start(self, tmp: Path) -> None:
        # Create the instance's SQLite storages (runs, events, schedules) before the webserver and the daemon start:
        # two processes creating them at once race in alembic ("CommandError" in check_alembic_revision), which
        # made the webserver fail to come up on a loaded machine. Done here (what `dagster instance migrate` does,
        # without a dagster process start-up).
        import dagster as dg

        with dg.DagsterInstance.from_config(self.env["DAGSTER_HOME"]) as instance:
            instance.upgrade()
        for name, command in (
                ("webserver", [str(BIN / "dagster-webserver"), "-w", "workspace.yaml", "-h", "127.0.0.1", "-p",
                               str(self.port)]),
                ("daemon", [str(BIN / "dagster-daemon"), "run", "-w", "workspace.yaml"])):
            log = open(tmp / f"{name}.log", "w")
            self.logs.append(tmp / f"{name}.log")
            self.processes.append(subprocess.Popen(command, cwd=ROOT, env=self.env, stdout=log,
                                                   stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.monotonic() + 240  # generous: a loaded 2-core CI machine starts the code server slowly
        while time.monotonic() < deadline:
            try:
                if requests.get(f"http://127.0.0.1:{self.port}/server_info", timeout=2).ok:
                    # the code location must be loaded too
                    data = self.query("{ repositoriesOrError { ... on RepositoryConnection { nodes { name } } } }")
                    if data["repositoriesOrError"].get("nodes"):
                        return
            except requests.RequestException:
                pass
            time.sleep(0.5)
        raise AssertionError("the webserver did not come up: " + self.tail())

    def stop(self) -> None:
        for process in self.processes:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)

    def tail(self) -> str:
        return "\n".join(p.read_text()[-3000:] for p in self.logs if p.exists())

    def query(self, query: str, variables: dict | None = None) -> dict:
        response = requests.post(self.url, json={"query": query, "variables": variables or {}}, timeout=60)
        body = response.json()  # schema errors come back as HTTP 400 with a JSON body
        assert "errors" not in body, body["errors"]
        return body["data"]

    def wait_for_run(self, run_id: str, timeout: float = 180) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.query("query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }",
                                {"id": run_id})["runOrError"]["status"]
            if status in ("SUCCESS", "FAILURE", "CANCELED"):
                return status
            time.sleep(0.25)
        raise AssertionError(f"run {run_id} did not finish: " + self.tail())


LAUNCH = """mutation($params: ExecutionParams!) { launchRun(executionParams: $params) {
  __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message }
  ... on InvalidSubsetError { message } ... on RunConfigValidationInvalid { errors { message } } } }"""
ASSET_NODES = """{ assetNodes { assetKey { path } groupName kinds pools opVersion description
  dependencyKeys { path } dependedByKeys { path }
  metadataEntries { __typename label ... on TextMetadataEntry { text }
    ... on TableSchemaMetadataEntry { schema { columns { name type description } } } } } }"""
ASSET = """query($path: [String!]!) { assetOrError(assetKey: {path: $path}) { ... on Asset {
  assetMaterializations(limit: 1) { runId metadataEntries { __typename label
    ... on IntMetadataEntry { intValue } ... on TextMetadataEntry { text }
    ... on TableSchemaMetadataEntry { schema { columns { name type description } } }
    ... on TableColumnLineageMetadataEntry { lineage { columnName columnDeps { assetKey { path } columnName } } }
    ... on TableMetadataEntry { table { records schema { columns { name } } } } }
    tags { key value } }
  definition { assetChecksOrError { ... on AssetChecks { checks { name blocking
    executionForLatestMaterialization { status evaluation { success description } } } } } } } } }"""
SENSOR = """query($s: SensorSelector!) { sensorOrError(sensorSelector: $s) { ... on Sensor { sensorState { id status
  typeSpecificData { ... on SensorData { lastCursor lastRunKey } }
  ticks(limit: 10) { status cursor runIds skipReason error { message } } } } } }"""
START_SENSOR = """mutation($s: SensorSelector!) { startSensor(sensorSelector: $s) { __typename
  ... on Sensor { sensorState { status } } ... on PythonError { message } } }"""


def metadata_of(ui: Dagster) -> tuple[dict, dict]:
    asset = ui.query(ASSET, {"path": ORDERS_PATH})["assetOrError"]
    entries = {e["label"]: e for e in asset["assetMaterializations"][0]["metadataEntries"]}
    checks = {c["name"]: c for c in asset["definition"]["assetChecksOrError"]["checks"]}
    return entries, checks


@pytest.fixture
def ui(mariadb, tmp_path):
    pipelines = tmp_path / "pipelines"
    pipelines.mkdir()
    text = (ROOT / "assets" / "tutorial.yaml").read_text()
    # A fast sensor that starts stopped, so the test launches the first run itself.
    text = text.rstrip("\n") + "\n  lakecdc.sensor.interval: 1s\n  lakecdc.sensor.default-status: stopped\n"
    (pipelines / "tutorial.yaml").write_text(text)
    # a pipeline without SOFT_DELETE, of another table (never run here)
    (pipelines / "plain.yaml").write_text(plain_pipeline(text))
    # a broken pipeline file next to it: it must fail alone (the tutorial still loads and runs)
    (pipelines / "broken.yaml").write_text(text.replace("Enrich MySQL orders", "Broken orders")
                                           .replace("UPPER(product) AS", "UPPER(product AS"))
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(DAGSTER_YAML)
    mariadb.execute("DROP DATABASE IF EXISTS inventory")
    mariadb.execute("CREATE DATABASE inventory")
    mariadb.execute(CREATE_ORDERS)
    mariadb.execute("CREATE TABLE inventory.customers (id INT PRIMARY KEY, name VARCHAR(20))")
    mariadb.execute("INSERT INTO inventory.orders VALUES (101, 'book', 29.90, '2026-01-01 12:00:00'), "
                    "(102, 'pen', 5.00, '2026-01-02 09:30:00')")
    env = {**os.environ, "DAGSTER_HOME": str(home), "LAKECDC_PIPELINES_DIR": str(pipelines),
           "MYSQL_HOST": "127.0.0.1", "MYSQL_PORT": str(mariadb.port), "MYSQL_USER": "root", "MYSQL_PASSWORD": "",
           "LAKECDC_WAREHOUSE": str(tmp_path / "warehouse"), "DAGSTER_DISABLE_TELEMETRY": "yes"}
    env.pop("LAKECDC_FAILPOINT", None)
    dagster = Dagster(env, free_port())
    try:
        dagster.start(tmp_path)  # inside the try: a server that never came up is stopped too
        yield dagster
    finally:
        dagster.stop()
        mariadb.execute("DROP DATABASE IF EXISTS inventory")


def plain_pipeline(tutorial: str) -> str:
    """The tutorial's server and warehouse, no transform, for inventory.customers."""
    source = tutorial[tutorial.index("source:"):tutorial.index("transform:")]
    sink = tutorial[tutorial.index("sink:"):tutorial.index("pipeline:")]
    return (source.replace("tables: inventory.orders", "tables: inventory.customers") + sink +
            "pipeline:\n  name: Plain customers\n  lakecdc.sensor.default-status: stopped\n")


class _Text(html.parser.HTMLParser):
    """The text a page shows (what a reader sees), from the DOM Chromium rendered."""

    def __init__(self):
        super().__init__()
        self.parts: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag, attrs):
        self.skip += tag in ("script", "style")

    def handle_endtag(self, tag):
        self.skip -= tag in ("script", "style") and self.skip > 0

    def handle_data(self, data):
        if not self.skip and data.strip():
            self.parts.append(data.strip())


def page_text(ui: Dagster, path: str, tmp_path: Path) -> str:
    """The text of a UI page as headless Chromium renders it (after the app fetched its data)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "Chromium is not installed: run scripts/setup.sh (it installs Debian's chromium)"
    dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                          "--window-size=1400,2400", "--virtual-time-budget=20000", "--dump-dom",
                          f"http://127.0.0.1:{ui.port}{path}"], capture_output=True, text=True, timeout=180).stdout
    parser = _Text()
    parser.feed(dom)
    text = " ".join(parser.parts)
    (tmp_path / (path.strip("/").replace("/", "_").replace("?", "_") + ".txt")).write_text(text)
    return text


def launch_job(ui: Dagster, job: str, run_config: dict | None = None, **params) -> str:
    launched = ui.query(LAUNCH, {"params": {"selector": {
        "repositoryLocationName": LOCATION, "repositoryName": REPOSITORY, "jobName": job, **params},
        **({"runConfigData": run_config} if run_config else {})}})
    assert launched["launchRun"]["__typename"] == "LaunchRunSuccess", launched
    return launched["launchRun"]["run"]["runId"]


CHECK_EXECUTIONS = """query($key: AssetKeyInput!, $name: String!) {
  assetCheckExecutions(assetKey: $key, checkName: $name, limit: 1) { runId status
    evaluation { success description } } }"""
STOP_SENSOR = """mutation($id: String!) { stopSensor(id: $id) { __typename
  ... on StopSensorMutationResult { instigationState { status } } ... on PythonError { message } } }"""
RUNS = "{ runsOrError(limit: 20) { ... on Runs { results { runId status } } } }"
PARTITION_SETS = """query($r: RepositorySelector!, $job: String!) {
  partitionSetsOrError(repositorySelector: $r, pipelineName: $job) { ... on PartitionSets { results { name } } } }"""
RUN_LOGS = """query($id: ID!) { logsForRun(runId: $id) { ... on EventConnection { events { __typename
  ... on MessageEvent { message } } } } }"""


RUN_CHECKS = ("changed_rows_match", "changed_keys_unique", "schema_matches_source")


def definition_metadata(node: dict) -> dict:
    return {e["label"]: e for e in node["metadataEntries"]}


def columns_of(entry: dict) -> dict:
    return {c["name"]: c for c in entry["schema"]["columns"]}


def nodes_by_key(ui: Dagster) -> dict:
    return {"/".join(n["assetKey"]["path"]): n for n in ui.query(ASSET_NODES)["assetNodes"]}


# --- issue 35, part A: the follow job's cancel, DDL, the MySQL assets, quiet runs ------------------------------
TERMINATE = """mutation($id: String!) { terminateRun(runId: $id) { __typename ... on PythonError { message }
  ... on TerminateRunFailure { message } } }"""
LATEST_EVENTS = """query($path: [String!]!) { assetOrError(assetKey: {path: $path}) { ... on Asset {
  assetMaterializations(limit: 1) { runId tags { key value } metadataEntries { label
    ... on TextMetadataEntry { text } ... on TableSchemaMetadataEntry { schema { columns { name type } } }
    ... on TableMetadataEntry { table { records } } } }
  assetObservations(limit: 1) { runId tags { key value } metadataEntries { label
    ... on TextMetadataEntry { text } } } } } }"""
MYSQL_PATH = ["mysql", "inventory", "orders"]


def run_events(ui: Dagster, run_id: str) -> list[tuple[str, str]]:
    events = ui.query(RUN_LOGS, {"id": run_id})["logsForRun"]["events"]
    return [(e["__typename"], e.get("message") or "") for e in events]


def latest_events(ui: Dagster, path: list[str]) -> tuple[dict, dict]:
    """The asset's latest materialisation and latest observation (each {} when none), metadata by label."""
    asset = ui.query(LATEST_EVENTS, {"path": path})["assetOrError"]
    found = []
    for kind in ("assetMaterializations", "assetObservations"):
        event = (asset[kind] or [{}])[0]
        found.append({"runId": event.get("runId"), "tags": {t["key"]: t["value"] for t in event.get("tags", [])},
                      **{e["label"]: e for e in event.get("metadataEntries", [])}})
    return found[0], found[1]


def assert_ddl_is_traced(ui: Dagster, run_id: str, tmp_path: Path) -> None:
    """The run that applied ADD COLUMN: a log line and lakecdc/schema_changes name the DDL; the MySQL asset shows
    the new column without a reload, and is not 'Never materialized'."""
    assert any("ADD COLUMN note" in m and "DDL on inventory.orders at" in m for _, m in run_events(ui, run_id))
    changed, _ = latest_events(ui, ORDERS_PATH)
    [ddl] = [json.loads(r) for r in changed["lakecdc/schema_changes"]["table"]["records"]]
    assert ddl["statement"].endswith("ADD COLUMN note VARCHAR(20)") and "note" in ddl["paimon"], ddl
    source, _ = latest_events(ui, MYSQL_PATH)
    assert source["runId"] == run_id and source["tags"]["dagster/data_version"].startswith("binlog-"), source
    assert {c["name"]: c["type"] for c in source["dagster/column_schema"]["schema"]["columns"]}["note"] == \
        "varchar(20)"
    page = page_text(ui, "/assets/mysql/inventory/orders", tmp_path)
    assert "note" in page.split() and "varchar(20)" in page.split(), page[:3000]
    assert "Never materialized" not in page, page[:3000]


def assert_follow_cancel_is_clean(ui: Dagster, mariadb) -> None:
    """The follow job, terminated from the UI, stops cleanly and counts what it committed; its commit's checks ran."""
    mariadb.execute("INSERT INTO inventory.orders VALUES (104, 'glue', 3.10, '2026-01-03 12:00:00', NULL)")
    follow = launch_job(ui, f"{SLUG}_follow")
    deadline = time.monotonic() + 180
    while latest_events(ui, ORDERS_PATH)[0]["runId"] != follow:
        assert time.monotonic() < deadline, ui.tail()
        time.sleep(0.5)
    assert ui.query(TERMINATE, {"id": follow})["terminateRun"]["__typename"] == "TerminateRunSuccess"
    assert ui.wait_for_run(follow) == "SUCCESS", ui.tail()
    events = run_events(ui, follow)
    assert not [e for e in events if e[0] in ("ExecutionStepFailureEvent", "RunFailureEvent")], events
    assert not [m for _, m in events if "Interrupted" in m or "Traceback" in m], events
    assert any("the run was cancelled (Terminate)" in m for _, m in events), events
    assert any(m.startswith("summary inventory.orders: binlog") and "1 inserted" in m for _, m in events), events
    _, checks = metadata_of(ui)
    assert all(checks[c]["executionForLatestMaterialization"]["status"] == "SUCCEEDED" for c in RUN_CHECKS), checks
    assert latest_events(ui, MYSQL_PATH)[0]["runId"] == follow  # the follow's commit recorded the MySQL change


def assert_quiet_run_says_so(ui: Dagster, tmp_path: Path) -> None:
    """The pipeline's job with nothing new to read: one line in the run says so, and the asset page shows an
    observation with the checkpoint, not a materialisation."""
    before, _ = latest_events(ui, ORDERS_PATH)
    run = launch_job(ui, f"{SLUG}_job")
    assert ui.wait_for_run(run) == "SUCCESS", ui.tail()
    said = [m for _, m in run_events(ui, run) if "no new changes" in m]
    assert len(said) == 1 and "inventory.orders" in said[0], said
    materialized, observed = latest_events(ui, ORDERS_PATH)
    assert materialized["runId"] == before["runId"], (materialized, before)  # nothing materialised
    assert observed["runId"] == run and "no new changes since its checkpoint" in \
        observed["lakecdc/no_new_changes"]["text"], observed
    page = page_text(ui, "/assets/paimon/inventory/orders?view=events", tmp_path)
    assert "lakecdc/no_new_changes" in page, page[:3000]


def test_tutorial_through_the_webserver(mariadb, ui, tmp_path):
    # The asset graph: mysql/inventory/orders → paimon/inventory/orders, with its pool and code version.
    nodes = nodes_by_key(ui)
    orders, source = nodes["paimon/inventory/orders"], nodes["mysql/inventory/orders"]
    assert [k["path"] for k in orders["dependencyKeys"]] == [["mysql", "inventory", "orders"]]
    assert [k["path"] for k in source["dependedByKeys"]] == [ORDERS_PATH]
    assert orders["kinds"] == ["paimon"] and source["kinds"] == ["mysql"]
    assert orders["pools"] == [f"lakecdc/{SLUG}"] and orders["opVersion"]  # the pipeline's pool
    assert orders["groupName"] == SLUG and source["groupName"] == "mysql"

    # Each asset names the table where it lives (two different tables, not one "linked" table).
    paimon_meta, mysql_meta = definition_metadata(orders), definition_metadata(source)
    warehouse = str(tmp_path / "warehouse")
    assert paimon_meta["dagster/table_name"]["text"] == f"paimon:file://{warehouse}/inventory.orders"
    assert mysql_meta["dagster/table_name"]["text"] == f"mysql://127.0.0.1:{mariadb.port}/inventory.orders"
    # The MySQL asset shows its columns with MySQL's types, and the server it is on (the port the pipeline uses).
    mysql_columns = columns_of(mysql_meta["dagster/column_schema"])
    assert {n: c["type"] for n, c in mysql_columns.items()} == {
        "id": "bigint(20)", "product": "varchar(100)", "price": "decimal(10,2)", "created_at": "datetime(3)"}
    assert mysql_columns["id"]["description"] == "primary key"
    assert f"`127.0.0.1:{mariadb.port}`" in source["description"]
    # The Paimon asset's definition shows the columns it creates, typed as `lakecdc describe` prints them;
    # identifiers in descriptions are Markdown code (``__namespace_name__`` is not bold).
    defined = columns_of(paimon_meta["dagster/column_schema"])
    assert defined["product"]["type"] == "VARCHAR(100)" and defined["created_at"]["type"] == "TIMESTAMP(3)"
    assert defined["source_table"]["description"] == \
        "from `__namespace_name__`, `__schema_name__`, `__table_name__`"
    assert "`inventory.orders`" in orders["description"] and "dagster/row_count" in orders["description"]

    # Launch the pipeline's job through GraphQL and wait for it (the daemon dequeues and launches it).
    launched = ui.query(LAUNCH, {"params": {"selector": {
        "repositoryLocationName": LOCATION, "repositoryName": REPOSITORY, "jobName": f"{SLUG}_job"}}})
    assert launched["launchRun"]["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["launchRun"]["run"]["runId"]
    assert ui.wait_for_run(run_id) == "SUCCESS", ui.tail()

    entries, checks = metadata_of(ui)
    assert entries["lakecdc/paimon_snapshot_id"]["intValue"] == 1
    assert entries["lakecdc/phase"]["text"] == "snapshot"
    assert entries["lakecdc/binlog_offset"]["text"].count(":") == 1
    assert entries["lakecdc/inserted"]["intValue"] == 2 and entries["dagster/row_count"]["intValue"] == 2
    columns = [c["name"] for c in entries["dagster/column_schema"]["schema"]["columns"]]
    assert columns[:4] == ["id", "product", "price", "created_at"] and columns[-1] == "order_day"
    stored = columns_of(entries["dagster/column_schema"])
    # the types `lakecdc describe` prints (not STRING, not TIMESTAMP(3)(3))
    assert [stored[c]["type"] for c in ("id", "product", "price", "created_at", "order_day")] == [
        "BIGINT", "VARCHAR(100)", "DECIMAL(10, 2)", "TIMESTAMP(3)", "STRING"]
    assert stored["product_upper"]["description"] == "from `inventory.orders.product`"
    assert entries["dagster/table_name"]["text"] == paimon_meta["dagster/table_name"]["text"]
    lineage = {c["columnName"]: [(d["assetKey"]["path"], d["columnName"]) for d in c["columnDeps"]]
               for c in entries["dagster/column_lineage"]["lineage"]}
    assert lineage["product_upper"] == [(["mysql", "inventory", "orders"], "product")]
    assert lineage["order_day"] == [(["mysql", "inventory", "orders"], "created_at")]
    partitions = [json.loads(r) for r in entries["lakecdc/partitions_changed"]["table"]["records"]]
    assert sorted(p["partition"] for p in partitions) == ["order_day=20260101", "order_day=20260102"]
    assert [c["name"] for c in entries["lakecdc/partitions_changed"]["table"]["schema"]["columns"]] == [
        "partition", "+I", "-U", "+U", "-D", "rows_written"]
    # the checks of the run's commit ran with it; the reconciliation is the reconcile job's (not run yet)
    assert {name: (c["blocking"], (c["executionForLatestMaterialization"] or {}).get("status"))
            for name, c in checks.items()} == {
        "changed_rows_match": (True, "SUCCEEDED"), "changed_keys_unique": (True, "SUCCEEDED"),
        "schema_matches_source": (True, "SUCCEEDED"), "row_count_matches_source": (False, None),
        "primary_key_unique": (False, None)}

    # Start the binlog sensor, change MySQL, and wait for a tick that launches a run.
    selector = {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY,
                "sensorName": f"{SLUG}_binlog_sensor"}
    started = ui.query(START_SENSOR, {"s": selector})["startSensor"]
    assert started["__typename"] == "Sensor", started
    mariadb.execute("UPDATE inventory.orders SET product = 'notebook' WHERE id = 101")
    head = mariadb.execute("SHOW MASTER STATUS")
    deadline = time.monotonic() + 120
    ticks = []
    while time.monotonic() < deadline:
        state = ui.query(SENSOR, {"s": selector})["sensorOrError"]["sensorState"]
        ticks = [t for t in state["ticks"] if t["runIds"]]
        # the daemon stores the tick before the sensor's cursor: wait for both
        if ticks and state["typeSpecificData"]["lastCursor"]:
            break
        time.sleep(0.25)
    assert ticks, f"no tick launched a run: {state['ticks']}\n{ui.tail()}"
    cursor = json.loads(state["typeSpecificData"]["lastCursor"])
    assert cursor["requested"] == ["inventory.orders"]
    if head:
        assert cursor["head"] == f"{head[0][0]}:{head[0][1]}"
    assert state["typeSpecificData"]["lastRunKey"] == f"{cursor['head']}|inventory.orders"
    assert ui.wait_for_run(ticks[0]["runIds"][0]) == "SUCCESS", ui.tail()
    entries, checks = metadata_of(ui)
    assert entries["lakecdc/phase"]["text"] == "binlog" and entries["lakecdc/updated"]["intValue"] == 1
    assert entries["lakecdc/binlog_offset"]["text"] == cursor["head"]
    assert all(checks[c]["executionForLatestMaterialization"]["status"] == "SUCCEEDED" for c in RUN_CHECKS)

    # ADD COLUMN: the run that applies it shows the new column at once, in its metadata and on the asset's page.
    mariadb.execute("ALTER TABLE inventory.orders ADD COLUMN note VARCHAR(20)")
    mariadb.execute("INSERT INTO inventory.orders VALUES (103, 'tape', 2.50, '2026-01-03 11:00:00', 'gift')")
    assert ui.wait_for_run(launch_job(ui, f"{SLUG}_job")) == "SUCCESS", ui.tail()
    # the running sensor saw the change too: its run (queued behind this one by the pool limit) must be done, or
    # its checks are still "planned" for the latest materialisation
    for run in ui.query(RUNS)["runsOrError"]["results"]:
        assert ui.wait_for_run(run["runId"]) == "SUCCESS", ui.tail()
    entries, checks = metadata_of(ui)
    assert entries["lakecdc/inserted"]["intValue"] == 1
    assert columns_of(entries["dagster/column_schema"])["note"]["type"] == "VARCHAR(20)"
    assert all(checks[c]["executionForLatestMaterialization"]["status"] == "SUCCEEDED" for c in RUN_CHECKS)
    requests.post(ui.url, json={"query": "mutation { setNuxSeen }"}, timeout=30)
    page = page_text(ui, "/assets/paimon/inventory/orders", tmp_path)
    for column in ("id", "product_upper", "order_day", "note", "VARCHAR(20)"):
        assert column in page.split(), (column, page[:3000])
    assert_ddl_is_traced(ui, latest_events(ui, ORDERS_PATH)[0]["runId"], tmp_path)

    # FLUSH BINARY LOGS, then the checks alone (a check-only run, as "Execute checks" in the UI: the schema against
    # MySQL now, the reconciliation) and the reconcile job: they pass. (The sensor is stopped first: it would start
    # the checkpoint refresh the rotation makes due, with its own checks.)
    sensor_id = ui.query(SENSOR, {"s": selector})["sensorOrError"]["sensorState"]["id"]
    stopped = ui.query(STOP_SENSOR, {"id": sensor_id})["stopSensor"]
    assert stopped["__typename"] == "StopSensorMutationResult", stopped
    # a tick under way when it stopped may still launch its run (seconds later on a loaded machine): wait until the
    # runs are all done and no new one appeared for a while
    seen: set = set()
    while True:
        time.sleep(3)
        runs = {run["runId"] for run in ui.query(RUNS)["runsOrError"]["results"]}
        for run in runs:
            ui.wait_for_run(run)
        if runs == seen:
            break
        seen = runs
    mariadb.execute("FLUSH BINARY LOGS")
    names = sorted(checks)
    run_id = launch_job(ui, "__ASSET_JOB", assetSelection=[], assetCheckSelection=[
        {"assetKey": {"path": ORDERS_PATH}, "name": name} for name in names])
    assert ui.wait_for_run(run_id) == "SUCCESS", ui.tail()
    for name in names:
        [execution] = ui.query(CHECK_EXECUTIONS, {"key": {"path": ORDERS_PATH}, "name": name})["assetCheckExecutions"]
        assert (execution["runId"], execution["status"]) == (run_id, "SUCCEEDED"), execution
    reconciled = launch_job(ui, f"{SLUG}_reconcile")
    assert ui.wait_for_run(reconciled) == "SUCCESS", ui.tail()
    for name in ("row_count_matches_source", "primary_key_unique"):
        [execution] = ui.query(CHECK_EXECUTIONS, {"key": {"path": ORDERS_PATH}, "name": name})["assetCheckExecutions"]
        assert (execution["runId"], execution["status"]) == (reconciled, "SUCCEEDED"), execution
    page = page_text(ui, "/assets/paimon/inventory/orders?view=checks", tmp_path)
    for name in names:  # the checks list shows each check with its latest result
        assert f"{name} {name} Succeeded" in page, page[:3000]
    assert "Failed" not in page.split() and "Passed" in page.split(), page[:3000]

    assert_follow_cancel_is_clean(ui, mariadb)
    assert_quiet_run_says_so(ui, tmp_path)

    assert_partition_resnapshot(ui, tmp_path)
    assert_broken_pipeline_file(ui, tmp_path)
    assert_soft_delete_caveat(ui)

    # The asset lineage page, rendered by headless Chromium (scripts/setup.sh installs it).
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "Chromium is not installed: run scripts/setup.sh (it installs Debian's chromium)"
    requests.post(ui.url, json={"query": "mutation { setNuxSeen }"}, timeout=30)
    png = tmp_path / "lineage.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--window-size=1400,900", "--virtual-time-budget=15000", f"--screenshot={png}",
                    f"http://127.0.0.1:{ui.port}/assets/paimon/inventory/orders?view=lineage"],
                   capture_output=True, timeout=120)
    assert png.exists() and png.stat().st_size > 20_000


def assert_partition_resnapshot(ui: Dagster, tmp_path: Path) -> None:
    """The re-snapshot job is no Dagster partitioned job (nothing shows as missing, no picker creates partitions):
    its run config names the Paimon partition; the run reports the partition's rows and stores no output."""
    job = "resnapshot__inventory__orders"
    repository = {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY}
    sets = ui.query(PARTITION_SETS, {"r": repository, "job": job})["partitionSetsOrError"]["results"]
    assert sets == [], sets
    # the launchpad: no partition picker (nor its "Add a partition"), no Partitions tab with "Missing" partitions
    page = page_text(ui, f"/locations/{LOCATION}/jobs/{job}/playground", tmp_path)
    assert "Launch Run" in page and "partitions" in page, page[:3000]
    assert "Partitions" not in page.split() and "Add a partition" not in page and "Missing partitions" not in page, \
        page[:3000]
    config = {"ops": {f"{job}_op": {"config": {"partitions": ["order_day=20260101"]}}}}
    run_id = launch_job(ui, job, run_config=config)
    assert ui.wait_for_run(run_id) == "SUCCESS", ui.tail()
    events = ui.query(RUN_LOGS, {"id": run_id})["logsForRun"]["events"]
    kinds = {e["__typename"] for e in events}
    messages = [e.get("message") or "" for e in events]
    assert "HandledOutputEvent" not in kinds and not any("IOManager" in m for m in messages), messages
    assert "MaterializationEvent" in kinds
    # the tutorial's order_day=20260101 holds one row (id 101)
    assert any("partition order_day=20260101: 1 rows from MySQL" in m for m in messages), messages
    entries, _ = metadata_of(ui)
    assert entries["lakecdc/resnapshot_partition"]["text"] == "order_day=20260101"


def assert_broken_pipeline_file(ui: Dagster, tmp_path: Path) -> None:
    """The broken pipeline file fails alone and stands out: group and kind say broken; its text reads cleanly in
    the catalog list (plain text, no Markdown markup) and on its page; the error names the file's line and column
    of the faulty part of the folded projection."""
    invalid = nodes_by_key(ui)["lakecdc_broken/broken_yaml"]
    assert invalid["kinds"] == ["broken"] and invalid["groupName"] == "lakecdc_broken_pipelines", invalid
    lines = (ROOT / "assets" / "tutorial.yaml").read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "UPPER(product)" in text)
    column = lines[line - 1].index("UPPER(") + len("UPPER(")  # the parenthesis left open
    where = f"broken.yaml, line {line}, column {column} (key transform[0].projection)"
    assert where in invalid["description"], invalid["description"]
    catalog = page_text(ui, "/assets?view=flat", tmp_path)
    # its row of the catalog list: key, kind, description (plain text, truncated), group
    row = catalog[catalog.index("lakecdc_broken / broken_yaml"):catalog.index("lakecdc_broken_pipelines")]
    assert "broken Broken pipeline file: it does not load" in row, row
    assert not any(markup in row for markup in ("**", "\\*", "\\_", "`")), row
    page = page_text(ui, "/assets/lakecdc_broken/broken_yaml", tmp_path)
    assert where in page and "syntax error: Expecting )" in page and "[at line" not in page, page[:3000]
    assert "**" not in page and "broken" in page.split(), page[:3000]
    graph = page_text(ui, f"/locations/{LOCATION}/asset-groups/lakecdc_broken_pipelines/lineage", tmp_path)
    # its node: the name, no "Never materialized", the kind badge "broken" (a word of its own: not broken_yaml)
    assert "broken_yaml" in graph and "Never materialized" not in graph and "broken" in graph.split(), graph[:3000]


def assert_soft_delete_caveat(ui: Dagster) -> None:
    """The SOFT_DELETE note is on the SOFT_DELETE table's description only."""
    nodes = nodes_by_key(ui)
    assert "Its transform is SOFT_DELETE" in nodes["paimon/inventory/orders"]["description"]
    assert "SOFT_DELETE" not in nodes["paimon/inventory/customers"]["description"]
