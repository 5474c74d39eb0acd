"""What operators see and change: per-topic traffic counters (``topic_stats``)."""
