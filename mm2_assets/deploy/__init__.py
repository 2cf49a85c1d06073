"""Dagster's production deployment: the PostgreSQL server for trying it locally and the
instance configuration (`dagster.yaml`) with the run concurrency limits."""
