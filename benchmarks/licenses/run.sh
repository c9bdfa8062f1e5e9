#!/usr/bin/env bash
# License door benchmark: a ClearKey license (POST /v1/licenses: the download rules, a license
# row, the keys unsealed and wrapped for the device) against a download permission
# (POST /v1/download-grants: the same rules, an Ed25519 entitlement) in the same run, each
# beside GET /healthz, from a pool of devices that each hold a grant of the asset; then the
# license door paced at 70 % of its peak for its p99. Never run in CI (benchmarks/README.md).
#   benchmarks/licenses/run.sh [SECONDS] [CONNECTIONS]      (defaults 10 and 32)
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_EACH="${1:-10}"
CONNECTIONS="${2:-32}"
command -v wrk >/dev/null || { echo "needs wrk (apt-get install wrk)" >&2; exit 1; }
source benchmarks/serve.sh
python3 benchmarks/licenses/door.py --url "http://127.0.0.1:$port" --key "$(value 'app key id')" \
    --secret="$(value 'app key secret')" --token "$(value 'admin token')" --out "$work" \
    --seconds "$SECONDS_EACH" --connections "$CONNECTIONS" ${LICENSE_REPEAT:+--repeat "$LICENSE_REPEAT"}
