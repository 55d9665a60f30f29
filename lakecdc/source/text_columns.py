"""A column of MySQL text-protocol values (the bytes of a streamed SELECT, see :mod:`lakecdc.source.wire`) turned
into the column's Arrow array, with the same values the exact path (PyMySQL's converters + the column codec of
:mod:`lakecdc.source.types`) gives.

Fast conversions are Arrow C++ casts of the whole column (numbers, decimals, dates and date-times parse from their
text; UTF-8 text and bytes are taken as they are). Any value a cast cannot carry exactly fails the cast (zero dates,
out-of-range numbers, a column whose type changed since it was described, invalid UTF-8), and then that batch of
the column takes the exact path. Types whose text needs Python (TIME, SET, BIT, geometry, character sets other than
the connection's) always take the exact path: they are rare and were measured not to matter for throughput.
"""

from __future__ import annotations

import codecs
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.model import SourceColumn
from lakecdc.source.types import ColumnCodec, codec_for, column_data_type

_INTEGER_TYPES = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"}
_BOOLEAN_INTEGERS = {"tinyint", "bool", "boolean"}
_TEXT_TYPES = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "json", "enum", "long",
               "long varchar"}
_BYTES_TYPES = {"varbinary", "tinyblob", "blob", "mediumblob", "longblob"}


def _is_utf8(encoding: str | None) -> bool:
    if not encoding:
        return False
    try:
        return codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        return False


class TextColumn:
    """Decodes one result column: ``encoding``/``converter`` are PyMySQL's for it (what the exact path applies)."""

    def __init__(self, column: SourceColumn, encoding: str | None, converter: Callable[[Any], Any] | None):
        self.column = column
        self.encoding = encoding
        self.converter = converter
        self.codec: ColumnCodec = codec_for(column.name, column.column_type, column.arrow_type, column.nullable)
        self.fast = self._fast_conversion()

    def _fast_conversion(self) -> Callable[[pa.Array], pa.Array] | None:
        t = self.column.arrow_type
        data_type = column_data_type(self.column.column_type)
        plain_bytes = self.encoding is None and self.converter is None
        if pa.types.is_boolean(t):
            return _nonzero if data_type in _BOOLEAN_INTEGERS else None  # BIT(1): exact path
        if pa.types.is_integer(t) and data_type in _INTEGER_TYPES:
            return lambda raw: _text(raw).cast(t)
        if pa.types.is_decimal(t) and data_type in ("decimal", "numeric", "fixed", "bigint"):
            return lambda raw: _text(raw).cast(t)
        if pa.types.is_float32(t):
            # as the exact path: parsed as a double, then rounded to float32
            return lambda raw: _text(raw).cast(pa.float64()).cast(t)
        if pa.types.is_float64(t):
            return lambda raw: _text(raw).cast(t)
        if pa.types.is_date32(t) and data_type == "date":
            return lambda raw: _text(raw).cast(t)
        if pa.types.is_timestamp(t) and data_type in ("datetime", "timestamp"):
            naive = pa.timestamp(t.unit)
            # TIMESTAMP: the session time zone is UTC, so the text is the UTC instant
            return (lambda raw: _text(raw).cast(naive)) if t.tz is None else \
                (lambda raw: _text(raw).cast(naive).cast(t))
        if pa.types.is_string(t) and data_type in ("decimal", "numeric", "fixed"):
            return _text  # DECIMAL(p > 38): MySQL's plain notation is the value's text
        if pa.types.is_string(t) and data_type in _TEXT_TYPES and _is_utf8(self.encoding) and self.converter is None:
            return _utf8
        if pa.types.is_binary(t) and data_type in _BYTES_TYPES and plain_bytes:
            return lambda raw: raw
        if pa.types.is_fixed_size_binary(t) and data_type == "binary" and plain_bytes:
            return lambda raw: raw.cast(t)  # the server pads BINARY(n) to n bytes
        return None

    def to_array(self, raw: pa.Array) -> pa.Array:
        """The Arrow array of this column from its raw values (``pa.binary()``, nulls for NULL)."""
        if self.fast is not None:
            try:
                return self.fast(raw)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                pass  # a value the cast cannot carry exactly: this batch takes the exact path
        return self.exact(raw)

    def driver_value(self, raw: pa.Array, index: int) -> Any:
        """The value PyMySQL gives for one field (a chunk boundary, recorded and bound as a query parameter)."""
        value = raw[index].as_py()
        return None if value is None else _convert(value, self.encoding, self.converter)

    def exact(self, raw: pa.Array) -> pa.Array:
        """PyMySQL's value for each field, then the column codec (the reference the fast path must equal)."""
        encoding, converter = self.encoding, self.converter
        values = raw.to_pylist()
        if encoding is not None or converter is not None:
            values = [None if v is None else _convert(v, encoding, converter) for v in values]
        codec = self.codec
        return codec.to_array(codec.snapshot_values(values))


def _convert(value: bytes, encoding: str | None, converter) -> Any:
    text = value.decode(encoding) if encoding is not None else value
    return converter(text) if converter is not None else text


def _text(raw: pa.Array) -> pa.Array:
    """Numbers and dates are ASCII: their bytes are valid UTF-8 text (any other byte fails the cast)."""
    return raw.view(pa.string())


def _utf8(raw: pa.Array) -> pa.Array:
    text = raw.view(pa.string())
    text.validate(full=True)  # invalid UTF-8 raises ArrowInvalid: the exact path raises as PyMySQL would
    return text


def _nonzero(raw: pa.Array) -> pa.Array:
    return pc.not_equal(_text(raw).cast(pa.int64()), 0)


def text_columns(columns: list[SourceColumn], converters: list) -> list[TextColumn]:
    """Decoders for the columns of a result, ``converters`` being PyMySQL's (encoding, converter) per column."""
    if len(columns) != len(converters):
        raise ValueError(f"the result has {len(converters)} columns, the table {len(columns)}")
    return [TextColumn(c, encoding, converter) for c, (encoding, converter) in zip(columns, converters)]

