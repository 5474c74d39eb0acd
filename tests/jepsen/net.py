"""Hosts in Linux network namespaces on a bridge of their own, and network faults made
with nftables inside them.

A ``Network`` makes, for each host it is given (``zk``, ``n0`` ... , ``client``,
``control``):

- a network namespace ``fj<pid>-<host>`` (``<pid>``: the test process's),
- a veth pair, one end renamed ``eth0`` inside the namespace with the host's address,
  the other (``fj<pid>v<i>``) on the bridge ``fj<pid>br``,
- addresses ``10.213.<n>.<2+i>/24`` on a /24 chosen per run (``n`` from the pid); the
  root namespace gets no address on the bridge and no route to it, so nothing outside
  the namespaces this harness made can be reached through it, or reach them.

Processes run in a host with ``popen(host, argv)`` (``ip netns exec``); the calling
thread can enter a host for a while with ``inside(host)`` (``setns(2)`` on the thread
only: sockets opened there belong to that host; threads started there inherit it).

Faults are nftables rules in the table ``inet franzj`` of the sending host (its output
hook; packets dropped, never rejected: a partition looks like silence):

- ``partition(a, others)``: nothing between ``a`` and ``others``, both ways;
- ``drop(src, dsts, percent=100)``: packets from ``src`` to ``dsts`` dropped (one way),
  with ``percent < 100`` each packet with that probability (``numgen random mod 100``);
- ``heal()``: every rule gone.

Packet delay (``tc qdisc ... netem``) is not available on kernels without ``sch_netem``
(this VM's: "Specified qdisc kind is unknown"); ``netem_available()`` says.

``close()`` kills the processes it started and removes every namespace, link and rule
it made; ``cleanup_leftovers()`` (called by ``Network()``) removes those of earlier runs
whose process is gone (a killed run), so nothing accumulates.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PREFIX = "fj"
CLONE_NEWNET = 0x40000000
TABLE = "franzj"
_NAME = re.compile(rf"^{PREFIX}(\d+)(?:-|br$|v\d+$|probe$)")
_libc = ctypes.CDLL(None, use_errno=True)


class NetworkUnavailable(RuntimeError):
    """Namespaces or nftables cannot be used here (not root, no ``ip``/``nft``, a kernel
    or sandbox that refuses them); the message says which."""


def _run(*argv: str, check: bool = True, input: str | None = None,
         timeout: float = 20) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(argv), capture_output=True, text=True, input=input,
                          timeout=timeout)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {done.returncode}: "
                           f"{done.stderr.strip() or done.stdout.strip()}")
    return done


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def netns_names() -> list[str]:
    out = _run("ip", "netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _link_names() -> list[str]:
    out = _run("ip", "-o", "link", "show", check=False).stdout
    names = []
    for line in out.splitlines():
        parts = line.split(":", 2)
        if len(parts) >= 2:
            names.append(parts[1].strip().split("@")[0])
    return names


def cleanup_leftovers(*, only_pid: int | None = None) -> list[str]:
    """Remove namespaces and links named by this harness whose run is over (its pid no
    longer alive), or all of ``only_pid``'s; processes still inside such a namespace
    (brokers, ZooKeeper of a killed run) are killed first. Returns what was removed."""
    removed = []

    def ours(name: str) -> bool:
        m = _NAME.match(name)
        if not m:
            return False
        pid = int(m.group(1))
        return pid == only_pid if only_pid is not None else not _alive(pid)

    for ns in netns_names():
        if not ours(ns):
            continue
        pids = _run("ip", "netns", "pids", ns, check=False).stdout.split()
        for p in pids:
            try:
                os.kill(int(p), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        _run("ip", "netns", "del", ns, check=False)
        removed.append(ns)
    for link in _link_names():
        if ours(link):
            _run("ip", "link", "del", link, check=False)
            removed.append(link)
    return removed


def netem_available() -> bool:
    """Whether ``tc qdisc ... netem`` (delay) works: tried on a dummy link in a namespace
    of its own, removed at once."""
    ns = f"{PREFIX}{os.getpid()}probe"
    try:
        _run("ip", "netns", "add", ns)
        _run("ip", "-n", ns, "link", "set", "lo", "up")
        return _run("tc", "-n", ns, "qdisc", "add", "dev", "lo", "root", "netem", "delay",
                    "1ms", check=False).returncode == 0
    except (RuntimeError, OSError):
        return False
    finally:
        _run("ip", "netns", "del", ns, check=False)


def unavailable_reason() -> str | None:
    """Why namespaces with nftables cannot be used here, or None: root, ``ip`` and
    ``nft``, then a real ``ip netns add`` and an nft table inside it."""
    if os.geteuid() != 0:
        return "network fault tests need root (network namespaces, nftables)"
    for tool, pkg in (("ip", "iproute2"), ("nft", "nftables")):
        if shutil.which(tool) is None:
            return f"network fault tests need {tool} (apt-get install -y {pkg})"
    ns = f"{PREFIX}{os.getpid()}probe"
    try:
        add = _run("ip", "netns", "add", ns, check=False)
        if add.returncode != 0:
            return f"ip netns add fails here: {add.stderr.strip()}"
        nft = _run("ip", "netns", "exec", ns, "nft", "add", "table", "inet", TABLE,
                   check=False)
        if nft.returncode != 0:
            return f"nft fails inside a namespace here: {nft.stderr.strip()}"
    finally:
        _run("ip", "netns", "del", ns, check=False)
    return None


@dataclass
class Rule:
    """One fault: packets from ``src`` to ``dst`` dropped (``percent`` of them)."""

    src: str
    dst: str
    percent: int = 100

    def describe(self) -> str:
        how = "" if self.percent >= 100 else f" {self.percent}%"
        return f"{self.src}->{self.dst}{how}"


@dataclass
class Network:
    hosts: Sequence[str]
    subnet: int = field(default=-1)  # the third octet; -1: from the pid
    procs: list[subprocess.Popen[Any]] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    _up: bool = False

    def __post_init__(self) -> None:
        self.pid = os.getpid()
        if self.subnet < 0:
            self.subnet = 1 + self.pid % 250
        self.addresses = {h: f"10.213.{self.subnet}.{2 + i}" for i, h in enumerate(self.hosts)}
        self._lock = threading.Lock()

    # --- names ------------------------------------------------------------------------

    @property
    def bridge(self) -> str:
        return f"{PREFIX}{self.pid}br"

    def ns(self, host: str) -> str:
        return f"{PREFIX}{self.pid}-{host}"

    def ip(self, host: str) -> str:
        return self.addresses[host]

    def host_of(self, ip: str) -> str:
        return next(h for h, a in self.addresses.items() if a == ip)

    # --- life cycle -------------------------------------------------------------------

    def up(self) -> Network:
        """Make the bridge, the namespaces and their links (after removing leftovers of
        runs that are over); on any failure, remove what was made and raise
        ``NetworkUnavailable``."""
        why = unavailable_reason()
        if why:
            raise NetworkUnavailable(why)
        cleanup_leftovers()
        cleanup_leftovers(only_pid=self.pid)
        self._up = True
        try:
            _run("ip", "link", "add", self.bridge, "type", "bridge")
            _run("ip", "link", "set", self.bridge, "up")
            for i, h in enumerate(self.hosts):
                ns, outer = self.ns(h), f"{PREFIX}{self.pid}v{i}"
                _run("ip", "netns", "add", ns)
                _run("ip", "link", "add", outer, "type", "veth", "peer", "name", f"{outer}p")
                _run("ip", "link", "set", f"{outer}p", "netns", ns)
                _run("ip", "link", "set", outer, "master", self.bridge, "up")
                _run("ip", "-n", ns, "link", "set", f"{outer}p", "name", "eth0")
                _run("ip", "-n", ns, "addr", "add", f"{self.ip(h)}/24", "dev", "eth0")
                _run("ip", "-n", ns, "link", "set", "eth0", "up")
                _run("ip", "-n", ns, "link", "set", "lo", "up")
                self._apply(h)
        except Exception as exc:
            self.close()
            raise NetworkUnavailable(f"could not build the test network: {exc}") from exc
        return self

    def close(self) -> None:
        """Kill every process started here, then remove every namespace and link."""
        for p in self.procs:
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGCONT)
                    p.kill()
                except ProcessLookupError:
                    pass
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.procs.clear()
        self.rules.clear()
        if self._up:
            cleanup_leftovers(only_pid=self.pid)
            self._up = False

    def __enter__(self) -> Network:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- processes and sockets in a host ----------------------------------------------

    def argv(self, host: str, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns(host), *argv]

    def popen(self, host: str, argv: Sequence[str], **kw: Any) -> subprocess.Popen[Any]:
        """``argv`` run in ``host`` (``ip netns exec`` replaces itself with it: the
        process's pid is the program's, so signals reach it directly)."""
        p = subprocess.Popen(self.argv(host, argv), **kw)
        self.procs.append(p)
        return p

    @contextmanager
    def inside(self, host: str) -> Iterator[None]:
        """The calling thread in ``host``'s namespace until the block ends."""
        own = os.open(f"/proc/self/task/{threading.get_native_id()}/ns/net", os.O_RDONLY)
        target = os.open(f"/run/netns/{self.ns(host)}", os.O_RDONLY)
        try:
            _setns(target)
            try:
                yield
            finally:
                _setns(own)
        finally:
            os.close(target)
            os.close(own)

    def enter(self, host: str) -> None:
        """The calling thread in ``host``'s namespace for the rest of its life (a worker
        thread's first call)."""
        fd = os.open(f"/run/netns/{self.ns(host)}", os.O_RDONLY)
        try:
            _setns(fd)
        finally:
            os.close(fd)

    def can_connect(self, src: str, dst: str, port: int, timeout_s: float = 1.0) -> bool:
        import socket  # noqa: PLC0415
        with self.inside(src):
            try:
                with socket.create_connection((self.ip(dst), port), timeout=timeout_s):
                    return True
            except OSError:
                return False

    # --- faults -----------------------------------------------------------------------

    def drop(self, src: str, dsts: Sequence[str], percent: int = 100) -> None:
        """Packets from ``src`` to each of ``dsts`` dropped (``percent`` of them: one-way
        loss below 100). Rules go in ``src``'s output hook."""
        if not 0 < percent <= 100:
            raise ValueError(f"percent must be 1-100, got {percent}")
        with self._lock:
            for d in dsts:
                if d == src:
                    continue
                self.rules.append(Rule(src, d, percent))
            self._apply(src)

    def partition(self, host: str, others: Sequence[str]) -> None:
        """Nothing between ``host`` and ``others``, either way (rules on both sides)."""
        self.drop(host, others)
        for o in others:
            self.drop(o, [host])

    def isolate(self, host: str, *, keep: Sequence[str] = ("control",)) -> None:
        """``host`` cut from every other host but ``keep``."""
        self.partition(host, [h for h in self.hosts if h != host and h not in keep])

    def heal(self) -> None:
        with self._lock:
            touched = {r.src for r in self.rules}
            self.rules.clear()
            for h in touched:
                self._apply(h)

    def describe(self) -> list[str]:
        return [r.describe() for r in self.rules]

    def _apply(self, host: str) -> None:
        """``host``'s table rewritten from ``self.rules`` in one nft transaction."""
        out = [f"ip daddr {self.ip(r.dst)} {self._verdict(r)}" for r in self.rules
               if r.src == host]
        script = "\n".join([
            f"table inet {TABLE}",
            f"delete table inet {TABLE}",
            f"table inet {TABLE} {{",
            "  chain out {", "    type filter hook output priority 0; policy accept;",
            *[f"    {x}" for x in out], "  }",
            "}", ""])
        _run("ip", "netns", "exec", self.ns(host), "nft", "-f", "-", input=script)

    @staticmethod
    def _verdict(r: Rule) -> str:
        return "drop" if r.percent >= 100 else f"numgen random mod 100 < {r.percent} drop"

    def ruleset(self, host: str) -> str:
        return _run("ip", "netns", "exec", self.ns(host), "nft", "list", "ruleset").stdout


def tail(path: Path, chars: int = 3000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else ""
