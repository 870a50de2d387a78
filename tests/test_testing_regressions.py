"""Bugs the ServerModel and the fuzz tests found, pinned so they stay fixed.

The ``InputResponses`` ones were found by running ``mrtr_sansio.testing.ServerModel`` against a
handler written with the typed readers (``model_handler`` in tests/helpers.py): each malformed
answer below made the handler complete a request instead of asking again (the
``invalid-answers`` check, S11).
The progress one was found by the long fuzz profile (tests/test_fuzz.py): a hostile
``progressToken`` came back out in a notification that is not valid JSON-RPC for MCP.
"""

from __future__ import annotations

from typing import Any

import pytest

import mrtr_sansio as m
from mrtr_sansio import InputResponses
from mrtr_sansio.adapters import RequestContext

TEXT = {"type": "text", "text": "Paris"}


def test_sampled_text_needs_a_whole_create_message_result() -> None:
    answers = InputResponses(
        {
            "no_role": {"content": TEXT, "model": "m"},
            "no_model": {"role": "assistant", "content": TEXT},
            "bad_role": {"role": "system", "content": TEXT, "model": "m"},
            "good": {"role": "assistant", "content": TEXT, "model": "m"},
        }
    )
    assert answers.sampled_text("no_role") is None
    assert answers.sampled_text("no_model") is None
    assert answers.sampled_text("bad_role") is None
    assert answers.sampled_text("good") == "Paris"


def test_root_uris_refuses_roots_without_a_uri() -> None:
    answers = InputResponses(
        {
            "no_uri": {"roots": [{"uri": "file:///a"}, {"name": "no uri"}]},
            "not_object": {"roots": ["file:///a"]},
            "empty": {"roots": []},
            "good": {"roots": [{"uri": "file:///a", "name": "A"}]},
        }
    )
    assert answers.root_uris("no_uri") is None
    assert answers.root_uris("not_object") is None
    assert answers.root_uris("empty") == []
    assert answers.root_uris("good") == ["file:///a"]


def test_elicitation_action_refuses_mistyped_content() -> None:
    answers = InputResponses(
        {
            "bad_content": {"action": "accept", "content": False},
            "null_content": {"action": "accept", "content": None},
            "url_accept": {"action": "accept"},
            "decline": {"action": "decline"},
        }
    )
    assert answers.elicitation_action("bad_content") is None
    assert answers.accepted_content("bad_content") is None
    assert answers.elicitation_action("null_content") is None
    assert answers.accepted_content("null_content") is None
    assert answers.elicitation_action("url_accept") == "accept"
    assert answers.elicitation_action("decline") == "decline"


async def _no_sleep(_seconds: float) -> None:
    pass


def _progress_context(token: Any) -> tuple[m.ServerConnection, RequestContext]:
    """A modern tools/call carrying ``token`` as its progressToken, and its handler context."""
    conn = m.ServerConnection()
    meta = {
        m.protocol.PROTOCOL_VERSION_KEY: "2026-07-28",
        m.protocol.CLIENT_CAPABILITIES: {},
        "progressToken": token,
    }
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "t", "_meta": meta},
    }
    conn.receive_message(message)
    (request,) = conn.events()
    assert isinstance(request, m.RequestReceived)
    ctx = RequestContext(conn, request, lambda: None, _no_sleep)
    return conn, ctx


@pytest.mark.parametrize("token", [False, True, None, 1.5, [], {}, ["t"]])
def test_progress_ignores_a_token_that_is_not_a_progress_token(token: Any) -> None:
    conn, ctx = _progress_context(token)
    assert ctx.progress(0.5) is False
    assert conn.outgoing() == []


@pytest.mark.parametrize("token", ["p-1", "", 0, -7, 2**40])
def test_progress_echoes_string_and_integer_tokens(token: Any) -> None:
    conn, ctx = _progress_context(token)
    assert ctx.progress(0.5) is True
    (note,) = conn.outgoing()
    assert note.message["params"] == {"progressToken": token, "progress": 0.5}
