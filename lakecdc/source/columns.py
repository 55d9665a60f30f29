"""Row-event columns named and typed from lakecdc's schema history, whatever ``binlog_row_metadata`` the server uses.

A rows event carries, per column, only its binlog field type and type metadata (lengths, precision, fsp). Names,
signedness, character sets and ENUM/SET labels are in the table map only with ``binlog_row_metadata=FULL``
(MINIMAL, MySQL 8's default, logs signedness and character sets but no names or labels; NO_LOG, MariaDB's default,
logs none of them). Flink CDC and Debezium therefore decode rows with their own schema history, and so does
lakecdc: the schema each checkpoint records (``lakecdc.source.schemas``), kept current by the DDL the binlog
reader parses after it (lakecdc.source.ddl).

:func:`bind_columns` maps an event's columns to the tracked SourceTable by position. The column count and every
column's binlog type must fit the tracked column; any mismatch stops the read with an error naming the table, the
column and the binlog position, since decoding with the wrong schema would write wrong values. Where the event does
carry FULL metadata (it was written with FULL, whatever the setting is now), names, signedness, ENUM/SET labels and
character sets must also equal the history: FULL is the cross-check (MINIMAL metadata: signedness only). Then the
library's column objects get the history's names, signedness, character sets and labels, which both the columnar decoder
(lakecdc.source.rows_decoder, whose plan is built from ``event.columns``) and python-mysql-replication's own row
decoding read.
"""

from __future__ import annotations

import codecs

from lakecdc.errors import SourceError
from lakecdc.model import SourceColumn, SourceTable
from lakecdc.source.charsets import python_codec
from lakecdc.source.types import GEOMETRY_TYPES, column_data_type, length_and_scale, parse_enum_values

# binlog field types (MySQL's enum_field_types)
_TINY, _SHORT, _LONG, _FLOAT, _DOUBLE, _TIMESTAMP, _LONGLONG, _INT24 = 1, 2, 3, 4, 5, 7, 8, 9
_DATE, _TIME, _DATETIME, _YEAR, _NEWDATE, _VARCHAR, _BIT = 10, 11, 12, 13, 14, 15, 16
_TIMESTAMP2, _DATETIME2, _TIME2 = 17, 18, 19
_JSON, _NEWDECIMAL, _ENUM, _SET, _BLOB, _VAR_STRING, _STRING, _GEOMETRY = 245, 246, 247, 248, 252, 253, 254, 255

_STRINGS = frozenset({_STRING, _VAR_STRING, _VARCHAR})
# the binlog field types each MySQL data type is logged as (pre-5.6 temporal formats included)
_BINLOG_TYPES: dict[str, frozenset[int]] = {
    "tinyint": frozenset({_TINY}), "bool": frozenset({_TINY}), "boolean": frozenset({_TINY}),
    "smallint": frozenset({_SHORT}), "mediumint": frozenset({_INT24}),
    "int": frozenset({_LONG}), "integer": frozenset({_LONG}), "bigint": frozenset({_LONGLONG}),
    "float": frozenset({_FLOAT}), "double": frozenset({_DOUBLE}), "real": frozenset({_DOUBLE}),
    "double precision": frozenset({_DOUBLE}),
    "decimal": frozenset({_NEWDECIMAL}), "numeric": frozenset({_NEWDECIMAL}), "fixed": frozenset({_NEWDECIMAL}),
    "date": frozenset({_DATE, _NEWDATE}), "time": frozenset({_TIME2, _TIME}),
    "datetime": frozenset({_DATETIME2, _DATETIME}), "timestamp": frozenset({_TIMESTAMP2, _TIMESTAMP}),
    "year": frozenset({_YEAR}), "bit": frozenset({_BIT}),
    "char": _STRINGS, "varchar": _STRINGS, "binary": _STRINGS, "varbinary": _STRINGS,
    "long varchar": frozenset({_BLOB}), "long": frozenset({_BLOB}),
    "tinytext": frozenset({_BLOB}), "text": frozenset({_BLOB}), "mediumtext": frozenset({_BLOB}),
    "longtext": frozenset({_BLOB}), "tinyblob": frozenset({_BLOB}), "blob": frozenset({_BLOB}),
    "mediumblob": frozenset({_BLOB}), "longblob": frozenset({_BLOB}),
    "json": frozenset({_JSON, _BLOB}),  # MySQL's binary JSON; MariaDB's JSON is LONGTEXT
    "enum": frozenset({_ENUM}), "set": frozenset({_SET}),
    **{g: frozenset({_GEOMETRY}) for g in GEOMETRY_TYPES},
}
_NUMERIC = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "float", "double", "real",
                      "double precision", "decimal", "numeric", "fixed"})
_CHARACTER = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "long", "long varchar",
                        "json", "enum", "set"})
_BYTES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
_BINARY_CHARSET = "binary"  # python-mysql-replication keeps the bytes of a column in this (codec-less) set

_BOUND = "_lakecdc_bound"  # attribute on the library's Table object: the SourceTable its columns were bound to
_SIGNEDNESS = "_lakecdc_signedness"  # attribute on the library's Table object: the table map's SIGNEDNESS field


def keep_signedness(table_map_event) -> None:
    """Keep a table map's SIGNEDNESS metadata on its Table object. MINIMAL row metadata (MySQL 8's default) logs it
    without column names, and the library then drops it; it lets :func:`bind_columns` cross-check signedness, which
    a DDL such as ``INT`` → ``INT UNSIGNED`` changes without changing the binlog type."""
    table = getattr(table_map_event, "table_obj", None)
    metadata = getattr(table_map_event, "optional_metadata", None)
    signedness = list(getattr(metadata, "unsigned_column_list", None) or [])
    if table is not None and len(signedness) == len(table.columns):
        try:
            setattr(table, _SIGNEDNESS, signedness)
        except AttributeError:  # pragma: no cover - a library version with __slots__
            pass


def bind_columns(event, table: SourceTable, position: str) -> None:
    """Name and type the columns of ``event`` (a python-mysql-replication rows event, before its rows are read)
    from ``table``, the tracked schema at that point of the binlog; SourceError on any mismatch. ``position`` is
    the binlog position shown in errors. Cheap after the first event of a table map (cached on it)."""
    table_map = event.table_map.get(event.table_id)
    if table_map is not None and getattr(table_map, _BOUND, None) is table:
        return
    columns = event.columns
    if len(columns) != len(table.columns) or event.number_of_columns != len(columns):
        raise _mismatch(table, position, f"the rows event has {event.number_of_columns} columns (table map: "
                                         f"{len(columns)}) but the schema history has {len(table.columns)} "
                                         f"({', '.join(table.column_names)})")
    signedness = getattr(table_map, _SIGNEDNESS, None)
    for index, (column, tracked) in enumerate(zip(columns, table.columns)):
        _check_column(column, tracked, index, table, position)
        if signedness is not None and column.name is None and column_data_type(tracked.column_type) in _NUMERIC \
                and bool(signedness[index]) != _unsigned(tracked):
            raise _mismatch(table, position, f"column {index + 1} ('{tracked.name}' {tracked.column_type} in the "
                                             f"schema history) is {'un' if signedness[index] else ''}signed in "
                                             "the binlog")
    for column, tracked in zip(columns, table.columns):
        _bind(column, tracked)
    if table_map is not None:
        try:
            setattr(table_map, _BOUND, table)
        except AttributeError:  # pragma: no cover - a library version with __slots__
            pass


def _check_column(column, tracked: SourceColumn, index: int, table: SourceTable, position: str) -> None:
    dtype = column_data_type(tracked.column_type)
    what = f"column {index + 1} ('{tracked.name}' {tracked.column_type} in the schema history)"
    allowed = _BINLOG_TYPES.get(dtype)
    if allowed is None:
        raise _mismatch(table, position, f"{what} has a type lakecdc cannot match to the binlog")
    if column.type not in allowed:
        raise _mismatch(table, position, f"{what} is logged with binlog field type {column.type}, which does not "
                                         f"fit {dtype}")
    if column.type == _NEWDECIMAL:
        precision, scale = _precision_scale(tracked.column_type)
        if (column.precision, column.decimals) != (precision, scale):
            raise _mismatch(table, position, f"{what} is logged as decimal({column.precision},{column.decimals})")
    if column.type in (_TIME2, _DATETIME2, _TIMESTAMP2) and column.fsp != _fsp(tracked.column_type):
        raise _mismatch(table, position, f"{what} is logged with {column.fsp} fractional digits")
    if column.name is None:
        return  # no FULL metadata in this event: the history alone names and types it
    # FULL metadata: the cross-check
    if str(column.name).lower() != tracked.name.lower():
        raise _mismatch(table, position, f"{what} is named '{column.name}' in the binlog")
    if dtype in _NUMERIC and bool(column.unsigned) != _unsigned(tracked):
        raise _mismatch(table, position, f"{what} is {'un' if column.unsigned else ''}signed in the binlog")
    if dtype == "enum" and column.enum_values is not None \
            and list(column.enum_values)[1:] != parse_enum_values(tracked.column_type):
        raise _mismatch(table, position, f"{what} has the ENUM values {list(column.enum_values)[1:]} in the binlog")
    if dtype == "set" and column.set_values is not None \
            and list(column.set_values) != parse_enum_values(tracked.column_type):
        raise _mismatch(table, position, f"{what} has the SET values {list(column.set_values)} in the binlog")
    if (dtype in _CHARACTER or dtype in _BYTES) and column.type != _JSON and column.character_set_name is not None \
            and _codec(column.character_set_name) != _codec(_charset(tracked, dtype)):
        raise _mismatch(table, position, f"{what} has the character set {column.character_set_name} in the "
                                         f"binlog, not {tracked.charset or 'binary'}")


def _bind(column, tracked: SourceColumn) -> None:
    dtype = column_data_type(tracked.column_type)
    column.name = tracked.name
    if dtype in _NUMERIC:
        column.unsigned = _unsigned(tracked)
    if dtype == "enum":
        column.enum_values = [""] + parse_enum_values(tracked.column_type)  # index 0: the invalid value ''
    elif dtype == "set":
        column.set_values = parse_enum_values(tracked.column_type)
    if (dtype in _CHARACTER or dtype in _BYTES) and column.type != _JSON and column.character_set_name is None:
        column.character_set_name = _charset(tracked, dtype)


def _charset(tracked: SourceColumn, dtype: str) -> str | None:
    """The character set the library decodes the column with: binary columns keep their bytes; a character column
    whose set the history does not know (None) is decoded as UTF-8, like the library does."""
    if dtype in _BYTES:
        return _BINARY_CHARSET
    return tracked.charset or None


def _codec(charset: str | None) -> str | None:
    if charset is None:
        return "utf-8"
    try:
        return codecs.lookup(python_codec(charset)).name
    except LookupError:
        return None  # binary: bytes


def _unsigned(tracked: SourceColumn) -> bool:
    return "unsigned" in tracked.column_type.lower()


def _precision_scale(column_type: str) -> tuple[int, int]:
    precision, scale = length_and_scale(column_type.lower())
    return (precision if precision is not None else 10), (scale or 0)


def _fsp(column_type: str) -> int:
    return length_and_scale(column_type.lower())[0] or 0


def _mismatch(table: SourceTable, position: str, detail: str) -> SourceError:
    return SourceError(
        f"binlog rows event of {table.table_id} at {position} does not match lakecdc's schema history of the table: "
        f"{detail}. The table was changed in a way lakecdc did not see (a DDL it could not read, or a schema "
        f"history from before the change); its rows cannot be decoded safely. Re-snapshot the table (lakecdc "
        f"resnapshot PIPELINE.yaml {table.table_id}, or the Dagster re-snapshot job)")


def decoding_layout(table: SourceTable) -> tuple:
    """What decoding a row of ``table`` depends on, per column: name, data type, signedness, ENUM/SET labels,
    decimal precision/scale, fractional digits, character set (as a codec). Two schemas with the same layout decode
    the same bytes the same way (spellings such as ``int`` / ``int(11)`` do not matter)."""
    layout = []
    for c in table.columns:
        dtype = column_data_type(c.column_type)
        layout.append((
            c.name.lower(), dtype, _unsigned(c) if dtype in _NUMERIC else False,
            tuple(parse_enum_values(c.column_type)) if dtype in ("enum", "set") else (),
            _precision_scale(c.column_type) if dtype in ("decimal", "numeric", "fixed") else (),
            _fsp(c.column_type) if dtype in ("time", "datetime", "timestamp") else 0,
            _codec(_charset(c, dtype)) if (dtype in _CHARACTER or dtype in _BYTES) and c.charset else None,
        ))
    return tuple(layout)
