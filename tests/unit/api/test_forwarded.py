"""Forwarded-header parsing and the client a trusted proxy's chain names (api.forwarded)."""

from __future__ import annotations

from typing import Any

import pytest

from api.forwarded import (
    FORWARDED,
    PEER,
    X_FORWARDED_FOR,
    ForwardedHeadersMiddleware,
    apply_forwarded,
    forwarded_chain,
    forwarded_header,
    parse_address,
    resolve_client,
    trusted_networks,
    x_forwarded_chain,
)

PROXIES = trusted_networks("10.0.0.1, 10.1.0.0/16, fd00::/8")


def test_trusted_addresses_parse_ips_and_cidrs() -> None:
    nets = trusted_networks(" 127.0.0.1 ,10.0.0.0/8,,fd00::/8, 192.168.1.7/24")
    assert [str(n) for n in nets] == ["127.0.0.1/32", "10.0.0.0/8", "fd00::/8",
                                      "192.168.1.0/24"]
    assert trusted_networks("") == ()


@pytest.mark.parametrize("bad", ["10.0.0.0/33", "localhost", "10.0.0.0/8,nope", "1.2.3",
                                 "::1/129", "x" * 10_000])
def test_a_bad_trusted_address_names_the_property(bad: str) -> None:
    with pytest.raises(ValueError, match="http.forwarded.trusted.addresses") as info:
        trusted_networks(bad)
    assert len(str(info.value)) < 400


def test_too_many_trusted_addresses_are_refused() -> None:
    with pytest.raises(ValueError, match="at most"):
        trusted_networks(",".join(["10.0.0.1"] * 2000))


def test_the_header_choice() -> None:
    assert forwarded_header("x-forwarded-for") == X_FORWARDED_FOR
    assert forwarded_header(" FORWARDED ") == FORWARDED
    with pytest.raises(ValueError, match="http.forwarded.header"):
        forwarded_header("X-Real-IP")


@pytest.mark.parametrize("entry,expected", [
    ("192.0.2.1", ("192.0.2.1", 0)),
    (" 192.0.2.1:4711 ", ("192.0.2.1", 4711)),
    ('"192.0.2.1:4711"', ("192.0.2.1", 4711)),
    ("2001:db8::1", ("2001:db8::1", 0)),
    ("2001:DB8:0::1", ("2001:db8::1", 0)),
    ('"[2001:db8::1]:4711"', ("2001:db8::1", 4711)),
    ("[2001:db8::1]", ("2001:db8::1", 0)),
    ("::ffff:10.9.9.9", ("10.9.9.9", 0)),
    ("unknown", None),
    ("_hidden", None),
    ("", None),
    ("192.0.2.1:0", ("192.0.2.1", 0)),
    ("192.0.2.1:99999", None),
    ("192.0.2.1:12a", None),
    ("[2001:db8::1]x", None),
    ("[2001:db8::1", None),
    ("fe80::1%eth0", None),
    ("1" * 100, None),
    ("10.0.0.1.5", None),
])
def test_one_hop_address(entry: str, expected: tuple[str, int] | None) -> None:
    assert parse_address(entry) == expected


def test_x_forwarded_for_lines_join_in_order() -> None:
    chain = x_forwarded_chain(["1.1.1.1, 2.2.2.2", "3.3.3.3,,"])
    assert [hop for hop, _ in chain] == ["1.1.1.1", " 2.2.2.2", "3.3.3.3"]


def test_rfc7239_elements() -> None:
    chain = forwarded_chain(['for=192.0.2.60;proto=HTTPS;by=203.0.113.43, '
                             'For="[2001:db8:cafe::17]:4711"', "by=10.0.0.1", "for=unknown"])
    assert chain == [("192.0.2.60", "https"), ("[2001:db8:cafe::17]:4711", None), ("", None),
                     ("unknown", None)]


def test_an_unbalanced_quote_cannot_swallow_what_the_proxy_appended() -> None:
    chain = forwarded_chain(['for="10.9.9.9, for=6.6.6.6', "for=203.0.113.9"])
    assert resolve_client("10.0.0.1", chain, PROXIES) == ("203.0.113.9", 0, 2)


def _client(peer: str, xff: str) -> tuple[str, int, int] | None:
    return resolve_client(peer, x_forwarded_chain([xff]), PROXIES)


def test_an_untrusted_peer_is_the_client() -> None:
    assert _client("127.0.0.1", "10.9.9.9") is None
    assert _client("10.0.0.2", "10.9.9.9") is None


def test_the_right_most_untrusted_address_is_the_client() -> None:
    # the client forged "6.6.6.6, 10.1.2.3": the proxies appended what they saw
    assert _client("10.0.0.1", "6.6.6.6, 10.1.2.3, 203.0.113.9, 10.1.0.5") == (
        "203.0.113.9", 0, 2)
    assert _client("10.0.0.1", "203.0.113.9") == ("203.0.113.9", 0, 0)


def test_when_every_hop_is_trusted_the_left_most_is_the_client() -> None:
    assert _client("10.0.0.1", "10.1.0.9, 10.1.0.5") == ("10.1.0.9", 0, 0)


def test_an_unknown_hop_ends_the_walk_at_the_last_trusted_one() -> None:
    assert _client("10.0.0.1", "6.6.6.6, garbage, 10.1.0.5") == ("10.1.0.5", 0, 2)
    assert _client("10.0.0.1", "6.6.6.6, garbage") == ("10.0.0.1", 0, -1)


def test_ipv6_and_mapped_peers() -> None:
    assert resolve_client("fd00::7", x_forwarded_chain(["2001:db8::9"]), PROXIES) == (
        "2001:db8::9", 0, 0)
    assert resolve_client("::ffff:10.0.0.1", x_forwarded_chain(["192.0.2.1"]), PROXIES) == (
        "192.0.2.1", 0, 0)


def test_a_long_chain_is_cut_to_its_right_most_hops() -> None:
    forged = ", ".join(["10.1.0.1"] * 10_000)
    host, _, _ = _client("10.0.0.1", forged + ", 10.1.0.2")  # type: ignore[misc]
    assert host == "10.1.0.1"


def _scope(peer: str, headers: dict[str, list[str]], scheme: str = "http") -> dict[str, Any]:
    return {"type": "http", "client": (peer, 5000), "scheme": scheme,
            "headers": [(k.lower().encode(), v.encode()) for k, vs in headers.items() for v in vs]}


def test_the_scope_gets_the_client_and_its_scheme() -> None:
    scope = _scope("10.0.0.1", {"X-Forwarded-For": ["203.0.113.9"],
                                "X-Forwarded-Proto": ["https"]})
    apply_forwarded(scope, PROXIES, X_FORWARDED_FOR)
    assert scope["client"] == ("203.0.113.9", 0)
    assert scope["scheme"] == "https"
    assert scope[PEER] == "10.0.0.1"


def test_x_forwarded_proto_aligns_with_the_chosen_hop() -> None:
    scope = _scope("10.0.0.1", {"X-Forwarded-For": ["203.0.113.9, 10.1.0.5"],
                                "X-Forwarded-Proto": ["https, http"]})
    apply_forwarded(scope, PROXIES, X_FORWARDED_FOR)
    assert scope["client"] == ("203.0.113.9", 0) and scope["scheme"] == "https"


def test_an_odd_proto_is_ignored() -> None:
    scope = _scope("10.0.0.1", {"X-Forwarded-For": ["203.0.113.9"],
                                "X-Forwarded-Proto": ["gopher"]})
    apply_forwarded(scope, PROXIES, X_FORWARDED_FOR)
    assert scope["scheme"] == "http"


def test_only_the_configured_header_counts() -> None:
    scope = _scope("10.0.0.1", {"X-Forwarded-For": ["6.6.6.6"],
                                "Forwarded": ["for=203.0.113.9;proto=https"]})
    apply_forwarded(scope, PROXIES, FORWARDED)
    assert scope["client"] == ("203.0.113.9", 0) and scope["scheme"] == "https"
    scope = _scope("10.0.0.1", {"Forwarded": ["for=6.6.6.6"], "X-Forwarded-For": ["203.0.113.9"]})
    apply_forwarded(scope, PROXIES, X_FORWARDED_FOR)
    assert scope["client"] == ("203.0.113.9", 0)


async def test_the_middleware_ignores_headers_from_an_untrusted_peer() -> None:
    seen: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append((scope["client"], scope["scheme"], PEER in scope))

    middleware = ForwardedHeadersMiddleware(app, networks=PROXIES)
    headers = {"X-Forwarded-For": ["203.0.113.9"], "X-Forwarded-Proto": ["https"]}
    await middleware(_scope("127.0.0.1", headers), None, None)
    await middleware(_scope("10.1.3.3", headers), None, None)
    assert seen == [(("127.0.0.1", 5000), "http", False), (("203.0.113.9", 0), "https", True)]
