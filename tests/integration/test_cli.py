"""The ``franz`` admin and client commands (app/commands), run as the real executable
against real servers; each test checks what a person or a script sees: stdout, stderr
and the exit code (0 done, 1 refused or failed, 2 usage or no server)."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from conftest import ROOT, free_port

if TYPE_CHECKING:
    from conftest import V2Client


def franz_command() -> list[str]:
    """The installed ``franz`` console script next to this interpreter, else
    ``python -m app.cli``. Run with ``CLI_ENV``, so the script imports this checkout
    even when the package was installed (editable) from another one."""
    script = Path(sys.executable).with_name("franz")
    if script.exists():
        return [str(script)]
    found = shutil.which("franz")
    return [found] if found else [sys.executable, "-m", "app.cli"]


CLI_ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
}


@dataclass
class Result:
    code: int
    out: str
    err: str
    raw: bytes

    def json(self) -> Any:
        return json.loads(self.out)


Franz = Callable[..., Result]


@pytest.fixture(scope="session")
def franz_exe() -> list[str]:
    return franz_command()


def _run(exe: list[str], url: str, args: tuple[str, ...], stdin: bytes | None,
         timeout: float, with_url: bool) -> Result:
    cmd = [*exe, *args]
    if with_url:
        cmd[len(exe) + 1:len(exe) + 1] = ["--bootstrap-server", url]
    proc = subprocess.run(cmd, input=stdin or b"", capture_output=True, cwd=ROOT,
                          timeout=timeout, check=False, env=CLI_ENV)
    return Result(proc.returncode, proc.stdout.decode(errors="replace"),
                  proc.stderr.decode(errors="replace"), proc.stdout)


@pytest.fixture
def franz(franz_exe: list[str], franz_url: str) -> Franz:
    """``franz("topics", "--list", stdin=b"...")``: run against the shared server."""

    def run(*args: str, stdin: bytes | None = None, timeout: float = 60.0,
            url: str | None = None, with_url: bool = True) -> Result:
        return _run(franz_exe, url or franz_url, args, stdin, timeout, with_url)

    return run


@pytest.fixture
def base(client: httpx.Client) -> str:
    return "/v3/clusters/" + client.get("/v3/clusters").json()["data"][0]["cluster_id"]


@pytest.fixture
def created(franz: Franz, topic: str) -> str:
    """``topic`` with 2 partitions and a retention.ms override."""
    r = franz("topics", "--create", "--topic", topic, "--partitions", "2",
              "--config", "retention.ms=3600000")
    assert (r.code, r.out, r.err) == (0, f"Created topic {topic}.\n", ""), r
    return topic


def describe_lines(out: str) -> list[dict[str, str]]:
    """Kafka's tab-separated ``Key: value`` lines as dicts."""
    rows = []
    for line in out.splitlines():
        fields = line.strip("\t").split("\t")
        rows.append(dict(f.split(": ", 1) if ": " in f else (f.rstrip(":"), "") for f in fields))
    return rows


# --- topics ----------------------------------------------------------------------------------


def test_topics_create_and_describe(franz: Franz, created: str) -> None:
    r = franz("topics", "--describe", "--topic", created)
    assert r.code == 0 and r.err == "", r
    lines = r.out.splitlines()
    assert len(lines) == 3
    assert re.fullmatch(
        rf"Topic: {created}\tTopicId: \S+\tPartitionCount: 2\tReplicationFactor: 1\t"
        r"Configs: retention.ms=3600000", lines[0]), lines[0]
    for p, line in enumerate(lines[1:]):
        assert line == f"\tTopic: {created}\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0"


def test_topics_describe_json(franz: Franz, created: str) -> None:
    r = franz("topics", "--describe", "--topic", created, "--output", "json")
    assert r.code == 0, r
    body = r.json()
    assert body["topic"] == created and body["partition_count"] == 2
    assert body["replication_factor"] == 1 and body["is_internal"] is False
    assert body["configs"] == {"retention.ms": "3600000"}
    assert body["partitions"] == [
        {"partition": p, "leader": 0, "replicas": [0], "isr": [0]} for p in (0, 1)
    ]


def test_topics_create_with_defaults_and_options(franz: Franz, topic: str) -> None:
    r = franz("topics", "--create", "--topic", topic, "--replication-factor", "1",
              "--output", "json")
    assert r.code == 0, r
    assert r.json()["partition_count"] == 3  # the server's num.partitions


def test_topics_create_existing(franz: Franz, created: str) -> None:
    r = franz("topics", "--create", "--topic", created)
    assert r.code == 1 and r.out == ""
    assert r.err == f"franz topics: error: Topic '{created}' already exists.\n"
    r = franz("topics", "--create", "--topic", created, "--if-not-exists")
    assert r.code == 0, r


def test_topics_create_refused(franz: Franz, topic: str) -> None:
    r = franz("topics", "--create", "--topic", topic, "--config", "retention.ms=soon")
    assert r.code == 1 and "retention.ms" in r.err, r
    r = franz("topics", "--create", "--topic", topic, "--replication-factor", "3")
    assert r.code == 1 and "replication" in r.err.lower(), r
    r = franz("topics", "--create", "--topic", "bad/name")
    assert r.code == 1 and "Invalid topic name" in r.err, r


def test_topics_list(franz: Franz, created: str) -> None:
    r = franz("topics", "--list")
    assert r.code == 0, r
    names = r.out.splitlines()
    assert created in names and "__consumer_offsets" in names
    assert names == sorted(names)
    r = franz("topics", "--list", "--exclude-internal")
    assert created in r.out.splitlines() and "__consumer_offsets" not in r.out
    r = franz("topics", "--list", "--output", "json")
    assert created in r.json()


def test_topics_describe_all(franz: Franz, created: str) -> None:
    r = franz("topics", "--describe", "--exclude-internal")
    assert r.code == 0, r
    heads = [d["Topic"] for d in describe_lines(r.out) if "PartitionCount" in d]
    assert created in heads and "__consumer_offsets" not in heads


def test_topics_describe_unknown(franz: Franz, topic: str) -> None:
    r = franz("topics", "--describe", "--topic", topic)
    assert (r.code, r.out) == (1, "")
    assert r.err == f"franz topics: error: Topic '{topic}' does not exist.\n"
    r = franz("topics", "--describe", "--topic", topic, "--if-exists")
    assert (r.code, r.out, r.err) == (0, "", "")


def test_topics_alter_partitions_and_configs(franz: Franz, created: str) -> None:
    r = franz("topics", "--alter", "--topic", created, "--partitions", "4",
              "--config", "cleanup.policy=compact", "--config", "max.message.bytes=2048")
    assert r.code == 0, r
    assert r.out.startswith(f"Altered topic {created}: partitions increased to 4")
    head = describe_lines(franz("topics", "--describe", "--topic", created).out)[0]
    assert head["PartitionCount"] == "4"
    assert head["Configs"] == "cleanup.policy=compact,max.message.bytes=2048,retention.ms=3600000"
    r = franz("topics", "--alter", "--topic", created, "--delete-config", "cleanup.policy",
              "--delete-config", "retention.ms", "--output", "json")
    assert r.code == 0, r
    assert r.json()["configs"] == {"max.message.bytes": "2048"}


def test_topics_alter_refused(franz: Franz, created: str, topic: str) -> None:
    r = franz("topics", "--alter", "--topic", created, "--partitions", "1")
    assert r.code == 1 and "can only be increased" in r.err, r
    r = franz("topics", "--alter", "--topic", created, "--config", "retention.ms=x")
    assert r.code == 1 and "retention.ms" in r.err, r
    r = franz("topics", "--alter", "--topic", created, "--config", "no.such.key=1")
    assert r.code == 1 and "no.such.key" in r.err, r
    r = franz("topics", "--alter", "--topic", topic + "-missing", "--partitions", "5")
    assert r.code == 1 and "does not exist" in r.err, r
    r = franz("topics", "--alter", "--topic", topic + "-missing", "--partitions", "5",
              "--if-exists")
    assert r.code == 0, r


def test_topics_delete(franz: Franz, created: str) -> None:
    r = franz("topics", "--delete", "--topic", created)
    assert (r.code, r.out) == (0, f"Deleted topic {created}.\n"), r
    assert franz("topics", "--describe", "--topic", created).code == 1
    r = franz("topics", "--delete", "--topic", created)
    assert r.code == 1 and r.err == f"franz topics: error: Topic '{created}' does not exist.\n"
    assert franz("topics", "--delete", "--topic", created, "--if-exists").code == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("topics", "--create"), "--create needs --topic"),
        (("topics", "--list", "--describe"), "not allowed with argument"),
        (("topics",), "one of the arguments"),
        (("topics", "--create", "--topic", "t", "--config", "novalue"), "needs KEY=VALUE"),
        (("topics", "--create", "--topic", "t", "--partitions", "0"), "must be >= 1"),
        (("topics", "--alter", "--topic", "t"), "--alter needs --partitions"),
        (("topics", "--describe", "--replication-factor", "1"), "--replication-factor goes"),
        (("consumer-groups", "--describe"), "--describe needs --group"),
        (("consumer-groups", "--reset-offsets", "--group", "g"), "needs --topic"),
        (("consumer-groups", "--reset-offsets", "--group", "g", "--topic", "t"),
         "--to-earliest, --to-latest or --to-offset"),
        (("consumer-groups", "--list", "--execute"), "go with --reset-offsets"),
        (("produce",), "--topic"),
        (("consume", "--topic", "t", "--max-messages", "0"), "must be >= 1"),
    ],
)
def test_usage_errors_exit_2(franz: Franz, args: tuple[str, ...], message: str) -> None:
    r = franz(*args)
    assert r.code == 2 and r.out == "", r
    assert "usage: franz" in r.err and message in r.err, r.err


def test_bad_bootstrap_server_is_a_usage_error(franz: Franz) -> None:
    r = franz("topics", "--list", "--bootstrap-server", "ftp://x", with_url=False)
    assert r.code == 2 and "--bootstrap-server: not an http(s) URL" in r.err, r


@pytest.mark.parametrize(
    ("args", "stdin"),
    [
        (("topics", "--list"), None),
        (("topics", "--create", "--topic", "t"), None),
        (("consumer-groups", "--describe", "--group", "g"), None),
        (("produce", "--topic", "t"), b"a\n"),
        (("consume", "--topic", "t", "--max-messages", "1"), None),
    ],
)
def test_server_down_exits_2_with_a_clear_message(franz: Franz, args: tuple[str, ...],
                                                  stdin: bytes | None) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    r = franz(*args, stdin=stdin, url=url)
    assert r.code == 2 and r.out == "", r
    assert f"error: cannot reach franz at {url}: connection refused" in r.err, r.err


def test_bootstrap_server_default_and_host_port_form(franz: Franz, franz_url: str,
                                                     created: str) -> None:
    host_port = franz_url.removeprefix("http://")
    r = franz("topics", "--list", url=host_port)
    assert r.code == 0 and created in r.out.splitlines(), r
    env_run = subprocess.run([*franz_command(), "topics", "--list"], capture_output=True,
                             env={**CLI_ENV, "FRANZ_BOOTSTRAP_SERVER": franz_url},
                             timeout=60, check=False)
    assert env_run.returncode == 0 and created in env_run.stdout.decode().splitlines()


def test_help_lists_the_commands(franz: Franz) -> None:
    """Also proves the executable under test runs this checkout's code."""
    r = franz("--help", with_url=False)
    assert r.code == 0
    for command in ("topics", "consumer-groups", "produce", "consume", "serve"):
        assert command in r.out


# --- produce and consume ---------------------------------------------------------------------


def test_produce_then_consume_from_beginning(franz: Franz, created: str) -> None:
    lines = [f"line-{i}" for i in range(2500)]
    r = franz("produce", "--topic", created, "--batch-size", "700",
              stdin=("\n".join(lines) + "\n").encode())
    assert (r.code, r.out, r.err) == (0, "", ""), r
    r = franz("consume", "--topic", created, "--from-beginning", "--max-messages", "2500")
    assert r.code == 0, r
    assert sorted(r.out.splitlines()) == sorted(lines)
    assert r.err == "Processed a total of 2500 messages\n"


def test_produce_keeps_order_and_bytes(franz: Franz, topic: str) -> None:
    franz("topics", "--create", "--topic", topic, "--partitions", "1")
    data = b"first\r\n\xff\xfe binary\n\nlast without newline"
    assert franz("produce", "--topic", topic, stdin=data).code == 0
    r = franz("consume", "--topic", topic, "--from-beginning", "--max-messages", "4")
    assert r.code == 0, r
    assert r.raw == b"first\n\xff\xfe binary\n\nlast without newline\n"


def test_produce_parse_key_and_consume_print_key(franz: Franz, topic: str) -> None:
    franz("topics", "--create", "--topic", topic, "--partitions", "1")
    r = franz("produce", "--topic", topic, "--parse-key", stdin=b"k1\tv1\nk2\tv\t2\n")
    assert r.code == 0, r
    r = franz("produce", "--topic", topic, "--parse-key", "--key-separator", ":",
              stdin=b"k3:v3\n")
    assert r.code == 0, r
    r = franz("consume", "--topic", topic, "--from-beginning", "--max-messages", "3",
              "--print-key")
    assert r.out.splitlines() == ["k1\tv1", "k2\tv\t2", "k3\tv3"]
    r = franz("consume", "--topic", topic, "--from-beginning", "--max-messages", "1",
              "--output", "json")
    row = json.loads(r.out)
    assert {k: row[k] for k in ("topic", "partition", "offset", "key", "value")} == {
        "topic": topic, "partition": 0, "offset": 0, "key": "k1", "value": "v1"}
    assert isinstance(row["timestamp"], int)


def test_produce_reports_failed_records_and_exits_1(franz: Franz, topic: str) -> None:
    franz("topics", "--create", "--topic", topic, "--partitions", "1")
    r = franz("produce", "--topic", topic, "--parse-key", stdin=b"k1\tv1\nno separator\nk3\tv3\n")
    assert r.code == 1 and r.out == ""
    assert r.err == "franz produce: line 2: no key separator found\n"
    r = franz("consume", "--topic", topic, "--from-beginning", "--max-messages", "2",
              "--print-key")
    assert r.out.splitlines() == ["k1\tv1", "k3\tv3"]


def test_produce_record_too_large(franz: Franz, topic: str) -> None:
    franz("topics", "--create", "--topic", topic, "--partitions", "1",
          "--config", "max.message.bytes=200")
    r = franz("produce", "--topic", topic, stdin=b"small\n" + b"x" * 1000 + b"\nsmall too\n")
    assert r.code == 1, r
    assert re.fullmatch(r"franz produce: line 2: error 413: .+\n", r.err), r.err
    r = franz("consume", "--topic", topic, "--from-beginning", "--max-messages", "2")
    assert r.out.splitlines() == ["small", "small too"]


def test_produce_to_unknown_topic_without_auto_creation(franz: Franz, strict_url: str,
                                                        topic: str) -> None:
    r = franz("produce", "--topic", topic, stdin=b"a\nb\n", url=strict_url)
    assert r.code == 1 and r.out == "", r
    assert "error: Topic" in r.err and "not found" in r.err
    assert "lines 1-2 were not written" in r.err


def test_produce_empty_input_and_json_summary(franz: Franz, created: str) -> None:
    assert franz("produce", "--topic", created, stdin=b"").code == 0
    r = franz("produce", "--topic", created, "--output", "json", stdin=b"a\nb\n")
    assert r.code == 0 and r.json() == {"topic": created, "produced": 2, "failed": 0}


def test_produce_progress_only_on_a_terminal(franz_exe: list[str], franz_url: str,
                                             created: str, tmp_path: Path) -> None:
    lines = tmp_path / "lines"
    lines.write_bytes(b"".join(b"%d\n" % i for i in range(300_000)))
    leader, follower = pty.openpty()
    with lines.open("rb") as stdin:
        proc = subprocess.Popen(
            [*franz_exe, "produce", "--bootstrap-server", franz_url, "--topic", created,
             "--batch-size", "500"],
            stdin=stdin, stdout=subprocess.PIPE, stderr=follower, cwd=ROOT, env=CLI_ENV)
    os.close(follower)
    seen = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        seen += chunk
    assert proc.wait(60) == 0
    os.close(leader)
    assert re.search(rb"\r\d+ records \([\d,]+/s\)", seen), seen[:200]
    assert seen.endswith(b"\r\x1b[K")  # the line is erased at the end
    assert proc.stdout is not None and proc.stdout.read() == b""
    # and nothing of the kind when stderr is not a terminal
    r = _run(franz_exe, franz_url, ("produce", "--topic", created), b"1\n2\n", 60, True)
    assert (r.code, r.err) == (0, "")


def test_consume_starts_at_the_end_without_from_beginning(franz_exe: list[str], franz_url: str,
                                                          franz: Franz, created: str) -> None:
    assert franz("produce", "--topic", created, stdin=b"old\n").code == 0
    proc = subprocess.Popen(
        [*franz_exe, "consume", "--bootstrap-server", franz_url, "--topic", created,
         "--max-messages", "1", "--timeout-ms", "30000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=CLI_ENV)
    i = 0
    while proc.poll() is None and i < 100:
        franz("produce", "--topic", created, stdin=f"new-{i}\n".encode())
        i += 1
        time.sleep(0.2)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out.decode().startswith("new-"), out
    assert err.decode() == "Processed a total of 1 messages\n"


def test_consume_timeout(franz: Franz, created: str) -> None:
    started = time.monotonic()
    r = franz("consume", "--topic", created, "--timeout-ms", "1500")
    assert (r.code, r.out, r.err) == (0, "", "Processed a total of 0 messages\n"), r
    assert 1.4 < time.monotonic() - started < 20


def test_consume_unknown_topic(franz: Franz, topic: str) -> None:
    for extra in ((), ("--group", "g")):
        r = franz("consume", "--topic", topic, "--max-messages", "1", *extra)
        assert r.code == 1, r
        assert f"error: Topic '{topic}' does not exist." in r.err


# --- consumer groups -----------------------------------------------------------------------


@pytest.fixture
def consumed_group(franz: Franz, created: str, group: str) -> str:
    """``group`` has read (and committed) all 6 records of ``created``, then 4 more
    records were written: lag 4 in all, no members. (Unkeyed records of one request go
    to one partition, the next request's to the next: each produce here is two. Without
    idempotence: with an Idempotency-Key a request's unkeyed records go where its key
    hashes, which would make the partitions here random.)"""
    for lines in (b"a\nb\nc\n", b"d\ne\nf\n"):
        assert franz("produce", "--no-idempotence", "--topic", created, stdin=lines).code == 0
    r = franz("consume", "--topic", created, "--group", group, "--from-beginning",
              "--max-messages", "6")
    assert r.code == 0 and sorted(r.out.split()) == list("abcdef"), r
    for lines in (b"g\nh\n", b"i\nj\n"):
        assert franz("produce", "--no-idempotence", "--topic", created, stdin=lines).code == 0
    return group


def describe_rows(out: str) -> list[list[str]]:
    lines = [ln for ln in out.splitlines() if ln.strip()]
    header = next(i for i, ln in enumerate(lines) if ln.startswith("GROUP"))
    assert lines[header].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                                     "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    return [ln.split() for ln in lines[header + 1:]]


def test_consume_with_group_commits_and_resumes(franz: Franz, consumed_group: str,
                                                created: str) -> None:
    r = franz("consume", "--topic", created, "--group", consumed_group, "--max-messages", "4")
    assert r.code == 0 and sorted(r.out.split()) == list("ghij"), r
    r = franz("consume", "--topic", created, "--group", consumed_group, "--timeout-ms", "1500")
    assert (r.code, r.out) == (0, ""), r


def test_consumer_groups_describe(franz: Franz, consumed_group: str, created: str) -> None:
    r = franz("consumer-groups", "--describe", "--group", consumed_group)
    assert r.code == 0 and r.err == "", r
    assert f"Consumer group '{consumed_group}' has no active members." in r.out
    rows = describe_rows(r.out)
    assert [row[:2] for row in rows] == [[consumed_group, created]] * len(rows)
    assert sum(int(row[5]) for row in rows) == 4  # LAG
    for row in rows:
        assert int(row[4]) - int(row[3]) == int(row[5])
        assert row[6:] == ["-", "-", "-"]
    r = franz("consumer-groups", "--describe", "--group", consumed_group, "--output", "json")
    body = r.json()
    assert body["group"] == consumed_group and body["state"] == "EMPTY"
    assert sum(p["lag"] for p in body["partitions"]) == 4
    assert all(p["consumer_id"] is None for p in body["partitions"])


def test_consumer_groups_describe_active_member(franz: Franz, v2: V2Client,
                                                consumed_group: str, created: str) -> None:
    v2.create_consumer(consumed_group, name="member-1", **{"auto.commit.enable": "false"})
    inst = f"/consumers/{consumed_group}/instances/member-1"
    try:
        v2.post(inst + "/subscription", {"topics": [created]})
        v2.records(inst, timeout=200)
        r = franz("consumer-groups", "--describe", "--group", consumed_group)
        assert r.code == 0 and "no active members" not in r.out, r
        rows = describe_rows(r.out)
        assert {row[2] for row in rows} == {"0", "1"}
        assert all(row[6] == "member-1" and row[8] == "member-1" for row in rows)
        r = franz("consumer-groups", "--reset-offsets", "--group", consumed_group, "--topic",
                  created, "--to-earliest", "--execute")
        assert r.code == 1, r
        assert (f"Assignments can only be reset if the group '{consumed_group}' is inactive, "
                "but the current state is STABLE.") in r.err
        r = franz("consumer-groups", "--delete", "--group", consumed_group)
        assert r.code == 1 and "Deletion of consumer group" in r.err, r
    finally:
        v2.http.delete(inst)


def test_consumer_groups_describe_unknown(franz: Franz, group: str) -> None:
    r = franz("consumer-groups", "--describe", "--group", group)
    assert (r.code, r.out) == (1, "")
    assert r.err == f"franz consumer-groups: error: Consumer group '{group}' does not exist.\n"


def test_consumer_groups_list(franz: Franz, consumed_group: str) -> None:
    r = franz("consumer-groups", "--list")
    assert r.code == 0 and consumed_group in r.out.splitlines(), r
    r = franz("consumer-groups", "--list", "--state")
    assert [consumed_group, "EMPTY"] in [ln.split() for ln in r.out.splitlines()]
    assert r.out.splitlines()[0].split() == ["GROUP", "STATE"]
    r = franz("consumer-groups", "--list", "--output", "json")
    assert consumed_group in r.json()
    r = franz("consumer-groups", "--list", "--state", "--output", "json")
    assert {"group": consumed_group, "state": "EMPTY"} in r.json()


def _offsets(franz: Franz, group: str) -> dict[int, tuple[int, int]]:
    body = franz("consumer-groups", "--describe", "--group", group, "--output", "json").json()
    return {p["partition"]: (p["current_offset"], p["log_end_offset"]) for p in body["partitions"]}


def test_reset_offsets_dry_run_and_execute(franz: Franz, consumed_group: str,
                                           created: str) -> None:
    before = _offsets(franz, consumed_group)
    r = franz("consumer-groups", "--reset-offsets", "--group", consumed_group, "--topic",
              created, "--to-earliest")
    assert r.code == 0, r
    assert "WARN: No action will be performed as the --execute option is missing." in r.err
    rows = [ln.split() for ln in r.out.splitlines() if ln.strip()]
    assert rows == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                    [consumed_group, created, "0", "0"], [consumed_group, created, "1", "0"]]
    r = franz("consumer-groups", "--reset-offsets", "--group", consumed_group, "--topic",
              created, "--to-earliest", "--dry-run")
    assert r.code == 0 and r.err == "", r
    assert _offsets(franz, consumed_group) == before
    r = franz("consumer-groups", "--reset-offsets", "--group", consumed_group, "--topic",
              created, "--to-earliest", "--execute")
    assert r.code == 0 and r.err == "", r
    assert {p: cur for p, (cur, _) in _offsets(franz, consumed_group).items()} == {0: 0, 1: 0}
    r = franz("consume", "--topic", created, "--group", consumed_group, "--max-messages", "10")
    assert sorted(r.out.split()) == list("abcdefghij")


def test_reset_offsets_to_latest_and_to_offset(franz: Franz, consumed_group: str,
                                               created: str) -> None:
    ends = {p: end for p, (_, end) in _offsets(franz, consumed_group).items()}
    r = franz("consumer-groups", "--reset-offsets", "--group", consumed_group, "--topic",
              created, "--to-latest", "--execute", "--output", "json")
    assert r.code == 0, r
    assert r.json() == {"group": consumed_group, "executed": True, "partitions": [
        {"topic": created, "partition": p, "new_offset": ends[p]} for p in (0, 1)]}
    assert all(cur == end for cur, end in _offsets(franz, consumed_group).values())
    r = franz("consumer-groups", "--reset-offsets", "--group", consumed_group, "--topic",
              f"{created}:1", "--to-offset", "1", "--execute")
    assert r.code == 0, r
    assert _offsets(franz, consumed_group)[1][0] == 1
    r = franz("consumer-groups", "--reset-offsets", "--group", consumed_group, "--topic",
              f"{created}:0", "--to-offset", "999", "--execute")
    assert r.code == 0, r
    assert f"New offset (999) is higher than latest offset for {created}-0. " \
           f"Value will be set to {ends[0]}" in r.err
    assert _offsets(franz, consumed_group)[0][0] == ends[0]


def test_reset_offsets_errors(franz: Franz, consumed_group: str, created: str,
                              topic: str) -> None:
    r = franz("consumer-groups", "--reset-offsets", "--group", consumed_group, "--topic",
              topic + "-missing", "--to-earliest", "--execute")
    assert r.code == 1 and f"Topic '{topic}-missing' does not exist." in r.err, r
    r = franz("consumer-groups", "--reset-offsets", "--group", consumed_group, "--topic",
              f"{created}:7", "--to-earliest", "--execute")
    assert r.code == 1 and "has no partition 7" in r.err, r
    r = franz("consumer-groups", "--reset-offsets", "--group", consumed_group, "--topic",
              f"{created}:x", "--to-earliest")
    assert r.code == 2 and "bad partition list" in r.err, r


def test_reset_offsets_of_a_new_group(franz: Franz, created: str, group: str) -> None:
    r = franz("consumer-groups", "--reset-offsets", "--group", group, "--topic", created,
              "--to-earliest", "--execute")
    assert r.code == 0, r
    assert set(_offsets(franz, group)) == {0, 1}


def test_consumer_groups_delete(franz: Franz, consumed_group: str) -> None:
    r = franz("consumer-groups", "--delete", "--group", consumed_group)
    assert r.code == 0, r
    assert r.out == f"Deletion of requested consumer groups ('{consumed_group}') was successful.\n"
    assert franz("consumer-groups", "--describe", "--group", consumed_group).code == 1
    assert consumed_group not in franz("consumer-groups", "--list").out.splitlines()
    r = franz("consumer-groups", "--delete", "--group", consumed_group)
    assert r.code == 1 and "does not exist" in r.err, r


@pytest.fixture
def lonely_server(tmp_path: Path) -> Iterator[str]:
    """Nothing but a URL whose port answers with something that is not franz."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(502)
            self.end_headers()
            self.wfile.write(b"bad gateway from a proxy")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_an_answer_that_is_not_franz(franz: Franz, lonely_server: str) -> None:
    r = franz("topics", "--list", url=lonely_server)
    assert r.code == 1, r
    assert r.err == "franz topics: error: HTTP 502: bad gateway from a proxy\n"


def test_consume_with_group_leaves_the_group_on_sigterm(franz_exe: list[str], franz_url: str,
                                                       franz: Franz, created: str,
                                                       group: str) -> None:
    proc = subprocess.Popen(
        [*franz_exe, "consume", "--bootstrap-server", franz_url, "--topic", created,
         "--group", group], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=CLI_ENV)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            r = franz("consumer-groups", "--list", "--state", "--output", "json")
            if {"group": group, "state": "STABLE"} in r.json():
                break
            time.sleep(0.2)
        else:
            pytest.fail("the consumer never joined its group")
    finally:
        proc.terminate()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and err == b"Processed a total of 0 messages\n", err
    r = franz("consumer-groups", "--describe", "--group", group)
    assert f"Consumer group '{group}' has no active members." in r.out, r


def test_leader_election_and_reassign_partitions(franz: Franz, created: str,
                                                 tmp_path: Path) -> None:
    r = franz("leader-election", "--topic", created)
    assert r.code == 0 and "requested for 2 partition(s)" in r.out, r
    r = franz("leader-election", "--topic", created, "--partition", "1", "--output", "json")
    assert r.code == 0 and r.json() == [{"topic": created, "partition": 1}], r
    assert franz("leader-election", "--topic", "nope-x").code == 1
    assert franz("leader-election").code == 2  # nothing named: a usage error
    # one broker: a reassignment to a broker that does not exist is refused, naming it
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": created, "partition": 0, "replicas": [9]}]}))
    r = franz("reassign-partitions", "--reassignment-json-file", str(plan), "--execute")
    assert r.code == 1 and "9" in r.err, r
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": created, "partition": 0, "replicas": [0]}]}))
    r = franz("reassign-partitions", "--reassignment-json-file", str(plan), "--verify")
    assert r.code == 0, r
