#!/usr/bin/env bash
# Installs the official TS client for tests/test_bridge_peers.py from npm, exactly as locked in
# package-lock.json (@modelcontextprotocol/client 2.4.0). node_modules stays here and is not
# committed; a stamp of the lock's sha256 in it makes a second run offline and instant.
set -euo pipefail
cd "$(dirname "$0")"
command -v npm >/dev/null || { echo "npm is missing (Node.js 20+)"; exit 1; }
lock="$(sha256sum package-lock.json | cut -d' ' -f1)"
stamp=node_modules/.mrtr-lock-sha256
if [[ -f "$stamp" && "$(cat "$stamp")" == "$lock" ]]; then
  echo "@modelcontextprotocol/client: installed from this lock already"
  exit 0
fi
npm ci --no-audit --no-fund --loglevel=error
echo "$lock" >"$stamp"
node -e 'console.log("@modelcontextprotocol/client", require("./node_modules/@modelcontextprotocol/client/package.json").version)'
