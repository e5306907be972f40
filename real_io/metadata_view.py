"""The view of the cluster that triggers judge and roles resolve on
(faults/triggers.py), read from a real broker over the wire: Metadata (the controller,
each partition's leader and ISR) and ListOffsets latest (the high watermark).

What it cannot see is refused before a run (real_io/scenario_run.py): the leader epoch
(librdkafka's metadata does not carry it) and a replica's own log end offset
(``broker:`` conditions). A broker that is down or paused shows nothing: no
controller, no leader, as a simulated broker that is down.
"""
from __future__ import annotations

import threading

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from broker_core.types import TopicPartition as PartitionName  # confluent_kafka's TopicPartition is the client's
from faults.triggers import cluster_view
from real_io.broker_process import BrokerProcess
from real_io.real_clients import QUIET, UNUSED_GROUP

VIEW_FIELDS = ("leader", "isr", "isr_size", "high_watermark")  # what a real trigger may test


class MetadataView:
    def __init__(self, broker: BrokerProcess, partitions: list[str], timeout_s: float = 5.0):
        self.broker = broker
        self.partitions = partitions
        self.timeout_s = timeout_s
        self._admin: AdminClient | None = None
        self._offsets: Consumer | None = None
        self._lock = threading.Lock()

    def __call__(self) -> dict:
        with self._lock:
            controller, states = None, {}
            if self.broker.ready:
                controller, states = self._read()
            return cluster_view(controller, states, self.partitions)

    def _read(self) -> tuple[int | None, dict]:
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.broker.bootstrap, **QUIET})
            self._offsets = Consumer({"bootstrap.servers": self.broker.bootstrap, "group.id": UNUSED_GROUP,
                                      "enable.auto.commit": False, **QUIET})
        try:
            metadata = self._admin.list_topics(timeout=self.timeout_s)
        except Exception:  # KafkaException: it did not answer in time
            return None, {}
        broker = self.broker.broker_id
        states: dict[str, dict] = {}
        for topic in metadata.topics.values():
            for number, partition in topic.partitions.items():
                name = str(PartitionName(topic.topic, number))
                if name not in self.partitions:
                    continue
                leads = partition.leader == broker
                states[name] = {"role": "leader" if leads else "follower", "leader": partition.leader,
                                # not in librdkafka's metadata: no real trigger may test it
                                "leader_epoch": 0, "isr": sorted(partition.isrs),
                                "high_watermark": self._high_watermark(topic.topic, number) if leads else None}
        controller = metadata.controller_id if metadata.controller_id >= 0 else None
        return controller, {broker: states} if states else {}

    def _high_watermark(self, topic: str, partition: int) -> int | None:
        try:
            _, high = self._offsets.get_watermark_offsets(TopicPartition(topic, partition), timeout=self.timeout_s)
        except Exception:  # KafkaException: no answer
            return None
        return high if high >= 0 else None

    def close(self) -> None:
        with self._lock:
            if self._offsets is not None:
                self._offsets.close()
            self._admin = self._offsets = None
