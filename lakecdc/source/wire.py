"""The rows of a streamed SELECT straight from the wire into Arrow columns, without a Python object per value.

PyMySQL sends the query and reads the column descriptions (so escaping, authentication, TLS and errors stay
PyMySQL's); this module then reads the result's row packets itself, from the socket into a reused buffer, and hands
each buffer-full to the C extension's ``TextRows.scan`` (``_textrows.c``), which walks the packets (length-
prefixed, rows longer than 16 MiB continued over several packets) and every row's fields (``0xFB`` for NULL or a
length-encoded string) and appends each field to its column in the layout of a ``pa.binary()`` array. The scan runs
without the GIL, so several chunk readers, their socket reads and the Paimon writer's encoding overlap; Python only
acts once per socket read and once per block of rows. The end of the result (an EOF or ERR packet), sequence errors
and malformed rows are reported by the scan and handled here as PyMySQL would. Bytes received past the result's end
(a statement with several results, such as a CALL) are handed back to PyMySQL's reader (:class:`_Replay`).

The values stay MySQL's text: :mod:`lakecdc.source.text_columns` turns them into the columns' Arrow types.

This is the only module touching PyMySQL private attributes (``Connection._rfile``, ``_next_seq_id``,
``_force_close`` and the cursor's unbuffered ``MySQLResult``); it was written against PyMySQL 1.2.4, which does not
negotiate ``CLIENT_DEPRECATE_EOF`` (a result ends with an EOF packet).
"""

from __future__ import annotations

import io
import socket
from dataclasses import dataclass
from typing import Any, Generator

import pyarrow as pa
import pymysql
from pymysql.constants import CR
from pymysql.constants.SERVER_STATUS import SERVER_MORE_RESULTS_EXISTS
from pymysql.protocol import MysqlPacket

_IMPORT_ERROR: str | None = None
try:
    from lakecdc.source import _textrows as _ext
except ImportError as exc:  # pragma: no cover - only on a machine where the install could not build it
    _ext = None  # type: ignore[assignment]
    _IMPORT_ERROR = str(exc)

_BUFFER = 1 << 20  # the receive buffer's size (it grows only to hold a packet longer than it)
_MIN_FREE = 256 * 1024  # bytes of free buffer space for each socket read
_MAX_BLOCK = 1 << 30  # emit a block early past this many field bytes (int32 offsets: a row is at most 1 GiB)


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
    """Reads the row packets of one result, a block of rows at a time: socket reads into ``buf`` and scans of them
    by the C extension, which copies the fields out (``buf`` then holds at most one incomplete packet or row)."""

    def __init__(self, conn, result):
        if _ext is None:  # pragma: no cover
            raise ImportError(f"lakecdc's C extension (lakecdc/source/_textrows.c) is not built ({_IMPORT_ERROR}): "
                              "reinstall lakecdc where a C compiler and the Python headers are available "
                              "(scripts/setup.sh installs them)")
        self.conn = conn
        self.result = result
        self.rfile = conn._rfile
        self.rows = _ext.TextRows(result.field_count)
        self.buf = bytearray(_BUFFER)
        self.pos = 0  # buf[pos:filled]: received, not yet scanned
        self.filled = 0
        self.seq = conn._next_seq_id  # sequence id of the packet at pos
        self.drained = False  # PyMySQL's buffered reader holds none of the result's bytes any more
        self.done = False

    def next_block(self, max_rows: int) -> list[pa.Array] | None:
        """The columns of the next ``max_rows`` rows (fewer at the end, or past _MAX_BLOCK bytes); None after the
        last row."""
        while not self.done and self._scan(max_rows):
            pass
        rows, columns = self.rows.take()
        if not rows:
            return None
        return [pa.Array.from_buffers(pa.binary(), rows,
                                      [None if valid is None else pa.py_buffer(valid), pa.py_buffer(offsets),
                                       pa.py_buffer(data)], null_count=nulls)
                for valid, nulls, offsets, data in columns]

    def _scan(self, max_rows: int) -> bool:
        """Scan what was received (receiving more first when nothing is left); False when the block is full."""
        if self.pos == self.filled:
            self._receive()
        status, self.pos, self.seq, got = self.rows.scan(self.buf, self.pos, self.filled, self.seq, max_rows,
                                                         _MAX_BLOCK)
        if status == _ext.SCAN_MORE:
            self._receive()
        elif status == _ext.SCAN_FULL:
            return False
        elif status == _ext.SCAN_END:
            self._end()
        elif status == _ext.SCAN_SEQUENCE:
            self._fail(_sequence_error(got, self.seq))
        elif status == _ext.SCAN_MORE_FIELDS:
            self._fail(pymysql.err.InternalError("a row packet has more fields than the result has columns"))
        elif status == _ext.SCAN_BAD_LENGTH:
            self._fail(pymysql.err.InternalError("a row packet has a field with an invalid length (0xFF)"))
        else:
            self._fail(pymysql.err.InternalError("a row packet has fewer fields than the result has columns"))
        return True

    def _end(self) -> None:
        """The packet at ``pos`` ends the result: an EOF packet (``0xFE``, shorter than 9 bytes), or an error packet
        (``0xFF``), which raises the server's error."""
        buf, at = self.buf, self.pos
        size = buf[at] | (buf[at + 1] << 8) | (buf[at + 2] << 16)
        payload = bytes(buf[at + 4:at + 4 + size])
        self.pos = at + 4 + size
        self.done = True
        if self.pos < self.filled:  # the server's next packets (a CALL's next result or its OK packet) came along
            self.conn._rfile = io.BufferedReader(_Replay(bytes(buf[self.pos:self.filled]), self.rfile))
            self.pos = self.filled
        self.conn._next_seq_id = (self.seq + 1) % 256
        result = self.result
        result.unbuffered_active = False
        result.connection = None
        result.rows = None
        if payload[0] == 0xFF:
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

    def _receive(self) -> None:
        """More bytes from the server after ``buf[pos:filled]`` (moved to the front of ``buf`` first; ``buf``
        doubles when a packet does not fit in it)."""
        rest = self.filled - self.pos
        if self.pos:
            if rest:
                self.buf[:rest] = self.buf[self.pos:self.filled]
            self.pos, self.filled = 0, rest
        if len(self.buf) - self.filled < _MIN_FREE:
            self.buf.extend(bytes(len(self.buf)))
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
                if not self._scan(1 << 62):
                    self.rows.clear()  # past _MAX_BLOCK bytes: memory stays bounded
            self.rows.clear()
        except Exception:  # noqa: BLE001 - the connection is closed; its next use reports that
            self.result.unbuffered_active = False
            if self.conn._sock is not None:
                self.conn._force_close()


class _Replay(io.RawIOBase):
    """The connection's stream after a result whose end packet arrived with the server's next bytes (a statement
    with several results: a CALL's next result set or its closing OK packet): those bytes first, then the socket's.
    PyMySQL reads them with ``_rfile.read``, the next wire read with ``_rfile.read1`` and ``_rfile.raw.readinto``
    (this object); dropping them would leave PyMySQL waiting for packets the server already sent."""

    data: memoryview
    rfile: Any  # the BufferedReader wrapped (None once detached)

    def __init__(self, data: bytes, rfile) -> None:
        super().__init__()
        # an exhausted replay is taken out (detached: closing it no longer closes what it wraps), so results after
        # results do not stack them up
        while isinstance(rfile.raw, _Replay) and not rfile.raw.data and rfile.raw.rfile is not None:
            done = rfile.raw
            rfile, done.rfile = done.rfile, None
        self.data = memoryview(data)
        self.rfile = rfile  # held: the socket's file object, which PyMySQL's close closes through this one
        self.socket_raw = rfile.raw

    def close(self) -> None:
        if not self.closed and self.rfile is not None:
            self.rfile.close()
        super().close()

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int | None:
        if self.data:
            n = min(len(b), len(self.data))
            b[:n] = self.data[:n]
            self.data = self.data[n:]
            return n
        return self.socket_raw.readinto(b)


def _sequence_error(got: int, expected: int) -> BaseException:
    if got == 0:  # MariaDB sends its shutdown error with sequence id 0
        return pymysql.err.OperationalError(CR.CR_SERVER_LOST, "Lost connection to MySQL server during query")
    return pymysql.err.InternalError(f"Packet sequence number wrong - got {got} expected {expected}")
