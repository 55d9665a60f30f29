"""lakecdc: MySQL change data into Apache Paimon tables, run by Dagster.

Layers (data flows one way): ``source`` (MySQL snapshot and binlog) → ``transform`` (expressions and rules)
→ ``sink`` (Paimon tables and commits); ``runtime`` runs one micro-batch from checkpoint to commit;
``dagster`` turns pipelines into assets and sensors; ``cli`` is the command line.
"""

__version__ = "0.1.0"
