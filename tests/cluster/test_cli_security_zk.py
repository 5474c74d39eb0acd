"""``franz users`` and ``franz acls`` offline on a cluster's ZooKeeper (``--zookeeper``):
a round trip through the real executable, with the znodes read back raw where Kafka's
tools would find them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pytest
from kazoo.client import KazooClient

from .conftest import ROOT

pytestmark = pytest.mark.timeout(120)

CLI_ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("FRANZ_")},
    "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
}


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def franz(*args: str, stdin: str = "") -> Result:
    proc = subprocess.run([sys.executable, "-m", "app.cli", *args], input=stdin.encode(),
                          capture_output=True, cwd=ROOT, timeout=60, check=False, env=CLI_ENV)
    return Result(proc.returncode, proc.stdout.decode(errors="replace"),
                  proc.stderr.decode(errors="replace"))


def znode(connect: str, path: str) -> Any:
    hosts, _, chroot = connect.partition("/")
    zk = KazooClient(hosts=f"{hosts}/{chroot}", timeout=10)
    zk.start(timeout=10)
    try:
        found = zk.exists(path)
        return None if found is None else json.loads(zk.get(path)[0])
    finally:
        zk.stop()
        zk.close()


def test_users_and_acls_round_trip_on_zookeeper(zk_chroot: str) -> None:
    zk = ["--zookeeper", zk_chroot]
    r = franz("users", "add", "alice", *zk, stdin="alice-Passw0rd\n")
    assert (r.code, r.out) == (0, "Stored the password of user 'alice'.\n"), r
    user = znode(zk_chroot, "/config/users/alice")
    assert user["config"]["scrypt"].startswith("scrypt:"), user
    assert "alice-Passw0rd" not in json.dumps(user)
    r = franz("users", "add", "--api-key", "--output", "json", *zk)
    assert r.code == 0, r
    key = r.json()["key"]
    r = franz("users", "list", "--output", "json", *zk)
    assert (r.code, r.json()) == (0, sorted(["alice", key])), r

    r = franz("acls", "--add", "--allow-principal", "User:alice", "--operation", "Read",
              "--operation", "Describe", "--topic", "orders", *zk)
    assert r.code == 0, r
    r = franz("acls", "--add", "--deny-principal", "User:alice", "--deny-host", "10.0.0.9",
              "--operation", "Write", "--topic", "logs-", "--resource-pattern-type", "prefixed",
              *zk)
    assert r.code == 0, r
    assert znode(zk_chroot, "/kafka-acl/Topic/orders")["acls"] == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Describe",
         "host": "*"}]
    assert znode(zk_chroot, "/kafka-acl-extended/prefixed/Topic/logs-")["acls"] == [
        {"principal": "User:alice", "permissionType": "Deny", "operation": "Write",
         "host": "10.0.0.9"}]

    r = franz("acls", "--list", *zk)
    assert r.code == 0, r
    assert r.out.splitlines() == [
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=logs-, "
        "patternType=PREFIXED)`:",
        "\t(principal=User:alice, host=10.0.0.9, operation=WRITE, permissionType=DENY)",
        "",
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, "
        "patternType=LITERAL)`:",
        "\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)",
        "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
        "",
    ]
    r = franz("acls", "--remove", "--topic", "orders", "--force", "--output", "json", *zk)
    assert r.code == 0 and len(r.json()) == 2, r
    assert znode(zk_chroot, "/kafka-acl/Topic/orders") is None
    r = franz("acls", "--remove", "--deny-principal", "User:alice", "--topic", "logs-",
              "--force", *zk)
    assert r.code == 0 and "Removed ACLs" in r.out, r
    r = franz("acls", "--list", "--output", "json", *zk)
    assert (r.code, r.json()) == (0, []), r

    for name in ("alice", key):
        r = franz("users", "delete", name, *zk)
        assert r.code == 0, r
    r = franz("users", "delete", "alice", *zk)
    assert r.code == 1 and "user 'alice' does not exist" in r.err, r
    r = franz("users", "list", "--output", "json", *zk)
    assert (r.code, r.json()) == (0, []), r
