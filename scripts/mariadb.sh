#!/usr/bin/env bash
# Private binlog-enabled MariaDB for the tutorial / dev sandbox (no systemd, never the system instance).
#
#   scripts/mariadb.sh start|stop|status|cli [DIR]
#
# DIR defaults to .lakecdc/mariadb under the repository root; the port is $LAKECDC_MYSQL_PORT (default 3307),
# bound to 127.0.0.1 only; root has an empty password. Server flags: binlog ROW / row image FULL / row metadata
# FULL, utf8mb4. `start` installs mariadb-server + mariadb-client with apt-get when mariadbd is missing, and is
# idempotent (a running server is left alone). `cli` opens the mariadb client (extra args are passed on:
# scripts/mariadb.sh cli "" -e 'SHOW MASTER STATUS').
set -euo pipefail
# The mariadb clients read MYSQL_HOST / MYSQL_TCP_PORT from the environment and would then talk to another
# server (e.g. a shared one on 3306): this script only ever talks to its own socket.
unset MYSQL_HOST MYSQL_TCP_PORT MYSQL_UNIX_PORT MYSQL_PWD

CMD=${1:-}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BASE=${2:-}
[ -n "$BASE" ] || BASE=$ROOT/.lakecdc/mariadb
PORT=${LAKECDC_MYSQL_PORT:-3307}
DATADIR=$BASE/data
RUNDIR=$BASE/run
SOCK=$RUNDIR/mysqld.sock
PIDFILE=$RUNDIR/mysqld.pid
ERRLOG=$BASE/mysqld.err
TMPDIR_DB=$BASE/tmp   # private: servers sharing /tmp can clash on their temporary table names
RUNUSER=$(id -un)   # mariadbd refuses to run as root unless told --user=root

find_bin() {
  command -v "$1" 2>/dev/null || { [ -x "/usr/sbin/$1" ] && echo "/usr/sbin/$1"; } || true
}

ensure_installed() {
  if [ -n "$(find_bin mariadbd)" ] && [ -n "$(find_bin mariadb-install-db)" ] && [ -n "$(find_bin mariadb)" ]; then
    return 0
  fi
  echo "mariadbd not found: installing mariadb-server mariadb-client with apt-get" >&2
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y mariadb-server mariadb-client
}

client() {  # the mariadb client on our socket; --no-defaults keeps /etc/mysql out
  "$(find_bin mariadb)" --no-defaults --protocol=socket --socket="$SOCK" -uroot "$@"
}

is_running() {
  [ -S "$SOCK" ] && "$(find_bin mariadb-admin)" --no-defaults --protocol=socket --socket="$SOCK" -uroot ping >/dev/null 2>&1
}

init_datadir() {
  mkdir -p "$DATADIR" "$RUNDIR" "$TMPDIR_DB"
  "$(find_bin mariadb-install-db)" --no-defaults --datadir="$DATADIR" --user="$RUNUSER" \
      --auth-root-authentication-method=normal --skip-test-db --skip-name-resolve --tmpdir="$TMPDIR_DB" \
      >"$BASE/install-db.log" 2>&1 || { cat "$BASE/install-db.log" >&2; exit 1; }
}

start() {
  ensure_installed
  if is_running; then
    echo "MariaDB already running on 127.0.0.1:$PORT (socket $SOCK)"; return 0
  fi
  if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    echo "a mariadbd (pid $(cat "$PIDFILE")) holds $DATADIR but does not answer; run '$0 stop' first" >&2; exit 1
  fi
  mkdir -p "$RUNDIR" "$TMPDIR_DB"
  [ -d "$DATADIR/mysql" ] || init_datadir
  # --no-defaults MUST be the first option
  "$(find_bin mariadbd)" --no-defaults \
    --user="$RUNUSER" --datadir="$DATADIR" \
    --socket="$SOCK" --pid-file="$PIDFILE" --log-error="$ERRLOG" --tmpdir="$TMPDIR_DB" \
    --port="$PORT" --bind-address=127.0.0.1 --skip-name-resolve \
    --character-set-server=utf8mb4 --collation-server=utf8mb4_unicode_ci \
    --server-id=1 --log-bin="$DATADIR/binlog" \
    --binlog-format=ROW --binlog-row-image=FULL --binlog-row-metadata=FULL --gtid-strict-mode=ON \
    --innodb-buffer-pool-size=128M --innodb-log-file-size=48M \
    --innodb-flush-log-at-trx-commit=2 --sync-binlog=0 --max-allowed-packet=256M \
    >/dev/null 2>&1 &
  local launcher=$!
  for _ in $(seq 1 600); do
    if is_running; then
      echo "MariaDB ready on 127.0.0.1:$PORT (user root, empty password; data in $DATADIR)"; return 0
    fi
    if ! kill -0 "$launcher" 2>/dev/null; then
      echo "mariadbd exited; last lines of $ERRLOG:" >&2; tail -30 "$ERRLOG" >&2 || true; exit 1
    fi
    sleep 0.1
  done
  echo "timeout waiting for mariadbd; last lines of $ERRLOG:" >&2; tail -30 "$ERRLOG" >&2 || true; exit 1
}

stop() {
  if [ ! -f "$PIDFILE" ]; then echo "not running"; return 0; fi
  local pid; pid=$(cat "$PIDFILE")
  if ! kill -0 "$pid" 2>/dev/null; then rm -f "$PIDFILE"; echo "not running"; return 0; fi
  kill "$pid"   # SIGTERM = clean shutdown
  for _ in $(seq 1 300); do
    kill -0 "$pid" 2>/dev/null || { echo "stopped"; return 0; }
    sleep 0.1
  done
  echo "mariadbd (pid $pid) still running after 30 s, sending SIGKILL" >&2; kill -9 "$pid"
}

status() {
  if is_running; then
    echo "running on 127.0.0.1:$PORT (socket $SOCK, data $DATADIR)"
    client -N -e "SELECT @@version, @@log_bin, @@binlog_format, @@binlog_row_image, @@binlog_row_metadata"
  else
    echo "not running (data $DATADIR)"; return 3
  fi
}

case "$CMD" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  cli) shift; [ $# -gt 0 ] && shift; exec "$(find_bin mariadb)" --no-defaults --protocol=socket --socket="$SOCK" -uroot "$@" ;;
  *) echo "usage: $0 start|stop|status|cli [DIR]" >&2; exit 2 ;;
esac
