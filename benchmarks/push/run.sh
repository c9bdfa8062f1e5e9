#!/usr/bin/env bash
# Push benchmark: N devices, one wipe each, pushed through APNs (half) and FCM (half) to the
# tests' local endpoints, which check every token as the providers do, from a release build of
# the backplane; then N more, 1,000 to a user, one wipe per user. Prints pushes per second and
# the median/p99 from the admin call to the push arriving, next to the same N wipes to devices
# without a token (enqueueing alone), measured in the same run.
#   benchmarks/push/run.sh [N]        (default 10000)
set -euo pipefail
cd "$(dirname "$0")/../.."
N="${1:-10000}"
[[ "$N" =~ ^[1-9][0-9]*$ ]] || { echo "N must be a positive integer" >&2; exit 1; }

swift build -c release --product PushBenchEndpoints >/dev/null 2>&1 || swift build -c release --product PushBenchEndpoints
endpoints_dir=$(mktemp -d)
.build/release/PushBenchEndpoints "$endpoints_dir/config.json" "$endpoints_dir/results.json" "$((2 * N))" 900 &
endpoints=$!
for _ in $(seq 300); do [ -s "$endpoints_dir/config.json" ] && break; sleep 0.1; done
[ -s "$endpoints_dir/config.json" ] || { echo "the endpoints did not start" >&2; exit 1; }
config() { python3 -c "import json,sys; print(json.load(open('$endpoints_dir/config.json'))['$1'])"; }

SERVE_ARGS="--apns-url $(config apnsUrl) --fcm-url $(config fcmUrl) --google-token-url $(config googleTokenUrl) --push-ca-file $(config caFile) ${SERVE_ARGS:-}"
source benchmarks/serve.sh
trap 'kill "$server" "$endpoints" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$work" "$endpoints_dir"' EXIT

echo "backplane pid $server on port $port; $N devices not pushed, $N pushed one call each, $N pushed 1,000 a call"
python3 benchmarks/push/push_commands.py --port "$port" --devices "$N" --key "$(value 'app key id')" --secret="$(value 'app key secret')" \
    --admin "$(value 'admin token    :')" --config "$endpoints_dir/config.json" --results "$endpoints_dir/results.json" --endpoints-pid "$endpoints" \
    --progress "$endpoints_dir/results.json.progress" --server-pid "$server"
