"""Comparing a Paimon table with its MySQL table, row for row (shared by the crash matrix, the differential test
and the concurrency tests).

MySQL is read with plain SQL, Paimon through pypaimon-rust's DataFusion engine (an independent reader that shares
no code with the writer). Rows are compared as multisets, so a duplicated row (an append table written twice) or a
lost one is a difference, and a primary-key table must have each key once.
"""

from __future__ import annotations

import datetime
import decimal
from collections import Counter

from lakecdc.sink.sql import run_sql


def normal(value):
    """One comparable spelling for values that the two readers return as different Python types."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, datetime.datetime):
        return value.replace(tzinfo=None).isoformat(sep=" ")
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (int, decimal.Decimal)):
        # numbers as text: Paimon keeps BIGINT UNSIGNED as DECIMAL(20,0) and DECIMAL(p > 38) as STRING
        return str(value)
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def query(mysql, sql: str, args=None) -> list[tuple]:
    """Rows of one statement; ``mysql`` is the ``mariadb`` fixture (a new connection) or an open connection."""
    if hasattr(mysql, "cursor"):
        with mysql.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())
    return list(mysql.execute(sql, args))


def mysql_rows(mysql, db: str, table: str, columns: list[str]) -> list[tuple]:
    sql = f"SELECT {', '.join(quote(c) for c in columns)} FROM {quote(db)}.{quote(table)}"
    return [tuple(normal(v) for v in row) for row in query(mysql, sql)]


def mysql_columns(mysql, db: str, table: str) -> list[str]:
    """The table's columns as MySQL has them now (they change with DDL)."""
    rows = query(mysql, "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND "
                        "TABLE_NAME = %s ORDER BY ORDINAL_POSITION", (db, table))
    return [r[0] for r in rows]


def paimon_rows(catalog_options: dict, db: str, table: str, columns: list[str]) -> list[tuple]:
    def q(name: str) -> str:
        return '"' + name.replace('"', '""') + '"'
    result = run_sql(catalog_options, f"SELECT {', '.join(q(c) for c in columns)} FROM {q(db)}.{q(table)}")
    return [tuple(normal(v) for v in row.values()) for row in result.to_pylist()]


def _short(row: tuple) -> tuple:
    """A row for an error message: long values as their length and hash."""
    import hashlib

    def short(v):
        if isinstance(v, (str, bytes)) and len(v) > 60:
            digest = hashlib.sha1(v if isinstance(v, bytes) else v.encode()).hexdigest()[:10]
            return f"<{type(v).__name__} of {len(v)}, sha1 {digest}, {v[:20]!r}...>"
        return v
    return tuple(short(v) for v in row)


def difference(want: list[tuple], got: list[tuple], limit: int = 8) -> str:
    """A short description of how two row multisets differ ('' when equal)."""
    w, g = Counter(want), Counter(got)
    if w == g:
        return ""
    missing = [_short(r) for r in sorted((w - g).elements(), key=repr)]
    extra = [_short(r) for r in sorted((g - w).elements(), key=repr)]
    dupes = [_short(r) for r in sorted((r for r, n in g.items() if n > 1), key=repr)]
    return (f"{len(want)} rows in MySQL, {len(got)} in Paimon; missing from Paimon {len(missing)}: "
            f"{missing[:limit]}; extra in Paimon {len(extra)}: {extra[:limit]}; duplicated in Paimon: {dupes[:limit]}")


def assert_same_rows(mysql, catalog_options: dict, db: str, table: str, columns: list[str] | None = None, *,
                     target_db: str | None = None, target_table: str | None = None, context: str = "") -> int:
    """Paimon ``target_db.target_table`` holds exactly the rows of MySQL ``db.table`` (as a multiset) in ``columns``
    (default: every column MySQL has now); returns the count. ``mysql``: the fixture or a connection."""
    columns = columns or mysql_columns(mysql, db, table)
    want = mysql_rows(mysql, db, table, columns)
    got = paimon_rows(catalog_options, target_db or db, target_table or table, columns)
    problem = difference(want, got)
    assert not problem, f"{context}: {db}.{table}: {problem}"
    return len(want)


def seeds(ci: int, long: int, *, first: int = 1) -> list[int]:
    """The seeds a randomised test runs: ``ci`` of them by default, ``long`` with ``LAKECDC_LONG=1``, or only
    ``LAKECDC_SEED=n`` (replay one failure: the seed is in the test id and in every assertion message)."""
    import os

    if os.environ.get("LAKECDC_SEED"):
        return [int(s) for s in os.environ["LAKECDC_SEED"].split(",")]
    count = long if os.environ.get("LAKECDC_LONG", "") not in ("", "0") else ci
    return list(range(first, first + count))
