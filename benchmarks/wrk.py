"""Runs `wrk` (Debian) and reads the figures the benchmarks print; shared by the benchmarks that
use it. Every run is checked: an answer other than 2xx, or a failed connection, stops the
benchmark rather than leave a figure behind (a benchmark may catch `SocketErrors` and run
again with fresh requests)."""
import re
import subprocess


class SocketErrors(SystemExit):
    """wrk counted failed connects, reads, writes or timeouts; every answer it got was 2xx."""

    def __init__(self, url, output):
        line = re.search(r"^\s*Socket errors:.*$", output, re.M)
        self.detail = line.group(0).strip() if line else "socket errors"
        super().__init__(f"{url}: failed connections ({self.detail})\n{output}")


class Figures:
    """What one wrk run printed."""

    def __init__(self, output):
        self.output = output
        self.requests = int(re.search(r"(\d+) requests in", output).group(1))
        rate = re.search(r"Requests/sec:\s+([\d.]+)", output)
        self.rate = float(rate.group(1)) if rate else 0.0

    def latency_ms(self, percentile):
        """A latency percentile of `--latency` (50, 75, 90 or 99), in milliseconds."""
        value, unit = re.search(rf"^\s+{percentile}%\s+([\d.]+)(us|ms|s)\s*$", self.output, re.M).groups()
        return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def run(url, seconds, connections, script=None, script_args=(), headers=(), timeout=None):
    """One wrk thread; `script` (a Lua file) gets `script_args` after `--`."""
    command = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency"]
    if timeout:
        command += ["--timeout", timeout]
    for header in headers:
        command += ["-H", header]
    if script:
        command += ["-s", script]
    command.append(url)
    if script_args:
        command += ["--", *map(str, script_args)]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    if "Non-2xx" in output:
        raise SystemExit(f"{url}: answers other than 2xx\n{output}")
    if "Socket errors" in output:
        raise SocketErrors(url, output)
    return Figures(output)
