"""What the asyncio and trio stream clients share above their IO: calls awaiting their
outcome, the handshake, and running an input callback, written against an ``Event`` that
either library provides."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from mrtr_sansio import Call, ClientConfig, InputNeeded

from ._client_common import AsyncClientBase, ClientDriver, ClientOptions, InputCallback

__all__ = ["AsyncStreamClient"]


class _Event(Protocol):
    """``asyncio.Event`` or ``trio.Event``."""

    def set(self) -> None: ...
    async def wait(self) -> Any: ...


class AsyncStreamClient(AsyncClientBase):
    """What the asyncio and trio stream clients share above their IO: the driver, calls
    awaiting their outcome, the handshake, and running an input callback.

    A subclass moves the bytes (:meth:`_flush`, :meth:`_drain`), runs each callback in a
    task of its library through :meth:`_answer` (``_start_input``) and cancels it
    (``_stop_input``).
    """

    def __init__(
        self,
        config: ClientConfig | None,
        options: ClientOptions,
        event: Callable[[], _Event],
    ) -> None:
        self._event = event
        self._waiters: dict[Call, _Event] = {}
        self._handshake = event()
        self._driver = ClientDriver.create(
            config,
            options,
            start_input=self._start_input,
            stop_input=self._stop_input,
            settled=self._settled,
            ready=self._handshake.set,
        )

    async def request(
        self, method: str, params: Mapping[str, Any] | None = None
    ) -> Mapping[str, Any]:
        """Send any request and await its end (MRTR rounds and legacy server requests are
        handled on the way); returns the result, raises :class:`ClientError`."""
        driver = self._driver
        call = driver.call(method, params)
        done = self._waiters[call] = self._event()
        try:
            self._flush()
            await self._drain()
            await done.wait()
        except BaseException:  # cancelled (or interrupted): give the call up on the wire
            driver.cancel(call)
            self._flush()
            raise
        finally:
            del self._waiters[call]
        return driver.take(call)

    def _settled(self, call: Call) -> None:
        self._waiters[call].set()

    async def _open(self) -> None:
        """Send what the handshake needs and wait for it (the reader must be running)."""
        self._flush()
        await self._drain()
        if not self._driver.ready:
            await self._handshake.wait()
        if self._driver.handshake_error is not None:
            raise self._driver.handshake_error

    async def _answer(self, event: InputNeeded, callback: InputCallback) -> None:
        """Run ``callback`` for ``event`` and hand its answer (or failure) to the driver."""
        try:
            result = await callback(event)
        except Exception as exc:
            self._driver.fail(event, exc)
        else:
            self._driver.answer(event, result)
        self._flush()

    def _flush(self) -> None:
        """Write (or hand to the writer) what the connection queued; keep the timer."""
        raise NotImplementedError

    async def _drain(self) -> None:
        """Wait until the transport can take more (backpressure); nothing by default."""

    def _start_input(self, event: InputNeeded, callback: InputCallback) -> None:
        raise NotImplementedError

    def _stop_input(self, event: InputNeeded) -> None:
        raise NotImplementedError
