"""Error codes, the JSON-RPC error value, and the two exception families.

:class:`ErrorCode` is an ``IntEnum`` of the codes this package sends; :class:`JsonRpcError` is
an ``error`` member as a value; :class:`LocalProtocolError` is our application's mistake,
:class:`RemoteProtocolError` the peer's. All of them are also at the front door.
"""

from ._errors import ErrorCode, JsonRpcError, LocalProtocolError, ProtocolError, RemoteProtocolError

__all__ = [
    "ErrorCode",
    "JsonRpcError",
    "LocalProtocolError",
    "ProtocolError",
    "RemoteProtocolError",
]
