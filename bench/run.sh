#!/usr/bin/env bash
# lakecdc's benchmark suite in one command: set-up (scripts/setup.sh, only what is missing), the benchmark-only
# dependencies (the `bench` extra: dlt, connectorx; installed by the suite when missing), then every case against its
# own private MariaDB. Arguments go to `python -m bench` (--quick for a smoke run, --cases, sizes: see --help).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
scripts/setup.sh
exec .venv/bin/python -m bench "$@"
