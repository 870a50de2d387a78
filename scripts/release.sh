#!/usr/bin/env bash
# Builds a release into dist/ and checks it, in one command: the sdist and the wheel (hatchling,
# the build backend), their metadata as an index would read it (twine check --strict), and what
# each archive holds (tests/test_packaging.py: exactly the tracked package sources, the tracked
# tree). Runs in .venv-release, a venv of its own (this tree and the release dependency group;
# first run, or after pyproject.toml changed: see scripts/_venv.sh); a second run needs no
# network. Run it on a clean checkout: an untracked file would end up in the sdist and fail it.
# Publishing is left to you: twine upload dist/* (not done here).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
VENV=${RELEASE_VENV:-.venv-release} ensure_venv release --group release
rm -rf dist
"$venv/bin/python" - <<'PY'
from hatchling.build import build_sdist, build_wheel

for build in (build_sdist, build_wheel):
    print("built dist/" + build("dist"))
PY
"$venv/bin/twine" check --strict dist/*
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests/test_packaging.py \
  -k "wheel or sdist or package_sources or version or development_pins"
