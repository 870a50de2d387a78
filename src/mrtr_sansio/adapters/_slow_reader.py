"""The byte bound on what a client leaves unread, shared by every server adapter that queues
output for it (the ASGI app per streamed response, the anyio stream servers per stream).

Past :data:`STREAM_QUEUE_BYTES` (or the adapter's ``stream_queue_bytes``) the client is too
slow: the requests whose output cannot end by itself (a streamed HTTP response; on a stream,
its ``subscriptions/listen`` streams) are dropped, logged by :func:`log_dropped`.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["STREAM_QUEUE_BYTES", "log_dropped", "queue_bytes", "too_slow"]

#: Bytes of messages a client may leave unread (one streamed HTTP response, or all of one
#: stream) before what it reads too slowly is dropped.
STREAM_QUEUE_BYTES = 1024 * 1024


def queue_bytes(value: Any) -> int:
    """``value`` checked as a ``stream_queue_bytes`` (a positive int)."""
    if type(value) is not int or value <= 0:
        raise ValueError(f"stream_queue_bytes: must be a positive int, got {value!r}")
    return value


def too_slow(limit: int) -> str:
    """Why a request was dropped, as its client is told (the reason or the error message)."""
    return f"The client reads too slowly: it left over {limit} bytes unread"


def log_dropped(log: logging.Logger, method: str, request_id: Any, limit: int) -> None:
    """The one log line of a request dropped because its client reads too slowly."""
    log.warning("%s %r: the client left over %d bytes unread; dropped", method, request_id, limit)
