"""broker_core/consumer_protocol.py against the bytes a real client writes: kafka-python
(3.0.12 is installed; its encoders are kafka.protocol.consumer.metadata's
ConsumerProtocolSubscription / ConsumerProtocolAssignment, which 2.x called
ConsumerProtocolMemberMetadata / MemberAssignment) and the rules of Kafka 2.7.0's
clients/src/main/java/org/apache/kafka/clients/consumer/internals/ConsumerProtocol.java
(deserializeSubscription, checkSubscriptionVersion) and StickyAssignor.java
(serializeTopicPartitionAssignment, memberData)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kafka.structs import TopicPartition as KafkaTopicPartition

from broker_core import consumer_protocol as cp
from broker_core.assignors import Subscription
from broker_core.types import TopicPartition
from tests.properties.depth import examples

TP = TopicPartition


def kafka_subscription(version: int, **fields) -> bytes:
    return ConsumerProtocolSubscription(version=version, **fields).encode()


@pytest.mark.parametrize("version", [0, 1])
def test_decodes_kafka_pythons_subscription_and_encodes_the_same_bytes(version):
    owned = [ConsumerProtocolSubscription.TopicPartition(topic="a", partitions=[0, 2])]
    data = kafka_subscription(version, topics=["a", "b"], user_data=b"xy",
                              **({"owned_partitions": owned} if version else {}))
    decoded = cp.decode_subscription(data)
    expected_owned = (TP("a", 0), TP("a", 2)) if version else ()
    assert decoded == cp.ProtocolSubscription(version, ("a", "b"), b"xy", expected_owned)
    assert cp.encode_subscription(["a", "b"], b"xy", expected_owned, version=version) == data


def test_a_newer_subscription_version_is_read_as_version_1_and_the_rest_ignored():
    """checkSubscriptionVersion: kafka-python 3 writes v3 (GenerationId, RackId after
    OwnedPartitions); 2.7.0 reads it with the v1 fields and ignores what follows."""
    owned = [ConsumerProtocolSubscription.TopicPartition(topic="t", partitions=[5])]
    data = kafka_subscription(3, topics=["t"], user_data=None, owned_partitions=owned, generation_id=4, rack_id="r1")
    assert cp.decode_subscription(data) == cp.ProtocolSubscription(3, ("t",), None, (TP("t", 5),))


@pytest.mark.parametrize("version", [0, 1, 3])
def test_decodes_kafka_pythons_assignment(version):
    parts = [ConsumerProtocolAssignment.TopicPartition(topic="a", partitions=[1, 4]),
             ConsumerProtocolAssignment.TopicPartition(topic="b", partitions=[0])]
    data = ConsumerProtocolAssignment(version=version, assigned_partitions=parts, user_data=b"u").encode()
    assert cp.decode_assignment(data) == cp.ProtocolAssignment(version, (TP("a", 1), TP("a", 4), TP("b", 0)), b"u")
    if version <= 1:
        assert cp.encode_assignment([TP("a", 1), TP("a", 4), TP("b", 0)], b"u", version=version) == data


def test_kafka_python_reads_the_assignment_a_simulated_leader_writes():
    data = cp.encode_assignment([TP("t", 2), TP("u", 0), TP("t", 0)])
    decoded = ConsumerProtocolAssignment.decode(data)
    assert sorted(decoded.partitions()) == [KafkaTopicPartition("t", 0), KafkaTopicPartition("t", 2),
                                            KafkaTopicPartition("u", 0)]
    assert decoded.user_data is None


def test_sticky_user_data_v1_v0_and_what_2_7_0_ignores():
    """StickyAssignor.memberData: none or empty is no prior and no generation; the V1
    schema carries a generation, V0 (no generation) is read when V1 does not fit, and
    bytes neither fits give no prior at generation -1."""
    v1 = cp.encode_sticky_user_data([TP("t", 3), TP("t", 1), TP("u", 0)], 7)
    assert cp.decode_sticky_user_data(v1) == cp.StickyUserData((TP("t", 3), TP("t", 1), TP("u", 0)), 7)
    v0 = v1[:-4]
    assert cp.decode_sticky_user_data(v0) == cp.StickyUserData((TP("t", 3), TP("t", 1), TP("u", 0)), None)
    assert cp.decode_sticky_user_data(None) == cp.decode_sticky_user_data(b"") == cp.StickyUserData((), None)
    assert cp.decode_sticky_user_data(b"\x01\x02\x03") == cp.StickyUserData((), -1)


def test_kafka_python_3_sticky_user_data_has_a_version_prefix_that_2_7_0_cannot_read():
    """kafka-python 3.0.12's sticky assignor writes its user data with an int16 version
    in front (its StickyAssignorUserData is an ApiData with a header); Java 2.7.0's
    StickyAssignor reads the struct without one, so a Java leader, like this decoder,
    sees no prior assignment (generation -1) from such a member. A finding about the
    client, recorded here so that the real binding's tests expect it."""
    metadata = StickyPartitionAssignor._metadata(["t"], [KafkaTopicPartition("t", 3)], 5).encode()
    subscription = cp.decode_subscription(metadata)
    assert subscription.topics == ("t",) and subscription.user_data[:2] == b"\x00\x01"
    assert cp.decode_sticky_user_data(subscription.user_data) == cp.StickyUserData((), -1)
    assert cp.decode_sticky_user_data(subscription.user_data[2:]) == cp.StickyUserData((TP("t", 3),), 5)


def test_member_subscription_reads_the_prior_assignment_where_the_protocol_keeps_it():
    """The sticky protocol's prior is its user data; range and round robin have none to
    use, OwnedPartitions is passed along for them as the bytes say."""
    user_data = cp.encode_sticky_user_data([TP("t", 1)], 4)
    metadata = cp.encode_subscription(["t"], user_data, [TP("t", 0)])
    assert cp.member_subscription(metadata, "sticky", "i-1") == Subscription(("t",), (TP("t", 1),), 4, "i-1")
    assert cp.member_subscription(metadata, "range") == Subscription(("t",), (TP("t", 0),), None, None)


@pytest.mark.parametrize("data, decode", [
    (cp.encode_subscription(["topic"], b"user", [TP("topic", 1)]), cp.decode_subscription),
    (cp.encode_assignment([TP("topic", 1)], b"user"), cp.decode_assignment),
], ids=["subscription", "assignment"])
def test_every_truncation_is_a_consumer_protocol_error(data, decode):
    decode(data)
    for end in range(len(data)):
        with pytest.raises(cp.ConsumerProtocolError):
            decode(data[:end])


def test_negative_versions_lengths_and_null_arrays_are_consumer_protocol_errors():
    with pytest.raises(cp.ConsumerProtocolError):
        cp.decode_subscription(b"\xff\xff" + cp.encode_subscription(["t"])[2:])
    with pytest.raises(cp.ConsumerProtocolError):  # topics array of length -1
        cp.decode_subscription(b"\x00\x00\xff\xff\xff\xff")
    with pytest.raises(cp.ConsumerProtocolError):  # a topic string of length -2
        cp.decode_subscription(b"\x00\x00\x00\x00\x00\x01\xff\xfe")
    with pytest.raises(cp.ConsumerProtocolError):  # a huge count with nothing behind it
        cp.decode_assignment(b"\x00\x01\x7f\xff\xff\xff")


@settings(max_examples=examples(200), deadline=None)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_raise_the_protocol_error_only(data):
    for decode in (cp.decode_subscription, cp.decode_assignment):
        try:
            decode(data)
        except cp.ConsumerProtocolError:
            pass
    assert isinstance(cp.decode_sticky_user_data(data), cp.StickyUserData)


topic_partitions = st.lists(st.builds(TP, st.text(max_size=5), st.integers(0, 2**31 - 1)), max_size=6)


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.text(max_size=6), max_size=4), st.none() | st.binary(max_size=8), topic_partitions,
       st.integers(0, 1))
def test_subscriptions_round_trip(topics, user_data, owned, version):
    decoded = cp.decode_subscription(cp.encode_subscription(topics, user_data, owned, version))
    grouped = sorted(owned, key=lambda tp: [tp.topic for tp in owned].index(tp.topic)) if version else []
    assert decoded == cp.ProtocolSubscription(version, tuple(topics), user_data, tuple(grouped))
