"""Which failures deserve a retry: transient source errors (the server is unreachable, restarting, dropped the
connection, a lock wait or deadlock) and a table held by another writer are retried with exponential backoff;
everything else (a configuration error, wrong credentials, a purged binlog, a schema the table cannot take) fails
at once, because retrying cannot fix it.

A held table is retried because it is held by an overlapping writer (another run of the pipeline whose selection
shares the table, a re-snapshot, upkeep), which ends by itself. A pipeline's op fails when any of its tables failed,
and is retried only when every failed table's error is transient; a retry runs the op's tables again, and those that
committed have nothing new.
"""

import re

import dagster as dg

import pymysql

from lakecdc.config import PipelineConfig
from lakecdc.errors import BinlogPurgedError, LakeCdcError, SourceError, TableLockedError

# MySQL/MariaDB client and server error codes that go away by themselves.
TRANSIENT_CODES = {
    1040,  # too many connections
    1053,  # server shutdown in progress
    1205,  # lock wait timeout
    1213,  # deadlock
    1927,  # connection killed (MariaDB)
    2002, 2003,  # cannot connect
    2006, 2013,  # server gone away, lost connection
    2055,  # lost connection (system error)
}
_CODE = re.compile(r"\((\d{4})\)")
_NETWORK = ("Connection refused", "Connection reset", "timed out", "Broken pipe", "Name or service not known",
            "Temporary failure in name resolution")


def is_transient(error: BaseException) -> bool:
    if isinstance(error, BinlogPurgedError):
        return False
    if isinstance(error, TableLockedError):
        return True
    if isinstance(error, SourceError):
        text = str(error)
        codes = {int(c) for c in _CODE.findall(text)}
        if codes:
            return bool(codes & TRANSIENT_CODES)
        return any(marker in text for marker in _NETWORK)
    if isinstance(error, LakeCdcError):
        return False
    # Driver or network errors that escaped the source layer's wrapping.

    return isinstance(error, (pymysql.OperationalError, ConnectionError, TimeoutError))


def retry_policy(config: PipelineConfig) -> dg.RetryPolicy | None:
    if config.automation.max_retries <= 0:
        return None
    return dg.RetryPolicy(max_retries=config.automation.max_retries,
                          delay=config.automation.retry_delay_seconds,
                          backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS)


def as_failure(error: BaseException) -> dg.Failure:
    """A Dagster Failure carrying lakecdc's message; only transient errors may be retried."""
    transient = is_transient(error)
    message = str(error) if isinstance(error, LakeCdcError) else f"{type(error).__name__}: {error}"
    return dg.Failure(description=message, allow_retries=transient,
                      metadata={"lakecdc/transient": dg.MetadataValue.bool(transient),
                                "lakecdc/error_type": type(error).__name__})
