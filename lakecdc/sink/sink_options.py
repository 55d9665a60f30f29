"""The options of the Paimon sink (the ``sink:`` block of a Flink CDC pipeline YAML), declared once.

Every ``sink:`` option is declared here, as Flink CDC's ``PaimonDataSinkOptions`` declares them: on the
:class:`PaimonSinkOptions` field it fills (with :func:`lakecdc.options.option`), or in :data:`CATALOG` for the
catalog options lakecdc checks itself. :func:`from_yaml` reads a ``sink:`` block; docs/pipeline-yaml.md renders its
table from :data:`OPTIONS`. (lakecdc.sink.options is about Paimon *table* options; lakecdc.config checks those
against the transforms.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lakecdc.errors import SinkError
from lakecdc.model import EVENT_FAMILIES, EVENT_TYPES, TableId
from lakecdc.options import (ANY, STRING, Option, Prefix, Where, check_keys, declarations, option, prefixed,
                             read)
from lakecdc.sink import object_store

CATALOG_PREFIX = "catalog.properties."
METASTORE = "filesystem"  # the one metastore the sink writes through


def _partition_keys(text: str, where: Where) -> dict[TableId, list[str]]:
    result: dict[TableId, list[str]] = {}
    for item in (p.strip() for p in text.split(";")):
        if not item:
            continue
        if item.count(":") != 1:
            raise where.error(f"expected 'db.table:col1,col2' items, got {item!r}")
        table, columns = item.split(":")
        try:
            table_id = TableId.parse(table.strip())
        except ValueError as exc:
            raise where.error(str(exc)) from None
        result[table_id] = [c.strip() for c in columns.split(",") if c.strip()]
    return result


def _schema_change_types(value: Any, where: Where) -> tuple[str, ...]:
    """A list of schema change event types or families (Flink CDC: ``[column, drop.table]``), expanded."""
    items = value if isinstance(value, list) else str(value).strip("[]").split(",")
    expanded: list[str] = []
    for item in items:
        tag = str(item).strip().strip("'\"").lower()
        if not tag:
            continue
        if tag in EVENT_TYPES:
            expanded.append(tag)
        elif tag in EVENT_FAMILIES:
            expanded += EVENT_FAMILIES[tag]
        else:
            raise where.error(f"unknown schema change type {item!r}; use event types ({', '.join(EVENT_TYPES)}) or "
                              f"families ({', '.join(sorted(EVENT_FAMILIES))})")
    return tuple(dict.fromkeys(expanded))


_SCHEMA_CHANGES_DOC = ("which schema change events reach Paimon: event types (`add.column`, `drop.table`, ...) or "
                       "families (`column`, `drop`, ...), a list or a comma-separated string; see "
                       "[schema-changes.md](schema-changes.md)")


@dataclass
class PaimonSinkOptions:
    """The Paimon catalog the pipeline writes to and how its tables are created and committed."""

    # may hold S3 keys (from ${VAR} only)
    catalog_options: dict[str, str] = prefixed(
        CATALOG_PREFIX, repr=False,
        doc="`table-default.*`: Paimon's default options of every table the pipeline creates, below "
            "`table.properties` and a transform's `table-options` (`catalog.properties.table-default.bucket: 4`). "
            "Any other catalog option is refused, naming it: lakecdc would not act on it")
    table_properties: dict[str, str] = prefixed(
        "table.properties.",
        doc="Paimon options for every table the pipeline creates (`table.properties.bucket: 4`); the table upkeep "
            "options `snapshot.num-retained.min` (10), `snapshot.num-retained.max` (unbounded), "
            "`snapshot.time-retained` (1 h), `snapshot.expire.limit` (10), `num-sorted-run.compaction-trigger` (5), "
            "`compaction.min.file-num` (5), `compaction.total-size-threshold` (unset), "
            "`manifest.merge-min-count` (30), `manifest.target-file-size` (8 mb) and "
            "`write-only` (false) are validated when the file is loaded and also apply, as the current values, to "
            "tables that already exist ([operations.md](operations.md#table-upkeep))")
    partition_keys: dict[TableId, list[str]] = option(
        "partition.key", STRING, {}, convert=_partition_keys,
        doc="`db.t1:c1,c2;db.t2:c3`, takes precedence over transform `partition-keys`")
    commit_user_prefix: str = option("commit.user-prefix", STRING, "admin", fallback_keys=("commit.user",),
                                     doc="commit user prefix; a UUID is appended")
    name: str | None = option("name", STRING, None, doc="free text")
    # include.schema.changes / exclude.schema.changes, expanded to event types (None: the option is absent)
    include_schema_changes: tuple[str, ...] | None = option("include.schema.changes", ANY, None,
                                                            convert=_schema_change_types, doc=_SCHEMA_CHANGES_DOC)
    exclude_schema_changes: tuple[str, ...] | None = option("exclude.schema.changes", ANY, None,
                                                            convert=_schema_change_types, doc=_SCHEMA_CHANGES_DOC)

    @property
    def new_table_options(self) -> dict[str, str]:
        """The options of every table the pipeline creates before a transform's ``table-options``: the catalog's
        ``table-default.*``, then ``table.properties``."""
        return {**table_defaults(self.catalog_options), **self.table_properties}


TABLE_DEFAULT_PREFIX = "table-default."  # Paimon's CatalogOptions.TABLE_DEFAULT_OPTION_PREFIX


def table_defaults(catalog_options: dict[str, str]) -> dict[str, str]:
    """The table options Paimon's catalog gives every table it creates (``table-default.*``, the prefix removed):
    the lowest layer, below the table's own options."""
    return {k[len(TABLE_DEFAULT_PREFIX):]: v for k, v in catalog_options.items()
            if k.startswith(TABLE_DEFAULT_PREFIX) and len(k) > len(TABLE_DEFAULT_PREFIX)}


def unused_catalog_option(catalog_options: dict[str, str]) -> str | None:
    """The first catalog option lakecdc does not act on (None when it acts on every one): it knows the metastore,
    the warehouse, the S3 options of an s3:// warehouse and ``table-default.*``."""
    for key in catalog_options:
        if key in ("metastore", "warehouse") or (key.startswith(TABLE_DEFAULT_PREFIX) and len(key) >
                                                 len(TABLE_DEFAULT_PREFIX)):
            continue
        if object_store.canonical_s3_option(key) is None:
            return key
    return None


TYPE = Option("type", STRING, required=True, doc="must be `paimon`",
              check=lambda kind: None if kind.lower() == "paimon" else
              f"only the 'paimon' sink is supported, got {kind!r}")
# catalog options lakecdc checks (they stay in ``catalog_options``)
CATALOG = (
    Option(f"{CATALOG_PREFIX}metastore", STRING, None, default_doc="required", doc=f"`{METASTORE}`",
           check=lambda m: None if m == METASTORE else f"only the '{METASTORE}' metastore is supported, got {m!r}"),
    Option(f"{CATALOG_PREFIX}warehouse", STRING, None, default_doc="required",
           check=lambda w: object_store.warehouse_problem(w.strip()),
           doc="a local path, `file://` URI or `s3://bucket/path` (other stores are refused: "
               "[operations.md](operations.md#object-store-warehouses))"),
    Prefix(f"{CATALOG_PREFIX}s3.", doc="for an `s3://` warehouse: `s3.endpoint`, `s3.region`, `s3.access-key` and "
                                       "`s3.secret-key` (only as `${VAR}`; without them the AWS default credential "
                                       "chain), `s3.session-token`, `s3.path.style.access`; Hadoop spellings "
                                       "(`fs.s3a.access.key`, ...) accepted"),
)
# every option of the ``sink:`` block
OPTIONS: tuple[Option | Prefix, ...] = (TYPE, *CATALOG, *declarations(PaimonSinkOptions))


def from_yaml(raw: dict, file: str | None, section: str = "sink") -> PaimonSinkOptions:
    """The ``sink:`` block of a pipeline YAML as options; every error names the file and the key path."""
    TYPE.read(raw, section, file)
    check_keys(raw, section, file, OPTIONS)
    sink = PaimonSinkOptions(**read(PaimonSinkOptions, raw, section, file))
    for spec in CATALOG:
        spec.read(raw, section, file)
    unused = unused_catalog_option(sink.catalog_options)
    if unused is not None:
        raise Where(file, f"{section}.{CATALOG_PREFIX}{unused}").error(
            "a catalog option lakecdc does not act on, refused rather than ignored: lakecdc reads metastore, "
            "warehouse, the s3.* options and table-default.* (table options go in table.properties or "
            f"{CATALOG_PREFIX}table-default.*)")
    for key in ("metastore", "warehouse"):
        if not sink.catalog_options.get(key):
            raise Where(file, f"{section}.{CATALOG_PREFIX}{key}").error(
                "required option is missing" + (f" (use: {METASTORE})" if key == "metastore" else ""))
    if object_store.is_object_store(sink.catalog_options["warehouse"].strip()):
        try:
            object_store.S3Settings.from_options(sink.catalog_options)
        except SinkError as exc:
            raise Where(file, section).error(str(exc)) from None
    return sink
