"""Transports for the Sans-IO core: the only code in this package that does IO.

Import the one you need; none is imported by ``import mrtr_sansio`` or by this package:

* :mod:`mrtr_sansio.adapters.stdio` — blocking, newline-delimited JSON over stdin/stdout;
* :mod:`mrtr_sansio.adapters.asyncio` — asyncio streams (stdio pipes or TCP);
* :mod:`mrtr_sansio.adapters.trio` — trio streams (``trio`` extra);
* :mod:`mrtr_sansio.adapters.asgi` — Streamable HTTP as a plain ASGI 3 app (``server`` extra).

Handlers are written once against :class:`RequestContext` and run under every adapter.
"""

from ._common import Handler, HandlerResult, RequestContext, SubscriptionHub, call_handler

__all__ = ["Handler", "HandlerResult", "RequestContext", "SubscriptionHub", "call_handler"]
