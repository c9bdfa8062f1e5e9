#!/usr/bin/env bash
# Sync throughput benchmark: wrk replays pre-signed requests (unique nonces, fresh timestamps)
# against the release server, each scenario beside GET /healthz in the same run, and a raw
# SQLite registration loop (one BEGIN IMMEDIATE; count; insert; COMMIT per device, the server's
# schema and PRAGMAs) as the registration baseline.
#   benchmarks/sync/run.sh [SECONDS] [CONNECTIONS]      (defaults 10 and 32)
#   SYNC_ONLY=TEXT runs only the scenarios whose names contain TEXT (e.g. "quiet").
#   SYNC_REPEAT=N runs each scenario N times (default 3), each beside its own /healthz, and prints
#   the medians; SYNC_REPEAT=1 for single runs.
#   SLOW_FSYNC_US=800 makes every fsync of the server and of the raw loop wait that long first
#   (benchmarks/slow-fsync, LD_PRELOAD): a disk like the one the goals were set on.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_EACH="${1:-10}"
CONNECTIONS="${2:-32}"
command -v wrk >/dev/null || { echo "needs wrk (apt-get install wrk)" >&2; exit 1; }
slow=()
if [ -n "${SLOW_FSYNC_US:-}" ]; then
    mkdir -p .build/slow-fsync
    library="$PWD/.build/slow-fsync/slow_fsync.so"
    cc -shared -fPIC -O2 -o "$library" benchmarks/slow-fsync/slow_fsync.c -ldl
    slow=(env LD_PRELOAD="$library" SLOW_FSYNC_US="$SLOW_FSYNC_US")
    SERVE_ENV="${slow[*]} ${SERVE_ENV:-}"
    echo "every fsync and fdatasync waits $SLOW_FSYNC_US us first (server and raw loop)"
fi
source benchmarks/serve.sh
if [ -n "${SLOW_FSYNC_US:-}" ] && ! grep -q slow_fsync "/proc/$server/maps"; then
    echo "the server did not load $library" >&2; exit 1
fi

${slow[@]+"${slow[@]}"} python3 benchmarks/sync/presign.py --url "http://127.0.0.1:$port" --key "$(value 'app key id')" \
    --secret="$(value 'app key secret')" --database "$work/data/backplane.sqlite" --out "$work" \
    --seconds "$SECONDS_EACH" --connections "$CONNECTIONS" ${SYNC_ONLY:+--only "$SYNC_ONLY"} ${SYNC_REPEAT:+--repeat "$SYNC_REPEAT"}
