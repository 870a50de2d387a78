"""The per-response checks of the ServerModel, one broken response per rule, and the
in-process driver that turns a handler into a callable server."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import pytest

import helpers
import mrtr_sansio as m
from mrtr_sansio.adapters import RequestContext
from mrtr_sansio.testing import (
    CHECKS,
    SpecViolationError,
    in_process_server,
    run_to_completion,
    strategies,
)
from mrtr_sansio.testing._checks import check_response, embedded_problem, outcome

FULL = strategies.FULL_CAPABILITIES
REQUEST = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "tools/call",
    "params": {"name": "t", "arguments": {}},
}
ELICIT = m.elicit_form("Name?", {"type": "object", "properties": {}}).to_wire()


def result(body: Mapping[str, Any], rid: Any = 7) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": dict(body)}


def error(code: int, data: Any = None, rid: Any = 7) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": "x"}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": rid, "error": err}


def ir(**fields: Any) -> dict[str, Any]:
    return result({"resultType": "input_required", **fields})


@pytest.mark.parametrize(
    ("response", "check"),
    [
        (None, "jsonrpc"),
        ([1], "jsonrpc"),
        ({"id": 7, "result": {"resultType": "complete"}}, "jsonrpc"),
        (result({"resultType": "complete"}, rid=8), "jsonrpc"),
        (result({"resultType": "complete"}, rid="7"), "jsonrpc"),
        ({"jsonrpc": "2.0", "id": 7}, "jsonrpc"),
        ({**result({"resultType": "complete"}), "error": {"code": 1, "message": ""}}, "jsonrpc"),
        ({"jsonrpc": "2.0", "id": 7, "error": "bad"}, "jsonrpc"),
        ({"jsonrpc": "2.0", "id": 7, "error": {"code": "1", "message": "x"}}, "jsonrpc"),
        ({"jsonrpc": "2.0", "id": 7, "error": {"code": 1}}, "jsonrpc"),
        ({"jsonrpc": "2.0", "id": 7, "result": []}, "jsonrpc"),
        (result({"content": []}), "result-type"),
        (result({"resultType": 1}), "result-type"),
        (result({"resultType": "task"}), "result-type"),
        (result({"resultType": "later"}), "result-type"),
        (error(-32021), "capabilities"),
        (error(-32021, {"requiredCapabilities": "roots"}), "capabilities"),
        (error(-32021, {"requiredCapabilities": {"roots": {}}}), "capabilities"),
        (ir(), "input-required-shape"),
        (ir(requestState=5), "input-required-shape"),
        (ir(inputRequests=[ELICIT]), "input-required-shape"),
        (ir(inputRequests={"k": {"method": "ping"}}), "input-required-shape"),
    ],
)
def test_each_broken_response_is_reported(response: Any, check: str) -> None:
    with pytest.raises(SpecViolationError) as caught:
        check_response(REQUEST, response, FULL)
    assert caught.value.check == check
    assert caught.value.request == REQUEST
    assert caught.value.response == response
    assert CHECKS[check] in str(caught.value)


def test_input_required_only_on_the_three_methods() -> None:
    request = {**REQUEST, "method": "tools/list", "params": {}}
    with pytest.raises(SpecViolationError) as caught:
        check_response(request, ir(requestState="s"), FULL)
    assert caught.value.check == "input-required-methods"
    for method in m.protocol.MRTR_METHODS:
        check_response({**REQUEST, "method": method}, ir(requestState="s"), FULL)


@pytest.mark.parametrize(
    ("caps", "request_"),
    [
        ({}, ELICIT),
        ({"elicitation": {"url": {}}}, ELICIT),
        ({"elicitation": {}}, m.elicit_url("Go", "https://x.example").to_wire()),
        ({"sampling": {}}, m.sample("hi", 5, tools=[{"name": "t"}]).to_wire()),
        ({"elicitation": {}}, m.list_roots().to_wire()),
    ],
)
def test_undeclared_embedded_requests_are_reported(caps: Any, request_: Any) -> None:
    with pytest.raises(SpecViolationError) as caught:
        check_response(REQUEST, ir(inputRequests={"k": request_}), caps)
    assert caught.value.check == "capabilities"


def test_edge_capability_forms_are_honoured() -> None:
    # A bare elicitation object grants form mode.
    check_response(REQUEST, ir(inputRequests={"k": ELICIT}), {"elicitation": {}})
    check_response(REQUEST, ir(inputRequests={"k": {"method": "roots/list"}}), {"roots": {}})
    # A justified -32021 is fine; a task result is fine once the extension is declared.
    check_response(REQUEST, error(-32021, {"requiredCapabilities": {"roots": {}}}), {})
    tasks: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    check_response(REQUEST, result({"resultType": "task"}), tasks)


@pytest.mark.parametrize(
    ("request_", "problem"),
    [
        ("x", "not an object"),
        ({"method": "tools/call"}, "cannot be embedded"),
        ({"method": "elicitation/create"}, "params missing"),
        ({"method": "elicitation/create", "params": []}, "not an object"),
        ({"method": "elicitation/create", "params": {}}, "without a message"),
        ({"method": "elicitation/create", "params": {"message": "m", "mode": "url"}}, "url"),
        ({"method": "elicitation/create", "params": {"message": "m", "mode": "x"}}, "mode"),
        ({"method": "elicitation/create", "params": {"message": "m"}}, "requestedSchema"),
        ({"method": "sampling/createMessage", "params": {}}, "messages"),
        ({"method": "sampling/createMessage", "params": {"messages": []}}, "maxTokens"),
    ],
)
def test_embedded_problems_are_named(request_: Any, problem: str) -> None:
    found = embedded_problem(request_)
    assert found is not None
    assert problem in found


def test_well_formed_embedded_requests_have_no_problem() -> None:
    for request in (
        ELICIT,
        m.elicit_url("Go", "https://x.example").to_wire(),
        m.sample("hi", 5).to_wire(),
        m.list_roots().to_wire(),
        {"method": "roots/list"},
    ):
        assert embedded_problem(request) is None


def test_validate_hook_sees_every_response() -> None:
    seen: list[tuple[Any, str]] = []
    response = result({"resultType": "complete"})
    assert check_response(REQUEST, response, FULL, lambda r, meth: seen.append((r, meth))) is (
        response
    )
    assert seen == [(response, "tools/call")]
    assert outcome(response) == ("result", "complete")
    assert outcome(error(-32602)) == ("error", -32602)


def test_violations_can_be_raised_without_an_exchange() -> None:
    error = SpecViolationError("http-status", "HTTP 500")
    assert str(error) == f"[http-status] HTTP 500\n  rule: {CHECKS['http-status']}"
    assert error.request is None


def test_long_values_are_cut_in_messages() -> None:
    response = result({"resultType": "x" * 5000})
    with pytest.raises(SpecViolationError) as caught:
        check_response(REQUEST, response, FULL)
    assert len(str(caught.value)) < 4000
    assert "…" in str(caught.value)
    assert caught.value.response == response  # the full response stays available


# --- the in-process driver -------------------------------------------------------------------

ENVELOPE = {m.protocol.PROTOCOL_VERSION_KEY: "2026-07-28", m.protocol.CLIENT_CAPABILITIES: {}}


call = partial(helpers.call, arguments={}, envelope=ENVELOPE)


def test_sync_and_async_handlers_both_run() -> None:
    def sync(request: m.RequestReceived, ctx: RequestContext) -> Any:
        return {"content": [{"type": "text", "text": f"sync {request.name}"}]}

    async def asynchronous(request: m.RequestReceived, ctx: RequestContext) -> Any:
        await ctx.sleep(10)  # time does not pass in process
        return {"content": [{"type": "text", "text": f"async {request.name}"}]}

    for handler, word in ((sync, "sync"), (asynchronous, "async")):
        server = in_process_server(handler)
        response = server(call(1, "t"))
        assert response is not None
        assert response["result"]["content"][0]["text"] == f"{word} t"
        assert response["result"]["resultType"] == "complete"


def test_notifications_are_kept_and_the_response_returned() -> None:
    async def chatty(request: m.RequestReceived, ctx: RequestContext) -> Any:
        ctx.progress(0.5, 1.0)
        return {"content": []}

    server = in_process_server(chatty)
    message = call(1, "t")
    message["params"]["_meta"] = {**ENVELOPE, "progressToken": "p"}
    response = server(message)
    assert response == server.sent[-1]
    assert server.sent[0]["method"] == "notifications/progress"
    assert (
        server({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}})
        is None
    )


def test_forbidden_answers_become_internal_errors() -> None:
    def wrong(request: m.RequestReceived, ctx: RequestContext) -> Any:
        return m.InputRequiredResult(request_state="s")

    server = in_process_server(wrong)
    listed = server(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": ENVELOPE}}
    )
    assert listed is not None
    assert listed["error"]["code"] == m.ErrorCode.INTERNAL_ERROR


def test_handler_exceptions_become_internal_errors() -> None:
    def broken(request: m.RequestReceived, ctx: RequestContext) -> Any:
        raise RuntimeError("boom")

    response = in_process_server(broken)(call(1, "t"))
    assert response is not None
    assert response["error"]["code"] == m.ErrorCode.INTERNAL_ERROR
    assert "boom" not in str(response)


def test_suspending_handlers_are_refused() -> None:
    class Pending:
        def __await__(self) -> Any:
            yield None

    async def waits(request: m.RequestReceived, ctx: RequestContext) -> Any:
        await Pending()
        return {"content": []}

    with pytest.raises(RuntimeError, match="event loop"):
        in_process_server(waits)(call(1, "t"))


def test_run_to_completion_returns_the_value() -> None:
    async def seven() -> int:
        return 7

    assert run_to_completion(seven()) == 7


def test_sent_messages_are_bounded() -> None:
    def ok(request: m.RequestReceived, ctx: RequestContext) -> Any:
        return {"content": []}

    server = in_process_server(ok, keep=3)
    for i in range(5):
        server(call(i, "t"))
    assert [msg["id"] for msg in server.sent] == [2, 3, 4]
