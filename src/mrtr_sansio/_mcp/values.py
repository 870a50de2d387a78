"""MRTR values: embedded input requests, the ``input_required`` result, and answer readers.

A handler that needs input returns an :class:`InputRequiredResult`; on the next round it reads
the client's answers through :class:`InputResponses`. The same values serve both wires: the
modern wire sends the result as is, the legacy shim turns each request into a real
server-to-client request.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs

from .capabilities import (
    ELICIT,
    ROOTS,
    SAMPLE,
    grants,
    merge_capabilities,
    needs_of,
    required_capabilities,
)
from .envelope import SERVER_INFO
from .mrtr_fields import INPUT_REQUIRED

__all__ = [
    "EMBEDDABLE_METHODS",
    "InputRequest",
    "InputRequiredResult",
    "InputResponses",
    "elicit_form",
    "elicit_url",
    "list_roots",
    "sample",
]

#: The requests that may be embedded in ``inputRequests``.
EMBEDDABLE_METHODS = frozenset({ELICIT, SAMPLE, ROOTS})

_ROLES = ("user", "assistant")
_ACTIONS = ("accept", "decline", "cancel")


def _key(key: object) -> str | None:
    """A plain ``str`` for a str or a str subclass (e.g. a ``StrEnum`` member), else None."""
    if type(key) is str:
        return key
    if isinstance(key, str):
        return str.__str__(key)
    return None


@attrs.frozen(slots=False)
class InputRequest:
    """One embedded request: ``elicitation/create``, ``sampling/createMessage`` or ``roots/list``.

    Not a JSON-RPC request: it has no id. ``params`` may be None only for ``roots/list``.
    """

    method: str
    params: Mapping[str, Any] | None = None

    def __attrs_post_init__(self) -> None:
        method, params = self.method, self.params
        if not isinstance(method, str):
            raise TypeError(f"method: must be a string, got {type(method).__name__}")
        if method not in EMBEDDABLE_METHODS:
            raise ValueError(
                f"method: {method!r} cannot be embedded; use one of "
                f"{', '.join(sorted(EMBEDDABLE_METHODS))}"
            )
        if params is None:
            if method != ROOTS:
                raise TypeError(f"params: {method} needs params")
        elif type(params) is dict or isinstance(params, Mapping):
            if method == ELICIT and params.get("mode", "form") not in ("form", "url"):
                # Anything else would be sent with the wrong capability check (and is invalid).
                raise ValueError(
                    f"params.mode: must be 'form', 'url' or absent, got {params['mode']!r}"
                )
            # A private plain-dict copy: serializable by any codec, immune to caller mutation.
            object.__setattr__(self, "params", dict(params))
        else:
            raise TypeError(f"params: must be a mapping, got {type(params).__name__}")

    @classmethod
    def coerce(cls, value: InputRequest | Mapping[str, Any]) -> InputRequest:
        """Accept an :class:`InputRequest` or a ``{"method": ..., "params": ...}`` mapping."""
        if isinstance(value, InputRequest):
            return value
        if isinstance(value, Mapping):
            method = value.get("method")
            if not isinstance(method, str):
                raise TypeError("method: must be a string")
            return cls(method, value.get("params"))
        raise TypeError(
            f"input request must be an InputRequest or a mapping, got {type(value).__name__}"
        )

    def required_capabilities(self) -> dict[str, Any]:
        """The client capabilities this request needs."""
        return required_capabilities(self.method, self.params)

    def to_wire(self) -> dict[str, Any]:
        """``{"method": ..., "params": ...}``, params omitted when None (``params`` is shared)."""
        params = self.params
        if params is None:
            return {"method": self.method}
        return {"method": self.method, "params": params}


def _trusted_request(method: str, params: dict[str, Any]) -> InputRequest:
    """An :class:`InputRequest` for the builders below, whose ``params`` dict is fresh and valid
    by construction: no checks and no defensive copy (a function, not a classmethod: see
    docs/performance.md)."""
    self = object.__new__(InputRequest)
    fields = self.__dict__  # a frozen attrs class without slots keeps its fields here
    fields["method"] = method
    fields["params"] = params
    return self


def _freeze_requests(value: Any) -> Mapping[str, InputRequest]:
    """A private copy of a handler's ``input_requests``, each entry checked (or coerced)."""
    if type(value) is not dict and not isinstance(value, Mapping):
        raise TypeError(
            f"input_requests: must be a mapping of key to request, got {type(value).__name__}"
        )
    out: dict[str, InputRequest] = {}
    for key, request in value.items():
        k = key if type(key) is str else _key(key)
        if k is None:
            raise TypeError(f"input_requests: keys must be strings, got {type(key).__name__}")
        if not k:
            raise ValueError("input_requests: keys must be non-empty strings")
        if type(request) is InputRequest:
            out[k] = request
            continue
        if not isinstance(request, (InputRequest, Mapping)):
            raise TypeError(
                f"input_requests[{k!r}]: must be an InputRequest or a mapping, "
                f"got {type(request).__name__}"
            )
        try:
            out[k] = InputRequest.coerce(request)
        except (TypeError, ValueError) as exc:
            # The message starts with the field ("method: ..."); say which entry it is in.
            raise type(exc)(f"input_requests[{k!r}].{exc}") from None
    return out


@attrs.frozen(slots=False, init=False)
class InputRequiredResult:
    """The answer of a handler that needs input before it can complete.

    At least one of ``input_requests`` and ``request_state`` must be given, and an empty
    ``input_requests`` needs a state: ``InputRequiredResult({})`` asks for nothing and carries
    nothing, so the client could only retry it unchanged (a probable bug; ValueError). A
    state-only result (``InputRequiredResult(request_state=...)``) is how a handler asks to be
    re-run. ``request_state`` is what the handler wants back on the next round: any JSON value
    when the server seals state (the default), a string on a server configured ``UNSEALED``.
    """

    input_requests: Mapping[str, InputRequest] | None = None
    request_state: Any = None

    def __init__(
        self,
        input_requests: Mapping[str, InputRequest | Mapping[str, Any]] | None = None,
        request_state: Any = None,
    ) -> None:
        # Written by hand, not generated with a converter: see docs/performance.md.
        if input_requests is None:
            if request_state is None:
                raise ValueError("input_requests or request_state: at least one must be given")
            requests = None
        else:
            requests = _freeze_requests(input_requests)
            if not requests and request_state is None:
                raise ValueError(
                    "input_requests is empty and there is no request_state: the client would "
                    "retry with nothing to answer; add a request or a request_state"
                )
        fields = self.__dict__
        fields["input_requests"] = requests
        fields["request_state"] = request_state

    @classmethod
    def from_wire(cls, result: Mapping[str, Any]) -> InputRequiredResult:
        """Read an ``input_required`` result object (raises ValueError/TypeError if invalid)."""
        requests = result.get("inputRequests")
        state = result.get("requestState")
        if state is not None and not isinstance(state, str):
            raise TypeError("requestState: must be a string")
        return cls(requests, state)

    def required_capabilities(self) -> dict[str, Any]:
        """Every client capability the embedded requests need, merged."""
        if not self.input_requests:
            return {}
        return merge_capabilities(r.required_capabilities() for r in self.input_requests.values())

    def allowed_by(self, capabilities: Mapping[str, Any]) -> bool:
        """True when ``capabilities`` (as a client declared them) permit every embedded request."""
        requests = self.input_requests
        if requests is not None:
            for request in requests.values():
                if not grants(capabilities, needs_of(request.method, request.params)):
                    return False
        return True

    def to_wire(
        self,
        request_state: str | None = None,
        meta: Mapping[str, Any] | None = None,
        server_info: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The result object; ``request_state`` overrides the field (the sealed form), ``meta``
        is its ``_meta``, with ``server_info`` added under ``serverInfo`` unless ``meta`` has
        one (a server's answer: the application's own wins)."""
        out: dict[str, Any] = {"resultType": INPUT_REQUIRED}
        requests = self.input_requests
        if requests is not None:
            wire = {}
            for key, request in requests.items():
                wire[key] = request.to_wire()
            out["inputRequests"] = wire
        state = self.request_state if request_state is None else request_state
        if state is not None:
            out["requestState"] = state
        if meta:
            keep = server_info is None or SERVER_INFO in meta
            out["_meta"] = dict(meta) if keep else {**meta, SERVER_INFO: server_info}
        elif server_info is not None:
            out["_meta"] = {SERVER_INFO: server_info}
        return out


# --- builders -------------------------------------------------------------------------------


def elicit_form(
    message: str, requested_schema: Mapping[str, Any], *, mode: str | None = None, **extra: Any
) -> InputRequest:
    """A form-mode ``elicitation/create`` (``mode`` is sent only when given: absent means form).

    ``requested_schema`` must be what the spec allows a form: ``{"type": "object",
    "properties": {...}}`` whose properties are each a primitive (``string``, ``number``,
    ``integer``, ``boolean``) or a string enum (single-select, or a multi-select ``array`` of
    string ``items``), optional ``required`` names; anything else (a nested object, an array of
    objects, a bare ``{"type": "string"}``) raises ValueError naming the offending property.
    ``mode`` may only be ``"form"``; url mode needs a url and an id: :func:`elicit_url`.
    """
    if not isinstance(message, str):
        raise TypeError("message: must be a string")
    if type(requested_schema) is not dict and not isinstance(requested_schema, Mapping):
        raise TypeError("requested_schema: must be a mapping (a JSON Schema object)")
    _check_form_schema(requested_schema)
    params: dict[str, Any] = {"message": message, "requestedSchema": requested_schema}
    if mode is not None:
        if mode != "form":
            raise ValueError(f"mode: elicit_form builds form mode, got {mode!r}; see elicit_url")
        params["mode"] = mode
    if extra:
        params.update(extra)
    return _trusted_request(ELICIT, params)


_PRIMITIVE_TYPES = frozenset({"string", "number", "integer", "boolean"})


def _check_form_schema(schema: Mapping[str, Any]) -> None:
    """Raise ValueError unless ``schema`` is a flat object of primitive properties (the
    spec's ``requestedSchema``: ``PrimitiveSchemaDefinition`` values, no nesting)."""
    if schema.get("type") != "object":
        raise ValueError(
            f"requested_schema: must be {{'type': 'object', 'properties': {{...}}}} (a form is a "
            f"flat object of fields), got type {schema.get('type')!r}"
        )
    properties = schema.get("properties")
    if type(properties) is not dict and not isinstance(properties, Mapping):
        raise ValueError("requested_schema.properties: must be a mapping of field name to schema")
    for name, prop in properties.items():
        if type(name) is not str:
            raise ValueError(f"{_field(name)}: field names must be strings")
        if type(prop) is not dict and not isinstance(prop, Mapping):
            raise ValueError(f"{_field(name)}: must be a schema object, got {type(prop).__name__}")
        kind = prop.get("type")
        if kind in _PRIMITIVE_TYPES:
            continue
        if kind != "array":
            raise ValueError(
                f"{_field(name)}: type {kind!r} is not allowed in a form; use one of string, "
                f"number, integer, boolean (or a string enum): forms have no nested objects"
            )
        items = prop.get("items")
        if not (
            isinstance(items, Mapping)
            and ((items.get("type") == "string" and "enum" in items) or "anyOf" in items)
        ):
            raise ValueError(
                f"{_field(name)}: an array is allowed only as a multi-select enum (items with a "
                f"string 'enum' or 'anyOf' of options), not a list of other values"
            )
    required = schema.get("required")
    if required is not None:
        if type(required) is not list and not isinstance(required, (list, tuple)):
            raise ValueError("requested_schema.required: must be a list of property names")
        for field in required:
            if type(field) is not str:
                raise ValueError("requested_schema.required: must be a list of property names")


def _field(name: object) -> str:
    """How an error names the property ``name`` of a form."""
    return f"requested_schema.properties[{name!r}]"


#: ``scheme://`` and a host, with nothing a URL cannot hold (RFC 3986: no space or control).
_ABSOLUTE_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#\s]+[^\s]*\Z", re.ASCII)


def elicit_url(
    message: str, url: str, *, elicitation_id: str | None = None, **extra: Any
) -> InputRequest:
    """A url-mode ``elicitation/create``: the client shows ``message`` and offers to open
    ``url``, an absolute URL (``scheme://host...``, e.g. ``"https://example.com/connect"``).

    The modern wire has no ``elicitationId``; pass one only to fix the id the legacy shim sends
    (it mints one otherwise).
    """
    if not isinstance(message, str):
        raise TypeError("message: must be a string")
    if not isinstance(url, str):
        raise TypeError("url: must be a string")
    if not _ABSOLUTE_URL.match(url):
        raise ValueError(
            f"url: must be an absolute URL such as 'https://example.com/connect', got {url!r:.80}"
        )
    params: dict[str, Any] = {"mode": "url", "message": message, "url": url, **extra}
    if elicitation_id is not None:
        params["elicitationId"] = elicitation_id
    return InputRequest(ELICIT, params)


def sample(
    messages: Sequence[Mapping[str, Any]] | str,
    max_tokens: int,
    *,
    system_prompt: str | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    tool_choice: Mapping[str, Any] | None = None,
    **extra: Any,
) -> InputRequest:
    """A ``sampling/createMessage`` asking the client's model for at most ``max_tokens``.

    ``messages`` is any sequence of ``SamplingMessage`` mappings (``{"role": "user",
    "content": {"type": "text", "text": ...}}``); a plain string is the shortcut for one user
    text message, so ``sample("Summarize this", 200)`` asks a single question.
    """
    if isinstance(messages, str):
        messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
    if type(max_tokens) is not int or max_tokens < 1:
        raise ValueError("max_tokens: must be a positive integer")
    params: dict[str, Any] = {"messages": list(messages), "maxTokens": max_tokens, **extra}
    if system_prompt is not None:
        params["systemPrompt"] = system_prompt
    if tools is not None:
        params["tools"] = list(tools)
    if tool_choice is not None:
        params["toolChoice"] = tool_choice
    return InputRequest(SAMPLE, params)


def list_roots() -> InputRequest:
    """A ``roots/list`` (with empty params, which both schemas accept)."""
    return InputRequest(ROOTS, {})


# --- readers --------------------------------------------------------------------------------


class InputResponses(Mapping[str, Any]):
    """The ``inputResponses`` a request carried, with typed readers.

    Lookups accept any str-like key. The typed readers return None when the answer is absent or
    not of the expected shape, so that a handler can simply ask again (the spec's SHOULD).
    Anything but a mapping (junk a peer sent where it was not validated) reads as empty.
    """

    __slots__ = ("_raw",)

    def __init__(self, raw: Mapping[str, Any] | None = None) -> None:
        if type(raw) is not dict and (raw is None or not isinstance(raw, Mapping)):
            raw = {}
        self._raw: Mapping[str, Any] = raw

    def __getitem__(self, key: str) -> Any:
        k = _key(key)
        if k is None:
            raise KeyError(key)
        return self._raw[k]

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __contains__(self, key: object) -> bool:
        k = _key(key)
        return k is not None and k in self._raw

    def __repr__(self) -> str:
        return f"InputResponses({dict(self._raw)!r})"

    def get_response(self, key: str) -> Mapping[str, Any] | None:
        """The raw answer object under ``key``, or None."""
        k = key if type(key) is str else _key(key)
        if k is None:
            return None
        value = self._raw.get(k)
        if type(value) is dict or (value is not None and isinstance(value, Mapping)):
            return value
        return None

    def elicitation_action(self, key: str) -> str | None:
        """``"accept"``, ``"decline"`` or ``"cancel"`` for an elicitation answer, else None
        (also when ``content`` is present but not an object: the answer is malformed)."""
        value = self.get_response(key)
        if value is None:
            return None
        action = value.get("action")
        if action not in _ACTIONS or (
            "content" in value and not isinstance(value["content"], Mapping)
        ):
            return None
        return str(action)

    def accepted_content(self, key: str) -> Mapping[str, Any] | None:
        """The form content of an accepted elicitation, else None.

        A url-mode accept carries no content; it yields an empty mapping.
        """
        k = key if type(key) is str else _key(key)
        value = self._raw.get(k) if k is not None else None
        if type(value) is not dict and (value is None or not isinstance(value, Mapping)):
            return None
        if value.get("action") != "accept":
            return None
        content = value.get("content")
        if type(content) is dict:
            return content
        if content is None:
            return None if "content" in value else {}
        return content if isinstance(content, Mapping) else None

    def sampled_text(self, key: str) -> str | None:
        """The text of a sampling answer (all text blocks joined), else None."""
        value = self.get_response(key)
        # A CreateMessageResult has a role and a model besides its content.
        if (
            value is None
            or value.get("role") not in _ROLES
            or not isinstance(value.get("model"), str)
        ):
            return None
        content = value.get("content")
        blocks = content if isinstance(content, list) else [content]
        texts = [
            b["text"]
            for b in blocks
            if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)
        ]
        return "".join(texts) if texts else None

    def root_uris(self, key: str) -> list[str] | None:
        """The URIs of a ``roots/list`` answer, else None."""
        value = self.get_response(key)
        roots = value.get("roots") if value is not None else None
        if not isinstance(roots, list):
            return None
        uris: list[str] = []
        for root in roots:
            uri = root.get("uri") if isinstance(root, Mapping) else None
            if not isinstance(uri, str):
                return None  # every Root has a uri: the answer is malformed
            uris.append(uri)
        return uris


#: The answers of a request that carried none (a first round): shared, as it is read-only.
NO_RESPONSES = InputResponses()
