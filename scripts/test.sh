#!/usr/bin/env bash
# Runs the whole test suite on a fresh machine: set-up, ruff, mypy, then pytest. The tests start their own private
# MariaDB (binlog on, ROW, FULL image) on a free loopback port in a temp dir.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
scripts/setup.sh --tests
# lint first: a finding fails the run before the (long) suite starts; configuration in pyproject.toml [tool.ruff]
.venv/bin/ruff check .
# type check of the package (function bodies too); configuration in pyproject.toml [tool.mypy]
.venv/bin/mypy
# Two workers (pytest-xdist), each module on one of them with its fixtures (--dist loadfile); each worker starts its
# own private servers. LAKECDC_TEST_WORKERS=0 runs the suite in this process, one test after the other.
exec .venv/bin/python -m pytest -q -n "${LAKECDC_TEST_WORKERS:-2}" --dist loadfile "$@"
