"""``franz reassign-partitions``: kafka-reassign-partitions.sh over HTTP.

    --execute  POST /v3/clusters/{c}/reassignments with the file's JSON (Kafka's format:
               {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]});
               prints the current assignment first, as Kafka's tool does, to roll back
    --verify   for each partition of the file: GET .../partitions/{p}/reassignment (200:
               still moving) and .../partitions/{p}/replicas (the replicas now); exit 1
               while any partition is moving or differs from the file
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from app.commands.output import print_json
from app.http_client import FranzClient, RequestFailed


def run(args: argparse.Namespace, client: FranzClient) -> int:
    if not args.reassignment_json_file:
        args.subparser.error("needs --reassignment-json-file")
    try:
        with open(args.reassignment_json_file, encoding="utf-8") as f:
            plan = json.load(f)
        entries = [(str(e["topic"]), int(e["partition"]), [int(r) for r in e["replicas"]])
                   for e in plan["partitions"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        args.subparser.error(f"--reassignment-json-file: {exc}")
    if args.action == "execute":
        return _execute(args, client, plan, entries)
    return _verify(args, client, entries)


def _replicas(client: FranzClient, topic: str, partition: int) -> list[int]:
    rows = client.v3_list("topics", topic, "partitions", partition, "replicas")
    return [int(r["broker_id"]) for r in rows]


def _execute(args: argparse.Namespace, client: FranzClient, plan: Any,
             entries: list[tuple[str, int, list[int]]]) -> int:
    current = {"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": _replicas(client, t, p)} for t, p, _ in entries]}
    resp = client.request("POST", client.v3("reassignments"), json=plan)
    if args.output == "json":
        print_json({"current": current, "proposed": json.loads(resp.content)})
        return 0
    print("Current partition replica assignment\n")
    print(json.dumps(current, separators=(",", ":")))
    print("\nSave this to use as the --reassignment-json-file option during rollback")
    print(f"Successfully started partition reassignment{'s' if len(entries) > 1 else ''} for "
          + ",".join(f"{t}-{p}" for t, p, _ in entries))
    return 0


def _verify(args: argparse.Namespace, client: FranzClient,
            entries: list[tuple[str, int, list[int]]]) -> int:
    status = []
    for topic, partition, target in entries:
        try:
            client.request("GET", client.v3("topics", topic, "partitions", partition,
                                            "reassignment"))
            moving = True
        except RequestFailed as exc:
            if exc.status != 404:
                raise
            moving = False
        now = [] if moving else _replicas(client, topic, partition)
        if moving:
            text = "is still in progress."
        elif sorted(now) == sorted(target):
            text = "is completed."
        else:
            text = f"failed: the replicas are {now}, not {target}."
        status.append((topic, partition, moving, text))
    if args.output == "json":
        print_json([{"topic": t, "partition": p, "in_progress": m, "status": s}
                    for t, p, m, s in status])
    else:
        print("Status of partition reassignment:")
        for t, p, _, text in status:
            print(f"Reassignment of partition {t}-{p} {text}")
    done = all(s.endswith("is completed.") for *_, s in status)
    if not done:
        sys.stdout.flush()
    return 0 if done else 1
