"""Downstream assets that consume a Paimon table's changes exactly once (docs/dagster.md, *Downstream assets*).

``PaimonChangesIOManager`` is both the *input manager* of a downstream asset's ``paimon/<db>/<table>`` inputs and
the *IO manager* of its output:

* loading an input reads the changes the asset's Paimon consumer (id ``dagster-<asset key>``) has not read yet
  (lakecdc.sink.consumers), with the asset's last saved value, as :class:`PaimonChanges`;
* storing the output saves the value together with the consumer positions it includes
  (``<warehouse>/.lakecdc/consumer-state/<consumer id>.pickle``), then commits the consumers, and adds the
  snapshot range and the rows by kind to the materialisation's metadata.

So the consumer advances exactly when the materialisation succeeds: a run that fails before its output is stored
moves nothing and the next one gets the same changes again. All the work is lakecdc.sink.consumers'; this module
only maps Dagster's contexts onto it.
"""

import re
from dataclasses import dataclass
from typing import Any, Optional

import dagster as dg
import pyarrow as pa
from pydantic import Field

from lakecdc.model import TableId
from lakecdc.sink import PaimonSink
from lakecdc.sink.consumers import (ConsumerRead, change_counts, load_checkpoint, read_with_checkpoint,
                                    save_checkpoint)

CONSUMER_PREFIX = "dagster-"
# What load_input read, per (run id, step key) and table, for handle_output of the same step (same process) to
# commit; a retried step reads again and replaces what its failed attempt read.
_PENDING: dict[tuple[str, str], dict[str, ConsumerRead]] = {}


def consumer_id_for(asset_key: dg.AssetKey) -> str:
    """The Paimon consumer id of a downstream asset: ``dagster-`` and its key path joined by ``.`` (characters a
    consumer id cannot hold become ``_``)."""
    return CONSUMER_PREFIX + re.sub(r"[^A-Za-z0-9_.\-]", "_", ".".join(asset_key.path))


@dataclass
class PaimonChanges:
    """One input of a downstream asset: the changes of a Paimon table since the asset's last successful
    materialisation.

    * ``rows``: a pyarrow Table with a leading ``rowkind`` column (``+I``, ``-U``, ``+U``, ``-D``) and the table's
      columns, in commit order;
    * ``full``: True when the asset has no progress yet (first materialisation, or its consumer was deleted to read
      the table again): ``rows`` is then the whole table at ``end_snapshot_id`` as ``+I`` rows, and the asset must
      rebuild its value from them rather than update ``previous``;
    * ``previous``: the value the asset's last successful materialisation stored (None before the first);
    * ``start_snapshot_id`` (exclusive), ``end_snapshot_id``: the snapshots read."""

    table: TableId
    consumer_id: str
    rows: pa.Table
    full: bool
    previous: Any
    start_snapshot_id: int
    end_snapshot_id: int

    def counts(self) -> dict[str, int]:
        """Rows per row kind."""
        return change_counts(self.rows)


class PaimonChangesIOManager(dg.ConfigurableIOManager):
    """Input manager for ``paimon/<db>/<table>`` inputs (``dg.AssetIn(key, input_manager_key=...)``) and IO manager
    of the asset consuming them (``io_manager_key=...``), bound under one resource key."""

    warehouse: str = Field(description="The Paimon warehouse of the upstream tables (path, file:// or s3://)")
    catalog_options: dict[str, str] = Field(default_factory=dict,
                                            description="Extra catalog.properties.* (no S3 keys here)")
    s3_access_key: Optional[str] = Field(default=None, description="pass dg.EnvVar('...')")
    s3_secret_key: Optional[str] = Field(default=None, description="pass dg.EnvVar('...')")
    s3_session_token: Optional[str] = Field(default=None, description="pass dg.EnvVar('...')")
    ignore_delete: bool = Field(default=False, description="Drop -U/-D rows (Paimon's read-side ignore-delete)")
    before_images: bool = Field(default=False, description="Tables without changelog-producer=input: each change "
                                                           "with its key's previous row (-U/+U, -D with the row)")

    def _sink(self) -> PaimonSink:
        options = {"metastore": "filesystem", **self.catalog_options, "warehouse": self.warehouse}
        keys = {"s3.access-key": self.s3_access_key, "s3.secret-key": self.s3_secret_key,
                "s3.session-token": self.s3_session_token}
        options.update({k: v for k, v in keys.items() if v})
        return PaimonSink(options, commit_user_prefix="dagster-consumer")

    # ------------------------------------------------------------------------------------ input
    def load_input(self, context: dg.InputContext) -> Any:
        upstream = context.asset_key
        sink = self._sink()
        stored = load_checkpoint(sink, consumer_id_for(upstream))
        if stored.saved:  # an asset this IO manager stored (a downstream of a downstream): its value
            return stored.value
        if len(upstream.path) < 2:
            raise dg.Failure(f"PaimonChangesIOManager loads Paimon tables (keys ending in <db>/<table>), not "
                             f"{upstream.to_user_string()}")
        table = TableId(upstream.path[-2], upstream.path[-1])
        step = context.step_context
        downstream = _output_asset_key(context)
        _check_output_handled(context, downstream)
        consumer_id = consumer_id_for(downstream)
        checkpoint = load_checkpoint(sink, consumer_id)
        read = read_with_checkpoint(sink, table, consumer_id, checkpoint, ignore_delete=self.ignore_delete,
                                    before_images=self.before_images)
        _PENDING.setdefault((step.run_id, step.step.key), {})[str(table)] = read
        whole = " (the whole table)" if read.full else ""
        context.log.info(f"{table}: consumer {consumer_id} read {read.rows.num_rows} change row(s) of snapshots "
                         f"({read.start_snapshot_id}, {read.end_snapshot_id}]{whole}")
        return PaimonChanges(table, consumer_id, read.rows, read.full, checkpoint.value, read.start_snapshot_id,
                             read.end_snapshot_id)

    # ----------------------------------------------------------------------------------- output
    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        consumer_id = consumer_id_for(context.asset_key)
        reads = list(_PENDING.pop((context.run_id, context.step_key), {}).values())
        sink = self._sink()
        previous = load_checkpoint(sink, consumer_id)
        save_checkpoint(sink, consumer_id, obj, reads, previous)
        metadata: dict[str, Any] = {"lakecdc/consumer_id": consumer_id} if reads else {}
        for read in reads:
            prefix = f"lakecdc/changes/{read.table_id}"
            metadata[f"{prefix}/snapshots"] = f"({read.start_snapshot_id}, {read.end_snapshot_id}]"
            metadata[f"{prefix}/full_read"] = read.full
            metadata[f"{prefix}/rows"] = dg.MetadataValue.json(read.counts())
            metadata[f"{prefix}/next_snapshot"] = read.next_snapshot
        if metadata:
            context.add_output_metadata(metadata)


def _output_asset_key(context: dg.InputContext) -> dg.AssetKey:
    """The asset whose step loads the input: its changes are consumed under its key."""
    keys = context.step_context.get_output_asset_keys()
    if len(keys) != 1:
        raise dg.Failure(f"PaimonChangesIOManager feeds one asset per step; this step produces "
                         f"{sorted(k.to_user_string() for k in keys)}")
    return next(iter(keys))


def _check_output_handled(context: dg.InputContext, downstream: dg.AssetKey) -> None:
    """The asset's output must be stored by the same IO manager, or its consumer would never be committed."""
    op_def = context.step_context.op_def
    manager_key = op_def.input_def_named(context.name).input_manager_key
    outputs = op_def.output_defs
    if len(outputs) != 1 or outputs[0].io_manager_key != manager_key or outputs[0].dagster_type.is_nothing:
        raise dg.Failure(
            f"asset {downstream.to_user_string()}: its input {context.name!r} reads Paimon changes through the IO "
            f"manager {manager_key!r}, which commits the consumer when it stores the asset's output; give the asset "
            f"io_manager_key={manager_key!r} and return its value (not None or a MaterializeResult), or its "
            f"consumer never advances")
