"""A small decorator-based registry on the core: the layer an SDK author would write.

mrtr_sansio is the engine (wires, eras, rounds, sealing), not a framework. This module shows how
thin a framework on top can be: register tools, prompts and resources with decorators, get
``tools/list`` with JSON Schema derived from the type hints (stdlib only), and write each
handler once for both eras. A handler that needs input asks through its :class:`Context`
(``ctx.elicit(...)``, ``ctx.roots()``): on the first run the question goes out (as an
``input_required`` result, or as real requests through the legacy shim) and the handler is
run again with the answer, so it reads top to bottom like a blocking function::

    app = Registry("files", "1.0.0")

    @app.tool()
    async def delete(path: str, ctx: Context) -> str:
        \"\"\"Delete a file, once the user confirms.\"\"\"
        if not ctx.confirm("confirm", f"Delete {path}?"):
            return "Kept."
        return f"Deleted {path}."

    asyncio.run(serve_stdio(app.handle, app.config()))
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, Union

import attrs

from mrtr_sansio import (
    InputRequest,
    InputRequiredResult,
    JsonRpcError,
    RequestReceived,
    ServerConfig,
    elicit_form,
    list_roots,
)
from mrtr_sansio.adapters import HandlerResult, RequestContext

__all__ = ["Context", "Registry", "json_schema"]

Fn = Callable[..., Awaitable[Any]]
_PRIMITIVES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def json_schema(hint: Any) -> dict[str, Any]:
    """The JSON Schema of a type hint: primitives, ``Literal`` enums, ``list[X]``,
    ``dict[str, X]``, ``X | None`` (the type; optionality is the caller's ``required``)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint in _PRIMITIVES:
        return {"type": _PRIMITIVES[hint]}
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        return json_schema(rest[0]) if len(rest) == 1 else {"anyOf": [json_schema(a) for a in rest]}
    if origin is list:
        return {"type": "array", "items": json_schema(args[0])} if args else {"type": "array"}
    if origin is dict or hint is dict:
        return (
            {"type": "object", "additionalProperties": json_schema(args[1])}
            if args
            else {"type": "object"}
        )
    raise TypeError(f"no JSON Schema for {hint!r}: use str, int, float, bool, Literal, list, dict")


def _optional(hint: Any) -> bool:
    return typing.get_origin(hint) in (Union, types.UnionType) and type(None) in typing.get_args(
        hint
    )


class _NeedInput(Exception):  # noqa: N818 - control flow, not an error
    """Raised by a :class:`Context` question that has no answer yet: ends this run."""

    def __init__(self, key: str, request: InputRequest) -> None:
        self.key, self.request = key, request


class Context:
    """What a registered function sees of its request: its answers, its notifications."""

    def __init__(self, request: RequestReceived, ctx: RequestContext) -> None:
        self.request, self.transport = request, ctx
        self._answers = request.input_responses

    def elicit(self, key: str, message: str, fields: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The user's answer to a form (``fields``: name -> type hint, all required), or None
        when they declined or cancelled. Asks, and ends this run, when there is no answer yet."""
        if key in self._answers:
            return self._answers.accepted_content(key)
        properties = {name: json_schema(hint) for name, hint in fields.items()}
        schema = {"type": "object", "properties": properties, "required": list(properties)}
        raise _NeedInput(key, elicit_form(message, schema))

    def confirm(self, key: str, message: str) -> bool:
        """True when the user accepted and ticked yes."""
        answer = self.elicit(key, message, {"confirm": bool})
        return answer is not None and answer.get("confirm") is True

    def roots(self, key: str = "roots") -> list[str]:
        """The client's root URIs (asks for them first)."""
        if key in self._answers:
            return self._answers.root_uris(key) or []
        raise _NeedInput(key, list_roots())

    def log(self, level: str, data: Any) -> None:
        """A log message, sent if the client asked for this level."""
        self.transport.log(level, data)


@attrs.frozen
class _Entry:
    fn: Fn
    name: str
    description: str
    schema: dict[str, Any]
    #: The parameter that takes the :class:`Context`, if any.
    ctx_param: str | None


def _entry(fn: Fn, name: str | None) -> _Entry:
    """Describe ``fn``: its name, its docstring's first line, its parameters' schema."""
    hints = typing.get_type_hints(fn)
    properties, required, ctx_param = {}, [], None
    for param in inspect.signature(fn).parameters.values():
        hint = hints.get(param.name, str)
        if hint is Context:
            ctx_param = param.name
            continue
        properties[param.name] = json_schema(hint)
        if param.default is inspect.Parameter.empty and not _optional(hint):
            required.append(param.name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    doc = (inspect.getdoc(fn) or "").split("\n\n")[0].replace("\n", " ")
    return _Entry(fn, name or fn.__name__, doc, schema, ctx_param)


class Registry:
    """Tools, prompts and resources by name; :meth:`handle` is the adapters' handler."""

    def __init__(self, name: str, version: str) -> None:
        self.info = {"name": name, "version": version}
        self.tools: dict[str, _Entry] = {}
        self.prompts: dict[str, _Entry] = {}
        self.resources: dict[str, _Entry] = {}

    # --- registration -------------------------------------------------------------------------

    def tool(self, name: str | None = None) -> Callable[[Fn], Fn]:
        """Register an ``async def`` as a tool; it returns text or a result mapping."""
        return self._register(self.tools, name)

    def prompt(self, name: str | None = None) -> Callable[[Fn], Fn]:
        """Register an ``async def`` as a prompt; it returns the user message's text."""
        return self._register(self.prompts, name)

    def resource(self, uri: str) -> Callable[[Fn], Fn]:
        """Register an ``async def`` as the resource ``uri``; it returns its text."""
        return self._register(self.resources, uri)

    def _register(self, table: dict[str, _Entry], name: str | None) -> Callable[[Fn], Fn]:
        def add(fn: Fn) -> Fn:
            entry = _entry(fn, name)
            table[entry.name] = entry
            return fn

        return add

    def config(self, **options: Any) -> ServerConfig:
        """A :class:`ServerConfig` announcing what is registered (``options`` are passed on)."""
        tables = {"tools": self.tools, "prompts": self.prompts, "resources": self.resources}
        capabilities: dict[str, Any] = {kind: {} for kind, table in tables.items() if table}
        return ServerConfig(server_info=self.info, capabilities=capabilities, **options)

    # --- serving ----------------------------------------------------------------------------

    async def handle(self, request: RequestReceived, ctx: RequestContext) -> HandlerResult:
        """Answer the list methods and run the registered function a request names."""
        method = request.method
        if method == "tools/list":
            tools = [
                {"name": e.name, "description": e.description, "inputSchema": e.schema}
                for e in self.tools.values()
            ]
            return {"tools": tools}
        if method == "prompts/list":
            return {"prompts": [self._prompt_info(e) for e in self.prompts.values()]}
        if method == "resources/list":
            return {"resources": [{"uri": e.name, "name": e.name} for e in self.resources.values()]}
        table = {"tools/call": self.tools, "prompts/get": self.prompts}.get(method)
        if method == "resources/read":
            table = self.resources
        if table is None:
            return request.method_not_found()
        key = request.uri if method == "resources/read" else request.name
        entry = table.get(key or "")
        if entry is None:
            return request.unknown()
        arguments = dict(request.arguments) if method != "resources/read" else {}
        missing = [n for n in entry.schema.get("required", ()) if n not in arguments]
        if missing or not set(arguments) <= set(entry.schema["properties"]):
            return JsonRpcError.invalid_params(f"{key}: arguments must match its inputSchema")
        if entry.ctx_param is not None:
            arguments[entry.ctx_param] = Context(request, ctx)
        try:
            value = await entry.fn(**arguments)
        except _NeedInput as need:
            return InputRequiredResult({need.key: need.request})
        return _result(method, key or "", value)

    def _prompt_info(self, entry: _Entry) -> dict[str, Any]:
        required = entry.schema.get("required", ())
        arguments = [{"name": n, "required": n in required} for n in entry.schema["properties"]]
        return {"name": entry.name, "description": entry.description, "arguments": arguments}


def _result(method: str, key: str, value: Any) -> dict[str, Any]:
    """What a registered function returned, as the method's result."""
    if isinstance(value, Mapping):
        return dict(value)
    text = str(value)
    if method == "prompts/get":
        return {"messages": [{"role": "user", "content": {"type": "text", "text": text}}]}
    if method == "resources/read":
        return {"contents": [{"uri": key, "mimeType": "text/plain", "text": text}]}
    return {"content": [{"type": "text", "text": text}]}
