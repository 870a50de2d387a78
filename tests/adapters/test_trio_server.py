"""What only the trio server adapter has: TCP, a broken output, and being cancelled from
outside. (The shared scenarios are in test_async_servers.py.)"""

from __future__ import annotations

from typing import Any

import trio
import trio.testing
from anyio.abc import SocketAttribute
from stream_harness import (
    CONFIG,
    TIMEOUT,
    Probe,
    Transcript,
    initialize,
    initialize_result,
    modern_call,
    result,
    text,
)

from mrtr_sansio.adapters.trio import serve, serve_tcp


class Client:
    def __init__(self, stream: trio.abc.Stream) -> None:
        self.transcript = Transcript()
        self.stream = stream

    async def send(self, *messages: dict[str, Any]) -> None:
        await self.stream.send_all(b"".join(self.transcript.encode(m) for m in messages))

    async def recv(self) -> dict[str, Any]:
        while (msg := self.transcript.next_line()) is None:
            with trio.fail_after(TIMEOUT):
                data = await self.stream.receive_some()
            assert data, "the server closed the connection"
            self.transcript.feed(bytes(data))
        return msg

    async def recv_eof(self) -> None:
        with trio.fail_after(TIMEOUT):
            assert await self.stream.receive_some() == b""


def test_serve_tcp_gives_each_connection_its_own_state() -> None:
    probe = Probe(trio.Event)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            listener = await nursery.start(serve_tcp, probe.handler(), CONFIG, "127.0.0.1", 0)
            port = listener.extra(SocketAttribute.local_port)
            one = Client(await trio.open_tcp_stream("127.0.0.1", port))
            two = Client(await trio.open_tcp_stream("127.0.0.1", port))
            await one.send(initialize(0))
            assert await one.recv() == initialize_result(0)
            await two.send(modern_call(0, "slow"), modern_call(1, "fast"))
            assert await two.recv() == result(1, text("fast"))
            await one.send(initialize(1))
            assert (await one.recv())["error"]["code"] == -32600
            # One client leaving ends its connection only.
            await one.stream.aclose()
            await two.send(modern_call(2, "fast"))
            assert await two.recv() == result(2, text("fast"))
            # Stopping the server cancels the slow handler and closes the other connection.
            nursery.cancel_scope.cancel()
        await two.recv_eof()
        await two.stream.aclose()

    trio.run(main)
    assert not probe.gate.is_set()


def test_broken_output_ends_serve_while_input_stays_open() -> None:
    probe = Probe(trio.Event)

    async def main() -> None:
        server_stream, client_stream = trio.testing.memory_stream_pair()
        client = Client(client_stream)
        async with trio.open_nursery() as nursery:
            done = trio.Event()

            async def run() -> None:
                await serve(probe.handler(), CONFIG, server_stream)
                done.set()

            nursery.start_soon(run)
            await client.send(modern_call(1, "hang"))
            with trio.fail_after(TIMEOUT):
                await probe.started.wait()
            await client_stream.receive_stream.aclose()  # the client stops reading
            await client.send(modern_call(2, "fast"))  # its answer cannot go out
            with trio.fail_after(TIMEOUT):
                await done.wait()
        assert probe.cancelled.is_set()

    trio.run(main)


def test_cancelling_serve_cancels_its_handlers() -> None:
    probe = Probe(trio.Event)

    async def main() -> None:
        server_stream, client_stream = trio.testing.memory_stream_pair()
        client = Client(client_stream)
        with trio.CancelScope() as outer:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(serve, probe.handler(), CONFIG, server_stream)
                await client.send(modern_call(1, "hang"))
                with trio.fail_after(TIMEOUT):
                    await probe.started.wait()
                outer.cancel()
        assert outer.cancelled_caught
        assert probe.cancelled.is_set()

    trio.run(main)


def test_input_waits_while_an_answer_cannot_be_sent() -> None:
    """Backpressure: once the client stops reading, at most one more read is taken in."""
    probe = Probe(trio.Event)

    async def main() -> None:
        # A lockstep stream: a send completes only when the other side has read it all.
        server_stream, client_stream = trio.testing.lockstep_stream_pair()
        client = Client(client_stream)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve, probe.handler(), CONFIG, server_stream)
            await client.send(modern_call(1, "fast"))
            await trio.testing.wait_all_tasks_blocked()  # answer 1 is stuck in the writer
            nursery.start_soon(client.send, modern_call(2, "fast"))
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(client.send, modern_call(3, "fast"))
            await trio.testing.wait_all_tasks_blocked()
            assert [c.request_id for c in probe.calls] == [1, 2]  # 3 is not read
            assert [(await client.recv())["id"] for _ in range(3)] == [1, 2, 3]
            await client_stream.send_stream.aclose()

    trio.run(main)
