"""JSON-RPC and MCP error codes, the error value, and the two exception families.

A :class:`LocalProtocolError` means *our* application used the API wrongly or asked for something
the protocol forbids; a :class:`RemoteProtocolError` means the peer sent something invalid and
carries what is needed to answer it on the wire. :class:`InvalidResponseError` is the client's
finding that a server's response breaks a rule (the client parts and the task reader raise it).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import attrs

from ._mcp.capabilities import capability_paths

__all__ = [
    "ErrorCode",
    "InvalidResponseError",
    "JsonRpcError",
    "LocalProtocolError",
    "ProtocolError",
    "RemoteProtocolError",
]


class ErrorCode(enum.IntEnum):
    """The JSON-RPC and MCP error codes this package sends and reads.

    An ``IntEnum``: ``ErrorCode.INVALID_PARAMS == -32602`` holds, and both JSON codecs write a
    member as the plain number. Codes a peer sends that are not listed here stay plain ints.
    """

    #: The bytes are not one valid UTF-8 JSON text (answered with no id).
    PARSE_ERROR = -32700
    #: Not a valid JSON-RPC 2.0 request (a batch, a missing ``method``, an id already in use...).
    INVALID_REQUEST = -32600
    #: A method the receiver does not implement (modern HTTP status 404).
    METHOD_NOT_FOUND = -32601
    #: Bad params: a malformed envelope or MRTR field, an unknown tool, prompt or resource, or a
    #: ``requestState`` that fails verification.
    INVALID_PARAMS = -32602
    #: An unexpected failure, and the legacy wire's answer when the shim cannot fulfil a request.
    INTERNAL_ERROR = -32603
    #: Modern HTTP: a mirror header is missing or disagrees with the body.
    HEADER_MISMATCH = -32020
    #: Modern: the request needs a client capability its envelope did not declare.
    MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
    #: Modern: the request's protocol version is not served here.
    UNSUPPORTED_PROTOCOL_VERSION = -32022

    def __str__(self) -> str:
        """The number, as ``str()`` of an ``IntEnum`` gives from Python 3.11 on (3.10 too)."""
        return int.__repr__(self)


@attrs.frozen
class JsonRpcError:
    """The ``error`` member of a JSON-RPC error response, as a value.

    Used to answer a request with an error and to report errors received from a peer.
    """

    code: int
    message: str
    data: Any = None

    def to_wire(self) -> dict[str, Any]:
        """The JSON object for the ``error`` member (``data`` omitted when None)."""
        if self.data is None:
            return {"code": self.code, "message": self.message}
        return {"code": self.code, "message": self.message, "data": self.data}

    @classmethod
    def from_wire(cls, error: Any) -> JsonRpcError:
        """Read an ``error`` member from a peer, tolerating a missing or odd message."""
        if not isinstance(error, Mapping):
            return cls(ErrorCode.INTERNAL_ERROR, "Malformed error object", error)
        code = error.get("code")
        if type(code) is not int:
            code = ErrorCode.INTERNAL_ERROR
        message = error.get("message")
        if not isinstance(message, str):
            message = ""
        return cls(code, message, error.get("data"))

    @classmethod
    def invalid_params(cls, message: str, data: Any = None) -> JsonRpcError:
        """-32602, the answer for bad arguments, unknown tools and unknown resources."""
        return cls(ErrorCode.INVALID_PARAMS, message, data)

    @classmethod
    def method_not_found(cls, method: str) -> JsonRpcError:
        """-32601 for a method this server does not implement."""
        return cls(ErrorCode.METHOD_NOT_FOUND, f"Method not found: {method}")

    @classmethod
    def internal(cls, message: str = "Internal error", data: Any = None) -> JsonRpcError:
        """-32603 for an unexpected failure."""
        return cls(ErrorCode.INTERNAL_ERROR, message, data)

    @classmethod
    def missing_capability(
        cls, required: Mapping[str, Any], message: str | None = None
    ) -> JsonRpcError:
        """-32021 naming the client capabilities the request needs (modern wire only)."""
        if message is None:
            names = ", ".join(capability_paths(required)) or "a client capability"
            message = f"Missing required client capability: {names}"
        return cls(
            ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY,
            message,
            {"requiredCapabilities": _plain(required)},
        )

    @classmethod
    def unsupported_version(cls, supported: list[str], requested: str) -> JsonRpcError:
        """-32022 listing what we serve and what was asked for."""
        return cls(
            ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
            {"supported": list(supported), "requested": requested},
        )


def _plain(value: Any) -> Any:
    """Deep-copy nested mappings into plain dicts so that any codec can serialize them."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


class ProtocolError(Exception):
    """Base class of the errors this package raises."""


class LocalProtocolError(ProtocolError):
    """Our own side broke a rule: wrong API use, or a message the protocol forbids sending."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something invalid.

    ``error`` is what to answer on the wire; ``request_id`` is the id to answer with, or None
    when the id could not be read (JSON-RPC answers those with ``"id": null``).
    """

    def __init__(self, error: JsonRpcError, request_id: Any = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.request_id = request_id

    @property
    def code(self) -> int:
        """The JSON-RPC error code."""
        return self.error.code


class InvalidResponseError(Exception):
    """The server's response breaks a rule; the message says which, for logs (never for users)."""
