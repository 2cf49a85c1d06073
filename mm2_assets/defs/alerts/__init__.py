"""Alerting: pluggable sinks and the sensors that feed them (failed runs, failed checks)."""
