"""A task's trace: each status change is a span of its own (no duration) with the change as
its event, a child of the task's creating request, on whichever process made the change."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from mrtr_sansio.observe import TaskStatusChanged
from mrtr_sansio.otel._attributes import ROUND, TASK_ID, TERMINAL
from mrtr_sansio.otel._metrics import Instruments
from mrtr_sansio.otel._propagation import under, valid_parent


def task_status_changed(
    fact: TaskStatusChanged,
    tracer: Tracer,
    instruments: Instruments,
    ns: Callable[[float], int | None],
    request_span: Callable[[int, Any], Span | None],
) -> None:
    """Record ``fact``. Its parent is the context stored with the task, else the creating
    request's open span (``request_span``); nothing waits for another process."""
    instruments.task_status.add(1, {"mrtr.task.status": fact.status})
    event: dict[str, Any] = {
        TASK_ID: fact.task_id,
        "mrtr.task.status": fact.status,
        ROUND: fact.round,
    }
    parent = valid_parent(fact.trace)
    if parent is None and fact.request_id is not None:
        request = request_span(fact.connection, fact.request_id)
        parent = None if request is None else under(request)
    at = ns(fact.at)
    span = tracer.start_span(f"task {fact.status}", parent, SpanKind.INTERNAL, event, start_time=at)
    span.add_event("mrtr.task.status", event, at)
    if fact.status in TERMINAL and fact.status != "completed":
        span.set_status(Status(StatusCode.ERROR, fact.status))
    span.end(at)
