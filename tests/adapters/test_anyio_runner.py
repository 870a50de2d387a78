"""The async adapter's handler runner and its writer's direct writes, on asyncio and on trio:
handlers that answer at once share a task, one that waits gets a task of its own and holds up
no other, each runs in its own context and can be cancelled through its job; the writer writes
an answer as it is made and leaves to its task only what the descriptor does not take."""

from __future__ import annotations

import contextvars
import os
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import anyio
import pytest
from stream_harness import TIMEOUT

from mrtr_sansio.adapters._anyio_parts import Job, Runner, Writer
from mrtr_sansio.adapters.anyio import StdioStream

BACKENDS = ["asyncio", "trio"]
VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


def run(backend: str, main: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        with anyio.fail_after(TIMEOUT):
            await main()

    anyio.run(bounded, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_runner_shares_a_task_until_one_waits(backend: str) -> None:
    """Coroutines that never wait run in order in one task; one that waits keeps that task and
    the ones queued after it go on in another, before it ends."""
    log: list[tuple[str, object]] = []
    release = anyio.Event()

    async def at_once(name: str) -> None:
        log.append((name, anyio.get_current_task().id))

    async def waits() -> None:
        log.append(("waits", anyio.get_current_task().id))
        await release.wait()
        log.append(("woken", anyio.get_current_task().id))

    async def releases() -> None:
        log.append(("releases", anyio.get_current_task().id))
        release.set()

    async def main() -> None:
        async with anyio.create_task_group() as group:
            runner = Runner(group)
            for name in ("a", "b"):
                runner.start(at_once, name)
            runner.start(waits)
            runner.start(releases)  # queued behind the one that waits: not held up by it
            runner.start(at_once, "c")
        names = [name for name, _ in log]
        assert names == ["a", "b", "waits", "releases", "c", "woken"]
        tasks = dict(log)
        assert tasks["a"] == tasks["b"] == tasks["waits"] == tasks["woken"]
        assert tasks["releases"] == tasks["c"] != tasks["waits"]
        log.clear()
        async with anyio.create_task_group() as group:  # the queue ran dry: a new task
            runner = Runner(group)
            runner.start(at_once, "d")
            await anyio.sleep(0)
            runner.start(at_once, "e")
        assert [name for name, _ in log] == ["d", "e"]

    run(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_runner_gives_each_coroutine_its_own_context(backend: str) -> None:
    """What a coroutine sets in a context variable stays its own, across its waits too, and
    each starts from the context it was started in."""
    seen: list[tuple[str, str]] = []

    async def sets(name: str, wait: bool) -> None:
        seen.append((name, VAR.get()))
        VAR.set(name)
        if wait:
            await anyio.sleep(0)
        seen.append((name, VAR.get()))

    async def main() -> None:
        async with anyio.create_task_group() as group:
            runner = Runner(group)
            VAR.set("starter")
            runner.start(sets, "first", False)
            runner.start(sets, "second", True)
            runner.start(sets, "third", False)
        assert VAR.get() == "starter"
        by_name: dict[str, list[str]] = {}
        for name, value in seen:
            by_name.setdefault(name, []).append(value)
        assert by_name == {
            "first": ["starter", "first"],
            "second": ["starter", "second"],  # across its wait, while "third" ran
            "third": ["starter", "third"],
        }

    run(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_runner_cancels_and_fails_like_a_task(backend: str) -> None:
    """A waiting coroutine's own cancel scope cancels it (the cancellation is thrown through
    the runner into it); one that catches what is thrown and returns ends cleanly; a failure,
    first step or later, ends the task group with it."""
    log: list[str] = []

    async def cancellable(scope: anyio.CancelScope) -> None:
        with scope:
            await anyio.sleep_forever()
        log.append("cancelled")

    async def catches(scope: anyio.CancelScope) -> None:
        try:
            with scope:
                await anyio.sleep_forever()
        finally:
            log.append("cleaned up")

    async def main() -> None:
        async with anyio.create_task_group() as group:
            runner = Runner(group)
            first, second = anyio.CancelScope(), anyio.CancelScope()
            runner.start(cancellable, first)
            runner.start(catches, second)
            await anyio.sleep(0.01)
            first.cancel()
            second.cancel()
        assert sorted(log) == ["cancelled", "cleaned up"]

    run(backend, main)

    async def fails_at_once() -> None:
        raise RuntimeError("at once")

    async def fails_later() -> None:
        await anyio.sleep(0)
        raise LookupError("later")

    async def failing(
        func: Callable[[], Coroutine[Any, Any, None]], error: type[BaseException]
    ) -> None:
        try:
            async with anyio.create_task_group() as group:
                runner = Runner(group)
                runner.start(func)
                runner.start(anyio.sleep_forever)  # cancelled with the group
        except Exception as exc:  # the failure, or a group holding it
            failure: BaseException = exc
            while getattr(failure, "exceptions", None):
                failure = getattr(failure, "exceptions")[0]  # noqa: B009 (typed as any)
            assert isinstance(failure, error)
        else:
            pytest.fail("the failure did not end the task group")

    run(backend, lambda: failing(fails_at_once, RuntimeError))
    run(backend, lambda: failing(fails_later, LookupError))


@pytest.mark.parametrize("backend", BACKENDS)
def test_runner_jobs_cancel_their_coroutine_alone(backend: str) -> None:
    """A job cancelled while its coroutine waits ends that coroutine only (the one after it in
    the queue and the ones that answered at once are untouched); one cancelled during its first
    step is cancelled at its first wait; a cancel scope the coroutine entered in its first step
    nests in the runner's and exits cleanly; and the flag tells a queued coroutine that it was
    cancelled before it ran."""
    log: list[str] = []
    release = anyio.Event()

    async def waits(name: str) -> None:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            log.append(f"{name} cancelled")
            raise

    async def cancels_itself(job_box: list[Job]) -> None:
        job_box[0].cancel()
        try:
            await anyio.sleep(0)
        except anyio.get_cancelled_exc_class():
            log.append("self cancelled")
            raise
        log.append("self not cancelled")

    async def own_scope() -> None:
        with anyio.move_on_after(0.01) as scope:
            await anyio.sleep_forever()
        log.append(f"own scope ended {scope.cancelled_caught}")

    async def survives() -> None:
        await release.wait()
        log.append("survivor ran")

    async def at_once(job: Job) -> None:
        log.append(f"at once {job.cancelled}")

    async def main() -> None:
        async with anyio.create_task_group() as group:
            runner = Runner(group)
            runner.start(at_once, Job())
            first = runner.start(waits, "first")
            box: list[Job] = []
            box.append(runner.start(cancels_itself, box))
            runner.start(own_scope)
            runner.start(survives)
            late = Job()
            late.cancel()  # before it runs: the coroutine sees the flag
            runner.start(at_once, late, job=late)
            await anyio.wait_all_tasks_blocked()
            first.cancel()
            await anyio.sleep(0.05)
            release.set()
        assert sorted(log) == [
            "at once False",
            "at once True",
            "first cancelled",
            "own scope ended True",
            "self cancelled",
            "survivor ran",
        ]

    run(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_writer_writes_at_once_and_leaves_the_rest_to_its_task(backend: str) -> None:
    """On a stdio stream, ``wake`` writes what is pending before the writer task runs; what a
    full pipe does not take the task sends once the reader drains it; a gone reader makes the
    task raise, not ``wake``."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    chunks: list[bytes] = []

    def pending() -> bytes:
        return chunks.pop(0) if chunks else b""

    async def main() -> None:
        async with StdioStream(in_r, out_w) as stream:
            writer = Writer(stream, pending)
            chunks.append(b"now\n")
            writer.wake()
            assert os.read(out_r, 100) == b"now\n"  # no task ran: written by wake
            writer.wake()  # nothing pending: nothing to do
            filler = bytearray()
            while written := stream.send_nowait(b"f" * 4096):  # the pipe fills up
                filler += b"f" * written
            big = b"x" * (1 << 20)  # more than a pipe holds
            chunks.append(big)
            writer.wake()  # the pipe is full: all of it is left to the task
            chunks.append(b"after\n")
            writer.wake()  # the task has ``big``: this waits behind it
            expected = bytes(filler) + big + b"after\n"
            received = bytearray()
            waited: list[int] = []

            async def wait_for_the_send(n: int) -> None:
                await writer.sent()
                waited.append(n)

            async with anyio.create_task_group() as group:
                group.start_soon(writer.run)
                await anyio.wait_all_tasks_blocked()  # the writer waits for the full pipe
                group.start_soon(wait_for_the_send, 1)
                group.start_soon(wait_for_the_send, 2)
                await anyio.wait_all_tasks_blocked()
                assert waited == []  # backpressure: both wait for the send in progress
                while len(received) < len(expected):
                    await anyio.wait_readable(out_r)
                    received += os.read(out_r, 1 << 16)
                writer.close()
            assert bytes(received) == expected
            assert sorted(waited) == [1, 2]
            await stream.send_eof()
            with pytest.raises(anyio.ClosedResourceError):
                stream.send_nowait(b"late\n")
        with pytest.raises(anyio.ClosedResourceError):
            stream.send_nowait(b"closed\n")

    async def broken() -> None:
        os.close(out_r)
        async with StdioStream(in_r, out_w) as stream:
            writer = Writer(stream, pending)
            chunks.append(b"lost\n")
            writer.wake()  # the reader is gone: the task raises it
            with pytest.raises(anyio.BrokenResourceError):
                await writer.run()

    try:
        run(backend, main)
        run(backend, broken)
    finally:
        for fd in (in_r, in_w, out_w):
            os.close(fd)
