"""The `dg` Component on a scaffolded project: `dg scaffold defs lakecdc.CdcPipelineComponent`, a defs.yaml holding
the Flink CDC pipeline YAML (with a key prefix and group), `dg check defs`, `dg list defs` and `dg launch`
materialising the Paimon table, checked by reading it back; a broken pipeline fails naming the YAML key: a misspelt
partition-keys column in `dg check defs`, an unknown key when the project's defs are loaded in this process (what
`dg check defs` loads, without its two process start-ups)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lakecdc.sink.sql import run_sql

BIN = Path(sys.executable).parent
PYPROJECT = """[project]
name = "cdc_demo"
version = "0.1.0"
requires-python = ">=3.10"
dependencies = ["lakecdc"]

[tool.dg]
directory_type = "project"

[tool.dg.project]
root_module = "cdc_demo"
"""
DEFINITIONS = """from pathlib import Path

from dagster import definitions, load_from_defs_folder


@definitions
def defs():
    return load_from_defs_folder(path_within_project=Path(__file__).parent)
"""


def scaffold_project(root: Path) -> Path:
    """What `create-dagster project` lays out, minus the virtualenv (the test runs in lakecdc's)."""
    package = root / "src" / "cdc_demo"
    (package / "defs").mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT)
    (package / "__init__.py").write_text("")
    (package / "defs" / "__init__.py").write_text("")
    (package / "definitions.py").write_text(DEFINITIONS)
    return package


def dg(root: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "dg"), *args], cwd=root, env=env, capture_output=True, text=True, timeout=300)


def test_component_scaffold_check_list_launch(mariadb, fresh_db, tmp_path, monkeypatch):
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.orders (id INT PRIMARY KEY, product VARCHAR(50) NOT NULL, "
                    "day DATE NOT NULL)")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.orders VALUES (1, 'book', '2026-01-01'), (2, 'pen', '2026-01-02')")
    root = tmp_path / "cdc_demo"
    package = scaffold_project(root)
    warehouse = tmp_path / "warehouse"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "DAGSTER_HOME": str(tmp_path / "home"),
           "PYTHONPATH": os.pathsep.join(p for p in (str(root / "src"), os.environ.get("PYTHONPATH")) if p),
           "CDC_DB_PORT": str(mariadb.port), "CDC_DB_PASSWORD": "", "CDC_WAREHOUSE": str(warehouse),
           "DAGSTER_DISABLE_TELEMETRY": "yes"}
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "dagster.yaml").write_text("")

    listed = dg(root, env, "list", "components", "--json")
    assert listed.returncode == 0, listed.stderr
    assert "lakecdc.CdcPipelineComponent" in listed.stdout

    scaffolded = dg(root, env, "scaffold", "defs", "lakecdc.CdcPipelineComponent", "orders_cdc")
    assert scaffolded.returncode == 0, scaffolded.stderr
    defs_yaml = package / "defs" / "orders_cdc" / "defs.yaml"
    starter = yaml.safe_load(defs_yaml.read_text())
    assert starter["type"] == "lakecdc.CdcPipelineComponent"
    assert set(starter["attributes"]["pipeline"]) == {"source", "transform", "sink", "pipeline"}

    # The user's pipeline: Flink CDC YAML inline, connection overrides as resources (password through EnvVar).
    defs_yaml.write_text(yaml.safe_dump({"type": "lakecdc.CdcPipelineComponent", "attributes": {
        "pipeline": {
            "source": {"type": "mysql", "hostname": "127.0.0.1", "port": 3306, "username": "root",
                       "tables": f"{fresh_db}.orders"},
            "transform": [{"source-table": f"{fresh_db}.orders", "projection": "*, UPPER(product) AS product_upper",
                           "partition-keys": "day"}],
            "sink": {"type": "paimon", "catalog.properties.metastore": "filesystem",
                     "catalog.properties.warehouse": "{{ env('CDC_WAREHOUSE') }}"},
            "pipeline": {"name": "demo orders", "lakecdc.sensor.default-status": "stopped"}},
        "mysql": {"port": "{{ env('CDC_DB_PORT') }}", "password_env": "CDC_DB_PASSWORD"},
        "key_prefix": "shop", "group_name": "lake"}}, sort_keys=False))

    checked = dg(root, env, "check", "defs")
    assert checked.returncode == 0, checked.stdout + checked.stderr

    listed = dg(root, env, "list", "defs", "--json")
    assert listed.returncode == 0, listed.stderr
    defs = json.loads(listed.stdout)
    key, source_key = f"shop/paimon/{fresh_db}/orders", f"shop/mysql/{fresh_db}/orders"
    assets = {a["asset_key"]: a for a in defs["assets"]}
    assert assets[key]["dependency_keys"] == [source_key]
    assert assets[key]["source"].endswith("defs/orders_cdc/defs.yaml:1")
    assert assets[key]["group_name"] == "lake" and assets[source_key]["group_name"] == "mysql"
    # the MySQL asset names the server the component's override points at, not the YAML's port 3306
    assert f"`127.0.0.1:{mariadb.port}`" in assets[source_key]["description"]
    assert {c["name"] for c in defs["asset_checks"]} == {"changed_rows_match", "changed_keys_unique",
                                                         "schema_matches_source", "primary_key_unique",
                                                         "row_count_matches_source"}
    assert {j["name"] for j in defs["jobs"]} == {"demo_orders_job", "demo_orders_follow", "demo_orders_upkeep",
                                                 "demo_orders_reconcile", f"resnapshot__{fresh_db}__orders"}
    assert {s["name"] for s in defs["sensors"]} == {"demo_orders_binlog_sensor", "demo_orders_failure_alert"}
    assert {r["name"] for r in defs["resources"]} == {"demo_orders_mysql", "demo_orders_paimon"}

    launched = dg(root, env, "launch", "--assets", f'key:"{key}"')
    assert launched.returncode == 0, launched.stdout[-3000:] + launched.stderr[-3000:]
    rows = run_sql({"warehouse": str(warehouse)},
                   f"SELECT id, product_upper, CAST(day AS VARCHAR) AS day FROM {fresh_db}.orders ORDER BY id")
    assert [tuple(r.values()) for r in rows.to_pylist()] == [(1, "BOOK", "2026-01-01"), (2, "PEN", "2026-01-02")]

    # A misspelt partition-keys column fails `dg check defs` (the transform is compiled against the MySQL table).
    good = defs_yaml.read_text()
    broken = yaml.safe_load(good)
    broken["attributes"]["pipeline"]["transform"][0]["partition-keys"] = "dya"
    defs_yaml.write_text(yaml.safe_dump(broken, sort_keys=False))
    failed = dg(root, env, "check", "defs")
    assert failed.returncode != 0
    assert "transform[0].partition-keys: partition key column 'dya' is not an output column" in \
        failed.stdout + failed.stderr, failed.stdout + failed.stderr

    # A typo in the pipeline YAML fails loading the project's defs (here, in this process), naming the key.
    import dagster

    broken = yaml.safe_load(good)
    broken["attributes"]["pipeline"]["source"]["hostnme"] = "x"
    defs_yaml.write_text(yaml.safe_dump(broken, sort_keys=False))
    monkeypatch.syspath_prepend(str(root / "src"))
    for name in ("CDC_DB_PORT", "CDC_DB_PASSWORD", "CDC_WAREHOUSE"):
        monkeypatch.setenv(name, env[name])
    monkeypatch.setenv("DAGSTER_IS_DEFS_VALIDATION_CLI", "1")  # what `dg check defs` sets
    with pytest.raises(Exception) as failed:
        dagster.Definitions.validate_loadable(dagster.load_from_defs_folder(path_within_project=package))
    reasons = [str(failed.value), str(failed.value.__cause__)]
    assert any("source.hostnme: unknown option (did you mean 'hostname'?)" in r for r in reasons), reasons

    # Outside `dg check defs` (`dg dev`, the webserver) the broken component fails alone: a second, valid component
    # loads and the broken one is an asset naming defs.yaml, the line of the key and what to do.
    monkeypatch.delenv("DAGSTER_IS_DEFS_VALIDATION_CLI")
    (package / "defs" / "good_cdc").mkdir()
    (package / "defs" / "good_cdc" / "defs.yaml").write_text(good.replace("demo orders", "good orders")
                                                             .replace("key_prefix: shop", "key_prefix: good"))
    loaded = dagster.load_from_defs_folder(path_within_project=package)
    dagster.Definitions.validate_loadable(loaded)
    specs = {s.key.to_user_string(): s for s in loaded.resolve_all_asset_specs()}
    assert f"good/paimon/{fresh_db}/orders" in specs
    [invalid] = [s for k, s in specs.items() if k.startswith("lakecdc_broken/")]
    line = next(i for i, text in enumerate(defs_yaml.read_text().splitlines(), 1) if "hostnme" in text)
    assert f"defs.yaml, line {line} (key source.hostnme)" in invalid.description, invalid.description
    assert "did you mean 'hostname'" in invalid.description
