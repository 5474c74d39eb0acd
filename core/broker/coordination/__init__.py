"""The coordinator runtime shared by the coordinators that keep their state in an
internal topic (consumer groups, the Schema Registry, Idempotency-Keys)."""
