"""A test-only TCP proxy between lakecdc and a MySQL/MariaDB server that rewrites the binlog dump stream, so tests can
put events in front of lakecdc that the test server does not write (unknown event types, MySQL 8's compressed
transactions) while every position stays the server's.

Every connection is passed through byte for byte, except:

- the server's handshake loses the CLIENT_SSL capability, so the stream stays readable (pymysql then does not ask
  for TLS);
- once a client sends COM_BINLOG_DUMP / COM_BINLOG_DUMP_GTID, the server's packets are parsed (MySQL packets: a
  3-byte length and a sequence id; a dump packet is an OK byte 0x00, then the event: its 19-byte header, its body
  and, when the server writes checksums, a CRC32), each event (without its checksum) goes through ``rewrite``, and
  the events it returns are sent on with their size field and checksum recomputed and the packets numbered anew.

``rewrite(event) -> list of events`` sees every event of every dump, in order; a stateful rewriter may hold events
back and return several at once (see :class:`PayloadWrapper`).
"""

from __future__ import annotations

import socket
import struct
import threading
import zlib
from typing import Callable, Iterator

import pyarrow as pa

Rewrite = Callable[[bytes], list[bytes]]

HEADER = struct.Struct("<IBIIIH")  # timestamp, type, server id, size, end position, flags
_MAX_PACKET = 0xFFFFFF
_CLIENT_SSL = 0x0800
COM_BINLOG_DUMP, COM_BINLOG_DUMP_GTID = 0x12, 0x1E

QUERY, XID, TABLE_MAP, XA_PREPARE = 0x02, 0x10, 0x13, 0x26
ROWS_V1_TO_V2 = {0x17: 0x1E, 0x18: 0x1F, 0x19: 0x20}
MARIADB_GTID, MARIADB_ANNOTATE_ROWS = 0xA2, 0xA0
TRANSACTION_PAYLOAD = 0x28


def event_type(event: bytes) -> int:
    return event[4]


def end_position(event: bytes) -> int:
    return HEADER.unpack_from(event)[4]


def with_type(event: bytes, new_type: int) -> bytes:
    return event[:4] + bytes([new_type]) + event[5:]


def with_end_position(event: bytes, position: int) -> bytes:
    return event[:13] + struct.pack("<I", position) + event[17:]


def sized(event: bytes) -> bytes:
    """``event`` with its size field set to its length."""
    return event[:9] + struct.pack("<I", len(event)) + event[13:]


class BinlogProxy:
    """``with BinlogProxy(server_port, rewrite) as proxy:`` — point a client at ``proxy.port``."""

    def __init__(self, server_port: int, rewrite: Rewrite | None = None, *, checksum: bool = True,
                 host: str = "127.0.0.1"):
        self.server = (host, server_port)
        self.rewrite = rewrite or (lambda event: [event])
        self.checksum = checksum
        self.port = 0
        self.dumps = 0  # binlog dumps seen
        self._listener: socket.socket | None = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def __enter__(self) -> "BinlogProxy":
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        if self._listener is not None:
            self._listener.close()
        with self._lock:
            for sock in self._sockets:
                try:
                    sock.close()
                except OSError:
                    pass

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.server)
            with self._lock:
                self._sockets += [client, upstream]
            link = _Link(self, client, upstream)
            threading.Thread(target=link.client_to_server, daemon=True).start()
            threading.Thread(target=link.server_to_client, daemon=True).start()


class _Link:
    """One proxied connection: two threads, one per direction."""

    def __init__(self, proxy: BinlogProxy, client: socket.socket, upstream: socket.socket):
        self.proxy = proxy
        self.client = client
        self.upstream = upstream
        self.dumping = threading.Event()
        self.handshake = True
        self.seq_out = 1  # the server's packets after the dump command, numbered anew

    def _close(self) -> None:
        for sock in (self.client, self.upstream):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def client_to_server(self) -> None:
        self._pump(self.client, self._from_client)

    def server_to_client(self) -> None:
        self._pump(self.upstream, self._from_server)

    def _pump(self, sock: socket.socket, handle: Callable[[int, bytes], None]) -> None:
        try:
            for seq, payload in _Packets(sock):
                handle(seq, payload)
        except OSError:
            pass
        self._close()

    def _from_client(self, seq: int, payload: bytes) -> None:
        if seq == 0 and payload[:1] and payload[0] in (COM_BINLOG_DUMP, COM_BINLOG_DUMP_GTID):
            self.proxy.dumps += 1
            self.dumping.set()  # before the server can answer it
        self.upstream.sendall(_frame(seq, payload))

    def _from_server(self, seq: int, payload: bytes) -> None:
        if self.handshake:  # the first packet: no TLS, so the stream stays readable
            payload, self.handshake = _without_ssl(payload), False
        if not self.dumping.is_set():
            self.client.sendall(_frame(seq, payload))
            return
        if payload[:1] == b"\x00" and len(payload) > HEADER.size:
            packets = [b"\x00" + event for event in self._rewritten(payload[1:])]
        else:  # EOF, error
            packets = [payload]
        out = b"".join(_frame((self.seq_out + i) % 256, packet) for i, packet in enumerate(packets))
        self.seq_out += len(packets)
        if out:
            self.client.sendall(out)

    def _rewritten(self, event: bytes) -> list[bytes]:
        checksum = 4 if self.proxy.checksum else 0
        plain = event[:len(event) - checksum]
        out = []
        for new in self.proxy.rewrite(plain):
            new = new[:9] + struct.pack("<I", len(new) + checksum) + new[13:]  # the size counts the checksum
            out.append(new + (struct.pack("<I", zlib.crc32(new)) if checksum else b""))
        return out


def _frame(seq: int, payload: bytes) -> bytes:
    """``payload`` as MySQL packets (split at 16 MiB - 1, as the protocol does)."""
    out = []
    while True:
        chunk, payload = payload[:_MAX_PACKET], payload[_MAX_PACKET:]
        out.append(struct.pack("<I", len(chunk))[:3] + bytes([seq % 256]) + chunk)
        seq += 1
        if len(chunk) < _MAX_PACKET:
            return b"".join(out)


class _Packets:
    """Whole MySQL packets (continuations joined) read from a socket: (sequence id of the first, payload)."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = b""

    def _read(self, n: int) -> bytes | None:
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                return None
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        while True:
            parts = []
            first_seq = None
            while True:
                header = self._read(4)
                if header is None:
                    return
                length, seq = header[0] | header[1] << 8 | header[2] << 16, header[3]
                first_seq = seq if first_seq is None else first_seq
                body = self._read(length)
                if body is None:
                    return
                parts.append(body)
                if length < _MAX_PACKET:
                    break
            yield first_seq, b"".join(parts)


def _without_ssl(handshake: bytes) -> bytes:
    """A protocol-10 handshake with the CLIENT_SSL capability cleared."""
    if not handshake or handshake[0] != 10:
        return handshake
    at = handshake.index(b"\x00", 1) + 1 + 4 + 8 + 1  # server version, connection id, scramble part 1, filler
    flags = struct.unpack_from("<H", handshake, at)[0] & ~_CLIENT_SSL
    return handshake[:at] + struct.pack("<H", flags) + handshake[at + 2:]


# ------------------------------------------------------------------------------------------------ rewriters


class TypeRewriter:
    """Gives every event of ``types`` whose end position lies in ``(after, until]`` the type ``new_type``."""

    def __init__(self, types: set[int], new_type: int, after: int, until: int):
        self.types, self.new_type, self.after, self.until = types, new_type, after, until
        self.rewritten: list[int] = []  # end positions of the events rewritten

    def __call__(self, event: bytes) -> list[bytes]:
        if event_type(event) in self.types and self.after < end_position(event) <= self.until:
            self.rewritten.append(end_position(event))
            return [with_type(event, self.new_type)]
        return [event]


def query_event(statement: bytes, template: bytes) -> bytes:
    """A query event (``statement`` in no default database) with ``template``'s timestamp, server id and flags."""
    timestamp, _type, server_id, _size, _end, flags = HEADER.unpack_from(template)
    post_header = struct.pack("<IIBHH", 1, 0, 0, 0, 0)  # thread id, exec time, schema length, error, status length
    body = post_header + b"\x00" + statement
    return HEADER.pack(timestamp, QUERY, server_id, HEADER.size + len(body), 0, flags) + body


def _packed(value: int) -> bytes:
    """A length-encoded integer."""
    if value < 251:
        return bytes([value])
    if value < 1 << 16:
        return b"\xfc" + struct.pack("<H", value)
    if value < 1 << 24:
        return b"\xfd" + struct.pack("<I", value)[:3]
    return b"\xfe" + struct.pack("<Q", value)


def payload_event(inner: list[bytes], template: bytes, end: int, size: int | None = None, *,
                  compression: int = 0, level: int = 3) -> bytes:
    """A TRANSACTION_PAYLOAD event holding ``inner`` (events without checksums), laid out as MySQL's
    Transaction_payload_event (header fields compression type, uncompressed size, payload size, end mark; then the
    zstd payload), ending at ``end``, with ``template``'s timestamp, server id and flags. ``size``: the event's
    size with its checksum, reached with a header field of a type MySQL's reader skips (None: as small as it
    comes)."""
    raw = b"".join(inner)
    data = pa.Codec("zstd", compression_level=level).compress(raw, asbytes=True) if compression == 0 else raw
    value = _packed(compression)
    fields = _packed(2) + _packed(len(value)) + value
    if compression != 255:
        value = _packed(len(raw))
        fields += _packed(3) + _packed(len(value)) + value
    value = _packed(len(data))
    fields += _packed(1) + _packed(len(value)) + value
    timestamp, _type, server_id, _size, _end, flags = HEADER.unpack_from(template)
    base = HEADER.size + len(fields) + 1 + len(data) + 4  # + end mark, checksum
    if size is not None and size != base:
        fields += _filler(size - base)
    body = fields + _packed(0) + data
    return HEADER.pack(timestamp, TRANSACTION_PAYLOAD, server_id, HEADER.size + len(body), end, flags) + body


def _filler(extra: int) -> bytes:
    """A header field of a type MySQL's reader skips (99) that takes exactly ``extra`` bytes (at least 2)."""
    for prefix, size, limit in ((b"", 1, 251), (b"\xfc", 3, 1 << 16), (b"\xfd", 4, 1 << 24), (b"\xfe", 9, 1 << 62)):
        length = extra - 1 - size
        if 0 <= length < limit and (prefix or length < 251):
            encoded = prefix + length.to_bytes(size - len(prefix), "little") if prefix else bytes([length])
            return bytes([99]) + encoded + b"\x00" * length
    raise ValueError(f"no header field takes {extra} bytes")


class PayloadWrapper:
    """Wraps each transaction whose commit ends in ``(after, until]`` into one TRANSACTION_PAYLOAD event, as MySQL 8
    writes it with binlog_transaction_compression=ON: the GTID event stays outside; inside, a ``BEGIN`` query event,
    the table maps and rows events (MariaDB's V1 rows events turned into MySQL's V2 layout; MariaDB's statement
    annotations left out) and the Xid / XA PREPARE event, without checksums, with end positions relative to the
    payload (MySQL's readers never use them). The payload event ends where the transaction ended and is padded to
    the transaction's size, so every position around it stays the server's.

    ``inner(events) -> events`` may change the inner events (a test of an unknown inner type); ``wrapped`` lists
    the (start, end) positions of each payload event."""

    def __init__(self, after: int, until: int, inner: Callable[[list[bytes]], list[bytes]] | None = None,
                 compression: int = 0):
        self.after, self.until = after, until
        self.inner = inner or (lambda events: events)
        self.compression = compression
        self.held: list[bytes] | None = None  # the events of the transaction being wrapped
        self.start = 0  # where it starts in the file (the end of its GTID event)
        self.wrapped: list[tuple[int, int]] = []

    def __call__(self, event: bytes) -> list[bytes]:
        kind, end = event_type(event), end_position(event)
        if self.held is None:
            standalone = kind == MARIADB_GTID and event[HEADER.size + 12] & 0x01  # DDL: not compressed by MySQL
            if kind == MARIADB_GTID and not standalone and self.after <= end < self.until:
                self.held, self.start = [], end
            return [event]
        self.held.append(event)
        if kind not in (XID, XA_PREPARE):
            return []
        held, self.held = self.held, None
        if end > self.until:
            return held
        return [self._payload(held, end)]

    def _payload(self, events: list[bytes], end: int) -> bytes:
        inner = [query_event(b"BEGIN", events[0])]
        for event in events:
            kind = event_type(event)
            if kind == MARIADB_ANNOTATE_ROWS:
                continue
            if kind in ROWS_V1_TO_V2:  # V2: an extra-data block (its 2-byte length only) after the post-header
                event = with_type(event[:HEADER.size + 8] + b"\x02\x00" + event[HEADER.size + 8:],
                                  ROWS_V1_TO_V2[kind])
            inner.append(event)
        inner = self.inner(inner)
        relative, position = [], 0
        for event in inner:
            position += len(event)
            relative.append(with_end_position(sized(event), position))
        for level in range(3, 20):  # a size the padding can reach (it needs at least two bytes)
            try:
                payload = payload_event(relative, events[0], end, end - self.start, compression=self.compression,
                                        level=level)
                break
            except ValueError:
                continue
        else:
            raise ValueError(f"the transaction ending at {end} does not compress enough to keep its positions")
        self.wrapped.append((self.start, end))
        return payload
