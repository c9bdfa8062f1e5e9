#!/usr/bin/env bash
# List page benchmark: the time of one page of each admin and reporting list, on a database
# with 1,000 rows per table and one with LARGE (default 1,000,000), served side by side by two
# release servers and measured in turns in one run; then, on the large database, the same pages
# with the list indexes of migration v9 dropped (the schema before it), to show their worth.
#   benchmarks/lists/run.sh [LARGE]
set -euo pipefail
cd "$(dirname "$0")/../.."
LARGE="${1:-1000000}"
command -v wrk >/dev/null || { echo "needs wrk (apt-get install wrk)" >&2; exit 1; }
source benchmarks/serve.sh

# The second server, on its own data directory, for the large database.
"$backplane_bin" serve --port 0 --data-dir "$work/large" --log-level warning --device-rate-limit 0 --registration-rate-limit 0 --user-registration-rate-limit 0 >"$work/large.log" 2>&1 &
large_server=$!
trap 'kill "$server" "$large_server" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 100); do grep -q "backplane: listening on" "$work/large.log" && break; sleep 0.1; done

# Each server's admin token and a reporting token (the event lists take one).
tokens() {  # LOG DATA_DIR
    local app admin
    app=$(grep 'application id' "$1" | head -1 | sed 's/.*: //')
    admin=$(grep 'admin token' "$1" | head -1 | sed 's/.*: //')
    echo "$admin,$("$backplane_bin" token create --app "$app" --scope reporting --name bench --data-dir "$2" | tail -1)"
}
python3 benchmarks/lists/pages.py --large "$LARGE" \
    --small "http://127.0.0.1:$port,$work/data/backplane.sqlite,$(tokens "$work/server.log" "$work/data")" \
    --large-server "http://127.0.0.1:$(grep 'backplane: listening on' "$work/large.log" | head -1 | sed 's/.*://'),$work/large/backplane.sqlite,$(tokens "$work/large.log" "$work/large")"
