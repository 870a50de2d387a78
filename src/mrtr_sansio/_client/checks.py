"""What the client checks: ``input_required`` results, the requests a server asks us to fulfil
(embedded on the modern wire, real JSON-RPC requests on the legacy one), and our own answers.

Pure functions over decoded JSON, so that the rules are testable on their own and the
connection stays a state machine. Server-side mistakes raise :class:`InvalidResponseError` or
return a :class:`JsonRpcError`; application mistakes raise :class:`LocalProtocolError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mrtr_sansio._config import Limits
from mrtr_sansio._errors import ErrorCode, InvalidResponseError, JsonRpcError, LocalProtocolError
from mrtr_sansio._events import Call, InputNeeded
from mrtr_sansio._mcp.capabilities import (
    ELICIT,
    ROOTS,
    SAMPLE,
    capability_paths,
    grants,
    missing_capabilities,
    needs_of,
    required_capabilities,
)
from mrtr_sansio._mcp.envelope import CLIENT_CAPABILITIES, CLIENT_INFO, PROTOCOL_VERSION_KEY
from mrtr_sansio._mcp.methods import MRTR_METHODS
from mrtr_sansio._mcp.mrtr_fields import RETRY_FIELDS
from mrtr_sansio._mcp.values import EMBEDDABLE_METHODS

__all__ = [
    "check_answer",
    "check_call",
    "check_capabilities",
    "check_elicitation",
    "check_event",
    "check_handle",
    "check_rejection",
    "check_server_request",
    "read_input_required",
    "request_problem",
]

#: (key, method, params) of one embedded request, params ``{}`` when the server sent none.
Embedded = tuple[str, str, Mapping[str, Any]]

#: Fields of the params that belong to the connection, never to the application.
_ENVELOPE_KEYS = (PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES, CLIENT_INFO)
_ELICIT_ACTIONS = ("accept", "decline", "cancel")
_ROLES = ("user", "assistant")


class _Absent:
    __slots__ = ()


_ABSENT: Any = _Absent()


def request_problem(method: str, params: Any) -> str | None:
    """What is wrong with an embedded or server-to-client request, or None if it is usable.

    Checks the structure a client needs to act on the request: the method is one of the three,
    and the fields that drive the user interface have the right types. Unknown extra fields are
    tolerated, as both schemas allow them.
    """
    if method not in EMBEDDABLE_METHODS:
        return f"{method!r} is not elicitation/create, sampling/createMessage or roots/list"
    if method == ROOTS:
        if params is not None and type(params) is not dict:
            return "roots/list params must be an object"
        return None
    if type(params) is not dict:
        return f"{method} needs params (an object)"
    if method == ELICIT:
        if type(params.get("message")) is not str:
            return "elicitation/create needs a string message"
        mode = params.get("mode", "form")
        if mode == "form":
            if type(params.get("requestedSchema")) is not dict:
                return "form-mode elicitation/create needs a requestedSchema object"
        elif mode == "url":
            if type(params.get("url")) is not str:
                return "url-mode elicitation/create needs a string url"
        else:
            return f"unknown elicitation mode {mode!r}"
        return None
    # sampling/createMessage
    if type(params.get("messages")) is not list:
        return "sampling/createMessage needs a messages array"
    if type(params.get("maxTokens")) is not int:
        return "sampling/createMessage needs an integer maxTokens"
    return None


def read_input_required(
    result: Mapping[str, Any], declared: Mapping[str, Any], limits: Limits
) -> tuple[list[Embedded], str | None]:
    """Validate an ``input_required`` result; return its embedded requests and ``requestState``.

    Raises :class:`InvalidResponseError` when neither field is present, a field has the wrong type,
    the map or the state exceeds its limit, a request is unusable, or a request needs a client
    capability ``declared`` does not grant (the server's MUST NOT, DIGEST S7).
    """
    requests = result.get("inputRequests", _ABSENT)
    state = result.get("requestState", _ABSENT)
    if requests is _ABSENT and state is _ABSENT:
        raise InvalidResponseError(
            "input_required result has neither inputRequests nor requestState"
        )
    if state is _ABSENT:
        state = None
    elif type(state) is not str:
        raise InvalidResponseError("requestState must be a string")
    else:
        max_state = limits.max_request_state_bytes
        if len(state) > max_state or (
            len(state) * 4 > max_state and len(state.encode("utf-8", "surrogatepass")) > max_state
        ):
            raise InvalidResponseError(f"requestState is longer than {max_state} bytes")
    if requests is _ABSENT:
        return [], state
    if type(requests) is not dict:
        raise InvalidResponseError("inputRequests must be an object")
    if len(requests) > limits.max_input_requests:
        raise InvalidResponseError(
            f"inputRequests has more than {limits.max_input_requests} entries"
        )
    out: list[Embedded] = []
    for key, request in requests.items():
        if type(key) is not str:
            raise InvalidResponseError("inputRequests keys must be strings")
        if type(request) is not dict:
            raise InvalidResponseError(f"inputRequests[{key!r}] must be an object")
        method = request.get("method")
        params = request.get("params")
        if type(method) is not str:
            raise InvalidResponseError(f"inputRequests[{key!r}] has no method")
        problem = request_problem(method, params)
        if problem is not None:
            raise InvalidResponseError(f"inputRequests[{key!r}]: {problem}")
        if not grants(declared, needs_of(method, params)):
            missing = missing_capabilities(required_capabilities(method, params), declared)
            raise InvalidResponseError(
                f"inputRequests[{key!r}] needs client capabilities this client did not declare: "
                + ", ".join(capability_paths(missing))
            )
        out.append((key, method, params if params is not None else {}))
    return out, state


def check_server_request(
    method: str, params: Any, declared: Mapping[str, Any]
) -> JsonRpcError | None:
    """The error to answer a legacy server request with, or None when it may be shown.

    Follows DIGEST §5.6: an unusable request or an undeclared elicitation mode or sampling
    feature is -32602; ``roots/list`` without the ``roots`` capability is -32601.
    """
    problem = request_problem(method, params)
    if problem is not None:
        return JsonRpcError(ErrorCode.INVALID_PARAMS, f"Invalid params: {problem}")
    missing = missing_capabilities(required_capabilities(method, params), declared)
    if not missing:
        return None
    names = ", ".join(capability_paths(missing))
    if method == ROOTS:
        return JsonRpcError(
            ErrorCode.METHOD_NOT_FOUND, "Method not found: roots/list (roots not declared)"
        )
    return JsonRpcError(
        ErrorCode.INVALID_PARAMS,
        f"Invalid params: this client did not declare the capability {names}",
    )


def check_answer(method: str, result: Any) -> dict[str, Any]:
    """Check the application's answer to a ``method`` request; return it as a plain dict.

    Raises :class:`LocalProtocolError` for an answer the server could not read: an elicitation
    answer needs an ``action``, a sampling answer ``role``, ``content`` and ``model``, a roots
    answer a ``roots`` array.
    """
    if type(result) is dict:
        answer = result
    elif isinstance(result, Mapping):
        answer = dict(result)
    else:
        raise LocalProtocolError(f"the answer must be a mapping, not {type(result).__name__}")
    if method == ELICIT:
        if answer.get("action") not in _ELICIT_ACTIONS:
            raise LocalProtocolError('an elicitation answer needs "action": accept/decline/cancel')
        content = answer.get("content")
        if content is not None and type(content) is not dict and not isinstance(content, Mapping):
            raise LocalProtocolError("an elicitation answer's content must be a mapping")
    elif method == SAMPLE:
        if (
            answer.get("role") not in _ROLES
            or "content" not in answer
            or not isinstance(answer.get("model"), str)
        ):
            raise LocalProtocolError('a sampling answer needs "role", "content" and "model"')
    elif not isinstance(answer.get("roots"), list):
        raise LocalProtocolError('a roots/list answer needs a "roots" list')
    return answer


def check_capabilities(capabilities: Mapping[str, Any]) -> None:
    """Raise :class:`ValueError` unless each capability ``ClientConfig`` declares is an object."""
    for name, value in capabilities.items():
        if not isinstance(value, Mapping):
            raise ValueError(f"capabilities: {name} must be an object, got {value!r}")


def check_event(event: Any) -> InputNeeded:
    """``event``, when the application answers an :class:`InputNeeded`; else TypeError."""
    if type(event) is not InputNeeded:
        raise TypeError(f"event: must be an InputNeeded, not {type(event).__name__}")
    return event


def check_handle(call: Any) -> Call:
    """``call``, when ``cancel`` is handed a :class:`Call`; else TypeError (with a hint for an
    event, whose elicitation ``dismiss`` answers)."""
    if type(call) is not Call:
        hint = "; dismiss(event) answers an elicitation" * isinstance(call, InputNeeded)
        raise TypeError(f"cancel() takes a Call, not {type(call).__name__}{hint}")
    return call


def check_elicitation(event: Any, action: str) -> InputNeeded:
    """``event``, when the elicitation ``action`` (decline, dismiss) can answer it."""
    needed = check_event(event)
    if needed.method != ELICIT:
        raise LocalProtocolError(
            f"{action} answers elicitation/create, not {needed.method}; use reject() or "
            "cancel(event.call)"
        )
    return needed


def check_rejection(error: Any) -> JsonRpcError:
    """The error ``reject(event, error)`` sends: ``error``, or by default -1, "User rejected
    the request" (the convention for sampling)."""
    if error is None:
        return JsonRpcError(-1, "User rejected the request")
    if type(error) is not JsonRpcError:
        raise TypeError(f"error: must be a JsonRpcError, not {type(error).__name__}")
    return error


def check_call(method: Any, params: Any) -> dict[str, Any]:
    """A copy of the params of ``call(method, params)``, or :class:`TypeError` /
    :class:`LocalProtocolError` for a call the application must not make: ``initialize``
    (the connection's), or params holding what the connection sends (an MRTR request's
    ``inputResponses`` and ``requestState``, the envelope's ``_meta`` keys)."""
    if type(method) is not str:
        raise TypeError(f"method: must be a string, not {type(method).__name__}")
    if method == "initialize":
        raise LocalProtocolError("initialize is performed by the connection (era='legacy')")
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise TypeError(f"params: must be a mapping, not {type(params).__name__}")
    if method in MRTR_METHODS:  # elsewhere they are the method's own (tasks/update's answers)
        for name in RETRY_FIELDS:
            if name in params:
                raise LocalProtocolError(f"params: {name} is sent by the connection on retries")
    meta = params.get("_meta")
    if meta is not None:
        if not isinstance(meta, Mapping):
            raise TypeError("params._meta: must be a mapping")
        for key in _ENVELOPE_KEYS:
            if key in meta:
                raise LocalProtocolError(f"params._meta: {key} comes from ClientConfig")
    return dict(params)
