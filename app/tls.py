"""SSL contexts from Kafka's ``ssl.*`` properties (PEM files only).

- ``server_context``: https listeners. ``ssl.keystore.location`` is one PEM file holding
  the certificate chain and the private key (``ssl.key.password`` if the key is
  encrypted); ``ssl.client.authentication`` NONE, REQUESTED or REQUIRED asks for no,
  an optional or a mandatory client certificate, verified against the CAs of
  ``ssl.truststore.location``.
- ``client_context``: this broker calling other brokers' https listeners. Their
  certificate is verified against ``ssl.truststore.location`` (the system's CAs when
  unset) with the host name checked (the certificates name the broker hosts, or their
  IP addresses as IP SANs); this broker's keystore, when set, is its client
  certificate (mutual TLS).

TLS 1.2 at least. A setting that cannot work raises ``ListenerConfigError`` naming the
property, before anything is served.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from app.listeners import CLIENT_AUTHENTICATION, ListenerConfigError, choice
from core.broker.admin.broker_config import BrokerConfig

_VERIFY_MODES = {"NONE": ssl.CERT_NONE, "REQUESTED": ssl.CERT_OPTIONAL,
                 "REQUIRED": ssl.CERT_REQUIRED}


def server_context(config: BrokerConfig, *, client_auth: str | None = None,
                   setting: str = "ssl.client.authentication",
                   what: str = "an https listener") -> ssl.SSLContext:
    """The context of every https listener (see the module docstring). The Kafka
    listeners (``app.kafka_listeners``) give their own ``client_auth`` (NONE, REQUESTED,
    REQUIRED), the ``setting`` it came from and ``what`` they are, for the messages."""
    keystore = _keystore(config)
    if not keystore:
        raise ListenerConfigError(f"{what} needs ssl.keystore.location (a PEM file "
                                  "with the certificate chain and the private key)")
    if client_auth is None:
        client_auth = choice(config, "ssl.client.authentication", CLIENT_AUTHENTICATION)
    truststore = str(config["ssl.truststore.location"] or "")
    if client_auth != "NONE" and not truststore:
        raise ListenerConfigError(f"{setting}={client_auth} needs "
                                  "ssl.truststore.location (the CAs that sign client "
                                  "certificates)")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_keystore(ctx, keystore, str(config["ssl.key.password"] or ""))
    if truststore:
        _load_truststore(ctx, truststore)
    ctx.verify_mode = _VERIFY_MODES[client_auth]
    return ctx


def client_context(config: BrokerConfig) -> ssl.SSLContext:
    """The context of calls to other brokers over https (see the module docstring)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED, check_hostname
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    truststore = str(config["ssl.truststore.location"] or "")
    if truststore:
        _load_truststore(ctx, truststore)
    else:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    keystore = _keystore(config)
    if keystore:
        _load_keystore(ctx, keystore, str(config["ssl.key.password"] or ""))
    return ctx


def _keystore(config: BrokerConfig) -> str:
    kind = str(config["ssl.keystore.type"] or "PEM").strip().upper()
    if kind != "PEM":
        raise ListenerConfigError(f"ssl.keystore.type={config['ssl.keystore.type']!r} is not "
                                  "supported: franz reads PEM files only (ssl.keystore.type=PEM)")
    return str(config["ssl.keystore.location"] or "")


def _load_keystore(ctx: ssl.SSLContext, path: str, password: str) -> None:
    _readable(path, "ssl.keystore.location")
    # A callable, never None: OpenSSL would otherwise prompt on the terminal for the
    # password of an encrypted key.
    secret = password.encode()
    try:
        ctx.load_cert_chain(path, path, password=lambda: secret)
    except ssl.SSLError as exc:
        text = Path(path).read_text(encoding="latin-1")
        if "ENCRYPTED" in text:
            what = ("wrong ssl.key.password for" if password
                    else "set ssl.key.password: encrypted private key in")
            raise ListenerConfigError(f"{what} ssl.keystore.location={path!r} "
                                      f"({exc.reason or exc})") from None
        raise ListenerConfigError(
            f"ssl.keystore.location={path!r} is not a PEM certificate chain with its private "
            f"key ({exc.reason or exc})") from None


def _load_truststore(ctx: ssl.SSLContext, path: str) -> None:
    _readable(path, "ssl.truststore.location")
    try:
        ctx.load_verify_locations(cafile=path)
    except ssl.SSLError as exc:
        raise ListenerConfigError(f"ssl.truststore.location={path!r} holds no PEM CA "
                                  f"certificate ({exc.reason or exc})") from None


def _readable(path: str, name: str) -> None:
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise ListenerConfigError(f"{name}={path!r} cannot be read: {exc.strerror or exc}") from None
