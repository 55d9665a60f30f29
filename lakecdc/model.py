"""The few types every layer shares: table ids, binlog offsets, source schemas and batches of changes.

A batch of changes is an Arrow table holding the source columns (in source order) plus two system columns:
``OP_COLUMN`` (the row kind: ``+I``, ``-U``, ``+U``, ``-D``) and ``OP_TS_COLUMN`` (epoch milliseconds of the
change; 0 for snapshot rows). An UPDATE is always two consecutive rows, ``-U`` (before image) then ``+U``
(after image). Rows are in binlog order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pyarrow as pa

OP_COLUMN = "__lakecdc_op__"
OP_TS_COLUMN = "__lakecdc_op_ts__"
SYSTEM_COLUMNS = (OP_COLUMN, OP_TS_COLUMN)

INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = "+I", "-U", "+U", "-D"
ROW_KINDS = (INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE)


# Schema change event types, as Flink CDC tags them: lakecdc.source.ddl emits them, the sink options
# include.schema.changes / exclude.schema.changes name them
CREATE_TABLE, ADD_COLUMN, DROP_COLUMN, RENAME_COLUMN = "create.table", "add.column", "drop.column", "rename.column"
ALTER_COLUMN_TYPE, TRUNCATE_TABLE, DROP_TABLE = "alter.column.type", "truncate.table", "drop.table"
ALTER_TABLE_COMMENT = "alter.table.comment"
# A statement on a captured table that lakecdc cannot interpret (not a Flink CDC event type: the schema history stays
# as it was, and lakecdc.runtime.schema_evolution decides per schema.change.behavior whether the run may go on)
UNPARSED_DDL = "unparsed.ddl"
EVENT_TYPES = (CREATE_TABLE, ADD_COLUMN, DROP_COLUMN, RENAME_COLUMN, ALTER_COLUMN_TYPE, TRUNCATE_TABLE, DROP_TABLE,
               ALTER_TABLE_COMMENT)
EVENT_FAMILIES = {
    "all": EVENT_TYPES,
    "add": (ADD_COLUMN,),
    "alter": (ALTER_COLUMN_TYPE, ALTER_TABLE_COMMENT),
    "create": (CREATE_TABLE,),
    "drop": (DROP_COLUMN, DROP_TABLE),
    "rename": (RENAME_COLUMN,),
    "table": (CREATE_TABLE, DROP_TABLE, TRUNCATE_TABLE, ALTER_TABLE_COMMENT),
    "column": (ADD_COLUMN, ALTER_COLUMN_TYPE, DROP_COLUMN, RENAME_COLUMN),
    "truncate": (TRUNCATE_TABLE,),
}


@dataclass(frozen=True, order=True)
class TableId:
    """A MySQL or Paimon table: database plus table name (MySQL has no namespace level)."""

    database: str
    table: str

    def __str__(self) -> str:
        return f"{self.database}.{self.table}"

    @classmethod
    def parse(cls, text: str) -> "TableId":
        database, sep, table = text.partition(".")
        if not sep or not database or not table:
            raise ValueError(f"expected 'database.table', got {text!r}")
        return cls(database, table)


# Characters a Paimon database or table name cannot hold: '/' and '\\' would make the table's path leave its database
# directory ('../x'), '.' splits Paimon identifiers, '`' is Paimon's quoting and '$' marks its system tables
# ('t$snapshots'). Here, not in the sink, because routes check their targets with it before any table exists.
UNSAFE_PAIMON_NAME_CHARS = ("/", "\\", ".", "`", "$")


def paimon_name_problem(table_id: TableId) -> str | None:
    """Why a database or table name cannot be a Paimon table's (None when it can)."""
    for kind, name in (("database", table_id.database), ("table", table_id.table)):
        if not name or not name.strip():
            return f"its {kind} name is empty"
        bad = sorted({c for c in name if c in UNSAFE_PAIMON_NAME_CHARS or ord(c) < 32})
        if bad:
            return f"its {kind} name {name!r} contains {', '.join(map(repr, bad))}"
    return None


COMMENT_KEY = b"comment"  # Arrow field metadata: the column comment
DECLARED_TYPE_KEY = b"lakecdc.paimon-type"  # Arrow field metadata: the Paimon type to declare (VARCHAR(20), ...)
DEFAULT_KEY = b"lakecdc.default"  # Arrow field metadata: the column's default value as text
# The snapshot property every checkpoint carries (its binlog file; lakecdc.runtime.checkpoint has the others): sink
# upkeep finds checkpoints by it and never expires the newest snapshot that has it.
CHECKPOINT_KEY = "lakecdc.binlog.file"
# lakecdc's own files inside a warehouse, beside the tables: table locks, upkeep records, the S3 store probe
LAKECDC_DIR = ".lakecdc"
_SIZED_TYPE = re.compile(r"^(char|varchar|binary|varbinary)\((\d+)\)")
_TEMPORAL_PRECISION = re.compile(r"^(datetime|timestamp|time)\((\d)\)")

_BINLOG_INDEX = re.compile(r"\.(\d+)$")


@dataclass(frozen=True)
class BinlogOffset:
    """A position in the server's binlog: the file, the byte position where the next event starts, and the
    GTID set executed up to there (MariaDB ``domain-server-seq`` list or MySQL ``uuid:1-N``; may be empty)."""

    file: str
    pos: int
    gtid: str = ""

    @property
    def sort_key(self) -> tuple[int, str, int]:
        match = _BINLOG_INDEX.search(self.file)
        index = int(match.group(1)) if match else -1
        return (index, self.file, self.pos)

    def __lt__(self, other: "BinlogOffset") -> bool:
        return self.sort_key < other.sort_key

    def __le__(self, other: "BinlogOffset") -> bool:
        return self.sort_key <= other.sort_key

    def __gt__(self, other: "BinlogOffset") -> bool:
        return self.sort_key > other.sort_key

    def __ge__(self, other: "BinlogOffset") -> bool:
        return self.sort_key >= other.sort_key

    def same_position(self, other: "BinlogOffset") -> bool:
        return self.sort_key == other.sort_key

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}"


@dataclass(frozen=True)
class SourceColumn:
    """One column of a MySQL table as the pipeline sees it."""

    name: str
    column_type: str  # information_schema COLUMN_TYPE, e.g. "decimal(10,2)", "int(10) unsigned"
    arrow_type: pa.DataType
    nullable: bool = True
    comment: str = ""
    charset: str = ""  # character columns: information_schema CHARACTER_SET_NAME, e.g. "utf8mb4"
    collation: str = ""  # character columns: COLLATION_NAME, e.g. "utf8mb4_unicode_ci"
    default: str | None = None  # COLUMN_DEFAULT as text (None: no default / NULL)

    def arrow_field(self) -> pa.Field:
        return pa.field(self.name, self.arrow_type, nullable=self.nullable)

    @property
    def declared_type(self) -> str | None:
        """The Paimon type Flink CDC declares where Arrow cannot say it (CHAR(n), VARCHAR(n), BINARY(n),
        VARBINARY(n), TIMESTAMP(p), TIMESTAMP_LTZ(p), TIME(p)); None for the other columns, whose
        Arrow type maps one to one."""
        temporal = _TEMPORAL_PRECISION.match(self.column_type.strip().lower())
        if temporal and (pa.types.is_timestamp(self.arrow_type) or pa.types.is_time(self.arrow_type)):
            # Flink CDC keeps DATETIME(p)/TIMESTAMP(p)/TIME(p) as TIMESTAMP(p)/TIMESTAMP_LTZ(p)/TIME(p); Arrow's
            # unit says 0, 3 or 6 (the values are stored in that unit, their precision is p)
            precision = int(temporal.group(2))
            if temporal.group(1) == "time":
                return f"TIME({precision})"
            kind = "TIMESTAMP_LTZ" if getattr(self.arrow_type, "tz", None) else "TIMESTAMP"
            return f"{kind}({precision})"
        match = _SIZED_TYPE.match(self.column_type.strip().lower())
        sized = pa.types.is_string(self.arrow_type) or pa.types.is_binary(self.arrow_type) \
            or pa.types.is_fixed_size_binary(self.arrow_type)
        if not match or not sized:
            return None
        kind, length = match.group(1), int(match.group(2))
        if length < 1:
            return None  # CHAR(0) / BINARY(0): Paimon lengths start at 1
        return f"{kind.upper()}({length})"

    def sink_field(self) -> pa.Field:
        """The column as a pipeline output column: the Arrow field plus its comment and declared Paimon type,
        which table creation and schema evolution carry into Paimon."""
        metadata = {}
        if self.comment:
            metadata[COMMENT_KEY] = self.comment.encode()
        if self.declared_type:
            metadata[DECLARED_TYPE_KEY] = self.declared_type.encode()
        if self.default is not None:
            metadata[DEFAULT_KEY] = self.default.encode()
        return pa.field(self.name, self.arrow_type, nullable=self.nullable, metadata=metadata or None)

    def to_json(self) -> dict:
        return {"name": self.name, "type": self.column_type, "nullable": self.nullable, "comment": self.comment,
                "charset": self.charset, "collation": self.collation, "default": self.default}


@dataclass(frozen=True)
class OnlineSchemaChange:
    """A gh-ost or pt-online-schema-change migration of a captured table in progress (followed with the MySQL
    source's ``scan.parse.online.schema.changes.enabled``): the tool's shadow table in the same database and the
    ALTER TABLE statements run on it so far, as (default database, statement) in binlog order. It is kept in the
    table's schema history (so a migration may span micro-batches) until the RENAME that swaps the shadow table in,
    where the statements become the table's schema change (lakecdc.source.ddl)."""

    shadow: str
    statements: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict:
        return {"shadow": self.shadow, "statements": [list(s) for s in self.statements]}

    @classmethod
    def from_json(cls, data: dict) -> OnlineSchemaChange:
        return cls(str(data["shadow"]), tuple((str(db), str(sql)) for db, sql in data.get("statements") or ()))


@dataclass(frozen=True)
class SourceTable:
    """The schema of one captured MySQL table."""

    table_id: TableId
    columns: tuple[SourceColumn, ...]
    primary_keys: tuple[str, ...] = ()
    comment: str = ""
    online_change: OnlineSchemaChange | None = None  # a gh-ost / pt-osc migration in progress (not the schema)
    # the unique indexes whose columns are all NOT NULL (each identifies a row as a primary key would), in index
    # name order; what a table without primary key is chunked and folded by (not part of the schema's equality:
    # the binlog's DDL does not track indexes)
    unique_keys: tuple[tuple[str, ...], ...] = field(default=(), compare=False)

    @property
    def row_identity(self) -> tuple[str, ...]:
        """The columns that identify a row: the primary key, else the first unique NOT NULL index; () for neither."""
        if self.primary_keys:
            return self.primary_keys
        return self.unique_keys[0] if self.unique_keys else ()

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> SourceColumn:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    def arrow_schema(self) -> pa.Schema:
        """The source columns only."""
        return pa.schema([c.arrow_field() for c in self.columns])

    def change_schema(self) -> pa.Schema:
        """The source columns plus the two system columns of a change batch."""
        return change_schema(self.arrow_schema())

    def to_json(self) -> dict:
        """A JSON-able form (Arrow types are re-derived from the MySQL types when read back: source_schema_from_json
        in lakecdc.source.schema)."""
        data: dict = {"table": str(self.table_id), "columns": [c.to_json() for c in self.columns],
                      "primary_keys": list(self.primary_keys), "comment": self.comment}
        if self.unique_keys:
            data["unique_keys"] = [list(k) for k in self.unique_keys]
        if self.online_change is not None:
            data["online_change"] = self.online_change.to_json()
        return data


def change_schema(columns: pa.Schema) -> pa.Schema:
    return pa.schema(
        list(columns)
        + [pa.field(OP_COLUMN, pa.string(), nullable=False), pa.field(OP_TS_COLUMN, pa.int64(), nullable=False)]
    )


@dataclass
class ChangeBatch:
    """Changes of one table, in binlog order (see the module docstring for the layout of ``data``)."""

    table: SourceTable
    data: pa.Table
    # binlog batches: the commit positions of the first and last transaction whose rows the batch holds
    first_commit: BinlogOffset | None = None
    last_commit: BinlogOffset | None = None

    @property
    def num_rows(self) -> int:
        return self.data.num_rows


@dataclass
class TableCounts:
    """How many source changes of each kind a run applied to one table."""

    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    extra: dict = field(default_factory=dict)
