"""The namespace network itself: hosts reach each other, a partition cuts exactly the
links it names (both ways or one), loss drops some packets, heal restores everything,
and nothing of a run (or of a killed earlier run) is left behind."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from .net import Network, cleanup_leftovers, netns_names

pytestmark = [pytest.mark.jepsen, pytest.mark.timeout(120)]

SERVER = ("import socket\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
          "s.bind(('0.0.0.0',7000))\ns.listen(64)\nwhile True:\n c,_=s.accept()\n c.close()\n")


def _serve(net: Network, host: str) -> None:
    net.popen(host, [sys.executable, "-c", SERVER])
    deadline = time.monotonic() + 10
    while not net.can_connect(host, host, 7000, 0.5):
        assert time.monotonic() < deadline, f"test server in {host} did not start"
        time.sleep(0.1)


def test_partition_one_way_loss_and_heal(make_network) -> None:  # type: ignore[no-untyped-def]
    with make_network(["a", "b", "c"]) as net:
        for h in ("a", "b", "c"):
            _serve(net, h)
        assert net.can_connect("a", "b", 7000) and net.can_connect("c", "b", 7000)
        net.partition("a", ["b"])
        assert not net.can_connect("a", "b", 7000, 0.5)
        assert not net.can_connect("b", "a", 7000, 0.5)
        assert net.can_connect("c", "b", 7000) and net.can_connect("a", "c", 7000)
        net.heal()
        assert net.can_connect("a", "b", 7000) and net.can_connect("b", "a", 7000)
        net.drop("a", ["b"])  # one way: a's packets to b are dropped, b's to a are not
        assert not net.can_connect("a", "b", 7000, 0.5)
        assert net.rules and net.describe() == ["a->b"]
        net.heal()
        net.drop("a", ["b"], percent=50)
        got = sum(net.can_connect("a", "b", 7000, 0.3) for _ in range(30))
        assert 3 <= got <= 27, got  # about half the SYNs (or their SYN-ACKs' ACKs) pass
        assert "numgen random mod 100 < 50 drop" in net.ruleset("a")
        net.heal()
        assert "drop" not in net.ruleset("a")
        names = [n for n in netns_names() if n.startswith(f"fj{net.pid}-")]
        assert sorted(names) == sorted(net.ns(h) for h in ("a", "b", "c"))
    assert not [n for n in netns_names() if n.startswith(f"fj{net.pid}-")]


def test_leftovers_of_a_killed_run_are_removed(need_netns: None) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid no process has now: a run that was killed
    ns, bridge = f"fj{dead.pid}-x", f"fj{dead.pid}br"  # named as that run named them
    subprocess.run(["ip", "netns", "add", ns], check=True)
    subprocess.run(["ip", "link", "add", bridge, "type", "bridge"], check=True)
    sleeper = subprocess.Popen(["ip", "netns", "exec", ns, "sleep", "60"])
    try:
        deadline = time.monotonic() + 10
        while str(sleeper.pid) not in subprocess.run(["ip", "netns", "pids", ns],
                                                     capture_output=True, text=True).stdout:
            assert time.monotonic() < deadline, "the sleeper never entered its namespace"
            time.sleep(0.05)
        removed = cleanup_leftovers()
        assert ns in removed and bridge in removed
        assert ns not in netns_names()
        assert sleeper.wait(timeout=10) == -9  # what ran inside it is killed
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
        cleanup_leftovers(only_pid=dead.pid)
