"""``franz leader-election``: kafka-leader-election.sh --election-type PREFERRED over HTTP.

    POST /v3/clusters/{c}/preferred-replica-election with Kafka's election JSON
    ({"version":1,"partitions":[{"topic":"t","partition":0}]}) built from --topic and
    --partition or read from --path-to-json-file; --all-topic-partitions sends no body
    (every partition). The controller moves each leader to its first replica where that
    replica is alive and in sync; the command returns once the request is accepted.
"""

from __future__ import annotations

import argparse
import json

from app.commands.output import print_json
from app.http_client import FranzClient


def run(args: argparse.Namespace, client: FranzClient) -> int:
    chosen = sum(bool(x) for x in (args.topic, args.all_topic_partitions, args.path_to_json_file))
    if chosen != 1:
        args.subparser.error("give one of --topic, --all-topic-partitions, --path-to-json-file")
    if args.partition is not None and not args.topic:
        args.subparser.error("--partition goes with --topic")
    body = None
    if args.path_to_json_file:
        try:
            with open(args.path_to_json_file, encoding="utf-8") as f:
                body = json.load(f)
        except (OSError, ValueError) as exc:
            args.subparser.error(f"--path-to-json-file: {exc}")
    elif args.topic:
        partitions = [args.partition] if args.partition is not None else [
            int(p["partition_id"]) for p in client.v3_list("topics", args.topic, "partitions")]
        body = {"version": 1, "partitions": [{"topic": args.topic, "partition": p}
                                             for p in partitions]}
    resp = client.request("POST", client.v3("preferred-replica-election"), json=body)
    named = json.loads(resp.content)["partitions"]
    if args.output == "json":
        print_json(named)
    else:
        print(f"Preferred replica election requested for {len(named)} partition(s); the "
              "controller moves each leader to its preferred replica where that replica is "
              "alive and in sync.")
    return 0
