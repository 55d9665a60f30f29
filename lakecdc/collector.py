"""Python's cyclic garbage collector kept off the objects that large imports create, in a ``lakecdc`` command's
process.

An import creates many long-lived objects and next to no garbage, yet every 700 allocations start a collection of
the young objects, and the older generations are walked again as they grow. ``lakecdc run`` spent 0.13-0.21 s in
such collections of its imports (pyarrow, the MySQL client, pypaimon's catalog with pandas and polars; measured with
``gc.callbacks`` on the 2-core development machine, docs/benchmarks.md *Snapshot*), 0.02-0.03 s with this module.
Pausing the collector alone only defers that work (the first collection afterwards walks every object the import
made); moving the objects to the permanent generation (``gc.freeze``) right after the import spares it.

Freezing also keeps forever any reference cycle that is garbage at that moment, or that an object alive then later
joins as garbage, so it is done only in a process that a command owns and ends (``lakecdc.cli``, see
:func:`freeze_after_imports`), at its start and at its first import of pypaimon's catalog, and only when the block
did import modules (opening the catalog again imports nothing and freezes nothing). ``lakecdc run --follow`` goes
on for long: it stops freezing once it starts following. Elsewhere (Dagster, tests, the library called in a
long-lived process) the imports run with the collector paused, nothing is frozen, and the collector's work is only
deferred. Only the imports run with the collector paused, not what they are for (opening the catalog may wait on the
network).
"""

from __future__ import annotations

import gc
import sys
from contextlib import contextmanager
from typing import Iterator

_freeze = False  # set by freeze_after_imports: this process runs one command and ends


def freeze_after_imports(freeze: bool = True) -> None:
    """This process runs one command and ends (the ``lakecdc`` script): freeze what each large import made.
    ``freeze`` False: the command goes on for long (``lakecdc run --follow``): nothing more is frozen."""
    global _freeze
    _freeze = freeze


@contextmanager
def imports_outside_collection() -> Iterator[None]:
    """No cyclic garbage collection inside the block (imports); afterwards, in a command's process, when the block
    imported a module, every object alive is frozen (never walked by the collector again; objects still go when
    their last reference does), and the collector's state is restored. A block that imported nothing (the modules
    were loaded before) freezes nothing: the objects alive then are the command's own, not an import's, and one of
    them that later becomes cyclic garbage would never be collected. Process wide: another thread's block ending
    first leaves the collector off until this one ends, which is harmless."""
    enabled = gc.isenabled()
    modules = len(sys.modules)
    gc.disable()
    try:
        yield
    finally:
        if _freeze and len(sys.modules) != modules:
            gc.freeze()
        if enabled:
            gc.enable()
