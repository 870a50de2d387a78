"""The HTTP edge of the ASGI app, IO-free: which requests are refused before a message is read.

Given a request's method, whether its path is the app's, its headers (read once by
:data:`HEADERS`) and the names sent more than once, :func:`screen` returns the
:class:`Refusal` to send (status, text, extra headers) or None; nothing here reads a socket,
so every rule can be tested without ASGI.
"""

from __future__ import annotations

from collections.abc import Mapping

from mrtr_sansio.config import ServerConfig
from mrtr_sansio.http import HttpRequestFacts
from mrtr_sansio.http._facts import HeaderReader, host_name, origin_host
from mrtr_sansio.http._names import SESSION_HEADER

__all__ = [
    "CLOSE",
    "HEADERS",
    "LOCAL_HOSTS",
    "SESSION_HEADER",
    "SINGLE_HEADERS",
    "Refusal",
    "names_modern",
    "route_path",
    "screen",
]

LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]", "::1")
#: Headers whose second copy would let an intermediary and this app read different requests.
SINGLE_HEADERS = frozenset({"host", "origin", "content-type", SESSION_HEADER})
#: The app's headers, read with the MCP ones in one pass over the scope's list. (A repeated
#: ``Accept`` or ``Transfer-Encoding`` is one list; a repeated ``Content-Length`` is for the
#: HTTP server's parser, which refuses one that disagrees.)
HEADERS = HeaderReader(
    [*SINGLE_HEADERS, "accept", "content-length", "transfer-encoding"],
    lists=["accept", "transfer-encoding"],
)
CLOSE = (b"connection", b"close")
#: Media ranges of an ``Accept`` that the app can answer.
_ANSWERABLE = frozenset({"application/json", "text/event-stream", "*/*", "application/*"})


class Refusal:
    """A request refused at the edge: ``status``, a plain-text ``text``, extra ``headers``;
    ``observed`` when an observer is told (every refusal but an unknown path)."""

    __slots__ = ("headers", "observed", "status", "text")

    def __init__(
        self, status: int, text: str, headers: list[tuple[bytes, bytes]], observed: bool = True
    ) -> None:
        self.status = status
        self.text = text
        self.headers = headers
        self.observed = observed

    def __repr__(self) -> str:
        return f"Refusal({self.status}, {self.text!r})"


def screen(
    method: str,
    path_ok: bool,
    headers: Mapping[str, str],
    repeated: list[str] | tuple[str, ...] | frozenset[str],
    allowed_hosts: frozenset[str] | None,
    *,
    legacy: bool,
) -> Refusal | None:
    """The refusal for a request before its body is read, or None to go on with it.

    In order: two framings (400, the connection closed: request smuggling), an unknown path
    (404), a header of :data:`SINGLE_HEADERS` sent twice (400), ``Host``/``Origin`` not allowed
    (421 / 403, DNS-rebinding protection), a method other than POST (and DELETE with
    ``legacy``: 405), then for a POST a ``Content-Type`` that is not JSON (415) and an
    ``Accept`` naming nothing the app answers (406). A refusal sent before a body the request
    announces is read closes the connection rather than drain the body.
    """
    if "content-length" in headers and "transfer-encoding" in headers:
        # Two framings: a proxy in front may have read another body than we would, and
        # what follows it on the connection could be a smuggled request (RFC 9112 §6.1).
        return Refusal(400, "Bad Request: Content-Length with Transfer-Encoding", [CLOSE])
    if not path_ok:
        return Refusal(404, "Not Found", close_if_body(headers), observed=False)
    for name in repeated:
        if name in SINGLE_HEADERS:
            return Refusal(
                400, f"Bad Request: header {name} sent more than once", close_if_body(headers)
            )
    if allowed_hosts is not None:
        if not _allowed(host_name(headers.get("host", "")), allowed_hosts):
            return Refusal(421, "Misdirected Request: Host not allowed", close_if_body(headers))
        origin = headers.get("origin")
        if origin is not None and not _allowed(origin_host(origin), allowed_hosts):
            return Refusal(403, "Forbidden: Origin not allowed", close_if_body(headers))
    if method != "POST":
        if method == "DELETE" and legacy:
            return None
        allow = b"POST, DELETE" if legacy else b"POST"
        return Refusal(
            405, "Method Not Allowed", [(b"allow", allow), *close_if_body(headers)], observed=False
        )
    if not is_json(headers.get("content-type", "")):
        return Refusal(
            415, "Unsupported Media Type: expected application/json", close_if_body(headers)
        )
    accept = headers.get("accept")
    if accept is not None and not accepts(accept):
        return Refusal(
            406,
            "Not Acceptable: accept application/json, text/event-stream",
            close_if_body(headers),
        )
    return None


def route_path(path: str, root: str) -> str:
    """The path below the app's mount point: ASGI servers and routers put the full path in
    ``path`` and the mount prefix in ``root_path``; an older server may already strip it."""
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("", "/"):
        return path[len(root) :]
    return path


def names_modern(facts: HttpRequestFacts, config: ServerConfig) -> bool:
    """Whether the POST's ``MCP-Protocol-Version`` names a modern version this server serves."""
    version = facts.protocol_version
    return version is not None and version.strip() in config.supported_versions


def close_if_body(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    """``Connection: close`` for a refusal sent before a body the request announces is read:
    the server would otherwise read and discard all of it to keep the connection alive."""
    length = headers.get("content-length", "0").strip()
    if "transfer-encoding" in headers or length not in ("", "0"):
        return [CLOSE]
    return []


def _allowed(host: str | None, allowed: frozenset[str]) -> bool:
    """Whether a parsed host is allowed; an IPv6 literal may be listed with or without its
    brackets."""
    return host is not None and (host in allowed or host.strip("[]") in allowed)


def is_json(content_type: str) -> bool:
    """Whether a ``Content-Type`` is JSON (parameters such as ``charset`` aside)."""
    return (
        content_type == "application/json"
        or content_type.split(";", 1)[0].strip().lower() == "application/json"
    )


def accepts(accept: str) -> bool:
    """Whether an ``Accept`` names a media range the app can answer."""
    for part in accept.split(","):  # noqa: SIM110 (a loop: any() of a generator costs more)
        if part.split(";", 1)[0].strip().lower() in _ANSWERABLE:
            return True
    return False
