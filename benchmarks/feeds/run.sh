#!/usr/bin/env bash
# Delta-sync benchmark: one device's read of its changes in 10 subscribed feeds, with 1,000 and
# then 100,000 episodes on the server, against a release build, in one run.
#   benchmarks/feeds/run.sh [EPISODES]      (default 100000)
set -euo pipefail
cd "$(dirname "$0")/../.."
LARGE="${1:-100000}"
swift build -c release --product backplane >/dev/null 2>&1 || swift build -c release --product backplane

work=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
.build/release/backplane serve --port 0 --data-dir "$work/data" --log-level warning >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 100); do grep -q "listening on" "$work/server.log" && break; sleep 0.1; done
port=$(grep "listening on" "$work/server.log" | head -1 | sed "s/.*://")
value() { grep "$1" "$work/server.log" | head -1 | sed 's/.*: //'; }
app=$(value 'application id')
cms=$(.build/release/backplane token create --app "$app" --scope cms --data-dir "$work/data")

python3 benchmarks/feeds/delta.py --url "http://127.0.0.1:$port" --large "$LARGE" \
    --key "$(value 'app key id')" --secret "$(value 'app key secret')" --cms "$cms"
