"""Idempotency-Key on produce: a retried request gets the first one's answer and writes
nothing (docs/delivery.md). Claims and answers live in the replicated internal topic
``__franz_idempotency``; the leader of a key's partition is its coordinator."""
