"""``franz consumer-groups``: kafka-consumer-groups.sh over the v3 API.

    --list           GET    /consumer-groups
    --describe       GET    /consumer-groups/{g}, /consumer-groups/{g}/offsets (franz);
                     --members: .../consumers, .../consumers/{c}/assignments;
                     --state: .../consumers, /brokers/{coordinator}
    --reset-offsets  GET    /topics/{t}/partitions, .../partitions/{p}/offset,
                            /consumer-groups/{g}/offsets (--all-topics, --shift-by,
                            --to-current);
                     POST   /consumer-groups/{g}/offsets:alter (franz; validate_only
                            for --dry-run)
    --delete         DELETE /consumer-groups/{g} (franz)

``--group`` may be repeated, or ``--all-groups`` given, for --describe, --reset-offsets
and --delete. The reset computes the new offsets here, as Kafka's tool does (earliest,
latest, current, N, current + N, by timestamp, from a CSV file; offsets outside
[earliest, latest] are moved inside with a warning), prints them (a table, or with
``--export`` Kafka's CSV), and writes them only with ``--execute``; the server refuses
while the group has members.

Offsets by timestamp (``--to-datetime``, ``--by-duration``): the HTTP API has no
ListOffsets-by-timestamp call of its own, so they are asked through a v2 consumer
instance in a scratch group (``franz-offsets-for-times-<random>``): it is assigned the
partitions, seeks to the timestamps (``POST .../positions`` with ``timestamps``), commits
its positions and reads them back; then the instance and the scratch group are deleted.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import sys
import time
import uuid
from typing import Any, NoReturn
from urllib.parse import quote

import orjson

from app.commands.output import print_json, print_table
from app.http_client import V2_MEDIA, CliError, FranzClient, RequestFailed

DESCRIBE_HEADERS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                    "CONSUMER-ID", "HOST", "CLIENT-ID")
MEMBERS_HEADERS = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
MEMBERS_VERBOSE_HEADERS = ("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID",
                           "#PARTITIONS", "ASSIGNMENT")
STATE_HEADERS = ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
RESET_HEADERS = ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
#: The group states, in Confluent's spelling (the server's); Kafka's (``Stable``,
#: ``PreparingRebalance``) are read too.
STATES = ("STABLE", "EMPTY", "PREPARING_REBALANCE", "COMPLETING_REBALANCE", "DEAD")
_REBALANCING = ("PREPARING_REBALANCE", "COMPLETING_REBALANCE")
_NOT_FOUND = 404
SCRATCH_GROUP_PREFIX = "franz-offsets-for-times-"

TopicPartition = tuple[str, int]


def run(args: argparse.Namespace, client: FranzClient) -> int:
    _check(args)
    action = {"list": _list, "describe": _describe, "reset-offsets": _reset,
              "delete": _delete}[args.action]
    return action(args, client)


def _check(args: argparse.Namespace) -> None:
    """Kafka's rules of which options go together (exit 2 otherwise)."""
    error = args.subparser.error
    if args.action != "list" and not (args.group or args.all_groups):
        error(f"--{args.action} needs --group or --all-groups")
    if args.action == "list" and (args.group or args.all_groups):
        error("--list lists every group: leave out --group and --all-groups")
    if args.action != "describe" and (args.view or args.verbose):
        error("--members, --offsets and --verbose go with --describe")
    if args.action == "describe":
        if args.state is not None and args.view:
            error("--describe takes at most one of --members, --offsets, --state")
        if args.state:
            error("--describe --state takes no value (--list --state STATES filters)")
        if args.verbose and args.view != "members":
            error("--verbose goes with --describe --members")
    if args.action not in ("list", "describe") and args.state is not None:
        error("--state goes with --list or --describe")
    spec = _spec(args)
    if args.action == "reset-offsets":
        if not (args.topic or args.all_topics or args.from_file):
            error("--reset-offsets needs --topic, --all-topics or --from-file")
        if spec is None:
            error("--reset-offsets needs one of --to-earliest, --to-latest or --to-offset N, "
                  "--to-current, --shift-by N, --to-datetime, --by-duration, --from-file")
    elif (spec is not None or args.execute or args.dry_run or args.export or args.topic
          or args.all_topics):
        error("--topic, --all-topics, --to-*, --shift-by, --by-duration, --from-file, "
              "--export, --dry-run and --execute go with --reset-offsets")


def _spec(args: argparse.Namespace) -> str | None:
    """Which reset was asked for (None: none)."""
    for name, given in (("to", args.to), ("to_offset", args.to_offset),
                        ("shift_by", args.shift_by), ("to_datetime", args.to_datetime),
                        ("by_duration", args.by_duration), ("from_file", args.from_file)):
        if given is not None:
            return str(given) if name == "to" else name
    return None


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


def _group_ids(args: argparse.Namespace, client: FranzClient) -> list[str]:
    """The groups named (in order, once each), or every group with --all-groups."""
    if args.all_groups:
        return [g["consumer_group_id"] for g in client.v3_list("consumer-groups")]
    return list(dict.fromkeys(args.group))


def _single(args: argparse.Namespace) -> bool:
    """One group named: errors stop the command, JSON is one object (not a list)."""
    return not args.all_groups and len(set(args.group)) == 1


def _report(message: str) -> None:
    print(f"franz consumer-groups: error: {message}", file=sys.stderr)


# --- list -------------------------------------------------------------------------------------


def _state_key(state: str) -> str:
    return state.replace("_", "").replace("-", "").upper()


def _wanted_states(args: argparse.Namespace) -> set[str] | None:
    """``--list --state Stable,Empty``: those states (None: all)."""
    if not args.state:
        return None
    known = {_state_key(s): s for s in STATES}
    wanted = set()
    for item in args.state.split(","):
        if not item.strip():
            continue
        state = known.get(_state_key(item.strip()))
        if state is None:
            args.subparser.error(f"--state: unknown group state {item.strip()!r} (one of "
                                 "Stable, Empty, PreparingRebalance, CompletingRebalance, Dead)")
        wanted.add(state)
    return wanted or None


def _list(args: argparse.Namespace, client: FranzClient) -> int:
    wanted = _wanted_states(args)
    groups = [(g["consumer_group_id"], g["state"]) for g in client.v3_list("consumer-groups")
              if wanted is None or g["state"] in wanted]
    with_state = args.state is not None
    if args.output == "json":
        print_json([{"group": g, "state": s} for g, s in groups] if with_state
                   else [g for g, _ in groups])
    elif with_state:
        print_table(("GROUP", "STATE"), groups)
    else:
        for g, _ in groups:
            print(g)
    return 0


# --- describe ---------------------------------------------------------------------------------


def _describe(args: argparse.Namespace, client: FranzClient) -> int:
    view = "state" if args.state is not None else args.view or "offsets"
    describe = {"offsets": _describe_offsets, "members": _describe_members,
                "state": _describe_state}[view]
    single = _single(args)
    found: list[dict[str, Any]] = []
    failed = False
    for group_id in _group_ids(args, client):
        try:
            group = _group_or_none(client, group_id)
            if group is None:
                raise _does_not_exist(group_id)
            found.append(describe(client, group_id, group))
        except RequestFailed as exc:
            if single:
                raise
            if args.all_groups and exc.status == _NOT_FOUND:
                continue  # deleted since it was listed
            _report(exc.message)
            failed = True
    if args.output == "json":
        print_json(found[0] if single else found)
    else:
        for body in found:
            _print_group(view, body, verbose=args.verbose)
    return 1 if failed else 0


def _describe_offsets(client: FranzClient, group_id: str, group: dict[str, Any]
                      ) -> dict[str, Any]:
    try:
        rows = client.v3_list("consumer-groups", group_id, "offsets")
    except RequestFailed as exc:
        if exc.status != _NOT_FOUND:  # the group went away meanwhile
            raise
        raise _does_not_exist(group_id) from exc
    return {
        "group": group_id,
        "state": group["state"],
        "partitions": [
            {"topic": r["topic_name"], "partition": r["partition_id"],
             "current_offset": r["current_offset"], "log_end_offset": r["log_end_offset"],
             "lag": r["lag"], "consumer_id": r["consumer_id"] or None,
             "host": r["host"] or None, "client_id": r["client_id"] or None}
            for r in rows
        ],
    }


def _members(client: FranzClient, group_id: str) -> list[dict[str, Any]]:
    try:
        return client.v3_list("consumer-groups", group_id, "consumers")
    except RequestFailed as exc:
        if exc.status != _NOT_FOUND:
            raise
        raise _does_not_exist(group_id) from exc


def _describe_members(client: FranzClient, group_id: str, group: dict[str, Any]
                      ) -> dict[str, Any]:
    members = _members(client, group_id)
    hosts: dict[str, str] = {}
    if members:  # the member's host: the v3 consumer has none, the offsets rows do
        with contextlib.suppress(RequestFailed):
            for r in client.v3_list("consumer-groups", group_id, "offsets"):
                if r["consumer_id"] and r["host"]:
                    hosts[r["consumer_id"]] = r["host"]
    out = []
    for m in members:
        try:
            assigned = client.v3_list("consumer-groups", group_id, "consumers",
                                      m["consumer_id"], "assignments")
        except RequestFailed as exc:
            if exc.status != _NOT_FOUND:
                raise
            continue  # it left meanwhile
        out.append({
            "consumer_id": m["consumer_id"],
            "group_instance_id": m.get("instance_id"),
            "host": hosts.get(m["consumer_id"]),
            "client_id": m["client_id"] or None,
            "partitions": sorted(({"topic": a["topic_name"], "partition": a["partition_id"]}
                                  for a in assigned),
                                 key=lambda a: (a["topic"], a["partition"])),
        })
    return {"group": group_id, "state": group["state"], "members": out}


def _broker_id(link: dict[str, str] | None) -> int | None:
    if not link:
        return None
    tail = link["related"].rstrip("/").rsplit("/", 1)[1]
    return int(tail) if tail.isdigit() else None


def _describe_state(client: FranzClient, group_id: str, group: dict[str, Any]
                    ) -> dict[str, Any]:
    members = _members(client, group_id)
    coordinator: dict[str, Any] | None = None
    broker_id = _broker_id(group.get("coordinator"))
    if broker_id is not None:
        coordinator = {"id": broker_id, "host": None, "port": None}
        with contextlib.suppress(RequestFailed):
            broker = client.get_json(client.v3("brokers", broker_id))
            coordinator.update(host=broker.get("host"), port=broker.get("port"))
    return {"group": group_id, "coordinator": coordinator,
            "assignment_strategy": group.get("partition_assignor") or None,
            "state": group["state"], "members": len(members)}


def _assignment(partitions: list[dict[str, Any]]) -> str:
    """Kafka's ASSIGNMENT cell: ``orders(0,2),payments(1)``."""
    by_topic: dict[str, list[int]] = {}
    for a in partitions:
        by_topic.setdefault(a["topic"], []).append(a["partition"])
    return ",".join(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in sorted(by_topic.items()))


def _print_group(view: str, body: dict[str, Any], *, verbose: bool) -> None:
    group, state = body["group"], body["state"]
    print()
    if state in ("EMPTY", "DEAD"):
        print(f"Consumer group '{group}' has no active members.")
        print()
    elif state in _REBALANCING:
        print(f"Warning: Consumer group '{group}' is rebalancing.")
        print()
    if view == "offsets":
        print_table(DESCRIBE_HEADERS, [
            (group, r["topic"], r["partition"], r["current_offset"], r["log_end_offset"],
             r["lag"], r["consumer_id"], r["host"], r["client_id"])
            for r in body["partitions"]
        ])
    elif view == "members":
        if not body["members"]:
            return
        if verbose:
            print_table(MEMBERS_VERBOSE_HEADERS, [
                (group, m["consumer_id"], m["group_instance_id"], m["host"], m["client_id"],
                 len(m["partitions"]), _assignment(m["partitions"]))
                for m in body["members"]
            ])
        else:
            print_table(MEMBERS_HEADERS, [
                (group, m["consumer_id"], m["host"], m["client_id"], len(m["partitions"]))
                for m in body["members"]
            ])
    else:
        c = body["coordinator"]
        where = "-" if c is None else f"{c['host'] or '-'}:{c['port'] or '-'} ({c['id']})"
        print_table(STATE_HEADERS, [(group, where, body["assignment_strategy"], state,
                                     body["members"])])


# --- reset-offsets ----------------------------------------------------------------------------


def _topic_spec(args: argparse.Namespace, text: str) -> tuple[str, list[int] | None]:
    """``--topic T`` or ``--topic T:0,2`` (Kafka's form)."""
    topic, sep, parts = text.partition(":")
    if not sep:
        return topic, None
    try:
        return topic, sorted({int(p) for p in parts.split(",") if p.strip()})
    except ValueError:
        args.subparser.error(f"--topic: bad partition list in {text!r}")
        raise  # unreachable: error() exits


def _read_plan(args: argparse.Namespace, single: bool
               ) -> dict[str | None, dict[TopicPartition, int]]:
    """``--from-file``: Kafka's CSV, ``topic,partition,offset`` (one --group) or
    ``group,topic,partition,offset`` rows -> {group (None: the one group): {tp: offset}}.
    Unreadable or malformed: exit 2, naming the file and line."""
    path = args.from_file

    def usage(message: str) -> NoReturn:
        args.subparser.error(message)
        raise AssertionError  # unreachable: error() exits

    try:
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        usage(f"--from-file: cannot read {path!r}: {getattr(exc, 'strerror', None) or exc}")
    plan: dict[str | None, dict[TopicPartition, int]] = {}
    width = None
    for line_no, row in enumerate(csv.reader(io.StringIO(text)), 1):
        cells = [c.strip() for c in row]
        if not any(cells):
            continue
        where = f"--from-file {path}:{line_no}"
        if len(cells) not in (3, 4) or (width is not None and len(cells) != width):
            usage(f"{where}: expected topic,partition,offset or group,topic,partition,offset, "
                  f"got {','.join(row)!r}")
        width = len(cells)
        if width == 3 and not single:
            usage(f"{where}: topic,partition,offset rows need exactly one --group; with "
                  "several groups or --all-groups write group,topic,partition,offset")
        group = cells[0] if width == 4 else None
        topic, partition, offset = cells[-3:]
        try:
            tp, value = (topic, int(partition)), int(offset)
            if not topic or tp[1] < 0 or value < 0:
                raise ValueError
        except ValueError:
            usage(f"{where}: needs a topic, a partition and an offset >= 0, "
                  f"got {','.join(row)!r}")
        plan.setdefault(group, {})[tp] = value
    return plan


def _committed(client: FranzClient, group: str) -> dict[TopicPartition, int]:
    """The group's committed offsets ({} for a group that does not exist)."""
    try:
        rows = client.v3_list("consumer-groups", group, "offsets")
    except RequestFailed as exc:
        if exc.status != _NOT_FOUND:
            raise
        return {}
    return {(r["topic_name"], r["partition_id"]): r["current_offset"] for r in rows
            if r["current_offset"] is not None}


def _topic_partitions(client: FranzClient, topic: str) -> list[int]:
    try:
        return [p["partition_id"] for p in client.v3_list("topics", topic, "partitions")]
    except RequestFailed as exc:
        if exc.status != _NOT_FOUND:
            raise
        raise RequestFailed(exc.status, exc.code, f"Topic '{topic}' does not exist.") from exc


def _scope(args: argparse.Namespace, client: FranzClient, group: str,
           committed: dict[TopicPartition, int],
           file_plan: dict[TopicPartition, int] | None) -> list[TopicPartition]:
    """The partitions to reset: --topic's, --all-topics' (what the group committed), or
    the file's (narrowed by --topic / --all-topics when given too)."""
    if args.all_topics:
        scope = sorted(committed)
    elif args.topic:
        scope = []
        for text in args.topic:
            topic, only = _topic_spec(args, text)
            partitions = _topic_partitions(client, topic)
            if only is not None:
                unknown = sorted(set(only) - set(partitions))
                if unknown:
                    raise RequestFailed(404, 40403,
                                        f"Topic '{topic}' has no partition {unknown[0]}.")
                partitions = only
            scope += [(topic, p) for p in partitions]
    else:
        return sorted(file_plan or {})
    scope = list(dict.fromkeys(scope))
    if file_plan is not None:
        scope = [tp for tp in scope if tp in file_plan]
    return scope


def _clamp(tp: TopicPartition, wanted: int, earliest: int, latest: int) -> int:
    name = f"{tp[0]}-{tp[1]}"
    if wanted > latest:
        print(f"New offset ({wanted}) is higher than latest offset for {name}. "
              f"Value will be set to {latest}", file=sys.stderr)
        return latest
    if wanted < earliest:
        print(f"New offset ({wanted}) is lower than earliest offset for {name}. "
              f"Value will be set to {earliest}", file=sys.stderr)
        return earliest
    return wanted


def _plan(args: argparse.Namespace, client: FranzClient, group: str,
          file_plan: dict[TopicPartition, int] | None) -> list[tuple[str, int, int]]:
    """(topic, partition, new offset) for one group, after checking it may be reset."""
    desc = _group_or_none(client, group)
    if desc is not None and desc["state"] not in ("EMPTY", "DEAD"):
        raise RequestFailed(400, 40002, f"Assignments can only be reset if the group "
                            f"'{group}' is inactive, but the current state is "
                            f"{desc['state']}.")
    spec = _spec(args)
    committed = _committed(client, group) if desc is not None else {}
    scope = _scope(args, client, group, committed, file_plan)
    stamps: dict[TopicPartition, int] = {}
    if spec in ("to_datetime", "by_duration"):
        when = (args.to_datetime if spec == "to_datetime"
                else max(0, int(time.time() * 1000) - args.by_duration))
        stamps = offsets_for_times(client, {tp: when for tp in scope})
    plan = []
    for tp in scope:
        offs = client.get_json(client.v3("topics", tp[0], "partitions", tp[1], "offset"))
        earliest, latest = offs["earliest_offset"], offs["latest_offset"]
        if spec == "earliest":
            new = earliest
        elif spec == "latest":
            new = latest
        elif spec == "current":
            new = committed.get(tp, latest)
        elif spec == "to_offset":
            new = _clamp(tp, args.to_offset, earliest, latest)
        elif spec == "shift_by":
            if tp not in committed:
                raise CliError(f"Cannot shift offset for partition {tp[0]}-{tp[1]} of group "
                               f"'{group}' since there is no current committed offset.")
            new = _clamp(tp, committed[tp] + args.shift_by, earliest, latest)
        elif spec == "from_file":
            new = _clamp(tp, (file_plan or {})[tp], earliest, latest)
        else:  # to_datetime, by_duration
            new = stamps[tp]
        plan.append((tp[0], tp[1], new))
    return plan


def _reset(args: argparse.Namespace, client: FranzClient) -> int:
    single = _single(args)
    files = _read_plan(args, single) if args.from_file else None
    if not args.execute and not args.dry_run:
        print("WARN: No action will be performed as the --execute option is missing. "
              "Add --dry-run to say so explicitly, or --execute to write the offsets.",
              file=sys.stderr)
    done: list[tuple[str, list[tuple[str, int, int]]]] = []
    failed = False
    for group in _group_ids(args, client):
        file_plan = None
        if files is not None:
            file_plan = files.get(None if single and None in files else group)
            if file_plan is None:
                if args.all_groups:
                    continue  # a group the file does not name: nothing to do
                message = f"No reset plan for group '{group}' found in {args.from_file}."
                if single:
                    raise CliError(message)
                _report(message)
                failed = True
                continue
        try:
            plan = _plan(args, client, group, file_plan)
            if plan:
                body = {"data": [{"topic_name": t, "partition_id": p, "offset": o}
                                 for t, p, o in plan],
                        "validate_only": not args.execute}
                client.request("POST", client.v3("consumer-groups", group, "offsets:alter"),
                               json=body)
        except CliError as exc:
            if single or exc.exit_code != 1:
                raise
            _report(exc.message)
            failed = True
            continue
        done.append((group, plan))
    _print_reset(args, single, done)
    return 1 if failed else 0


def _print_reset(args: argparse.Namespace, single: bool,
                 done: list[tuple[str, list[tuple[str, int, int]]]]) -> None:
    if args.export:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        for group, plan in done:
            for t, p, o in plan:
                writer.writerow((t, p, o) if single else (group, t, p, o))
        sys.stdout.write(out.getvalue())
    elif args.output == "json":
        bodies = [{"group": group, "executed": bool(args.execute),
                   "partitions": [{"topic": t, "partition": p, "new_offset": o}
                                  for t, p, o in plan]}
                  for group, plan in done]
        print_json(bodies[0] if single and bodies else bodies)
    else:
        print()
        print_table(RESET_HEADERS, [(group, t, p, o) for group, plan in done
                                    for t, p, o in plan])


def offsets_for_times(client: FranzClient, stamps: dict[TopicPartition, int]
                      ) -> dict[TopicPartition, int]:
    """Per partition, the first offset whose timestamp is at or after the given epoch ms
    (the log end when there is none), found by a v2 consumer instance of a scratch group
    that is deleted afterwards (module docstring)."""
    if not stamps:
        return {}
    group = f"{SCRATCH_GROUP_PREFIX}{uuid.uuid4().hex[:12]}"
    name = "lookup"
    v2 = {"Content-Type": V2_MEDIA}
    base = f"/consumers/{quote(group, safe='')}"
    instance = f"{base}/instances/{name}"
    partitions = [{"topic": t, "partition": p} for t, p in stamps]
    client.request("POST", base, json={"name": name, "format": "binary",
                                       "auto.commit.enable": "false"}, headers=v2)
    try:
        client.request("POST", instance + "/assignments", json={"partitions": partitions},
                       headers=v2)
        client.request("POST", instance + "/positions", headers=v2, json={"timestamps": [
            {"topic": t, "partition": p, "timestamp": ts} for (t, p), ts in stamps.items()]})
        client.request("POST", instance + "/offsets", headers=v2)  # commits the positions
        found = orjson.loads(client.request("GET", instance + "/offsets", headers=v2,
                                            json={"partitions": partitions}).content)
    finally:
        with contextlib.suppress(CliError):
            client.request("DELETE", instance, headers=v2)
        with contextlib.suppress(CliError):
            client.request("DELETE", client.v3("consumer-groups", group))
    offsets = {(r["topic"], r["partition"]): r["offset"] for r in found["offsets"]}
    missing = [tp for tp in stamps if tp not in offsets]
    if missing:
        raise CliError(f"the server found no offset for {missing[0][0]}-{missing[0][1]} "
                       "by timestamp")
    return offsets


# --- delete -----------------------------------------------------------------------------------


def _delete(args: argparse.Namespace, client: FranzClient) -> int:
    single = _single(args)
    deleted, failures = [], []
    for group in _group_ids(args, client):
        try:
            client.request("DELETE", client.v3("consumer-groups", group))
        except RequestFailed as exc:
            if exc.status == _NOT_FOUND:
                error = _does_not_exist(group)
            else:
                error = RequestFailed(exc.status, exc.code, f"Deletion of consumer group "
                                      f"'{group}' failed: {exc.message}")
            if single:
                raise error from exc
            failures.append((group, error.message))
            continue
        deleted.append(group)
    if args.output == "json":
        if single:
            print_json({"group": deleted[0], "deleted": True})
        else:
            print_json([{"group": g, "deleted": True} for g in deleted]
                       + [{"group": g, "deleted": False, "error": m} for g, m in failures])
    elif deleted:
        names = ", ".join(f"'{g}'" for g in deleted)
        print(f"Deletion of requested consumer groups ({names}) was successful.")
    for _group, message in failures:
        _report(message)
    return 1 if failures else 0
