#!/usr/bin/env python3
"""Sync throughput with one and with two nodes on one PostgreSQL database (see nodes.sh)."""
import argparse
import io
import json
import os
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from presign import (  # noqa: E402
    REQUESTS_PER_SECOND_CEILING, delivered_command_rows, raw_request, register_pool, signed_headers, wrk, write_lua)


def psql(database_url, sql, stdin=None):
    return subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", database_url, "-c", sql],
                          input=stdin, capture_output=True, text=True, check=True).stdout


def copy_rows(database_url, table, rows):
    """Rows (dicts) into `table` with COPY: None is NULL, every other value a quoted CSV field."""
    columns = [c for c in rows[0] if c != "row_id"]  # an identity column: PostgreSQL numbers the rows
    out = io.StringIO()
    for row in rows:
        fields = []
        for column in columns:
            value = row[column]
            if value is None:
                fields.append("")
            else:
                text = json.dumps(value) if isinstance(value, (dict, list)) else str(value).lower() if isinstance(value, bool) else str(value)
                fields.append('"' + text.replace('"', '""') + '"')
        out.write(",".join(fields) + "\n")
    psql(database_url, f"COPY {table} ({', '.join(columns)}) FROM STDIN WITH (FORMAT csv)", out.getvalue())


def analyze(database_url):
    """Statistics for the rows just written, as autovacuum would gather within a minute: the
    nodes' prepared statements are otherwise planned, and their plans kept, for the nearly empty
    tables they first met (a sequential scan of all devices per sign-in group)."""
    psql(database_url, "ANALYZE")


def devices_with_delivered_commands(database_url, template_device, count, batch):
    """As presign's, written into PostgreSQL: (device_id, credential, command_id) per request."""
    template = json.loads(psql(database_url, f"SELECT row_to_json(d) FROM devices d WHERE device_id = '{template_device}'"))
    command_columns = psql(database_url, "SELECT column_name FROM information_schema.columns "
                                         "WHERE table_name = 'commands' ORDER BY ordinal_position").split()
    devices, commands, acks = delivered_command_rows(template, command_columns, count, batch)
    copy_rows(database_url, "devices", devices)
    copy_rows(database_url, "commands", commands)
    analyze(database_url)
    return acks


def main():
    parser = argparse.ArgumentParser()
    for name in ("url-a", "url-b", "key", "secret", "out", "database-url"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--devices", type=int, default=1_000)
    args = parser.parse_args()
    count = REQUESTS_PER_SECOND_CEILING * args.seconds

    pool = register_pool(args.url_a, args.key, args.secret, args.devices)
    analyze(args.database_url)

    def quiet_syncs(name):
        """Signed just before its run (timestamps are accepted for 5 minutes), each sent once."""
        path = os.path.join(args.out, f"{name}.lua")
        requests = []
        for i in range(count):
            device = pool[i % len(pool)]
            headers = signed_headers(args.key, args.secret, "POST", "/v1/sync", b"{}", device.device_id, device.credential)
            requests.append(raw_request("POST", "/v1/sync", b"{}", headers))
        write_lua(path, requests)
        return path

    def acked_syncs(name):
        """Each acknowledges one delivered command of its own device (written with COPY first)."""
        path = os.path.join(args.out, f"{name}.lua")
        requests = []
        for device_id, credential, command_id in devices_with_delivered_commands(args.database_url, pool[0].device_id, count, name):
            body = json.dumps({"acks": [{"commandId": command_id, "outcome": "succeeded"}]}).encode()
            headers = signed_headers(args.key, args.secret, "POST", "/v1/sync", body, device_id, credential)
            requests.append(raw_request("POST", "/v1/sync", body, headers))
        write_lua(path, requests)
        return path

    print(f"wrk, {args.connections} connections in all, {args.seconds} s per run; quiet syncs from {args.devices} devices")
    print(f"{'run':36} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'of /healthz':>12}  goal")

    def beside_healthz(name, script, goal):
        """One run on node A alone, right after GET /healthz on node A: the share of one run."""
        health = wrk(args.url_a + "/healthz", args.seconds, args.connections)
        figures = wrk(args.url_a + "/", args.seconds, args.connections, script)
        if figures[0] == 0:
            sys.exit(f"{name}: no request was answered in {args.seconds} s (see the servers' logs)")
        print(f"{'GET /healthz, node A':36} {health[0]:9,.0f} {health[1]:8.2f} {health[2]:8.2f}")
        print(f"{name + ', node A alone':36} {figures[0]:9,.0f} {figures[1]:8.2f} {figures[2]:8.2f} "
              f"{figures[0] / health[0]:>12.1%}  {goal}")
        return figures

    one = beside_healthz("quiet sync", quiet_syncs("one"), ">= 20%")

    scripts = {"A": quiet_syncs("a"), "B": quiet_syncs("b")}
    results = {}

    def run(node, url):
        results[node] = wrk(url + "/", args.seconds, args.connections // 2, scripts[node])

    threads = [threading.Thread(target=run, args=("A", args.url_a)), threading.Thread(target=run, args=("B", args.url_b))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for node in ("A", "B"):
        rate, p50, p99 = results[node]
        print(f"{'quiet sync, node ' + node + ' of two':36} {rate:9,.0f} {p50:8.2f} {p99:8.2f}")
    both = results["A"][0] + results["B"][0]
    print(f"{'quiet sync, two nodes together':36} {both:9,.0f}  ({both / one[0]:.2f}x one node; goal >= 0.9x)")

    # Last: its devices and commands (a third as many devices as requests) stay in the database.
    beside_healthz("sync with one ack", acked_syncs("ack"), ">= 8%")


if __name__ == "__main__":
    main()
