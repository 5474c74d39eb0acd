"""The offline targets of ``franz users`` and ``franz acls``: the security store of a
broker opened directly, without the broker.

    --data-dir DIR       a standalone broker's SQL catalog, ``DIR/metadata.db``
                         (``SqlSecurityStore``); a running broker polls it and notices
                         the change within a second
    --zookeeper CONNECT  a cluster's znodes (``ZkSecurityStore``); the brokers' watches
                         see the change notification at once

``run_with_store(args, work, creates=...)`` opens the store, awaits ``work(store)`` and
closes it, on an event loop of its own. Store failures become ``CliError``s: nothing at
the ZooKeeper address, or a data dir that is not one, exit 2; a store error, exit 1.
The store modules (SQLAlchemy, kazoo) are imported only here, when a command runs
offline.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from app.http_client import CliError, ServerUnreachable, UsageError
from core.broker.metadata.store import MetadataStoreError
from core.broker.security.store import SecurityStore

T = TypeVar("T")
METADATA_DB = "metadata.db"  # the standalone broker's catalog (app.assembly)
ZK_SESSION_TIMEOUT_S = 10.0  # how long to try to reach ZooKeeper before giving up


def describe_target(args: argparse.Namespace) -> str:
    return f"--data-dir {args.data_dir}" if args.data_dir else f"--zookeeper {args.zookeeper}"


def open_store(args: argparse.Namespace, *, creates: bool) -> SecurityStore:
    """The store of ``--data-dir`` or ``--zookeeper``, not started. A data dir without a
    catalog is refused unless the command ``creates`` something (the first super user
    is added before the broker ever started)."""
    if args.zookeeper:
        from core.broker.security.zk_store import ZkSecurityStore  # noqa: PLC0415

        return ZkSecurityStore(args.zookeeper, session_timeout_s=ZK_SESSION_TIMEOUT_S)
    from core.broker.security.sql_store import SqlSecurityStore  # noqa: PLC0415

    data_dir = Path(args.data_dir).expanduser()
    db = data_dir / METADATA_DB
    if data_dir.exists() and not data_dir.is_dir():
        raise UsageError(f"--data-dir {args.data_dir}: not a directory")
    if not db.exists():
        if not creates:
            raise UsageError(f"--data-dir {args.data_dir}: no {METADATA_DB} there; is it the "
                             "data dir of a standalone broker (franz serve --data-dir)?")
        print(f"note: {args.data_dir} has no {METADATA_DB} yet; creating it (a broker started "
              "with this data dir uses it)", file=sys.stderr)
    return SqlSecurityStore(f"sqlite:///{db.resolve()}")


def run_with_store(args: argparse.Namespace, work: Callable[[SecurityStore], Awaitable[T]],
                   *, creates: bool = False) -> T:
    """``work(store)`` on the opened store of ``args``, then the store closed."""
    store = open_store(args, creates=creates)

    async def main() -> T:
        try:
            await store.start()
        except MetadataStoreError as exc:
            raise ServerUnreachable(f"cannot open the store of {describe_target(args)}: "
                                    f"{exc}") from exc
        try:
            return await work(store)
        except MetadataStoreError as exc:
            raise CliError(f"the store of {describe_target(args)} failed: {exc}") from exc
        finally:
            await store.close()

    return asyncio.run(main())
