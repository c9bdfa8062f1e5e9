# Sourced by a benchmark's run.sh before serve.sh when it runs on PostgreSQL: starts a throwaway
# cluster (initdb and pg_ctl of Debian's `postgresql`, as the postgres user when root) in a
# temporary directory on a free loopback port, and defines $database_url and stop_postgres
# (which serve.sh's exit trap calls). Durability settings are PostgreSQL's defaults (fsync on,
# synchronous_commit on), as a production server would have them. PG_OPTIONS adds server options
# (e.g. "-c session_preload_libraries=auto_explain -c auto_explain.log_min_duration=20" to log
# slow plans; the log is $pg_dir/log).
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[[ -x "$pg_bin/pg_ctl" ]] || { echo "PostgreSQL's binaries are missing: apt-get install postgresql" >&2; exit 1; }
pg_dir=$(mktemp -d)
as_pg=()
if [[ $(id -u) == 0 ]]; then chown postgres:postgres "$pg_dir"; as_pg=(runuser -u postgres --); fi
pg_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${as_pg[@]}" "$pg_bin/initdb" -D "$pg_dir/data" -U backplane --auth=trust -E UTF8 >/dev/null
"${as_pg[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/log" -w \
    -o "-p $pg_port -k $pg_dir -c listen_addresses=127.0.0.1 -c max_connections=200 ${PG_OPTIONS:-}" start >/dev/null
"${as_pg[@]}" "$pg_bin/createdb" -h 127.0.0.1 -p "$pg_port" -U backplane backplane
database_url="postgres://backplane@127.0.0.1:$pg_port/backplane?sslmode=disable"
stop_postgres() { "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -m fast stop >/dev/null 2>&1 || true; rm -rf "$pg_dir"; }
trap stop_postgres EXIT
