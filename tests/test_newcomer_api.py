"""Issue 20's "API surprises" and issue 15's secure default: each refused with a message that
says what to fix, or done by default (sealed state, orjson, client-level logs and progress)."""

from __future__ import annotations

import asyncio
import logging
import socket
import subprocess
import sys
from typing import Any

import pytest
import transcript
from hypothesis import HealthCheck, Phase, settings

import mrtr_sansio as m
from helpers import (
    client,
    legacy_ready,
    one,
    sent,
)
from mrtr_sansio import (
    UNSEALED,
    Call,
    ClientConfig,
    InputRequiredResult,
    LocalProtocolError,
    ServerConfig,
    ServerConnection,
    elicit_form,
)
from mrtr_sansio.protocol import LOG_LEVEL
from mrtr_sansio.sealing import RequestStateSecurity
from mrtr_sansio.testing import (
    ModelConfig,
    SpecViolationError,
    check_server,
    in_process_server,
    tool,
)

FLAT = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}

# --- elicit_form: only what the spec allows a form ---------------------------------------------


@pytest.mark.parametrize(
    "prop",
    [
        {"type": "string", "format": "email"},
        {"type": "number", "minimum": 0},
        {"type": "integer"},
        {"type": "boolean", "default": False},
        {"type": "string", "enum": ["a", "b"]},
        {"type": "string", "oneOf": [{"const": "a", "title": "A"}]},
        {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
        {"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}]}},
    ],
)
def test_elicit_form_accepts_every_primitive_property(prop: dict[str, Any]) -> None:
    schema = {"type": "object", "properties": {"field": prop}}
    assert elicit_form("m", schema).params == {"message": "m", "requestedSchema": schema}


@pytest.mark.parametrize(
    ("prop", "match"),
    [
        ({"type": "object", "properties": {}}, r"\['address'\]: type 'object' is not allowed"),
        ({"type": "array", "items": {"type": "object"}}, r"\['address'\]: an array is allowed"),
        ({"type": "array"}, r"\['address'\]: an array is allowed only as a multi-select enum"),
        ({"type": "null"}, r"\['address'\]: type 'null' is not allowed in a form"),
        ({"description": "no type"}, r"\['address'\]: type None is not allowed"),
        ("string", r"\['address'\]: must be a schema object, got str"),
    ],
)
def test_elicit_form_refuses_a_nested_or_odd_property_naming_it(prop: Any, match: str) -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "address": prop}}
    with pytest.raises(ValueError, match=r"^requested_schema\.properties" + match):
        elicit_form("Where?", schema)


def test_elicit_form_refuses_a_schema_that_is_not_an_object_of_fields() -> None:
    with pytest.raises(ValueError, match=r"^requested_schema: must be .* got type 'string'"):
        elicit_form("m", {"type": "string"})
    with pytest.raises(ValueError, match=r"^requested_schema\.properties: must be a mapping"):
        elicit_form("m", {"type": "object"})
    with pytest.raises(ValueError, match=r"^requested_schema\.required: must be a list"):
        elicit_form("m", {**FLAT, "required": "name"})
    with pytest.raises(ValueError, match=r"field names must be strings"):
        elicit_form("m", {"type": "object", "properties": {1: {"type": "string"}}})


# --- InputRequiredResult({}) ------------------------------------------------------------------


def test_an_empty_input_required_without_state_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^input_requests is empty and there is no request_state"):
        InputRequiredResult({})
    # State-only results (re-run me), with or without an empty map, are still allowed.
    assert InputRequiredResult(request_state="s").to_wire()["requestState"] == "s"
    assert InputRequiredResult({}, "s").to_wire() == {
        "resultType": "input_required",
        "inputRequests": {},
        "requestState": "s",
    }


def test_an_app_mapping_with_empty_input_requests_and_no_state_is_a_local_error() -> None:
    server = ServerConnection(ServerConfig())
    server.receive_message(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "t",
                "_meta": m.protocol.modern_envelope(m.protocol.LATEST_MODERN_VERSION, {}, None),
            },
        }
    )
    assert isinstance(server.next_event(), m.RequestReceived)
    with pytest.raises(LocalProtocolError, match="input_requests is empty"):
        server.respond(1, {"resultType": "input_required", "inputRequests": {}})


# --- one rule for unsealed state on both wires ----------------------------------------------


def _legacy_call(config: ServerConfig) -> ServerConnection:
    conn = ServerConnection(config)
    init = {
        "protocolVersion": m.protocol.LATEST_LEGACY_VERSION,
        "capabilities": {"elicitation": {"form": {}}},
        "clientInfo": {"name": "c", "version": "1"},
    }
    conn.receive_message({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
    conn.receive_message({"jsonrpc": "2.0", "method": "notifications/initialized"})
    conn.receive_message(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t"}}
    )
    assert [e for e in conn.events() if isinstance(e, m.RequestReceived)]
    return conn


def _modern_call(config: ServerConfig) -> ServerConnection:
    conn = ServerConnection(config)
    meta = m.protocol.modern_envelope(
        m.protocol.LATEST_MODERN_VERSION, {"elicitation": {"form": {}}}, None
    )
    conn.receive_message(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t", "_meta": meta}}
    )
    assert [e for e in conn.events() if isinstance(e, m.RequestReceived)]
    return conn


@pytest.mark.parametrize("wire", [_legacy_call, _modern_call])
def test_an_unsealed_dict_state_is_refused_on_both_wires(wire: Any) -> None:
    conn = wire(ServerConfig(request_state=UNSEALED))
    ask = InputRequiredResult({"q": elicit_form("?", FLAT)}, {"step": 2})
    with pytest.raises(
        LocalProtocolError,
        match=r"^request_state must be a string on a server that does not seal state "
        r"\(ServerConfig.request_state=UNSEALED\), got dict",
    ):
        conn.respond(1, ask)
    assert conn.in_flight == {1}


@pytest.mark.parametrize("wire", [_legacy_call, _modern_call])
def test_a_dict_state_is_fine_on_both_wires_when_sealed_by_default(wire: Any) -> None:
    conn = wire(ServerConfig())
    conn.respond(1, InputRequiredResult({"q": elicit_form("?", FLAT)}, {"step": 2}))
    assert conn.outgoing()


# --- config messages --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (
            {"server_info": "name"},
            TypeError,
            r"^server_info: must be a mapping such as \{'name': 'my-server', 'version': '1.0'\},"
            r" got str 'name'$",
        ),
        ({"capabilities": ["tools"]}, TypeError, r"^capabilities: must be a mapping such as"),
        ({"limits": {"max_in_flight": 1}}, TypeError, r"^limits: must be a Limits\(\.\.\.\)"),
        ({"codec": "orjson"}, TypeError, r"^codec: must be a JsonCodec \(with loads\(\) and"),
        ({"clock": 1.0}, TypeError, r"^clock: must be callable, got float$"),
        ({"token_hex": None}, TypeError, r"^token_hex: must be callable, got NoneType$"),
        ({"instructions": 3}, TypeError, r"^instructions: must be a string or None, got int"),
        ({"answer_discovery": "yes"}, TypeError, r"^answer_discovery: must be True/False"),
        ({"legacy_shim": 1}, TypeError, r"^legacy_shim: must be True/False, got int"),
        ({"cache_scope": "all"}, ValueError, r"^cache_scope: must be one of 'public', 'private'"),
        ({"cache_ttl_ms": -1}, ValueError, r"^cache_ttl_ms: must be an integer >= 0, got -1$"),
        ({"param_headers": [1]}, TypeError, r"^param_headers: must be a mapping such as"),
        (
            {"request_state": None},
            TypeError,
            r"^request_state: None no longer means unsealed; .* request_state=UNSEALED$",
        ),
        ({"request_state": b"key"}, TypeError, r"^request_state: must be a StateProtector"),
    ],
)
def test_server_config_says_what_to_fix(kwargs: dict[str, Any], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        ServerConfig(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"client_info": "me"}, TypeError, r"^client_info: must be a mapping such as"),
        ({"era": "new"}, ValueError, r"^era: must be one of 'modern', 'legacy', 'auto'"),
        ({"log_level": "verbose"}, ValueError, r"^log_level: must be one of 'debug', 'info'"),
        ({"progress": "yes"}, TypeError, r"^progress: must be True/False"),
        ({"limits": None}, TypeError, r"^limits: must be a Limits"),
    ],
)
def test_client_config_says_what_to_fix(kwargs: dict[str, Any], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        ClientConfig(**kwargs)


def test_http_client_against_a_server_that_is_down_says_so() -> None:
    pytest.importorskip("httpx")
    from mrtr_sansio.adapters import HandshakeFailedError
    from mrtr_sansio.adapters.http import HttpClient

    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/mcp"

    async def run() -> None:
        async with HttpClient.connect(url, ClientConfig(era="auto")):
            pass  # pragma: no cover - the handshake fails

    with pytest.raises(HandshakeFailedError) as failed:
        asyncio.run(asyncio.wait_for(run(), 20))
    message = str(failed.value)
    assert f"could not connect to {url}: is the server running?" in message
    assert "Invalid initialize response" not in message


# --- orjson by default --------------------------------------------------------------------------


def test_orjson_is_the_default_codec_when_installed() -> None:
    pytest.importorskip("orjson")
    assert isinstance(ServerConfig().codec, m.config.OrjsonCodec)
    assert isinstance(ClientConfig().codec, m.config.OrjsonCodec)
    given = m.config.StdlibJsonCodec()
    assert ServerConfig(codec=given).codec is given


def test_without_orjson_the_default_codec_is_the_stdlib(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "orjson", None)  # import orjson raises ImportError
    assert isinstance(ServerConfig().codec, m.config.StdlibJsonCodec)
    with pytest.raises(ImportError, match=r"pip install 'mrtr-sansio\[fast\]'"):
        m.config.OrjsonCodec()


def test_importing_the_package_does_not_import_orjson() -> None:
    code = "import sys, mrtr_sansio; print('orjson' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


# --- secure by default ------------------------------------------------------------------------


def test_the_default_config_seals_state_with_one_key_per_process() -> None:
    first, second = ServerConfig(), ServerConfig()
    assert isinstance(first.request_state, RequestStateSecurity)
    assert first.request_state is second.request_state is m.sealing.process_state_protector()
    assert first.seals_with_process_key
    assert not ServerConfig(request_state=UNSEALED).seals_with_process_key
    assert not ServerConfig(request_state=RequestStateSecurity([b"k" * 32])).seals_with_process_key
    assert repr(UNSEALED) == "UNSEALED"


def test_a_default_server_sends_sealed_state_that_round_trips() -> None:
    conn = _modern_call(ServerConfig())
    conn.respond(1, InputRequiredResult({"q": elicit_form("?", FLAT)}, "plain"))
    (item,) = conn.outgoing()
    token = item.message["result"]["requestState"]
    assert token != "plain"
    assert len(token) > 40


def test_unsealed_is_explicit_and_passes_state_through() -> None:
    conn = _modern_call(ServerConfig(request_state=UNSEALED))
    conn.respond(1, InputRequiredResult({"q": elicit_form("?", FLAT)}, "plain"))
    (item,) = conn.outgoing()
    assert item.message["result"]["requestState"] == "plain"


def test_the_adapters_log_once_that_the_key_is_per_process(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("anyio")
    from mrtr_sansio.adapters import _common
    from mrtr_sansio.adapters.asgi import McpHttpApp

    async def handler(request: Any, ctx: Any) -> Any:  # pragma: no cover - never called
        return {}

    monkeypatch.setattr(_common, "_announced", [])
    with caplog.at_level(logging.WARNING, logger="mrtr_sansio.adapters"):
        McpHttpApp(handler, ServerConfig(request_state=RequestStateSecurity([b"k" * 32])))
        assert caplog.records == []
        McpHttpApp(handler)
        McpHttpApp(handler, ServerConfig())
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert "sealed with a random key made for this process" in record.getMessage()
    assert "must configure the same key ring" in record.getMessage()


def _quick_check(config: ServerConfig) -> None:
    """The model checker, tamper check on, against the quickstart's handler (transcript.py:
    a tool that asks for a date and keeps a string state)."""
    fast = settings(
        max_examples=15,
        stateful_step_count=10,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    model = ModelConfig((tool("book", {"guests": 2}, mrtr=True),), reject_tampered_state=True)
    server = in_process_server(lambda request, _ctx: transcript.handler(request), config)
    check_server(server, model, settings=fast)


def test_the_checker_passes_a_quickstart_server_with_the_default_config() -> None:
    _quick_check(ServerConfig(server_info={"name": "bistro", "version": "1.0"}))


def test_the_checker_fails_the_same_server_unsealed() -> None:
    """What issue 15 saw before sealing was the default: the check bites without it."""
    unsealed = ServerConfig(
        server_info={"name": "bistro", "version": "1.0"}, request_state=UNSEALED
    )
    with pytest.raises(SpecViolationError, match="tampered"):
        _quick_check(unsealed)


# --- client-level logs and progress ---------------------------------------------------------


def test_client_log_level_is_in_every_modern_envelope_unless_the_call_says() -> None:
    conn = client(log_level="warning")
    conn.call("tools/call", {"name": "a"})
    conn.call("tools/call", {"name": "b", "_meta": {LOG_LEVEL: "debug"}})
    first, second = sent(conn)
    assert first["params"]["_meta"][LOG_LEVEL] == "warning"
    assert second["params"]["_meta"][LOG_LEVEL] == "debug"


def test_without_a_log_level_no_logs_are_asked_for() -> None:
    conn = client()
    conn.call("tools/call", {"name": "a"})
    assert LOG_LEVEL not in one(conn)["params"]["_meta"]


def test_client_progress_gives_each_call_its_id_as_token() -> None:
    conn = client(progress=True)
    a = conn.call("tools/call", {"name": "a"})
    b = conn.call("tools/call", {"name": "b", "_meta": {"progressToken": "mine"}})
    first, second = sent(conn)
    assert first["params"]["_meta"]["progressToken"] == a.call_id
    assert second["params"]["_meta"]["progressToken"] == "mine"
    assert b.call_id != a.call_id


def test_legacy_client_sets_the_log_level_once_when_the_server_logs() -> None:
    conn = client("legacy", log_level="info", progress=True)
    init = one(conn, m.Era.LEGACY)
    conn.receive_message(
        {
            "jsonrpc": "2.0",
            "id": init["id"],
            "result": {
                "protocolVersion": m.protocol.LATEST_LEGACY_VERSION,
                "capabilities": {"tools": {}, "logging": {}},
                "serverInfo": {"name": "s", "version": "1"},
            },
        }
    )
    call = conn.call("tools/call", {"name": "a"})
    initialized, set_level, request = sent(conn, m.Era.LEGACY)
    assert initialized["method"] == "notifications/initialized"
    assert set_level["method"] == "logging/setLevel"
    assert set_level["params"] == {"level": "info"}
    assert request["params"] == {"name": "a", "_meta": {"progressToken": call.call_id}}
    # Its answer is dropped quietly: no event, no error.
    conn.receive_message({"jsonrpc": "2.0", "id": set_level["id"], "result": {}})
    assert not [e for e in conn.events() if not isinstance(e, m.EraDetected)]


def test_legacy_client_does_not_set_a_level_on_a_server_without_logging() -> None:
    conn = client("legacy", log_level="info")
    legacy_ready(conn)
    conn.call("tools/call", {"name": "a"})
    assert [msg["method"] for msg in sent(conn, m.Era.LEGACY)] == ["tools/call"]


def test_the_adapters_take_log_level_and_progress() -> None:
    from mrtr_sansio.adapters._client_common import client_config

    config, _ = client_config(None, {"log_level": "error", "progress": True})
    assert (config.log_level, config.progress) == ("error", True)


def test_rounds_exhausted_names_what_the_server_still_asked() -> None:
    from mrtr_sansio.adapters import RoundsExhaustedError

    call = Call(1, "tools/call", {})
    ask = {"method": "roots/list", "params": {}}
    new_keys = RoundsExhaustedError(call, 2, {"inputRequests": {"j": ask, "k": ask}})
    assert (
        str(new_keys)
        == "tools/call still needed input after 2 rounds: the server still asked for 'j', 'k'"
    )
    assert new_keys.asked_again == ()
    assert str(RoundsExhaustedError(call, 2, {"requestState": "s"})) == (
        "tools/call still needed input after 2 rounds"
    )
