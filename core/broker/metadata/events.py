"""What the metadata stores announce: the ``MetadataEvent`` of each kind of change, built
in one place so both backends send the same kinds with the same ``extra``, and the
fan-out to subscribed listeners.

    kind                      topic  partition  extra
    BROKERS_CHANGED           -      -          broker_id, registered
    CONTROLLER_CHANGED        -      -          controller_id (None: role free), epoch
    TOPIC_CREATED             yes    -          partitions (count)
    TOPIC_CHANGED             yes    -          added_partitions (sorted list)
    TOPIC_DELETED             yes    -          -
    CONFIG_CHANGED            yes    -          -
    PARTITION_STATE_CHANGED   yes    yes        leader, leader_epoch, version
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from core.broker.metadata.store import EventKind, Listener, MetadataEvent, PartitionState


class Listeners:
    """The listeners subscribed to one store. ``emit`` calls each in subscription order on
    the caller's thread (the event loop); a listener that raises is logged on the store's
    logger and does not stop the others. Not thread-safe."""

    __slots__ = ("_listeners", "_log")

    def __init__(self, log: logging.Logger) -> None:
        self._listeners: list[Listener] = []
        self._log = log

    def add(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def remove(self, listener: Listener) -> None:
        self._listeners.remove(listener)

    def emit(self, ev: MetadataEvent) -> None:
        for listener in list(self._listeners):
            try:
                listener(ev)
            except Exception:
                self._log.exception("metadata listener %r failed on %s", listener, ev)


def brokers_event(broker_id: int, *, registered: bool) -> MetadataEvent:
    return MetadataEvent(EventKind.BROKERS_CHANGED,
                         extra={"broker_id": broker_id, "registered": registered})


def controller_event(controller_id: int | None, epoch: int) -> MetadataEvent:
    return MetadataEvent(EventKind.CONTROLLER_CHANGED,
                         extra={"controller_id": controller_id, "epoch": epoch})


def topic_created_event(topic: str, partitions: int) -> MetadataEvent:
    return MetadataEvent(EventKind.TOPIC_CREATED, topic, extra={"partitions": partitions})


def topic_changed_event(topic: str, added: Sequence[int]) -> MetadataEvent:
    return MetadataEvent(EventKind.TOPIC_CHANGED, topic, extra={"added_partitions": added})


def topic_deleted_event(topic: str) -> MetadataEvent:
    return MetadataEvent(EventKind.TOPIC_DELETED, topic)


def config_changed_event(topic: str) -> MetadataEvent:
    return MetadataEvent(EventKind.CONFIG_CHANGED, topic)


def state_event(topic: str, partition: int, state: PartitionState) -> MetadataEvent:
    return MetadataEvent(EventKind.PARTITION_STATE_CHANGED, topic, partition,
                         extra={"leader": state.leader, "leader_epoch": state.leader_epoch,
                                "version": state.version})
