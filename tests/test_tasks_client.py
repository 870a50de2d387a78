"""The tasks extension on the client: :class:`ClientConnection` against our own server
connection (the ``Server`` driver of ``test_tasks.py``), in process, on an injected clock.

The application's code is the same whatever path a call takes: it answers ``InputNeeded``
events and gets ``CallCompleted`` with the tool's result.
"""

from __future__ import annotations

from typing import Any

import pytest

import mrtr_sansio as m
from helpers import Clock, check_task_message
from mrtr_sansio.tasks import EXTENSION, RunAsTask, TaskStarted
from test_tasks import TASK_CAPS, Server, accept, as_task, ask_name, done


class Peer:
    """A client connection wired to ``server``: what it sends is answered at once."""

    def __init__(self, server: Server, caps: Any = None, **config: Any) -> None:
        self.server = server
        self.clock = Clock(100.0)
        self.conn = m.ClientConnection(
            m.ClientConfig(
                capabilities=TASK_CAPS if caps is None else caps, clock=self.clock, **config
            )
        )
        self.sent: list[dict[str, Any]] = []

    def pump(self) -> list[m.Event]:
        """Deliver what the client sent, feed back the answers; the events that came out."""
        for item in self.conn.outgoing():
            message = dict(item.message)
            check_task_message(message, sender="client")
            self.sent.append(message)
            if "id" in message and "method" in message:
                self.conn.receive_message(self.server.send(message))
        out = []
        while (event := self.conn.next_event()) is not m.NEED_DATA:
            out.append(event)
        return out

    def tick(self) -> list[m.Event]:
        """Advance the clock to the connection's deadline, fire it, and pump."""
        deadline = self.conn.next_deadline()
        assert deadline is not None
        self.clock.now = deadline
        self.conn.handle_timer(deadline)
        return self.pump()

    def methods(self) -> list[str]:
        return [msg.get("method", "") for msg in self.sent]


def test_a_task_is_polled_asks_through_input_needed_and_ends_with_the_tool_result() -> None:
    peer = Peer(Server(as_task(ask_name)))
    call = peer.conn.call("tools/call", {"name": "work", "arguments": {}})
    (started,) = peer.pump()
    assert isinstance(started, TaskStarted)
    assert started.call is call
    # The server suggested 500 ms between polls.
    assert peer.conn.next_deadline() == pytest.approx(100.5)
    (needed,) = peer.tick()
    assert isinstance(needed, m.InputNeeded)
    assert (needed.key, needed.method) == ("name", "elicitation/create")
    assert peer.conn.fulfil(needed, accept("Ada"))
    assert peer.pump() == []  # tasks/update acknowledged
    (completed,) = peer.tick()
    assert isinstance(completed, m.CallCompleted)
    assert completed.result == {
        "content": [{"type": "text", "text": "Hello, Ada!"}],
        "resultType": "complete",
    }
    assert peer.methods() == ["tools/call", "tasks/get", "tasks/update", "tasks/get"]
    update = peer.sent[2]["params"]
    assert update["taskId"] == started.task_id
    assert update["inputResponses"] == {"name": accept("Ada")}
    assert update["_meta"][m.protocol.CLIENT_CAPABILITIES] == TASK_CAPS


def test_the_same_application_code_drives_an_mrtr_call() -> None:
    # Without the extension, the same tool asks by MRTR; the events are the same.
    peer = Peer(Server(as_task(ask_name)), caps={"elicitation": {}})
    peer.conn.call("tools/call", {"name": "work", "arguments": {}})
    (needed,) = peer.pump()
    assert isinstance(needed, m.InputNeeded)
    peer.conn.fulfil(needed, accept("Ada"))
    (completed,) = peer.pump()
    assert isinstance(completed, m.CallCompleted)
    assert completed.result["content"] == [{"type": "text", "text": "Hello, Ada!"}]


def test_a_create_task_result_without_declaring_the_extension_is_invalid() -> None:
    peer = Peer(Server(done), caps={})
    peer.conn.call("tools/call", {"name": "work"})
    peer.conn.outgoing()
    created = {"resultType": "task", "taskId": "t", "status": "working"}
    peer.conn.receive_message({"jsonrpc": "2.0", "id": 0, "result": created})
    (failed,) = peer.pump()
    assert isinstance(failed, m.CallFailed)
    assert failed.local
    assert "unknown resultType 'task'" in failed.error.message


def test_a_create_task_result_on_a_request_that_cannot_be_a_task_is_invalid() -> None:
    peer = Peer(Server(done))
    peer.conn.call("prompts/get", {"name": "p"})
    peer.conn.outgoing()
    created = {"resultType": "task", "taskId": "t", "status": "working"}
    peer.conn.receive_message({"jsonrpc": "2.0", "id": 0, "result": created})
    (failed,) = peer.pump()
    assert isinstance(failed, m.CallFailed)
    assert failed.error.message.endswith("CreateTaskResult on prompts/get")


@pytest.mark.parametrize(
    ("result", "reason"),
    [
        ({"resultType": "task", "status": "working"}, "no taskId"),
        ({"resultType": "task", "taskId": "t", "status": "sleeping"}, "unknown task status"),
        (
            {"resultType": "task", "taskId": "t", "status": "working", "pollIntervalMs": -1},
            "pollIntervalMs",
        ),
    ],
)
def test_a_malformed_create_task_result_is_invalid(result: Any, reason: str) -> None:
    peer = Peer(Server(done))
    peer.conn.call("tools/call", {"name": "work"})
    peer.conn.outgoing()
    peer.conn.receive_message({"jsonrpc": "2.0", "id": 0, "result": result})
    (failed,) = peer.pump()
    assert isinstance(failed, m.CallFailed)
    assert reason in failed.error.message


def _scripted(
    *answers: dict[str, Any], caps: Any = None
) -> tuple[m.ClientConnection, Clock, list[m.Event]]:
    """A client whose tools/call became task ``t``, answered by ``answers`` in turn (each a
    ``tasks/get`` result, or ``{"error": ...}`` alone for a JSON-RPC error); the events of the
    whole exchange."""
    clock = Clock(0.0)
    capabilities = TASK_CAPS if caps is None else caps
    conn = m.ClientConnection(m.ClientConfig(capabilities=capabilities, clock=clock))
    conn.call("tools/call", {"name": "work"})
    conn.outgoing()
    created = {"resultType": "task", "taskId": "t", "status": "working"}
    conn.receive_message({"jsonrpc": "2.0", "id": 0, "result": created})
    events: list[m.Event] = []
    for answer in answers:
        deadline = conn.next_deadline()
        assert deadline is not None
        clock.now = deadline
        conn.handle_timer(deadline)
        (item,) = conn.outgoing()
        assert item.message["method"] == "tasks/get"
        rid = item.message["id"]
        if set(answer) == {"error"}:  # a JSON-RPC error, not a failed task
            conn.receive_message({"jsonrpc": "2.0", "id": rid, "error": answer["error"]})
        else:
            conn.receive_message({"jsonrpc": "2.0", "id": rid, "result": answer})
        while (event := conn.next_event()) is not m.NEED_DATA:
            events.append(event)
    return conn, clock, events


def task(status: str, **fields: Any) -> dict[str, Any]:
    return {"resultType": "complete", "taskId": "t", "status": status, **fields}


def test_a_failed_task_fails_the_call_with_its_error() -> None:
    error = {"code": -32603, "message": "broke"}
    _conn, _clock, events = _scripted(task("failed", error=error))
    failed = events[-1]
    assert isinstance(failed, m.CallFailed)
    assert failed.error == m.JsonRpcError(-32603, "broke")
    assert not failed.local


def test_a_cancelled_task_fails_the_call() -> None:
    _conn, _clock, events = _scripted(task("cancelled"))
    assert isinstance(events[-1], m.CallFailed)
    assert events[-1].error.message == "The task was cancelled"


def test_an_error_answer_to_tasks_get_fails_the_call() -> None:
    error = {"code": -32602, "message": "Failed to retrieve task: Task has expired"}
    _conn, _clock, events = _scripted({"error": error})
    assert isinstance(events[-1], m.CallFailed)
    assert events[-1].error.code == -32602


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ({"resultType": "task", "taskId": "t", "status": "working"}, "complete result"),
        (task("working", taskId="other"), "answered for task 'other'"),
        (task("completed"), "must carry its result"),
        (task("failed"), "must carry its JSON-RPC error"),
        (task("input_required"), "must carry inputRequests"),
        (task("input_required", inputRequests={"k": 5}), "must be an object"),
    ],
)
def test_a_malformed_tasks_get_answer_is_invalid(answer: Any, reason: str) -> None:
    _conn, _clock, events = _scripted(answer)
    assert isinstance(events[-1], m.CallFailed)
    assert reason in events[-1].error.message


def test_poll_interval_follows_the_server_within_the_configured_bounds() -> None:
    conn, clock, _ = _scripted(task("working", pollIntervalMs=250))
    assert conn.next_deadline() == pytest.approx(clock.now + 0.25)
    conn, clock, _ = _scripted(task("working", pollIntervalMs=10**9))
    assert conn.next_deadline() == pytest.approx(clock.now + 30.0)
    conn, clock, _ = _scripted(task("working"))
    assert conn.next_deadline() == pytest.approx(clock.now + 1.0)


def test_input_requests_seen_on_an_earlier_poll_are_not_surfaced_again() -> None:
    ask = {
        "method": "elicitation/create",
        "params": {"message": "?", "requestedSchema": {"type": "object", "properties": {}}},
    }
    conn, _clock, events = _scripted(task("input_required", inputRequests={"a": ask}))
    (needed,) = [e for e in events if isinstance(e, m.InputNeeded)]
    conn.fulfil(needed, {"action": "accept", "content": {}})
    (update,) = conn.outgoing()
    assert update.message["method"] == "tasks/update"
    conn.receive_message(
        {"jsonrpc": "2.0", "id": update.message["id"], "result": {"resultType": "complete"}}
    )
    # The server has not caught up yet: "a" again, then "a" and a new "b".
    deadline = conn.next_deadline()
    assert deadline is not None
    conn.handle_timer(deadline)
    (poll,) = conn.outgoing()
    conn.receive_message(
        {
            "jsonrpc": "2.0",
            "id": poll.message["id"],
            "result": task("input_required", inputRequests={"a": ask}),
        }
    )
    assert conn.next_event() is m.NEED_DATA
    deadline = conn.next_deadline()
    assert deadline is not None
    conn.handle_timer(deadline)
    (poll,) = conn.outgoing()
    conn.receive_message(
        {
            "jsonrpc": "2.0",
            "id": poll.message["id"],
            "result": task("input_required", inputRequests={"a": ask, "b": ask}),
        }
    )
    fresh = conn.next_event()
    assert isinstance(fresh, m.InputNeeded)
    assert fresh.key == "b"


def test_a_task_answer_that_cannot_be_serialized_is_taken_back() -> None:
    ask = {
        "method": "elicitation/create",
        "params": {"message": "?", "requestedSchema": {"type": "object", "properties": {}}},
    }
    conn, _clock, events = _scripted(task("input_required", inputRequests={"a": ask}))
    (needed,) = [e for e in events if isinstance(e, m.InputNeeded)]
    with pytest.raises(m.LocalProtocolError, match="the answer to 'a' cannot be sent"):
        conn.fulfil(needed, {"action": "accept", "content": {"name": object()}})
    assert conn.outgoing() == []
    assert conn.fulfil(needed, {"action": "accept", "content": {}})  # pending again
    (update,) = conn.outgoing()
    assert update.message["method"] == "tasks/update"
    assert update.message["params"]["inputResponses"] == {"a": {"action": "accept", "content": {}}}


def test_task_input_rounds_are_bounded_by_max_rounds() -> None:
    ask = {"method": "roots/list"}
    clock = Clock(0.0)
    conn = m.ClientConnection(
        m.ClientConfig(capabilities={**TASK_CAPS, "roots": {}}, clock=clock, max_rounds=1)
    )
    conn.call("tools/call", {"name": "work"})
    conn.outgoing()
    created = {"resultType": "task", "taskId": "t", "status": "working"}
    conn.receive_message({"jsonrpc": "2.0", "id": 0, "result": created})
    assert isinstance(conn.next_event(), TaskStarted)
    for key in ("a", "b"):
        deadline = conn.next_deadline()
        assert deadline is not None
        conn.handle_timer(deadline)
        (item,) = conn.outgoing()
        answer = task("input_required", inputRequests={key: ask})
        conn.receive_message({"jsonrpc": "2.0", "id": item.message["id"], "result": answer})
        event = conn.next_event()
        if key == "a":
            assert isinstance(event, m.InputNeeded)
            conn.fulfil(event, {"roots": []})
            (update,) = conn.outgoing()
            ack = {"resultType": "complete"}
            conn.receive_message({"jsonrpc": "2.0", "id": update.message["id"], "result": ack})
    assert isinstance(event, m.RoundsExhausted)


def test_cancelling_a_task_call_sends_tasks_cancel() -> None:
    server = Server(as_task(done))
    peer = Peer(server)
    call = peer.conn.call("tools/call", {"name": "work"})
    server_runs = server.runs
    (started,) = [e for e in _no_run(peer) if isinstance(e, TaskStarted)]
    assert peer.conn.cancel(call)
    peer.pump()
    assert peer.methods()[-1] == "tasks/cancel"
    assert server.store.get(started.task_id).status.value == "cancelled"  # type: ignore[union-attr]
    assert server_runs  # the run had not happened: it was cancelled while working
    assert peer.conn.next_deadline() is None  # no more polls


def _no_run(peer: Peer) -> list[m.Event]:
    """Pump without letting the server run the task (it stays working)."""
    for item in peer.conn.outgoing():
        message = dict(item.message)
        peer.sent.append(message)
        peer.conn.receive_message(peer.server.send(message, run=False))
    out = []
    while (event := peer.conn.next_event()) is not m.NEED_DATA:
        out.append(event)
    return out


def test_a_task_is_resumed_by_id_on_a_new_connection() -> None:
    server = Server(as_task(ask_name))
    first = Peer(server)
    first.conn.call("tools/call", {"name": "work", "arguments": {}})
    (started,) = first.pump()
    assert isinstance(started, TaskStarted)
    # The client restarts: a new connection follows the task by its id.
    second = Peer(server)
    call = second.conn.resume_task(started.task_id)
    assert call.method == "tools/call"
    (needed,) = second.pump()
    assert isinstance(needed, m.InputNeeded)
    second.conn.fulfil(needed, accept("Bo"))
    second.pump()
    (completed,) = second.tick()
    assert isinstance(completed, m.CallCompleted)
    assert completed.call is call
    assert completed.result["content"][0]["text"] == "Hello, Bo!"


def test_resume_task_needs_the_extension_and_an_id() -> None:
    conn = m.ClientConnection(m.ClientConfig(capabilities={}))
    with pytest.raises(m.LocalProtocolError, match="tasks extension"):
        conn.resume_task("t")
    with pytest.raises(TypeError, match="task_id"):
        m.ClientConnection(m.ClientConfig(capabilities=TASK_CAPS)).resume_task("")


def test_http_headers_of_task_requests_name_the_task() -> None:
    conn = m.ClientConnection(m.ClientConfig(capabilities=TASK_CAPS))
    conn.resume_task("abc")
    (item,) = conn.outgoing()
    assert conn.http_headers(item)["Mcp-Name"] == "abc"
    assert conn.http_headers(item)["Mcp-Method"] == "tasks/get"


def test_extension_constant_matches_the_capability_the_server_checks() -> None:
    assert TASK_CAPS["extensions"] == {EXTENSION: {}}
    assert RunAsTask() == RunAsTask(None, None)


def test_client_must_be_prepared_for_a_plain_result_on_a_task_eligible_request() -> None:
    peer = Peer(Server(done))  # declares the extension; the server answers synchronously
    peer.conn.call("tools/call", {"name": "work"})
    (completed,) = peer.pump()
    assert isinstance(completed, m.CallCompleted)
    assert completed.result["content"] == [{"type": "text", "text": "done"}]


def test_client_must_treat_task_input_requests_as_the_standalone_requests() -> None:
    # The same InputNeeded as for an MRTR round, and the same capability rule: a request the
    # client did not declare support for is an invalid response, not something to show.
    sampling = {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}
    no_sampling: dict[str, Any] = {"elicitation": {}, "extensions": {EXTENSION: {}}}
    _conn, _clock, events = _scripted(
        task("input_required", inputRequests={"s": sampling}), caps=no_sampling
    )
    failed = events[-1]
    assert isinstance(failed, m.CallFailed)
    assert failed.local
    ask = {
        "method": "elicitation/create",
        "params": {"message": "?", "requestedSchema": {"type": "object", "properties": {}}},
    }
    _conn, _clock, events = _scripted(task("input_required", inputRequests={"e": ask}))
    needed = events[-1]
    assert isinstance(needed, m.InputNeeded)
    assert (needed.key, needed.method, dict(needed.params)) == ("e", ask["method"], ask["params"])
