"""Signing of backplane device requests (scheme BPS1-HMAC-SHA256): the one Python copy, used by
the fuzzing net (scripts/fuzz-api, scripts/fuzz/backplane_hooks.py) and every benchmark.

Mirrors Sources/Shared/RequestSigning.swift and Sources/Backplane/Services/DeviceProof.swift:

    string to sign = "\n".join([
        "BPS1-HMAC-SHA256", METHOD, path-and-query exactly as sent, timestamp, nonce,
        lower-hex sha256(body bytes), device id or ""])
    X-Backplane-Signature    = lower-hex HMAC-SHA256(secret utf-8, string to sign)
    X-Backplane-Device-Proof = base64url(r || s) of ECDSA-P256-SHA256(device key, string to sign)
    devicePublicKey          = base64url(65-byte uncompressed X9.63 point)

Also a small command line: `python3 backplane_signing.py register ...` registers one device and
writes the state the schemathesis hooks read (see scripts/fuzz-api).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import secrets
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

SCHEME = "BPS1-HMAC-SHA256"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def new_nonce() -> str:
    """A fresh nonce: 32 characters of [A-Za-z0-9_-]."""
    return secrets.token_urlsafe(24)


def string_to_sign(method: str, path_and_query: str, timestamp: int, nonce: str, body: bytes, device_id: str | None) -> str:
    return "\n".join(
        [SCHEME, method.upper(), path_and_query, str(timestamp), nonce, hashlib.sha256(body or b"").hexdigest(), device_id or ""]
    )


class DeviceKey:
    """A device's P-256 key pair (needs the `cryptography` package, which the benchmarks, signing
    with the app key alone, do not)."""

    def __init__(self, private_key=None) -> None:
        from cryptography.hazmat.primitives.asymmetric import ec

        self.private_key = private_key or ec.generate_private_key(ec.SECP256R1())

    @property
    def public_key_text(self) -> str:
        from cryptography.hazmat.primitives import serialization

        point = self.private_key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        return b64url(point)

    def proof(self, to_sign: str) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

        der = self.private_key.sign(to_sign.encode("utf-8"), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        return b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))

    def pem(self) -> str:
        from cryptography.hazmat.primitives import serialization

        return self.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode("ascii")

    @classmethod
    def from_pem(cls, pem: str) -> "DeviceKey":
        from cryptography.hazmat.primitives import serialization

        return cls(serialization.load_pem_private_key(pem.encode("ascii"), password=None))


@dataclass
class AppKey:
    key_id: str
    secret: str


def signing_headers(
    app_key: AppKey,
    method: str,
    path_and_query: str,
    body: bytes,
    device_id: str | None = None,
    credential: str | None = None,
    device_key: DeviceKey | None = None,
) -> dict[str, str]:
    """The headers of a signed request, now, with a fresh nonce; a device's own request (with its
    credential) signs its id too; `device_key` adds X-Backplane-Device-Proof (registration)."""
    timestamp = int(time.time())
    nonce = new_nonce()
    to_sign = string_to_sign(method, path_and_query, timestamp, nonce, body, device_id)
    headers = {
        "X-Backplane-Key": app_key.key_id,
        "X-Backplane-Timestamp": str(timestamp),
        "X-Backplane-Nonce": nonce,
        "X-Backplane-Signature": hmac.new(app_key.secret.encode("utf-8"), to_sign.encode("utf-8"), hashlib.sha256).hexdigest(),
    }
    if device_id is not None:
        headers["X-Backplane-Device-Id"] = device_id
    if credential is not None:
        headers["X-Backplane-Device-Credential"] = credential
    if device_key is not None:
        headers["X-Backplane-Device-Proof"] = device_key.proof(to_sign)
    return headers


REGISTER_PATH = "/v1/devices/register"


def registration(
    app_key: AppKey, device_id: str, user_id: str, platform: str = "bench", device_key: DeviceKey | None = None, **fields: object
) -> tuple[bytes, dict[str, str]]:
    """The body and headers of one device registration (`POST /v1/devices/register`), signed now:
    the one place the fuzzing net and every benchmark build it, whatever connection sends it.
    `device_key` records the device's key, with its proof; `fields` adds the request's other
    fields (pushToken, moveFromOtherUser, ...)."""
    body: dict[str, object] = {"userId": user_id, "deviceId": device_id, "platform": platform}
    if device_key is not None:
        body["devicePublicKey"] = device_key.public_key_text
    body.update(fields)
    data = json.dumps(body).encode("utf-8")
    headers = {"Content-Type": "application/json"}
    headers.update(signing_headers(app_key, "POST", REGISTER_PATH, data, device_key=device_key))
    return data, headers


def signed_request(
    base_url: str,
    app_key: AppKey,
    method: str,
    path: str,
    body: object | None = None,
    device_id: str | None = None,
    credential: str | None = None,
    device_key: DeviceKey | None = None,
    bearer: str | None = None,
    timeout: float = 10,
) -> tuple[int, object]:
    """Sends one request (signed when `app_key` is given) and returns (status, decoded JSON or text)."""
    data = b"" if body is None else json.dumps(body).encode("utf-8")
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if bearer is not None:
        headers["Authorization"] = f"Bearer {bearer}"
    elif app_key is not None:
        headers.update(signing_headers(app_key, method, path, data, device_id, credential, device_key))
    return send(base_url, method, path, data if body is not None else None, headers, timeout)


def send(base_url: str, method: str, path: str, data: bytes | None, headers: dict[str, str], timeout: float = 10) -> tuple[int, object]:
    """Sends one request as built and returns (status, decoded JSON or text)."""
    request = urllib.request.Request(base_url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, text = response.status, response.read().decode("utf-8")
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read().decode("utf-8")
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def register(base_url: str, app_key: AppKey, device_id: str, user_id: str, device_key: DeviceKey, move: bool = True) -> dict:
    """Registers (or re-registers, with the device key's proof) a device; returns the response body."""
    status, answer = try_register(base_url, app_key, device_id, user_id, device_key, move)
    if status not in (200, 201):
        raise RuntimeError(f"registration of {device_id!r} answered {status}: {answer}")
    return answer


def try_register(
    base_url: str, app_key: AppKey, device_id: str, user_id: str, device_key: DeviceKey, move: bool = True
) -> tuple[int, object]:
    """One registration attempt: (status, answer)."""
    data, headers = registration(app_key, device_id, user_id, "fuzz", device_key, moveFromOtherUser=move)
    return send(base_url, "POST", REGISTER_PATH, data, headers)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    reg = sub.add_parser("register", help="register one device and write the fuzzing state file")
    reg.add_argument("--url", required=True)
    reg.add_argument("--key-id", required=True)
    reg.add_argument("--secret", required=True)
    reg.add_argument("--admin-token", required=True)
    reg.add_argument("--cms-token", required=True)
    reg.add_argument("--reporting-token", required=True)
    reg.add_argument("--state", required=True, help="JSON file to write")
    send = sub.add_parser("send", help="send one request with the credentials of a state file (to reproduce a finding)")
    send.add_argument("--state", required=True, help="the state.json of a kept fuzz-api run (FUZZ_KEEP=1)")
    send.add_argument("--url", help="base URL (default: the state's)")
    send.add_argument("--auth", choices=["device", "app", "admin", "cms", "reporting", "none"], default="device",
                      help="signed as the fuzz device, signed with the app key only, or a bearer token")
    send.add_argument("--body-file", help="file with the exact body bytes")
    send.add_argument("method")
    send.add_argument("path", help="path and query exactly as they go on the wire")
    args = parser.parse_args(argv)
    if args.command == "send":
        return send_command(args)

    app_key = AppKey(args.key_id, args.secret)
    device_key = DeviceKey()
    device_id = "fuzz-device-" + secrets.token_hex(4)
    user_id = "fuzz-user"
    answer = register(args.url, app_key, device_id, user_id, device_key)
    credential = answer["deviceCredential"]

    # A little data for the fuzzer to find: a feed with episodes, a subscription, a command.
    feed_id = "fuzz-feed"
    cms = args.cms_token
    for method, path, body, token in [
        ("PUT", f"/v1/cms/feeds/{feed_id}", {"title": "Fuzz feed"}, cms),
        ("POST", f"/v1/cms/feeds/{feed_id}/episodes",
         {"episodes": [{"assetId": "fuzz-asset-1", "title": "One", "downloadURL": "https://example.com/1.mp4", "mediaType": "file"},
                       {"assetId": "fuzz-asset-2"}]}, cms),
    ]:
        status, answer = signed_request(args.url, None, method, path, body, bearer=token)
        if status >= 300:
            raise RuntimeError(f"{method} {path} answered {status}: {answer}")
    status, answer = signed_request(args.url, app_key, "PUT", f"/v1/subscriptions/{feed_id}", {"maxItems": 10},
                                    device_id=device_id, credential=credential)
    if status != 200:
        raise RuntimeError(f"subscribe answered {status}: {answer}")
    status, answer = signed_request(args.url, None, "POST", "/v1/admin/commands", {"type": "syncNow", "deviceId": device_id},
                                    bearer=args.admin_token)
    if status != 201:
        raise RuntimeError(f"enqueue command answered {status}: {answer}")
    command_id = answer["commands"][0]["commandId"]

    state = {
        "url": args.url,
        "keyId": args.key_id,
        "secret": args.secret,
        "tokens": {"admin": args.admin_token, "cms": args.cms_token, "reporting": args.reporting_token},
        "deviceId": device_id,
        "userId": user_id,
        "credential": credential,
        "devicePrivateKeyPEM": device_key.pem(),
        "feedId": feed_id,
        "assetId": "fuzz-asset-1",
        "commandId": command_id,
    }
    with open(args.state, "w", encoding="utf-8") as file:
        json.dump(state, file, indent=2)
    print(f"registered device {device_id} of user {user_id}; feed {feed_id}, command {command_id}")
    return 0


def send_command(args: argparse.Namespace) -> int:
    with open(args.state, encoding="utf-8") as file:
        state = json.load(file)
    base_url = args.url or state["url"]
    body = b""
    if args.body_file:
        with open(args.body_file, "rb") as file:
            body = file.read()
    headers = {"Content-Type": "application/json"} if body else {}
    app_key = AppKey(state["keyId"], state["secret"])
    if args.auth == "device":
        headers.update(signing_headers(app_key, args.method, args.path, body, state["deviceId"], state["credential"]))
    elif args.auth == "app":
        headers.update(signing_headers(app_key, args.method, args.path, body))
    elif args.auth != "none":
        headers["Authorization"] = f"Bearer {state['tokens'][args.auth]}"
    request = urllib.request.Request(base_url + args.path, data=body or None, method=args.method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, text = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read()
    print(status)
    sys.stdout.write(text.decode("utf-8", "replace") + "\n")
    return 0 if status < 500 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
