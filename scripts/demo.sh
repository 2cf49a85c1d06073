#!/usr/bin/env bash
# Sets everything up, starts the two local Kafka clusters (primary, backup), seeds demo topics,
# runs the replication job once, then serves the Dagster UI (http://127.0.0.1:3000) with the
# daemon so sensors keep the backup fresh. Ctrl-C stops Dagster and the clusters.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
export DAGSTER_HOME=${DAGSTER_HOME:-$PWD/.dagster_home}
mkdir -p "$DAGSTER_HOME"
# A partition-range run's plan as one event, not one per topic (README "Scale").
export DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS=${DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS:-true}
.venv/bin/mm2-assets kafka up
trap '.venv/bin/mm2-assets kafka down' EXIT
trap 'exit 130' INT TERM
if [[ -x scripts/demo_job.sh ]]; then ./scripts/demo_job.sh; fi
.venv/bin/dagster dev -w workspace.yaml -h 127.0.0.1 -p "${DAGSTER_PORT:-3000}"
