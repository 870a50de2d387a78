"""A scripted 2025-11-25 client and a tiny server application, for the legacy-wire tests.

The client writes plain JSON-RPC dicts to a real :class:`ServerConnection` (through the byte
stream, as a stdio client would) and reads back what the server wrote, validated against the
2025-11-25 schema by :func:`wire.drain`. The application side is a loop that hands each
:class:`RequestReceived` to a handler function and sends what it returns.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from mrtr_sansio import (
    Era,
    Event,
    InputRequiredResult,
    JsonRpcError,
    Outgoing,
    RequestReceived,
    ServerConfig,
    ServerConnection,
)
from wire import drain

LEGACY = "2025-11-25"
CLIENT_INFO = {"name": "ScriptedClient", "version": "1.0.0"}
SERVER_INFO = {"name": "TestServer", "version": "2.0.0"}
FULL_CAPS: dict[str, Any] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {"tools": {}, "context": {}},
    "roots": {"listChanged": True},
}

Answer = Mapping[str, Any] | InputRequiredResult | JsonRpcError | None
Handler = Callable[[RequestReceived], Answer]


class LegacyClient:
    """A pre-2026 client, scripted message by message."""

    def __init__(self, conn: ServerConnection) -> None:
        self.conn = conn
        self._next_id = 1
        #: Ids of our requests -> method, so drain() checks results against the right schema.
        self.methods: dict[Any, str] = {}

    def send(self, msg: Mapping[str, Any]) -> None:
        """Write one message as an NDJSON line."""
        self.conn.receive_data(json.dumps(msg).encode() + b"\n")

    def request(
        self, method: str, params: Mapping[str, Any] | None = None, request_id: Any = None
    ) -> Any:
        """Send a request; returns its id."""
        if request_id is None:
            request_id = self._next_id
            self._next_id += 1
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.methods[request_id] = method
        self.send(msg)
        return request_id

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def answer(self, request_id: Any, result: Mapping[str, Any]) -> None:
        """Answer a server request."""
        self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def answer_error(self, request_id: Any, code: int, message: str, data: Any = None) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        self.send({"jsonrpc": "2.0", "id": request_id, "error": error})

    def cancel(self, request_id: Any, reason: str | None = None) -> None:
        params: dict[str, Any] = {"requestId": request_id}
        if reason is not None:
            params["reason"] = reason
        self.notify("notifications/cancelled", params)

    def initialize(
        self,
        capabilities: Mapping[str, Any] | None = None,
        version: str = LEGACY,
        *,
        initialized: bool = True,
    ) -> dict[str, Any]:
        """The handshake; returns the server's answer message."""
        rid = self.request(
            "initialize",
            {
                "protocolVersion": version,
                "capabilities": dict(FULL_CAPS if capabilities is None else capabilities),
                "clientInfo": CLIENT_INFO,
            },
        )
        (reply,) = self.take()
        assert reply["id"] == rid
        if initialized:
            self.notify("notifications/initialized")
        return reply

    def take_items(self) -> list[Outgoing]:
        """Everything the server wrote since the last call, schema-validated."""
        return drain(self.conn, Era.LEGACY, methods=self.methods)

    def take(self) -> list[dict[str, Any]]:
        """The messages the server wrote since the last call, schema-validated."""
        return [dict(item.message) for item in self.take_items()]


class App:
    """The server application: runs a handler for every request the connection delivers."""

    def __init__(self, conn: ServerConnection, handler: Handler) -> None:
        self.conn = conn
        self.handler = handler
        #: Every RequestReceived the handler saw, in order.
        self.seen: list[RequestReceived] = []
        #: Every other event, in order.
        self.other: list[Event] = []

    def run(self) -> list[Event]:
        """Process pending events; returns the non-request events seen in this call."""
        fresh: list[Event] = []
        while events := self.conn.events():  # answers may queue more (shim replays)
            for event in events:
                if isinstance(event, RequestReceived):
                    self.seen.append(event)
                    answer = self.handler(event)
                    if answer is not None:
                        self.conn.respond(event.request_id, answer)
                else:
                    fresh.append(event)
        self.other.extend(fresh)
        return fresh


def server(**config: Any) -> ServerConnection:
    """A server connection with a fixed identity and deterministic ids and clock."""
    config.setdefault("server_info", SERVER_INFO)
    config.setdefault("capabilities", {"tools": {}, "prompts": {}, "resources": {}})
    config.setdefault("token_hex", lambda n: "e" * (2 * n))
    config.setdefault("clock", lambda: 1000.0)
    server_requests = config.pop("server_requests", True)
    return ServerConnection(ServerConfig(**config), server_requests=server_requests)


def session(
    handler: Handler,
    capabilities: Mapping[str, Any] | None = None,
    **config: Any,
) -> tuple[ServerConnection, LegacyClient, App]:
    """An initialized legacy session: the connection, the scripted client and the app."""
    conn = server(**config)
    client = LegacyClient(conn)
    client.initialize(capabilities)
    app = App(conn, handler)
    app.run()
    app.other.clear()
    assert client.take() == []
    return conn, client, app
