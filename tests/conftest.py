"""Shared pytest fixtures: ``mariadb`` (one private binlog-enabled MariaDB per test session) and ``fresh_db``
(a uniquely named database on it, dropped after the test)."""

from __future__ import annotations

import os
import signal
import uuid
from contextlib import ExitStack, contextmanager

import pytest

from tests.mariadb_server import SERVER_FLAGS, MariaDBServer

# A shell that starts the suite as a background job ignores SIGINT; Dagster's in-process runs copy SIGINT's handler
# to SIGTERM (dagster._utils.interrupts), and every process a test starts then inherits SIGTERM ignored (a pool
# worker that terminate() cannot stop hung the suite once). Python's own SIGINT handler makes both behave as in a
# terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(items):
    """Mark every test that needs MariaDB (``-m "not mariadb"`` runs the rest): those using the session server or
    a fixture built on it, and those in modules that start servers of their own."""
    for item in items:
        module = getattr(item, "module", None)
        fixtures = getattr(item, "fixturenames", ())
        own_server = module is not None and "MariaDBServer" in vars(module)
        if "mariadb" in fixtures or "mysql8_server" in fixtures or "tls_server" in fixtures or own_server:
            item.add_marker(pytest.mark.mariadb)


@pytest.fixture(scope="session")
def mariadb():
    """A private MariaDB 10.11 server (binlog ROW/FULL/FULL, utf8mb4) on a free 127.0.0.1 port; root, no password."""
    with MariaDBServer() as server:
        yield server


ROW_METADATA = ("FULL", "MINIMAL", "NO_LOG")  # binlog_row_metadata settings lakecdc must read


@pytest.fixture(scope="session")
def mariadb_by_row_metadata(mariadb):
    """``get(setting)``: a session server whose binlog_row_metadata is ``setting`` (FULL: the ``mariadb`` fixture;
    others started on first use, one per setting and session)."""
    servers = {"FULL": mariadb}
    with ExitStack() as stack:
        def get(setting: str) -> MariaDBServer:
            if setting not in servers:
                servers[setting] = stack.enter_context(MariaDBServer(row_metadata=setting))
            return servers[setting]

        yield get


# A MariaDB that presents itself as MySQL 8 (the version string has no "MariaDB") and logs MySQL 8's default
# binlog_row_metadata: lakecdc takes its MySQL code paths there (server_flavor 'mysql').
MYSQL8_VERSION = "8.0.36-0ubuntu0.22.04.1-commercial-edition"


@pytest.fixture(scope="session")
def mysql8_server():
    """A private server presenting itself as MySQL 8.0.36 with binlog_row_metadata=MINIMAL, for the whole session."""
    with MariaDBServer(flags=(*SERVER_FLAGS, f"--version={MYSQL8_VERSION}"), row_metadata="MINIMAL") as server:
        yield server


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory):
    """A CA, a server certificate for 127.0.0.1, a client certificate and a CA that signed neither, as PEM files and
    PKCS12 stores (tests/tls_certs.py), made once per session."""
    from tests.tls_certs import make_tls_files

    return make_tls_files(tmp_path_factory.mktemp("tls"), password=f"Ks-{uuid.uuid4().hex}-Pp3")


@pytest.fixture(scope="session")
def tls_server(tls_files):
    """A private MariaDB serving TLS with the server certificate of ``tls_files``, for the whole session (the
    ``mariadb`` server has no TLS)."""
    from tests.tls_certs import server_flags

    with MariaDBServer(flags=(*SERVER_FLAGS, *server_flags(tls_files))) as server:
        yield server


@pytest.fixture
def mysql8_db(mysql8_server):
    """A new, empty database on ``mysql8_server``; dropped after the test."""
    with new_database(mysql8_server) as name:
        yield name


@contextmanager
def new_database(server: MariaDBServer):
    """A uniquely named, empty database on ``server``, dropped at exit."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    server.execute(f"CREATE DATABASE `{name}`")
    try:
        yield name
    finally:
        server.execute(f"DROP DATABASE IF EXISTS `{name}`")


@pytest.fixture
def row_metadata():
    """binlog_row_metadata of ``source_server`` (tests parametrize ``row_metadata`` to run under other settings)."""
    return "FULL"


@pytest.fixture
def source_server(mariadb_by_row_metadata, row_metadata, request):
    """The session server with binlog_row_metadata = ``row_metadata``; ``MYSQL8``: ``mysql8_server``."""
    if row_metadata == "MYSQL8":
        return request.getfixturevalue("mysql8_server")
    server = mariadb_by_row_metadata(row_metadata)
    assert server.execute("SELECT @@GLOBAL.binlog_row_metadata")[0][0].upper() == row_metadata
    return server


@pytest.fixture
def source_db(source_server):
    """A new, empty database on ``source_server``; dropped after the test."""
    with new_database(source_server) as name:
        yield name


@pytest.fixture
def fresh_db(mariadb):
    """The name of a new, empty database; dropped after the test."""
    with new_database(mariadb) as name:
        yield name


@pytest.fixture(scope="session")
def s3_server():
    """A private S3 server (moto's backend, single-threaded, so conditional puts are atomic) on a free 127.0.0.1
    port for the whole session."""
    from tests.s3_server import ACCESS_KEY, KEY_ENV, SECRET_ENV, SECRET_KEY, S3Server

    os.environ[KEY_ENV], os.environ[SECRET_ENV] = ACCESS_KEY, SECRET_KEY  # test-only keys, for ${VAR} in pipelines
    with S3Server() as server:
        yield server


@pytest.fixture
def s3_warehouse(s3_server):
    """Catalog options of an s3:// warehouse in a new bucket of the private S3 server (Paimon's option names)."""
    bucket = s3_server.new_bucket()
    return s3_server.catalog_options(f"s3://{bucket}/warehouse")
