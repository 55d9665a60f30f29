"""lakecdc.collector: imports run without cyclic garbage collection; only a command's own process freezes what they
made (a long-lived process must keep collecting its cycles)."""

from __future__ import annotations

import gc
import subprocess
import sys

from lakecdc.collector import imports_outside_collection


def test_the_collector_is_paused_inside_and_restored_without_freezing():
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    with imports_outside_collection():
        assert not gc.isenabled()
        made = [[i] for i in range(1000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen  # a library user's objects stay collectable
    gc.disable()
    try:
        with imports_outside_collection():
            pass
        assert not gc.isenabled()  # a caller that turned the collector off keeps it off
    finally:
        gc.enable()
    assert len(made) == 1000


def test_a_commands_process_freezes_what_its_imports_made():
    code = ("import gc; from lakecdc.collector import freeze_after_imports, imports_outside_collection\n"
            "before = gc.get_freeze_count(); freeze_after_imports()\n"
            "with imports_outside_collection(): import json.decoder, decimal\n"
            "print(gc.isenabled(), gc.get_freeze_count() > before)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True"]


def test_a_commands_process_freezes_nothing_when_nothing_is_imported(tmp_path):
    """Opening pypaimon's catalog again (its modules loaded by the first time) must not freeze what the command
    holds then: an object frozen while alive is never collected once it is cyclic garbage."""
    code = ("import gc, sys, weakref\n"
            "from lakecdc.collector import freeze_after_imports\n"
            "from lakecdc.sink.catalog import create_catalog\n"
            "freeze_after_imports()\n"
            f"options = {{'warehouse': {str(tmp_path)!r}, 'metastore': 'filesystem'}}\n"
            "create_catalog(options)  # the import: frozen\n"
            "class Node: pass\n"
            "node = Node(); node.me = node; alive = weakref.ref(node)  # the command's own data, in a cycle\n"
            "frozen = gc.get_freeze_count()\n"
            "create_catalog(options)\n"
            "del node; gc.collect()\n"
            "print(gc.isenabled(), gc.get_freeze_count() == frozen, alive() is None)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True", "True"]
