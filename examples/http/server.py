"""The fixtures over Streamable HTTP: the ASGI app under uvicorn, both eras on one URL.

    python examples/http/server.py --port 8000            # http://127.0.0.1:8000/mcp

``requestState`` is sealed with a key ring: ``--state-keys-file PATH`` (one key per line) or
``--state-keys-env NAME`` (keys separated by commas or whitespace), each key base64 (standard
or URL-safe) of at least 32 random bytes; the first key seals, every key unseals
(:class:`mrtr_sansio.RequestStateSecurity`). Several processes serving one URL must share the
ring. Without either, a random key is made for this process only.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import uvicorn

import mrtr_sansio as m
from mrtr_sansio.adapters.asgi import LOCAL_HOSTS, McpHttpApp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fixtures import Everything, server_config

__all__ = ["build_app", "load_keys", "main"]

log = logging.getLogger("mrtr_sansio.examples.http")


class KeyRingError(ValueError):
    """The key ring given on the command line cannot be used."""


def _decode_key(text: str) -> bytes:
    padded = text + "=" * (-len(text) % 4)
    try:
        return base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        raise KeyRingError("a state key is not valid base64") from None


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


def build_app(
    keys: Sequence[bytes] | None,
    *,
    codec: Literal["hmac-sha256", "aes-256-gcm"] = "hmac-sha256",
    audience: str | None = None,
    allowed_hosts: Sequence[str] = LOCAL_HOSTS,
) -> McpHttpApp:
    """The fixtures' ASGI app, sealing state with ``keys`` (a key for this process when None).

    Raises ``ValueError`` for an unusable key ring (a key shorter than 32 bytes, duplicates).
    """
    if keys is None:
        log.warning("no state key ring given: sealing with a key for this process only")
        sealing = m.RequestStateSecurity.ephemeral(codec=codec, audience=audience)
    else:
        sealing = m.RequestStateSecurity(keys, codec=codec, audience=audience)
    config = server_config(request_state=sealing)
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
    parser.add_argument(
        "--state-codec",
        choices=["hmac-sha256", "aes-256-gcm"],
        default="hmac-sha256",
        help="integrity only, or also confidentiality (needs the crypto extra)",
    )
    parser.add_argument("--audience", help="this server's name, bound into sealed state")
    parser.add_argument("--log-level", default="warning")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr)
    try:
        keys = load_keys(args.state_keys_file, args.state_keys_env)
        app = build_app(
            keys,
            codec=args.state_codec,
            audience=args.audience,
            allowed_hosts=[*LOCAL_HOSTS, *args.allow_host],
        )
    except (ValueError, OSError, ImportError) as exc:
        sys.exit(f"server.py: {exc}")
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, lifespan="on")


if __name__ == "__main__":
    main()
