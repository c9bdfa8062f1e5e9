#!/usr/bin/env bash
# The SDK's download engine against curl, from the same local origin (nginx from Debian):
# an HLS asset of SEGMENTS segments of SEGMENT_KIB KiB (default 1,000 × 512 KiB = 512 MiB), a
# DASH asset of the same segments (a `$Number$` template; its files are hard links to the HLS
# ones) and a flat file of FLAT_MIB MiB (default 1,024), each fetched by the release harness
# (`download --wait`, PARALLEL files at once) and by curl with the same parallelism. Prints
# both throughputs, their ratio and the harness's peak resident memory. The harness runs twice a
# round: with its default, files left to the kernel as curl leaves them, and with --flush-files,
# each file flushed to disk before it counts (`DownloadOptions.flushesFiles`). Each is the best of
# ROUNDS runs (default 3), curl and the harness taking turns.
set -euo pipefail
# A failing command inside $(...) stops the script too (a failed register or curl would
# otherwise leave a figure behind).
shopt -s inherit_errexit
cd "$(dirname "$0")/../.."
SEGMENTS=${SEGMENTS:-1000}
SEGMENT_KIB=${SEGMENT_KIB:-512}
FLAT_MIB=${FLAT_MIB:-1024}
PARALLEL=${PARALLEL:-4}
ROUNDS=${ROUNDS:-3}
for value in "$SEGMENTS" "$SEGMENT_KIB" "$FLAT_MIB" "$PARALLEL" "$ROUNDS"; do
    [[ $value =~ ^[1-9][0-9]*$ ]] || { echo "SEGMENTS, SEGMENT_KIB, FLAT_MIB, PARALLEL and ROUNDS are positive integers" >&2; exit 2; }
done

command -v nginx >/dev/null || { echo "needs nginx (apt-get install nginx)" >&2; exit 1; }
# HARNESS_BIN runs that harness instead of building one (an earlier commit's, for a before and
# after on the same machine); HARNESS_ARGS are added to its download command.
if [[ -n "${HARNESS_BIN:-}" ]]; then
    harness=$HARNESS_BIN
else
    swift build -c release --product backplane-harness >/dev/null 2>&1 || swift build -c release --product backplane-harness
    harness=.build/release/backplane-harness
fi
HARNESS_ARGS=${HARNESS_ARGS:-}
. benchmarks/serve.sh

# The content: random bytes, so nothing compresses.
origin="$work/origin"
mkdir -p "$origin/hls/v" "$origin/dash/v"
python3 - "$origin" "$SEGMENTS" "$SEGMENT_KIB" "$FLAT_MIB" <<'PY'
import os, sys
root, segments, kib, flat_mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
with open(f"{root}/hls/master.m3u8", "w") as f:
    f.write("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=4000000\nv/media.m3u8\n")
lines = ["#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-TARGETDURATION:6", "#EXT-X-MEDIA-SEQUENCE:0"]
for i in range(segments):
    with open(f"{root}/hls/v/{i}.ts", "wb") as f:
        f.write(os.urandom(kib * 1024))
    lines += ["#EXTINF:6.0,", f"{i}.ts"]
with open(f"{root}/hls/v/media.m3u8", "w") as f:
    f.write("\n".join(lines + ["#EXT-X-ENDLIST", ""]))
# The same media as DASH: segment i + 1 of the template is HLS segment i.
for i in range(segments):
    os.link(f"{root}/hls/v/{i}.ts", f"{root}/dash/v/{i + 1}.m4s")
with open(f"{root}/dash/manifest.mpd", "w") as f:
    f.write(f"""<?xml version="1.0" encoding="UTF-8"?>
<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT{segments * 6}S" minBufferTime="PT2S">
  <Period>
    <AdaptationSet contentType="video" mimeType="video/mp4">
      <SegmentTemplate timescale="1" duration="6" startNumber="1" media="v/$Number$.m4s"/>
      <Representation id="v" bandwidth="4000000"/>
    </AdaptationSet>
  </Period>
</MPD>
""")
with open(f"{root}/flat.mp4", "wb") as f:
    for _ in range(flat_mib):
        f.write(os.urandom(1024 * 1024))
PY

. benchmarks/nginx-origin.sh

export BACKPLANE_URL="http://127.0.0.1:$port" BACKPLANE_APP_KEY="$(value 'app key id')" BACKPLANE_APP_SECRET="$(value 'app key secret')"
export BACKPLANE_USER=bench
# Bytes of the files stored (not of directories, whose sizes vary with their history), the
# SDK's copies of the original playlists left out.
bytes_of() { find "$1" -path '*/original' -prune -o -type f -printf '%s\n' | awk '{ n += $1 } END { print n + 0 }'; }
now() { date +%s.%N; }

# One harness run: seconds, bytes on disk, peak RSS (KiB). The device is registered first,
# untimed, as an app's is before it downloads; the run includes starting the process and
# the engine's first sync.
sdk() {  # name, data dir, harness args...
    local name=$1 dir=$2; shift 2
    local start end
    export BACKPLANE_USER="bench-$name-$(basename "$dir")"
    "$harness" register --data-dir "$dir" >/dev/null
    sync
    start=$(now)
    # shellcheck disable=SC2086
    if ! /usr/bin/time -f '%M' -o "$work/$name.rss" "$harness" download --asset-id "$name" "$@" --parallel "$PARALLEL" $HARNESS_ARGS --wait \
        --data-dir "$dir" >"$work/$name.out"; then
        echo "the harness failed on $name" >&2
        exit 1
    fi
    end=$(now)
    echo "$(echo "$end - $start" | bc) $(bytes_of "$dir/content") $(cat "$work/$name.rss")"
}

# The same files with curl: the playlists, then the segments PARALLEL at a time. Prints the
# time to download and the time until the files are also on disk (one `sync -f` after curl):
# by default the SDK flushes each file before it counts as downloaded; curl leaves them to the kernel.
curl_hls() {
    local dir=$1 start end
    mkdir -p "$dir"
    start=$(now)
    curl -sf -o "$dir/master.m3u8" "$base/hls/master.m3u8"
    curl -sf -o "$dir/media.m3u8" "$base/hls/v/media.m3u8"
    for i in $(seq 0 $((SEGMENTS - 1))); do printf 'url = "%s"\noutput = "%s"\n' "$base/hls/v/$i.ts" "$dir/$i.ts"; done >"$work/curl.cfg"
    curl -sSf --no-progress-meter --parallel --parallel-max "$PARALLEL" --config "$work/curl.cfg"
    end=$(now)
    sync -f "$dir"
    echo "$(echo "$end - $start" | bc) $(bytes_of "$dir") $(echo "$(now) - $start" | bc)"
}
curl_dash() {
    local dir=$1 start end
    mkdir -p "$dir"
    start=$(now)
    curl -sf -o "$dir/manifest.mpd" "$base/dash/manifest.mpd"
    for i in $(seq 1 "$SEGMENTS"); do printf 'url = "%s"\noutput = "%s"\n' "$base/dash/v/$i.m4s" "$dir/$i.m4s"; done >"$work/curl.cfg"
    curl -sSf --no-progress-meter --parallel --parallel-max "$PARALLEL" --config "$work/curl.cfg"
    end=$(now)
    sync -f "$dir"
    echo "$(echo "$end - $start" | bc) $(bytes_of "$dir") $(echo "$(now) - $start" | bc)"
}
curl_flat() {
    local dir=$1 start end
    mkdir -p "$dir"
    start=$(now)
    curl -sf -o "$dir/flat.mp4" "$base/flat.mp4"
    end=$(now)
    sync -f "$dir"
    echo "$(echo "$end - $start" | bc) $(bytes_of "$dir") $(echo "$(now) - $start" | bc)"
}

# label, the SDK's runs flushing each file and without ("s bytes rss" a line), curl's
# ("s bytes s-flushed" a line), each in round order: the best of each, and the median of the
# rounds' ratios (within a round the tools ran one after the other, so a machine that slows
# down over the run, as this file system does after thousands of new files, moves both).
report() {
    python3 - "$1" "$2" "$3" "$4" <<'PY'
import statistics, sys
label, flushed_runs, unflushed_runs, curl_runs = sys.argv[1:5]
runs = lambda text: [list(map(float, l.split())) for l in text.splitlines() if l.strip()]
sdks = {"default (not flushing)": runs(unflushed_runs), "--flush-files": runs(flushed_runs)}
curls = runs(curl_runs)
# Every run of a tool stores the same bytes, and both tools the same media (their playlists
# differ: the SDK rewrites them to point at local files), or the figures compare different work.
for tool, tool_runs in (*(("SDK " + k, v) for k, v in sdks.items()), ("curl", curls)):
    if len({r[1] for r in tool_runs}) != 1:
        sys.exit(f"{label}: the {tool} runs stored different sizes: {sorted({r[1] for r in tool_runs})}")
    if abs(tool_runs[0][1] - curls[0][1]) > 0.001 * curls[0][1]:
        sys.exit(f"{label}: the {tool} runs stored {tool_runs[0][1]:.0f} bytes, curl {curls[0][1]:.0f}")
rate = lambda b, s: b / s / 1e6
c_sec, c_bytes = min(r[0] for r in curls), curls[0][1]
c_flushed = min(r[2] for r in curls)
print(f"{label}: curl {c_bytes/1e6:,.0f} MB in {c_sec:.2f} s = {rate(c_bytes, c_sec):,.0f} MB/s, "
      f"{c_flushed:.2f} s = {rate(c_bytes, c_flushed):,.0f} MB/s with its files flushed (one sync -f at the end)")
for name, tool_runs in sdks.items():
    s_sec, s_bytes, s_rss = min(tool_runs, key=lambda r: r[0])
    rounds = [c[0] / s[0] for c, s in zip(curls, tool_runs)]
    print(f"  SDK {name}: {s_bytes/1e6:,.0f} MB in {s_sec:.2f} s = {rate(s_bytes, s_sec):,.0f} MB/s; "
          f"ratio {rate(s_bytes, s_sec) / rate(c_bytes, c_sec):.2f} to curl (goal >= 0.9), {rate(s_bytes, s_sec) / rate(c_bytes, c_flushed):.2f} "
          f"to curl + flush; peak RSS {max(r[2] for r in tool_runs)/1024:.1f} MiB (goal <= 64)")
    print(f"    each round, curl's time over the SDK's: {', '.join(f'{r:.2f}' for r in rounds)}; median {statistics.median(rounds):.2f}")
PY
}

# Before each run, the last one's dirty pages are written back, so that no run pays for the
# one before it. The HLS files stay until the end: ext4 is slow to create files right after
# many were deleted (it skips recently freed inodes), a cost only the second tool would pay.
settle() { rm -rf "$@"; sync; }

# Warm the page cache for both (the origin's files were just written, but make it even).
cat "$origin"/hls/v/*.ts "$origin/flat.mp4" >/dev/null
hls_curl=() hls_sdk=() hls_sdk_unflushed=() dash_curl=() dash_sdk=() dash_sdk_unflushed=() flat_curl=() flat_sdk=() flat_sdk_unflushed=()
for round in $(seq "$ROUNDS"); do
    # The SDK's default runs right after curl: the two the goal compares.
    settle "$work/sdk-flat"; hls_curl+=("$(curl_hls "$work/curl-hls/$round")")
    settle; hls_sdk_unflushed+=("$(sdk hls "$work/sdk-hls/unflushed-$round" --url "$base/hls/master.m3u8" --hls)")
    settle; hls_sdk+=("$(sdk hls "$work/sdk-hls/$round" --url "$base/hls/master.m3u8" --hls --flush-files)")
    settle; dash_curl+=("$(curl_dash "$work/curl-dash/$round")")
    settle; dash_sdk_unflushed+=("$(sdk dash "$work/sdk-dash/unflushed-$round" --url "$base/dash/manifest.mpd" --dash)")
    settle; dash_sdk+=("$(sdk dash "$work/sdk-dash/$round" --url "$base/dash/manifest.mpd" --dash --flush-files)")
    settle; flat_curl+=("$(curl_flat "$work/curl-flat")")
    settle "$work/curl-flat"; flat_sdk_unflushed+=("$(sdk flat "$work/sdk-flat/unflushed-$round" --url "$base/flat.mp4")")
    settle "$work/sdk-flat"; flat_sdk+=("$(sdk flat "$work/sdk-flat/$round" --url "$base/flat.mp4" --flush-files)")
done
settle "$work/sdk-flat" "$work/curl-hls" "$work/sdk-hls" "$work/curl-dash" "$work/sdk-dash"
echo "download benchmark: $SEGMENTS segments x $SEGMENT_KIB KiB, flat $FLAT_MIB MiB, $PARALLEL files at once, $(nproc) cores, best of $ROUNDS"
report "HLS ($SEGMENTS segments)" "$(printf '%s\n' "${hls_sdk[@]}")" "$(printf '%s\n' "${hls_sdk_unflushed[@]}")" "$(printf '%s\n' "${hls_curl[@]}")"
report "DASH ($SEGMENTS segments)" "$(printf '%s\n' "${dash_sdk[@]}")" "$(printf '%s\n' "${dash_sdk_unflushed[@]}")" "$(printf '%s\n' "${dash_curl[@]}")"
report "flat file" "$(printf '%s\n' "${flat_sdk[@]}")" "$(printf '%s\n' "${flat_sdk_unflushed[@]}")" "$(printf '%s\n' "${flat_curl[@]}")"
