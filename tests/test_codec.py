"""The JSON codecs: strictness, and identical messages from the stdlib and orjson codecs."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import (
    FORM_SCHEMA,
    SERVER,
    call,
    line,
    normalize,
    request,
)
from mrtr_sansio import (
    UNSEALED,
    InputRequiredResult,
    JsonRpcError,
    RequestReceived,
    ServerConfig,
    ServerConnection,
    elicit_form,
    sample,
)
from mrtr_sansio.config import OrjsonCodec, StdlibJsonCodec, default_codec
from mrtr_sansio.protocol import CLIENT_CAPABILITIES, LEGACY_VERSIONS, PROTOCOL_VERSION_KEY

CODECS = [StdlibJsonCodec, OrjsonCodec]


def test_default_codec_is_orjson_when_it_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(default_codec(), OrjsonCodec)  # the test extra installs it
    monkeypatch.setitem(sys.modules, "orjson", None)  # as if it were not installed
    assert isinstance(default_codec(), StdlibJsonCodec)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize(
    "text",
    [b"NaN", b"-NaN", b"Infinity", b"-Infinity", b"[1e400]", b'{"a":-1E+999}', b"{", b"", b"1 2"],
)
def test_loads_refuses_what_json_cannot_carry(codec: type[Any], text: bytes) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - each codec words it its own way
        codec().loads(text)


@pytest.mark.parametrize("codec", CODECS)
def test_loads_reads_numbers_and_text(codec: type[Any]) -> None:
    value = codec().loads('{"a":[1,-2,1.5,1e-400,1E2],"s":"é\\u00e9","t":true,"n":null}'.encode())
    assert value == {"a": [1, -2, 1.5, 0.0, 100.0], "s": "éé", "t": True, "n": None}
    assert type(value["a"][0]) is int
    assert type(value["a"][4]) is float


def test_stdlib_dumps_is_compact_ascii() -> None:
    codec = StdlibJsonCodec()
    assert codec.dumps({"a": [1, "é"], "b": None}) == b'{"a":[1,"\\u00e9"],"b":null}'
    assert codec.dumps("\ud800") == b'"\\ud800"'  # lone surrogates still serialize
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ValueError, match="JSON compliant"):
            codec.dumps([bad])


def test_orjson_dumps_is_compact_utf8() -> None:
    assert OrjsonCodec().dumps({"a": [1, "é"], "b": None}) == '{"a":[1,"é"],"b":null}'.encode()


@pytest.mark.parametrize("codec", CODECS)
def test_codecs_round_trip(codec: type[Any]) -> None:
    value = {"x": [1, 2.5, "∑", {"k": False}], "": "", "emoji": "🙂"}
    c = codec()
    assert c.loads(c.dumps(value)) == value


# --- both codecs, one exchange ------------------------------------------------------------------


def _exchange(codec: Any) -> tuple[list[Any], list[dict[str, Any]]]:
    """A modern MRTR exchange plus junk, run on a connection using ``codec``."""
    conn = ServerConnection(ServerConfig(server_info=SERVER, codec=codec, request_state=UNSEALED))
    seen: list[Any] = []
    inputs = [
        line(call(1, "book", {"city": "Zürich", "n": 2.5})),
        b"{bad json\n",
        b"\xff\xfe\n",
        b"[1]\n",
        b'{"a": NaN}\n',
        b'{"a": 1e400}\n',
        line(request("l", "tools/list", {"cursor": "c\u00e9"})),
        line(request("d", "server/discover")),
        line({"jsonrpc": "2.0", "id": 9, "result": {}}),
        line(request(2, "initialize", {})),
    ]
    for data in inputs:
        conn.receive_data(data)
    for event in conn.events():
        seen.append(normalize(event))
        if isinstance(event, RequestReceived) and event.request_id == 1:
            conn.notify("notifications/progress", {"progressToken": "é", "progress": 0.5}, 1)
            conn.respond(
                1,
                InputRequiredResult(
                    {"who": elicit_form("Nom ?", FORM_SCHEMA), "s": sample("∑", 10)},
                    "état",
                ),
            )
        elif isinstance(event, RequestReceived):
            conn.respond(event.request_id, {"tools": [], "nextCursor": "\u2028"})
    conn.receive_data(
        line(
            call(
                3,
                "book",
                {"city": "Zürich", "n": 2.5},
                inputResponses={"who": {"action": "accept", "content": {"name": "Zoë"}}},
                requestState="état",
            )
        )
    )
    for event in conn.events():
        seen.append(normalize(event))
        conn.respond(3, JsonRpcError(-32000, "non ✓", {"why": "ü"}))
    return seen, [json.loads(item.data) for item in conn.outgoing()]


def test_stdlib_and_orjson_produce_the_same_events_and_messages() -> None:
    stdlib = _exchange(StdlibJsonCodec())
    fast = _exchange(OrjsonCodec())
    assert stdlib == fast
    assert len(stdlib[1]) == 11  # the exchange really produced traffic


def test_replies_to_pre_decoded_messages_never_fail_to_encode() -> None:
    """orjson cannot write lone surrogates, which a message handed over already decoded may
    hold; error replies still go out (the unwritable id left out, echoed text made valid)."""
    conn = ServerConnection(ServerConfig(codec=OrjsonCodec()))
    conn.receive_message({"jsonrpc": "2.0", "id": "\ud800", "method": "tools/list"})
    conn.receive_message(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/list",
            "params": {"_meta": {PROTOCOL_VERSION_KEY: "v\ud800", CLIENT_CAPABILITIES: {}}},
        }
    )
    out = [json.loads(item.data) for item in conn.outgoing()]
    assert out == [
        {
            "jsonrpc": "2.0",
            "error": {
                "code": -32602,
                "message": "Not initialized: send initialize first (protocol 2025-11-25), "
                "or give every request the 2026-07-28 _meta envelope "
                "(io.modelcontextprotocol/protocolVersion, clientCapabilities)",
            },
        },
        {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {
                "code": -32022,
                "message": "Unsupported protocol version",
                "data": {
                    "supported": ["2026-07-28", *LEGACY_VERSIONS],
                    "requested": "v?",
                },
            },
        },
    ]
    invalid = conn.events()
    assert [e.request_id for e in invalid] == ["\ud800", 1]  # type: ignore[attr-defined]


# --- the stdlib codec's fast paths agree with the public json calls ------------------------------

_PUBLIC_DECODE = json.JSONDecoder(
    parse_constant=lambda name: pytest.fail(f"{name} reached the public decoder"),
).decode
_PUBLIC_ENCODE = json.JSONEncoder(separators=(",", ":"), check_circular=False, allow_nan=False)

_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
_PADDING = st.text(alphabet=" \t\n\r", max_size=3)


@given(value=_JSON, before=_PADDING, after=_PADDING)
def test_stdlib_fast_paths_match_the_public_calls(value: Any, before: str, after: str) -> None:
    codec = StdlibJsonCodec()
    data = codec.dumps(value)
    assert data == _PUBLIC_ENCODE.encode(value).encode("ascii")
    padded = (before + data.decode("ascii") + after).encode()
    assert codec.loads(padded) == _PUBLIC_DECODE(padded.decode())


@pytest.mark.parametrize(
    "text",
    [b"", b" ", b"{} {}", b"{}x", b"{}\x0c", b"\x0c{}", b"\xc2\xa0{}", b"{}\xc2\xa0", b"[1,]"],
)
def test_stdlib_loads_refuses_what_the_public_call_refuses(text: bytes) -> None:
    with pytest.raises(json.JSONDecodeError):
        _PUBLIC_DECODE(text.decode())
    with pytest.raises(json.JSONDecodeError):
        StdlibJsonCodec().loads(text)


def test_stdlib_dumps_refuses_what_json_cannot_write() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        StdlibJsonCodec().dumps({"a": object()})
