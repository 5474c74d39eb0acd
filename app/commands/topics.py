"""``franz topics``: kafka-topics.sh over the v3 API.

    --create    POST   /topics  (topic_name, partitions_count, replication_factor, configs)
    --list      GET    /topics
    --describe  GET    /topics/{t}, /topics/{t}/configs, /topics/{t}/partitions,
                       /topics/{t}/partitions/{p}/replicas (one per partition, in parallel)
    --alter     PATCH  /topics/{t} {"partitions_count"}; POST /topics/{t}/configs:alter
    --delete    DELETE /topics/{t}

``--describe`` prints what Kafka's tool prints: a topic line with its overridden configs
(source ``DYNAMIC_TOPIC_CONFIG``), then one line per partition with the leader, the
replicas in assignment order and the in-sync ones. Kafka's report options narrow it:
``--under-replicated-partitions``, ``--under-min-isr-partitions``,
``--at-min-isr-partitions`` and ``--unavailable-partitions`` (``GET /brokers`` for the
live ones) print the matching partition lines only; ``--topics-with-overrides`` the topic
lines of topics with overrides only.

``--list`` and ``--describe`` take ``--topic`` as Kafka does, as a regular expression the
whole name must match (``orders-.*``), when it has a character no topic name has; a
plain name (letters, digits, ``.``, ``_``, ``-``) is that one topic.
"""

from __future__ import annotations

import argparse
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from app.commands.output import print_json
from app.http_client import FranzClient, RequestFailed

_PARALLEL = 8
_UNKNOWN_TOPIC = 404
_KAFKA_BAD_REQUEST = 40002
#: The characters of a topic name: a --topic with any other is a regular expression.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9._-]+")


def run(args: argparse.Namespace, client: FranzClient) -> int:
    needs_topic = args.action in ("create", "alter", "delete")
    if needs_topic and not args.topic:
        args.subparser.error(f"--{args.action} needs --topic")
    if args.replication_factor is not None and args.action != "create":
        args.subparser.error("--replication-factor goes with --create")
    if (args.config or args.partitions is not None) and args.action not in ("create", "alter"):
        args.subparser.error("--config and --partitions go with --create or --alter")
    if args.delete_config and args.action != "alter":
        args.subparser.error("--delete-config goes with --alter")
    if args.action == "alter" and not (args.partitions or args.config or args.delete_config):
        args.subparser.error("--alter needs --partitions, --config or --delete-config")
    if args.report and args.action != "describe":
        args.subparser.error(f"--{args.report.replace('_', '-')} goes with --describe")
    action = {"create": _create, "list": _list, "describe": _describe, "alter": _alter,
              "delete": _delete}[args.action]
    return action(args, client)


def _missing(args: argparse.Namespace, exc: RequestFailed) -> int:
    """An unknown topic: fine with --if-exists, else Kafka's error."""
    if args.if_exists:
        return 0
    raise RequestFailed(exc.status, exc.code, f"Topic '{args.topic}' does not exist.") from exc


def _create(args: argparse.Namespace, client: FranzClient) -> int:
    body: dict[str, Any] = {"topic_name": args.topic}
    if args.partitions is not None:
        body["partitions_count"] = args.partitions
    if args.replication_factor is not None:
        body["replication_factor"] = args.replication_factor
    if args.config:
        body["configs"] = [{"name": k, "value": v} for k, v in args.config]
    try:
        client.request("POST", client.v3("topics"), json=body)
    except RequestFailed as exc:
        exists = exc.code == _KAFKA_BAD_REQUEST and "already exists" in exc.message
        if not (exists and args.if_not_exists):
            raise
    if args.output == "json":
        print_json(describe_topic(client, args.topic))
    else:
        print(f"Created topic {args.topic}.")
    return 0


def _pattern(args: argparse.Namespace) -> re.Pattern[str] | None:
    """``--topic`` as a regular expression (None for a plain name or no --topic)."""
    if not args.topic or _PLAIN_NAME.fullmatch(args.topic):
        return None
    try:
        return re.compile(args.topic)
    except re.error as exc:
        args.subparser.error(f"--topic: {args.topic!r} is not a valid regular expression: {exc}")
        raise  # unreachable: error() exits


def _names(args: argparse.Namespace, client: FranzClient) -> list[str]:
    """The listed topics --topic (a name or a pattern) and --exclude-internal select."""
    pattern = _pattern(args)
    names = []
    for t in client.v3_list("topics"):
        name = t["topic_name"]
        if args.exclude_internal and t["is_internal"]:
            continue
        if pattern is not None and not pattern.fullmatch(name):
            continue
        if pattern is None and args.topic and name != args.topic:
            continue
        names.append(name)
    return names


def _list(args: argparse.Namespace, client: FranzClient) -> int:
    names = _names(args, client)
    if args.output == "json":
        print_json(names)
    else:
        for name in names:
            print(name)
    return 0


def _describe(args: argparse.Namespace, client: FranzClient) -> int:
    pattern = _pattern(args)
    one = bool(args.topic) and pattern is None  # one topic, by name
    names = [args.topic] if one else _names(args, client)
    if pattern is not None and not names and not args.if_exists:
        raise RequestFailed(404, 40403, f"No topic matches '{args.topic}'.")
    live = ({b["broker_id"] for b in client.v3_list("brokers")}
            if args.report == "unavailable_partitions" else set())
    topics = []
    for name in names:
        try:
            topic, min_isr = _describe_with_min_isr(client, name)
        except RequestFailed as exc:
            if exc.status != _UNKNOWN_TOPIC:
                raise
            if one:
                return _missing(args, exc)
            continue  # deleted since it was listed
        if args.report:
            topic = _report(args.report, topic, min_isr, live)
            if topic is None:
                continue
        topics.append(topic)
    if args.output == "json":
        print_json(topics[0] if one and not args.report else topics)
        return 0
    for t in topics:
        sys.stdout.write(format_topic(t, header=args.report in (None, "topics_with_overrides"),
                                      partitions=args.report != "topics_with_overrides"))
    return 0


def _report(report: str, topic: dict[str, Any], min_isr: int,
            live: set[int]) -> dict[str, Any] | None:
    """The topic narrowed to what a report option selects (None: nothing of it)."""
    if report == "topics_with_overrides":
        return topic if topic["configs"] else None

    def selected(p: dict[str, Any]) -> bool:
        isr = len(p["isr"])
        if report == "under_replicated_partitions":
            return isr < len(p["replicas"])
        if report == "under_min_isr_partitions":
            return p["leader"] is None or isr < min_isr
        if report == "at_min_isr_partitions":
            return p["leader"] is not None and isr == min_isr
        return p["leader"] is None or p["leader"] not in live  # unavailable_partitions

    partitions = [p for p in topic["partitions"] if selected(p)]
    return {**topic, "partitions": partitions} if partitions else None


def _alter(args: argparse.Namespace, client: FranzClient) -> int:
    try:
        client.get_json(client.v3("topics", args.topic))
    except RequestFailed as exc:
        if exc.status != _UNKNOWN_TOPIC:
            raise
        return _missing(args, exc)
    done = []
    if args.partitions is not None:
        client.request("PATCH", client.v3("topics", args.topic),
                       json={"partitions_count": args.partitions})
        done.append(f"partitions increased to {args.partitions}")
    changes = [{"name": k, "value": v, "operation": "SET"} for k, v in args.config]
    changes += [{"name": k, "operation": "DELETE"} for k in args.delete_config]
    if changes:
        client.request("POST", client.v3("topics", args.topic, "configs:alter"),
                       json={"data": changes})
        if args.config:
            done.append("set " + ",".join(f"{k}={v}" for k, v in args.config))
        if args.delete_config:
            done.append("reset " + ",".join(args.delete_config))
    if args.output == "json":
        print_json(describe_topic(client, args.topic))
    else:
        print(f"Altered topic {args.topic}: {'; '.join(done)}.")
    return 0


def _delete(args: argparse.Namespace, client: FranzClient) -> int:
    try:
        client.request("DELETE", client.v3("topics", args.topic))
    except RequestFailed as exc:
        if exc.status != _UNKNOWN_TOPIC:
            raise
        return _missing(args, exc)
    if args.output == "json":
        print_json({"topic": args.topic, "deleted": True})
    else:
        print(f"Deleted topic {args.topic}.")
    return 0


# --- describe ----------------------------------------------------------------------------


def _broker_of(link: dict[str, str] | None) -> int | None:
    """The broker id at the end of a partition's ``leader`` replica link."""
    if not link:
        return None
    return int(link["related"].rstrip("/").rsplit("/", 1)[1])


def describe_topic(client: FranzClient, name: str) -> dict[str, Any]:
    """The topic as ``--output json`` shows it: name, id, counts, overridden configs and
    per partition the leader, replicas and ISR (RequestFailed 404 for an unknown one)."""
    return _describe_with_min_isr(client, name)[0]


def _describe_with_min_isr(client: FranzClient, name: str) -> tuple[dict[str, Any], int]:
    """``describe_topic`` and the topic's ``min.insync.replicas`` (the --*-min-isr-*
    reports' measure)."""
    topic = client.get_json(client.v3("topics", name))
    configs = client.v3_list("topics", name, "configs")
    partitions = client.v3_list("topics", name, "partitions")

    def replicas(p: dict[str, Any]) -> list[dict[str, Any]]:
        return client.v3_list("topics", name, "partitions", p["partition_id"], "replicas")

    with ThreadPoolExecutor(_PARALLEL) as pool:
        replica_lists = list(pool.map(replicas, partitions))
    min_isr = next((int(c["value"]) for c in configs
                    if c["name"] == "min.insync.replicas" and c["value"] is not None), 1)
    return {
        "topic": name,
        "topic_id": topic.get("topic_id"),
        "is_internal": topic["is_internal"],
        "partition_count": topic["partitions_count"],
        "replication_factor": topic["replication_factor"],
        "configs": {c["name"]: c["value"] for c in configs
                    if c["source"] == "DYNAMIC_TOPIC_CONFIG"},
        "partitions": [
            {
                "partition": p["partition_id"],
                "leader": _broker_of(p["leader"]),
                "replicas": [r["broker_id"] for r in reps],
                "isr": [r["broker_id"] for r in reps if r["is_in_sync"]],
            }
            for p, reps in zip(partitions, replica_lists, strict=True)
        ],
    }, min_isr


def format_topic(t: dict[str, Any], *, header: bool = True, partitions: bool = True) -> str:
    """Kafka's layout: a tab-separated topic line, then a tab-indented line per partition
    (``header`` / ``partitions`` false leave either out, as Kafka's report options do)."""

    def ids(values: list[int]) -> str:
        return ",".join(map(str, values))

    configs = ",".join(f"{k}={v}" for k, v in sorted(t["configs"].items()))
    lines = []
    if header:
        lines.append(
            f"Topic: {t['topic']}\tTopicId: {t['topic_id'] or '-'}\t"
            f"PartitionCount: {t['partition_count']}\t"
            f"ReplicationFactor: {t['replication_factor']}\tConfigs: {configs}")
    for p in t["partitions"] if partitions else ():
        leader = "none" if p["leader"] is None else p["leader"]
        lines.append(f"\tTopic: {t['topic']}\tPartition: {p['partition']}\tLeader: {leader}\t"
                     f"Replicas: {ids(p['replicas'])}\tIsr: {ids(p['isr'])}")
    return "".join(line + "\n" for line in lines)
