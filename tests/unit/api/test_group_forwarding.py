"""Which request paths belong to a consumer group (and so go to its coordinator)."""

from __future__ import annotations

import pytest

from api.group_forwarding import group_of_path


@pytest.mark.parametrize(("path", "group"), [
    ("/consumers/billing", "billing"),
    ("/consumers/billing/instances/i1/records", "billing"),
    ("/v3/clusters/abc/consumer-groups/billing", "billing"),
    ("/v3/clusters/abc/consumer-groups/billing/lag-summary", "billing"),
    ("/v3/clusters/abc/consumer-groups", None),  # the list: every broker answers it
    ("/consumers", None),
    ("/topics/consumers", None),
    ("/v3/clusters/abc/topics/billing", None),
])
def test_group_of_path(path: str, group: str | None) -> None:
    assert group_of_path(path) == group
