"""`topic_configs`: MM2's topic config and partition sync (KIP-894) as a partitioned asset."""
