"""Fixtures of the network fault tests: they skip, saying why, where network
namespaces or nftables cannot be used (not root, no ``ip``/``nft``, refused)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from .net import Network, NetworkUnavailable, unavailable_reason


@pytest.fixture(scope="module")
def need_netns() -> None:
    why = unavailable_reason()
    if why:
        pytest.skip(why)


@contextmanager
def network(hosts: list[str]) -> Iterator[Network]:
    """A ``Network`` of ``hosts``, up for the block and removed after it (whatever
    happened); a skip when it cannot be built."""
    net = Network(hosts)
    try:
        net.up()
    except NetworkUnavailable as exc:
        pytest.skip(str(exc))
    try:
        yield net
    finally:
        net.close()


@pytest.fixture
def make_network(need_netns: None) -> Callable[[list[str]], object]:
    return network


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "jepsen: network fault tests (tests/jepsen/, "
                            "docs/fault-testing.md); need root, ip and nft")
