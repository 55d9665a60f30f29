# Type hints of the C extension built from _textrows.c (the snapshot's text-protocol row scanner).

# TextRows.scan statuses (see _textrows.c)
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
