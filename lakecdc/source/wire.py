"""The rows of a streamed SELECT straight from the wire into Arrow columns, without a Python object per value.

PyMySQL sends the query and reads the column descriptions (so escaping, authentication, TLS and errors stay
PyMySQL's); this module then reads the result rows itself, as raw text-protocol packets, into one buffer:

* a short Python loop finds where each row packet starts (one step per row: the packets are length-prefixed, so
  finding the next one needs the previous one's length);
* numpy walks all rows of the block one column at a time (a field is ``0xFB`` for NULL or a length-encoded string),
  giving every field's start and end;
* ``pyarrow.compute.take`` copies each column's fields out of the buffer into a contiguous binary array (the buffer
  is viewed as one binary array whose values alternate between fields and the bytes between them).

The values stay MySQL's text: :mod:`lakecdc.source.text_columns` turns them into the columns' Arrow types.

This is the only module touching PyMySQL private attributes (``Connection._rfile``, ``_next_seq_id``,
``_force_close`` and the cursor's unbuffered ``MySQLResult``); it was written against PyMySQL 1.2.4, which does not
negotiate ``CLIENT_DEPRECATE_EOF`` (a result ends with an EOF packet).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Generator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pymysql
from pymysql.constants import CR
from pymysql.constants.SERVER_STATUS import SERVER_MORE_RESULTS_EXISTS
from pymysql.protocol import MysqlPacket

MAX_PACKET = 0xFFFFFF  # a payload of this size continues in the next packet
_MIN_FREE = 256 * 1024  # bytes of free buffer space for each socket read
_MAX_BLOCK = 1 << 30  # emit a block early past this many buffered bytes (int32 offsets)


@dataclass
class ResultColumns:
    """What the server said about the columns of a result (from PyMySQL's column descriptions)."""

    count: int
    converters: list  # per column: (encoding or None, converter or None) exactly as PyMySQL decodes the value


def result_columns(cursor) -> ResultColumns | None:
    """The column descriptions of ``cursor``'s streamed result; None when the statement returned no rows."""
    result = cursor._result
    if result is None or not result.unbuffered_active:
        return None
    return ResultColumns(result.field_count, list(result.converters))


def read_columns(cursor, max_rows: int) -> Generator[list[pa.Array], None, None]:
    """The rows of ``cursor``'s streamed result (an ``SSCursor`` right after ``execute``), ``max_rows`` rows at a
    time, as one ``pa.binary()`` array per column (the fields' text-protocol bytes; NULL fields are null).

    Driver errors are PyMySQL's (``OperationalError`` 2013 when the connection is lost). Closing the iterator early
    reads and discards the rest of the result so the connection can run the next statement."""
    result = cursor._result
    if result is None or not result.unbuffered_active:
        return
    reader = _PacketReader(cursor.connection, result)
    try:
        while True:
            columns = reader.next_block(max_rows)
            if columns is None:
                return
            yield columns
    finally:
        reader.finish()


def abort_connection(conn) -> None:
    """Make every read on ``conn`` fail now, also one blocked in another thread (shutting the socket down wakes a
    blocked ``recv``; closing it would not); the connection is unusable afterwards."""
    sock = getattr(conn, "_sock", None) if conn is not None else None
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed by the peer


class _PacketReader:
    """Reads the row packets of one result into a growing buffer, a block of rows at a time."""

    def __init__(self, conn, result):
        self.conn = conn
        self.result = result
        self.rfile = conn._rfile
        self.count = result.field_count
        self.buf = bytearray(1 << 20)
        self.filled = 0  # bytes received into buf
        self.scanned = 0  # buf[:scanned] holds whole packets, their header offsets in self.starts
        self.starts: list[int] = []
        self.seq = conn._next_seq_id  # sequence id of the packet at self.starts[0]
        self.dropped_full = False  # the last packet dropped from buf had the maximum size (a row continues)
        self.drained = False  # PyMySQL's buffered reader holds none of the result's bytes any more
        self.done = False

    # ------------------------------------------------------------------------------------------------ blocks

    def next_block(self, max_rows: int) -> list[pa.Array] | None:
        """The columns of the next ``max_rows`` rows (fewer at the end, or past _MAX_BLOCK bytes); None after the
        last row."""
        while not self.done and len(self.starts) < max_rows and self.scanned < _MAX_BLOCK:
            if not self._scan():
                self._receive()
        take = min(max_rows, len(self.starts))
        if not take:
            return None
        headers = np.array(self.starts[:take], dtype=np.int64)
        if (_sizes(self.buf, headers) == MAX_PACKET).any():
            # rows longer than 16 MiB span several packets (rare): count rows, not packets
            take = self._packets_of_rows(max_rows)
            headers = np.array(self.starts[:take], dtype=np.int64)
        end = self.starts[take] if take < len(self.starts) else self.scanned
        columns = _parse_block(self.buf, headers, self.seq, self.count, self._fail)
        self.seq = (self.seq + take) % 256
        self.starts = self.starts[take:]
        self._drop(end)
        return columns

    def _packets_of_rows(self, max_rows: int) -> int:
        """How many packets from the first one hold ``max_rows`` rows (fewer at the end): a row ends with a packet
        shorter than MAX_PACKET. Scans and receives more packets as needed."""
        take = rows = 0
        while rows < max_rows:
            if take == len(self.starts):
                if self.done:
                    break
                if not self._scan():
                    self._receive()
                continue
            if self._size(self.starts[take]) != MAX_PACKET:
                rows += 1
            take += 1
        return take

    def _size(self, header: int) -> int:
        buf = self.buf
        return buf[header] | (buf[header + 1] << 8) | (buf[header + 2] << 16)

    def _scan(self) -> bool:
        """Find the whole packets after ``scanned``; True when some were found (then ``done`` if the result ended),
        False when more bytes are needed."""
        buf, p, end, starts = self.buf, self.scanned, self.filled, self.starts
        before = len(starts)
        append = starts.append
        last = end - 4
        # one step per row, the only per-row Python of the fast path (kept to one comparison per step)
        while p <= last:
            append(p)
            p += 4 + buf[p] + (buf[p + 1] << 8) + (buf[p + 2] << 16)
        if p > end:
            p = starts.pop()  # the last packet is not whole yet
        self.scanned = p
        if len(starts) == before:
            return False
        self._check_end()
        return True

    def _check_end(self) -> None:
        """Set ``done`` when the last whole packet ends the result: an EOF packet (``0xFE``, shorter than 9 bytes),
        dropped from the rows; an error packet (``0xFF``) raises the server's error."""
        last = self.starts[-1]
        size = self.scanned - last - 4
        first = self.buf[last + 4] if size else None
        if first not in (0xFE, 0xFF) or first == 0xFE and size >= 9:
            return  # a row (a row's first field may be longer than 16 MiB: 0xFE and 9+ bytes)
        prev_full = self._size(self.starts[-2]) == MAX_PACKET if len(self.starts) > 1 else self.dropped_full
        if prev_full:
            return  # the tail of a row longer than 16 MiB
        seq = (self.seq + len(self.starts) - 1) % 256
        got = self.buf[last + 3]
        if got != seq:
            self._fail(_sequence_error(got, seq))
        payload = bytes(self.buf[last + 4:last + 4 + size])
        self.starts.pop()
        self.done = True
        self.conn._next_seq_id = (seq + 1) % 256
        result = self.result
        result.unbuffered_active = False
        result.connection = None
        result.rows = None
        if first == 0xFF:
            MysqlPacket(payload, self.conn.encoding).raise_for_error()
        if len(payload) >= 5:  # as PyMySQL's EOFPacketWrapper: warning count, server status
            result.warning_count = int.from_bytes(payload[1:3], "little")
            result.server_status = int.from_bytes(payload[3:5], "little")
            result.has_next = bool(result.server_status & SERVER_MORE_RESULTS_EXISTS)

    def _fail(self, error: BaseException):
        """A broken or out-of-step connection cannot be used again: close it and raise ``error``."""
        self.result.unbuffered_active = False
        self.conn._force_close()
        raise error

    # ------------------------------------------------------------------------------------------------ buffer

    def _drop(self, end: int, last_full: bool = False) -> None:
        """Drop buf[:end] (packets already handed out; ``last_full``: the last of them continues in the next
        packet); the bytes after it move to the front."""
        self.dropped_full = last_full
        rest = self.filled - end
        if rest:
            self.buf[:rest] = self.buf[end:self.filled]
        self.filled = rest
        self.scanned -= end
        self.starts = [s - end for s in self.starts]

    def _receive(self) -> None:
        if len(self.buf) - self.filled < _MIN_FREE:
            self.buf.extend(bytes(len(self.buf)))  # double: a block of rows stays in one buffer
        view = memoryview(self.buf)[self.filled:]
        try:
            while True:
                try:
                    n = self._read_into(view)
                    break
                except InterruptedError:
                    continue
                except OSError as exc:
                    self._fail(pymysql.err.OperationalError(
                        CR.CR_SERVER_LOST, f"Lost connection to MySQL server during query ({exc})"))
        finally:
            view.release()
        if not n:
            self._fail(pymysql.err.OperationalError(CR.CR_SERVER_LOST,
                                                    "Lost connection to MySQL server during query"))
        self.filled += n

    def _read_into(self, view: memoryview) -> int:
        """Bytes the server sent, into ``view``: first what PyMySQL's buffered reader already holds (it read ahead
        past the column descriptions), then straight from the socket. Never waits for more than one socket read:
        ``BufferedReader.readinto1`` would, with a view larger than its buffer (it reads the socket again after
        copying the buffered bytes, and the server may have nothing more to send)."""
        if not self.drained:
            # read1 returns only buffered bytes when there are any (at most the reader's 8 KiB buffer), else it
            # makes one socket read: either way the buffered reader is empty afterwards
            chunk = self.rfile.read1(min(len(view), 1 << 16))
            self.drained = True
            view[:len(chunk)] = chunk
            return len(chunk)
        return self.rfile.raw.readinto(view) or 0

    def finish(self) -> None:
        """Read and discard the rest of the result (an iterator closed early), so the connection stays usable."""
        if self.done or self.conn._sock is None:
            return
        try:
            while not self.done:
                if self.starts:
                    last_full = self._size(self.starts[-1]) == MAX_PACKET
                    self.seq = (self.seq + len(self.starts)) % 256
                    self.starts = []
                    self._drop(self.scanned, last_full)
                if not self._scan():
                    self._receive()
        except Exception:  # noqa: BLE001 - the connection is closed; its next use reports that
            self.result.unbuffered_active = False
            if self.conn._sock is not None:
                self.conn._force_close()


def _sequence_error(got: int, expected: int) -> BaseException:
    if got == 0:  # MariaDB sends its shutdown error with sequence id 0
        return pymysql.err.OperationalError(CR.CR_SERVER_LOST, "Lost connection to MySQL server during query")
    return pymysql.err.InternalError(f"Packet sequence number wrong - got {got} expected {expected}")


def _sizes(buf: bytearray, headers: np.ndarray) -> np.ndarray:
    """The payload sizes of the packets whose headers are at ``headers``."""
    data = np.frombuffer(buf, dtype=np.uint8)
    return data[headers].astype(np.int64) | (data[headers + 1].astype(np.int64) << 8) | \
        (data[headers + 2].astype(np.int64) << 16)


def _parse_block(buf: bytearray, headers: np.ndarray, seq: int, count: int, fail) -> list[pa.Array]:
    """The ``count`` columns of the row packets whose headers are at ``headers`` in ``buf`` (sequence ids from
    ``seq`` on), parsed column by column over all rows; the arrays own their data (``buf`` may change next)."""
    n = len(headers)
    data = np.frombuffer(buf, dtype=np.uint8)
    sizes = _sizes(buf, headers)
    expected = (seq + np.arange(n)) % 256
    seqs = data[headers + 3]
    if not np.array_equal(seqs, expected):
        bad = int(np.flatnonzero(seqs != expected)[0])
        fail(_sequence_error(int(seqs[bad]), int(expected[bad])))
    starts = headers + 4
    ends = starts + sizes
    full = sizes == MAX_PACKET
    if full.any():
        data, starts, ends = _join_continued(data, starts, ends, full)
    try:
        return _split_columns(data, starts, ends, count)
    except pymysql.MySQLError as exc:
        fail(exc)
        raise


def _join_continued(data: np.ndarray, starts: np.ndarray, ends: np.ndarray, full: np.ndarray):
    """Rows longer than 16 MiB span several packets: a new buffer with each row's payloads joined."""
    parts, row_starts, row_ends, at, i, n = [], [], [], 0, 0, len(starts)
    while i < n:
        row_starts.append(at)
        while True:
            parts.append(data[starts[i]:ends[i]])
            at += int(ends[i] - starts[i])
            i += 1
            if not full[i - 1] or i >= n:
                break
        row_ends.append(at)
    return (np.concatenate(parts), np.array(row_starts, dtype=np.int64), np.array(row_ends, dtype=np.int64))


def _split_columns(data: np.ndarray, starts: np.ndarray, ends: np.ndarray, count: int) -> list[pa.Array]:
    """One ``pa.binary()`` array per column from rows data[starts:ends]."""
    n = len(starts)
    buffer = pa.py_buffer(data)
    every_other = pa.array(np.arange(0, 2 * n, 2, dtype=np.int64))
    out, pos = [], starts
    for _ in range(count):
        if (pos >= ends).any():
            raise pymysql.err.InternalError("a row packet has fewer fields than the result has columns")
        start, end, valid = _fields(data, pos)
        out.append(_binary_column(buffer, start, end, valid, every_other))
        pos = end
    if not np.array_equal(pos, ends):
        raise pymysql.err.InternalError("a row packet has more fields than the result has columns")
    return out


def _fields(data: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Start, end and validity (None: no NULL) of the field at ``pos`` of every row. A field is 0xFB (NULL) or a
    length-encoded string: a length byte < 0xFB, or 0xFC/0xFD/0xFE followed by a 2/3/8-byte length."""
    first = data[pos]
    length = first.astype(np.int64)
    start = pos + 1
    valid = None
    if (first >= 0xFB).any():
        null = first == 0xFB
        if null.any():
            length[null] = 0
            valid = ~null
        for marker, size in ((0xFC, 2), (0xFD, 3), (0xFE, 8)):
            rows = np.flatnonzero(first == marker)
            if rows.size:
                at = pos[rows] + 1
                value = np.zeros(rows.size, dtype=np.uint64)
                for b in range(size):
                    value |= data[at + b].astype(np.uint64) << np.uint64(8 * b)
                length[rows] = value.astype(np.int64)
                start[rows] = at + size
    return start, start + length, valid


def _binary_column(buffer: pa.Buffer, start: np.ndarray, end: np.ndarray, valid: np.ndarray | None,
                   take: pa.Array) -> pa.Array:
    """The fields [start, end) of ``buffer`` as one binary array: the buffer is viewed as a binary array whose
    values alternate between a field and the bytes up to the next row's field; taking every other value copies
    the fields out contiguously (in C++)."""
    n = len(start)
    if n == 0:
        return pa.array([], type=pa.binary())
    offsets = np.empty(2 * n + 1, dtype=np.int32)
    offsets[0:2 * n:2] = start
    offsets[1:2 * n:2] = end
    offsets[2 * n] = end[-1]
    spans = pa.Array.from_buffers(pa.binary(), 2 * n, [None, pa.py_buffer(offsets), buffer])
    fields = pc.take(spans, take)
    if valid is None:
        return fields
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(pa.binary(), n, [bitmap, *fields.buffers()[1:]], null_count=int(n - valid.sum()))
