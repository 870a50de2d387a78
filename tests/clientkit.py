"""Helpers for the client tests: a controllable clock, a scripted server's side of the wire,
and an in-memory pair of our ClientConnection and ServerConnection.

Everything the client emits goes through ``wire.drain(..., sender="client")``, so every test
also checks the messages against the official schema.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mrtr_sansio import (
    NEED_DATA,
    UNSEALED,
    ClientConfig,
    ClientConnection,
    Era,
    Event,
    InputRequiredResult,
    JsonRpcError,
    RequestReceived,
    ServerConfig,
    ServerConnection,
)
from mrtr_sansio.protocol import CLIENT_CAPABILITIES, CLIENT_INFO, PROTOCOL_VERSION
from wire import drain

INFO = {"name": "test-client", "version": "1.0.0"}
CAPS: dict[str, Any] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {"tools": {}, "context": {}},
    "roots": {},
}
FORM: dict[str, Any] = {
    "method": "elicitation/create",
    "params": {
        "message": "Your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    },
}
URL: dict[str, Any] = {
    "method": "elicitation/create",
    "params": {"mode": "url", "message": "Log in", "url": "https://example.com/login"},
}
SAMPLE: dict[str, Any] = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "2+2?"}}],
        "maxTokens": 10,
    },
}
ROOTS: dict[str, Any] = {"method": "roots/list"}
ACCEPT: dict[str, Any] = {"action": "accept", "content": {"name": "Ada"}}
SAMPLED: dict[str, Any] = {
    "role": "assistant",
    "content": {"type": "text", "text": "4"},
    "model": "m",
}
ROOTS_ANSWER: dict[str, Any] = {"roots": [{"uri": "file:///home/ada", "name": "home"}]}


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def envelope(caps: Mapping[str, Any] = CAPS, info: Any = INFO, version: str = "2026-07-28") -> Any:
    meta: dict[str, Any] = {PROTOCOL_VERSION: version, CLIENT_CAPABILITIES: caps}
    if info is not None:
        meta[CLIENT_INFO] = info
    return meta


def client(era: str = "modern", **kwargs: Any) -> ClientConnection:
    kwargs.setdefault("client_info", INFO)
    kwargs.setdefault("capabilities", CAPS)
    kwargs.setdefault("clock", Clock())
    return ClientConnection(ClientConfig(era=era, **kwargs))  # type: ignore[arg-type]


def sent(
    conn: ClientConnection, era: Era = Era.MODERN, methods: Mapping[Any, str] | None = None
) -> list[dict[str, Any]]:
    """The messages the client wants to write, schema-checked."""
    return [dict(item.message) for item in drain(conn, era, sender="client", methods=methods)]


def one(conn: ClientConnection, era: Era = Era.MODERN) -> dict[str, Any]:
    """The single message the client wants to write."""
    out = sent(conn, era)
    assert len(out) == 1, out
    return out[0]


def result(conn: ClientConnection, rid: Any, value: Any) -> None:
    conn.receive_message({"jsonrpc": "2.0", "id": rid, "result": value})


def error(conn: ClientConnection, rid: Any, code: int, message: str, data: Any = None) -> None:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    conn.receive_message({"jsonrpc": "2.0", "id": rid, "error": err})


def input_required(requests: Mapping[str, Any] | None = None, state: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"resultType": "input_required"}
    if requests is not None:
        out["inputRequests"] = dict(requests)
    if state is not None:
        out["requestState"] = state
    return out


def events(conn: ClientConnection) -> list[Event]:
    return conn.events()


def legacy_ready(conn: ClientConnection, caps: Mapping[str, Any] | None = None) -> None:
    """Answer the client's ``initialize`` and drop the handshake messages and events."""
    init = one(conn, Era.LEGACY)
    assert init["method"] == "initialize"
    result(
        conn,
        init["id"],
        {
            "protocolVersion": "2025-11-25",
            "capabilities": dict(caps or {"tools": {}}),
            "serverInfo": {"name": "srv", "version": "1"},
        },
    )
    conn.events()
    conn.outgoing()


Handler = Callable[[RequestReceived], Mapping[str, Any] | InputRequiredResult | JsonRpcError]


class Pair:
    """Our client and our server in memory: bytes through ``data_to_send``/``receive_data``.

    ``handler`` answers every request the server application sees. Client messages are
    schema-checked as the client's, server messages as the server's. The server's state is
    unsealed unless ``server_config`` says otherwise.
    """

    def __init__(
        self,
        handler: Handler,
        client_config: ClientConfig,
        server_config: ServerConfig | None = None,
    ) -> None:
        self.client = ClientConnection(client_config)
        # Unsealed unless told otherwise: the client tests look at the state on the wire.
        self.server = ServerConnection(
            server_config
            or ServerConfig(server_info={"name": "srv", "version": "1"}, request_state=UNSEALED)
        )
        self.handler = handler
        self.server_events: list[Event] = []
        self.wire: list[tuple[str, dict[str, Any]]] = []
        self.methods: dict[Any, str] = {}  # client request id -> method, to check results

    def _era(self) -> Era:
        return self.client.era or Era.MODERN

    def to_server(self) -> bool:
        items = drain(self.client, self._era(), sender="client")
        for item in items:
            msg = dict(item.message)
            self.wire.append(("c", msg))
            if "method" in msg and "id" in msg:
                self.methods[msg["id"]] = msg["method"]
            self.server.receive_data(item.data + b"\n")
        return bool(items)

    def serve(self) -> bool:
        progressed = False
        while (event := self.server.next_event()) is not NEED_DATA:
            progressed = True
            self.server_events.append(event)
            if isinstance(event, RequestReceived):
                self.server.respond(event.request_id, self.handler(event))
        return progressed

    def to_client(self) -> bool:
        items = drain(self.server, self._era(), methods=self.methods)
        for item in items:
            self.wire.append(("s", dict(item.message)))
            self.client.receive_data(item.data + b"\n")
        return bool(items)

    def run(self, answer: Callable[[Event], None] | None = None) -> list[Event]:
        """Move messages until nothing moves; return the client's events (answering each
        with ``answer`` as it comes)."""
        seen: list[Event] = []
        while True:
            moved = self.to_server() | self.serve() | self.to_client()
            new = self.client.events()
            for event in new:
                seen.append(event)
                if answer is not None:
                    answer(event)
            if not moved and not new:
                return seen
