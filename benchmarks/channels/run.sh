#!/usr/bin/env bash
# Channel benchmark: N idle wake-up channels from a separate load process against a release
# build of the backplane. Prints resident memory per channel, /healthz latency while they are
# open, and the time for one admin call to wake every channel, next to the time to wake one
# channel measured in the same run. Past 20,000 channels the load process spreads them over
# source addresses 127.0.0.2, 127.0.0.3, … (each has about 28,000 ephemeral ports).
#   benchmarks/channels/run.sh [N]        (default 10000)
#   SERVE_ARGS="--channel-ping-seconds 0" benchmarks/channels/run.sh    (extra serve options)
#   SERVE_ENV="env MALLOC_ARENA_MAX=2" benchmarks/channels/run.sh        (server environment)
set -euo pipefail
cd "$(dirname "$0")/../.."
N="${1:-10000}"

python3 -c "import uvloop" 2>/dev/null || python3 -m pip install --quiet uvloop
# One descriptor per channel in each process (server and load), plus headroom: the hard limit is
# raised when it is lower, which needs root (or CAP_SYS_RESOURCE), then the soft one to it.
need=$((N + 1000))
if [ "$(ulimit -Hn)" != unlimited ] && [ "$(ulimit -Hn)" -lt "$need" ]; then
    ulimit -Hn "$need" 2>/dev/null || { echo "the descriptor limit $(ulimit -Hn) is below $need and only root can raise it" >&2; exit 1; }
fi
ulimit -n "$(ulimit -Hn)"

# The server holds at most --max-connections (default 4096) and leaves the rest in the backlog.
SERVE_ARGS="--max-connections $((N + 100)) ${SERVE_ARGS:-}"
source benchmarks/serve.sh

echo "backplane pid $server on port $port; $N channels"
python3 benchmarks/channels/open_channels.py --url "http://127.0.0.1:$port" --pid "$server" --devices "$N" \
    --key "$(value 'app key id')" --secret="$(value 'app key secret')" --admin "$(value 'admin token    :')"
