"""BrokerTopicStats: the per-topic traffic counters behind the brokertopicmetrics."""

from __future__ import annotations

from core.broker.cluster.topic_stats import BrokerTopicStats, TopicCounters
from core.storage.log import FetchData


def test_appends_add_records_and_bytes() -> None:
    stats = BrokerTopicStats()
    stats.record_append("a", records=3, size=120)
    stats.record_append("a", records=2, size=80)
    stats.record_append("b", records=1, size=70)
    assert stats.topics == {"a": TopicCounters(5, 200), "b": TopicCounters(1, 70)}


def test_fetch_counts_from_the_requested_offset_to_the_end_of_what_is_visible() -> None:
    stats = BrokerTopicStats()
    # batches 10..19 and 20..29 came back, the reader asked from 15, the HW is 25
    stats.record_fetch("a", FetchData(b"x" * 300, 10, 30), offset=15, high_watermark=25)
    assert stats.topics["a"] == TopicCounters(messages_out=10, bytes_out=300)
    # all of it visible
    stats.record_fetch("a", FetchData(b"y" * 100, 30, 40), offset=30, high_watermark=50)
    assert stats.topics["a"] == TopicCounters(messages_out=20, bytes_out=400)


def test_empty_reads_and_internal_topics_are_not_counted() -> None:
    stats = BrokerTopicStats()
    stats.record_fetch("a", FetchData(b"", 5, 5), offset=5, high_watermark=5)
    stats.record_fetch("__consumer_offsets", FetchData(b"z" * 50, 0, 4), offset=0,
                       high_watermark=4)
    assert stats.topics == {}
