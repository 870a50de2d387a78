#!/usr/bin/env bash
# Installs the npm peers of tests/test_bridge_peers_legacy.py (the official TypeScript SDK's
# server 2.4 and the MCP Inspector CLI) into node_modules here, exactly as package-lock.json
# pins them. A stamp holds the lock's sha256: a second run with the same lock does nothing (and
# needs no network).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
stamp="node_modules/.bridge-peers-legacy.sha256"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "bridge_peers_legacy: node_modules matches the lock ($want), nothing to do"
  exit 0
fi
npm ci --no-audit --no-fund --loglevel=error
echo "$want" > "$stamp"
node -e 'for (const p of ["server", "inspector-cli"]) console.log(p, require(`./node_modules/@modelcontextprotocol/${p}/package.json`).version)'
