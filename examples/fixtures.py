"""The "everything" fixtures: one set of handlers, written once, served by every example server.

``Everything().handle`` is a :data:`mrtr_sansio.adapters.Handler`; serve it with the
capabilities and server info of :func:`server_config`. It holds:

* the MCP conformance fixtures (tools, prompts, resources, templates, completion, logging,
  progress, ``subscriptions/listen`` with list-changed triggers);
* the MRTR fixtures, and the legacy sampling and elicitation tools, all written one way: a
  handler that needs input returns an :class:`~mrtr_sansio.InputRequiredResult` and reads the
  answers on its next run. On the 2026-07-28 wire that goes out as ``input_required``; on the
  2025-11-25 wire the server connection's legacy shim sends real server-to-client requests and
  runs the handler again with the answers;
* a small realistic demo, ``book_trip``: dates by form elicitation and a workspace by roots in
  one round, a summary by sampling in the next, with what it learnt carried in sealed state.

Handlers keep no memory between calls: everything a retry needs travels in ``requestState``
(sealed by the server, see ``examples/http/server.py``) or in the client's answers.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import attrs

import mrtr_sansio as m
from mrtr_sansio.adapters import HandlerResult, RequestContext, SubscriptionHub
from mrtr_sansio.tasks import InMemoryTaskStore, RunAsTask, TaskSettings, TaskStore

__all__ = ["CAPABILITIES", "SERVER_INFO", "Everything", "server_config"]

SERVER_INFO = {"name": "mrtr-sansio-everything", "version": m.__version__}
#: What the fixtures implement. ``listChanged`` is true where ``subscriptions/listen`` streams
#: get the change notifications (the trigger tools); resources never change, so they only
#: offer subscriptions (legacy ``resources/subscribe``, modern ``resourceSubscriptions``).
CAPABILITIES: dict[str, Any] = {
    "tools": {"listChanged": True},
    "prompts": {"listChanged": True},
    "resources": {"subscribe": True},
    "logging": {},
    "completions": {},
}
INSTRUCTIONS = (
    "Test fixtures for MCP conformance, plus book_trip, a booking demo that asks for input "
    "over several rounds."
)


def server_config(
    *,
    task_store: TaskStore | None = None,
    task_lease: float | None = None,
    **options: Any,
) -> m.ServerConfig:
    """The :class:`~mrtr_sansio.ServerConfig` the fixtures are written for (``options`` add to
    or override it, e.g. ``request_state=...``). Tasks are kept in ``task_store`` (in memory
    when None); ``task_lease`` is ``TaskSettings.lease_seconds``."""
    settings: dict[str, Any] = {
        "server_info": SERVER_INFO,
        "capabilities": CAPABILITIES,
        "instructions": INSTRUCTIONS,
        # Tools whose arguments are mirrored in Mcp-Param-* headers, checked on HTTP.
        "param_headers": m.http.param_headers_for(t.listing() for t in _TOOLS),
        # The tasks extension: the tools that may run as tasks (see "tasks" below).
        "tasks": TaskSettings(
            store=task_store if task_store is not None else InMemoryTaskStore(),
            tools={t.name: t.task_support for t in _TOOLS if t.task_support is not None},
            lease_seconds=task_lease,
        ),
    }
    settings.update(options)
    return m.ServerConfig(**settings)


# --- content ----------------------------------------------------------------------------------

#: A 1x1 red PNG and a 1 ms silent 8-bit WAV: the smallest valid media of their types.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAF"
    "AAH/iZk9HQAAAABJRU5ErkJggg=="
)
WAV = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA=="


def text(value: str) -> dict[str, Any]:
    """A text content block."""
    return {"type": "text", "text": value}


def image() -> dict[str, Any]:
    return {"type": "image", "data": PNG, "mimeType": "image/png"}


def embedded(uri: str, body: str, mime: str = "text/plain") -> dict[str, Any]:
    return {"type": "resource", "resource": {"uri": uri, "mimeType": mime, "text": body}}


def result(*blocks: Mapping[str, Any], is_error: bool = False) -> dict[str, Any]:
    """A ``CallToolResult``."""
    out: dict[str, Any] = {"content": list(blocks)}
    if is_error:
        out["isError"] = True
    return out


def tool_error(message: str) -> dict[str, Any]:
    """A tool execution error: the model sees it and may correct itself (not a protocol error)."""
    return result(text(message), is_error=True)


def user(*blocks: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Prompt messages, one per block, all from the user."""
    return [{"role": "user", "content": block} for block in blocks]


def schema(required: tuple[str, ...] = (), **properties: Mapping[str, Any]) -> dict[str, Any]:
    """An object schema (tool input or elicitation form) with the given properties."""
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = list(required)
    return out


STRING = {"type": "string"}
NO_ARGUMENTS = schema()

# --- the catalogue ----------------------------------------------------------------------------

_Fn = TypeVar("_Fn", bound=Callable[..., Awaitable[HandlerResult]])
_Run = Callable[["Everything", m.RequestReceived, RequestContext], Awaitable[HandlerResult]]


@attrs.frozen
class Tool:
    """A tool as ``tools/list`` shows it, and the method that runs it."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    run: _Run
    #: ``"optional"`` or ``"required"`` for a tool that may run as a task (tasks extension).
    task_support: str | None = None

    def listing(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
        }
        if self.task_support is not None:
            out["execution"] = {"taskSupport": self.task_support}
        return out


@attrs.frozen
class Prompt:
    """A prompt as ``prompts/list`` shows it (each of its ``arguments`` is required)."""

    name: str
    description: str
    arguments: tuple[Mapping[str, Any], ...]
    run: _Run

    def listing(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "description": self.description}
        if self.arguments:
            out["arguments"] = list(self.arguments)
        return out


_TOOLS: list[Tool] = []
_PROMPTS: list[Prompt] = []


def tool(
    name: str,
    description: str,
    input_schema: Mapping[str, Any] = NO_ARGUMENTS,
    *,
    task_support: str | None = None,
) -> Callable[[_Fn], _Fn]:
    """Register the decorated method as a tool (listed in definition order)."""

    def register(fn: _Fn) -> _Fn:
        _TOOLS.append(Tool(name, description, input_schema, fn, task_support))
        return fn

    return register


def prompt(name: str, description: str, *arguments: str) -> Callable[[_Fn], _Fn]:
    """Register the decorated method as a prompt taking the named (required) arguments."""

    def register(fn: _Fn) -> _Fn:
        args = tuple({"name": arg, "required": True} for arg in arguments)
        _PROMPTS.append(Prompt(name, description, args, fn))
        return fn

    return register


@attrs.frozen
class Resource:
    uri: str
    name: str
    description: str
    mime_type: str
    text: str | None = None
    blob: str | None = None

    def listing(self) -> dict[str, Any]:
        return {
            "uri": self.uri,
            "name": self.name,
            "description": self.description,
            "mimeType": self.mime_type,
        }

    def contents(self) -> dict[str, Any]:
        out: dict[str, Any] = {"uri": self.uri, "mimeType": self.mime_type}
        if self.blob is not None:
            out["blob"] = self.blob
        else:
            out["text"] = self.text
        return out


#: Direct resources. The first one must be readable by anyone (the caching scenario reads it).
RESOURCES = {
    r.uri: r
    for r in (
        Resource(
            "test://static-text",
            "static-text",
            "A static text resource",
            "text/plain",
            text="This is the content of the static text resource.",
        ),
        Resource(
            "test://static-binary",
            "static-binary",
            "A static binary resource (a PNG image)",
            "image/png",
            blob=PNG,
        ),
        Resource(
            "test://watched-resource",
            "watched-resource",
            "A resource clients may subscribe to",
            "text/plain",
            text="This resource can be watched for updates.",
        ),
    )
}
TEMPLATE_PREFIX, TEMPLATE_SUFFIX = "test://template/", "/data"
TEMPLATES = [
    {
        "uriTemplate": TEMPLATE_PREFIX + "{id}" + TEMPLATE_SUFFIX,
        "name": "template-data",
        "description": "JSON data for any id",
        "mimeType": "application/json",
    }
]
#: Suggestions for ``completion/complete``: (prompt name or template, argument) -> values.
COMPLETIONS: dict[tuple[str, str], list[str]] = {
    ("test_prompt_with_arguments", "arg1"): ["test", "testing", "tested", "value1"],
    ("test_prompt_with_arguments", "arg2"): ["test", "value2"],
    (TEMPLATES[0]["uriTemplate"], "id"): ["1", "2", "3", "42", "123"],
}


def template_id(uri: str) -> str | None:
    """The ``{id}`` of a URI matching the template, else None."""
    if uri.startswith(TEMPLATE_PREFIX) and uri.endswith(TEMPLATE_SUFFIX):
        ident = uri[len(TEMPLATE_PREFIX) : -len(TEMPLATE_SUFFIX)]
        if ident and "/" not in ident:
            return ident
    return None


# --- elicitation forms and answers ------------------------------------------------------------

NAME_FORM = schema(("name",), name={"type": "string", "description": "Your name"})
CONFIRM_FORM = schema(("ok",), ok={"type": "boolean", "description": "Go ahead?"})
COLOR_FORM = schema(("color",), color={"type": "string", "description": "A colour"})
CONTEXT_FORM = schema(("context",), context={"type": "string", "description": "Some context"})
USER_INFO_FORM = schema(
    ("username", "email"),
    username={"type": "string", "description": "User's response"},
    email={"type": "string", "format": "email", "description": "User's email address"},
)
#: SEP-1034: a default for every primitive type.
DEFAULTS_FORM = schema(
    name={"type": "string", "default": "John Doe"},
    age={"type": "integer", "default": 30},
    score={"type": "number", "default": 95.5},
    status={"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
    verified={"type": "boolean", "default": True},
)


def _titled(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"const": const, "title": title} for const, title in pairs]


#: SEP-1330: every enum shape, single and multiple choice, titled and not.
ENUMS_FORM = schema(
    untitledSingle={"type": "string", "enum": ["option1", "option2", "option3"]},
    titledSingle={
        "type": "string",
        "oneOf": _titled(
            ("value1", "First Choice"), ("value2", "Second Choice"), ("value3", "Third Choice")
        ),
    },
    legacyEnum={
        "type": "string",
        "enum": ["opt1", "opt2", "opt3"],
        "enumNames": ["Option One", "Option Two", "Option Three"],
    },
    untitledMulti={
        "type": "array",
        "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
    },
    titledMulti={
        "type": "array",
        "items": {
            "anyOf": _titled(
                ("value1", "First Option"), ("value2", "Second Option"), ("value3", "Third Option")
            )
        },
    },
)
DATES_FORM = schema(
    ("check_in", "check_out"),
    check_in={"type": "string", "format": "date", "title": "Check-in (YYYY-MM-DD)"},
    check_out={"type": "string", "format": "date", "title": "Check-out (YYYY-MM-DD)"},
)
#: JSON Schema 2020-12 keywords a server must pass through untouched (SEP-1613, SEP-2106).
JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": STRING, "city": STRING},
        }
    },
    "properties": {
        "name": STRING,
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": STRING,
        "email": STRING,
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


def answered_string(request: m.RequestReceived, key: str, field: str) -> str | None:
    """The non-blank string ``field`` of an accepted elicitation under ``key``, else None."""
    content = request.input_responses.accepted_content(key)
    value = content.get(field) if content is not None else None
    return value if isinstance(value, str) and value.strip() else None


# --8<-- [start:helpers]
def declined(request: m.RequestReceived, key: str) -> bool:
    """True when the user declined or cancelled the elicitation under ``key``."""
    return request.input_responses.elicitation_action(key) in ("decline", "cancel")


def can_ask(request: m.RequestReceived, ask: m.InputRequest) -> bool:
    """True when the client declared what ``ask`` needs (on this request, or in its session)."""
    return not m.protocol.missing_capabilities(
        ask.required_capabilities(), request.client_capabilities
    )


# --8<-- [end:helpers]


def ask_name(message: str = "What is your name?") -> m.InputRequest:
    return m.elicit_form(message, NAME_FORM)


# --- the handler ------------------------------------------------------------------------------


class Everything:
    """Every fixture, as one handler: ``McpHttpApp(Everything().handle, server_config())``."""

    def __init__(self) -> None:
        #: Open ``subscriptions/listen`` streams, told when the trigger tools "change" a list.
        self.hub = SubscriptionHub()
        self.tools = {t.name: t for t in _TOOLS}
        self.prompts = {p.name: p for p in _PROMPTS}
        self._routes: dict[str, _Run] = {
            "tools/list": Everything._list_tools,
            "tools/call": Everything._call_tool,
            "prompts/list": Everything._list_prompts,
            "prompts/get": Everything._get_prompt,
            "resources/list": Everything._list_resources,
            "resources/templates/list": Everything._list_templates,
            "resources/read": Everything._read_resource,
            "resources/subscribe": Everything._subscribe,
            "resources/unsubscribe": Everything._subscribe,
            "completion/complete": Everything._complete,
            "subscriptions/listen": Everything._listen,
        }

    async def handle(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        """The :data:`~mrtr_sansio.adapters.Handler`: route by method."""
        route = self._routes.get(request.method)
        if route is None:
            return request.method_not_found()
        return await route(self, request, ctx)

    # --- routing ------------------------------------------------------------------------------

    async def _list_tools(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        return {"tools": [t.listing() for t in self.tools.values()]}

    async def _call_tool(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        found = self.tools.get(request.name or "")
        if found is None:
            return request.unknown()
        if "arguments" in request.params and not isinstance(request.params["arguments"], dict):
            return m.JsonRpcError.invalid_params("tools/call: arguments must be an object")
        return await found.run(self, request, ctx)

    async def _list_prompts(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        return {"prompts": [p.listing() for p in self.prompts.values()]}

    async def _get_prompt(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        found = self.prompts.get(request.name or "")
        if found is None:
            return request.unknown()
        args = request.params.get("arguments", {})
        if not isinstance(args, dict) or not all(isinstance(v, str) for v in args.values()):
            return m.JsonRpcError.invalid_params("prompts/get: arguments must map names to strings")
        missing = [a["name"] for a in found.arguments if a["name"] not in args]
        if missing:
            return m.JsonRpcError.invalid_params(
                f"prompts/get: missing required arguments: {', '.join(missing)}"
            )
        return await found.run(self, request, ctx)

    async def _list_resources(
        self, request: m.RequestReceived, ctx: RequestContext
    ) -> HandlerResult:
        return {"resources": [r.listing() for r in RESOURCES.values()]}

    async def _list_templates(
        self, request: m.RequestReceived, ctx: RequestContext
    ) -> HandlerResult:
        return {"resourceTemplates": TEMPLATES}

    async def _read_resource(
        self, request: m.RequestReceived, ctx: RequestContext
    ) -> HandlerResult:
        uri = request.uri
        if uri is None:
            return m.JsonRpcError.invalid_params("resources/read: uri must be a string")
        found = RESOURCES.get(uri)
        if found is not None:
            return {"contents": [found.contents()]}
        ident = template_id(uri)
        if ident is None:
            return request.unknown()
        data = m.config.default_codec().dumps(
            {"id": ident, "templateTest": True, "data": f"Data for ID: {ident}"}
        )
        return {"contents": [{"uri": uri, "mimeType": "application/json", "text": data.decode()}]}

    async def _subscribe(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        # Legacy resources/(un)subscribe. Nothing here ever changes, so no update is ever due.
        uri = request.uri
        if uri is None or (uri not in RESOURCES and template_id(uri) is None):
            return m.JsonRpcError(
                m.ErrorCode.INVALID_PARAMS, f"Resource not found: {uri}", {"uri": uri}
            )
        return {}

    async def _complete(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        ref = request.params.get("ref")
        argument = request.params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            return m.JsonRpcError.invalid_params("completion/complete: ref and argument needed")
        name, value = argument.get("name"), argument.get("value")
        if not isinstance(name, str) or not isinstance(value, str):
            return m.JsonRpcError.invalid_params("completion/complete: argument name and value")
        if ref.get("type") == "ref/prompt":
            target = ref.get("name")
            if target not in self.prompts:
                return m.JsonRpcError.invalid_params(f"Unknown prompt: {target}")
        elif ref.get("type") == "ref/resource":
            target = ref.get("uri")
        else:
            return m.JsonRpcError.invalid_params("completion/complete: unknown ref type")
        values = [v for v in COMPLETIONS.get((str(target), name), []) if v.startswith(value)]
        return {"completion": {"values": values[:100], "total": len(values), "hasMore": False}}

    async def _listen(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        # Honour the notification types this server can send; the stream stays open until the
        # client goes away.
        wanted = request.params["notifications"]
        honored = {
            k: v
            for k, v in wanted.items()
            if k in ("toolsListChanged", "promptsListChanged", "resourceSubscriptions", "taskIds")
        }
        return await self.hub.listen(ctx, honored)

    # --- plain tools --------------------------------------------------------------------------

    @tool("test_simple_text", "Returns a simple text response")
    async def simple_text(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        return result(text("This is a simple text response for testing."))

    @tool("test_image_content", "Returns an image (PNG)")
    async def image_content(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        return result(image())

    @tool("test_audio_content", "Returns audio (WAV)")
    async def audio_content(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        return result({"type": "audio", "data": WAV, "mimeType": "audio/wav"})

    @tool("test_embedded_resource", "Returns an embedded resource")
    async def embedded_resource(
        self, request: m.RequestReceived, ctx: RequestContext
    ) -> HandlerResult:
        return result(embedded("test://embedded-resource", "This is an embedded resource content."))

    @tool("test_multiple_content_types", "Returns text, an image and an embedded resource")
    async def multiple_content_types(
        self, request: m.RequestReceived, ctx: RequestContext
    ) -> HandlerResult:
        return result(
            text("Multiple content types test:"),
            image(),
            embedded(
                "test://mixed-content-resource",
                '{"test":"data","value":123}',
                "application/json",
            ),
        )

    @tool("test_error_handling", "Always fails, as a tool execution error (isError)")
    async def error_handling(
        self, request: m.RequestReceived, ctx: RequestContext
    ) -> HandlerResult:
        return tool_error("This tool intentionally returns an error for testing")

    @tool("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100 before answering")
    async def with_progress(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        for done in (0, 50, 100):
            ctx.progress(done, 100, f"{done}% done")
            if done < 100:
                await ctx.sleep(0.05)
        return result(text("Progress test completed"))

    @tool("test_tool_with_logging", "Sends three log messages while it runs")
    async def with_logging(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        for step in ("Tool execution started", "Tool processing data", "Tool execution completed"):
            ctx.log("info", step, "fixtures")
            await ctx.sleep(0.05)
        return result(text("Logging test completed"))

    @tool("test_logging_tool", "Logs only when the request asks for a log level (2026-07-28)")
    async def logging_tool(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        # Without io.modelcontextprotocol/logLevel in _meta the connection drops these.
        ctx.log("info", "logging tool called", "fixtures")
        ctx.log("debug", {"arguments": dict(request.arguments)}, "fixtures")
        return result(text("Logged only if the request asked for it"))

    @tool("test_trigger_tool_change", "Tells subscribed clients that the tool list changed")
    async def trigger_tool_change(
        self, request: m.RequestReceived, ctx: RequestContext
    ) -> HandlerResult:
        streams = self.hub.publish("notifications/tools/list_changed")
        return result(text(f"Tool list change sent to {streams} open stream(s)"))

    @tool("test_trigger_prompt_change", "Tells subscribed clients that the prompt list changed")
    async def trigger_prompt_change(
        self, request: m.RequestReceived, ctx: RequestContext
    ) -> HandlerResult:
        streams = self.hub.publish("notifications/prompts/list_changed")
        return result(text(f"Prompt list change sent to {streams} open stream(s)"))

    @tool(
        "json_schema_2020_12_tool",
        "Takes an input schema using JSON Schema 2020-12 keywords",
        JSON_SCHEMA_2020_12,
    )
    async def json_schema_2020_12(
        self, request: m.RequestReceived, ctx: RequestContext
    ) -> HandlerResult:
        return result(text(f"Received {sorted(request.arguments)}"))

    @tool(
        "execute_query",
        "Runs a query in a region; the region travels in the Mcp-Param-Region header too, so "
        "that a gateway can route the call without reading the body",
        schema(
            ("region",),
            region={"type": "string", "description": "Where to run", "x-mcp-header": "Region"},
            query={"type": "string", "description": "What to run"},
        ),
    )
    async def execute_query(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        # On HTTP the server connection has already checked the header against the body.
        region, query = request.arguments.get("region"), request.arguments.get("query", "")
        if not isinstance(region, str) or not isinstance(query, str):
            return tool_error("region and query must be strings")
        return result(text(f"Ran {query!r} in {region}."))

    # --- tasks (extension io.modelcontextprotocol/tasks, SEP-2663) ----------------------------
    # Each is one handler for three modes: synchronous (a client without the extension, or
    # the legacy wire), MRTR rounds, and a task. A handler makes its request a task by
    # returning RunAsTask when request.can_create_task; the server then runs it again as the
    # task, and what it asks for there parks the task in input_required.

    @tool("greet", "Says hello; never a task", schema(("name",), name=STRING))
    async def greet(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        name = request.arguments.get("name")
        return result(text(f"Hello, {name if isinstance(name, str) else 'stranger'}!"))

    @tool(
        "slow_compute",
        "Waits `seconds` (at most 300) and answers; a task when the client allows",
        schema(seconds={"type": "number"}, label=STRING),
        task_support="optional",
    )
    async def slow_compute(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        seconds = request.arguments.get("seconds", 1)
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds < 0:
            return tool_error("seconds must be a non-negative number")
        seconds = min(float(seconds), 300.0)
        if request.can_create_task and seconds > 0:  # instant work stays synchronous
            return RunAsTask(status_message="Computing")
        await ctx.sleep(seconds)
        label = request.arguments.get("label", "")
        return result(text(f"Computed {label} in {seconds:g}s."))

    @tool(
        "failing_job",
        "Runs only as a task; ends in a tool error after about a second",
        task_support="required",
    )
    async def failing_job(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        if request.can_create_task:
            return RunAsTask()
        await ctx.sleep(1.0)
        return tool_error("The job failed (on purpose).")

    @tool(
        "protocol_error_job",
        "A task that ends in a JSON-RPC error (status failed)",
        task_support="optional",
    )
    async def protocol_error_job(
        self, request: m.RequestReceived, ctx: RequestContext
    ) -> HandlerResult:
        if request.can_create_task:
            return RunAsTask()
        await ctx.sleep(0.2)
        return m.JsonRpcError.internal("The job broke down (on purpose).")

    @tool(
        "confirm_delete",
        "Asks to confirm before 'deleting' a file (key confirm)",
        schema(("filename",), filename=STRING),
        task_support="optional",
    )
    async def confirm_delete(
        self, request: m.RequestReceived, ctx: RequestContext
    ) -> HandlerResult:
        filename = request.arguments.get("filename")
        if not isinstance(filename, str):
            return tool_error("filename must be a string")
        if request.can_create_task:
            return RunAsTask(status_message="Waiting to ask")
        content = request.input_responses.accepted_content("confirm")
        if declined(request, "confirm"):
            return result(text(f"Kept {filename}."))
        if content is None:
            form = schema(("confirm",), confirm={"type": "boolean", "title": "Delete it?"})
            return m.InputRequiredResult({"confirm": m.elicit_form(f"Delete {filename}?", form)})
        done = "Deleted" if content.get("confirm") is True else "Kept"
        return result(text(f"{done} {filename}."))

    @tool(
        "multi_input",
        "Asks two questions at once (keys name and confirm)",
        task_support="optional",
    )
    async def multi_input(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        if request.can_create_task:
            return RunAsTask()
        responses = request.input_responses
        refused = [key for key in ("name", "confirm") if declined(request, key)]
        if refused:  # a declined question is an answer: end, do not ask it again
            return result(text(f"Not done: {', '.join(refused)} declined"))
        got = {key for key in ("name", "confirm") if responses.accepted_content(key) is not None}
        missing = {
            key: m.elicit_form(question, CONFIRM_FORM if key == "confirm" else NAME_FORM)
            for key, question in (("name", "Your name?"), ("confirm", "Go ahead?"))
            if key not in got
        }
        if missing:
            return m.InputRequiredResult(missing)
        return result(text(f"Both answered: {sorted(got)}"))

    @tool(
        "test_tool_with_task",
        "Asks the user's name by MRTR (key user_name), then runs as a task",
        task_support="required",
    )
    async def tool_with_task(
        self, request: m.RequestReceived, ctx: RequestContext
    ) -> HandlerResult:
        name = answered_string(request, "user_name", "name")
        if name is None:  # before the task: an MRTR round on the original request
            return m.InputRequiredResult({"user_name": ask_name()})
        if request.can_create_task:
            return RunAsTask()
        await ctx.sleep(0.1)
        return result(text(f"Hello, {name}, from a task!"))

    # --- tools that need the client's input (MRTR-style, served on both wires) -------------

    @tool("test_input_required_result_elicitation", "Asks the user's name (key user_name)")
    async def mrtr_elicitation(
        self, request: m.RequestReceived, ctx: RequestContext
    ) -> HandlerResult:
        # Decides from the answers alone: a retry needs no state, and anything but a usable
        # name (absent, malformed, blank) is asked for again.
        if declined(request, "user_name"):
            return result(text("No name given."))
        name = answered_string(request, "user_name", "name")
        if name is None:
            return m.InputRequiredResult({"user_name": ask_name()})
        return result(text(f"Hello, {name}!"))

    @tool("test_input_required_result_sampling", "Asks the client's model a question")
    async def mrtr_sampling(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        answer = request.input_responses.sampled_text("capital_question")
        if answer is None:
            question = m.sample("What is the capital of France?", 100)
            return m.InputRequiredResult({"capital_question": question})
        return result(text(f"The model says: {answer}"))

    @tool("test_input_required_result_list_roots", "Asks for the client's roots")
    async def mrtr_list_roots(
        self, request: m.RequestReceived, ctx: RequestContext
    ) -> HandlerResult:
        roots = request.input_responses.root_uris("client_roots")
        if roots is None:
            return m.InputRequiredResult({"client_roots": m.list_roots()})
        return result(text(f"Roots: {', '.join(roots) or '(none)'}"))

    @tool("test_input_required_result_request_state", "Asks for confirmation, keeping state")
    async def mrtr_request_state(
        self, request: m.RequestReceived, ctx: RequestContext
    ) -> HandlerResult:
        return self._confirm(request, "state-ok")

    @tool(
        "test_input_required_result_tampered_state",
        "Asks for confirmation; its state must come back untouched",
    )
    async def mrtr_tampered_state(
        self, request: m.RequestReceived, ctx: RequestContext
    ) -> HandlerResult:
        # The server verifies the state before this runs: a tampered token never gets here.
        return self._confirm(request, "state verified")

    def _confirm(self, request: m.RequestReceived, done: str) -> HandlerResult:
        if declined(request, "confirm"):
            return result(text("Not confirmed: nothing done."))
        content = request.input_responses.accepted_content("confirm")
        if request.request_state != "awaiting-confirmation" or content is None:
            ask = m.elicit_form("Please confirm to continue", CONFIRM_FORM)
            return m.InputRequiredResult({"confirm": ask}, "awaiting-confirmation")
        if content.get("ok") is not True:
            return result(text("Not confirmed: nothing done."))
        return result(text(f"Confirmed ({done})."))

    @tool(
        "test_input_required_result_multiple_inputs",
        "Asks for a name, a model's greeting and the roots at once",
    )
    async def mrtr_multiple_inputs(
        self, request: m.RequestReceived, ctx: RequestContext
    ) -> HandlerResult:
        # Answers collected in earlier rounds ride in the (sealed) state; only what is still
        # missing is asked for again.
        if declined(request, "user_name"):
            return result(text("No name given: nobody to greet."))
        state = request.request_state if isinstance(request.request_state, dict) else {}
        got: dict[str, Any] = dict(state.get("got", {}))
        responses = request.input_responses
        fresh = {
            "user_name": answered_string(request, "user_name", "name"),
            "greeting": responses.sampled_text("greeting"),
            "client_roots": responses.root_uris("client_roots"),
        }
        got.update((key, value) for key, value in fresh.items() if value is not None)
        asks = {
            "user_name": ask_name(),
            "greeting": m.sample("Say hello to the user.", 50),
            "client_roots": m.list_roots(),
        }
        missing = {k: v for k, v in asks.items() if k not in got}
        if missing:
            return m.InputRequiredResult(missing, {"got": got})
        return result(
            text(f"{got['greeting']} {got['user_name']}; roots: {', '.join(got['client_roots'])}")
        )

    @tool("test_input_required_result_multi_round", "Asks for a name, then a favourite colour")
    async def mrtr_multi_round(
        self, request: m.RequestReceived, ctx: RequestContext
    ) -> HandlerResult:
        if declined(request, "user_name") or declined(request, "favorite_color"):
            return result(text("Nothing to remember: an answer was declined."))
        state = request.request_state if isinstance(request.request_state, dict) else {}
        name = state.get("name")
        if not isinstance(name, str):
            name = answered_string(request, "user_name", "name") if state else None
            if name is None:
                return m.InputRequiredResult({"user_name": ask_name()}, {"step": "name"})
        color = answered_string(request, "favorite_color", "color")
        if color is None:
            ask = m.elicit_form(f"Hello {name}! What is your favourite colour?", COLOR_FORM)
            return m.InputRequiredResult({"favorite_color": ask}, {"step": "color", "name": name})
        return result(text(f"{name}'s favourite colour is {color}."))

    @tool(
        "test_input_required_result_capabilities", "Asks for input only in ways the client declared"
    )
    async def mrtr_capabilities(
        self, request: m.RequestReceived, ctx: RequestContext
    ) -> HandlerResult:
        if declined(request, "user_name"):
            return result(text("No name given."))
        responses = request.input_responses
        name = answered_string(request, "user_name", "name") or responses.sampled_text(
            "suggest_name"
        )
        if name is not None:
            return result(text(f"Name: {name}"))
        roots = responses.root_uris("client_roots")
        if roots is not None:
            return result(text(f"Roots: {', '.join(roots) or '(none)'}"))
        # In order of preference; the first the client can answer is asked.
        for key, ask in (
            ("user_name", ask_name()),
            ("suggest_name", m.sample("Suggest a name for a test user.", 20)),
            ("client_roots", m.list_roots()),
        ):
            if can_ask(request, ask):
                return m.InputRequiredResult({key: ask})
        return request.missing_capability({"elicitation": {"form": {}}})

    @tool("test_missing_capability", "Needs sampling; without it the answer is -32021")
    async def missing_capability(
        self, request: m.RequestReceived, ctx: RequestContext
    ) -> HandlerResult:
        # The server connection refuses input requests the client did not declare (-32021
        # with requiredCapabilities): nothing to check here.
        answer = request.input_responses.sampled_text("haiku")
        if answer is None:
            return m.InputRequiredResult({"haiku": m.sample("Write a haiku about tests.", 60)})
        return result(text(answer))

    @tool(
        "test_streaming_elicitation",
        "Answers at once with an elicitation (never a request on the stream)",
    )
    async def streaming_elicitation(
        self, request: m.RequestReceived, ctx: RequestContext
    ) -> HandlerResult:
        if declined(request, "user_name"):
            return result(text("No name given."))
        name = answered_string(request, "user_name", "name")
        if name is None:
            return m.InputRequiredResult({"user_name": ask_name("Who is streaming?")})
        return result(text(f"Streaming for {name}."))

    # --- the 2025-11-25 sampling and elicitation tools, written the same way ----------------

    @tool(
        "test_sampling",
        "Asks the client's model to answer a prompt",
        schema(("prompt",), prompt={"type": "string", "description": "The prompt"}),
    )
    async def sampling(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        question = request.arguments.get("prompt")
        if not isinstance(question, str):
            return tool_error("prompt must be a string")
        answer = request.input_responses.sampled_text("completion")
        if answer is None:
            return m.InputRequiredResult({"completion": m.sample(question, 100)})
        return result(text(f"LLM response: {answer}"))

    @tool(
        "test_elicitation",
        "Asks the user for a username and an email address",
        schema(("message",), message={"type": "string", "description": "What to ask"}),
    )
    async def elicitation(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        message = request.arguments.get("message")
        if not isinstance(message, str):
            return tool_error("message must be a string")
        return self._form_round(request, "user_info", m.elicit_form(message, USER_INFO_FORM))

    @tool("test_elicitation_sep1034_defaults", "Asks for a form whose fields have defaults")
    async def elicitation_defaults(
        self, request: m.RequestReceived, ctx: RequestContext
    ) -> HandlerResult:
        ask = m.elicit_form("Please review and update the form fields with defaults", DEFAULTS_FORM)
        return self._form_round(request, "defaults", ask)

    @tool("test_elicitation_sep1330_enums", "Asks for a form with every kind of enum")
    async def elicitation_enums(
        self, request: m.RequestReceived, ctx: RequestContext
    ) -> HandlerResult:
        ask = m.elicit_form("Please select options from the enum fields", ENUMS_FORM)
        return self._form_round(request, "choices", ask)

    def _form_round(
        self, request: m.RequestReceived, key: str, ask: m.InputRequest
    ) -> HandlerResult:
        responses = request.input_responses
        action = responses.elicitation_action(key)
        if action is None:
            return m.InputRequiredResult({key: ask})
        content = responses.accepted_content(key)
        if action == "accept" and content is not None:
            codec = m.config.default_codec()
            return result(text(f"User provided: {codec.dumps(content).decode()}"))
        return result(text(f"User answered {action}: nothing provided."))

    # --- the demo: booking a trip over two rounds of input -------------------------------------

    @tool(
        "book_trip",
        "Books a trip: asks for dates (form) and the workspace (roots), then a summary (sampling)",
        schema(
            ("destination",),
            destination={"type": "string", "description": "Where to"},
            guests={"type": "integer", "minimum": 1, "description": "How many people"},
        ),
    )
    # --8<-- [start:book_trip]
    async def book_trip(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        destination, guests = (
            request.arguments.get("destination"),
            request.arguments.get("guests", 1),
        )
        if not isinstance(destination, str) or not destination.strip():
            return tool_error("destination must be a non-empty string")
        if type(guests) is not int or guests < 1:
            return tool_error("guests must be a positive integer")
        state = request.request_state if isinstance(request.request_state, dict) else {}
        trip = dict(state)  # what earlier rounds learnt (sealed: the client cannot forge it)
        if declined(request, "dates"):
            return result(text("Booking cancelled."))
        roots = request.input_responses.root_uris("workspace")
        if roots is not None:
            trip["workspace"] = roots[0] if roots else None
        if "check_in" not in trip:
            problem = self._read_dates(request, trip)
            if problem is not None:
                # Round 1: the dates, and (if the client has roots) where to keep the itinerary.
                asks = {"dates": m.elicit_form(f"{problem}Dates for {destination}?", DATES_FORM)}
                roots_ask = m.list_roots()
                if "workspace" not in trip and can_ask(request, roots_ask):
                    asks["workspace"] = roots_ask
                return m.InputRequiredResult(asks, trip or {"step": "dates"})
        summary = request.input_responses.sampled_text("summary")
        summarize = m.sample(
            f"In one sentence, pitch a trip to {destination} for {guests} from "
            f"{trip['check_in']} to {trip['check_out']}.",
            60,
        )
        if summary is None and can_ask(request, summarize):
            # Round 2: a summary from the client's model.
            return m.InputRequiredResult({"summary": summarize}, trip)
        lines = [
            f"Booked {destination} for {guests}: {trip['check_in']} to {trip['check_out']}.",
            f"Workspace: {trip.get('workspace') or '(none)'}",
        ]
        if summary is not None:
            lines.append(f"Summary: {summary}")
        return result(text("\n".join(lines)))

    @staticmethod
    def _read_dates(request: m.RequestReceived, trip: dict[str, Any]) -> str | None:
        """Store valid dates in ``trip``; else say what to fix ("" when nothing was given)."""
        content = request.input_responses.accepted_content("dates")
        if content is None:
            return ""
        try:
            check_in = datetime.date.fromisoformat(str(content.get("check_in")))
            check_out = datetime.date.fromisoformat(str(content.get("check_out")))
        except ValueError:
            return "Please give both dates as YYYY-MM-DD. "
        if check_out <= check_in:
            return "Check-out must come after check-in. "
        trip["check_in"], trip["check_out"] = check_in.isoformat(), check_out.isoformat()
        return None

    # --8<-- [end:book_trip]

    # --- prompts ------------------------------------------------------------------------------

    @prompt("test_simple_prompt", "A simple prompt without arguments")
    async def simple_prompt(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        return {"messages": user(text("This is a simple prompt for testing."))}

    @prompt("test_prompt_with_arguments", "A prompt with two arguments", "arg1", "arg2")
    async def prompt_with_arguments(
        self, request: m.RequestReceived, ctx: RequestContext
    ) -> HandlerResult:
        args = request.arguments
        line = f"Prompt with arguments: arg1='{args['arg1']}', arg2='{args['arg2']}'"
        return {"messages": user(text(line))}

    @prompt("test_prompt_with_embedded_resource", "A prompt embedding a resource", "resourceUri")
    async def prompt_with_embedded_resource(
        self, request: m.RequestReceived, ctx: RequestContext
    ) -> HandlerResult:
        uri = request.arguments["resourceUri"]
        return {
            "messages": user(
                embedded(uri, "Embedded resource content for testing."),
                text("Please process the embedded resource above."),
            )
        }

    @prompt("test_prompt_with_image", "A prompt with an image")
    async def prompt_with_image(
        self, request: m.RequestReceived, ctx: RequestContext
    ) -> HandlerResult:
        return {"messages": user(image(), text("Please analyze the image above."))}

    @prompt("test_input_required_result_prompt", "A prompt that first asks for context")
    async def mrtr_prompt(self, request: m.RequestReceived, ctx: RequestContext) -> HandlerResult:
        if declined(request, "user_context"):
            return {"messages": user(text("No context given."))}
        context = answered_string(request, "user_context", "context")
        if context is None:
            ask = m.elicit_form("What context should the prompt use?", CONTEXT_FORM)
            return m.InputRequiredResult({"user_context": ask})
        return {"messages": user(text(f"Using this context: {context}"))}
