"""The scale-out example's pieces: the HTTP example server's key ring reload (in process and over
SIGHUP to a real process), the nginx configuration, and the flow accounting of
``examples/scale``. The whole demo (nginx, several processes) and the load test run in CI
through ``.ci/run``."""

from __future__ import annotations

import base64
import importlib.util
import json
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from scale import cluster, flows

import mrtr_sansio as m
from mrtr_sansio.adapters.asgi import McpHttpApp
from mrtr_sansio.adapters.stores import SqliteReplayGuard

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
K1, K2, K3 = (bytes([i]) * 32 for i in (1, 2, 3))
ARGS = {"destination": "Lisbon", "guests": 2}


def _server_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "example_http_server_reload", EXAMPLES / "http" / "server.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


server = _server_module()


def sealed_with(token: str) -> list[bytes]:
    """Which of K1, K2, K3 sealed ``token``."""
    found = []
    for key in (K1, K2, K3):
        try:
            m.sealing.HmacSha256Codec([key]).unseal(token)
        except m.sealing.RequestStateError:
            continue
        found.append(key)
    return found


def protector_of(app: McpHttpApp) -> m.sealing.SwappableStateProtector:
    protector = app.config.request_state
    assert isinstance(protector, m.sealing.SwappableStateProtector)
    return protector


def binding() -> m.sealing.StateBinding:
    return m.sealing.StateBinding("tools/call", "book_trip", ARGS, None)


# --- the example server's reload, in process ----------------------------------------------------


def test_reload_swaps_the_ring_and_keeps_the_options(tmp_path: Path) -> None:
    ring = tmp_path / "ring"
    cluster.write_ring(ring, [K1])
    assert ring.stat().st_mode & 0o777 == 0o600
    assert server.load_keys(file=str(ring)) == [K1]
    app = server.build_app([K1], audience="https://mcp.example", ttl=30.0)
    protector = protector_of(app)
    before = protector.current
    old_token = protector.seal({"a": 1}, binding(), 1, 1000.0)
    assert sealed_with(old_token) == [K1]
    cluster.write_ring(ring, [K2, K1])
    assert server.reload_keys(app, str(ring)) is True
    after = protector.current
    assert after is not before
    assert isinstance(after, m.sealing.RequestStateSecurity)
    assert (after.audience, after.ttl) == ("https://mcp.example", 30.0)
    assert sealed_with(protector.seal({"a": 1}, binding(), 1, 1000.0)) == [K2]
    assert protector.unseal(old_token, binding(), 1000.0).state == {"a": 1}
    cluster.write_ring(ring, [K2])
    assert server.reload_keys(app, str(ring)) is True
    with pytest.raises(m.sealing.RequestStateError, match="unknown_key"):
        protector.unseal(old_token, binding(), 1000.0)


def test_reload_keeps_the_aes_codec(tmp_path: Path) -> None:
    ring = tmp_path / "ring"
    cluster.write_ring(ring, [K2])
    app = server.build_app([K1], codec="aes-256-gcm")
    assert server.reload_keys(app, str(ring)) is True
    current = protector_of(app).current
    assert isinstance(current, m.sealing.RequestStateSecurity)
    assert isinstance(current.codec, m.sealing.AesGcmCodec)


def test_a_bad_ring_file_keeps_the_current_ring(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    app = server.build_app([K1])
    protector = protector_of(app)
    before = protector.current
    ring = tmp_path / "ring"
    for content in ("# nothing\n", "not base64!\n", base64.b64encode(b"short").decode() + "\n"):
        ring.write_text(content)
        assert server.reload_keys(app, str(ring)) is False
    assert server.reload_keys(app, str(tmp_path / "missing")) is False
    assert protector.current is before
    assert caplog.text.count("state key ring NOT reloaded") == 4


def test_reload_needs_an_app_built_with_a_ring(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="not built with a key ring"):
        server.reload_keys(server.build_app(None), str(tmp_path / "ring"))
    app = server.build_app([K1])
    protector_of(app).swap(m.sealing.RequestStateSecurity.ephemeral())
    protector_of(app).swap(_Opaque())
    with pytest.raises(TypeError, match="cannot tell the options"):
        server.reload_keys(app, str(tmp_path / "ring"))


class _Opaque:
    def seal(self, state: Any, binding: m.sealing.StateBinding, round: int, now: float) -> str:
        raise NotImplementedError

    def unseal(
        self, token: str, binding: m.sealing.StateBinding, now: float
    ) -> m.sealing.OpenedState:
        raise NotImplementedError


# --- the example server's reload, over SIGHUP to a real process ----------------------------------


def _post(url: str, rid: int, **extra: Any) -> httpx.Response:
    params = {
        "name": "book_trip",
        "arguments": ARGS,
        "_meta": {
            m.protocol.PROTOCOL_VERSION_KEY: "2026-07-28",
            m.protocol.CLIENT_CAPABILITIES: {"elicitation": {}, "roots": {}},
        },
        **extra,
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "book_trip",
    }
    body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}
    return httpx.post(url, json=body, headers=headers, timeout=10.0)


def _first_leg(url: str) -> str:
    answer = _post(url, 1).json()["result"]
    assert answer["resultType"] == "input_required"
    token: str = answer["requestState"]
    return token


def _retry(url: str, token: str) -> httpx.Response:
    dates = {"action": "accept", "content": {"check_in": "2026-09-01", "check_out": "2026-09-03"}}
    roots = {"roots": [{"uri": "file:///trips", "name": "trips"}]}
    answers = {"dates": dates, "workspace": roots}
    return _post(url, 2, inputResponses=answers, requestState=token)


def _hup_and_wait(proc: cluster.Server, marker: str) -> None:
    seen = proc.log.read_text().count(marker)
    proc.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while proc.log.read_text().count(marker) == seen:
        assert time.monotonic() < deadline, proc.log.read_text()
        time.sleep(0.01)


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP here")
def test_sighup_reloads_the_ring_of_a_running_server(tmp_path: Path) -> None:
    ring = tmp_path / "ring"
    cluster.write_ring(ring, [K1])
    proc = cluster.start_server(tmp_path, "server", keys_file=ring, ttl=60.0)
    url = f"http://{proc.address}/mcp"
    try:
        old = _first_leg(url)
        assert sealed_with(old) == [K1]
        cluster.write_ring(ring, [K2, K1])
        _hup_and_wait(proc, "state key ring reloaded")
        assert sealed_with(_first_leg(url)) == [K2]
        assert _retry(url, old).json()["result"]["resultType"] == "complete"  # no sampling: done
        ring.write_text("garbage!\n")
        _hup_and_wait(proc, "state key ring NOT reloaded")
        assert sealed_with(_first_leg(url)) == [K2]  # the ring in use stays
        cluster.write_ring(ring, [K2])
        _hup_and_wait(proc, "state key ring reloaded")
        refused = _retry(url, old)
        assert refused.status_code == 400
        assert refused.json()["error"] == {
            "code": -32602,
            "message": "Invalid or expired requestState",
            "data": {"reason": "invalid_request_state"},
        }
        assert proc.proc.poll() is None
    finally:
        cluster.stop(proc.proc)
    assert "reloaded from" in proc.log.read_text()


# --- flows over a round-robin of in-process servers ----------------------------------------------


class RoundRobin(httpx.AsyncBaseTransport):
    """A balancer in process: each request goes to the next app, and the answer names it in
    ``X-Upstream``, as the demo's nginx does."""

    def __init__(self, apps: list[McpHttpApp]) -> None:
        self.backends = [httpx.ASGITransport(app) for app in apps]
        self.turn = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        index = self.turn % len(self.backends)
        self.turn += 1
        response = await self.backends[index].handle_async_request(request)
        response.headers[flows.UPSTREAM_HEADER] = f"app-{index}"
        return response


async def run_flows(apps: list[McpHttpApp], count: int) -> list[flows.Outcome]:
    transport = RoundRobin(apps)
    async with httpx.AsyncClient(transport=transport) as http:
        return [await flows.book_trip(http, "http://localhost/mcp", n) for n in range(count)]


@pytest.mark.anyio
async def test_flows_cross_processes_sharing_a_ring() -> None:
    apps = [server.build_app([K1]) for _ in range(3)]
    outcomes = await run_flows(apps, 4)
    tally = flows.Tally().extend(outcomes)
    assert (tally.flows, tally.completed, tally.failed) == (4, 4, 0)
    # One flow at a time over three apps: every leg of a flow lands on the next app.
    assert [[leg.upstream for leg in o.legs] for o in outcomes[:2]] == [
        ["app-0", "app-1", "app-2"],
        ["app-0", "app-1", "app-2"],
    ]
    assert (tally.legs, tally.retries, tally.cross, tally.same) == (12, 8, 8, 0)
    assert tally.by_upstream == {"app-0": 4, "app-1": 4, "app-2": 4}
    first = outcomes[0].legs
    assert [leg.retry for leg in first] == [False, True, True]
    assert first[0].state is not None
    assert first[1].state is not None
    assert first[2].state is None
    assert all(leg.error is None and leg.status == 200 for leg in first)
    assert sealed_with(first[0].state) == [K1]


@pytest.mark.anyio
async def test_flows_fail_at_the_first_crossing_with_keys_of_their_own() -> None:
    apps = [server.build_app(None) for _ in range(2)]
    outcomes = await run_flows(apps, 3)
    tally = flows.Tally().extend(outcomes)
    assert (tally.completed, tally.failed) == (0, 3)
    assert tally.errors == {(-32602, "Invalid or expired requestState"): 3}
    assert (tally.retries, tally.cross, tally.cross_refused, tally.same) == (3, 3, 3, 0)
    assert [leg.status for leg in outcomes[0].legs] == [200, 400]
    assert outcomes[0].legs[1].error == (-32602, "Invalid or expired requestState")
    assert tally.failures() == ["failed with -32602 'Invalid or expired requestState': 3"]


@pytest.mark.anyio
async def test_one_process_with_its_own_key_completes_every_flow() -> None:
    outcomes = await run_flows([server.build_app(None)], 2)
    tally = flows.Tally().extend(outcomes)
    assert (tally.completed, tally.retries, tally.cross, tally.same) == (2, 4, 0, 4)


class Canned(httpx.AsyncBaseTransport):
    """Answers every request with ``respond(request)``, which a test may change."""

    def __init__(self) -> None:
        self.respond: Any = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        response: httpx.Response = self.respond(request)
        return response


def completes_with(text: str) -> Any:
    def respond(request: httpx.Request) -> httpx.Response:
        result = {"resultType": "complete", "content": [{"type": "text", "text": text}]}
        body = {"jsonrpc": "2.0", "id": json.loads(request.content)["id"], "result": result}
        return httpx.Response(200, json=body)

    return respond


def refused(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("refused", request=request)


def answers_with(status: int, **fields: Any) -> Any:
    def respond(request: httpx.Request) -> httpx.Response:
        body = {"jsonrpc": "2.0", "id": json.loads(request.content)["id"], **fields}
        return httpx.Response(status, json=body)

    return respond


ASK_DATES = {
    "resultType": "input_required",
    "inputRequests": {
        "dates": {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": "Dates?",
                "requestedSchema": {"type": "object", "properties": {}},
            },
        }
    },
    "requestState": "s",
}


@pytest.mark.anyio
async def test_what_is_not_a_clean_protocol_error_is_a_problem() -> None:
    canned = Canned()
    cases = [
        (lambda request: httpx.Response(502, text="Bad Gateway"), "HTTP 502: Bad Gateway"),
        (
            lambda request: httpx.Response(
                200, headers={"content-type": "application/json"}, content=b"{oops"
            ),
            "HTTP 200 (application/json) without a JSON-RPC response",
        ),
        (completes_with("Booked elsewhere."), "unexpected result ['Booked elsewhere.']"),
        (refused, "could not connect to http://x/mcp: is the server running? (refused)"),
        (
            answers_with(200, result=ASK_DATES),
            (
                "tools/call still needed input after 10 rounds: the server asked again for"
                " 'dates'; the answer given did not satisfy it"
            ),
        ),
    ]
    async with httpx.AsyncClient(transport=canned) as http:
        for respond, problem in cases:
            canned.respond = respond
            outcome = await flows.book_trip(http, "http://x/mcp", 1)
            assert (outcome.problem, outcome.error, outcome.completed) == (problem, None, False)
        # A JSON-RPC error answer is clean: the server said no.
        message = "Invalid or expired requestState"
        canned.respond = answers_with(400, error={"code": -32602, "message": message})
        outcome = await flows.book_trip(http, "http://x/mcp", 1)
        assert (outcome.problem, outcome.error) == (None, m.JsonRpcError(-32602, message))
        assert outcome.legs == (flows.Leg(None, 400, False, None, (-32602, message)),)
        canned.respond = completes_with(flows.Trip(1).expected())
        assert (await flows.book_trip(http, "http://x/mcp", 1)).completed
    tally = flows.Tally()
    tally.add(flows.Outcome(1, (), problem="HTTP 502: Bad Gateway"))
    assert tally.failures() == ["failed otherwise (HTTP 502: Bad Gateway): 1"]


def test_trip_answers_are_what_book_trip_asks_for() -> None:
    trip = flows.Trip(8)
    assert trip.arguments == {"destination": "City 8", "guests": 1}
    assert trip.dates == ("2026-09-09", "2026-09-11")
    call = m.Call(0, "tools/call", {})
    with pytest.raises(ValueError, match="does not ask for"):
        trip.answer(m.InputNeeded(call, "x", "ping", {}, 1))


# --- the balancer's configuration ---------------------------------------------------------------


def test_nginx_config_is_round_robin_on_loopback_and_keeps_its_files(tmp_path: Path) -> None:
    conf = cluster.nginx_config(tmp_path, 8080, ["127.0.0.1:1", "127.0.0.1:2"], ["scgi"])
    assert "listen 127.0.0.1:8080;" in conf
    assert "server 127.0.0.1:1;\n        server 127.0.0.1:2;" in conf
    directives = "\n".join(x for x in conf.splitlines() if not x.lstrip().startswith("#"))
    for balancing in ("ip_hash", "hash ", "sticky", "least_conn", "random"):
        assert balancing not in directives  # round-robin, the default, and nothing else
    assert "add_header X-Upstream $upstream_addr always;" in conf
    assert "scgi_temp_path" not in conf
    assert f"uwsgi_temp_path {tmp_path}/uwsgi_temp;" in conf
    # Every file nginx writes is under the prefix.
    files = [
        line.split()[1].rstrip(";")
        for line in conf.splitlines()
        if line.split()[:1] in (["pid"], ["error_log"], ["access_log"]) or "_temp_path" in line
    ]
    assert len(files) == 7
    assert all(f.startswith(f"{tmp_path}/") for f in files)


# --- the scripts' arguments ---------------------------------------------------------------------


def test_run_and_load_arguments() -> None:
    from scale import load, run

    args = run.parse_args([])
    assert (args.processes, args.flows, args.ttl, args.phase_seconds) == (3, 200, 5.0, 5.0)
    for bad in (["--processes", "1"], ["--flows", "0"], ["--ttl", "3", "--phase-seconds", "2"]):
        with pytest.raises(SystemExit):
            run.parse_args(bad)
    args = load.parse_args([])
    assert (args.flows, args.rounds, args.deadline, args.tolerance_mib) == (1000, 3, 600.0, 4.0)
    for bad in (["--rounds", "0"], ["--deadline", "0"], ["--tolerance-mib", "-1"]):
        with pytest.raises(SystemExit):
            load.parse_args(bad)


def test_tokens_are_told_apart_by_the_key_that_sealed_them() -> None:
    from scale import run

    protector = m.sealing.RequestStateSecurity([K2])
    token = protector.seal({"a": 1}, binding(), 1, 1000.0)
    sealed_by = {
        "one": m.sealing.HmacSha256Codec([K1]).unseal,
        "two": m.sealing.HmacSha256Codec([K2]).unseal,
    }
    assert run._sealer(token, sealed_by) == "two"
    assert run._sealer(token, {"one": sealed_by["one"]}) == "unknown"


# --- a requestState replayed on another process ---------------------------------------------------


@pytest.mark.parametrize("guard", ["redis", "sqlite"])
def test_a_token_replayed_on_another_process_is_refused(
    guard: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from scale import replay

    if guard == "redis" and cluster.find_redis() is None:
        pytest.skip(cluster.REDIS_MISSING)
    assert replay.main(["--guard", guard]) == 0
    out = capsys.readouterr().out.splitlines()
    refused = json.dumps(replay.REFUSED, separators=(",", ":"))
    assert out == [
        f"shared key ring and one {guard} replay guard:",
        "  round 1 answered on A: accepted (resultType complete)",
        f"  same retry on B:       refused {refused}",
        "shared key ring, no replay guard (the control):",
        "  round 1 answered on A: accepted (resultType complete)",
        "  same retry on B:       accepted (resultType complete)",
    ]


def test_the_replay_guard_is_kept_when_the_ring_is_reloaded(tmp_path: Path) -> None:
    ring = tmp_path / "ring"
    cluster.write_ring(ring, [K1])
    app = server.build_app([K1], replay_db=str(tmp_path / "redeemed.db"))
    before = protector_of(app).current
    assert isinstance(before, m.sealing.RequestStateSecurity)
    guard = before.replay_guard
    assert isinstance(guard, SqliteReplayGuard)
    cluster.write_ring(ring, [K2, K1])
    assert server.reload_keys(app, str(ring)) is True
    after = protector_of(app).current
    assert isinstance(after, m.sealing.RequestStateSecurity)
    assert after is not before
    assert after.replay_guard is guard
    guard.close()
