"""ServerModel: a hypothesis state machine that checks any MRTR server against the spec.

The server is a callable: one modern JSON-RPC request (a dict) in, its response (a dict, or
None) out, so the same model drives an in-process connection, an HTTP endpoint or a subprocess.
The model plays a modern client: it calls the operations it is told about with varied
capabilities, answers ``input_required`` rounds with generated responses, and on the side
tampers with states, withholds answers, sends invalid answers and unknown keys, replays states
and calls methods that must never ask for input. Every response is checked; a failed check
raises :class:`SpecViolationError` naming the rule (see :data:`CHECKS`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import attrs
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)

from mrtr_sansio.protocol import (
    CLIENT_CAPABILITIES,
    CLIENT_INFO,
    PROTOCOL_VERSION_KEY,
    ResultType,
    missing_capabilities,
)

from . import strategies as mst
from ._checks import SpecViolationError, check_response, outcome
from ._operations import ModelConfig, Operation

__all__ = ["Server", "ServerModel", "check_server"]

#: A server under test: a modern request in, its response out (None if it sent none).
Server = Callable[[dict[str, Any]], "Mapping[str, Any] | None"]

_MAX_FLOWS = 16
_INPUT_REQUIRED = ("result", ResultType.INPUT_REQUIRED.value)
_DEFAULT_CAPS = st.one_of(st.just(mst.FULL_CAPABILITIES), mst.client_capabilities())
_EXTRA_META = st.builds(
    lambda value: {
        "com.example.model/unknown": value,
        "io.modelcontextprotocol/notYetDefined": {"x": 1},
    },
    mst.json_values(4),
)
_DECOY = {"action": "accept", "content": {"name": "x"}}


@attrs.define
class _Flow:
    """One operation in progress: what the server asked for last, and what to echo."""

    op: Operation
    params: dict[str, Any]
    caps: dict[str, Any]
    requests: dict[str, Any]
    state: str | None
    round: int
    #: The state went out on a retry at least once.
    sent: bool = False
    #: A retry carrying the state was answered without an error (so a single-use server
    #: has consumed it).
    consumed: bool = False

    def carried(self, response: Mapping[str, Any]) -> None:
        """Note that a request carrying this flow's state got ``response``."""
        if self.state is not None:
            self.sent = True
            self.consumed = self.consumed or "error" not in response


class ServerModel(RuleBasedStateMachine):
    """The state machine. Bind it to a server with :meth:`against`, then run it with
    ``run_state_machine_as_test`` or through its ``TestCase`` attribute."""

    server: ClassVar[Server]
    config: ClassVar[ModelConfig]

    @classmethod
    def against(
        cls,
        server: Server,
        config: ModelConfig | None = None,
        /,
        **options: Any,
    ) -> type[ServerModel]:
        """A subclass bound to ``server``; ``options`` are :class:`ModelConfig` fields (or
        replace fields of ``config``)."""
        if config is None:
            config = ModelConfig(**options)
        elif options:
            config = attrs.evolve(config, **options)
        return type(
            f"{cls.__name__}Bound",
            (cls,),
            {"server": staticmethod(server), "config": config},
        )

    def __init__(self) -> None:
        super().__init__()
        if not hasattr(type(self), "config"):
            raise TypeError("bind the model to a server first: ServerModel.against(server, ...)")
        self._flows: list[_Flow] = []
        self._used_ids: set[Any] = set()
        self._next_id = 0
        self._strategies: dict[tuple[str, str], st.SearchStrategy[Any]] = {}

    # --- plumbing -------------------------------------------------------------------------

    def _memo(
        self, kind: str, value: Any, make: Callable[[], st.SearchStrategy[Any]]
    ) -> st.SearchStrategy[Any]:
        """Strategies built from server data are cached: building them is the costly part."""
        key = (kind, json.dumps(value, sort_keys=True, default=repr))
        strategy = self._strategies.get(key)
        if strategy is None:
            strategy = self._strategies[key] = make()
        return strategy

    def _caps(self, data: st.DataObject) -> dict[str, Any]:
        strategy = self.config.capabilities
        if strategy is None:
            strategy = _DEFAULT_CAPS
        return dict(data.draw(strategy, label="capabilities"))

    def _new_id(self, data: st.DataObject) -> str | int:
        rid = data.draw(mst.request_ids(), label="id")
        while rid in self._used_ids:
            self._next_id += 1
            rid = f"model-{self._next_id}"
        self._used_ids.add(rid)
        return rid

    def _request(
        self,
        data: st.DataObject,
        method: str,
        params: Mapping[str, Any],
        caps: Mapping[str, Any],
        *,
        extra_meta: Mapping[str, Any] | None = None,
        responses: Any = None,
        state: str | None = None,
    ) -> dict[str, Any]:
        cfg = self.config
        meta: dict[str, Any] = {
            PROTOCOL_VERSION_KEY: cfg.protocol_version,
            CLIENT_CAPABILITIES: dict(caps),
        }
        if cfg.client_info is not None:
            meta[CLIENT_INFO] = dict(cfg.client_info)
        if extra_meta:
            meta.update(extra_meta)
        body = dict(params)
        if responses is not None:
            body["inputResponses"] = responses
        if state is not None:
            body["requestState"] = state
        body["_meta"] = meta
        return {"jsonrpc": "2.0", "id": self._new_id(data), "method": method, "params": body}

    def _send(self, request: dict[str, Any], caps: Mapping[str, Any]) -> Mapping[str, Any]:
        # The server gets its own copy: nothing it does to it can change the model's view.
        response = type(self).server(json.loads(json.dumps(request)))
        checked = check_response(request, response, caps, self.config.validate)
        event(f"{request['method']} -> {':'.join(map(str, outcome(checked)))}")
        return checked

    def _track(
        self, op: Operation, params: dict[str, Any], caps: dict[str, Any], response: Any, rnd: int
    ) -> None:
        """Remember an ``input_required`` answer as a flow the rules can continue."""
        if outcome(response) != _INPUT_REQUIRED or rnd >= self.config.max_rounds:
            return
        result = response["result"]
        requests = result.get("inputRequests") or {}
        flow = _Flow(op, params, caps, dict(requests), result.get("requestState"), rnd + 1)
        self._flows.insert(0, flow)  # newest first: the simplest draw continues a flow
        del self._flows[_MAX_FLOWS:]

    def _retry(
        self,
        data: st.DataObject,
        flow: _Flow,
        responses: Any,
        state: str | None,
        caps: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        caps = flow.caps if caps is None else caps
        return self._request(
            data, flow.op.method, flow.params, caps, responses=responses, state=state
        )

    @staticmethod
    def _pick(data: st.DataObject, flows: list[_Flow]) -> _Flow:
        return data.draw(st.sampled_from(flows), label="flow")

    def _answers(
        self,
        data: st.DataObject,
        flow: _Flow,
        *,
        extra_keys: bool = False,
        accept_only: bool = False,
    ) -> dict[str, Any]:
        strategy = self._memo(
            f"answers extra={extra_keys} accept={accept_only}",
            flow.requests,
            lambda: mst.input_responses_for(
                flow.requests, extra_keys=extra_keys, accept_only=accept_only
            ),
        )
        return dict(data.draw(strategy, label="inputResponses"))

    @staticmethod
    def _error(response: Mapping[str, Any]) -> bool:
        """An error other than -32021, which is always acceptable once checked."""
        return outcome(response)[0] == "error" and outcome(response) != ("error", -32021)

    # --- rules ----------------------------------------------------------------------------

    @initialize(data=st.data())
    def call_each(self, data: st.DataObject) -> None:
        """Start every example by calling each operation once, so that every one is covered."""
        for op in self.config.operations:
            self._call(data, op)

    @rule(data=st.data())
    def call(self, data: st.DataObject) -> None:
        """Call an operation afresh."""
        self._call(data, data.draw(st.sampled_from(self.config.operations), label="operation"))

    def _call(self, data: st.DataObject, op: Operation) -> None:
        """Call ``op``; maybe again with unknown ``_meta`` keys to compare."""
        cfg = self.config
        caps = self._caps(data)
        params = op.draw_params(data)
        request = self._request(data, op.method, params, caps)
        response = self._send(request, caps)
        kind = outcome(response)
        if op.mrtr is False and kind == _INPUT_REQUIRED:
            raise SpecViolationError(
                "mrtr-operation", f"{op.target} asked for input", request, response
            )
        if (
            op.mrtr
            and not missing_capabilities(mst.FULL_CAPABILITIES, caps)
            and kind != _INPUT_REQUIRED
        ):
            raise SpecViolationError(
                "mrtr-operation",
                f"{op.target} did not ask for input with every capability declared",
                request,
                response,
            )
        if cfg.ignore_unknown_keys and data.draw(st.booleans(), label="unknown _meta keys"):
            extra = data.draw(_EXTRA_META, label="unknown _meta")
            again = self._request(data, op.method, params, caps, extra_meta=extra)
            other = self._send(again, caps)
            if outcome(other) != kind:
                raise SpecViolationError(
                    "unknown-keys",
                    f"unknown _meta keys changed the outcome from {kind} to {outcome(other)}",
                    again,
                    other,
                )
        self._track(op, params, caps, response, 0)

    @precondition(lambda self: bool(self._flows))
    @rule(data=st.data())
    def answer(self, data: st.DataObject) -> None:
        """Retry a flow with valid answers to every key (maybe plus unknown keys) and the
        echoed state, sometimes declaring different capabilities."""
        cfg = self.config
        flow = self._pick(data, self._flows)
        caps = flow.caps
        if data.draw(st.integers(0, 4), label="new capabilities") == 0:
            caps = self._caps(data)
        extras = cfg.ignore_unknown_keys and data.draw(st.booleans(), label="extra keys")
        responses = self._answers(data, flow, extra_keys=extras)
        request = self._retry(data, flow, responses, flow.state, caps)
        consumed, maybe = flow.consumed, flow.sent
        response = self._send(request, caps)
        flow.carried(response)
        if cfg.single_use_state and consumed and "error" not in response:
            raise SpecViolationError(
                "replayed-state", "a used requestState was accepted again", request, response
            )
        if cfg.single_use_state and maybe:
            return  # the state may be spent: any answer is right
        if self._error(response) and _all_accepted(responses, flow.requests):
            if set(responses) - set(flow.requests) and not cfg.single_use_state:
                # Was it the unknown keys? The same answers without them tell.
                plain = {k: responses[k] for k in flow.requests}
                again = self._retry(data, flow, plain, flow.state, caps)
                second = self._send(again, caps)
                flow.carried(second)
                if not self._error(second):
                    raise SpecViolationError(
                        "unknown-keys",
                        "unknown inputResponses keys were refused",
                        request,
                        response,
                    )
            if cfg.accept_valid_answers:
                raise SpecViolationError(
                    "answers-accepted", "valid answers were refused", request, response
                )
            return
        self._track(flow.op, flow.params, caps, response, flow.round)

    @precondition(
        lambda self: (
            self.config.reject_tampered_state and any(f.state is not None for f in self._flows)
        )
    )
    @rule(data=st.data())
    def tamper(self, data: st.DataObject) -> None:
        """Retry with valid answers but a tampered state: must be an error."""
        flow = self._pick(data, [f for f in self._flows if f.state is not None])
        original = flow.state
        strategy = mst.tampered_states(str(original))
        bad = data.draw(strategy, label="tampered state")
        request = self._retry(data, flow, self._answers(data, flow), bad)
        response = self._send(request, flow.caps)
        if "error" not in response:
            raise SpecViolationError(
                "tampered-state", "a tampered requestState was accepted", request, response
            )

    @precondition(lambda self: any(f.requests for f in self._flows))
    @rule(data=st.data())
    def withhold(self, data: st.DataObject) -> None:
        """Retry answering only some keys (maybe none, maybe with a wrong key): the server
        should ask again rather than fail."""
        cfg = self.config
        flow = self._pick(data, [f for f in self._flows if f.requests])
        keys = sorted(flow.requests)
        kept = data.draw(
            st.lists(st.sampled_from(keys), unique=True, max_size=len(keys) - 1), label="kept"
        )
        answers = self._answers(data, flow)
        responses: dict[str, Any] | None = {k: answers[k] for k in kept}
        shape = data.draw(st.sampled_from(["subset", "wrong key", "no map"]), label="shape")
        if shape == "wrong key":
            decoy = "wrong_key"
            while decoy in flow.requests:
                decoy += "_"
            responses = {**(responses or {}), decoy: _DECOY}
        elif shape == "no map" and not kept:
            responses = None
        request = self._retry(data, flow, responses, flow.state)
        maybe = flow.sent
        response = self._send(request, flow.caps)
        flow.carried(response)
        if cfg.single_use_state and maybe:
            return  # the state may be spent: any answer is right
        if cfg.reask_missing and self._error(response):
            raise SpecViolationError(
                "missing-answers",
                "missing answers were refused instead of asked again",
                request,
                response,
            )
        self._track(flow.op, flow.params, flow.caps, response, flow.round)

    @precondition(
        lambda self: self.config.reject_invalid_answers and any(f.requests for f in self._flows)
    )
    @rule(data=st.data())
    def answer_invalid(self, data: st.DataObject) -> None:
        """Retry with one answer that is not a valid result of its request: must not
        complete."""
        flow = self._pick(data, [f for f in self._flows if f.requests])
        key = data.draw(st.sampled_from(sorted(flow.requests)), label="key")
        # The other answers accept: a decline elsewhere may rightly end the request.
        responses = self._answers(data, flow, accept_only=True)
        strategy = self._memo(
            "invalid",
            flow.requests[key],
            lambda: mst.invalid_input_response_for(flow.requests[key]),
        )
        responses[key] = data.draw(strategy, label="invalid answer")
        request = self._retry(data, flow, responses, flow.state)
        response = self._send(request, flow.caps)
        flow.carried(response)
        if outcome(response) == ("result", ResultType.COMPLETE.value):
            raise SpecViolationError(
                "invalid-answers",
                f"the request completed with an invalid answer under {key!r}",
                request,
                response,
            )

    @precondition(
        lambda self: (
            self.config.reject_foreign_state and any(f.state is not None for f in self._flows)
        )
    )
    @rule(data=st.data())
    def replay_elsewhere(self, data: st.DataObject) -> None:
        """Present a flow's state on another operation or other arguments: must be an error."""
        flow = self._pick(data, [f for f in self._flows if f.state is not None])
        op = data.draw(st.sampled_from(self.config.operations), label="operation")
        params = op.draw_params(data)
        if op.method == flow.op.method and params == flow.params:
            return
        answers = self._answers(data, flow)
        request = self._request(
            data, op.method, params, flow.caps, responses=answers, state=flow.state
        )
        response = self._send(request, flow.caps)
        flow.carried(response)
        if "error" not in response:
            raise SpecViolationError(
                "foreign-state",
                "a requestState was accepted on another operation or arguments",
                request,
                response,
            )

    @precondition(lambda self: bool(self.config.other_methods))
    @rule(data=st.data())
    def other_method(self, data: st.DataObject) -> None:
        """Call a method that may never ask for input (the checks do the rest)."""
        method = data.draw(st.sampled_from(self.config.other_methods), label="method")
        caps = self._caps(data)
        self._send(self._request(data, method, {}, caps), caps)


def _all_accepted(responses: Mapping[str, Any], requests: Mapping[str, Any]) -> bool:
    """True unless an elicitation was declined or cancelled (which a server may refuse)."""
    return not any(
        requests[k].get("method") == "elicitation/create" and responses[k].get("action") != "accept"
        for k in requests
    )


def check_server(
    server: Server,
    config: ModelConfig | None = None,
    /,
    *,
    settings: settings | None = None,
    **options: Any,
) -> None:
    """Run :class:`ServerModel` against ``server``; raises :class:`SpecViolationError` (after
    hypothesis has shrunk it to a minimal exchange) when a rule is broken."""
    run_state_machine_as_test(ServerModel.against(server, config, **options), settings=settings)
