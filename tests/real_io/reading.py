"""Reading partitions back with confluent-kafka in tests, written once: assign (no
group), from the beginning, until ``expected`` records or the timeout."""
from __future__ import annotations

import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message
from confluent_kafka import TopicPartition as CTopicPartition


def read_assigned(bootstrap: str, partitions: list[tuple[str, int]], expected: int, timeout_s: float = 10,
                  **config: Any) -> list[Message]:
    """The records of ``partitions`` (topic, partition) from their beginning, as read."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "isrlab-unused", "enable.auto.commit": False,
                         **config})
    consumer.assign([CTopicPartition(topic, p, OFFSET_BEGINNING) for topic, p in partitions])
    records: list[Message] = []
    deadline = time.monotonic() + timeout_s
    while len(records) < expected and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is None:
            continue
        if message.error():
            # With assign the group is never joined; librdkafka still looks up its
            # coordinator once and reports the broker's refusal (not a fetch error).
            assert message.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED, message.error()
            continue
        records.append(message)
    consumer.close()
    return records
