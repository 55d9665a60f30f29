"""Opening the Paimon catalog from the sink's ``catalog.properties.*`` and locating the warehouse on disk."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlparse

from lakecdc.collector import imports_outside_collection
from lakecdc.errors import SinkError
from lakecdc.model import TableId, paimon_name_problem
from lakecdc.sink import object_store

SUPPORTED_METASTORES = ("filesystem", "jdbc")


def normalize_catalog_options(catalog_options: dict[str, str]) -> dict[str, str]:
    """Validate the catalog options and return them with a plain relative warehouse path made absolute."""
    options = {str(k): str(v) for k, v in (catalog_options or {}).items()}
    metastore = options.get("metastore", "filesystem")
    if metastore not in SUPPORTED_METASTORES:
        raise SinkError(
            f"catalog.properties.metastore: {metastore!r} is not supported by lakecdc's Paimon sink "
            f"(supported: {', '.join(SUPPORTED_METASTORES)}; pypaimon has no hive catalog)"
        )
    warehouse = options.get("warehouse", "").strip()
    if not warehouse:
        raise SinkError("catalog.properties.warehouse is required")
    problem = object_store.warehouse_problem(warehouse)
    if problem:
        raise SinkError(f"catalog.properties.warehouse: {problem}")
    if "://" not in warehouse:
        warehouse = os.path.abspath(os.path.expanduser(warehouse))
    options["warehouse"] = warehouse
    if object_store.is_object_store(warehouse):
        options = object_store.normalize_s3_options(options)
    return options


def storage_options(catalog_options: dict[str, str]) -> dict[str, str]:
    """What an independent reader (pypaimon-rust) needs to open the warehouse of normalized catalog options: the
    warehouse, and for an object store its endpoint, region, addressing and credentials."""
    warehouse = catalog_options["warehouse"]
    return {k: v for k, v in catalog_options.items()
            if k == "warehouse" or (object_store.is_object_store(warehouse) and k.startswith("s3."))}


def local_warehouse_path(warehouse: str) -> Path | None:
    """The local directory of a plain-path or ``file://`` warehouse; None for object stores, HDFS, ..."""
    if "://" not in warehouse:
        return Path(warehouse)
    parsed = urlparse(warehouse)
    if parsed.scheme == "file" and parsed.netloc in ("", "localhost"):
        return Path(unquote(parsed.path))
    return None


def create_catalog(options: dict[str, str], file_io=None):
    """pypaimon's catalog for normalized options; on an object store its file IO publishes metadata files by
    conditional put (lakecdc.sink.object_store). ``file_io``: the file IO to use instead of the catalog's own (the
    one lakecdc.sink.metadata.open_file_io made for these options, so metadata reads and writes share it)."""
    with imports_outside_collection():  # importing pypaimon's catalog (lakecdc.collector); the import only
        from pypaimon import CatalogFactory  # heavy: lazy for start-up time (pandas, polars, pypaimon's read stack)

    try:
        catalog = CatalogFactory.create(dict(options))
    except Exception as error:  # pypaimon raises ValueError/KeyError/OSError/... for bad options
        raise SinkError(f"cannot open the Paimon catalog {options.get('warehouse')!r}: {error}") from error
    if object_store.is_object_store(options["warehouse"]):
        if type(catalog).__name__ != "FileSystemCatalog" or not hasattr(catalog, "file_io"):
            raise SinkError(f"catalog.properties.metastore: object-store warehouses need the filesystem metastore "
                            f"(got {options.get('metastore')!r})")
        if file_io is None:
            file_io = object_store.conditional_file_io(
                options["warehouse"], catalog.catalog_options, object_store.S3Settings.from_options(options))
    if file_io is not None:
        catalog.file_io = file_io
    return catalog


def identifier(table_id: TableId) -> str:
    problem = paimon_name_problem(table_id)
    if problem:
        raise SinkError(f"{table_id.database!r}.{table_id.table!r} cannot be a Paimon table: {problem} (path "
                        "separators, dots, backticks and '$' are not allowed in Paimon names)")
    return f"{table_id.database}.{table_id.table}"
