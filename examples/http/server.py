"""The fixtures over Streamable HTTP: the ASGI app under uvicorn, both eras on one URL.

    python examples/http/server.py --port 8000            # http://127.0.0.1:8000/mcp

``requestState`` is sealed with a key ring: ``--state-keys-file PATH`` (one key per line) or
``--state-keys-env NAME`` (keys separated by commas or whitespace), each key base64 (standard
or URL-safe) of at least 32 random bytes; the first key seals, every key unseals. Several
processes serving one URL must share the ring. Without either, a random key is made for this
process only.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import hmac
import json
import logging
import os
import secrets
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import uvicorn

import mrtr_sansio as m
from mrtr_sansio.adapters.asgi import LOCAL_HOSTS, McpHttpApp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fixtures import Everything, server_config

__all__ = ["build_app", "load_keys", "main"]

log = logging.getLogger("mrtr_sansio.examples.http")
MIN_KEY_BYTES = 32


class KeyRingError(ValueError):
    """The key ring given on the command line cannot be used."""


def _decode_key(text: str) -> bytes:
    padded = text + "=" * (-len(text) % 4)
    try:
        key = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        raise KeyRingError("a state key is not valid base64") from None
    if len(key) < MIN_KEY_BYTES:
        raise KeyRingError(f"a state key has {len(key)} bytes; at least {MIN_KEY_BYTES} needed")
    return key


def load_keys(file: str | None = None, env: str | None = None) -> list[bytes] | None:
    """The key ring from a file or an environment variable, or None when neither is given."""
    if file is not None and env is not None:
        raise KeyRingError("give --state-keys-file or --state-keys-env, not both")
    if file is not None:
        lines = Path(file).read_text(encoding="ascii").splitlines()
        texts = [s for line in lines if (s := line.strip()) and not s.startswith("#")]
    elif env is not None:
        value = os.environ.get(env)
        if value is None:
            raise KeyRingError(f"environment variable {env} is not set")
        texts = value.replace(",", " ").split()
    else:
        return None
    if not texts:
        raise KeyRingError("the state key ring is empty")
    return [_decode_key(t) for t in texts]


class TemporaryHmacState:
    """TEMPORARY stand-in for the library's ``RequestStateSecurity`` (issue 3), to be replaced
    as soon as it is in main: HMAC-SHA256 over the state, its round and expiry, and the request
    it is bound to. Integrity only (the client can read the state)."""

    def __init__(self, keys: Sequence[bytes], ttl: float = 600.0) -> None:
        self.keys = list(keys)
        self.ttl = ttl

    @staticmethod
    def _mac(key: bytes, binding: m.StateBinding, body: bytes) -> bytes:
        bound = json.dumps(
            [binding.method, binding.target, binding.arguments, binding.principal],
            sort_keys=True,
            separators=(",", ":"),
        ).encode()
        return hmac.new(key, len(bound).to_bytes(4, "big") + bound + body, hashlib.sha256).digest()

    def seal(self, state: Any, binding: m.StateBinding, round: int, now: float) -> str:
        body = json.dumps({"s": state, "r": round, "x": now + self.ttl}).encode()
        mac = self._mac(self.keys[0], binding, body)
        return f"{_b64(body)}.{_b64(mac)}"

    def unseal(self, token: str, binding: m.StateBinding, now: float) -> m.UnsealedState:
        try:
            body_text, mac_text = token.split(".")
            body = base64.urlsafe_b64decode(body_text + "=" * (-len(body_text) % 4))
            mac = base64.urlsafe_b64decode(mac_text + "=" * (-len(mac_text) % 4))
        except (ValueError, binascii.Error):
            raise m.RequestStateError("malformed") from None
        if not any(hmac.compare_digest(mac, self._mac(k, binding, body)) for k in self.keys):
            raise m.RequestStateError("bad_tag")
        claims = json.loads(body)
        if claims["x"] <= now:
            raise m.RequestStateError("expired")
        return m.UnsealedState(claims["s"], claims["r"])


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def build_app(
    keys: Sequence[bytes] | None, *, allowed_hosts: Sequence[str] = LOCAL_HOSTS
) -> McpHttpApp:
    """The fixtures' ASGI app, sealing state with ``keys`` (a fresh random key when None)."""
    if keys is None:
        log.warning("no state key ring given: sealing with a key for this process only")
        keys = [secrets.token_bytes(MIN_KEY_BYTES)]
    config = server_config(request_state=TemporaryHmacState(keys))
    return McpHttpApp(Everything().handle, config, allowed_hosts=allowed_hosts)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also accept this name in Host/Origin (default: localhost names only)",
    )
    keys = parser.add_mutually_exclusive_group()
    keys.add_argument("--state-keys-file", metavar="PATH", help="key ring file, one key a line")
    keys.add_argument("--state-keys-env", metavar="NAME", help="environment variable with keys")
    parser.add_argument("--log-level", default="warning")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr)
    try:
        keys = load_keys(args.state_keys_file, args.state_keys_env)
    except (KeyRingError, OSError) as exc:
        sys.exit(f"server.py: {exc}")
    app = build_app(keys, allowed_hosts=[*LOCAL_HOSTS, *args.allow_host])
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, lifespan="on")


if __name__ == "__main__":
    main()
