#!/usr/bin/env bash
# Installs everything lakecdc needs on a fresh machine: MariaDB server binaries (for the sandbox and the tests)
# and a virtualenv in .venv with the pinned dependencies. Safe to run again: it only does what is missing.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

if ! command -v mariadbd >/dev/null 2>&1 || ! command -v mariadb-install-db >/dev/null 2>&1; then
  echo "setup: installing MariaDB server binaries (apt-get)" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  # policy-rc.d keeps the package from starting a system service; lakecdc starts its own private servers.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq mariadb-server mariadb-client >/dev/null
fi

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv" >&2
  "$PYTHON" -m venv .venv
fi
# Reinstall only when the dependency pins changed.
STAMP=.venv/.lakecdc-installed
WANT=$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  echo "setup: installing Python dependencies" >&2
  if ! .venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[test]' \
      > .venv/pip-install.log 2>&1; then
    tail -40 .venv/pip-install.log >&2; echo "setup: pip install failed (log: .venv/pip-install.log)" >&2; exit 1
  fi
  echo "$WANT" > "$STAMP"
fi
