"""The bounds of ``subscriptions/listen`` streams through the ASGI app on the example fixtures:
``taskIds`` deduplicated and capped, streams capped per principal and in total, an idle
timeout and a lifetime that end a stream gracefully (a ``SubscriptionsListenResult``), a
client that never reads dropped once its queue passes its bound, store faults that never
reach the client, and a change pushed by the store instead of a poll.

Every message is validated against the 2026-07-28 schema and the tasks extension's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncIterator, MutableMapping, Sequence
from typing import Any

import anyio
import attrs
import pytest
from fixtures import Everything, server_config
from http_harness import JSON_HEADERS, Client, Request, scope
from test_tasks_http import body
from test_tasks_notifications import CONFIRM, answer, create, listen, next_note, notes_until

import mrtr_sansio as m
from helpers import MODERN, check, check_task_message
from mrtr_sansio.adapters import SubscriptionHub
from mrtr_sansio.adapters.asgi import McpHttpApp
from mrtr_sansio.tasks import InMemoryTaskStore, Task, TaskStoreError

pytestmark = pytest.mark.anyio

SID = m.protocol.SUBSCRIPTION_ID
A = {"x-test-principal": "a"}
B = {"x-test-principal": "b"}


def _principal(asgi_scope: Any) -> str | None:
    for name, value in asgi_scope["headers"]:
        if name == b"x-test-principal":
            return str(value.decode())
    return None


class CountingStore(InMemoryTaskStore):
    """The in-memory store, counting the reads made of it; ``failing`` makes reads fail."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.failing = False

    def get(self, task_id: str) -> Task | None:
        self.reads += 1
        if self.failing:
            raise TaskStoreError("the disk is on fire")
        return super().get(task_id)

    def get_many(self, task_ids: Sequence[str]) -> list[Task | None]:
        self.reads += 1
        if self.failing:
            raise TaskStoreError("the disk is on fire")
        return super().get_many(task_ids)


def make_app(
    hub: SubscriptionHub | None = None, store: Any = None, **options: Any
) -> tuple[McpHttpApp, Everything]:
    everything = Everything()
    if hub is not None:
        everything.hub = hub
    config = server_config(
        task_store=store, request_state=m.sealing.RequestStateSecurity.ephemeral()
    )
    limit = options.pop("max_listen_task_ids", None)
    if limit is not None:
        assert config.tasks is not None
        config = attrs.evolve(config, tasks=attrs.evolve(config.tasks, max_listen_task_ids=limit))
    return McpHttpApp(everything.handle, config, principal=_principal, **options), everything


@pytest.fixture
async def tg() -> AsyncIterator[anyio.abc.TaskGroup]:
    async with anyio.create_task_group() as group:
        yield group
        group.cancel_scope.cancel()


def tools_listen(client: Client, rid: int, **headers: str) -> Request:
    message = body(rid, "subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    mirror = {"mcp-protocol-version": MODERN, "mcp-method": "subscriptions/listen"}
    return client.start(message, {**mirror, **headers})


async def refusal(stream: Request) -> dict[str, Any]:
    """The error a listen request was answered with (the whole response)."""
    with anyio.fail_after(5):
        await stream.response.done.wait()
    (reply,) = stream.response.messages()
    check_task_message(reply, method="subscriptions/listen")
    return reply["error"]  # type: ignore[no-any-return]


async def graceful_end(stream: Request, rid: int, within: float) -> None:
    """Read ``stream`` up to its ``SubscriptionsListenResult``, which must end it."""
    with anyio.fail_after(within):
        while True:
            message = await stream.response.next_message()
            assert message is not None, "the stream ended without a result"
            if "result" in message:
                break
        await stream.finished.wait()
    check(MODERN, "SubscriptionsListenResultResponse", message)
    assert message["id"] == rid
    assert message["result"]["_meta"][SID] == rid
    assert message["result"]["resultType"] == "complete"
    assert await stream.response.next_message() is None  # nothing after it: the stream ended


# --- taskIds ----------------------------------------------------------------------------------


async def test_task_ids_are_deduplicated_and_each_change_is_sent_once(tg: Any) -> None:
    app, _ = make_app()
    client = Client(app, tg)
    task_id = await create(client, 1, "confirm_delete", {"filename": "d.txt"})
    stream = await listen(client, 2, [task_id] * 5000 + ["x" * 65, task_id])
    ack = await next_note(stream)
    assert ack["params"]["notifications"] == {"taskIds": [task_id]}
    first = await notes_until(stream, "input_required")
    await answer(client, body(3, "tasks/update", {"taskId": task_id, "inputResponses": CONFIRM}))
    rest = await notes_until(stream, "completed")
    statuses = [n["status"] for n in first + rest]
    assert len(statuses) == len(set(statuses))  # no status twice: one watch, not 5,000
    stream.disconnect()


async def test_task_ids_at_the_limit_are_honored_and_one_past_it_is_32602(tg: Any) -> None:
    app, _ = make_app(max_listen_task_ids=3)
    client = Client(app, tg)
    ids = [await create(client, i, "confirm_delete", {"filename": f"{i}"}) for i in (1, 2, 3, 4)]
    at_limit = await listen(client, 5, [*ids[:3], ids[0], ids[1]])  # duplicates do not count
    ack = await next_note(at_limit)
    assert ack["params"]["notifications"] == {"taskIds": ids[:3]}
    at_limit.disconnect()
    past = await listen(client, 6, ids)
    error = await refusal(past)
    assert error["code"] == -32602
    assert "4 distinct tasks" in error["message"]
    assert "at most 3" in error["message"]


async def test_ids_no_server_issues_are_ignored_before_any_store_access(tg: Any) -> None:
    store = CountingStore()
    app, _ = make_app(store=store)
    client = Client(app, tg)
    stream = await listen(client, 1, ["", "x" * 65, "caf\u00e9", "a\nb", 7, None])  # type: ignore[list-item]
    ack = await next_note(stream)
    assert ack["params"]["notifications"] == {"taskIds": []}
    assert store.reads == 0
    stream.disconnect()


async def test_another_principals_task_is_never_honored_nor_notified(tg: Any) -> None:
    app, _ = make_app()
    client = Client(app, tg)
    theirs = await create(client, 1, "confirm_delete", {"filename": "t"}, **A)
    stream = await listen(client, 2, [theirs], **B)
    ack = await next_note(stream)
    assert ack["params"]["notifications"] == {"taskIds": []}
    update = {"taskId": theirs, "inputResponses": CONFIRM}
    await answer(client, body(3, "tasks/update", update), **A)
    with anyio.move_on_after(0.5):
        note = await stream.response.next_message()
        pytest.fail(f"b was told of a's task: {note!r}")
    stream.disconnect()


# --- streams per principal and in total -------------------------------------------------------


async def test_streams_per_principal_at_the_limit_and_one_past_it(tg: Any) -> None:
    hub = SubscriptionHub(max_streams_per_principal=2)
    app, _ = make_app(hub)
    client = Client(app, tg)
    open_a = [tools_listen(client, i, **A) for i in (1, 2)]
    for stream in open_a:
        assert (await next_note(stream))["method"] == "notifications/subscriptions/acknowledged"
    assert hub.streams_of("a") == 2
    error = await refusal(tools_listen(client, 3, **A))
    assert error["code"] == -32603
    assert "limit is 2" in error["message"]
    other = tools_listen(client, 4, **B)  # another principal has its own allowance
    assert (await next_note(other))["method"] == "notifications/subscriptions/acknowledged"
    open_a[0].disconnect()
    await open_a[0].finished.wait()
    again = tools_listen(client, 5, **A)
    assert (await next_note(again))["method"] == "notifications/subscriptions/acknowledged"
    for stream in (open_a[1], other, again):
        stream.disconnect()


async def test_closed_streams_give_their_principal_the_whole_allowance_again(tg: Any) -> None:
    """Over HTTP closing the response stream is the cancellation (2026-07-28): each closed
    stream is unwatched and its slot freed."""
    hub = SubscriptionHub(max_streams_per_principal=2)
    app, _ = make_app(hub)
    client = Client(app, tg)
    first = [tools_listen(client, i, **A) for i in (1, 2)]
    for stream in first:
        await next_note(stream)
    for stream in first:
        stream.disconnect()
        await stream.finished.wait()
    assert hub.streams_of("a") == 0
    again = [tools_listen(client, i, **A) for i in (3, 4)]
    for stream in again:
        assert (await next_note(stream))["method"] == "notifications/subscriptions/acknowledged"
    assert hub.streams_of("a") == 2
    for stream in again:
        stream.disconnect()


async def test_streams_in_total_at_the_limit_and_one_past_it(tg: Any) -> None:
    hub = SubscriptionHub(max_streams=2)
    app, _ = make_app(hub)
    client = Client(app, tg)
    streams = [tools_listen(client, 1, **A), tools_listen(client, 2)]  # no principal counts
    for stream in streams:
        await next_note(stream)
    assert len(hub) == 2
    error = await refusal(tools_listen(client, 3, **B))
    assert error["code"] == -32603
    assert "limit is 2" in error["message"]
    for stream in streams:
        stream.disconnect()


def test_hub_bounds_must_be_positive() -> None:
    with pytest.raises(ValueError, match="idle_timeout must be a positive number"):
        SubscriptionHub(idle_timeout=0)
    with pytest.raises(ValueError, match="max_streams_per_principal"):
        SubscriptionHub(max_streams_per_principal=True)


# --- idle timeout and lifetime ----------------------------------------------------------------


async def test_an_idle_stream_ends_gracefully_with_a_listen_result(tg: Any) -> None:
    hub = SubscriptionHub(idle_timeout=0.3)
    app, _ = make_app(hub)
    client = Client(app, tg)
    began = time.monotonic()
    stream = tools_listen(client, 9)
    await next_note(stream)
    await graceful_end(stream, 9, within=5)
    assert 0.3 <= time.monotonic() - began < 3
    assert len(hub) == 0


async def test_notifications_keep_a_stream_from_idling_out(tg: Any) -> None:
    hub = SubscriptionHub(idle_timeout=0.4)
    app, _ = make_app(hub)
    client = Client(app, tg)
    stream = tools_listen(client, 1)
    await next_note(stream)
    for _ in range(6):  # 0.9 s in all, never 0.4 s without a notification
        await anyio.sleep(0.15)
        hub.publish("notifications/tools/list_changed")
        assert (await next_note(stream))["method"] == "notifications/tools/list_changed"
    hub.publish("notifications/prompts/list_changed")  # not opted in: not activity
    await graceful_end(stream, 1, within=5)


async def test_a_stream_ends_gracefully_at_its_lifetime_however_busy(tg: Any) -> None:
    hub = SubscriptionHub(max_lifetime=0.5)
    app, _ = make_app(hub)
    client = Client(app, tg)
    began = time.monotonic()
    stream = tools_listen(client, 4)
    await next_note(stream)

    async def chatter() -> None:
        while True:
            hub.publish("notifications/tools/list_changed")
            await anyio.sleep(0.05)

    tg.start_soon(chatter)
    await graceful_end(stream, 4, within=5)
    assert 0.5 <= time.monotonic() - began < 3


# --- a client that does not read ---------------------------------------------------------------


async def test_a_client_that_never_reads_is_dropped_past_the_queue_bound(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The ASGI ``send`` of a client whose socket is full never returns; the stream's queue
    grows only until ``stream_queue_bytes`` and the request is then dropped."""
    hub = SubscriptionHub()
    app, _ = make_app(hub, stream_queue_bytes=20_000)
    message = body(1, "subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    raw = m.config.default_codec().dumps(message)
    headers = {
        **JSON_HEADERS,
        "mcp-protocol-version": MODERN,
        "mcp-method": "subscriptions/listen",
    }
    written: list[Any] = []
    sent_body = False

    async def receive() -> MutableMapping[str, Any]:
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await anyio.sleep_forever()
        raise AssertionError  # pragma: no cover

    async def send(asgi_message: MutableMapping[str, Any]) -> None:
        written.append(asgi_message)
        if len(written) > 2:  # the headers and the acknowledgement went out; then it is full
            await anyio.sleep_forever()

    big = {"_meta": {"pad": "x" * 1000}}
    caplog.set_level(logging.WARNING, "mrtr_sansio.adapters.asgi")
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(app, scope("POST", headers), receive, send)
            while len(hub) == 0 or len(written) < 2:
                await anyio.sleep(0.01)
            for _ in range(100):  # 100 KB offered, 20 KB may wait
                hub.publish("notifications/tools/list_changed", big)
                await anyio.sleep(0)
                if len(hub) == 0:
                    break
            while len(hub):
                await anyio.sleep(0.01)
    assert written[0]["status"] == 200
    assert "reads too slowly" not in str(written)  # nothing more was written to it
    assert any("unread; dropped" in r.getMessage() for r in caplog.records)


async def test_a_client_that_reads_is_not_dropped_by_the_queue_bound(tg: Any) -> None:
    hub = SubscriptionHub()
    app, _ = make_app(hub, stream_queue_bytes=5_000)
    client = Client(app, tg)
    stream = tools_listen(client, 1)
    await next_note(stream)
    big = {"_meta": {"pad": "x" * 1000}}
    for _ in range(50):  # 50 KB in all, each read before the next is published
        hub.publish("notifications/tools/list_changed", big)
        assert (await next_note(stream))["method"] == "notifications/tools/list_changed"
    assert len(hub) == 1
    stream.disconnect()


def test_the_queue_bound_must_be_a_positive_int() -> None:
    with pytest.raises(ValueError, match="stream_queue_bytes"):
        McpHttpApp(Everything().handle, stream_queue_bytes=0)


# --- push, and store faults -------------------------------------------------------------------


async def test_a_change_is_pushed_by_the_store_not_polled(tg: Any) -> None:
    """With resyncs an hour apart, only the store's change notification can bring the
    update; and an idle stream makes no store reads at all."""
    store = CountingStore()
    hub = SubscriptionHub(resync_interval=3600, fallback_poll=3600)
    app, _ = make_app(hub, store=store)
    client = Client(app, tg)
    task_id = await create(client, 1, "confirm_delete", {"filename": "p"})
    stream = await listen(client, 2, [task_id])
    await next_note(stream)
    await notes_until(stream, "input_required")
    reads = store.reads
    await anyio.sleep(0.5)
    assert store.reads == reads  # nothing read while nothing changes
    began = time.monotonic()
    await answer(client, body(3, "tasks/update", {"taskId": task_id, "inputResponses": CONFIRM}))
    await notes_until(stream, "completed")
    assert time.monotonic() - began < 1.0
    stream.disconnect()


class BlindStore(InMemoryTaskStore):
    """A store that cannot notify (a custom store without ``watch``)."""

    watch = None  # type: ignore[assignment]


async def test_a_store_that_cannot_notify_is_read_again_every_fallback_poll(tg: Any) -> None:
    store = BlindStore()
    assert not isinstance(store, m.tasks.WatchableTaskStore)
    hub = SubscriptionHub(fallback_poll=0.2, resync_interval=3600)
    app, _ = make_app(hub, store=store)
    client = Client(app, tg)
    task_id = await create(client, 1, "confirm_delete", {"filename": "f"})
    stream = await listen(client, 2, [task_id])
    await next_note(stream)
    await notes_until(stream, "input_required")
    await answer(client, body(3, "tasks/update", {"taskId": task_id, "inputResponses": CONFIRM}))
    with anyio.fail_after(3):
        await notes_until(stream, "completed")
    stream.disconnect()


async def test_a_store_fault_during_a_stream_is_logged_and_the_stream_goes_on(
    tg: Any, caplog: pytest.LogCaptureFixture
) -> None:
    store = CountingStore()
    hub = SubscriptionHub(resync_interval=0.1)
    app, _ = make_app(hub, store=store)
    client = Client(app, tg)
    task_id = await create(client, 1, "confirm_delete", {"filename": "x"})
    stream = await listen(client, 2, [task_id])
    await next_note(stream)
    await notes_until(stream, "input_required")
    caplog.set_level(logging.WARNING, "mrtr_sansio.adapters.listen")
    store.failing = True
    with anyio.move_on_after(0.4):
        note = await stream.response.next_message()
        pytest.fail(f"a fault reached the client: {note!r}")
    assert any("the disk is on fire" in r.getMessage() for r in caplog.records)
    store.failing = False
    await answer(client, body(3, "tasks/update", {"taskId": task_id, "inputResponses": CONFIRM}))
    await notes_until(stream, "completed")
    stream.disconnect()


async def test_a_store_fault_at_the_start_is_a_32603_naming_it(tg: Any) -> None:
    store = CountingStore()
    app, _ = make_app(store=store)
    client = Client(app, tg)
    task_id = await create(client, 1, "confirm_delete", {"filename": "y"})
    store.failing = True
    error = await refusal(await listen(client, 2, [task_id]))
    assert error["code"] == -32603
    assert "the disk is on fire" in error["message"]


class QuietStore(InMemoryTaskStore):
    """An in-memory store whose watchers can be silenced (changes missed) and then told
    "anything may have changed" from another thread, as a Redis store that lost its channel
    does."""

    def __init__(self) -> None:
        super().__init__()
        self.quiet = False
        self.subscribers: list[Any] = []

    def watch(self, changed: Any) -> Any:
        self.subscribers.append(changed)

        def relay(task_id: str | None) -> None:
            if not self.quiet:
                changed(task_id)

        return super().watch(relay)


async def test_changes_missed_by_the_store_are_read_at_its_resync_signal(tg: Any) -> None:
    store = QuietStore()
    hub = SubscriptionHub(resync_interval=3600)
    app, _ = make_app(hub, store=store)
    client = Client(app, tg)
    task_id = await create(client, 1, "confirm_delete", {"filename": "q"})
    stream = await listen(client, 2, [task_id])
    await next_note(stream)
    await notes_until(stream, "input_required")
    store.quiet = True
    await answer(client, body(3, "tasks/update", {"taskId": task_id, "inputResponses": CONFIRM}))
    with anyio.move_on_after(0.3):
        note = await stream.response.next_message()
        pytest.fail(f"told of a change the store did not report: {note!r}")
    (changed,) = store.subscribers
    await anyio.to_thread.run_sync(changed, None)  # from the store's own thread
    with anyio.fail_after(2):
        await notes_until(stream, "completed")
    stream.disconnect()


class SlowStore:
    """An in-memory store whose batched reads block until ``release`` is set: not an
    :class:`InMemoryTaskStore` (whose calls run in line), so the adapters call it in a
    worker thread, as they do SQLite and Redis."""

    def __init__(self) -> None:
        self._inner = InMemoryTaskStore()
        self.release = threading.Event()
        self.entered = threading.Event()

    def create(self, task: Task) -> bool:
        return self._inner.create(task)

    def get(self, task_id: str) -> Task | None:
        return self._inner.get(task_id)

    def replace(self, task: Task, revision: int) -> bool:
        return self._inner.replace(task, revision)

    def delete(self, task_id: str) -> None:
        self._inner.delete(task_id)

    def count(self, owner: str | None, now: float) -> int:
        return self._inner.count(owner, now)

    def sweep(self, now: float, limit: int) -> int:
        return self._inner.sweep(now, limit)

    def watch(self, changed: Any) -> Any:
        return self._inner.watch(changed)

    def get_many(self, task_ids: Sequence[str]) -> list[Task | None]:
        self.entered.set()
        self.release.wait(5)
        return self._inner.get_many(task_ids)


async def test_a_blocking_store_read_leaves_the_loop_serving(tg: Any) -> None:
    store = SlowStore()
    hub = SubscriptionHub()
    app, _ = make_app(hub, store=store)
    client = Client(app, tg)
    task_id = await create(client, 1, "confirm_delete", {"filename": "s"})
    began = time.monotonic()
    stream = await listen(client, 2, [task_id])
    assert await anyio.to_thread.run_sync(store.entered.wait, 5)
    hub.publish("notifications/tools/list_changed")  # the stream is not acknowledged yet
    reply = await answer(client, body(3, "tasks/get", {"taskId": task_id}))
    assert reply["result"]["taskId"] == task_id  # served while the listen's read blocks
    assert time.monotonic() - began < 2  # a read on the loop would have stalled it 5 s
    store.release.set()
    ack = await next_note(stream)
    assert ack["params"]["notifications"] == {"taskIds": [task_id]}
    stream.disconnect()


# --- the filter's types ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "wanted",
    [
        {"taskIds": "abc"},
        {"taskIds": None},
        {"taskIds": {"$ne": ""}},
        {"toolsListChanged": "x" * 100},
        {"promptsListChanged": 1},
        {"resourceSubscriptions": "file:///a"},
        {"resourceSubscriptions": ["file:///a", 7]},
    ],
)
async def test_a_filter_of_the_wrong_type_is_32602_not_acknowledged(
    tg: Any, wanted: dict[str, Any]
) -> None:
    app, _ = make_app()
    client = Client(app, tg)
    message = body(1, "subscriptions/listen", {"notifications": wanted})
    mirror = {"mcp-protocol-version": MODERN, "mcp-method": "subscriptions/listen"}
    error = await refusal(client.start(message, mirror))
    assert error["code"] == -32602
    assert f"notifications.{next(iter(wanted))} must be" in error["message"]


async def test_an_acknowledgement_larger_than_the_queue_bound_still_goes_out(tg: Any) -> None:
    """The queue bound counts what a client leaves unread: one message larger than it, on an
    empty queue, is sent (before, the stream was dropped before its first byte and uvicorn
    answered 500)."""
    app, _ = make_app(stream_queue_bytes=5_000)
    client = Client(app, tg)
    uris = [f"file:///{i:06}" for i in range(1000)]  # about 17 KB echoed back
    message = body(1, "subscriptions/listen", {"notifications": {"resourceSubscriptions": uris}})
    mirror = {"mcp-protocol-version": MODERN, "mcp-method": "subscriptions/listen"}
    stream = client.start(message, mirror)
    ack = await next_note(stream)
    assert ack["params"]["notifications"] == {"resourceSubscriptions": uris}
    stream.disconnect()


async def test_a_burst_past_the_queue_bound_before_the_first_byte_is_a_503() -> None:
    """Two messages queued at once past ``stream_queue_bytes`` drop the request. Whether the
    streaming loop took the first before the second came is a race: when it had not, nothing
    was sent yet, and the response must still end (503) rather than stay unstarted (which
    uvicorn turns into a 500). Twenty tries see both orders."""

    async def chatty(request: m.RequestReceived, ctx: Any) -> Any:
        ctx.log("info", "x" * 3000)
        ctx.log("info", "y" * 3000)  # with the first still queued: past the bound
        await anyio.sleep(0.05)
        return {"content": [], "isError": False}

    config = server_config(request_state=m.sealing.RequestStateSecurity.ephemeral())
    app = McpHttpApp(chatty, config, stream_queue_bytes=5_000)
    message = body(1, "tools/call", {"name": "greet", "arguments": {"name": "Bob"}})
    message["params"]["_meta"][m.protocol.LOG_LEVEL] = "info"
    raw = m.config.default_codec().dumps(message)
    headers = {**JSON_HEADERS, "mcp-protocol-version": MODERN, "mcp-method": "tools/call"}
    headers["mcp-name"] = "greet"
    statuses = []
    written: list[Any] = []
    sent = [False]

    async def receive() -> MutableMapping[str, Any]:
        if not sent[0]:
            sent[0] = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await anyio.sleep_forever()
        raise AssertionError  # pragma: no cover

    async def send(asgi_message: MutableMapping[str, Any]) -> None:
        written.append(asgi_message)

    for _ in range(20):
        sent[0] = False
        written.clear()
        with anyio.fail_after(5):
            await app(scope("POST", headers), receive, send)
        assert written, "the response was never started"
        assert written[0]["type"] == "http.response.start"
        statuses.append(written[0]["status"])
        if written[0]["status"] == 503:
            assert written[1:] == [{"type": "http.response.body", "body": b""}]
    assert 503 in statuses, statuses
