# Sourced by the benchmarks' run.sh: builds the release server, serves a fresh data directory on a
# free port in the background (removed on exit), and defines $work, $server, $port and
# `value LABEL` (a first-run credential, e.g. value 'app key id').
# SERVE_ENV prefixes the server's command (e.g. "env MALLOC_ARENA_MAX=2"), SERVE_ARGS adds options.
# BACKPLANE_BIN serves that binary instead of building one (e.g. an earlier commit's, to measure
# before and after a change on the same machine). Sourced after postgres.sh, its trap also stops
# that cluster.
if [[ -n "${BACKPLANE_BIN:-}" ]]; then
    backplane_bin="$BACKPLANE_BIN"
else
    swift build -c release --product backplane >/dev/null 2>&1 || swift build -c release --product backplane
    backplane_bin=.build/release/backplane
fi

work=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$work"; if declare -F stop_postgres >/dev/null; then stop_postgres; fi' EXIT
# Rate limits off: a benchmark sends one device's requests far faster than any device would.
${SERVE_ENV:-} "$backplane_bin" serve --port 0 --data-dir "$work/data" --log-level warning --device-rate-limit 0 --registration-rate-limit 0 --user-registration-rate-limit 0 \
    ${SERVE_ARGS:-} >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 100); do grep -q "backplane: listening on" "$work/server.log" && break; sleep 0.1; done
port=$(grep "backplane: listening on" "$work/server.log" | head -1 | sed "s/.*://")
value() { grep "$1" "$work/server.log" | head -1 | sed 's/.*: //'; }
