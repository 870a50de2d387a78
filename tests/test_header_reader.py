"""``HeaderReader``: one pass over a raw header list gives the MCP facts and a transport's own
headers, repeats included (the ASGI app reads every request this way)."""

from __future__ import annotations

import pytest

from mrtr_sansio.http import HttpRequestFacts
from mrtr_sansio.http._facts import HeaderReader

V = "2026-07-28"
READER = HeaderReader(["Host", "content-type", "accept"], lists=["Accept"])


def test_mcp_and_transport_headers_come_out_of_one_list() -> None:
    raw = [
        (b"host", b"localhost:8000"),
        (b"user-agent", b"test"),
        (b"content-type", b"application/json"),
        (b"mcp-protocol-version", V.encode()),
        (b"mcp-method", b"tools/call"),
        (b"mcp-name", b"weather"),
        (b"mcp-param-region", b"us"),
    ]
    facts, found, repeated = READER.read(raw)
    assert facts == HttpRequestFacts(V, "tools/call", "weather", {"region": "us"})
    assert found["host"] == "localhost:8000"
    assert found["content-type"] == "application/json"
    assert "user-agent" not in found  # not asked for: skipped
    assert repeated == ()


def test_names_match_in_any_case_and_as_text() -> None:
    raw: list[tuple[bytes | str, bytes | str]] = [
        (b"HOST", b"a"),
        ("Content-Type", "application/json"),
        (b"Mcp-Method", b"tools/list"),
        ("MCP-PARAM-Zone", "z1"),
        (b"X-Other", b"skipped"),
    ]
    facts, found, _ = READER.read(raw)
    assert found["host"] == "a"
    assert found["content-type"] == "application/json"
    assert facts.method == "tools/list"
    assert facts.params == {"zone": "z1"}
    assert "x-other" not in found


def test_the_first_copy_is_kept_and_the_repeat_reported_in_order() -> None:
    raw = [
        (b"content-type", b"application/json"),
        (b"host", b"first"),
        (b"Host", b"second"),
        (b"content-type", b"text/plain"),
        (b"host", b"third"),
    ]
    _, found, repeated = READER.read(raw)
    assert found["host"] == "first"
    assert found["content-type"] == "application/json"
    assert repeated == ("host", "content-type")  # each once, in the order they repeated


def test_repeated_mcp_headers_go_to_the_facts_not_the_transport_list() -> None:
    raw = [
        (b"mcp-method", b"tools/list"),
        (b"MCP-Method", b"tools/call"),
        (b"mcp-param-region", b"eu"),
        (b"Mcp-Param-Region", b"us"),
    ]
    facts, _, repeated = READER.read(raw)
    assert facts.method == "tools/list"
    assert facts.params == {"region": "eu"}
    assert facts.repeated == frozenset({"mcp-method", "mcp-param-region"})
    assert repeated == ()


@pytest.mark.parametrize(
    ("copies", "joined"),
    [
        ([b"text/html"], "text/html"),
        ([b"text/html", b"application/json"], "text/html, application/json"),
        ([b"a/b", b"c/d", b"e/f"], "a/b, c/d, e/f"),
    ],
)
def test_copies_of_a_list_header_are_joined(copies: list[bytes], joined: str) -> None:
    _, found, repeated = READER.read([(b"accept", value) for value in copies])
    assert found["accept"] == joined
    assert repeated == ()


def test_an_mcp_header_cannot_be_declared_a_list() -> None:
    reader = HeaderReader(lists=["mcp-method"])
    facts, _, _ = reader.read([(b"mcp-method", b"a"), (b"mcp-method", b"b")])
    assert facts.method == "a"
    assert facts.repeated == frozenset({"mcp-method"})


def test_latin1_values_are_decoded_as_such() -> None:
    facts, _, _ = READER.read([(b"mcp-name", b"caf\xe9")])
    assert facts.name == "caf\xe9"


def test_from_header_list_is_the_reader_without_transport_headers() -> None:
    raw = [(b"host", b"a"), (b"mcp-method", b"x"), (b"mcp-method", b"y")]
    assert HttpRequestFacts.from_header_list(raw) == READER.read(raw)[0]
    assert HttpRequestFacts.from_header_list(raw).repeated == frozenset({"mcp-method"})


def test_an_empty_list_reads_as_nothing() -> None:
    assert READER.read([]) == (HttpRequestFacts(), {}, ())
