"""``franz consumer-groups``: kafka-consumer-groups.sh over the v3 API.

    --list           GET    /consumer-groups
    --describe       GET    /consumer-groups/{g}, /consumer-groups/{g}/offsets (franz)
    --reset-offsets  GET    /topics/{t}/partitions, .../partitions/{p}/offset;
                     POST   /consumer-groups/{g}/offsets:alter (franz; validate_only
                            for --dry-run)
    --delete         DELETE /consumer-groups/{g} (franz)

The reset computes the new offsets here, as Kafka's tool does (earliest, latest, or N
kept within [earliest, latest] with a warning), prints them, and writes them only with
``--execute``; the server refuses while the group has members.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from app.commands.output import print_json, print_table
from app.http_client import FranzClient, RequestFailed

DESCRIBE_HEADERS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                    "CONSUMER-ID", "HOST", "CLIENT-ID")
RESET_HEADERS = ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
_NOT_FOUND = 404


def run(args: argparse.Namespace, client: FranzClient) -> int:
    if args.action != "list" and not args.group:
        args.subparser.error(f"--{args.action} needs --group")
    if args.action == "reset-offsets":
        if not args.topic:
            args.subparser.error("--reset-offsets needs --topic")
        if args.to is None and args.to_offset is None:
            args.subparser.error("--reset-offsets needs --to-earliest, --to-latest or --to-offset")
    elif args.to is not None or args.to_offset is not None or args.execute or args.dry_run:
        args.subparser.error("--to-*, --dry-run and --execute go with --reset-offsets")
    action = {"list": _list, "describe": _describe, "reset-offsets": _reset,
              "delete": _delete}[args.action]
    return action(args, client)


def _group_or_none(client: FranzClient, group: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = client.get_json(client.v3("consumer-groups", group))
        return found
    except RequestFailed as exc:
        if exc.status == _NOT_FOUND:
            return None
        raise


def _does_not_exist(group: str) -> RequestFailed:
    return RequestFailed(_NOT_FOUND, _NOT_FOUND, f"Consumer group '{group}' does not exist.")


def _list(args: argparse.Namespace, client: FranzClient) -> int:
    groups = [(g["consumer_group_id"], g["state"]) for g in client.v3_list("consumer-groups")]
    if args.output == "json":
        print_json([{"group": g, "state": s} for g, s in groups] if args.state
                   else [g for g, _ in groups])
    elif args.state:
        print_table(("GROUP", "STATE"), groups)
    else:
        for g, _ in groups:
            print(g)
    return 0


def _describe(args: argparse.Namespace, client: FranzClient) -> int:
    group = _group_or_none(client, args.group)
    if group is None:
        raise _does_not_exist(args.group)
    try:
        rows = client.v3_list("consumer-groups", args.group, "offsets")
    except RequestFailed as exc:
        if exc.status != _NOT_FOUND:  # the group went away meanwhile
            raise
        raise _does_not_exist(args.group) from exc
    if args.output == "json":
        print_json({
            "group": args.group,
            "state": group["state"],
            "partitions": [
                {"topic": r["topic_name"], "partition": r["partition_id"],
                 "current_offset": r["current_offset"], "log_end_offset": r["log_end_offset"],
                 "lag": r["lag"], "consumer_id": r["consumer_id"] or None,
                 "host": r["host"] or None, "client_id": r["client_id"] or None}
                for r in rows
            ],
        })
        return 0
    print()
    if group["state"] in ("EMPTY", "DEAD"):
        print(f"Consumer group '{args.group}' has no active members.")
        print()
    print_table(DESCRIBE_HEADERS, [
        (args.group, r["topic_name"], r["partition_id"], r["current_offset"],
         r["log_end_offset"], r["lag"], r["consumer_id"], r["host"], r["client_id"])
        for r in rows
    ])
    return 0


def _topic_spec(args: argparse.Namespace) -> tuple[str, list[int] | None]:
    """``--topic T`` or ``--topic T:0,2`` (Kafka's form)."""
    topic, sep, parts = args.topic.partition(":")
    if not sep:
        return topic, None
    try:
        return topic, sorted({int(p) for p in parts.split(",") if p.strip()})
    except ValueError:
        args.subparser.error(f"--topic: bad partition list in {args.topic!r}")
        raise  # unreachable: error() exits


def _new_offset(args: argparse.Namespace, tp: str, earliest: int, latest: int) -> int:
    if args.to == "earliest":
        return earliest
    if args.to == "latest":
        return latest
    wanted = int(args.to_offset)
    if wanted > latest:
        print(f"New offset ({wanted}) is higher than latest offset for {tp}. "
              f"Value will be set to {latest}", file=sys.stderr)
        return latest
    if wanted < earliest:
        print(f"New offset ({wanted}) is lower than earliest offset for {tp}. "
              f"Value will be set to {earliest}", file=sys.stderr)
        return earliest
    return wanted


def _reset(args: argparse.Namespace, client: FranzClient) -> int:
    topic, only = _topic_spec(args)
    group = _group_or_none(client, args.group)
    if group is not None and group["state"] not in ("EMPTY", "DEAD"):
        raise RequestFailed(400, 40002, f"Assignments can only be reset if the group "
                            f"'{args.group}' is inactive, but the current state is "
                            f"{group['state']}.")
    try:
        partitions = [p["partition_id"] for p in client.v3_list("topics", topic, "partitions")]
    except RequestFailed as exc:
        if exc.status != _NOT_FOUND:
            raise
        raise RequestFailed(exc.status, exc.code, f"Topic '{topic}' does not exist.") from exc
    if only is not None:
        unknown = sorted(set(only) - set(partitions))
        if unknown:
            raise RequestFailed(404, 40403, f"Topic '{topic}' has no partition {unknown[0]}.")
        partitions = only
    plan = []
    for p in partitions:
        offs = client.get_json(client.v3("topics", topic, "partitions", p, "offset"))
        new = _new_offset(args, f"{topic}-{p}", offs["earliest_offset"], offs["latest_offset"])
        plan.append((p, new))
    if not args.execute and not args.dry_run:
        print("WARN: No action will be performed as the --execute option is missing. "
              "Add --dry-run to say so explicitly, or --execute to write the offsets.",
              file=sys.stderr)
    body = {"data": [{"topic_name": topic, "partition_id": p, "offset": o} for p, o in plan],
            "validate_only": not args.execute}
    client.request("POST", client.v3("consumer-groups", args.group, "offsets:alter"), json=body)
    if args.output == "json":
        print_json({"group": args.group, "executed": bool(args.execute),
                    "partitions": [{"topic": topic, "partition": p, "new_offset": o}
                                   for p, o in plan]})
    else:
        print()
        print_table(RESET_HEADERS, [(args.group, topic, p, o) for p, o in plan])
    return 0


def _delete(args: argparse.Namespace, client: FranzClient) -> int:
    try:
        client.request("DELETE", client.v3("consumer-groups", args.group))
    except RequestFailed as exc:
        if exc.status == _NOT_FOUND:
            raise _does_not_exist(args.group) from exc
        raise RequestFailed(exc.status, exc.code, f"Deletion of consumer group '{args.group}' "
                            f"failed: {exc.message}") from exc
    if args.output == "json":
        print_json({"group": args.group, "deleted": True})
    else:
        print(f"Deletion of requested consumer groups ('{args.group}') was successful.")
    return 0
