#!/usr/bin/env bash
# Sets up .venv-docs, a venv of its own holding this tree and the docs dependency group and
# nothing else (first run, or after pyproject.toml changed: see scripts/_venv.sh; DOCS_VENV
# names another), and builds the site into site/ with warnings as errors. The build generates
# the lifecycle diagrams, the limit tables and the examples' output from the code, and the API
# reference from the docstrings; any warning (a broken link, an undocumented marker, a failing
# example) fails it, and so does a page that would need the network (docs/hooks/offline.py).
# The site works opened from disk: open site/index.html. A second run needs no network.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
VENV=${DOCS_VENV:-.venv-docs} ensure_venv docs --group docs

# Two scripts the theme would load from a CDN are shipped with the site instead, fetched once
# from the npm registry (npm pack) into docs/assets/vendor/ (git-ignored, with each package's
# LICENSE) and again only when a version below changes: mermaid, which draws the diagrams
# (major 11 is the one mkdocs-material 9 drives), and iframe-worker's shim, which runs the
# search worker from file:// (the offline plugin's polyfill).
vendor=docs/assets/vendor
vendor_npm() {  # vendor_npm PACKAGE VERSION FILE-IN-PACKAGE NAME-IN-VENDOR
  local package=$1 version=$2 file=$3 name=$4 scratch
  if [[ -f "$vendor/$name" && "$(cat "$vendor/$name.version" 2>/dev/null)" == "$version" ]]; then
    return 0
  fi
  echo "vendoring $package $version into $vendor/$name (npm pack)" >&2
  scratch=$(mktemp -d)
  (cd "$scratch" && npm pack --silent "$package@$version" >/dev/null)
  tar -xzf "$scratch"/*.tgz -C "$scratch" "package/$file" package/LICENSE
  mkdir -p "$vendor"
  cp "$scratch/package/LICENSE" "$vendor/$package-LICENSE.txt"
  cp "$scratch/package/$file" "$vendor/$name"
  printf '%s\n' "$version" >"$vendor/$name.version"
  rm -rf "$scratch"
}
vendor_npm mermaid 11.17.2 dist/mermaid.min.js mermaid.min.js
vendor_npm iframe-worker 1.0.4 shim/index.js iframe-worker-shim.js
NO_MKDOCS_2_WARNING=1 "$venv/bin/mkdocs" build --strict "$@"
