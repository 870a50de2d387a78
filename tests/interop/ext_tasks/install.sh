#!/usr/bin/env bash
# Installs the official tasks client for tests/interop/test_ext_tasks_client.py from npm, exactly
# as locked in package-lock.json (@modelcontextprotocol/ext-tasks 0.2.2,
# @modelcontextprotocol/client 2.4.0). node_modules stays here and is not committed.
set -euo pipefail
cd "$(dirname "$0")"
command -v npm >/dev/null || { echo "npm is missing (Node.js 20+)"; exit 1; }
npm ci --no-audit --no-fund --loglevel=error
