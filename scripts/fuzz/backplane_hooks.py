"""Schemathesis hooks for the backplane fuzzing net (load with SCHEMATHESIS_HOOKS=backplane_hooks).

Reads the state written by `backplane_signing.py register` (env BACKPLANE_FUZZ_STATE) and:

- gives every operation the credentials its `security` names: a bearer token of the scope its tag
  names (admin, cms, reporting), or the BPS1-HMAC-SHA256 signature with the test app key, plus the
  registered device's id and credential where `deviceCredential` is required. The signature is
  computed by a `requests` auth object, i.e. over the final prepared request: method, path and
  query exactly as sent, and the exact body bytes. Every request gets a fresh nonce.
- points most generated ids at things that exist (the registered device, the seeded feed, asset and
  command), so the fuzzer reaches the handlers and not only the 403/404 paths;
- on registration, sometimes sends a real device key and its proof (X-Backplane-Device-Proof);
- re-registers the device (with its key's proof) when a fuzzed request unregistered or released it;
- logs every response as one JSON line to BACKPLANE_FUZZ_LOG (full request for any 5xx).
"""

from __future__ import annotations

import base64
import json
import os
import random
import threading

import requests
import schemathesis

from backplane_signing import AppKey, DeviceKey, signed_request, signing_headers, try_register

_STATE_PATH = os.environ["BACKPLANE_FUZZ_STATE"]
_LOG_PATH = os.environ.get("BACKPLANE_FUZZ_LOG")
with open(_STATE_PATH, encoding="utf-8") as _file:
    STATE = json.load(_file)

DEVICE_KEY = DeviceKey.from_pem(STATE["devicePrivateKeyPEM"])
_lock = threading.Lock()
_device = {"credential": STATE["credential"], "stale": False}
# The app key the hooks sign with; replaced when a fuzzed `POST /v1/admin/keys/{keyId}/revoke` revoked it
# (schemathesis learns key ids from `GET /v1/admin/keys` and feeds them back).
_app = {"key": AppKey(STATE["keyId"], STATE["secret"]), "revoked": False}
_rng = random.Random(int(os.environ.get("BACKPLANE_FUZZ_SEED", "0")) or None)

# The hooks' own bearer tokens (named "fuzz-hooks" by scripts/fuzz-api). The fuzzer learns token
# ids from `GET /v1/admin/tokens` and feeds them to `POST /v1/admin/tokens/{tokenId}/revoke`; the
# API makes no admin token, so a revoked hook token could not be replaced. A revocation aimed at
# one is sent to a throwaway token instead (still a real revocation).
_PROTECTED_TOKEN_IDS: set[str] = set()

# How often a generated id is replaced by one that exists.
KNOWN_ID_RATE = {"devices": 0.9, "subscriptions": 0.7, "events": 0.9, "admin": 0.4, "cms": 0.5}


def _security(case) -> set[str]:
    """The security scheme names of the operation (one requirement per operation in this API)."""
    names: set[str] = set()
    for requirement in case.operation.definition.raw.get("security") or []:
        names.update(requirement)
    return names


def _tag(case) -> str:
    tags = case.operation.definition.raw.get("tags") or ["operations"]
    return tags[0]


def _operation_id(case) -> str:
    return case.operation.definition.raw.get("operationId", case.operation.label)


class SignedRequest(requests.auth.AuthBase):
    """Signs the prepared request as it will go on the wire."""

    def __init__(self, with_device: bool, device_key: DeviceKey | None = None) -> None:
        self.with_device = with_device
        self.device_key = device_key

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        body = request.body
        if body is None:
            body_bytes = b""
        elif isinstance(body, str):
            # Send exactly the bytes that are signed (http.client would encode a str as Latin-1).
            body_bytes = body.encode("utf-8")
            request.body = body_bytes
            request.headers["Content-Length"] = str(len(body_bytes))
        elif isinstance(body, (bytes, bytearray)):
            body_bytes = bytes(body)
        else:  # a stream: read it once and send the bytes
            body_bytes = b"".join(chunk if isinstance(chunk, bytes) else chunk.encode("utf-8") for chunk in body)
            request.body = body_bytes
            request.headers["Content-Length"] = str(len(body_bytes))
            request.headers.pop("Transfer-Encoding", None)
        device_id = credential = None
        with _lock:
            app_key = _app["key"]
            if self.with_device:
                device_id, credential = STATE["deviceId"], _device["credential"]
        request.headers.update(
            signing_headers(app_key, request.method, request.path_url, body_bytes, device_id, credential, self.device_key)
        )
        return request


def _admin(method: str, path: str, body: object | None = None) -> object:
    status, answer = signed_request(STATE["url"], None, method, path, body, bearer=STATE["tokens"]["admin"])
    if status >= 300:
        raise RuntimeError(f"{method} {path} answered {status}: {answer}")
    return answer


def _protect_hook_tokens() -> None:
    listed = _admin("GET", "/v1/admin/tokens")
    for token in listed.get("tokens", []) if isinstance(listed, dict) else []:
        if token.get("name") == "fuzz-hooks":
            _PROTECTED_TOKEN_IDS.add(token["tokenId"])


def _throwaway_token_id() -> str:
    answer = _admin("POST", "/v1/admin/tokens", {"scope": "cms", "name": "fuzz-throwaway"})
    return answer["info"]["tokenId"]


def _save_state() -> None:
    """Writes the current credential and app key back, so `backplane_signing.py send --state` can
    replay a finding after the run (called with the lock held)."""
    STATE["credential"] = _device["credential"]
    STATE["keyId"], STATE["secret"] = _app["key"].key_id, _app["key"].secret
    with open(_STATE_PATH + ".tmp", "w", encoding="utf-8") as file:
        json.dump(STATE, file, indent=2)
    os.replace(_STATE_PATH + ".tmp", _STATE_PATH)


def _new_app_key() -> None:
    """Adds an app key to sign with (the fuzzer revoked the one in use)."""
    answer = _admin("POST", "/v1/admin/keys")
    _app["key"] = AppKey(answer["keyId"], answer["secret"])
    _app["revoked"] = False
    _save_state()


def _reregister() -> None:
    """Registers the fuzz device again with its key's proof (called with the lock held). Other
    workers' fuzzed requests may interfere meanwhile: a revoked app key gets a new one; a
    registration of the id by another install (possible after a fuzzed release) gets released."""
    for _ in range(5):
        status, answer = try_register(STATE["url"], _app["key"], STATE["deviceId"], STATE["userId"], DEVICE_KEY)
        if status in (200, 201):
            _device["credential"] = answer["deviceCredential"]
            _device["stale"] = False
            _save_state()
            return
        code = answer.get("error", {}).get("code") if isinstance(answer, dict) else None
        if code == "invalid_credentials":
            _new_app_key()
        elif code == "device_already_registered":
            _admin("POST", f"/v1/admin/devices/{STATE['deviceId']}/release")
        else:
            break
    raise RuntimeError(f"could not register the fuzz device again: {status} {answer}")


@schemathesis.hook
def before_call(context, case, kwargs):
    security = _security(case)
    tag = _tag(case)
    operation = _operation_id(case)
    rate = KNOWN_ID_RATE.get(tag, 0.0)

    # Point generated ids at existing things, most of the time.
    if isinstance(case.path_parameters, dict):
        replacements = {"deviceId": STATE["deviceId"], "feedId": STATE["feedId"], "commandId": STATE["commandId"]}
        for name, value in replacements.items():
            if name in case.path_parameters and _rng.random() < rate:
                case.path_parameters[name] = value
        if "assetId" in case.path_parameters and case.path_parameters.get("feedId") == STATE["feedId"] and _rng.random() < 0.5:
            case.path_parameters["assetId"] = STATE["assetId"]

    if operation == "adminRevokeToken" and isinstance(case.path_parameters, dict):
        with _lock:
            if not _PROTECTED_TOKEN_IDS:
                _protect_hook_tokens()
        if case.path_parameters.get("tokenId") in _PROTECTED_TOKEN_IDS or _rng.random() < 0.3:
            case.path_parameters["tokenId"] = _throwaway_token_id()

    # Commands for the fuzz device (a generated target almost never exists), and an episode to retract.
    if operation == "adminEnqueueCommand" and isinstance(case.body, dict) and _rng.random() < 0.5:
        for target in ("userId", "externalDeviceId"):
            case.body.pop(target, None)
        case.body["deviceId"] = STATE["deviceId"]
    if operation == "cmsRetractEpisode" and isinstance(case.path_parameters, dict) \
            and case.path_parameters.get("assetId") == STATE["assetId"]:
        # Best effort: another worker may delete the feed in between (the retraction then gets a 404).
        feed = f"/v1/cms/feeds/{STATE['feedId']}"
        for _ in range(3):
            signed_request(STATE["url"], None, "PUT", feed, {"title": "Fuzz feed"}, bearer=STATE["tokens"]["cms"])
            status, _answer = signed_request(STATE["url"], None, "POST", feed + "/episodes",
                                             {"episodes": [{"assetId": STATE["assetId"]}]}, bearer=STATE["tokens"]["cms"])
            if status == 200:
                break

    if "bearerToken" in security:
        token = STATE["tokens"].get(tag)
        if token is None:
            raise RuntimeError(f"no token scope for tag {tag!r} of {operation}")
        if case.headers is None:
            case.headers = {}
        case.headers["Authorization"] = f"Bearer {token}"
    elif "appKeySignature" in security:
        with_device = "deviceCredential" in security
        device_key = None
        with _lock:
            if _app["revoked"]:
                _new_app_key()
            if with_device and _device["stale"]:
                _reregister()
        if operation == "registerDevice" and isinstance(case.body, dict) and isinstance(case.body.get("deviceId"), str) \
                and _rng.random() < 0.4:
            # Generated device ids repeat ("0", "a"...), and a known id needs a proof: make some new.
            case.body["deviceId"] = f"{case.body['deviceId'][:100]}-{_rng.getrandbits(32):08x}"
        if operation == "registerDevice" and isinstance(case.body, dict) and _rng.random() < 0.5:
            # A real device key and its proof; sometimes re-register the fuzz device itself (this
            # exercises the proof check and the `existing`/`moved` paths).
            if _rng.random() < 0.3:
                case.body["deviceId"] = STATE["deviceId"]
                device_key = DEVICE_KEY
            else:
                device_key = DeviceKey()
            case.body["devicePublicKey"] = device_key.public_key_text
        if operation == "registerDevice" and _rng.random() < 0.3:
            # A made-up user token (the fuzz application checks those it is sent): 401, never a 5xx.
            if case.headers is None:
                case.headers = {}
            case.headers["X-Backplane-User-Token"] = _malformed_user_token()
        kwargs["auth"] = SignedRequest(with_device, device_key)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _malformed_user_token() -> str:
    """A JWT-shaped or shapeless token no configuration accepts: bad parts, odd headers, huge
    numbers, the wrong algorithm, a signature over nothing."""
    claims = {"sub": STATE["userId"], "iss": "https://fuzz.example", "aud": "fuzz", "exp": _rng.choice([0, 1e300, -1, 2**63, "soon"])}
    headers = [{"alg": "none"}, {"alg": "HS256", "crit": ["b64"]}, {"alg": "RS256", "kid": "x" * _rng.randint(0, 400)},
               {"alg": "ES256"}, {"alg": 7}, [], {"alg": "HS256"}, {"alg": "EdDSA", "kid": None}]
    header = _rng.choice(headers)
    parts = [_b64(json.dumps(header).encode()), _b64(json.dumps(claims).encode()), _b64(_rng.randbytes(_rng.choice([0, 1, 64, 300])))]
    shapes = [
        ".".join(parts),
        ".".join(parts[:2]) + ".",
        ".".join(parts[:2]),
        "..",
        "a.b.c",
        _b64(_rng.randbytes(_rng.randint(1, 200))),
        ".".join(parts) + "." + parts[0],
        # Past the token's 8 KiB limit but inside the server's 16 KiB head limit, so that the
        # answer is the token's 401 (or a wrong method's 405), never the head's 431.
        "x" * 8193,
        ".".join([_b64(b"\xff\xfe"), parts[1], parts[2]]),
    ]
    return _rng.choice(shapes)


def _error_code(response) -> str | None:
    try:
        body = json.loads(response.content or b"null")
        return body["error"]["code"] if isinstance(body, dict) else None
    except (ValueError, KeyError, TypeError):
        return None


# The fuzz application's user-token configuration (scripts/fuzz-api sets it): checked, not required.
FUZZ_USER_IDENTITY = {"required": False, "issuer": "https://fuzz.example", "audience": "fuzz",
                      "hs256Secret": "fuzz-shared-secret-of-at-least-thirty-two-bytes"}


@schemathesis.hook
def after_call(context, case, response):
    operation = _operation_id(case)
    if operation in ("adminSetUserIdentity", "adminDeleteUserIdentity") and 200 <= response.status_code < 300:
        # Put it back: made-up tokens must keep being checked (and refused), and a required
        # configuration would leave the hooks' own registrations without a token refused.
        _admin("PUT", "/v1/admin/user-identity", FUZZ_USER_IDENTITY)
    code = _error_code(response) if response.status_code >= 400 else None
    security = _security(case)

    # Keep the fuzz device usable: re-register it before the next device request when it lost its
    # registration or credential (unregistered by itself or an admin, released, killed, moved...).
    stale = "deviceCredential" in security and code in ("device_unregistered", "invalid_credentials")
    answer = None
    if 200 <= response.status_code < 300:
        try:
            answer = json.loads(response.content or b"null")
        except ValueError:
            pass
        if operation == "adminRevokeKey" and isinstance(answer, dict):
            with _lock:
                if answer.get("keyId") == _app["key"].key_id:
                    _app["revoked"] = True
        device = answer.get("device") if isinstance(answer, dict) else None
        if isinstance(device, dict) and device.get("deviceId") == STATE["deviceId"]:
            if operation == "registerDevice" and isinstance(answer.get("deviceCredential"), str):
                with _lock:
                    _device["credential"] = answer["deviceCredential"]
                    _save_state()
            if device.get("unregisteredAt") or device.get("userId") != STATE["userId"]:
                stale = True
    if stale:
        with _lock:
            _device["stale"] = True

    if _LOG_PATH:
        request = response.request
        entry = {
            "operation": operation,
            "method": request.method,
            "path": request.path_url if hasattr(request, "path_url") else str(request.url),
            "status": response.status_code,
            "code": code,
        }
        if response.status_code >= 500:
            body = request.body or b""
            if isinstance(body, str):
                body = body.encode("utf-8")
            entry["url"] = str(request.url)
            entry["headers"] = dict(request.headers)
            entry["bodyBase64"] = base64.b64encode(body).decode("ascii")
            entry["bodyText"] = body.decode("utf-8", "replace")[:4000]
            entry["response"] = response.content.decode("utf-8", "replace")[:2000]
        with _lock, open(_LOG_PATH, "a", encoding="utf-8") as log:
            log.write(json.dumps(entry) + "\n")
