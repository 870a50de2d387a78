"""The era bridge's IO-free part: how a request a downstream client sent becomes a call upstream,
and how what the upstream answers becomes the downstream's answer.

A bridge is a server connection facing the downstream client and a client connection facing the
upstream server. Whatever the eras, the bridge **holds** each upstream ``tools/call``,
``prompts/get`` or ``resources/read`` while it asks for input: the upstream's questions (the
``inputRequests`` of a modern ``input_required``, or the real requests of a legacy server) go
downstream as one ``input_required`` whose state names the held call, and the downstream's
answers complete the held call's round. On a legacy downstream the server's shim turns that
``input_required`` into real requests and replays, so one mapping serves the four directions.
Tasks pass through, each bound to the principal that created it (``_tasks``); which upstream
connection serves a request, and which closes, is decided here too.

Every rule here names the spec rule it follows (``DIGEST.md`` sections of the project's
normative digest). :mod:`mrtr_sansio.adapters.bridge` gives this IO.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

import attrs

from mrtr_sansio._config import ServerConfig
from mrtr_sansio._errors import ErrorCode, JsonRpcError
from mrtr_sansio._events import InputNeeded, RequestReceived
from mrtr_sansio._mcp.envelope import (
    CLIENT_CAPABILITIES,
    CLIENT_INFO,
    LOG_LEVEL,
    PROTOCOL_VERSION_KEY,
)
from mrtr_sansio._mcp.methods import MRTR_METHODS
from mrtr_sansio._mcp.mrtr_fields import RETRY_FIELDS
from mrtr_sansio._mcp.values import InputRequest, InputRequiredResult, InputResponses

from ._facts import downstream_config, mirrored_headers
from ._limits import BridgeLimits, BridgeRefusedError
from ._tasks import (
    LIST_TASKS,
    TASK_PREFIX,
    UNKNOWN_TASK,
    TaskOwners,
    created_task,
    owned_listing,
    task_refusal,
)
from ._upstreams import (
    RELAYED_CAPABILITIES,
    UPSTREAMS_EXHAUSTED,
    UpstreamKey,
    UpstreamUse,
    idle_upstreams,
    input_lane,
    notification_target,
    one_input_call_each,
    upstream_capabilities,
    upstream_key,
    upstream_to_close,
)

__all__ = [
    "HOLDS_EXHAUSTED",
    "HOLD_META",
    "INPUT_METHODS",
    "LIST_TASKS",
    "RELAYED_CAPABILITIES",
    "TASK_PREFIX",
    "UNKNOWN_HOLD",
    "UNKNOWN_TASK",
    "UPSTREAMS_EXHAUSTED",
    "BridgeLimits",
    "BridgeRefusedError",
    "HeldCalls",
    "TaskOwners",
    "UpstreamKey",
    "UpstreamUse",
    "answers_for",
    "created_task",
    "downstream_config",
    "idle_upstreams",
    "input_lane",
    "input_required_for",
    "legacy_error",
    "mirrored_headers",
    "notification_target",
    "one_input_call_each",
    "over_round_cap",
    "owned_listing",
    "relay_error",
    "relay_params",
    "task_refusal",
    "upstream_capabilities",
    "upstream_key",
    "upstream_to_close",
]

#: The methods whose upstream calls may ask for input, so the only ones held (DIGEST §2.3 S10).
INPUT_METHODS = MRTR_METHODS
#: The ``_meta`` key naming the held call on an upstream request, so that the upstream's
#: questions find their held call; a downstream request's own value is dropped (it could
#: otherwise name another principal's call).
HOLD_META = "dev.mrtr-sansio/bridge-hold"
#: Params of a downstream request that belong to its connection, never relayed: the retry
#: fields (DIGEST §2.5 items 4-5: the upstream client echoes the upstream's own state).
#: Envelope keys of ``_meta``, recomputed by the upstream client (DIGEST §2.5 item 3, §1.1).
_ENVELOPE_KEYS = (PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES, CLIENT_INFO, HOLD_META)

T = TypeVar("T")


#: A held call that is not this process's, expired, released, or another principal's: one answer
#: for all, so that a guess learns nothing (DIGEST §4: state is attacker-controlled input).
UNKNOWN_HOLD = JsonRpcError(
    ErrorCode.INVALID_PARAMS,
    "The upstream call this retry continues is not held by this bridge process (expired, "
    "ended, or held by another bridge process)",
    {"reason": "bridge_hold_unknown"},
)
HOLDS_EXHAUSTED = JsonRpcError(
    ErrorCode.INTERNAL_ERROR,
    "The bridge holds too many upstream calls waiting for input; try again later",
    {"reason": "bridge_holds_exhausted"},
)


@attrs.define
class _Hold(Generic[T]):
    principal: str | None
    value: T
    deadline: float


class HeldCalls(Generic[T]):
    """The upstream calls held while their input is asked downstream, each named by a random
    id and owned by the principal that started it; bounded in count, per principal and time.

    Time comes from ``clock`` and ids from ``token_hex``; nothing here sleeps.
    """

    def __init__(
        self,
        limits: BridgeLimits,
        clock: Callable[[], float],
        token_hex: Callable[[int], str],
    ) -> None:
        self.limits = limits
        self._clock = clock
        self._token_hex = token_hex
        self._holds: dict[str, _Hold[T]] = {}

    def __len__(self) -> int:
        return len(self._holds)

    def hold(self, principal: str | None, value: T) -> str:
        """Hold ``value`` for ``principal``; its id, or :class:`BridgeRefusedError` past a bound
        (a bound counts only live holds; the expired wait for :meth:`expire`, which returns
        them to be cancelled)."""
        limits = self.limits
        now = self._clock()
        live = [h for h in self._holds.values() if h.deadline > now]
        mine = sum(1 for h in live if h.principal == principal)
        if len(live) >= limits.max_held or mine >= limits.max_held_per_principal:
            raise BridgeRefusedError(HOLDS_EXHAUSTED)
        hold_id = self._token_hex(16)
        self._holds[hold_id] = _Hold(principal, value, now + limits.hold_timeout)
        return hold_id

    def get(self, hold_id: object, principal: str | None) -> T:
        """The value held under ``hold_id`` for ``principal``, its deadline renewed; else
        :class:`BridgeRefusedError` with :data:`UNKNOWN_HOLD` (whatever the reason)."""
        hold = self._holds.get(hold_id) if isinstance(hold_id, str) else None
        now = self._clock()
        if hold is None or hold.principal != principal or hold.deadline <= now:
            raise BridgeRefusedError(UNKNOWN_HOLD)
        hold.deadline = now + self.limits.hold_timeout
        return hold.value

    def release(self, hold_id: str) -> T | None:
        """Forget ``hold_id``; its value, or None when it was not held."""
        hold = self._holds.pop(hold_id, None)
        return None if hold is None else hold.value

    def expire(self, keep: Callable[[T], bool] | None = None) -> list[T]:
        """Drop the holds past their deadline and return their values (to be cancelled);
        those ``keep`` says are in use (waiting on the upstream, not on the downstream) get
        a new deadline instead."""
        now = self._clock()
        gone = []
        for hold_id, hold in self._holds.items():
            if hold.deadline <= now:
                if keep is not None and keep(hold.value):
                    hold.deadline = now + self.limits.hold_timeout
                else:
                    gone.append(hold_id)
        return [self._holds.pop(k).value for k in gone]

    def next_deadline(self) -> float | None:
        """When :meth:`expire` next has something to do, or None."""
        return min((h.deadline for h in self._holds.values()), default=None)


def relay_params(
    params: Mapping[str, Any],
    hold_id: str | None = None,
    log_level: str | None = None,
    method: str | None = None,
) -> dict[str, Any]:
    """The params of the upstream request for a downstream one: the same method and params
    (DIGEST §2.5 item 1), without the downstream's retry fields and envelope, which the
    upstream client makes anew for its own rounds (§2.5 items 3-5, C2, C5); ``_meta`` keys of
    the application (``progressToken``, ``logLevel``) are kept. ``hold_id`` tags the request
    with :data:`HOLD_META`; ``log_level`` (a legacy session's ``logging/setLevel``) becomes the
    request's ``logLevel`` when it names none (§1.1: on the modern wire logs are asked for per
    request). The retry fields are an MRTR request's (``method`` None or in
    :data:`INPUT_METHODS`); another method's are its own, kept (``tasks/update`` answers with
    ``inputResponses``)."""
    if method is None or method in INPUT_METHODS:
        out = {k: v for k, v in params.items() if k not in RETRY_FIELDS}
    else:
        out = dict(params)
    meta = params.get("_meta")
    kept = (
        {k: v for k, v in meta.items() if k not in _ENVELOPE_KEYS}
        if isinstance(meta, Mapping)
        else {}
    )
    if hold_id is not None:
        kept[HOLD_META] = hold_id
    if log_level is not None:
        kept.setdefault(LOG_LEVEL, log_level)
    if kept:
        out["_meta"] = kept
    else:
        out.pop("_meta", None)
    return out


def input_required_for(needs: Iterable[InputNeeded], hold_id: str) -> InputRequiredResult:
    """The downstream ``input_required`` for one round of the upstream's questions: each under
    its upstream key as a string (a modern server's ``inputRequests`` key, or a legacy server's
    request id, DIGEST §2.3 S2), the same method and params (S3), and the hold's id as the
    state (S4; the downstream server seals it, §4). A round with no question is state-only
    (S6), which makes the downstream client retry at once (C1)."""
    requests = {str(n.key): InputRequest(n.method, n.params) for n in needs}
    return InputRequiredResult(requests or None, request_state=hold_id)


def answers_for(
    needs: Iterable[InputNeeded], responses: InputResponses
) -> list[Mapping[str, Any]] | None:
    """The downstream's answer to each upstream question of the round, in order, or None when
    one is missing (the round is then asked again, S13; unknown keys are ignored, S12)."""
    out: list[Mapping[str, Any]] = []
    for need in needs:
        answer = responses.get_response(str(need.key))
        if not isinstance(answer, Mapping):
            return None
        out.append(answer)
    return out


def over_round_cap(request: RequestReceived, config: ServerConfig) -> bool:
    """True when one more ``input_required`` for this legacy request goes past the shim's round
    cap (``legacy_max_rounds``): the held call is then given up, as the shim fails the request
    (DIGEST §5.7)."""
    return request.session is not None and (request.round or 1) > config.legacy_max_rounds


def relay_error(code: int, message: str, data: Any, *, local: bool) -> JsonRpcError:
    """The downstream answer to an upstream call that failed: the upstream server's own
    JSON-RPC error as it is (its code is the protocol's, DIGEST §6), or, when the failure was
    the bridge's upstream client's (a broken response, a closed stream), -32603 saying so."""
    if not local:
        return JsonRpcError(code, message, data)
    return JsonRpcError(
        ErrorCode.INTERNAL_ERROR,
        f"The upstream server could not be reached or answered wrongly: {message}",
        {"reason": "bridge_upstream_failed"},
    )


def legacy_error(error: JsonRpcError) -> JsonRpcError:
    """``error`` as a 2025-11-25 client can read it: an upstream's -32021, which that revision
    lacks (DIGEST §3.4), becomes -32603 with its message and ``requiredCapabilities``, as the
    legacy shim refuses a capability the session did not declare; any other error as it is."""
    if error.code != ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY:
        return error
    return JsonRpcError(ErrorCode.INTERNAL_ERROR, error.message, error.data)
