"""How a client learns which wire the server speaks, and agrees on a version.

``era="modern"`` needs nothing. ``era="legacy"`` sends ``initialize`` with the configured
capabilities, checks the version the server chose, and sends ``notifications/initialized``.
``era="auto"`` first probes with ``server/discover`` carrying the modern envelope (DIGEST §1.8):
a ``DiscoverResult`` or a recognised modern error (-32020, -32021, -32022) means modern; any
other error, any other result, or no answer before ``probe_timeout`` means legacy. The fallback
is never keyed to one error code. When -32022 lists no modern version we speak but a legacy
one, that version is reached the only way it can be: through ``initialize``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._client_checks import InvalidResponseError
from ._envelope import LEGACY_VERSIONS, MODERN_VERSIONS, SERVER_INFO, Era, modern_envelope
from ._errors import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
    JsonRpcError,
)
from ._events import OutgoingNotification, OutgoingRequest
from ._jsonrpc import notification_message, request_message

if TYPE_CHECKING:
    from ._client import ClientConnection

__all__ = ["Handshake", "read_initialize_result"]

#: Errors only a modern server sends: a probe answered with one means "modern".
MODERN_ERRORS = frozenset(
    {HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION}
)
#: ``initialize`` requires ``clientInfo``; this stands in when ClientConfig has none.
DEFAULT_CLIENT_INFO = {"name": "mrtr-sansio", "version": "0"}


def read_initialize_result(
    result: Any,
) -> tuple[str, dict[str, Any], dict[str, Any] | None, str | None]:
    """(protocolVersion, capabilities, serverInfo, instructions) of an ``InitializeResult``.

    Raises :class:`InvalidResponseError` for a missing or mistyped field; a missing
    ``serverInfo`` is tolerated (it identifies, it does not change behaviour).
    """
    if type(result) is not dict:
        raise InvalidResponseError("the result is not an object")
    version = result.get("protocolVersion")
    caps = result.get("capabilities")
    info = result.get("serverInfo")
    instructions = result.get("instructions")
    if type(version) is not str:
        raise InvalidResponseError("protocolVersion must be a string")
    if type(caps) is not dict:
        raise InvalidResponseError("capabilities must be an object")
    if info is not None and type(info) is not dict:
        raise InvalidResponseError("serverInfo must be an object")
    if instructions is not None and type(instructions) is not str:
        raise InvalidResponseError("instructions must be a string")
    return version, caps, info, instructions


class Handshake:
    """The probe and ``initialize`` of one :class:`ClientConnection`, until the era is known."""

    __slots__ = ("_conn", "_init_id", "_probe_due", "_probe_id")

    def __init__(self, conn: ClientConnection) -> None:
        self._conn = conn
        self._probe_id: int | None = None
        self._probe_due: float | None = None
        self._init_id: int | None = None

    def owns(self, rid: Any) -> bool:
        """Whether ``rid`` is the probe's or ``initialize``'s id."""
        return rid is not None and (rid == self._probe_id or rid == self._init_id)  # noqa: PLR1714

    @property
    def deadline(self) -> float | None:
        """When the probe gives up waiting, or None."""
        return self._probe_due

    def stop(self) -> None:
        """The connection failed or closed: nothing more to wait for."""
        self._probe_id = self._probe_due = self._init_id = None

    # --- starting ---------------------------------------------------------------------------

    def start_probe(self) -> None:
        conn = self._conn
        config = conn.config
        meta = modern_envelope(config.protocol_version, config.capabilities, config.client_info)
        rid = conn._new_id()
        msg = request_message(rid, "server/discover", {"_meta": meta})
        conn._out.append((OutgoingRequest, conn._encode(msg), msg, None, rid))
        self._probe_id = rid
        self._probe_due = config.clock() + config.probe_timeout

    def start_initialize(self) -> None:
        conn = self._conn
        config = conn.config
        self._probe_id = self._probe_due = None
        conn.era = Era.LEGACY
        conn.protocol_version = None
        rid = conn._new_id()
        params = {
            "protocolVersion": config.legacy_version,
            "capabilities": dict(config.capabilities),
            "clientInfo": dict(config.client_info or DEFAULT_CLIENT_INFO),
        }
        msg = request_message(rid, "initialize", params)
        conn._out.append((OutgoingRequest, conn._encode(msg), msg, None, rid))
        self._init_id = rid

    def on_timer(self, now: float) -> None:
        """Silence until the deadline: the server is legacy. A late answer is dropped."""
        if self._probe_due is not None and now >= self._probe_due:
            self._conn._ignore(self._probe_id)
            self.start_initialize()

    # --- answers ----------------------------------------------------------------------------

    def on_response(self, rid: Any, msg: dict[str, Any]) -> None:
        """The answer to the probe or to ``initialize`` (``owns(rid)`` is true)."""
        if rid == self._probe_id:
            self._on_probe(msg)
        else:
            self._on_initialize(msg)

    def on_broken(self, rid: Any, reason: str, *, lost: bool = False) -> None:
        """A response with ``rid`` that is not valid JSON-RPC, or (``lost``) none will come:
        the transport says why in ``reason`` (the server is down, say)."""
        if rid == self._probe_id:
            self.start_initialize()  # not a recognised modern answer
        else:
            self._init_id = None
            what = "initialize got no answer" if lost else "Invalid initialize response"
            self._conn._fail_handshake(
                JsonRpcError(INTERNAL_ERROR, f"{what}: {reason}"), local=True
            )

    def _on_probe(self, msg: dict[str, Any]) -> None:
        self._probe_id = self._probe_due = None
        if "error" in msg:
            error = JsonRpcError.from_wire(msg["error"])
            if error.code not in MODERN_ERRORS:
                self.start_initialize()
            elif error.code != UNSUPPORTED_PROTOCOL_VERSION:
                self._modern(self._conn.config.protocol_version, None)
            else:
                data = error.data
                supported = data.get("supported") if isinstance(data, Mapping) else None
                if type(supported) is list:
                    self._choose(supported, None, error)
                else:
                    self._conn._fail_handshake(error)
            return
        result = msg["result"]
        supported = result.get("supportedVersions") if type(result) is dict else None
        if type(supported) is list:
            self._choose(supported, result, None)
        else:
            self.start_initialize()  # not a DiscoverResult: not a modern server

    def _choose(
        self, supported: list[Any], discovered: dict[str, Any] | None, error: JsonRpcError | None
    ) -> None:
        """Pick a mutual version: modern first; a legacy one means ``initialize``."""
        config = self._conn.config
        for version in (config.protocol_version, *MODERN_VERSIONS):
            if version in supported:
                self._modern(version, discovered)
                return
        if any(v in supported for v in LEGACY_VERSIONS):
            self.start_initialize()
            return
        self._conn._fail_handshake(
            error
            or JsonRpcError(
                INTERNAL_ERROR,
                "The server supports no protocol version this client speaks",
                {"supported": supported},
            )
        )

    def _modern(self, version: str, discovered: dict[str, Any] | None) -> None:
        conn = self._conn
        conn._use_version(version)
        if discovered is not None:
            caps = discovered.get("capabilities")
            meta = discovered.get("_meta")
            info = meta.get(SERVER_INFO) if type(meta) is dict else None
            instructions = discovered.get("instructions")
            conn.server_capabilities = caps if type(caps) is dict else None
            conn.server_info = info if type(info) is dict else None
            conn.instructions = instructions if type(instructions) is str else None
        conn._era_known()

    def _on_initialize(self, msg: dict[str, Any]) -> None:
        conn = self._conn
        self._init_id = None
        if "error" in msg:
            conn._fail_handshake(JsonRpcError.from_wire(msg["error"]))
            return
        try:
            version, caps, info, instructions = read_initialize_result(msg["result"])
        except InvalidResponseError as exc:
            conn._fail_handshake(
                JsonRpcError(INTERNAL_ERROR, f"Invalid initialize result: {exc}"), local=True
            )
            return
        if version not in LEGACY_VERSIONS:
            conn._fail_handshake(
                JsonRpcError(
                    INTERNAL_ERROR,
                    f"The server chose protocol version {version!r}, which this client does "
                    "not speak",
                    {"supported": list(LEGACY_VERSIONS), "requested": version},
                ),
                local=True,
            )
            return
        conn.protocol_version = version
        conn.server_capabilities = caps
        conn.server_info = info
        conn.instructions = instructions
        note = notification_message("notifications/initialized", None)
        conn._out.append((OutgoingNotification, conn._encode(note), note, None))
        conn._era_known()
