"""Python's cyclic garbage collector kept off the objects that large imports create.

An import creates many long-lived objects and next to no garbage, yet every 700 allocations start a collection of
the young objects, and the older generations are walked again as they grow. ``lakecdc run`` spent 0.13-0.21 s in
such collections of its imports (pyarrow, the MySQL client, pypaimon's catalog with pandas and polars; measured with
``gc.callbacks`` on the 2-core development machine, docs/benchmarks.md *Snapshot*). Pausing the collector alone only
defers that work (the first collection afterwards walks every object the import made); moving the objects to the
permanent generation (``gc.freeze``) right after the import spares it: those objects live as long as the process
anyway. The collector is on again afterwards, so a long-running process (``run --follow``, Dagster) still frees the
reference cycles it makes later.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def imports_outside_collection() -> Iterator[None]:
    """No cyclic garbage collection inside the block (imports); afterwards every object alive is frozen (never
    walked again by the collector; objects still go when their last reference does) and the collector's state is
    restored. Process wide: cyclic garbage alive at that moment is not collected any more (at a command's start and
    at its one import of pypaimon's catalog there is next to none); another thread's block ending first leaves the
    collector off until this one ends, which is harmless."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
