"""Times one page of each admin and reporting list at two table sizes (see run.sh).

Rows go straight into the served database (one transaction per size) while the server runs:
devices with ten per user and every tenth unregistered, and one event, one download grant and
one command per device. A filtered page finds as many rows at both sizes. Each page is timed with `wrk`
on one connection for a few seconds: the median latency is the cost of one page.
"""
import argparse
import json
import os
import sqlite3
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import wrk  # noqa: E402

PAGES = [
    ("devices", "/v1/admin/devices?limit=100"),
    ("devices, second page", None),  # the first page's nextCursor
    ("devices incl. unregistered", "/v1/admin/devices?limit=100&includeUnregistered=true"),
    ("devices of a user", "/v1/admin/devices?userId=u7"),
    ("devices by external id", "/v1/admin/devices?externalDeviceId=x7"),
    ("commands of a device", "/v1/admin/devices/d7/commands"),
    ("grants", "/v1/admin/download-grants?limit=100"),
    ("grants of a user", "/v1/admin/download-grants?userId=u7"),
    ("grants of a device", "/v1/admin/download-grants?deviceId=d7"),
    ("events", "/v1/reports/events?limit=100"),
    ("events of a type", "/v1/reports/events?type=playStart&limit=100"),
    ("events of a user", "/v1/reports/events?userId=u7"),
    ("events of a device", "/v1/reports/events?deviceId=d7"),
    ("events of an asset", "/v1/reports/events?assetId=a7&limit=100"),
]

WINDOW = '{"expiryAfterDownloadSeconds":-1,"expiryAfterPlaySeconds":-1,"offlineViewingPeriodSeconds":-1}'

# Migration v9's indexes, dropped to measure the schema before it.
BEFORE_V9 = """
DROP INDEX devices_by_application;
DROP INDEX download_grants_by_application;
DROP INDEX download_grants_by_user_row;
DROP INDEX download_grants_by_device_row;
DROP INDEX events_by_type;
DROP INDEX events_by_device_time;
DROP INDEX commands_by_device_row;
"""


def fill(db, app, first, last, offset):
    """Rows first...last: device d<i>, ten devices per user, ten assets (the large fill's users and
    assets are numbered from `offset`, so u7 and a7 have as many rows at both sizes)."""
    users = max((last - first + 1) // 10, 1)
    user = f"'u' || ({offset} + i % {users})"
    asset = f"'a' || ({offset} + i % 10)"
    ts = "'2027-01-15 08:00:00.000'"
    rows = f"WITH RECURSIVE n(i) AS (SELECT {first} UNION ALL SELECT i + 1 FROM n WHERE i < {last})"
    db.execute("BEGIN IMMEDIATE")
    db.execute(f"""{rows} INSERT INTO devices (application_id, device_id, user_id, external_device_id, platform,
        download_enabled, credential_hash, registered_at, updated_at, last_seen_at, unregistered_at)
        SELECT ?, 'd' || i, {user}, 'x' || i, 'linux', i % 2, 'hash', {ts}, {ts}, {ts},
        CASE WHEN i % 10 = 0 THEN {ts} END FROM n""", (app,))
    db.execute(f"""{rows} INSERT INTO events (application_id, device_id, sequence, event_id, type, device_time,
        received_at, corrected_time, user_id, asset_id)
        SELECT ?, 'd' || i, 1, 'e' || i, CASE i % 3 WHEN 0 THEN 'playStart' WHEN 1 THEN 'downloadStart' ELSE 'custom' END,
        1800000000000 + i, 1800000000000 + i, 1800000000000 + i, {user}, {asset} FROM n""", (app,))
    db.execute(f"""{rows} INSERT INTO download_grants (grant_id, application_id, user_id, device_id, asset_id, state,
        counts_for_lifetime, window, granted_at, updated_at)
        SELECT 'g' || i, ?, {user}, 'd' || i, {asset}, 'active', 1, '{WINDOW}', {ts}, {ts} FROM n""", (app,))
    db.execute(f"""{rows} INSERT INTO commands (command_id, application_id, device_id, type, state, created_at,
        updated_at, deferrals)
        SELECT 'c' || i, ?, 'd' || i, 'wipe', 'succeeded', {ts}, {ts}, 0 FROM n""", (app,))
    db.execute("COMMIT")
    checkpoint(db)


def checkpoint(db):
    """Moves the WAL into the database: a million rows left in the WAL slow every read that
    must look pages up in it, which the server's own periodic checkpoints would not allow."""
    busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    if busy:
        raise SystemExit("the WAL could not be checkpointed")


def page_ms(url, token, seconds):
    figures = wrk.run(url, seconds, 1, headers=[f"Authorization: Bearer {token}"], timeout="60s")
    if figures.requests == 0:
        # Not one answer within the run: a page slower than the run itself; time one.
        started = time.perf_counter()
        urllib.request.urlopen(urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"}), timeout=600).read()
        return (time.perf_counter() - started) * 1000
    return figures.latency_ms(50)


class Server:
    def __init__(self, spec):
        self.url, self.database, self.token, self.reporting_token = spec.split(",")
        self.db = sqlite3.connect(self.database, isolation_level=None, timeout=30)
        self.app = self.db.execute("SELECT id FROM applications").fetchone()[0]
        self.cursor = None

    def page_ms(self, path, seconds):
        if path is None:  # the devices' second page, from the first page's cursor
            if self.cursor is None:
                request = urllib.request.Request(self.url + PAGES[0][1], headers={"Authorization": f"Bearer {self.token}"})
                self.cursor = json.load(urllib.request.urlopen(request))["nextCursor"]
            path = f"/v1/admin/devices?limit=100&cursor={self.cursor}"
        token = self.reporting_token if path.startswith("/v1/reports") else self.token
        return page_ms(self.url + path, token, seconds)


def measure(servers, seconds, rounds):
    """Each page's best median over `rounds` rounds, the servers taking turns page by page: on
    two shared cores a single run can catch a moment of other work, and turns spread it evenly."""
    best = [{} for _ in servers]
    for _ in range(rounds):
        for name, path in PAGES:
            for figures, server in zip(best, servers):
                figures[name] = min(figures.get(name, float("inf")), server.page_ms(path, seconds))
    return best


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", required=True, help="URL,DATABASE,ADMIN_TOKEN,REPORTING_TOKEN")
    parser.add_argument("--large-server", required=True, help="the same for the large database")
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    small, large = Server(args.small), Server(args.large_server)
    fill(small.db, small.app, 1, 1000, 0)
    fill(large.db, large.app, 1, 1000, 0)
    fill(large.db, large.app, 1001, args.large, 1000)
    small_ms, large_ms = measure([small, large], args.seconds, args.rounds)
    large.db.executescript(BEFORE_V9)
    checkpoint(large.db)
    before_ms, = measure([large], args.seconds, args.rounds)

    print(f"time of one page (best median of {args.rounds} runs of {args.seconds} s); rows per table: 1,000 and {args.large:,}")
    print(f"{'page':30} {'1k (ms)':>9} {'large (ms)':>11} {'ratio':>6}   {'large, before v9 (ms)':>21}")
    for name, _ in PAGES:
        print(f"{name:30} {small_ms[name]:9.2f} {large_ms[name]:11.2f} {large_ms[name] / small_ms[name]:5.2f}x   {before_ms[name]:21.2f}")
    print("goal: ratio <= 1.2x for every page")


if __name__ == "__main__":
    main()
