"""Small-file I/O from the event loop: aiofiles against one hop to a thread pool.

franz's event loop never touches a file itself; what touches files (checkpoints, the
leader-epoch and producer-state snapshots, segment appends and reads) runs as one
function on the storage pool (``core.storage.blocking.run_blocking``). aiofiles, the
stack's other option, sends every call (open, write, flush, read, close) to a thread on
its own. This measures one typical unit of work both ways: write a 4 KiB file and read it
back, sequentially and 200 at a time, on the same thread pool size (4, as the storage
pool). Needs ``aiofiles`` (``pip install aiofiles``); franz itself does not.

    python3 benchmarks/file_io_bench.py [--ops 2000] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor

DATA = b"x" * 4096
CONCURRENCY = 200


def _write_read(path: str) -> bytes:
    with open(path, "wb") as f:
        f.write(DATA)
    with open(path, "rb") as f:
        return f.read()


async def _timed(fn: Callable[[str], Awaitable[bytes]], d: str, ops: int) -> tuple[float, float]:
    t = time.perf_counter()
    for i in range(ops):
        await fn(os.path.join(d, f"s{i % 50}"))
    sequential = (time.perf_counter() - t) / ops * 1e6
    sem = asyncio.Semaphore(CONCURRENCY)

    async def one(i: int) -> bytes:
        async with sem:
            return await fn(os.path.join(d, f"c{i % 50}"))

    t = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(ops)))
    concurrent = (time.perf_counter() - t) / ops * 1e6
    return sequential, concurrent


async def main(ops: int, rounds: int) -> dict[str, dict[str, float]]:
    import aiofiles  # type: ignore[import-untyped]

    pool = ThreadPoolExecutor(4)
    loop = asyncio.get_running_loop()
    loop.set_default_executor(pool)  # aiofiles uses the loop's default executor

    async def via_aiofiles(path: str) -> bytes:
        async with aiofiles.open(path, "wb") as f:
            await f.write(DATA)
        async with aiofiles.open(path, "rb") as f:
            return bytes(await f.read())

    async def via_pool(path: str) -> bytes:
        return await loop.run_in_executor(pool, _write_read, path)

    samples: dict[str, list[tuple[float, float]]] = {"aiofiles": [], "one hop": []}
    with tempfile.TemporaryDirectory() as d:
        for _ in range(rounds):  # interleaved, so both see the same machine
            samples["aiofiles"].append(await _timed(via_aiofiles, d, ops))
            samples["one hop"].append(await _timed(via_pool, d, ops))
    return {name: {"sequential_us": statistics.median(s for s, _ in runs),
                   "concurrent_us": statistics.median(c for _, c in runs)}
            for name, runs in samples.items()}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()
    out = asyncio.run(main(min(args.ops, 100_000), min(args.rounds, 20)))
    for name, r in out.items():
        print(f"{name:9s} {r['sequential_us']:7.0f} us/op sequential "
              f"{r['concurrent_us']:7.0f} us/op {CONCURRENCY} at a time")
    if args.json:
        with open(args.json, "w") if args.json != "-" else sys.stdout as f:
            json.dump(out, f, indent=2)
