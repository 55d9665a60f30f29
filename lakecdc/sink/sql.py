"""SQL over the warehouse through pypaimon-rust's DataFusion engine: an independent Paimon reader (it shares no
code with the writer path) used by ``lakecdc sql`` and by the tests."""

from __future__ import annotations

import pyarrow as pa


def run_sql(catalog_options: dict[str, str], query: str, *, catalog_name: str = "lake") -> pa.Table:
    """Run one SQL query with the warehouse registered as the current catalog (refer to tables as db.table)."""
    from pypaimon_rust.datafusion import SQLContext

    ctx = SQLContext()
    options = {k: v for k, v in catalog_options.items() if k in ("warehouse",)}
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

    options = {k: v for k, v in catalog_options.items() if k in ("warehouse",)}
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
