"""CreateTopics with an operation timeout of 0 on a broker on ZooKeeper: each topic is
answered with its own error, however short the wait.

2.7.0 AdminManager.createTopics checks and writes every topic before its purgatory's
timeout begins; with a timeout of 0 it answers at once, REQUEST_TIMED_OUT for the topics
it created (librdkafka and confluent-kafka read that as success when they asked for no
wait) and each invalid topic's own error. librdkafka's 0081_admin found isrlab on a
ZooKeeper cluster accepting a topic with an unknown config this way: the 0 ms timeout
expired while the first topic's ZooKeeper writes were in flight, before the second was
checked. The embedded store answers within the same loop turn, so only ZooKeeper shows it."""
from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from tests.real_io.serve_process import ServeProcess
from tests.real_io.waiting import wait_for


@pytest.fixture
def broker(zk_hosts, tmp_path):
    process = ServeProcess(tmp_path / "data", zk=zk_hosts).start()
    yield process
    assert process.stop() == 0, (tmp_path / "data.stderr").read_text()


def outcome(future) -> str:
    try:
        future.result(30)
    except KafkaException as failure:
        return failure.args[0].name()
    return "NO_ERROR"


def test_an_invalid_topic_after_a_valid_one_keeps_its_error_with_no_wait(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topics = [NewTopic("valid-first", 4, 1),
              NewTopic("unknown-config", 1, 1, config={"dummy.doesntexist": "broker is verifying this"}),
              NewTopic("bad-config-value", 1, 1, config={"cleanup.policy": "sometimes"}),
              NewTopic("valid-last", 2, 1)]
    futures = admin.create_topics(topics, operation_timeout=0)
    results = {name: outcome(future) for name, future in futures.items()}
    assert results == {"valid-first": "NO_ERROR", "unknown-config": "INVALID_CONFIG",
                       "bad-config-value": "INVALID_CONFIG", "valid-last": "NO_ERROR"}
    # The valid ones were created all the same (the answer came before their metadata).
    assert wait_for(lambda: {"valid-first", "valid-last"} <= set(admin.list_topics(timeout=10).topics), 20,
                    "the valid topics in the metadata")
    assert "unknown-config" not in admin.list_topics(timeout=10).topics


def test_partitions_added_right_after_a_create_that_did_not_wait(broker):
    """librdkafka's 0081 creates topics with an operation timeout of 0 and at once adds
    partitions to them: the CreateTopics answer must come only once the topics are
    written (2.7.0 writes them before its purgatory's wait), or the CreatePartitions
    finds no topic (UNKNOWN_TOPIC_OR_PARTITION) and the topics never grow."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    names = [f"grow-{i}" for i in range(6)]
    created = admin.create_topics([NewTopic(name, 1 + i, 1) for i, name in enumerate(names)], operation_timeout=0)
    assert {name: outcome(future) for name, future in created.items()} == {name: "NO_ERROR" for name in names}
    grown = admin.create_partitions([NewPartitions(name, 3 + i) for i, name in enumerate(names)], operation_timeout=0)
    assert {name: outcome(future) for name, future in grown.items()} == {name: "NO_ERROR" for name in names}

    def counts():
        topics = admin.list_topics(timeout=10).topics
        return {name: len(topics[name].partitions) for name in names if name in topics}
    wait_for(lambda: counts() == {name: 3 + i for i, name in enumerate(names)}, 20, "every topic grown")
