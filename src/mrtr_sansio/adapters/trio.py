"""The async adapter (:mod:`mrtr_sansio.adapters.anyio`) on trio's own streams (``trio``
extra): kept so that code written for ``trio.abc.Stream`` runs unchanged.

:func:`serve_stdio`, :func:`serve_tcp` and :meth:`Client.connect_stdio` /
:meth:`Client.connect_tcp` are the anyio adapter's (they run on trio as they are);
:func:`serve` and :meth:`Client.connect` take a trio stream, wrapped in :class:`TrioStream`.
New code imports :mod:`mrtr_sansio.adapters.anyio`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, TypeVar

from mrtr_sansio._extras import raise_missing_extra

try:
    import anyio
    import anyio.abc
    import trio
except ModuleNotFoundError as exc:
    raise_missing_extra(exc, __name__, "trio")

if TYPE_CHECKING:  # typing.Unpack is 3.11+; annotations are not evaluated at run time
    from typing_extensions import Unpack

from mrtr_sansio import ClientConfig, ServerConfig

from . import anyio as _anyio
from ._client_common import SHUTDOWN_TIMEOUT, ClientOptions
from ._common import READ_SIZE, Handler
from .anyio import serve_stdio, serve_tcp

__all__ = ["Client", "TrioStream", "serve", "serve_stdio", "serve_tcp"]

T = TypeVar("T")


async def _mapped(step: Awaitable[T]) -> T:
    """Await ``step``, raising trio's resource errors as anyio's."""
    try:
        return await step
    except trio.BrokenResourceError as exc:
        raise anyio.BrokenResourceError from exc
    except trio.ClosedResourceError as exc:
        raise anyio.ClosedResourceError from exc


class TrioStream(anyio.abc.ByteStream):
    """A ``trio.abc.Stream`` as an anyio byte stream."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self._stream = stream

    async def receive(self, max_bytes: int = READ_SIZE) -> bytes:
        """The next bytes read; ``EndOfStream`` at the end of input."""
        data = await _mapped(self._stream.receive_some(max_bytes))
        if not data:
            raise anyio.EndOfStream
        return bytes(data)

    async def send(self, item: bytes) -> None:
        """Send all of ``item``."""
        await _mapped(self._stream.send_all(item))

    async def send_eof(self) -> None:
        """End the output (``send_eof``, or closing a stream that cannot half-close)."""
        stream = self._stream
        if isinstance(stream, trio.abc.HalfCloseableStream):
            await _mapped(stream.send_eof())
        else:
            await stream.aclose()

    async def aclose(self) -> None:
        """Close the trio stream."""
        await self._stream.aclose()


async def serve(
    handler: Handler,
    config: ServerConfig | None,
    stream: trio.abc.Stream,
    *,
    principal: str | None = None,
) -> None:
    """Serve one stream until its input ends; the caller keeps (and closes) ``stream``.

    ``principal`` is the authenticated caller, bound into sealed request state.
    """
    await _anyio.serve(handler, config, TrioStream(stream), principal=principal)


class Client(_anyio.Client):
    """:class:`mrtr_sansio.adapters.anyio.Client`, whose :meth:`connect` takes a trio
    stream."""

    @classmethod
    @asynccontextmanager
    async def connect(  # type: ignore[override]  # a trio stream, not an anyio one
        cls,
        stream: trio.abc.Stream,
        config: ClientConfig | None = None,
        *,
        shutdown_timeout: float = SHUTDOWN_TIMEOUT,
        **options: Unpack[ClientOptions],
    ) -> AsyncIterator[_anyio.Client]:
        """A client over ``stream``, once the handshake is done (as the anyio client's
        ``connect``); the caller keeps (and closes) ``stream``."""
        client = cls(TrioStream(stream), config, **options)
        async with cls._session(client, shutdown_timeout):
            yield client
