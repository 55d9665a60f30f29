"""Executes every ```python block of docs/python-api.md, in order, in one namespace, against a warehouse in
tmp_path: the documentation's examples (and their asserts) are tested code."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "python-api.md"
WAREHOUSE_LINE = 'WAREHOUSE = "/tmp/paimon-api-warehouse"'


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def test_every_python_block_of_the_doc_runs(tmp_path):
    blocks = python_blocks()
    assert len(blocks) >= 10
    assert WAREHOUSE_LINE in blocks[0]
    namespace: dict = {}
    for index, block in enumerate(blocks):
        code = block.replace(WAREHOUSE_LINE, f"WAREHOUSE = {str(tmp_path / 'warehouse')!r}")
        exec(compile(code, f"{DOC.name} python block {index + 1}", "exec"), namespace)
    assert namespace["catalog"].warehouse == str(tmp_path / "warehouse")
