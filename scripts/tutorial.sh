#!/usr/bin/env bash
# The Flink CDC tutorial "Metadata Columns, Computed Columns, and Soft Deletes", run through Dagster.
# On a fresh machine: installs what is missing, starts a sandbox MariaDB (binlog on) under .lakecdc/, creates the
# tutorial's inventory.orders table, materialises the Paimon asset with `dg launch` (Dagster's default SQLite
# storage in .lakecdc/tutorial/dagster_home, telemetry off), and prints the tables the tutorial prints after each
# step. It ends with the command that opens the Dagster UI on the same MariaDB, warehouse and Dagster storage.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
scripts/setup.sh

export LAKECDC_MYSQL_PORT=${LAKECDC_MYSQL_PORT:-3307}
# The tutorial YAML reads its connection from these (lakecdc's ${VAR} substitution).
export MYSQL_HOST=127.0.0.1 MYSQL_PORT=$LAKECDC_MYSQL_PORT MYSQL_USER=root MYSQL_PASSWORD=
export LAKECDC_WAREHOUSE="$ROOT/.lakecdc/tutorial/warehouse"
export DAGSTER_HOME="$ROOT/.lakecdc/tutorial/dagster_home"
export LAKECDC_PIPELINES_DIR="$ROOT/assets"
PIPELINE=assets/tutorial.yaml
PATH="$ROOT/.venv/bin:$PATH"

scripts/mariadb.sh start >/dev/null
mysql() { scripts/mariadb.sh cli "" "$@"; }

# The tutorial starts from an empty warehouse and a fresh source table.
rm -rf "$ROOT/.lakecdc/tutorial"; mkdir -p "$LAKECDC_WAREHOUSE" "$DAGSTER_HOME"
# The tutorial's Dagster instance: one run at a time per pipeline (its op's pool), no telemetry.
printf 'concurrency:\n  pools:\n    default_limit: 1\ntelemetry:\n  enabled: false\n' > "$DAGSTER_HOME/dagster.yaml"
mysql -e "DROP DATABASE IF EXISTS inventory; CREATE DATABASE inventory; USE inventory;
CREATE TABLE orders (
  id BIGINT NOT NULL,
  product VARCHAR(100) NOT NULL,
  price DECIMAL(10, 2) NOT NULL,
  created_at DATETIME(3) NOT NULL,
  PRIMARY KEY (id)
);
INSERT INTO orders VALUES
  (101, 'book', 29.90, '2026-01-01 12:00:00'),
  (102, 'pen', 5.00, '2026-01-02 09:30:00');"

materialize() { dg launch -m definitions --assets 'key:"paimon/inventory/orders"' 2>&1 \
  | grep -E "RUN_SUCCESS|RUN_FAILURE|Failure|Error" | tail -3 | cut -c1-200; }
query() { lakecdc sql "$PIPELINE" "$1"; }

echo "== 1. snapshot: dg launch"
materialize
lakecdc describe "$PIPELINE" inventory.orders
query "SELECT id, product_upper, price, order_day, op_type FROM inventory.orders ORDER BY id"
query "SELECT id, source_table, source_ts FROM inventory.orders ORDER BY id"

echo "== 2. update 101, delete 102, insert 103"
mysql -e "UPDATE inventory.orders SET product = 'notebook', price = 39.90 WHERE id = 101;
DELETE FROM inventory.orders WHERE id = 102;
INSERT INTO inventory.orders VALUES (103, 'pencil', 3.50, '2026-01-03 12:00:00');"
materialize
query "SELECT id, product_upper, price, order_day, op_type, source_ts > 0 AS has_binlog_time FROM inventory.orders ORDER BY id"
query "SELECT id, product_upper, price FROM inventory.orders WHERE op_type <> '-D' ORDER BY id"

echo "== 3. re-insert 102"
mysql -e "INSERT INTO inventory.orders VALUES (102, 'blue pen', 6.00, '2026-01-02 09:30:00');"
materialize
query "SELECT id, product_upper, price, order_day, op_type, source_ts > 0 AS has_binlog_time FROM inventory.orders ORDER BY id"
query "SELECT id, product_upper, price FROM inventory.orders WHERE op_type <> '-D' ORDER BY id"
lakecdc status "$PIPELINE"
echo "Dagster UI on this tutorial's MariaDB, warehouse and Dagster storage (the sandbox MariaDB keeps running;"
echo "stop it with scripts/mariadb.sh stop):"
echo "  DAGSTER_HOME=$DAGSTER_HOME LAKECDC_WAREHOUSE=$LAKECDC_WAREHOUSE MYSQL_PORT=$LAKECDC_MYSQL_PORT .venv/bin/dg dev -w workspace.yaml"
