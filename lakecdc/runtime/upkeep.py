"""Table upkeep of a pipeline's Paimon tables (lakecdc.sink.upkeep): which tables, with which options, and when.

* After a micro-batch's commits, under the table locks the run holds: every table that committed and whose last
  upkeep is at least ``pipeline.lakecdc.upkeep.every-commits`` snapshots ago (default 1: after every commit, as
  Paimon's own writers check compaction and expiry at every commit; the thresholds in the table options decide
  whether anything is done). Tables with the Paimon option ``write-only = true`` are left to the upkeep job.
* On demand (``lakecdc upkeep``, the Dagster ``<pipeline>_upkeep`` job, the Python API): the given tables, or
  every table of the warehouse whose checkpoint names this pipeline; waiting for the table lock or skipping.

Options: the table's stored options, overridden by the pipeline's current ``sink.table.properties.*``. When each
table had its last upkeep is kept in ``<warehouse>/.lakecdc/upkeep/<db>.<table>.json`` (the snapshot id it
reached; an object of the bucket on an s3:// warehouse, see PaimonSink.write_state); a missing or unreadable file
means "due". It is only a hint: a lost or stale record makes an upkeep come early, and what upkeep does is decided
by the table's thresholds and published by conditional commits (lakecdc.sink.upkeep).
"""

from __future__ import annotations

import json
import logging
from typing import Callable

from lakecdc.config import PipelineConfig
from lakecdc.errors import LakeCdcError
from lakecdc.model import TableId
from lakecdc.runtime.checkpoint import PIPELINE
from lakecdc.runtime.connect import open_sink
from lakecdc.sink import PaimonSink
from lakecdc.sink.upkeep import UpkeepPolicy, UpkeepResult, upkeep_table

logger = logging.getLogger("lakecdc.runtime.upkeep")


def _state_name(table_id: TableId) -> str:
    return f"upkeep/{table_id.database}.{table_id.table}.json"


def _last_upkeep(sink: PaimonSink, table_id: TableId) -> int | None:
    try:
        data = sink.read_state(_state_name(table_id))
        return int(json.loads(data)["snapshot_id"]) if data is not None else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _record_upkeep(sink: PaimonSink, table_id: TableId) -> None:
    latest = sink.latest_snapshot_id(table_id)
    if latest is not None:
        sink.write_state(_state_name(table_id), json.dumps({"snapshot_id": latest}).encode())


def _due(sink: PaimonSink, table_id: TableId, every_commits: int) -> bool:
    latest = sink.latest_snapshot_id(table_id)
    last = _last_upkeep(sink, table_id)
    # a table re-created since (ids restart) or never kept up: due
    return latest is not None and (last is None or last > latest or latest - last >= every_commits)


def upkeep_after_commits(config: PipelineConfig, sink: PaimonSink, targets: list[TableId], *,
                         failpoint: Callable[[str], None] | None = None,
                         log: logging.Logger | logging.LoggerAdapter | None = None) -> dict[TableId, UpkeepResult]:
    """Upkeep of the tables a run committed to, when due (the caller holds their locks). A failing upkeep is
    logged and reported in its result; it never fails the run, whose commits are already durable."""
    log = log or logger
    results: dict[TableId, UpkeepResult] = {}
    if not config.upkeep.enabled:
        return results
    for target in sorted(targets):
        if not _due(sink, target, config.upkeep.every_commits):
            continue
        try:
            if UpkeepPolicy.from_options({**sink.describe(target).options, **config.sink.table_properties}) \
                    .write_only:
                results[target] = UpkeepResult(target, skipped="write-only = true: left to the upkeep job")
                continue
            results[target] = upkeep_table(
                sink, target, options=config.sink.table_properties,
                orphan_older_than_seconds=config.upkeep.orphan_older_than_seconds, failpoint=failpoint, log=log)
            _record_upkeep(sink, target)
        except Exception as error:  # noqa: BLE001 - upkeep must not fail a run whose commits are done
            log.error("%s: table upkeep failed (the run's commits stand): %s", target, error,
                      exc_info=not isinstance(error, LakeCdcError))
            results[target] = UpkeepResult(target, skipped=f"failed: {error}")
    return results


def pipeline_tables(config: PipelineConfig, sink: PaimonSink | None = None) -> list[TableId]:
    """The warehouse's tables whose checkpoint was written by this pipeline (no MySQL connection needed)."""
    sink = sink or open_sink(config)
    found = []
    for table_id in sink.list_tables():
        properties = sink.checkpoint(table_id) or {}
        if properties.get(PIPELINE) == config.name:
            found.append(table_id)
    return found


def upkeep_pipeline(config: PipelineConfig, tables: list[TableId] | None = None, *, full_compaction: bool = False,
                    orphan_older_than_seconds: float | None = None, wait_seconds: float = 0.0,
                    log: logging.Logger | logging.LoggerAdapter | None = None) -> list[UpkeepResult]:
    """Upkeep of ``tables`` (default: the pipeline's tables in the warehouse), each under its table lock; a table
    still locked after ``wait_seconds`` is skipped (its result says by whom)."""
    log = log or logger
    sink = open_sink(config)
    older_than = config.upkeep.orphan_older_than_seconds if orphan_older_than_seconds is None \
        else orphan_older_than_seconds
    results = []
    for target in sorted(tables if tables is not None else pipeline_tables(config, sink)):
        result = upkeep_table(sink, target, full_compaction=full_compaction, options=config.sink.table_properties,
                              orphan_older_than_seconds=older_than, wait_seconds=wait_seconds,
                              owner=f"upkeep of pipeline {config.name!r}", log=log)
        if result.skipped is None:
            _record_upkeep(sink, target)
        results.append(result)
    return results
