"""SQL over the warehouse through pypaimon-rust's DataFusion engine: an independent Paimon reader (it shares no
code with the writer path) used by ``lakecdc sql``, ``Catalog.sql`` and by the tests.

Queries are read-only unless the caller asks for writes: DataFusion also runs CREATE TABLE, INSERT and DROP TABLE,
which would bypass the table lock every lakecdc writer takes (two writers of one Paimon table lose commits). With
``write=True`` each table a writing statement names is locked for the statement; on an s3:// warehouse writing
statements are refused (pypaimon-rust's commit is not conditional there). Flink's table hints
(``/*+ OPTIONS('ignore-delete'='true') */``) are refused: DataFusion ignores them, so the hint would silently not
apply."""

from __future__ import annotations

import contextlib
import logging
import re

import pyarrow as pa

from lakecdc.errors import SinkError
from lakecdc.model import TableId
from lakecdc.sink import PaimonSink
from lakecdc.sink.catalog import normalize_catalog_options, storage_options
from lakecdc.sink.object_store import is_object_store

_HINT = re.compile(r"/\*\+\s*OPTIONS\s*\(", re.IGNORECASE)
_READ_COMMANDS = ("SHOW", "EXPLAIN", "DESCRIBE", "DESC")
_WRITE_WORDS = re.compile(r"\b(ANALYZE|INSERT|CREATE|DROP|DELETE|UPDATE|ALTER|COPY|TRUNCATE)\b", re.IGNORECASE)


def statement_tables(query: str) -> tuple[bool, list[TableId]]:
    """(whether the query writes, the db.table names its writing statements name). A statement sqlglot cannot
    read counts as a write, so it needs ``write=True``."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError, TokenError

    quiet = logging.getLogger("sqlglot")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # "falling back to parsing as a Command" is expected for SHOW/EXPLAIN
    try:
        statements = [s for s in sqlglot.parse(query, read="postgres") if s is not None]
    except (ParseError, TokenError):
        return True, []
    finally:
        quiet.setLevel(level)
    writes, tables = False, []
    for statement in statements:
        if isinstance(statement, (exp.Query, exp.Describe, exp.Show)):
            continue
        if isinstance(statement, exp.Command) and statement.this.upper() in _READ_COMMANDS \
                and not _WRITE_WORDS.search(statement.sql()):
            continue  # SHOW ..., EXPLAIN SELECT ... (EXPLAIN ANALYZE runs its statement)
        writes = True
        for table in statement.find_all(exp.Table):
            if table.name and table.db:
                tables.append(TableId(table.db, table.name))
    return writes, sorted(set(tables), key=str)


def run_sql(catalog_options: dict[str, str], query: str, *, write: bool = False,
            catalog_name: str = "lake") -> pa.Table:
    """Run SQL with the warehouse registered as the current catalog (refer to tables as db.table). Read-only
    unless ``write``; a writing statement then holds the lock of every table it names (TableLockedError when a
    pipeline run holds one)."""
    from pypaimon_rust.datafusion import SQLContext

    if _HINT.search(query):
        raise SinkError("table option hints (/*+ OPTIONS(...) */) are not supported: DataFusion would ignore them "
                        "silently. Remove the hint; to read a table without its deletes use the Python API "
                        "(lakecdc.paimon) or filter the rows")
    writes, tables = statement_tables(query)
    if writes and not write:
        raise SinkError("this statement would change the warehouse (INSERT, CREATE, DROP ...); lakecdc sql is "
                        "read-only unless --write is given (Catalog.sql(query, write=True)), which takes the "
                        "table lock of every table the statement names")
    if writes and not tables:
        raise SinkError("cannot tell which tables this statement changes, so their locks cannot be taken: write "
                        "INSERT/CREATE/DROP statements that name their tables as db.table")
    options = storage_options(normalize_catalog_options(catalog_options))
    if writes and is_object_store(options["warehouse"]):
        raise SinkError("writing SQL is not supported on an s3:// warehouse: DataFusion commits through "
                        "pypaimon-rust, which does not publish its snapshots by conditional put, so a concurrent "
                        "writer could lose a commit. Write through a pipeline or the Python API (lakecdc.paimon)")
    with contextlib.ExitStack() as locks:
        if writes:
            sink = PaimonSink(catalog_options)
            for table_id in tables:
                locks.enter_context(sink.lock(table_id, owner="lakecdc sql --write"))
        ctx = SQLContext()
        ctx.register_catalog(catalog_name, options, default_database="")
        ctx.set_current_catalog(catalog_name)
        batches = ctx.sql(query)
    if not batches:
        return pa.table({})
    return pa.Table.from_batches(batches)


def format_table(table: pa.Table) -> str:
    """Render rows like Flink SQL's tableau result mode (NULL as <NULL>, booleans as TRUE/FALSE)."""
    def text(value) -> str:
        if value is None:
            return "<NULL>"
        if isinstance(value, bool):
            return "TRUE" if value else "FALSE"
        return str(value)

    header = table.column_names
    rows = [[text(v) for v in row.values()] for row in table.to_pylist()]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [line, "| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |", line]
    out += ["| " + " | ".join(v.ljust(w) for v, w in zip(r, widths)) + " |" for r in rows]
    out += [line, f"{len(rows)} row(s) in set"]
    return "\n".join(out)


def show_create_table(catalog_options: dict[str, str], database: str, table: str) -> str:
    """A ``SHOW CREATE TABLE``-style definition of a Paimon table, read by pypaimon-rust."""
    from pypaimon_rust.datafusion import PaimonCatalog

    options = storage_options(normalize_catalog_options(catalog_options))
    paimon_table = PaimonCatalog(options).get_table(f"{database}.{table}")
    schema = paimon_table.schema()
    lines = [f"CREATE TABLE `{database}`.`{table}` ("]
    items = []
    for field in schema.fields():
        comment = f" COMMENT '{field.description()}'" if field.description() else ""
        items.append(f"  `{field.name()}` {field.field_type()}{comment}")
    if schema.primary_keys():
        items.append("  PRIMARY KEY (" + ", ".join(f"`{k}`" for k in schema.primary_keys()) + ") NOT ENFORCED")
    lines.append(",\n".join(items))
    lines.append(")" + (f" COMMENT '{schema.comment()}'" if schema.comment() else ""))
    if schema.partition_keys():
        lines.append("PARTITIONED BY (" + ", ".join(f"`{k}`" for k in schema.partition_keys()) + ")")
    if schema.options():
        lines.append("WITH (")
        lines.append(",\n".join(f"  '{k}' = '{v}'" for k, v in sorted(schema.options().items())))
        lines.append(")")
    return "\n".join(lines)
