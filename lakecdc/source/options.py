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
    server_id: int = 5400  # binlog client server id (first id of a range "5400-5404")
    # Flink CDC's session zone for TIMESTAMP values. Accepted for compatibility: every session here uses
    # time_zone '+00:00', so TIMESTAMP columns are read as exact UTC instants whatever the server's zone is.
    server_time_zone: str = "UTC"
    connect_timeout: float = 30.0
    snapshot_batch_rows: int = 65536  # rows per Arrow batch from the snapshot
    treat_tinyint1_as_boolean: bool = True

    def __post_init__(self) -> None:
        if not self.hostname:
            raise SourceError("MySQL source: 'hostname' is required")
        if not isinstance(self.port, int) or not 0 < self.port < 65536:
            raise SourceError(f"MySQL source: 'port' must be 1..65535, got {self.port!r}")
        if not isinstance(self.server_id, int) or not 0 < self.server_id < 2**32:
            raise SourceError(f"MySQL source: 'server-id' must be 1..4294967295, got {self.server_id!r}")
        if self.snapshot_batch_rows < 1:
            raise SourceError("MySQL source: snapshot_batch_rows must be >= 1")
        if self.connect_timeout <= 0:
            raise SourceError("MySQL source: 'connect.timeout' must be > 0")

    @property
    def address(self) -> str:
        return f"{self.hostname}:{self.port}"


_SERVER_ID = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


def parse_server_id(value: int | str) -> int:
    """The binlog client id from a Flink CDC ``server-id`` value: ``5400`` or a range ``'5400-5404'`` (first id)."""
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
    return first
