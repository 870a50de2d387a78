"""Properties (hypothesis): MRTR value round trips, capability algebra, chunking invariance,
and that no input, however malformed, makes a connection raise or emit an invalid message."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import (
    check_message,
    normalize,
)
from mrtr_sansio import (
    UNSEALED,
    Era,
    InputRequest,
    InputRequiredResult,
    InputResponses,
    Limits,
    RequestReceived,
    ServerConfig,
    ServerConnection,
)
from mrtr_sansio.config import JsonCodec, OrjsonCodec, StdlibJsonCodec
from mrtr_sansio.http import decode_header_value, encode_header_value
from mrtr_sansio.protocol import (
    CLIENT_CAPABILITIES,
    CLIENT_INFO,
    LOG_LEVEL,
    MRTR_METHODS,
    PROTOCOL_VERSION_KEY,
    merge_capabilities,
    missing_capabilities,
    required_capabilities,
)

PROPERTY = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- strategies -------------------------------------------------------------------------------

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-1000, 1000),
    INT64,
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
json_values = st.recursive(
    leaf,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(max_size=6), json_values, max_size=4)
keys = st.text(min_size=1, max_size=8)

messages_ = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant"]), "content": json_objects}
    ),
    max_size=2,
)
input_requests = st.one_of(
    st.builds(
        lambda extra, mode: InputRequest(
            "elicitation/create",
            {k: v for k, v in extra.items() if k != "mode"}
            | {"message": "m", "requestedSchema": {"type": "object", "properties": {}}}
            | ({} if mode is None else {"mode": mode}),
        ),
        json_objects,
        st.sampled_from([None, "form"]),
    ),
    st.builds(
        lambda extra: InputRequest(
            "elicitation/create", {**extra, "mode": "url", "message": "m", "url": "https://x"}
        ),
        json_objects,
    ),
    st.builds(
        lambda extra, msgs, tools, choice, context: InputRequest(
            "sampling/createMessage",
            {**extra, "messages": msgs, "maxTokens": 10}
            | ({} if tools is None else {"tools": tools})
            | ({} if choice is None else {"toolChoice": choice})
            | ({} if context is None else {"includeContext": context}),
        ),
        json_objects,
        messages_,
        st.none() | st.lists(json_objects, max_size=2),
        st.none() | json_objects,
        st.sampled_from([None, "none", "thisServer", "allServers"]),
    ),
    st.builds(lambda p: InputRequest("roots/list", p), st.none() | json_objects),
)


def _ir(requests: Any, state: Any) -> InputRequiredResult | None:
    try:
        return InputRequiredResult(requests, state)
    except ValueError:
        return None


input_required_results = st.builds(
    _ir,
    st.none() | st.dictionaries(keys, input_requests, max_size=4),
    st.none() | st.text(max_size=20),
).filter(lambda r: r is not None)

capabilities: st.SearchStrategy[dict[str, Any]] = st.dictionaries(
    st.sampled_from(["elicitation", "sampling", "roots", "experimental", "extensions"]),
    st.dictionaries(
        st.sampled_from(["form", "url", "tools", "context", "listChanged"]), st.just({})
    )
    | json_values,
    max_size=5,
)


# --- MRTR values ------------------------------------------------------------------------------


@PROPERTY
@given(input_required_results)
def test_input_required_wire_round_trip(result: InputRequiredResult) -> None:
    wire = result.to_wire()
    assert wire["resultType"] == "input_required"
    assert ("inputRequests" in wire) == (result.input_requests is not None)
    assert ("requestState" in wire) == (result.request_state is not None)
    assert InputRequiredResult.from_wire(wire) == result
    decoded = StdlibJsonCodec().loads(StdlibJsonCodec().dumps(wire))
    assert InputRequiredResult.from_wire(decoded) == result
    assert InputRequiredResult.from_wire(decoded).to_wire() == wire


@PROPERTY
@given(
    st.dictionaries(st.text(max_size=4), json_values, max_size=5) | json_values, st.text(max_size=4)
)
def test_input_responses_readers_never_raise(raw: Any, key: str) -> None:
    responses = InputResponses(raw)
    responses.get_response(key)
    responses.elicitation_action(key)
    responses.accepted_content(key)
    responses.sampled_text(key)
    responses.root_uris(key)
    assert (key in responses) == (isinstance(raw, dict) and key in raw)


# --- capabilities -----------------------------------------------------------------------------


def _paths(caps: dict[str, Any]) -> set[tuple[str, ...]]:
    out: set[tuple[str, ...]] = set()
    for name, sub in caps.items():
        out.add((name,))
        if isinstance(sub, dict):
            out.update((name, k) for k in sub)
    return out


@PROPERTY
@given(st.lists(input_requests, max_size=5), capabilities)
def test_missing_is_a_subset_of_required(
    requests: list[InputRequest], declared: dict[str, Any]
) -> None:
    required = merge_capabilities(r.required_capabilities() for r in requests)
    missing = missing_capabilities(required, declared)
    assert _paths(missing) <= _paths(required)


@PROPERTY
@given(st.lists(input_requests, max_size=5), capabilities)
def test_declaring_everything_required_leaves_nothing_missing(
    requests: list[InputRequest], extra: dict[str, Any]
) -> None:
    required = merge_capabilities(r.required_capabilities() for r in requests)
    declared: dict[str, Any] = {k: v for k, v in extra.items() if k not in required}
    for name, sub in required.items():
        have = extra.get(name)
        declared[name] = {**(have if isinstance(have, dict) else {}), **sub}
    assert missing_capabilities(required, declared) == {}


@PROPERTY
@given(st.lists(input_requests, min_size=1, max_size=5), capabilities)
def test_a_request_is_allowed_exactly_when_nothing_is_missing(
    requests: list[InputRequest], declared: dict[str, Any]
) -> None:
    """Merging never hides a requirement: the set is allowed iff each request is."""
    required = merge_capabilities(r.required_capabilities() for r in requests)
    each = all(not missing_capabilities(r.required_capabilities(), declared) for r in requests)
    assert (not missing_capabilities(required, declared)) == each


@PROPERTY
@given(st.lists(input_requests, min_size=1, max_size=5), capabilities)
def test_the_fast_capability_check_agrees_with_the_missing_set(
    requests: list[InputRequest], declared: dict[str, Any]
) -> None:
    """``InputRequiredResult.allowed_by`` (the server's hot path) is ``not missing``."""
    result = InputRequiredResult({str(i): r for i, r in enumerate(requests)})
    missing = missing_capabilities(result.required_capabilities(), declared)
    assert result.allowed_by(declared) == (not missing)


@PROPERTY
@given(capabilities, input_requests)
def test_bare_elicitation_grants_form_only(other: dict[str, Any], request: InputRequest) -> None:
    declared = {**other, "elicitation": {}}
    form = required_capabilities("elicitation/create", {"message": "m"})
    url = required_capabilities("elicitation/create", {"mode": "url"})
    assert missing_capabilities(form, declared) == {}
    assert missing_capabilities(url, declared) == {"elicitation": {"url": {}}}
    if request.method == "elicitation/create":
        mode = (request.params or {}).get("mode")
        allowed = not missing_capabilities(request.required_capabilities(), declared)
        assert allowed == (mode != "url")


# --- HTTP header values -----------------------------------------------------------------------


@PROPERTY
@given(st.text())
def test_header_values_round_trip(value: str) -> None:
    encoded = encode_header_value(value)
    assert encoded.isascii()
    assert "\n" not in encoded
    assert decode_header_value(encoded) == value


# --- connections ------------------------------------------------------------------------------


def mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``good`` nine times in ten, else ``bad``: valid enough to get past the first check."""
    # Not 0 or 9 for the rare branch: hypothesis favours the bounds of a range.
    return st.integers(0, 9).flatmap(lambda i: bad if i == 4 else good)


def maybe(
    fields: dict[str, st.SearchStrategy[Any]],
) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=fields)


bad_ids = st.one_of(
    st.none(), st.booleans(), st.floats(allow_nan=False, allow_infinity=False), st.just([1])
)
ids = mostly(st.integers(0, 3) | st.sampled_from(["a", "b"]), bad_ids)
MODERN_METHODS = ["tools/call", "prompts/get", "resources/read", "tools/list", "server/discover"]
OTHER_METHODS = ["initialize", "ping", "logging/setLevel", "completion/complete", "x/y"]
methods = mostly(st.sampled_from(MODERN_METHODS + OTHER_METHODS), json_values)
envelopes = st.builds(
    lambda base, extra: {**base, **extra},
    st.fixed_dictionaries(
        {
            PROTOCOL_VERSION_KEY: mostly(
                st.just("2026-07-28"), st.just("2025-11-25") | json_values
            ),
            CLIENT_CAPABILITIES: mostly(capabilities, json_values),
        }
    ),
    maybe(
        {
            CLIENT_INFO: mostly(st.just({"name": "c", "version": "1"}), json_values),
            LOG_LEVEL: mostly(st.sampled_from(["debug", "error"]), json_values),
            "progressToken": st.text(max_size=3),
        }
    ),
)
responses = mostly(
    st.dictionaries(
        st.sampled_from(["r", "k", "x"]),
        mostly(
            st.sampled_from(
                [{"roots": []}, {"action": "accept", "content": {"a": 1}}, {"action": "cancel"}]
            ),
            json_values,
        ),
        max_size=4,
    ),
    json_values,
)
mrtr_fields = maybe(
    {
        "inputResponses": responses,
        "requestState": mostly(st.sampled_from(["state-0", "state-a", "", "é" * 3]), json_values),
    }
)
params = st.builds(
    lambda meta, base, mrtr, extra: {"_meta": meta, **base, **mrtr, **extra},
    mostly(envelopes, json_values),
    maybe(
        {
            "name": mostly(st.sampled_from(["t", "p"]), json_values),
            "uri": st.just("file:///r"),
            "arguments": mostly(json_objects, json_values),
        }
    ),
    mrtr_fields,
    maybe({"cursor": json_values, "level": st.sampled_from(["info", "bogus"]) | json_values}),
)
init_params = st.fixed_dictionaries(
    {
        "protocolVersion": mostly(st.sampled_from(["2025-11-25", "1999-01-01"]), json_values),
        "capabilities": mostly(capabilities, json_values),
        "clientInfo": mostly(st.just({"name": "c", "version": "1"}), json_values),
    }
)
requests = st.builds(
    lambda rid, method, p: {"jsonrpc": "2.0", "id": rid, "method": method, "params": p},
    ids,
    methods,
    mostly(params, json_values),
)
legacy_requests = st.builds(
    lambda rid, method, p: {"jsonrpc": "2.0", "id": rid, "method": method, "params": p},
    ids,
    st.sampled_from(["tools/call", "prompts/get", "resources/read", "tools/list", "ping"]),
    mrtr_fields.map(lambda f: {"name": "t", "uri": "file:///r", **f}),
)
initializes = st.builds(
    lambda rid, p: {"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": p},
    ids,
    init_params,
)
notifications = st.builds(
    lambda method, p: {"jsonrpc": "2.0", "method": method, "params": p},
    st.sampled_from(["notifications/cancelled", "notifications/initialized", "x/y"]),
    maybe({"requestId": ids, "reason": json_values, "progress": json_values}),
)
client_responses = st.builds(
    lambda rid, body: {"jsonrpc": "2.0", "id": rid, **body},
    mostly(st.integers(0, 3), bad_ids),
    st.one_of(
        st.fixed_dictionaries({"result": mostly(st.just({"roots": []}), json_values)}),
        st.fixed_dictionaries({"error": json_values}),
        st.fixed_dictionaries({"result": json_values, "error": json_values}),
    ),
)
mutants = maybe(
    {
        "jsonrpc": st.just("2.0") | json_values,
        "id": ids,
        "method": methods,
        "params": json_values,
        "result": json_values,
        "error": json_values,
    }
)
messages = st.one_of(
    requests, requests, legacy_requests, initializes, notifications, client_responses, mutants
)


def _line(message: Any) -> bytes:
    return json.dumps(message).encode() + b"\n"


pieces = st.one_of(
    messages.map(_line),
    messages.map(lambda m: _line(m)[:-1] + b"\r\n"),
    st.binary(max_size=24),
    st.sampled_from([b"\n", b"\r\n", b" \n", b"{", b"[]\n", b"\xff\n", b"x" * 300]),
)


def _server(codec: JsonCodec | None = None) -> ServerConnection:
    # Unsealed: the properties compare bytes of two runs, and sealed tokens are random.
    config = ServerConfig(
        limits=Limits(max_message_bytes=256, max_in_flight=4, max_input_responses=3),
        request_state=UNSEALED,
    )
    if codec is not None:
        config = ServerConfig(limits=config.limits, codec=codec, request_state=UNSEALED)
    return ServerConnection(config)


def _answer_everything(conn: ServerConnection) -> list[tuple[str, Any]]:
    """Drain the events, answering each request the way an MRTR handler would: ask for roots
    on the first round, complete once answers arrive."""
    seen: list[tuple[str, Any]] = []
    while events := conn.events():
        for event in events:
            seen.append(normalize(event))
            if not isinstance(event, RequestReceived):
                continue
            rid = event.request_id
            if event.method in MRTR_METHODS and not event.input_responses:
                # Ask for roots when declared (and once in a while when not: -32021).
                declared = isinstance(event.client_capabilities.get("roots"), dict)
                ask = {"r": InputRequest("roots/list")} if declared or rid == 3 else None
                result: Any = InputRequiredResult(ask, f"s-{rid}")
            else:
                result = {"content": [], "echo": list(event.input_responses)}
            conn.respond(rid, result)
    return seen


def _check_outgoing(conn: ServerConnection) -> list[tuple[str, bytes, Any]]:
    out = []
    for item in conn.outgoing():
        assert json.loads(item.data) == item.message
        msg = item.message
        modern = "result" in msg and "resultType" in msg["result"]
        legacy = conn.session is not None and not modern
        check_message(msg, Era.LEGACY if legacy else Era.MODERN)
        out.append((type(item).__name__, item.data, item.related_request_id))
    return out


def _run(chunks: list[bytes]) -> tuple[list[tuple[str, Any]], list[tuple[str, bytes, Any]]]:
    conn = _server()
    for chunk in chunks:
        conn.receive_data(chunk)
    conn.receive_data(b"")
    seen = _answer_everything(conn)
    return seen, _check_outgoing(conn)


@PROPERTY
@given(st.lists(pieces, max_size=12), st.data())
def test_any_chunking_gives_the_same_events_and_bytes(
    parts: list[bytes], data: st.DataObject
) -> None:
    stream = b"".join(parts)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    chunks = [c for c in chunks if c]
    assert _run(chunks) == _run([stream] if stream else [])


@PROPERTY
@given(st.lists(st.binary(max_size=64), max_size=8))
def test_arbitrary_bytes_never_raise(chunks: list[bytes]) -> None:
    _run([c for c in chunks if c])


@PROPERTY
@given(st.lists(messages, min_size=1, max_size=8))
def test_arbitrary_messages_never_raise_and_every_reply_is_valid(batch: list[Any]) -> None:
    conn = _server()
    for message in batch:
        conn.receive_message(message)
        conn.receive_message(json.dumps(message).encode())
    _answer_everything(conn)
    _check_outgoing(conn)


@PROPERTY
@given(st.lists(messages, min_size=1, max_size=8))
def test_both_codecs_agree_on_any_message(batch: list[Any]) -> None:
    def run(codec: JsonCodec) -> tuple[list[tuple[str, Any]], list[Any]]:
        conn = _server(codec)
        for message in batch:
            conn.receive_data(_line(message))
        seen = _answer_everything(conn)
        return seen, [json.loads(item.data) for item in conn.outgoing()]

    assert run(StdlibJsonCodec()) == run(OrjsonCodec())


def test_strategies_reach_the_interesting_paths() -> None:
    """Guard against the fuzzers silently degenerating into junk that never parses."""
    conn = _server()
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "_meta": {PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES: {"roots": {}}}
        },
    }
    messages.validate()
    conn.receive_data(_line(request))
    seen = _answer_everything(conn)
    assert [name for name, _ in seen] == ["RequestReceived"]
    assert json.loads(_check_outgoing(conn)[0][1])["result"]["resultType"] == "input_required"
