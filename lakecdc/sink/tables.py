"""Paimon table creation as Flink CDC's Paimon sink does it (PaimonMetadataApplier.applyCreateTable), Arrow → Paimon
type mapping, option validation, and the description of an existing table."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from lakecdc.errors import SinkError
from lakecdc.model import DECLARED_TYPE_KEY, SYSTEM_COLUMNS, TableId
from lakecdc.sink.options import (AGGREGATE_FUNCTIONS, COMPACTION_CHANGELOG_PRODUCERS, aggregate_functions,
                                  sequence_groups, unsupported_row_kinds)


@dataclass
class TableDescription:
    """A Paimon table as stored."""

    table_id: TableId
    schema: pa.Schema  # as stored (PK columns non-nullable)
    primary_keys: list[str]
    partition_keys: list[str]
    options: dict[str, str]
    comment: str
    created: bool  # True when ensure_table created it just now
    # column → Paimon type as stored (``BIGINT NOT NULL``, ``TIMESTAMP(6)``), in column order
    paimon_types: dict[str, str] = field(default_factory=dict)

    @property
    def is_primary_key_table(self) -> bool:
        return bool(self.primary_keys)


# Options that decide the table layout: set through the transform's primary-keys/partition-keys instead.
_LAYOUT_OPTIONS = ("primary-key", "partition")


def paimon_arrow_type(table_id: TableId, name: str, arrow_type: pa.DataType) -> pa.DataType:
    """The Arrow type to store for a source column: Paimon has no unsigned integers, so they are widened the way
    Flink CDC maps MySQL unsigned types (TINYINT UNSIGNED → SMALLINT, SMALLINT UNSIGNED → INT, INT UNSIGNED →
    BIGINT, BIGINT UNSIGNED → DECIMAL(20, 0)); dictionary columns are stored as their value type. Types Paimon
    cannot store raise SinkError naming the table and the column."""
    t = arrow_type
    if pa.types.is_dictionary(t):
        return paimon_arrow_type(table_id, name, t.value_type)
    widen = {pa.uint8(): pa.int16(), pa.uint16(): pa.int32(), pa.uint32(): pa.int64(),
             pa.uint64(): pa.decimal128(20, 0)}
    if t in widen:
        return widen[t]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(t.value_field.with_type(paimon_arrow_type(table_id, name, t.value_type)))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(paimon_arrow_type(table_id, f"{name}.{f.name}", f.type))
                          for f in (t.field(i) for i in range(t.num_fields))])
    if pa.types.is_map(t):
        return pa.map_(paimon_arrow_type(table_id, name, t.key_type), paimon_arrow_type(table_id, name, t.item_type))
    if pa.types.is_float16(t):
        return pa.float32()
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    from pypaimon.schema.data_types import PyarrowFieldParser

    try:
        PyarrowFieldParser.to_paimon_type(t, True)
    except Exception as error:
        raise SinkError(f"table {table_id}, column {name!r}: type {t} cannot be stored in Paimon ({error})") from None
    return t


def build_schema(table_id: TableId, schema: pa.Schema, primary_keys: list[str], partition_keys: list[str],
                 options: dict[str, str], comment: str):
    """The pypaimon Schema of a new table (as PaimonMetadataApplier.applyCreateTable builds it)."""
    from pypaimon import Schema

    names = schema.names
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SinkError(f"table {table_id}: duplicate column(s) {', '.join(dup)}")
    for n in names:
        if n in SYSTEM_COLUMNS or n == "_VALUE_KIND" or n.startswith("_KEY_") or n in ("_SEQUENCE_NUMBER",):
            raise SinkError(f"table {table_id}, column {n!r}: reserved name, cannot be a table column")
    for kind, keys in (("primary key", primary_keys), ("partition key", partition_keys)):
        for k in keys:
            if k not in names:
                raise SinkError(f"table {table_id}: {kind} column {k!r} is not a column of the table "
                                f"(columns: {', '.join(names)})")
        if len(set(keys)) != len(keys):
            raise SinkError(f"table {table_id}: duplicate {kind} columns {keys}")
    # Flink CDC: PK = schema PK + every partition column not already in it; no PK → append table.
    pk = list(primary_keys) + [p for p in partition_keys if p not in primary_keys] if primary_keys else []
    for k in _LAYOUT_OPTIONS:
        if k in options:
            raise SinkError(f"table {table_id}: option {k!r} is not allowed; set primary-keys / partition-keys "
                            f"in the transform (or partition.key in the sink) instead")
    fields = []
    for f in schema:
        metadata = dict(f.metadata or {})
        if b"comment" in metadata and b"description" not in metadata:
            metadata[b"description"] = metadata[b"comment"]
        kept = {k: v for k, v in metadata.items() if k == b"description"} or None
        fields.append(pa.field(f.name, paimon_arrow_type(table_id, f.name, f.type),
                               nullable=f.nullable and f.name not in pk, metadata=kept))
    for p in partition_keys:
        t = next(f.type for f in fields if f.name == p)
        if pa.types.is_floating(t) or pa.types.is_binary(t) or pa.types.is_fixed_size_binary(t) \
                or pa.types.is_nested(t):
            raise SinkError(f"table {table_id}, partition column {p!r}: type {t} cannot be a partition key "
                            f"(the native Paimon writer cannot encode float, binary or nested partition values)")
    validate_options(table_id, options, has_primary_key=bool(pk), columns=names)
    try:
        paimon_schema = Schema.from_pyarrow_schema(pa.schema(fields), partition_keys=list(partition_keys),
                                                   primary_keys=pk, options=dict(options), comment=comment or None)
    except Exception as error:
        raise SinkError(f"table {table_id}: invalid table definition: {error}") from error
    _keep_time_precision(paimon_schema, fields)
    declare_sized_types(paimon_schema.fields, schema)
    return paimon_schema


def declared_type(arrow_field: pa.Field) -> str | None:
    """The CHAR(n)/VARCHAR(n)/BINARY(n)/VARBINARY(n)/TIMESTAMP(p)/TIME(p) a source column declares (Flink CDC's type
    mapping keeps the length and the precision, which Arrow's types do not carry)."""
    value = (arrow_field.metadata or {}).get(DECLARED_TYPE_KEY)
    t = arrow_field.type
    if value is None:
        return None
    text = value.decode()
    is_text = pa.types.is_string(t) or pa.types.is_large_string(t)
    is_bytes = pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)
    if (text.startswith(("CHAR", "VARCHAR")) and is_text) or (text.startswith(("BINARY", "VARBINARY")) and is_bytes):
        return text
    if (text.startswith("TIMESTAMP(" if not getattr(t, "tz", None) else "TIMESTAMP_LTZ(")
            and pa.types.is_timestamp(t)) \
            or (text.startswith("TIME(") and pa.types.is_time(t)):
        return text  # a precision Arrow's unit does not say (DATETIME(2) → TIMESTAMP(2), as Flink CDC)
    return None


def declare_sized_types(data_fields, schema: pa.Schema) -> None:
    """Declare the sized Paimon types of ``schema``'s source columns on pypaimon DataFields (in place)."""
    from pypaimon.schema.data_types import AtomicType

    by_name = {f.name: f for f in schema}
    for data_field in data_fields:
        arrow_field = by_name.get(data_field.name)
        sized = declared_type(arrow_field) if arrow_field is not None else None
        if sized is not None and isinstance(data_field.type, AtomicType):
            data_field.type = AtomicType(sized, data_field.type.nullable)


TIME_PRECISION = {"s": 0, "ms": 3, "us": 6, "ns": 9}


def _keep_time_precision(paimon_schema, fields: list[pa.Field]) -> None:
    """pypaimon declares every Arrow time type as TIME(0); declare TIME(p) like Flink CDC does. (Paimon stores TIME
    values as milliseconds of the day whatever p is, and pypaimon reads them back as time32[ms].)"""
    from pypaimon.schema.data_types import AtomicType

    by_name = {f.name: f for f in fields}
    for data_field in paimon_schema.fields:
        arrow_field = by_name.get(data_field.name)
        if arrow_field is not None and pa.types.is_time(arrow_field.type) and isinstance(data_field.type, AtomicType):
            precision = TIME_PRECISION[arrow_field.type.unit]
            data_field.type = AtomicType(f"TIME({precision})", data_field.type.nullable)


def validate_options(table_id: TableId, options: dict[str, str], has_primary_key: bool,
                     columns: list[str] | None = None) -> None:
    """Parse every option pypaimon knows with its declared type (pypaimon itself accepts e.g.
    ``merge-engine: foo`` at creation and fails on the first write), and refuse settings with which the data
    would be written by the wrong writer, stay invisible or never produce changes (lakecdc.sink.options).
    ``columns`` (when known) lets option values that name columns be checked."""
    from pypaimon.common.options.config_option import ConfigOption
    from pypaimon.common.options.core_options import CoreOptions, MergeEngine
    from pypaimon.common.options.options import Options

    for key, value in options.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise SinkError(f"table {table_id}: option {key!r}={value!r}: keys and values must be strings")
    parsed = Options(dict(options))
    for attr in vars(CoreOptions).values():
        if isinstance(attr, ConfigOption) and attr.key() in options:
            try:
                parsed.get(attr)
            except Exception as error:
                raise SinkError(f"table {table_id}: invalid option {attr.key()}={options[attr.key()]!r}: {error}") \
                    from None
    core = CoreOptions(parsed)

    def refuse(key: str, why: str) -> None:
        raise SinkError(f"table {table_id}: option {key}={options.get(key)!r} is not supported: {why}")

    if "file.format" in options and core.file_format() != "parquet":
        refuse("file.format", "only parquet is written by the native Paimon writer (the Python writer loses deletes)")
    if "changelog-file.format" in options and core.changelog_file_format() not in (None, "parquet"):
        refuse("changelog-file.format", "only parquet is written by the native Paimon writer")
    if "bucket" in options:
        bucket = core.bucket()
        if bucket == 0 or bucket < -1:
            refuse("bucket", "use -1 (dynamic, the default) or a fixed bucket count > 0; postpone buckets (-2) "
                             "stay invisible until a Flink/Java compaction runs")
    if not has_primary_key and "bucket" in options and core.bucket() > 0 and not options.get("bucket-key"):
        refuse("bucket", "a table without primary key (an append table) with a fixed bucket count needs a "
                         "bucket-key (Paimon: 'You should define a bucket-key for bucketed append mode'); set "
                         "table.properties.bucket-key, give the table primary-keys in a transform, or use bucket -1")
    if has_primary_key and core.deletion_vectors_enabled():
        refuse("deletion-vectors.enabled", "pypaimon/pypaimon-rust only write level-0 files, which deletion-vector "
                                           "tables do not read until a compaction runs (reads stay empty)")
    if has_primary_key and "merge-engine" in options and core.merge_engine() == MergeEngine.FIRST_ROW:
        refuse("merge-engine", "first-row tables do not read level-0 files, the only files pypaimon writes, so reads "
                               "stay empty until a Flink/Java compaction runs")
    producer = str(options.get("changelog-producer", "none")).strip().lower()
    if has_primary_key and producer in COMPACTION_CHANGELOG_PRODUCERS:
        refuse("changelog-producer", f"the {producer} changelog is produced by compactions, which pypaimon and "
                                     f"pypaimon-rust never run, so no change would ever be read; use 'input' (the "
                                     f"written rows with their row kinds) or 'none'")
    _check_engine_options(table_id, options, columns, refuse)


def _check_engine_options(table_id: TableId, options: dict[str, str], columns: list[str] | None, refuse) -> None:
    """Aggregate function names, and (when the columns are known) that options name existing columns."""
    functions = aggregate_functions(options, None)
    for column, function in functions.items():
        if function not in AGGREGATE_FUNCTIONS:
            key = "fields.default-aggregate-function" if column == "*" else f"fields.{column}.aggregate-function"
            refuse(key, f"unknown aggregate function {function!r} (known: {', '.join(sorted(AGGREGATE_FUNCTIONS))})")
    if columns is None:
        return
    named = [("sequence.field", c.strip()) for c in str(options.get("sequence.field", "")).split(",") if c.strip()]
    for group, fields in sequence_groups(options).items():
        key = f"fields.{group}.sequence-group"
        named += [(key, g.strip()) for g in group.split(",")] + [(key, f) for f in fields]
    named += [(f"fields.{c}.aggregate-function", c) for c in functions if c != "*"]
    for key, column in named:
        if column not in columns:
            refuse(key, f"column {column!r} is not a column of the table (columns: {', '.join(columns)})")


def describe_table(table_id: TableId, table, created: bool) -> TableDescription:
    """The TableDescription of a pypaimon FileStoreTable."""
    from pypaimon.schema.data_types import PyarrowFieldParser

    schema = PyarrowFieldParser.from_paimon_schema(table.table_schema.fields)
    return TableDescription(
        table_id=table_id,
        schema=schema,
        primary_keys=list(table.primary_keys),
        partition_keys=list(table.partition_keys),
        options={str(k): str(v) for k, v in (table.table_schema.options or {}).items() if v is not None},
        comment=table.comment() or "",
        created=created,
        paimon_types={f.name: str(f.type) for f in table.table_schema.fields},
    )


def check_existing_table(description: TableDescription) -> None:
    """Refuse a table that exists already (created by another tool, or by an older lakecdc) with options the
    native writer cannot honour, as for a new table (validate_options): e.g. a first-row table would take the
    write and read back empty. SinkError naming the table, the option and what to do."""
    try:
        validate_options(description.table_id, description.options, description.is_primary_key_table,
                         columns=description.schema.names)
    except SinkError as error:
        raise SinkError(f"{error} (the table exists already with this option: alter the option or drop the "
                        f"table so lakecdc creates it)") from None


def pipeline_options_problem(options: dict[str, str], emitted_kinds: tuple[str, ...]) -> str | None:
    """Why a pipeline cannot write tables with ``options`` (validity as in validate_options, for a primary-key
    table; and the retract kinds the pipeline emits that the merge engine cannot take), or None. Used at pipeline
    validation, before the schema is known (column names in options are checked at table creation)."""
    try:
        validate_options(TableId("pipeline", "table"), options, has_primary_key=True)
    except SinkError as error:
        return str(error).replace("table pipeline.table: ", "")
    refused = unsupported_row_kinds(options)
    kinds = [k for k in emitted_kinds if k in refused]
    if kinds:
        return (f"the pipeline writes {'/'.join(kinds)} rows (MySQL updates are -U/+U pairs, deletes -D) but "
                f"{refused[kinds[0]]}")
    return None
