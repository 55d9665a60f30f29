#!/usr/bin/env bash
# Installs everything lakecdc needs on a fresh machine: MariaDB server binaries (for the sandbox and the tests) and a
# virtualenv in .venv with the dependencies at the versions constraints.txt pins (pyproject.toml declares ranges);
# with --tests also Debian's Chromium (the UI test renders a page and scripts/screenshots.sh renders docs/img/),
# which the tutorial does not need. Safe to run again: it only does what is missing.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
WITH_TESTS=0; [ "${1:-}" = "--tests" ] && WITH_TESTS=1

if ! command -v mariadbd >/dev/null 2>&1 || ! command -v mariadb-install-db >/dev/null 2>&1; then
  echo "setup: installing MariaDB server binaries (apt-get)" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  # policy-rc.d keeps the package from starting a system service; lakecdc starts its own private servers.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq mariadb-server mariadb-client >/dev/null
fi

# Headless Chromium for tests/test_dagster_ui.py (which fails without it) and scripts/screenshots.sh. Measured on
# a loaded 2-core machine: about 2 minutes once (26 s of CPU), nothing on later runs.
if [ "$WITH_TESTS" = 1 ] && ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  echo "setup: installing Chromium (apt-get)" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi

# redis-server: the broker of the celery scale-out test (tests/test_s3.py starts its own on a free port).
if [ "$WITH_TESTS" = 1 ] && ! command -v redis-server >/dev/null 2>&1; then
  echo "setup: installing redis-server (apt-get)" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
fi

# PostgreSQL server binaries: the Dagster instance storage of tests/test_postgres_instance.py (a private server on
# a free port; any server the machine runs is left alone).
if [ "$WITH_TESTS" = 1 ] && ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "setup: installing the PostgreSQL server (apt-get)" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
fi

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv" >&2
  "$PYTHON" -m venv .venv
fi
# The columnar binlog decoder and the snapshot's row scanner are C extensions (lakecdc/source/_rowsdecoder.c and
# _textrows.c, built by pip through setup.py): they need a C compiler and the Python headers.
if ! command -v cc >/dev/null 2>&1 || ! .venv/bin/python -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
  echo "setup: installing a C compiler and the Python headers (apt-get)" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq gcc python3-dev >/dev/null
fi
# Reinstall only when the dependency pins or the C extension's sources changed (or the extension is missing).
STAMP=.venv/.lakecdc-installed
EXTRAS=test; [ "$WITH_TESTS" = 1 ] && EXTRAS=test,scaleout-test  # celery only for the tests
stamp_for() { (cat pyproject.toml constraints.txt setup.py lakecdc/source/*.c lakecdc/source/*.h; echo "$1") | sha256sum | cut -d' ' -f1; }
WANT=$(stamp_for "$EXTRAS")
HAVE=$(cat "$STAMP" 2>/dev/null || true)
# an install with the test extras also serves the plain set-up (the tutorial after the tests installs nothing)
[ "$WITH_TESTS" = 0 ] && [ "$HAVE" = "$(stamp_for test,scaleout-test)" ] && WANT=$HAVE
if [ "$HAVE" != "$WANT" ] || ! ls lakecdc/source/_rowsdecoder*.so lakecdc/source/_textrows*.so >/dev/null 2>&1; then
  echo "setup: installing Python dependencies" >&2
  if ! .venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[$EXTRAS]" \
      > .venv/pip-install.log 2>&1; then
    tail -40 .venv/pip-install.log >&2; echo "setup: pip install failed (log: .venv/pip-install.log)" >&2; exit 1
  fi
  echo "$WANT" > "$STAMP"
fi
