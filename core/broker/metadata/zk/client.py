"""The kazoo adapter under ``zk_store``: a started ``KazooClient`` whose every call is
bounded by the session timeout, multi-ops that name the znode that failed and can be
fenced by the controller epoch, and the one place kazoo exceptions become
``MetadataStoreError``.

- ``connect`` opens the session (creating the chroot through a short chroot-less session
  first, as Kafka does) and Kafka's persistent parents under it.
- ``ZkClient``'s methods block: call them from the blocking-work pool, through ``call``,
  which runs them there and translates what they leave untranslated (``OpFailed``,
  kazoo errors, timeouts, ``MalformedZNodeError``) into ``MetadataStoreError``
  (retriable). NoNode, NodeExists and BadVersion that mean something to the store are
  caught by the store before that.
- ``Txn`` is one ZooKeeper multi-op. Led by a ``Fence``, it first checks the zkVersion
  of ``/controller_epoch`` the store set when it won the election; a failed check means
  another broker was elected since, and the commit raises ``NotControllerError``
  (Kafka's ControllerMovedException).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from kazoo import exceptions as kz
from kazoo.client import KazooClient, TransactionRequest
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import ZnodeStat

from core.broker.errors import NotControllerError
from core.broker.metadata.store import MetadataStoreError
from core.broker.metadata.zk.paths import (
    PERSISTENT_PATHS,
    ControllerEpochZNode,
    MalformedZNodeError,
)
from core.storage.blocking import run_blocking

T = TypeVar("T")


class OpFailed(Exception):
    """One operation of a multi-op failed; ``path`` names its znode."""

    def __init__(self, path: str, cause: Exception) -> None:
        super().__init__(f"{path}: {type(cause).__name__}")
        self.path = path
        self.cause = cause


@dataclasses.dataclass(frozen=True, slots=True)
class Fence:
    """The controller role a store won: its epoch and the zkVersion it set."""

    broker_id: int
    epoch: int
    zk_version: int


class Txn:
    """A kazoo multi-op that remembers each operation's path, led by the controller-epoch
    check when a fence is given. ``commit`` returns the results of the caller's
    operations, or raises ``NotControllerError`` (fence) or ``OpFailed``."""

    def __init__(self, zk: KazooClient, fence: Fence | None, timeout_s: float) -> None:
        self._t: TransactionRequest = zk.transaction()
        self._paths: list[str] = []
        self._fence = fence
        self._timeout_s = timeout_s
        if fence is not None:
            self.check(ControllerEpochZNode.path, fence.zk_version)

    def check(self, path: str, version: int) -> None:
        self._t.check(path, version)
        self._paths.append(path)

    def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
               sequence: bool = False) -> None:
        self._t.create(path, data, ephemeral=ephemeral, sequence=sequence)
        self._paths.append(path)

    def set_data(self, path: str, data: bytes, version: int = -1) -> None:
        self._t.set_data(path, data, version)
        self._paths.append(path)

    def delete(self, path: str, version: int = -1) -> None:
        self._t.delete(path, version)
        self._paths.append(path)

    def commit(self) -> list[Any]:
        results = self._t.commit_async().get(timeout=self._timeout_s)
        for i, (path, result) in enumerate(zip(self._paths, results, strict=True)):
            if not isinstance(result, Exception) or isinstance(
                    result, kz.RolledBackError | kz.RuntimeInconsistency):
                continue  # succeeded, or not run because another op failed
            if self._fence is not None and i == 0:
                raise NotControllerError(
                    f"controller epoch {self._fence.epoch} is no longer current: another "
                    f"broker was elected controller, this write was fenced") from result
            raise OpFailed(path, result)
        return list(results[1:] if self._fence is not None else results)


class ZkClient:
    """A started ``KazooClient`` (``kazoo``) with every call bounded by ``timeout_s``.

    Every method blocks: call them on the blocking-work pool (see ``call``) or on a kazoo
    thread, never on the event loop. Reads of a missing znode return None, [] or leave it
    out, as each method says; other kazoo errors propagate. Thread-safe as kazoo is.
    """

    __slots__ = ("kazoo", "timeout_s")

    def __init__(self, kazoo: KazooClient, timeout_s: float) -> None:
        self.kazoo = kazoo
        self.timeout_s = timeout_s

    @property
    def client_id(self) -> tuple[int, bytes]:
        """(session id, password) of the current session."""
        client_id: tuple[int, bytes] = self.kazoo.client_id
        return client_id

    def get(self, path: str) -> tuple[bytes, ZnodeStat]:
        result: tuple[bytes, ZnodeStat] = self.kazoo.get_async(path).get(timeout=self.timeout_s)
        return result

    def get_or_none(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        try:
            return self.get(path)
        except kz.NoNodeError:
            return None

    def exists(self, path: str) -> ZnodeStat | None:
        stat: ZnodeStat | None = self.kazoo.exists_async(path).get(timeout=self.timeout_s)
        return stat

    def exists_many(self, paths: Iterable[str]) -> list[ZnodeStat | None]:
        """Pipelined ``exists``, in the order of ``paths``."""
        pending = [self.kazoo.exists_async(p) for p in paths]
        return [result.get(timeout=self.timeout_s) for result in pending]

    def children(self, path: str) -> list[str]:
        try:
            children: list[str] = self.kazoo.get_children_async(path).get(
                timeout=self.timeout_s)
        except kz.NoNodeError:
            return []
        return children

    def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False) -> ZnodeStat:
        _, stat = self.kazoo.create_async(path, data, ephemeral=ephemeral,
                                          include_data=True).get(timeout=self.timeout_s)
        return stat

    def set_data(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        """Conditional write (``version`` -1: any); kazoo's BadVersionError on a race."""
        stat: ZnodeStat = self.kazoo.set_async(path, data, version).get(timeout=self.timeout_s)
        return stat

    def ensure_path(self, path: str) -> None:
        self.kazoo.ensure_path_async(path).get(timeout=self.timeout_s)

    def get_many(self, paths: Iterable[str]) -> dict[str, tuple[bytes, ZnodeStat]]:
        """Pipelined reads; missing znodes are left out."""
        pending = [(p, self.kazoo.get_async(p)) for p in paths]
        found = {}
        for path, result in pending:
            try:
                found[path] = result.get(timeout=self.timeout_s)
            except kz.NoNodeError:
                continue
        return found

    def get_many_watched(
        self, watched: Iterable[tuple[str, Callable[[Any], object]]]
    ) -> tuple[dict[str, tuple[bytes, ZnodeStat]], list[str]]:
        """Pipelined reads that leave a one-shot watch on each znode (``(path, watcher)``
        pairs): a data watch on those found, an exists watch (it fires when the znode is
        created) on those missing. Returns (found, appeared): the znodes read, and those
        created between their read and their exists watch (watched, not read)."""
        pending = [(p, w, self.kazoo.get_async(p, watch=w)) for p, w in watched]
        found, missing = {}, []
        for path, watcher, result in pending:
            try:
                found[path] = result.get(timeout=self.timeout_s)
            except kz.NoNodeError:
                missing.append((path, self.kazoo.exists_async(path, watch=watcher)))
        appeared = [path for path, result in missing
                    if result.get(timeout=self.timeout_s) is not None]
        return found, appeared

    def subtree(self, root: str) -> list[str]:
        """``root`` and every znode under it, deepest first (a multi-op deletes children
        before parents); empty if ``root`` does not exist."""
        if self.exists(root) is None:
            return []
        levels = [[root]]
        while levels[-1]:
            pending = [(p, self.kazoo.get_children_async(p)) for p in levels[-1]]
            below = []
            for parent, result in pending:
                try:
                    below += [f"{parent}/{c}" for c in result.get(timeout=self.timeout_s)]
                except kz.NoNodeError:
                    continue
            levels.append(below)
        return [path for level in reversed(levels) for path in level]

    def txn(self, fence: Fence | None) -> Txn:
        return Txn(self.kazoo, fence, self.timeout_s)


def split_connect(connect: str) -> tuple[str, str]:
    """``h1:2181,h2:2181/franz/a`` -> (``h1:2181,h2:2181``, ``/franz/a``)."""
    hosts, slash, chroot = connect.partition("/")
    if not hosts:
        raise ValueError(f"ZooKeeper connect string without hosts: {connect!r}")
    return hosts, ("/" + chroot.strip("/")).rstrip("/") if slash else ""


async def connect(
    hosts: str, chroot: str, *, timeout_s: float, listener: Callable[[str], None]
) -> ZkClient:
    """Open a session on ``hosts`` + ``chroot`` (off the loop), with ``listener`` on its
    state changes; ``MetadataStoreError`` if ZooKeeper cannot be reached."""
    try:
        kazoo = await run_blocking(_connect, hosts, chroot, timeout_s, listener)
    except (kz.KazooException, KazooTimeoutError) as exc:
        raise MetadataStoreError(
            f"metadata store: cannot connect to ZooKeeper at {hosts}: "
            f"{type(exc).__name__} {exc}") from exc
    return ZkClient(kazoo, timeout_s)


def _connect(
    hosts: str, chroot: str, timeout_s: float, listener: Callable[[str], None]
) -> KazooClient:
    if chroot:
        boot = KazooClient(hosts=hosts, timeout=timeout_s)
        boot.start(timeout=timeout_s)
        try:
            boot.ensure_path_async(chroot).get(timeout=timeout_s)
        finally:
            stop_client(boot)
    zk = KazooClient(hosts=hosts + chroot, timeout=timeout_s)
    zk.add_listener(listener)
    zk.start(timeout=timeout_s)
    try:
        pending = [zk.ensure_path_async(p) for p in PERSISTENT_PATHS]
        for result in pending:
            result.get(timeout=timeout_s)
    except BaseException:
        stop_client(zk)
        raise
    return zk


def stop_client(zk: KazooClient) -> None:
    """End the session (its ephemeral nodes go at once) and release the client. Blocks."""
    try:
        zk.stop()
    finally:
        zk.close()


async def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking body on the pool; translate what the body left untranslated."""
    try:
        return await run_blocking(fn, *args, **kwargs)
    except OpFailed as exc:
        raise MetadataStoreError(f"metadata store: ZooKeeper multi-op failed at {exc}") \
            from exc.cause
    except (kz.KazooException, KazooTimeoutError) as exc:
        raise MetadataStoreError(
            f"metadata store: ZooKeeper {type(exc).__name__} {exc}".rstrip()) from exc
    except MalformedZNodeError as exc:
        raise MetadataStoreError(f"metadata store: {exc}") from exc
