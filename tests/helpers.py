"""The one helper of the core tests (h11's ``helpers.py`` is the model).

* :class:`Pair`: our :class:`ClientConnection` and our :class:`ServerConnection` wired in
  memory, modern or legacy era; pumps bytes both ways until quiet, runs a handler on the server
  and keeps each side's events.
* :class:`App` (the server half of a pair) and :class:`ScriptedClient`: a 2025-11-25 peer
  written message by message, for the tests that must put exact or wrong bytes on the wire.
* The few message builders the tests need (:func:`request`, :func:`call`, :func:`meta`, ...)
  and one way to read what a connection sends (:func:`sent`, :func:`one`), which validates
  every message against the official MCP JSON schemas first (:func:`drain`).
* A correct server and five seeded bugs for the tests of ``mrtr_sansio.testing``.

The official schemas and spec examples are vendored in ``tests/spec/`` (their origin and
licences in its README), so a plain clone validates; ``MRTR_SPEC_DIR`` names another folder of
the same layout instead. When a named folder lacks them, validation is a no-op and
``test_wire.py`` reports the skip with its reason.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import attrs
import pytest

import mrtr_sansio as m
from mrtr_sansio import (
    UNSEALED,
    ClientConfig,
    ClientConnection,
    Era,
    Event,
    InputRequiredResult,
    JsonRpcError,
    Outgoing,
    RequestReceived,
    ServerConfig,
    ServerConnection,
)
from mrtr_sansio.adapters import HandlerResult, RequestContext
from mrtr_sansio.protocol import (
    CLIENT_CAPABILITIES,
    CLIENT_INFO,
    LATEST_MODERN_VERSION,
    LOG_LEVEL,
    PROTOCOL_VERSION_KEY,
    LegacySession,
)
from mrtr_sansio.tasks import Task, TaskStatus
from mrtr_sansio.tasks._bounds import sized
from mrtr_sansio.testing import InProcessServer, Server, in_process_server, prompt, resource, tool

# --- schema validation of what our connections send ----------------------------------------

_HERE = Path(__file__).resolve().parent

MODERN = "2026-07-28"
LEGACY = "2025-11-25"

SCHEMA_SKIP_REASON = (
    "official MCP schemas not found in MRTR_SPEC_DIR (unset it to use tests/spec, or name a folder "
    "holding schema/2026-07-28/schema.json); wire messages are not schema-validated"
)

_ERROR_DEFS = {
    -32700: "ParseError",
    -32600: "InvalidRequestError",
    -32601: "MethodNotFoundError",
    -32602: "InvalidParamsError",
    -32603: "InternalError",
    -32020: "HeaderMismatchError",
    -32021: "MissingRequiredClientCapabilityError",
    -32022: "UnsupportedProtocolVersionError",
}
_RESULT_DEFS = {
    "tools/call": "CallToolResult",
    "tools/list": "ListToolsResult",
    "prompts/get": "GetPromptResult",
    "prompts/list": "ListPromptsResult",
    "resources/read": "ReadResourceResult",
    "resources/list": "ListResourcesResult",
    "resources/templates/list": "ListResourceTemplatesResult",
    "server/discover": "DiscoverResult",
    "completion/complete": "CompleteResult",
    "initialize": "InitializeResult",
    "elicitation/create": "ElicitResult",
    "sampling/createMessage": "CreateMessageResult",
    "roots/list": "ListRootsResult",
}


#: The vendored copy of the official schemas and examples (see its README).
VENDORED_SPEC = _HERE / "spec"


def spec_dir() -> Path | None:
    """The folder holding ``schema/<version>/schema.json``, ``examples/`` and
    ``ext-tasks/schema.json``: ``MRTR_SPEC_DIR`` when set, else the vendored ``tests/spec``;
    None when that folder lacks the schemas."""
    named = os.environ.get("MRTR_SPEC_DIR")
    path = Path(named) if named else VENDORED_SPEC
    if (path / "schema" / "2026-07-28" / "schema.json").is_file():
        return path
    return None


@cache
def _schema(version: str) -> dict[str, Any]:
    folder = spec_dir()
    assert folder is not None
    text = (folder / "schema" / version / "schema.json").read_text(encoding="utf-8")
    return json.loads(text)  # type: ignore[no-any-return]


def _definition(version: str, name: str) -> dict[str, Any]:
    if spec_dir() is None:
        return {}
    return _schema(version)["$defs"].get(name, {})  # type: ignore[no-any-return]


@cache
def _validator(version: str, definition: str) -> Any:
    from jsonschema import Draft202012Validator

    full = _schema(version)
    if definition not in full["$defs"]:
        return None
    schema = {**full, "$ref": f"#/$defs/{definition}"}
    return Draft202012Validator(schema)


def check(version: str, definition: str, instance: Any) -> None:
    """Assert ``instance`` is a valid ``definition`` of schema ``version`` (no-op if absent)."""
    if spec_dir() is None:
        return
    validator = _validator(version, definition)
    if validator is None:
        return
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.path))
    if errors:
        details = "; ".join(f"{list(e.path)}: {e.message[:300]}" for e in errors[:5])
        raise AssertionError(f"not a valid {version} {definition}: {details}\n{instance!r}")


def check_message(
    message: Mapping[str, Any],
    era: Era,
    *,
    sender: str = "server",
    method: str | None = None,
) -> None:
    """Validate one message we sent; ``method`` (of the request answered) refines results."""
    version = MODERN if era is Era.MODERN else LEGACY
    msg = dict(message)
    if "method" in msg:
        if "id" in msg:
            union = "ClientRequest" if sender == "client" else "ServerRequest"
            if version == MODERN and sender == "server":
                raise AssertionError(f"a modern server must never send a request: {msg!r}")
            check(version, union, msg)
            check(version, "JSONRPCRequest", msg)
        else:
            union = "ClientNotification" if sender == "client" else "ServerNotification"
            check(version, union, msg)
            check(version, "JSONRPCNotification", msg)
        return
    if "error" in msg:
        check(version, "JSONRPCErrorResponse", msg)
        specific = _ERROR_DEFS.get(msg["error"].get("code"))
        if specific is not None and version == MODERN:
            # The MCP codes' definitions describe the whole response; the JSON-RPC ones (e.g.
            # ParseError) describe only its ``error`` member.
            whole = "jsonrpc" in _definition(version, specific).get("properties", {})
            check(version, specific, msg if whole else msg["error"])
        return
    check(version, "JSONRPCResultResponse", msg)
    result = msg["result"]
    if version == MODERN and sender == "server":
        assert "resultType" in result, f"modern result without resultType: {msg!r}"
        if result["resultType"] == "input_required":
            check(version, "InputRequiredResult", result)
            return
    if version == LEGACY and sender == "server":
        assert "resultType" not in result, f"legacy result with resultType: {msg!r}"
    if method is not None and method in _RESULT_DEFS:
        check(version, _RESULT_DEFS[method], result)


def drain(
    conn: ServerConnection | ClientConnection,
    era: Era,
    *,
    sender: str | None = None,
    methods: Mapping[Any, str] | None = None,
) -> list[Outgoing]:
    """Take everything ``conn`` wants to send, validating each message against the schema.

    ``sender`` defaults to the connection's role; ``methods`` maps request ids to the method
    they asked for, so that results are checked against the matching result definition.
    """
    if sender is None:
        sender = "client" if isinstance(conn, ClientConnection) else "server"
    items: list[Outgoing] = conn.outgoing()
    for item in items:
        assert json.loads(item.data) == item.message, "serialized bytes differ from message"
        method = None
        if methods is not None and "method" not in item.message:
            method = methods.get(item.message.get("id"))
        check_message(item.message, era, sender=sender, method=method)
    return items


# --- the tasks extension's messages, against both schemas -----------------------------------

#: The extension's own schema (``ext-tasks/schema.json`` beside ``schema/`` in the spec folder).
_TASK_RESULT_DEFS = {
    "tasks/get": "GetTaskResult",
    "tasks/update": "UpdateTaskResult",
    "tasks/cancel": "CancelTaskResult",
}
_TASK_REQUEST_DEFS = {
    "tasks/get": "GetTaskRequest",
    "tasks/update": "UpdateTaskRequest",
    "tasks/cancel": "CancelTaskRequest",
}


@cache
def _task_validator(definition: str) -> Any:
    from jsonschema import Draft202012Validator

    folder = spec_dir()
    assert folder is not None
    full = json.loads((folder / "ext-tasks" / "schema.json").read_text(encoding="utf-8"))
    assert definition in full["$defs"], f"the tasks schema has no {definition}"
    return Draft202012Validator({**full, "$ref": f"#/$defs/{definition}"})


def check_task(definition: str, instance: Any) -> None:
    """Assert ``instance`` is a valid ``definition`` of the tasks extension's schema (no-op
    when the spec folder is absent)."""
    if spec_dir() is None:
        return
    errors = sorted(_task_validator(definition).iter_errors(instance), key=lambda e: list(e.path))
    if errors:
        details = "; ".join(f"{list(e.path)}: {e.message[:300]}" for e in errors[:5])
        raise AssertionError(f"not a valid tasks {definition}: {details}\n{instance!r}")


def _check_detailed(detail: Mapping[str, Any]) -> None:
    """What the extension schema leaves open in a ``DetailedTask``, checked against the
    2026-07-28 schema: the inlined result is the original request's (``CallToolResult``, so
    ``resultType`` included) and the error a JSON-RPC ``Error``."""
    if detail.get("status") == "completed":
        check(MODERN, "CallToolResult", detail["result"])
        assert "resultType" in detail["result"], f"inlined result without resultType: {detail!r}"
        assert detail["result"]["resultType"] not in ("task", "input_required"), detail
    elif detail.get("status") == "failed":
        check(MODERN, "Error", detail["error"])
    if detail.get("status") == "input_required":
        check(MODERN, "InputRequests", detail["inputRequests"])


def check_task_message(
    message: Mapping[str, Any], *, method: str | None = None, sender: str = "server"
) -> None:
    """Validate one message of a task exchange against the 2026-07-28 schema and the tasks
    extension's schema. ``method`` is that of the request a response answers: ``tools/call``
    (a ``CreateTaskResult`` or a ``CallToolResult``) or a ``tasks/*`` method."""
    msg = dict(message)
    if "method" in msg and "id" in msg:
        check(MODERN, "JSONRPCRequest", msg)
        if msg["method"] in _TASK_REQUEST_DEFS:
            check_task(_TASK_REQUEST_DEFS[msg["method"]], msg)
        else:
            check_message(msg, Era.MODERN, sender=sender)
        return
    if "method" in msg:
        if msg["method"] == "notifications/tasks":
            check(MODERN, "JSONRPCNotification", msg)
            check_task("TaskStatusNotification", msg)
            _check_detailed(msg["params"])
        else:
            check_message(msg, Era.MODERN, sender=sender)
        return
    if "error" in msg or sender != "server":
        check_message(msg, Era.MODERN, sender=sender)
        return
    check(MODERN, "JSONRPCResultResponse", msg)
    result = msg["result"]
    check(MODERN, "Result", result)
    if method in _TASK_RESULT_DEFS:
        check_task(_TASK_RESULT_DEFS[method], result)
        if method == "tasks/get":
            _check_detailed(result)
    elif result.get("resultType") == "task":
        assert method in (None, "tools/call"), f"CreateTaskResult on {method}: {msg!r}"
        check_task("CreateTaskResult", result)
        assert not {"result", "error", "inputRequests", "requestState"} & set(result), result
    else:
        check_message(msg, Era.MODERN, sender=sender, method=method)


# --- identities, capabilities, embedded requests and their answers -------------------------

#: Every capability an embedded request can need (what our test client declares).
CAPS: dict[str, Any] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {"tools": {}, "context": {}},
    "roots": {},
}
#: What the scripted legacy client declares at ``initialize`` (roots with list changes).
LEGACY_CAPS: dict[str, Any] = {**CAPS, "roots": {"listChanged": True}}
CLIENT = {"name": "test-client", "version": "1.0.0"}
SERVER = {"name": "test-server", "version": "2.0.0"}

FORM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
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


# --- message builders ----------------------------------------------------------------------

_UNSET: Any = object()


def meta(
    caps: Mapping[str, Any] | None = None,
    *,
    version: Any = LATEST_MODERN_VERSION,
    info: Any = _UNSET,
    log_level: Any = None,
    **extra: Any,
) -> dict[str, Any]:
    """A modern ``_meta`` envelope: ``caps`` (all of :data:`CAPS` unless given), ``info``
    (:data:`CLIENT` unless given; None leaves it out)."""
    out: dict[str, Any] = {
        PROTOCOL_VERSION_KEY: version,
        CLIENT_CAPABILITIES: dict(CAPS if caps is None else caps),
    }
    if info is _UNSET:
        out[CLIENT_INFO] = CLIENT
    elif info is not None:
        out[CLIENT_INFO] = info
    if log_level is not None:
        out[LOG_LEVEL] = log_level
    out.update(extra)
    return out


#: The envelope of a client that declares form elicitation only, and no ``clientInfo``.
FORM_ONLY = meta({"elicitation": {"form": {}}}, info=None)

#: The error a server answers a ``requestState`` it cannot trust with.
INVALID_STATE_ERROR: dict[str, Any] = {
    "code": -32602,
    "message": "Invalid or expired requestState",
    "data": {"reason": "invalid_request_state"},
}


def request(
    rid: Any,
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    envelope: Mapping[str, Any] | None = None,
    caps: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A modern request: ``params`` plus the envelope (``meta(caps)`` unless given)."""
    body = dict(params or {})
    body["_meta"] = dict(envelope) if envelope is not None else meta(caps)
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": body}


def legacy_request(
    rid: Any, method: str, params: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A request without the modern envelope."""
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = dict(params)
    return msg


def notification(method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A notification (no id)."""
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = dict(params)
    return msg


def call(
    rid: Any,
    name: str = "book",
    arguments: Any = None,
    *,
    caps: Mapping[str, Any] | None = None,
    envelope: Mapping[str, Any] | None = None,
    **params: Any,
) -> dict[str, Any]:
    """A modern ``tools/call`` of ``name`` with ``arguments`` (``{"x": 1}`` unless given) and
    any other ``params`` (``inputResponses``, ``requestState``, ...); ``caps`` and ``envelope``
    go to :func:`request`. The one builder of a call: a test file that calls one tool or sends
    one envelope binds them once with :func:`functools.partial`."""
    if arguments is None:
        arguments = {"x": 1}
    elif isinstance(arguments, Mapping):
        arguments = dict(arguments)
    return request(
        rid,
        "tools/call",
        {"name": name, "arguments": arguments, **params},
        envelope=envelope,
        caps=caps,
    )


def error(code: int, message: str, rid: Any = None, data: Any = None) -> dict[str, Any]:
    """An exact error response (without an id when ``rid`` is None)."""
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    if rid is None:
        return {"jsonrpc": "2.0", "error": err}
    return {"jsonrpc": "2.0", "id": rid, "error": err}


def input_required(requests: Mapping[str, Any] | None = None, state: Any = None) -> dict[str, Any]:
    """An ``input_required`` result as a server puts it on the wire."""
    out: dict[str, Any] = {"resultType": "input_required"}
    if requests is not None:
        out["inputRequests"] = dict(requests)
    if state is not None:
        out["requestState"] = state
    return out


def tid(n: int) -> str:
    """The ``n``-th task id, in the form the server issues (32 hex digits)."""
    return f"{n:032x}"


def task_record(
    n: int,
    params: Any = None,
    *,
    state: Any = None,
    owner: str | None = "alice",
    created: float = 0.0,
    ttl_ms: int | None = None,
) -> Task:
    """A working task record ``tid(n)`` as a store holds it (sized), with ``params`` (a
    ``work`` call numbered ``n`` unless given) and ``state``."""
    return sized(
        Task(
            task_id=tid(n),
            owner=owner,
            status=TaskStatus.WORKING,
            created_at=created,
            updated_at=created,
            ttl_ms=ttl_ms,
            poll_interval_ms=None,
            params={"name": "work", "arguments": {"n": n}} if params is None else params,
            state=state,
        )
    )


def require_peer(present: bool, missing: str) -> None:
    """Skip the calling test module when an interop peer is not installed (``missing`` says
    how to install it), or fail under ``MRTR_INTEROP_REQUIRED=1`` (CI)."""
    if present:
        return
    if os.environ.get("MRTR_INTEROP_REQUIRED") == "1":
        raise RuntimeError(missing)
    pytest.skip(missing, allow_module_level=True)


def line(message: Any) -> bytes:
    """One NDJSON line."""
    return json.dumps(message).encode() + b"\n"


# --- driving one connection ----------------------------------------------------------------


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def client(era: str = "modern", **kwargs: Any) -> ClientConnection:
    """Our client with the test identity, every capability and a hand clock."""
    kwargs.setdefault("client_info", CLIENT)
    kwargs.setdefault("capabilities", CAPS)
    kwargs.setdefault("clock", Clock())
    return ClientConnection(ClientConfig(era=era, **kwargs))


def server(**config: Any) -> ServerConnection:
    """A server connection with a fixed identity and deterministic ids and clock."""
    config.setdefault("server_info", SERVER)
    config.setdefault("capabilities", {"tools": {}, "prompts": {}, "resources": {}})
    config.setdefault("token_hex", lambda n: "e" * (2 * n))
    config.setdefault("clock", lambda: 1000.0)
    server_requests = config.pop("server_requests", True)
    return ServerConnection(ServerConfig(**config), server_requests=server_requests)


def feed(conn: ServerConnection, *messages: Any) -> None:
    """Send messages to a server as one stream chunk."""
    conn.receive_data(b"".join(line(msg) for msg in messages))


def events(conn: ServerConnection | ClientConnection) -> list[Event]:
    """Every event the connection has ready."""
    return list(conn.events())


def sent(
    conn: ServerConnection | ClientConnection,
    era: Era = Era.MODERN,
    *,
    methods: Mapping[Any, str] | None = None,
) -> list[dict[str, Any]]:
    """The messages the connection wants to write, schema-checked as its role's."""
    return [dict(item.message) for item in drain(conn, era, methods=methods)]


def only(items: list[Any]) -> Any:
    """The single element of ``items``."""
    assert len(items) == 1, items
    return items[0]


def one(conn: ServerConnection | ClientConnection, era: Era = Era.MODERN) -> dict[str, Any]:
    """The single message the connection wants to write."""
    return only(sent(conn, era))  # type: ignore[no-any-return]


def reply(conn: ClientConnection, rid: Any, value: Any) -> None:
    """A server's result for the client's request ``rid``."""
    conn.receive_message({"jsonrpc": "2.0", "id": rid, "result": value})


def reply_error(
    conn: ClientConnection, rid: Any, code: int, message: str, data: Any = None
) -> None:
    """A server's error for the client's request ``rid``."""
    conn.receive_message(error(code, message, rid, data))


def legacy_ready(conn: ClientConnection, caps: Mapping[str, Any] | None = None) -> None:
    """Answer the client's ``initialize`` and drop the handshake messages and events."""
    init = one(conn, Era.LEGACY)
    assert init["method"] == "initialize"
    reply(
        conn,
        init["id"],
        {
            "protocolVersion": LEGACY,
            "capabilities": dict(caps or {"tools": {}}),
            "serverInfo": {"name": "srv", "version": "1"},
        },
    )
    conn.events()
    conn.outgoing()


def _by_value(_inst: Any, _field: Any, value: Any) -> Any:
    if isinstance(value, LegacySession):
        return ("LegacySession", *(getattr(value, name) for name in LegacySession.__slots__))
    return value


def normalize(event: Any) -> tuple[str, Any]:
    """A comparable form of an event (``RequestReceived`` and ``LegacySession`` compare by
    identity)."""
    if attrs.has(type(event)):
        return type(event).__name__, attrs.asdict(event, value_serializer=_by_value)
    return type(event).__name__, None


def out_items(items: list[Outgoing]) -> list[tuple[str, bytes, Any]]:
    """The kind, bytes and related request of each outgoing item."""
    return [(type(i).__name__, i.data, i.related_request_id) for i in items]


# --- the server application and the pair ---------------------------------------------------

Answer = Mapping[str, Any] | InputRequiredResult | JsonRpcError | None
#: Answers one request; None leaves it unanswered (the test answers it later, or never).
Handler = Callable[[RequestReceived], Answer]


class App:
    """The server application: runs ``handler`` for every request the connection delivers and
    answers with what it returns."""

    def __init__(self, conn: ServerConnection, handler: Handler) -> None:
        self.conn = conn
        self.handler = handler
        #: Every event, in order.
        self.events: list[Event] = []
        #: Every RequestReceived the handler saw, in order.
        self.seen: list[RequestReceived] = []
        #: Every other event, in order.
        self.other: list[Event] = []

    def run(self) -> list[Event]:
        """Process pending events; returns the non-request events seen in this call."""
        fresh: list[Event] = []
        while ready := self.conn.events():  # answers may queue more (shim replays)
            self.events.extend(ready)
            for event in ready:
                if isinstance(event, RequestReceived):
                    self.seen.append(event)
                    answer = self.handler(event)
                    if answer is not None:
                        self.conn.respond(event.request_id, answer)
                else:
                    fresh.append(event)
        self.other.extend(fresh)
        return fresh


class Pair:
    """Our client and our server in memory: bytes through ``outgoing``/``receive_data``.

    The client is ``client_config``, or the test client of ``era`` (``"modern"``, ``"legacy"``
    or ``"auto"``) declaring every capability. ``handler`` answers every request the server
    application sees. Client messages are
    schema-checked as the client's, server messages as the server's. The server's state is
    unsealed unless ``server_config`` says otherwise, so tests can read it on the wire.
    ``wire`` keeps every message with its side (``"c"`` or ``"s"``).
    """

    def __init__(
        self,
        handler: Handler,
        client_config: ClientConfig | None = None,
        server_config: ServerConfig | None = None,
        *,
        era: str = "modern",
    ) -> None:
        self.client = ClientConnection(
            client_config or ClientConfig(client_info=CLIENT, capabilities=CAPS, era=era)
        )
        self.server = ServerConnection(
            server_config
            or ServerConfig(server_info={"name": "srv", "version": "1"}, request_state=UNSEALED)
        )
        self.app = App(self.server, handler)
        self.wire: list[tuple[str, dict[str, Any]]] = []
        self.methods: dict[Any, str] = {}  # client request id -> method, to check results
        #: Every event the client gave, in order (``run`` also returns those of its call).
        self.client_events: list[Event] = []

    @property
    def server_events(self) -> list[Event]:
        """Every event the server application saw, in order."""
        return self.app.events

    def _era(self) -> Era:
        return self.client.era or Era.MODERN

    def to_server(self) -> bool:
        """Move what the client wrote to the server; True if anything moved."""
        items = drain(self.client, self._era())
        for item in items:
            msg = dict(item.message)
            self.wire.append(("c", msg))
            if "method" in msg and "id" in msg:
                self.methods[msg["id"]] = msg["method"]
            self.server.receive_data(item.data + b"\n")
        return bool(items)

    def serve(self) -> bool:
        """Run the handler on what the server received; True if there was any event."""
        before = len(self.app.events)
        self.app.run()
        return len(self.app.events) > before

    def to_client(self) -> bool:
        """Move what the server wrote to the client; True if anything moved."""
        items = drain(self.server, self._era(), methods=self.methods)
        for item in items:
            self.wire.append(("s", dict(item.message)))
            self.client.receive_data(item.data + b"\n")
        return bool(items)

    def run(
        self, answer: Callable[[Event], None] | None = None, *, limit: int = 1000
    ) -> list[Event]:
        """Move messages until nothing moves; return the client's events (answering each
        with ``answer`` as it comes). At most ``limit`` turns."""
        seen: list[Event] = []
        for _ in range(limit):
            moved = self.to_server() | self.serve() | self.to_client()
            new = self.client.events()
            self.client_events.extend(new)
            for event in new:
                seen.append(event)
                if answer is not None:
                    answer(event)
            if not moved and not new:
                return seen
        raise AssertionError(f"the pair did not go quiet in {limit} turns")


# --- a scripted 2025-11-25 client ------------------------------------------------------------


class ScriptedClient:
    """A pre-2026 client, scripted message by message, writing NDJSON lines to a real server
    and reading back what it wrote, validated against the 2025-11-25 schema."""

    def __init__(self, conn: ServerConnection) -> None:
        self.conn = conn
        self._next_id = 1
        #: Ids of our requests -> method, so drain() checks results against the right schema.
        self.methods: dict[Any, str] = {}

    def send(self, msg: Mapping[str, Any]) -> None:
        """Write one message as an NDJSON line."""
        self.conn.receive_data(line(msg))

    def request(
        self, method: str, params: Mapping[str, Any] | None = None, request_id: Any = None
    ) -> Any:
        """Send a request; returns its id."""
        if request_id is None:
            request_id = self._next_id
            self._next_id += 1
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            msg["params"] = params  # as given: some tests send params that are not objects
        self.methods[request_id] = method
        self.send(msg)
        return request_id

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send a notification."""
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def answer(self, request_id: Any, result: Mapping[str, Any]) -> None:
        """Answer a server request."""
        self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def answer_error(self, request_id: Any, code: int, message: str, data: Any = None) -> None:
        """Answer a server request with an error."""
        self.send(error(code, message, request_id, data))

    def cancel(self, request_id: Any, reason: str | None = None) -> None:
        """Cancel one of our requests."""
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
                "capabilities": dict(LEGACY_CAPS if capabilities is None else capabilities),
                "clientInfo": CLIENT,
            },
        )
        (answer,) = self.take()
        assert answer["id"] == rid
        if initialized:
            self.notify("notifications/initialized")
        return answer

    def take_items(self) -> list[Outgoing]:
        """Everything the server wrote since the last call, schema-validated."""
        return drain(self.conn, Era.LEGACY, methods=self.methods)

    def take(self) -> list[dict[str, Any]]:
        """The messages the server wrote since the last call, schema-validated."""
        return [dict(item.message) for item in self.take_items()]


def session(
    handler: Handler,
    capabilities: Mapping[str, Any] | None = None,
    **config: Any,
) -> tuple[ServerConnection, ScriptedClient, App]:
    """An initialized legacy session: the connection, the scripted client and the app."""
    conn = server(**config)
    peer = ScriptedClient(conn)
    peer.initialize(capabilities)
    app = App(conn, handler)
    app.run()
    app.events.clear()
    app.other.clear()
    assert peer.take() == []
    return conn, peer, app


# --- servers for the tests of mrtr_sansio.testing: one correct, five with a seeded bug ------
#
# The correct server is written the way a user of this package would write it: one handler in
# the adapters' signature, reading answers with the typed readers of ``InputResponses``, with
# ``requestState`` sealed by ``RequestStateSecurity``.

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
DATE_SCHEMA = {
    "type": "object",
    "properties": {"date": {"type": "string", "format": "date"}},
    "required": ["date"],
}
CONFIRM_SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
}
MODEL_TOOLS = ["greet", "book", "capital", "roots", "multi", "login", "echo", "pause"]
MODEL_KEYS = [b"model-tests-key-0123456789abcdef"]

MODEL_OPERATIONS = (
    tool("greet", mrtr=True),
    tool("book", mrtr=True),
    tool("capital", mrtr=True),
    tool("roots", mrtr=True),
    tool("multi", mrtr=True),
    tool("login", mrtr=True),
    tool("pause", mrtr=True),
    tool("echo", {"text": "hi"}, mrtr=False),
    prompt("intro", mrtr=True),
    resource("file:///secret.txt", mrtr=True),
)


def _text(text: str, *, is_error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


def _declined(request: m.RequestReceived, key: str) -> bool:
    return request.input_responses.elicitation_action(key) in ("decline", "cancel")


async def model_handler(request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
    """Every tool, prompt and resource of the model tests."""
    method = request.method
    ctx.progress(0, 1)  # sent only when the request carries a progress token
    if method == "tools/list":
        return {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in MODEL_TOOLS]}
    if method == "prompts/list":
        return {"prompts": [{"name": "intro"}]}
    if method == "resources/list":
        return {"resources": [{"uri": "file:///secret.txt", "name": "secret"}]}
    if method == "tools/call":
        return _tool(request)
    if method == "prompts/get":
        return _prompt(request)
    if method == "resources/read":
        return _resource(request)
    return request.method_not_found()


def _tool(request: m.RequestReceived) -> HandlerResult:
    answers = request.input_responses
    name = request.name
    if name == "echo":
        return _text(json.dumps(dict(request.arguments), sort_keys=True))
    if name == "greet":
        if _declined(request, "user_name"):
            return _text("No name given.", is_error=True)
        content = answers.accepted_content("user_name")
        if content is None or not isinstance(content.get("name"), str):
            return m.InputRequiredResult(
                {"user_name": m.elicit_form("What is your name?", NAME_SCHEMA)}
            )
        return _text(f"Hello, {content['name']}!")
    if name == "book":
        return _book(request)
    if name == "capital":
        text = answers.sampled_text("capital")
        if text is None:
            return m.InputRequiredResult(
                {"capital": m.sample("What is the capital of France?", 100)}
            )
        return _text(f"The model says: {text}")
    if name == "roots":
        uris = answers.root_uris("client_roots")
        if uris is None:
            return m.InputRequiredResult({"client_roots": m.list_roots()})
        return _text(f"{len(uris)} roots")
    if name == "multi":
        content = answers.accepted_content("who")
        text = answers.sampled_text("think")
        uris = answers.root_uris("where")
        if content is None or text is None or uris is None:
            if _declined(request, "who"):
                return _text("Declined.", is_error=True)
            return m.InputRequiredResult(
                {
                    "who": m.elicit_form("Name?", NAME_SCHEMA),
                    "think": m.sample("Think of a number", 10),
                    "where": m.list_roots(),
                },
                request_state={"step": "multi"},
            )
        return _text(f"{content.get('name')} / {text} / {len(uris)}")
    if name == "login":
        action = answers.elicitation_action("login")
        if action is None:
            return m.InputRequiredResult(
                {"login": m.elicit_url("Sign in", "https://example.com/login")},
                request_state={"step": "login"},
            )
        return _text(f"login: {action}", is_error=action != "accept")
    if name == "pause":
        # Load shedding: state only, no input requests, then done.
        if request.request_state is None:
            return m.InputRequiredResult(request_state={"step": "paused"})
        return _text("resumed")
    return request.unknown()


def _book(request: m.RequestReceived) -> HandlerResult:
    """Two rounds: a date, then a confirmation; the state carries the date."""
    answers = request.input_responses
    state = request.request_state if isinstance(request.request_state, dict) else {}
    if state.get("step") == "confirm":
        if _declined(request, "confirm"):
            return _text("Booking cancelled.", is_error=True)
        content = answers.accepted_content("confirm")
        if content is None or not isinstance(content.get("ok"), bool):
            return m.InputRequiredResult(
                {"confirm": m.elicit_form(f"Book {state['date']}?", CONFIRM_SCHEMA)}, state
            )
        return _text(f"Booked {state['date']}: {content['ok']}")
    if _declined(request, "date"):
        return _text("No date given.", is_error=True)
    content = answers.accepted_content("date")
    if content is None or not isinstance(content.get("date"), str):
        return m.InputRequiredResult(
            {"date": m.elicit_form("Which date?", DATE_SCHEMA)}, {"step": "date"}
        )
    date = content["date"]
    return m.InputRequiredResult(
        {"confirm": m.elicit_form(f"Book {date}?", CONFIRM_SCHEMA)},
        {"step": "confirm", "date": date},
    )


def _prompt(request: m.RequestReceived) -> HandlerResult:
    if request.name != "intro":
        return request.unknown()
    if _declined(request, "user_context"):
        return {"messages": [{"role": "user", "content": {"type": "text", "text": "Hi."}}]}
    content = request.input_responses.accepted_content("user_context")
    if content is None or not isinstance(content.get("context"), str):
        schema = {"type": "object", "properties": {"context": {"type": "string"}}}
        schema["required"] = ["context"]
        return m.InputRequiredResult({"user_context": m.elicit_form("Some context?", schema)})
    text = f"Context: {content['context']}"
    return {"messages": [{"role": "user", "content": {"type": "text", "text": text}}]}


def _resource(request: m.RequestReceived) -> HandlerResult:
    uri = request.uri
    if uri != "file:///secret.txt":
        return request.unknown()
    if _declined(request, "confirm"):
        return m.JsonRpcError.invalid_params("Access declined", {"uri": uri})
    content = request.input_responses.accepted_content("confirm")
    if content is None or not isinstance(content.get("ok"), bool):
        return m.InputRequiredResult(
            {"confirm": m.elicit_form("Reveal the secret?", CONFIRM_SCHEMA)},
            request_state={"step": "reveal"},
        )
    text = "s3cret" if content["ok"] else "(not revealed)"
    return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": text}]}


def model_config(*, sealed: bool = True, single_use: bool = False) -> m.ServerConfig:
    """The model server's config: sealed state unless ``sealed`` is False (single use if
    asked)."""
    guard = m.sealing.MemoryReplayGuard() if single_use else None
    security = (
        m.sealing.RequestStateSecurity(MODEL_KEYS, replay_guard=guard) if sealed else m.UNSEALED
    )
    return m.ServerConfig(
        server_info={"name": "model-test-server", "version": "1.0"}, request_state=security
    )


def correct_server() -> InProcessServer:
    """The correct server, in process."""
    return in_process_server(model_handler, model_config(), principal="alice")


def _wrap(change: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any] | None]) -> Server:
    """The correct server with its responses passed through ``change(request, response)``."""
    inner = correct_server()

    def wrapped(request: dict[str, Any]) -> Mapping[str, Any] | None:
        response = inner(request)
        if response is None:
            return None
        return change(request, response)

    return wrapped


def no_result_type() -> Server:
    """Bug: results carry no ``resultType``."""

    def strip(_request: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
        if "result" in response:
            response["result"].pop("resultType", None)
        return response

    return _wrap(strip)


def input_required_on_list() -> Server:
    """Bug: ``tools/list`` answers ``input_required``."""

    def ask(request: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
        if request["method"] == "tools/list":
            response = {
                "jsonrpc": "2.0",
                "id": request["id"],
                "result": {"resultType": "input_required", "requestState": "list-state"},
            }
        return response

    return _wrap(ask)


async def plain_state_handler(request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
    """The handler with its state as plain JSON text, trusting whatever comes back: a state
    that does not parse is taken as none (the seeded bug)."""
    raw = request.request_state
    try:
        state = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        state = None
    result = await model_handler(attrs.evolve(request, request_state=state), ctx)
    if isinstance(result, m.InputRequiredResult) and result.request_state is not None:
        result = m.InputRequiredResult(result.input_requests, json.dumps(result.request_state))
    return result


def accepts_tampered_state() -> Server:
    """Bug: state travels as plain JSON and is never verified."""
    return in_process_server(plain_state_handler, model_config(sealed=False), principal="alice")


def undeclared_elicitation() -> Server:
    """Bug: asks for a form elicitation even when the client did not declare it (the core
    would answer -32021, so this server swaps that error for the request it wanted)."""

    def ask(request: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
        err = response.get("error")
        if err is not None and err["code"] == m.ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY:
            elicit = m.elicit_form("Your name?", NAME_SCHEMA).to_wire()
            return {
                "jsonrpc": "2.0",
                "id": request["id"],
                "result": {"resultType": "input_required", "inputRequests": {"who": elicit}},
            }
        return response

    return _wrap(ask)


def errors_on_missing_answer() -> Server:
    """Bug: a retry lacking an answer the handler asks for again gets -32602 instead of a new
    ``input_required``. (The keys of the last round ride in the state to spot re-asks.)"""

    async def strict(request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        wrapped = request.request_state
        asked: list[str] = wrapped["asked"] if isinstance(wrapped, dict) else []
        inner = attrs.evolve(
            request, request_state=wrapped["inner"] if isinstance(wrapped, dict) else None
        )
        result = await model_handler(inner, ctx)
        if not isinstance(result, m.InputRequiredResult):
            return result
        keys = sorted(result.input_requests or {})
        if asked and keys == asked and any(k not in request.input_responses for k in asked):
            return m.JsonRpcError.invalid_params("Missing input response")
        return m.InputRequiredResult(
            result.input_requests, {"inner": result.request_state, "asked": keys}
        )

    return in_process_server(strict, model_config(), principal="alice")
