#!/usr/bin/env python3
"""Push benchmark load process. Registers N devices without a push token, N with one (half APNs,
half FCM), and N more with one, 1,000 to a user. Then, through the admin API:

- baseline: one wipe per device without a token, 32 calls at a time: what enqueueing costs
  when nothing is pushed;
- one wipe per device with a token, 32 calls at a time: each is pushed to the local endpoints
  (benchmarks/push/Endpoints), which record when each push arrived;
- fan-out: one wipe per user of 1,000 devices (`userId`), so that the pushes, not the admin
  calls, set the pace.

Prints enqueues per second, pushes per second (first wipe sent to last push received) and the
median and p99 from a wipe's admin call being sent to its push arriving."""
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
from backplane_signing import REGISTER_PATH, AppKey, registration  # noqa: E402

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


def register(port, key, index, token, provider, user=None):
    device_id = f"push-bench-{index}"
    push = {"pushToken": token, "pushProvider": provider} if token else {}
    body, headers = registration(key, device_id, user or f"push-user-{index}", **push)
    call(port, "POST", REGISTER_PATH, body, headers)
    return device_id


def cpu_seconds(pid):
    """User and system CPU time of a process, from /proc (0 once it has exited)."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            fields = file.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


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
    parser.add_argument("--progress", required=True)
    parser.add_argument("--server-pid", type=int, required=True)
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

        def fanned(i):
            provider = "apns" if i % 2 == 0 else "fcm"
            token = f"{provider}-fan-{i:06d}"
            device = register(args.port, key, 2 * n + i, token, provider, user=f"fan-user-{i // 1000}")
            tokens[device] = token
            return device

        fan_devices = list(pool.map(fanned, range(n)))
    fan_users = sorted({f"fan-user-{i // 1000}" for i in range(n)})
    print(f"registered {3 * n} devices in {time.monotonic() - started:.1f} s", flush=True)

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
    # The fan-out starts once the single wipes' pushes are in (or after 60 s), so they do not overlap.
    def arrived():
        try:
            with open(args.progress) as file:
                return int(file.read() or 0)
        except (OSError, ValueError):
            return 0

    wait_until = time.monotonic() + 60
    while arrived() < n and time.monotonic() < wait_until:
        time.sleep(0.05)
    fan_sent = {}

    def fan_out(user):
        body = json.dumps({"type": "wipe", "userId": user}).encode()
        at = time.time()
        answer = call(args.port, "POST", "/v1/admin/commands", body, admin)
        for command in answer["commands"]:
            fan_sent[command["deviceId"]] = at

    fan_cpu = cpu_seconds(args.server_pid)
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(fan_out, fan_users))
    while arrived() < 2 * n and os.path.exists(f"/proc/{args.endpoints_pid}"):
        time.sleep(0.05)
    fan_cpu = cpu_seconds(args.server_pid) - fan_cpu
    # The endpoints process exits once every push arrived (or at its timeout).
    while os.path.exists(f"/proc/{args.endpoints_pid}") and not os.path.exists(args.results):
        time.sleep(0.1)
    while not os.path.exists(args.results):
        time.sleep(0.1)
    time.sleep(0.2)
    with open(args.results) as file:
        results = json.load(file)
    received = results["received"]

    def measured(sent_at):
        latencies = [received[tokens[d]] / 1000 - at for d, at in sent_at.items() if tokens[d] in received]
        arrived = [received[tokens[d]] / 1000 for d in sent_at if tokens[d] in received]
        rate = len(arrived) / max(max(arrived) - min(sent_at.values()), 1e-9) if arrived else 0
        return latencies, rate

    def ms(seconds):
        return f"{seconds * 1000:.0f} ms"

    print(f"baseline: {n} wipes, no push token   {n / base_elapsed:8.0f} enqueues/s   call p50 {ms(statistics.median(base_durations))}  p99 {ms(percentile(base_durations, 0.99))}")
    print(f"push:     {n} wipes, each pushed     {n / push_elapsed:8.0f} enqueues/s   call p50 {ms(statistics.median(push_durations))}  p99 {ms(percentile(push_durations, 0.99))}")
    print(f"pushes received: {len(received)} of {2 * n} ({results['connections']['apns']} APNs connection(s), "
          f"{results['connections']['google']} Google connection(s), {results['grants']} OAuth grant(s), {results['apnsRefusals']} APNs refusals)")
    print(f"fan-out: the server's CPU {fan_cpu:.1f} s, {fan_cpu / n * 1e6:.0f} µs per push (enqueue included)")
    for name, sent_at in (("one wipe per device", sent), (f"fan-out, {len(fan_users)} wipes of 1,000 devices", fan_sent)):
        latencies, rate = measured(sent_at)
        if latencies:
            print(f"{name}: {rate:.0f} pushes/s (goal >= 2000); admin call sent to push received "
                  f"p50 {ms(statistics.median(latencies))}  p99 {ms(percentile(latencies, 0.99))}  max {ms(max(latencies))} (goal p99 <= 1000 ms)")


if __name__ == "__main__":
    main()
