"""The one place where a pipeline's MySQL source and Paimon sink are built from its configuration.

Every operation (a micro-batch, follow mode, a re-snapshot, the checks, the status, upkeep) and the CLI and Dagster
wrappers get them from here, so a new source or sink option reaches all of them at once instead of some of the
call sites that used to build their own.
"""

from __future__ import annotations

import dataclasses
import threading

from lakecdc.config import PipelineConfig
from lakecdc.sink import PaimonSink
from lakecdc.source import MySqlSource


def open_source(config: PipelineConfig, *, connect_timeout: float | None = None,
                connect_max_retries: int | None = None) -> MySqlSource:
    """The pipeline's MySQL server as a CDC source. ``connect_timeout`` (at most the configured one) and
    ``connect_max_retries``: for callers that must not wait long for a server that is down (definitions loading)."""
    options = config.source  # the source block is the MySqlSourceOptions (lakecdc.source.options)
    if connect_timeout is not None:
        options = dataclasses.replace(options, connect_timeout=min(options.connect_timeout, connect_timeout))
    if connect_max_retries is not None:
        options = dataclasses.replace(options, connect_max_retries=connect_max_retries)
    return MySqlSource(options)


_SHARED: dict[str, MySqlSource] = {}
_SHARED_LOCK = threading.Lock()


def shared_source(config: PipelineConfig) -> MySqlSource:
    """The pipeline's MySQL server as a source whose short calls (table descriptions, head, counts, binlog file
    list) share one connection for the life of the process (reopened when the server dropped it): per-table work
    in a long-lived process (Dagster's reports of each table, checks, the sensor) opens no connection per table. One
    per server and user; calls from several threads take turns on it."""
    key = repr(config.source)
    with _SHARED_LOCK:
        source = _SHARED.get(key)
        if source is None:
            source = _SHARED[key] = open_source(config)
            source.share_connection()
        return source


def open_sink(config: PipelineConfig) -> PaimonSink:
    """The pipeline's Paimon catalog, with the table properties new tables get and the commit user its commits
    carry (Flink CDC's ``commit.user-prefix``)."""
    return PaimonSink(config.sink.catalog_options, config.sink.table_properties, config.sink.commit_user_prefix)


def open_warehouse(catalog_options: dict[str, str]) -> PaimonSink:
    """A Paimon catalog from its catalog options alone, for callers that only read a pipeline's tables and know
    the catalog but not the pipeline (Dagster's materialisation metadata)."""
    return PaimonSink(catalog_options)
