"""Per-topic traffic counters of one broker, Kafka's ``BrokerTopicStats``: records and
bytes appended for producers and returned to readers, as plain integers.

The router bumps them on the client paths: ``Router.append`` after a produce batch is
written (records and bytes of the batch), ``Router.fetch`` after a read (bytes of the
batches returned, records between the requested offset and the end of what a reader
may see). Replication traffic (followers' fetches, appends forwarded from
another broker, the group coordinator's writes) goes to the replica manager directly and
is not counted, so every client request is counted once, by the broker that served it.
Reads of internal topics (the coordinator loading ``__consumer_offsets``) are left out.

``api.metrics`` exports the counters (``franz_server_brokertopicmetrics_*_total``).
Event-loop only; the counters only grow. Cheap on purpose: the produce path pays one
dict lookup and two additions per partition batch.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.broker.types import is_internal_topic
from core.storage.log import FetchData


@dataclass(slots=True)
class TopicCounters:
    """Totals for one topic since the broker started."""

    messages_in: int = 0
    bytes_in: int = 0
    messages_out: int = 0
    bytes_out: int = 0


class BrokerTopicStats:
    """topic -> :class:`TopicCounters`; a topic appears on its first produce or read."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicCounters] = {}

    def _of(self, topic: str) -> TopicCounters:
        counters = self.topics.get(topic)
        if counters is None:
            counters = self.topics[topic] = TopicCounters()
        return counters

    def record_append(self, topic: str, *, records: int, size: int) -> None:
        """A batch of ``records`` records, ``size`` bytes on the wire, was written."""
        counters = self._of(topic)
        counters.messages_in += records
        counters.bytes_in += size

    def record_fetch(self, topic: str, data: FetchData, *, offset: int,
                     high_watermark: int) -> None:
        """A read from ``offset`` returned ``data`` (whole batches). Records are counted
        from the offset asked for up to the end of the batches or the high watermark,
        whichever comes first: exact, except for the offsets compaction removed."""
        self.record_read(topic, len(data.data), data.high_offset, offset=offset,
                         high_watermark=high_watermark)

    def record_read(self, topic: str, size: int, high_offset: int, *, offset: int,
                    high_watermark: int) -> None:
        """``record_fetch`` of ``size`` bytes of batches ending before ``high_offset``
        (a Kafka Fetch's file region, sent without being read here)."""
        if not size or is_internal_topic(topic):
            return
        counters = self._of(topic)
        counters.bytes_out += size
        counters.messages_out += max(0, min(high_offset, high_watermark) - offset)
