#!/usr/bin/env bash
# One command from a fresh machine to committed-style results: sets up (venv, Kafka and MM2
# jars from Maven Central, Spark class archive), then runs the throughput benchmark (ours vs
# Apache MM2 vs the raw client ceiling) and the latency benchmark. Arguments go to bench.py,
# e.g. `scripts/bench.sh --records 200000 --repeats 1`; LATENCY=0 skips the latency mode.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/python bench/bench.py "$@"
if [[ ${LATENCY:-1} != 0 ]]; then
  .venv/bin/python bench/latency.py
fi
