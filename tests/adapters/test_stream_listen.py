"""``subscriptions/listen`` on the anyio stream servers (newline-delimited JSON over real pipes
and TCP): the byte bound on what a reader leaves unread (``stream_queue_bytes``) at its limit
and one byte past it, a reader that never reads dropped with a log line, its stream torn down
by the server's ``notifications/cancelled`` while its connection goes on serving, and a
client's ``notifications/cancelled`` tearing a stream down so that its principal may open
``max_streams_per_principal`` streams again.

Every message read is validated against the 2026-07-28 schema and the tasks extension's.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.abc
import pytest
from fixtures import Everything, server_config
from test_tasks_http import body

import mrtr_sansio as m
from helpers import check_task_message
from mrtr_sansio.adapters import SubscriptionHub
from mrtr_sansio.adapters._anyio_parts import Writer
from mrtr_sansio.adapters.anyio import StdioStream, serve, serve_tcp

pytestmark = pytest.mark.anyio

KEYS = m.sealing.RequestStateSecurity.ephemeral()
BIG = {"_meta": {"pad": "x" * 10_000}}


def tools_listen(rid: int) -> bytes:
    message = body(rid, "subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    return json.dumps(message).encode() + b"\n"


def cancelled(rid: int) -> bytes:
    params = {"requestId": rid, "reason": "done with it"}
    return json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})\
        .encode() + b"\n"  # fmt: skip


class Lines:
    """The client's side of a stream: writes lines, reads and checks messages."""

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self.stream = stream
        self._buffer = b""

    async def send(self, data: bytes) -> None:
        await self.stream.send(data)

    async def next(self) -> dict[str, Any]:
        with anyio.fail_after(10):
            while b"\n" not in self._buffer:
                self._buffer += await self.stream.receive()
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        check_task_message(message, method="subscriptions/listen")
        return message

    async def answer_to(self, rid: int) -> dict[str, Any]:
        """Read up to the answer to ``rid`` (notifications on the way are skipped)."""
        while True:
            message = await self.next()
            if message.get("id") == rid and "method" not in message:
                return message


def _pipe(size: int | None = None) -> tuple[int, int]:
    r, w = os.pipe()
    if size is not None:
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, size)
    return r, w


@contextlib.asynccontextmanager
async def served_on_pipes(
    hub: SubscriptionHub, principal: str | None = "a", **options: Any
) -> AsyncIterator[Lines]:
    """The fixtures served by :func:`serve` over two real pipes, as a stdio server is."""
    everything = Everything()
    everything.hub = hub
    config = server_config(request_state=KEYS)
    to_server, from_server = _pipe(), _pipe()
    server_side = StdioStream(to_server[0], from_server[1])
    client_side = StdioStream(from_server[0], to_server[1])
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                lambda: serve(
                    everything.handle, config, server_side, principal=principal, **options
                )
            )
            yield Lines(client_side)
            os.close(to_server[1])  # the server's end of input
            to_server = (to_server[0], -1)
    finally:
        await server_side.aclose()
        await client_side.aclose()
        for fd in (*to_server, *from_server):
            if fd != -1:
                os.close(fd)


# --- the bound itself, on a pipe nobody reads ---------------------------------------------------


def _fill(w: int) -> None:
    """Fill the pipe: from now on nothing written to it gets through."""
    os.set_blocking(w, False)
    with contextlib.suppress(BlockingIOError):
        while True:
            os.write(w, b"." * 4096)


async def test_the_writer_holds_up_to_its_limit_and_calls_overflow_one_byte_past_it() -> None:
    r, w = _pipe(4096)
    _fill(w)
    spare_r, spare_w = os.pipe()
    stream = StdioStream(spare_r, w)
    queue: list[bytes] = []
    overflows: list[int] = []

    def pending() -> bytes:
        data = b"".join(queue)
        queue.clear()
        return data

    writer = Writer(stream, pending, limit=100, overflow=lambda: overflows.append(writer.waiting))
    try:
        async with anyio.create_task_group() as tg:
            queue.append(b"a" * 60)
            writer.wake()  # written at once if it could be: held, as the pipe is full
            tg.start_soon(writer.run)
            await anyio.wait_all_tasks_blocked()
            assert writer.waiting == 60
            queue.append(b"b" * 40)
            writer.wake()
            assert writer.waiting == 100  # at the limit: nothing happens
            assert overflows == []
            queue.append(b"c")
            writer.wake()
            assert overflows == [101]  # one byte past it
            queue.append(b"d" * 500)
            writer.wake()
            assert overflows == [101]  # once, until it is back under
            drained = b""
            expected = b"a" * 60 + b"b" * 40 + b"c" + b"d" * 500
            os.set_blocking(r, False)
            with anyio.fail_after(5):
                while not drained.endswith(expected):  # the reader catches up
                    await anyio.wait_readable(r)
                    drained += os.read(r, 65536)
            await anyio.wait_all_tasks_blocked()
            assert writer.waiting == 0
            assert drained.endswith(b"a" * 60 + b"b" * 40 + b"c" + b"d" * 500)
            _fill(w)
            queue.append(b"e" * 101)
            writer.wake()  # past the limit again, from under it: told again
            assert overflows == [101, 101]
            writer.close()
            tg.cancel_scope.cancel()
    finally:
        await stream.aclose()
        for fd in (r, w, spare_r, spare_w):
            os.close(fd)


def test_the_stream_queue_bound_must_be_a_positive_int() -> None:
    with pytest.raises(ValueError, match="stream_queue_bytes"):
        anyio.run(lambda: serve(Everything().handle, None, StdioStream(0, 1), stream_queue_bytes=0))


# --- a reader that does not read, over TCP --------------------------------------------------------


async def test_a_tcp_reader_that_never_reads_loses_its_listen_stream_not_its_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hub = SubscriptionHub()
    everything = Everything()
    everything.hub = hub
    config = server_config(request_state=KEYS)
    caplog.set_level(logging.WARNING, "mrtr_sansio.adapters")
    async with anyio.create_task_group() as tg:
        listener = await tg.start(
            lambda task_status: serve_tcp(
                everything.handle,
                config,
                "127.0.0.1",
                0,
                task_status=task_status,
                stream_queue_bytes=50_000,
            )
        )
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        client = Lines(await anyio.connect_tcp("127.0.0.1", port))
        await client.send(tools_listen(1))
        assert (await client.next())["method"] == "notifications/subscriptions/acknowledged"
        with anyio.fail_after(20):
            while len(hub):  # the client reads nothing from now on
                hub.publish("notifications/tools/list_changed", BIG)
                await anyio.sleep(0)
        assert any("unread; dropped" in r.getMessage() for r in caplog.records)
        # torn down as the spec has a server do it: notifications/cancelled naming the
        # stream, after what was queued, and no answer to it (then or later)
        while (message := await client.next()).get("method") != "notifications/cancelled":
            assert "id" not in message, message
        assert message["params"]["requestId"] == 1
        assert "reads too slowly" in message["params"]["reason"]
        assert "50000 bytes" in message["params"]["reason"]
        await client.send(tools_listen(2))  # the connection itself goes on serving
        assert (await client.next())["method"] == "notifications/subscriptions/acknowledged"
        hub.publish("notifications/tools/list_changed")
        assert (await client.next())["method"] == "notifications/tools/list_changed"
        await client.send(tools_listen(3))
        answered = await client.next()  # listen 3 acknowledged: nothing for 1 came before it
        assert answered.get("method") == "notifications/subscriptions/acknowledged", answered
        await client.stream.aclose()
        tg.cancel_scope.cancel()


async def test_a_reader_that_reads_is_not_dropped_by_the_bound() -> None:
    hub = SubscriptionHub()
    async with served_on_pipes(hub, stream_queue_bytes=20_000) as client:
        await client.send(tools_listen(1))
        await client.next()
        for _ in range(50):  # 500 KB in all, each read before the next is published
            hub.publish("notifications/tools/list_changed", BIG)
            assert (await client.next())["method"] == "notifications/tools/list_changed"
        assert len(hub) == 1
        await client.send(cancelled(1))
        with anyio.fail_after(5):
            while len(hub):
                await anyio.sleep(0.01)


# --- cancelling a stream ------------------------------------------------------------------------


async def test_a_cancelled_stream_frees_its_principals_slot() -> None:
    hub = SubscriptionHub(max_streams_per_principal=2)
    async with served_on_pipes(hub, principal="a") as client:
        for rid in (1, 2):
            await client.send(tools_listen(rid))
            assert (await client.next())["method"] == "notifications/subscriptions/acknowledged"
        await client.send(tools_listen(3))
        refused = await client.answer_to(3)
        assert refused["error"]["code"] == -32603
        assert "limit is 2" in refused["error"]["message"]
        await client.send(cancelled(1) + cancelled(2))
        with anyio.fail_after(5):
            while hub.streams_of("a"):
                await anyio.sleep(0.01)
        assert len(hub) == 0
        for rid in (4, 5):  # the whole allowance again
            await client.send(tools_listen(rid))
            ack = await client.next()
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            assert ack["params"]["_meta"][m.protocol.SUBSCRIPTION_ID] == rid
        assert hub.streams_of("a") == 2
        hub.publish("notifications/tools/list_changed")
        told = {(await client.next())["params"]["_meta"][m.protocol.SUBSCRIPTION_ID] for _ in "ab"}
        assert told == {4, 5}  # the cancelled streams were answered nothing and told nothing
