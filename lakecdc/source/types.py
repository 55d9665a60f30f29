"""MySQL column type → Arrow type, and value normalisation so a row reads the same from the snapshot and the binlog.

Snapshot values come from PyMySQL (text protocol, session ``time_zone='+00:00'``); binlog values come from
python-mysql-replication (row images). They disagree for several types (see the reference study); every fix-up
below makes both sides produce the value the snapshot would give, then builds Arrow arrays of the mapped type:

=======================================  ===============================  ========================================
MySQL                                    Arrow (Paimon)                   normalisation
=======================================  ===============================  ========================================
TINYINT(1) (treat_tinyint1_as_boolean)   bool (BOOLEAN)                   value != 0
TINYINT                                  int8 (TINYINT)
TINYINT UNSIGNED, SMALLINT               int16 (SMALLINT)
SMALLINT UNSIGNED, MEDIUMINT, INT, YEAR  int32 (INT)                      binlog YEAR 0000 comes as 1900 → 0
INT UNSIGNED, BIGINT                     int64 (BIGINT)
BIGINT UNSIGNED                          decimal128(20, 0)                up to 18446744073709551615
FLOAT                                    float32 (FLOAT)                  (binlog has the exact float32)
FLOAT(M,D)                               float64 (DOUBLE)                 the float32 rounded to D decimals
DOUBLE, REAL                             float64 (DOUBLE)
DECIMAL(p,s) p ≤ 38                      decimal128(p, s)
DECIMAL(p,s) p > 38                      string (STRING)                  plain notation, scale kept
DATE                                     date32 (DATE)                    zero date → NULL (NOT NULL: 1970-01-01)
TIME(p)                                  time32 s / ms, time64 us         microseconds; fixes the binlog sign bug
                                         (TIME(0) / (3) / (6))            of negative fractional TIME; negative
                                                                          and > 24h values stay signed durations
DATETIME(p)                              timestamp s / ms / us            zero datetime as DATE
                                         (TIMESTAMP(0) / (3) / (6))
TIMESTAMP(p)                             timestamp(unit, tz='UTC')        UTC instants whatever the server zone;
                                         (TIMESTAMP_LTZ(0) / (3) / (6))   zero → 1970-01-01 UTC
CHAR, VARCHAR, *TEXT, JSON, ENUM         string (STRING)                  any character set (see charsets.py);
                                                                          MySQL binary JSON → JSON text
SET                                      list<string> (ARRAY<STRING>)     members in definition order; empty: []
BINARY(n)                                fixed_size_binary(n)             right-padded with 0x00 to n bytes
                                         (BINARY(n))
VARBINARY, *BLOB                         binary (BYTES)                   binlog '' → b''
BIT(1)                                   bool (BOOLEAN)
BIT(n)                                   fixed_size_binary((n+7)//8)      big-endian bytes
                                         (BINARY((n+7)/8))
GEOMETRY, POINT, ... GEOMETRYCOLLECTION  string (STRING)                  Flink CDC's JSON text
=======================================  ===============================  ========================================

NOT NULL columns give non-nullable fields. Any other type (MariaDB UUID/INET4/INET6, VECTOR …) raises
:class:`SourceError` naming the column.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import functools
import json
import re
import struct
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import pyarrow as pa

from lakecdc.errors import SourceError
from lakecdc.model import SourceColumn, TableId
from lakecdc.source.charsets import check_column_charset
from lakecdc.source.options import MySqlSourceOptions

_EPOCH_DATE = _dt.date(1970, 1, 1)
_EPOCH_DATETIME = _dt.datetime(1970, 1, 1)
_US_PER_DAY = 86_400_000_000

# python-mysql-replication's explanations for a None value (row["none_sources"])
_NONE_EMPTY_SET = "empty set"
_NONE_ZERO_DATE = ("out of date range", "out of datetime range", "out of datetime2 range")

_INT_TYPES = {
    # data_type: (signed arrow type, unsigned arrow type)
    "tinyint": (pa.int8(), pa.int16()),
    "smallint": (pa.int16(), pa.int32()),
    "mediumint": (pa.int32(), pa.int32()),
    "int": (pa.int32(), pa.int64()),
    "integer": (pa.int32(), pa.int64()),
    "bigint": (pa.int64(), pa.decimal128(20, 0)),
}
_STRING_TYPES = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "json", "enum", "long",
                 "long varchar"}
_BINARY_TYPES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
GEOMETRY_TYPES = {"geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
                  "geometrycollection", "geomcollection"}
_PAREN = re.compile(r"\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)")


def length_and_scale(column_type: str) -> tuple[int | None, int | None]:
    """The numbers in a column type's parentheses: ``decimal(10,2)`` -> (10, 2), ``datetime(3)`` -> (3, None)."""
    match = _PAREN.search(column_type)
    if not match:
        return None, None
    return int(match.group(1)), (int(match.group(2)) if match.group(2) is not None else None)


def parse_enum_values(column_type: str) -> list[str]:
    """The members of ``set('a','b')`` / ``enum('a','b')`` as written in information_schema COLUMN_TYPE."""
    start, end = column_type.find("("), column_type.rfind(")")
    body = column_type[start + 1:end]
    values, i = [], 0
    while i < len(body):
        if body[i] != "'":
            i += 1
            continue
        i += 1
        buf = []
        while i < len(body):
            ch = body[i]
            if ch == "'" and i + 1 < len(body) and body[i + 1] == "'":
                buf.append("'")
                i += 2
            elif ch == "\\" and i + 1 < len(body):
                buf.append(body[i + 1])
                i += 2
            elif ch == "'":
                i += 1
                break
            else:
                buf.append(ch)
                i += 1
        values.append("".join(buf))
    return values


@dataclass(frozen=True)
class ColumnTypeInfo:
    """What information_schema.COLUMNS says about one column (the inputs of the mapping)."""

    name: str
    data_type: str  # DATA_TYPE, e.g. "decimal"
    column_type: str  # COLUMN_TYPE, e.g. "decimal(10,2) unsigned"
    datetime_precision: int | None = None


def arrow_type_for(info: ColumnTypeInfo, *, treat_tinyint1_as_boolean: bool = True) -> pa.DataType:
    """The Arrow type a MySQL column maps to; SourceError for types the pipeline does not support."""
    data_type = info.data_type.lower().strip()
    column_type = info.column_type.lower().strip()
    unsigned = "unsigned" in column_type or "zerofill" in column_type
    length, scale = length_and_scale(column_type)

    if data_type in ("bool", "boolean"):
        return pa.bool_()
    if data_type == "tinyint" and treat_tinyint1_as_boolean and length == 1 and not unsigned:
        return pa.bool_()
    if data_type in _INT_TYPES:
        signed_type, unsigned_type = _INT_TYPES[data_type]
        return unsigned_type if unsigned else signed_type
    if data_type == "year":
        return pa.int32()
    if data_type == "float":
        # Flink CDC: FLOAT with an explicit (M,D) becomes DOUBLE
        return pa.float64() if length is not None else pa.float32()
    if data_type in ("double", "real", "double precision"):
        return pa.float64()
    if data_type in ("decimal", "numeric", "fixed"):
        precision = length if length is not None else 10
        scale = scale if scale is not None else 0
        if precision <= 38:
            return pa.decimal128(precision, scale)
        return pa.string()
    if data_type == "date":
        return pa.date32()
    if data_type in ("time", "datetime", "timestamp"):
        precision = info.datetime_precision if info.datetime_precision is not None else (length or 0)
        unit = "s" if precision == 0 else "ms" if precision <= 3 else "us"
        if data_type == "time":
            return pa.time64("us") if unit == "us" else pa.time32(unit)
        return pa.timestamp(unit, tz="UTC") if data_type == "timestamp" else pa.timestamp(unit)
    if data_type in _STRING_TYPES or data_type in GEOMETRY_TYPES:
        return pa.string()
    if data_type == "set":
        return pa.list_(pa.string())
    if data_type == "binary":
        return pa.binary(length or 1)
    if data_type in _BINARY_TYPES:
        return pa.binary()
    if data_type == "bit":
        return pa.bool_() if (length or 1) == 1 else pa.binary(((length or 1) + 7) // 8)
    raise SourceError(
        f"column '{info.name}' has type {info.column_type!r}, which the MySQL source does not support "
        "(exclude the table, or change the column to a supported type)"
    )


# --------------------------------------------------------------------------------------------------- value fix-ups


def _to_bool(v: Any) -> bool:
    if isinstance(v, (bytes, bytearray)):
        return int.from_bytes(v, "big") != 0
    if isinstance(v, str):  # binlog BIT(1): '1' / '0'
        return int(v, 2) != 0 if v else False
    return v != 0


def _timedelta_us(v: Any) -> Any:
    if isinstance(v, _dt.timedelta):
        return (v.days * 86400 + v.seconds) * 1_000_000 + v.microseconds
    if isinstance(v, _dt.time):
        return ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond
    return v


def _binlog_time_us(v: Any) -> Any:
    """python-mysql-replication 1.0.x decodes a negative TIME with a fraction as -(whole seconds + (1 - fraction)):
    -00:00:01.25 comes out as -00:00:01.75. Undo that."""
    us = _timedelta_us(v)
    if isinstance(us, int) and us < 0:
        magnitude = -us
        fraction = magnitude % 1_000_000
        if fraction:
            magnitude = magnitude - fraction + (1_000_000 - fraction)
        return -magnitude
    return us


def _wkb_number(x: float) -> Any:
    return int(x) if x.is_integer() and abs(x) < 1e15 else x


def _wkb_geometry(data: bytes, offset: int) -> tuple[dict, int]:
    """One WKB geometry at ``offset`` as a GeoJSON dict (type first), and the offset after it."""
    order = "<" if data[offset] == 1 else ">"
    (kind,) = struct.unpack_from(order + "I", data, offset + 1)
    offset += 5
    kind %= 1000  # ISO Z/M variants never occur in MySQL (2D only)

    def point(at: int) -> tuple[list, int]:
        x, y = struct.unpack_from(order + "dd", data, at)
        return [_wkb_number(x), _wkb_number(y)], at + 16

    def counted(read_item):
        """A reader of WKB's count-prefixed lists of items."""
        def read(at: int) -> tuple[list, int]:
            (n,) = struct.unpack_from(order + "I", data, at)
            at += 4
            out = []
            for _ in range(n):
                item, at = read_item(at)
                out.append(item)
            return out, at
        return read

    points = counted(point)
    rings = counted(points)

    names = {1: "Point", 2: "LineString", 3: "Polygon", 4: "MultiPoint", 5: "MultiLineString", 6: "MultiPolygon",
             7: "GeometryCollection"}
    if kind not in names:
        raise ValueError(f"unknown WKB geometry type {kind}")
    if kind in (1, 2, 3):
        coordinates, offset = (point, points, rings)[kind - 1](offset)
        return {"type": names[kind], "coordinates": coordinates}, offset
    (n,) = struct.unpack_from(order + "I", data, offset)
    offset += 4
    parts = []
    for _ in range(n):
        part, offset = _wkb_geometry(data, offset)
        parts.append(part)
    if kind == 7:
        return {"type": names[kind], "geometries": parts}, offset
    return {"type": names[kind], "coordinates": [p["coordinates"] for p in parts]}, offset


def geometry_json(value: Any, column: str = "") -> Any:
    """A MySQL geometry value (4-byte little-endian SRID + WKB, the same bytes from the snapshot and the binlog)
    as Flink CDC's JSON text: ``{"coordinates":[1,2],"type":"Point","srid":0}`` (``geometries`` instead of
    ``coordinates`` for a collection). Per-value Python: geometry columns are rare and values small. Malformed
    bytes raise SourceError naming ``column``."""
    data = _to_bytes(value)
    where = f"column '{column}': " if column else ""
    if not isinstance(data, bytes) or len(data) < 9:
        raise SourceError(f"{where}not a MySQL geometry value: {value!r}")
    (srid,) = struct.unpack_from("<I", data, 0)
    try:
        shape, _ = _wkb_geometry(data, 4)
    except (IndexError, struct.error, ValueError) as error:
        raise SourceError(f"{where}malformed geometry value (SRID + WKB, {len(data)} bytes: "
                          f"{data[:32].hex()}{'...' if len(data) > 32 else ''}): {error}; the value cannot be "
                          "converted to Flink CDC's GeoJSON text") from None
    body = {"geometries": shape["geometries"]} if "geometries" in shape else {"coordinates": shape["coordinates"]}
    # key order as Flink CDC's Java HashMap prints it
    return json.dumps({**body, "type": shape["type"], "srid": srid}, separators=(",", ":"))


def _decimal_text(v: Any) -> Any:
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    return str(v)


def _json_default(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, (_dt.date, _dt.datetime, _dt.time)):
        return v.isoformat()
    if isinstance(v, _dt.timedelta):
        return str(v)
    raise TypeError(type(v))


def _json_keys(v: Any) -> Any:
    if isinstance(v, dict):
        return {(k.decode("utf-8", "replace") if isinstance(k, bytes) else k): _json_keys(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_json_keys(x) for x in v]
    return v


def to_text(v: Any) -> Any:
    """A decoded value as the codec renders it as text (bytes as UTF-8 with replacement characters)."""
    if isinstance(v, str):
        return v
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "replace")
    if isinstance(v, (dict, list)):  # MySQL binary JSON decoded by the binlog library
        return json.dumps(_json_keys(v), ensure_ascii=False, default=_json_default)
    if isinstance(v, (set, frozenset)):
        return ",".join(sorted(v))
    return str(v)


def _to_bytes(v: Any) -> Any:
    if isinstance(v, bytes):
        return v
    if isinstance(v, str):  # the binlog library returns '' for an empty binary value
        return v.encode("latin-1", "replace") if v else b""
    if isinstance(v, bytearray):
        return bytes(v)
    return v


class ColumnCodec:
    """Turns one column's snapshot or binlog values into an Arrow array of the column's type."""

    def __init__(self, info: ColumnTypeInfo, arrow_type: pa.DataType, nullable: bool):
        self.name = info.name
        self.arrow_type = arrow_type
        self.nullable = nullable
        data_type = info.data_type.lower()
        column_type = info.column_type.lower()
        length, _ = length_and_scale(column_type)
        # zero dates/datetimes ('0000-00-00'): NULL when the column allows it, else the epoch (Debezium's rule)
        self.zero_value: Any = None
        # value fix-ups, applied to non-None values only; None = identity
        self.snapshot_fix: Callable[[Any], Any] | None = None
        self.binlog_fix: Callable[[Any], Any] | None = None
        self._empty_set = False
        self._arrow_via: pa.DataType | None = None  # build as this type, then cast/view to arrow_type
        self._time_divisor = 0  # TIME columns: microseconds per unit of the Arrow type

        t = arrow_type
        if pa.types.is_boolean(t):
            self.snapshot_fix = self.binlog_fix = _to_bool
        elif data_type == "year":
            self.binlog_fix = lambda v: 0 if v == 1900 else v  # YEAR 0000 decodes as 1900 (no such YEAR)
        elif data_type == "bigint" and pa.types.is_decimal(t):
            self.snapshot_fix = self.binlog_fix = decimal.Decimal
        elif data_type in ("decimal", "numeric", "fixed") and pa.types.is_string(t):
            self.snapshot_fix = self.binlog_fix = _decimal_text
        elif data_type == "date":
            self.zero_value = None if nullable else _EPOCH_DATE
            self.snapshot_fix = self._zero_date_fix
        elif data_type == "datetime":
            self.zero_value = None if nullable else _EPOCH_DATETIME
            self.snapshot_fix = self._zero_date_fix
        elif data_type == "timestamp":
            self.zero_value = _EPOCH_DATETIME  # binlog decodes zero TIMESTAMP as the epoch, also when nullable
            self.snapshot_fix = self._zero_date_fix
        elif data_type == "time":
            # values are microseconds (signed: MySQL TIME is a duration from -838:59:59 to 838:59:59)
            self.snapshot_fix = _timedelta_us
            self.binlog_fix = _binlog_time_us
            self._time_divisor = {"s": 1_000_000, "ms": 1_000, "us": 1}[t.unit]
        elif data_type == "float" and pa.types.is_float64(t):
            _, decimals = length_and_scale(column_type)
            # FLOAT(M,D) is stored as a float32; MySQL shows (and the snapshot reads) it rounded to D decimals
            self.binlog_fix = lambda v, d=decimals or 0: round(float(v), d)
        elif data_type == "set":
            members = parse_enum_values(info.column_type)
            order = {m: i for i, m in enumerate(members)}

            def set_members(v: Any, order=order) -> Any:
                if isinstance(v, (set, frozenset, list, tuple)):
                    return sorted(v, key=lambda m: order.get(m, len(order)))
                text = to_text(v)
                return text.split(",") if text else []

            self.snapshot_fix = self.binlog_fix = set_members
            self._empty_set = True
        elif data_type in GEOMETRY_TYPES:
            self.snapshot_fix = self.binlog_fix = functools.partial(geometry_json, column=info.name)
        elif pa.types.is_string(t):
            self.binlog_fix = self._text_fix
        elif data_type == "binary":
            size = length or 1

            def pad(v: Any, size=size) -> Any:
                v = _to_bytes(v)
                return v + b"\x00" * (size - len(v)) if isinstance(v, bytes) and len(v) < size else v

            self.snapshot_fix = self.binlog_fix = pad
        elif data_type == "bit":
            nbytes = ((length or 1) + 7) // 8

            def bits(v: Any, nbytes=nbytes) -> Any:
                if isinstance(v, str):  # binlog: '1010101010'
                    return int(v, 2).to_bytes(nbytes, "big") if v else b"\x00" * nbytes
                if isinstance(v, int):
                    return v.to_bytes(nbytes, "big")
                v = _to_bytes(v)
                return v.rjust(nbytes, b"\x00") if len(v) < nbytes else v

            self.snapshot_fix = self.binlog_fix = bits
        elif pa.types.is_binary(t):
            self.binlog_fix = _to_bytes

    @staticmethod
    def _text_fix(v: Any) -> Any:
        return v if type(v) is str else to_text(v)

    def _zero_date_fix(self, v: Any) -> Any:
        # PyMySQL returns the text '0000-00-00 ...' for dates it cannot represent
        return self.zero_value if isinstance(v, (str, bytes)) else v

    # ---------------------------------------------------------------------------------------------------------

    def binlog_value(self, v: Any, none_source: str | None) -> Any:
        """Normalise one binlog value (``none_source`` = the library's reason for a None, if any)."""
        if v is None:
            if none_source is None or none_source == "null":
                return None
            if self._empty_set and none_source == _NONE_EMPTY_SET:
                return []
            if none_source in _NONE_ZERO_DATE:
                return self.zero_value
            return None
        fix = self.binlog_fix
        return fix(v) if fix is not None else v

    def snapshot_values(self, values: Sequence[Any]) -> list[Any] | Sequence[Any]:
        fix = self.snapshot_fix
        if fix is None:
            return values
        return [None if v is None else fix(v) for v in values]

    def to_array(self, values: Sequence[Any]) -> pa.Array:
        """An Arrow array of this column's type from already normalised values."""
        if self._time_divisor:
            return self._time_array(values)
        try:
            if self._arrow_via is not None:
                arr = pa.array(values, type=self._arrow_via)
                return arr.view(self.arrow_type)
            return pa.array(values, type=self.arrow_type)
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            sample = next((v for v in values if v is not None), None)
            raise SourceError(
                f"column '{self.name}': cannot convert values like {sample!r} to Arrow {self.arrow_type}: {exc}"
            ) from exc


    def _time_array(self, values: Sequence[Any]) -> pa.Array:
        """TIME values (signed microseconds) as the column's time32/time64 array. Paimon stores TIME as 32-bit
        milliseconds, so a duration beyond ±596:31:23.647 cannot be stored: refused, naming the column."""
        present = [v for v in values if v is not None]
        if present and (min(present) <= -_TIME_LIMIT_US or max(present) >= _TIME_LIMIT_US):
            bad = next(v for v in present if abs(v) >= _TIME_LIMIT_US)
            raise SourceError(
                f"column '{self.name}': TIME value {_time_text(bad)} is outside ±596:31:23.647, the range of "
                "Paimon's TIME type (32-bit milliseconds); exclude the table or change the column (for example "
                "to a number of seconds)")
        divisor = self._time_divisor
        ints = values if divisor == 1 else [None if v is None else v // divisor for v in values]
        via = pa.int64() if pa.types.is_time64(self.arrow_type) else pa.int32()
        return pa.array(ints, type=via).view(self.arrow_type)


_TIME_LIMIT_US = 2**31 * 1000  # Paimon TIME: int32 milliseconds


def _time_text(us: int) -> str:
    sign, us = ("-" if us < 0 else ""), abs(us)
    seconds, micros = divmod(us, 1_000_000)
    return f"{sign}{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{micros:06d}"


def column_data_type(column_type: str) -> str:
    """DATA_TYPE from COLUMN_TYPE: 'decimal(10,2) unsigned' → 'decimal'."""
    return column_type.strip().lower().split("(")[0].split()[0]


def codec_for(name: str, column_type: str, arrow_type: pa.DataType, nullable: bool) -> ColumnCodec:
    """The codec of a described column (a :class:`lakecdc.model.SourceColumn`'s fields)."""
    info = ColumnTypeInfo(name, column_data_type(column_type), column_type)
    return ColumnCodec(info, arrow_type, nullable)


def table_codecs(table) -> list[ColumnCodec]:
    """Codecs for every column of a :class:`lakecdc.model.SourceTable`, in column order."""
    return [codec_for(c.name, c.column_type, c.arrow_type, c.nullable) for c in table.columns]


def source_column(table_id: TableId, options: MySqlSourceOptions, *, name: str, data_type: str, column_type: str,
                  datetime_precision: int | None = None, nullable: bool = True, comment: str = "",
                  charset: str = "", collation: str = "", default: str | None = None) -> SourceColumn:
    """One column from its MySQL description (information_schema, a DDL statement or a stored schema history)."""
    info = ColumnTypeInfo(name, data_type, column_type, datetime_precision)
    try:
        arrow_type = arrow_type_for(info, treat_tinyint1_as_boolean=options.treat_tinyint1_as_boolean)
        check_column_charset(info.name, info.data_type.lower(), charset, info.column_type)
    except SourceError as exc:
        raise SourceError(f"MySQL table {table_id}: {exc}") from None
    return SourceColumn(name=name, column_type=column_type, arrow_type=arrow_type, nullable=nullable,
                        comment=comment if options.include_comments else "", charset=charset, collation=collation,
                        default=default)
