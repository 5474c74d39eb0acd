"""The ``franz`` command line."""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="franz", description="Kafka-style broker over HTTP")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("version", help="print the version")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "version":
        from importlib.metadata import version

        print(version("franz"))
        return 0
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
