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

from mrtr_sansio._validators import positive, positive_number

from ._mcp.envelope import (
    LATEST_MODERN_VERSION,
    LEGACY_VERSIONS,
    LOG_LEVELS,
    MODERN_VERSIONS,
    Era,
)
from ._wire.codec import JsonCodec, default_codec
from .observe import Observer
from .sealing._security import is_process_protector, process_state_protector
from .sealing._state import UNSEALED, StateProtector, Unsealed
from .tasks._settings import TaskSettings

__all__ = ["ClientConfig", "Limits", "ServerConfig"]

MiB = 1024 * 1024
#: The deepest ``Limits.max_json_depth`` may be: orjson writes at most 255 levels, and the
#: interpreter's stack (1000 frames by default) must hold a walk of the deepest message.
MAX_JSON_DEPTH = 200


def _mapping(name: str, value: Any, example: str) -> dict[str, Any]:
    """``dict(value)``, or a TypeError that names the field and shows what it takes (``dict``
    of a string would say "dictionary update sequence element #0 has length 1")."""
    if not isinstance(value, Mapping):
        raise TypeError(
            f"{name}: must be a mapping such as {example}, got {type(value).__name__} {value!r:.60}"
        )
    return dict(value)


# Typed converters, one named function per field: with the builtins ``dict``/``tuple`` as
# converters, mypy's attrs plugin derives unusable ``__init__`` parameter types
# (``capabilities={"tools": {}}`` fails --strict), and it accepts only named functions.
def _implementation(
    name: str, value: Mapping[str, Any] | None, example: str
) -> dict[str, Any] | None:
    """An ``Implementation`` (``server_info``/``client_info``): the schema requires a string
    ``name`` and ``version``, which a peer shows and logs."""
    if value is None:
        return None
    info = _mapping(name, value, example)
    for key in ("name", "version"):
        if not isinstance(info.get(key), str):
            raise ValueError(
                f"{name}: needs a string {key!r}, as in {example}, got {info.get(key)!r:.60}"
            )
    return info


def _server_info(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return _implementation("server_info", value, "{'name': 'my-server', 'version': '1.0'}")


def _client_info(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return _implementation("client_info", value, "{'name': 'my-client', 'version': '1.0'}")


def _capabilities(value: Mapping[str, Any]) -> dict[str, Any]:
    capabilities = _mapping("capabilities", value, "{'tools': {}}")
    for key, entry in capabilities.items():
        if not isinstance(entry, Mapping):  # the schemas declare each one an object
            raise ValueError(
                f"capabilities[{key!r}]: must be an object (a mapping) such as {{}} or "
                f"{{'listChanged': True}}, got {type(entry).__name__} {entry!r:.60}"
            )
    return capabilities


def _era(value: str | Era) -> str:
    """The library's own :class:`Era` stands for its value (``Era.LEGACY`` is ``"legacy"``)."""
    return value.value if isinstance(value, Era) else value


def _param_headers(value: Mapping[str, Mapping[str, tuple[str, ...]]]) -> dict[str, Any]:
    return _mapping("param_headers", value, "param_headers_for(tools)")


def _instance_of(kind: type, example: str) -> Callable[[object, attrs.Attribute[Any], Any], None]:
    """A validator whose message names the field, the type it takes and how to build one."""

    def check(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            raise TypeError(
                f"{attribute.name}: must be {example}, got {type(value).__name__} {value!r:.60}"
            )

    return check


def _has_methods(*names: str, example: str) -> Callable[[object, attrs.Attribute[Any], Any], None]:
    def check(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
        if not all(callable(getattr(value, name, None)) for name in names):
            raise TypeError(
                f"{attribute.name}: must be {example} (with {'() and '.join(names)}()), "
                f"got {type(value).__name__}"
            )

    return check


def _callable(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not callable(value):
        raise TypeError(f"{attribute.name}: must be callable, got {type(value).__name__}")


def _one_of(*choices: str) -> Callable[[object, attrs.Attribute[Any], Any], None]:
    def check(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value not in choices or type(value) is not str:
            raise ValueError(
                f"{attribute.name}: must be one of {', '.join(map(repr, choices))}, got {value!r}"
            )

    return check


def _json_depth(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not int or not 1 <= value <= MAX_JSON_DEPTH:
        raise ValueError(
            f"{attribute.name}: must be a positive integer, at most {MAX_JSON_DEPTH} (deeper "
            f"nesting would overflow the interpreter's stack), got {value!r}"
        )


def _non_negative_int(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not int or value < 0:
        raise ValueError(f"{attribute.name}: must be an integer >= 0, got {value!r}")


def _request_state(value: StateProtector | Unsealed) -> StateProtector | Unsealed:
    if value is None:
        raise TypeError(
            "request_state: None no longer means unsealed; state is sealed by default (a "
            "per-process key). To send it unprotected, say so: request_state=UNSEALED"
        )
    if value is not UNSEALED and not all(
        callable(getattr(value, name, None)) for name in ("seal", "unseal")
    ):
        raise TypeError(
            f"request_state: must be a StateProtector (e.g. RequestStateSecurity(keys=[key])) "
            f"or UNSEALED, got {type(value).__name__}"
        )
    return value


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
    max_message_bytes: int = attrs.field(default=4 * MiB, validator=positive)
    #: Requests from the peer that may be in flight at once; more are answered -32603.
    max_in_flight: int = attrs.field(default=1024, validator=positive)
    #: Entries in one ``inputRequests`` map (sent or received).
    max_input_requests: int = attrs.field(default=32, validator=positive)
    #: Entries accepted in one ``inputResponses`` map; more are answered -32602.
    max_input_responses: int = attrs.field(default=64, validator=positive)
    #: Longest ``requestState`` accepted, in bytes (characters of the token), checked before
    #: any cryptographic work.
    max_request_state_bytes: int = attrs.field(default=64 * 1024, validator=positive)
    #: Legacy shim: requests being fulfilled through server-to-client legs at once.
    max_shimmed_requests: int = attrs.field(default=64, validator=positive)
    #: Legacy shim: server-to-client requests awaiting an answer, over the whole connection.
    max_pending_legs: int = attrs.field(default=256, validator=positive)
    #: Deepest nesting of arrays and objects in one message (``{"a": [1]}`` is 2 levels, a
    #: request's arguments start at level 3), at most 200. Deeper text is answered -32700
    #: before it is decoded, and a message of ours nested deeper is not sent (a local error).
    max_json_depth: int = attrs.field(default=128, validator=_json_depth)
    #: JSON values in one message, counting arrays, objects, object keys and scalars
    #: (``{"a": [1, 2]}`` holds 5); more are answered -32700 before decoding. Bounds the memory
    #: a message decodes to (a few MiB of ``[{},{},...]`` would otherwise take tens of MiB);
    #: raise it for peers that send large structured data.
    max_json_nodes: int = attrs.field(default=100_000, validator=positive)


@attrs.frozen
class ServerConfig:
    """Everything a :class:`ServerConnection` needs to know about the server it speaks for.

    ``server_info`` (``{"name", "version"}``) goes into every modern result's ``_meta`` and
    into ``InitializeResult``; ``capabilities`` and ``instructions`` into ``server/discover``
    and ``initialize``.
    """

    #: ``{"name", "version"}`` of this server: every modern result's ``_meta``, ``initialize``.
    server_info: Mapping[str, Any] | None = attrs.field(default=None, converter=_server_info)
    #: The server's capabilities, as ``server/discover`` and ``initialize`` announce them.
    capabilities: Mapping[str, Any] = attrs.field(factory=dict, converter=_capabilities)
    #: Instructions for the client's model, in ``server/discover`` and ``initialize``.
    instructions: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(_instance_of(str, "a string or None"))
    )
    #: Modern versions served per request; others get -32022.
    supported_versions: tuple[str, ...] = attrs.field(default=MODERN_VERSIONS, converter=_str_tuple)
    #: Legacy versions accepted by ``initialize``, newest first; empty = modern-only server.
    legacy_versions: tuple[str, ...] = attrs.field(default=LEGACY_VERSIONS, converter=_str_tuple)
    #: Cache hints stamped on complete results of cacheable methods unless the handler set them.
    cache_ttl_ms: int = attrs.field(default=0, validator=_non_negative_int)
    #: The ``cacheScope`` stamped with ``cache_ttl_ms``.
    cache_scope: Literal["public", "private"] = attrs.field(
        default="private", validator=_one_of("public", "private")
    )
    #: Answer ``server/discover`` and ``initialize`` from this config (else the app gets them).
    answer_discovery: bool = attrs.field(default=True, validator=_instance_of(bool, "True/False"))
    #: ``requestState`` protection. The default seals with a random key made once per process
    #: (``process_state_protector()``; the adapters log a warning when they serve with it):
    #: enough for one process, not for several instances or restarts, which must configure
    #: the same ``RequestStateSecurity(keys=[...])`` everywhere. ``UNSEALED`` opts out.
    request_state: StateProtector | Unsealed = attrs.field(
        factory=process_state_protector, converter=_request_state
    )
    #: Fulfil ``input_required`` on the legacy wire with real server-to-client requests.
    legacy_shim: bool = attrs.field(default=True, validator=_instance_of(bool, "True/False"))
    #: Legacy shim: rounds of input fulfilled per request (each: legs sent and answered, or a
    #: state-only re-run); the handler runs at most this + 1 times, then the request fails -32603.
    legacy_max_rounds: int = attrs.field(default=8, validator=positive)
    #: Legacy shim: seconds a server-to-client request may wait for its answer.
    legacy_leg_timeout: float = attrs.field(default=600.0, validator=positive_number)
    #: Legacy HTTP sessions held at once by one server; when full, the session idle the
    #: longest is ended to admit a new one, and ``initialize`` gets 503 only if none is idle.
    max_sessions: int = attrs.field(default=1024, validator=positive)
    #: Legacy HTTP sessions one principal (the adapter's ``principal=``) may hold at once;
    #: beyond, that principal's own longest-idle session is ended (503 if none is idle).
    #: Anonymous sessions (principal None) are bounded by ``max_sessions`` alone.
    max_sessions_per_principal: int = attrs.field(default=64, validator=positive)
    #: Legacy HTTP sessions: seconds a session with no open HTTP exchange is kept; then it
    #: ends and its ``Mcp-Session-Id`` gets 404. A busy session is bounded by
    #: ``legacy_leg_timeout`` and the server's HTTP timeouts instead.
    session_idle_timeout: float = attrs.field(default=1800.0, validator=positive_number)
    #: Bounds on what the client can make the connection hold or do.
    limits: Limits = attrs.field(
        factory=Limits,
        validator=_instance_of(Limits, "a Limits(...), e.g. Limits(max_in_flight=64)"),
    )
    #: The JSON codec: orjson when it is installed (the ``fast`` extra), else the stdlib's.
    codec: JsonCodec = attrs.field(
        factory=default_codec, validator=_has_methods("loads", "dumps", example="a JsonCodec")
    )
    #: Wall clock in seconds (state expiry, leg timeouts). Injected so tests control time.
    clock: Callable[[], float] = attrs.field(default=time.time, validator=_callable)
    #: Source of unguessable ids (legacy url-elicitation ids). Injected for determinism.
    token_hex: Callable[[int], str] = attrs.field(default=secrets.token_hex, validator=_callable)
    #: Streamable HTTP: the tools' ``x-mcp-header`` annotations (tool name -> header name ->
    #: argument path, e.g. ``param_headers_for(tools)``). A ``tools/call`` of such a tool must
    #: mirror those arguments in ``Mcp-Param-*`` headers that match the body, else -32020.
    param_headers: Mapping[str, Mapping[str, tuple[str, ...]]] = attrs.field(
        factory=dict, converter=_param_headers
    )
    #: The tasks extension (``mrtr_sansio.tasks.TaskSettings``); None: no tasks offered.
    tasks: TaskSettings | None = attrs.field(
        default=None,
        validator=attrs.validators.optional(
            _instance_of(TaskSettings, "a TaskSettings(...) from mrtr_sansio.tasks, or None")
        ),
    )
    #: Told what happens (``mrtr_sansio.observe``; ``mrtr_sansio.otel.OtelObserver`` for
    #: OpenTelemetry); None, the default, costs nothing.
    observer: Observer | None = None

    @property
    def seals_with_process_key(self) -> bool:
        """True when ``request_state`` is the default per-process key (adapters warn then)."""
        return is_process_protector(self.request_state)


@attrs.frozen
class ClientConfig:
    """Everything a :class:`ClientConnection` declares and bounds."""

    #: ``{"name", "version"}`` of this client, in every modern envelope and in ``initialize``.
    client_info: Mapping[str, Any] | None = attrs.field(default=None, converter=_client_info)
    #: The client capabilities declared (what the server may ask for).
    capabilities: Mapping[str, Any] = attrs.field(factory=dict, converter=_capabilities)
    #: ``"modern"``, ``"legacy"``, or ``"auto"`` (probe with ``server/discover``).
    #: ``Era.MODERN``/``Era.LEGACY`` are accepted for the first two.
    era: Literal["modern", "legacy", "auto"] = attrs.field(
        default="modern", converter=_era, validator=_one_of("modern", "legacy", "auto")
    )
    #: The modern version sent in every envelope (and offered first by the probe).
    protocol_version: str = LATEST_MODERN_VERSION
    #: The version ``initialize`` asks for on the legacy wire.
    legacy_version: str = LEGACY_VERSIONS[0]
    #: Rounds of ``input_required`` before a call ends with ``RoundsExhausted``.
    max_rounds: int = attrs.field(default=10, validator=positive)
    #: Seconds to wait for the ``server/discover`` probe before falling back to legacy.
    probe_timeout: float = attrs.field(default=5.0, validator=positive_number)
    #: Bounds on what the server can make the connection hold or do.
    limits: Limits = attrs.field(
        factory=Limits,
        validator=_instance_of(Limits, "a Limits(...), e.g. Limits(max_in_flight=64)"),
    )
    #: The JSON codec: orjson when it is installed (the ``fast`` extra), else the stdlib's.
    codec: JsonCodec = attrs.field(
        factory=default_codec, validator=_has_methods("loads", "dumps", example="a JsonCodec")
    )
    #: Seconds, for the backoff and the probe; ``handle_timer(now)`` must read the same clock.
    clock: Callable[[], float] = attrs.field(default=time.monotonic, validator=_callable)
    #: Seconds before retrying after a state-only ``input_required`` (no ``inputRequests``);
    #: doubles on each consecutive one, up to ``max_retry_backoff``.
    retry_backoff: float = attrs.field(default=0.05, validator=positive_number)
    #: The longest backoff between consecutive state-only retries.
    max_retry_backoff: float = attrs.field(default=0.25, validator=positive_number)
    #: Ask the server for log messages at this level and above (``"debug"`` ... ``"emergency"``)
    #: on every call: modern, the ``_meta`` logLevel of each request (a call's own ``_meta``
    #: logLevel wins); legacy, one ``logging/setLevel`` after the handshake when the server
    #: declares ``logging``. They arrive as notifications (``on_notification`` in the
    #: adapters). None: no logs unless a call asks.
    log_level: str | None = attrs.field(
        default=None,
        validator=attrs.validators.optional(_one_of(*LOG_LEVELS)),
    )
    #: Ask for progress on every call: each request carries ``_meta.progressToken`` (the
    #: call's id, unless the call gives its own), and ``notifications/progress`` arrive as
    #: notifications.
    progress: bool = attrs.field(default=False, validator=_instance_of(bool, "True/False"))
    #: ``resultType`` values beyond ``complete``/``input_required`` that end a call with
    #: ``CallCompleted`` (those of extensions the client declares, e.g. ``"task"``); any
    #: other value is an invalid response. Listing ``"task"`` ends a call that became a task
    #: with its ``CreateTaskResult`` as it is, not followed (what a relay passes on).
    extra_result_types: frozenset[str] = attrs.field(default=frozenset(), converter=_str_frozenset)
    #: Tasks extension (declared by ``capabilities={"extensions": {"io.modelcontextprotocol/
    #: tasks": {}}}``): seconds between ``tasks/get`` polls when the server suggests no
    #: ``pollIntervalMs``.
    task_poll_interval: float = attrs.field(default=1.0, validator=positive_number)
    #: The longest wait between polls, whatever ``pollIntervalMs`` the server suggests.
    max_task_poll_interval: float = attrs.field(default=30.0, validator=positive_number)
    #: Told what happens to each call (``mrtr_sansio.observe``), and asked for the trace
    #: context (``traceparent``...) each request's ``_meta`` carries; None costs nothing.
    observer: Observer | None = None
