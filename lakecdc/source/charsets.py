"""MySQL character sets as Python codecs, for the binlog decoder.

Snapshot rows arrive as utf8mb4 (the session character set: the server converts every column), but row events carry
each column's bytes in the column's own character set, and python-mysql-replication 1.0.x decodes them by passing the
MySQL charset name to ``bytes.decode``. That is wrong for several sets: ``utf16``/``utf32``/``ucs2`` are big-endian in
MySQL but Python's ``utf16``/``utf32`` codecs assume the machine's byte order (garbage or a UnicodeDecodeError), and
names Python does not know (``ucs2``, ``swe7``, ...) come back as undecoded bytes. :func:`install_binlog_decoding`
replaces the library's lookup with :func:`python_codec`, so a row event decodes exactly like the snapshot.
Character sets without a Python codec are refused when the table is described (:func:`check_column_charset`).
"""

from __future__ import annotations

import codecs

from pymysqlreplication.row_event import RowsEvent

from lakecdc.errors import SourceError

# MySQL/MariaDB character set name → Python codec (MySQL's "latin1" is Windows-1252, see _latin1_decode).
_CODECS = {
    "utf8mb4": "utf-8", "utf8mb3": "utf-8", "utf8": "utf-8", "ascii": "ascii",
    "latin1": "cp1252", "latin2": "iso8859_2", "latin5": "iso8859_9", "latin7": "iso8859_13",
    "utf16": "utf-16-be", "utf16le": "utf-16-le", "utf32": "utf-32-be", "ucs2": "utf-16-be",
    "cp1250": "cp1250", "cp1251": "cp1251", "cp1256": "cp1256", "cp1257": "cp1257",
    "cp850": "cp850", "cp852": "cp852", "cp866": "cp866", "cp932": "cp932",
    "koi8r": "koi8_r", "koi8u": "koi8_u", "greek": "iso8859_7", "hebrew": "iso8859_8",
    "big5": "big5", "gbk": "gbk", "gb2312": "gb2312", "gb18030": "gb18030",
    "sjis": "shift_jis", "ujis": "euc_jp", "eucjpms": "euc_jp", "euckr": "euc_kr",
    "tis620": "tis_620", "macroman": "mac_roman", "macce": "mac_latin2",
}
# ENUM/SET labels in the binlog's table map are decoded as UTF-8 by the library (labels it cannot decode become
# ''): these character sets encode ASCII exactly like UTF-8, so ASCII labels survive.
_ASCII_COMPATIBLE = set(_CODECS) - {"utf16", "utf16le", "utf32", "ucs2"}

_LATIN1 = "lakecdc_mysql_latin1"


def _latin1_decode(data, errors="strict"):
    # MySQL's latin1 is cp1252, except that the five bytes cp1252 leaves undefined (0x81, 0x8D, 0x8F, 0x90,
    # 0x9D) map to the C1 controls U+0081 ... U+009D
    text = bytes(data).decode("cp1252", "lakecdc-c1")
    return text, len(data)


def _c1_controls(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeDecodeError):  # registered for decoding only
        raise exc
    return "".join(chr(b) for b in exc.object[exc.start:exc.end]), exc.end


def _search(name: str):
    if name != _LATIN1:
        return None
    base = codecs.lookup("cp1252")
    return codecs.CodecInfo(base.encode, _latin1_decode, name=_LATIN1)


codecs.register_error("lakecdc-c1", _c1_controls)
codecs.register(_search)
_CODECS["latin1"] = _LATIN1
# python-mysql-replication names latin1 columns by their Python encoding, cp1252, when it asks for the codec
_CODECS["cp1252"] = _LATIN1


def python_codec(charset: str) -> str:
    """The Python codec of a MySQL character set name; the name itself when unknown (then ``bytes.decode`` raises
    LookupError and the library keeps the raw bytes, which :func:`check_column_charset` prevents up front)."""
    return _CODECS.get((charset or "").lower(), charset)


def decode(value: bytes, charset: str) -> str:
    return value.decode(python_codec(charset))


def check_column_charset(column: str, data_type: str, charset: str | None, column_type: str) -> None:
    """SourceError naming the column when its character set cannot be decoded identically from the binlog."""
    if not charset or charset.lower() == "binary":
        return
    name = charset.lower()
    if name not in _CODECS:
        raise SourceError(
            f"column '{column}' uses the character set {charset}, which the binlog decoder cannot read; convert the "
            f"column to utf8mb4 (ALTER TABLE ... MODIFY {column} ... CHARACTER SET utf8mb4) or exclude the table")
    if data_type in ("enum", "set"):
        labels_ascii = all(ord(ch) < 128 for ch in column_type)
        if name not in _ASCII_COMPATIBLE or not labels_ascii:
            raise SourceError(
                f"column '{column}' is {data_type.upper()} in character set {charset} with labels the binlog "
                "decoder reads as UTF-8 (non-ASCII labels, or a UTF-16/32 set), so binlog rows would differ from "
                "snapshot rows; convert the column to utf8mb4 or exclude the table")


def install_binlog_decoding() -> None:
    """Make python-mysql-replication decode string columns with :func:`python_codec` (idempotent)."""
    if getattr(RowsEvent.charset_to_encoding, "__lakecdc__", False):
        return

    def charset_to_encoding(name):
        return python_codec(name)

    charset_to_encoding.__lakecdc__ = True  # type: ignore[attr-defined]
    RowsEvent.charset_to_encoding = staticmethod(charset_to_encoding)
