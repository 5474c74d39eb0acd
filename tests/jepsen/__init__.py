"""Jepsen-style network fault tests: hosts in network namespaces with nftables faults
(``net``), a franz cluster in them (``cluster``), the queue workload (``workload``), the
recorded history and its checker (``checker``). docs/fault-testing.md describes them."""
