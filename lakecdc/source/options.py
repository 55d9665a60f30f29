"""Connection and read options of the MySQL source (the ``source:`` block of a Flink CDC pipeline YAML)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lakecdc.errors import SourceError


@dataclass
class MySqlSourceOptions:
    """How to reach the MySQL/MariaDB server and how to read it.

    ``password`` is excluded from ``repr`` and is never put into log lines or error messages.
    """

    hostname: str
    port: int = 3306
    username: str = "root"
    password: str = field(default="", repr=False)
    server_id: int = 5400  # binlog client server id: the first id of a range "5400-5404"
    server_id_last: int | None = None  # the last id of the range (None: just ``server_id``)
    # Flink CDC's session zone for TIMESTAMP values. Accepted for compatibility: every session here uses
    # time_zone '+00:00', so TIMESTAMP columns are read as exact UTC instants whatever the server's zone is.
    server_time_zone: str = "UTC"
    connect_timeout: float = 30.0
    snapshot_batch_rows: int = 65536  # rows per Arrow batch from the snapshot
    treat_tinyint1_as_boolean: bool = True
    heartbeat_interval: float = 30.0  # seconds; the server sends a heartbeat on an idle binlog connection
    connect_max_retries: int = 3  # a lost connection is retried this many times (binlog reads, snapshot chunks)
    retry_backoff: float = 1.0  # seconds before the first retry; doubled for each further one (capped at 30 s)
    chunk_size: int = 8096  # rows per snapshot chunk (scan.incremental.snapshot.chunk.size)
    # (selector, column) pairs of scan.incremental.snapshot.chunk.key-column, first match wins
    chunk_key_columns: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not self.hostname:
            raise SourceError("MySQL source: 'hostname' is required")
        if not isinstance(self.port, int) or not 0 < self.port < 65536:
            raise SourceError(f"MySQL source: 'port' must be 1..65535, got {self.port!r}")
        if not isinstance(self.server_id, int) or not 0 < self.server_id < 2**32:
            raise SourceError(f"MySQL source: 'server-id' must be 1..4294967295, got {self.server_id!r}")
        if self.server_id_last is not None and not self.server_id <= self.server_id_last < 2**32:
            raise SourceError(f"MySQL source: 'server-id' range {self.server_id}-{self.server_id_last} is invalid")
        if self.snapshot_batch_rows < 1:
            raise SourceError("MySQL source: snapshot_batch_rows must be >= 1")
        if self.connect_timeout <= 0:
            raise SourceError("MySQL source: 'connect.timeout' must be > 0")
        if self.heartbeat_interval <= 0:
            raise SourceError("MySQL source: 'heartbeat.interval' must be > 0")
        if self.connect_max_retries < 0:
            raise SourceError("MySQL source: 'connect.max-retries' must be >= 0")
        if self.chunk_size < 2:
            raise SourceError("MySQL source: 'scan.incremental.snapshot.chunk.size' must be > 1")

    @property
    def address(self) -> str:
        return f"{self.hostname}:{self.port}"

    @property
    def server_ids(self) -> list[int]:
        """Every binlog client id this source may use (one for a single id)."""
        last = self.server_id if self.server_id_last is None else self.server_id_last
        return list(range(self.server_id, min(last, self.server_id + 1023) + 1))

    def backoff(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        return min(30.0, self.retry_backoff * 2 ** (attempt - 1))


_SERVER_ID = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


def parse_server_id(value: int | str) -> int:
    """The binlog client id from a Flink CDC ``server-id`` value: ``5400`` or a range ``'5400-5404'`` (first id)."""
    return parse_server_id_range(value)[0]


def parse_chunk_key_columns(value: str) -> tuple[tuple[str, str], ...]:
    """``db.tbl_regex:col;db2.t\\.*:col2`` (Flink CDC's scan.incremental.snapshot.chunk.key-column) as
    (selector, column) pairs."""
    pairs = []
    for item in (p.strip() for p in str(value).split(";")):
        if not item:
            continue
        selector, sep, column = item.rpartition(":")
        if not sep or not selector.strip() or not column.strip():
            raise SourceError(f"MySQL source: invalid 'scan.incremental.snapshot.chunk.key-column' item {item!r}: "
                              "expected 'database.table:column' (several separated by ';')")
        pairs.append((selector.strip(), column.strip()))
    return tuple(pairs)


def parse_server_id_range(value: int | str) -> tuple[int, int]:
    """``5400`` → (5400, 5400); ``'5400-5404'`` → (5400, 5404)."""
    if isinstance(value, bool):
        raise SourceError(f"MySQL source: invalid 'server-id' {value!r}")
    if isinstance(value, int):
        first = last = value
    else:
        match = _SERVER_ID.match(str(value))
        if not match:
            raise SourceError(f"MySQL source: invalid 'server-id' {value!r}: expected a number like 5400 "
                              "or a range like 5400-5404")
        first = int(match.group(1))
        last = int(match.group(2) or first)
    if first <= 0 or last < first or last >= 2**32:
        raise SourceError(f"MySQL source: invalid 'server-id' {value!r}: ids must be 1..4294967295 and the "
                          "range start must not exceed its end")
    return first, last
