"""``franz bench``'s load generator, shared with ``benchmarks/http_bench.py`` and
``benchmarks/run.py`` (docs/cli.md "bench", benchmarks/README.md).

    http1       raw HTTP/1.1 keep-alive client over asyncio streams (and an httpx twin)
    stats       percentiles and medians
    workloads   closed-loop and paced load, end-to-end latency probe, CPU accounting,
                server processes (spawn pinned with taskset, wait, stop)
    ceiling     the same-shape echo servers franz is compared with
    progress    the progress line on stderr

Nothing here imports ``api`` or ``core``: the generator speaks HTTP only.
"""
