"""Asset checks of each flow: replication lag, target topics present, checkpoint freshness."""
