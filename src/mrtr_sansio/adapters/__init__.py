"""Transports for the Sans-IO core: the only code in this package that does IO.

Import the one you need; none is imported by ``import mrtr_sansio`` or by this package:

* :mod:`mrtr_sansio.adapters.stdio` — blocking, newline-delimited JSON over stdin/stdout;
* :mod:`mrtr_sansio.adapters.anyio` — async, over anyio, on asyncio or trio (stdio or TCP);
* :mod:`mrtr_sansio.adapters.asyncio`, :mod:`mrtr_sansio.adapters.trio` — the same, taking
  each library's own streams (kept for compatibility);
* :mod:`mrtr_sansio.adapters.asgi` — Streamable HTTP as a plain ASGI 3 app (``server`` extra);
* :mod:`mrtr_sansio.adapters.http` — a Streamable HTTP client on httpx (``http`` extra).

Handlers are written once against :class:`RequestContext` and run under every async adapter;
the blocking stdio adapter takes the same handler written with ``def`` against
:class:`BlockingRequestContext`. :class:`ServerDriver` is the IO-free half of a stream adapter,
for those who bring their own transport, and :func:`answer` the one way every adapter hands a
handler's answer to the connection.

Each stream adapter also has a ``Client`` with the same application API: input callbacks for
elicitation, sampling and roots, ``call_tool`` / ``get_prompt`` / ``read_resource`` and the
list calls, and the typed exceptions below. :class:`ClientDriver` is its IO-free half.
"""

from typing import TYPE_CHECKING, Any

from mrtr_sansio._public import publish_errors

from ._client_common import (
    AsyncClientBase,
    BlockingClientOptions,
    BlockingInputCallback,
    ClientDriver,
    ClientOptions,
    InputCallback,
    NotificationCallback,
    TaskCallback,
    Trace,
)
from ._client_errors import (
    CallFailedError,
    ClientError,
    ConnectionClosedError,
    HandshakeFailedError,
    InputRejectedError,
    RoundsExhaustedError,
)
from ._common import (
    BlockingHandler,
    BlockingRequestContext,
    Handler,
    HandlerResult,
    RequestContext,
    call_blocking_handler,
    call_handler,
)
from ._loop import ServerDriver, answer

if TYPE_CHECKING:
    from ._listen import SubscriptionHub


__all__ = [
    "AsyncClientBase",
    "BlockingClientOptions",
    "BlockingHandler",
    "BlockingInputCallback",
    "BlockingRequestContext",
    "CallFailedError",
    "ClientDriver",
    "ClientError",
    "ClientOptions",
    "ConnectionClosedError",
    "Handler",
    "HandlerResult",
    "HandshakeFailedError",
    "InputCallback",
    "InputRejectedError",
    "NotificationCallback",
    "RequestContext",
    "RoundsExhaustedError",
    "ServerDriver",
    "SubscriptionHub",
    "TaskCallback",
    "Trace",
    "answer",
    "call_blocking_handler",
    "call_handler",
]

publish_errors(globals(), __name__)  # after __all__, which it reads
del publish_errors


#: Old names kept for a release: what each says to use instead, and where it lives now.
_RENAMED: dict[str, tuple[str, str, str]] = {
    "StreamServer": ("use ServerDriver", "_loop", "ServerDriver"),
    "ClientBase": (
        "annotate with the client class you use, or AsyncClientBase",
        "_client_common",
        "ClientBase",
    ),
    "client_config": (
        "ClientDriver.create takes the options itself",
        "_client_options",
        "client_config",
    ),
}


def __getattr__(name: str) -> Any:
    """:class:`SubscriptionHub` on first use: it needs anyio, which the blocking stdio
    adapter (this package without extras) does not; and the old names, with a warning."""
    if name == "SubscriptionHub":
        from ._listen import SubscriptionHub

        return SubscriptionHub
    renamed = _RENAMED.get(name)
    if renamed is not None:
        import importlib
        import warnings

        instead, module, attr = renamed
        message = f"mrtr_sansio.adapters.{name} is deprecated: {instead}"
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(f"{__name__}.{module}"), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
