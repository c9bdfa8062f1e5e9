#!/usr/bin/env bash
# The SDK's playback server against nginx serving the same files on loopback (Debian's nginx,
# sendfile on): a release harness downloads the assets from nginx (`download --wait`), serves
# them (`play ASSET --serve`), and wrk reads the same bytes from both, in turns:
#   - segment throughput: the SEGMENT_MIB MiB segment (default 4) of an HLS asset, CONNECTIONS
#     readers (default 8), RUN_SECONDS s (default 10) each; goal >= 0.8x nginx;
#   - first byte: `Range: bytes=0-0` of that segment by CONNECTIONS readers, p99 latency; goal <= 5 ms
#     (also printed for a flat asset's file, whose every request passes the rights check at the door);
#   - resident memory: the serving harness's peak (VmHWM) while CONNECTIONS readers read a
#     100 MB and then a 2 GB asset (separate processes); goal: flat in the asset's size.
# Each throughput and latency figure is the best of ROUNDS runs (default 3). Never run in CI.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/../.."
SEGMENT_MIB=${SEGMENT_MIB:-4}
CONNECTIONS=${CONNECTIONS:-8}
SECONDS_EACH=${RUN_SECONDS:-10}
ROUNDS=${ROUNDS:-3}
for value in "$SEGMENT_MIB" "$CONNECTIONS" "$SECONDS_EACH" "$ROUNDS"; do
    [[ $value =~ ^[1-9][0-9]*$ ]] || { echo "SEGMENT_MIB, CONNECTIONS, RUN_SECONDS and ROUNDS are positive integers" >&2; exit 2; }
done
command -v nginx >/dev/null && command -v wrk >/dev/null || { echo "needs nginx and wrk (apt-get install nginx wrk)" >&2; exit 1; }
swift build -c release --product backplane-harness >/dev/null 2>&1 || swift build -c release --product backplane-harness
. benchmarks/serve.sh
harness=.build/release/backplane-harness

origin="$work/origin"
mkdir -p "$origin"
head -c $((SEGMENT_MIB * 1024 * 1024)) /dev/urandom >"$origin/segment.mp4"
printf '#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXT-X-PLAYLIST-TYPE:VOD\n#EXTINF:10.0,\nsegment.mp4\n#EXT-X-ENDLIST\n' >"$origin/show.m3u8"
head -c $((100 * 1000 * 1000)) /dev/urandom >"$origin/asset-100mb.mp4"
# 2 GB of zeros (a sparse origin file): what is measured is the server's memory, not the bytes.
truncate -s $((2000 * 1000 * 1000)) "$origin/asset-2gb.mp4"
. benchmarks/nginx-origin.sh

export BACKPLANE_URL="http://127.0.0.1:$port" BACKPLANE_APP_KEY="$(value 'app key id')" BACKPLANE_APP_SECRET="$(value 'app key secret')"
export BACKPLANE_USER=viewer
device="$work/device"
for asset in segment asset-100mb asset-2gb; do
    "$harness" download --asset-id "$asset" --url "$base/$asset.mp4" --wait --data-dir "$device" >/dev/null
done
"$harness" download --asset-id show --url "$base/show.m3u8" --hls --wait --data-dir "$device" >/dev/null

# Serves ASSET from its own harness process; prints "pid url" (run in a subshell: the caller
# adds the pid to `extra_pids`, or stops it itself).
serve() {
    local out="$work/serve-$1.out"
    "$harness" play "$1" --serve --data-dir "$device" >"$out" 2>&1 &
    local pid=$!
    for _ in $(seq 300); do grep -q '"url"' "$out" && break; sleep 0.1; done
    echo "$pid $(sed -n 's/.*"url":"\([^"]*\)".*/\1/p' "$out" | head -n 1 | sed 's#\\/#/#g')"
}

# wrk's figures for a URL: bytes per second, and the p99 latency in ms (with --latency).
measure() {  # url, [header]
    local args=(-t2 -c"$CONNECTIONS" -d"${SECONDS_EACH}s" --latency)
    [[ -n ${2:-} ]] && args+=(-H "$2")
    wrk "${args[@]}" "$1" | python3 -c '
import re, sys
text = sys.stdin.read()
units = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3}
rate = re.search(r"Transfer/sec:\s*([\d.]+)(B|KB|MB|GB)", text)
p99 = re.search(r"\s99%\s+([\d.]+)(us|ms|s)\b", text)
errors = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
if errors: sys.exit(f"wrk saw {errors.group(1)} error answers:\n{text}")
scale = {"us": 0.001, "ms": 1, "s": 1000}
print(float(rate.group(1)) * units[rate.group(2)], float(p99.group(1)) * scale[p99.group(2)])'
}

# The HLS asset's segment (in its stream's folder: served to whoever holds the token, no rights
# read) and the flat asset's file (at the door: its rights are read on every request).
read -r show_pid show_url < <(serve show)
extra_pids+=("$show_pid")
segment_url="${show_url%/*}/video/0.mp4"
read -r flat_pid flat_url < <(serve segment)
extra_pids+=("$flat_pid")
sdk_rates=() nginx_rates=() sdk_p99=() nginx_p99=() flat_p99=()
for round in $(seq "$ROUNDS"); do
    read -r rate _ < <(measure "$base/segment.mp4"); nginx_rates+=("$rate")
    read -r rate _ < <(measure "$segment_url"); sdk_rates+=("$rate")
    read -r _ p99 < <(measure "$base/segment.mp4" "Range: bytes=0-0"); nginx_p99+=("$p99")
    read -r _ p99 < <(measure "$segment_url" "Range: bytes=0-0"); sdk_p99+=("$p99")
    read -r _ p99 < <(measure "$flat_url" "Range: bytes=0-0"); flat_p99+=("$p99")
done

# Peak resident memory of a serving harness while its asset is read, for two sizes.
peak() {  # asset
    local pid url
    read -r pid url < <(serve "$1")
    measure "$url" >/dev/null
    awk '/VmHWM/ { print $2 }' "/proc/$pid/status"
    kill "$pid"
}
rss_100mb=$(peak asset-100mb)
rss_2gb=$(peak asset-2gb)

python3 - "$SEGMENT_MIB" "$CONNECTIONS" "$SECONDS_EACH" "$ROUNDS" "$(nproc)" "${nginx_rates[*]}" "${sdk_rates[*]}" "${nginx_p99[*]}" "${sdk_p99[*]}" "${flat_p99[*]}" "$rss_100mb" "$rss_2gb" <<'PY'
import sys
mib, conns, secs, rounds, cores = sys.argv[1:6]
nginx_rates, sdk_rates, nginx_p99, sdk_p99, flat_p99 = (list(map(float, a.split())) for a in sys.argv[6:11])
rss_100, rss_2g = int(sys.argv[11]), int(sys.argv[12])
print(f"playback benchmark: {mib} MiB segment, {conns} readers, {secs} s a run, best of {rounds}, {cores} cores")
best_n, best_s = max(nginx_rates), max(sdk_rates)
print(f"segment throughput: nginx {best_n/1e6:,.0f} MB/s, playback server {best_s/1e6:,.0f} MB/s: ratio {best_s/best_n:.2f} (goal >= 0.8)")
print(f"  each round, the server over nginx: {', '.join(f'{s/n:.2f}' for s, n in zip(sdk_rates, nginx_rates))}")
print(f"first byte of the segment (Range: bytes=0-0), p99: nginx {min(nginx_p99):.2f} ms, playback server {min(sdk_p99):.2f} ms (goal <= 5 ms)")
print(f"  each round, nginx / playback server: {', '.join(f'{n:.2f} / {s:.2f}' for n, s in zip(nginx_p99, sdk_p99))} ms")
print(f"first byte of a flat asset's file (its rights read at the door), p99: playback server {min(flat_p99):.2f} ms")
print(f"peak resident memory while serving: 100 MB asset {rss_100/1024:.1f} MiB, 2 GB asset {rss_2g/1024:.1f} MiB: "
      f"ratio {rss_2g/rss_100:.2f} for 20x the bytes (goal: flat)")
PY
