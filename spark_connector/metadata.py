"""Driver side: which topic-partitions a query reads and where its ranges start and end,
resolved over HTTP (``GET /topics``, ``/topics/{t}/partitions``, ``.../offsets``)."""

from __future__ import annotations

import re

from spark_connector.client import FranzClient
from spark_connector.offsets import describe
from spark_connector.options import (
    EARLIEST,
    LATEST,
    FranzOptionError,
    OffsetSpec,
    ReaderConf,
    TimestampSpec,
    TopicPartition,
)

Bounds = dict[TopicPartition, tuple[int, int]]  # (log start offset, high watermark)


class Metadata:
    def __init__(self, client: FranzClient, conf: ReaderConf) -> None:
        self.client = client
        self.conf = conf
        self._kw = {
            "retries": conf.fetch_offset_retries,
            "backoff_ms": conf.fetch_offset_retry_interval_ms,
        }

    def discover(self) -> list[TopicPartition]:
        """The partitions the subscription covers now. A subscribed topic that does not
        exist has none (a stream picks it up once it exists); internal topics (``__``)
        never match a pattern."""
        conf = self.conf
        if conf.assign:
            return list(conf.assign)
        if conf.pattern is not None:
            rx = re.compile(conf.pattern)
            topics = [
                t
                for t in self.client.topics(**self._kw)
                if not t.startswith("__") and rx.fullmatch(t)
            ]
        else:
            topics = list(conf.subscribe)
        out: list[TopicPartition] = []
        for topic in sorted(topics):
            parts = self.client.partitions(topic, **self._kw)
            out += [(topic, p) for p in parts or ()]
        return out

    def bounds(self, tps: list[TopicPartition]) -> Bounds:
        """``(log start, high watermark)`` of each partition that exists."""
        out: Bounds = {}
        for tp in tps:
            b = self.client.offsets(tp[0], tp[1], **self._kw)
            if b is not None:
                out[tp] = b
        return out

    def require(self, tps: list[TopicPartition], bounds: Bounds) -> None:
        missing = [tp for tp in tps if tp not in bounds]
        if missing:
            raise FranzOptionError(
                f"Option assign names partitions that do not exist: {describe(missing)}"
            )

    # --- start and end -----------------------------------------------------------------

    def _specific(self, name: str, spec: OffsetSpec, bounds: Bounds) -> dict[TopicPartition, int]:
        named, known = set(spec.offsets), set(bounds)
        if named != known:
            parts = []
            if known - named:
                parts.append(f"no offset for {describe(known - named)}")
            if named - known:
                parts.append(
                    f"{describe(named - known)} not read by this query "
                    f"({self.conf.describe_subscription()}) or not existing"
                )
            raise FranzOptionError(
                f"Option {name} must give an offset for every partition read and no other "
                f"({'; '.join(parts)}); use -2 for earliest, -1 for latest"
            )
        out = {}
        for tp, off in spec.offsets.items():
            lo, hi = bounds[tp]
            if off == EARLIEST:
                out[tp] = lo
            elif off == LATEST:
                out[tp] = hi
            elif off > hi:
                raise FranzOptionError(
                    f"Option {name}: offset {off} of {tp[0]}-{tp[1]} is past the partition's "
                    f"end offset {hi}"
                )
            else:
                out[tp] = off  # below the log start: data loss, reported by the read
        return out

    def _by_time(
        self, name: str, spec: TimestampSpec, bounds: Bounds, *, strategy: str
    ) -> dict[TopicPartition, int]:
        if spec.at_all is not None:
            stamps = {tp: spec.at_all for tp in bounds}
        else:
            named, known = set(spec.per_partition), set(bounds)
            if named != known:
                raise FranzOptionError(
                    f"Option {name} must give a timestamp for every partition read and no other "
                    f"(read: {describe(known) or 'none'}; given: {describe(named)})"
                )
            stamps = dict(spec.per_partition)
        found = self.client.offsets_for_times(stamps)
        out = {}
        for tp, off in found.items():
            if off is None:
                if strategy == "error":
                    raise FranzOptionError(
                        f"Option {name}: no record of {tp[0]}-{tp[1]} has a timestamp >= "
                        f"{stamps[tp]}; set startingOffsetsByTimestampStrategy=latest to "
                        "start such partitions at their end"
                    )
                off = bounds[tp][1]
            out[tp] = off
        return out

    def starts(self, bounds: Bounds, default: str) -> dict[TopicPartition, int]:
        """Start offsets from the timestamp options, else ``startingOffsets``, else
        ``default`` (``earliest`` for batch, ``latest`` for streams)."""
        conf = self.conf
        if conf.starting_ts is not None:
            name = (
                "startingTimestamp"
                if conf.starting_ts.at_all is not None
                else "startingOffsetsByTimestamp"
            )
            return self._by_time(name, conf.starting_ts, bounds, strategy=conf.starting_ts_strategy)
        spec = conf.starting or OffsetSpec(default)
        if spec.kind == "specific":
            return self._specific("startingOffsets", spec, bounds)
        pick = 0 if spec.kind == "earliest" else 1
        return {tp: b[pick] for tp, b in bounds.items()}

    def ends(self, bounds: Bounds) -> dict[TopicPartition, int]:
        conf = self.conf
        if conf.ending_ts is not None:
            name = (
                "endingTimestamp"
                if conf.ending_ts.at_all is not None
                else "endingOffsetsByTimestamp"
            )
            return self._by_time(name, conf.ending_ts, bounds, strategy="latest")
        if conf.ending.kind == "specific":
            return self._specific("endingOffsets", conf.ending, bounds)
        return {tp: b[1] for tp, b in bounds.items()}
