"""The admin and client commands of ``franz`` (docs/cli.md), in the habits of Kafka's
shell tools; they talk to any franz server over HTTP (the v3 API where it has the call).

    topics           kafka-topics.sh: --create | --list | --describe | --alter | --delete
    consumer-groups  kafka-consumer-groups.sh: --list | --describe | --reset-offsets | --delete
    produce          kafka-console-producer.sh: lines from stdin
    consume          kafka-console-consumer.sh: records to stdout
    reassign-partitions  kafka-reassign-partitions.sh: --execute | --verify
    leader-election  kafka-leader-election.sh (preferred)
    bench            load generator: produce, consume, e2e latency, ceiling (bench.py)

This module only declares the arguments (``add_admin_commands``) and dispatches
(``run_admin_command``); each family lives in its own module, imported when it runs, so
``franz --help`` stays fast. Exit codes: 0 done, 1 the server refused or a record
failed, 2 bad usage or no server at the URL, 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

DEFAULT_BOOTSTRAP = "http://127.0.0.1:8082"
BOOTSTRAP_ENV = "FRANZ_BOOTSTRAP_SERVER"
EXIT_INTERRUPTED = 130


def _common() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--bootstrap-server", metavar="URL",
        default=os.environ.get(BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP),
        help=f"the franz server, http://HOST:PORT or HOST:PORT (default ${BOOTSTRAP_ENV} "
             f"or {DEFAULT_BOOTSTRAP})")
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
    p.add_argument("--topic", help="the topic")
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
    p.set_defaults(handler="app.commands.topics", subparser=p)


def _groups(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("consumer-groups", parents=[common],
                       help="list, describe, reset offsets of, delete consumer groups",
                       description="Manage consumer groups, like kafka-consumer-groups.sh.")
    action = p.add_mutually_exclusive_group(required=True)
    for name, text in (("list", "list groups"),
                       ("describe", "offsets, log end offsets and lag of --group per partition"),
                       ("reset-offsets", "move --group's committed offsets on --topic"),
                       ("delete", "delete --group (it must have no members)")):
        action.add_argument(f"--{name}", dest="action", action="store_const", const=name, help=text)
    p.add_argument("--group", help="the group")
    p.add_argument("--topic", help="reset-offsets: TOPIC, or TOPIC:P1,P2 for some partitions")
    p.add_argument("--state", action="store_true", help="list: show each group's state too")
    to = p.add_mutually_exclusive_group()
    to.add_argument("--to-earliest", dest="to", action="store_const", const="earliest",
                    help="reset to the log start offset")
    to.add_argument("--to-latest", dest="to", action="store_const", const="latest",
                    help="reset to the log end offset")
    to.add_argument("--to-offset", type=_non_negative, metavar="N",
                    help="reset to offset N (kept within the log start and end)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="show the new offsets only (default)")
    mode.add_argument("--execute", action="store_true", help="write the new offsets")
    p.set_defaults(handler="app.commands.groups", subparser=p)


def _produce(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("produce", parents=[common], help="write lines from stdin to a topic",
                       description="Write each line of stdin as a record, like "
                                   "kafka-console-producer.sh. Prints nothing on success; "
                                   "failed records go to stderr and the exit code is 1.")
    p.add_argument("--topic", required=True, help="the topic")
    p.add_argument("--parse-key", action="store_true", help="lines are KEY<separator>VALUE")
    p.add_argument("--key-separator", default="\t", metavar="SEP",
                   help="with --parse-key (default TAB; \\t is read as TAB)")
    p.add_argument("--batch-size", type=_positive, default=5000, metavar="N",
                   help="at most N records per request (default 5000)")
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
    p.add_argument("--print-key", action="store_true", help="print KEY<TAB>VALUE")
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


def add_admin_commands(sub: Any) -> None:
    """Declare ``topics``, ``consumer-groups``, ``produce`` and ``consume`` on the
    ``franz`` subparsers."""
    common = _common()
    for declare in (_topics, _groups, _produce, _consume, _reassign, _leader_election):
        declare(sub, common)
    from app.commands.bench import add_bench_command  # noqa: PLC0415  (franz bench)

    add_bench_command(sub, common)


def run_admin_command(args: argparse.Namespace) -> int:
    """Run the parsed command; errors are reported on stderr and become the exit code."""
    from app.http_client import CliError, FranzClient, normalize_url  # noqa: PLC0415

    module = importlib.import_module(args.handler)
    prog = args.subparser.prog
    try:
        url = normalize_url(args.bootstrap_server)
    except ValueError as exc:
        args.subparser.error(f"--bootstrap-server: {exc}")
    try:
        with FranzClient(url) as client:
            code: int = module.run(args, client)
            return code
    except CliError as exc:
        print(f"{prog}: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
