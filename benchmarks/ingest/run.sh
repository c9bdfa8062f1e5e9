#!/usr/bin/env bash
# Event ingestion benchmark: events/s through POST /v1/events (200-event batches, signed, over
# HTTP, against a release build) next to a raw batched write of the same rows in one run:
#   benchmarks/ingest/run.sh [EVENTS] [DEVICES]               SQLite: the same schema and PRAGMAs (Python sqlite3)
#   benchmarks/ingest/run.sh --postgres [EVENTS] [DEVICES]    PostgreSQL: COPY into the same table
# (defaults 100000 and 4)
set -euo pipefail
cd "$(dirname "$0")/../.."
postgres=0
if [[ "${1:-}" == --postgres ]]; then postgres=1; shift; fi
EVENTS="${1:-100000}"
DEVICES="${2:-4}"
if [[ $postgres == 1 ]]; then
    python3 -c 'import psycopg' 2>/dev/null || python3 -m pip install --quiet 'psycopg[binary]'
    source benchmarks/postgres.sh
    SERVE_ARGS="${SERVE_ARGS:-} --database-url $database_url"
    store=(--postgres-url "$database_url")
fi
source benchmarks/serve.sh
[[ $postgres == 1 ]] || store=(--database "$work/data/backplane.sqlite" --baseline "$work/baseline.sqlite")

python3 benchmarks/ingest/upload_events.py --url "http://127.0.0.1:$port" --events "$EVENTS" --devices "$DEVICES" \
    --key "$(value 'app key id')" --secret="$(value 'app key secret')" "${store[@]}"
