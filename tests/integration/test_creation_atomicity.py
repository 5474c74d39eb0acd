"""Topic creation is all or nothing, also when the process dies half way: a broker
killed (SIGKILL) while it creates the logs of a large topic comes back with the topic
whole (every partition listed and on disk) or absent (nothing on disk), never half."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest
from test_partition_limits import _create, _partition_dirs, _topics, serving

PARTITIONS = 600


@pytest.mark.parametrize("kill_after_dirs", [1, PARTITIONS // 2])
def test_a_creation_killed_half_way_leaves_the_topic_whole_or_absent(
        tmp_path: Path, kill_after_dirs: int) -> None:
    with serving(tmp_path, ["offsets.topic.num.partitions=1"]) as server:
        url = server.url
        cluster = httpx.get(url + "/v3/clusters").json()["data"][0]["cluster_id"]
        # the request is sent from a thread and not waited for: the broker is killed
        # while it creates the logs
        body = {"topic_name": "big", "partitions_count": PARTITIONS}
        sender = threading.Thread(target=_post, args=(f"{url}/v3/clusters/{cluster}/topics",
                                                      body), daemon=True)
        sender.start()
        deadline = time.monotonic() + 60
        while (len(_partition_dirs(server.data_dir, "big")) < kill_after_dirs
               and time.monotonic() < deadline):
            time.sleep(0.005)
        assert server.proc is not None
        server.proc.kill()
        server.proc.wait()
        sender.join(30)
        on_disk_at_kill = len(_partition_dirs(server.data_dir, "big"))
        assert 0 < on_disk_at_kill <= PARTITIONS, on_disk_at_kill
        server.start()
        listed = "big" in _topics(url)
        dirs = len(_partition_dirs(server.data_dir, "big"))
        if listed:
            parts = httpx.get(f"{url}/v3/clusters/{cluster}/topics/big/partitions",
                              timeout=30).json()["data"]
            assert len(parts) == PARTITIONS and dirs == PARTITIONS, (len(parts), dirs)
            offsets = httpx.get(f"{url}/topics/big/partitions/{PARTITIONS - 1}/offsets",
                                timeout=30)
            assert offsets.status_code == 200, offsets.text
        else:
            assert dirs == 0, f"{dirs} partition directories of a topic that does not exist"
            again = _create(url, "big", 10)
            assert again.status_code == 201, again.text


def _post(url: str, body: dict[str, object]) -> None:
    try:
        httpx.post(url, json=body, timeout=120)
    except httpx.HTTPError:
        pass  # the broker was killed under it
