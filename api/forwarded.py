"""Forwarded headers from trusted reverse proxies only (docs/security.md, "Behind a
reverse proxy").

uvicorn's own handling is off (``app.server``: ``proxy_headers=False``): it trusted
``X-Forwarded-For`` from 127.0.0.1 by default, so any local client could name the host
its ACLs and audit lines would see. Here the headers are read only when the connection's
peer is in ``http.forwarded.trusted.addresses`` (IPs and CIDRs; empty, the default: never,
and this middleware is not installed at all). ``http.forwarded.header`` says which header
the proxies write: ``X-Forwarded-For`` (with ``X-Forwarded-Proto``) or RFC 7239
``Forwarded``; the other is ignored, since a proxy passes a header it does not write
through from the client unchanged.

The client is the right-most address of the chain that is not a trusted proxy (each
proxy appends the peer it saw, so everything left of the first untrusted address from
the right was written by that client and proves nothing); when every address is trusted,
the left-most. An entry that is not an address (``unknown``, an obfuscated ``_name``,
garbage) ends the walk: the client is then the last trusted hop. The result replaces
``scope["client"]`` (and ``scope["scheme"]`` from the proto of the same hop), before
anything else reads it: the access log, authentication (``CLIENT_HOST``: ACL host
matching, the login throttle, the audit log) all see the same host. The proxy's own
address stays on the scope as ``PEER``.

Hostile input: the headers are split naively on ``,`` and ``;`` (no quoted string can
swallow the entries a proxy appended to a client's garbage), at most ``MAX_HOPS`` entries
from the right are looked at, an entry longer than ``MAX_ENTRY_CHARS`` is not an address.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

PROPERTY = "http.forwarded.trusted.addresses"
HEADER_PROPERTY = "http.forwarded.header"
X_FORWARDED_FOR = "X-Forwarded-For"
FORWARDED = "Forwarded"
HEADERS = (X_FORWARDED_FOR, FORWARDED)
#: the scope key of the connection's own peer address, when a proxy's header replaced it
PEER = "franz.peer"
MAX_HOPS = 64
MAX_ENTRY_CHARS = 64
MAX_TRUSTED = 1024
_SCHEMES = frozenset({"http", "https"})

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def trusted_networks(raw: str) -> tuple[Network, ...]:
    """The networks of ``http.forwarded.trusted.addresses`` (``10.0.0.5,10.1.0.0/16,
    fd00::/8``); ValueError, naming the property and the bad item, otherwise. A host
    part under a prefix (``10.0.0.5/8``) means its network."""
    items = [item.strip() for item in str(raw).split(",") if item.strip()]
    if len(items) > MAX_TRUSTED:
        raise ValueError(f"{PROPERTY}: at most {MAX_TRUSTED} addresses, got {len(items)}")
    networks: list[Network] = []
    for item in items:
        try:
            if len(item) > 2 * MAX_ENTRY_CHARS:
                raise ValueError("too long")
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            shown = item if len(item) <= 2 * MAX_ENTRY_CHARS else item[:2 * MAX_ENTRY_CHARS] + "..."
            raise ValueError(f"{PROPERTY}: {shown!r} is not an IP address or CIDR "
                             "(e.g. 10.0.0.5, 10.0.0.0/8, fd00::/8)") from None
    return tuple(networks)


def forwarded_header(raw: str) -> str:
    """``http.forwarded.header``'s value as written here; ValueError otherwise."""
    for name in HEADERS:
        if str(raw).strip().lower() == name.lower():
            return name
    raise ValueError(f"{HEADER_PROPERTY}: {raw!r} is not one of {', '.join(HEADERS)}")


def parse_address(entry: str) -> tuple[str, int] | None:
    """(host, port: 0 when none) of one hop: ``192.0.2.1``, ``192.0.2.1:4711``,
    ``2001:db8::1``, ``[2001:db8::1]:4711``, any of them in double quotes; the host in
    canonical form (an IPv4-mapped IPv6 address as IPv4). None for anything else."""
    text = entry.strip()
    if len(text) > MAX_ENTRY_CHARS:
        return None
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        text = text[1:-1].strip()
    port = 0
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return None
        host, rest = text[1:end], text[end + 1:]
        if rest:
            if not rest.startswith(":") or not _port_ok(rest[1:]):
                return None
            port = int(rest[1:])
    elif text.count(":") == 1:  # IPv4 with a port
        host, _, digits = text.partition(":")
        if not _port_ok(digits):
            return None
        port = int(digits)
    else:
        host = text
    if "%" in host:  # no zone ids: not a host an ACL names
        return None
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    return _canonical(address), port


def _port_ok(digits: str) -> bool:
    return 0 < len(digits) <= 5 and digits.isascii() and digits.isdigit() and int(digits) <= 65535


def _canonical(address: Address) -> str:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def is_trusted(host: str, networks: Sequence[Network]) -> bool:
    if not networks or not host:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in net for net in networks)


def x_forwarded_chain(values: Sequence[str]) -> list[tuple[str, str | None]]:
    """(for, proto: None) of every hop of the X-Forwarded-For header lines, in order."""
    entries = ",".join(values).split(",")
    return [(e, None) for e in entries[-MAX_HOPS:] if e.strip()]


def forwarded_chain(values: Sequence[str]) -> list[tuple[str, str | None]]:
    """(for, proto) of every element of the RFC 7239 Forwarded header lines, in order;
    an element without ``for`` is an unknown hop (``""``)."""
    out: list[tuple[str, str | None]] = []
    for element in ",".join(values).split(",")[-MAX_HOPS:]:
        if not element.strip():
            continue
        hop, proto = "", None
        for pair in element.split(";"):
            name, sep, value = pair.partition("=")
            if not sep:
                continue
            name, value = name.strip().lower(), value.strip()
            if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
                value = value[1:-1]
            if name == "for":
                hop = value
            elif name == "proto":
                proto = value.strip().lower()
        out.append((hop, proto))
    return out


def resolve_client(peer: str, chain: Sequence[tuple[str, str | None]],
                   networks: Sequence[Network]) -> tuple[str, int, int] | None:
    """(host, port, index in ``chain``; -1 when the host is a trusted hop reporting an
    unknown client) of the client; None when ``peer`` is not trusted or the chain is
    empty (the peer is the client)."""
    if not chain or not is_trusted(peer, networks):
        return None
    host, port, index = peer, 0, -1
    for i in range(len(chain) - 1, -1, -1):
        found = parse_address(chain[i][0])
        if found is None:
            return host, port, index
        host, port = found
        index = i
        if not is_trusted(host, networks):
            return host, port, i
    return host, port, index  # every hop a trusted proxy: the left-most


def x_forwarded_proto(values: Sequence[str], index: int, hops: int) -> str | None:
    """The X-Forwarded-Proto of hop ``index`` of ``hops``: the list aligned with the
    X-Forwarded-For one from the right (a proxy that overwrites writes one value), the
    left-most when shorter."""
    protos = [p.strip().lower() for p in ",".join(values).split(",")[-MAX_HOPS:] if p.strip()]
    if not protos:
        return None
    at = index - (hops - len(protos)) if index >= 0 else len(protos) - 1
    return protos[max(0, min(at, len(protos) - 1))]


class ForwardedHeadersMiddleware:
    """Pure ASGI; outermost, installed only with trusted proxies configured
    (``api.http_middleware``)."""

    def __init__(self, app: ASGIApp, *, networks: Sequence[Network],
                 header: str = X_FORWARDED_FOR) -> None:
        self.app = app
        self.networks = tuple(networks)
        self.header = forwarded_header(header)
        self._trusted_peers: dict[str, bool] = {}

    def _peer_trusted(self, host: str) -> bool:
        known = self._trusted_peers.get(host)
        if known is None:
            known = is_trusted(host, self.networks)
            if len(self._trusted_peers) >= 4096:
                self._trusted_peers.clear()
            self._trusted_peers[host] = known
        return known

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            client = scope.get("client")
            if client and self._peer_trusted(str(client[0])):
                apply_forwarded(scope, self.networks, self.header)
        await self.app(scope, receive, send)


def apply_forwarded(scope: Any, networks: Sequence[Network], header: str) -> None:
    """Rewrite ``scope``'s client (and scheme) from the headers of a trusted peer."""
    client = scope.get("client")
    if not client:
        return
    wanted = (b"forwarded",) if header == FORWARDED else (b"x-forwarded-for", b"x-forwarded-proto")
    found: dict[bytes, list[str]] = {}
    for name, value in scope["headers"]:
        if name in wanted:
            found.setdefault(name, []).append(value.decode("latin-1"))
    if not found:
        return
    if header == FORWARDED:
        chain = forwarded_chain(found.get(b"forwarded", []))
    else:
        chain = x_forwarded_chain(found.get(b"x-forwarded-for", []))
    resolved = resolve_client(str(client[0]), chain, networks)
    proto: str | None = None
    if resolved is not None:
        host, port, index = resolved
        scope[PEER] = str(client[0])
        scope["client"] = (host, port)
        if header == FORWARDED:
            proto = chain[index][1] if index >= 0 else None
        else:
            proto = x_forwarded_proto(found.get(b"x-forwarded-proto", []), index, len(chain))
    elif header == X_FORWARDED_FOR:  # a trusted proxy that names the scheme only
        proto = x_forwarded_proto(found.get(b"x-forwarded-proto", []), -1, 0)
    if proto in _SCHEMES:
        scope["scheme"] = proto
