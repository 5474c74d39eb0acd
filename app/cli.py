"""The ``franz`` command line: ``franz serve`` runs a standalone broker; ``franz broker``
runs one broker of a cluster whose metadata lives in ZooKeeper (design.md section 1).
Both build the same ``Broker``; only the metadata store backend differs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.commands import add_admin_commands, run_admin_command


class _VersionAction(argparse.Action):
    """``franz --version``: the installed package's version, looked up only when asked."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        print(_version())
        parser.exit(0)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    try:
        return version("franz")
    except PackageNotFoundError:  # a source tree never installed
        return "0.0.0+unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="franz", description="Kafka-style broker over HTTP")
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("version", help="print the version")
    serve = sub.add_parser("serve", help="run a standalone broker (embedded metadata, no ZooKeeper)")
    serve.add_argument("--config", type=Path, help="a .properties file with Kafka's names")
    serve.add_argument("--host", help="listen address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="listen port (default 8082)")
    serve.add_argument("--data-dir", help="data directory (default ./data)")
    serve.add_argument("--broker-id", type=int, help="broker id (default 0)")
    serve.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                       help="any broker property, e.g. --override num.partitions=3")
    serve.add_argument("--log-level", default="INFO")
    broker = sub.add_parser("broker", help="run one broker of a cluster (metadata in ZooKeeper)")
    broker.add_argument("--config", type=Path,
                        help="a .properties file (broker.id, zookeeper.connect, listeners, log.dirs, ...)")
    broker.add_argument("--broker-id", type=int, help="broker id (broker.id)")
    broker.add_argument("--zookeeper", help="HOST:PORT[,HOST:PORT][/CHROOT] (zookeeper.connect)")
    broker.add_argument("--host", help="listen address (default 127.0.0.1)")
    broker.add_argument("--port", type=int, help="listen port (default 8082)")
    broker.add_argument("--data-dir", help="data directory (log.dirs)")
    broker.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="any broker property, e.g. --override replica.lag.time.max.ms=2000")
    broker.add_argument("--log-level", default="INFO")
    add_admin_commands(sub)  # the admin commands and bench (app/commands)
    return parser


def _serve(args: argparse.Namespace) -> int:
    # The dispatch point of `franz serve` / `franz broker`: the server (FastAPI, uvicorn,
    # the broker) is imported only here, so `franz --help` and the admin commands stay fast.
    from app.listeners import ListenerConfigError  # noqa: PLC0415
    from app.logs import configure_logging, use_log_format  # noqa: PLC0415
    from app.server import StartError, run  # noqa: PLC0415
    from app.settings import ConfigError, load_config  # noqa: PLC0415

    name = f"franz {args.command}"
    try:
        configure_logging(args.log_level)
    except ValueError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    overrides: dict[str, object] = {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"franz: --override needs KEY=VALUE, got {item!r}", file=sys.stderr)
            return 2
        overrides[key.strip()] = value.strip()
    overrides.update({"host": args.host, "port": args.port, "log.dirs": args.data_dir,
                      "broker.id": args.broker_id})
    if args.command == "broker":
        overrides["zookeeper.connect"] = args.zookeeper
    try:
        config = load_config(properties_file=args.config, overrides=overrides)
    except ConfigError as exc:
        print(f"{name}: bad configuration: {exc}", file=sys.stderr)
        return 2
    use_log_format(str(config["log.format"]))  # checked by load_config
    if args.command == "broker" and not config["zookeeper.connect"]:
        print(f"{name}: needs --zookeeper or zookeeper.connect in --config", file=sys.stderr)
        return 2
    try:
        run(config)
    except (StartError, ListenerConfigError) as exc:  # one line says why: no traceback
        print(f"{name}: cannot start: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "version":
        print(_version())
        return 0
    if args.command in ("serve", "broker"):
        return _serve(args)
    if getattr(args, "handler", None):
        return run_admin_command(args)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
