"""The tasks extension's bounds and faults in the core: the bytes a task stores (per task, per
principal, in all), what a task keeps once and releases when it ends, the sweep of expired
tasks through the server connection's timer, a store fault answered -32603, a run's outcome
saved again after the store failed, and ``TaskSettings`` checked at construction.

Each limit is tested at the limit and one past it. The fault-injecting store below stands for
a broken disk or a Redis that went away: there is no real peer for those.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import mrtr_sansio as m
from helpers import CAPS, FORM_SCHEMA, Clock, meta
from mrtr_sansio.adapters.stores import SqliteTaskStore
from mrtr_sansio.tasks import (
    InMemoryTaskStore,
    MeteredTaskStore,
    RunAsTask,
    Task,
    TaskSettings,
    TaskStoreError,
)
from test_tasks import (
    TASK_CAPS,
    Server,
    accept,
    as_task,
    ask_name,
    call,
    create,
    done,
    get,
    task_request,
)

# --- a store that fails on demand ------------------------------------------------------------


class FaultyStore(InMemoryTaskStore):
    """The in-memory store, failing while ``fault`` is set: with a :class:`TaskStoreError`
    (a store that reports its faults) or any exception (a store that does not); ``corrupt``
    names records whose read fails alone."""

    def __init__(self, *, durable: bool = False) -> None:
        super().__init__()
        self.durable = durable
        self.fault: Exception | None = None
        self.corrupt: set[str] = set()

    def _check(self) -> None:
        if self.fault is not None:
            raise self.fault

    def create(self, task: Task) -> bool:
        self._check()
        return super().create(task)

    def get(self, task_id: str) -> Task | None:
        self._check()
        if task_id in self.corrupt:
            raise TaskStoreError(f"record {task_id} is not valid JSON")
        return super().get(task_id)

    def replace(self, task: Task, revision: int) -> bool:
        self._check()
        return super().replace(task, revision)

    def delete(self, task_id: str) -> None:
        self._check()
        super().delete(task_id)

    def count(self, owner: str | None, now: float) -> int:
        self._check()
        return super().count(owner, now)

    def sweep(self, now: float, limit: int) -> int:
        self._check()
        return super().sweep(now, limit)


DOWN = TaskStoreError("disk unavailable")


def one_connection(server: Server) -> tuple[m.ServerConnection, Callable[..., dict[str, Any]]]:
    """One connection over ``server``'s config, and a function that feeds it a message and
    answers what it queues (handler runs included) until the message's response is out."""
    conn = m.ServerConnection(server.config)

    def send(message: dict[str, Any]) -> dict[str, Any]:
        conn.receive_message(message)
        return drive(server, conn)

    return conn, send


def drive(server: Server, conn: m.ServerConnection) -> dict[str, Any]:
    """Run what ``conn`` queued; its one response."""
    responses = []
    while (event := conn.next_event()) is not m.NEED_DATA:
        if type(event) is m.RequestReceived:
            if event.task_id is not None:
                conn.settle_task(event, server.handler(event))
            else:
                conn.respond(event.request_id, server.handler(event))
    for item in conn.outgoing():
        if "id" in item.message:
            responses.append(dict(item.message))
    assert len(responses) == 1, responses
    return responses[0]


def size_of(server: Server, task_id: str) -> int:
    stored = server.store.get(task_id)
    assert stored is not None
    return stored.size


def refused(response: dict[str, Any], field: str) -> None:
    assert response["error"]["code"] == -32603, response
    assert f"TaskSettings.{field}" in response["error"]["message"], response


def big_call(rid: Any, items: int = 1000) -> dict[str, Any]:
    return call(rid, arguments={"items": [{}] * items})


# --- bytes per task ------------------------------------------------------------------------------


def measured(**settings: Any) -> int:
    """The size the record of ``big_call`` has when it is created."""
    server = Server(as_task(done), **settings)
    return size_of(server, create_big(server))


def create_big(server: Server, rid: Any = 1, **kw: Any) -> str:
    result = server.send(big_call(rid), run=False, **kw)["result"]
    assert result["resultType"] == "task", result
    task_id: str = result["taskId"]
    return task_id


def test_a_task_stores_its_params_once_as_compact_json() -> None:
    server = Server(as_task(done))
    task_id = create_big(server)
    stored = server.store.get(task_id)
    assert stored is not None
    assert isinstance(stored.params_json, str)
    assert stored.params["arguments"] == {"items": [{}] * 1000}
    assert stored.size == len(stored.params_json) + len("null{}{}nullnull")
    assert stored.capabilities == TASK_CAPS


def test_the_first_run_gets_the_params_without_decoding_the_record() -> None:
    server = Server(as_task(done))
    create_big(server)
    (run,) = server.runs
    assert run.params["arguments"] == {"items": [{}] * 1000}


def test_bytes_per_task_at_the_limit_and_past_it() -> None:
    size = measured()
    server = Server(as_task(done), max_task_bytes=size)
    create_big(server)
    server = Server(as_task(done), max_task_bytes=size - 1)
    response = server.send(big_call(1))
    refused(response, "max_task_bytes")
    assert f"would store {size} bytes" in response["error"]["message"]
    assert len(server.store) == 0


def test_bytes_per_principal_at_the_limit_and_past_it() -> None:
    size = measured()
    server = Server(as_task(done), max_task_bytes_per_principal=2 * size)
    create_big(server, 1, principal="alice")
    create_big(server, 2, principal="alice")  # exactly at the limit
    refused(server.send(big_call(3), principal="alice"), "max_task_bytes_per_principal")
    create_big(server, 4, principal="bob")  # another principal has its own allowance


def test_bytes_in_all_at_the_limit_and_past_it() -> None:
    size = measured()
    server = Server(as_task(done), max_task_bytes_total=2 * size)
    create_big(server, 1, principal="alice")
    create_big(server, 2, principal="bob")
    refused(server.send(big_call(3), principal="carol"), "max_task_bytes_total")


def test_expired_tasks_give_their_bytes_back_to_a_new_task() -> None:
    size = measured()
    server = Server(as_task(done), max_task_bytes_per_principal=size, ttl_ms=1000)
    create_big(server)
    refused(server.send(big_call(2)), "max_task_bytes_per_principal")
    server.clock.now += 1
    create_big(server, 3)  # the expired record was swept to make room


def test_a_terminal_task_releases_what_only_a_run_needs() -> None:
    server = Server(as_task(done))
    task_id = create_big(server)
    assert size_of(server, task_id) > 3000
    server.send(task_request(2, "tasks/cancel", task_id))
    assert get(server, task_id)["result"]["status"] == "cancelled"
    stored = server.store.get(task_id)
    assert stored is not None
    assert (stored.params_json, stored.answers, stored.capabilities) == ("{}", {}, {})
    assert stored.size == len("{}null{}{}nullnull")  # params ... error
    assert server.store.usage(None) == (stored.size, stored.size)


def test_the_store_meters_the_bytes_of_each_owner() -> None:
    store = InMemoryTaskStore()
    assert isinstance(store, MeteredTaskStore)
    server = Server(as_task(done), store=store)
    a = create_big(server, 1, principal="a")
    create_big(server, 2, principal="b")
    one = size_of(server, a)
    assert store.usage("a") == (one, 2 * one)
    store.delete(a)
    assert store.usage("a") == (0, one)


def answer_run(size: int) -> Callable[[m.RequestReceived], Any]:
    """Asks for a name, then answers ``size`` bytes of text."""

    def handler(request: m.RequestReceived) -> Any:
        if request.can_create_task:
            return RunAsTask()
        content = request.input_responses.accepted_content("name")
        if content is None:
            return m.InputRequiredResult({"name": m.elicit_form("Name?", FORM_SCHEMA)})
        return {"content": [{"type": "text", "text": "x" * size}]}

    return handler


def long_name() -> dict[str, Any]:
    return accept("n" * 5000)


def updated_size() -> int:
    """The size of ``answer_run``'s record once the long name is answered (its run held)."""
    server = Server(answer_run(1))
    task_id = create(server)
    update = task_request(2, "tasks/update", task_id, inputResponses={"name": long_name()})
    server.send(update, run=False)
    return size_of(server, task_id)


def test_a_tasks_update_at_the_limit_and_past_it() -> None:
    size = updated_size()
    server = Server(answer_run(1), max_task_bytes=size)
    task_id = create(server)
    result = server.send(
        task_request(2, "tasks/update", task_id, inputResponses={"name": long_name()})
    )
    assert "result" in result
    assert get(server, task_id)["result"]["status"] == "completed"

    server = Server(answer_run(1), max_task_bytes=size - 1)
    task_id = create(server)
    response = server.send(
        task_request(2, "tasks/update", task_id, inputResponses={"name": long_name()})
    )
    refused(response, "max_task_bytes")
    waiting = get(server, task_id)["result"]
    assert waiting["status"] == "input_required"  # the answer was not taken
    server.send(task_request(3, "tasks/update", task_id, inputResponses={"name": accept("a")}))
    assert get(server, task_id)["result"]["status"] == "completed"


def completed_size(text: int) -> int:
    server = Server(as_task(lambda r: {"content": [{"type": "text", "text": "x" * text}]}))
    return size_of(server, create(server))


def test_a_result_at_the_limit_completes_and_past_it_fails_the_task() -> None:
    size = completed_size(20_000)
    handler = as_task(lambda r: {"content": [{"type": "text", "text": "x" * 20_000}]})
    server = Server(handler, max_task_bytes=size)
    assert get(server, create(server))["result"]["status"] == "completed"
    server = Server(handler, max_task_bytes=size - 1)
    failed = get(server, create(server))["result"]
    assert failed["status"] == "failed"
    assert failed["error"]["code"] == -32603
    assert "TaskSettings.max_task_bytes" in failed["statusMessage"]


def test_a_record_in_the_format_before_params_json_is_read() -> None:
    old: dict[str, Any] = {
        "task_id": "t",
        "owner": None,
        "status": "input_required",
        "created_at": 0.0,
        "updated_at": 0.0,
        "ttl_ms": None,
        "poll_interval_ms": None,
        "params": {"name": "work", "_meta": meta(TASK_CAPS)},
        "state": None,
        "round": 1,
        "status_message": None,
        "outstanding": {},
        "answers": {},
        "issued": [],
        "result": None,
        "error": None,
        "revision": 0,
        "lease_until": None,
    }
    task = Task.from_record(old)
    assert task.params == old["params"]
    assert task.capabilities == TASK_CAPS
    assert Task.from_record(task.to_record()) == task


# --- the sweep and the quota ------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "sqlite", "sqlite-restarted"])
def test_expired_tasks_do_not_count_and_are_swept(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    store: Any = InMemoryTaskStore() if kind == "memory" else SqliteTaskStore(path)
    clock = Clock(1_785_000_000.0)
    server = Server(as_task(done), store=store, clock=clock, max_tasks=3, ttl_ms=1500)
    ids = [create(server, i, principal="p") for i in range(3)]
    refused_now = server.send(call(9), principal="p")
    assert refused_now["error"] == {"code": -32603, "message": "Too many tasks (the limit is 3)"}
    clock.now += 2
    if kind == "sqlite-restarted":
        store.close()
        store = SqliteTaskStore(path)  # a new process on the same file
        server = Server(as_task(done), store=store, clock=clock, max_tasks=3, ttl_ms=1500)
    conn = m.ServerConnection(server.config)
    deadline = conn.next_deadline()
    assert deadline == clock.now + 60.0  # TaskSettings.sweep_interval
    conn.handle_timer(deadline)
    assert all(store.get(task_id) is None for task_id in ids)  # swept
    create(server, 10, principal="p")  # accepted: the three expired
    if kind != "memory":
        store.close()


def test_a_task_is_accepted_as_soon_as_the_others_expired_even_before_a_sweep() -> None:
    server = Server(as_task(done), max_tasks=3, ttl_ms=1500)
    for i in range(3):
        create(server, i)
    server.clock.now += 2
    create(server, 4)
    assert len(server.store) == 4  # no sweep ran: counting skips expired records


def test_a_sweep_deletes_at_most_its_batch_and_sweeps_again_at_once() -> None:
    server = Server(as_task(done), ttl_ms=1000, sweep_batch=2, sweep_interval=10.0)
    for i in range(3):
        create(server, i)
    conn = m.ServerConnection(server.config)
    now = server.clock.now = server.clock.now + 10
    conn.handle_timer(now)
    assert len(server.store) == 1  # the batch: two
    assert conn.next_deadline() == now  # more may be left: due again
    conn.handle_timer(now)
    assert len(server.store) == 0
    assert conn.next_deadline() == now + 10.0


def test_a_sweep_of_a_full_batch_only_when_due() -> None:
    server = Server(as_task(done), ttl_ms=1000, sweep_batch=2, sweep_interval=10.0)
    for i in range(2):
        create(server, i)
    conn = m.ServerConnection(server.config)
    server.clock.now += 5
    conn.handle_timer(server.clock.now)  # not due
    assert len(server.store) == 2
    conn.handle_timer(server.clock.now + 5)
    assert len(server.store) == 0


def test_a_store_fault_during_a_sweep_waits_for_the_next_one() -> None:
    store = FaultyStore()
    server = Server(as_task(done), store=store, ttl_ms=1000)
    create(server)
    conn = m.ServerConnection(server.config)
    due = conn.next_deadline()
    assert due is not None
    store.fault = DOWN
    conn.handle_timer(due)
    assert conn.next_deadline() == due + 60.0
    store.fault = None
    conn.handle_timer(due + 60.0)
    assert len(store) == 0


# --- a store fault is a JSON-RPC error ---------------------------------------------------------


def plain_call(rid: Any) -> dict[str, Any]:
    return call(rid, name="plain", caps=CAPS)


def test_a_store_fault_answers_32603_naming_it_and_the_connection_serves_on() -> None:
    store = FaultyStore()
    server = Server(as_task(done), store=store)
    task_id = create(server)
    _, send = one_connection(server)
    store.fault = DOWN
    for rid, method in enumerate(("tasks/get", "tasks/update", "tasks/cancel")):
        response = send(task_request(rid, method, task_id, inputResponses={}))
        assert response["error"] == {
            "code": -32603,
            "message": "The task store could not read the task: disk unavailable",
        }, method
    response = send(call(7))
    assert response["error"] == {
        "code": -32603,
        "message": "The task store could not count tasks: disk unavailable",
    }
    assert send(plain_call(8))["result"]["content"][0]["text"] == "done"  # not a task: served
    store.fault = None
    assert send(task_request(9, "tasks/get", task_id))["result"]["status"] == "completed"


def test_an_unexpected_store_exception_is_named_by_its_type_only() -> None:
    store = FaultyStore()
    server = Server(as_task(done), store=store)
    task_id = create(server)
    store.fault = ConnectionError("redis://:hunter2@cache:6379 refused")
    response = get(server, task_id)
    assert response["error"] == {
        "code": -32603,
        "message": "The task store could not read the task (ConnectionError)",
    }
    assert "hunter2" not in str(response)


def test_a_store_that_fails_to_create_answers_the_call_32603() -> None:
    store = FaultyStore()
    server = Server(as_task(done), store=store)
    conn, send = one_connection(server)
    store.count = lambda owner, now: 0  # type: ignore[method-assign]
    store.fault = DOWN
    response = send(call(1))
    assert response["error"] == {
        "code": -32603,
        "message": "The task store could not create the task: disk unavailable",
    }
    assert conn.in_flight == frozenset()


def test_a_corrupt_record_affects_only_its_task() -> None:
    store = FaultyStore()
    server = Server(as_task(done), store=store)
    broken, sound = create(server, 1), create(server, 2)
    store.corrupt.add(broken)
    response = get(server, broken)
    assert response["error"]["code"] == -32603
    assert response["error"]["message"] == (
        f"The task store could not read the task: record {broken} is not valid JSON"
    )
    assert get(server, sound)["result"]["status"] == "completed"
    create(server, 3)


def test_renewing_a_lease_through_a_store_fault_keeps_the_run_going() -> None:
    store = FaultyStore()
    server = Server(as_task(done), store=store, lease_seconds=30)
    task_id = create(server, run=False)
    conn = m.ServerConnection(server.config)
    store.fault = DOWN
    assert conn.renew_task(task_id)


def test_detailed_task_raises_the_store_fault() -> None:
    store = FaultyStore()
    server = Server(as_task(done), store=store)
    task_id = create(server)
    store.fault = DOWN
    with pytest.raises(TaskStoreError, match="could not read the task: disk unavailable"):
        m.ServerConnection(server.config).detailed_task(task_id)


# --- no outcome is lost --------------------------------------------------------------------------


def held_run(store: FaultyStore, **settings: Any) -> tuple[Server, str, m.RequestReceived]:
    server = Server(as_task(done), store=store, **settings)
    task_id = create(server, run=False)
    (run,) = server.runs
    return server, task_id, run


def test_an_outcome_the_store_refused_is_saved_by_a_retry() -> None:
    store = FaultyStore()
    server, task_id, run = held_run(store)
    conn = m.ServerConnection(server.config)
    now = server.clock.now
    store.fault = DOWN
    assert conn.unsaved_task_outcomes == 0
    conn.settle_task(run, done(run))  # no exception: kept for a retry
    assert conn.unsaved_task_outcomes == 1
    assert conn.next_deadline() == now + 0.5  # TaskSettings.settle_backoff
    conn.handle_timer(now + 0.5)
    assert conn.next_deadline() == now + 0.5 + 1.0  # doubled
    store.fault = None
    conn.handle_timer(now + 1.5)
    assert conn.unsaved_task_outcomes == 0
    assert get(server, task_id)["result"]["status"] == "completed"
    assert conn.next_deadline() == now + 60.0  # only the sweep is left


def test_a_state_only_outcome_saved_by_a_retry_queues_the_next_run() -> None:
    store = FaultyStore()
    server, _, run = held_run(store)
    conn = m.ServerConnection(server.config)
    store.fault = DOWN
    conn.settle_task(run, m.InputRequiredResult(request_state="step-2"))
    store.fault = None
    conn.handle_timer(server.clock.now + 0.5)
    event = conn.next_event()
    assert isinstance(event, m.RequestReceived)
    assert (event.task_id, event.request_state) == (run.task_id, "step-2")


def test_past_its_attempts_the_outcome_becomes_the_tasks_failure() -> None:
    store = FaultyStore()
    server, task_id, run = held_run(store, settle_attempts=2, settle_backoff=1.0)
    conn = m.ServerConnection(server.config)
    now = server.clock.now
    store.fault = DOWN
    conn.settle_task(run, done(run))  # attempt 1
    conn.handle_timer(now + 1)  # attempt 2: the last with the outcome
    assert conn.next_deadline() == now + 2  # the failure, at the first backoff
    store.fault = None
    conn.handle_timer(now + 2)
    failed = get(server, task_id)["result"]
    assert failed["status"] == "failed"
    assert failed["statusMessage"] == (
        "The task's outcome could not be saved: "
        "the task store could not read the task: disk unavailable"
    )


def test_a_store_down_for_good_leaves_the_task_to_its_lease() -> None:
    store = FaultyStore(durable=True)
    server, task_id, run = held_run(store, settle_attempts=1, settle_backoff=1.0)
    assert server.config.tasks is not None
    assert server.config.tasks.lease_seconds == 30.0  # on by default for a durable store
    conn = m.ServerConnection(server.config)
    now = server.clock.now
    store.fault = DOWN
    conn.settle_task(run, done(run))  # the outcome: one attempt
    conn.handle_timer(now + 1)  # the failure: one attempt, then the write is dropped
    assert conn.unsaved_task_outcomes == 0
    assert conn.next_deadline() == now + 60.0
    store.fault = None
    assert get(server, task_id)["result"]["status"] == "working"
    server.clock.now += 31
    failed = get(server, task_id)["result"]
    assert failed["status"] == "failed"  # not working until its TTL
    assert failed["statusMessage"] == "The worker running this task stopped before it finished"


def test_settle_attempts_at_the_limit_and_past_it() -> None:
    # settle_attempts=3: the third attempt still writes the outcome, a fourth would not.
    store = FaultyStore()
    server, task_id, run = held_run(store, settle_attempts=3, settle_backoff=1.0)
    conn = m.ServerConnection(server.config)
    now = server.clock.now
    store.fault = DOWN
    conn.settle_task(run, done(run))
    conn.handle_timer(now + 1)
    store.fault = None
    conn.handle_timer(now + 3)  # third attempt (backoff 1, then 2)
    assert get(server, task_id)["result"]["status"] == "completed"

    store = FaultyStore()
    server, task_id, run = held_run(store, settle_attempts=3, settle_backoff=1.0)
    conn = m.ServerConnection(server.config)
    store.fault = DOWN
    conn.settle_task(run, done(run))
    conn.handle_timer(now + 1)
    conn.handle_timer(now + 3)  # the third fails too: from now on, the failure
    store.fault = None
    conn.handle_timer(now + 4)
    assert get(server, task_id)["result"]["status"] == "failed"


# --- settings checked at construction ------------------------------------------------------------


def test_leases_are_on_by_default_for_a_durable_store_only(tmp_path: Path) -> None:
    sqlite = SqliteTaskStore(tmp_path / "tasks.db")
    try:
        assert TaskSettings(store=sqlite).lease_seconds == 30.0
        assert TaskSettings(store=sqlite, lease_seconds=None).lease_seconds is None
        assert TaskSettings(store=sqlite, lease_seconds=5).lease_seconds == 5
    finally:
        sqlite.close()
    assert TaskSettings(store=InMemoryTaskStore()).lease_seconds is None


@pytest.mark.parametrize(
    ("settings", "error", "message"),
    [
        ({"store": "tasks.db"}, TypeError, "store: must be a TaskStore .* got str"),
        ({"tools": ["a"]}, TypeError, "tools: must be a mapping of tool name .* got list"),
        ({"tools": {1: "optional"}}, TypeError, "tool names must be strings"),
        ({"tools": {"a": "maybe"}}, ValueError, r"tools\['a'\]: must be .* got 'maybe'"),
        ({"max_task_bytes": 0}, ValueError, "max_task_bytes"),
        ({"max_task_bytes_per_principal": 0}, ValueError, "max_task_bytes_per_principal"),
        ({"max_task_bytes_total": -1}, ValueError, "max_task_bytes_total"),
        ({"sweep_interval": 0}, ValueError, "sweep_interval: must be a positive number"),
        ({"sweep_batch": 0}, ValueError, "sweep_batch"),
        ({"settle_attempts": 0}, ValueError, "settle_attempts"),
        ({"settle_backoff": None}, ValueError, "settle_backoff"),
    ],
)
def test_task_settings_refuse_bad_values_at_construction(
    settings: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        TaskSettings(**settings)


def test_server_config_refuses_tasks_that_are_not_task_settings() -> None:
    with pytest.raises(TypeError, match=r"tasks: must be a TaskSettings\(\.\.\.\).* got dict"):
        m.ServerConfig(tasks={"tools": {"a": "optional"}})  # type: ignore[arg-type]


def test_ask_name_still_runs_with_the_capabilities_kept_in_the_record() -> None:
    server = Server(as_task(ask_name))
    task_id = create(server)
    assert get(server, task_id)["result"]["status"] == "input_required"
    server.send(task_request(2, "tasks/update", task_id, inputResponses={"name": accept("Ada")}))
    result = get(server, task_id)["result"]
    assert result["status"] == "completed"
    assert result["result"]["content"][0]["text"] == "Hello, Ada!"


def test_the_limits_page_lists_every_task_setting_with_its_default() -> None:
    import importlib.util

    import attrs

    docs = Path(__file__).resolve().parents[1] / "docs"
    spec = importlib.util.spec_from_file_location("docs_generate", docs / "hooks" / "generate.py")
    assert spec is not None
    assert spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    assert "\n<!-- config: TaskSettings -->\n" in (docs / "limits.md").read_text(encoding="utf-8")
    table = hook.config_markdown("TaskSettings")
    defaults = TaskSettings()
    for name in ("max_task_bytes", "max_task_bytes_per_principal", "max_task_bytes_total"):
        assert f"| `{name}` | {getattr(defaults, name) // (1024 * 1024)} MiB (" in table, name
    for name in ("sweep_interval", "sweep_batch", "settle_attempts", "settle_backoff"):
        assert f"| `{name}` | `{getattr(defaults, name)!r}` |" in table, name
    assert {f.name for f in attrs.fields(TaskSettings)} == set(
        re.findall(r"^\| `(\w+)` \|", table, re.MULTILINE)
    )
