"""``subscriptions/listen`` streams: which notifications a stream may carry, and their tagging.

A listen request opens a long-lived response stream. Every notification type is opt-in through
the request's ``notifications`` filter; the first message on the stream is
``notifications/subscriptions/acknowledged``; every notification on it carries the listen
request's id as ``_meta["io.modelcontextprotocol/subscriptionId"]`` (spec 2026-07-28).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mrtr_sansio._errors import LocalProtocolError

from .envelope import SUBSCRIPTION_ID

__all__ = ["ACKNOWLEDGED", "CANCELLED", "LISTEN", "allowed_on_stream", "on_stream", "tag"]

LISTEN = "subscriptions/listen"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
#: What a server tears a listen stream down with on stdio (the only server-sent cancel).
CANCELLED = "notifications/cancelled"
_FILTER_KEYS = {
    "notifications/tools/list_changed": "toolsListChanged",
    "notifications/prompts/list_changed": "promptsListChanged",
    "notifications/resources/list_changed": "resourcesListChanged",
}


def allowed_on_stream(
    wanted: Mapping[str, Any], method: str, params: Mapping[str, Any] | None
) -> bool:
    """Whether the client's filter ``wanted`` opted in to this notification."""
    key = _FILTER_KEYS.get(method)
    if key is not None:
        return wanted.get(key) is True
    if method == "notifications/tasks":  # SEP-2663: per task, by notifications.taskIds
        ids = wanted.get("taskIds")
        task_id = params.get("taskId") if params is not None else None
        return isinstance(ids, list) and isinstance(task_id, str) and task_id in ids
    if method == "notifications/resources/updated":
        uris = wanted.get("resourceSubscriptions")
        uri = params.get("uri") if params is not None else None
        return isinstance(uris, list) and isinstance(uri, str) and uri in uris
    return False


def on_stream(
    event: Any, acknowledged: bool, method: str, params: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """The params to send ``method`` with on the listen stream of ``event``, tagged with its
    subscription id; None when the client did not opt in. Raises :class:`LocalProtocolError`
    before the subscription is acknowledged, and for the acknowledgement itself (it has its
    own method)."""
    if method == ACKNOWLEDGED:
        raise LocalProtocolError("use acknowledge() to acknowledge a subscription")
    if not acknowledged:
        raise LocalProtocolError("acknowledge() the subscription before notifying on it")
    if not allowed_on_stream(event.params["notifications"], method, params):
        return None
    return tag(params, event.request_id)


def tag(params: Mapping[str, Any] | None, subscription_id: Any) -> dict[str, Any]:
    """``params`` with the subscription id added to its ``_meta`` (copies, never mutates)."""
    out = dict(params) if params is not None else {}
    meta = out.get("_meta")
    out["_meta"] = (
        {**meta, SUBSCRIPTION_ID: subscription_id}
        if isinstance(meta, Mapping)
        else {SUBSCRIPTION_ID: subscription_id}
    )
    return out
