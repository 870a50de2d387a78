"""The ASGI app's HTTP edge, IO-free: ``screen`` decides each refusal without an ASGI server."""

from __future__ import annotations

import pytest

from mrtr_sansio.adapters._http_guard import CLOSE, HEADERS, route_path, screen

ALLOWED = frozenset({"localhost"})
GOOD = [
    (b"host", b"localhost:8000"),
    (b"content-type", b"application/json"),
    (b"accept", b"application/json, text/event-stream"),
]


def _screen(raw: list[tuple[bytes, bytes]], method: str = "POST", *, legacy: bool = True) -> object:
    _, headers, repeated = HEADERS.read(raw)
    refused = screen(method, True, headers, repeated, ALLOWED, legacy=legacy)
    return None if refused is None else (refused.status, refused.headers, refused.observed)


def test_a_good_post_and_a_legacy_delete_go_on() -> None:
    assert _screen(GOOD) is None
    assert _screen(GOOD, "DELETE") is None


@pytest.mark.parametrize(
    ("extra", "status"),
    [
        ([(b"content-length", b"2"), (b"transfer-encoding", b"chunked")], 400),
        ([(b"host", b"localhost:8000")], 400),
        ([(b"origin", b"http://evil.example")], 403),
    ],
)
def test_each_header_rule_refuses(extra: list[tuple[bytes, bytes]], status: int) -> None:
    refused = _screen(GOOD + extra)
    assert isinstance(refused, tuple)
    assert refused[0] == status


def test_host_content_type_accept_and_method() -> None:
    assert _screen([(b"host", b"evil.example"), *GOOD[1:]]) == (421, [], True)
    assert _screen([GOOD[0], (b"content-type", b"text/plain")]) == (415, [], True)
    assert _screen([*GOOD[:2], (b"accept", b"text/html")]) == (406, [], True)
    assert _screen(GOOD, "GET") == (405, [(b"allow", b"POST, DELETE")], False)
    assert _screen(GOOD, "DELETE", legacy=False) == (405, [(b"allow", b"POST")], False)


def test_a_refusal_before_an_announced_body_closes_the_connection() -> None:
    assert _screen([*GOOD[:2], (b"content-length", b"5"), (b"accept", b"x/y")]) == (
        406,
        [CLOSE],
        True,
    )
    _, headers, repeated = HEADERS.read(GOOD)
    refused = screen("POST", False, headers, repeated, None, legacy=True)
    assert refused is not None
    assert (refused.status, refused.observed) == (404, False)
    assert repr(refused) == "Refusal(404, 'Not Found')"


def test_the_route_path_honours_the_mount_point() -> None:
    assert route_path("/api/mcp", "/api") == "/mcp"
    assert route_path("/apimcp", "/api") == "/apimcp"
    assert route_path("/mcp", "") == "/mcp"
