"""The server connection's side of the tasks extension: the task gates of ``tools/call`` and
``subscriptions/listen``, the answers to ``tasks/get``/``tasks/update``/``tasks/cancel``, and
the work behind ``ServerConnection``'s task methods (a task's start, a run's outcome, reads).

The gates and :func:`detailed` are functions of their arguments alone. The others act through
the :class:`TaskMachine` they are handed, which reads and writes the task store (the store
may do IO: the connection's owner chose it); none queues or sends: each returns the result,
the stored task or the event it causes (a task's next run, a cancellation), or raises, and the
connection answers the wire and queues the event.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mrtr_sansio._config import ServerConfig
from mrtr_sansio._errors import JsonRpcError, LocalProtocolError, RemoteProtocolError
from mrtr_sansio._events import Event, RequestReceived
from mrtr_sansio._mcp.capabilities import declares_tasks
from mrtr_sansio._mcp.envelope import invalid
from mrtr_sansio._mcp.methods import TASK_REQUESTS
from mrtr_sansio._mcp.mrtr_fields import COMPLETE

from ._machine import TaskLimitError, TaskMachine
from ._store import TaskStoreError
from ._values import EXTENSION, RunAsTask, Task, TaskCancelled, TaskSupport

__all__ = [
    "TASK_REQUESTS",
    "answer_task_request",
    "detailed",
    "missing_tasks",
    "needs_tasks",
    "required_task_error",
    "settle_task",
    "start_task",
    "task_machine",
]

#: ``requiredCapabilities`` of every -32021 the extension causes.
REQUIRED: dict[str, Any] = {"extensions": {EXTENSION: {}}}


def task_machine(config: ServerConfig, observer_key: int) -> TaskMachine | None:
    """The task machine of a server connection serving ``config`` (None without tasks)."""
    settings = config.tasks
    if settings is None:
        return None
    return TaskMachine(
        settings,
        config.clock,
        config.token_hex,
        config.limits.max_input_requests,
        config.observer,
        observer_key,
    )


def missing_tasks(rid: Any) -> RemoteProtocolError:
    """-32021 naming the tasks extension (a non-declaring client asked for task things)."""
    return RemoteProtocolError(
        JsonRpcError.missing_capability(
            REQUIRED, f"Missing required client capability: extensions.{EXTENSION}"
        ),
        rid,
    )


def required_task_error(
    machine: TaskMachine, rid: Any, params: Mapping[str, Any], capabilities: Any, legacy: bool
) -> RemoteProtocolError | None:
    """The error for a ``tools/call`` of a task-required tool that cannot become a task:
    -32021 on the modern wire (the client did not declare the extension), -32603 on the
    legacy wire (2025-11-25 tasks are not wire-compatible with the extension)."""
    name = params.get("name")
    if machine.settings.support(name) is not TaskSupport.REQUIRED:
        return None
    if legacy:
        return RemoteProtocolError(
            JsonRpcError.internal(
                f"Tool {name} runs only as a task, which needs protocol 2026-07-28 with the "
                f"{EXTENSION} extension"
            ),
            rid,
        )
    if declares_tasks(capabilities):
        return None
    return missing_tasks(rid)


def answer_task_request(
    machine: TaskMachine,
    rid: Any,
    method: str,
    params: Mapping[str, Any],
    capabilities: Any,
    principal: str | None,
    max_responses: int,
) -> tuple[dict[str, Any], Mapping[str, str] | None, Event | None]:
    """The result of a ``tasks/*`` request, the trace context stored with the task (for an
    observer), and the event for the application it causes (a task's next run, a
    cancellation) if any: the caller queues it. Raises :class:`RemoteProtocolError`."""
    if not declares_tasks(capabilities):
        raise missing_tasks(rid)
    task_id = params.get("taskId")
    if type(task_id) is not str:
        raise invalid(rid, f"{method}: taskId must be a string")
    event: Event | None = None
    try:
        if method == "tasks/get":
            found = machine.find(task_id, principal)
            if not isinstance(found, str):
                return {"resultType": COMPLETE, **found.detailed()}, found.trace, None
        elif method == "tasks/update":
            responses = params.get("inputResponses")
            if type(responses) is not dict:
                raise invalid(rid, "tasks/update: inputResponses must be an object")
            if len(responses) > max_responses:
                raise invalid(rid, f"inputResponses has more than {max_responses} entries")
            if not all(type(v) is dict for v in responses.values()):
                raise invalid(rid, "each inputResponses value must be an object")
            found, event = machine.update(task_id, principal, responses)
        else:
            found, cancelled = machine.cancel(task_id, principal)
            if cancelled:
                event = TaskCancelled(task_id)
    except (LocalProtocolError, TaskStoreError, TaskLimitError) as exc:
        # The store kept changing, failed, or the update would store too much: -32603.
        raise RemoteProtocolError(JsonRpcError.internal(str(exc)), rid) from None
    if isinstance(found, str):
        raise RemoteProtocolError(
            JsonRpcError.invalid_params(f"Failed to retrieve task: {found}"), rid
        )
    return {"resultType": COMPLETE}, found.trace, event


def start_task(
    machine: TaskMachine | None, event: RequestReceived, run: RunAsTask
) -> tuple[Task, RequestReceived] | JsonRpcError:
    """Make ``event`` a task (a handler answered :class:`RunAsTask`): the stored task and the
    request of its first run, for the connection to answer and queue, or the -32603 to answer
    when the store fails or is full. Raises :class:`LocalProtocolError` when the server or the
    request cannot have a task."""
    if machine is None:
        raise LocalProtocolError("RunAsTask needs the tasks extension (ServerConfig.tasks)")
    if not event.can_create_task:
        raise LocalProtocolError(
            f"{event.method} {event.request_id!r} cannot become a task "
            "(answer RunAsTask only when request.can_create_task)"
        )
    if machine.settings.support(event.name) is TaskSupport.FORBIDDEN:
        raise LocalProtocolError(f"tool {event.name!r} may not run as a task (TaskSettings.tools)")
    try:
        return machine.create(event, run)
    except (TaskLimitError, TaskStoreError) as exc:
        return JsonRpcError.internal(str(exc))


def settle_task(
    machine: TaskMachine | None,
    request: RequestReceived,
    result: Any,
    encode: Callable[[Any], bytes],
) -> RequestReceived | None:
    """Record what a task's run returned (``ServerConnection.settle_task``): the task's next
    run when a state-only answer asks for one, for the connection to queue. Raises
    :class:`LocalProtocolError` when ``request`` is not a task's run, or from ``encode`` (the
    connection's) when a result mapping cannot be serialized."""
    if machine is None or request.task_id is None:
        raise LocalProtocolError(f"{request.request_id!r} is not a task's run")
    if isinstance(result, Mapping):  # stored now, sent by every later tasks/get: JSON only
        encode(result)
    return machine.settle(request.task_id, result)


def needs_tasks(machine: TaskMachine | None, what: str) -> TaskMachine:
    """``machine``; :class:`LocalProtocolError` naming ``what`` when the server has none."""
    if machine is None:
        raise LocalProtocolError(f"{what} needs the tasks extension (ServerConfig.tasks)")
    return machine


def detailed(found: Task | str) -> dict[str, Any] | None:
    """The ``DetailedTask`` of what :meth:`TaskMachine.find` found, None for a refusal."""
    return None if isinstance(found, str) else found.detailed()
