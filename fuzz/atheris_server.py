"""The server fuzz target under atheris (coverage-guided, libFuzzer), seeded with the corpus of
the hypothesis properties in tests/test_fuzz.py.

    pip install atheris
    python fuzz/atheris_server.py --make-corpus /tmp/corpus            # 2000 seed inputs
    python fuzz/atheris_server.py /tmp/corpus -atheris_runs=100000 -max_len=16384

Each input is one stream: the first byte picks the wire (odd: a legacy session, even: modern
only) and the chunk size (its upper seven bits ``n``: ``(n + 1) ** 2`` bytes); the rest is fed
to a ServerConnection (instrumented) in those chunks, between requests held in flight. The
assertions are those of the hypothesis properties: no exception escapes, every message written
is schema-valid JSON-RPC, the limits hold, and the held requests get exactly the answers they
get alone.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

with atheris.instrument_imports(include=["mrtr_sansio"]):
    import mrtr_sansio  # noqa: F401  (instrumented before the tests import it)

import test_fuzz as fuzz  # noqa: E402


def one_input(data: bytes) -> None:
    """Feed one stream; any exception is a finding."""
    if not data:
        return
    head, body = data[0], data[1:]
    legacy = bool(head & 1)
    size = ((head >> 1) + 1) ** 2  # 1 to 16384 bytes per chunk
    fuzz.run(legacy, [body[i : i + size] for i in range(0, len(body), size)], note=False)


def make_corpus(folder: Path, count: int) -> None:
    """Seed inputs drawn from the hypothesis strategies of the fuzz properties."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    folder.mkdir(parents=True, exist_ok=True)
    made = [0]

    @settings(max_examples=count, database=None, suppress_health_check=list(HealthCheck))
    @given(
        st.booleans(),
        st.integers(0, 127),
        st.lists(
            st.one_of(
                fuzz.hostile_lines(fuzz.MODERN_REQUESTS), fuzz.hostile_lines(fuzz.LEGACY_REQUESTS)
            ),
            max_size=8,
        ),
    )
    def draw(legacy: bool, size: int, lines: list[bytes]) -> None:
        seed = bytes([size << 1 | legacy]) + b"".join(lines)
        (folder / f"seed-{made[0]:05d}").write_bytes(seed[:16384])
        made[0] += 1

    draw()
    print(f"{made[0]} seed inputs in {folder}")


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--make-corpus":
        make_corpus(Path(sys.argv[2]), 2000)
        return
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
