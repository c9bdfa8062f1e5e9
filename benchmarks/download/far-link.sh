#!/usr/bin/env bash
# The download engine on an emulated far link (far_link_origin.py beside this script): HLS assets
# of many segments from an origin that holds each answer for a round trip and paces each answer
# and the whole link, fetched by the release harness with its defaults (over h2 by TLS, and over
# HTTP/1.1) and by aria2c with 16 connections (HTTP/1.1, in the same run). Prints the link's
# limit (bytes / total rate) and each downloader's best time as a share of it.
#
#   benchmarks/download/far-link.sh
#   WORKLOADS="2000x100@40" ROUNDS=1 PROTOCOLS=http1 HARNESS_ARGS="--parallel 16" benchmarks/download/far-link.sh
#
# WORKLOADS: segments x KiB @ RTT in ms, space-separated (default the issue's three).
# PROTOCOLS: the engine's runs, "h2" (TLS, ALPN) and/or "http1" (plain). ANSWER_MBIT (50) and
# TOTAL_MBIT (300) set the rates, ROUNDS (3) the runs of each, best kept. HARNESS_BIN runs that
# harness instead of building one, and BACKPLANE_BIN that server (an earlier commit's, for a
# before and after on the same machine); HARNESS_ARGS are added to its download command.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/../.."
WORKLOADS=${WORKLOADS:-"2000x100@40 8000x25@80 200x4096@40"}
PROTOCOLS=${PROTOCOLS:-"h2 http1"}
ANSWER_MBIT=${ANSWER_MBIT:-50}
TOTAL_MBIT=${TOTAL_MBIT:-300}
ROUNDS=${ROUNDS:-3}
HARNESS_ARGS=${HARNESS_ARGS:-}
for workload in $WORKLOADS; do
    [[ $workload =~ ^[1-9][0-9]*x[1-9][0-9]*@[0-9]+$ ]] || { echo "a workload is COUNTxKIB@RTT_MS, not $workload" >&2; exit 2; }
done
for tool in aria2c openssl; do command -v "$tool" >/dev/null || { echo "needs $tool (apt-get install aria2 openssl)" >&2; exit 1; }; done
python3 -c 'import h2' 2>/dev/null || pip install -q h2 uvloop
if [[ -n "${HARNESS_BIN:-}" ]]; then
    harness=$HARNESS_BIN
else
    swift build -c release --product backplane-harness >/dev/null 2>&1 || swift build -c release --product backplane-harness
    harness=.build/release/backplane-harness
fi
. benchmarks/serve.sh
export BACKPLANE_URL="http://127.0.0.1:$port" BACKPLANE_APP_KEY="$(value 'app key id')" BACKPLANE_APP_SECRET="$(value 'app key secret')"

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$work/origin-key.pem" -out "$work/origin-ca.pem" \
    -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null
now() { date +%s.%N; }
bytes_of() { find "$1" -path '*/original' -prune -o -type f \( -name '*.ts' \) -printf '%s\n' | awk '{ n += $1 } END { print n + 0 }'; }

origin_pid=
stop_origin() { if [[ -n $origin_pid ]]; then kill "$origin_pid" 2>/dev/null || true; wait "$origin_pid" 2>/dev/null || true; origin_pid=; fi; }
trap 'stop_origin; kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$work"' EXIT

# One timed harness run: seconds and segment bytes on disk.
engine() {  # protocol, data dir, URL
    local protocol=$1 dir=$2 url=$3 start end trust=()
    [[ $protocol == h2 ]] && trust=(--origin-ca-file "$work/origin-ca.pem")
    BACKPLANE_USER="far-$(basename "$dir")" "$harness" register --data-dir "$dir" >/dev/null
    start=$(now)
    # shellcheck disable=SC2086
    BACKPLANE_USER="far-$(basename "$dir")" "$harness" download --asset-id far --url "$url" --hls --wait --data-dir "$dir" \
        "${trust[@]}" $HARNESS_ARGS >"$work/engine.out" || { echo "the harness failed ($protocol):" >&2; tail -5 "$work/engine.out" >&2; exit 1; }
    end=$(now)
    echo "$(echo "$end - $start" | bc) $(bytes_of "$dir/content")"
}

# aria2c fetches what the engine fetches: the master and media playlists, one after the other
# (a downloader learns the segments from them), then the segments, 16 at a time.
aria() {  # dir, base URL, count
    local dir=$1 base=$2 count=$3 start end
    mkdir -p "$dir"
    for i in $(seq 0 $((count - 1))); do printf '%s/v/%d.ts\n  out=%d.ts\n' "$base" "$i" "$i"; done >"$work/aria.txt"
    start=$(now)
    aria2c -q -d "$dir" --allow-overwrite=true "$base/master.m3u8"
    aria2c -q -d "$dir" --allow-overwrite=true "$base/v/media.m3u8"
    aria2c -q -i "$work/aria.txt" -d "$dir" -j 16 -x 1 -s 1 --file-allocation=none --allow-overwrite=true --auto-file-renaming=false
    end=$(now)
    echo "$(echo "$end - $start" | bc) $(bytes_of "$dir")"
}

echo "far-link download benchmark: $ANSWER_MBIT Mbit/s an answer, $TOTAL_MBIT Mbit/s in all, $(nproc) cores, best of $ROUNDS${HARNESS_ARGS:+, harness $HARNESS_ARGS}"
for workload in $WORKLOADS; do
    count=${workload%%x*}; rest=${workload#*x}; kib=${rest%@*}; rtt=${rest#*@}
    root="$work/origin-$workload"
    mkdir -p "$root/v"
    python3 - "$root" "$count" "$kib" <<'PY'
import os, sys
root, count, kib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(f"{root}/master.m3u8", "w") as f:
    f.write("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=4000000\nv/media.m3u8\n")
lines = ["#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-TARGETDURATION:2", "#EXT-X-MEDIA-SEQUENCE:0"]
block = os.urandom(kib * 1024)
for i in range(count):
    with open(f"{root}/v/{i}.ts", "wb") as f:
        # Each segment differs (its number in front), so that nothing could be taken for another.
        f.write(i.to_bytes(8, "big") + block[8:])
    lines += ["#EXTINF:2.0,", f"{i}.ts"]
with open(f"{root}/v/media.m3u8", "w") as f:
    f.write("\n".join(lines + ["#EXT-X-ENDLIST", ""]))
PY
    python3 benchmarks/download/far_link_origin.py "$root" --rtt-ms "$rtt" --answer-mbit "$ANSWER_MBIT" --total-mbit "$TOTAL_MBIT" \
        --cert "$work/origin-ca.pem" --key "$work/origin-key.pem" >"$work/origin.out" 2>&1 &
    origin_pid=$!
    for _ in $(seq 100); do grep -q ready "$work/origin.out" && break; sleep 0.1; done
    http=$(sed -n 's/.*http=\([0-9]*\).*/\1/p' "$work/origin.out")
    https=$(sed -n 's/.*https=\([0-9]*\).*/\1/p' "$work/origin.out")
    declare -A runs=()
    # Every copy stays until the end: ext4 is slow to create files right after many were
    # deleted (it skips recently freed inodes), a cost only the tool after a deletion would pay.
    # Dirty pages are written back before each run, so that no run pays for the one before.
    for round in $(seq "$ROUNDS"); do
        sync; runs[aria]+="$(aria "$work/aria-$workload-$round" "http://127.0.0.1:$http" "$count")"$'\n'
        for protocol in $PROTOCOLS; do
            case $protocol in
                h2) url="https://127.0.0.1:$https/master.m3u8" ;;
                http1) url="http://127.0.0.1:$http/master.m3u8" ;;
                *) echo "PROTOCOLS are h2 and http1, not $protocol" >&2; exit 2 ;;
            esac
            sync; runs[$protocol]+="$(engine "$protocol" "$work/engine-$workload-$protocol-$round" "$url")"$'\n'
        done
    done
    stop_origin
    echo "  origin: $(tail -1 "$work/origin.out")"
    python3 - "$count" "$kib" "$rtt" "$TOTAL_MBIT" "$PROTOCOLS" "${runs[aria]}" "${runs[h2]:-}" "${runs[http1]:-}" <<'PY'
import sys
count, kib, rtt, total_mbit, protocols, aria, h2, http1 = sys.argv[1:9]
size = int(count) * int(kib) * 1024
limit = size / (float(total_mbit) * 1e6 / 8)
print(f"{count} x {kib} KiB at {rtt} ms: {size/1e6:,.1f} MB, the link's limit {limit:.2f} s")
def show(label, text, goal=""):
    runs = [list(map(float, l.split())) for l in text.splitlines() if l.strip()]
    if not runs:
        return None
    for seconds, stored in runs:
        if int(stored) != size:
            sys.exit(f"{label} stored {int(stored)} bytes of segments, not {size}")
    best = min(r[0] for r in runs)
    print(f"  {label}: {best:.2f} s = {limit / best:.2f}x the link's limit{goal} (runs {', '.join(f'{r[0]:.2f}' for r in runs)})")
    return best
aria_best = show("aria2c, 16 connections (HTTP/1.1)", aria)
for name, text in (("h2", h2), ("http1", http1)):
    if name in protocols.split():
        best = show(f"engine, defaults ({'h2' if name == 'h2' else 'HTTP/1.1'})", text, " (goal >= 0.8)")
        print(f"    {aria_best / best:.2f}x aria2c's speed (goal > 1)")
PY
done
