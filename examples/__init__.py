"""Examples that build on the tutorial (docs/dagster.md); loaded by definitions.py next to the tutorial pipeline."""
