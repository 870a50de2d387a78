"""Transports for the Sans-IO core: the only code in this package that does IO.

Import the one you need; none is imported by ``import mrtr_sansio`` or by this package:

* :mod:`mrtr_sansio.adapters.stdio` — blocking, newline-delimited JSON over stdin/stdout;
* :mod:`mrtr_sansio.adapters.asyncio` — asyncio streams (stdio pipes or TCP);
* :mod:`mrtr_sansio.adapters.trio` — trio streams (``trio`` extra);
* :mod:`mrtr_sansio.adapters.asgi` — Streamable HTTP as a plain ASGI 3 app (``server`` extra).

Handlers are written once against :class:`RequestContext` and run under every async adapter;
the blocking stdio adapter takes the same handler written with ``def`` against
:class:`BlockingRequestContext`. :class:`StreamServer` is the IO-free half of a stream adapter,
for those who bring their own transport.
"""

from ._common import (
    BlockingHandler,
    BlockingRequestContext,
    Handler,
    HandlerResult,
    RequestContext,
    StreamServer,
    SubscriptionHub,
    call_blocking_handler,
    call_handler,
)

__all__ = [
    "BlockingHandler",
    "BlockingRequestContext",
    "Handler",
    "HandlerResult",
    "RequestContext",
    "StreamServer",
    "SubscriptionHub",
    "call_blocking_handler",
    "call_handler",
]
