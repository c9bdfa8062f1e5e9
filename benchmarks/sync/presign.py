#!/usr/bin/env python3
"""Sync throughput benchmark (see run.sh and benchmarks/README.md).

Registers a pool of devices, writes each scenario's requests pre-signed (unique nonces, fresh
timestamps) into a Lua file that replay.lua sends in turn, runs wrk on each scenario right
after GET /healthz, and times the raw SQLite registration loop on a copy of the server's schema.
"""
import argparse
import hashlib
import json
import os
import secrets
import sqlite3
import statistics
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "ingest"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
from upload_events import Device, baseline_database, signed_headers  # noqa: E402
from backplane_signing import REGISTER_PATH, AppKey, registration  # noqa: E402
from wrk import SocketErrors, run as wrk_run  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
# More requests than the fastest run can send: each is accepted once.
REQUESTS_PER_SECOND_CEILING = 30_000


def raw_request(method, path, body, headers):
    lines = [f"{method} {path} HTTP/1.1", "Host: backplane"] + [f"{k}: {v}" for k, v in headers.items()]
    lines.append(f"Content-Length: {len(body)}")
    return "\r\n".join(lines) + "\r\n\r\n" + body.decode()


def write_lua(path, requests):
    """A Lua chunk returning the raw requests; JSON string escapes are valid Lua for ASCII."""
    with open(path, "w") as out:
        out.write("return {\n")
        for request in requests:
            out.write(json.dumps(request))
            out.write(",\n")
        out.write("}\n")


def wrk(url, seconds, connections, lua=None, pause_ms=None):
    """req/s, p50 and p99 (ms) of one run, replaying `lua`'s requests when given."""
    script, script_args = None, ()
    if lua:
        script, script_args = os.path.join(HERE, "replay.lua"), (lua,) + ((pause_ms,) if pause_ms else ())
    figures = wrk_run(url, seconds, connections, script=script, script_args=script_args)
    return figures.rate, figures.latency_ms(50), figures.latency_ms(99)


def retried(name, measure, tries=3):
    """`measure()` (which writes fresh requests, then runs wrk), run again when wrk counted socket
    errors: on this shared VM an occasional connection times out, and one such run would
    otherwise end the whole benchmark. Said on stderr; the last try's errors end it."""
    for attempt in range(1, tries + 1):
        try:
            return measure()
        except SocketErrors as errors:
            if attempt == tries:
                raise
            print(f"({name}: {errors.detail}; run again)", file=sys.stderr)


def devices_with_delivered_commands(database, template_device, count, batch, per_device=3):
    """Devices that each hold `per_device` delivered commands, written straight into the server's
    database (WAL lets it keep serving): one sync acknowledges one command. Returns
    [(device_id, credential, command_id)], one per request, each command once."""
    conn = sqlite3.connect(database, timeout=30)
    conn.row_factory = sqlite3.Row
    template = dict(conn.execute("SELECT * FROM devices WHERE device_id = ?", (template_device,)).fetchone())
    command_columns = [row["name"] for row in conn.execute("PRAGMA table_info(commands)")]
    devices, commands, acks = delivered_command_rows(dict(template, row_id=None), command_columns, count, batch, per_device)
    with conn:
        for table, rows in (("devices", devices), ("commands", commands)):
            columns = list(rows[0])
            conn.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                             [tuple(row[c] for c in columns) for row in rows])
    conn.close()
    return acks


def delivered_command_rows(template, command_columns, count, batch, per_device=3):
    """The rows for `devices_with_delivered_commands` (any store): devices copied from `template`
    (a device row as a dict), each with its own user and credential, and `per_device` delivered
    wipes each. Returns (devices, commands, acks), acks cut to `count`: the first `count` of
    every device's first ack, then every device's second, and so on."""
    now = template["registered_at"]
    acks, devices, commands = [], [], []
    for i in range((count + per_device - 1) // per_device):
        credential = "dc_" + secrets.token_urlsafe(32)
        device = dict(template, device_id=f"ack-{batch}-{i}", user_id=f"ack-user-{batch}-{i}",
                      credential_hash=hashlib.sha256(credential.encode()).hexdigest())
        devices.append(device)
        for k in range(per_device):
            command = dict.fromkeys(command_columns)
            command.update(command_id=f"ack-{batch}-{i}-{k}", application_id=template["application_id"], device_id=device["device_id"],
                           type="wipe", state="delivered", created_at=now, updated_at=now, delivered_at=now, deferrals=0)
            commands.append(command)
            acks.append((k, i, (device["device_id"], credential, command["command_id"])))
    # Each device's first command, then each one's second, ...: as devices sync, one request at a
    # time each. Device by device, three requests in flight would often be one device's, and the
    # second and third would wait for the first's lock on the device.
    return devices, commands, [ack for _, _, ack in sorted(acks)][:count]


def raw_registration_loop(database, path, count):
    """One BEGIN IMMEDIATE; count; insert; COMMIT per registration, the server's tables and
    PRAGMAs (WAL, synchronous = FULL, foreign keys), one connection."""
    server = sqlite3.connect(database)
    schema = [sql for (sql,) in server.execute(
        "SELECT sql FROM sqlite_master WHERE tbl_name IN ('applications', 'devices') AND sql IS NOT NULL "
        "AND name NOT LIKE 'sqlite_%' ORDER BY type DESC, name")]
    application = server.execute("SELECT * FROM applications LIMIT 1").fetchone()
    server.close()
    conn = baseline_database(path, schema)
    conn.execute(f"INSERT INTO applications VALUES ({', '.join('?' * len(application))})", application)
    app, now = application[0], "2027-01-15 08:00:00.000"
    started = time.perf_counter()
    for i in range(count):
        user = f"raw-user-{i}"
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("""SELECT COUNT(*) FROM devices WHERE application_id = ? AND user_id = ? AND download_enabled
            AND unregistered_at IS NULL AND device_id <> ?""", (app, user, f"raw-{i}")).fetchone()
        conn.execute("""INSERT INTO devices (application_id, device_id, user_id, platform, download_enabled, credential_hash,
            registered_at, updated_at, last_seen_at) VALUES (?, ?, ?, 'linux', 1, 'hash', ?, ?, ?)""",
                     (app, f"raw-{i}", user, now, now, now))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return count / elapsed


def register_pool(url, key, secret, count):
    """`count` registered devices, each of its own user; only their credentials are kept (the
    requests go through wrk)."""
    pool = []
    for i in range(count):
        device = Device(url, key, secret, f"sync-{i}")
        device.register(f"sync-user-{i}")
        device.conn.close()
        pool.append(device)
    return pool


def main():
    parser = argparse.ArgumentParser()
    for name in ("url", "key", "secret", "database", "out"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--devices", type=int, default=1_000)
    parser.add_argument("--only", help="run only the scenarios whose names contain this text")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each scenario beside /healthz; the median is printed")
    args = parser.parse_args()
    count = REQUESTS_PER_SECOND_CEILING * args.seconds

    pool = register_pool(args.url, args.key, args.secret, args.devices)

    def quiet_syncs():
        """No acknowledgements, no change to the device's profile; spread over the pool."""
        for i in range(count):
            device = pool[i % len(pool)]
            headers = signed_headers(args.key, args.secret, "POST", "/v1/sync", b"{}", device.device_id, device.credential)
            yield raw_request("POST", "/v1/sync", b"{}", headers)

    batches = iter(range(1_000_000))

    def acked_syncs():
        """Each acknowledges one delivered command of its device; nothing else changes."""
        batch = next(batches)
        for device_id, credential, command_id in devices_with_delivered_commands(args.database, pool[0].device_id, count, batch):
            body = json.dumps({"acks": [{"commandId": command_id, "outcome": "succeeded"}]}).encode()
            headers = signed_headers(args.key, args.secret, "POST", "/v1/sync", body, device_id, credential)
            yield raw_request("POST", "/v1/sync", body, headers)

    def registrations():
        """A new device for a new user each time: never refused by the device limit."""
        batch = next(batches)
        for i in range(count):
            body, headers = registration(AppKey(args.key, args.secret), str(uuid.uuid4()), f"new-user-{batch}-{i}", "linux")
            yield raw_request("POST", REGISTER_PATH, body, headers)

    print(f"wrk, 1 thread, {args.connections} connections, {args.seconds} s per run; quiet syncs from {args.devices} devices")
    print(f"{'scenario':24} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'of /healthz':>12}  goal")
    rates = {}
    scenarios = (("quiet sync", quiet_syncs, ">= 35%"), ("sync with one ack", acked_syncs, ">= 15%"), ("registration", registrations, ""))
    for name, requests, goal in scenarios:
        if args.only and args.only not in name:
            continue
        lua = os.path.join(args.out, "requests.lua")
        peaks, shares = [], []
        def measure():
            # Signed just before the run: the server accepts timestamps within 5 minutes.
            write_lua(lua, requests())
            return wrk(args.url + "/healthz", args.seconds, args.connections), wrk(args.url + "/", args.seconds, args.connections, lua)

        for _ in range(args.repeat):
            health, figures = retried(name, measure)
            if figures[0] == 0:
                sys.exit(f"{name}: no request was answered in {args.seconds} s (see the server's log)")
            for label, (rate, p50, p99), share, target in (
                ("GET /healthz", health, "", ""), (name, figures, f"{figures[0] / health[0]:.1%}", goal),
            ):
                print(f"{label:24} {rate:9,.0f} {p50:8.2f} {p99:8.2f} {share:>12}  {target}")
            peaks.append(figures[0])
            shares.append(figures[0] / health[0])
        # Each run's share is against its own /healthz, which moves by a tenth or more between runs.
        rates[name] = statistics.median(peaks)
        if args.repeat > 1:
            print(f"{name + ', median of ' + str(args.repeat):24} {rates[name]:9,.0f} {'':8} {'':8} "
                  f"{statistics.median(shares):>12.1%}  {goal}")
        if name == "quiet sync":
            # The latency goal is at 70 % of the peak just measured. wrk cannot hold a fixed
            # rate, so each connection pauses after each answer. A short first run measures
            # how long a request takes at about that load; the pause is then what is left of
            # each connection's share of the target rate. The achieved rate is printed. Pauses
            # are fractional (replay.lua draws whole milliseconds around the mean): at peaks
            # over 10,000 req/s a whole-millisecond step moves the rate by a fifth.
            # Calibrated twice: an answer is quicker at the lower load the first pause gives.
            # A full run that still lands outside 67-73 % of the peak (wrk's millisecond timers
            # do not wait exactly what they are asked) corrects the pause by what it measured
            # and runs again, at most three times; the last run is printed.
            target = 0.7 * rates[name]
            pause_ms = round(1000 * args.connections / target, 2)

            def corrected(pause_ms, achieved):
                if achieved <= 0:
                    sys.exit("a paced run answered nothing: see the server log")
                answer_ms = 1000 * args.connections / achieved - pause_ms
                return max(0.05, round(1000 * args.connections / target - answer_ms, 2))

            def paced_run(seconds, pause_ms):
                def measure():
                    write_lua(lua, quiet_syncs())
                    return wrk(args.url + "/", seconds, args.connections, lua, pause_ms)
                return retried("quiet sync, paced", measure)

            for _ in range(2):
                pause_ms = corrected(pause_ms, paced_run(3, pause_ms)[0])
            for attempt in range(3):
                paced = paced_run(args.seconds, pause_ms)
                on_target = abs(paced[0] / rates[name] - 0.7) <= 0.03
                if on_target or attempt == 2:
                    break
                pause_ms = corrected(pause_ms, paced[0])
            print(f"{'quiet sync, paced':24} {paced[0]:9,.0f} {paced[1]:8.2f} {paced[2]:8.2f} "
                  f"{paced[0] / rates[name]:>11.0%}P  p99 <= 10 ms at 70% of peak (P)"
                  + ("" if on_target else ", NOT at 67-73 % of peak: no reading of the goal"))
    if "registration" not in rates:
        return
    raw = raw_registration_loop(args.database, os.path.join(args.out, "raw.sqlite"), 3_000)
    registration_rate = rates["registration"]
    print(f"{'raw SQLite registration':24} {raw:9,.0f}  (BEGIN IMMEDIATE; count; insert; COMMIT; synchronous = FULL)")
    print(f"registration over the raw loop: {registration_rate / raw:.2f}x (goal >= 5x)")


if __name__ == "__main__":
    main()
