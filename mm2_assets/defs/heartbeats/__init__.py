"""Checkpoints, synced consumer group offsets (KIP-545) and heartbeats of each flow."""
