#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh), then runs lint, format check and the whole test suite.
# The test modules run in parallel workers (pytest-xdist), each starting and stopping its own
# pair of local Kafka clusters; MM2_ASSETS_TEST_WORKERS sets how many (default 4: with 3, the two
# cores were idle a quarter of the time, waiting on brokers, processes and timeouts; with 4, they are
# 90-100 % busy and the suite is done 6 % sooner). They take the modules in the order
# mm2_assets_tests/conftest.py gives, the slowest first. Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
exec .venv/bin/python -m pytest -n "${MM2_ASSETS_TEST_WORKERS:-4}" --dist loadfile --no-loadscope-reorder "$@"
