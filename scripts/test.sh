#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh), then runs lint, format check and the whole test suite.
# The test modules run in parallel workers (pytest-xdist), each starting and stopping its own
# pair of local Kafka clusters; MM2_ASSETS_TEST_WORKERS sets how many (default 3: the suite
# mostly waits on brokers and Spark, so 3 fit 2 cores). Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
exec .venv/bin/python -m pytest -n "${MM2_ASSETS_TEST_WORKERS:-3}" --dist loadfile "$@"
