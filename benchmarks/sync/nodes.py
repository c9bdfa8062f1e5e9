#!/usr/bin/env python3
"""Quiet-sync throughput with one and with two nodes on one PostgreSQL database (see nodes.sh)."""
import argparse
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from presign import REQUESTS_PER_SECOND_CEILING, raw_request, register_pool, signed_headers, wrk, write_lua  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    for name in ("url-a", "url-b", "key", "secret", "out"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--devices", type=int, default=1_000)
    args = parser.parse_args()
    count = REQUESTS_PER_SECOND_CEILING * args.seconds

    pool = register_pool(args.url_a, args.key, args.secret, args.devices)

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

    print(f"wrk, {args.connections} connections in all, {args.seconds} s per run; quiet syncs from {args.devices} devices")
    print(f"{'run':32} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8}")
    health = wrk(args.url_a + "/healthz", args.seconds, args.connections)
    print(f"{'GET /healthz, node A':32} {health[0]:9,.0f} {health[1]:8.2f} {health[2]:8.2f}")
    one = wrk(args.url_a + "/", args.seconds, args.connections, quiet_syncs("one"))
    print(f"{'quiet sync, node A alone':32} {one[0]:9,.0f} {one[1]:8.2f} {one[2]:8.2f}")

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
        print(f"{'quiet sync, node ' + node + ' of two':32} {rate:9,.0f} {p50:8.2f} {p99:8.2f}")
    both = results["A"][0] + results["B"][0]
    print(f"{'quiet sync, two nodes together':32} {both:9,.0f}  ({both / one[0]:.2f}x one node)")


if __name__ == "__main__":
    main()
