"""Percentiles and medians of benchmark samples.

``pct`` is the nearest-rank percentile on the sorted samples: the element at index
``round(p / 100 * (n - 1))``, so p0 is the minimum, p100 the maximum, and p50 of an odd
count the middle element (always one of the samples, never an interpolation).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

#: The percentiles every latency summary reports (name -> p).
PERCENTILES: tuple[tuple[str, float], ...] = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0),
                                               ("p999", 99.9))


def pct(sorted_values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0-100) of already sorted values; NaN for none."""
    if not sorted_values:
        return float("nan")
    if not 0.0 <= p <= 100.0:
        raise ValueError(f"percentile must be within 0-100, got {p}")
    k = min(len(sorted_values) - 1, max(0, round(p / 100 * (len(sorted_values) - 1))))
    return sorted_values[k]


def med(values: Iterable[float | None]) -> float | None:
    """Median of the values that are not None (and not NaN); None when there are none."""
    vals = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return statistics.median(vals) if vals else None


def latency_summary(seconds: Iterable[float], *, scale: float = 1e3) -> dict[str, Any]:
    """p50/p90/p99/p999/max/mean of latencies given in seconds, in ms (``scale``);
    the values are None when there are no samples. ``samples`` is the count."""
    lat = sorted(seconds)
    out: dict[str, Any] = {"samples": len(lat)}
    for name, p in PERCENTILES:
        out[name] = scale * pct(lat, p) if lat else None
    out["max"] = scale * lat[-1] if lat else None
    out["mean"] = scale * statistics.fmean(lat) if lat else None
    return out
