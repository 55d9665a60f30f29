"""Secrets: the MySQL password comes only from the environment (``${VAR}`` in the YAML) or a Dagster ``EnvVar``, and
a unique password never shows anywhere a user or an attacker could read it: logs (lakecdc's, the driver's and
Dagster's), the stderr of ``lakecdc run`` (also of a run with wrong credentials), error messages, the code location
snapshot the UI shows (resources and their config), run configs and tags, the event log (materialisation and asset
check metadata, step failures), compute logs, Paimon snapshot properties, schema and option files, and lock files.
The last two are checked by reading every byte under DAGSTER_HOME and the warehouse."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import uuid
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.remote_representation.external_data import RepositorySnap
from dagster._serdes import serialize_value

from lakecdc.config import load_pipeline, parse_pipeline
from lakecdc.dagster import MySqlResource, PaimonCatalogResource, build_definitions, build_pipeline_definitions
from lakecdc.errors import LakeCdcError, PipelineConfigError, SourceError
from lakecdc.runtime import run_micro_batch

BIN = Path(sys.executable).parent
SECRET = f"Pw-{uuid.uuid4().hex}-Zz9"  # unique: found anywhere means leaked
WRONG = f"Wrong-{uuid.uuid4().hex}-Qq1"
PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: {user}
  password: ${{LAKECDC_SECRET_PW}}
  tables: {db}.items
  server-id: 5880-5889
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: {warehouse}
pipeline:
  name: secrets {db}
"""


def leaks(root: Path, *secrets: str) -> list[str]:
    """Files under ``root`` whose bytes contain one of ``secrets``."""
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path}: {s[:6]}..." for s in secrets if s.encode() in data]
    return found


@pytest.fixture
def vault(mariadb, fresh_db, tmp_path, monkeypatch):
    """A user with a unique password, a table it reads, and a pipeline file that takes the password from the
    environment."""
    user = f"s_{fresh_db[-8:]}"
    mariadb.execute(f"CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY '{SECRET}'")
    mariadb.execute(f"GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT, BINLOG MONITOR ON *.* TO "
                    f"'{user}'@'127.0.0.1'")
    mariadb.execute("CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20))", database=fresh_db)
    mariadb.execute("INSERT INTO items VALUES (1, 'a'), (2, NULL)", database=fresh_db)
    pipelines = tmp_path / "pipelines"
    pipelines.mkdir()
    path = pipelines / "items.yaml"
    path.write_text(PIPELINE.format(port=mariadb.port, user=user, db=fresh_db, warehouse=tmp_path / "warehouse"))
    monkeypatch.setenv("LAKECDC_SECRET_PW", SECRET)
    monkeypatch.delenv("MYSQL_PASSWORD", raising=False)
    yield path, fresh_db, tmp_path / "warehouse"
    mariadb.execute(f"DROP USER IF EXISTS '{user}'@'127.0.0.1'")


def test_cli_runs_and_logs_never_show_the_password(mariadb, vault, caplog):
    path, db, warehouse = vault
    cli = [str(BIN / "lakecdc"), "-v"]
    ran = subprocess.run(cli + ["run", str(path)], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-3000:]
    status = subprocess.run(cli + ["status", "--json", str(path)], capture_output=True, text=True, timeout=300)
    assert status.returncode == 0, status.stderr[-3000:]
    wrong = subprocess.run(cli + ["run", str(path)], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "LAKECDC_SECRET_PW": WRONG})
    assert wrong.returncode == 1 and "Access denied" in wrong.stderr, wrong.stderr[-3000:]
    for output in (ran, status, wrong):
        assert SECRET not in output.stdout + output.stderr
        assert WRONG not in output.stdout + output.stderr

    # in process, with every logger (the driver's included) at DEBUG
    caplog.set_level(logging.DEBUG)
    mariadb.execute("INSERT INTO items VALUES (3, 'c')", database=db)
    config = load_pipeline(path)
    result = run_micro_batch(config)
    assert SECRET not in repr(result) + repr(config) + repr(config.source)
    with pytest.raises(SourceError) as info:
        run_micro_batch(load_pipeline(path, env={**os.environ, "LAKECDC_SECRET_PW": WRONG}))
    assert WRONG not in str(info.value) and SECRET not in str(info.value)
    assert SECRET not in caplog.text and WRONG not in caplog.text
    assert leaks(warehouse, SECRET, WRONG) == []


def test_literal_passwords_are_refused_without_echoing_them(tmp_path):
    text = PIPELINE.format(port=1, user="u", db="d", warehouse=tmp_path)
    for literal in (SECRET, f"${{LAKECDC_UNSET_PW:-{SECRET}}}"):
        path = tmp_path / "literal.yaml"
        path.write_text(text.replace("${LAKECDC_SECRET_PW}", literal))
        with pytest.raises(PipelineConfigError) as info:
            load_pipeline(path)
        message = str(info.value)
        assert message.startswith(f"{path}: source.password: a password written in the pipeline file is refused")
        assert "${MYSQL_PASSWORD}" in message and SECRET not in message
    # an empty password (a local server without one) and ${VAR:-} stay allowed
    parse_pipeline(text.replace("${LAKECDC_SECRET_PW}", '""'))
    parse_pipeline(text.replace("${LAKECDC_SECRET_PW}", "${LAKECDC_UNSET_PW:-}"))
    # a Dagster resource with a plain-text password (the user's or a key store's) would show it in the UI: refused
    config = parse_pipeline(text, env={"LAKECDC_SECRET_PW": SECRET})
    for resource in (MySqlResource(password=SECRET), MySqlResource(trust_certificate_key_store_password=SECRET),
                     MySqlResource(client_certificate_key_store_password=SECRET)):
        with pytest.raises(PipelineConfigError, match=r"resource 'mysql'.*dg.EnvVar") as info:
            build_pipeline_definitions(config, resources={"mysql": resource})
        assert SECRET not in str(info.value)
    # S3 keys of the Paimon resource: plain text, or inside catalog_options (a dict cannot hold an EnvVar), refused
    for resource in (PaimonCatalogResource(s3_secret_key=SECRET),
                     PaimonCatalogResource(catalog_options={"s3.secret-key": SECRET}),
                     PaimonCatalogResource(catalog_options={"fs.s3a.access.key": SECRET})):
        with pytest.raises(PipelineConfigError, match=r"resource 'paimon'.*(dg.EnvVar|s3_\w+=dg.EnvVar)") as info:
            build_pipeline_definitions(config, resources={"paimon": resource})
        assert SECRET not in str(info.value)


def test_paimon_resource_s3_keys_from_env_vars_reach_the_catalog_options(tmp_path, monkeypatch):
    """The S3 key fields of PaimonCatalogResource, given as dg.EnvVar, become the catalog options a run uses."""
    from lakecdc.dagster.resources import effective_config

    monkeypatch.setenv("LAKECDC_TEST_S3_KEY", "AKIDEXAMPLE")
    monkeypatch.setenv("LAKECDC_TEST_S3_SECRET", SECRET)
    config = parse_pipeline(PIPELINE.format(port=1, user="u", db="d", warehouse=tmp_path),
                            env={"LAKECDC_SECRET_PW": SECRET})
    resource = PaimonCatalogResource(s3_access_key=dg.EnvVar("LAKECDC_TEST_S3_KEY"),
                                     s3_secret_key=dg.EnvVar("LAKECDC_TEST_S3_SECRET"))
    build_pipeline_definitions(config, resources={"paimon": resource})  # accepted: EnvVars only
    with dg.build_resources({"paimon": resource}) as resolved:  # as Dagster resolves them for a run
        options = effective_config(config, resolved).sink.catalog_options
    assert options["s3.access-key"] == "AKIDEXAMPLE" and options["s3.secret-key"] == SECRET


def test_dagster_ui_run_config_event_log_and_files_never_show_the_password(mariadb, vault, tmp_path, monkeypatch):
    path, db, warehouse = vault
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    key = dg.AssetKey(["paimon", db, "items"])
    resources = {"mysql": MySqlResource(password=dg.EnvVar("LAKECDC_SECRET_PW")),
                 "paimon": PaimonCatalogResource(warehouse=str(warehouse))}
    defs = build_definitions(path.parent, resources=resources)
    with dg.DagsterInstance.get() as instance:
        materialize(defs, instance, key)
        mariadb.execute("UPDATE items SET name = 'b' WHERE id = 2", database=db)
        monkeypatch.setenv("LAKECDC_SECRET_PW", WRONG)  # a failing run: wrong credentials through the EnvVar
        failed = materialize(defs, instance, key, ok=False)
        errors = [e.event_specific_data.error.message for e in failed.get_step_failure_events()]
        assert any("Access denied" in m for m in errors), errors
        # the reconcile job (its own connections to MySQL): with the wrong password its checks fail, naming why
        job = next(j.name for j in defs.jobs if j.name.endswith("_reconcile"))
        reconciled = defs.resolve_job_def(job).execute_in_process(instance=instance, raise_on_error=False)
        assert reconciled.get_asset_check_evaluations() or not reconciled.success

        text = shown_by_dagster(defs, instance, key)
        assert "LAKECDC_SECRET_PW" in text  # the EnvVar is shown by name
        assert SECRET not in text and WRONG not in text
        assert "lakecdc/paimon_snapshot_id" in text and "changed_rows_match" in text
    assert leaks(home, SECRET, WRONG) == []
    assert leaks(warehouse, SECRET, WRONG) == []
    assert leaks(path.parent, SECRET, WRONG) == []


def materialize(defs, instance, key, *, ok: bool = True):
    """A Dagster run of ``key``: with ``ok`` it succeeded and every check passed, else it failed."""
    result = dg.materialize(defs.assets, instance=instance, selection=[key], resources=defs.resources,
                            raise_on_error=False)
    assert result.success == ok
    if ok:
        checks = result.get_asset_check_evaluations()
        assert checks and all(c.passed for c in checks)
    return result


def shown_by_dagster(defs, instance, key) -> str:
    """What the UI shows: the code location (resources with their config), the runs, their event logs and the
    asset's latest materialisation, serialised."""
    shown = [serialize_value(RepositorySnap.from_def(defs.get_repository_def()))]
    for run in instance.get_runs():
        shown.append(serialize_value(run))
        shown += [serialize_value(entry) for entry in instance.all_logs(run.run_id)]
    shown.append(serialize_value(instance.get_latest_materialization_event(key)))
    return "\n".join(shown)


def test_key_store_passwords_never_show(tls_server, tls_files, tmp_path, monkeypatch, caplog):
    """TLS through the Dagster MySqlResource (VERIFY_IDENTITY, PKCS12 trust and client stores whose password comes
    from a dg.EnvVar) as a user created REQUIRE X509: the run, its checks and the sensor work, and neither the key
    store password nor the user's shows in the UI, the event log, DAGSTER_HOME, the warehouse, or the errors of a
    run with a wrong key store password; the same through ``${VAR}`` in the YAML with the CLI."""
    from tests.conftest import new_database

    home, warehouse, pipelines = tmp_path / "dagster_home", tmp_path / "warehouse", tmp_path / "pipelines"
    home.mkdir()
    pipelines.mkdir()
    (home / "dagster.yaml").write_text("")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    keys = tls_files.password
    monkeypatch.setenv("LAKECDC_SECRET_PW", SECRET)
    monkeypatch.setenv("LAKECDC_KEY_STORE_PW", keys)
    user = f"x_{uuid.uuid4().hex[:8]}"
    tls_server.execute(f"CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY '{SECRET}' REQUIRE X509")
    tls_server.execute(f"GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO '{user}'@'127.0.0.1'")
    with new_database(tls_server) as db:
        tls_server.execute("CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20))", database=db)
        tls_server.execute("INSERT INTO items VALUES (1, 'a'), (2, NULL)", database=db)
        path = pipelines / "items.yaml"
        path.write_text(PIPELINE.format(port=tls_server.port, user=user, db=db, warehouse=warehouse))
        key = dg.AssetKey(["paimon", db, "items"])
        mysql = MySqlResource(
            ssl_mode="VERIFY_IDENTITY", trust_certificate_key_store_url=f"file:{tls_files.trust_p12}",
            trust_certificate_key_store_password=dg.EnvVar("LAKECDC_KEY_STORE_PW"),
            client_certificate_key_store_url=f"file:{tls_files.client_p12}",
            client_certificate_key_store_type="PKCS12",
            client_certificate_key_store_password=dg.EnvVar("LAKECDC_KEY_STORE_PW"),
            password=dg.EnvVar("LAKECDC_SECRET_PW"))
        defs = build_definitions(pipelines, resources={"mysql": mysql,
                                                       "paimon": PaimonCatalogResource(warehouse=str(warehouse))})
        caplog.set_level(logging.DEBUG)
        with dg.DagsterInstance.get() as instance:
            materialize(defs, instance, key)
            tls_server.execute("INSERT INTO items VALUES (3, 'c')", database=db)
            sensor = next(s for s in defs.sensors if s.name.endswith("_binlog_sensor"))
            tick = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=defs,
                                                                resources=defs.resources))
            assert [r.asset_selection for r in tick.run_requests] == [[key]], tick.skip_message
            monkeypatch.setenv("LAKECDC_KEY_STORE_PW", WRONG)  # a failing run: the key stores do not open
            failed = materialize(defs, instance, key, ok=False)
            errors = [e.event_specific_data.error.message for e in failed.get_step_failure_events()]
            assert any("trustCertificateKeyStorePassword) is wrong" in m for m in errors), errors
            text = shown_by_dagster(defs, instance, key) + caplog.text
        assert "LAKECDC_KEY_STORE_PW" in text  # the EnvVar is shown by name
        assert keys not in text and WRONG not in text and SECRET not in text

        # the CLI, with the same TLS from the YAML (the key store password from ${VAR})
        tls = (f"  jdbc.properties.sslMode: VERIFY_IDENTITY\n"
               f"  jdbc.properties.trustCertificateKeyStoreUrl: file:{tls_files.trust_p12}\n"
               f"  jdbc.properties.trustCertificateKeyStorePassword: ${{LAKECDC_KEY_STORE_PW}}\n"
               f"  jdbc.properties.clientCertificateKeyStoreUrl: file:{tls_files.client_p12}\n"
               f"  jdbc.properties.clientCertificateKeyStorePassword: ${{LAKECDC_KEY_STORE_PW}}\n")
        path.write_text(path.read_text().replace("sink:\n", tls + "sink:\n"))
        cli = [str(BIN / "lakecdc"), "-v"]
        outputs = [subprocess.run(cli + ["run", str(path)], capture_output=True, text=True, timeout=300,
                                  env={**os.environ, "LAKECDC_KEY_STORE_PW": password})
                   for password in (keys, WRONG)]
        assert [o.returncode for o in outputs] == [0, 1], outputs[0].stderr[-3000:]
        assert "trustCertificateKeyStorePassword) is wrong" in outputs[1].stderr
        assert not [o for o in outputs if keys in o.stdout + o.stderr or WRONG in o.stdout + o.stderr]
        tls_server.execute(f"DROP USER '{user}'@'127.0.0.1'")
    for root in (home, warehouse, pipelines):
        assert leaks(root, keys, WRONG, SECRET) == []


def test_errors_never_carry_the_password(vault):
    path, db, _ = vault
    config = load_pipeline(path)
    config.source.port = 1  # unreachable
    with pytest.raises(LakeCdcError) as info:
        run_micro_batch(config)
    assert SECRET not in str(info.value) and SECRET not in repr(info.value.__cause__)
    config.source.port = load_pipeline(path).source.port
    config.source.tables = f"{db}.nope"
    with pytest.raises(LakeCdcError) as info:
        run_micro_batch(config)
    assert SECRET not in str(info.value)


S3_SECRET = f"S3-{uuid.uuid4().hex}-Kk7"  # moto checks no signature: any key works, and a unique one shows leaks


def test_s3_keys_never_show(mariadb, fresh_db, tmp_path, s3_server, monkeypatch, caplog):
    """An s3:// warehouse whose secret key comes from ${VAR}: the key is in no log line, CLI output, error message,
    repr of the configuration, or object of the warehouse (snapshot properties, schemas, options)."""
    from tests.s3_server import KEY_ENV, SECRET_ENV

    monkeypatch.setenv(SECRET_ENV, S3_SECRET)
    monkeypatch.setenv(KEY_ENV, f"AK{S3_SECRET}")
    mariadb.execute("CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20))", database=fresh_db)
    mariadb.execute("INSERT INTO items VALUES (1, 'a'), (2, NULL)", database=fresh_db)
    bucket = s3_server.new_bucket()
    path = tmp_path / "s3.yaml"
    path.write_text(PIPELINE.format(port=mariadb.port, user="root", db=fresh_db,
                                    warehouse=s3_server.warehouse_yaml(f"s3://{bucket}/wh"))
                    .replace("${LAKECDC_SECRET_PW}", '""'))
    cli = [str(BIN / "lakecdc"), "-v"]
    outputs = [subprocess.run(cli + [command, str(path)], capture_output=True, text=True, timeout=300)
               for command in ("run", "status")]
    assert [o.returncode for o in outputs] == [0, 0], outputs[0].stderr[-3000:]
    caplog.set_level(logging.DEBUG)
    mariadb.execute("INSERT INTO items VALUES (3, 'c')", database=fresh_db)
    config = load_pipeline(path)
    result = run_micro_batch(config)
    broken = load_pipeline(path)
    broken.sink.catalog_options["warehouse"] = "s3://lakecdc-no-such-bucket/wh"  # fails: the error names no key
    with pytest.raises(LakeCdcError) as info:
        run_micro_batch(broken)
    shown = "".join(o.stdout + o.stderr for o in outputs) + caplog.text + repr(result) + repr(config) + \
        str(info.value) + repr(info.value.__cause__)
    assert S3_SECRET not in shown
    client = s3_server.client()
    stored = [client.get_object(Bucket=bucket, Key=k)["Body"].read() for k in s3_server.keys(bucket)]
    assert stored and not [data for data in stored if S3_SECRET.encode() in data]
