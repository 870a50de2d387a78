"""One run of one round of a handler on a real :class:`~mrtr_sansio.ServerConnection`, with the
clock, randomness and effect recorder the replay checker controls (see :mod:`._replay`).

Each run builds a fresh connection (the modern wire keeps no memory between requests), feeds it
the round's request as one NDJSON line, calls the handler with a context whose ``now()``,
``token_hex()`` and ``effect()`` the checker owns, and answers through the connection, so that
``requestState`` is sealed and unsealed by the server's own code path.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import attrs

from mrtr_sansio import (
    NEED_DATA,
    UNSEALED,
    InputRequiredResult,
    LocalProtocolError,
    OutgoingResponse,
    RequestReceived,
    ServerConfig,
    ServerConnection,
)
from mrtr_sansio.adapters import BlockingRequestContext, RequestContext
from mrtr_sansio.protocol import ResultType
from mrtr_sansio.sealing import RequestStateSecurity

from ._inprocess import run_to_completion

__all__ = ["Outcome", "Runner", "canonical", "error_text", "resolve"]

Kind = Literal["ask", "result", "error", "exception"]
#: The checker's sealed state lives this long: runs of a round may be days apart on its clock.
_STATE_TTL = 90 * 86400.0


def canonical(value: Any) -> str:
    """Compact JSON with sorted keys (``repr`` for anything JSON cannot say): for comparing."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)


def resolve(spec: str) -> tuple[Any, str, Any]:
    """``package.module:attr.path`` -> (owner, last name, object); a part written ``name()``
    is called with no arguments (``fixtures:Everything().handle``)."""
    module_name, sep, path = spec.partition(":")
    if not sep or not module_name or not path:
        raise ValueError(f"{spec!r}: expected package.module:name (e.g. myapp.server:handler)")
    owner: Any = importlib.import_module(module_name)
    parts = path.split(".")
    value: Any = owner
    for i, part in enumerate(parts):
        call = part.endswith("()")
        name = part[:-2] if call else part
        owner = value
        try:
            value = getattr(owner, name)
        except AttributeError:
            raise ValueError(f"{spec!r}: {'.'.join(parts[: i + 1])} not found") from None
        if call:
            value = value()
    last = parts[-1]
    return owner, last[:-2] if last.endswith("()") else last, value


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else canonical(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _effect_text(name: str, details: Mapping[str, Any]) -> str:
    return f"{name}({', '.join(f'{k}={_short(v, 30)}' for k, v in details.items())})"


@attrs.frozen
class Outcome:
    """What one run of a round did: the answer's kind, its questions and state (as the handler
    wrote them), the result or error, the sealed token to echo, and the effects made."""

    kind: Kind
    questions: Mapping[str, Any] = attrs.field(factory=dict)
    state: Any = None
    #: Bytes of the state as compact JSON (None: no state).
    state_bytes: int | None = None
    #: The complete result, the error object, or the exception as text.
    payload: Any = None
    token: str | None = None
    effects: tuple[str, ...] = ()
    #: The handler answered, but the server connection refused the answer (``payload`` says
    #: why); otherwise an ``exception`` is the handler's own.
    refused: bool = False

    def fingerprint(self) -> str:
        """Everything a re-run must reproduce (the token differs: it holds a fresh id)."""
        return canonical([self.kind, self.questions, self.state, self.payload, self.effects])

    def asked(self) -> str:
        """The question keys and kinds, for a comparison that ignores their wording."""
        return canonical({k: _kind_of(q) for k, q in self.questions.items()})


def _kind_of(question: Mapping[str, Any]) -> str:
    method = question.get("method")
    params = question.get("params")
    if method == "elicitation/create" and isinstance(params, Mapping):
        return f"elicitation ({params.get('mode', 'form')})"
    return {"sampling/createMessage": "sampling", "roots/list": "roots"}.get(str(method), "?")


def _hex_source(seed: int) -> Callable[[int], str]:
    """A deterministic ``token_hex``: the n-th call of seed s always gives the same hex."""
    counter = iter(range(1 << 62))

    def token_hex(nbytes: int = 16) -> str:
        out = ""
        while len(out) < 2 * nbytes:
            out += hashlib.sha256(f"{seed}:{next(counter)}".encode()).hexdigest()
        return out[: 2 * nbytes]

    return token_hex


async def _no_sleep(_seconds: float) -> None:
    """``ctx.sleep`` under the checker: time does not pass."""


def _no_block(_seconds: float) -> None:
    """``ctx.sleep`` for blocking handlers under the checker."""


def _is_async(handler: Any) -> bool:
    call = vars(type(handler)).get("__call__")
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)


class Runner:
    """Runs rounds of ``handler`` (the adapters' signature, async or blocking), state sealed
    by a :class:`~mrtr_sansio.sealing.RequestStateSecurity` of its own (``sealed=False``: passed
    through as the handler wrote it, a string), functions named in ``watch`` recorded."""

    def __init__(
        self,
        handler: Callable[..., Any],
        config: ServerConfig | None = None,
        *,
        sealed: bool = True,
        watch: Sequence[str] = (),
        principal: str | None = None,
    ) -> None:
        base = config if config is not None else ServerConfig(capabilities={"tools": {}})
        security = RequestStateSecurity.ephemeral(ttl=_STATE_TTL) if sealed else UNSEALED
        self._config = attrs.evolve(base, request_state=security)
        self._handler = handler
        self._async = _is_async(handler)
        self._principal = principal
        self._watch = [(spec, *resolve(spec)[:2]) for spec in watch]

    @contextmanager
    def _watching(self, record: Callable[[str, Mapping[str, Any]], None]) -> Iterator[None]:
        saved = []
        for spec, owner, name in self._watch:
            original = getattr(owner, name)

            def wrapper(*args: Any, __spec: str = spec, __fn: Any = original, **kwargs: Any) -> Any:
                shown = {f"arg{i}": a for i, a in enumerate(args)}
                record(__spec, {**shown, **kwargs})
                return __fn(*args, **kwargs)

            saved.append((owner, name, original))
            setattr(owner, name, wrapper)
        try:
            yield
        finally:
            for owner, name, original in reversed(saved):
                setattr(owner, name, original)

    def _call(self, request: RequestReceived, conn: ServerConnection, effects: list[str]) -> Any:
        def record(name: str, details: Mapping[str, Any]) -> None:
            effects.append(_effect_text(name, details))

        with self._watching(record):
            if self._async:
                ctx = RequestContext(conn, request, lambda: None, _no_sleep, effects=record)
                return run_to_completion(self._handler(request, ctx))
            blocking = BlockingRequestContext(
                conn, request, lambda: None, _no_block, effects=record
            )
            result = self._handler(request, blocking)
            if inspect.isawaitable(result):
                return run_to_completion(result)  # type: ignore[arg-type]
            return result

    def run(self, message: Mapping[str, Any], clock: float, seed: int) -> Outcome:
        """Run the round ``message`` (a JSON-RPC request) at ``clock`` with randomness ``seed``."""
        config = attrs.evolve(self._config, clock=lambda: clock, token_hex=_hex_source(seed))
        conn = ServerConnection(config, principal=self._principal)
        conn.receive_data(json.dumps(message).encode() + b"\n")
        effects: list[str] = []
        raw: Any = None
        while (event := conn.next_event()) is not NEED_DATA:
            if type(event) is not RequestReceived:
                continue
            try:
                raw = self._call(event, conn, effects)
            except Exception as exc:
                return Outcome("exception", payload=_exception_text(exc), effects=tuple(effects))
            try:
                conn.respond(event.request_id, raw)
            except (LocalProtocolError, TypeError, ValueError) as exc:
                text = f"the server connection refused the answer: {exc}"
                return Outcome("exception", payload=text, effects=tuple(effects), refused=True)
        response: dict[str, Any] = {}
        for item in conn.outgoing():
            if isinstance(item, OutgoingResponse):
                response = json.loads(item.data)
        return _outcome(raw, response, tuple(effects))


def _exception_text(exc: Exception) -> str:
    last = traceback.extract_tb(exc.__traceback__)[-1]  # raised, so it has a frame
    file = last.filename.replace("\\", "/").rsplit("/", 1)[-1]
    return f"{type(exc).__name__}: {exc} ({file}:{last.lineno})"


def _outcome(raw: Any, response: Mapping[str, Any], effects: tuple[str, ...]) -> Outcome:
    if "error" in response:
        return Outcome("error", payload=response["error"], effects=effects)
    result = dict(response.get("result") or {})
    result.pop("_meta", None)
    if result.get("resultType") != ResultType.INPUT_REQUIRED:
        result.pop("resultType", None)
        return Outcome("result", payload=result, effects=effects)
    if isinstance(raw, InputRequiredResult):
        state = raw.request_state
    elif isinstance(raw, Mapping):
        state = raw.get("requestState")
    else:  # pragma: no cover - the connection only sends input_required for those two
        state = None
    size = None if state is None else len(canonical(state).encode())
    return Outcome(
        "ask",
        questions=result.get("inputRequests") or {},
        state=state,
        state_bytes=size,
        token=result.get("requestState"),
        effects=effects,
    )


def error_text(error: Any) -> str:
    """``-32602 Invalid params`` from a JSON-RPC error object."""
    if isinstance(error, Mapping):
        return f"{error.get('code')} {_short(error.get('message'), 80)}"
    return _short(error)
