"""The simulated producer partitions records as the Java client of its profile does."""
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from analysis.history import load_history
from broker_core.partitioner import partition_for_key
from scenarios.parse import load_scenario, parse_scenario
from scenarios.runner import run_scenario

ROOT = Path(__file__).resolve().parent.parent.parent

SCENARIO = """
name: partitioning
cluster:
  brokers: 3
  profile: {profile}
  topics: [{{name: t, partitions: 3, replication_factor: 2}}]
workload:
  producers: [{{topic: t, acks: 1, rate: 300, linger: 10ms{extra}}}]
duration: 3s
"""


def sends(tmp_path: Path, profile: str, extra: str = ""):
    scenario = parse_scenario(SCENARIO.format(profile=profile, extra=extra), "partitioning.yaml")
    result = run_scenario(scenario, 1, tmp_path)
    ops = [o for o in load_history(result.trace_path).of("send") if o.outcome == "ok"]
    assert len(ops) > 100
    return ops


def requests_per_tick(ops) -> Counter:
    """Batches sent per linger tick, once the producer knows the leaders (before that,
    batches of several ticks wait and leave together)."""
    return Counter(o.invoke.t_ms for o in ops if o.invoke.t_ms >= 500)


def test_kafka_2_7_keyless_records_stick_to_one_partition_per_batch(tmp_path: Path):
    """Kafka 2.4.0/2.7.0 DefaultPartitioner with StickyPartitionCache (KIP-480) and
    KafkaProducer.doSend (abortOnNewBatch, then onNewBatch): all keyless records go to
    one partition until it needs a new batch, then to another one. Each linger tick is
    one batch, so one produce request per tick instead of one per leader."""
    ops = sends(tmp_path, "kafka-2.7")
    assert max(requests_per_tick(ops).values()) == 1, "one batch, so one produce request, per tick"
    # once leaders are known (before, with no partition available, Java may draw the same one)
    partitions = [o.invoke["partition"] for o in sorted(ops, key=lambda o: o.invoke["op"]) if o.invoke.t_ms >= 500]
    assert all(a != b for a, b in zip(partitions, partitions[1:])), "each new batch moves on"
    assert set(partitions) == {"t-0", "t-1", "t-2"}


def test_kafka_0_8_keyless_records_go_round_robin(tmp_path: Path):
    """Kafka 0.8.2.2 clients/.../producer/internals/Partitioner.partition: keyless
    records take turns over the partitions with a leader, so every tick's 3 records
    spread over all 3 partitions (3 leaders, 3 requests)."""
    ops = sends(tmp_path, "kafka-0.8")
    per_tick = defaultdict(set)
    for o in ops:
        per_tick[o.invoke.t_ms].add(o.invoke["partition"])
    full = [p for p in per_tick.values() if len(p) == 3]
    assert len(full) > 0.9 * len(per_tick)


@pytest.mark.parametrize("profile", ["kafka-0.8", "kafka-2.7"])
def test_a_scenario_can_choose_the_other_partitioner(tmp_path: Path, profile: str):
    """The producer's ``partitioner`` overrides the profile's default (Kafka 2.4+
    RoundRobinPartitioner, or the sticky DefaultPartitioner)."""
    other = "round_robin" if profile == "kafka-2.7" else "sticky"
    ops = sends(tmp_path, profile, f", partitioner: {other}")
    assert (max(requests_per_tick(ops).values()) == 1) == (other == "sticky")


@pytest.mark.parametrize("profile", ["kafka-0.8", "kafka-2.7"])
def test_keyed_records_go_where_murmur2_sends_them(tmp_path: Path, profile: str):
    """Kafka 2.7.0 DefaultPartitioner.partition and 0.8.2.2 Partitioner.partition:
    toPositive(murmur2(key bytes)) % partitions, keys serialized as UTF-8."""
    ops = sends(tmp_path, profile, ", keys: 7")
    for o in ops:
        for value in o.invoke["values"]:
            seq = int(value.split(":")[1])
            assert o.invoke["partition"] == f"t-{partition_for_key(f'k{seq % 7}'.encode(), 3)}"


@pytest.mark.slow
def test_no_send_recorded_as_failed_is_in_the_final_read(tmp_path: Path):
    """Kafka 2.7.0 kafka.cluster.Partition.checkEnoughReplicasReachOffset (through
    DelayedProduce.tryComplete): an acks=all produce that waited in purgatory gets
    NOT_LEADER_OR_FOLLOWER when its leader lost leadership, although the records were
    appended and may be committed by the next leader. Under the nemesis such records
    do reach the final read, so the history records those sends as unknown (``info``),
    and ``fail`` stays a promise that nothing was appended."""
    # Whether a seed has such a record committed moves with every change to the model;
    # tests/broker_core/test_produce_outcomes.py forces one. Here: no `fail` is ever read.
    seen_not_leader = 0
    for seed in range(1, 4):
        result = run_scenario(load_scenario(ROOT / "scenarios/library/nemesis-safe.yaml"), seed, tmp_path / str(seed))
        history = load_history(result.trace_path)
        read = {v for o in history.of("read") if o.completion is not None for _, v in o.completion["records"]}
        not_leader = [o for o in history.of("send") if o.completion is not None
                      and o.completion.fields.get("error") == "NOT_LEADER_OR_FOLLOWER"]
        assert all(o.outcome == "info" for o in not_leader)
        failed = [o for o in history.of("send") if o.outcome == "fail"]
        assert not any(v in read for o in failed for v in o.invoke["values"])
        seen_not_leader += len(not_leader)
    assert seen_not_leader, "the nemesis never made a leader answer NOT_LEADER_OR_FOLLOWER: nothing was tested"


ACKS_0 = """
name: acks-0-leader-moves
cluster:
  brokers: 3
  topics: [{name: t, partitions: 1, replication_factor: 3, assignment: {0: [1, 2, 3]}}]
workload:
  producers: [{topic: t, acks: 0, rate: 100}]
faults:
  - {at: 3s, crash: 1}
  - {at: 25s, restart: 1}
  - {at: 30s, preferred_replica_election: all}
duration: 40s
"""


def test_an_acks_0_producer_whose_leader_moved_learns_it_from_the_closed_connection(tmp_path: Path):
    """2.7.0 core/src/main/scala/kafka/server/KafkaApis.scala handleProduceRequest closes
    the connection of an acks=0 produce that failed, and the client's
    NetworkClient.processDisconnection (DefaultMetadataUpdater.handleServerDisconnect)
    asks for new metadata. Broker 1 comes back at 25 s as a follower of broker 2 and the
    producer, which still takes it for the leader, sends to it: the first request is
    refused and the connection closed, the producer finds broker 2, and what it sends
    from then on is written; the same when the preferred election at 30 s moves t-0
    back to broker 1 while broker 2 runs on. Without the close it would send to broker
    1 in vain until 30 s."""
    result = run_scenario(parse_scenario(ACKS_0, "acks-0.yaml"), 1, tmp_path)
    history = load_history(result.trace_path)
    elected = [e for e in history.events if e.type == "leader_elected" and e.get("election") == "preferred"]
    assert [e["leader"] for e in elected] == [1]
    read = {v for o in history.of("read") if o.completion is not None for _, v in o.completion["records"]}
    sends = history.of("send")
    lost = [o.invoke.t_ms for o in sends if o.invoke.t_ms >= 25000 and not set(o.invoke["values"]) <= read]
    assert len(lost) <= 2 and all(t < 26000 or 30000 <= t < 31000 for t in lost), lost
    assert len([o for o in sends if o.invoke.t_ms >= 25000]) > 1000


STOPPED = """
name: stopped-producer
cluster:
  brokers: 3
  topics: [{name: t, partitions: 1, replication_factor: 3}]
workload:
  producers: [{topic: t, acks: all, rate: 200, retries: 5, request_timeout: 1s, stop: 2s}]
faults:
  - at: 1800ms
    isolate: producer-0         # the requests in flight at the stop time out
    for: 1s
duration: 6s
"""


def test_a_stopped_producer_still_retries_what_it_had_sent(tmp_path: Path):
    """`stop` ends the records the application creates, not the sender: the Java
    producer's Sender thread (2.7.0 clients/.../producer/internals/Sender.java
    runOnce, completeBatch -> reenqueueBatch) goes on retrying a timed-out batch after
    the application stopped calling send(). Before, the simulated producer ended its
    sending loop at `stop`, so nothing in flight then was ever retried."""
    result = run_scenario(parse_scenario(STOPPED, "stopped-producer.yaml"), 1, tmp_path)
    sends = load_history(result.trace_path).of("send")
    values = [v for o in sends for v in o.invoke["values"]]
    assert len(values) == len(set(values)) == 400, "the 2 s of records at 200/s, and nothing created after stop"
    retried = [o for o in sends if o.invoke.t_ms < 2000 and o.outcome == "ok" and o.completion.t_ms > 2800]
    assert retried, "a batch sent before the stop and timed out was acknowledged on a retry after the heal"
    assert all(o.outcome == "ok" for o in sends), "what was queued at the stop was sent too"


KEYED = """
name: keyed
cluster:
  brokers: 3
  topics: [{name: t, partitions: 3, replication_factor: 2, config: {cleanup.policy: compact}}]
workload:
  producers:
    - {topic: t, acks: all, rate: 300, keys: 5, key_distribution: uniform, tombstone_rate: 0.3}
    - topic: t
      records:
        - {key: a, value: a1, at: 500ms}
        - {key: a, value: null, at: 1500ms}
        - {key: b, value: b1}
  consumers: [{topic: t}]
duration: 3s
"""


def keyed_history(tmp_path: Path, seed: int):
    result = run_scenario(parse_scenario(KEYED, "keyed.yaml"), seed, tmp_path / str(seed))
    return load_history(result.trace_path), result.trace_path


def test_a_keyed_workload_draws_keys_and_tombstones_from_the_seed_and_records_them(tmp_path: Path):
    """Uniform keys and tombstones come from the producer's own seeded stream: the same
    seed sends the same records (a byte-identical trace), another seed others; every
    send records its keys, tombstones as null values, and goes where murmur2 sends its key."""
    history, trace = keyed_history(tmp_path, 1)
    _, again = keyed_history(tmp_path / "again", 1)
    other, _ = keyed_history(tmp_path, 2)
    assert trace.read_bytes() == again.read_bytes()
    records = lambda h: [(k, v) for o in h.of("send") if o.process == "producer-0"  # noqa: E731
                         for k, v in zip(o.invoke["keys"], o.invoke["values"])]
    mine = records(history)
    assert records(other) != mine
    keys = Counter(k for k, _ in mine)
    tombstones = sum(v is None for _, v in mine)
    assert set(keys) == {f"k{i}" for i in range(5)} and len(mine) > 500
    assert 0.2 < tombstones / len(mine) < 0.4
    for o in history.of("send"):
        assert len(o.invoke["keys"]) == len(o.invoke["values"])
        for key in o.invoke["keys"]:
            assert o.invoke["partition"] == f"t-{partition_for_key(key.encode(), 3)}"


def test_scripted_records_are_sent_as_written_at_their_times_and_read_back_with_keys(tmp_path: Path):
    history, _ = keyed_history(tmp_path, 1)
    scripted = sorted((o for o in history.of("send") if o.process == "producer-1"), key=lambda o: o.op)
    sent = [(o.invoke.t_ms, k, v) for o in scripted for k, v in zip(o.invoke["keys"], o.invoke["values"])]
    assert [(k, v) for _, k, v in sent] == [("a", "a1"), ("a", None), ("b", "b1")]
    assert 500 <= sent[0][0] < 600 and 1500 <= sent[1][0] < 1600 and sent[2][0] == sent[1][0]
    assert all(o.outcome == "ok" for o in scripted)
    # the final read and the polls give each record's key beside its [offset, value]
    for read in history.of("read"):
        assert len(read.done["keys"]) == len(read.done["records"]) > 0
    tombstone = [(r, k) for read in history.of("read")
                 for r, k in zip(read.done["records"], read.done["keys"]) if k == "a"]
    assert [r[1] for r, _ in tombstone] == ["a1", None]
    polled = [(r[1], k) for p in history.of("poll") if p.outcome == "ok"
              for part, rs in p.done["records"].items() for r, k in zip(rs, p.done["keys"][part])]
    assert ("b1", "b") in polled and (None, "a") in polled
