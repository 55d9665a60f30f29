"""Run several tables of a pipeline so that a table that fails fails alone (what an orchestrator run of many tables,
e.g. lakecdc's one Dagster op per pipeline, needs).

:func:`run_tables` makes ONE micro-batch of all the tables (one plan, one binlog read). A micro-batch fails as a
whole (one table's transform, a schema a table cannot take, MySQL): then each table runs alone, so the failing table
gets its own error and the others commit. A table whose lock another writer holds (an overlapping run) is left out of
the micro-batch (``skip_locked``) and tried alone afterwards: if that writer is done by then the table commits, else
its error says who holds it. :func:`resnapshot_tables` re-snapshots tables one by one, with the same per-table
errors.

A table committed by a micro-batch that failed afterwards has nothing new when it runs alone; its commit is in the
table (the orchestrator reports it from there, e.g. lakecdc.dagster.metadata.unrecorded_commit).
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

from lakecdc.config import PipelineConfig
from lakecdc.model import BinlogOffset, TableId
from lakecdc.runtime.micro_batch import Log, RunResult, TableResult, logger, run_micro_batch
from lakecdc.runtime.plan import TargetPlan

__all__ = ["TableRuns", "run_tables", "resnapshot_tables"]


@dataclasses.dataclass
class TableRuns:
    """What a run of several tables did: ``committed`` maps each table that ran to what it committed (a
    ``TableResult`` or ``ResnapshotResult``; None: nothing new); ``errors`` maps each table that failed to its
    error; ``binlog_reads`` counts the micro-batches' binlog reads. ``results`` holds every micro-batch result of a
    table that ran (committed or not) and ``plans`` the plan each table's micro-batch committed with: what its
    report and checks use instead of planning again."""

    committed: dict[TableId, object] = dataclasses.field(default_factory=dict)
    errors: dict[TableId, BaseException] = dataclasses.field(default_factory=dict)
    binlog_reads: int = 0
    results: dict[TableId, TableResult] = dataclasses.field(default_factory=dict)
    plans: dict[TableId, TargetPlan] = dataclasses.field(default_factory=dict)
    head: BinlogOffset | None = None  # where the micro-batches read the binlog up to (the latest head)

    def record(self, target: TableId, result: RunResult) -> None:
        if result.head is not None:
            self.head = result.head if self.head is None else max(self.head, result.head)
        table = result.tables.get(target)
        self.committed[target] = table if table is not None and table.committed else None
        if table is not None:
            self.results[target] = table
        if result.plan is not None and target in result.plan.targets:
            self.plans[target] = result.plan.targets[target]


def run_tables(config: PipelineConfig, targets: Iterable[TableId], *, run_id: str | None = None,
               log: Log | None = None, record_writes: bool = False) -> TableRuns:
    """One micro-batch of ``targets``; the tables it could not run (locked by another writer, or all of them when
    it failed) each run alone. Never raises for a table's failure: see ``TableRuns.errors``. ``record_writes``:
    keep what each table committed, for the run's checks (``TableResult.written``)."""
    log = log or logger
    targets = sorted(set(targets))
    runs = TableRuns()
    if not targets:
        return runs
    try:
        result = run_micro_batch(config, targets=set(targets), run_id=run_id, log=log, skip_locked=True,
                                 record_writes=record_writes)
    except Exception as exc:  # noqa: BLE001 - each table runs alone below, and fails with its own error
        if len(targets) == 1:
            runs.errors[targets[0]] = exc
            return runs
        log.warning(f"the micro-batch of {len(targets)} tables failed ({exc}); each table runs alone, so a table "
                    "that fails fails alone and the others commit")
        alone = targets
    else:
        runs.binlog_reads += result.binlog_reads
        skipped = set(result.skipped_tables)
        for target in targets:
            if target not in skipped:
                runs.record(target, result)
        alone = sorted(skipped)  # held by another writer when the micro-batch started: tried once more, alone
    for target in alone:
        try:
            result = run_micro_batch(config, targets={target}, run_id=run_id, log=log, record_writes=record_writes)
        except Exception as exc:  # noqa: BLE001 - this table's own error
            runs.errors[target] = exc
            continue
        runs.binlog_reads += result.binlog_reads
        runs.record(target, result)
    return runs


def resnapshot_tables(config: PipelineConfig, targets: Iterable[TableId], partition: str | None = None, *,
                      run_id: str | None = None, log: Log | None = None) -> TableRuns:
    """Re-snapshot each of ``targets`` (``partition``: only this partition, of a single table), each in its commit
    groups; a table without checkpoint takes its first snapshot instead. A table that fails fails alone."""
    from lakecdc.runtime.resnapshots import resnapshot_or_snapshot  # the re-snapshot's modules, only when asked

    runs = TableRuns()
    for target in sorted(set(targets)):
        try:
            runs.committed[target] = resnapshot_or_snapshot(config, target, partition, run_id=run_id, log=log)
        except Exception as exc:  # noqa: BLE001 - this table's own error
            runs.errors[target] = exc
    return runs
