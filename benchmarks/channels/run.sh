#!/usr/bin/env bash
# Channel benchmark: N idle wake-up channels from a separate load process against a release
# build of the backplane. Prints resident memory per channel and the time for one admin call to
# wake every channel, next to the time to wake one channel measured in the same run.
#   benchmarks/channels/run.sh [N]        (default 10000)
#   SERVE_ARGS="--channel-ping-seconds 0" benchmarks/channels/run.sh    (extra serve options)
#   SERVE_ENV="env MALLOC_ARENA_MAX=2" benchmarks/channels/run.sh        (server environment)
set -euo pipefail
cd "$(dirname "$0")/../.."
N="${1:-10000}"

python3 -c "import websockets, uvloop" 2>/dev/null || python3 -m pip install --quiet websockets uvloop
swift build -c release --product backplane >/dev/null 2>&1 || swift build -c release --product backplane

# One fd per channel on each side, plus headroom.
ulimit -n "$(ulimit -Hn)"
[ "$(ulimit -n)" -gt $((N + 100)) ] || { echo "fd limit $(ulimit -n) is too low for $N channels" >&2; exit 1; }

work=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
${SERVE_ENV:-} .build/release/backplane serve --port 0 --data-dir "$work/data" --log-level warning ${SERVE_ARGS:-} >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 100); do grep -q "listening on" "$work/server.log" && break; sleep 0.1; done
port=$(grep "listening on" "$work/server.log" | head -1 | sed "s/.*://")
value() { grep "$1" "$work/server.log" | head -1 | sed 's/.*: //'; }

echo "backplane pid $server on port $port; $N channels"
python3 benchmarks/channels/load.py --url "http://127.0.0.1:$port" --pid "$server" --devices "$N" \
    --key "$(value 'app key id')" --secret "$(value 'app key secret')" --admin "$(value 'admin token    :')"
