"""Helpers for the HTTP client tests: our ASGI app in process behind a streaming transport, the
client connected to it, scripted users, and the wire as the server saw it (schema-checked)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
from asgi_transport import StreamingAsgi
from fixtures import Everything, server_config

import mrtr_sansio as m
from mrtr_sansio.adapters.asgi import McpHttpApp
from mrtr_sansio.adapters.http import HttpClient
from wire import check_message

URL = "http://localhost:8000/mcp"
INFO = {"name": "http-test-client", "version": "1.0.0"}
DATES = {"check_in": "2026-08-01", "check_out": "2026-08-05"}
ROOTS = {"roots": [{"uri": "file:///work/trips", "name": "Trips"}]}


def sampled(text: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": {"type": "text", "text": text},
        "model": "test-model",
        "stopReason": "endTurn",
    }


class User:
    """Scripted callbacks that remember what they were asked."""

    def __init__(self, name: str = "Ada") -> None:
        self.name = name
        self.asked: list[m.InputNeeded] = []

    async def elicitation(self, event: m.InputNeeded) -> Mapping[str, Any]:
        self.asked.append(event)
        props = event.params["requestedSchema"]["properties"]
        if "check_in" in props:
            return {"action": "accept", "content": DATES}
        if "ok" in props:
            return {"action": "accept", "content": {"ok": True}}
        if "context" in props:
            return {"action": "accept", "content": {"context": "travel"}}
        if "color" in props:
            return {"action": "accept", "content": {"color": "teal"}}
        return {"action": "accept", "content": {"name": self.name}}

    async def sampling(self, event: m.InputNeeded) -> Mapping[str, Any]:
        self.asked.append(event)
        return sampled("Paris")

    async def roots(self, event: m.InputNeeded) -> Mapping[str, Any]:
        self.asked.append(event)
        return ROOTS

    def callbacks(self) -> dict[str, Any]:
        return {"elicitation": self.elicitation, "sampling": self.sampling, "roots": self.roots}


def everything_app(**options: Any) -> McpHttpApp:
    config = server_config(request_state=m.sealing.RequestStateSecurity.ephemeral())
    return McpHttpApp(Everything().handle, config, **options)


@asynccontextmanager
async def transport_for(app: Any) -> AsyncIterator[StreamingAsgi]:
    """The transport, its app tasks cancelled on exit; what the block raises comes out as is
    (not wrapped in an exception group by the task group)."""
    raised: BaseException | None = None
    async with anyio.create_task_group() as tg:
        try:
            yield StreamingAsgi(app, tg)
        except BaseException as exc:
            raised = exc
        tg.cancel_scope.cancel()
    if raised is not None:
        raise raised


@asynccontextmanager
async def connected(
    app: Any,
    era: str = "modern",
    *,
    user: User | None = None,
    config: Mapping[str, Any] | None = None,
    prepare: Callable[[StreamingAsgi], object] | None = None,
    **options: Any,
) -> AsyncIterator[tuple[HttpClient, StreamingAsgi]]:
    """Our client connected to ``app`` in process; ``user`` answers (a fresh ``User`` by
    default); ``options`` add to or replace its callbacks (``sampling=None`` removes one);
    ``prepare`` sees the transport before the client connects."""
    callbacks = (user or User()).callbacks()
    settings: dict[str, Any] = {"era": era, "client_info": INFO, **(config or {})}
    async with transport_for(app) as transport:
        if prepare is not None:
            prepare(transport)
        async with (
            httpx.AsyncClient(transport=transport) as http,
            HttpClient.connect(
                URL, m.ClientConfig(**settings), http=http, **{**callbacks, **options}
            ) as client,
        ):
            yield client, transport


def posts(transport: StreamingAsgi) -> list[tuple[httpx.Headers, dict[str, Any]]]:
    """Every POST the client made: its headers and its body, checked against the schema of
    the era the body is in (a body with the modern envelope is modern)."""
    out = []
    for request, body in zip(transport.requests, transport.bodies, strict=True):
        if request.method != "POST":
            continue
        msg = json.loads(body)
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        modern = m.protocol.PROTOCOL_VERSION in params.get("_meta", {})
        check_message(msg, m.Era.MODERN if modern else m.Era.LEGACY, sender="client")
        out.append((request.headers, msg))
    return out


def methods(transport: StreamingAsgi) -> list[str]:
    """What each request carried: its JSON-RPC method, ``answer`` or the HTTP method (but
    not the legacy standalone stream's GETs, whose timing is their own)."""
    out = []
    for request, body in zip(transport.requests, transport.bodies, strict=True):
        if request.method == "GET":
            continue
        if request.method != "POST":
            out.append(request.method)
            continue
        msg = json.loads(body)
        out.append(msg.get("method", "answer"))
    return out


def texts(result: Mapping[str, Any]) -> list[str]:
    return [block["text"] for block in result["content"] if block["type"] == "text"]
