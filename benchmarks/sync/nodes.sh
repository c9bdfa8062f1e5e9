#!/usr/bin/env bash
# Sync throughput with one and with two backplane nodes on one PostgreSQL database: wrk replays
# pre-signed quiet syncs, then syncs that each acknowledge one delivered command (written into
# the database with COPY first), against node A alone, each right after GET /healthz on node A
# as its baseline; then quiet syncs against both nodes at once (one wrk each, half the
# connections each).
#   benchmarks/sync/nodes.sh [SECONDS] [CONNECTIONS]      (defaults 10 and 32)
# Everything shares this machine's cores: two nodes here measure the cost of sharing, not the
# gain of a second machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_EACH="${1:-10}"
CONNECTIONS="${2:-32}"
command -v wrk >/dev/null || { echo "needs wrk (apt-get install wrk)" >&2; exit 1; }
source benchmarks/postgres.sh
SERVE_ARGS="${SERVE_ARGS:-} --database-url $database_url"
source benchmarks/serve.sh
"$backplane_bin" serve --port 0 --data-dir "$work/data-b" --log-level warning --device-rate-limit 0 --registration-rate-limit 0 --user-registration-rate-limit 0 --database-url "$database_url" \
    >"$work/server-b.log" 2>&1 &
server_b=$!
trap 'kill "$server" "$server_b" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; stop_postgres' EXIT
for _ in $(seq 100); do grep -q "backplane: listening on" "$work/server-b.log" && break; sleep 0.1; done
port_b=$(grep "backplane: listening on" "$work/server-b.log" | head -1 | sed "s/.*://")

python3 benchmarks/sync/nodes.py --url-a "http://127.0.0.1:$port" --url-b "http://127.0.0.1:$port_b" \
    --key "$(value 'app key id')" --secret="$(value 'app key secret')" --out "$work" --database-url "$database_url" \
    --seconds "$SECONDS_EACH" --connections "$CONNECTIONS"
