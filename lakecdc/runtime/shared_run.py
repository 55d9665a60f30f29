"""One micro-batch per orchestrator run for every table the run selected, shared by the run's table steps.

Dagster runs each Paimon table as its own op (its own pool, retries, failure, materialisation and checks), but
reading the binlog once per table makes a run of N tables cost N binlog reads and N plans. Here the first step of a
run to get going makes one micro-batch of all the run's tables (:func:`micro_batch_once`); the run's other steps
find it and only report.

* In one process (Dagster's in-process executor: every step of a run in one process, one after the other) the
  result is kept in memory, keyed by run id and pipeline.
* Across processes (the multiprocess executor), on a local warehouse, ``<warehouse>/.lakecdc/runs/<pipeline>.<run
  id>.lock`` is locked (blocking ``flock``) around the micro-batch: a step of the same run in another process waits
  there, then reads the record the first one left next to it (``.json``: which tables it covered, or why it
  failed) instead of reading the binlog again. The kernel drops the lock when its holder dies, and a record is only
  written after the micro-batch returned or raised, so a crashed first step leaves the next one to try.
* On an object-store warehouse there is no cross-process lock, and the executor is not known here: micro-batches of
  the same tables in several step processes would fail each other's commits (conditional commits). There nothing is
  shared: each step runs its own table, one binlog read per table.

Tables whose table lock another writer holds (an overlapping run) are left out of the micro-batch
(``run_micro_batch(skip_locked=True)``); the step of such a table runs it alone, as before. When the micro-batch
fails, no table counts as covered: each step runs its table alone, so the failing table fails in its own step and the
others commit.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import re
import threading
import time
from pathlib import Path

from lakecdc.config import PipelineConfig
from lakecdc.model import TableId
from lakecdc.runtime.micro_batch import Log, RunResult, run_micro_batch
from lakecdc.sink.catalog import local_warehouse_path

__all__ = ["SharedRun", "micro_batch_once", "RUNS_DIR"]

RUNS_DIR = Path(".lakecdc") / "runs"
# Records of finished runs are removed after this long (one small file per run and pipeline).
RECORD_RETENTION_SECONDS = 7 * 24 * 3600
_KEPT_IN_MEMORY = 16  # results of older runs are dropped: a long-lived process (a code server, tests) runs many

_LOCK = threading.Lock()  # one micro-batch at a time in this process (steps of one run in threads wait for it)
_DONE: dict[tuple[str, str], "SharedRun"] = {}


@dataclasses.dataclass(frozen=True)
class SharedRun:
    """The run's micro-batch as one step sees it: ``covered`` tables were read and (where they had something to
    commit) committed by it; ``result`` holds what it did when it ran in this process (None in the other processes,
    whose steps find the commits in the tables); ``error`` says why it failed (then nothing is covered)."""

    covered: frozenset[TableId]
    result: RunResult | None = None
    error: str = ""


def micro_batch_once(config: PipelineConfig, targets: set[TableId], run_id: str, log: Log | None = None
                     ) -> SharedRun:
    """The micro-batch of ``targets`` for ``run_id``: made by the first caller with this run id, found by the
    others (in this process, or in another one), on a local warehouse; on an object store nothing is covered. Never
    raises for a failed micro-batch: the callers then run their tables alone."""
    key = (run_id, config.name)
    with _LOCK:
        done = _DONE.get(key)
        if done is not None:
            return done
        record = _record_path(config, run_id)
        if record is None:
            # No cross-process lock on an object store: step processes making one micro-batch each would conflict
            # on every table (conditional commits), so each step runs its own table, as before.
            done = SharedRun(frozenset())
        else:
            done = _across_processes(config, targets, run_id, log, record)
        while len(_DONE) >= _KEPT_IN_MEMORY:
            _DONE.pop(next(iter(_DONE)))
        _DONE[key] = done
        return done


def _micro_batch(config: PipelineConfig, targets: set[TableId], run_id: str, log: Log | None) -> SharedRun:
    try:
        result = run_micro_batch(config, targets=targets, run_id=run_id, log=log, skip_locked=True)
    except Exception as exc:  # the callers run their tables alone; each reports its own error
        if log is not None:
            log.warning(f"the micro-batch of the run's {len(targets)} table(s) failed ({exc}); each table's step "
                        "runs its table alone, so a table that fails fails alone and the others commit")
        return SharedRun(frozenset(), None, str(exc) or type(exc).__name__)
    return SharedRun(frozenset(result.tables), result)


def _across_processes(config: PipelineConfig, targets: set[TableId], run_id: str, log: Log | None,
                      record: Path) -> SharedRun:
    """Under the run's lock file: the record another process left, else this process's micro-batch (recorded)."""
    record.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(record.with_suffix(".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # blocking: a step of this run in another process is reading the binlog
        if record.exists():
            data = json.loads(record.read_text())
            return SharedRun(frozenset(TableId(d, t) for d, t in data["covered"]), None, data.get("error", ""))
        done = _micro_batch(config, targets, run_id, log)
        temporary = record.with_suffix(".tmp")
        temporary.write_text(json.dumps({"covered": sorted([t.database, t.table] for t in done.covered),
                                          "error": done.error}))
        os.replace(temporary, record)  # readers never see half a record
        _forget_old_records(record.parent)
        return done
    finally:
        os.close(fd)  # releases the lock


def _record_path(config: PipelineConfig, run_id: str) -> Path | None:
    warehouse = local_warehouse_path(config.sink.catalog_options["warehouse"])
    if warehouse is None:
        return None
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{config.name}.{run_id}")
    return warehouse / RUNS_DIR / f"{name}.json"


def _forget_old_records(directory: Path) -> None:
    cutoff = time.time() - RECORD_RETENTION_SECONDS
    for path in directory.iterdir():
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
        except OSError:
            pass  # another process removed it first
