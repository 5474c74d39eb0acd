"""Blocks of producer ids through ZooKeeper, as Kafka's ZooKeeper-mode ProducerIdManager.

``/latest_producer_id_block`` holds the last block handed out (``ProducerIdBlockZNode``;
empty, as Kafka creates it, before the first).
A broker claims the next one with a conditional write on the znode's version: a lost race
re-reads and tries again, so two brokers never get overlapping blocks. Ids are never
reused, also across restarts (a restarted broker claims a new block).
"""

from __future__ import annotations

import logging

from kazoo import exceptions as kz

from core.broker.metadata.store import MetadataStoreError
from core.broker.metadata.zk.base import RACE_RETRIES, ZkStoreBase
from core.broker.metadata.zk.paths import ProducerIdBlockZNode

log = logging.getLogger(__name__)

MAX_PRODUCER_ID = 2**63 - 1


class ZkProducerIds(ZkStoreBase):
    """``MetadataStore.allocate_producer_ids`` on ZooKeeper."""

    async def allocate_producer_ids(self, broker_id: int, count: int) -> tuple[int, int]:
        return await self._call(self._allocate_producer_ids, broker_id, count)

    def _allocate_producer_ids(self, broker_id: int, count: int) -> tuple[int, int]:
        path = ProducerIdBlockZNode.path
        for _ in range(RACE_RETRIES * 4):
            found = self._client.get_or_none(path)
            if found is None or not found[0]:  # none yet (Kafka creates the znode empty)
                start = 0
            else:
                _broker, _start, end = ProducerIdBlockZNode.decode(found[0])
                start = end + 1
            last = start + count - 1
            if last > MAX_PRODUCER_ID:
                raise MetadataStoreError("metadata store: producer ids are exhausted")
            data = ProducerIdBlockZNode.encode(broker_id, start, last)
            try:
                if found is None:
                    self._client.create(path, data)
                else:
                    self._client.set_data(path, data, version=found[1].version)
            except (kz.NodeExistsError, kz.BadVersionError):
                continue  # another broker claimed a block meanwhile: read again
            log.info("broker %d claimed producer ids %d..%d", broker_id, start, last)
            return start, last
        raise MetadataStoreError("metadata store: claiming a producer id block kept racing "
                                 "with other brokers")
