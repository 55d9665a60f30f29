"""The statements of a chunked snapshot: a chunk's bounds (lakecdc.source.splitter) and its rows
(lakecdc.source.chunk_reader). Every statement has ``%s`` parameters (PyMySQL format strings), in the order of the
returned list; chunk-key values are passed in the column's character set and collation (:meth:`ChunkKey.param_sql`)
so the server compares them as it orders the key and keeps using its index.

A chunk is a half-open range ``(after, upper]`` of chunk-key values; NULL keys form one chunk of their own.
"""

from __future__ import annotations

from typing import Any

from lakecdc.model import SourceTable
from lakecdc.source.chunks import ChunkKey, ChunkProgress
from lakecdc.source.sql_text import qualified_table, quote_identifier


def _name(name: str) -> str:
    return quote_identifier(name, in_format=True)


def table_sql(table: SourceTable) -> str:
    return qualified_table(table.table_id.database, table.table_id.table, in_format=True)


def columns_sql(table: SourceTable) -> str:
    return ", ".join(_name(c.name) for c in table.columns)


def whole_table_query(table: SourceTable) -> tuple[str, list]:
    """Every row of a table read without chunk key."""
    return f"SELECT {columns_sql(table)} FROM {table_sql(table)}", []


def after_condition(key: ChunkKey, progress: ChunkProgress) -> tuple[str, list]:
    """The keys not read yet after ``progress`` (every non-NULL key when no bound was read)."""
    if progress.has_after:
        return f"{_name(key.name)} > {key.param_sql()}", [progress.after]
    return f"{_name(key.name)} IS NOT NULL", []


def nth_key_query(table: SourceTable, key: ChunkKey, progress: ChunkProgress, n: int,
                  extra: tuple[str, list] | None = None) -> tuple[str, list]:
    """The ``n``-th chunk-key value after ``progress`` in key order (no row: fewer remain)."""
    where, args = after_condition(key, progress)
    where, args = _and(where, args, extra)
    return (f"SELECT {_name(key.name)} FROM {table_sql(table)} WHERE {where} "
            f"ORDER BY {_name(key.name)} LIMIT 1 OFFSET {int(n) - 1}", args)


def max_key_query(table: SourceTable, key: ChunkKey, progress: ChunkProgress,
                  extra: tuple[str, list] | None = None) -> tuple[str, list]:
    """The largest chunk-key value after ``progress`` (NULL when there is none)."""
    where, args = after_condition(key, progress)
    where, args = _and(where, args, extra)
    return f"SELECT MAX({_name(key.name)}) FROM {table_sql(table)} WHERE {where}", args


def nulls_query(table: SourceTable, key: ChunkKey, extra: tuple[str, list] | None = None) -> tuple[str, list]:
    """The rows whose chunk key is NULL (a chunk of its own, read first)."""
    where, args = _and(f"{_name(key.name)} IS NULL", [], extra)
    return f"SELECT {columns_sql(table)} FROM {table_sql(table)} WHERE {where}", args


def range_query(table: SourceTable, key: ChunkKey, progress: ChunkProgress, upper: tuple[bool, Any],
                extra: tuple[str, list] | None = None) -> tuple[str, list]:
    """The rows whose key lies after ``progress`` up to ``upper`` (inclusive; ``(False, _)``: to the end)."""
    where, args = after_condition(key, progress)
    if upper[0]:
        where += f" AND {_name(key.name)} <= {key.param_sql()}"
        args.append(upper[1])
    where, args = _and(where, args, extra)
    return f"SELECT {columns_sql(table)} FROM {table_sql(table)} WHERE {where}", args


def limited_query(table: SourceTable, key: ChunkKey, progress: ChunkProgress, size: int,
                  extra: tuple[str, list] | None = None) -> tuple[str, list]:
    """The ``size`` rows after ``progress`` in key order, for a unique chunk key: the same rows as
    :func:`range_query` up to the ``size``-th key (the last row's key is that bound), with one statement, so the
    server reads each row once."""
    where, args = after_condition(key, progress)
    where, args = _and(where, args, extra)
    return (f"SELECT {columns_sql(table)} FROM {table_sql(table)} WHERE {where} ORDER BY {_name(key.name)} "
            f"LIMIT {int(size)}", args)


def ranges_condition(ranges: list) -> tuple[str, list] | None:
    """The condition that rows lie in every one of ``ranges`` (lakecdc.transform.partition_ranges.ColumnRange: a
    column IS NULL, = a value, or in [start, end)), as an ``extra`` of the chunk statements; None for no range."""
    parts: list[str] = []
    args: list = []
    for r in ranges:
        name = _name(r.column)
        if r.is_null:
            parts.append(f"{name} IS NULL")
        elif r.equals is not None:
            parts.append(f"{name} = %s")
            args.append(r.equals)
        else:
            parts.append(f"{name} >= %s AND {name} < %s")
            args += [r.start, r.end]
    return (" AND ".join(f"({p})" for p in parts), args) if parts else None


def _and(where: str, args: list, extra: tuple[str, list] | None) -> tuple[str, list]:
    """``where`` narrowed by an extra condition (a re-snapshot's partition range) when there is one."""
    if extra is None:
        return where, args
    condition, extra_args = extra
    return f"{where} AND ({condition})", args + list(extra_args)
