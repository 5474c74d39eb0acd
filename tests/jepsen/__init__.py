"""Jepsen-style network fault tests: hosts in network namespaces (``net``), a franz
cluster in them (``cluster``), a recorded history and its checker (``history``,
``checker``), the queue workload (``workload``). docs/fault-testing.md describes them."""
