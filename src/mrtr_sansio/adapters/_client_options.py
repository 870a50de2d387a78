"""What a client application gives a client adapter: the input callbacks, the notification and
trace hooks, and the configuration they imply.

An application registers one callback per kind of input it can give, and the declared
capabilities follow from them (``elicitation`` -> ``{"elicitation": {"form": {}}}``,
``sampling`` -> ``{"sampling": {}}``, ``roots`` -> ``{"roots": {}}``) unless
``ClientConfig.capabilities`` names that capability itself. A callback receives the
:class:`~mrtr_sansio.InputNeeded` event (``params`` is the request, ``call`` the operation that
needs it) and returns the result object: an ``ElicitResult`` (``{"action": "accept", "content":
...}``, or ``"decline"``/``"cancel"``), a ``CreateMessageResult`` or a ``ListRootsResult``. It
refuses by raising :class:`~mrtr_sansio.adapters.InputRejectedError`. The same callbacks serve
both wires: on the modern one they answer embedded ``inputRequests`` and the retry goes out once
a round is answered; on the legacy one they answer the server's own requests.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, TypeAlias, TypedDict

import attrs

from mrtr_sansio import ClientConfig, InputNeeded
from mrtr_sansio.tasks import TaskStarted

__all__ = [
    "SHUTDOWN_TIMEOUT",
    "BlockingClientOptions",
    "BlockingInputCallback",
    "ClientOptions",
    "InputCallback",
    "NotificationCallback",
    "TaskCallback",
    "Trace",
    "call_hook",
    "client_config",
]

log = logging.getLogger("mrtr_sansio.adapters")

#: An async input callback: the request in, the result object out.
InputCallback: TypeAlias = Callable[[InputNeeded], Awaitable[Mapping[str, Any]]]
#: The blocking client's input callback.
BlockingInputCallback: TypeAlias = Callable[[InputNeeded], Mapping[str, Any]]
#: Called with ``(method, params)`` for each notification the server sends (progress, logs).
NotificationCallback: TypeAlias = Callable[[str, Mapping[str, Any] | None], object]
#: Called with the :class:`~mrtr_sansio.tasks.TaskStarted` event when a call becomes a task
#: (tasks extension): persist ``event.task_id`` to resume the task after a restart.
TaskCallback: TypeAlias = Callable[[TaskStarted], object]
#: Called with ``("send" | "recv", message)`` for every message on the wire, as its JSON bytes.
Trace: TypeAlias = Callable[[Literal["send", "recv"], bytes], object]


class ClientOptions(TypedDict, total=False):
    """What an async client is given besides its configuration."""

    #: Answers ``elicitation/create`` (declares ``elicitation``).
    elicitation: InputCallback | None
    #: Answers ``sampling/createMessage`` (declares ``sampling``).
    sampling: InputCallback | None
    #: Answers ``roots/list`` (declares ``roots``).
    roots: InputCallback | None
    #: Called for each notification (logs, progress).
    on_notification: NotificationCallback | None
    #: Called when a call becomes a task, with its task id (tasks extension).
    on_task: TaskCallback | None
    trace: Trace | None
    #: ``ClientConfig.log_level``: ask for logs at this level and above on every call.
    log_level: str | None
    #: ``ClientConfig.progress``: ask for progress on every call.
    progress: bool


class BlockingClientOptions(TypedDict, total=False):
    """:class:`ClientOptions` for the blocking client: the callbacks are plain functions."""

    elicitation: BlockingInputCallback | None
    sampling: BlockingInputCallback | None
    roots: BlockingInputCallback | None
    on_notification: NotificationCallback | None
    on_task: TaskCallback | None
    trace: Trace | None
    log_level: str | None
    progress: bool


#: Seconds a closing client waits for the server to end its output; for a server it launched,
#: then as long again for the process to exit after its stdin was closed, then after SIGTERM,
#: before SIGKILL (the shutdown the stdio transport prescribes); its pipes are closed then.
SHUTDOWN_TIMEOUT = 5.0

#: The capability each callback declares when the configuration does not name it.
_DEFAULT_CAPABILITIES: dict[str, tuple[str, dict[str, Any]]] = {
    "elicitation/create": ("elicitation", {"form": {}}),
    "sampling/createMessage": ("sampling", {}),
    "roots/list": ("roots", {}),
}


# --- configuration ----------------------------------------------------------------------------


def client_config(
    config: ClientConfig | None, options: ClientOptions | BlockingClientOptions
) -> tuple[ClientConfig, dict[str, Any]]:
    """``config`` with the capabilities of the callbacks in ``options`` added where it does
    not name them (and ``log_level``/``progress`` from ``options`` when given), and the
    registered callbacks by method.

    Raises ``ValueError`` when ``config`` declares a capability no callback can answer.
    """
    config = config if config is not None else ClientConfig()
    caps = dict(config.capabilities)
    registered = {}
    for method, (name, default) in _DEFAULT_CAPABILITIES.items():
        callback = options.get(name)
        if callback is not None:
            registered[method] = callback
            caps.setdefault(name, default)
        elif name in caps:
            raise ValueError(f"capabilities: {name} is declared but no callback answers {method}")
    if caps != config.capabilities:
        config = attrs.evolve(config, capabilities=caps)
    if "log_level" in options:
        config = attrs.evolve(config, log_level=options["log_level"])
    if "progress" in options:
        config = attrs.evolve(config, progress=options["progress"])
    return config, registered


def call_hook(hook: Callable[..., object], *args: Any) -> None:
    """Call an application hook (trace, notifications); a failure is logged, not raised into
    the loop that reads the server's messages."""
    try:
        hook(*args)
    except Exception:
        log.exception("a client hook failed")
