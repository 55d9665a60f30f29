#!/usr/bin/env bash
# Regenerates the UI screenshots in docs/img/ from a real run: runs the tutorial (scripts/tutorial.sh: sandbox
# MariaDB, three micro-batches through Dagster), starts `dg dev` headless on a free loopback port against the
# tutorial's DAGSTER_HOME, re-snapshots one partition with the re-snapshot job, materialises the example downstream
# asset (assets/order_totals.py), renders pages with headless Chromium, and stops Dagster again. The sandbox MariaDB
# keeps running, as after scripts/tutorial.sh (scripts/mariadb.sh stop).
#
#   scripts/screenshots.sh            # needs chromium (scripts/setup.sh --tests installs it)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROMIUM" ] || { echo "screenshots: chromium is not installed (run scripts/setup.sh --tests)" >&2; exit 1; }

scripts/tutorial.sh >/dev/null

export LAKECDC_MYSQL_PORT=${LAKECDC_MYSQL_PORT:-3307}
export MYSQL_HOST=127.0.0.1 MYSQL_PORT=$LAKECDC_MYSQL_PORT MYSQL_USER=root MYSQL_PASSWORD=
export LAKECDC_WAREHOUSE="$ROOT/.lakecdc/tutorial/warehouse"
export DAGSTER_HOME="$ROOT/.lakecdc/tutorial/dagster_home"
export LAKECDC_PIPELINES_DIR="$ROOT/assets"
export DAGSTER_DISABLE_TELEMETRY=yes
PATH="$ROOT/.venv/bin:$PATH"
# (scripts/tutorial.sh wrote the instance's dagster.yaml: pools limited to one run per table, telemetry off.)

PORT=$(.venv/bin/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
LOG=$ROOT/.lakecdc/tutorial/dagster-dev.log
setsid dg dev -w workspace.yaml -h 127.0.0.1 -p "$PORT" >"$LOG" 2>&1 &
DEV=$!
stop() {  # dg dev's children may hang on shutdown: TERM, then KILL the process group after 20 s
  kill -TERM -- "-$DEV" 2>/dev/null || true
  for _ in $(seq 1 20); do kill -0 "$DEV" 2>/dev/null || break; sleep 1; done
  kill -KILL -- "-$DEV" 2>/dev/null || true
  wait "$DEV" 2>/dev/null || true
}
trap stop EXIT

URL="http://127.0.0.1:$PORT"
for _ in $(seq 1 120); do
  curl -sf "$URL/server_info" >/dev/null 2>&1 && break
  sleep 1
done
curl -sf "$URL/server_info" >/dev/null || { tail -30 "$LOG" >&2; echo "screenshots: dg dev did not start" >&2; exit 1; }
# The code location must be loaded before the pages render anything.
for _ in $(seq 1 60); do
  curl -s -X POST -H 'Content-Type: application/json' "$URL/graphql" \
    -d '{"query":"{ assetNodes { id } }"}' | grep -q '"id"' && break
  sleep 1
done
# Dismiss the "join the community" modal that would cover every page.
curl -s -X POST -H 'Content-Type: application/json' "$URL/graphql" -d '{"query":"mutation { setNuxSeen }"}' >/dev/null

# A partition re-snapshot, so the asset's history also shows one: the re-snapshot job launched through the webserver
# with the partition in its run config, as a user does from the job's Launchpad.
gql() { curl -sf -X POST -H 'Content-Type: application/json' "$URL/graphql" -d "$1"; }
LAUNCHED=$(gql '{"query":"mutation { launchRun(executionParams: {selector: {repositoryLocationName: \"lakecdc\", repositoryName: \"__repository__\", jobName: \"resnapshot__inventory__orders\"}, runConfigData: {ops: {resnapshot__inventory__orders_op: {config: {partitions: [\"order_day=20260103\"]}}}}}) { __typename ... on LaunchRunSuccess { run { runId } } } }"}')
RUN_ID=$(echo "$LAUNCHED" | sed -n 's/.*"runId": *"\([^"]*\)".*/\1/p')
[ -n "$RUN_ID" ] || { echo "screenshots: the partition re-snapshot was not launched: $LAUNCHED" >&2; exit 1; }
STATUS_QUERY="{\"query\":\"{ runOrError(runId: \\\"$RUN_ID\\\") { ... on Run { status } } }\"}"
for _ in $(seq 1 180); do
  gql "$STATUS_QUERY" | grep -Eq '"status": *"(SUCCESS|FAILURE|CANCELED)"' && break
  sleep 1
done
gql "$STATUS_QUERY" | grep -Eq '"status": *"SUCCESS"' || { echo "screenshots: the partition re-snapshot failed" >&2; exit 1; }
# The example downstream of the tutorial's table (assets/order_totals.py): its totals from the table's changes,
# after the re-snapshot's commit (the lineage then shows it in sync).
dg launch -m definitions --assets 'key:"analytics/daily_order_totals"' 2>&1 | grep -q RUN_SUCCESS \
  || { echo "screenshots: analytics/daily_order_totals did not materialise" >&2; exit 1; }

mkdir -p docs/img
shot() {  # shot FILE PATH [WIDTH,HEIGHT]
  "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-background-networking --hide-scrollbars \
    --window-size="${3:-1600,1000}" --virtual-time-budget=25000 --screenshot="$ROOT/docs/img/$1" "$URL$2" \
    >/dev/null 2>&1
  echo "docs/img/$1"
}
shot lineage.png "/assets/paimon/inventory/orders?view=lineage&lineageScope=neighbors"
shot asset.png "/assets/paimon/inventory/orders"
shot events.png "/assets/paimon/inventory/orders?view=events"
shot checks.png "/assets/paimon/inventory/orders?view=checks"
shot resnapshot.png "/runs/$RUN_ID"
shot downstream.png "/assets/analytics/daily_order_totals?view=lineage&lineageScope=upstream&lineageDepth=2"
