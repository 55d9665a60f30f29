"""lakecdc: MySQL change data into Apache Paimon tables, run by Dagster.

Layers (data flows one way): ``source`` (MySQL snapshot and binlog) → ``transform`` (expressions and rules)
→ ``sink`` (Paimon tables and commits); ``runtime`` runs one micro-batch from checkpoint to commit;
``dagster`` turns pipelines into assets and sensors; ``cli`` is the command line.
"""

import importlib

__version__ = "0.1.0"

# The dg Component (``type: lakecdc.CdcPipelineComponent`` in a defs.yaml), imported on first use so that
# ``import lakecdc`` (the CLI) does not load Dagster.
_LAZY = {"CdcPipelineComponent": "lakecdc.dagster.component"}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'lakecdc' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_LAZY))
