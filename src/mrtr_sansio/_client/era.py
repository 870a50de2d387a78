"""How a client learns which wire the server speaks, and agrees on a version.

``era="modern"`` needs nothing. ``era="legacy"`` sends ``initialize`` with the configured
capabilities, checks the version the server chose, and sends ``notifications/initialized``.
``era="auto"`` first probes with ``server/discover`` carrying the modern envelope (DIGEST §1.8):
a ``DiscoverResult`` or a recognised modern error (-32020, -32021, -32022) means modern; any
other error, any other result, or no answer before ``probe_timeout`` means legacy. The fallback
is never keyed to one error code. When -32022 lists no modern version we speak but a legacy
one, that version is reached the only way it can be: through ``initialize``.

:class:`Handshake` is a pure part of the :class:`~mrtr_sansio.ClientConnection` that owns it:
it builds the probe and ``initialize`` messages under the ids the connection gives it, reads
their answers, and returns what the connection must do next (:class:`StartInitialize`,
:class:`Ignore`, :class:`Settled`, :class:`Failed`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from mrtr_sansio._config import ClientConfig
from mrtr_sansio._errors import ErrorCode, InvalidResponseError, JsonRpcError
from mrtr_sansio._events import EraDetected
from mrtr_sansio._mcp.envelope import (
    LEGACY_VERSIONS,
    MODERN_VERSIONS,
    SERVER_INFO,
    Era,
    modern_envelope,
)
from mrtr_sansio._wire.jsonrpc import notification_message, request_message

__all__ = [
    "Failed",
    "Handshake",
    "HandshakeAction",
    "Ignore",
    "Settled",
    "StartInitialize",
    "read_initialize_result",
]

#: Errors only a modern server sends: a probe answered with one means "modern".
MODERN_ERRORS = frozenset(
    {
        ErrorCode.HEADER_MISMATCH,
        ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY,
        ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
    }
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


@attrs.frozen
class StartInitialize:
    """The server is not (or not only) modern: send ``initialize`` (``Handshake.initialize``)."""


@attrs.frozen
class Ignore:
    """Drop a late answer to ``request_id`` silently (the probe that timed out)."""

    request_id: Any


@attrs.frozen
class Settled:
    """The era and version are agreed: ``detected`` says so, with what the server said about
    itself (None where it said nothing), and is what the connection takes; ``envelope`` is the
    modern ``_meta`` of every request ({} on the legacy wire); ``log_level`` is
    ``ClientConfig.log_level`` when a legacy server declares logging (see :meth:`follow_ups`)."""

    detected: EraDetected
    envelope: dict[str, Any]
    log_level: str | None = None

    def follow_ups(self, new_id: Callable[[], int]) -> list[dict[str, Any]]:
        """What the connection sends once settled, in order: on the legacy wire
        ``notifications/initialized``, then ``logging/setLevel`` (asked once per session; its
        answer is dropped, a refusal changes nothing)."""
        if self.detected.era is not Era.LEGACY:
            return []
        sent = [notification_message("notifications/initialized", None)]
        if self.log_level is not None:
            sent.append(request_message(new_id(), "logging/setLevel", {"level": self.log_level}))
        return sent


@attrs.frozen
class Failed:
    """The handshake failed with ``error`` (``local``: detected by this client)."""

    error: JsonRpcError
    local: bool = False


#: What a handshake step asks its connection to do, in order.
HandshakeAction = StartInitialize | Ignore | Settled | Failed


class Handshake:
    """The probe and ``initialize`` of one client connection, until the era is known."""

    __slots__ = ("_config", "_init_id", "_probe_due", "_probe_id")

    def __init__(self, config: ClientConfig) -> None:
        self._config = config
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

    def pinned(self) -> Settled:
        """``era="modern"``: the configured version, agreed without asking."""
        return _modern(self._config, self._config.protocol_version, None)

    def probe(self, rid: int) -> dict[str, Any]:
        """The ``server/discover`` probe to send under ``rid``; its deadline starts now."""
        config = self._config
        meta = modern_envelope(config.protocol_version, config.capabilities, config.client_info)
        self._probe_id = rid
        self._probe_due = config.clock() + config.probe_timeout
        return request_message(rid, "server/discover", {"_meta": meta})

    def initialize(self, rid: int) -> dict[str, Any]:
        """The ``initialize`` request to send under ``rid`` (the probe, if any, is over)."""
        config = self._config
        self._probe_id = self._probe_due = None
        self._init_id = rid
        params = {
            "protocolVersion": config.legacy_version,
            "capabilities": dict(config.capabilities),
            "clientInfo": dict(config.client_info or DEFAULT_CLIENT_INFO),
        }
        return request_message(rid, "initialize", params)

    def on_timer(self, now: float) -> list[HandshakeAction]:
        """Silence until the deadline: the server is legacy. A late answer is dropped."""
        if self._probe_due is not None and now >= self._probe_due:
            return [Ignore(self._probe_id), StartInitialize()]
        return []

    # --- answers ----------------------------------------------------------------------------

    def on_response(self, rid: Any, msg: dict[str, Any]) -> list[HandshakeAction]:
        """The answer to the probe or to ``initialize`` (``owns(rid)`` is true)."""
        if rid == self._probe_id:
            return self._on_probe(msg)
        return self._on_initialize(msg)

    def on_broken(self, rid: Any, reason: str, *, lost: bool = False) -> list[HandshakeAction]:
        """A response with ``rid`` that is not valid JSON-RPC, or (``lost``) none will come:
        the transport says why in ``reason`` (the server is down, say)."""
        if rid == self._probe_id:
            return [StartInitialize()]  # not a recognised modern answer
        self._init_id = None
        what = "initialize got no answer" if lost else "Invalid initialize response"
        return [Failed(JsonRpcError(ErrorCode.INTERNAL_ERROR, f"{what}: {reason}"), local=True)]

    def _on_probe(self, msg: dict[str, Any]) -> list[HandshakeAction]:
        self._probe_id = self._probe_due = None
        if "error" in msg:
            error = JsonRpcError.from_wire(msg["error"])
            if error.code not in MODERN_ERRORS:
                return [StartInitialize()]
            if error.code != ErrorCode.UNSUPPORTED_PROTOCOL_VERSION:
                return [_modern(self._config, self._config.protocol_version, None)]
            data = error.data
            supported = data.get("supported") if isinstance(data, Mapping) else None
            if type(supported) is list:
                return [self._choose(supported, None, error)]
            return [Failed(error)]
        result = msg["result"]
        supported = result.get("supportedVersions") if type(result) is dict else None
        if type(supported) is list:
            return [self._choose(supported, result, None)]
        return [StartInitialize()]  # not a DiscoverResult: not a modern server

    def _choose(
        self, supported: list[Any], discovered: dict[str, Any] | None, error: JsonRpcError | None
    ) -> HandshakeAction:
        """Pick a mutual version: modern first; a legacy one means ``initialize``."""
        config = self._config
        for version in (config.protocol_version, *MODERN_VERSIONS):
            if version in supported:
                return _modern(config, version, discovered)
        if any(v in supported for v in LEGACY_VERSIONS):
            return StartInitialize()
        return Failed(
            error
            or JsonRpcError(
                ErrorCode.INTERNAL_ERROR,
                "The server supports no protocol version this client speaks",
                {"supported": supported},
            )
        )

    def _on_initialize(self, msg: dict[str, Any]) -> list[HandshakeAction]:
        self._init_id = None
        if "error" in msg:
            return [Failed(JsonRpcError.from_wire(msg["error"]))]
        try:
            version, caps, info, instructions = read_initialize_result(msg["result"])
        except InvalidResponseError as exc:
            return [
                Failed(
                    JsonRpcError(ErrorCode.INTERNAL_ERROR, f"Invalid initialize result: {exc}"),
                    True,
                )
            ]
        if version not in LEGACY_VERSIONS:
            return [
                Failed(
                    JsonRpcError(
                        ErrorCode.INTERNAL_ERROR,
                        f"The server chose protocol version {version!r}, which this client "
                        "does not speak",
                        {"supported": list(LEGACY_VERSIONS), "requested": version},
                    ),
                    local=True,
                )
            ]
        level = self._config.log_level if "logging" in caps else None
        return [Settled(EraDetected(Era.LEGACY, version, caps, info, instructions), {}, level)]


def _modern(config: ClientConfig, version: str, discovered: dict[str, Any] | None) -> Settled:
    """The modern wire at ``version``, with what a ``DiscoverResult`` said (if one came)."""
    envelope = modern_envelope(version, config.capabilities, config.client_info)
    if discovered is None:
        return Settled(EraDetected(Era.MODERN, version, None, None, None), envelope)
    caps = discovered.get("capabilities")
    meta = discovered.get("_meta")
    info = meta.get(SERVER_INFO) if type(meta) is dict else None
    instructions = discovered.get("instructions")
    detected = EraDetected(
        Era.MODERN,
        version,
        caps if type(caps) is dict else None,
        info if type(info) is dict else None,
        instructions if type(instructions) is str else None,
    )
    return Settled(detected, envelope)
