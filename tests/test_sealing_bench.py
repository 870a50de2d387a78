"""bench/sealing.py keeps running and keeps its last line in the format the project tracks."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench" / "sealing.py"


def test_bench_smoke() -> None:
    out = subprocess.run(
        [sys.executable, str(BENCH), "--rounds", "3", "--batch", "20"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    last = out.strip().splitlines()[-1]
    assert re.fullmatch(r"ratio seal\+unseal/hmac: hmac=\d+\.\d\d aes-gcm=\d+\.\d\d", last), last
