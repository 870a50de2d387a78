"""JSON-RPC 2.0: classify and validate decoded messages, build the ones we send.

Messages stay plain dicts end to end: the connection reads the few fields it needs straight from
the decoded object, which keeps the per-message cost to one pass of the JSON codec.

Ids are strings or 64-bit integers, never null, booleans or floats. Batches (JSON arrays) were
removed from MCP in 2025-06-18 and are rejected. An error about a message whose id cannot be read
omits ``id`` (both MCP schemas type it as optional string-or-integer); peers' ``"id": null`` is
read.
"""

from __future__ import annotations

from typing import Any, Final

from mrtr_sansio._errors import ErrorCode, JsonRpcError, RemoteProtocolError

__all__ = [
    "NOTIFICATION",
    "REQUEST",
    "RESPONSE",
    "answerable",
    "classify",
    "error_message",
    "is_valid_id",
    "notification_message",
    "parse_error",
    "request_message",
    "result_message",
]

REQUEST: Final = 0
NOTIFICATION: Final = 1
RESPONSE: Final = 2


def is_valid_id(value: Any) -> bool:
    """A JSON-RPC id as MCP allows it: a string or an integer (``bool`` excluded).

    Integers must fit 64 bits (signed or unsigned), the range every codec can write back; orjson
    reads larger ones as floats, so this also keeps the codecs in agreement.
    """
    t = type(value)
    return t is str or (t is int and -(2**63) <= value < 2**64)


def _invalid(message: str, request_id: Any = None) -> RemoteProtocolError:
    return RemoteProtocolError(JsonRpcError(ErrorCode.INVALID_REQUEST, message), request_id)


def parse_error(detail: str = "Invalid JSON") -> RemoteProtocolError:
    """-32700 for bytes that are not one valid UTF-8 JSON text."""
    return RemoteProtocolError(JsonRpcError(ErrorCode.PARSE_ERROR, f"Parse error: {detail}"), None)


def classify(msg: Any) -> int:
    """Return REQUEST, NOTIFICATION or RESPONSE for a decoded message, or raise.

    Raises :class:`RemoteProtocolError` (-32600) for anything that is not a valid JSON-RPC 2.0
    message; its ``request_id`` is set only when the message is a request with a readable id.
    A malformed *response* raises too, with ``request_id`` None: callers must not answer it.
    """
    if type(msg) is not dict:
        if type(msg) is list:
            raise _invalid("Invalid Request: batches are not supported")
        raise _invalid("Invalid Request: a message must be a JSON object")
    method = msg.get("method")
    if msg.get("jsonrpc") == "2.0" and type(method) is str:
        params = msg.get("params")
        if type(params) is dict or (params is None and "params" not in msg):
            if "id" not in msg:
                return NOTIFICATION
            if is_valid_id(msg["id"]):
                return REQUEST
    return _classify_slowly(msg, method)


def answerable(msg: Any) -> bool:
    """Whether an invalid message may be answered with an error response.

    Responses never are (answering one could loop between peers), and neither are
    notifications: a message with a string ``method`` and no ``id`` is one, malformed or not
    (JSON-RPC 2.0: the server MUST NOT reply to a notification).
    """
    if type(msg) is not dict:
        return True
    if "method" in msg:
        return "id" in msg or type(msg["method"]) is not str
    return not ("result" in msg or "error" in msg)


def _classify_slowly(msg: dict[str, Any], method: Any) -> int:
    """The rare cases: responses, and every flavour of invalid message."""
    raw_id = msg.get("id")
    request_id = raw_id if is_valid_id(raw_id) else None
    if msg.get("jsonrpc") != "2.0":
        if method is None and ("result" in msg or "error" in msg):
            request_id = None  # a malformed response: never answered
        raise _invalid('Invalid Request: "jsonrpc" must be "2.0"', request_id)
    if method is not None:
        if type(method) is not str:
            raise _invalid('Invalid Request: "method" must be a string', request_id)
        params = msg.get("params")
        if type(params) is not dict and (params is not None or "params" in msg):
            raise _invalid('Invalid Request: "params" must be an object', request_id)
        raise _invalid('Invalid Request: "id" must be a string or an integer')
    if "result" in msg:
        if "error" in msg or request_id is None:
            raise _invalid("Invalid response")
        return RESPONSE
    if "error" in msg:
        if raw_id is not None and request_id is None:
            raise _invalid("Invalid response")
        return RESPONSE
    raise _invalid('Invalid Request: "method" is missing', request_id)


def result_message(request_id: Any, result: Any) -> dict[str, Any]:
    """A success response."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_message(request_id: Any, error: JsonRpcError) -> dict[str, Any]:
    """An error response; ``id`` is omitted when None (the id could not be read)."""
    if request_id is None:
        return {"jsonrpc": "2.0", "error": error.to_wire()}
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_wire()}


def request_message(request_id: Any, method: str, params: Any) -> dict[str, Any]:
    """A request; ``params`` omitted when None."""
    if params is None:
        return {"jsonrpc": "2.0", "id": request_id, "method": method}
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def notification_message(method: str, params: Any) -> dict[str, Any]:
    """A notification; ``params`` omitted when None."""
    if params is None:
        return {"jsonrpc": "2.0", "method": method}
    return {"jsonrpc": "2.0", "method": method, "params": params}
