"""Pure pieces of the ``franz`` admin commands: URL handling, input batching, tables,
Kafka's describe layout. The commands themselves run in tests/integration/test_cli.py."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator

import pytest

from app.commands.output import print_table
from app.commands.produce import batches
from app.commands.topics import format_topic
from app.http_client import normalize_url


@pytest.mark.parametrize(
    ("given", "url"),
    [
        ("127.0.0.1:8082", "http://127.0.0.1:8082"),
        ("http://localhost:8082/", "http://localhost:8082"),
        ("https://franz.example.com", "https://franz.example.com"),
    ],
)
def test_normalize_url(given: str, url: str) -> None:
    assert normalize_url(given) == url


@pytest.mark.parametrize("bad", ["ftp://x", "http://", "localhost:port"])
def test_normalize_url_refuses(bad: str) -> None:
    with pytest.raises(ValueError):
        normalize_url(bad)


def _batches(data: bytes, max_lines: int) -> Iterator[tuple[int, list[bytes]]]:
    read, write = os.pipe()
    os.write(write, data)
    os.close(write)
    try:
        yield from batches(read, max_lines)
    finally:
        os.close(read)


def test_batches_split_lines_and_keep_their_numbers() -> None:
    got = list(_batches(b"a\r\nb\n\nc\nd\ne", 2))
    assert got == [(1, [b"a", b"b"]), (3, [b"", b"c"]), (5, [b"d", b"e"])]


def test_batches_of_empty_input() -> None:
    assert list(_batches(b"", 10)) == []
    assert list(_batches(b"\n", 10)) == [(1, [b""])]


def test_print_table_aligns_and_marks_missing_values() -> None:
    out = io.StringIO()
    print_table(("GROUP", "LAG", "CONSUMER-ID"), [("g", 12, None), ("group-2", None, "")],
                file=out)
    assert out.getvalue() == (
        "GROUP    LAG  CONSUMER-ID\n"
        "g        12   -\n"
        "group-2  -    -\n"
    )


def test_format_topic_is_kafkas_layout() -> None:
    topic = {
        "topic": "t", "topic_id": None, "partition_count": 2, "replication_factor": 2,
        "configs": {"retention.ms": "1", "cleanup.policy": "compact"},
        "partitions": [
            {"partition": 0, "leader": 1, "replicas": [1, 0], "isr": [1, 0]},
            {"partition": 1, "leader": None, "replicas": [0, 1], "isr": []},
        ],
    }
    assert format_topic(topic) == (
        "Topic: t\tTopicId: -\tPartitionCount: 2\tReplicationFactor: 2\t"
        "Configs: cleanup.policy=compact,retention.ms=1\n"
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,0\tIsr: 1,0\n"
        "\tTopic: t\tPartition: 1\tLeader: none\tReplicas: 0,1\tIsr: \n"
    )
