"""Renders the option tables of docs/pipeline-yaml.md from the option declarations (lakecdc.config.OPTION_TABLES):
run it after declaring, changing or removing an option. tests/test_config.py fails while the doc is stale."""

from pathlib import Path

from lakecdc.config import OPTION_TABLES
from lakecdc.options import render_doc

DOC = Path(__file__).resolve().parent.parent / "docs" / "pipeline-yaml.md"

if __name__ == "__main__":
    DOC.write_text(render_doc(DOC.read_text(encoding="utf-8"), OPTION_TABLES), encoding="utf-8")
