"""A private, binlog-enabled MariaDB server for tests: a context manager that starts ``mariadbd`` on a free
127.0.0.1 port in a temporary data directory and removes everything at exit.

Never touches the shared server on port 3306 or ``/etc/mysql``: ``--no-defaults`` keeps every config file out.
"""

from __future__ import annotations

import atexit
import getpass
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import pymysql

SERVER_FLAGS = (
    "--bind-address=127.0.0.1",
    "--skip-name-resolve",
    "--character-set-server=utf8mb4",
    "--collation-server=utf8mb4_unicode_ci",
    "--server-id=1",
    "--binlog-format=ROW",
    "--binlog-row-image=FULL",
    "--binlog-row-metadata=FULL",
    "--gtid-strict-mode=ON",
    "--innodb-buffer-pool-size=64M",
    "--innodb-log-file-size=48M",
    "--innodb-flush-log-at-trx-commit=2",
    "--sync-binlog=0",
    "--max-allowed-packet=64M",
)


class MariaDBNotInstalled(RuntimeError):
    """``mariadbd`` / ``mariadb-install-db`` are not on PATH."""


def _find(binary: str) -> str:
    path = shutil.which(binary) or next(
        (p for p in (f"/usr/sbin/{binary}", f"/usr/bin/{binary}") if os.access(p, os.X_OK)), None
    )
    if not path:
        raise MariaDBNotInstalled(
            f"{binary} not found: install the MariaDB server (apt-get install -y mariadb-server mariadb-client)"
        )
    return path


def _stop_with_parent() -> None:
    """In the child before exec: SIGTERM when the test process dies (a killed pytest must not leave servers)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG (Linux)
    except (OSError, AttributeError):
        pass


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_INITIAL_DATADIR: str | None = None
_INITIAL_DATADIR_LOCK = threading.Lock()


def _initial_datadir() -> str:
    """A data directory fresh from ``mariadb-install-db``, made once per process and copied for every server: the
    install takes seconds (it bootstraps a server), a copy a fraction of a second. Nothing in it depends on the
    server flags (install-db runs with --no-defaults); removed when the process exits."""
    global _INITIAL_DATADIR
    with _INITIAL_DATADIR_LOCK:
        if _INITIAL_DATADIR is None:
            base = tempfile.mkdtemp(prefix="lakecdc-mariadb-initial-")
            datadir, tmpdir, log = (os.path.join(base, name) for name in ("data", "tmp", "install-db.log"))
            os.makedirs(datadir)
            os.makedirs(tmpdir)
            with open(log, "wb") as out:
                rc = subprocess.call(
                    [_find("mariadb-install-db"), "--no-defaults", f"--datadir={datadir}",
                     f"--user={getpass.getuser()}", "--auth-root-authentication-method=normal", "--skip-test-db",
                     "--skip-name-resolve", f"--tmpdir={tmpdir}"],
                    stdout=out, stderr=subprocess.STDOUT,
                )
            if rc != 0:
                text = open(log, errors="replace").read()
                shutil.rmtree(base, ignore_errors=True)
                raise RuntimeError(f"mariadb-install-db failed ({rc}):\n{text[-3000:]}")
            atexit.register(shutil.rmtree, base, True)
            _INITIAL_DATADIR = datadir
        return _INITIAL_DATADIR


class MariaDBServer:
    """``with MariaDBServer() as db: conn = db.connect()`` — root with an empty password on ``db.port``."""

    def __init__(self, *, startup_timeout: float = 60.0, flags: tuple[str, ...] = SERVER_FLAGS,
                 log_bin: bool = True, row_metadata: str | None = None):
        """``flags`` replace SERVER_FLAGS and ``log_bin=False`` starts the server without a binlog (hostile-input
        tests of servers not set up for CDC); ``row_metadata`` sets binlog_row_metadata (FULL, MINIMAL: MySQL 8's
        default, NO_LOG: MariaDB's default) instead of the flags' value."""
        if row_metadata is not None:
            flags = tuple(f for f in flags if not f.startswith("--binlog-row-metadata="))
            flags += (f"--binlog-row-metadata={row_metadata}",)
        self.flags = tuple(flags)
        self.log_bin = log_bin
        self.host = "127.0.0.1"
        self.port = 0
        self.user = "root"
        self.password = ""
        self.base_dir: str | None = None
        self.startup_timeout = startup_timeout
        self._proc: subprocess.Popen | None = None

    @property
    def datadir(self) -> str:
        assert self.base_dir
        return os.path.join(self.base_dir, "data")

    @property
    def tmpdir(self) -> str:
        assert self.base_dir
        return os.path.join(self.base_dir, "tmp")

    def start(self) -> "MariaDBServer":
        _find("mariadbd")
        self.base_dir = tempfile.mkdtemp(prefix="lakecdc-mariadb-")
        # a private tmpdir: servers sharing /tmp can clash on their internal temporary table names
        os.makedirs(self.tmpdir)
        try:
            shutil.copytree(_initial_datadir(), self.datadir)
        except BaseException:
            self._cleanup()
            raise
        self.error_log = os.path.join(self.base_dir, "mysqld.err")
        last_error: Exception | None = None
        for _attempt in range(3):  # the free port can be taken between probe and bind: retry on a new one
            self.port = _free_port()
            last_error = self._launch()
            if last_error is None:
                return self
        text = open(self.error_log, errors="replace").read() if os.path.exists(self.error_log) else ""
        self._cleanup()
        raise RuntimeError(f"mariadbd did not start ({last_error}):\n{text[-3000:]}")

    def _launch(self) -> Exception | None:
        """Start mariadbd on ``self.port`` and wait until it answers; the last connect error if it did not."""
        last_error: Exception | None = RuntimeError("mariadbd exited")
        self._proc = subprocess.Popen(
            [_find("mariadbd"), "--no-defaults", f"--user={getpass.getuser()}", f"--datadir={self.datadir}",
             f"--socket={os.path.join(self.base_dir, 'mysqld.sock')}",
             f"--pid-file={os.path.join(self.base_dir, 'mysqld.pid')}",
             f"--log-error={self.error_log}", f"--port={self.port}", f"--tmpdir={self.tmpdir}",
             *([f"--log-bin={os.path.join(self.datadir, 'binlog')}"] if self.log_bin else []),
             *self.flags],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            # the death signal follows the thread that started the server: only tie it to the main thread
            preexec_fn=_stop_with_parent if threading.current_thread() is threading.main_thread() else None,
        )
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                break
            try:
                self.connect().close()
                return None
            except pymysql.MySQLError as exc:
                last_error = exc
                time.sleep(0.05)
        self._stop_process()
        return last_error

    def purge_binary_logs_to(self, file: str, timeout: float = 20.0) -> None:
        """PURGE BINARY LOGS TO ``file`` until the server has really dropped the older files: MariaDB keeps a file
        (silently, no warning) until its binlog checkpoint has been written, ~0.5 s after an XA or InnoDB commit
        in it."""
        deadline = time.monotonic() + timeout
        while True:
            self.execute(f"PURGE BINARY LOGS TO '{file}'")
            if self.execute("SHOW BINARY LOGS")[0][0] == file:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the binlog files before {file} were not purged within {timeout:g} s")
            time.sleep(0.1)

    def shutdown(self) -> None:
        """Stop the server (clean shutdown), keeping its data and port for :meth:`resume` (tests of lost
        connections)."""
        self._stop_process()

    def resume(self) -> None:
        """Start a server stopped by :meth:`shutdown` again, on the same port and data. Global variables set with
        SET GLOBAL are reset."""
        error = self._launch()
        if error is not None:
            raise RuntimeError(f"mariadbd did not restart on port {self.port}: {error}")

    def restart(self) -> None:
        self.shutdown()
        self.resume()

    def connect(self, database: str | None = None, **kwargs) -> pymysql.connections.Connection:
        params = dict(host=self.host, port=self.port, user=self.user, password=self.password,
                      database=database, autocommit=True, charset="utf8mb4", connect_timeout=5)
        params.update(kwargs)
        return pymysql.connect(**params)

    def execute(self, sql: str, args=None, database: str | None = None):
        """Run one statement on a new connection; returns the fetched rows."""
        conn = self.connect(database)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, args)
                return cur.fetchall()
        finally:
            conn.close()

    def _stop_process(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def _cleanup(self) -> None:
        if self.base_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)
            self.base_dir = None

    def stop(self) -> None:
        try:
            self._stop_process()
        finally:
            self._cleanup()

    def __enter__(self) -> "MariaDBServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"MariaDBServer({self.host}:{self.port}, datadir={self.base_dir})"
