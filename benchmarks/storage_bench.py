"""Storage hot paths, measured in-process on real files.

    python benchmarks/storage_bench.py [--batches 2000] [--records 1000] [--size 100]

Cases: encode a 1000-record batch (C builder), append batches to a partition log
(leader path: validation, offset patching, index maintenance), read them back from the
tail (pread of whole batches), decode batches into records, and recovery of an
unflushed log (CRC validation and index rebuild). Prints one line per case with
records/s and MB/s; medians of --repeat runs.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from core.clock import SystemClock
from core.storage.config import LogConfig
from core.storage.log import PartitionLog
from core.storage.records import build_batch_from_tuples, decode_records


def _batch(records: int, size: int) -> bytearray:
    value = b"x" * size
    now = int(time.time() * 1000)
    return build_batch_from_tuples((None, value, [], now) for _ in range(records))


def run(batches: int, records: int, size: int, repeat: int) -> dict[str, float]:
    results: dict[str, list[float]] = {}

    def record(name: str, seconds: float, n_records: int, n_bytes: int) -> None:
        results.setdefault(name, []).append(seconds)
        results.setdefault(name + ":n", [n_records, n_bytes])

    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(200):
            _batch(records, size)
        record("encode batch (C builder)", time.perf_counter() - t, 200 * records, 200 * records * size)

        template = _batch(records, size)
        tmp = Path(tempfile.mkdtemp(prefix="franz-bench-"))
        try:
            log_dir = tmp / "bench-0"
            cfg = LogConfig.from_overrides({"segment.bytes": str(256 * 1024 * 1024)})
            plog = PartitionLog.open(log_dir, cfg, clock=SystemClock())
            t = time.perf_counter()
            for _ in range(batches):
                plog.append_as_leader(bytearray(template), leader_epoch=0)
            record("append (leader path)", time.perf_counter() - t, batches * records,
                   batches * len(template))

            t = time.perf_counter()
            offset, n, nbytes = 0, 0, 0
            while offset < plog.log_end_offset:
                data = plog.read(offset, 1024 * 1024)
                nbytes += len(data.data)
                offset = data.high_offset
                n += 1
            record("read 1 MiB fetches (raw bytes)", time.perf_counter() - t, batches * records, nbytes)

            t = time.perf_counter()
            data = plog.read(0, 4 * 1024 * 1024)
            recs = decode_records(data.data)
            record("decode batches to records", time.perf_counter() - t, len(recs), len(data.data))
            plog.close()

            t = time.perf_counter()
            plog = PartitionLog.open(log_dir, cfg, clock=SystemClock(), clean_shutdown=False)
            record("recovery (CRC + index rebuild)", time.perf_counter() - t, batches * records,
                   batches * len(template))
            plog.close()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    out: dict[str, float] = {}
    for name, times in results.items():
        if name.endswith(":n"):
            continue
        n_records, n_bytes = results[name + ":n"]
        med = statistics.median(times)
        out[name] = n_records / med
        print(f"{name:34s} {n_records / med / 1e6:8.2f} M records/s {n_bytes / med / 2**20:9.1f} MiB/s")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=2000)
    ap.add_argument("--records", type=int, default=1000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    run(a.batches, a.records, a.size, a.repeat)


if __name__ == "__main__":
    main()
