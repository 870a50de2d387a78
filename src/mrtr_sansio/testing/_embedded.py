"""Strategies for embedded input requests, the answers that fit them, and ``input_required``
results, valid and invalid (see :mod:`.strategies`)."""

from __future__ import annotations

import string
from collections.abc import Mapping
from functools import cache
from typing import Any

from hypothesis import strategies as st

from mrtr_sansio.protocol import ResultType, missing_capabilities, required_capabilities

from ._values import (
    Json,
    Strategy,
    not_a_string,
    not_an_object,
    request_states,
    short_names,
    short_texts,
)

__all__ = [
    "content_for_schema",
    "elicit_form_requests",
    "elicit_url_requests",
    "form_schemas",
    "input_request_keys",
    "input_requests",
    "input_requests_maps",
    "input_required_results",
    "input_response_for",
    "input_responses_for",
    "invalid_input_requests",
    "invalid_input_required_results",
    "invalid_input_response_for",
    "invalid_input_responses",
    "roots_requests",
    "sampling_requests",
]

ELICIT = "elicitation/create"
SAMPLE = "sampling/createMessage"
ROOTS = "roots/list"

_ASKS = ResultType.INPUT_REQUIRED.value  # the plain string, as a peer sends it


# --- embedded requests --------------------------------------------------------------------


@cache
def _string_schema() -> Strategy[dict[str, Any]]:
    plain = st.fixed_dictionaries(
        {"type": st.just("string")},
        optional={"title": short_texts(12), "description": short_texts(12)},
    )
    bounded = st.integers(0, 8).flatmap(
        lambda lo: st.fixed_dictionaries(
            {"type": st.just("string"), "minLength": st.just(lo)},
            optional={"maxLength": st.integers(max(lo, 1), 16)},
        )
    )
    formatted = st.builds(
        lambda f: {"type": "string", "format": f},
        st.sampled_from(["email", "uri", "date", "date-time"]),
    )
    return st.one_of(plain, bounded, formatted)


@cache
def _number_schema() -> Strategy[dict[str, Any]]:
    def build(kind: str, bounds: tuple[int, int] | None) -> dict[str, Any]:
        out: dict[str, Any] = {"type": kind}
        if bounds is not None:
            out["minimum"], out["maximum"] = min(bounds), max(bounds)
        return out

    return st.builds(
        build,
        st.sampled_from(["integer", "number"]),
        st.none() | st.tuples(st.integers(-100, 100), st.integers(-100, 100)),
    )


@cache
def _enum_schema() -> Strategy[dict[str, Any]]:
    values = st.lists(short_names(8), min_size=1, max_size=4, unique=True)
    return st.one_of(
        st.builds(lambda v: {"type": "string", "enum": v}, values),
        st.builds(
            lambda v: {"type": "string", "oneOf": [{"const": x, "title": x.upper()} for x in v]},
            values,
        ),
        st.builds(lambda v: {"type": "array", "items": {"type": "string", "enum": v}}, values),
        st.builds(
            lambda v: {
                "type": "array",
                "items": {"anyOf": [{"const": x, "title": x.title()} for x in v]},
            },
            values,
        ),
    )


@cache
def form_schemas() -> Strategy[dict[str, Any]]:
    """``requestedSchema`` objects: flat objects of the primitive property kinds the spec
    allows (strings with bounds or formats, numbers, booleans, single and multi-select enums)."""
    prop = st.one_of(
        _string_schema(), _number_schema(), st.just({"type": "boolean"}), _enum_schema()
    )
    return st.dictionaries(short_names(10), prop, max_size=4).flatmap(
        lambda props: st.builds(
            lambda required: (
                {"type": "object", "properties": props, "required": required}
                if required
                else {"type": "object", "properties": props}
            ),
            st.lists(st.sampled_from(sorted(props)), unique=True) if props else st.just([]),
        )
    )


@cache
def elicit_form_requests() -> Strategy[dict[str, Any]]:
    """Form-mode ``elicitation/create`` requests (``mode`` absent or ``"form"``)."""
    return st.builds(
        lambda message, schema, explicit: {
            "method": ELICIT,
            "params": (
                {"mode": "form", "message": message, "requestedSchema": schema}
                if explicit
                else {"message": message, "requestedSchema": schema}
            ),
        },
        short_texts(),
        form_schemas(),
        st.booleans(),
    )


@cache
def elicit_url_requests() -> Strategy[dict[str, Any]]:
    """URL-mode ``elicitation/create`` requests (no ``elicitationId`` on the modern wire)."""
    return st.builds(
        lambda message, path: {
            "method": ELICIT,
            "params": {"mode": "url", "message": message, "url": f"https://example.com/{path}"},
        },
        short_texts(),
        short_names(),
    )


def sampling_requests(
    *, tools: bool | None = None, context: bool | None = None
) -> Strategy[dict[str, Any]]:
    """``sampling/createMessage`` requests; ``tools``/``context`` force tool use or deprecated
    ``includeContext`` values on (True) or off (False), or leave them to chance (None)."""
    message = st.builds(
        lambda text: {"role": "user", "content": {"type": "text", "text": text}}, short_texts()
    )
    tool = st.builds(
        lambda name: {"name": name, "inputSchema": {"type": "object"}}, short_names(12)
    )

    def build(
        messages: list[Any],
        max_tokens: int,
        system: str | None,
        with_tools: bool,
        tool_list: list[Any],
        choice: str | None,
        with_context: bool,
        ctx: str,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"messages": messages, "maxTokens": max_tokens}
        if system is not None:
            params["systemPrompt"] = system
        if with_tools:
            params["tools"] = tool_list
            if choice is not None:
                params["toolChoice"] = {"mode": choice}
        if with_context:
            params["includeContext"] = ctx
        elif ctx == "none":
            params["includeContext"] = "none"
        return {"method": SAMPLE, "params": params}

    return st.builds(
        build,
        st.lists(message, min_size=1, max_size=3),
        st.integers(1, 4096),
        st.none() | short_texts(),
        st.booleans() if tools is None else st.just(tools),
        st.lists(tool, min_size=1, max_size=2),
        st.none() | st.sampled_from(["auto", "none", "required"]),
        st.booleans() if context is None else st.just(context),
        st.sampled_from(["thisServer", "allServers", "none"]),
    )


@cache
def roots_requests() -> Strategy[dict[str, Any]]:
    """``roots/list`` requests, with and without (empty) params."""
    return st.sampled_from([{"method": ROOTS}, {"method": ROOTS, "params": {}}])


def input_requests(allowed_by: Mapping[str, Any] | None = None) -> Strategy[dict[str, Any]]:
    """One embedded request of any of the three kinds; with ``allowed_by`` only kinds those
    client capabilities permit (``nothing()`` when they permit none)."""
    kinds: list[Strategy[dict[str, Any]]] = [
        elicit_form_requests(),
        elicit_url_requests(),
        sampling_requests(),
        roots_requests(),
    ]
    if allowed_by is None:
        return st.one_of(kinds)
    caps = allowed_by

    def allowed(request: dict[str, Any]) -> bool:
        needs = required_capabilities(request["method"], request.get("params"))
        return not missing_capabilities(needs, caps)

    fitting: list[Strategy[dict[str, Any]]] = []
    probes = (
        ({"method": ELICIT, "params": {}}, elicit_form_requests()),
        ({"method": ELICIT, "params": {"mode": "url"}}, elicit_url_requests()),
        ({"method": ROOTS}, roots_requests()),
    )
    for probe, strategy in probes:
        if allowed(probe):
            fitting.append(strategy)
    if allowed({"method": SAMPLE, "params": {}}):
        tools = allowed({"method": SAMPLE, "params": {"tools": []}})
        context = allowed({"method": SAMPLE, "params": {"includeContext": "allServers"}})
        fitting.append(
            sampling_requests(tools=None if tools else False, context=None if context else False)
        )
    return st.one_of(fitting) if fitting else st.nothing()


@cache
def input_request_keys() -> Strategy[str]:
    """``inputRequests`` keys: server-chosen, non-empty strings."""
    return st.one_of(short_names(), st.text(min_size=1, max_size=8))


def input_requests_maps(
    *, min_size: int = 1, max_size: int = 4, allowed_by: Mapping[str, Any] | None = None
) -> Strategy[dict[str, dict[str, Any]]]:
    """``inputRequests`` maps (``allowed_by`` as in :func:`input_requests`)."""
    return st.dictionaries(
        input_request_keys(), input_requests(allowed_by), min_size=min_size, max_size=max_size
    )


def invalid_input_requests() -> Strategy[Json]:
    """Embedded requests that are none of the three kinds: not an object, another method, a
    missing or mistyped ``params``, or a form elicitation without ``requestedSchema``."""
    return st.one_of(
        not_an_object(),
        st.builds(
            lambda m: {"method": m, "params": {}},
            st.sampled_from(["tools/call", "ping", "elicitation/complete", ""]),
        ),
        st.just({"params": {}}),
        st.builds(lambda p: {"method": ELICIT, "params": p}, not_an_object()),
        st.builds(lambda p: {"method": SAMPLE, "params": p}, not_an_object()),
        st.builds(lambda msg: {"method": ELICIT, "params": {"message": msg}}, short_texts()),
        st.builds(
            lambda msg: {"method": ELICIT, "params": {"mode": "url", "message": msg}}, short_texts()
        ),
        st.just({"method": SAMPLE, "params": {"maxTokens": 10}}),
        st.builds(lambda p: {"method": ROOTS, "params": p}, not_an_object(null=False)),
    )


# --- answers ------------------------------------------------------------------------------


def _string_for(schema: Mapping[str, Any]) -> Strategy[str]:
    fmt = schema.get("format")
    if fmt == "email":
        return st.builds(lambda a, b: f"{a}@{b}.example", short_names(8), short_names(8))
    if fmt == "uri":
        return st.builds(lambda p: f"https://example.com/{p}", short_names(8))
    if fmt == "date":
        return st.dates().map(lambda d: d.isoformat())
    if fmt == "date-time":
        return st.datetimes().map(lambda d: d.isoformat(timespec="seconds") + "Z")
    lo = schema.get("minLength")
    hi = schema.get("maxLength")
    lo = lo if type(lo) is int and lo >= 0 else 0
    hi = hi if type(hi) is int and hi >= lo else lo + 16
    return st.text(string.ascii_letters + string.digits + " ", min_size=lo, max_size=hi)


def _options(schema: Mapping[str, Any]) -> list[str]:
    if isinstance(schema.get("enum"), list):
        return [v for v in schema["enum"] if isinstance(v, str)]
    for key in ("oneOf", "anyOf"):
        if isinstance(schema.get(key), list):
            return [o["const"] for o in schema[key] if isinstance(o, Mapping) and "const" in o]
    return []


def _value_for(schema: Any) -> Strategy[Json]:
    if not isinstance(schema, Mapping):
        return short_texts(8)
    kind = schema.get("type")
    if kind == "boolean":
        return st.booleans()
    if kind in ("integer", "number"):
        lo, hi = schema.get("minimum"), schema.get("maximum")
        lo = int(lo) if isinstance(lo, (int, float)) and not isinstance(lo, bool) else -1000
        hi = int(hi) if isinstance(hi, (int, float)) and not isinstance(hi, bool) else 1000
        # Integers fit both kinds, and the content schema has no float.
        return st.integers(min(lo, hi), max(lo, hi))
    if kind == "array":
        options = _options(schema.get("items") or {})
        if not options:
            return st.lists(short_texts(8), max_size=2)
        return st.lists(st.sampled_from(options), unique=True, max_size=len(options))
    options = _options(schema)
    if options:
        return st.sampled_from(options)
    return _string_for(schema)


def content_for_schema(schema: Mapping[str, Any]) -> Strategy[dict[str, Json]]:
    """Form content that satisfies a ``requestedSchema`` (all required fields, some optional
    ones). Unknown property kinds get strings."""
    props = schema.get("properties")
    props = props if isinstance(props, Mapping) else {}
    required = schema.get("required")
    required = {k for k in required if isinstance(k, str)} if isinstance(required, list) else set()
    return st.fixed_dictionaries(
        {k: _value_for(v) for k, v in props.items() if k in required},
        optional={k: _value_for(v) for k, v in props.items() if k not in required},
    )


def input_response_for(
    request: Mapping[str, Any], *, accept_only: bool = False
) -> Strategy[dict[str, Any]]:
    """A valid answer to one embedded request (wire form).

    Elicitation: ``accept`` with content fitting the form (none for url mode), ``decline`` or
    ``cancel``; sampling: an assistant text message; roots: a list of ``file://`` roots.
    ``accept_only`` leaves out declines and cancels.
    """
    method = request.get("method")
    params = request.get("params")
    params = params if isinstance(params, Mapping) else {}
    if method == ELICIT:
        if params.get("mode") == "url":
            accept: Strategy[dict[str, Any]] = st.just({"action": "accept"})
        else:
            schema = params.get("requestedSchema")
            accept = content_for_schema(schema if isinstance(schema, Mapping) else {}).map(
                lambda content: {"action": "accept", "content": content}
            )
        if accept_only:
            return accept
        return st.one_of(accept, st.sampled_from([{"action": "decline"}, {"action": "cancel"}]))
    if method == SAMPLE:
        return st.builds(
            lambda text, model, stop: {
                "role": "assistant",
                "content": {"type": "text", "text": text},
                "model": model,
                "stopReason": stop,
            },
            short_texts(),
            short_names(),
            st.sampled_from(["endTurn", "maxTokens", "stopSequence"]),
        )
    if method == ROOTS:
        root = st.fixed_dictionaries(
            {"uri": short_names().map(lambda p: f"file:///{p}")}, optional={"name": short_texts(12)}
        )
        return st.builds(lambda roots: {"roots": roots}, st.lists(root, max_size=3))
    raise ValueError(f"{method!r} is not an embedded request method")


def input_responses_for(
    requests: Mapping[str, Mapping[str, Any]],
    *,
    extra_keys: bool = False,
    accept_only: bool = False,
) -> Strategy[dict[str, dict[str, Any]]]:
    """``inputResponses`` answering every key of ``requests``; with ``extra_keys`` also some
    unrequested keys (which a server must ignore)."""
    answers = st.fixed_dictionaries(
        {k: input_response_for(r, accept_only=accept_only) for k, r in requests.items()}
    )
    if not extra_keys:
        return answers
    extras = st.dictionaries(
        short_names().filter(lambda k: k not in requests),
        st.sampled_from([{"action": "accept", "content": {}}, {"roots": []}]),
        max_size=2,
    )
    return st.builds(lambda a, e: {**e, **a}, answers, extras)


def invalid_input_response_for(request: Mapping[str, Any]) -> Strategy[Json]:
    """An answer that is not a valid result of ``request``'s kind (the schema's answer for a
    different kind, a missing required field, a mistyped field, or not an object)."""
    method = request.get("method")
    not_object = not_an_object()
    if method == ELICIT:
        return st.one_of(
            not_object,
            st.just({}),
            st.sampled_from([{"action": "maybe"}, {"action": 1}, {"content": {"x": "y"}}]),
            st.builds(lambda c: {"action": "accept", "content": c}, not_an_object()),
        )
    if method == SAMPLE:
        return st.one_of(
            not_object,
            st.just({}),
            st.just({"role": "assistant", "model": "m"}),
            st.just({"content": {"type": "text", "text": "x"}, "model": "m"}),
            st.builds(
                lambda c: {"role": "assistant", "model": "m", "content": c},
                st.one_of(st.none(), st.integers(), short_texts(4)),
            ),
        )
    if method == ROOTS:
        return st.one_of(
            not_object,
            st.just({}),
            st.builds(lambda r: {"roots": r}, not_an_object(array=False)),
            st.just({"roots": [{"name": "no uri"}]}),
        )
    raise ValueError(f"{method!r} is not an embedded request method")


def invalid_input_responses(max_entries: int = 64) -> Strategy[Json]:
    """Whole ``inputResponses`` values a server must refuse: not an object, an entry that is
    not an object, or more than ``max_entries`` entries."""
    too_many = st.just({f"k{i}": {"action": "decline"} for i in range(max_entries + 1)})
    bad_entry = st.builds(lambda k, v: {k: v}, short_names(), not_an_object())
    return st.one_of(not_an_object(), bad_entry, too_many)


def input_required_results(
    allowed_by: Mapping[str, Any] | None = None,
) -> Strategy[dict[str, Any]]:
    """Valid ``input_required`` result objects (requests, state, or both)."""
    requests = input_requests_maps(allowed_by=allowed_by)
    return st.one_of(
        st.builds(
            lambda r, s: {"resultType": _ASKS, "inputRequests": r, "requestState": s},
            requests,
            request_states(),
        ),
        st.builds(lambda r: {"resultType": _ASKS, "inputRequests": r}, requests),
        st.builds(lambda s: {"resultType": _ASKS, "requestState": s}, request_states()),
    )


def invalid_input_required_results(max_requests: int = 32) -> Strategy[Json]:
    """``input_required`` results a client must refuse: neither field, a mistyped field, an
    embedded request that is none of the three kinds, or more than ``max_requests`` of them."""
    too_many = {f"k{i}": {"method": ROOTS} for i in range(max_requests + 1)}
    return st.one_of(
        st.just({"resultType": _ASKS, "inputRequests": too_many}),
        st.just({"resultType": _ASKS}),
        st.builds(
            lambda r: {"resultType": _ASKS, "inputRequests": r},
            not_an_object(null=False),
        ),
        st.builds(
            lambda s: {"resultType": _ASKS, "requestState": s},
            not_a_string(null=False),
        ),
        st.builds(
            lambda k, r: {"resultType": _ASKS, "inputRequests": {k: r}},
            input_request_keys(),
            invalid_input_requests(),
        ),
    )
