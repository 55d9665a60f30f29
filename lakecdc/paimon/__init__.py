"""lakecdc's Python API for Paimon tables (docs/python-api.md): what Paimon's Flink API gives Java users.

* Write a changelog (``+I``, ``-U``, ``+U``, ``-D``) from Python rows, Arrow, pandas or polars, checked against the
  table schema, as one snapshot per commit; ``overwrite`` only when asked; ``parallelism`` writers on fixed-bucket
  tables.
* Read the state of the latest snapshot, of a snapshot id or of a timestamp, with projection, a ``where`` filter
  and a limit, to Arrow, pandas, polars or DuckDB; read the changes between two snapshots with their row kinds,
  optionally without ``-U``/``-D`` (``ignore_delete``), or the changes a Paimon consumer has not read yet
  (``consumer_id``), committed when used.
* Write ``CdcRecord``s (field name, type, string value, like ``RichCdcRecord``), adding missing columns first.
* Table options are validated: merge engines, delete handling, sequence fields and changelog producers that the
  storage library cannot honour correctly are refused with a message rather than written wrongly.

Every write goes through the native (Rust) writer with the table lock, as the pipeline's writes do.

    from lakecdc.paimon import Catalog, Row, RowKind
    catalog = Catalog("/tmp/warehouse")
    table = catalog.create_table("my_db.my_table", [("f0", "STRING"), ("f1", "INT")], primary_keys=["f0"],
                                 options={"bucket": "2"})
    table.write([Row.of_kind(RowKind.INSERT, "Alice", 12), Row.of_kind(RowKind.INSERT, "Bob", 5)])
    table.read().to_pandas()
"""

from lakecdc.errors import CommitConflictError, SinkError
from lakecdc.paimon.cdc import CdcField, CdcRecord, CdcRecordBuilder
from lakecdc.paimon.read import ReadResult
from lakecdc.paimon.rows import ROW_KIND_COLUMN, Row, RowKind
from lakecdc.paimon.table import Catalog, ConsumerChanges, SnapshotInfo, Table, TableWrite, WriteResult
from lakecdc.sink.consumers import ConsumerState

__all__ = ["Catalog", "Table", "TableWrite", "WriteResult", "SnapshotInfo", "ReadResult", "Row", "RowKind",
           "ROW_KIND_COLUMN", "ConsumerChanges", "ConsumerState",
           "CdcRecord", "CdcRecordBuilder", "CdcField", "SinkError", "CommitConflictError"]
