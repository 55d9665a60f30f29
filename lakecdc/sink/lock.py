"""One writer per Paimon table: an exclusive, non-blocking, cross-process lock file inside a local warehouse.

Paimon's filesystem commit is not safe against concurrent writers: pypaimon renames the new snapshot file over a
snapshot another process has just created, and one writer's commit is silently lost (pypaimon 2.1.0's local
snapshot commit).
We therefore let exactly one process write a table at a time:

* ``<warehouse>/.lakecdc/locks/<database>.<table>.lock`` is locked with ``fcntl.flock(LOCK_EX | LOCK_NB)``. The
  kernel drops the lock when the descriptor is closed, so the lock is released on exit and also when the holder
  dies (even SIGKILL). The file holds JSON ``{pid, host, owner, acquired_at}`` of the current holder, to name it
  in the error; the file itself is never deleted (deleting it would let two processes lock two different files).
* flock locks belong to an open file description, so two lock attempts in the same process conflict as well.
* flock only works where every writer sees the same local (or flock-capable) filesystem. On an object-store
  warehouse there is no cross-process lock: every commit publishes its snapshot by conditional put and verifies
  its base snapshot (lakecdc.sink.object_store), so concurrent writers cannot lose each other's commits; the
  loser's run fails and resumes from its checkpoint. ``InProcessTableLock`` keeps the lock API (one writer per
  table inside one process) there.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import time
from pathlib import Path

from lakecdc.errors import SinkError, TableLockedError
from lakecdc.model import LAKECDC_DIR, TableId

LOCK_DIR = Path(LAKECDC_DIR) / "locks"


def lock_path(warehouse_dir: Path, table_id: TableId) -> Path:
    return warehouse_dir / LOCK_DIR / f"{table_id.database}.{table_id.table}.lock"


class TableLock:
    """A held table lock; ``release()`` (idempotent) or closing the process frees it."""

    def __init__(self, path: Path, table_id: TableId, owner: str):
        self.path = path
        self.table_id = table_id
        self.owner = owner
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> "TableLock":
        if self._fd is not None:
            raise SinkError(f"table {self.table_id}: lock already held by this TableLock")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as error:
            raise SinkError(f"table {self.table_id}: cannot open lock file {self.path}: {error}") from error
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            holder = _holder_when_written(fd)
            os.close(fd)
            if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise TableLockedError(
                    f"table {self.table_id} is being written by another writer ({holder}); lock file {self.path}. "
                    f"Only one writer per table is allowed: wait for it to finish or stop it."
                ) from None
            raise SinkError(f"table {self.table_id}: cannot lock {self.path}: {error}") from error
        info = {"pid": os.getpid(), "host": socket.gethostname(), "owner": self.owner,
                "acquired_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        except OSError:
            pass  # holder info is only informative
        self._fd = fd
        return self

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)  # no stale holder info; the file stays (see the module docstring)
        except OSError:
            pass
        os.close(fd)  # closing the descriptor releases the flock

    def __enter__(self) -> "TableLock":
        return self if self.held else self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


HOLDER_WAIT_SECONDS = 0.5
UNKNOWN_HOLDER = "holder unknown"


def _holder_when_written(fd: int) -> str:
    """The holder's description; a holder writes it right after taking the lock, so a writer that met the lock in
    between waits briefly for it instead of naming no holder."""
    deadline = time.monotonic() + HOLDER_WAIT_SECONDS
    holder = _read_holder(fd)
    while holder == UNKNOWN_HOLDER and time.monotonic() < deadline:
        time.sleep(0.01)
        holder = _read_holder(fd)
    return holder


def _read_holder(fd: int) -> str:
    try:
        raw = os.pread(fd, 4096, 0).decode(errors="replace").strip()
    except OSError:
        raw = ""
    if not raw:
        return UNKNOWN_HOLDER
    try:
        info = json.loads(raw)
        owner = f" owner {info['owner']!r}" if info.get("owner") else ""
        return f"pid {info.get('pid')} on {info.get('host')}{owner} since {info.get('acquired_at')}"
    except (ValueError, TypeError, KeyError):
        return raw[:200]


class InProcessTableLock:
    """The table "lock" of an object-store warehouse: held by this object only, shared with no other process
    (safety across processes comes from conditional commits, see the module docstring)."""

    def __init__(self, table_id: TableId, owner: str):
        self.table_id = table_id
        self.owner = owner
        self._held = False

    @property
    def held(self) -> bool:
        return self._held

    def acquire(self) -> "InProcessTableLock":
        if self._held:
            raise SinkError(f"table {self.table_id}: lock already held by this lock object")
        self._held = True
        return self

    def release(self) -> None:
        self._held = False

    def __enter__(self) -> "InProcessTableLock":
        return self if self._held else self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
