"""Hostile input: every pipeline in tests/hostile/ is broken or malicious on purpose, and says at its top what must
happen to it. Each one either fails with a clear error before anything is written, or is handled correctly; none
leaves a half-written table.

A case is ``<name>.yaml`` (placeholders ``@PORT@``, ``@DB@``, ``@WAREHOUSE@``, ``@CLOSED_PORT@``,
``@NOBINLOG_PORT@``, ``@STATEMENT_PORT@``) plus an optional ``<name>.sql`` run in the case's database first
(default: ``t (id INT PRIMARY KEY, name VARCHAR(20))`` with two rows). Its leading comment lines:

* ``expect: parse-error`` — loading the file fails with a PipelineConfigError that starts with the file name;
* ``expect: run-error`` — loading works, the run fails with ``error:`` (a class of lakecdc.errors) and the
  warehouse holds no Paimon table;
* ``expect: rows`` — the run works: ``compare: <mysql table>[ = <paimon db>.<table>]`` must hold exactly the MySQL
  rows, ``query:`` (DataFusion SQL) must return ``rows:``; a second run adds no snapshot;
* ``message:`` (any number) — text the error must contain (the key, rule or column, and what to do);
* ``forbid:`` — text that must appear nowhere (error, logs): the secrets of the case;
* ``check: mysql-table-exists <t>`` / ``check: append-table <db.t>``; ``server: nobinlog|statement``;
* ``allows: empty-table`` — a run-error found in the data: the table may exist, but holds no snapshot.
"""

from __future__ import annotations

import ast
import logging
import socket
from pathlib import Path

import pytest

import lakecdc.errors as errors
from tests.crosscheck import assert_same_rows
from lakecdc.config import load_pipeline
from lakecdc.errors import PipelineConfigError
from lakecdc.model import TableId
from lakecdc.runtime import run_micro_batch
from lakecdc.sink import PaimonSink
from lakecdc.sink.sql import run_sql
from tests.mariadb_server import SERVER_FLAGS, MariaDBServer

CORPUS = Path(__file__).resolve().parent / "hostile"
CASES = sorted(p.stem for p in CORPUS.glob("*.yaml"))
DEFAULT_SETUP = ["CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20))", "INSERT INTO t VALUES (1, 'a'), (2, NULL)"]


def header(name: str) -> dict[str, list[str]]:
    """The ``# key: value`` lines at the top of a case."""
    found: dict[str, list[str]] = {}
    for raw in (CORPUS / f"{name}.yaml").read_bytes().decode("utf-8", "replace").splitlines():
        if not raw.startswith("#"):
            break
        key, _, value = raw[1:].strip().partition(":")
        if value:
            found.setdefault(key.strip(), []).append(value.strip())
    return found


def setup_statements(name: str) -> list[str]:
    sql = CORPUS / f"{name}.sql"
    if not sql.exists():
        return DEFAULT_SETUP
    return [s.strip() for s in sql.read_text().split(";\n") if s.strip()]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


@pytest.fixture(scope="module")
def nobinlog_server():
    """A private MariaDB without binary log."""
    with MariaDBServer(log_bin=False, flags=tuple(f for f in SERVER_FLAGS if not f.startswith("--binlog"))) as s:
        yield s


@pytest.fixture(scope="module")
def statement_server():
    """A private MariaDB whose binary log is in STATEMENT format."""
    flags = tuple(f for f in SERVER_FLAGS if not f.startswith("--binlog-format")) + ("--binlog-format=STATEMENT",)
    with MariaDBServer(flags=flags) as s:
        yield s


def tables_in(warehouse: Path) -> list[str]:
    """Paimon tables (directories with a schema) anywhere under the warehouse."""
    if not warehouse.exists():
        return []
    return sorted(str(p.parent.relative_to(warehouse)) for p in warehouse.rglob("schema") if p.is_dir())


KINDS = {name: header(name).get("expect", [""])[0] for name in CASES}
REFUSED = [name for name in CASES if KINDS[name] == "parse-error"]
RUN = [name for name in CASES if KINDS[name] != "parse-error"]


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 40
    assert set(KINDS.values()) == {"parse-error", "run-error", "rows"}, KINDS


@pytest.mark.parametrize("name", REFUSED)
def test_hostile_file_is_refused(name, tmp_path, monkeypatch, caplog):
    """Cases refused when the file is loaded: no server or warehouse is touched."""
    check_case(name, "db_unused", 1, None, tmp_path, None, monkeypatch, caplog)


@pytest.mark.parametrize("name", RUN)
def test_hostile_run(name, mariadb, fresh_db, tmp_path, request, monkeypatch, caplog):
    """Cases that reach the server: a clear error before any table is written, or the right rows."""
    check_case(name, fresh_db, mariadb.port, mariadb, tmp_path, request, monkeypatch, caplog)


def check_case(name, fresh_db, main_port, mariadb, tmp_path, request, monkeypatch, caplog):
    meta = header(name)
    expect = meta["expect"][0]
    text = (CORPUS / f"{name}.yaml").read_bytes()
    port = main_port
    for server in meta.get("server", []):
        port = request.getfixturevalue(f"{server}_server").port
    warehouse = tmp_path / "warehouse"
    closed = closed_port()
    values = {"@PORT@": main_port, "@DB@": fresh_db, "@WAREHOUSE@": warehouse, "@CLOSED_PORT@": closed,
              "@NOBINLOG_PORT@": port, "@STATEMENT_PORT@": port}
    for key, value in values.items():
        text = text.replace(key.encode(), str(value).encode())
    path = tmp_path / f"{name}.yaml"
    path.write_bytes(text)
    messages = [m.replace("@PORT@", str(main_port)).replace("@CLOSED_PORT@", str(closed)).replace("@DB@", fresh_db)
                for m in meta.get("message", [])]
    monkeypatch.setenv("HOSTILE_WRONG_PW", "wrong-pw-4711")
    monkeypatch.delenv("HOSTILE_UNSET_PW", raising=False)
    if expect != "parse-error":
        target = request.getfixturevalue(f"{meta['server'][0]}_server") if "server" in meta else mariadb
        if target is mariadb:
            for statement in setup_statements(name):
                mariadb.execute(statement, database=fresh_db)
        else:
            target.execute(f"CREATE DATABASE IF NOT EXISTS `{fresh_db}`")
            for statement in setup_statements(name):
                target.execute(statement, database=fresh_db)

    caplog.set_level(logging.DEBUG)
    if expect == "parse-error":
        with pytest.raises(PipelineConfigError) as info:
            load_pipeline(path)
        message = str(info.value)
        assert message.startswith(f"{path}: "), message
    elif expect == "run-error":
        config = load_pipeline(path)
        wanted = getattr(errors, meta["error"][0])
        with pytest.raises(errors.LakeCdcError) as info:
            run_micro_batch(config)
        message = str(info.value)
        assert isinstance(info.value, wanted), f"{type(info.value).__name__}: {message}"
        if "empty-table" in meta.get("allows", []):  # a data error: the table exists, nothing was committed
            assert list(warehouse.rglob("snapshot-*")) == [], "a snapshot was committed"
        else:
            assert tables_in(warehouse) == [], "an error after a table was created"
    else:
        config = load_pipeline(path)
        run_micro_batch(config)
        message = ""
        check_rows(meta, config, fresh_db, mariadb, warehouse)
    for fragment in messages:
        assert fragment in message, f"{fragment!r} not in: {message}"
    for secret in meta.get("forbid", []):
        assert secret not in message and secret not in caplog.text
    for check in meta.get("check", []):
        kind, _, arg = check.partition(" ")
        if kind == "mysql-table-exists":
            assert mariadb.execute("SHOW TABLES LIKE %s", (arg,), database=fresh_db), f"{arg} was dropped"
    # nothing written outside the warehouse (path traversal through table names)
    assert sorted(p.name for p in tmp_path.iterdir()) in ([path.name], [path.name, "warehouse"])


def check_rows(meta: dict, config, db: str, mariadb, warehouse: Path) -> None:
    sink = PaimonSink(config.sink.catalog_options)
    snapshots = {}
    for item in meta.get("compare", []):
        source, _, target = (part.strip() for part in item.partition(" = "))
        target = target.replace("@DB@", db) if target else f"{db}.{source}"
        target_id = TableId.parse(target) if target.count(".") == 1 else TableId(db, target)
        assert_same_rows(mariadb, config.sink.catalog_options, db, source, target_db=target_id.database,
                         target_table=target_id.table, context=str(config.path))
        snapshots[target_id] = sink.latest_snapshot_id(target_id)
    if "query" in meta:
        got = run_sql(config.sink.catalog_options, meta["query"][0].replace("@DB@", db)).to_pylist()
        assert [list(r.values()) for r in got] == ast.literal_eval(meta["rows"][0])
    for check in meta.get("check", []):
        kind, _, arg = check.partition(" ")
        if kind == "append-table":
            name = arg.replace("@DB@", db)
            table_id = TableId.parse(name) if "." in name else TableId(db, name)
            assert sink.describe(table_id).primary_keys == []
    # a second run with nothing new commits nothing and changes nothing
    run_micro_batch(config)
    assert {t: sink.latest_snapshot_id(t) for t in snapshots} == snapshots


def test_fixed_pipeline_replaces_the_empty_table_of_a_failed_run(mariadb, fresh_db, tmp_path):
    """A run that failed on its data left an empty table (no snapshot) with the primary key of the broken
    transform; once the transform is fixed, the next run re-creates the table with the fixed definition instead of
    writing into the old one."""
    for statement in DEFAULT_SETUP:
        mariadb.execute(statement, database=fresh_db)
    text = (CORPUS / "run-null-in-primary-key-column.yaml").read_text()
    for key, value in {"@PORT@": mariadb.port, "@DB@": fresh_db, "@WAREHOUSE@": tmp_path / "warehouse"}.items():
        text = text.replace(key, str(value))
    broken, fixed = tmp_path / "broken.yaml", tmp_path / "fixed.yaml"
    broken.write_text(text)
    fixed.write_text(text.replace("primary-keys: name", "primary-keys: id"))
    with pytest.raises(errors.ExpressionError):
        run_micro_batch(load_pipeline(broken))
    sink = PaimonSink(load_pipeline(fixed).sink.catalog_options)
    target = TableId(fresh_db, "t")
    assert sink.describe(target).primary_keys == ["name"] and sink.latest_snapshot_id(target) is None
    config = load_pipeline(fixed)
    run_micro_batch(config)
    assert sink.describe(target).primary_keys == ["id"]
    assert_same_rows(mariadb, config.sink.catalog_options, fresh_db, "t", context="after the fix")
