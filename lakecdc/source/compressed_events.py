"""MariaDB's compressed binlog events, turned back into the plain events they compress, on the wire.

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
form lakecdc does not know (another algorithm, a length that does not match) is an error, never a skip.

MySQL 8's binlog transaction compression (TRANSACTION_PAYLOAD_EVENT, zstd) is not decoded: lakecdc.source.binlog
stops the read at such an event with an error that names ``binlog_transaction_compression``.
"""

from __future__ import annotations

import struct
import zlib

from pymysql.protocol import MysqlPacket

from lakecdc.errors import SourceError

QUERY_EVENT = 0x02
MARIADB_QUERY_COMPRESSED_EVENT = 0xA5
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

COM_BINLOG_DUMP, COM_BINLOG_DUMP_GTID = 0x12, 0x1E


class UncompressedPacket(MysqlPacket):
    """The rewritten packet of a compressed event; ``stored_event_size`` is the event's size in the binlog file
    (its start there is its end position minus this size, not minus the size of the rewritten event)."""

    __slots__ = ("stored_event_size",)


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


def _packed_integer(data: bytes, offset: int) -> tuple[int, int]:
    """A length-encoded integer at ``offset``: (value, offset after it)."""
    first = data[offset]
    if first < 0xFB:
        return first, offset + 1
    size = {0xFC: 2, 0xFD: 3, 0xFE: 8}.get(first)
    if size is None:
        raise SourceError(f"invalid length-encoded integer 0x{first:02x} in a compressed rows event")
    return int.from_bytes(data[offset + 1:offset + 1 + size], "little"), offset + 1 + size
