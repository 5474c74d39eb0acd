"""TLS pieces against real sockets and certificates (trustme): the SSL contexts built from
the ``ssl.*`` properties and their errors, the ASGI TLS extension the HTTP protocol puts
in every request's scope, and the inter-broker keep-alive client over mutual TLS."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme
import uvicorn

from app.http_protocol import CoalescingHttpToolsProtocol
from app.listeners import ListenerConfigError
from app.settings import load_config
from app.tls import client_context, server_context
from core.broker.admin.broker_config import BrokerConfig
from core.broker.cluster.keepalive_http import KeepAliveClient
from core.broker.errors import BrokerNotAvailableError


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def pki(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """server.pem (127.0.0.1 + localhost), elsewhere.pem (a broker named broker-9.example
    only), alice.pem (a client), ca.pem, other-ca.pem."""
    root = tmp_path_factory.mktemp("pki")
    files = {name: root / f"{name}.pem"
             for name in ("server", "elsewhere", "alice", "ca", "other-ca")}
    ca.issue_cert("127.0.0.1", "localhost", common_name="broker-0").private_key_and_cert_chain_pem \
        .write_to_path(str(files["server"]))
    ca.issue_cert("broker-9.example").private_key_and_cert_chain_pem \
        .write_to_path(str(files["elsewhere"]))
    ca.issue_cert("alice@example.com", common_name="alice", organization_name="acme",
                  organization_unit_name="eng").private_key_and_cert_chain_pem \
        .write_to_path(str(files["alice"]))
    ca.cert_pem.write_to_path(str(files["ca"]))
    trustme.CA().cert_pem.write_to_path(str(files["other-ca"]))
    return files


def _config(**props: object) -> BrokerConfig:
    return load_config(overrides=props, environ={})


def _tls_config(pki: dict[str, Path], client_auth: str = "REQUIRED", **more: object) -> BrokerConfig:
    return _config(**{"ssl.keystore.location": str(pki["server"]),
                      "ssl.truststore.location": str(pki["ca"]),
                      "ssl.client.authentication": client_auth, **more})


# --- contexts and their errors ---------------------------------------------------------------


def test_server_context_modes(pki: dict[str, Path]) -> None:
    for mode, verify in (("NONE", ssl.CERT_NONE), ("requested", ssl.CERT_OPTIONAL),
                         ("REQUIRED", ssl.CERT_REQUIRED)):
        ctx = server_context(_tls_config(pki, mode))
        assert ctx.verify_mode == verify
        assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2


def test_encrypted_key(ca: trustme.CA, tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization

    leaf = ca.issue_cert("127.0.0.1")
    key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), None)
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(b"s3cret"))
    path = tmp_path / "enc.pem"
    path.write_bytes(b"".join(p.bytes() for p in leaf.cert_chain_pems) + encrypted)
    ok = _config(**{"ssl.keystore.location": str(path), "ssl.key.password": "s3cret"})
    assert server_context(ok) is not None
    wrong = _config(**{"ssl.keystore.location": str(path), "ssl.key.password": "nope"})
    with pytest.raises(ListenerConfigError, match="wrong ssl.key.password"):
        server_context(wrong)
    missing = _config(**{"ssl.keystore.location": str(path)})  # never prompts on a terminal
    with pytest.raises(ListenerConfigError, match="set ssl.key.password"):
        server_context(missing)


def test_bad_tls_settings_name_the_property(pki: dict[str, Path], tmp_path: Path) -> None:
    cases = [
        (_config(), "ssl.keystore.location"),
        (_config(**{"ssl.keystore.location": str(tmp_path / "none.pem")}),
         "ssl.keystore.location=.*cannot be read"),
        (_config(**{"ssl.keystore.location": str(pki["ca"])}),  # a certificate, no key
         "ssl.keystore.location=.*not a PEM certificate chain with its private key"),
        (_config(**{"ssl.keystore.location": str(pki["server"]), "ssl.keystore.type": "JKS"}),
         "ssl.keystore.type='JKS'"),
        (_config(**{"ssl.keystore.location": str(pki["server"]),
                    "ssl.client.authentication": "REQUIRED"}), "needs ssl.truststore.location"),
        (_config(**{"ssl.keystore.location": str(pki["server"]),
                    "ssl.client.authentication": "ALWAYS"}), "ssl.client.authentication='ALWAYS'"),
        (_tls_config(pki, **{"ssl.truststore.location": str(tmp_path / "no-ca.pem")}),
         "ssl.truststore.location=.*cannot be read"),
        (_tls_config(pki, **{"ssl.truststore.location": str(pki["server"])}),
         None),  # a chain with a key still holds certificates: accepted
    ]
    for config, message in cases:
        if message is None:
            server_context(config)
            continue
        with pytest.raises(ListenerConfigError, match=message):
            server_context(config)
    empty = tmp_path / "empty.pem"
    empty.write_text("no certificates here\n")
    with pytest.raises(ListenerConfigError, match="ssl.truststore.location=.*no PEM CA"):
        client_context(_config(**{"ssl.truststore.location": str(empty)}))


# --- the ASGI TLS extension ----------------------------------------------------------------


async def _scope_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    tls = scope.get("extensions", {}).get("tls")
    body = repr({k: v for k, v in (tls or {}).items() if k != "client_cert_chain"}).encode() \
        + b"|" + str(len((tls or {}).get("client_cert_chain", []))).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
async def tls_url(pki: dict[str, Path]) -> AsyncIterator[str]:
    config = uvicorn.Config(_scope_app, host="127.0.0.1", port=0, http=CoalescingHttpToolsProtocol,
                            lifespan="off", log_level="warning")
    config.load()
    config.ssl = server_context(_tls_config(pki, "REQUESTED"))
    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"https://127.0.0.1:{port}"
    server.should_exit = True
    await asyncio.wait_for(task, 10)


def _client_ctx(pki: dict[str, Path], cert: str | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki["ca"]))
    if cert:
        ctx.load_cert_chain(str(pki[cert]))
    return ctx


async def test_scope_carries_the_client_certificate(tls_url: str, pki: dict[str, Path]) -> None:
    async with httpx.AsyncClient(verify=_client_ctx(pki, "alice")) as client:
        for _ in range(2):  # every request of the connection
            text = (await client.get(tls_url + "/")).text
            info, _, chain = text.rpartition("|")
            tls = eval(info)  # noqa: S307 - our own repr of a dict of str/int/None
            assert tls["client_cert_name"] == "CN=alice,OU=eng,O=acme"
            assert tls["server_cert"] is None and tls["client_cert_error"] is None
            assert tls["tls_version"] in (0x0303, 0x0304)
            assert isinstance(tls["cipher_suite"], int) and tls["cipher_suite"] > 0
            assert chain == "1"


async def test_scope_without_a_client_certificate(tls_url: str, pki: dict[str, Path]) -> None:
    async with httpx.AsyncClient(verify=_client_ctx(pki, None)) as client:
        info, _, chain = (await client.get(tls_url + "/")).text.rpartition("|")
        assert eval(info)["client_cert_name"] is None and chain == "0"  # noqa: S307


# --- the inter-broker client over mutual TLS -------------------------------------------------


@pytest.fixture
async def mtls_server(pki: dict[str, Path]) -> AsyncIterator[tuple[int, list[bytes]]]:
    async for served in _mtls_server(pki, "server"):
        yield served


async def _mtls_server(pki: dict[str, Path], keystore: str) -> AsyncIterator[tuple[int, list[bytes]]]:
    """A raw server requiring a client certificate; answers with the peer's CN."""
    heads: list[bytes] = []

    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peercert")
        cn = dict(x[0] for x in peer["subject"])["commonName"].encode()
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                heads.append(head)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(cn), cn))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    config = _tls_config(pki, **{"ssl.keystore.location": str(pki[keystore])})
    server = await asyncio.start_server(on_conn, "127.0.0.1", 0, ssl=server_context(config))
    yield server.sockets[0].getsockname()[1], heads
    server.close()
    await server.wait_closed()


async def test_keepalive_client_mutual_tls(mtls_server: tuple[int, list[bytes]],
                                          pki: dict[str, Path]) -> None:
    port, heads = mtls_server
    config = _tls_config(pki, **{"ssl.keystore.location": str(pki["alice"])})
    client = KeepAliveClient(ssl_context=client_context(config), scheme_of=lambda a: "https",
                             headers={"Authorization": "Basic eDp5"})
    try:
        for _ in range(2):
            assert await client.request("GET", ("127.0.0.1", port), "/", b"", "x/y", 5) == \
                (200, b"alice")
        assert len(heads) == 2 and all(b"Authorization: Basic eDp5\r\n" in h for h in heads)
    finally:
        await client.close()


@pytest.mark.parametrize(("keystore", "truststore"), [
    ("server", "other-ca"),  # signed by a CA this broker does not trust
    ("elsewhere", "ca"),  # trusted, but its certificate does not name 127.0.0.1
])
async def test_keepalive_client_refuses_an_untrusted_or_misnamed_broker(
        pki: dict[str, Path], keystore: str, truststore: str) -> None:
    config = _tls_config(pki, **{"ssl.keystore.location": str(pki["alice"]),
                                 "ssl.truststore.location": str(pki[truststore])})
    async for port, _ in _mtls_server(pki, keystore):
        client = KeepAliveClient(ssl_context=client_context(config), scheme_of=lambda a: "https")
        try:
            with pytest.raises(BrokerNotAvailableError, match="CERTIFICATE_VERIFY_FAILED"):
                await client.request("GET", ("127.0.0.1", port), "/", b"", "x/y", 5)
        finally:
            await client.close()


def test_header_injection_is_refused() -> None:
    with pytest.raises(ValueError, match="line break"):
        KeepAliveClient(headers={"X": "a\r\nEvil: 1"})
