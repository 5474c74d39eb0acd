"""Cluster tests: franz against real external components (a real ZooKeeper server)."""
