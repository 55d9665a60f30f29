"""Compressed binlog events (MariaDB's compressed events, MySQL 8's compressed transactions), turned back into the
plain events they hold, on the wire.

With ``log_bin_compress=ON`` MariaDB (10.2.3 and later) writes each query event and rows event of at least
``log_bin_compress_min_len`` bytes in a compressed form of its own event type (QUERY_COMPRESSED_EVENT and the six
``*_ROWS_COMPRESSED_EVENT`` types) and sends it to replicas as it is. python-mysql-replication knows none of these
types: it would hand them over as NotImplementedEvent, rows and DDL unread. The binlog dump connection therefore
rewrites every such packet, before the library parses it, into the plain event it compresses: the same header
(timestamp, server id, end position, flags) with the plain event type and the size of the plain event, the same
post-header and, for rows events, the same column bitmaps, then the uncompressed rows or statement, then a checksum
of the new bytes when the event had one. Everything downstream (the library's parsing, lakecdc's columnar decoder,
positions, which come from the end position) reads it as if the server had logged it uncompressed.

The compressed part (MariaDB's ``binlog_buf_compress``): one byte ``0x80 | n`` (bit 7 set; bits 4-6 the algorithm,
0 = zlib, the only one MariaDB writes), ``n`` bytes of the uncompressed length (big-endian), then a zlib stream. A
form lakecdc does not know (another algorithm, a length that does not match) is an error, never a skip (see below).

MySQL 8's binlog transaction compression (``binlog_transaction_compression=ON``, 8.0.20 and later) writes each
transaction after its GTID event as one TRANSACTION_PAYLOAD_EVENT (type 40), sent to replicas as it is. Its layout
(MySQL's libs/mysql/binlog/event, ``Transaction_payload_event`` and its binary codec): the common header, no
post-header, then a header of TLV fields, each a length-encoded type, a length-encoded length and the value (itself
length-encoded): compression type (2; 0 = zstd, 255 = none), uncompressed size (3), payload size (1), in any order,
fields of unknown types skipped by their length, up to an end mark (type 0); then the payload, then the event's
checksum (CRC32 of everything before it) when the server writes checksums. The payload is the transaction's
ordinary events back to back (BEGIN query, table maps, rows events, Xid or XA PREPARE ...), each with a full
header but never a checksum, whatever binlog_checksum says; their end positions are not file positions (MySQL's
own readers overwrite them with the payload event's). The dump connection hands the library these inner events one
packet at a time (:func:`payload_packets`), decompressed as they are read (memory holds one inner event, not the
transaction): each with the payload event's end position (so the transaction's commit ends where the payload ends
in the file, and a checkpoint there resumes after it), its size in the file (so its start is the payload event's
start, a real position to read again from), and a checksum of its own when the stream has checksums. The payload
event's checksum is verified before anything of it is read (zstd frames need not carry one of their own).

A compressed event lakecdc cannot decode (another compression type, corrupt data, sizes that do not add up) is never
skipped: the packet goes on as it is, marked with the reason (:class:`UndecodedPacket`), and the binlog reader
stops at it (lakecdc.source.event_types).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
from pymysql.protocol import MysqlPacket

from lakecdc.errors import SourceError
from lakecdc.source.event_types import MARIADB_QUERY_COMPRESSED_EVENT, QUERY_EVENT, TRANSACTION_PAYLOAD_EVENT

# compressed rows event type -> the plain rows event type it compresses (V1: no extra data; the others: V2 layout)
MARIADB_COMPRESSED_ROWS_EVENTS = {0xA6: 0x17, 0xA7: 0x18, 0xA8: 0x19, 0xA9: 0x1E, 0xAA: 0x1F, 0xAB: 0x20}
_UPDATE_TYPES = {0xA7, 0xAA}  # rows events with a second column bitmap (the after image's)
_V2_TYPES = {0xA9, 0xAA, 0xAB}

# binlog event header (after the OK byte of the dump protocol): timestamp, type, server id, size, end position, flags
_HEADER = struct.Struct("<IBIIIH")
_HEADER_START = 1  # the OK byte
_HEADER_END = _HEADER_START + _HEADER.size
_QUERY_POST_HEADER = 13  # thread id (4), execution time (4), schema length (1), error code (2), status length (2)
_ROWS_POST_HEADER = 8  # table id (6), flags (2); MariaDB always writes 6-byte table ids in these event types
_CHECKSUM_SIZE = 4
_UINT32 = struct.Struct("<I")
_SIZE_AT, _END_AT = 9, 13  # where the header holds the event's size and its end position

# TRANSACTION_PAYLOAD's header fields (MySQL: Transaction_payload_event's "OTW" field types)
_PAYLOAD_END_MARK, _PAYLOAD_SIZE, _PAYLOAD_COMPRESSION, _PAYLOAD_UNCOMPRESSED_SIZE = 0, 1, 2, 3
_ZSTD, _NO_COMPRESSION = 0, 255

COM_BINLOG_DUMP, COM_BINLOG_DUMP_GTID = 0x12, 0x1E
# the event types the dump connection rewrites (the type byte of a dump packet is data[5]: OK byte, 4-byte time)
WIRE_REWRITTEN = frozenset({MARIADB_QUERY_COMPRESSED_EVENT, *MARIADB_COMPRESSED_ROWS_EVENTS, TRANSACTION_PAYLOAD_EVENT})
TYPE_AT = _HEADER_START + 4


class UncompressedPacket(MysqlPacket):
    """The rewritten packet of a compressed event (or of one event of a transaction payload);
    ``stored_event_size`` is the size in the binlog file of the event it comes from (its start there is its end
    position minus this size, not minus the size of the rewritten event)."""

    __slots__ = ("stored_event_size",)


class UndecodedPacket(MysqlPacket):
    """A compressed event's packet as it came, which could not be decoded: ``undecoded`` says why. The library
    reads it as an event type it does not know; the binlog reader stops at it (if it lies before its stop)."""

    __slots__ = ("undecoded",)


def is_compressed(event_type: int) -> bool:
    return event_type == MARIADB_QUERY_COMPRESSED_EVENT or event_type in MARIADB_COMPRESSED_ROWS_EVENTS


def uncompressed_packet(packet: MysqlPacket) -> MysqlPacket:
    """``packet`` itself unless it carries a MariaDB compressed event; else the packet of the plain event."""
    data = packet.get_all_data()
    if len(data) < _HEADER_END or data[0] != 0 or not is_compressed(data[_HEADER_START + 4]):
        return packet
    timestamp, event_type, server_id, size, end_position, flags = _HEADER.unpack_from(data, _HEADER_START)
    where = f"binlog event ending at position {end_position}"
    body = data[_HEADER_END:]
    if event_type == MARIADB_QUERY_COMPRESSED_EVENT:
        plain_type, prefix = QUERY_EVENT, _query_prefix_length(body, where)
    else:
        plain_type, prefix = MARIADB_COMPRESSED_ROWS_EVENTS[event_type], _rows_prefix_length(event_type, body, where)
    plain, trailer = decompress(body[prefix:], where)
    # what follows the zlib stream is the event's checksum (binlog_checksum=CRC32) or nothing (NONE)
    if len(trailer) not in (0, _CHECKSUM_SIZE):
        raise SourceError(f"{where}: {len(trailer)} unexpected bytes after its compressed data; re-snapshot the "
                          "tables")
    plain_body = body[:prefix] + plain
    header = _HEADER.pack(timestamp, plain_type, server_id, _HEADER.size + len(plain_body) + len(trailer),
                          end_position, flags)
    event = header + plain_body
    if trailer:
        event += struct.pack("<I", zlib.crc32(event))
    result = UncompressedPacket(data[:_HEADER_START] + event, None)
    result.stored_event_size = size
    return result


def decompress(part: bytes, where: str) -> tuple[bytes, bytes]:
    """The bytes of MariaDB's compressed record at the start of ``part`` (header byte, big-endian length, zlib
    stream), and the bytes after its zlib stream."""
    if not part or part[0] & 0x80 == 0:
        raise SourceError(f"{where}: a MariaDB compressed event without its compression header; lakecdc cannot "
                          "read it. Report this binlog; set log_bin_compress=OFF and re-snapshot the tables")
    algorithm, length_size = (part[0] >> 4) & 0x07, part[0] & 0x07
    if algorithm != 0 or not 1 <= length_size <= 4:
        raise SourceError(f"{where}: a MariaDB compressed event with compression algorithm {algorithm} (lakecdc "
                          "reads zlib, 0, the only one MariaDB writes); set log_bin_compress=OFF on the server and "
                          "re-snapshot the tables")
    expected = int.from_bytes(part[1:1 + length_size], "big")
    stream = zlib.decompressobj()
    try:
        plain = stream.decompress(part[1 + length_size:])
    except zlib.error as exc:
        raise SourceError(f"{where}: its compressed data is corrupt ({exc}); re-snapshot the tables") from None
    if not stream.eof or len(plain) != expected:
        raise SourceError(f"{where}: it uncompresses to {len(plain)} bytes where its header says {expected}; "
                          "re-snapshot the tables")
    return plain, stream.unused_data


def _query_prefix_length(body: bytes, where: str) -> int:
    """Bytes before a query event's statement: post-header, status variables, schema name and its NUL."""
    if len(body) < _QUERY_POST_HEADER:
        raise SourceError(f"{where}: truncated compressed query event")
    schema_length = body[8]
    status_length = struct.unpack_from("<H", body, 11)[0]
    return _QUERY_POST_HEADER + status_length + schema_length + 1


def _rows_prefix_length(event_type: int, body: bytes, where: str) -> int:
    """Bytes before a rows event's row images: post-header (and V2 extra data), column count, column bitmap(s)."""
    offset = _ROWS_POST_HEADER
    if event_type in _V2_TYPES:
        offset += struct.unpack_from("<H", body, offset)[0]  # the extra data's length counts its own two bytes
    if offset >= len(body):
        raise SourceError(f"{where}: truncated compressed rows event")
    columns, offset = _packed_integer(body, offset)
    bitmap = (columns + 7) // 8
    offset += bitmap * (2 if event_type in _UPDATE_TYPES else 1)
    if offset >= len(body):
        raise SourceError(f"{where}: truncated compressed rows event")
    return offset


def _packed_integer(data: bytes | memoryview, offset: int) -> tuple[int, int]:
    """A length-encoded integer at ``offset``: (value, offset after it)."""
    first = data[offset]
    if first < 0xFB:
        return first, offset + 1
    size = {0xFC: 2, 0xFD: 3, 0xFE: 8}.get(first)
    if size is None:
        raise SourceError(f"invalid length-encoded integer 0x{first:02x} in a compressed event")
    return int.from_bytes(data[offset + 1:offset + 1 + size], "little"), offset + 1 + size


# ------------------------------------------------------------------------------ MySQL 8: TRANSACTION_PAYLOAD_EVENT


@dataclass(frozen=True)
class _Payload:
    compression: int
    data: bytes  # the (compressed) payload
    uncompressed_size: int
    checksum: bool  # the payload event ends with a checksum (verified)
    end_position: bytes  # the payload event's end position, as its header has it


def payload_events(event: bytes) -> Iterator[bytes]:
    """The events inside the TRANSACTION_PAYLOAD event ``event`` (its 19-byte header first, then its body and
    checksum, if any), each with the payload event's end position and without checksum; SourceError (the reason)
    for a payload lakecdc cannot decode, possibly after some of its events."""
    yield from _inner_events(_payload_parts(event))


def payload_packets(packet: MysqlPacket) -> Iterator[MysqlPacket]:
    """The packets of the events inside the TRANSACTION_PAYLOAD event of ``packet`` (see :func:`payload_events`),
    each with a checksum when the payload event has one; an :class:`UndecodedPacket` of the payload event when it
    cannot be decoded (after the inner events read until then)."""
    data = packet.get_all_data()
    event = data[_HEADER_START:]
    size = _UINT32.unpack_from(event, _SIZE_AT)[0]
    try:
        payload = _payload_parts(event)
        for inner in _inner_events(payload):
            if payload.checksum:
                inner = inner[:_SIZE_AT] + _UINT32.pack(len(inner) + _CHECKSUM_SIZE) + inner[_SIZE_AT + 4:]
                inner += _UINT32.pack(zlib.crc32(inner))
            result = UncompressedPacket(data[:_HEADER_START] + inner, None)
            result.stored_event_size = size
            yield result
    except SourceError as exc:
        yield undecoded_packet(packet, str(exc))


def undecoded_packet(packet: MysqlPacket, reason: str) -> UndecodedPacket:
    """``packet`` as it came, marked with why it could not be decoded."""
    result = UndecodedPacket(packet.get_all_data(), None)
    result.undecoded = reason
    return result


def _payload_parts(event: bytes) -> _Payload:
    """A TRANSACTION_PAYLOAD event's header fields and payload; its checksum, when it has one, verified."""
    if len(event) < _HEADER.size or _UINT32.unpack_from(event, _SIZE_AT)[0] != len(event):
        raise SourceError("its size does not match its header")
    body = memoryview(event)[_HEADER.size:]
    fields: dict[int, int] = {}
    offset = 0
    try:
        while True:
            field_type, offset = _packed_integer(body, offset)
            if field_type == _PAYLOAD_END_MARK:
                break
            length, offset = _packed_integer(body, offset)
            if field_type in (_PAYLOAD_SIZE, _PAYLOAD_COMPRESSION, _PAYLOAD_UNCOMPRESSED_SIZE):
                value, after = _packed_integer(body, offset)
                if after != offset + length:
                    raise SourceError(f"its header field {field_type} has length {length} but a value of "
                                      f"{after - offset} bytes")
                fields[field_type] = value
            offset += length  # a field of another type: skipped by its length, as MySQL does
    except IndexError:
        raise SourceError("its header is truncated") from None
    if _PAYLOAD_SIZE not in fields or _PAYLOAD_COMPRESSION not in fields:
        raise SourceError("its header lacks the payload size or the compression type")
    size = fields[_PAYLOAD_SIZE]
    trailer = len(body) - offset - size
    if trailer not in (0, _CHECKSUM_SIZE):
        raise SourceError(f"its payload size ({size}) does not fit the event's size ({len(event)} bytes)")
    if trailer and zlib.crc32(event[:len(event) - trailer]) != struct.unpack_from("<I", event, len(event) - trailer)[0]:
        raise SourceError("its checksum does not match its bytes (corrupt)")
    compression = fields[_PAYLOAD_COMPRESSION]
    if compression not in (_ZSTD, _NO_COMPRESSION):
        raise SourceError(f"its compression type is {compression} (lakecdc reads zstd, 0, and none, 255)")
    return _Payload(compression, bytes(body[offset:offset + size]), fields.get(_PAYLOAD_UNCOMPRESSED_SIZE) or size,
                    bool(trailer), bytes(event[_END_AT:_END_AT + 4]))


def _inner_events(payload: _Payload) -> Iterator[bytes]:
    """The payload's events, read one at a time (zstd decompressed as it goes), with the payload event's end
    position."""
    if payload.compression == _ZSTD:
        stream = pa.CompressedInputStream(pa.BufferReader(payload.data), "zstd")
    else:
        stream = pa.BufferReader(payload.data)
    total = 0
    try:
        while True:
            header = stream.read(_HEADER.size)
            if not header:
                break
            size = _UINT32.unpack_from(header, _SIZE_AT)[0] if len(header) == _HEADER.size else 0
            body = stream.read(size - _HEADER.size) if size >= _HEADER.size else b""
            if size < _HEADER.size or len(body) != size - _HEADER.size:
                raise SourceError(f"an event inside it is truncated (at byte {total} of the uncompressed payload)")
            total += size
            yield header[:_END_AT] + payload.end_position + header[_END_AT + 4:] + body
    except OSError as exc:  # pyarrow: corrupt or truncated zstd data
        raise SourceError(f"its compressed data is corrupt ({exc})") from None
    if total != payload.uncompressed_size:
        raise SourceError(f"it holds {total} bytes of events where its header says {payload.uncompressed_size}")
