"""The booking demo's client half, shared by ``examples/asyncio/client.py`` and its trio twin:
a scripted user (no human input needed), and a printer for the wire transcript.

The flow: ``tools/call book_trip`` for Lisbon. The server asks for the dates (form
elicitation) and a workspace (roots) in one round, then for a one-line pitch (sampling) in the
next. On the 2026-07-28 wire each round is an ``input_required`` result and the client retries
with a new id, the answers and the server's sealed ``requestState``; on the 2025-11-25 wire
the server's legacy shim asks with real requests on the stream and the client answers each.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import mrtr_sansio as m
from mrtr_sansio.adapters import AsyncClientBase, ClientOptions
from mrtr_sansio.adapters.stdio import Client as BlockingClient

__all__ = ["ARGUMENTS", "TOOL", "Demo", "parse_args"]

EraName = Literal["modern", "legacy", "auto"]

TOOL = "book_trip"
ARGUMENTS = {"destination": "Lisbon", "guests": 2}
CLIENT_INFO = {"name": "mrtr-sansio-demo-client", "version": m.__version__}
DATES = {"check_in": "2026-09-01", "check_out": "2026-09-05"}
ROOTS = {"roots": [{"uri": "file:///home/demo/trips", "name": "trips"}]}
PITCH = {
    "role": "assistant",
    "content": {"type": "text", "text": "Five days of light, tiles and custard tarts."},
    "model": "scripted-model",
}
#: Strings longer than this are cut in the transcript (``--full`` shows them whole).
LONG = 48


def parse_args(argv: Sequence[str] | None, description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=description, usage="%(prog)s [--era ERA] [--full] -- SERVER COMMAND..."
    )
    parser.add_argument("--era", choices=["modern", "legacy", "auto"], default="auto")
    parser.add_argument(
        "--full", action="store_true", help="print every message whole (no abbreviations)"
    )
    parser.add_argument("command", nargs="+", help="the stdio server to launch")
    return parser.parse_args(argv)


class Demo:
    """The scripted user's callbacks, and the transcript they and the wire print to."""

    def __init__(self, era: EraName, *, full: bool = False, out: Any = None) -> None:
        self.config = m.ClientConfig(era=era, client_info=CLIENT_INFO)
        self.full = full
        self.out = out if out is not None else sys.stdout
        self._metas: dict[str, Any] = {}  # direction -> the last _meta printed whole

    def options(self) -> ClientOptions:
        return {
            "elicitation": self.elicit,
            "sampling": self.sample,
            "roots": self.roots,
            "trace": self.wire,
        }

    # --- the scripted user ------------------------------------------------------------------

    async def elicit(self, need: m.InputNeeded) -> Mapping[str, Any]:
        asked = need.params.get("requestedSchema", {}).get("properties", {})
        content = DATES if "check_in" in asked else {}
        return self._answer("elicitation", need, {"action": "accept", "content": content})

    async def sample(self, need: m.InputNeeded) -> Mapping[str, Any]:
        return self._answer("sampling", need, PITCH)

    async def roots(self, need: m.InputNeeded) -> Mapping[str, Any]:
        return self._answer("roots", need, ROOTS)

    def _answer(
        self, callback: str, need: m.InputNeeded, answer: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        what = f"input {need.key!r}" if isinstance(need.key, str) else f"request id {need.key}"
        self.say(
            f"        {callback} callback answers {what} (round {need.round}): {_compact(answer)}"
        )
        return answer

    # --- printing -----------------------------------------------------------------------------

    def say(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    def header(self, library: str, command: Sequence[str]) -> None:
        self.say(f"== {library} client, era={self.config.era}: {' '.join(command)}")
        if not self.full:
            self.say(f"   (strings over {LONG} characters are cut, a repeated _meta is shown as …)")

    def connected(self, client: BlockingClient | AsyncClientBase) -> None:
        era = client.era
        assert era is not None
        server = client.server_info
        if server is None:
            how = "no handshake: every request carries its own _meta"
        else:
            how = f"server {server.get('name')} {server.get('version', '')}".rstrip()
        self.say(f"-- {era.value} wire, protocol {client.protocol_version} ({how})")

    def wire(self, direction: Literal["send", "recv"], data: bytes) -> None:
        """The client's ``trace`` hook: one line per message."""
        arrow = "C→S" if direction == "send" else "S→C"
        text = data.decode() if self.full else _compact(self._shorten(direction, json.loads(data)))
        self.say(f"{arrow} {text}")

    def result(self, result: Mapping[str, Any]) -> None:
        for block in result.get("content", []):
            if block.get("type") == "text":
                for line in block["text"].splitlines():
                    self.say(f"=> {line}")

    def _shorten(self, direction: str, value: Any) -> Any:
        if isinstance(value, str):
            return value if len(value) <= LONG else f"{value[:24]}…({len(value)} chars)"
        if isinstance(value, list):
            return [self._shorten(direction, item) for item in value]
        if not isinstance(value, dict):
            return value
        out = {}
        for key, item in value.items():
            if key == "_meta" and isinstance(item, dict):
                if self._metas.get(direction) == item:
                    out[key] = "…"
                    continue
                self._metas[direction] = item
            out[key] = self._shorten(direction, item)
        return out


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
