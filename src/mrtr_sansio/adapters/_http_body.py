"""Reading the body of an HTTP response for :class:`~._http_wire.HttpWire`: chunk by chunk
until a reader has what it wants, whole within a limit, and why a response answered nothing."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import httpx

__all__ = ["consume", "content_kind", "describe", "read_body"]


def content_kind(response: httpx.Response) -> str:
    """The response's media type, lower case, without parameters (``""`` for none)."""
    kind: str = response.headers.get("content-type", "")
    return kind.split(";", maxsplit=1)[0].strip().lower()


async def consume(response: httpx.Response, take: Callable[[bytes], bool]) -> bool:
    """Hand the body's chunks to ``take`` until it returns True (then True) or the body ends.

    Reading stops by cancellation rather than by leaving the loop, so that every one of
    httpx's nested async generators ends (trio warns about those left to the garbage
    collector). ``take`` must not raise.
    """
    done = False
    with anyio.CancelScope() as reading:
        async for chunk in response.aiter_bytes():
            if not done and take(chunk):
                done = True
                reading.cancel()
    return done


async def read_body(response: httpx.Response, limit: int) -> bytes | None:
    """The whole body, or None past ``limit`` bytes (the rest is not read)."""
    chunks: list[bytes] = []
    size = 0

    def take(chunk: bytes) -> bool:
        nonlocal size
        size += len(chunk)
        chunks.append(chunk)
        return size > limit

    return None if await consume(response, take) else b"".join(chunks)


def describe(status: int, kind: str, body: bytes) -> str:
    """Why a response did not answer its request, for the caller's error message."""
    if 200 <= status < 300:
        return f"HTTP {status} ({kind or 'no content type'}) without a JSON-RPC response"
    text = body[:200].decode("utf-8", "replace").strip()
    return f"HTTP {status}" + (f": {text}" if text else "")
