"""``mrtr_sansio.adapters.keyfile``: the one reader of a key-ring file, shared by the example
HTTP server's ``--state-keys-file`` and ``mrtr-worker --state-keys-file``; each way a file can
be unusable gets a message naming the file and the reason, and the example's command prints
it and exits without a traceback."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import pytest

from mrtr_sansio.adapters.keyfile import KeyRingError, decode_keys, read_key_file

ROOT = Path(__file__).resolve().parents[2]
K1, K2 = b"\x01" * 32, b"\xfb" * 48


def test_a_good_file_gives_its_keys_in_order(tmp_path: Path) -> None:
    ring = tmp_path / "ring"
    url_safe = base64.urlsafe_b64encode(K2).decode().rstrip("=")
    ring.write_text(f"# the first key seals\n\n  {base64.b64encode(K1).decode()}  \n{url_safe}\n")
    assert read_key_file(ring) == [K1, K2]
    assert read_key_file(str(ring)) == [K1, K2]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"# nothing\n\n", "the key ring is empty"),
        (b"not base64!\n", "key 1 is not valid base64"),
        (base64.b64encode(K1) + b"\n" + base64.b64encode(b"short") + b"\n", "key 2 is 5 bytes"),
        ("# clé\n".encode(), "is not ASCII text"),
        (b"\xff\xfe" + "AQ==".encode("utf-16-le"), "is not ASCII text"),
    ],
    ids=["empty", "not-base64", "short-key", "not-ascii", "utf-16"],
)
def test_an_unusable_file_names_itself_and_why(
    tmp_path: Path, content: bytes, message: str
) -> None:
    ring = tmp_path / "ring"
    ring.write_bytes(content)
    with pytest.raises(KeyRingError, match=message) as raised:
        read_key_file(ring)
    assert str(raised.value).startswith(f"{ring}: ")
    assert isinstance(raised.value, ValueError)


def test_a_short_key_says_the_minimum(tmp_path: Path) -> None:
    with pytest.raises(KeyRingError, match="at least 32 random bytes"):
        decode_keys([base64.b64encode(b"x" * 31).decode()], "RING")


def test_a_missing_file_is_a_key_ring_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-ring"
    with pytest.raises(KeyRingError, match="cannot read the key ring: No such file"):
        read_key_file(missing)
    with pytest.raises(KeyRingError, match="cannot read the key ring"):
        read_key_file(tmp_path)  # a directory


def test_the_example_server_prints_the_reason_and_no_traceback(tmp_path: Path) -> None:
    pytest.importorskip("uvicorn", reason="the example server needs the server extra")
    short = tmp_path / "short-ring"
    short.write_text(base64.b64encode(b"short").decode() + "\n")
    for ring, reason in ((tmp_path / "missing", "No such file"), (short, "key 1 is 5 bytes")):
        run = subprocess.run(
            [sys.executable, str(ROOT / "examples/http/server.py"), "--port", "0",
             "--state-keys-file", str(ring)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert run.returncode == 1, run
        assert f"server.py: {ring}: " in run.stderr, run.stderr
        assert reason in run.stderr, run.stderr
        assert "Traceback" not in run.stderr, run.stderr
