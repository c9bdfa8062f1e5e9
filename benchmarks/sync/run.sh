#!/usr/bin/env bash
# Sync throughput benchmark: wrk replays pre-signed requests (unique nonces, fresh timestamps)
# against the release server, each scenario beside GET /healthz in the same run, and a raw
# SQLite registration loop (one BEGIN IMMEDIATE; count; insert; COMMIT per device, the server's
# schema and PRAGMAs) as the registration baseline.
#   benchmarks/sync/run.sh [SECONDS] [CONNECTIONS]      (defaults 10 and 32)
#   SYNC_ONLY=TEXT runs only the scenarios whose names contain TEXT (e.g. "quiet").
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_EACH="${1:-10}"
CONNECTIONS="${2:-32}"
command -v wrk >/dev/null || { echo "needs wrk (apt-get install wrk)" >&2; exit 1; }
source benchmarks/serve.sh

python3 benchmarks/sync/presign.py --url "http://127.0.0.1:$port" --key "$(value 'app key id')" \
    --secret="$(value 'app key secret')" --database "$work/data/backplane.sqlite" --out "$work" \
    --seconds "$SECONDS_EACH" --connections "$CONNECTIONS" ${SYNC_ONLY:+--only "$SYNC_ONLY"}
