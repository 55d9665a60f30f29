"""Table semantics from table options, on real tables written by the native writer (seed 002 and Paimon's
documented table options): one table read with and without ignore-delete; ignore-delete at write; the
partial-update table with each delete option; aggregation retractions; sequence.field; changelog-producer input;
and the options that are refused (at table creation, per batch, and at pipeline validation) instead of written
wrongly. Every expected row is exact."""

from __future__ import annotations

import pytest

from lakecdc.errors import PipelineConfigError
from lakecdc.paimon import Catalog, Row, RowKind, SinkError

I, UB, UA, D = RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE  # noqa: E741 - Paimon's row-kind letters


@pytest.fixture
def catalog(tmp_path):
    return Catalog(tmp_path / "warehouse")


def state(table, keys=None):
    rows = table.read().to_pylist()
    keys = keys or list(rows[0]) if rows else keys
    return sorted(tuple(r[k] for k in keys) for r in rows) if rows else []


def changes(table, start=0, **kw):
    return [tuple(r.values()) for r in table.read_changes(start, **kw).to_pylist()]


# --------------------------------------------------------------------------------------- seed 002: deletes


@pytest.mark.parametrize("producer", ["none", "input"])
def test_one_table_read_with_and_without_ignore_delete(catalog, producer):
    """The writer keeps every delete; consumer A follows them, consumer B ignores them (keeps history)."""
    table = catalog.create_table("db.t", [("id", "INT"), ("name", "STRING"), ("price", "DOUBLE")],
                                 primary_keys=["id"], options={"bucket": "1", "changelog-producer": producer})
    table.write([Row.of_kind(I, 1, "a", 1.0), Row.of_kind(I, 2, "b", 2.0)])
    table.write([Row.of_kind(UB, 1, "a", 1.0), Row.of_kind(UA, 1, "a", 1.5), Row.of_kind(D, 2, "b", 2.0)])
    assert state(table) == [(1, "a", 1.5)]  # the table itself applied the delete
    if producer == "input":  # the changelog is exactly what was written
        assert changes(table) == [("+I", 1, "a", 1.0), ("+I", 2, "b", 2.0), ("-U", 1, "a", 1.0),
                                  ("+U", 1, "a", 1.5), ("-D", 2, "b", 2.0)]
    else:  # data files: one merged row per key and commit
        assert changes(table) == [("+I", 1, "a", 1.0), ("+I", 2, "b", 2.0), ("+U", 1, "a", 1.5),
                                  ("-D", 2, "b", 2.0)]
    assert changes(table, ignore_delete=True) == [("+I", 1, "a", 1.0), ("+I", 2, "b", 2.0), ("+U", 1, "a", 1.5)]


@pytest.mark.parametrize("how", ["table-option", "write-hint"])
def test_ignore_delete_at_write_keeps_the_rows(catalog, how):
    options = {"bucket": "2", "merge-engine": "deduplicate"}
    if how == "table-option":
        options["ignore-delete"] = "true"
    table = catalog.create_table("db.keep", [("id", "INT"), ("name", "STRING"), ("price", "DOUBLE")],
                                 primary_keys=["id"], options=options)
    table.write([(1, "a", 1.0), (2, "b", 2.0)])
    table.write([Row.of_kind(UB, 1, "a", 1.0), Row.of_kind(UA, 1, "a", 9.0), Row.of_kind(D, 2, "b", 2.0)],
                ignore_delete=how == "write-hint")
    assert state(table) == [(1, "a", 9.0), (2, "b", 2.0)]
    assert changes(table, 1) == [("+U", 1, "a", 9.0)]  # neither -U nor -D reached the files


def test_ignore_update_before_drops_only_minus_u(catalog):
    table = catalog.create_table("db.iub", [("id", "INT"), ("v", "STRING")], primary_keys=["id"],
                                 options={"bucket": "1", "ignore-update-before": "true",
                                          "changelog-producer": "input"})
    table.write([(1, "a"), (2, "b")])
    table.write([Row.of_kind(UB, 1, "a"), Row.of_kind(UA, 1, "a2"), Row.of_kind(D, 2, "b")])
    assert state(table) == [(1, "a2")]
    assert changes(table, 1) == [("+U", 1, "a2"), ("-D", 2, "b")]


# ---------------------------------------------------------------------------------- partial-update


def partial_update_table(catalog, name, options):
    return catalog.create_table(f"db.{name}", [("id", "INT"), ("price", "DOUBLE"), ("stock", "INT"),
                                               ("title", "STRING"), ("g", "INT")],
                                primary_keys=["id"], options={"merge-engine": "partial-update", "bucket": "1",
                                                              **options})


PARTIAL_UPDATE_WRITES = [
    [(1, 23.0, 10, None, 1)],
    [(1, None, None, "This is a book", 1)],
    [Row.of_kind(UB, 1, 23.0, 10, "This is a book", 1), Row.of_kind(UA, 1, 25.2, None, None, 2)],
    [Row.of_kind(D, 1, 25.2, 10, "This is a book", 2)],
]


@pytest.mark.parametrize("name, options, expected", [
    ("pu_ignore", {"ignore-delete": "true"}, [(1, 25.2, 10, "This is a book", 2)]),
    ("pu_ignore_fallback", {"partial-update.ignore-delete": "true"}, [(1, 25.2, 10, "This is a book", 2)]),
    ("pu_remove", {"partial-update.remove-record-on-delete": "true"}, []),
    # sequence group g → (price, stock): retracts set the group's fields to NULL, title is untouched
    ("pu_group", {"fields.g.sequence-group": "price,stock"}, [(1, None, None, "This is a book", 2)]),
    ("pu_group_remove", {"fields.g.sequence-group": "price,stock",
                         "partial-update.remove-record-on-sequence-group": "g"}, []),
])
def test_partial_update_with_each_delete_option(catalog, name, options, expected):
    table = partial_update_table(catalog, name, options)
    for rows in PARTIAL_UPDATE_WRITES[:2]:
        table.write(rows)
    if "fields.g.sequence-group" in options:  # a group whose g did not decrease is overwritten, NULLs included
        assert state(table) == [(1, None, None, "This is a book", 1)]
    else:
        assert state(table) == [(1, 23.0, 10, "This is a book", 1)]  # NULL never overwrites
    for rows in PARTIAL_UPDATE_WRITES[2:]:
        table.write(rows)
    assert state(table, ["id", "price", "stock", "title", "g"]) == expected


def test_partial_update_without_a_delete_option_refuses_retracts_and_stays_readable(catalog):
    table = partial_update_table(catalog, "pu_plain", {})
    table.write(PARTIAL_UPDATE_WRITES[0])
    table.write(PARTIAL_UPDATE_WRITES[1])
    for rows in PARTIAL_UPDATE_WRITES[2:]:
        with pytest.raises(SinkError, match=r"db\.pu_plain: 1 row\(s\) of kind -[UD] cannot be written: "
                                            r"merge-engine=partial-update cannot take -U/-D rows"):
            table.write(rows)
    # a lone -D would have been committed by the Rust writer and broken every read; it was refused instead
    assert table.latest_snapshot_id() == 2
    assert state(table) == [(1, 23.0, 10, "This is a book", 1)]
    table.write([Row.of_kind(UA, 1, 30.0, None, None, 3)])  # +U rows are fine
    assert state(table) == [(1, 30.0, 10, "This is a book", 3)]


# ------------------------------------------------------------------------------------------ aggregation


def aggregation_table(catalog, name, options):
    return catalog.create_table(f"db.{name}", [("id", "INT"), ("total", "BIGINT"), ("top", "INT"), ("note", "STRING")],
                                primary_keys=["id"], options={"merge-engine": "aggregation", "bucket": "1",
                                                              "fields.total.aggregate-function": "sum", **options})


AGG_WRITES = [
    [(1, 1, 5, "a")],
    [(1, 2, 7, "b")],
    [Row.of_kind(UB, 1, 2, 7, "b"), Row.of_kind(UA, 1, 10, 3, "c")],
    [Row.of_kind(D, 1, 3, 1, "c")],
]


@pytest.mark.parametrize("name, options, expected", [
    # sum and last_non_null_value retract: total 1+2-2+10-3, top sum 5+7-7+3-1, note retracted to NULL
    ("agg_sum", {"fields.top.aggregate-function": "sum"}, [(1, 8, 7, None)]),
    ("agg_max_ignore_retract", {"fields.top.aggregate-function": "max", "fields.top.ignore-retract": "true"},
     [(1, 8, 7, None)]),
    ("agg_ignore_delete", {"fields.top.aggregate-function": "max", "ignore-delete": "true"}, [(1, 13, 7, "c")]),
    ("agg_listagg", {"fields.top.aggregate-function": "min", "fields.note.aggregate-function": "listagg",
                     "fields.top.ignore-retract": "true", "fields.note.ignore-retract": "true"},
     [(1, 8, 3, "a,b,c")]),
])
def test_aggregation_retractions(catalog, name, options, expected):
    table = aggregation_table(catalog, name, options)
    for rows in AGG_WRITES:
        table.write(rows)
    assert state(table, ["id", "total", "top", "note"]) == expected


def test_aggregation_refuses_retracts_it_cannot_do(catalog):
    table = aggregation_table(catalog, "agg_max", {"fields.top.aggregate-function": "max"})
    table.write(AGG_WRITES[0])
    for rows in AGG_WRITES[2:]:
        with pytest.raises(SinkError, match=r"cannot retract top \(max\)"):
            table.write(rows)
    assert state(table) == [(1, 1, 5, "a")]

    removing = aggregation_table(catalog, "agg_remove", {"fields.top.aggregate-function": "max",
                                                         "aggregation.remove-record-on-delete": "true"})
    removing.write(AGG_WRITES[0])
    with pytest.raises(SinkError, match=r"kind -U"):
        removing.write(AGG_WRITES[2])
    removing.write(AGG_WRITES[3])  # -D removes the row: allowed
    assert state(removing) == []

    product = aggregation_table(catalog, "agg_product", {"fields.top.aggregate-function": "product"})
    with pytest.raises(SinkError, match=r"cannot retract top \(product\)"):
        product.write([Row.of_kind(D, 1, 1, 1, "x")])
    default = aggregation_table(catalog, "agg_default", {"fields.default-aggregate-function": "first_value"})
    with pytest.raises(SinkError, match=r"cannot retract .*first_value"):
        default.write([Row.of_kind(UB, 1, 1, 1, "x")])


# -------------------------------------------------------------------------------------- sequence.field


def test_sequence_field_orders_by_the_column(catalog):
    table = catalog.create_table("db.seq", [("id", "INT"), ("v", "STRING"), ("ts", "BIGINT")], primary_keys=["id"],
                                 options={"bucket": "1", "sequence.field": "ts"})
    table.write([Row.of_kind(I, 1, "a", 5), Row.of_kind(UA, 1, "older", 3), Row.of_kind(I, 2, "x", 1)])
    assert state(table) == [(1, "a", 5), (2, "x", 1)]
    table.write([Row.of_kind(UA, 1, "late", 4), Row.of_kind(D, 2, "x", 0)])  # older than stored: both lose
    assert state(table) == [(1, "a", 5), (2, "x", 1)]
    table.write([Row.of_kind(D, 1, "a", 6), Row.of_kind(UA, 2, "y", 2)])
    assert state(table) == [(2, "y", 2)]


# ------------------------------------------------------------------------------------- refused options


@pytest.mark.parametrize("options, message", [
    ({"merge-engine": "first-row"}, r"merge-engine='first-row' is not supported: first-row tables do not read"),
    ({"deletion-vectors.enabled": "true"}, r"deletion-vectors.enabled='true' is not supported"),
    ({"changelog-producer": "lookup"}, r"changelog-producer='lookup' is not supported: the lookup changelog"),
    ({"changelog-producer": "full-compaction"}, r"changelog-producer='full-compaction' is not supported"),
    ({"merge-engine": "aggregation", "fields.v.aggregate-function": "median"}, r"unknown aggregate function 'median'"),
    ({"sequence.field": "nope"}, r"sequence.field='nope' is not supported: column 'nope' is not a column"),
    ({"merge-engine": "partial-update", "fields.g.sequence-group": "v,nope"}, r"column 'g' is not a column"),
    ({"merge-engine": "foo"}, r"invalid option merge-engine='foo'"),
    ({"bucket": "-2"}, r"bucket='-2' is not supported"),
    ({"file.format": "orc"}, r"file.format='orc' is not supported"),
])
def test_options_the_storage_cannot_honour_are_refused_at_creation(catalog, options, message):
    with pytest.raises(SinkError, match=message):
        catalog.create_table("db.bad", [("id", "INT"), ("v", "STRING")], primary_keys=["id"], options=options)
    assert not catalog.table_exists("db.bad")


def test_primary_key_must_contain_the_partition_keys(catalog):
    with pytest.raises(SinkError, match=r"primary key \['id'\] must contain the partition key\(s\) \['dt'\]"):
        catalog.create_table("db.cross", [("id", "INT"), ("dt", "STRING")], primary_keys=["id"],
                             partition_keys=["dt"])
    catalog.create_table("db.ok", [("id", "INT")], primary_keys=["id"])
    with pytest.raises(SinkError, match=r"db\.ok already exists"):
        catalog.create_table("db.ok", [("id", "INT")], primary_keys=["id"])
    assert catalog.create_table("db.ok", [("id", "INT")], ignore_if_exists=True).primary_keys == ["id"]
    with pytest.raises(SinkError, match=r"db\.nope does not exist"):
        catalog.get_table("db.nope")


# ------------------------------------------------------------------------------------ pipeline validation

PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  username: u
  tables: shop.orders
sink:
  type: paimon
  catalog.properties.metastore: filesystem
  catalog.properties.warehouse: /tmp/unused
{sink_extra}
transform:
  - source-table: shop.orders
    table-options: {options}
{transform_extra}
pipeline:
  name: p
"""


def pipeline(options, sink_extra="", transform_extra=""):
    from lakecdc.config import parse_pipeline

    return parse_pipeline(PIPELINE.format(options=options, sink_extra=sink_extra, transform_extra=transform_extra),
                          path="p.yaml")


@pytest.mark.parametrize("options, sink_extra, transform_extra, message", [
    ("merge-engine=partial-update", "", "", r"p.yaml: transform\[0\].table-options: the pipeline writes -U/-D rows"),
    ("merge-engine=partial-update", "", "    converter-after-transform: SOFT_DELETE",
     r"the pipeline writes -U rows"),
    ("merge-engine=aggregation,fields.amount.aggregate-function=max", "", "", r"cannot retract amount \(max\)"),
    ("merge-engine=first-row", "", "", r"first-row tables do not read level-0 files"),
    ("bucket=2", "  table.properties.changelog-producer: lookup", "",
     r"p.yaml: sink.table.properties: option changelog-producer='lookup' is not supported"),
    ("merge-engine=nope", "", "", r"invalid option merge-engine='nope'"),
])
def test_pipeline_validation_refuses_table_options(options, sink_extra, transform_extra, message):
    with pytest.raises(PipelineConfigError, match=message):
        pipeline(options, sink_extra, transform_extra)


@pytest.mark.parametrize("options, sink_extra", [
    ("merge-engine=partial-update,partial-update.remove-record-on-delete=true", ""),
    ("merge-engine=partial-update", "  table.properties.ignore-delete: 'true'"),
    ("merge-engine=aggregation,fields.amount.aggregate-function=sum", ""),
    ("changelog-producer=input,sequence.field=updated_at", ""),
])
def test_pipeline_validation_accepts_honoured_options(options, sink_extra):
    assert pipeline(options, sink_extra).transforms[0].table_options == options
