#!/usr/bin/env bash
# Sets up .venv with the test extra (first run only, then just refreshes the install) and runs
# every check: ruff (lint + format), mypy --strict, and pytest with branch coverage >= 95%.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then "$python" -m venv .venv; fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test]'
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy --strict src tests
.venv/bin/pytest --cov --cov-branch --cov-report=term --cov-fail-under=95 "$@"
