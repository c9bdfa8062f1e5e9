# Sourced by the benchmarks' run.sh after serve.sh: serves the directory $origin (under $work)
# with Debian's nginx on a free loopback port, as a CDN would (sendfile, kept-alive
# connections), stopped on exit with the rest. Defines $base, the origin's URL.
# nginx's workers run as nobody: let them read the origin.
chmod 755 "$work"
chmod -R a+rX "$origin"
oport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$work/nginx.conf" <<CONF
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 1024; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    types { application/vnd.apple.mpegurl m3u8; video/mp2t ts; video/mp4 mp4; }
    server { listen 127.0.0.1:$oport; root $origin; }
}
CONF
nginx -c "$work/nginx.conf" -p "$work" -g 'daemon on;'
# serve.sh's trap, with nginx stopped first; `extra_pids` (the caller's) are stopped too.
extra_pids=()
trap 'kill "$(cat "$work/nginx.pid")" 2>/dev/null || true; for p in "${extra_pids[@]}"; do kill "$p" 2>/dev/null || true; done; kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
base="http://127.0.0.1:$oport"
