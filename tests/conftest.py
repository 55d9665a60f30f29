"""Shared pytest fixtures: ``mariadb`` (one private binlog-enabled MariaDB per test session) and ``fresh_db``
(a uniquely named database on it, dropped after the test)."""

from __future__ import annotations

import os
import sys
import uuid

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from mariadb_server import MariaDBServer  # noqa: E402


@pytest.fixture(scope="session")
def mariadb():
    """A private MariaDB 10.11 server (binlog ROW/FULL/FULL, utf8mb4) on a free 127.0.0.1 port; root, no password."""
    with MariaDBServer() as server:
        yield server


@pytest.fixture
def fresh_db(mariadb):
    """The name of a new, empty database; dropped after the test."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    mariadb.execute(f"CREATE DATABASE `{name}`")
    try:
        yield name
    finally:
        mariadb.execute(f"DROP DATABASE IF EXISTS `{name}`")
