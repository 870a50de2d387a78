#!/usr/bin/env bash
# Sets up .venv with the docs extra (first run only, then just refreshes the install) and builds
# the site into site/ with warnings as errors. The build generates the lifecycle diagrams, the
# limit tables and the examples' output from the code, and the API reference from the
# docstrings; any warning (a broken link, an undocumented marker, a failing example) fails it.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then "$python" -m venv .venv; fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[docs]'
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict "$@"
