#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh), then runs lint, format check and the whole test suite.
# The suite starts and stops its own pair of local Kafka clusters. Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
exec .venv/bin/python -m pytest "$@"
