"""Columnar decoding of binlog rows events: whole events straight into Arrow buffers, without a Python object per
row or value.

python-mysql-replication decodes row images in Python, value by value (about 40k row changes/s on one core), and
the codecs of :mod:`lakecdc.source.types` then normalise each value. This module reads the same bytes with a small
C extension (``_rowsdecoder.c``), which writes every value directly in the Arrow layout of its SourceTable column,
already normalised the way the codecs would (zero dates, unsigned integers, decimals, TIME sign fix, YEAR 0,
BINARY padding, BIT, ENUM/SET labels, UTF-8 and single-byte character sets). The result equals what
``_build_batch`` makes from ``ev.rows`` value for value.

API (used by :mod:`lakecdc.source.binlog`)::

    decoded = decode_rows_event(event, table, skip_rows=0)    # at the rows event, before ev.rows is touched
    data = build_change_batch(table, [(decoded, op_ts_ms), ...])  # a change batch: SourceTable.change_schema()

``decode_rows_event`` must be called while the event is current (it reads the table map of the stream as it is
then), after lakecdc.source.columns.bind_columns named and typed the event's columns from the SourceTable.
``build_change_batch`` lays the rows out like ``_append_changes`` + ``_build_batch``: ``+I`` for inserts, ``-D`` for
deletes, ``-U``/``+U`` pairs for updates, ``-D``/``+I`` for an update that changes the primary key.

Per-value Python remains only for rare column kinds, on their column alone: geometry (GeoJSON text), MySQL binary
JSON (MariaDB JSON is text and takes the fast path), text in multi-byte character sets other than UTF-8 (gbk,
utf16, ...), binary-charset values into a text column, and FLOAT(M,D) rounding.

Fallbacks, always to the exact library path (``ev.rows`` + codecs, the same rows and the same errors):
- the extension is not importable (a warning is logged once; ``scripts/setup.sh`` / ``pip install -e .`` build it);
- an event the decoder does not model: a column type or type combination outside the table above, a PARTIAL_UPDATE
  rows event, rows already decoded, or a value it refuses to guess (invalid UTF-8, an impossible date, an integer
  out of the column's range ...): for that event only.
"""

from __future__ import annotations

import codecs
import functools
import logging
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import pyarrow as pa
from pymysqlreplication.constants import BINLOG
from pymysqlreplication.packet import parse_json
from pymysqlreplication.row_event import DeleteRowsEvent, RowsEvent, UpdateRowsEvent, WriteRowsEvent

from lakecdc.model import DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE, SourceColumn, SourceTable
from lakecdc.source.charsets import install_binlog_decoding
from lakecdc.source.row_images import fill_after_from_before
from lakecdc.source.types import (GEOMETRY_TYPES, column_data_type, geometry_json, length_and_scale, parse_enum_values,
                                  table_codecs, to_text)

try:
    from lakecdc.source import _rowsdecoder as _ext
except ImportError as exc:  # pragma: no cover - exercised only on a machine without the build
    _ext = None  # type: ignore[assignment]  # columnar_available() tells the callers
    _IMPORT_ERROR: str | None = str(exc)
else:
    _IMPORT_ERROR = None

log = logging.getLogger(__name__)

install_binlog_decoding()  # the library path (and _library_codec) must decode character sets like lakecdc does

INSERT_EVENT, UPDATE_EVENT, DELETE_EVENT = "insert", "update", "delete"
_KIND_CODE = {INSERT_EVENT: 0, UPDATE_EVENT: 1, DELETE_EVENT: 2}
ROW_KIND_CODES = (INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE)  # op codes of the C decoder, in order

# binlog field types (MySQL's enum_field_types)
_TINY, _SHORT, _LONG, _FLOAT, _DOUBLE, _TIMESTAMP, _LONGLONG, _INT24 = 1, 2, 3, 4, 5, 7, 8, 9
_DATE, _TIME, _DATETIME, _YEAR, _VARCHAR, _BIT, _TIMESTAMP2, _DATETIME2, _TIME2 = 10, 11, 12, 13, 15, 16, 17, 18, 19
_JSON, _NEWDECIMAL, _ENUM, _SET, _BLOB, _STRING, _GEOMETRY = 245, 246, 247, 248, 252, 254, 255
_INT_SIZES = {_TINY: 1, _SHORT: 2, _INT24: 3, _LONG: 4, _LONGLONG: 8}
_OLD_FIXED = {_TIMESTAMP: 4, _DATETIME: 8, _TIME: 3}  # pre-5.6 temporal formats: only skipped, never converted

# conversion kinds and slot types of _rowsdecoder.c
(K_SKIP, K_INT, K_YEAR, K_FLOAT, K_DOUBLE, K_DECIMAL, K_DATE, K_DATETIME2, K_TIMESTAMP2, K_TIME2, K_UTF8, K_TABLE,
 K_RAW, K_PAD, K_ENUM, K_SET, K_BIT, K_NULL) = range(18)
(TG_BOOL, TG_I8, TG_I16, TG_I32, TG_I64, TG_DEC128, TG_F32, TG_F64, TG_DATE32, TG_TS, TG_TIME32, TG_TIME64, TG_VAR,
 TG_FSB, TG_LIST) = range(1, 16)

_INT_DATA_TYPES = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "bool", "boolean"}
_TEXT_DATA_TYPES = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "json", "long", "long varchar"}
_BLOB_DATA_TYPES = {"varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
# Python codecs that map each byte to at most one character, statelessly: decoded in C through a table
_SINGLE_BYTE_CODECS = {
    "ascii", "latin-1", "cp1252", "cp1250", "cp1251", "cp1256", "cp1257", "cp850", "cp852", "cp866", "iso8859-2",
    "iso8859-7", "iso8859-8", "iso8859-9", "iso8859-13", "koi8-r", "koi8-u", "tis-620", "mac-roman", "mac-latin2",
    "lakecdc_mysql_latin1",
}
_MICROS = {"s": 1_000_000, "ms": 1_000, "us": 1}
_UNIT_DIGITS = {"s": 0, "ms": 3, "us": 6}

_warned: set = set()

# Why an event took the library path (DecodedRows.fallback): the causes a run counts and reports, per table
FALLBACK_NOT_BUILT = "decoder not built"
FALLBACK_REQUESTED = "library path requested"
FALLBACK_DECODED = "rows already decoded"
FALLBACK_EVENT = "event"  # + ": <what>": an event shape the decoder does not model
FALLBACK_COLUMN = "column"  # + ": <column, binlog type, Arrow type>": a column type combination it does not model
FALLBACK_VALUE = "value"  # + ": <what>": a value it refuses to guess (invalid UTF-8, an impossible date, ...)
FALLBACK_LIBRARY = "library internals"  # + ": <error>": the library's event object is not as the decoder expects


class _Unsupported(Exception):
    """The event (or one of its columns) is outside what the C decoder models: use the library path."""


class _ColumnUnsupported(_Unsupported):
    """A column's binlog type and SourceTable type are not a combination the C decoder reproduces exactly."""


def columnar_available() -> bool:
    """True when the C extension is importable (else every event takes the library path)."""
    return _ext is not None


# ------------------------------------------------------------------------------------------------------ results


@dataclass
class DecodedRows:
    """The rows of one rows event, decoded for one SourceTable.

    ``kind`` is ``"insert"``, ``"update"`` or ``"delete"``; ``num_rows`` counts event rows (an UPDATE pair once),
    ``num_changes`` the change rows it gives (an UPDATE pair twice); ``column_names`` are the event's columns in
    table-map order (``UNKNOWN_COL<i>`` where the server logged no names, as python-mysql-replication names them).
    ``before`` / ``after`` give the row images as name → Arrow array (columns of both the event and the table).
    """

    table: SourceTable
    kind: str
    column_names: tuple[str, ...]
    num_rows: int
    num_changes: int
    _rows: Any = None  # _rowsdecoder.Rows (columnar path)
    _plan: "_PlanInfo | None" = None
    _items: list | None = None  # library path: [(op, values, none_sources)]
    fallback: str | None = None  # library path: why the C decoder did not decode the event (FALLBACK_* cause)
    # UPDATE whose after image lacks columns its before image has (they kept their values): lakecdc.source.row_images
    after_from_before: tuple[str, ...] = ()

    @property
    def columnar(self) -> bool:
        return self._rows is not None

    @property
    def before(self) -> dict[str, pa.Array] | None:
        if self.kind == INSERT_EVENT:
            return None
        return self._image(0 if self.kind == UPDATE_EVENT else None)

    @property
    def after(self) -> dict[str, pa.Array] | None:
        if self.kind == DELETE_EVENT:
            return None
        return self._image(1 if self.kind == UPDATE_EVENT else None)

    def _image(self, parity: int | None) -> dict[str, pa.Array]:
        data = build_change_batch(self.table, [(self, 0)])
        if parity is not None:
            data = data.take(pa.array(range(parity, data.num_rows, 2), type=pa.int64()))
        present = set(self.column_names)
        return {name: data.column(name).combine_chunks() for name in self.table.column_names if name in present}


# ------------------------------------------------------------------------------------------------------ decoding


def decode_rows_event(event, table: SourceTable, *, skip_rows: int = 0, columnar: bool = True) -> DecodedRows:
    """Decode a python-mysql-replication Write/Update/DeleteRowsEvent for ``table``, dropping its first
    ``skip_rows`` rows. Call it before anything reads ``event.rows`` (the columnar path reads the raw packet);
    ``columnar=False`` forces the library path."""
    kind = event_kind(event)
    if not columnar:
        cause = FALLBACK_REQUESTED
    elif _ext is None:
        cause = FALLBACK_NOT_BUILT
        _warn_once("extension", "lakecdc's columnar binlog decoder is not built (%s): decoding rows events with "
                   "python-mysql-replication, several times slower; run scripts/setup.sh or pip install -e . "
                   "with a C compiler and the Python headers", _IMPORT_ERROR)
    elif getattr(event, "_RowsEvent__rows", None) is not None:
        cause = FALLBACK_DECODED
    else:
        try:
            plan = _plan_for(event, table)
            raw = _raw_body(event)
            rows = plan.plan.decode(*raw[:3], _KIND_CODE[kind], *raw[3:], skip_rows)
            return DecodedRows(table, kind, plan.names, rows.num_rows, rows.num_changes, _rows=rows, _plan=plan)
        except (_Unsupported, AttributeError, TypeError, ValueError) as exc:
            cause = _fallback_cause(exc)
            if isinstance(exc, _ext.Unsupported):  # a value it will not guess: this event only
                log.debug("binlog rows event of %s decoded by python-mysql-replication: %s", table.table_id, exc)
            else:
                _warn_once(("unsupported", table.table_id, str(exc)),
                           "binlog rows of %s: %s; these events are decoded by python-mysql-replication",
                           table.table_id, exc)
    rows = event.rows
    if skip_rows:
        rows = rows[skip_rows:]
    items = _library_items(kind, rows, table)
    return DecodedRows(table, kind, _column_names(event), len(rows), len(items), _items=items, fallback=cause)


def fallback_summary(counts: dict[str, int]) -> str:
    """``"2 x value: invalid UTF-8; 1 x decoder not built"`` for counts of rows events per fallback cause."""
    return "; ".join(f"{events} x {cause}" for cause, events in sorted(counts.items()))


_COLUMN_PREFIX = re.compile(r"^column -?\d+: ")


def _fallback_cause(exc: Exception) -> str:
    """The counted cause of a fallback: its kind and what it was, without row-specific detail (a C decoder value
    refusal names its column index, which is dropped so equal causes of one table add up)."""
    if isinstance(exc, _ext.Unsupported):
        return f"{FALLBACK_VALUE}: {_COLUMN_PREFIX.sub('', str(exc))}"
    if isinstance(exc, _ColumnUnsupported):
        return f"{FALLBACK_COLUMN}: {exc}"
    if isinstance(exc, _Unsupported):
        return f"{FALLBACK_EVENT}: {exc}"
    return f"{FALLBACK_LIBRARY}: {type(exc).__name__}: {exc}"


def event_kind(event) -> str:
    if isinstance(event, WriteRowsEvent):
        return INSERT_EVENT
    if isinstance(event, UpdateRowsEvent):
        return UPDATE_EVENT
    if isinstance(event, DeleteRowsEvent):
        return DELETE_EVENT
    raise TypeError(f"not a rows event: {type(event).__name__}")


def _column_names(event) -> tuple[str, ...]:
    return tuple(c.name if c.name else f"UNKNOWN_COL{i}" for i, c in enumerate(event.columns))


def _raw_body(event) -> tuple:
    """(packet bytes, start, end, present bitmap(s)) of the event's row images, from the library's read position
    (right after the rows-event header and column bitmaps)."""
    if event.event_type == BINLOG.PARTIAL_UPDATE_ROWS_EVENT:
        raise _Unsupported("PARTIAL_UPDATE_ROWS_EVENT (partial JSON updates)")
    if not getattr(event, "complete", True):
        raise _Unsupported("incomplete rows event")
    wrapper = event.packet
    if getattr(wrapper, "_BinLogPacketWrapper__data_buffer", b""):
        raise _Unsupported("the binlog packet has pushed-back bytes")
    packet = wrapper.packet
    data = packet._data
    start = packet._position
    end = start + (event.event_size - wrapper.read_bytes)
    if not isinstance(data, (bytes, bytearray)) or end > len(data):
        raise _Unsupported("rows event larger than its packet")
    if event.number_of_columns != len(event.columns):
        raise _Unsupported("rows event width differs from its table map")
    if isinstance(event.columns_present_bitmap, str):  # pragma: no cover - Python 2 leftovers in the library
        raise _Unsupported("text column bitmap")
    extra = (event.columns_present_bitmap2,) if hasattr(event, "columns_present_bitmap2") else (b"",)
    return data, start, end, event.columns_present_bitmap, *extra


# ------------------------------------------------------------------------------------------------------ plans


@dataclass
class _PlanInfo:
    plan: Any  # _rowsdecoder.Plan
    key: tuple  # equal keys: the events' Rows can be concatenated and post-processed together
    post: tuple  # per slot: None or (raw Arrow type, function raw array -> array)
    names: tuple  # the event's column names


# id(SourceTable) -> (SourceTable, {table-map signature: _PlanInfo})
_PLANS: dict[int, tuple[SourceTable, dict[tuple, _PlanInfo]]] = {}
_PLANS_MAX = 512


def _plan_for(event, table: SourceTable) -> _PlanInfo:
    """The decode plan of the event's table map for ``table``: cached on the library's Table object (all rows events
    of one table map) and by the table map's content (the next transaction's identical table map)."""
    table_map = event.table_map.get(event.table_id)
    cached = getattr(table_map, "_lakecdc_plan", None)
    if cached is not None and cached[0] is table and cached[1] is event.columns:
        return cached[2]
    per_table = _PLANS.get(id(table))
    if per_table is None or per_table[0] is not table:
        if len(_PLANS) >= _PLANS_MAX:
            _PLANS.clear()
        per_table = _PLANS[id(table)] = (table, {})
    signature = _signature(event.columns)
    info = per_table[1].get(signature)
    if info is None:
        if len(per_table[1]) >= _PLANS_MAX:
            per_table[1].clear()
        info = per_table[1][signature] = _build_plan(event.columns, table)
    if table_map is not None:
        try:
            table_map._lakecdc_plan = (table, event.columns, info)
        except AttributeError:  # pragma: no cover - a library version with __slots__
            pass
    return info


def _signature(columns) -> tuple:
    return tuple(
        (c.type, c.name, c.unsigned, c.character_set_name, getattr(c, "max_length", None),
         getattr(c, "length_size", None), getattr(c, "fsp", None), getattr(c, "precision", None),
         getattr(c, "decimals", None), getattr(c, "bits", None), getattr(c, "size", None),
         tuple(c.enum_values) if c.enum_values is not None else None,
         tuple(c.set_values) if c.set_values is not None else None)
        for c in columns)


def _slot(column: SourceColumn) -> tuple[int, int]:
    t = column.arrow_type
    if pa.types.is_boolean(t):
        return TG_BOOL, 1
    if pa.types.is_int8(t):
        return TG_I8, 1
    if pa.types.is_int16(t):
        return TG_I16, 2
    if pa.types.is_int32(t):
        return TG_I32, 4
    if pa.types.is_int64(t):
        return TG_I64, 8
    if pa.types.is_decimal128(t):
        return TG_DEC128, 16
    if pa.types.is_float32(t):
        return TG_F32, 4
    if pa.types.is_float64(t):
        return TG_F64, 8
    if pa.types.is_date32(t):
        return TG_DATE32, 4
    if pa.types.is_timestamp(t):
        return TG_TS, 8
    if pa.types.is_time32(t):
        return TG_TIME32, 4
    if pa.types.is_time64(t):
        return TG_TIME64, 8
    if pa.types.is_string(t) or pa.types.is_binary(t):
        return TG_VAR, 0
    if pa.types.is_fixed_size_binary(t):
        return TG_FSB, t.byte_width
    if pa.types.is_list(t) and pa.types.is_string(t.value_type):
        return TG_LIST, 0
    raise _ColumnUnsupported(f"column '{column.name}' has Arrow type {t}")


def _build_plan(columns, table: SourceTable) -> _PlanInfo:
    slot_of = {c.name: i for i, c in enumerate(table.columns)}
    pks = set(table.primary_keys)
    slots = []
    for c in table.columns:
        tgt, width = _slot(c)
        slots.append((tgt, width, int(c.name in pks), int(tgt in (TG_F32, TG_F64))))
    specs, post = [], [None] * len(table.columns)
    for i, column in enumerate(columns):
        name = column.name if column.name else f"UNKNOWN_COL{i}"
        slot = slot_of.get(name, -1)
        if slot < 0:
            specs.append(_skip_spec(column))
            continue
        spec, post[slot] = _column_spec(column, table.columns[slot], slots[slot][0], slots[slot][1], slot)
        specs.append(spec)
    key = tuple(None if p is None else p[0] for p in post)
    names = tuple(c.name if c.name else f"UNKNOWN_COL{i}" for i, c in enumerate(columns))
    return _PlanInfo(_ext.Plan(slots, specs), key, tuple(None if p is None else p[1] for p in post), names)


def _spec(fixed=0, lenb=0, kind=K_SKIP, slot=-1, flags=0, fsp=0, prec=0, scale=0, bit_mask=0xFF, zero_null=1,
          divisor=1, labels=None, table=None) -> tuple:
    return (fixed, lenb, kind, slot, flags, fsp, prec, scale, bit_mask, zero_null, divisor, labels, table)


def _size(column) -> tuple[int, int]:
    """(fixed size, length-prefix size) of a value of this binlog column."""
    t = column.type
    if t in _INT_SIZES:
        return _INT_SIZES[t], 0
    if t == _FLOAT:
        return 4, 0
    if t == _DOUBLE:
        return 8, 0
    if t == _YEAR:
        return 1, 0
    if t == _DATE:
        return 3, 0
    if t in _OLD_FIXED:
        return _OLD_FIXED[t], 0
    if t == _TIMESTAMP2:
        return 4 + (column.fsp + 1) // 2, 0
    if t == _DATETIME2:
        return 5 + (column.fsp + 1) // 2, 0
    if t == _TIME2:
        return 3 + (column.fsp + 1) // 2, 0
    if t == _NEWDECIMAL:
        return _decimal_size(column.precision, column.decimals), 0
    if t in (_ENUM, _SET):
        return column.size, 0
    if t == _BIT:
        return column.bytes, 0
    if t in (_VARCHAR, _STRING):
        return 0, 2 if column.max_length > 255 else 1
    if t in (_BLOB, _GEOMETRY, _JSON):
        return 0, column.length_size
    raise _ColumnUnsupported(f"column '{column.name}' has binlog type {t}")


def _decimal_size(precision: int, scale: int) -> int:
    dig2bytes = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
    intg = precision - scale
    return intg // 9 * 4 + dig2bytes[intg % 9] + scale // 9 * 4 + dig2bytes[scale % 9]


def _skip_spec(column) -> tuple:
    fixed, lenb = _size(column)
    return _spec(fixed, lenb)


def _column_spec(column, target: SourceColumn, tgt: int, width: int, slot: int) -> tuple[tuple, Any]:
    """(C column spec, post-processing or None) for a captured column; _Unsupported when its binlog type and
    SourceTable type are not a combination the decoder reproduces exactly."""
    t = column.type
    at = target.arrow_type
    dtype = column_data_type(target.column_type)
    fixed, lenb = _size(column)
    base = dict(fixed=fixed, lenb=lenb, slot=slot)

    def unsupported() -> _Unsupported:
        return _ColumnUnsupported(f"column '{target.name}' ({target.column_type}) with binlog type {t} "
                                  f"into Arrow {at}")

    if t in _INT_SIZES:
        if dtype not in _INT_DATA_TYPES:
            raise unsupported()
        if tgt == TG_DEC128 and not (at.scale == 0 and at.precision >= 20 and dtype == "bigint"):
            raise unsupported()
        if tgt not in (TG_BOOL, TG_I8, TG_I16, TG_I32, TG_I64, TG_DEC128):
            raise unsupported()
        return _spec(**base, kind=K_INT, flags=int(bool(column.unsigned))), None
    if t == _YEAR:
        if dtype != "year" or tgt not in (TG_I16, TG_I32, TG_I64):
            raise unsupported()
        return _spec(**base, kind=K_YEAR), None
    if t == _FLOAT:
        if dtype != "float":
            raise unsupported()
        if tgt == TG_F32:
            return _spec(**base, kind=K_FLOAT), None
        if tgt == TG_F64:  # FLOAT(M,D): the codec rounds the float32 to D decimals
            decimals = _decimals_of(target.column_type)
            return _spec(**base, kind=K_FLOAT), (("round", decimals), (pa.float64(), _rounder(decimals)))
        raise unsupported()
    if t == _DOUBLE:
        if dtype not in ("double", "real", "double precision") or tgt != TG_F64:
            raise unsupported()
        return _spec(**base, kind=K_DOUBLE), None
    if t == _NEWDECIMAL:
        if dtype not in ("decimal", "numeric", "fixed"):
            raise unsupported()
        spec = _spec(**base, kind=K_DECIMAL, prec=column.precision, scale=column.decimals)
        if tgt == TG_DEC128 and (at.precision, at.scale) == (column.precision, column.decimals) and \
                column.precision <= 38:
            return spec, None
        if tgt == TG_VAR and pa.types.is_string(at):
            return spec, None
        raise unsupported()
    if t == _DATE:
        if dtype != "date" or tgt != TG_DATE32:
            raise unsupported()
        return _spec(**base, kind=K_DATE, zero_null=int(target.nullable)), None
    if t in (_DATETIME2, _TIMESTAMP2):
        if tgt != TG_TS or column.fsp > _UNIT_DIGITS[at.unit]:
            raise unsupported()
        if t == _DATETIME2:
            if dtype != "datetime" or at.tz is not None:
                raise unsupported()
            return _spec(**base, kind=K_DATETIME2, fsp=column.fsp, zero_null=int(target.nullable),
                         divisor=_MICROS[at.unit]), None
        if dtype != "timestamp":
            raise unsupported()
        return _spec(**base, kind=K_TIMESTAMP2, fsp=column.fsp, divisor=_MICROS[at.unit]), None
    if t == _TIME2:
        if dtype != "time" or tgt not in (TG_TIME32, TG_TIME64):
            raise unsupported()
        return _spec(**base, kind=K_TIME2, fsp=column.fsp, divisor=_MICROS[at.unit]), None
    if t in (_VARCHAR, _STRING, _BLOB):
        return _string_spec(column, target, dtype, tgt, width, base, unsupported)
    if t == _GEOMETRY:
        if dtype not in GEOMETRY_TYPES or not pa.types.is_string(at):
            raise unsupported()
        return _spec(**base, kind=K_RAW), (("geometry",), (pa.binary(),
                                                         _per_value(functools.partial(geometry_json,
                                                                                      column=target.name))))
    if t == _JSON:
        if not pa.types.is_string(at) or dtype != "json":
            raise unsupported()
        return _spec(**base, kind=K_RAW), (("json",), (pa.binary(), _per_value(_mysql_json_text)))
    if t == _ENUM:
        if dtype != "enum" or not pa.types.is_string(at):
            raise unsupported()
        if column.enum_values is None:
            return _spec(**base, kind=K_NULL), None
        return _spec(**base, kind=K_ENUM, labels=[str(v).encode("utf-8") for v in column.enum_values]), None
    if t == _SET:
        if dtype != "set" or tgt != TG_LIST:
            raise unsupported()
        labels = list(column.set_values or [])
        if labels and labels != parse_enum_values(target.column_type):
            raise unsupported()  # the codec orders members by the SourceTable's definition
        return _spec(**base, kind=K_SET, labels=[str(v).encode("utf-8") for v in labels]), \
            (("set", tuple(labels)), (None, _set_builder(labels)))
    if t == _BIT:
        if dtype != "bit" or tgt not in (TG_BOOL, TG_FSB) or column.bytes > 8:
            raise unsupported()
        end = column.bits if column.bytes == 1 else (column.bits % 8 or 8)
        return _spec(**base, kind=K_BIT, bit_mask=(1 << end) - 1), None
    raise unsupported()


def _string_spec(column, target: SourceColumn, dtype: str, tgt: int, width: int, base: dict, unsupported):
    """VARCHAR / CHAR / BINARY / TEXT / BLOB (and MariaDB JSON): decoded as the library would (the column's
    character set, or bytes for the binary set), then as the codec would."""
    at = target.arrow_type
    codec = _library_codec(column)
    if codec is None:  # the library keeps bytes
        if dtype in _BLOB_DATA_TYPES and pa.types.is_binary(at):
            return _spec(**base, kind=K_RAW), None
        if dtype == "binary" and tgt == TG_FSB:
            return _spec(**base, kind=K_PAD), None
        if dtype in _TEXT_DATA_TYPES and pa.types.is_string(at):
            # the codec's to_text: UTF-8 with replacement characters
            return _spec(**base, kind=K_RAW), (("text-from-bytes",), (pa.binary(), _per_value(
                lambda v: v.decode("utf-8", "replace"))))
        raise unsupported()
    if dtype not in _TEXT_DATA_TYPES or not pa.types.is_string(at):
        raise unsupported()
    if codec == "utf-8":
        return _spec(**base, kind=K_UTF8), None
    if codec in _SINGLE_BYTE_CODECS:
        return _spec(**base, kind=K_TABLE, table=_byte_table(codec)), None
    return _spec(**base, kind=K_RAW), (("decode", codec), (pa.binary(), _per_value(
        functools.partial(bytes.decode, encoding=codec))))


def _library_codec(column) -> str | None:
    """The Python codec python-mysql-replication decodes this column with (normalised name), or None when it keeps
    the bytes (binary character set, or a name Python does not know)."""
    name = column.character_set_name
    if name is None:
        return "utf-8"
    encoding = RowsEvent.charset_to_encoding(name)  # lakecdc's python_codec (charsets.install_binlog_decoding)
    try:
        return codecs.lookup(encoding).name
    except LookupError:
        return None


_TABLES: dict[str, bytes] = {}


def _byte_table(codec: str) -> bytes:
    """256 entries of [length, UTF-8 bytes (≤ 4)]: each byte decoded alone; length 0xFF where the codec refuses the
    byte (the C decoder then hands the event to the library, which raises like before)."""
    table = _TABLES.get(codec)
    if table is None:
        out = bytearray()
        for b in range(256):
            try:
                text = bytes([b]).decode(codec).encode("utf-8")
            except UnicodeDecodeError:
                out += b"\xff\x00\x00\x00\x00"
                continue
            if len(text) > 4:
                raise _ColumnUnsupported(f"character set codec {codec} decodes byte {b} to {len(text)} bytes")
            out += bytes([len(text)]) + text.ljust(4, b"\x00")
        table = _TABLES[codec] = bytes(out)
    return table


def _decimals_of(column_type: str) -> int:
    return length_and_scale(column_type.lower())[1] or 0


def _rounder(decimals: int) -> Callable[[pa.Array], pa.Array]:
    def rnd(arr: pa.Array) -> pa.Array:
        return pa.array([None if v is None else round(v, decimals) for v in arr.to_pylist()], type=pa.float64())

    return rnd


def _per_value(fn: Callable[[bytes], Any]) -> Callable[[pa.Array], pa.Array]:
    """A post-processing step that applies ``fn`` to each non-null value of a binary array (rare column kinds)."""
    def apply(arr: pa.Array) -> pa.Array:
        return pa.array([None if v is None else fn(v) for v in arr.to_pylist()], type=pa.string())

    return apply


def _mysql_json_text(raw: bytes) -> Any:
    """MySQL binary JSON as the library decodes it (length 0: NULL), then as the codec renders it."""
    if not raw:
        return None
    value = parse_json(raw[0], raw[1:])
    return value if type(value) is str else to_text(value)


def _plan_key(decoded: DecodedRows) -> tuple:
    if decoded._plan is None:  # every columnar decode has its plan
        raise ValueError(f"rows of {decoded.table.table_id} decoded without a plan")
    return decoded._plan.key


def _set_builder(labels: list[str]):
    """SET members arrive as label indices; the list array takes its values from the labels."""
    label_array = pa.array(labels, type=pa.string())

    def build(n: int, validity, offsets, indices, null_count: int) -> pa.Array:
        index_array = pa.Array.from_buffers(pa.int32(), len(indices) // 4, [None, pa.py_buffer(indices)])
        values = label_array.take(index_array)
        return pa.ListArray.from_buffers(pa.list_(pa.string()), n, [validity, pa.py_buffer(offsets)],
                                         null_count=null_count, children=[values])

    return build


# ------------------------------------------------------------------------------------------------------ batches


def build_change_batch(table: SourceTable, parts: Sequence[tuple[DecodedRows, int]]) -> pa.Table:
    """One change batch (``table.change_schema()``) from decoded events of ``table`` in binlog order, each with the
    op_ts (epoch milliseconds) of its transaction."""
    schema = table.change_schema()
    pieces: list[pa.Table] = []
    run: list[tuple[DecodedRows, int]] = []
    fallback: list[tuple[DecodedRows, int]] = []

    def flush_run() -> None:
        if run:
            pieces.extend(_columnar_tables(table, schema, run))
            run.clear()

    def flush_fallback() -> None:
        if fallback:
            pieces.append(_library_table(table, schema, fallback))
            fallback.clear()

    for decoded, ts in parts:
        if decoded.table is not table and decoded.table != table:
            raise ValueError(f"rows decoded for {decoded.table.table_id} cannot go into a batch of {table.table_id} "
                             "with a different schema; decode them again")
        if decoded.num_changes == 0:
            continue
        if decoded.after_from_before:  # a piece of its own, whose after rows take the before rows' values
            flush_run()
            flush_fallback()
            alone = [(decoded, ts)]
            piece = _columnar_tables(table, schema, alone)[0] if decoded.columnar else \
                _library_table(table, schema, alone)
            pieces.append(fill_after_from_before(piece, decoded.after_from_before))
            continue
        if decoded.columnar:
            flush_fallback()
            if run and _plan_key(run[-1][0]) != _plan_key(decoded):
                flush_run()
            run.append((decoded, ts))
        else:
            flush_run()
            fallback.append((decoded, ts))
    flush_run()
    flush_fallback()
    if not pieces:
        return schema.empty_table()
    if len(pieces) == 1:
        return pieces[0]
    data = pa.concat_tables(pieces)
    try:
        return data.combine_chunks()
    except (pa.ArrowInvalid, pa.ArrowCapacityError):  # over 2 GiB in a column: keep the chunks
        return data


def _columnar_tables(table: SourceTable, schema: pa.Schema, run: list) -> list[pa.Table]:
    try:
        n, slots, ops, op_offsets, ts = _ext.concat([d._rows for d, _ in run], [t for _, t in run])
    except OverflowError:  # a string column above 2 GiB: halve the run
        if len(run) == 1:
            raise
        half = len(run) // 2
        return _columnar_tables(table, schema, run[:half]) + _columnar_tables(table, schema, run[half:])
    post = run[0][0]._plan.post
    arrays = []
    for field, (validity, null_count, buf1, buf2), step in zip(schema, slots, post):
        arrays.append(_wrap(field.type, n, validity, null_count, buf1, buf2, step))
    arrays.append(pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(op_offsets), pa.py_buffer(ops)],
                                        null_count=0))
    arrays.append(pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(ts)], null_count=0))
    return [pa.Table.from_arrays(arrays, schema=schema)]


def _wrap(arrow_type: pa.DataType, n: int, validity, null_count: int, buf1, buf2, step) -> pa.Array:
    valid = pa.py_buffer(validity) if validity is not None else None
    if step is not None and step[0] is None:  # builds the array itself (SET)
        return step[1](n, valid, buf1, buf2, null_count)
    raw_type = step[0] if step is not None else arrow_type
    buffers = [valid, pa.py_buffer(buf1)] if buf2 is None else [valid, pa.py_buffer(buf1), pa.py_buffer(buf2)]
    arr = pa.Array.from_buffers(raw_type, n, buffers, null_count=null_count)
    return step[1](arr) if step is not None else arr


# ------------------------------------------------------------------------------------------------------ library path


def _library_items(kind: str, rows: list, table: SourceTable) -> list:
    """(op, values, none_sources) per change row from the library's row dicts, like binlog._append_changes."""
    out: list = []
    if kind == INSERT_EVENT:
        for r in rows:
            out.append((INSERT, r["values"], r["none_sources"]))
    elif kind == DELETE_EVENT:
        for r in rows:
            out.append((DELETE, r["values"], r["none_sources"]))
    else:
        pks = table.primary_keys
        for r in rows:
            b, a = r["before_values"], r["after_values"]
            if pks and any(b.get(k) != a.get(k) for k in pks):
                # a primary key change is a delete of the old key and an insert of the new one (Debezium)
                out.append((DELETE, b, r["before_none_sources"]))
                out.append((INSERT, a, r["after_none_sources"]))
            else:
                out.append((UPDATE_BEFORE, b, r["before_none_sources"]))
                out.append((UPDATE_AFTER, a, r["after_none_sources"]))
    return out


def _library_table(table: SourceTable, schema: pa.Schema, parts: list) -> pa.Table:
    """The change rows of library-decoded events, converted by the codecs like binlog._build_batch."""
    items = [(op, ts, values, nones) for decoded, ts in parts for op, values, nones in decoded._items]
    arrays = []
    for codec in table_codecs(table):
        name, conv = codec.name, codec.binlog_value
        values = [conv(v, nones.get(name) if v is None else None)
                  for v, nones in ((vals.get(name), nones) for _op, _ts, vals, nones in items)]
        arrays.append(codec.to_array(values))
    arrays.append(pa.array([it[0] for it in items], type=pa.string()))
    arrays.append(pa.array([it[1] for it in items], type=pa.int64()))
    return pa.Table.from_arrays(arrays, schema=schema)


def _warn_once(key, message: str, *args) -> None:
    if key in _warned:
        return
    _warned.add(key)
    log.warning(message, *args)
