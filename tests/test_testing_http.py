"""The HTTP endpoint callable, against our ASGI app served by uvicorn on a loopback port."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import Any

import pytest
import uvicorn

import mrtr_sansio as m
from helpers import (
    MODEL_OPERATIONS,
    model_config,
    model_handler,
    plain_state_handler,
)
from mrtr_sansio.adapters.asgi import McpHttpApp
from mrtr_sansio.testing import (
    ModelConfig,
    SpecViolationError,
    check_server,
    http_endpoint,
)
from mrtr_sansio.testing.http import expected_status, parse_sse
from test_testing_model import fast, schema_valid

ASGIApp = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
    Awaitable[None],
]


class Served:
    """An ASGI app served by uvicorn in a thread, on a free loopback port.

    The HTTP parser is h11, which passes through what httptools would refuse itself (control
    bytes in header values, ambiguous framing): the app's own checks are what these tests see.
    """

    def __init__(self, app: ASGIApp, http: str = "h11") -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        cfg = uvicorn.Config(app, log_level="warning", lifespan="off", http=http)
        self.server = uvicorn.Server(cfg)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]})
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():  # pragma: no cover
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        self._sock = sock

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self._sock.close()


@pytest.fixture(scope="module")
def correct_url() -> Iterator[str]:
    served = Served(McpHttpApp(model_handler, model_config(), principal=lambda scope: "alice"))
    yield served.url
    served.close()


def test_model_passes_our_http_server(correct_url: str) -> None:
    endpoint = http_endpoint(correct_url)
    check_server(
        endpoint,
        ModelConfig(MODEL_OPERATIONS, validate=schema_valid, reject_foreign_state=True),
        settings=fast(4, steps=10),
    )
    assert endpoint.last_status in (200, 400, 404)


def test_model_finds_a_seeded_bug_over_http() -> None:
    served = Served(McpHttpApp(plain_state_handler, model_config(sealed=False)))
    try:
        with pytest.raises(SpecViolationError) as caught:
            check_server(http_endpoint(served.url), settings=fast(10), operations=MODEL_OPERATIONS)
        assert caught.value.check == "tampered-state"
    finally:
        served.close()


def _envelope(**extra: Any) -> dict[str, Any]:
    return {
        m.protocol.PROTOCOL_VERSION_KEY: "2026-07-28",
        m.protocol.CLIENT_CAPABILITIES: {},
        **extra,
    }


def test_sse_responses_and_notifications(correct_url: str) -> None:
    endpoint = http_endpoint(correct_url)
    # A progress token makes the app answer on an SSE stream.
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"x": 1}, "_meta": _envelope(progressToken=1)},
    }
    response = endpoint(message)
    assert response is not None
    assert response["id"] == 1
    assert response["result"]["content"][0]["text"] == '{"x": 1}'
    assert endpoint.notifications[-1]["method"] == "notifications/progress"
    notification = {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 5},
    }
    assert endpoint(notification) is None
    assert endpoint.last_status == 202


def test_statuses_follow_the_spec(correct_url: str) -> None:
    endpoint = http_endpoint(correct_url)
    unknown = {"jsonrpc": "2.0", "id": 2, "method": "nope/nope", "params": {"_meta": _envelope()}}
    response = endpoint(unknown)
    assert response is not None
    assert response["error"]["code"] == m.ErrorCode.METHOD_NOT_FOUND
    assert endpoint.last_status == 404
    bad = {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": {}}}
    response = endpoint(bad)
    assert response is not None
    assert endpoint.last_status == 400


def test_non_ascii_names_travel_base64_encoded() -> None:
    endpoint = http_endpoint("http://127.0.0.1:1/mcp", headers={"Authorization": "Bearer t"})
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "café", "_meta": _envelope()},
    }
    headers = endpoint.headers_for(message)
    assert headers["Mcp-Name"] == m.http.encode_header_value("café") != "café"
    assert m.http.decode_header_value(headers["Mcp-Name"]) == "café"
    assert headers["MCP-Protocol-Version"] == "2026-07-28"
    assert headers["Mcp-Method"] == "tools/call"
    assert headers["Authorization"] == "Bearer t"
    assert "Mcp-Name" not in endpoint.headers_for({"method": "tools/list", "params": []})
    assert "Mcp-Method" not in endpoint.headers_for({"params": {}})


def _raw_app(status: int, body: bytes, ctype: bytes = b"application/json") -> ASGIApp:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        while (await receive()).get("more_body"):
            pass
        await send(
            {"type": "http.response.start", "status": status, "headers": [(b"content-type", ctype)]}
        )
        await send({"type": "http.response.body", "body": body})

    return app


@pytest.mark.parametrize(
    ("status", "body", "ctype", "check"),
    [
        (
            200,
            json.dumps({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "x"}}),
            b"application/json",
            "http-status",
        ),
        (
            400,
            json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete"}}),
            b"application/json",
            "http-status",
        ),
        (404, "Not Found", b"text/plain", "jsonrpc"),
        (200, "event: message\ndata: [1]\n\n", b"text/event-stream", "jsonrpc"),
    ],
)
def test_broken_http_answers_are_reported(status: int, body: str, ctype: bytes, check: str) -> None:
    served = Served(_raw_app(status, body.encode(), ctype))
    try:
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        with pytest.raises(SpecViolationError) as caught:
            http_endpoint(served.url)(message)
        assert caught.value.check == check
        # Without status checks the same answer passes through.
        if check == "http-status":
            assert http_endpoint(served.url, check_status=False)(message) == json.loads(body)
    finally:
        served.close()


def test_expected_statuses() -> None:
    assert expected_status({"result": {}}) == 200
    assert expected_status({"error": {"code": -32601}}) == 404
    for code in (-32700, -32600, -32602, -32020, -32021, -32022):
        assert expected_status({"error": {"code": code}}) == 400
    assert expected_status({"error": {"code": -32603}}) is None
    assert expected_status({"error": "odd"}) is None


def test_sse_parsing() -> None:
    body = b'event: message\r\ndata: {"a": 1}\r\n\r\n: comment\n\ndata: {"b":\ndata: 2}\n\n'
    assert parse_sse(body) == [{"a": 1}, {"b": 2}]
    assert parse_sse(b"") == []


def test_param_headers_are_mirrored() -> None:
    mirrored = {"echo": {"Region": ("region",), "Flag": ("opts", "flag"), "N": ("n",)}}
    endpoint = http_endpoint("http://127.0.0.1:1/mcp", param_headers=mirrored)
    arguments: dict[str, Any] = {"region": "eu-wést", "opts": {"flag": False}, "n": 3}
    message: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": arguments, "_meta": _envelope()},
    }
    headers = endpoint.headers_for(message)
    assert m.http.decode_header_value(headers["Mcp-Param-Region"]) == "eu-wést"
    assert headers["Mcp-Param-Flag"] == "false"
    assert headers["Mcp-Param-N"] == "3"
    message["params"]["arguments"] = {"opts": 5}
    assert not [h for h in endpoint.headers_for(message) if h.startswith("Mcp-Param-")]


def test_param_headers_satisfy_a_server_that_checks_them() -> None:
    mirrored = {"echo": {"Region": ("region",)}}
    served = Served(McpHttpApp(model_handler, m.ServerConfig(param_headers=mirrored)))
    try:
        message = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"region": "eu"}, "_meta": _envelope()},
        }
        response = http_endpoint(served.url, param_headers=mirrored)(message)
        assert response is not None
        assert "result" in response
        refused = http_endpoint(served.url)(message)
        assert refused is not None
        assert refused["error"]["code"] == m.ErrorCode.HEADER_MISMATCH
    finally:
        served.close()
