"""SCRAM credentials in ZooKeeper (a real server, one chroot per test): ``/config/users/<name>``
holds them exactly as Kafka stores SCRAM credentials, beside franz's scrypt entry, with
Kafka's ``/config/changes`` notification; a credential Kafka's own tools wrote (only
SCRAM, iterations 8192) authenticates; other entries (quotas) survive; deleting a user
takes every credential."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from kafka.net.sasl.scram import ScramClient
from kazoo.client import KazooClient

from core.broker.security.credentials import StoredCredential
from core.broker.security.principal import Principal
from core.broker.security.scram import (
    MECHANISMS,
    SCRAM_SHA_512,
    ScramCredential,
    ScramServerExchange,
    scram_credentials,
)
from core.broker.security.service import Security, SecuritySettings
from core.broker.security.zk_store import ZkSecurityStore
from core.clock import SYSTEM_CLOCK

WAIT_S = 10.0
CRED = StoredCredential.create("pw", n=1024)
SCRAM = scram_credentials("pw")


@pytest.fixture
async def store(zk_chroot: str) -> AsyncIterator[ZkSecurityStore]:
    s = ZkSecurityStore(zk_chroot, session_timeout_s=6.0)
    await s.start()
    yield s
    await s.close()


@pytest.fixture
def raw(store: ZkSecurityStore, zk_chroot: str) -> Iterator[KazooClient]:
    client = KazooClient(hosts=zk_chroot)
    client.start(timeout=WAIT_S)
    yield client
    client.stop()
    client.close()


def znode(raw: KazooClient, path: str) -> tuple[bytes, Any]:
    data, _ = raw.get(path)
    return data, json.loads(data)


def notices(raw: KazooClient) -> list[Any]:
    return [json.loads(raw.get(f"/config/changes/{c}")[0])
            for c in sorted(raw.get_children("/config/changes"))]


async def test_kafkas_exact_json(store: ZkSecurityStore, raw: KazooClient) -> None:
    await store.put_user("alice", CRED, SCRAM)
    data, obj = znode(raw, "/config/users/alice")
    assert obj == {"version": 1, "config": {
        "SCRAM-SHA-256": SCRAM["SCRAM-SHA-256"].encode(),
        "SCRAM-SHA-512": SCRAM["SCRAM-SHA-512"].encode(),
        "scrypt": CRED.encode()}}
    # compact, in this order, as Kafka's Jackson writes it
    assert data == json.dumps(obj, separators=(",", ":")).encode()
    assert data.startswith(b'{"version":1,"config":{"SCRAM-SHA-256":"salt=')
    text = obj["config"]["SCRAM-SHA-256"]
    salt, stored, server, iterations = text.split(",")
    assert [f.split("=", 1)[0] for f in (salt, stored, server, iterations)] == [
        "salt", "stored_key", "server_key", "iterations"]
    assert iterations == "iterations=4096"
    assert len(base64.b64decode(stored.split("=", 1)[1])) == 32
    assert notices(raw) == [{"version": 2, "entity_path": "users/alice"}]

    for mechanism in MECHANISMS:
        assert await store.get_scram("alice", mechanism) == SCRAM[mechanism]
    assert await store.get_user("alice") == CRED


async def test_replace_and_delete_take_every_credential(store: ZkSecurityStore,
                                                         raw: KazooClient) -> None:
    raw.create("/config/users/bob", b'{"version":1,"config":{"producer_byte_rate":"1024"}}')
    await store.put_user("bob", CRED, SCRAM)
    await store.put_user("bob", CRED)  # e.g. a caller without SCRAM: no stale credential
    assert znode(raw, "/config/users/bob")[1]["config"] == {
        "producer_byte_rate": "1024", "scrypt": CRED.encode()}
    assert await store.get_scram("bob", "SCRAM-SHA-256") is None

    await store.put_user("bob", CRED, SCRAM)
    assert await store.delete_user("bob") is True
    assert znode(raw, "/config/users/bob")[1] == {
        "version": 1, "config": {"producer_byte_rate": "1024"}}  # the quota stays
    assert await store.get_scram("bob", "SCRAM-SHA-512") is None
    assert await store.delete_user("bob") is False
    assert [n["entity_path"] for n in notices(raw)] == ["users/bob"] * 4  # 3 puts, 1 delete


async def test_a_credential_kafkas_tools_wrote(store: ZkSecurityStore, raw: KazooClient) -> None:
    """``kafka-configs.sh --alter --add-config 'SCRAM-SHA-512=[iterations=8192,password=...]'``
    writes only the SCRAM entry; that user is listed and authenticates with SCRAM."""
    kafkas = ScramCredential.create(SCRAM_SHA_512, "kafka-pw", iterations=8192,
                                    salt=b"1x2y3z4w5v6u7t8s9r0q1p2o3n4m5l6")  # base36-ish
    raw.create("/config/users/dave", json.dumps(
        {"version": 1, "config": {"SCRAM-SHA-512": kafkas.encode()}}).encode())
    assert await store.list_users() == ["dave"]
    assert await store.get_user("dave") is None  # no scrypt: no Basic, no PLAIN
    got = await store.get_scram("dave", "SCRAM-SHA-512")
    assert got == kafkas

    client = ScramClient("dave", "kafka-pw", "SCRAM-SHA-512")
    ex = ScramServerExchange(SCRAM_SHA_512, fake_key=b"k")
    ex.receive_client_first(client.first_message())
    client.process_server_first_message(ex.server_first(got))
    client.process_server_final_message(ex.receive_client_final(client.final_message()))
    assert ex.complete

    assert await store.delete_user("dave") is True
    assert raw.exists("/config/users/dave") is None


async def test_a_malformed_credential_is_skipped(store: ZkSecurityStore, raw: KazooClient
                                                 ) -> None:
    raw.create("/config/users/eve", json.dumps({"version": 1, "config": {
        "SCRAM-SHA-256": "salt=AA==,stored_key=AA==,server_key=AA==,iterations=4096",
        "scrypt": CRED.encode()}}).encode())
    assert await store.get_scram("eve", "SCRAM-SHA-256") is None  # keys of the wrong size
    assert await store.get_user("eve") == CRED
    assert await store.get_scram("a/b", "SCRAM-SHA-256") is None  # no such znode can exist


async def test_another_broker_sees_the_new_password(zk_chroot: str) -> None:
    """A password set through one broker authenticates with SCRAM on another (SCRAM reads
    the store on every authentication)."""
    one = Security(SecuritySettings(), ZkSecurityStore(zk_chroot, session_timeout_s=6.0),
                   clock=SYSTEM_CLOCK)
    other = Security(SecuritySettings(), ZkSecurityStore(zk_chroot, session_timeout_s=6.0),
                     clock=SYSTEM_CLOCK)
    await one.start()
    await other.start()
    try:
        await one.put_user(Principal.user("admin"), "frank", "frank-secret")
        client = ScramClient("frank", "frank-secret", "SCRAM-SHA-256")
        server = other.sasl_server("SCRAM-SHA-256")
        client.process_server_first_message(await server.step(client.first_message()))
        client.process_server_final_message(await server.step(client.final_message()))
        assert str(server.principal) == "User:frank"
    finally:
        await one.stop()
        await other.stop()
