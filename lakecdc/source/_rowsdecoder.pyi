# Type hints of the C extension built from _rowsdecoder.c (the columnar binlog rows decoder and the snapshot's
# text-protocol row scanner).
from typing import Any

class Unsupported(Exception): ...

class Plan:
    def __init__(self, slots: Any, specs: Any, /) -> None: ...
    def decode(self, *args: Any) -> Any: ...

def concat(parts: Any, ts: Any, /) -> tuple[Any, Any, Any, Any, Any]: ...

# TextRows.scan statuses (see _rowsdecoder.c)
SCAN_MORE: int
SCAN_FULL: int
SCAN_END: int
SCAN_SEQUENCE: int
SCAN_FEWER: int
SCAN_MORE_FIELDS: int
SCAN_BAD_LENGTH: int

class TextRows:
    """The text-protocol rows of a streamed SELECT, scanned into per-column binary arrays."""

    num_rows: int
    def __init__(self, columns: int, /) -> None: ...
    def scan(self, buf: bytes | bytearray | memoryview, pos: int, end: int, seq: int, max_rows: int,
             max_bytes: int, /) -> tuple[int, int, int, int]: ...
    def take(self) -> tuple[int, list[tuple[bytes | None, int, bytes, bytes]]]: ...
    def clear(self) -> None: ...
