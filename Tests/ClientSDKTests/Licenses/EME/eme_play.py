#!/usr/bin/env python3
"""Plays a protected download in headless Chromium (Debian's: org.w3.clearkey with H.264 and
MSE, temporary sessions) through the SDK's playback server, with player.html beside this file.

The page is served from its own loopback origin, as an app's web view loads its page, so the
playback server is reached cross-origin like in a real app.

  eme_play.py --mpd URL --license URL --expect play     waits until playback passes --seconds
  eme_play.py --mpd URL --license URL --expect refused  waits for the refused license and
                                                        `waitingforkey`, then watches --seconds more

Prints one JSON line: what the page saw (currentTime, frames, waitingForKey, licenseStatus,
licenseReason, keysLoaded, segments, error) and `passed`. Exit 0 when passed, 1 when not,
3 when Chromium, chromedriver or Selenium is missing.
"""
import argparse
import functools
import http.server
import json
import os
import shutil
import sys
import threading
import time
import urllib.parse

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


def serve_page():
    """Serves this folder on a loopback port of its own; returns the page's base URL."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=os.path.dirname(os.path.abspath(__file__)))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mpd", required=True)
    parser.add_argument("--license", required=True)
    parser.add_argument("--expect", choices=["play", "refused"], required=True)
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--timeout", type=float, default=90)
    args = parser.parse_args()
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        print(json.dumps({"passed": False, "error": "selenium is not installed"}))
        return 3
    if not CHROMIUM or not CHROMEDRIVER:
        print(json.dumps({"passed": False, "error": "chromium or chromedriver is not installed"}))
        return 3

    options = Options()
    options.binary_location = CHROMIUM
    for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--autoplay-policy=no-user-gesture-required", "--no-first-run", "--mute-audio"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    report = {}
    passed = False
    try:
        fragment = urllib.parse.urlencode({"mpd": args.mpd, "license": args.license})
        driver.get(serve_page() + "player.html#" + fragment)
        deadline = time.time() + args.timeout
        refused_at = None
        while time.time() < deadline:
            report = driver.execute_script("return window.report")
            if report.get("error"):
                break
            if args.expect == "play" and report["currentTime"] >= args.seconds and report["frames"] > 0:
                passed = report["keysLoaded"] and report["licenseStatus"] == 200
                break
            if args.expect == "refused" and report["licenseStatus"] is not None and report["waitingForKey"]:
                refused_at = refused_at or time.time()
                # Watched a while longer: no frame may be decoded without the key.
                if time.time() - refused_at >= args.seconds:
                    passed = report["licenseStatus"] == 403 and report["frames"] == 0 and not report["keysLoaded"]
                    break
            time.sleep(0.1)
        report["browserLog"] = [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"][:10]
    finally:
        driver.quit()
    report["passed"] = passed
    print(json.dumps(report))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
