#!/usr/bin/env python3
"""Event ingestion benchmark. N events in batches of 200 go through POST /v1/events from D
devices at once (one keep-alive connection each, batches of a device in order, as the SDK
sends them); then the same rows are inserted straight into a fresh SQLite file with the
server's own schema (read from its database) and PRAGMAs (WAL, synchronous=FULL), one
transaction per 200 rows; or, with --postgres-url, copied with COPY into the served database's
own events table (as other devices' rows), one COPY and commit per 200 rows. Prints both rates
and the ratio. Goal: >= 50%."""
import argparse
import http.client
import json
import os
import sys
import sqlite3
import threading
import time
import uuid
from datetime import datetime, timezone
from urllib.parse import urlparse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from backplane_signing import REGISTER_PATH, AppKey, registration, signing_headers  # noqa: E402

BATCH = 200


def iso(ts):
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def signed_headers(key, secret, method, path, data, device_id=None, credential=None):
    """The headers of a JSON request signed with the app key (`scripts/backplane_signing.py`); a
    device's own request (with its credential) signs its id too."""
    headers = {"Content-Type": "application/json"}
    headers.update(signing_headers(AppKey(key, secret), method, path, data, device_id if credential else None, credential))
    return headers


class Device:
    def __init__(self, url, key, secret, device_id):
        parsed = urlparse(url)
        self.conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=120)
        self.key, self.secret, self.device_id, self.credential = key, secret, device_id, None

    def call(self, method, path, data):
        return self.send(method, path, data, signed_headers(self.key, self.secret, method, path, data, self.device_id, self.credential))

    def send(self, method, path, data, headers):
        self.conn.request(method, path, body=data, headers=headers)
        response = self.conn.getresponse()
        payload = response.read()
        if response.status >= 300:
            raise RuntimeError(f"{method} {path}: {response.status} {payload[:300]!r}")
        return json.loads(payload)

    def register(self, user):
        data, headers = registration(AppKey(self.key, self.secret), self.device_id, user, "linux")
        self.credential = self.send("POST", REGISTER_PATH, data, headers)["deviceCredential"]


def make_events(count, user, start_ts):
    """Realistic events: downloads and plays of a few hundred assets, some custom events."""
    kinds = [("downloadStart", {}), ("downloadComplete", {"bitrate": 4_500_000, "durationSeconds": 93.5}),
             ("playStart", {"bitrate": 4_500_000}), ("playStop", {"durationSeconds": 1312.0}),
             ("custom", {"customName": "rating", "customNumber": 4.0})]
    events = []
    for i in range(count):
        type_, extra = kinds[i % len(kinds)]
        event = {"eventId": str(uuid.uuid4()), "sequence": i + 1, "deviceTime": iso(start_ts + i * 0.01),
                 "appState": "foreground", "platform": "ios", "sdkVersion": "0.1.0", "appVersion": "3.2.1", "userId": user, "type": type_}
        if type_ != "custom":
            event["assetId"] = f"asset-{i % 500}"
        event.update(extra)
        events.append(event)
    return events


def row(app, device, event, received_ms):
    """The server's column values for one event (times in ms), for the baseline."""
    device_ms = int(datetime.strptime(event["deviceTime"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp() * 1000)
    return (app, device, event["sequence"], event["eventId"], event["type"], device_ms, received_ms, device_ms,
            event["userId"], None, event["appState"], event["platform"], event["sdkVersion"], event["appVersion"],
            event.get("assetId"), None, None, None, event.get("bitrate"), event.get("durationSeconds"), None, None,
            event.get("customName"), None, event.get("customNumber"))


def http_run(devices, bodies):
    errors = []

    def send(device, batches):
        try:
            for body in batches:
                answer = device.call("POST", "/v1/events", body)
                if answer["accepted"] != BATCH:
                    raise RuntimeError(f"accepted {answer['accepted']} of {BATCH}")
        except Exception as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=send, args=(d, b)) for d, b in zip(devices, bodies)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise errors[0]
    return elapsed


def baseline_database(path, schema_sql):
    """A fresh SQLite file with the server's PRAGMAs (WAL, synchronous = FULL, foreign keys) and
    the given schema statements: where the raw baselines run."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA foreign_keys = ON")
    for statement in schema_sql:
        conn.execute(statement)
    return conn


def baseline_run(schema_sql, path, rows):
    conn = baseline_database(path, schema_sql)
    placeholders = ", ".join("?" * 25)
    insert = f"""INSERT INTO events (application_id, device_id, sequence, event_id, type, device_time, received_at, corrected_time,
        user_id, external_device_id, app_state, platform, sdk_version, app_version, asset_id, deletion_reason, reset_type,
        limit_type, bitrate, duration_seconds, error_code, error_message, custom_name, custom_string, custom_number)
        VALUES ({placeholders}) ON CONFLICT (application_id, device_id, sequence) DO NOTHING"""
    started = time.perf_counter()
    for start in range(0, len(rows), BATCH):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(insert, rows[start:start + BATCH])
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed


COLUMNS = ("application_id, device_id, sequence, event_id, type, device_time, received_at, corrected_time, user_id, "
           "external_device_id, app_state, platform, sdk_version, app_version, asset_id, deletion_reason, reset_type, "
           "limit_type, bitrate, duration_seconds, error_code, error_message, custom_name, custom_string, custom_number")


def postgres_stored(url, total):
    """The application id, after checking the server stored every event."""
    import psycopg
    with psycopg.connect(url) as conn:
        app = conn.execute("SELECT application_id FROM events LIMIT 1").fetchone()[0]
        stored = conn.execute("SELECT COUNT(*) FROM events WHERE sequence < 10000000").fetchone()[0]
    if stored != total:
        raise RuntimeError(f"the server stored {stored} of {total} events")
    return app


def postgres_copy_run(url, rows):
    """COPY of the rows into the served events table, one COPY and commit per batch."""
    import psycopg
    with psycopg.connect(url) as conn:
        started = time.perf_counter()
        for start in range(0, len(rows), BATCH):
            with conn.transaction():
                with conn.cursor().copy(f"COPY events ({COLUMNS}) FROM STDIN") as copy:
                    for r in rows[start:start + BATCH]:
                        copy.write_row(r)
        return time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser()
    for name in ("url", "key", "secret"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--database", help="the served SQLite file (SQLite mode)")
    parser.add_argument("--baseline", help="where the SQLite baseline writes (SQLite mode)")
    parser.add_argument("--postgres-url", help="the served PostgreSQL database (PostgreSQL mode)")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--devices", type=int, default=4)
    args = parser.parse_args()

    per_device = args.events // args.devices // BATCH * BATCH
    total = per_device * args.devices
    devices = [Device(args.url, args.key, args.secret, str(uuid.uuid4())) for _ in range(args.devices)]
    for index, device in enumerate(devices):
        device.register(f"user-{index}")
    now = time.time()
    events = [make_events(per_device, f"user-{i}", now - 3600) for i in range(args.devices)]
    bodies = [[json.dumps({"sentAt": iso(time.time()), "events": evs[s:s + BATCH]}, separators=(",", ":")).encode()
               for s in range(0, per_device, BATCH)] for evs in events]
    print(f"{total} events in batches of {BATCH} from {args.devices} devices at once "
          f"({sum(len(b) for bs in bodies for b in bs) / (total / BATCH) / 1024:.1f} KiB per batch)")

    # Warm-up: one batch per device, not counted (first connections, first pages of the indexes).
    warm = [make_events(BATCH, f"user-{i}", now - 7200) for i in range(args.devices)]
    for device, evs in zip(devices, warm):
        for e in evs:
            e["sequence"] += 10_000_000
        device.call("POST", "/v1/events", json.dumps({"sentAt": iso(time.time()), "events": evs}).encode())

    http_seconds = http_run(devices, bodies)
    http_rate = total / http_seconds

    if args.postgres_url:
        app = postgres_stored(args.postgres_url, total)
        received = int(time.time() * 1000)
        # Other device ids: the same table, none of the server's rows touched.
        rows = [row(app, d.device_id + "-copy", e, received) for d, evs in zip(devices, events) for e in evs]
        raw_seconds = postgres_copy_run(args.postgres_url, rows)
        raw_rate = total / raw_seconds
        print(f"HTTP ingestion    : {http_rate:10,.0f} events/s  ({http_seconds:.2f} s, {total / BATCH / http_seconds:,.0f} batches/s)")
        print(f"COPY (PostgreSQL) : {raw_rate:10,.0f} events/s  ({raw_seconds:.2f} s, same table, 1 COPY and commit per {BATCH})")
        print(f"ratio             : {http_rate / raw_rate:10.1%}  (goal >= 50%)")
        return

    server = sqlite3.connect(args.database)
    app = server.execute("SELECT application_id FROM events LIMIT 1").fetchone()[0]
    stored = server.execute("SELECT COUNT(*) FROM events WHERE sequence < 10000000").fetchone()[0]
    schema = [sql for (sql,) in server.execute(
        "SELECT sql FROM sqlite_master WHERE tbl_name IN ('events', 'event_floors') AND sql IS NOT NULL ORDER BY type DESC, name")]
    server.close()
    if stored != total:
        raise RuntimeError(f"the server stored {stored} of {total} events")
    received = int(time.time() * 1000)
    rows = [row(app, d.device_id, e, received) for d, evs in zip(devices, events) for e in evs]
    raw_seconds = baseline_run(schema, args.baseline, rows)
    raw_rate = total / raw_seconds

    print(f"HTTP ingestion    : {http_rate:10,.0f} events/s  ({http_seconds:.2f} s, {total / BATCH / http_seconds:,.0f} batches/s)")
    print(f"raw SQLite insert : {raw_rate:10,.0f} events/s  ({raw_seconds:.2f} s, same schema, WAL + synchronous=FULL, 1 transaction per {BATCH})")
    print(f"ratio             : {http_rate / raw_rate:10.1%}  (goal >= 50%)")


if __name__ == "__main__":
    main()
