"""broker_core/group_records.py and group_loader.py against Kafka 2.7.0: the coordinator's
partition (core/.../coordinator/group/GroupMetadataManager.scala partitionFor with
clients/.../common/utils/Utils.java abs and Java's String.hashCode), the records of
__consumer_offsets (GroupMetadataManager.scala's schemas, offsetCommitKey,
groupMetadataKey, offsetCommitValue, groupMetadataValue, readMessageKey,
readOffsetMessageValue, readGroupMessageValue), the value versions by
inter.broker.protocol.version (core/.../api/ApiVersion.scala), and the loader
(doLoadGroupsAndOffsets).

The expected bytes come from an encoder that is not ours: kafka-python's schema types
(kafka.protocol.old.types), with 2.7.0's schemas transcribed field by field below, plus
a few literal byte strings."""
from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.old.types import Array, Bytes, Int16, Int32, Int64, Schema, String

from broker_core import group_records as gr
from broker_core.api_version import UnknownApiVersion, api_version
from broker_core.config import broker_config
from broker_core.config_describe import (
    DEFAULT_CONFIG, STATIC_BROKER_CONFIG, ConfigLayers, config_text, describe_broker, static_layer)
from broker_core.errors import ConfigError
from broker_core.group_loader import load_groups
from broker_core.group_records import CommittedOffset, GroupRecord, GroupRecordError, MemberRecord
from broker_core.types import TopicPartition
from tests.properties.depth import examples

TP = TopicPartition

# -- partitionFor ----------------------------------------------------------------------

# (group id, String.hashCode, partitionFor with 50 partitions), computed with OpenJDK 17
# (`java GroupHash.java` over these ids as UTF-8 lines; GroupHash is the program in
# JAVA_PROGRAM below). "polygenelubricants" and "GydZG_" hash to Integer.MIN_VALUE, whose
# Math.abs is negative: Utils.abs makes it 0.
JAVA_HASHES = [
    ("", 0, 0),
    ("a", 97, 47),
    ("abc", 96354, 4),
    ("my-group", -1906497762, 12),
    ("test-consumer-group", -1793216381, 31),
    ("polygenelubricants", -2147483648, 0),
    ("GydZG_", -2147483648, 0),
    ("groupé", -1237460406, 6),
    ("Gruppe-ÄÖÜ", 708884248, 48),
    ("日本語グループ", -305235731, 31),
    ("😀", 1772899, 49),  # beyond the BMP: two UTF-16 code units
    ("consumer-😀-group", -1427745396, 46),
    ("console-consumer-12345", 158455506, 6),
]

JAVA_PROGRAM = """
import java.io.*; import java.nio.charset.StandardCharsets;
public class GroupHash { public static void main(String[] a) throws IOException {
  BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
  String s; while ((s = r.readLine()) != null) { int h = s.hashCode(); int abs = (h == Integer.MIN_VALUE) ? 0 : Math.abs(h);
    System.out.println(h + " " + (abs % 50)); } } }
"""


@pytest.mark.parametrize("group, java_hash, partition", JAVA_HASHES)
def test_partition_for_is_javas_hash_code_through_utils_abs(group, java_hash, partition):
    assert gr.java_string_hash(group) == java_hash
    assert gr.partition_for(group) == partition
    assert gr.partition_for(group, 50) == partition


def test_integer_min_value_hash_goes_to_partition_0_not_to_math_abs():
    """Utils.abs(Integer.MIN_VALUE) is 0; Python's abs would give 2^31, partition 48."""
    assert gr.java_string_hash("polygenelubricants") == -2**31
    assert gr.java_abs(-2**31) == 0 and abs(-2**31) % 50 == 48
    assert [gr.partition_for("polygenelubricants", n) for n in (1, 7, 50)] == [0, 0, 0]


def test_partition_for_other_partition_counts_and_refuses_none():
    assert gr.partition_for("my-group", 1) == 0
    assert gr.partition_for("my-group", 7) == 1906497762 % 7
    with pytest.raises(ValueError):
        gr.partition_for("my-group", 0)


@pytest.mark.skipif(shutil.which("java") is None, reason="no java on this machine")
def test_partition_for_matches_java_run_now(tmp_path):
    """The fixed table above, and a few more ids, against a JVM started now (about 2 s)."""
    program = tmp_path / "GroupHash.java"
    program.write_text(JAVA_PROGRAM)
    groups = [g for g, _, _ in JAVA_HASHES] + ["x" * 300, "Ω≈ç√∫", "tab\tgroup", "🎉🎉🎉", "A" * 17]
    out = subprocess.run(["java", str(program)], input="\n".join(groups) + "\n", capture_output=True,
                         encoding="utf-8", timeout=120, check=True).stdout.split("\n")
    expected = [f"{gr.java_string_hash(g)} {gr.partition_for(g)}" for g in groups]
    assert out[:len(groups)] == expected


# -- inter.broker.protocol.version -----------------------------------------------------

@pytest.mark.parametrize("ibp, offset_version, group_version", [
    ("0.8.2", 1, 0), ("0.10.0-IV1", 1, 0), ("0.10.1-IV0", 1, 1), ("0.10.1", 1, 1), ("0.10.1.1", 1, 1),
    ("2.0", 1, 1), ("2.1-IV0", 2, 2), ("2.1-IV1", 3, 2), ("2.2-IV1", 3, 2), ("2.3-IV0", 3, 3),
    ("2.7-IV2", 3, 3), ("2.7", 3, 3), ("2.7.0", 3, 3), ("3.0-IV1", 3, 3)])
def test_value_versions_follow_the_inter_broker_protocol(ibp, offset_version, group_version):
    """offsetCommitValue: v1 below 2.1-IV0, v2 below 2.1-IV1, else v3, and v1 whenever
    there is an expire timestamp; groupMetadataValue: v0 below 0.10.1-IV0, v1 below
    2.1-IV0, v2 below 2.3-IV0, else v3."""
    committed = CommittedOffset(5, 2, "", 1000)
    assert gr.offset_commit_value_version(committed, ibp) == offset_version
    assert gr.offset_commit_value_version(CommittedOffset(5, 2, "", 1000, 9000), ibp) == 1
    assert gr.group_metadata_value_version(ibp) == group_version
    assert gr.encode_offset_commit_value(committed, ibp)[:2] == bytes([0, offset_version])
    assert gr.encode_group_metadata_value(EMPTY_GROUP, ibp)[:2] == bytes([0, group_version])


@pytest.mark.parametrize("text", ["", "2.9", "1.2", "0.10.3", "banana", "3.1-IV0", "2.7-IV9"])
def test_unknown_inter_broker_protocol_versions_are_refused(text):
    with pytest.raises(UnknownApiVersion):
        api_version(text)


# -- kafka-python's types over 2.7.0's schemas (GroupMetadataManager.scala) ------------

S = String("utf-8")  # kafka-python writes None as length -1: NULLABLE_STRING as well
KP_OFFSET_KEY = Schema(("version", Int16), ("group", S), ("topic", S), ("partition", Int32))
KP_GROUP_KEY = Schema(("version", Int16), ("group", S))
KP_OFFSET_VALUE = {
    0: Schema(("version", Int16), ("offset", Int64), ("metadata", S), ("timestamp", Int64)),
    1: Schema(("version", Int16), ("offset", Int64), ("metadata", S), ("commit_timestamp", Int64),
              ("expire_timestamp", Int64)),
    2: Schema(("version", Int16), ("offset", Int64), ("metadata", S), ("commit_timestamp", Int64)),
    3: Schema(("version", Int16), ("offset", Int64), ("leader_epoch", Int32), ("metadata", S),
              ("commit_timestamp", Int64)),
}
_M1 = (("member_id", S), ("client_id", S), ("client_host", S), ("rebalance_timeout", Int32),
       ("session_timeout", Int32), ("subscription", Bytes), ("assignment", Bytes))
KP_MEMBER = {
    0: (("member_id", S), ("client_id", S), ("client_host", S), ("session_timeout", Int32),
        ("subscription", Bytes), ("assignment", Bytes)),
    1: _M1, 2: _M1,
    3: (("member_id", S), ("group_instance_id", S)) + _M1[1:],
}


def kp_group_value(version: int) -> Schema:
    head = (("version", Int16), ("protocol_type", S), ("generation", Int32), ("protocol", S), ("leader", S))
    timestamp = (("current_state_timestamp", Int64),) if version >= 2 else ()
    return Schema(*head, *timestamp, ("members", Array(*KP_MEMBER[version])))


def kp_member(m: MemberRecord, version: int) -> tuple:
    by_name = {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
               "client_host": m.client_host, "rebalance_timeout": m.rebalance_timeout,
               "session_timeout": m.session_timeout, "subscription": m.subscription, "assignment": m.assignment}
    return tuple(by_name[name] for name, _ in KP_MEMBER[version])


MEMBERS = (
    MemberRecord("consumer-1-5f0e", "instance-a", "consumer-1", "/127.0.0.1", 300000, 10000, b"\x00\x01sub", b"asg"),
    MemberRecord("consumer-2-ö", None, "consumer-2", "/10.0.0.2", 60000, 6000, b"", b""),
)
STABLE_GROUP = GroupRecord("consumer", 7, "range", "consumer-1-5f0e", 1_600_000_000_123, MEMBERS)
EMPTY_GROUP = GroupRecord("consumer", 8, None, None, 1_600_000_000_999, ())


# -- keys ---------------------------------------------------------------------------------

def test_keys_are_the_bytes_kafka_writes():
    """offsetCommitKey writes version 1, groupMetadataKey version 2 (literal bytes)."""
    assert gr.encode_offset_commit_key("g", TP("t", 3)) == b"\x00\x01" b"\x00\x01g" b"\x00\x01t" b"\x00\x00\x00\x03"
    assert gr.encode_group_metadata_key("gé") == b"\x00\x02" b"\x00\x03g\xc3\xa9"


@pytest.mark.parametrize("version", [0, 1])
def test_offset_commit_keys_round_trip_and_match_kafka_python(version):
    data = KP_OFFSET_KEY.encode((version, "my-group", "orders", 42))
    assert gr.encode_offset_commit_key("my-group", TP("orders", 42), version) == data
    assert gr.decode_key(data) == gr.OffsetCommitKey("my-group", TP("orders", 42))


def test_group_metadata_key_round_trips_and_matches_kafka_python():
    data = KP_GROUP_KEY.encode((2, "日本語グループ"))
    assert gr.encode_group_metadata_key("日本語グループ") == data
    assert gr.decode_key(data) == gr.GroupMetadataKey("日本語グループ")


# -- offset commit values -------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_offset_commit_values_round_trip_at_every_version_and_match_kafka_python(version):
    committed = CommittedOffset(123456789012, 5 if version == 3 else None, "meta✓", 1_600_000_000_000,
                                1_600_600_000_000 if version == 1 else None)
    fields = {0: (123456789012, "meta✓", 1_600_000_000_000),
              1: (123456789012, "meta✓", 1_600_000_000_000, 1_600_600_000_000),
              2: (123456789012, "meta✓", 1_600_000_000_000),
              3: (123456789012, 5, "meta✓", 1_600_000_000_000)}[version]
    data = KP_OFFSET_VALUE[version].encode((version, *fields))
    assert gr.encode_offset_commit_value_version(committed, version) == data
    assert gr.decode_offset_commit_value(data) == committed


def test_offset_commit_value_v3_is_the_literal_bytes_kafka_writes():
    data = gr.encode_offset_commit_value(CommittedOffset(10, None, "", 1000))
    assert data == b"\x00\x03" + (10).to_bytes(8, "big") + b"\xff\xff\xff\xff" + b"\x00\x00" + (1000).to_bytes(8, "big")


def test_offset_value_sentinels_mean_none():
    """readOffsetMessageValue: v1's expire_timestamp -1 (DEFAULT_TIMESTAMP) is none, a
    negative v3 leader epoch is none; below v3 the epoch is dropped (offsetCommitValue)."""
    v1 = KP_OFFSET_VALUE[1].encode((1, 7, "", 50, -1))
    assert gr.decode_offset_commit_value(v1) == CommittedOffset(7, None, "", 50, None)
    v3 = KP_OFFSET_VALUE[3].encode((3, 7, -1, "", 50))
    assert gr.decode_offset_commit_value(v3) == CommittedOffset(7, None, "", 50)
    old = gr.encode_offset_commit_value(CommittedOffset(7, 4, "", 50), "2.1-IV0")
    assert gr.decode_offset_commit_value(old) == CommittedOffset(7, None, "", 50)


def test_an_expire_timestamp_is_always_written_at_v1():
    committed = CommittedOffset(7, 4, "m", 50, 99)
    assert gr.decode_offset_commit_value(gr.encode_offset_commit_value(committed)) == CommittedOffset(7, None, "m", 50, 99)
    for version in (0, 2, 3):
        with pytest.raises(ValueError):
            gr.encode_offset_commit_value_version(committed, version)


# -- group metadata values --------------------------------------------------------------

def _as_written(group: GroupRecord, version: int) -> GroupRecord:
    """What survives version ``version``: readGroupMessageValue's defaults for what it lacks."""
    members = tuple(MemberRecord(m.member_id, m.group_instance_id if version >= 3 else None, m.client_id,
                                 m.client_host, m.rebalance_timeout if version >= 1 else m.session_timeout,
                                 m.session_timeout, m.subscription, m.assignment) for m in group.members)
    return GroupRecord(group.protocol_type, group.generation, group.protocol, group.leader,
                       group.current_state_timestamp if version >= 2 else None, members)


@pytest.mark.parametrize("group", [STABLE_GROUP, EMPTY_GROUP], ids=["stable", "empty"])
@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_group_values_round_trip_at_every_version_and_match_kafka_python(version, group):
    head = (version, group.protocol_type, group.generation, group.protocol, group.leader)
    timestamp = (group.current_state_timestamp,) if version >= 2 else ()
    data = kp_group_value(version).encode((*head, *timestamp, [kp_member(m, version) for m in group.members]))
    assert gr.encode_group_metadata_value_version(group, version) == data
    assert gr.decode_group_metadata_value(data) == _as_written(group, version)


def test_group_value_details_as_kafka_reads_them():
    """A state timestamp of -1 is none; a group without members loads Empty, with
    members Stable (readGroupMessageValue's initialState)."""
    data = kp_group_value(2).encode((2, "consumer", 0, None, None, -1, []))
    loaded = gr.decode_group_metadata_value(data)
    assert loaded == GroupRecord("consumer", 0, None, None, None, ())
    assert loaded.initial_state == "Empty" and STABLE_GROUP.initial_state == "Stable"


def test_members_without_a_protocol_are_refused_when_writing():
    with pytest.raises(ValueError):
        gr.encode_group_metadata_value(GroupRecord("consumer", 1, None, "m", None, MEMBERS))


def test_whole_records_and_tombstones():
    key, value = gr.offset_commit_record("g", TP("t", 0), CommittedOffset(3, 1, "", 9))
    assert gr.decode_key(key) == gr.OffsetCommitKey("g", TP("t", 0)) and value is not None
    assert gr.offset_tombstone("g", TP("t", 0)) == (key, None)
    assert gr.group_tombstone("g") == (gr.encode_group_metadata_key("g"), None)
    assert gr.decode_offset_commit_value(None) is None and gr.decode_group_metadata_value(None) is None


# -- malformed bytes: GroupRecordError and nothing else --------------------------------

VALID = [gr.encode_offset_commit_key("grp", TP("topic", 1)), gr.encode_group_metadata_key("grp")] + [
    gr.encode_offset_commit_value_version(CommittedOffset(1, 2 if v == 3 else None, "md", 3, 4 if v == 1 else None), v)
    for v in range(4)] + [gr.encode_group_metadata_value_version(STABLE_GROUP, v) for v in range(4)]
DECODERS = (gr.decode_key, gr.decode_offset_commit_value, gr.decode_group_metadata_value)


def _decode_all(data: bytes) -> None:
    for decode in DECODERS:
        try:
            decode(data)
        except GroupRecordError:
            pass


@pytest.mark.parametrize("index", range(len(VALID)))
def test_every_truncation_raises_group_record_error(index):
    """Schema.read fails with SchemaException on a short buffer; here every cut of
    every encoding, with every decoder, raises GroupRecordError or decodes."""
    data = VALID[index]
    own = DECODERS[0] if index < 2 else DECODERS[1] if index < 6 else DECODERS[2]
    for cut in range(len(data)):
        with pytest.raises(GroupRecordError):
            own(data[:cut])
        _decode_all(data[:cut])


@pytest.mark.parametrize("decode, data", [
    (gr.decode_key, b"\x00\x03\x00\x01g"),  # key version 3: schemaForKey's KafkaException
    (gr.decode_key, b"\xff\xff\x00\x01g"),
    (gr.decode_key, b"\x00\x02\xff\xfe"),  # a negative STRING length
    (gr.decode_key, None),  # doLoadGroupsAndOffsets: require(record.hasKey)
    (gr.decode_offset_commit_value, b"\x00\x04" + bytes(20)),  # schemaForOffsetValue
    (gr.decode_offset_commit_value, b"\x00\x02" + bytes(8) + b"\xff\xfe" + bytes(8)),
    (gr.decode_group_metadata_value, b"\x00\x04"),  # schemaForGroupValue
    (gr.decode_group_metadata_value, b"\x00\x00\x00\x01c\x00\x00\x00\x01\xff\xff\xff\xff\xff\xff\xff\xff"),  # members -1
    (gr.decode_group_metadata_value, gr.encode_group_metadata_value_version(STABLE_GROUP, 0)[:-8] + b"\xff\xff\xff\xfe"),
], ids=["key-v3", "key-negative-version", "key-negative-string", "key-null", "offset-v4",
        "offset-negative-metadata", "group-v4", "group-null-members", "group-negative-bytes"])
def test_malformed_fields_raise_group_record_error(decode, data):
    with pytest.raises(GroupRecordError):
        decode(data)


def test_a_huge_member_count_costs_only_the_bytes_there_are():
    data = b"\x00\x03\x00\x01c\x00\x00\x00\x01\xff\xff\xff\xff" + (-1).to_bytes(8, "big", signed=True) + b"\x7f\xff\xff\xff"
    with pytest.raises(GroupRecordError):
        gr.decode_group_metadata_value(data)


@settings(max_examples=examples(300), deadline=None)
@given(st.one_of(st.binary(max_size=80),
                 st.builds(lambda v, tail: v[:len(v) // 2] + tail, st.sampled_from(VALID), st.binary(max_size=30))))
def test_arbitrary_bytes_decode_or_raise_group_record_error(data):
    _decode_all(data)
    try:
        load_groups([(data, data), (data, None)])
    except GroupRecordError:
        pass


# -- the loader (GroupMetadataManager.doLoadGroupsAndOffsets) ---------------------------

def _commit(group: str, tp: TopicPartition, offset: int, ibp: str = "2.7-IV2") -> tuple[bytes, bytes | None]:
    return gr.offset_commit_record(group, tp, CommittedOffset(offset, 0, f"at {offset}", 100 + offset), ibp)


def test_loader_later_records_win_and_tombstones_remove():
    a0, a1, b0 = TP("a", 0), TP("a", 1), TP("b", 0)
    records = [
        _commit("g1", a0, 5), _commit("g2", a0, 50), _commit("g1", a1, 7),
        gr.group_metadata_record("g1", STABLE_GROUP),
        _commit("g1", a0, 9, "2.0"),  # a commit written at v1 by an older broker still loads
        gr.offset_tombstone("g1", a1),
        gr.group_metadata_record("g2", EMPTY_GROUP, "0.10.0-IV1"),
        gr.group_tombstone("g2"),
        _commit("g3", b0, 1), gr.offset_tombstone("g3", b0),  # a group whose only offset expired
        gr.offset_tombstone("g9", b0),  # a tombstone for an offset never seen
    ]
    loaded = load_groups(records)
    assert loaded.offsets == {"g1": {a0: CommittedOffset(9, None, "at 9", 109)},
                              "g2": {a0: CommittedOffset(50, 0, "at 50", 150)}}
    assert loaded.groups == {"g1": STABLE_GROUP}
    assert loaded.removed == {"g2"}
    # g2's metadata was deleted, but its offsets stay: Kafka loads it as an Empty group.
    assert loaded.group_ids() == ["g1", "g2"]


def test_loader_group_metadata_replaced_and_recreated_after_a_tombstone():
    later = GroupRecord("consumer", 9, "sticky", "consumer-2-ö", 5, MEMBERS[1:])
    loaded = load_groups([gr.group_metadata_record("g", STABLE_GROUP), gr.group_tombstone("g"),
                          gr.group_metadata_record("g", EMPTY_GROUP), gr.group_metadata_record("g", later)])
    assert loaded.groups == {"g": later} and loaded.removed == set() and loaded.offsets == {}
    assert load_groups([]).group_ids() == []


def test_loader_restores_what_each_ibp_wrote_as_the_reader_sees_it():
    for ibp, version in (("0.9.0", 0), ("2.0", 1), ("2.2", 2), ("2.7", 3)):
        loaded = load_groups([gr.group_metadata_record("g", STABLE_GROUP, ibp)])
        assert loaded.groups["g"] == _as_written(STABLE_GROUP, version)


def test_loader_fails_on_a_malformed_record_with_group_record_error():
    with pytest.raises(GroupRecordError):
        load_groups([_commit("g", TP("a", 0), 1), (None, b"\x00\x03")])
    with pytest.raises(GroupRecordError):
        load_groups([(gr.encode_group_metadata_key("g"), b"\x00\x09")])


# -- configuration: Kafka 2.7.0's defaults, checks, and DescribeConfigs -------------------

GROUP_KEYS = {
    "offsets.topic.num.partitions": "50", "offsets.topic.replication.factor": "3",
    "offsets.topic.segment.bytes": "104857600", "offsets.retention.minutes": "10080",
    "offsets.retention.check.interval.ms": "600000", "offsets.commit.required.acks": "-1",
    "offsets.commit.timeout.ms": "5000", "offset.metadata.max.bytes": "4096",
    "group.initial.rebalance.delay.ms": "3000", "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000", "group.max.size": "2147483647",
    "inter.broker.protocol.version": "2.7-IV2",
}


def test_group_keys_have_kafkas_defaults_and_describe_configs_lists_them():
    config = broker_config("kafka-2.7")
    for key, default in GROUP_KEYS.items():
        assert config_text(getattr(config, key.replace(".", "_"))) == default
    entries = {e.name: e for e in describe_broker(ConfigLayers(static_layer(1, config)), True, False, None)}
    for key, default in GROUP_KEYS.items():
        assert (entries[key].value, entries[key].source) == (default, DEFAULT_CONFIG)


def test_profiles_name_their_inter_broker_protocol_and_describe_configs_shows_it():
    for profile, ibp in (("kafka-0.8", "0.8.2"), ("kafka-2.7", "2.7-IV2"), ("kafka-3.0", "3.0-IV1")):
        assert broker_config(profile).inter_broker_protocol_version == ibp
    layers = ConfigLayers(static_layer(1, broker_config("kafka-0.8", {"offsets.topic.num.partitions": 3})))
    entries = {e.name: e for e in describe_broker(layers, True, False, ("inter.broker.protocol.version",
                                                                          "offsets.topic.num.partitions"))}
    assert (entries["inter.broker.protocol.version"].value, entries["inter.broker.protocol.version"].source) == \
        ("0.8.2", STATIC_BROKER_CONFIG)
    assert entries["offsets.topic.num.partitions"].value == "3"


@pytest.mark.parametrize("overrides", [
    {"offsets.topic.num.partitions": 0}, {"offsets.topic.replication.factor": 0}, {"group.max.size": 0},
    {"offsets.commit.timeout.ms": 0}, {"offsets.retention.minutes": 0},
    {"offsets.commit.required.acks": -2}, {"offsets.commit.required.acks": 4},
    {"offsets.commit.required.acks": 2, "offsets.topic.replication.factor": 1},
    {"inter.broker.protocol.version": "9.9"}, {"inter.broker.protocol.version": 27},
])
def test_group_keys_are_checked_as_kafka_config_does(overrides):
    """KafkaConfig: atLeast(1), and validateValues' -1 <= offsets.commit.required.acks <=
    offsets.topic.replication.factor; ApiVersion.apply for the protocol version."""
    with pytest.raises(ConfigError):
        broker_config("kafka-2.7", overrides)


def test_group_keys_accept_kafkas_edge_values():
    config = broker_config("kafka-2.7", {"offsets.commit.required.acks": 3, "group.initial.rebalance.delay.ms": 0,
                                         "inter.broker.protocol.version": "2.1"})
    assert config.offsets_commit_required_acks == 3 and config.inter_broker_protocol_version == "2.1"
