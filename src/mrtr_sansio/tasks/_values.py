"""Task values: the stored record of one task, what a handler returns to become one, and the
wire shapes (``CreateTaskResult``, ``DetailedTask``) made from a record.

A :class:`Task` is immutable; every change is a new record with ``revision + 1``, written
back with a compare-and-swap (:meth:`TaskStore.replace`), so that several processes sharing a
store never lose an update. Records hold only JSON values (:meth:`Task.to_record`), so that any
store can keep them.
"""

from __future__ import annotations

import datetime
import enum
import json
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from mrtr_sansio._events import Call, Event
from mrtr_sansio._lifecycle import TASK, TaskStatus
from mrtr_sansio._mcp.capabilities import TASKS_EXTENSION
from mrtr_sansio._mcp.envelope import CLIENT_CAPABILITIES
from mrtr_sansio._mcp.mrtr_fields import TASK as TASK_RESULT

__all__ = [
    "EXTENSION",
    "RunAsTask",
    "StoredParams",
    "Task",
    "TaskCancelled",
    "TaskStarted",
    "TaskSupport",
    "iso_time",
]

#: The extension identifier, in client and server capabilities' ``extensions``.
EXTENSION = TASKS_EXTENSION


class TaskSupport(enum.Enum):
    """Whether a tool may run as a task (``execution.taskSupport`` in its listing)."""

    #: Never a task (the default for every tool).
    FORBIDDEN = "forbidden"
    #: A task when the client declares the extension on that request, else synchronous.
    OPTIONAL = "optional"
    #: Only as a task: a client that does not declare the extension gets -32021.
    REQUIRED = "required"


@attrs.frozen
class RunAsTask:
    """What a handler returns to make its request a task (only when
    ``request.can_create_task``): the server answers ``CreateTaskResult`` and runs the same
    handler again as the task, with the same arguments, answers and state.

    ``state`` replaces the request's state for that run when given (a JSON value);
    ``status_message`` is the task's first ``statusMessage``.
    """

    state: Any = None
    status_message: str | None = None


@attrs.frozen
class TaskCancelled(Event):
    """The client cancelled the task ``task_id`` (``tasks/cancel``): stop its run if one is
    going on in this process; its result would be dropped anyway."""

    task_id: str


@attrs.frozen
class TaskStarted(Event):
    """Client side: the server made ``call`` the task ``task_id`` (``CreateTaskResult``). The
    connection polls it from now on; keep the id to resume it after a restart
    (``ClientConnection.resume_task``)."""

    call: Call
    task_id: str


def iso_time(seconds: float) -> str:
    """ISO 8601 UTC with milliseconds, e.g. ``2026-07-28T10:30:00.000Z``."""
    moment = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _frozen(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if value is None else dict(value)


def _plain(value: Mapping[str, Any]) -> dict[str, Any]:
    return dict(value)


def encoded(value: Any) -> str:
    """``value`` as compact JSON, ASCII only: its length is the bytes it takes (stored, sent,
    and in memory, where an ASCII ``str`` is one byte a character)."""
    return json.dumps(value, separators=(",", ":"))


@attrs.frozen(eq=False, repr=False)
class StoredParams:
    """A task's params that its store keeps apart from the rest of the record: their length
    in bytes (what :attr:`Task.size` counts) and ``load``, which reads their JSON from
    ``origin`` (the store) when a run needs them. A store that keeps them apart hands them
    out with each record it reads, so that a read that needs no params fetches none.

    A store that sees its own ``StoredParams`` in a record it is asked to write knows the
    params did not change since it was read and writes the rest only.
    """

    size: int
    load: Callable[[], str]
    origin: object

    def __repr__(self) -> str:
        return f"StoredParams(size={self.size})"


def _params_source(value: Mapping[str, Any] | str | StoredParams) -> str | StoredParams:
    if isinstance(value, str | StoredParams):
        return value
    return encoded(dict(value))


def _params_text(value: str | StoredParams) -> str:
    """What records compare by: the params' JSON, read when they are kept apart."""
    return value if isinstance(value, str) else value.load()


@attrs.frozen
class Task:
    """One task's stored record.

    ``params_source`` holds the creating ``tools/call``'s params (envelope included,
    ``requestState`` removed) once, as compact JSON, or as :class:`StoredParams` when a store
    keeps them apart and reads them only when asked (:attr:`params_json`; :attr:`params` decodes
    them): a decoded request is many times its size in memory, and only a run of the handler
    needs it, while ``tasks/get`` and listen streams read a record far more often. It is built
    from ``params=`` (a mapping, that JSON, or :class:`StoredParams`) and dropped (``{}``) once
    the task is terminal, with everything else only a run needs. ``state`` and ``answers`` are
    what the next run of the handler gets as its request state and ``inputResponses`` (by the
    handler's own keys). ``outstanding`` maps each task key the client must answer to ``{"key":
    handler key, "request": InputRequest}``; ``issued`` lists every task key ever sent, so that
    none is reused. ``lease_until`` is when the process running the handler must have renewed
    its lease (None: no run going on). ``size`` is the bytes of its payload (params, state,
    answers, outstanding requests, result, error) as compact JSON: what
    ``TaskSettings.max_task_bytes`` bounds. ``capabilities`` are the client capabilities the
    creating request declared (what a round of input may ask for). ``trace`` is the W3C trace
    context an observer gave the task at its creation (None: none), so that every process that
    reads or moves it can link its spans to it.
    """

    task_id: str
    owner: str | None
    status: TaskStatus
    created_at: float
    updated_at: float
    ttl_ms: int | None
    poll_interval_ms: int | None
    params_source: str | StoredParams = attrs.field(
        alias="params", converter=_params_source, eq=_params_text
    )
    state: Any = None
    round: int = 1
    status_message: str | None = None
    outstanding: Mapping[str, Any] = attrs.field(factory=dict, converter=_plain)
    answers: Mapping[str, Any] = attrs.field(factory=dict, converter=_plain)
    issued: tuple[str, ...] = ()
    result: Mapping[str, Any] | None = attrs.field(default=None, converter=_frozen)
    error: Mapping[str, Any] | None = attrs.field(default=None, converter=_frozen)
    revision: int = 0
    lease_until: float | None = None
    size: int = 0
    capabilities: Mapping[str, Any] = attrs.field(factory=dict, converter=_plain)
    trace: Mapping[str, str] | None = attrs.field(default=None, converter=_frozen)

    @property
    def params_json(self) -> str:
        """The creating request's params as JSON, read from the store when it keeps them
        apart (each call reads them anew: only a run of the handler asks)."""
        return _params_text(self.params_source)

    @property
    def params_size(self) -> int:
        """The bytes of :attr:`params_json`, known without reading params kept apart."""
        source = self.params_source
        return len(source) if isinstance(source, str) else source.size

    @property
    def params(self) -> dict[str, Any]:
        """The creating request's params, decoded anew on each read (a run needs its own)."""
        params: dict[str, Any] = json.loads(self.params_json)
        return params

    def expired(self, now: float) -> bool:
        """Whether the TTL has passed (the task may then be discarded)."""
        return self.ttl_ms is not None and (now - self.created_at) * 1000 >= self.ttl_ms

    def _fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status.value,
            "createdAt": iso_time(self.created_at),
            "lastUpdatedAt": iso_time(self.updated_at),
            "ttlMs": self.ttl_ms,
        }
        if self.poll_interval_ms is not None:
            out["pollIntervalMs"] = self.poll_interval_ms
        if self.status_message is not None:
            out["statusMessage"] = self.status_message
        return out

    def create_result(self) -> dict[str, Any]:
        """The ``CreateTaskResult`` (``resultType: "task"``): the task's fields, nothing
        status-specific, never ``requestState``."""
        return {"resultType": TASK_RESULT, **self._fields()}

    def detailed(self) -> dict[str, Any]:
        """The ``DetailedTask`` of ``tasks/get`` and ``notifications/tasks``: the fields plus
        ``inputRequests`` (input_required), ``result`` (completed) or ``error`` (failed)."""
        out = self._fields()
        status = self.status
        if status is TaskStatus.INPUT_REQUIRED:
            out["inputRequests"] = {k: v["request"] for k, v in self.outstanding.items()}
        elif status is TaskStatus.COMPLETED:
            out["result"] = self.result
        elif status is TaskStatus.FAILED:
            out["error"] = self.error
        return out

    def to_record(self, *, params: bool = True) -> dict[str, Any]:
        """The record as JSON values, for a store to keep; ``params=False``: without the
        params (``params_size`` instead), for a store that keeps them apart."""
        record: dict[str, Any] = {
            "task_id": self.task_id,
            "owner": self.owner,
            "status": self.status.value,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "ttl_ms": self.ttl_ms,
            "poll_interval_ms": self.poll_interval_ms,
            "state": self.state,
            "round": self.round,
            "status_message": self.status_message,
            "outstanding": self.outstanding,
            "answers": self.answers,
            "issued": list(self.issued),
            "result": self.result,
            "error": self.error,
            "revision": self.revision,
            "lease_until": self.lease_until,
            "size": self.size,
            "capabilities": self.capabilities,
            "trace": self.trace,
        }
        if params:
            record["params"] = self.params_json
        else:
            record["params_size"] = self.params_size
        return record

    @classmethod
    def from_record(
        cls, record: Mapping[str, Any], kept: Callable[[int], StoredParams] | None = None
    ) -> Task:
        """The inverse of :meth:`to_record`: a record without ``params`` takes them from
        ``kept`` (called with ``params_size``). A record that kept ``params`` decoded, as older
        versions wrote them, is read too; one written before ``trace`` existed reads as None."""
        fields = dict(record)
        if "params" not in fields and kept is not None:
            fields["params"] = kept(fields.pop("params_size"))
        fields["status"] = TaskStatus(fields["status"])
        fields["issued"] = tuple(fields["issued"])
        task = cls(**fields)
        if "capabilities" not in fields and task.status not in TASK.terminal:
            task = attrs.evolve(task, capabilities=client_capabilities(task.params))
        return task


def client_capabilities(params: Mapping[str, Any]) -> Mapping[str, Any]:
    """The client capabilities a request's ``_meta`` declares ({} when none)."""
    meta = params.get("_meta")
    caps = meta.get(CLIENT_CAPABILITIES) if isinstance(meta, Mapping) else None
    return caps if isinstance(caps, Mapping) else {}
