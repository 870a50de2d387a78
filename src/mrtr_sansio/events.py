"""What a connection tells the application: events, the client's call handle, outgoing items.

``next_event()`` returns an :class:`Event` (or :data:`NEED_DATA`); a client operation is known
by its :class:`Call` across its rounds; ``outgoing()`` returns :class:`Outgoing` items, whose
subclass says what the message does (ends a request, asks the client, notifies). The
application answers through the connection's methods (``respond``, ``notify``, ``fulfil``...).
"""

from ._events import (
    NEED_DATA,
    Call,
    CallCompleted,
    CallFailed,
    ConnectionClosed,
    EraDetected,
    Event,
    FulfilRequest,
    HandshakeFailed,
    InputNeeded,
    InputWithdrawn,
    InvalidMessage,
    NotificationReceived,
    Outgoing,
    OutgoingError,
    OutgoingInputRequired,
    OutgoingNotification,
    OutgoingRequest,
    OutgoingResponse,
    OutgoingResult,
    PingAnswered,
    RequestCancelled,
    RequestReceived,
    RequestStateRejected,
    RoundsExhausted,
    SessionInitialized,
    UnexpectedResponse,
)

__all__ = [
    "NEED_DATA",
    "Call",
    "CallCompleted",
    "CallFailed",
    "ConnectionClosed",
    "EraDetected",
    "Event",
    "FulfilRequest",
    "HandshakeFailed",
    "InputNeeded",
    "InputWithdrawn",
    "InvalidMessage",
    "NotificationReceived",
    "Outgoing",
    "OutgoingError",
    "OutgoingInputRequired",
    "OutgoingNotification",
    "OutgoingRequest",
    "OutgoingResponse",
    "OutgoingResult",
    "PingAnswered",
    "RequestCancelled",
    "RequestReceived",
    "RequestStateRejected",
    "RoundsExhausted",
    "SessionInitialized",
    "UnexpectedResponse",
]
