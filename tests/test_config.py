"""Configuration objects: documented defaults, validation, immutability."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from mrtr_sansio import ClientConfig, Limits, ServerConfig
from mrtr_sansio.config import OrjsonCodec
from mrtr_sansio.protocol import LEGACY_VERSIONS, MODERN_VERSIONS
from mrtr_sansio.sealing import process_state_protector

MiB = 1024 * 1024


def test_limit_defaults() -> None:
    limits = Limits()
    assert attrs.asdict(limits) == {
        "max_message_bytes": 4 * MiB,
        "max_in_flight": 1024,
        "max_input_requests": 32,
        "max_input_responses": 64,
        "max_request_state_bytes": 64 * 1024,
        "max_shimmed_requests": 64,
        "max_pending_legs": 256,
        "max_json_depth": 128,
        "max_json_nodes": 100_000,
    }


@pytest.mark.parametrize("field", [f.name for f in attrs.fields(Limits)])
@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10", None])
def test_limits_must_be_positive_integers(field: str, bad: Any) -> None:
    with pytest.raises(ValueError, match=f"^{field}: must be a positive integer"):
        Limits(**{field: bad})


def test_server_config_defaults() -> None:
    config = ServerConfig()
    assert config.server_info is None
    assert config.capabilities == {}
    assert config.instructions is None
    assert config.supported_versions == MODERN_VERSIONS
    assert config.legacy_versions == LEGACY_VERSIONS
    assert (config.cache_ttl_ms, config.cache_scope) == (0, "private")
    assert config.answer_discovery is True
    assert config.request_state is process_state_protector()  # sealed by default
    assert config.legacy_shim is True
    assert config.legacy_max_rounds == 8
    assert config.legacy_leg_timeout == 600.0
    assert config.limits == Limits()
    assert isinstance(config.codec, OrjsonCodec)  # installed by the test extra
    assert isinstance(config.clock(), float)
    assert len(config.token_hex(8)) == 16


def test_server_config_copies_what_it_is_given() -> None:
    info = {"name": "s", "version": "1"}
    caps: dict[str, Any] = {"tools": {}}
    versions = ["2026-07-28"]
    config = ServerConfig(server_info=info, capabilities=caps, supported_versions=versions)
    info["name"] = "changed"
    caps["prompts"] = {}
    versions.append("x")
    assert config.server_info == {"name": "s", "version": "1"}
    assert config.capabilities == {"tools": {}}
    assert config.supported_versions == ("2026-07-28",)


def test_versions_must_not_be_a_bare_string() -> None:
    with pytest.raises(TypeError, match="not the string '2026-07-28'"):
        ServerConfig(supported_versions="2026-07-28")
    with pytest.raises(TypeError, match="version strings"):
        ServerConfig(legacy_versions="2025-11-25")


@pytest.mark.parametrize("bad", [0, -1, True])
def test_server_config_validation(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"^legacy_max_rounds: must be a positive integer"):
        ServerConfig(legacy_max_rounds=bad)
    with pytest.raises(ValueError, match=r"^legacy_leg_timeout: must be a positive number"):
        ServerConfig(legacy_leg_timeout=bad)


def test_leg_timeout_accepts_floats() -> None:
    assert ServerConfig(legacy_leg_timeout=0.5).legacy_leg_timeout == 0.5
    with pytest.raises(ValueError, match="positive number"):
        ServerConfig(legacy_leg_timeout="5")  # type: ignore[arg-type]


def test_configs_are_frozen() -> None:
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        ServerConfig().instructions = "x"  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        Limits().max_in_flight = 1  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        ClientConfig().max_rounds = 1  # type: ignore[misc]


def test_client_config_defaults() -> None:
    config = ClientConfig()
    assert config.client_info is None
    assert config.capabilities == {}
    assert config.era == "modern"
    assert config.protocol_version == "2026-07-28"
    assert config.legacy_version == "2025-11-25"
    assert config.max_rounds == 10
    assert config.probe_timeout == 5.0
    assert config.limits == Limits()
    assert isinstance(config.codec, OrjsonCodec)  # installed by the test extra
    assert isinstance(config.clock(), float)
    assert (config.log_level, config.progress) == (None, False)


def test_client_config_validation_and_copies() -> None:
    caps: dict[str, Any] = {"roots": {}}
    config = ClientConfig(client_info={"name": "c", "version": "1"}, capabilities=caps)
    caps["sampling"] = {}
    assert config.capabilities == {"roots": {}}
    assert config.client_info == {"name": "c", "version": "1"}
    with pytest.raises(ValueError, match=r"^max_rounds:"):
        ClientConfig(max_rounds=0)
    with pytest.raises(ValueError, match=r"^probe_timeout:"):
        ClientConfig(probe_timeout=0)


# --- mistakes caught at construction ------------------------------------------------------------


def test_era_takes_the_library_enum() -> None:
    from mrtr_sansio import Era

    assert ClientConfig(era=Era.LEGACY).era == "legacy"
    assert ClientConfig(era=Era.MODERN).era == "modern"


@pytest.mark.parametrize("info", [{"name": "s"}, {"version": "1"}, {"name": "s", "version": 1}])
def test_implementation_info_needs_name_and_version(info: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"^server_info: needs a string '(name|version)'"):
        ServerConfig(server_info=info)
    with pytest.raises(ValueError, match=r"^client_info: needs a string '(name|version)'"):
        ClientConfig(client_info=info)


@pytest.mark.parametrize("caps", [{"tools": True}, {"tools": {}, "logging": None}])
def test_capabilities_must_be_objects_at_construction(caps: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"^capabilities\['(tools|logging)'\]: must be an object"):
        ServerConfig(capabilities=caps)


def test_tasks_must_be_task_settings() -> None:
    with pytest.raises(TypeError, match=r"^tasks: must be a TaskSettings"):
        ServerConfig(tasks={"ttl": 5})  # type: ignore[arg-type]


@pytest.mark.parametrize("depth", [200, 201])
def test_json_depth_has_a_ceiling(depth: int) -> None:
    if depth <= 200:
        assert Limits(max_json_depth=depth).max_json_depth == depth
    else:
        with pytest.raises(ValueError, match="at most 200"):
            Limits(max_json_depth=depth)


@pytest.mark.parametrize("url", ["not a url", "example.com/x", "https://", "https://a b"])
def test_elicit_url_needs_an_absolute_url(url: str) -> None:
    from mrtr_sansio import elicit_url

    with pytest.raises(ValueError, match=r"^url: must be an absolute URL"):
        elicit_url("Connect", url)
    assert (elicit_url("Connect", "https://example.com/connect?x=1").params or {})["url"]


def test_sample_takes_any_sequence() -> None:
    from mrtr_sansio import sample

    messages: tuple[dict[str, Any], ...] = (
        {"role": "user", "content": {"type": "text", "text": "hi"}},
    )
    # An ordinary list of dicts, as inferred by mypy --strict (invariant list[...] would refuse it).
    as_list = [{"role": "user", "content": {"type": "text", "text": "hi"}}]
    for asked in (sample(messages, 10), sample("hi", 10), sample(as_list, 10)):
        assert asked.params is not None
        assert asked.params["messages"] == list(messages)
