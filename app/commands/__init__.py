"""The admin and client commands of ``franz`` (docs/cli.md), in the habits of Kafka's
shell tools; they talk to any franz server over HTTP (the v3 API where it has the call).

    topics           kafka-topics.sh: --create | --list | --describe | --alter | --delete
    consumer-groups  kafka-consumer-groups.sh: --list | --describe | --reset-offsets | --delete
    produce          kafka-console-producer.sh: lines from stdin
    consume          kafka-console-consumer.sh: records to stdout
    reassign-partitions  kafka-reassign-partitions.sh: --execute | --verify
    leader-election  kafka-leader-election.sh (preferred)
    bench            load generator: produce, consume, e2e latency, ceiling (bench.py);
                     kafka: the Kafka protocol benchmark (app.bench.kafka_protocol)
    users            add | delete | list users and API keys (users.py)
    acls             kafka-acls.sh: --add | --remove | --list (acls.py)

Every command that talks HTTP takes ``--command-config FILE`` (Kafka's client
properties: credentials, TLS; ``app.client_config``). ``users`` and ``acls`` also work
offline, on a stopped or running broker's store: ``--data-dir`` (standalone) or
``--zookeeper`` (cluster) instead of ``--bootstrap-server``; their module then has a
``run_offline(args)`` beside ``run(args, client)``.

This module only declares the arguments (``add_admin_commands``) and dispatches
(``run_admin_command``); each family lives in its own module (``handler``), imported
with ``importlib`` when it runs, so ``franz --help`` stays fast and the handler modules
import everything they need at their top. Exit codes: 0 done, 1 the server refused or a
record failed, 2 bad usage or no server at the URL, 130 interrupted.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import os
import re
import sys
from pathlib import Path
from typing import Any

DEFAULT_BOOTSTRAP = "http://127.0.0.1:8082"
BOOTSTRAP_ENV = "FRANZ_BOOTSTRAP_SERVER"
EXIT_INTERRUPTED = 130
BENCH_TOPIC = "franz-bench"
CEILING_CASES = ("echo", "get", "tiny", "tiny_plain", "latency")


COMMAND_CONFIG_HELP = ("a .properties file of Kafka client settings: basic.auth.user.info="
                       "USER:PASSWORD (or sasl.jaas.config), ssl.truststore.location, "
                       "ssl.keystore.location, ssl.key.password (docs/cli.md)")


def _common() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--bootstrap-server", metavar="URL",
        default=os.environ.get(BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP),
        help=f"the franz server, http(s)://HOST:PORT or HOST:PORT (default ${BOOTSTRAP_ENV} "
             f"or {DEFAULT_BOOTSTRAP})")
    parent.add_argument("--command-config", metavar="FILE", help=COMMAND_CONFIG_HELP)
    parent.add_argument("--output", choices=("table", "json"), default="table",
                        help="table: for people (default); json: for scripts")
    return parent


def _targets() -> argparse.ArgumentParser:
    """The options of ``users`` and ``acls``: one target, online or offline."""
    parent = argparse.ArgumentParser(add_help=False)
    target = parent.add_mutually_exclusive_group()
    target.add_argument(
        "--bootstrap-server", metavar="URL",
        help=f"online: a franz server (http(s)://HOST:PORT); needs a super user's "
             f"credentials (--command-config). Default ${BOOTSTRAP_ENV} when no target "
             "is given")
    target.add_argument("--data-dir", metavar="DIR",
                        help="offline: a standalone broker's data dir (running or stopped)")
    target.add_argument("--zookeeper", metavar="CONNECT",
                        help="offline: a cluster's ZooKeeper, HOST:PORT[,...][/CHROOT]")
    parent.add_argument("--command-config", metavar="FILE", help=COMMAND_CONFIG_HELP)
    parent.add_argument("--output", choices=("table", "json"), default="table",
                        help="table: for people (default); json: for scripts")
    return parent


def _config_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"needs KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be within 0-1, got {value}")
    return value


_DATETIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?"
                       r"(Z|[+-]\d{2}(?::?\d{2})?)?", re.IGNORECASE)
_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:[.,](\d{1,9}))?S)?)?",
                       re.IGNORECASE)


def _kafka_datetime(text: str) -> int:
    """kafka-consumer-groups.sh's --to-datetime, ``YYYY-MM-DDTHH:mm:SS.sss`` with an
    optional zone (``Z``, ``+02``, ``+0200``, ``+02:00``; none: UTC, as Kafka) -> epoch
    ms. Seconds and their fraction may be left out."""
    found = _DATETIME.fullmatch(text.strip())
    bad = argparse.ArgumentTypeError(
        f"expected YYYY-MM-DDTHH:mm:SS.sss with an optional zone (Z, +02:00), got {text!r}")
    if not found:
        raise bad
    year, month, day, hour, minute, second, fraction, zone = found.groups()
    offset = dt.timedelta(0)
    if zone and zone.upper() != "Z":
        digits = zone[1:].replace(":", "")
        offset = dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0))
        if zone[0] == "-":
            offset = -offset
    try:
        when = dt.datetime(int(year), int(month), int(day), int(hour), int(minute),
                           int(second or 0), int((fraction or "0").ljust(6, "0")[:6]),
                           tzinfo=dt.timezone(offset))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None
    ms = int(when.timestamp() * 1000)
    if ms < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is before 1970")
    return ms


def _iso_duration(text: str) -> int:
    """kafka-consumer-groups.sh's --by-duration, an ISO-8601 duration ``PnDTnHnMnS``
    (Java's Duration.parse without signs; seconds may have a fraction) -> milliseconds."""
    found = _DURATION.fullmatch(text.strip())
    if not found or not any(found.groups()) or text.strip().upper().endswith("T"):
        raise argparse.ArgumentTypeError(
            f"expected an ISO-8601 duration PnDTnHnMnS (e.g. PT30M, P1DT12H), got {text!r}")
    days, hours, minutes, seconds = (int(g or 0) for g in found.groups()[:4])
    millis = int((found.group(5) or "0").ljust(3, "0")[:3])
    return (((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000 + millis


def _topics(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("topics", parents=[common],
                       help="create, list, describe, alter, delete topics",
                       description="Manage topics, like kafka-topics.sh.")
    action = p.add_mutually_exclusive_group(required=True)
    for name, text in (("create", "create a topic"), ("list", "list topic names"),
                       ("describe", "describe topics (all, or --topic)"),
                       ("alter", "add partitions (--partitions) and set or reset configs"),
                       ("delete", "delete a topic")):
        action.add_argument(f"--{name}", dest="action", action="store_const", const=name, help=text)
    p.add_argument("--topic", help="the topic; with --list and --describe also a regular "
                                   "expression the whole name must match, e.g. 'orders-.*'")
    p.add_argument("--partitions", type=_positive,
                   help="partition count (create; alter: the new, larger count)")
    p.add_argument("--replication-factor", type=_positive, help="replicas per partition (create)")
    p.add_argument("--config", type=_config_pair, action="append", default=[], metavar="KEY=VALUE",
                   help="a topic config (create, alter); repeat for more")
    p.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                   help="reset a topic config to its default (alter); repeat for more")
    p.add_argument("--if-not-exists", action="store_true", help="create: no error if it exists")
    p.add_argument("--if-exists", action="store_true",
                   help="alter, delete, describe: no error if it does not exist")
    p.add_argument("--exclude-internal", action="store_true",
                   help="list, describe: leave out internal topics")
    report = p.add_mutually_exclusive_group()
    for name, text in (
            ("under-replicated-partitions", "describe: only partitions with fewer in-sync "
                                            "replicas than replicas"),
            ("under-min-isr-partitions", "describe: only partitions with fewer in-sync replicas "
                                         "than the topic's min.insync.replicas"),
            ("at-min-isr-partitions", "describe: only partitions with exactly "
                                      "min.insync.replicas in-sync replicas"),
            ("unavailable-partitions", "describe: only partitions without a leader, or whose "
                                       "leader is not a live broker"),
            ("topics-with-overrides", "describe: only topics with config overrides, their "
                                      "topic line only")):
        report.add_argument(f"--{name}", dest="report", action="store_const",
                            const=name.replace("-", "_"), help=text)
    p.set_defaults(handler="app.commands.topics", subparser=p, report=None)


def _groups(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("consumer-groups", parents=[common],
                       help="list, describe, reset offsets of, delete consumer groups",
                       description="Manage consumer groups, like kafka-consumer-groups.sh.")
    action = p.add_mutually_exclusive_group(required=True)
    for name, text in (("list", "list groups"),
                       ("describe", "offsets, log end offsets and lag of the groups per "
                                    "partition (--offsets, the default), or --members, "
                                    "or --state"),
                       ("reset-offsets", "move the groups' committed offsets (--topic or "
                                         "--all-topics, and one --to-*, --shift-by, "
                                         "--by-duration or --from-file)"),
                       ("delete", "delete the groups (they must have no members)")):
        action.add_argument(f"--{name}", dest="action", action="store_const", const=name, help=text)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--group", action="append", default=[], metavar="GROUP",
                       help="the group (describe, reset-offsets, delete); repeat for more")
    which.add_argument("--all-groups", action="store_true",
                       help="every group (describe, reset-offsets, delete)")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,P]",
                       help="reset-offsets: TOPIC, or TOPIC:P1,P2 for some partitions; "
                            "repeat for more")
    scope.add_argument("--all-topics", action="store_true",
                       help="reset-offsets: every partition the group has committed")
    view = p.add_mutually_exclusive_group()
    view.add_argument("--offsets", dest="view", action="store_const", const="offsets",
                      help="describe: per partition (the default)")
    view.add_argument("--members", dest="view", action="store_const", const="members",
                      help="describe: per member: host, client id, #partitions")
    p.add_argument("--state", nargs="?", const="", metavar="STATES",
                   help="list: show each group's state too, or only the groups in STATES "
                        "(comma separated, e.g. Stable,Empty); describe: the coordinator, "
                        "assignment strategy, state and #members")
    p.add_argument("--verbose", action="store_true",
                   help="describe --members: each member's assignment too")
    to = p.add_mutually_exclusive_group()
    to.add_argument("--to-earliest", dest="to", action="store_const", const="earliest",
                    help="reset to the log start offset")
    to.add_argument("--to-latest", dest="to", action="store_const", const="latest",
                    help="reset to the log end offset")
    to.add_argument("--to-current", dest="to", action="store_const", const="current",
                    help="reset to the committed offset (the log end without one)")
    to.add_argument("--to-offset", type=_non_negative, metavar="N",
                    help="reset to offset N (kept within the log start and end)")
    to.add_argument("--shift-by", type=int, metavar="N",
                    help="move the committed offset by N, negative for back (kept within "
                         "the log start and end)")
    to.add_argument("--to-datetime", type=_kafka_datetime, metavar="YYYY-MM-DDTHH:mm:SS.sss",
                    help="reset to the first offset with a timestamp at or after it; a zone "
                         "(Z, +02:00) may follow, none means UTC")
    to.add_argument("--by-duration", type=_iso_duration, metavar="PnDTnHnMnS",
                    help="reset to the first offset with a timestamp at or after now minus "
                         "this ISO-8601 duration, e.g. PT30M, P1DT12H")
    to.add_argument("--from-file", metavar="FILE",
                    help="reset to the offsets of a CSV file (topic,partition,offset or "
                         "group,topic,partition,offset per line, as --export writes)")
    p.add_argument("--export", action="store_true",
                   help="reset-offsets: print the new offsets as CSV (for --from-file) "
                        "instead of the table")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="show the new offsets only (default)")
    mode.add_argument("--execute", action="store_true", help="write the new offsets")
    p.set_defaults(handler="app.commands.groups", subparser=p, view=None)


def _produce(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("produce", parents=[common], help="write lines from stdin to a topic",
                       description="Write each line of stdin as a record, like "
                                   "kafka-console-producer.sh. Prints nothing on success; "
                                   "failed records go to stderr and the exit code is 1.")
    p.add_argument("--topic", required=True, help="the topic")
    p.add_argument("--parse-key", action="store_true", help="lines are KEY<separator>VALUE")
    p.add_argument("--key-separator", default="\t", metavar="SEP",
                   help="with --parse-key (default TAB; \\t is read as TAB)")
    p.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                   help="Kafka's line reader settings: parse.key=true, key.separator=SEP "
                        "(the same as --parse-key, --key-separator); repeatable")
    p.add_argument("--batch-size", type=_positive, default=5000, metavar="N",
                   help="at most N records per request (default 5000)")
    p.add_argument("--acks", choices=("0", "1", "all"), default="1",
                   help="default 1; 0: the server answers before writing, so requests carry "
                        "no Idempotency-Key and are not retried")
    p.add_argument("--no-idempotence", action="store_true",
                   help="send each request once, without an Idempotency-Key (Kafka's "
                        "enable.idempotence=false); by default every request carries a fresh "
                        "key and a failed one is retried with it, never writing twice")
    p.set_defaults(handler="app.commands.produce", subparser=p)


def _consume(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("consume", parents=[common], help="print a topic's records",
                       description="Print records to stdout, like kafka-console-consumer.sh. "
                                   "Without --group each partition is read directly (nothing "
                                   "is committed); with --group as a member of the group, "
                                   "committing what was printed.")
    p.add_argument("--topic", required=True, help="the topic")
    p.add_argument("--group", help="consume as a member of this group")
    p.add_argument("--from-beginning", action="store_true",
                   help="start at the log start (with --group: when the group has no offsets)")
    p.add_argument("--max-messages", type=_positive, metavar="N", help="exit after N records")
    p.add_argument("--timeout-ms", type=_positive, metavar="MS",
                   help="exit when no record came for MS milliseconds")
    p.add_argument("--print-key", action="store_true",
                   help="print KEY<TAB>VALUE (the same as --property print.key=true)")
    p.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                   help="Kafka's formatter settings: print.key, print.value, print.timestamp, "
                        "print.partition, print.offset, print.headers (true or false), "
                        "key.separator, line.separator, headers.separator, null.literal; "
                        "key/value/headers.deserializer: String- or ByteArrayDeserializer "
                        "only; repeatable")
    p.set_defaults(handler="app.commands.consume", subparser=p)


def _reassign(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("reassign-partitions", parents=[common],
                       help="move partition replicas between brokers",
                       description="Move replicas, like kafka-reassign-partitions.sh.")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--execute", dest="action", action="store_const", const="execute",
                        help="start the reassignment in the file")
    action.add_argument("--verify", dest="action", action="store_const", const="verify",
                        help="exit 0 when every partition of the file has moved")
    p.add_argument("--reassignment-json-file", metavar="FILE",
                   help='{"version":1,"partitions":[{"topic":..,"partition":..,"replicas":[..]}]}')
    p.set_defaults(handler="app.commands.reassign", subparser=p)


def _leader_election(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("leader-election", parents=[common],
                       help="move leaders back to their preferred replicas",
                       description="Preferred leader election, like kafka-leader-election.sh "
                                   "--election-type PREFERRED.")
    p.add_argument("--topic", help="the topic (all its partitions, or --partition)")
    p.add_argument("--partition", type=_non_negative, help="one partition of --topic")
    p.add_argument("--all-topic-partitions", action="store_true", help="every partition")
    p.add_argument("--path-to-json-file", metavar="FILE",
                   help='{"partitions":[{"topic":..,"partition":..}]}')
    p.set_defaults(handler="app.commands.leader_election", subparser=p)


# --- franz users and franz acls (app.commands.users, app.commands.acls) ----------------------


def _users(sub: Any, targets: argparse.ArgumentParser) -> None:
    users = sub.add_parser("users", help="add, delete, list users and API keys",
                           description="Manage the users of authentication.method=BASIC "
                                       "(the password is read from stdin, or asked twice "
                                       "at a terminal; never an argument).")
    actions = users.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = actions.add_parser("add", parents=[targets], help="add a user or set its password",
                           description="Store NAME with a password read from stdin (one "
                                       "line) or asked twice at a terminal; with --api-key, "
                                       "a generated key and secret, printed once.")
    p.add_argument("name", nargs="?", metavar="NAME", help="the user (none with --api-key)")
    p.add_argument("--api-key", action="store_true",
                   help="generate an API key and secret instead (Confluent Cloud's habit)")
    p.set_defaults(handler="app.commands.users", subparser=p)
    p = actions.add_parser("delete", parents=[targets], help="delete a user or API key")
    p.add_argument("name", metavar="NAME", help="the user or API key")
    p.set_defaults(handler="app.commands.users", subparser=p)
    p = actions.add_parser("list", parents=[targets], help="list user and API key names")
    p.set_defaults(handler="app.commands.users", subparser=p)


def _acls(sub: Any, targets: argparse.ArgumentParser) -> None:
    p = sub.add_parser("acls", parents=[targets], help="add, remove, list ACLs",
                       description="Manage ACLs, like kafka-acls.sh. On --list and --remove "
                                   "an option left out matches anything.")
    action = p.add_mutually_exclusive_group(required=True)
    for name, text in (("add", "add the ACLs the options describe"),
                       ("remove", "remove the ACLs matching the options (asks first)"),
                       ("list", "list ACLs (of the resources given, or all)")):
        action.add_argument(f"--{name}", dest="action", action="store_const", const=name, help=text)
    for kind in ("allow", "deny"):
        p.add_argument(f"--{kind}-principal", action="append", default=[], metavar="PRINCIPAL",
                       help=f"{kind.upper()} entries for PRINCIPAL, e.g. User:alice, User:* "
                            "(repeatable)")
        p.add_argument(f"--{kind}-host", action="append", default=[], metavar="HOST",
                       help=f"the hosts of the {kind.upper()} entries (default *; repeatable)")
    p.add_argument("--operation", action="append", default=[], metavar="OP",
                   help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
                        "DescribeConfigs, AlterConfigs, IdempotentWrite, All (default All "
                        "on --add; repeatable)")
    p.add_argument("--topic", action="append", default=[], metavar="TOPIC",
                   help="a topic resource; * for every topic (repeatable)")
    p.add_argument("--group", action="append", default=[], metavar="GROUP",
                   help="a consumer group resource; * for every group (repeatable)")
    p.add_argument("--cluster", action="store_true", help="the cluster resource")
    p.add_argument("--transactional-id", action="append", default=[], metavar="ID",
                   help="a transactional id resource (repeatable)")
    p.add_argument("--resource-pattern-type", type=str.lower, metavar="TYPE",
                   choices=("literal", "prefixed", "any", "match"),
                   help="literal (default on --add) or prefixed; on --list and --remove "
                        "also any (default) or match")
    p.add_argument("--principal", action="append", default=[], metavar="PRINCIPAL",
                   help="--list: only the ACLs of PRINCIPAL (repeatable)")
    p.add_argument("--producer", action="store_true",
                   help="the producer's ACLs: WRITE, DESCRIBE, CREATE on --topic "
                        "(WRITE, DESCRIBE on --transactional-id)")
    p.add_argument("--idempotent", action="store_true",
                   help="with --producer: IDEMPOTENT_WRITE on the cluster too")
    p.add_argument("--consumer", action="store_true",
                   help="the consumer's ACLs: READ, DESCRIBE on --topic, READ on --group")
    p.add_argument("--force", action="store_true", help="--remove: do not ask")
    p.set_defaults(handler="app.commands.acls", subparser=p)


# --- franz bench (run by app.commands.bench; the generator is app.bench) ---------------------


def _load_options(records: int) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--topic", default=BENCH_TOPIC, help=f"the topic (default {BENCH_TOPIC})")
    p.add_argument("--records", type=_positive, default=records, metavar="N",
                   help=f"at most N records (e2e, ceiling latency: samples) (default {records:,})")
    p.add_argument("--record-size", type=_positive, default=100, metavar="B",
                   help="value bytes per record (default 100)")
    p.add_argument("--batch", type=_positive, default=1000, metavar="R",
                   help="records per request (default 1000)")
    p.add_argument("--connections", type=_positive, default=8, metavar="C",
                   help="concurrent keep-alive connections (default 8)")
    p.add_argument("--duration", type=_positive_float, default=10.0, metavar="S",
                   help="measure for at most S seconds after the warm-up (default 10)")
    p.add_argument("--warmup", type=_non_negative_float, default=0.0, metavar="S",
                   help="unmeasured seconds first (default 0)")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the result here")
    p.add_argument("--progress", action="store_true",
                   help="progress line on stderr even when it is not a terminal")
    p.add_argument("--cpu", type=int, metavar="N", help="pin the generator to CPU N")
    p.add_argument("--server-pid", type=int, metavar="PID",
                   help="the server's pid, for its CPU time per request (same machine)")
    p.add_argument("--label", default="", help="stored in the JSON result")
    return p


def _bench(sub: Any, common: argparse.ArgumentParser) -> None:
    """``franz bench produce|consume|e2e|ceiling|kafka`` (run by ``app.commands.bench``)."""
    bench = sub.add_parser("bench", help="load-generate against franz or the ceiling servers",
                           description="HTTP load generator: records/s, MB/s, requests/s "
                                       "and latency percentiles; kafka: the Kafka protocol "
                                       "benchmark (docs/cli.md).")
    kinds = bench.add_subparsers(dest="workload", metavar="WORKLOAD", required=True)

    p = kinds.add_parser("produce", parents=[common, _load_options(1_000_000)],
                         help="closed-loop produce POSTs",
                         description="Produce --records records, --batch per POST, over "
                                     "--connections connections; creates the topic when "
                                     "missing.")
    p.add_argument("--acks", choices=("0", "1", "all"), default="1", help="default 1")
    p.add_argument("--keys", type=_non_negative, default=0, metavar="N",
                   help="N distinct keys, record i keyed key-<i mod N> (Kafka's partitioner "
                        "spreads them); 0 = unkeyed (default)")
    p.add_argument("--headers", type=_non_negative, default=0, metavar="K",
                   help="K headers of 8 random bytes on every record (default 0)")
    p.add_argument("--idempotency-keys", action="store_true",
                   help="every request carries a unique Idempotency-Key header (needs acks "
                        "1 or all)")
    p.add_argument("--partitions", type=_positive, help="partitions when the topic is created")
    p.add_argument("--config", type=_config_pair, action="append", default=[],
                   metavar="KEY=VALUE",
                   help="topic config when the topic is created, e.g. flush.messages=1")
    p.set_defaults(handler="app.commands.bench", subparser=p)

    p = kinds.add_parser("consume", parents=[common, _load_options(1_000_000)],
                         help="closed-loop range reads",
                         description="Read the last --records records of the topic (or the "
                                     "first ones with --from-beginning), --batch per GET, "
                                     "the connections sharing the partitions' stretches.")
    p.add_argument("--from-beginning", action="store_true",
                   help="read from the log start instead of near the tail")
    p.add_argument("--preload", type=int, default=0, metavar="N",
                   help="produce N records (--batch, --record-size) first; topic created "
                        "when missing")
    p.add_argument("--partitions", type=_positive, help="partitions when the topic is created")
    p.set_defaults(handler="app.commands.bench", subparser=p)

    p = kinds.add_parser("e2e", parents=[common, _load_options(1000)],
                         help="end-to-end latency: 1-record produce -> long-polling consumer",
                         description="--records samples: POST one record to partition 0, a "
                                     "consumer instance long-polling the partition receives "
                                     "it; latency = receive - send.")
    p.add_argument("--gap-ms", type=_non_negative_float, default=2.0, metavar="MS",
                   help="pause after each sample is received (default 2)")
    p.add_argument("--load-fraction", type=_fraction, default=0.0, metavar="F",
                   help="background produce (--batch, --record-size, to TOPIC-load) at F x "
                        "the produce rate measured first (default 0: idle)")
    p.add_argument("--load-rate", type=_positive_float, metavar="REC_PER_S",
                   help="the max produce rate to take F of, instead of measuring it")
    p.add_argument("--calibrate", type=_positive_float, default=3.0, metavar="S",
                   help="seconds of the produce run that measures the max rate (default 3)")
    p.set_defaults(handler="app.commands.bench", subparser=p)

    p = kinds.add_parser("ceiling", parents=[common, _load_options(1_000_000)],
                         help="measure the same-shape ceiling servers",
                         description="Start the ceiling servers on loopback (python -m "
                                     "app.bench.ceiling) and measure them with the same "
                                     "generator: echo = raw orjson POST echo of --batch "
                                     "records; get = GET building --batch records with "
                                     "orjson; tiny / tiny_plain = GET {} in FastAPI / plain "
                                     "ASGI; latency = long-poll GET woken by a POST.")
    p.add_argument("--cases", default=",".join(CEILING_CASES),
                   help=f"comma separated, of {', '.join(CEILING_CASES)} (default all)")
    p.add_argument("--samples", type=_positive, default=500, help="latency samples (500)")
    p.add_argument("--gap-ms", type=_non_negative_float, default=2.0, metavar="MS",
                   help="pause between latency samples (default 2)")
    p.add_argument("--server-cpu", type=int, metavar="N",
                   help="pin the ceiling servers to CPU N (taskset)")
    p.add_argument("--server", metavar="URL",
                   help="use a running ceiling server (python -m app.bench.ceiling)")
    p.add_argument("--plain-server", metavar="URL",
                   help="use a running plain-ASGI ceiling server (--plain)")
    p.set_defaults(handler="app.commands.bench", subparser=p)

    _bench_kafka(kinds)


def _bench_kafka(kinds: Any) -> None:
    """``franz bench kafka``: app.bench.kafka_protocol's run. It starts the broker it
    measures, so it takes no --bootstrap-server; an option left out keeps the
    benchmark's default (named in the help, set in app.bench.kafka_protocol)."""
    p = kinds.add_parser(
        "kafka", help="Kafka-protocol produce and fetch beside REST and same-run ceilings",
        description="Start, on loopback in a temporary directory, one franz serve with a "
                    "Kafka listener and two ceiling servers (a bare append listener, a bare "
                    "sendfile server), pinned to --server-cpu; then, per round, each case "
                    "right after its ceiling: raw Kafka produce and fetch, librdkafka, kcat, "
                    "REST produce and range reads. Prints a table of records/s, MB/s and "
                    "broker CPU per case and the ratios to the ceilings and to REST "
                    "(docs/cli.md \"bench\", docs/benchmarks.md \"Kafka protocol\").")
    p.add_argument("--quick", action="store_true",
                   help="smoke run, ~30 s: 1 round, 0.3 + 1 s per case, a 128 MiB fetch "
                        "topic (wins over --rounds, --warmup and --duration)")
    p.add_argument("--rounds", type=_positive, metavar="N", help="rounds (default 2)")
    p.add_argument("--duration", type=_positive_float, metavar="S",
                   help="measured seconds per case (default 5)")
    p.add_argument("--warmup", type=_non_negative_float, metavar="S",
                   help="unmeasured seconds before each case (default 1)")
    p.add_argument("--cases", metavar="LIST",
                   help="comma separated case names (default all; docs/cli.md lists them)")
    p.add_argument("--partitions", type=_positive, metavar="P",
                   help="partitions of every topic (default 8)")
    p.add_argument("--server-cpu", type=int, metavar="N",
                   help="CPU of the broker and the ceiling servers (default 0)")
    p.add_argument("--client-cpu", type=int, metavar="N",
                   help="CPU of the generator and the clients it starts (default 1)")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="a broker property for the franz serve it starts (repeatable)")
    p.add_argument("--json", type=Path, metavar="FILE",
                   help="also write the rounds, the summary and the machine notes here")
    p.add_argument("--profile", type=Path, metavar="DIR",
                   help="after the rounds, py-spy the broker during the Kafka cases")
    p.add_argument("--keep-logs", action="store_true",
                   help="keep the temporary directory (logs, data) and print its path")
    p.set_defaults(handler="app.commands.bench", subparser=p, standalone=True)


def add_admin_commands(sub: Any) -> None:
    """Declare ``topics``, ``consumer-groups``, ``produce``, ``consume``,
    ``reassign-partitions``, ``leader-election``, ``bench``, ``users`` and ``acls`` on
    the ``franz`` subparsers."""
    common = _common()
    for declare in (_topics, _groups, _produce, _consume, _reassign, _leader_election, _bench):
        declare(sub, common)
    targets = _targets()
    _users(sub, targets)
    _acls(sub, targets)


def run_admin_command(args: argparse.Namespace) -> int:
    """Run the parsed command; errors are reported on stderr and become the exit code."""
    # The dispatch point: the HTTP client (httpx) and the command's own module (for
    # ``bench``, the load generator) are imported only here, when a command runs, so
    # ``franz --help`` and the declarations above stay fast.
    from app.client_config import ClientConfigError, load_client_security  # noqa: PLC0415
    from app.http_client import EXIT_USAGE, CliError, FranzClient, normalize_url  # noqa: PLC0415

    module = importlib.import_module(args.handler)
    prog = args.subparser.prog
    try:
        if getattr(args, "standalone", False):  # starts what it talks to (bench kafka)
            standalone: int = module.run_standalone(args)
            return standalone
        if getattr(args, "data_dir", None) or getattr(args, "zookeeper", None):
            if args.command_config:
                args.subparser.error("--command-config is for --bootstrap-server; --data-dir "
                                     "and --zookeeper open the store directly")
            offline: int = module.run_offline(args)
            return offline
        bootstrap: str = args.bootstrap_server or os.environ.get(BOOTSTRAP_ENV, "")
        if not bootstrap:
            args.subparser.error("give one target: --bootstrap-server URL (online), "
                                 "--data-dir DIR or --zookeeper CONNECT (offline)")
        try:
            url = normalize_url(bootstrap)
        except ValueError as exc:
            args.subparser.error(f"--bootstrap-server: {exc}")
        security = load_client_security(args.command_config)
        with FranzClient(url, security=security) as client:
            code: int = module.run(args, client)
            return code
    except ClientConfigError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except CliError as exc:
        print(f"{prog}: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
