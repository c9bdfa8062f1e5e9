#!/usr/bin/env bash
# Delta-sync benchmark: one device's read of its changes in 10 subscribed feeds, with 1,000 and
# then 100,000 episodes on the server, against a release build, in one run.
#   benchmarks/feeds/run.sh [EPISODES]      (default 100000)
set -euo pipefail
cd "$(dirname "$0")/../.."
LARGE="${1:-100000}"
source benchmarks/serve.sh
app=$(value 'application id')
cms=$("$backplane_bin" token create --app "$app" --scope cms --data-dir "$work/data")

python3 benchmarks/feeds/delta.py --url "http://127.0.0.1:$port" --large "$LARGE" \
    --key "$(value 'app key id')" --secret="$(value 'app key secret')" --cms "$cms"
