"""Frozen configuration for both roles, with every limit documented and bounded.

Every size, count and round a peer can influence is capped here; the defaults are meant to be
safe for a public server and generous for honest clients.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

import attrs

from ._codec import JsonCodec, default_codec
from ._envelope import LATEST_MODERN_VERSION, LEGACY_VERSIONS, MODERN_VERSIONS
from ._state import StateProtector
from .tasks._settings import TaskSettings

__all__ = ["ClientConfig", "Limits", "ServerConfig"]

MiB = 1024 * 1024


def _positive(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not int or value < 1:
        raise ValueError(f"{attribute.name}: must be a positive integer, got {value!r}")


def _positive_number(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
        raise ValueError(f"{attribute.name}: must be a positive number, got {value!r}")


def _frozen_mapping(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if value is None else dict(value)


# Typed converters: with the builtins ``dict``/``tuple`` as converters, mypy's attrs plugin
# derives unusable ``__init__`` parameter types (``capabilities={"tools": {}}`` fails --strict).
def _plain_dict(value: Mapping[str, Any]) -> dict[str, Any]:
    return dict(value)


def _str_tuple(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):  # "2026-07-28" would become a tuple of characters
        raise TypeError(f"expected a sequence of version strings, not the string {value!r}")
    return tuple(value)


def _str_frozenset(value: Iterable[str]) -> frozenset[str]:
    if isinstance(value, str):  # "task" would become a set of characters
        raise TypeError(f"expected a collection of strings, not the string {value!r}")
    return frozenset(value)


@attrs.frozen
class Limits:
    """Bounds on what a peer can make a connection hold or do."""

    #: Largest message (a stream line or an HTTP body) accepted, in bytes.
    max_message_bytes: int = attrs.field(default=4 * MiB, validator=_positive)
    #: Requests from the peer that may be in flight at once; more are answered -32603.
    max_in_flight: int = attrs.field(default=1024, validator=_positive)
    #: Entries in one ``inputRequests`` map (sent or received).
    max_input_requests: int = attrs.field(default=32, validator=_positive)
    #: Entries accepted in one ``inputResponses`` map; more are answered -32602.
    max_input_responses: int = attrs.field(default=64, validator=_positive)
    #: Longest ``requestState`` accepted, in bytes (characters of the token), checked before
    #: any cryptographic work.
    max_request_state_bytes: int = attrs.field(default=64 * 1024, validator=_positive)
    #: Legacy shim: requests being fulfilled through server-to-client legs at once.
    max_shimmed_requests: int = attrs.field(default=64, validator=_positive)
    #: Legacy shim: server-to-client requests awaiting an answer, over the whole connection.
    max_pending_legs: int = attrs.field(default=256, validator=_positive)


@attrs.frozen
class ServerConfig:
    """Everything a :class:`ServerConnection` needs to know about the server it speaks for.

    ``server_info`` (``{"name", "version"}``) goes into every modern result's ``_meta`` and
    into ``InitializeResult``; ``capabilities`` and ``instructions`` into ``server/discover``
    and ``initialize``.
    """

    #: ``{"name", "version"}`` of this server: every modern result's ``_meta``, ``initialize``.
    server_info: Mapping[str, Any] | None = attrs.field(default=None, converter=_frozen_mapping)
    #: The server's capabilities, as ``server/discover`` and ``initialize`` announce them.
    capabilities: Mapping[str, Any] = attrs.field(factory=dict, converter=_plain_dict)
    #: Instructions for the client's model, in ``server/discover`` and ``initialize``.
    instructions: str | None = None
    #: Modern versions served per request; others get -32022.
    supported_versions: tuple[str, ...] = attrs.field(default=MODERN_VERSIONS, converter=_str_tuple)
    #: Legacy versions accepted by ``initialize``, newest first; empty = modern-only server.
    legacy_versions: tuple[str, ...] = attrs.field(default=LEGACY_VERSIONS, converter=_str_tuple)
    #: Cache hints stamped on complete results of cacheable methods unless the handler set them.
    cache_ttl_ms: int = 0
    #: The ``cacheScope`` stamped with ``cache_ttl_ms``.
    cache_scope: Literal["public", "private"] = "private"
    #: Answer ``server/discover`` and ``initialize`` from this config (else the app gets them).
    answer_discovery: bool = True
    #: ``requestState`` protection (e.g. ``RequestStateSecurity``); None passes state through.
    request_state: StateProtector | None = None
    #: Fulfil ``input_required`` on the legacy wire with real server-to-client requests.
    legacy_shim: bool = True
    #: Legacy shim: rounds of input fulfilled per request (each: legs sent and answered, or a
    #: state-only re-run); the handler runs at most this + 1 times, then the request fails -32603.
    legacy_max_rounds: int = attrs.field(default=8, validator=_positive)
    #: Legacy shim: seconds a server-to-client request may wait for its answer.
    legacy_leg_timeout: float = attrs.field(default=600.0, validator=_positive_number)
    #: Legacy HTTP sessions held at once by one server; when full, the session idle the
    #: longest is ended to admit a new one, and ``initialize`` gets 503 only if none is idle.
    max_sessions: int = attrs.field(default=1024, validator=_positive)
    #: Legacy HTTP sessions one principal (the adapter's ``principal=``) may hold at once;
    #: beyond, that principal's own longest-idle session is ended (503 if none is idle).
    #: Anonymous sessions (principal None) are bounded by ``max_sessions`` alone.
    max_sessions_per_principal: int = attrs.field(default=64, validator=_positive)
    #: Legacy HTTP sessions: seconds a session with no open HTTP exchange is kept; then it
    #: ends and its ``Mcp-Session-Id`` gets 404. A busy session is bounded by
    #: ``legacy_leg_timeout`` and the server's HTTP timeouts instead.
    session_idle_timeout: float = attrs.field(default=1800.0, validator=_positive_number)
    #: Bounds on what the client can make the connection hold or do.
    limits: Limits = attrs.field(factory=Limits)
    #: The JSON codec (``OrjsonCodec()`` with the ``fast`` extra is several times faster).
    codec: JsonCodec = attrs.field(factory=default_codec)
    #: Wall clock in seconds (state expiry, leg timeouts). Injected so tests control time.
    clock: Callable[[], float] = time.time
    #: Source of unguessable ids (legacy url-elicitation ids). Injected for determinism.
    token_hex: Callable[[int], str] = secrets.token_hex
    #: Streamable HTTP: the tools' ``x-mcp-header`` annotations (tool name -> header name ->
    #: argument path, e.g. ``param_headers_for(tools)``). A ``tools/call`` of such a tool must
    #: mirror those arguments in ``Mcp-Param-*`` headers that match the body, else -32020.
    param_headers: Mapping[str, Mapping[str, tuple[str, ...]]] = attrs.field(
        factory=dict, converter=_plain_dict
    )
    #: The tasks extension (``mrtr_sansio.tasks.TaskSettings``); None: no tasks offered.
    tasks: TaskSettings | None = None


@attrs.frozen
class ClientConfig:
    """Everything a :class:`ClientConnection` declares and bounds."""

    #: ``{"name", "version"}`` of this client, in every modern envelope and in ``initialize``.
    client_info: Mapping[str, Any] | None = attrs.field(default=None, converter=_frozen_mapping)
    #: The client capabilities declared (what the server may ask for).
    capabilities: Mapping[str, Any] = attrs.field(factory=dict, converter=_plain_dict)
    #: ``"modern"``, ``"legacy"``, or ``"auto"`` (probe with ``server/discover``).
    era: Literal["modern", "legacy", "auto"] = "modern"
    #: The modern version sent in every envelope (and offered first by the probe).
    protocol_version: str = LATEST_MODERN_VERSION
    #: The version ``initialize`` asks for on the legacy wire.
    legacy_version: str = LEGACY_VERSIONS[0]
    #: Rounds of ``input_required`` before a call ends with ``RoundsExhausted``.
    max_rounds: int = attrs.field(default=10, validator=_positive)
    #: Seconds to wait for the ``server/discover`` probe before falling back to legacy.
    probe_timeout: float = attrs.field(default=5.0, validator=_positive_number)
    #: Bounds on what the server can make the connection hold or do.
    limits: Limits = attrs.field(factory=Limits)
    #: The JSON codec.
    codec: JsonCodec = attrs.field(factory=default_codec)
    #: Seconds, for the backoff and the probe; ``handle_timer(now)`` must read the same clock.
    clock: Callable[[], float] = time.monotonic
    #: Seconds before retrying after a state-only ``input_required`` (no ``inputRequests``);
    #: doubles on each consecutive one, up to ``max_retry_backoff``.
    retry_backoff: float = attrs.field(default=0.05, validator=_positive_number)
    #: The longest backoff between consecutive state-only retries.
    max_retry_backoff: float = attrs.field(default=0.25, validator=_positive_number)
    #: ``resultType`` values beyond ``complete``/``input_required`` that end a call with
    #: ``CallCompleted`` (those of extensions the client declares, e.g. ``"task"``); any
    #: other value is an invalid response.
    extra_result_types: frozenset[str] = attrs.field(default=frozenset(), converter=_str_frozenset)
    #: Tasks extension (declared by ``capabilities={"extensions": {"io.modelcontextprotocol/
    #: tasks": {}}}``): seconds between ``tasks/get`` polls when the server suggests no
    #: ``pollIntervalMs``.
    task_poll_interval: float = attrs.field(default=1.0, validator=_positive_number)
    #: The longest wait between polls, whatever ``pollIntervalMs`` the server suggests.
    max_task_poll_interval: float = attrs.field(default=30.0, validator=_positive_number)
