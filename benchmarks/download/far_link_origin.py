#!/usr/bin/env python3
"""A local origin that behaves like a far CDN, for benchmarks/download/far-link.sh.

Serves the files under ROOT over HTTP/1.1 (plain) and, with --cert/--key, over TLS offering h2
and http/1.1 by ALPN. Each answer is held for one round trip (--rtt-ms) after its request has
arrived, and a connection's first answer for one more (TCP's handshake; two over TLS), as a
request to a server RTT away costs. Bodies are paced: each answer at most --answer-mbit (a
CDN's per-request rate, as nginx's `limit_rate`; over HTTP/1.1 a connection carries one answer
at a time, so it is the connection's rate) and all answers together at most --total-mbit (the
link). Range requests (`bytes=a-b`, `bytes=a-`) are answered with 206.

What it does not model: loss, and so neither TCP's congestion control nor h2's head-of-line
blocking on a lossy link; the socket itself runs at loopback speed beneath the pacing.

Prints `ready http=PORT https=PORT` once listening, and on SIGTERM the connections it accepted
and the answers and body bytes it sent, per protocol, as one JSON line.
"""
import argparse
import asyncio
import json
import os
import signal
import ssl
import sys
import time

CHUNK = 64 * 1024


class Pacer:
    """Hands out send times for chunks at `rate` bytes per second, from a running schedule so
    that sleeping late does not lose the rate."""

    def __init__(self, rate):
        self.rate = rate
        self.next = 0.0

    async def take(self, size):
        now = time.monotonic()
        start = max(now, self.next)
        self.next = start + size / self.rate
        if start > now:
            await asyncio.sleep(start - now)


class Origin:
    def __init__(self, root, rtt, answer_rate, total_rate):
        self.root = os.path.realpath(root)
        self.rtt = rtt
        self.answer_rate = answer_rate
        self.link = Pacer(total_rate)
        self.files = {}
        self.stats = {"connections": {"http/1.1": 0, "h2": 0}, "answers": {"http/1.1": 0, "h2": 0}, "bytes": 0}

    def read(self, path):
        """The file at `path` (URL path, query dropped), or None."""
        path = path.split("?", 1)[0]
        if path in self.files:
            return self.files[path]
        full = os.path.realpath(os.path.join(self.root, path.lstrip("/")))
        if not full.startswith(self.root + os.sep) or not os.path.isfile(full):
            return None
        with open(full, "rb") as f:
            data = f.read()
        self.files[path] = data
        return data

    @staticmethod
    def content_type(path):
        for suffix, kind in ((".m3u8", "application/vnd.apple.mpegurl"), (".mpd", "application/dash+xml"),
                             (".ts", "video/mp2t"), (".m4s", "video/iso.segment"), (".mp4", "video/mp4")):
            if path.split("?", 1)[0].endswith(suffix):
                return kind
        return "application/octet-stream"

    def answer(self, path, range_header):
        """(status, headers, body) for a GET."""
        data = self.read(path)
        if data is None:
            return 404, [("content-length", "0")], b""
        headers = [("content-type", self.content_type(path)), ("accept-ranges", "bytes"), ("etag", f'"{len(data)}"')]
        if range_header and range_header.startswith("bytes=") and "," not in range_header:
            first, _, last = range_header[6:].partition("-")
            try:
                start = int(first)
                end = min(int(last), len(data) - 1) if last else len(data) - 1
            except ValueError:
                start, end = -1, -1
            if 0 <= start <= end:
                body = data[start:end + 1]
                headers += [("content-range", f"bytes {start}-{end}/{len(data)}"), ("content-length", str(len(body)))]
                return 206, headers, body
            return 416, [("content-range", f"bytes */{len(data)}"), ("content-length", "0")], b""
        return 200, headers + [("content-length", str(len(data)))], data

    async def paced(self, body, send):
        """Sends `body` through `send(chunk)` (a coroutine) at the answer's and the link's rates."""
        answer = Pacer(self.answer_rate)
        for offset in range(0, len(body), CHUNK):
            chunk = body[offset:offset + CHUNK]
            await answer.take(len(chunk))
            await self.link.take(len(chunk))
            await send(chunk)
            self.stats["bytes"] += len(chunk)

    # HTTP/1.1, plain or over TLS.
    async def http1(self, reader, writer, handshake_rtts):
        self.stats["connections"]["http/1.1"] += 1
        first = True
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = (lines[0].split(" ") + ["", "", ""])[:3]
                headers = {}
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0") or 0)
                if length:
                    await reader.readexactly(length)
                await asyncio.sleep(self.rtt * (1 + (handshake_rtts if first else 0)))
                first = False
                status, answer_headers, body = self.answer(path, headers.get("range"))
                if method == "HEAD":
                    body = b""
                reason = {200: "OK", 206: "Partial Content", 404: "Not Found", 416: "Range Not Satisfiable"}[status]
                out = f"HTTP/1.1 {status} {reason}\r\n" + "".join(f"{n}: {v}\r\n" for n, v in answer_headers) + "\r\n"
                writer.write(out.encode("latin-1"))

                async def send(chunk):
                    writer.write(chunk)
                    await writer.drain()
                await self.paced(body, send)
                await writer.drain()
                self.stats["answers"]["http/1.1"] += 1
                if headers.get("connection", "").lower() == "close":
                    return
        except ConnectionError:
            return
        finally:
            writer.close()

    # h2 over TLS.
    async def http2(self, reader, writer, handshake_rtts):
        import h2.config
        import h2.connection
        import h2.events
        import h2.exceptions
        import h2.settings

        self.stats["connections"]["h2"] += 1
        conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        conn.initiate_connection()
        conn.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 128})
        writer.write(conn.data_to_send())
        window_opened = asyncio.Event()
        tasks = set()
        first = [True]

        async def flush():
            data = conn.data_to_send()
            if data:
                writer.write(data)
                await writer.drain()

        async def respond(stream_id, headers):
            extra = handshake_rtts if first[0] else 0
            first[0] = False
            await asyncio.sleep(self.rtt * (1 + extra))
            status, answer_headers, body = self.answer(headers.get(":path", "/"), headers.get("range"))
            conn.send_headers(stream_id, [(":status", str(status))] + answer_headers, end_stream=not body)
            await flush()

            async def send(chunk):
                view = memoryview(chunk)
                while view:
                    allowed = min(conn.local_flow_control_window(stream_id), conn.max_outbound_frame_size, len(view))
                    if allowed <= 0:
                        window_opened.clear()
                        await window_opened.wait()
                        continue
                    conn.send_data(stream_id, bytes(view[:allowed]))
                    view = view[allowed:]
                    await flush()
            try:
                if body:
                    await self.paced(body, send)
                    conn.end_stream(stream_id)
                    await flush()
                self.stats["answers"]["h2"] += 1
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
                pass

        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    return
                try:
                    events = conn.receive_data(data)
                except h2.exceptions.ProtocolError:
                    return
                for event in events:
                    if isinstance(event, h2.events.RequestReceived):
                        task = asyncio.ensure_future(respond(event.stream_id, dict(event.headers)))
                        tasks.add(task)
                        task.add_done_callback(tasks.discard)
                    elif isinstance(event, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)):
                        window_opened.set()
                    elif isinstance(event, h2.events.ConnectionTerminated):
                        return
                await flush()
        except ConnectionError:
            return
        finally:
            for task in tasks:
                task.cancel()
            writer.close()


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tls-port", type=int, default=0)
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--rtt-ms", type=float, default=40)
    parser.add_argument("--answer-mbit", type=float, default=50)
    parser.add_argument("--total-mbit", type=float, default=300)
    args = parser.parse_args()
    origin = Origin(args.root, args.rtt_ms / 1000, args.answer_mbit * 1e6 / 8, args.total_mbit * 1e6 / 8)
    plain = await asyncio.start_server(lambda r, w: origin.http1(r, w, 1), "127.0.0.1", args.port, backlog=1024)
    ports = f"http={plain.sockets[0].getsockname()[1]}"
    servers = [plain]
    if args.cert:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(args.cert, args.key)
        context.set_alpn_protocols(["h2", "http/1.1"])

        async def tls(reader, writer):
            chosen = writer.get_extra_info("ssl_object").selected_alpn_protocol()
            # TLS 1.3's handshake costs one more round trip after TCP's.
            await (origin.http2(reader, writer, 2) if chosen == "h2" else origin.http1(reader, writer, 2))
        secure = await asyncio.start_server(tls, "127.0.0.1", args.tls_port, ssl=context, backlog=1024)
        ports += f" https={secure.sockets[0].getsockname()[1]}"
        servers.append(secure)
    print(f"ready {ports}", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    asyncio.get_running_loop().add_signal_handler(signal.SIGINT, stop.set)
    await stop.wait()
    print(json.dumps(origin.stats), flush=True)


if __name__ == "__main__":
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main())
