"""Renamed public names keep working for a release, with a DeprecationWarning naming the new one."""

from __future__ import annotations

import pytest

import mrtr_sansio.protocol as protocol


def test_protocol_version_is_the_meta_key_under_its_old_name() -> None:
    with pytest.warns(DeprecationWarning, match="PROTOCOL_VERSION_KEY"):
        old = protocol.PROTOCOL_VERSION
    assert old == protocol.PROTOCOL_VERSION_KEY == "io.modelcontextprotocol/protocolVersion"


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        protocol.NO_SUCH_NAME  # noqa: B018


def test_stream_server_is_the_server_driver_under_its_old_name() -> None:
    import mrtr_sansio.adapters as adapters

    with pytest.warns(DeprecationWarning, match="ServerDriver"):
        old = adapters.StreamServer
    assert old is adapters.ServerDriver
    assert "StreamServer" not in adapters.__all__


@pytest.mark.parametrize(
    ("old", "says"), [("ClientBase", "AsyncClientBase"), ("client_config", "ClientDriver.create")]
)
def test_adapter_plumbing_left_the_namespace_but_still_imports(old: str, says: str) -> None:
    import mrtr_sansio.adapters as adapters
    from mrtr_sansio.adapters import _client_common

    with pytest.warns(DeprecationWarning, match=says):
        value = getattr(adapters, old)
    assert value is getattr(_client_common, old)
    assert old not in adapters.__all__


def test_unsealed_state_is_the_opened_state_under_its_old_name() -> None:
    import mrtr_sansio.sealing as sealing

    with pytest.warns(DeprecationWarning, match="OpenedState"):
        old = sealing.UnsealedState
    assert old is sealing.OpenedState
    assert "UnsealedState" not in sealing.__all__
    assert repr(sealing.UNSEALED) == "UNSEALED"
    assert isinstance(sealing.UNSEALED, sealing.Unsealed)
