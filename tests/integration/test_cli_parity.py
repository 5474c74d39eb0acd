"""Kafka's shell-tool options in the ``franz`` CLI (issue 16), run as the real executable
against real servers: kafka-topics.sh's report options and topic patterns,
kafka-consumer-groups.sh's --all-groups, --members, --state, --all-topics, --shift-by,
--to-datetime, --by-duration, --export / --from-file, and the console tools'
``--property`` forms. Each test checks what a Kafka user would look at: the lines
printed, the offsets after a reset, that a dry run changes nothing, exit codes (0 done,
1 refused, 2 usage) and that no error is a traceback."""

from __future__ import annotations

import datetime as dt
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from conftest import ROOT
from test_cli import CLI_ENV, Franz, Result, franz_command

from app.commands.topics import _report, format_topic

if TYPE_CHECKING:
    from conftest import FranzServer, V2Client

# --- the CLI runner (tests/integration/test_cli.py's, checking for tracebacks) ---------------




def _run(url: str, args: tuple[str, ...], stdin: bytes | None, timeout: float) -> Result:
    exe = franz_command()
    cmd = [*exe, args[0], "--bootstrap-server", url, *args[1:]]
    proc = subprocess.run(cmd, input=stdin or b"", capture_output=True, cwd=ROOT,
                          timeout=timeout, check=False, env=CLI_ENV)
    result = Result(proc.returncode, proc.stdout.decode(errors="replace"),
                    proc.stderr.decode(errors="replace"), proc.stdout)
    assert "Traceback" not in result.err, result.err
    return result


@pytest.fixture
def franz(franz_url: str) -> Franz:
    """``franz("topics", "--list")``: run against the shared server."""

    def run(*args: str, stdin: bytes | None = None, timeout: float = 60.0,
            url: str | None = None) -> Result:
        return _run(url or franz_url, args, stdin, timeout)

    return run


def usage_error(r: Result, message: str) -> None:
    """Exit 2, nothing on stdout, argparse's usage and one line naming the problem."""
    assert r.code == 2 and r.out == "", r
    assert "usage: franz" in r.err, r.err
    assert message in r.err.splitlines()[-1], r.err


def rows(out: str, header: str) -> list[list[str]]:
    """The rows of the table whose header line starts with ``header``, split on runs of
    two or more spaces (cells such as ``HOST:PORT (ID)`` keep their inner space)."""
    lines = [ln for ln in out.splitlines() if ln.strip()]
    start = next(i for i, ln in enumerate(lines) if ln.startswith(header))
    return [re.split(r" {2,}", ln.strip()) for ln in lines[start:]]


def offsets_of(franz: Franz, group: str) -> dict[tuple[str, int], int | None]:
    body = franz("consumer-groups", "--describe", "--group", group, "--output", "json").json()
    return {(p["topic"], p["partition"]): p["current_offset"] for p in body["partitions"]}


def produce(franz: Franz, topic: str, lines: list[str], *extra: str) -> None:
    r = franz("produce", "--topic", topic, *extra, stdin=("\n".join(lines) + "\n").encode())
    assert (r.code, r.err) == (0, ""), r


@pytest.fixture
def uid(topic: str) -> str:
    return topic.removeprefix("t-")


# --- topics: --topic as a pattern, --exclude-internal ------------------------------------------


def test_topics_list_and_describe_take_a_regular_expression(franz: Franz, uid: str) -> None:
    names = [f"gen-{uid}-a", f"gen-{uid}-b", f"other-{uid}"]
    for name in names:
        assert franz("topics", "--create", "--topic", name, "--partitions", "1").code == 0
    r = franz("topics", "--list", "--topic", f"gen-{uid}-.*")
    assert (r.code, r.out.splitlines()) == (0, names[:2]), r
    # anchored, as Kafka's (the whole name must match)
    assert franz("topics", "--list", "--topic", f"en-{uid}-.*").out == ""
    assert franz("topics", "--list", "--topic", f"(gen|other)-{uid}.*").out.splitlines() == \
        sorted(names)
    # a plain name is that one topic
    assert franz("topics", "--list", "--topic", names[2]).out.splitlines() == [names[2]]
    r = franz("topics", "--describe", "--topic", f"gen-{uid}-[ab]")
    heads = [ln.split("\t")[0] for ln in r.out.splitlines() if ln.startswith("Topic:")]
    assert (r.code, heads) == (0, [f"Topic: {names[0]}", f"Topic: {names[1]}"]), r
    assert len(r.out.splitlines()) == 4  # two topic lines, one partition line each
    r = franz("topics", "--describe", "--topic", f"gen-{uid}-.*", "--output", "json")
    assert [t["topic"] for t in r.json()] == names[:2]
    # no match: an error for --describe (unless --if-exists), nothing for --list
    r = franz("topics", "--describe", "--topic", f"none-{uid}-.*")
    assert (r.code, r.out) == (1, ""), r
    assert r.err == f"franz topics: error: No topic matches 'none-{uid}-.*'.\n"
    r = franz("topics", "--describe", "--topic", f"none-{uid}-.*", "--if-exists")
    assert (r.code, r.out, r.err) == (0, "", "")
    assert franz("topics", "--list", "--topic", f"none-{uid}-.*").code == 0
    usage_error(franz("topics", "--list", "--topic", "gen-(["), "not a valid regular expression")


def test_topics_exclude_internal_with_a_pattern(franz: Franz) -> None:
    r = franz("topics", "--list", "--topic", "__consumer.*")
    assert r.out.splitlines() == ["__consumer_offsets"], r
    r = franz("topics", "--list", "--topic", "__consumer.*", "--exclude-internal")
    assert (r.code, r.out) == (0, ""), r
    r = franz("topics", "--describe", "--topic", "__consumer.*", "--exclude-internal",
              "--if-exists")
    assert (r.code, r.out) == (0, ""), r


# --- topics: the report options of --describe ---------------------------------------------------


def test_topics_with_overrides_prints_topic_lines_only(franz: Franz, uid: str) -> None:
    plain, tuned = f"ov-{uid}-plain", f"ov-{uid}-tuned"
    assert franz("topics", "--create", "--topic", plain, "--partitions", "2").code == 0
    assert franz("topics", "--create", "--topic", tuned, "--partitions", "2",
                 "--config", "retention.ms=3600000", "--config", "cleanup.policy=compact").code == 0
    r = franz("topics", "--describe", "--topics-with-overrides", "--topic", f"ov-{uid}-.*")
    assert r.code == 0, r
    assert r.out.splitlines() == [
        f"Topic: {tuned}\tTopicId: -\tPartitionCount: 2\tReplicationFactor: 1\t"
        "Configs: cleanup.policy=compact,retention.ms=3600000"]
    r = franz("topics", "--describe", "--topics-with-overrides", "--exclude-internal")
    heads = [ln.split("\t")[0] for ln in r.out.splitlines()]
    assert f"Topic: {tuned}" in heads and f"Topic: {plain}" not in heads
    assert all(ln.startswith("Topic: ") for ln in r.out.splitlines())  # no partition lines
    r = franz("topics", "--describe", "--topics-with-overrides", "--topic", plain)
    assert (r.code, r.out) == (0, ""), r


def test_partition_reports_on_a_healthy_broker(franz: Franz, uid: str) -> None:
    """One broker, every replica in sync: nothing is under-replicated or unavailable;
    every partition of a replication-factor-1 topic is at min ISR (1), and under it
    when the topic asks for min.insync.replicas=2. Partition lines only, as Kafka."""
    name = f"rep-{uid}"
    assert franz("topics", "--create", "--topic", name, "--partitions", "2").code == 0
    for option in ("--under-replicated-partitions", "--unavailable-partitions",
                   "--under-min-isr-partitions"):
        r = franz("topics", "--describe", option, "--topic", name)
        assert (r.code, r.out, r.err) == (0, "", ""), (option, r)
    r = franz("topics", "--describe", "--under-replicated-partitions")  # all topics
    assert (r.code, r.out) == (0, ""), r
    expected = [f"\tTopic: {name}\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0" for p in (0, 1)]
    r = franz("topics", "--describe", "--at-min-isr-partitions", "--topic", name)
    assert (r.code, r.out.splitlines()) == (0, expected), r
    r = franz("topics", "--alter", "--topic", name, "--config", "min.insync.replicas=2")
    assert r.code == 0, r
    r = franz("topics", "--describe", "--under-min-isr-partitions", "--topic", name)
    assert (r.code, r.out.splitlines()) == (0, expected), r
    assert franz("topics", "--describe", "--at-min-isr-partitions", "--topic", name).out == ""
    r = franz("topics", "--describe", "--under-min-isr-partitions", "--topic", name,
              "--output", "json")
    assert [(t["topic"], len(t["partitions"])) for t in r.json()] == [(name, 2)]


def test_partition_reports_select_kafkas_partitions() -> None:
    """The selection itself, on a described three-broker topic (a standalone broker
    cannot lose a replica): Kafka's rules for each report option."""
    topic = {
        "topic": "t", "topic_id": None, "is_internal": False, "partition_count": 4,
        "replication_factor": 3, "configs": {},
        "partitions": [
            {"partition": 0, "leader": 1, "replicas": [1, 2, 3], "isr": [1, 2, 3]},
            {"partition": 1, "leader": 2, "replicas": [2, 3, 1], "isr": [2]},
            {"partition": 2, "leader": None, "replicas": [3, 1, 2], "isr": []},
            {"partition": 3, "leader": 3, "replicas": [3, 1, 2], "isr": [3, 1]},
        ],
    }

    def picked(report: str, live: set[int] = frozenset({1, 2}), min_isr: int = 2) -> list[int]:
        got = _report(report, topic, min_isr, set(live))
        return [] if got is None else [p["partition"] for p in got["partitions"]]

    assert picked("under_replicated_partitions") == [1, 2, 3]
    assert picked("unavailable_partitions") == [2, 3]  # no leader; leader 3 is not live
    assert picked("under_min_isr_partitions") == [1, 2]
    assert picked("at_min_isr_partitions") == [3]
    assert _report("topics_with_overrides", topic, 2, set()) is None
    narrowed = _report("under_replicated_partitions", topic, 2, set())
    assert narrowed is not None
    assert format_topic(narrowed, header=False).splitlines()[0] == \
        "\tTopic: t\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--list", "--under-replicated-partitions"), "goes with --describe"),
        (("--describe", "--under-replicated-partitions", "--unavailable-partitions"),
         "not allowed with argument"),
        (("--alter", "--topic", "x", "--partitions", "2", "--topics-with-overrides"),
         "goes with --describe"),
    ],
)
def test_topic_report_usage_errors(franz: Franz, args: tuple[str, ...], message: str) -> None:
    usage_error(franz("topics", *args), message)


# --- consumer-groups: --describe --members / --state / --offsets, --list --state -----------------


@pytest.fixture
def active_group(franz: Franz, v2: V2Client, uid: str) -> Iterator[tuple[str, str]]:
    """(group, topic): a group with one member (REST consumer ``member-1``) assigned
    both partitions of ``topic``, which has committed nothing."""
    topic, group = f"act-{uid}", f"g-act-{uid}"
    assert franz("topics", "--create", "--topic", topic, "--partitions", "2").code == 0
    v2.create_consumer(group, name="member-1", format="binary",
                       **{"auto.commit.enable": "false"})
    inst = f"/consumers/{group}/instances/member-1"
    try:
        v2.post(inst + "/subscription", {"topics": [topic]})
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            v2.records(inst, timeout=200)
            body = franz("consumer-groups", "--describe", "--group", group, "--members",
                         "--output", "json").json()
            if body["members"] and len(body["members"][0]["partitions"]) == 2:
                break
        else:
            pytest.fail("member-1 was never assigned both partitions")
        yield group, topic
    finally:
        v2.http.delete(inst)


@pytest.fixture
def empty_group(franz: Franz, uid: str) -> tuple[str, str]:
    """(group, topic): a group without members that committed offset 1 on ``topic``'s
    one partition (written by a reset, which creates the group)."""
    topic, group = f"emp-{uid}", f"g-emp-{uid}"
    assert franz("topics", "--create", "--topic", topic, "--partitions", "1").code == 0
    produce(franz, topic, ["a", "b", "c"])
    r = franz("consumer-groups", "--reset-offsets", "--group", group, "--topic", topic,
              "--to-offset", "1", "--execute")
    assert r.code == 0, r
    return group, topic


def test_describe_members(franz: Franz, active_group: tuple[str, str],
                          empty_group: tuple[str, str]) -> None:
    group, topic = active_group
    r = franz("consumer-groups", "--describe", "--group", group, "--members")
    assert (r.code, r.err) == (0, ""), r
    assert rows(r.out, "GROUP") == [["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"],
                                    [group, "member-1", "-", "member-1", "2"]]
    r = franz("consumer-groups", "--describe", "--group", group, "--members", "--verbose")
    assert rows(r.out, "GROUP") == [
        ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
         "ASSIGNMENT"],
        [group, "member-1", "-", "-", "member-1", "2", f"{topic}(0,1)"]]
    body = franz("consumer-groups", "--describe", "--group", group, "--members",
                 "--output", "json").json()
    assert body == {"group": group, "state": "STABLE", "members": [{
        "consumer_id": "member-1", "group_instance_id": None, "host": None,
        "client_id": "member-1",
        "partitions": [{"topic": topic, "partition": 0}, {"topic": topic, "partition": 1}]}]}
    # a group without members: Kafka's notice, no table
    quiet = empty_group[0]
    r = franz("consumer-groups", "--describe", "--group", quiet, "--members")
    assert (r.code, r.out.strip()) == (0, f"Consumer group '{quiet}' has no active members."), r


def test_describe_state(franz: Franz, franz_url: str, active_group: tuple[str, str],
                        empty_group: tuple[str, str]) -> None:
    group, _ = active_group
    port = franz_url.rsplit(":", 1)[1]
    r = franz("consumer-groups", "--describe", "--group", group, "--state")
    assert (r.code, r.err) == (0, ""), r
    assert rows(r.out, "GROUP") == [
        ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
        [group, f"127.0.0.1:{port} (0)", "range", "STABLE", "1"]]
    quiet = empty_group[0]
    r = franz("consumer-groups", "--describe", "--group", quiet, "--state", "--output", "json")
    assert r.json() == {"group": quiet, "coordinator": {"id": 0, "host": "127.0.0.1",
                                                       "port": int(port)},
                        "assignment_strategy": None, "state": "EMPTY", "members": 0}
    # several groups at once, each its own table
    r = franz("consumer-groups", "--describe", "--group", group, "--group", quiet, "--state")
    states = [ln.split() for ln in r.out.splitlines() if ln.startswith((group, quiet))]
    assert [(row[0], row[-2]) for row in states] == [(group, "STABLE"), (quiet, "EMPTY")], r.out


def test_describe_offsets_is_the_default_view(franz: Franz,
                                              empty_group: tuple[str, str]) -> None:
    group, topic = empty_group
    default = franz("consumer-groups", "--describe", "--group", group)
    explicit = franz("consumer-groups", "--describe", "--group", group, "--offsets")
    assert default.code == explicit.code == 0
    assert default.out == explicit.out
    assert rows(default.out, "GROUP")[1] == [group, topic, "0", "1", "3", "2", "-", "-", "-"]


def test_list_state_filters(franz: Franz, active_group: tuple[str, str],
                            empty_group: tuple[str, str]) -> None:
    stable, quiet = active_group[0], empty_group[0]
    r = franz("consumer-groups", "--list", "--state", "Empty")
    listed = {row[0]: row[1] for row in rows(r.out, "GROUP")[1:]}
    assert listed.get(quiet) == "EMPTY" and stable not in listed, r.out
    assert set(listed.values()) == {"EMPTY"}
    r = franz("consumer-groups", "--list", "--state", "stable,PreparingRebalance",
              "--output", "json")
    assert {"group": stable, "state": "STABLE"} in r.json()
    assert all(g["state"] in ("STABLE", "PREPARING_REBALANCE") for g in r.json())
    r = franz("consumer-groups", "--list", "--state")  # every group, with its state
    assert [quiet, "EMPTY"] in rows(r.out, "GROUP")


def test_all_groups(restartable_server: FranzServer) -> None:
    """--describe / --reset-offsets / --delete --all-groups, on a broker of its own (the
    shared one holds every other test's groups)."""
    url = restartable_server.url

    def run(*args: str, stdin: bytes | None = None) -> Result:
        return _run(url, args, stdin, 60.0)

    assert run("topics", "--create", "--topic", "orders", "--partitions", "1").code == 0
    assert run("produce", "--topic", "orders", stdin=b"1\n2\n3\n4\n").code == 0
    for group, offset in (("billing", "1"), ("shipping", "3")):
        r = run("consumer-groups", "--reset-offsets", "--group", group, "--topic", "orders",
                "--to-offset", offset, "--execute")
        assert r.code == 0, r
    r = run("consumer-groups", "--describe", "--all-groups")
    assert r.code == 0, r
    table = [row for row in (ln.split() for ln in r.out.splitlines())
             if row and row[0] in ("billing", "shipping")]
    assert table == [["billing", "orders", "0", "1", "4", "3", "-", "-", "-"],
                     ["shipping", "orders", "0", "3", "4", "1", "-", "-", "-"]]
    assert [g["group"] for g in run("consumer-groups", "--describe", "--all-groups",
                                    "--output", "json").json()] == ["billing", "shipping"]
    r = run("consumer-groups", "--reset-offsets", "--all-groups", "--all-topics",
            "--to-latest", "--execute")
    assert r.code == 0, r
    assert rows(r.out, "GROUP")[1:] == [["billing", "orders", "0", "4"],
                                        ["shipping", "orders", "0", "4"]]
    r = run("consumer-groups", "--delete", "--all-groups")
    assert r.code == 0, r
    assert r.out == ("Deletion of requested consumer groups ('billing', 'shipping') was "
                     "successful.\n")
    assert run("consumer-groups", "--list").out == ""


# --- consumer-groups --reset-offsets: --shift-by, --all-topics, --to-current --------------------


@pytest.fixture
def ten(franz: Franz, uid: str) -> str:
    """A one-partition topic holding 10 records."""
    name = f"ten-{uid}"
    assert franz("topics", "--create", "--topic", name, "--partitions", "1").code == 0
    produce(franz, name, [str(i) for i in range(10)])
    return name


def test_reset_shift_by(franz: Franz, ten: str, group: str) -> None:
    reset = ("consumer-groups", "--reset-offsets", "--group", group, "--topic", ten)
    r = franz(*reset, "--shift-by", "1")  # no committed offset yet: Kafka refuses
    assert r.code == 1, r
    assert (f"Cannot shift offset for partition {ten}-0 of group '{group}' since there is "
            "no current committed offset.") in r.err
    assert franz(*reset, "--to-offset", "5", "--execute").code == 0
    r = franz(*reset, "--shift-by", "-2", "--dry-run")
    assert (r.code, rows(r.out, "GROUP")[1]) == (0, [group, ten, "0", "3"]), r
    assert offsets_of(franz, group) == {(ten, 0): 5}  # the dry run changed nothing
    assert franz(*reset, "--shift-by", "-2", "--execute").code == 0
    assert offsets_of(franz, group) == {(ten, 0): 3}
    assert franz(*reset, "--shift-by=+4", "--execute").code == 0
    assert offsets_of(franz, group) == {(ten, 0): 7}
    r = franz(*reset, "--shift-by", "100", "--execute")  # kept within the log
    assert r.code == 0, r
    assert f"New offset (107) is higher than latest offset for {ten}-0. Value will be set " \
           "to 10" in r.err
    assert offsets_of(franz, group) == {(ten, 0): 10}
    r = franz(*reset, "--shift-by", "-100", "--execute")
    assert "New offset (-90) is lower than earliest offset" in r.err
    assert offsets_of(franz, group) == {(ten, 0): 0}
    assert franz(*reset, "--to-current", "--execute").code == 0
    assert offsets_of(franz, group) == {(ten, 0): 0}
    usage_error(franz(*reset, "--shift-by", "x"), "invalid int value: 'x'")
    usage_error(franz(*reset, "--shift-by", "1", "--to-earliest"), "not allowed with argument")


def test_reset_all_topics(franz: Franz, ten: str, uid: str, group: str) -> None:
    other, untouched = f"ten2-{uid}", f"ten3-{uid}"
    for name in (other, untouched):
        assert franz("topics", "--create", "--topic", name, "--partitions", "2").code == 0
        produce(franz, name, ["x", "y"], "--no-idempotence")
    for spec in (f"{ten}", f"{other}:1"):
        r = franz("consumer-groups", "--reset-offsets", "--group", group, "--topic", spec,
                  "--to-latest", "--execute")
        assert r.code == 0, r
    before = offsets_of(franz, group)
    assert set(before) == {(ten, 0), (other, 1)}
    r = franz("consumer-groups", "--reset-offsets", "--group", group, "--all-topics",
              "--to-earliest")
    assert r.code == 0 and "WARN: No action will be performed" in r.err, r
    assert [row[1:3] for row in rows(r.out, "GROUP")[1:]] == [[ten, "0"], [other, "1"]]
    assert offsets_of(franz, group) == before
    assert franz("consumer-groups", "--reset-offsets", "--group", group, "--all-topics",
                 "--to-earliest", "--execute").code == 0
    assert offsets_of(franz, group) == {(ten, 0): 0, (other, 1): 0}  # untouched stays out
    r = franz("consumer-groups", "--reset-offsets", "--group", group, "--all-topics",
              "--topic", ten, "--to-earliest")
    usage_error(r, "argument --topic: not allowed with argument --all-topics")


# --- --to-datetime and --by-duration -------------------------------------------------------------


@pytest.fixture
def stamped(v2: V2Client, franz: Franz, uid: str) -> tuple[str, int]:
    """(topic, t0): records at t0, t0 + 1 h, t0 + 2 h (offsets 0, 1, 2) on partition 0 of
    a one-partition topic, t0 being 3 hours ago (recent: retention keeps them)."""
    name = f"ts-{uid}"
    assert franz("topics", "--create", "--topic", name, "--partitions", "1").code == 0
    t0 = (int(time.time()) - 3 * 3600) * 1000
    v2.produce(name, [{"value": v2.b64(f"r{i}"), "timestamp": t0 + i * 3_600_000}
                      for i in range(3)], partition=0)
    return name, t0


def _iso(ms: int, zone: dt.timezone = dt.UTC) -> str:
    when = dt.datetime.fromtimestamp(ms / 1000, tz=zone)
    text = when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}"
    return text + ("" if zone is dt.UTC else when.strftime("%z"))


def test_reset_to_datetime(franz: Franz, stamped: tuple[str, int], group: str) -> None:
    topic, t0 = stamped
    reset = ("consumer-groups", "--reset-offsets", "--group", group, "--topic", topic)

    def new_offset(*spec: str) -> int:
        r = franz(*reset, *spec, "--execute")
        assert r.code == 0, r
        return offsets_of(franz, group)[(topic, 0)]  # type: ignore[return-value]

    half_past = t0 + 1_800_000
    assert new_offset("--to-datetime", _iso(half_past)) == 1  # no zone: UTC, as Kafka
    assert new_offset("--to-datetime", _iso(t0) + "Z") == 0  # at a record: that record
    assert new_offset("--to-datetime", _iso(t0 + 1)) == 1
    plus2 = dt.timezone(dt.timedelta(hours=2))
    assert new_offset("--to-datetime", _iso(t0 + 5_400_000, plus2)) == 2  # +0200
    assert new_offset("--to-datetime", "2000-01-01T00:00:00.000") == 0
    assert new_offset("--to-datetime", _iso(t0 + 3 * 3_600_000)) == 3  # after all: the end
    r = franz(*reset, "--to-datetime", _iso(half_past), "--dry-run", "--output", "json")
    assert r.json()["partitions"] == [{"topic": topic, "partition": 0, "new_offset": 1}]
    assert offsets_of(franz, group) == {(topic, 0): 3}  # the dry run changed nothing
    # the lookups leave no scratch group behind
    listed = franz("consumer-groups", "--list").out.splitlines()
    assert not [g for g in listed if g.startswith("franz-offsets-for-times-")]
    for bad in ("yesterday", "2024-13-01T00:00:00", "2024-01-01 00:00:00"):
        usage_error(franz(*reset, "--to-datetime", bad), "argument --to-datetime")


def test_reset_by_duration(franz: Franz, stamped: tuple[str, int], group: str) -> None:
    topic, _ = stamped
    reset = ("consumer-groups", "--reset-offsets", "--group", group, "--topic", topic)
    expected = {"P1D": 0, "PT2H30M": 1, "PT1H30M": 2, "PT1M": 3, "PT90M": 2, "P0DT2H30M0.5S": 1}
    for duration, offset in expected.items():
        r = franz(*reset, "--by-duration", duration, "--execute")
        assert r.code == 0, r
        assert offsets_of(franz, group) == {(topic, 0): offset}, duration
    for bad in ("5m", "P", "PT", "1H", "PT-5M"):
        usage_error(franz(*reset, "--by-duration", bad), "argument --by-duration")


# --- --export and --from-file --------------------------------------------------------------------


def test_export_and_from_file_one_group(franz: Franz, ten: str, group: str,
                                        tmp_path: Path) -> None:
    reset = ("consumer-groups", "--reset-offsets", "--group", group, "--topic", ten)
    assert franz(*reset, "--to-offset", "6", "--execute").code == 0
    r = franz(*reset, "--to-current", "--export", "--dry-run")
    assert (r.code, r.out, r.err) == (0, f"{ten},0,6\n", ""), r  # Kafka's CSV, no header
    plan = tmp_path / "plan.csv"
    plan.write_text(r.out)
    assert franz(*reset, "--to-earliest", "--execute").code == 0
    from_file = ("consumer-groups", "--reset-offsets", "--group", group, "--from-file",
                 str(plan))
    r = franz(*from_file, "--dry-run")
    assert (r.code, rows(r.out, "GROUP")[1]) == (0, [group, ten, "0", "6"]), r
    assert offsets_of(franz, group) == {(ten, 0): 0}  # dry run: nothing moved
    r = franz(*from_file, "--execute")
    assert r.code == 0, r
    assert offsets_of(franz, group) == {(ten, 0): 6}
    plan.write_text(f"{ten},0,99\n")  # kept within the log, with Kafka's warning
    r = franz(*from_file, "--execute")
    assert r.code == 0 and f"New offset (99) is higher than latest offset for {ten}-0" in r.err
    assert offsets_of(franz, group) == {(ten, 0): 10}


def test_export_and_from_file_several_groups(franz: Franz, ten: str, uid: str,
                                             tmp_path: Path) -> None:
    a, b = f"exp-a-{uid}", f"exp-b-{uid}"
    groups = ("--group", a, "--group", b)
    r = franz("consumer-groups", "--reset-offsets", *groups, "--topic", ten, "--to-offset", "4",
              "--execute", "--export")
    assert (r.code, r.out) == (0, f"{a},{ten},0,4\n{b},{ten},0,4\n"), r
    plan = tmp_path / "plan.csv"
    plan.write_text(f"{a},{ten},0,2\n{b},{ten},0,8\n")
    r = franz("consumer-groups", "--reset-offsets", *groups, "--from-file", str(plan),
              "--execute", "--output", "json")
    assert r.code == 0, r
    assert [(g["group"], g["partitions"][0]["new_offset"]) for g in r.json()] == [(a, 2), (b, 8)]
    assert offsets_of(franz, a) == {(ten, 0): 2} and offsets_of(franz, b) == {(ten, 0): 8}
    # three columns need exactly one group
    plan.write_text(f"{ten},0,1\n")
    usage_error(franz("consumer-groups", "--reset-offsets", *groups, "--from-file", str(plan)),
                "topic,partition,offset rows need exactly one --group")
    # a named group the file does not cover: refused, the others done
    plan.write_text(f"{a},{ten},0,3\n")
    r = franz("consumer-groups", "--reset-offsets", *groups, "--from-file", str(plan),
              "--execute")
    assert r.code == 1, r
    assert f"No reset plan for group '{b}' found in {plan}." in r.err
    assert offsets_of(franz, a) == {(ten, 0): 3} and offsets_of(franz, b) == {(ten, 0): 8}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "--from-file: cannot read"),
        ("t,zero,1\n", "needs a topic, a partition and an offset >= 0"),
        ("t,0\n", "expected topic,partition,offset or group,topic,partition,offset"),
        ("t,0,1\ng,t,0,1\n", "expected topic,partition,offset"),
        ("t,0,-1\n", "an offset >= 0"),
    ],
)
def test_from_file_errors(franz: Franz, group: str, tmp_path: Path, content: str | None,
                          message: str) -> None:
    plan = tmp_path / "plan.csv"
    if content is not None:
        plan.write_text(content)
    usage_error(franz("consumer-groups", "--reset-offsets", "--group", group, "--from-file",
                      str(plan), "--execute"), message)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--describe", "--group", "g", "--members", "--state"), "at most one of"),
        (("--describe", "--group", "g", "--verbose"), "--verbose goes with --describe --members"),
        (("--describe", "--group", "g", "--state", "Stable"), "takes no value"),
        (("--describe", "--group", "g", "--all-groups"), "not allowed with argument --group"),
        (("--describe",), "--describe needs --group or --all-groups"),
        (("--list", "--state", "Sleeping"), "unknown group state 'Sleeping'"),
        (("--list", "--all-groups"), "--list lists every group"),
        (("--reset-offsets", "--group", "g", "--to-earliest"),
         "needs --topic, --all-topics or --from-file"),
        (("--reset-offsets", "--group", "g", "--all-topics"), "needs one of --to-earliest"),
        (("--describe", "--group", "g", "--export"), "go with --reset-offsets"),
        (("--describe", "--group", "g", "--all-topics"), "go with --reset-offsets"),
        (("--delete", "--group", "g", "--members"), "go with --describe"),
    ],
)
def test_group_usage_errors(franz: Franz, args: tuple[str, ...], message: str) -> None:
    usage_error(franz("consumer-groups", *args), message)


# --- the console tools' --property forms --------------------------------------------------------


def test_consumer_properties(franz: Franz, v2: V2Client, uid: str) -> None:
    name = f"prop-{uid}"
    assert franz("topics", "--create", "--topic", name, "--partitions", "1").code == 0
    ts = int(time.time() * 1000) - 60_000  # recent: retention keeps it
    v2.produce(name, [
        {"key": v2.b64("k1"), "value": v2.b64("v1"), "timestamp": ts,
         "headers": [{"key": "h1", "value": v2.b64("x")}, {"key": "h2", "value": None}]},
        {"value": v2.b64("v2"), "timestamp": ts + 1},
    ], partition=0)
    read = ("consume", "--topic", name, "--from-beginning", "--max-messages", "2")
    r = franz(*read, "--property", "print.timestamp=true", "--property", "print.partition=true",
              "--property", "print.offset=true", "--property", "print.headers=true",
              "--property", "print.key=true")
    assert (r.code, r.err) == (0, "Processed a total of 2 messages\n"), r
    assert r.out.splitlines() == [
        f"CreateTime:{ts}\tPartition:0\tOffset:0\th1:x,h2:null\tk1\tv1",
        f"CreateTime:{ts + 1}\tPartition:0\tOffset:1\tNO_HEADERS\tnull\tv2"]
    r = franz(*read, "--property", "print.key=true", "--property", "key.separator= | ",
              "--property", "null.literal=<none>")
    assert r.out.splitlines() == ["k1 | v1", "<none> | v2"]
    r = franz(*read, "--property", "print.offset=true", "--property", "print.value=false",
              "--property", "line.separator=;")
    assert r.out == "Offset:0;Offset:1;"
    r = franz(*read, "--property", "print.headers=true", "--property", "headers.separator=|")
    assert r.out.splitlines() == ["h1:x|h2:null\tv1", "NO_HEADERS\tv2"]
    # the flag and the property say the same; a String deserializer prints the bytes
    flag = franz(*read, "--print-key")
    prop = franz(*read, "--property", "print.key=TRUE", "--property",
                 "key.deserializer=org.apache.kafka.common.serialization.StringDeserializer")
    assert flag.out == prop.out == "k1\tv1\nnull\tv2\n"
    # with a group too
    r = franz(*read, "--group", f"g-prop-{uid}", "--property", "print.offset=true")
    assert r.out.splitlines() == ["Offset:0\tv1", "Offset:1\tv2"]


def test_producer_properties(franz: Franz, uid: str) -> None:
    name = f"pprop-{uid}"
    assert franz("topics", "--create", "--topic", name, "--partitions", "1").code == 0
    produce(franz, name, ["k1::v1", "k2::v::2"], "--property", "parse.key=true",
            "--property", "key.separator=::")
    produce(franz, name, ["k3\tv3"], "--parse-key")  # the flags stay
    produce(franz, name, ["k4,v4"], "--parse-key", "--key-separator", ",")
    r = franz("produce", "--topic", name, "--property", "parse.key=true",
              stdin=b"no separator\n")
    assert r.code == 1 and "line 1: no key separator found" in r.err, r
    r = franz("consume", "--topic", name, "--from-beginning", "--max-messages", "4",
              "--property", "print.key=true", "--property", "key.separator==")
    assert r.out.splitlines() == ["k1=v1", "k2=v::2", "k3=v3", "k4=v4"]


@pytest.mark.parametrize(
    ("tool", "prop", "message"),
    [
        ("consume", "print.keys=true", "unknown property 'print.keys'; did you mean print.key?"),
        ("consume", "print.timestmp=true", "did you mean print.timestamp?"),
        ("consume", "print.key=yes", "print.key must be true or false, got 'yes'"),
        ("consume", "print.key", "--property needs KEY=VALUE, got 'print.key'"),
        ("consume", "value.deserializer=io.confluent.kafka.serializers.KafkaAvroDeserializer",
         "only org.apache.kafka.common.serialization.StringDeserializer"),
        ("produce", "parse.kye=true", "unknown property 'parse.kye'; did you mean parse.key?"),
        ("produce", "parse.headers=true", "property 'parse.headers' is not supported by franz"),
        ("produce", "parse.key=1", "parse.key must be true or false, got '1'"),
    ],
)
def test_property_errors_exit_2(franz: Franz, topic: str, tool: str, prop: str,
                                message: str) -> None:
    """Refused before anything is read or written: the topic need not even exist."""
    r = franz(tool, "--topic", topic, "--property", prop, "--max-messages", "1") \
        if tool == "consume" else franz(tool, "--topic", topic, "--property", prop, stdin=b"a\n")
    usage_error(r, message)
