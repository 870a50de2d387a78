"""The async adapter (:mod:`mrtr_sansio.adapters.anyio`) on asyncio's own streams: kept so that
code written for asyncio's ``StreamReader``/``StreamWriter`` pairs runs unchanged.

:func:`serve_stdio`, :func:`serve_tcp` and :meth:`Client.connect_stdio` /
:meth:`Client.connect_tcp` are the anyio adapter's (they run on asyncio as they are);
:func:`serve` and :meth:`Client.connect` take a reader and a writer, wrapped in
:class:`AsyncioStream`. New code imports :mod:`mrtr_sansio.adapters.anyio`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from mrtr_sansio._extras import raise_missing_extra

try:
    import anyio
    import anyio.abc
    import anyio.lowlevel
except ModuleNotFoundError as exc:
    raise_missing_extra(exc, __name__, "anyio")

if TYPE_CHECKING:  # typing.Unpack is 3.11+; annotations are not evaluated at run time
    from typing_extensions import Unpack

from mrtr_sansio import ClientConfig, ServerConfig

from . import anyio as _anyio
from ._client_common import SHUTDOWN_TIMEOUT, ClientOptions
from ._common import READ_SIZE, Handler
from .anyio import serve_stdio, serve_tcp

__all__ = ["AsyncioStream", "Client", "serve", "serve_stdio", "serve_tcp"]


class AsyncioStream(anyio.abc.ByteStream):
    """An asyncio ``StreamReader``/``StreamWriter`` pair as an anyio byte stream."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def receive(self, max_bytes: int = READ_SIZE) -> bytes:
        """The next bytes read; ``EndOfStream`` at the end of input."""
        try:
            data = await self._reader.read(max_bytes)
        except OSError as exc:  # ConnectionResetError and the like: the peer is gone
            raise anyio.BrokenResourceError from exc
        if not data:
            raise anyio.EndOfStream
        return data

    async def send(self, item: bytes) -> None:
        """Write ``item`` and wait until the transport takes more (``drain``)."""
        if self._writer.is_closing():
            raise anyio.BrokenResourceError
        self._writer.write(item)
        try:
            await self._writer.drain()
        except OSError as exc:  # BrokenPipeError, ConnectionResetError: the peer is gone
            raise anyio.BrokenResourceError from exc

    async def send_eof(self) -> None:
        """End the output: ``write_eof`` where the transport can, else close the writer."""
        writer = self._writer
        if not writer.is_closing():
            with contextlib.suppress(OSError):
                if writer.can_write_eof():
                    writer.write_eof()
                else:
                    writer.close()
        await anyio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        """Close the writer (and with it the transport)."""
        self._writer.close()
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()


async def serve(
    handler: Handler,
    config: ServerConfig | None,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    *,
    principal: str | None = None,
) -> None:
    """Serve one connection until its input ends; the caller keeps ``reader``/``writer``.

    ``principal`` is the authenticated caller, bound into sealed request state.
    """
    await _anyio.serve(handler, config, AsyncioStream(reader, writer), principal=principal)


class Client(_anyio.Client):
    """:class:`mrtr_sansio.adapters.anyio.Client`, whose :meth:`connect` takes asyncio's
    reader and writer."""

    @classmethod
    @asynccontextmanager
    async def connect(  # type: ignore[override]  # asyncio's streams, not an anyio stream
        cls,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        config: ClientConfig | None = None,
        *,
        shutdown_timeout: float = SHUTDOWN_TIMEOUT,
        **options: Unpack[ClientOptions],
    ) -> AsyncIterator[_anyio.Client]:
        """A client over given streams, once the handshake is done (as the anyio client's
        ``connect``); the caller keeps (and closes) the streams."""
        client = cls(AsyncioStream(reader, writer), config, **options)
        async with cls._session(client, shutdown_timeout):
            yield client
