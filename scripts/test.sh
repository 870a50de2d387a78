#!/usr/bin/env bash
# Sets up .venv with the test dependency group (first run, or after pyproject.toml changed: see
# scripts/_venv.sh) and runs every check: ruff (lint + format), mypy --strict, and pytest with
# branch coverage >= 95%. Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
ensure_venv test --group test
"$venv/bin/ruff" check .
"$venv/bin/ruff" format --check .
"$venv/bin/mypy" --strict src tests
"$venv/bin/pytest" --cov --cov-branch --cov-report=term --cov-fail-under=95 "$@"
