"""The client side of franz security: credentials and TLS settings of the commands that
talk HTTP, read once into a frozen ``ClientSecurity``.

Sources, per setting, the first that has it:

1. ``--command-config FILE``: a Java ``.properties`` file with Kafka's client names
   (the file Kafka's tools take with ``--command-config``);
2. environment variables ``FRANZ_CLIENT_<NAME>``: the property name upper-cased, dots
   as underscores (``FRANZ_CLIENT_BASIC_AUTH_USER_INFO``).

Properties read (others are ignored, so one file can serve Kafka's tools too):

    basic.auth.user.info     USER:PASSWORD, HTTP Basic (Confluent's REST client name)
    sasl.jaas.config         PlainLoginModule / ScramLoginModule ``username="u"
                             password="p";``: the same credentials as Kafka clients write
                             them (basic.auth.user.info wins when both are set)
    ssl.truststore.location  PEM CA bundle that verifies the server (default: the
                             system's CAs)
    ssl.keystore.location    PEM with the client certificate and its key (mutual TLS)
    ssl.key.password         the password of an encrypted key in the keystore
    ssl.endpoint.identification.algorithm   ``https`` (default) checks the server's
                             name; empty does not (Kafka's meaning)
    ssl.keystore.type, ssl.truststore.type  PEM only

The bootstrap URL's scheme decides plain http or TLS; the TLS settings are used (and
their files read) only for https. Secrets never appear in ``repr`` or in errors.
"""

from __future__ import annotations

import base64
import os
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from app import properties

ENV_PREFIX = "FRANZ_CLIENT_"
USER_INFO = "basic.auth.user.info"
JAAS = "sasl.jaas.config"
TRUSTSTORE = "ssl.truststore.location"
KEYSTORE = "ssl.keystore.location"
KEY_PASSWORD = "ssl.key.password"
ENDPOINT_IDENTIFICATION = "ssl.endpoint.identification.algorithm"
STORE_TYPES = ("ssl.keystore.type", "ssl.truststore.type")
#: Every property this module reads, each also an environment variable.
KNOWN = (USER_INFO, JAAS, TRUSTSTORE, KEYSTORE, KEY_PASSWORD, ENDPOINT_IDENTIFICATION,
         *STORE_TYPES)
#: JAAS login modules whose username/password options are HTTP Basic credentials here.
_PASSWORD_MODULES = ("PlainLoginModule", "ScramLoginModule")
_JAAS_OPTION = re.compile(r'([A-Za-z_][\w.-]*)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s;"]+)')


class ClientConfigError(ValueError):
    """A client setting that cannot work; the message names the property (or variable)
    and where it came from, never a secret."""


def env_name(prop: str) -> str:
    """``basic.auth.user.info`` -> ``FRANZ_CLIENT_BASIC_AUTH_USER_INFO``."""
    return ENV_PREFIX + prop.upper().replace(".", "_")


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How the commands authenticate and verify the server. Empty: plain anonymous
    calls, https verified against the system's CAs."""

    basic_auth: tuple[str, str] | None = field(default=None, repr=False)
    truststore: str | None = None
    keystore: str | None = None
    key_password: str | None = field(default=None, repr=False)
    check_hostname: bool = True
    #: where the credentials came from ("--command-config FILE", "$FRANZ_CLIENT_..."),
    #: for error messages
    credentials_source: str = ""

    @property
    def user(self) -> str | None:
        return self.basic_auth[0] if self.basic_auth else None

    @property
    def authorization(self) -> str | None:
        """The ``Authorization`` header value (Basic, UTF-8 as the server decodes it)."""
        if self.basic_auth is None:
            return None
        token = base64.b64encode(":".join(self.basic_auth).encode("utf-8")).decode("ascii")
        return f"Basic {token}"

    @property
    def has_tls_settings(self) -> bool:
        return bool(self.truststore or self.keystore or not self.check_hostname)

    def ssl_context(self) -> ssl.SSLContext:
        """A TLS client context: the truststore (else the system's CAs), the keystore as
        the client certificate, the host name checked unless disabled. TLS 1.2 at least.
        ClientConfigError naming the property when a file does not load."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED, check_hostname
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.check_hostname = self.check_hostname
        if self.truststore:
            _readable(self.truststore, TRUSTSTORE)
            try:
                ctx.load_verify_locations(cafile=self.truststore)
            except ssl.SSLError as exc:
                raise ClientConfigError(f"{TRUSTSTORE}={self.truststore!r} holds no PEM CA "
                                        f"certificate ({exc.reason or exc})") from None
        else:
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
        if self.keystore:
            _load_keystore(ctx, self.keystore, self.key_password or "")
        return ctx


def _readable(path: str, name: str) -> None:
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise ClientConfigError(f"{name}={path!r} cannot be read: {exc.strerror or exc}") from None


def _load_keystore(ctx: ssl.SSLContext, path: str, password: str) -> None:
    _readable(path, KEYSTORE)
    # A callable, never None: OpenSSL would otherwise prompt on the terminal for the
    # password of an encrypted key.
    secret = password.encode()
    try:
        ctx.load_cert_chain(path, path, password=lambda: secret)
    except ssl.SSLError as exc:
        encrypted = "ENCRYPTED" in Path(path).read_text(encoding="latin-1")
        if encrypted:
            what = (f"wrong {KEY_PASSWORD} for" if password
                    else f"set {KEY_PASSWORD}: encrypted private key in")
            raise ClientConfigError(f"{what} {KEYSTORE}={path!r} ({exc.reason or exc})") from None
        raise ClientConfigError(f"{KEYSTORE}={path!r} is not a PEM client certificate with its "
                                f"private key ({exc.reason or exc})") from None


# --- reading ---------------------------------------------------------------------------------


def parse_properties(text: str, source: str = "--command-config") -> dict[str, str]:
    """Java ``.properties`` (``app.properties``), the last of a repeated key winning;
    ClientConfigError for what Java's ``Properties.load`` refuses."""
    try:
        return {p.key: p.value for p in properties.parse_properties(text, source=source)}
    except properties.PropertiesSyntaxError as exc:
        raise ClientConfigError(str(exc)) from None


def parse_jaas(text: str, where: str) -> tuple[str, str]:
    """(username, password) of a ``sasl.jaas.config`` value as Kafka clients write it:
    ``org.apache.kafka.common.security.plain.PlainLoginModule required username="u"
    password="p";``."""
    head, _, options = text.strip().partition(" ")
    module = head.rsplit(".", 1)[-1]
    if module not in _PASSWORD_MODULES:
        raise ClientConfigError(f"{where}: {JAAS} names {head or 'no login module'!r}; franz "
                                "takes the username and password of a PlainLoginModule or "
                                "ScramLoginModule")
    found: dict[str, str] = {}
    for match in _JAAS_OPTION.finditer(options):
        value = match.group(2)
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        found[match.group(1)] = value
    if not found.get("username") or "password" not in found:
        raise ClientConfigError(f"{where}: {JAAS} needs username=\"...\" and "
                                "password=\"...\" options")
    return found["username"], found["password"]


def _user_info(text: str, where: str) -> tuple[str, str]:
    user, sep, password = text.partition(":")
    if not sep or not user:
        raise ClientConfigError(f"{where}: {USER_INFO} must be USER:PASSWORD")
    return user, password


def read_command_config(path: str | os.PathLike[str]) -> dict[str, str]:
    """The properties of ``--command-config FILE``; ClientConfigError if unreadable."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise ClientConfigError(f"--command-config {str(path)!r} cannot be read: "
                                f"{reason}") from None
    return parse_properties(text, f"--command-config {str(path)!r}")


def load_client_security(command_config: str | os.PathLike[str] | None = None,
                         environ: Mapping[str, str] | None = None) -> ClientSecurity:
    """The settings of ``--command-config`` (when given) over those of the environment."""
    env = os.environ if environ is None else environ
    props = read_command_config(command_config) if command_config else {}
    sources = (Source(props, f"--command-config {str(command_config)!r}", file=True),
               Source(env, "", file=False))

    def lookup(prop: str) -> tuple[str | None, str]:
        """The setting and where it came from. An empty value counts as unset, except
        for the endpoint identification, where empty means "do not check"."""
        for src in sources:
            raw = src.get(prop)
            if raw is not None and (raw or prop == ENDPOINT_IDENTIFICATION):
                return raw, src.where(prop)
        return None, ""

    for prop in STORE_TYPES:
        kind, where = lookup(prop)
        if kind and kind.upper() != "PEM":
            raise ClientConfigError(f"{where}: {prop}={kind!r} is not supported: franz "
                                    "reads PEM files only")
    basic: tuple[str, str] | None = None
    source = ""
    for src in sources:  # the credentials are one setting: the file's win as a whole
        info, jaas = src.get(USER_INFO), src.get(JAAS)
        if info:
            source = src.where(USER_INFO)
            basic = _user_info(info, source)
            break
        if jaas:
            source = src.where(JAAS)
            basic = parse_jaas(jaas, source)
            break
    algorithm, where = lookup(ENDPOINT_IDENTIFICATION)
    if algorithm and algorithm.lower() != "https":
        raise ClientConfigError(f"{where}: {ENDPOINT_IDENTIFICATION}={algorithm!r}: use "
                                "https (check the server's name) or an empty value")
    keystore, _ = lookup(KEYSTORE)
    key_password, where = lookup(KEY_PASSWORD)
    if key_password and not keystore:
        raise ClientConfigError(f"{where}: {KEY_PASSWORD} is set without {KEYSTORE}")
    return ClientSecurity(basic_auth=basic, truststore=lookup(TRUSTSTORE)[0], keystore=keystore,
                          key_password=key_password, check_hostname=algorithm != "",
                          credentials_source=source)


@dataclass(frozen=True, slots=True)
class Source:
    """The properties of the command config file, or the environment's variables."""

    values: Mapping[str, str]
    label: str
    file: bool

    def get(self, prop: str) -> str | None:
        raw = self.values.get(prop if self.file else env_name(prop))
        return None if raw is None else raw.strip()

    def where(self, prop: str) -> str:
        return self.label if self.file else f"${env_name(prop)}"
