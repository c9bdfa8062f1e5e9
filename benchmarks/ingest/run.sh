#!/usr/bin/env bash
# Event ingestion benchmark: events/s through POST /v1/events (200-event batches, signed, over
# HTTP, against a release build) next to a raw batched insert of the same rows into the same
# schema with the same PRAGMAs (Python sqlite3), in one run.
#   benchmarks/ingest/run.sh [EVENTS] [DEVICES]      (defaults 100000 and 4)
set -euo pipefail
cd "$(dirname "$0")/../.."
EVENTS="${1:-100000}"
DEVICES="${2:-4}"
source benchmarks/serve.sh

python3 benchmarks/ingest/load.py --url "http://127.0.0.1:$port" --events "$EVENTS" --devices "$DEVICES" \
    --key "$(value 'app key id')" --secret="$(value 'app key secret')" \
    --database "$work/data/backplane.sqlite" --baseline "$work/baseline.sqlite"
