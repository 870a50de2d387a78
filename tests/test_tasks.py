"""The tasks extension on the server (SEP-2663, ``spec/ext-tasks/tasks.md``): one test per
MUST of the specification, named by the rule, plus the status table, TTL, ownership, limits
and the one-handler-for-three-modes rule.

The connection is driven directly: :class:`Server` runs a handler for every request and every
task run the connection queues, as an adapter does. Every task message is validated against
the extension's own JSON schema when it is present beside the spec.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import pytest

import helpers
import mrtr_sansio as m
from helpers import (
    CAPS,
    FORM_SCHEMA,
    Clock,
    check_task,
    check_task_message,
    legacy_request,
    meta,
)
from mrtr_sansio.tasks import (
    EXTENSION,
    TASK,
    TASK_METHOD,
    InMemoryTaskStore,
    RunAsTask,
    Task,
    TaskCancelled,
    TaskSettings,
    TaskStatus,
    TaskSupport,
    TaskTrigger,
    iso_time,
)

TASK_CAPS: dict[str, Any] = {**CAPS, "extensions": {EXTENSION: {}}}
Handler = Callable[[m.RequestReceived], Any]

# --- the extension's schema -------------------------------------------------------------------


def valid(definition: str, value: Mapping[str, Any]) -> None:
    """Validate ``value`` against ``#/$defs/<definition>`` of the tasks schema (if present)."""
    check_task(definition, value)


# --- a small server driver ------------------------------------------------------------------------


class Server:
    """A :class:`ServerConnection` per message (as stateless HTTP makes them) over one store,
    running ``handler`` for every request and task run, as an adapter would."""

    def __init__(
        self,
        handler: Handler,
        *,
        tools: Mapping[str, str] | None = None,
        store: InMemoryTaskStore | None = None,
        clock: Clock | None = None,
        ids: Callable[[int], str] | None = None,
        **settings: Any,
    ) -> None:
        self.handler = handler
        self.store = store if store is not None else InMemoryTaskStore()
        self.clock = clock if clock is not None else Clock(1_785_000_000.0)
        counter = iter(range(1, 10_000))
        self.config = m.ServerConfig(
            clock=self.clock,
            token_hex=ids or (lambda n: f"task{next(counter):0{2 * n - 4}d}"),
            tasks=TaskSettings(
                store=self.store,
                tools=tools if tools is not None else {"work": "optional", "must": "required"},
                **settings,
            ),
        )
        self.events: list[Any] = []
        self.runs: list[m.RequestReceived] = []
        #: Validate what the server sends (off only for the tests of invalid outcomes).
        self.validate = True

    def send(
        self, message: Mapping[str, Any], *, principal: str | None = None, run: bool = True
    ) -> dict[str, Any]:
        """Feed one request to a fresh connection; its one response (task runs done after)."""
        conn = m.ServerConnection(self.config, principal=principal)
        conn.receive_message(message)
        method = message.get("method") if isinstance(message.get("method"), str) else None
        responses = self._drive(conn, run=run, method=method)
        assert len(responses) == 1, responses
        return responses[0]

    def _drive(
        self, conn: m.ServerConnection, *, run: bool, method: str | None = None
    ) -> list[dict[str, Any]]:
        """Run ``conn`` until quiet; every message it sends is validated against both
        schemas first (``method``: of the request it answers, when known)."""
        responses: list[dict[str, Any]] = []
        while True:
            for item in conn.outgoing():
                if self.validate:
                    check_task_message(item.message, method=method)
                if "id" in item.message:
                    responses.append(dict(item.message))
            event = conn.next_event()
            if event is m.NEED_DATA:
                if not any("id" in i.message for i in conn.outgoing()):
                    return responses
                continue
            self.events.append(event)
            if type(event) is not m.RequestReceived:
                continue
            if event.task_id is not None:
                self.runs.append(event)
                if run:
                    conn.settle_task(event, self.handler(event))
            else:
                conn.respond(event.request_id, self.handler(event))

    def resume(self) -> None:
        """Run the task runs held back with ``run=False``."""
        conn = m.ServerConnection(self.config)
        while self.runs:
            event = self.runs.pop(0)
            conn.settle_task(event, self.handler(event))
        self._drive(conn, run=True)


#: A ``tools/call`` of the ``work`` tool, declaring the tasks extension unless ``caps`` says.
call = partial(helpers.call, name="work", caps=TASK_CAPS)


def task_request(
    rid: Any, method: str, task_id: Any, caps: Mapping[str, Any] | None = None, **params: Any
) -> dict[str, Any]:
    body = {"taskId": task_id, **params}
    return helpers.request(rid, method, body, caps=TASK_CAPS if caps is None else caps)


def get(server: Server, task_id: Any, **kw: Any) -> dict[str, Any]:
    return server.send(task_request("g", "tasks/get", task_id), **kw)


def as_task(then: Handler) -> Handler:
    """A handler that becomes a task when it can, and runs ``then`` as the task."""

    def handler(request: m.RequestReceived) -> Any:
        if request.can_create_task:
            return RunAsTask()
        return then(request)

    return handler


def done(request: m.RequestReceived) -> Any:
    return {"content": [{"type": "text", "text": "done"}]}


def ask_name(request: m.RequestReceived) -> Any:
    """Asks for a name until it has one (the MRTR handler style)."""
    content = request.input_responses.accepted_content("name")
    if content is None:
        return m.InputRequiredResult({"name": m.elicit_form("Name?", FORM_SCHEMA)})
    return {"content": [{"type": "text", "text": f"Hello, {content['name']}!"}]}


def accept(name: str) -> dict[str, Any]:
    return {"action": "accept", "content": {"name": name}}


def create(server: Server, rid: Any = 1, **kw: Any) -> str:
    result = server.send(call(rid), **kw)["result"]
    assert result["resultType"] == "task", result
    task_id: str = result["taskId"]
    return task_id


# --- capability negotiation -----------------------------------------------------------------------


def test_server_discover_advertises_the_extension() -> None:
    server = Server(done)
    result = server.send(
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta()}}
    )["result"]
    assert result["capabilities"]["extensions"] == {EXTENSION: {}}
    assert "tasks" not in result["capabilities"]


def test_server_without_task_settings_does_not_advertise_the_extension() -> None:
    conn = m.ServerConnection(m.ServerConfig())
    assert "extensions" not in conn.discover_result()["capabilities"]


def test_must_not_return_create_task_result_without_the_extension_on_that_request() -> None:
    # The same handler runs synchronously for a request that does not declare the extension,
    # whatever that client declared on earlier requests.
    server = Server(as_task(done))
    create(server)  # declared on this one
    result = server.send(call(2, caps=CAPS))["result"]
    assert result == {"content": [{"type": "text", "text": "done"}], "resultType": "complete"}


def test_run_as_task_on_a_request_that_cannot_become_a_task_is_a_local_error() -> None:
    conn = m.ServerConnection(Server(done).config)
    conn.receive_message(call(1, caps=CAPS))
    event = conn.next_event()
    assert isinstance(event, m.RequestReceived)
    assert not event.can_create_task
    with pytest.raises(m.LocalProtocolError, match="cannot become a task"):
        conn.respond(1, RunAsTask())
    assert conn.in_flight == {1}


def test_run_as_task_for_a_tool_not_in_task_settings_is_a_local_error() -> None:
    conn = m.ServerConnection(Server(done).config)
    conn.receive_message(call(1, name="plain"))
    conn.next_event()
    with pytest.raises(m.LocalProtocolError, match="may not run as a task"):
        conn.respond(1, RunAsTask())


def test_run_as_task_without_task_settings_is_a_local_error() -> None:
    conn = m.ServerConnection(m.ServerConfig())
    conn.receive_message(call(1))
    conn.next_event()
    with pytest.raises(m.LocalProtocolError, match=r"ServerConfig\.tasks"):
        conn.respond(1, RunAsTask())


def test_must_return_32021_when_a_task_required_tool_is_called_without_the_extension() -> None:
    server = Server(as_task(done))
    response = server.send(call(1, name="must", caps=CAPS))
    assert response["error"]["code"] == -32021
    assert response["error"]["data"] == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
    # Refused before the handler runs: no request reached the application.
    assert not any(isinstance(e, m.RequestReceived) for e in server.events)


def test_task_required_tool_with_the_extension_becomes_a_task() -> None:
    server = Server(as_task(done))
    response = server.send(call(1, name="must"))
    assert response["result"]["resultType"] == "task"


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_must_return_32021_for_task_requests_from_non_declaring_clients(method: str) -> None:
    server = Server(as_task(done))
    task_id = create(server)
    response = server.send(task_request(2, method, task_id, caps=CAPS, inputResponses={}))
    assert response["error"]["code"] == -32021
    assert response["error"]["data"]["requiredCapabilities"] == {"extensions": {EXTENSION: {}}}


def test_must_return_32021_for_task_notifications_from_non_declaring_clients() -> None:
    server = Server(done)
    listen = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "subscriptions/listen",
        "params": {"notifications": {"taskIds": ["t"]}, "_meta": meta(CAPS)},
    }
    assert server.send(listen)["error"]["code"] == -32021


def test_task_notifications_reach_a_listen_stream_only_for_its_task_ids() -> None:
    conn = m.ServerConnection(Server(done).config)
    listen = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "subscriptions/listen",
        "params": {"notifications": {"taskIds": ["a"]}, "_meta": meta(TASK_CAPS)},
    }
    conn.receive_message(listen)
    conn.next_event()
    conn.acknowledge(1)
    conn.outgoing()
    conn.notify("notifications/tasks", {"taskId": "b", "status": "working"}, 1)
    assert conn.outgoing() == []
    conn.notify("notifications/tasks", {"taskId": "a", "status": "working"}, 1)
    (item,) = conn.outgoing()
    assert item.message["params"]["taskId"] == "a"


# --- polymorphic results and creation -------------------------------------------------------------


def test_must_set_result_type_task_on_create_task_result() -> None:
    server = Server(as_task(done))
    result = server.send(call(1))["result"]
    valid("CreateTaskResult", result)
    assert result["resultType"] == "task"
    assert result["status"] == "working"
    assert result["createdAt"] == result["lastUpdatedAt"] == iso_time(server.clock.now)
    assert result["ttlMs"] == 3_600_000
    assert result["pollIntervalMs"] == 500
    assert not {"result", "error", "inputRequests", "requestState", "task"} & set(result)


def test_must_not_set_result_type_task_on_other_results() -> None:
    server = Server(as_task(done))
    task_id = create(server)
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        result = server.send(task_request(2, method, task_id, inputResponses={}))["result"]
        assert result["resultType"] == "complete", method


def test_must_not_return_create_task_result_until_the_task_is_durably_created() -> None:
    server = Server(as_task(done))
    task_id = create(server, run=False)  # the response is out, the run has not started
    stored = server.store.get(task_id)
    assert stored is not None
    assert stored.status is TaskStatus.WORKING
    assert get(server, task_id)["result"]["status"] == "working"


def test_task_ids_come_from_the_injected_source_with_128_bits_by_default() -> None:
    asked: list[int] = []

    def ids(n: int) -> str:
        asked.append(n)
        return "x" * (2 * n)

    server = Server(as_task(done), ids=ids)
    assert create(server) == "x" * 32
    assert asked == [16]
    assert m.ServerConfig().token_hex(16) != m.ServerConfig().token_hex(16)


def test_a_task_id_already_in_the_store_is_never_reused() -> None:
    ids = iter(["dup", "dup", "fresh"])
    server = Server(as_task(done), ids=lambda n: next(ids))
    assert create(server, 1) == "dup"
    assert create(server, 2) == "fresh"


def test_a_broken_id_source_is_a_local_error_not_a_silent_overwrite() -> None:
    server = Server(as_task(done), ids=lambda n: "same")
    create(server)
    with pytest.raises(m.LocalProtocolError, match="ids in use"):
        server.send(call(2))


# --- tasks/get ------------------------------------------------------------------------------------


def test_tasks_get_must_return_working_for_a_working_task() -> None:
    server = Server(as_task(done))
    task_id = create(server, run=False)
    result = get(server, task_id)["result"]
    valid("GetTaskResult", result)
    assert result["status"] == "working"
    assert result["resultType"] == "complete"
    assert not {"result", "error", "inputRequests", "requestState"} & set(result)


def test_tasks_get_must_return_all_outstanding_input_requests() -> None:
    def two(request: m.RequestReceived) -> Any:
        ask = m.elicit_form("?", FORM_SCHEMA)
        return m.InputRequiredResult({"a": ask, "b": ask})

    server = Server(as_task(two))
    result = get(server, create(server))["result"]
    valid("GetTaskResult", result)
    assert result["status"] == "input_required"
    assert set(result["inputRequests"]) == {"a", "b"}
    assert result["inputRequests"]["a"]["method"] == "elicitation/create"


def test_tasks_get_must_return_the_result_of_a_completed_task() -> None:
    server = Server(as_task(done))
    result = get(server, create(server))["result"]
    valid("GetTaskResult", result)
    assert result["status"] == "completed"
    # The original request's result type (CallToolResult), resultType included.
    assert result["result"] == {
        "content": [{"type": "text", "text": "done"}],
        "resultType": "complete",
    }


def test_the_inlined_result_matches_the_original_requests_result_type() -> None:
    # tasks.md: "The structure matches the result type of the original request", and the
    # 2026-07-28 CallToolResult requires resultType; a handler's own resultType is kept.
    server = Server(as_task(lambda r: {"content": [], "resultType": "complete"}))
    result = get(server, create(server))["result"]["result"]
    assert result == {"content": [], "resultType": "complete"}


def test_a_task_run_answering_a_create_task_result_fails_the_task() -> None:
    # resultType "task" is only for a CreateTaskResult, never an inlined result.
    server = Server(as_task(lambda r: {"content": [], "resultType": "task"}))
    result = get(server, create(server))["result"]
    assert result["status"] == "failed"
    assert result["error"]["message"] == "A task's run cannot become a task"


def test_tasks_get_must_return_cancelled_for_a_cancelled_task() -> None:
    server = Server(as_task(done))
    task_id = create(server, run=False)
    server.send(task_request(2, "tasks/cancel", task_id))
    result = get(server, task_id)["result"]
    valid("GetTaskResult", result)
    assert result["status"] == "cancelled"
    assert result["statusMessage"] == "Cancelled by the client"


def test_tasks_get_must_return_the_error_of_a_failed_task() -> None:
    server = Server(as_task(lambda r: m.JsonRpcError(-32603, "broke", {"why": "test"})))
    result = get(server, create(server))["result"]
    valid("GetTaskResult", result)
    assert result["status"] == "failed"
    assert result["error"] == {"code": -32603, "message": "broke", "data": {"why": "test"}}
    assert result["statusMessage"] == "broke"
    assert "result" not in result


def test_failed_must_not_be_used_for_a_tool_result_with_is_error() -> None:
    error_result = {"content": [{"type": "text", "text": "no"}], "isError": True}
    server = Server(as_task(lambda r: error_result))
    result = get(server, create(server))["result"]
    assert result["status"] == "completed"
    assert result["result"] == {**error_result, "resultType": "complete"}


def test_task_results_never_carry_request_state() -> None:
    # The handler keeps state between the task's rounds; it never reaches the wire.
    def stateful(request: m.RequestReceived) -> Any:
        if request.request_state is None:
            return m.InputRequiredResult({"name": m.elicit_form("?", FORM_SCHEMA)}, "s1")
        return {"content": [], "state": request.request_state}

    server = Server(as_task(stateful))
    created = server.send(call(1))["result"]
    assert "requestState" not in created
    waiting = get(server, created["taskId"])["result"]
    assert "requestState" not in waiting
    server.send(
        task_request(2, "tasks/update", created["taskId"], inputResponses={"name": accept("x")})
    )
    final = get(server, created["taskId"])["result"]
    assert "requestState" not in final
    assert final["result"] == {"content": [], "state": "s1", "resultType": "complete"}


@pytest.mark.parametrize("task_id", ["nope", 7, None])
@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_must_return_32602_for_an_unknown_task_id(method: str, task_id: Any) -> None:
    server = Server(done)
    response = server.send(task_request(1, method, task_id, inputResponses={}))
    assert response["error"]["code"] == -32602


def test_unknown_task_is_answered_with_the_spec_message() -> None:
    response = get(Server(done), "nope")
    assert response["error"] == {
        "code": -32602,
        "message": "Failed to retrieve task: Task not found",
    }


def test_another_principals_task_is_answered_as_unknown() -> None:
    server = Server(as_task(done))
    task_id = create(server, principal="alice")
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        msg = task_request(2, method, task_id, inputResponses={})
        assert server.send(msg, principal="mallory")["error"] == {
            "code": -32602,
            "message": "Failed to retrieve task: Task not found",
        }
    assert get(server, task_id, principal="alice")["result"]["status"] == "completed"


# --- TTL ------------------------------------------------------------------------------------------


def test_a_task_stays_readable_until_its_ttl_and_is_gone_after() -> None:
    server = Server(as_task(done), ttl_ms=1000)
    task_id = create(server)
    server.clock.now += 0.999
    assert get(server, task_id)["result"]["ttlMs"] == 1000
    server.clock.now += 0.001
    assert get(server, task_id)["error"] == {
        "code": -32602,
        "message": "Failed to retrieve task: Task has expired",
    }
    assert server.store.get(task_id) is None  # deleted: the next read is "not found"
    assert get(server, task_id)["error"]["message"].endswith("Task not found")


def test_an_unlimited_ttl_is_sent_as_null_and_never_expires() -> None:
    server = Server(as_task(done), ttl_ms=None, poll_interval_ms=None)
    result = server.send(call(1))["result"]
    valid("CreateTaskResult", result)
    assert result["ttlMs"] is None
    assert "pollIntervalMs" not in result
    server.clock.now += 10**9
    assert get(server, result["taskId"])["result"]["status"] == "completed"


def test_last_updated_at_moves_with_each_change() -> None:
    server = Server(as_task(ask_name))
    task_id = create(server)
    created = get(server, task_id)["result"]
    server.clock.now += 2.5
    server.send(task_request(2, "tasks/update", task_id, inputResponses={"name": accept("a")}))
    final = get(server, task_id)["result"]
    assert final["createdAt"] == created["createdAt"]
    assert final["lastUpdatedAt"] == iso_time(server.clock.now) != created["lastUpdatedAt"]


# --- tasks/update ---------------------------------------------------------------------------------


def test_tasks_update_must_acknowledge_with_an_empty_complete_result() -> None:
    server = Server(as_task(ask_name))
    task_id = create(server)
    response = server.send(
        task_request(2, "tasks/update", task_id, inputResponses={"name": accept("Ada")})
    )
    assert response["result"] == {"resultType": "complete"}
    final = get(server, task_id)["result"]
    assert final["status"] == "completed"
    assert final["result"]["content"][0]["text"] == "Hello, Ada!"


def test_tasks_update_with_some_answers_keeps_input_required_with_the_rest() -> None:
    def two(request: m.RequestReceived) -> Any:
        responses = request.input_responses
        if "a" in responses and "b" in responses:
            return {"content": [], "both": [responses["a"], responses["b"]]}
        ask = m.elicit_form("?", FORM_SCHEMA)
        return m.InputRequiredResult({"a": ask, "b": ask})

    server = Server(as_task(two))
    task_id = create(server)
    server.send(task_request(2, "tasks/update", task_id, inputResponses={"a": accept("1")}))
    waiting = get(server, task_id)["result"]
    assert waiting["status"] == "input_required"
    assert set(waiting["inputRequests"]) == {"b"}
    server.send(task_request(3, "tasks/update", task_id, inputResponses={"b": accept("2")}))
    final = get(server, task_id)["result"]
    assert final["result"]["both"] == [accept("1"), accept("2")]


def test_tasks_update_ignores_keys_that_are_not_outstanding() -> None:
    server = Server(as_task(ask_name))
    task_id = create(server)
    before = server.store.get(task_id)
    response = server.send(
        task_request(2, "tasks/update", task_id, inputResponses={"other": {"x": 1}})
    )
    assert response["result"] == {"resultType": "complete"}
    assert server.store.get(task_id) == before


def test_tasks_update_on_a_working_task_is_acknowledged_and_changes_nothing() -> None:
    server = Server(as_task(done))
    task_id = create(server, run=False)
    response = server.send(
        task_request(2, "tasks/update", task_id, inputResponses={"name": accept("a")})
    )
    assert response["result"] == {"resultType": "complete"}
    assert get(server, task_id)["result"]["status"] == "working"


@pytest.mark.parametrize(
    ("responses", "message"),
    [
        (None, "tasks/update: inputResponses must be an object"),
        ([], "tasks/update: inputResponses must be an object"),
        ({"a": 1}, "each inputResponses value must be an object"),
    ],
)
def test_tasks_update_with_malformed_input_responses_is_32602(responses: Any, message: str) -> None:
    server = Server(as_task(ask_name))
    task_id = create(server)
    msg = task_request(2, "tasks/update", task_id, inputResponses=responses)
    if responses is None:
        del msg["params"]["inputResponses"]
    assert server.send(msg)["error"] == {"code": -32602, "message": message}


def test_tasks_update_input_responses_at_the_limit_and_past_it() -> None:
    server = Server(as_task(ask_name))
    config = server.config
    limit = config.limits.max_input_responses
    task_id = create(server)
    at: dict[str, Any] = {f"k{i}": {} for i in range(limit)}
    assert server.send(task_request(2, "tasks/update", task_id, inputResponses=at))["result"]
    past: dict[str, Any] = {f"k{i}": {} for i in range(limit + 1)}
    response = server.send(task_request(3, "tasks/update", task_id, inputResponses=past))
    assert response["error"]["message"] == f"inputResponses has more than {limit} entries"


def test_input_request_keys_must_be_unique_for_the_task_lifetime() -> None:
    # The handler asks under "name" in every round; the task gives each round a new key, and
    # the handler reads the answer under its own key.
    rounds: list[Any] = []

    def ask_twice(request: m.RequestReceived) -> Any:
        rounds.append(dict(request.input_responses))
        if len(rounds) < 4:
            return m.InputRequiredResult(
                {"name": m.elicit_form(f"Round {len(rounds)}", FORM_SCHEMA)}
            )
        return {"content": []}

    server = Server(as_task(ask_twice))
    task_id = create(server)
    keys = []
    for i in range(3):
        waiting = get(server, task_id)["result"]
        (key,) = waiting["inputRequests"]
        keys.append(key)
        stored = server.store.get(task_id)
        assert stored is not None
        assert stored.issued == tuple(keys)  # every key ever sent, so that none is reused
        server.send(task_request(2, "tasks/update", task_id, inputResponses={key: accept(str(i))}))
    assert keys == ["name", "name.2", "name.3"]
    assert rounds == [{}, {"name": accept("0")}, {"name": accept("1")}, {"name": accept("2")}]
    stored = server.store.get(task_id)
    assert stored is not None
    assert stored.issued == ()  # completed: what only a run needs is released


# --- tasks/cancel ---------------------------------------------------------------------------------


def test_tasks_cancel_must_acknowledge_with_an_empty_complete_result() -> None:
    server = Server(as_task(done))
    task_id = create(server, run=False)
    assert server.send(task_request(2, "tasks/cancel", task_id))["result"] == {
        "resultType": "complete"
    }
    assert TaskCancelled(task_id) in server.events
    server.resume()  # the run finishes after the cancel: its result is dropped
    assert get(server, task_id)["result"]["status"] == "cancelled"


def test_tasks_cancel_of_a_terminal_task_is_acknowledged_and_changes_nothing() -> None:
    server = Server(as_task(done))
    task_id = create(server)
    server.events.clear()
    assert server.send(task_request(2, "tasks/cancel", task_id))["result"] == {
        "resultType": "complete"
    }
    assert not any(isinstance(e, TaskCancelled) for e in server.events)
    assert get(server, task_id)["result"]["status"] == "completed"


def test_tasks_cancel_of_a_task_waiting_for_input_drops_its_requests() -> None:
    server = Server(as_task(ask_name))
    task_id = create(server)
    server.send(task_request(2, "tasks/cancel", task_id))
    result = get(server, task_id)["result"]
    assert result["status"] == "cancelled"
    assert "inputRequests" not in result


def test_notifications_cancelled_must_not_cancel_a_task() -> None:
    server = Server(as_task(done))
    task_id = create(server, run=False)
    conn = m.ServerConnection(server.config)
    conn.receive_message(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": task_id}}
    )
    assert get(server, task_id)["result"]["status"] == "working"


# --- Streamable HTTP routing header -------------------------------------------------------------


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_mcp_name_must_be_the_task_id_on_http(method: str) -> None:
    server = Server(as_task(done))
    task_id = create(server)
    msg = task_request(2, method, task_id, inputResponses={})

    def answer(name: str | None) -> dict[str, Any]:
        conn = m.ServerConnection(server.config)
        facts = m.http.HttpRequestFacts("2026-07-28", method, name)
        conn.receive_message(msg, http=facts)
        (item,) = conn.outgoing()
        return dict(item.message)

    assert "result" in answer(task_id)
    assert answer("other")["error"]["code"] == -32020
    assert answer(None)["error"] == {"code": -32020, "message": "Missing required header Mcp-Name"}


# --- the status table -----------------------------------------------------------------------------


def test_the_status_table_is_the_spec_diagram() -> None:
    arrows = {(s.value, t.value) for (s, _), t in TASK.table.items()}
    assert arrows == {
        ("working", "input_required"),
        ("working", "working"),
        ("working", "completed"),
        ("working", "failed"),
        ("working", "cancelled"),
        ("input_required", "input_required"),
        ("input_required", "working"),
        ("input_required", "cancelled"),
        ("input_required", "failed"),
    }
    assert {s.value for s in TASK.terminal} == {"completed", "failed", "cancelled"}


@pytest.mark.parametrize("trigger", list(TaskTrigger))
def test_a_transition_the_table_lacks_is_a_local_error(trigger: TaskTrigger) -> None:
    for state in TaskStatus:
        if (state, trigger) in TASK.table:
            assert TASK.step(state, trigger) is TASK.table[state, trigger]
        else:
            with pytest.raises(m.LocalProtocolError):
                TASK.step(state, trigger)


def test_settling_a_task_waiting_for_input_is_a_local_error() -> None:
    server = Server(as_task(ask_name))
    task_id = create(server)
    conn = m.ServerConnection(server.config)
    stored = server.store.get(task_id)
    assert stored is not None
    run = m.RequestReceived(task_id, "tools/call", {}, task_id=task_id)
    with pytest.raises(m.LocalProtocolError, match="not running a handler"):
        conn.settle_task(run, {"content": []})


def test_settle_task_of_a_request_that_is_not_a_task_run_is_a_local_error() -> None:
    conn = m.ServerConnection(Server(done).config)
    with pytest.raises(m.LocalProtocolError, match="not a task's run"):
        conn.settle_task(m.RequestReceived(1, "tools/call", {}), {})


def test_a_result_for_a_task_that_is_gone_is_dropped() -> None:
    server = Server(as_task(done))
    task_id = create(server, run=False)
    server.store.delete(task_id)
    server.resume()
    assert server.store.get(task_id) is None


# --- one handler, three modes ---------------------------------------------------------------------


def test_one_handler_runs_synchronously_by_mrtr_and_as_a_task() -> None:
    handler = as_task(ask_name)
    server = Server(handler)
    # 1. A client without the extension: MRTR rounds on the original request.
    first = server.send(call(1, caps=CAPS))["result"]
    assert first["resultType"] == "input_required"
    assert set(first["inputRequests"]) == {"name"}
    second = server.send(call(2, caps=CAPS, inputResponses={"name": accept("Mo")}))["result"]
    assert second["content"][0]["text"] == "Hello, Mo!"
    # 2. With the extension: a task that parks in input_required, resumed by tasks/update.
    task_id = create(server, 3)
    waiting = get(server, task_id)["result"]
    assert waiting["status"] == "input_required"
    server.send(task_request(4, "tasks/update", task_id, inputResponses={"name": accept("Mo")}))
    final = get(server, task_id)["result"]["result"]
    # The same result either way, resultType included (only _meta may differ).
    assert final == {k: v for k, v in second.items() if k != "_meta"}


def test_mrtr_rounds_before_the_task_stay_mrtr_rounds() -> None:
    # The composition: ask by MRTR, then become a task that sees the MRTR answers.
    def compose(request: m.RequestReceived) -> Any:
        content = request.input_responses.accepted_content("name")
        if content is None:
            return m.InputRequiredResult({"name": m.elicit_form("?", FORM_SCHEMA)})
        if request.can_create_task:
            return RunAsTask(status_message="on it")
        return {"content": [{"type": "text", "text": f"Hi {content['name']}"}]}

    server = Server(compose)
    round1 = server.send(call(1))["result"]
    assert round1["resultType"] == "input_required"
    assert "taskId" not in round1
    round2 = server.send(call(2, inputResponses={"name": accept("Al")}))["result"]
    assert round2["resultType"] == "task"
    assert round2["statusMessage"] == "on it"
    assert "requestState" not in round2
    assert "inputRequests" not in round2
    assert get(server, round2["taskId"])["result"]["result"]["content"][0]["text"] == "Hi Al"


def test_a_task_run_is_a_request_with_the_creating_arguments_and_principal() -> None:
    server = Server(as_task(done))
    task_id = create(server, principal="alice", run=False)
    (run,) = server.runs
    assert run.task_id == task_id == run.request_id
    assert run.principal == "alice"
    assert run.arguments == {"x": 1}
    assert run.tasks_declared
    assert not run.can_create_task
    assert "requestState" not in run.params


def test_run_as_task_state_is_the_first_runs_state() -> None:
    def handler(request: m.RequestReceived) -> Any:
        if request.can_create_task:
            return RunAsTask(state={"step": 1})
        return {"content": [], "state": request.request_state}

    server = Server(handler)
    assert get(server, create(server))["result"]["result"]["state"] == {"step": 1}


def test_a_state_only_answer_runs_the_task_again() -> None:
    def handler(request: m.RequestReceived) -> Any:
        if request.can_create_task:
            return RunAsTask()
        if request.request_state is None:
            return m.InputRequiredResult(request_state="again")
        return {"content": [], "round": request.round}

    server = Server(handler)
    assert get(server, create(server))["result"]["result"] == {
        "content": [],
        "round": 2,
        "resultType": "complete",
    }


def test_task_rounds_at_the_limit_and_past_it() -> None:
    def forever(request: m.RequestReceived) -> Any:
        return m.InputRequiredResult(request_state=str(request.round))

    for limit in (1, 3):
        server = Server(as_task(forever), max_rounds=limit)
        result = get(server, create(server))["result"]
        assert result["status"] == "failed"
        assert result["error"]["message"] == f"The task still needed input after {limit} rounds"
        assert len([e for e in server.events if getattr(e, "task_id", None)]) == limit


def test_task_input_requests_beyond_the_declared_capabilities_fail_the_task_32021() -> None:
    server = Server(as_task(ask_name))
    caps: dict[str, Any] = {"extensions": {EXTENSION: {}}}  # no elicitation
    created = server.send(call(1, caps=caps))["result"]
    result = server.send(task_request(2, "tasks/get", created["taskId"], caps=caps))["result"]
    assert result["status"] == "failed"
    assert result["error"]["code"] == -32021


def test_task_input_requests_at_the_limit_and_past_it() -> None:
    def many(n: int) -> Handler:
        ask = m.elicit_form("?", FORM_SCHEMA)
        return as_task(lambda r: m.InputRequiredResult({f"k{i}": ask for i in range(n)}))

    limit = m.Limits().max_input_requests
    server = Server(many(limit))
    assert get(server, create(server))["result"]["status"] == "input_required"
    server = Server(many(limit + 1))
    result = get(server, create(server))["result"]
    assert result["status"] == "failed"
    assert result["error"]["message"] == f"input_requests has more than {limit} entries"


@pytest.mark.parametrize(
    "outcome",
    [RunAsTask(), {"resultType": "input_required", "inputRequests": 5}],
    ids=["run-as-task", "bad-input-required"],
)
def test_an_invalid_outcome_of_a_task_run_fails_the_task(outcome: Any) -> None:
    server = Server(lambda r: RunAsTask() if r.can_create_task else outcome)
    result = get(server, create(server))["result"]
    assert result["status"] == "failed"
    assert result["error"]["code"] == -32603


def test_an_input_required_mapping_from_a_task_run_parks_the_task() -> None:
    wire = {
        "resultType": "input_required",
        "inputRequests": {
            "name": {
                "method": "elicitation/create",
                "params": {"message": "?", "requestedSchema": FORM_SCHEMA},
            }
        },
    }
    server = Server(as_task(lambda r: wire))
    assert get(server, create(server))["result"]["status"] == "input_required"


def test_a_task_run_outcome_of_the_wrong_type_is_a_type_error() -> None:
    server = Server(as_task(done))
    task_id = create(server, run=False)
    conn = m.ServerConnection(server.config)
    with pytest.raises(TypeError, match="not int"):
        conn.settle_task(server.runs[0], 5)  # type: ignore[arg-type]
    assert server.store.get(task_id) is not None


# --- limits ---------------------------------------------------------------------------------------


def test_tasks_per_principal_at_the_limit_and_past_it() -> None:
    server = Server(as_task(done), max_tasks=2)
    create(server, 1, principal="a")
    create(server, 2, principal="a")
    create(server, 3, principal="b")  # another principal has its own allowance
    response = server.send(call(4), principal="a")
    assert response["error"] == {"code": -32603, "message": "Too many tasks (the limit is 2)"}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("ttl_ms", 0),
        ("poll_interval_ms", -1),
        ("max_tasks", 0),
        ("max_rounds", 0),
        ("lease_seconds", 0),
        ("ttl_ms", 1.5),
    ],
)
def test_task_settings_refuse_values_out_of_range(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=field):
        TaskSettings(**{field: value})


def test_task_settings_tool_support_by_name() -> None:
    settings = TaskSettings(tools={"a": "optional", "b": TaskSupport.REQUIRED})
    assert settings.support("a") is TaskSupport.OPTIONAL
    assert settings.support("b") is TaskSupport.REQUIRED
    assert settings.support("c") is TaskSupport.FORBIDDEN
    assert settings.support(None) is TaskSupport.FORBIDDEN


# --- leases ---------------------------------------------------------------------------------------


def test_a_run_whose_lease_runs_out_fails_the_task_with_a_status_message() -> None:
    server = Server(as_task(done), lease_seconds=30)
    task_id = create(server, run=False)
    server.clock.now += 30
    assert get(server, task_id)["result"]["status"] == "working"
    server.clock.now += 0.5
    result = get(server, task_id)["result"]
    assert result["status"] == "failed"
    assert result["statusMessage"] == "The worker running this task stopped before it finished"
    server.resume()  # the worker comes back late: its result is dropped
    assert get(server, task_id)["result"]["status"] == "failed"


def test_a_renewed_lease_keeps_the_task_working() -> None:
    server = Server(as_task(done), lease_seconds=30)
    task_id = create(server, run=False)
    machine = m.ServerConnection(server.config)._tasks
    assert machine is not None
    for _ in range(3):
        server.clock.now += 20
        assert machine.renew(task_id)
    assert get(server, task_id)["result"]["status"] == "working"
    server.resume()
    assert not machine.renew(task_id)  # completed: nothing to renew
    assert get(server, task_id)["result"]["status"] == "completed"


def test_renew_without_leases_is_a_no_op() -> None:
    server = Server(as_task(done))
    machine = m.ServerConnection(server.config)._tasks
    assert machine is not None
    assert machine.renew("anything")


# --- the legacy wire ------------------------------------------------------------------------------


def _legacy(server: Server) -> m.ServerConnection:
    conn = m.ServerConnection(server.config)
    conn.receive_message(
        legacy_request(
            0,
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "c", "version": "1"},
            },
        )
    )
    conn.outgoing()
    conn.receive_message({"jsonrpc": "2.0", "method": "notifications/initialized"})
    while conn.next_event() is not m.NEED_DATA:
        pass
    return conn


def test_legacy_wire_runs_an_optional_task_tool_synchronously() -> None:
    server = Server(as_task(done))
    conn = _legacy(server)
    conn.receive_message(legacy_request(1, "tools/call", {"name": "work", "arguments": {}}))
    event = conn.next_event()
    assert isinstance(event, m.RequestReceived)
    assert not event.can_create_task
    conn.respond(1, server.handler(event))
    (item,) = conn.outgoing()
    assert item.message["result"] == {"content": [{"type": "text", "text": "done"}]}


def test_legacy_wire_refuses_a_task_required_tool_with_a_clear_error() -> None:
    conn = _legacy(Server(as_task(done)))
    conn.receive_message(legacy_request(1, "tools/call", {"name": "must", "arguments": {}}))
    (item,) = conn.outgoing()
    assert item.message["error"]["code"] == -32603
    assert "runs only as a task" in item.message["error"]["message"]


# --- values ---------------------------------------------------------------------------------------


def test_task_records_round_trip_through_json() -> None:
    task = Task(
        task_id="t",
        owner="o",
        status=TaskStatus.INPUT_REQUIRED,
        created_at=1.5,
        updated_at=2.5,
        ttl_ms=None,
        poll_interval_ms=7,
        params={"name": "x"},
        state={"a": [1]},
        outstanding={"k": {"key": "k", "request": {"method": "roots/list"}}},
        issued=("k",),
        revision=3,
        lease_until=9.0,
    )
    record = json.loads(json.dumps(task.to_record()))
    assert Task.from_record(record) == task


def test_iso_time_is_utc_with_milliseconds() -> None:
    assert iso_time(0) == "1970-01-01T00:00:00.000Z"
    assert iso_time(1_785_000_000.1234) == "2026-07-25T17:20:00.123Z"


def test_in_memory_store_compare_and_swap() -> None:
    store = InMemoryTaskStore()
    task = Task("t", None, TaskStatus.WORKING, 0.0, 0.0, None, None, {})
    assert store.create(task)
    assert not store.create(task)
    newer = Task("t", None, TaskStatus.COMPLETED, 0.0, 1.0, None, None, {}, revision=1)
    assert not store.replace(newer, 5)
    assert store.replace(newer, 0)
    assert store.get("t") == newer
    assert len(store) == 1
    assert store.count(None, 0.0) == 1
    assert store.count("x", 0.0) == 0
    store.delete("t")
    store.delete("t")
    assert store.get("t") is None
    assert not store.replace(newer, 1)


def test_progress_and_log_messages_must_not_be_sent_on_a_task_listen_stream() -> None:
    conn = m.ServerConnection(Server(done).config)
    listen = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "subscriptions/listen",
        "params": {"notifications": {"taskIds": ["a"]}, "_meta": meta(TASK_CAPS)},
    }
    conn.receive_message(listen)
    conn.next_event()
    conn.acknowledge(1)
    conn.outgoing()
    conn.notify("notifications/progress", {"progressToken": 1, "progress": 5}, 1)
    conn.notify("notifications/message", {"level": "error", "data": "x"}, 1)
    assert conn.outgoing() == []


def test_stream_servers_run_tasks_and_stop_a_cancelled_run() -> None:
    from mrtr_sansio.adapters import ServerDriver

    server = Server(as_task(done))
    conn = m.ServerConnection(server.config)
    started: list[m.RequestReceived] = []
    cancelled: list[Any] = []
    driver = ServerDriver(conn, started.append, cancelled.append)
    driver.receive(json.dumps(call(1)).encode() + b"\n")
    (front,) = started
    driver.answer(front, as_task(done)(front))
    run = started[-1]
    assert run.task_id is not None
    conn.outgoing()
    driver.receive(json.dumps(task_request(2, "tasks/cancel", run.task_id)).encode() + b"\n")
    assert cancelled == [run.task_id]
    driver.answer(run, done(run))  # the run ends anyway: its result is dropped
    assert get(server, run.task_id)["result"]["status"] == "cancelled"


def test_a_stream_server_with_a_pool_hands_it_the_runs_and_their_cancels() -> None:
    from mrtr_sansio.adapters import ServerDriver

    server = Server(as_task(done))
    conn = m.ServerConnection(server.config)
    started: list[m.RequestReceived] = []
    runs: list[m.RequestReceived] = []
    seen: list[Any] = []
    driver = ServerDriver(
        conn, started.append, seen.append, run_task=runs.append, cancel_task=seen.append
    )
    driver.receive(json.dumps(call(1)).encode() + b"\n")
    (front,) = started
    driver.answer(front, as_task(done)(front))
    (run,) = runs  # the pool's, not a handler of the stream's
    assert started == [front]
    assert run.task_id is not None
    conn.outgoing()
    driver.receive(json.dumps(task_request(2, "tasks/cancel", run.task_id)).encode() + b"\n")
    assert seen == [run.task_id]


class _Contended(InMemoryTaskStore):
    """A store where another writer always got there first."""

    def replace(self, task: Task, revision: int) -> bool:
        return False


def test_a_store_that_keeps_changing_is_an_internal_error_not_a_traceback() -> None:
    store = _Contended()
    server = Server(as_task(done), store=store)
    task_id = create(server, run=False)
    response = server.send(task_request(2, "tasks/cancel", task_id))
    assert response["error"]["code"] == -32603
    assert "kept changing" in response["error"]["message"]


def test_the_machine_treats_a_non_string_id_as_unknown() -> None:
    machine = m.ServerConnection(Server(done).config)._tasks
    assert machine is not None
    assert machine.find(5, None) == "Task not found"


def test_renew_task_without_task_settings_is_a_local_error() -> None:
    with pytest.raises(m.LocalProtocolError, match="renew_task needs"):
        m.ServerConnection(m.ServerConfig()).renew_task("t")


def test_detailed_task_is_what_tasks_get_shows_that_caller() -> None:
    server = Server(as_task(ask_name))
    task_id = create(server, principal="alice")
    conn = m.ServerConnection(server.config)
    shown = get(server, task_id, principal="alice")["result"]
    detail = conn.detailed_task(task_id, "alice")
    assert detail is not None
    assert {**detail, "resultType": "complete"} == {k: v for k, v in shown.items() if k != "_meta"}
    assert conn.detailed_task(task_id, "mallory") is None
    assert conn.detailed_task("nope", "alice") is None
    with pytest.raises(m.LocalProtocolError, match="detailed_task needs"):
        m.ServerConnection(m.ServerConfig()).detailed_task(task_id)


@pytest.mark.parametrize("method", ["tools/call", "prompts/get", "resources/read"])
def test_only_the_task_method_can_create_a_task(method: str) -> None:
    # The event's answer and the task machine's refusal follow the one TASK_METHOD.
    conn = m.ServerConnection(Server(done).config)
    params: dict[str, Any] = {"_meta": meta(TASK_CAPS)}
    params.update({"uri": "file:///x"} if method == "resources/read" else {"name": "work"})
    conn.receive_message({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    event = conn.next_event()
    assert isinstance(event, m.RequestReceived)
    assert event.tasks_declared
    assert event.can_create_task is (method == TASK_METHOD)
    if method == TASK_METHOD:
        conn.respond(1, RunAsTask())
        assert conn.in_flight == set()
    else:
        with pytest.raises(m.LocalProtocolError, match="cannot become a task"):
            conn.respond(1, RunAsTask())
