"""The listeners a broker serves (``listeners=http://127.0.0.1:8082,https://0.0.0.0:8443``)
and the condition they start under.

``parse_listeners`` reads Kafka's comma-separated list: ``SCHEME://HOST:PORT`` with
scheme ``http`` or ``https`` (Kafka's ``PLAINTEXT`` and ``SSL`` are read as those), a
host that may be empty (every interface), an address, a name, or an IPv6 address in
brackets. The first listener is the one registered for other brokers and used in links
(the ``host``/``port`` properties, which ``--host``/``--port`` override:
``listeners_of``).

``registry_listeners_of`` reads ``schema.registry.listeners`` the same way: listeners
that serve the Schema Registry alone (Confluent's registry listens on 8081), none by
default; a port may not be one of the main listeners'.

``bind_listener`` opens a listener's sockets (bound, not yet listening) before anything
else happens at start, so a port in use is reported before the data directory is touched.

``check_exposure`` is the safety default: a listener other hosts can reach (bound to
anything but 127.0.0.0/8, ::1 or localhost) must authenticate its clients - HTTP Basic
(``authentication.method=BASIC``) or, on https, a required client certificate - unless
``listeners.unauthenticated.allow=true`` says the operator means it.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
from dataclasses import dataclass
from typing import Protocol

from core.broker.admin.broker_config import BrokerConfig

SCHEMES = {"http": "http", "https": "https", "plaintext": "http", "ssl": "https"}
AUTHENTICATION_METHODS = ("NONE", "BASIC")
CLIENT_AUTHENTICATION = ("NONE", "REQUESTED", "REQUIRED")
_WILDCARD = frozenset({"", "0.0.0.0", "::"})  # hosts that bind every interface


class ListenerConfigError(Exception):
    """A listener or TLS setting the broker cannot start with; the message names the
    property to fix."""


@dataclass(frozen=True, slots=True)
class Listener:
    scheme: str  # "http" or "https"
    host: str  # "" binds every interface
    port: int

    @property
    def is_tls(self) -> bool:
        return self.scheme == "https"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def parse_listener(entry: str) -> Listener:
    """One ``SCHEME://HOST:PORT``; ValueError naming the entry otherwise."""
    text = entry.strip()
    scheme, sep, host_port = text.partition("://")
    if not sep:
        raise ValueError(f"listener {text!r} is not SCHEME://HOST:PORT")
    if scheme.lower() not in SCHEMES:
        raise ValueError(f"listener {text!r}: unknown scheme {scheme!r} (http or https)")
    if host_port.startswith("["):
        host, bracket, rest = host_port[1:].partition("]")
        if not bracket or not rest.startswith(":"):
            raise ValueError(f"listener {text!r}: an IPv6 host is written [ADDRESS]:PORT")
        port_text = rest[1:]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"listener {text!r}: {host!r} is not an IPv6 address") from None
    else:
        host, colon, port_text = host_port.rpartition(":")
        if not colon or ":" in host:
            raise ValueError(f"listener {text!r} is not SCHEME://HOST:PORT "
                             "(an IPv6 host goes in brackets)")
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"listener {text!r}: bad port {port_text!r} (1 to 65535)")
    if any(c.isspace() or c in "/?#@" for c in host):
        raise ValueError(f"listener {text!r}: bad host {host!r}")
    return Listener(SCHEMES[scheme.lower()], host, int(port_text))


def parse_listeners(text: str) -> list[Listener]:
    """The listeners of ``listeners`` (empty entries ignored); ValueError naming the bad
    entry: a malformed one, an unknown scheme, a bad port, a port used twice."""
    listeners: list[Listener] = []
    for entry in text.split(","):
        if not entry.strip():
            continue
        listener = parse_listener(entry)
        for other in listeners:
            if other.port == listener.port and (other.host == listener.host or _WILDCARD & {
                    other.host, listener.host}):
                raise ValueError(f"listener {listener} duplicates {other} (one listener "
                                 "per port)")
        listeners.append(listener)
    return listeners


def listeners_of(config: BrokerConfig) -> list[Listener]:
    """The listeners to serve: ``listeners`` with the first one's host and port replaced by
    the ``host`` and ``port`` properties (equal to it unless ``--host``/``--port`` or
    the properties override it); ``http://host:port`` when ``listeners`` is empty."""
    host, port = str(config["host"]), int(config["port"])
    if not 0 < port < 65536:
        raise ListenerConfigError(f"port={port} is not a port (1 to 65535)")
    try:
        listeners = parse_listeners(str(config["listeners"] or ""))
    except ValueError as exc:
        raise ListenerConfigError(f"listeners: {exc}") from None
    if not listeners:
        return [Listener("http", host, port)]
    first = Listener(listeners[0].scheme, host, port)
    try:
        return parse_listeners(",".join(map(str, [first, *listeners[1:]])))
    except ValueError as exc:  # --host/--port made the first one clash with another
        raise ListenerConfigError(f"listeners (with host={host!r}, port={port}): {exc}") from None


def registry_listeners_of(config: BrokerConfig, main: list[Listener]) -> list[Listener]:
    """The ``schema.registry.listeners`` (none when empty); ListenerConfigError naming
    the property for a bad entry or a port of ``main`` (the ``listeners_of``) again."""
    try:
        found = parse_listeners(str(config["schema.registry.listeners"] or ""))
        parse_listeners(",".join(map(str, [*main, *found])))  # one listener per port
    except ValueError as exc:
        raise ListenerConfigError(f"schema.registry.listeners: {exc}") from None
    return found


def is_loopback(host: str) -> bool:
    """Only this machine can connect: 127.0.0.0/8, ::1 or localhost (not "", 0.0.0.0, ::)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def choice(config: BrokerConfig, name: str, allowed: tuple[str, ...]) -> str:
    """The property's value, upper-cased, if it is one of ``allowed``."""
    value = str(config[name] or "").strip().upper()
    if value not in allowed:
        raise ListenerConfigError(f"{name}={config[name]!r} is not one of {', '.join(allowed)}")
    return value


def check_exposure(listeners: list[Listener], config: BrokerConfig) -> None:
    """ListenerConfigError for the first listener other hosts can reach without
    authentication, unless ``listeners.unauthenticated.allow=true``."""
    if config["listeners.unauthenticated.allow"]:
        return
    if choice(config, "authentication.method", AUTHENTICATION_METHODS) != "NONE":
        return
    client_auth = choice(config, "ssl.client.authentication", CLIENT_AUTHENTICATION)
    for listener in listeners:
        if is_loopback(listener.host):
            continue
        if listener.is_tls and client_auth == "REQUIRED":
            continue
        raise ListenerConfigError(
            f"listener {listener} accepts connections from other hosts without "
            "authentication: set authentication.method=BASIC (or, on an https listener, "
            "ssl.client.authentication=REQUIRED), bind it to 127.0.0.1, or set "
            "listeners.unauthenticated.allow=true to allow it")


class Bindable(Protocol):
    """What ``bind_listener`` needs of a listener (``Listener``, ``KafkaListener``)."""

    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...


_BIND_ERRORS = {
    errno.EADDRINUSE: "port {port} is already in use (another franz, or another program: "
                      "stop it, or change {setting})",
    errno.EACCES: "permission denied (ports below 1024 need privileges)",
    errno.EADDRNOTAVAIL: "{host!r} is not an address of this machine",
}


def bind_listener(listener: Bindable, *, setting: str = "listeners / --port") -> list[socket.socket]:
    """The listener's sockets, bound and not yet listening (the server listens on them
    when it starts): one per address its host resolves to, as asyncio's
    ``create_server`` would open. ListenerConfigError naming the listener and the reason
    (a port in use: change ``setting``) when one cannot be bound; none is left open then."""
    try:
        infos = socket.getaddrinfo(listener.host or None, listener.port,
                                   type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ListenerConfigError(f"listener {listener}: cannot resolve {listener.host!r} "
                                  f"({exc.strerror})") from None
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _name, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:  # its IPv4 twin, if any, is bound on its own
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        reason = _BIND_ERRORS.get(exc.errno or 0, "{error}").format(
            port=listener.port, host=listener.host, error=exc.strerror or exc, setting=setting)
        raise ListenerConfigError(f"listener {listener} could not be opened: {reason}") from None
    return sockets
