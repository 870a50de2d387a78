"""Trace context across messages and processes: reading W3C keys into a parent, writing a
span's context out (for a request's ``_meta`` or the sealed ``requestState``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.propagate import extract, inject
from opentelemetry.trace import Span, SpanContext


def valid_parent(context: Mapping[str, str] | None) -> Any:
    """The OpenTelemetry context of W3C keys, or None when they name no valid span."""
    if not context:
        return None
    extracted = extract(dict(context))
    return extracted if trace.get_current_span(extracted).get_span_context().is_valid else None


def span_context_of(context: Mapping[str, str]) -> SpanContext:
    """The span context W3C keys name (an invalid one when they name none)."""
    return trace.get_current_span(extract(dict(context))).get_span_context()


def under(span: Span) -> Any:
    """The OpenTelemetry context whose current span is ``span`` (a parent for a child)."""
    return trace.set_span_in_context(span)


def headers_of(span: Span) -> dict[str, str]:
    """The W3C headers (``traceparent``, ...) that carry ``span``'s context."""
    headers: dict[str, str] = {}
    inject(headers, trace.set_span_in_context(span))
    return headers
