#!/usr/bin/env bash
# Sets everything up, starts the two local Kafka clusters (primary, backup), seeds demo topics,
# runs the replication job once, then serves the Dagster UI (http://127.0.0.1:3000) with the
# daemon so sensors keep the backup fresh. Ctrl-C or SIGTERM stops Dagster and the clusters
# within 30 s, also when started without a terminal (as a service manager starts it).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
export DAGSTER_HOME=${DAGSTER_HOME:-$PWD/.dagster_home}
mkdir -p "$DAGSTER_HOME"
# The run concurrency limits of production (one pass or follower per flow), on local SQLite.
[[ -f $DAGSTER_HOME/dagster.yaml ]] || .venv/bin/mm2-assets instance init "$DAGSTER_HOME" >/dev/null
# A partition-range run's plan as one event, not one per topic (docs/production-dagster.md).
export DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS=${DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS:-true}
.venv/bin/mm2-assets kafka up
trap '.venv/bin/mm2-assets kafka down' EXIT
trap 'exit 130' INT TERM
if [[ -x scripts/demo_job.sh ]]; then ./scripts/demo_job.sh; fi
# Dagster runs as a job of its own (job control on), so that SIGTERM to this script, not only
# Ctrl-C in a terminal, stops it the way Ctrl-C does: SIGINT to its whole process group (the
# webserver, the daemon, the code server and any follower run with its Spark JVM). Without job
# control a background job would ignore SIGINT, and bash defers traps until a foreground
# command ends.
set -m
.venv/bin/dagster dev -w workspace.yaml -h 127.0.0.1 -p "${DAGSTER_PORT:-3000}" </dev/null &
dagster=$!
# Whether any process of Dagster's group is still alive.
alive() { kill -0 -- "-$dagster" 2>/dev/null; }
# Stops Dagster within 15 s whatever it does: Ctrl-C's SIGINT first (its own shutdown: runs
# end, a follower fences its writers and stops its Spark JVM), SIGTERM after 12 s, SIGKILL
# after 15 s, leaving `kafka down` (both brokers at once) the rest of the 30 s promised.
# Each wait ends as soon as the group is gone. A follower killed here loses nothing: the
# next writer of its flow fences its transactions before copying.
stop_dagster() {
  local signal tries
  for signal in INT TERM; do
    alive || return 0
    kill "-$signal" -- "-$dagster" 2>/dev/null || true
    tries=$([[ $signal == INT ]] && echo 24 || echo 6)
    while ((tries-- > 0)) && alive; do sleep 0.5; done
  done
  if alive; then
    echo "demo.sh: Dagster did not stop within 15 s; killing what is left:" >&2
    pgrep -a -g "$dagster" | cut -c1-200 >&2 || true
    kill -KILL -- "-$dagster" 2>/dev/null || true
  fi
}
trap 'stop_dagster; exit 130' INT TERM
wait $dagster
