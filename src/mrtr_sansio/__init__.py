"""mrtr_sansio: MCP Multi Round-Trip Requests (SEP-2322), Sans-IO, both roles, both wires.

The front door: what a handler author and an embedder need — the two connections, their
configs, the events they report, what a handler returns when it needs input, the errors.
Specialist surfaces are public submodules: :mod:`mrtr_sansio.sealing` (sealed
``requestState``), :mod:`mrtr_sansio.http` (IO-free Streamable HTTP rules),
:mod:`mrtr_sansio.protocol` (versions, envelope, method facts), :mod:`mrtr_sansio.events`,
:mod:`mrtr_sansio.errors`, :mod:`mrtr_sansio.config` (the whole vocabulary, codecs included),
:mod:`mrtr_sansio.tasks` and :mod:`mrtr_sansio.testing`. Transports live in
:mod:`mrtr_sansio.adapters` and are never imported from here; the ``_*`` modules are private.
"""

from . import config as config
from . import errors as errors
from . import events as events
from . import http as http
from . import protocol as protocol
from . import sealing as sealing
from ._client.connection import ClientConnection
from ._config import ClientConfig, Limits, ServerConfig
from ._errors import ErrorCode, JsonRpcError, LocalProtocolError, ProtocolError, RemoteProtocolError
from ._events import (
    NEED_DATA,
    Call,
    CallCompleted,
    CallFailed,
    ConnectionClosed,
    EraDetected,
    Event,
    HandshakeFailed,
    InputNeeded,
    InputWithdrawn,
    InvalidMessage,
    NotificationReceived,
    Outgoing,
    OutgoingResponse,
    PingAnswered,
    RequestCancelled,
    RequestReceived,
    RequestStateRejected,
    RoundsExhausted,
    SessionInitialized,
    UnexpectedResponse,
)
from ._mcp.envelope import Era
from ._mcp.values import (
    InputRequest,
    InputRequiredResult,
    InputResponses,
    elicit_form,
    elicit_url,
    list_roots,
    sample,
)
from ._server.connection import ServerConnection
from .sealing._state import UNSEALED

__version__ = "0.1.0.dev0"

__all__ = [
    "NEED_DATA",
    "UNSEALED",
    "Call",
    "CallCompleted",
    "CallFailed",
    "ClientConfig",
    "ClientConnection",
    "ConnectionClosed",
    "Era",
    "EraDetected",
    "ErrorCode",
    "Event",
    "HandshakeFailed",
    "InputNeeded",
    "InputRequest",
    "InputRequiredResult",
    "InputResponses",
    "InputWithdrawn",
    "InvalidMessage",
    "JsonRpcError",
    "Limits",
    "LocalProtocolError",
    "NotificationReceived",
    "Outgoing",
    "OutgoingResponse",
    "PingAnswered",
    "ProtocolError",
    "RemoteProtocolError",
    "RequestCancelled",
    "RequestReceived",
    "RequestStateRejected",
    "RoundsExhausted",
    "ServerConfig",
    "ServerConnection",
    "SessionInitialized",
    "UnexpectedResponse",
    "__version__",
    "elicit_form",
    "elicit_url",
    "list_roots",
    "sample",
]

from mrtr_sansio._public import publish_errors  # after __all__, which it reads

publish_errors(globals(), __name__)
del publish_errors
