"""The rules the model checks, and the checks every single response gets.

Each rule has a short name (a key of :data:`CHECKS`) so that a failure says which rule broke
and why, and so that tests can assert on the rule rather than on a message.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from mrtr_sansio import ErrorCode
from mrtr_sansio.protocol import (
    EMBEDDABLE_METHODS,
    MRTR_METHODS,
    ResultType,
    missing_capabilities,
    required_capabilities,
)
from mrtr_sansio.tasks import EXTENSION as TASKS_EXTENSION

__all__ = ["CHECKS", "SpecViolationError", "check_response", "embedded_problem", "outcome"]

#: Every check the model makes, with the rule it enforces.
CHECKS: dict[str, str] = {
    "jsonrpc": "every request gets one JSON-RPC 2.0 response echoing its id (same value, "
    "same type) with exactly one of result/error (JSON-RPC 2.0; DIGEST §6)",
    "result-type": "every modern result carries resultType: complete, input_required, or an "
    "extension's value the request declared (S14, C7)",
    "input-required-methods": "input_required only answers tools/call, prompts/get, "
    "resources/read (S10)",
    "input-required-shape": "an input_required result has inputRequests and/or a string "
    "requestState; each embedded request is a well-formed elicitation/create, "
    "sampling/createMessage or roots/list (S3, S6)",
    "capabilities": "embedded requests stay within the capabilities declared in this request; "
    "-32021 carries data.requiredCapabilities naming something undeclared (S7, §3.3)",
    "mrtr-operation": "an operation configured as MRTR asks for input on its first call when "
    "every capability is declared; one configured as not MRTR never does",
    "tampered-state": "a tampered requestState is rejected with a JSON-RPC error (§4; the "
    "conformance suite's sep-2322-reject-tampered-state)",
    "foreign-state": "a requestState presented on a different operation or arguments is "
    "rejected (§4 replay binding, SHOULD; off by default)",
    "replayed-state": "a requestState already used once is rejected (single use, §4; off by "
    "default)",
    "missing-answers": "a retry missing requested answers gets a new input_required (or a "
    "result), never an error (S13, SHOULD)",
    "invalid-answers": "a retry whose answer is not a valid result of its request's kind does "
    "not complete (S11, SHOULD)",
    "unknown-keys": "unknown _meta keys and unknown inputResponses keys are ignored (S12, SHOULD)",
    "answers-accepted": "a retry that answers every requested key validly, with the echoed "
    "state, is not refused with a JSON-RPC error",
    "http-status": "modern HTTP statuses: 200 for results, 404 for -32601, 400 for -32700, "
    "-32600, -32602, -32020, -32021 and -32022 (DIGEST §1.2, §1.5, §3.3)",
}

_CORE_RESULT_TYPES = frozenset({ResultType.COMPLETE, ResultType.INPUT_REQUIRED})


class SpecViolationError(AssertionError):
    """The server broke the rule named by ``check`` (a key of :data:`CHECKS`)."""

    def __init__(
        self,
        check: str,
        detail: str,
        request: Mapping[str, Any] | None = None,
        response: Any = None,
    ) -> None:
        self.check = check
        self.detail = detail
        self.request = request
        self.response = response
        short = detail if len(detail) <= 300 else detail[:300] + "…"
        lines = [f"[{check}] {short}", f"  rule: {CHECKS[check]}"]
        if request is not None:
            lines.append(f"  request:  {_show(request)}")
            lines.append(f"  response: {_show(response)}")
        super().__init__("\n".join(lines))


def _show(value: Any, limit: int = 1500) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= limit else text[:limit] + "…"


def outcome(response: Mapping[str, Any]) -> tuple[str, Any]:
    """``("error", code)`` or ``("result", resultType)`` of a checked response."""
    if "error" in response:
        return ("error", response["error"]["code"])
    return ("result", response["result"]["resultType"])


def check_response(
    request: Mapping[str, Any],
    response: Any,
    caps: Mapping[str, Any],
    validate: Callable[[Mapping[str, Any], str], None] | None = None,
) -> Mapping[str, Any]:
    """Check one response to one modern request; return it, or raise
    :class:`SpecViolationError`. ``caps`` are the capabilities the request declared."""
    method = request["method"]

    def fail(check: str, detail: str) -> SpecViolationError:
        return SpecViolationError(check, detail, request, response)

    if response is None:
        raise fail("jsonrpc", "the request got no response")
    if not isinstance(response, Mapping):
        raise fail("jsonrpc", "the response is not a JSON object")
    if response.get("jsonrpc") != "2.0":
        raise fail("jsonrpc", 'the response lacks "jsonrpc": "2.0"')
    rid = response.get("id")
    if rid != request["id"] or type(rid) is not type(request["id"]):
        raise fail("jsonrpc", f"the response id {rid!r} does not echo {request['id']!r}")
    if ("result" in response) == ("error" in response):
        raise fail("jsonrpc", "a response has exactly one of result and error")
    if "error" in response:
        _check_error(response["error"], caps, fail)
    else:
        result = response["result"]
        if not isinstance(result, Mapping):
            raise fail("jsonrpc", "result is not an object")
        kind = result.get("resultType")
        if not isinstance(kind, str):
            raise fail("result-type", "the result has no resultType")
        if kind not in _CORE_RESULT_TYPES and not (
            kind == ResultType.TASK and TASKS_EXTENSION in (caps.get("extensions") or {})
        ):
            raise fail("result-type", f"resultType {kind!r} is not one the client supports")
        if kind == ResultType.INPUT_REQUIRED:
            if method not in MRTR_METHODS:
                raise fail("input-required-methods", f"input_required answered {method}")
            _check_input_required(result, caps, fail)
    if validate is not None:
        validate(response, method)
    return response


def _check_error(
    error: Any, caps: Mapping[str, Any], fail: Callable[[str, str], SpecViolationError]
) -> None:
    if (
        not isinstance(error, Mapping)
        or type(error.get("code")) is not int
        or not isinstance(error.get("message"), str)
    ):
        raise fail("jsonrpc", "error must be an object with an integer code and a message")
    if error["code"] != ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY:
        return
    data = error.get("data")
    required = data.get("requiredCapabilities") if isinstance(data, Mapping) else None
    if not isinstance(required, Mapping):
        raise fail("capabilities", "-32021 without data.requiredCapabilities")
    if not missing_capabilities(required, caps):
        raise fail("capabilities", "-32021 names only capabilities the request declared")


def _check_input_required(
    result: Mapping[str, Any],
    caps: Mapping[str, Any],
    fail: Callable[[str, str], SpecViolationError],
) -> None:
    requests = result.get("inputRequests")
    state = result.get("requestState")
    if requests is None and state is None:
        raise fail("input-required-shape", "neither inputRequests nor requestState")
    if state is not None and not isinstance(state, str):
        raise fail("input-required-shape", "requestState is not a string")
    if requests is None:
        return
    if not isinstance(requests, Mapping):
        raise fail("input-required-shape", "inputRequests is not an object")
    for key, request in requests.items():
        problem = embedded_problem(request)
        if problem is not None:
            raise fail("input-required-shape", f"inputRequests[{key!r}]: {problem}")
        missing = missing_capabilities(
            required_capabilities(request["method"], request.get("params")), caps
        )
        if missing:
            raise fail(
                "capabilities",
                f"inputRequests[{key!r}] needs {missing}, which the request did not declare",
            )


def embedded_problem(request: Any) -> str | None:
    """Why ``request`` is not a well-formed embedded request, or None."""
    if not isinstance(request, Mapping):
        return "not an object"
    method = request.get("method")
    if method not in EMBEDDABLE_METHODS:
        return f"method {method!r} cannot be embedded"
    params = request.get("params")
    if params is None:
        return None if method == "roots/list" else "params missing"
    if not isinstance(params, Mapping):
        return "params is not an object"
    if method == "elicitation/create":
        if not isinstance(params.get("message"), str):
            return "elicitation without a message"
        mode = params.get("mode", "form")
        if mode == "url":
            return None if isinstance(params.get("url"), str) else "url elicitation without url"
        if mode != "form":
            return f"unknown elicitation mode {mode!r}"
        schema = params.get("requestedSchema")
        if not isinstance(schema, Mapping) or not isinstance(schema.get("properties"), Mapping):
            return "form elicitation without a requestedSchema object"
        return None
    if method == "sampling/createMessage":
        if not isinstance(params.get("messages"), list):
            return "sampling without messages"
        if type(params.get("maxTokens")) is not int:
            return "sampling without an integer maxTokens"
    return None
