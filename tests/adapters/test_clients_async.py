"""The asyncio and trio clients, each scenario run under both: against our server adapter over
in-memory streams (the fixtures' handlers), and against scripted servers where the test must
control the server's every word. Both wires and ``auto`` throughout."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from stream_harness import (
    BOOKED,
    DATES,
    LEGACY,
    LIBS,
    LISBON,
    MODERN,
    PITCH,
    WORKSPACE,
    Answers,
    EraName,
    FixtureServer,
    Lib,
    ScriptPeer,
    Session,
    Stuck,
    check_retries,
    sealed_config,
)

import mrtr_sansio as m
from mrtr_sansio.adapters import (
    CallFailedError,
    ConnectionClosedError,
    HandshakeFailedError,
    InputRejectedError,
    RoundsExhaustedError,
)

pytestmark = pytest.mark.parametrize("lib", LIBS, ids=lambda lib: lib.name)

ERAS: list[EraName] = ["modern", "legacy", "auto"]


def config(era: EraName, **options: Any) -> m.ClientConfig:
    return m.ClientConfig(era=era, client_info={"name": "test-client", "version": "1"}, **options)


def run(
    lib: Lib,
    era: EraName,
    body: Any,
    answers: Answers | None = None,
    callbacks: Mapping[str, Any] | None = None,
    **settings: Any,
) -> None:
    """Run ``body(session, server)`` against the fixtures' server on ``era``: the callbacks of
    ``answers``, replaced by ``callbacks``; ``settings`` go to the ClientConfig."""

    async def main() -> None:
        server = FixtureServer(lib.event)
        options: dict[str, Any] = dict((answers or Answers()).options())
        options.update(callbacks or {})
        async with lib.pair(
            server.handle, sealed_config(), config(era, **settings), **options
        ) as session:
            await body(session, server)

    lib.run(main)


def expected_era(era: EraName) -> m.Era:
    return m.Era.LEGACY if era == "legacy" else m.Era.MODERN


# --- the booking flow ---------------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
def test_book_trip_multi_round(lib: Lib, era: EraName) -> None:
    """Two rounds of input answered by the callbacks; on the modern wire every retry is the
    one the previous leg asked for, on the legacy one each server request is answered by id."""
    answers = Answers()

    async def body(session: Session, server: FixtureServer) -> None:
        client = session.client
        assert client.era is expected_era(era)
        result = await client.call_tool("book_trip", LISBON)
        assert result["content"] == [{"type": "text", "text": BOOKED}]
        wire = session.wire
        legs = wire.legs("book_trip")
        if era == "legacy":
            assert "resultType" not in result
            assert len(legs) == 1
            asked = [msg for msg in wire.received() if "method" in msg and "id" in msg]
            assert [msg["method"] for msg in asked] == [
                "elicitation/create",
                "roots/list",
                "sampling/createMessage",
            ]
            # Answered by id (the callbacks run concurrently: in any order).
            answered = {msg["id"]: msg["result"] for msg in wire.sent() if "result" in msg}
            assert set(answered) == {msg["id"] for msg in asked}
            assert answered[asked[0]["id"]] == {"action": "accept", "content": DATES}
            assert answered[asked[1]["id"]] == WORKSPACE
            assert answered[asked[2]["id"]] == PITCH
        else:
            assert result["resultType"] == "complete"
            assert len(legs) == 3
            check_retries(wire, legs)
            assert set(legs[1]["params"]["inputResponses"]) == {"dates", "workspace"}
            assert legs[2]["params"]["inputResponses"] == {"summary": PITCH}
        rounds = [(need.method, need.round) for need in answers.asked]
        assert sorted(rounds) == [
            ("elicitation/create", 1),
            ("roots/list", 1),
            ("sampling/createMessage", 2),
        ]
        assert all(
            need.call is not None and need.call.method == "tools/call" for need in answers.asked
        )

    run(lib, era, body, answers)


@pytest.mark.parametrize("era", ERAS)
def test_prompt_and_resource_and_lists(lib: Lib, era: EraName) -> None:
    async def body(session: Session, server: FixtureServer) -> None:
        client = session.client
        prompt = await client.get_prompt("test_input_required_result_prompt")
        assert prompt["messages"][0]["content"]["text"].startswith("Using this context: ")
        resource = await client.read_resource("test://static-text")
        assert resource["contents"][0]["uri"] == "test://static-text"
        names = [t["name"] for t in (await client.list_tools())["tools"]]
        assert "book_trip" in names
        assert (await client.list_prompts())["prompts"]
        assert (await client.list_resources())["resources"]
        assert (await client.list_resource_templates())["resourceTemplates"]
        ref = {"type": "ref/prompt", "name": "test_prompt_with_arguments"}
        completion = await client.request(
            "completion/complete", {"ref": ref, "argument": {"name": "arg1", "value": ""}}
        )
        assert "values" in completion["completion"]

    async def context(need: m.InputNeeded) -> Mapping[str, Any]:
        return {"action": "accept", "content": {"context": "tests"}}

    run(lib, era, body, callbacks={"elicitation": context})


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_parallel_calls_stay_isolated(lib: Lib, era: EraName) -> None:
    """While one booking waits for the user, another booking and a list call go through:
    neither carries the first call's answers or state."""
    answers = Answers()
    gate = lib.event()
    first_asked = lib.event()

    async def slow_elicit(need: m.InputNeeded) -> Mapping[str, Any]:
        if need.call is not None and need.call.params["arguments"]["destination"] == "Lisbon":
            first_asked.set()
            await lib.wait(gate)
        return await answers.elicit(need)

    async def body(session: Session, server: FixtureServer) -> None:
        client = session.client
        first = session.spawn(lambda: client.call_tool("book_trip", LISBON))
        await lib.wait(first_asked)
        listed = await client.list_tools()
        assert listed["tools"]
        porto = await client.call_tool("book_trip", {"destination": "Porto", "guests": 1})
        assert porto["content"][0]["text"].startswith("Booked Porto for 1")
        assert not first.done.is_set()
        gate.set()
        await lib.wait(first.done)
        assert first.error is None
        assert first.value["content"] == [{"type": "text", "text": BOOKED}]
        wire = session.wire
        (tools_list,) = wire.sent("tools/list")
        assert "inputResponses" not in tools_list.get("params", {})
        assert "requestState" not in tools_list.get("params", {})
        lisbon = [leg for leg in wire.legs("book_trip") if leg["params"]["arguments"] == LISBON]
        porto_legs = [leg for leg in wire.legs("book_trip") if leg not in lisbon]
        if era == "modern":
            check_retries(wire, lisbon)
            check_retries(wire, porto_legs)

    run(
        lib,
        era,
        body,
        answers,
        callbacks={"elicitation": slow_elicit},
    )


@pytest.mark.parametrize("era", ERAS)
def test_decline_reaches_the_handler(lib: Lib, era: EraName) -> None:
    async def decline(need: m.InputNeeded) -> Mapping[str, Any]:
        return {"action": "decline"}

    async def body(session: Session, server: FixtureServer) -> None:
        result = await session.client.call_tool("book_trip", LISBON)
        assert result["content"] == [{"type": "text", "text": "Booking cancelled."}]

    run(lib, era, body, callbacks={"elicitation": decline})


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_rejected_sampling(lib: Lib, era: EraName) -> None:
    """Modern: an embedded request has no error channel, so the call is abandoned (nothing
    more is sent) and raises the rejection. Legacy: the server's request gets the error."""

    async def refuse(need: m.InputNeeded) -> Mapping[str, Any]:
        raise InputRejectedError()

    async def body(session: Session, server: FixtureServer) -> None:
        client = session.client
        if era == "modern":
            with pytest.raises(InputRejectedError):
                await client.call_tool("book_trip", LISBON)
            assert len(session.wire.legs("book_trip")) == 2
            assert not session.wire.sent("notifications/cancelled")
        else:
            with pytest.raises(CallFailedError) as failed:
                await client.call_tool("book_trip", LISBON)
            assert failed.value.code == m.ErrorCode.INTERNAL_ERROR
            assert "User rejected the request" in failed.value.error.message
            (refusal,) = [msg for msg in session.wire.sent() if "error" in msg]
            assert refusal["error"] == {"code": -1, "message": "User rejected the request"}
        # The connection is still good.
        assert await client.list_tools()

    run(lib, era, body, callbacks={"sampling": refuse})


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_failing_callback_fails_its_call(lib: Lib, era: EraName) -> None:
    """A callback that raises is a bug: its call is cancelled and raises that very exception."""

    async def broken(need: m.InputNeeded) -> Mapping[str, Any]:
        raise KeyError("oops")

    async def body(session: Session, server: FixtureServer) -> None:
        with pytest.raises(KeyError, match="oops"):
            await session.client.call_tool("test_input_required_result_list_roots")
        # Answered after anything the failure sent (one stream, in order), and the client goes on.
        assert await session.client.list_tools()
        cancels = session.wire.sent("notifications/cancelled")
        if era == "legacy":  # our tools/call was in flight while the server asked
            (leg,) = session.wire.legs("test_input_required_result_list_roots")
            assert [c["params"]["requestId"] for c in cancels] == [leg["id"]]
        else:
            assert not cancels

    run(lib, era, body, callbacks={"roots": broken})


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_unreadable_answer_fails_the_call(lib: Lib, era: EraName) -> None:
    async def wrong(need: m.InputNeeded) -> Mapping[str, Any]:
        return {"roots": "not a list"}

    async def body(session: Session, server: FixtureServer) -> None:
        with pytest.raises(m.LocalProtocolError, match="roots"):
            await session.client.call_tool("test_input_required_result_list_roots")

    run(lib, era, body, callbacks={"roots": wrong})


# --- limits and errors --------------------------------------------------------------------------


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_round_cap_is_surfaced(lib: Lib, era: EraName) -> None:
    answers = Answers()

    async def body(session: Session, server: FixtureServer) -> None:
        with pytest.raises(RoundsExhaustedError) as exhausted:
            await session.client.call_tool("forever")
        assert exhausted.value.rounds == 3
        assert exhausted.value.call.method == "tools/call"
        assert len(answers.asked) == 3
        if era == "modern":
            legs = session.wire.legs("forever")
            assert len(legs) == 4
            check_retries(session.wire, legs)
            assert exhausted.value.last_result == session.wire.answer_to(legs[-1])["result"]
            assert exhausted.value.asked_again == ("again",)
            assert str(exhausted.value) == (
                "tools/call still needed input after 3 rounds: the server asked again for"
                " 'again'; the answer given did not satisfy it"
            )
        else:
            assert exhausted.value.last_result["method"] == "elicitation/create"
            assert str(exhausted.value) == (
                "tools/call still needed input after 3 rounds:"
                " the server still sent elicitation/create"
            )

    run(lib, era, body, answers, max_rounds=3)


@pytest.mark.parametrize("era", ERAS)
def test_server_errors_are_typed(lib: Lib, era: EraName) -> None:
    async def body(session: Session, server: FixtureServer) -> None:
        client = session.client
        with pytest.raises(CallFailedError) as unknown:
            await client.call_tool("no_such_tool")
        assert unknown.value.code == m.ErrorCode.INVALID_PARAMS
        assert not unknown.value.local
        with pytest.raises(CallFailedError) as missing:
            await client.call_tool("test_missing_capability")
        if era == "legacy":  # -32021 does not exist there: the same facts as -32603
            assert missing.value.code == m.ErrorCode.INTERNAL_ERROR
        else:
            assert missing.value.code == m.ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY
        assert missing.value.required_capabilities == {"sampling": {}}
        assert missing.value.supported_versions is None
        tool_error = await client.call_tool("test_error_handling")
        assert tool_error["isError"] is True

    # No sampling callback: the client does not declare sampling.
    run(lib, era, body, callbacks={"sampling": None})


@pytest.mark.parametrize("era", ERAS)
def test_notifications_reach_the_application(lib: Lib, era: EraName) -> None:
    seen: list[tuple[str, Any]] = []

    async def body(session: Session, server: FixtureServer) -> None:
        result = await session.client.call_tool(
            "test_tool_with_progress", meta={"progressToken": "p1"}
        )
        assert result["content"][0]["text"] == "Progress test completed"
        assert [(method, params["progress"]) for method, params in seen] == [
            ("notifications/progress", 0),
            ("notifications/progress", 50),
            ("notifications/progress", 100),
        ]

    def notified(method: str, params: Any) -> None:
        seen.append((method, params))

    run(lib, era, body, callbacks={"on_notification": notified})


# --- cancellation and endings -------------------------------------------------------------------


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_cancelling_the_task_cancels_the_request(lib: Lib, era: EraName) -> None:
    async def body(session: Session, server: FixtureServer) -> None:
        client = session.client
        call = session.spawn(lambda: client.call_tool("hang"))
        await lib.wait(server.started)
        call.cancel()
        await lib.wait(call.done)
        assert call.cancelled
        await lib.wait(server.cancelled)
        (leg,) = session.wire.legs("hang")
        (cancel,) = session.wire.sent("notifications/cancelled")
        assert cancel["params"]["requestId"] == leg["id"]
        assert await client.list_tools()  # and the client goes on
        assert all(msg.get("id") != leg["id"] for msg in session.wire.received())

    run(lib, era, body)


@pytest.mark.parametrize("era", ERAS)
def test_a_timeout_cancels_the_request_and_raises(lib: Lib, era: EraName) -> None:
    """``timeout=`` bounds an async call as it bounds a blocking one: the request in flight
    is cancelled on the wire, and TimeoutError names the method."""

    async def body(session: Session, server: FixtureServer) -> None:
        client = session.client
        with pytest.raises(TimeoutError, match=r"tools/call did not end within 0\.2 s"):
            await client.call_tool("hang", timeout=0.2)
        await lib.wait(server.cancelled)
        (leg,) = session.wire.legs("hang")
        (cancel,) = session.wire.sent("notifications/cancelled")
        assert cancel["params"]["requestId"] == leg["id"]
        assert await client.list_tools(timeout=5.0)  # within its bound: the result

    run(lib, era, body)


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_cancelling_while_input_is_gathered(lib: Lib, era: EraName) -> None:
    """The user is still answering when the call is given up: the callback is cancelled; the
    modern wire has no request in flight (nothing to send), the legacy one has our call."""
    stuck = Stuck(lib)

    async def body(session: Session, server: FixtureServer) -> None:
        call = session.spawn(lambda: session.client.call_tool("book_trip", LISBON))
        await lib.wait(stuck.asked)
        call.cancel()
        await lib.wait(call.done)
        await lib.wait(stuck.stopped)
        assert call.cancelled
        assert await session.client.list_tools()  # answered after the cancellation went out
        cancels = session.wire.sent("notifications/cancelled")
        if era == "modern":
            assert not cancels
        else:
            (leg,) = session.wire.legs("book_trip")
            assert [c["params"]["requestId"] for c in cancels] == [leg["id"]]

    run(lib, era, body, callbacks={"elicitation": stuck})


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_server_exit_mid_call(lib: Lib, era: EraName) -> None:
    async def body(session: Session, server: FixtureServer) -> None:
        client = session.client
        call = session.spawn(lambda: client.call_tool("hang"))
        await lib.wait(server.started)
        session.kill_server()
        await lib.wait(call.done)
        assert isinstance(call.error, ConnectionClosedError)
        assert call.error.local
        with pytest.raises(ConnectionClosedError):
            await client.list_tools()

    run(lib, era, body)


def test_withdrawn_request_stops_its_callback(lib: Lib) -> None:
    """A legacy server that stops waiting for an answer cancels its request: the callback is
    cancelled, and the call ends with the server's error."""
    stuck = Stuck(lib)

    async def main() -> None:
        server = FixtureServer(lib.event)
        async with lib.pair(
            server.handle,
            sealed_config(legacy_leg_timeout=0.05),
            config("legacy"),
            elicitation=stuck,
        ) as session:
            with pytest.raises(CallFailedError) as failed:
                await session.client.call_tool("test_input_required_result_elicitation")
            assert failed.value.code == m.ErrorCode.INTERNAL_ERROR
            await lib.wait(stuck.stopped)
            assert stuck.asked.is_set()
            withdrawn = [
                msg
                for msg in session.wire.received()
                if msg.get("method") == "notifications/cancelled"
            ]
            assert len(withdrawn) == 1

    lib.run(main)


def test_state_only_round_is_retried_after_the_backoff(lib: Lib) -> None:
    """A real timer: the retry of a state-only ``input_required`` waits ``retry_backoff``."""

    async def main() -> None:
        server = FixtureServer(lib.event)
        async with lib.pair(
            server.handle, sealed_config(), config("modern", retry_backoff=0.05)
        ) as session:
            start = lib.clock()
            result = await session.client.call_tool("state_once")
            elapsed = lib.clock() - start
            assert result["content"][0]["text"] == "waited (wait-1)"
            assert elapsed >= 0.05
            first, retry = session.wire.legs("state_once")
            assert retry["params"]["requestState"] != "wait-1"  # sealed by the server
            assert "inputResponses" not in retry["params"]
            check_retries(session.wire, [first, retry])

    lib.run(main)


# --- handshakes -------------------------------------------------------------------------------


def test_legacy_client_and_modern_only_server(lib: Lib) -> None:
    async def main() -> None:
        server = FixtureServer(lib.event)
        with pytest.raises(HandshakeFailedError) as failed:
            async with lib.pair(server.handle, sealed_config(legacy_versions=()), config("legacy")):
                raise AssertionError("connected")
        assert failed.value.call is None
        assert str(failed.value).startswith("the handshake failed")

    lib.run(main)


def test_auto_falls_back_when_the_probe_is_not_answered(lib: Lib) -> None:
    """A real timer: a legacy server that ignores ``server/discover``; after
    ``probe_timeout`` the client sends ``initialize``, and serves a call with the shim's
    requests."""

    async def script(peer: ScriptPeer) -> None:
        probe = await peer.recv()
        assert probe is not None
        assert probe["method"] == "server/discover"
        init = await peer.recv()
        assert init is not None
        assert init["method"] == "initialize"
        assert init["params"]["capabilities"] == {"elicitation": {"form": {}}}
        await peer.send(
            {
                "jsonrpc": "2.0",
                "id": init["id"],
                "result": {
                    "protocolVersion": LEGACY,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "old", "version": "1"},
                },
            }
        )
        assert await peer.recv() == {"jsonrpc": "2.0", "method": "notifications/initialized"}
        call = await peer.recv()
        assert call is not None
        await peer.send(
            {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "elicitation/create",
                "params": {"message": "Name?", "requestedSchema": {"type": "object"}},
            }
        )
        assert await peer.recv() == {
            "jsonrpc": "2.0",
            "id": 7,
            "result": {"action": "accept", "content": {"name": "Ada"}},
        }
        await peer.send({"jsonrpc": "2.0", "id": call["id"], "result": {"content": []}})
        # A late answer to the probe is dropped.
        await peer.send(
            {"jsonrpc": "2.0", "id": probe["id"], "error": {"code": -1, "message": "?"}}
        )
        assert await peer.recv() is None
        await peer.close()

    async def main() -> None:
        answers = Answers()
        start = lib.clock()
        async with lib.scripted(
            script, config("auto", probe_timeout=0.05), elicitation=answers.elicit
        ) as session:
            assert lib.clock() - start >= 0.05
            assert session.client.era is m.Era.LEGACY
            assert session.client.protocol_version == LEGACY
            assert session.client.server_info == {"name": "old", "version": "1"}
            assert await session.client.call_tool("greet") == {"content": []}

    lib.run(main)


def test_auto_settles_on_modern_from_discover(lib: Lib) -> None:
    async def main() -> None:
        server = FixtureServer(lib.event)
        async with lib.pair(server.handle, sealed_config(), config("auto")) as session:
            client = session.client
            assert client.era is m.Era.MODERN
            assert client.protocol_version == MODERN
            assert client.server_info is not None
            assert client.server_info["name"] == "mrtr-sansio-everything"
            assert client.server_capabilities is not None
            assert "tools" in client.server_capabilities
            assert client.instructions is not None
            assert client.connection.config.era == "auto"
            (probe,) = session.wire.sent("server/discover")
            assert probe["id"] == 0

    lib.run(main)


def test_server_gone_during_the_handshake(lib: Lib) -> None:
    async def script(peer: ScriptPeer) -> None:
        assert (await peer.recv() or {}).get("method") == "initialize"
        await peer.close()

    async def main() -> None:
        with pytest.raises(ConnectionClosedError):
            async with lib.scripted(script, config("legacy")):
                raise AssertionError("connected")

    lib.run(main)


def test_capabilities_follow_the_callbacks(lib: Lib) -> None:
    """Declared: what a callback answers, unless the configuration names it; a capability
    without a callback is refused before anything is sent."""

    async def script(peer: ScriptPeer) -> None:
        init = await peer.recv()
        assert init is not None
        assert init["params"]["capabilities"] == {
            "elicitation": {"form": {}, "url": {}},
            "roots": {},
        }
        await peer.send(
            {
                "jsonrpc": "2.0",
                "id": init["id"],
                "result": {"protocolVersion": LEGACY, "capabilities": {}},
            }
        )
        assert await peer.recv() == {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert await peer.recv() is None
        await peer.close()

    async def main() -> None:
        answers = Answers()
        caps: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}}
        async with lib.scripted(
            script,
            config("legacy", capabilities=caps),
            elicitation=answers.elicit,
            roots=answers.roots,
        ) as session:
            assert session.client.server_info is None
        with pytest.raises(ValueError, match="sampling"):
            async with lib.scripted(script, config("legacy", capabilities={"sampling": {}})):
                raise AssertionError("connected")

    lib.run(main)


def test_closing_with_a_retry_and_a_callback_pending(lib: Lib) -> None:
    """The client leaves while one call waits for its state-only backoff and another for the
    user: both end with ConnectionClosedError, the callback is cancelled, no task is left."""
    stuck = Stuck(lib)

    async def main() -> None:
        server = FixtureServer(lib.event)
        async with lib.pair(
            server.handle, sealed_config(), config("modern", retry_backoff=10), elicitation=stuck
        ) as session:
            wire = session.wire
            both_asked = wire.when(
                lib.event(),
                lambda direction, msg: (
                    direction == "recv"
                    and msg.get("result", {}).get("requestState") is not None
                    and len([m for d, m in wire.log if d == "recv" and "result" in m]) == 2
                ),
            )
            waiting = session.spawn(lambda: session.client.call_tool("state_once"))
            asking = session.spawn(lambda: session.client.call_tool("book_trip", LISBON))
            await lib.wait(both_asked)
            assert session.client.connection.next_deadline() is not None
        await lib.wait(waiting.done)
        await lib.wait(asking.done)
        await lib.wait(stuck.stopped)
        assert isinstance(waiting.error, ConnectionClosedError)
        assert isinstance(asking.error, ConnectionClosedError)

    lib.run(main)


def test_server_that_keeps_its_output_open(lib: Lib) -> None:
    """A real timer: the client leaving waits ``shutdown_timeout`` for the server to end its
    output, then stops anyway; the call waiting for its backoff ends with the connection. (The
    server ends its output only once that call has failed.)"""
    release = lib.event()

    async def script(peer: ScriptPeer) -> None:
        call = await peer.recv()
        assert call is not None
        result = {"resultType": "input_required", "requestState": "later"}
        await peer.send({"jsonrpc": "2.0", "id": call["id"], "result": result})
        assert await peer.recv() is None
        await lib.wait(release)
        await peer.close()

    async def main() -> None:
        async with lib.scripted(
            script, config("modern", retry_backoff=10), shutdown_timeout=0.05
        ) as session:
            answered = session.wire.when(lib.event(), lambda direction, msg: "result" in msg)
            waiting = session.spawn(lambda: session.client.call_tool("slow"))

            async def watch() -> None:
                await lib.wait(waiting.done)
                release.set()

            session.spawn(watch)
            await lib.wait(answered)
        assert isinstance(waiting.error, ConnectionClosedError)

    lib.run(main)


def test_failing_hooks_do_not_stop_the_client(lib: Lib, caplog: pytest.LogCaptureFixture) -> None:
    """A notification callback or a trace that raises is logged; the calls go on."""

    def broken(*args: Any) -> None:
        raise RuntimeError("hook")

    async def main() -> None:
        server = FixtureServer(lib.event)
        async with lib.pair(
            server.handle, sealed_config(), config("legacy"), on_notification=broken
        ) as session:
            result = await session.client.call_tool(
                "test_tool_with_progress", meta={"progressToken": "p1"}
            )
            assert result["content"][0]["text"] == "Progress test completed"
        failed = [r for r in caplog.records if r.getMessage() == "a client hook failed"]
        assert len(failed) == 3

    lib.run(main)
