#!/usr/bin/env python3
"""Push benchmark load process: registers N devices with push tokens (half APNs, half FCM) and
N without, then enqueues one wipe per device through the admin API, 32 calls at a time:

- baseline, the N devices without a token: what enqueueing costs when nothing is pushed;
- then the N with a token, each pushed to the local endpoints (benchmarks/push/Endpoints),
  which record when each push arrived.

Prints enqueues per second for both, pushes per second (first wipe sent to last push
received), and the median and p99 from a wipe's admin call being sent to its push arriving."""
import argparse
import http.client
import json
import os
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from backplane_signing import AppKey, signing_headers  # noqa: E402

local = threading.local()


def connection(port):
    if getattr(local, "conn", None) is None:
        local.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    return local.conn


def call(port, method, path, body=b"", headers=None):
    for attempt in range(2):
        conn = connection(port)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            data = response.read()
        except (http.client.HTTPException, OSError):
            local.conn = None
            if attempt == 1:
                raise
            continue
        if response.status >= 300:
            raise RuntimeError(f"{method} {path}: {response.status} {data[:300]!r}")
        return json.loads(data) if data else None


def register(port, key, index, token, provider):
    device_id = f"push-bench-{index}"
    request = {"userId": f"push-user-{index}", "deviceId": device_id, "platform": "bench"}
    if token:
        request.update({"pushToken": token, "pushProvider": provider})
    body = json.dumps(request).encode()
    headers = {"Content-Type": "application/json"}
    headers.update(signing_headers(key, "POST", "/v1/devices/register", body, None, None))
    call(port, "POST", "/v1/devices/register", body, headers)
    return device_id


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--admin", required=True)
    parser.add_argument("--devices", type=int, required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--results", required=True)
    parser.add_argument("--endpoints-pid", type=int, required=True)
    args = parser.parse_args()
    n = args.devices
    key = AppKey(args.key, args.secret)
    admin = {"Authorization": f"Bearer {args.admin}", "Content-Type": "application/json"}
    with open(args.config) as file:
        config = json.load(file)
    call(args.port, "PUT", "/v1/admin/push/apns", json.dumps(config["apns"]).encode(), admin)
    call(args.port, "PUT", "/v1/admin/push/fcm", json.dumps(config["fcm"]).encode(), admin)

    tokens = {}
    started = time.monotonic()
    with ThreadPoolExecutor(16) as pool:
        plain = list(pool.map(lambda i: register(args.port, key, i, None, None), range(n)))

        def with_token(i):
            provider = "apns" if i % 2 == 0 else "fcm"
            token = f"{provider}-bench-{i:06d}"
            device = register(args.port, key, n + i, token, provider)
            tokens[device] = token
            return device

        pushed = list(pool.map(with_token, range(n)))
    print(f"registered {2 * n} devices in {time.monotonic() - started:.1f} s", flush=True)

    def enqueue_all(devices):
        sent = {}

        def enqueue(device):
            body = json.dumps({"type": "wipe", "deviceId": device}).encode()
            sent[device] = time.time()
            began = time.monotonic()
            call(args.port, "POST", "/v1/admin/commands", body, admin)
            return time.monotonic() - began

        began = time.monotonic()
        with ThreadPoolExecutor(32) as pool:
            durations = list(pool.map(enqueue, devices))
        return sent, durations, time.monotonic() - began

    _, base_durations, base_elapsed = enqueue_all(plain)
    sent, push_durations, push_elapsed = enqueue_all(pushed)
    # The endpoints process exits once every push arrived (or at its timeout).
    while os.path.exists(f"/proc/{args.endpoints_pid}") and not os.path.exists(args.results):
        time.sleep(0.1)
    while not os.path.exists(args.results):
        time.sleep(0.1)
    time.sleep(0.2)
    with open(args.results) as file:
        results = json.load(file)
    received = results["received"]
    latencies = [received[tokens[d]] / 1000 - sent[d] for d in pushed if tokens[d] in received]
    first_sent = min(sent.values())
    last_received = max(received.values()) / 1000 if received else first_sent

    def ms(seconds):
        return f"{seconds * 1000:.0f} ms"

    print(f"baseline: {n} wipes, no push token   {n / base_elapsed:8.0f} enqueues/s   call p50 {ms(statistics.median(base_durations))}  p99 {ms(percentile(base_durations, 0.99))}")
    print(f"push:     {n} wipes, each pushed     {n / push_elapsed:8.0f} enqueues/s   call p50 {ms(statistics.median(push_durations))}  p99 {ms(percentile(push_durations, 0.99))}")
    print(f"pushes received: {len(received)} of {n} ({results['connections']['apns']} APNs connection(s), "
          f"{results['connections']['google']} Google connection(s), {results['grants']} OAuth grant(s), {results['apnsRefusals']} APNs refusals)")
    if latencies:
        print(f"pushes/s (first wipe sent to last push received): {len(received) / max(last_received - first_sent, 1e-9):.0f}   (goal >= 2000)")
        print(f"enqueue to push received: p50 {ms(statistics.median(latencies))}  p99 {ms(percentile(latencies, 0.99))}  max {ms(max(latencies))}   (goal p99 <= 1000 ms)")


if __name__ == "__main__":
    main()
