"""``mrtr_sansio.testing.ServerModel`` against a server written with the official Python SDK
(``mcp`` 2.3.0, ``tests/interop/sdk_server.py`` under uvicorn): the model checks another
implementation, not only ours.

With every capability declared, that server keeps every rule the model checks, tampered and
foreign state included (the SDK seals its ``requestState``), so the model raises no false alarm
against a peer it was not written with. With the capabilities varied, the model finds what the
SDK leaves to each handler: an embedded elicitation sent to a client that did not declare
elicitation (S7: MUST NOT; our server answers -32021 instead). Pinned, so that a change of
either side shows.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from servers import SDK_SERVER, http_server

from mrtr_sansio.testing import ModelConfig, SpecViolationError, check_server, http_endpoint, tool
from mrtr_sansio.testing import strategies as mst

OPERATIONS = [tool("greet", mrtr=True), tool("add", {"a": 1, "b": 2}, mrtr=False)]
SETTINGS = settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(scope="module")
def sdk_url() -> Iterator[str]:
    with http_server(SDK_SERVER) as (url, _):
        yield url


def test_sdk_server_keeps_every_rule_when_every_capability_is_declared(sdk_url: str) -> None:
    config = ModelConfig(
        OPERATIONS,
        capabilities=st.just(mst.FULL_CAPABILITIES),
        reject_foreign_state=True,
    )
    check_server(http_endpoint(sdk_url), config, settings=SETTINGS)


def test_model_finds_the_sdk_server_asking_for_an_undeclared_capability(sdk_url: str) -> None:
    with pytest.raises(SpecViolationError) as caught:
        check_server(http_endpoint(sdk_url), ModelConfig(OPERATIONS), settings=SETTINGS)
    error = caught.value
    assert error.check == "capabilities"
    assert error.request is not None
    assert error.request["params"]["name"] == "greet"
    declared = error.request["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    assert "elicitation" not in declared
    assert error.response["result"]["resultType"] == "input_required"
    assert "elicitation/create" in {
        request["method"] for request in error.response["result"]["inputRequests"].values()
    }
