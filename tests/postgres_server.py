"""A private PostgreSQL server for tests (Dagster's instance storage in production): a context manager that runs
``initdb`` and ``postgres`` from Debian's ``postgresql`` package on a free 127.0.0.1 port in a temporary directory and
removes everything at exit. Never touches a server the machine runs already.

PostgreSQL refuses to run as root: as root the server runs as the package's ``postgres`` user, which then owns the
temporary directory.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time

from tests.mariadb_server import _free_port


class PostgresNotInstalled(RuntimeError):
    """No ``initdb``/``postgres`` binaries (Debian's postgresql package; scripts/setup.sh --tests installs it)."""


def _binary(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)),
                                       None)
    if found is None:
        raise PostgresNotInstalled(f"{name} not found: install Debian's postgresql package (scripts/setup.sh --tests)")
    return found


class PostgresServer:
    """``with PostgresServer() as pg: pg.url`` — user ``postgres`` without password (trust on 127.0.0.1 only)."""

    def __init__(self, *, startup_timeout: float = 60.0):
        self.startup_timeout = startup_timeout
        self.host = "127.0.0.1"
        self.port = 0
        self.user = "postgres"
        self.base_dir: str | None = None
        self._proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        # the driver named: SQLAlchemy 2.1 reads a bare postgresql:// as psycopg 3, dagster-postgres brings psycopg2
        return f"postgresql+psycopg2://{self.user}@{self.host}:{self.port}/postgres"

    def _as_server_user(self) -> tuple[int, int] | None:
        """(uid, gid) to run the server as when this process is root, else None."""
        if os.geteuid() != 0:
            return None
        entry = pwd.getpwnam("postgres")
        return entry.pw_uid, entry.pw_gid

    def _run_as(self, ids: tuple[int, int] | None):
        if ids is None:
            return None

        def demote() -> None:
            os.setgid(ids[1])
            os.setuid(ids[0])
        return demote

    def start(self) -> "PostgresServer":
        initdb, postgres = _binary("initdb"), _binary("postgres")
        ids = self._as_server_user()
        self.base_dir = tempfile.mkdtemp(prefix="lakecdc-postgres-")
        data = os.path.join(self.base_dir, "data")
        if ids is not None:
            os.chown(self.base_dir, *ids)
        subprocess.run([initdb, "-D", data, "-U", self.user, "--auth=trust", "-E", "UTF8", "--no-sync"],
                       check=True, capture_output=True, preexec_fn=self._run_as(ids))
        self.port = _free_port()
        log = open(os.path.join(self.base_dir, "server.log"), "wb")
        self._proc = subprocess.Popen(
            [postgres, "-D", data, "-p", str(self.port), "-c", f"listen_addresses={self.host}",
             "-c", f"unix_socket_directories={self.base_dir}", "-c", "fsync=off", "-c", "max_connections=200"],
            stdout=log, stderr=subprocess.STDOUT, preexec_fn=self._run_as(ids))
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                break
            if subprocess.run([_binary("pg_isready"), "-h", self.host, "-p", str(self.port)],
                              capture_output=True).returncode == 0:
                return self
            time.sleep(0.1)
        text = open(os.path.join(self.base_dir, "server.log"), errors="replace").read()
        self.stop()
        raise RuntimeError(f"postgres did not start:\n{text[-3000:]}")

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)  # fast shutdown: open client connections do not hold it
            try:
                self._proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None
        if self.base_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)
            self.base_dir = None

    def __enter__(self) -> "PostgresServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
