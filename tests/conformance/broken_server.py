"""The example HTTP server, deliberately broken for the runner's negative control.

Same fixtures, same ASGI app, but ``requestState`` is not protected: a tampered state reaches
the handlers, which trust it, so ``input-required-result-tampered-state`` must fail.

    python tests/conformance/broken_server.py --port N
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import uvicorn

from mrtr_sansio import UNSEALED
from mrtr_sansio.adapters.asgi import McpHttpApp

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from fixtures import Everything, server_config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    port = parser.parse_args().port
    app = McpHttpApp(Everything().handle, server_config(request_state=UNSEALED))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
