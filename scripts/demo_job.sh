#!/usr/bin/env bash
# The main job on the embedded default: seed the primary cluster, replicate once through
# Dagster (runs recorded in $DAGSTER_HOME), and show what landed on the backup.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/mm2-assets demo seed
.venv/bin/mm2-assets replicate
echo "--- the billing group's offsets translated for the backup (failover runbook) ---"
.venv/bin/mm2-assets translate-offsets --config mm2_assets/demo.properties \
  --cluster backup --source primary --group billing
