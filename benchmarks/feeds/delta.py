#!/usr/bin/env python3
"""Delta-sync benchmark: one device subscribed to 10 feeds reads its changes by cursor. The time
of that read is measured with 1,000 episodes on the server (the baseline), then again after the
catalogue grows to 100,000 episodes in other feeds, in the same run. Goal: <= 1.2x."""
import argparse
import http.client
import json
import os
import statistics
import sys
import time
from urllib.parse import urlparse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from backplane_signing import REGISTER_PATH, AppKey, registration, signing_headers  # noqa: E402


class Backplane:
    def __init__(self, url, key, secret, cms):
        parsed = urlparse(url)
        self.conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=120)
        self.key, self.secret, self.cms = key, secret, cms
        self.device = None

    def call(self, method, path, body=None, signed=False):
        data = json.dumps(body).encode() if body is not None else b""
        headers = {"Content-Type": "application/json"}
        if signed:
            device_id, credential = self.device or (None, None)
            headers.update(signing_headers(AppKey(self.key, self.secret), method, path, data, device_id, credential))
        else:
            headers["Authorization"] = f"Bearer {self.cms}"
        return self.send(method, path, data, headers)

    def register(self, device_id, user_id):
        """Registers the device this benchmark's device requests come from."""
        data, headers = registration(AppKey(self.key, self.secret), device_id, user_id)
        self.device = (device_id, self.send("POST", REGISTER_PATH, data, headers)["deviceCredential"])

    def send(self, method, path, data, headers):
        self.conn.request(method, path, body=data, headers=headers)
        response = self.conn.getresponse()
        payload = response.read()
        if response.status >= 300:
            raise RuntimeError(f"{method} {path}: {response.status} {payload[:300]!r}")
        return json.loads(payload) if payload else None


def episode(asset_id):
    return {"assetId": asset_id, "title": f"Episode {asset_id}", "downloadURL": f"https://cdn.example.com/{asset_id}.mp4",
            "mediaType": "file", "sizeBytes": 123456789, "customFields": {"season": 1}}


def publish(bp, feed, ids):
    for start in range(0, len(ids), 500):
        bp.call("POST", f"/v1/cms/feeds/{feed}/episodes", {"episodes": [episode(i) for i in ids[start:start + 500]]})


def measure(bp, cursor, rounds, label):
    """Each round: one new episode in each subscribed feed, then the timed delta read."""
    times = []
    for r in range(rounds):
        for f in range(10):
            bp.call("POST", f"/v1/cms/feeds/sub-{f}/episodes", {"episodes": [episode(f"{label}-{r}-{f}")]})
        start = time.perf_counter()
        page = bp.call("GET", f"/v1/subscriptions/changes?cursor={cursor}", signed=True)
        times.append(time.perf_counter() - start)
        assert len(page["changes"]) == 10 and not page["hasMore"], page
        cursor = page["cursor"]
    return statistics.median(times), cursor


def main():
    parser = argparse.ArgumentParser()
    for name in ("url", "key", "secret", "cms"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--large", type=int, default=100_000)
    args = parser.parse_args()
    bp = Backplane(args.url, args.key, args.secret, args.cms)

    bp.register("bench-device", "bench")
    for f in range(10):
        bp.call("PUT", f"/v1/cms/feeds/sub-{f}", {"title": f"Subscribed {f}"})
        bp.call("PUT", f"/v1/subscriptions/sub-{f}", {}, signed=True)
    for f in range(10):
        bp.call("PUT", f"/v1/cms/feeds/other-{f}", {"title": f"Other {f}"})

    # Small catalogue: 1,000 episodes (100 in each subscribed feed's neighbours and the feeds themselves).
    for f in range(10):
        publish(bp, f"sub-{f}", [f"s{f}-{i}" for i in range(50)])
        publish(bp, f"other-{f}", [f"o{f}-{i}" for i in range(50)])
    cursor = bp.call("GET", "/v1/subscriptions/changes", signed=True)
    while cursor["hasMore"]:
        cursor = bp.call("GET", f"/v1/subscriptions/changes?cursor={cursor['cursor']}", signed=True)
    cursor = cursor["cursor"]
    small, cursor = measure(bp, cursor, args.rounds, "small")

    # Grow to the large catalogue in the feeds the device does not follow.
    started = time.perf_counter()
    per_feed = (args.large - 1000) // 10
    for f in range(10):
        publish(bp, f"other-{f}", [f"big{f}-{i}" for i in range(per_feed)])
    grow = time.perf_counter() - started
    large, cursor = measure(bp, cursor, args.rounds, "large")

    print(f"published {per_feed * 10} more episodes in {grow:.1f} s ({per_feed * 10 / grow:.0f} episodes/s)")
    print(f"delta sync, 10 subscribed feeds, 10 changes, median of {args.rounds}:")
    print(f"  with ~1,000 episodes on the server (baseline): {small * 1000:.2f} ms")
    print(f"  with ~{args.large:,} episodes on the server:       {large * 1000:.2f} ms")
    print(f"  ratio {large / small:.2f}x (goal <= 1.2x)")


if __name__ == "__main__":
    main()
