"""Real Kafka clients against ``isrlab serve``: kafka-python, confluent-kafka
(librdkafka) and kcat create topics, produce with every acks and compression codec,
and read back from the beginning with assign; once over the embedded coordination store
and once over a real ZooKeeper."""
from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic as CNewTopic
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from tests.real_io.reading import read_assigned
from tests.real_io.serve_process import ServeProcess

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(params=["embedded", "zookeeper"])
def broker(request, tmp_path):
    zk = request.getfixturevalue("zk_hosts") if request.param == "zookeeper" else None
    process = ServeProcess(tmp_path / "data", zk=zk, trace=tmp_path / "trace.jsonl").start()
    yield process
    assert process.stop() == 0, (tmp_path / "data.stderr").read_text()


@pytest.fixture
def embedded_broker(tmp_path):
    process = ServeProcess(tmp_path / "data", trace=tmp_path / "trace.jsonl").start()
    yield process
    assert process.stop() == 0


def kafka_python_read(bootstrap: str, topic: str, partitions: int, expected: int, timeout_s: float = 10):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             consumer_timeout_ms=500, request_timeout_ms=5000)
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    consumer.seek_to_beginning()
    records, deadline = [], time.monotonic() + timeout_s
    while len(records) < expected and time.monotonic() < deadline:
        records.extend(consumer)
    consumer.close()
    return records


def confluent_read(bootstrap: str, topic: str, partitions: int, expected: int, timeout_s: float = 10):
    return read_assigned(bootstrap, [(topic, p) for p in range(partitions)], expected, timeout_s)


def test_kafka_python_creates_produces_with_every_acks_and_reads_back(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=5000)
    created = admin.create_topics([NewTopic("kp", 2, 1)])
    assert [t["error_code"] for t in created["topics"]] == [0]
    admin.close()
    sent = []
    for acks in (0, 1, "all"):
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=acks, request_timeout_ms=5000,
                                 enable_idempotence=False)
        for i in range(10):
            value = f"acks{acks}-{i}".encode()
            producer.send("kp", key=f"k{i}".encode(), value=value, partition=i % 2,
                          headers=[("h", str(i).encode())])
            sent.append(value)
        producer.flush(10)
        producer.close(5)
    records = kafka_python_read(broker.bootstrap, "kp", 2, len(sent))
    assert sorted(r.value for r in records) == sorted(sent)
    assert all(r.key == f"k{r.headers[0][1].decode()}".encode() for r in records)
    for partition in (0, 1):
        offsets = [r.offset for r in records if r.partition == partition]
        assert offsets == list(range(len(offsets)))


def test_kafka_python_auto_creates_a_topic_on_first_use(embedded_broker):
    producer = KafkaProducer(bootstrap_servers=embedded_broker.bootstrap, acks="all", request_timeout_ms=5000,
                             max_block_ms=10000)
    metadata = producer.send("auto-created", b"v").get(timeout=10)
    producer.close(5)
    assert (metadata.partition, metadata.offset) == (0, 0)


def test_kafka_python_idempotent_producer_every_codec(embedded_broker):
    """kafka-python 3 enables idempotence by default: InitProducerId, then sequenced
    batches; each codec's records read back intact and once."""
    sent = []
    for codec in CODECS:
        producer = KafkaProducer(bootstrap_servers=embedded_broker.bootstrap, acks="all", request_timeout_ms=5000,
                                 compression_type=None if codec == "none" else codec, linger_ms=5)
        futures = [producer.send("kp-codecs", key=b"k", value=f"{codec}-{i}".encode() * 20) for i in range(20)]
        producer.flush(10)
        assert all(f.get(timeout=5).offset >= 0 for f in futures)
        sent += [f"{codec}-{i}".encode() * 20 for i in range(20)]
        producer.close(5)
    records = kafka_python_read(embedded_broker.bootstrap, "kp-codecs", 1, len(sent))
    assert [r.value for r in records] == sent


def test_confluent_kafka_every_codec_idempotent_and_every_acks(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([CNewTopic("ck", 1, 1)], request_timeout=5).values():
        assert future.result(timeout=10) is None
    sent, failures = [], []
    configs = [{"enable.idempotence": True, "compression.type": codec} for codec in CODECS]
    configs += [{"acks": acks} for acks in ("0", "1", "all")]
    for config in configs:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "message.timeout.ms": 10000,
                             **config})
        for i in range(10):
            value = f"{json.dumps(config, sort_keys=True)}-{i}".encode()
            producer.produce("ck", key=b"key", value=value, headers=[("n", str(i).encode())],
                             on_delivery=lambda error, message: failures.append(error) if error else None)
            sent.append(value)
        assert producer.flush(10) == 0
    assert failures == []
    records = confluent_read(broker.bootstrap, "ck", 1, len(sent))
    assert [r.value() for r in records] == sent
    assert all(r.key() == b"key" and r.headers()[0][0] == "n" for r in records)


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (make test installs it)")
def test_kcat_lists_the_broker_and_round_trips_keys_and_headers(broker):
    listing = subprocess.run(["kcat", "-b", broker.bootstrap, "-L", "-J"], capture_output=True, text=True, timeout=20)
    assert listing.returncode == 0, listing.stderr
    metadata = json.loads(listing.stdout)
    assert [(b["id"], b["name"]) for b in metadata["brokers"]] == [(1, broker.bootstrap)]
    produced = subprocess.run(["kcat", "-b", broker.bootstrap, "-P", "-t", "kc", "-K", ":", "-H", "source=kcat"],
                              input="k1:v1\nk2:v2\n:no-key\n", capture_output=True, text=True, timeout=20)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(["kcat", "-b", broker.bootstrap, "-C", "-t", "kc", "-o", "beginning", "-e",
                               "-f", "%k|%s|%h|%o\n"], capture_output=True, text=True, timeout=20)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == ["k1|v1|source=kcat|0", "k2|v2|source=kcat|1", "|no-key|source=kcat|2"]


def test_describe_configs_answers_and_delete_topics_is_disabled_by_config(tmp_path):
    """delete.topic.enable=false: KafkaApis.handleDeleteTopicsRequest answers
    TOPIC_DELETION_DISABLED (DeleteTopics v3 and later, which librdkafka sends)."""
    process = ServeProcess(tmp_path / "data", config={"delete.topic.enable": "false"}).start()
    try:
        _describe_and_delete(process)
    finally:
        assert process.stop() == 0


def _describe_and_delete(embedded_broker):
    admin = AdminClient({"bootstrap.servers": embedded_broker.bootstrap})
    from confluent_kafka.admin import ConfigResource
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    assert configs["num.partitions"].value == "1"
    assert configs["auto.create.topics.enable"].value == "true"
    for future in admin.create_topics([CNewTopic("gone", 1, 1)], request_timeout=5).values():
        future.result(timeout=10)
    with pytest.raises(KafkaException) as failure:
        admin.delete_topics(["gone"], request_timeout=5)["gone"].result(timeout=10)
    assert failure.value.args[0].code() == KafkaError.TOPIC_DELETION_DISABLED
