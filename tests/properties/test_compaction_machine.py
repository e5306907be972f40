"""Log compaction of a replicated topic against a dict model (issue 23), over three real
core brokers on the in-test router (tests/harness.py, no simpy): each replica runs its
own cleaner, in steps of log.cleaner.step.records records, as time passes.

Rules append keyed records and tombstones (acks=all), let time pass (segments roll by
segment.bytes and segment.ms, the cleaners run in bounded steps), restart a follower,
and fail the leader over. The model is every record ever acknowledged, with its offset
and the time it was written. (tests/broker_core/test_cleaner_properties.py checks one
log's cleaner without replication.)

The rules checked are Kafka 2.7.0's core/src/main/scala/kafka/log/LogCleaner.scala,
``Cleaner.cleanSegments`` / ``shouldRetainRecord`` (a record survives if it is its key's
latest in the offset map; a tombstone only until ``deleteHorizonMs``, the last modified
time of the last cleaned segment minus delete.retention.ms) and
``CleanerThread.doWork`` (each replica cleans its own log), and
core/src/main/scala/kafka/log/Log.scala ``replaceSegments`` (offsets are kept). 0.8.2.2
has the same retention rule; 3.0.0 (KIP-534) measures the tombstone's horizon from when
the cleaner first saw it, which this model (written time + delete.retention.ms) allows
for too, as it only ever asserts that a tombstone outlived delete.retention.ms.

Invariants, after every rule, on every live replica, reading from the log start:
offsets strictly increase and every record is the one acknowledged at that offset
(offsets never move); each key's final value is its last record; a tombstoned key's
last record, if any, is the tombstone (no key comes back with an older value), and a
tombstone is gone only once delete.retention.ms has passed since it was written; once
settled, every replica gives the same key -> value map, the model's.
"""
from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from broker_core.cleaned_batch import record_offsets
from broker_core.config import topic_config
from broker_core.errors import ErrorCode
from broker_core.messages import ProduceRequest
from broker_core.records import Record
from broker_core.types import TopicPartition
from tests.harness import Cluster
from tests.properties.cluster_steps import fail_over, restart
from tests.properties.depth import machine_settings

TP = TopicPartition("t", 0)
RETENTION_MS = 300  # delete.retention.ms: short enough that tombstones do go in a run
# No preferred-leader elections: the leader moves only when a rule moves it (a produce
# racing one would be answered NOT_LEADER_OR_FOLLOWER, which these clients do not retry).
CONFIG = {"log.cleaner.backoff.ms": 50, "log.cleaner.step.records": 5, "auto.leader.rebalance.enable": False,
          "zookeeper.session.timeout.ms": 1000, "replica.lag.time.max.ms": 1000}
TOPIC = {"cleanup.policy": "compact", "segment.bytes": 300, "segment.ms": 400, "min.cleanable.dirty.ratio": 0.01,
         "delete.retention.ms": RETENTION_MS}
KEYS = ["a", "b", "c", "d"]
records = st.lists(st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.sampled_from(["1", "2", "3"]))),
                   min_size=1, max_size=4)


class CompactionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        cluster = self.cluster = Cluster(config=CONFIG)
        cluster.topic_configs["t"] = topic_config(cluster.config, TOPIC)
        cluster.start_all()
        assert cluster.wait_for(cluster.settled, 10000)
        self.appended: dict[int, tuple[str, str | None]] = {}  # offset -> (key, value)
        self.written_ms: dict[int, int] = {}
        self.final: dict[str, int] = {}  # key -> offset of its last record

    # -- rules -----------------------------------------------------------------------
    @rule(batches=st.lists(st.tuples(records, st.sampled_from([0, 10, 100, 400])), min_size=1, max_size=5))
    def append(self, batches):
        """Batches appended one after another, time passing after each (so that most
        runs have many records, segments, cleanings and tombstones)."""
        for pairs, ms in batches:
            self.append_one(pairs)
            self.cluster.run_for(ms)

    def append_one(self, pairs):
        cluster = self.cluster
        leader = cluster.leader()
        assert leader is not None
        values = tuple(Record(k, v, 10) for k, v in pairs)
        response = cluster.request_and_wait(leader, lambda cid: ProduceRequest(cid, -1, 30000, {TP: values}), 10000)
        assert response is not None, "no produce response"
        result = response.partitions[TP]
        assert result.error is ErrorCode.NONE, result
        for offset, pair in zip(range(result.base_offset, result.base_offset + len(pairs)), pairs):
            assert offset not in self.appended, f"offset {offset} given twice"
            self.appended[offset] = pair
            self.written_ms[offset] = cluster.now
            self.final[pair[0]] = offset

    @rule(ms=st.sampled_from([10, 100, 500, 1500]))
    def let_time_pass(self, ms):
        """Segments roll by segment.ms at the next append; every replica's cleaner runs
        a step per firing of its timer (log.cleaner.backoff.ms apart when idle)."""
        self.cluster.run_for(ms)

    @precondition(lambda self: self.appended)
    @rule(data=st.data())
    def restart_a_follower(self, data):
        followers = [b for b in self.cluster.brokers if b != self.cluster.leader()]
        restart(self.cluster, data.draw(st.sampled_from(followers)))

    @precondition(lambda self: self.appended)
    @rule()
    def fail_the_leader_over(self):
        fail_over(self.cluster)

    # -- invariants ------------------------------------------------------------------
    def read_from_start(self, broker: int) -> list[tuple[int, str, str | None]]:
        log = self.cluster.partition(broker).log
        return [(offset, key, value) for batch in log.load(log.log_start_offset)
                for offset, key, value in zip(record_offsets(batch), batch.records.keys or [None] * len(batch.records),
                                              batch.records.values)]

    def check_read(self, broker: int, records: list[tuple[int, str, str | None]]) -> None:
        offsets = [r[0] for r in records]
        assert offsets == sorted(set(offsets)), f"replica {broker}: offsets not strictly increasing"
        for offset, key, value in records:
            assert self.appended.get(offset) == (key, value), f"replica {broker}: offset {offset} changed"
        last_in_log = {key: offset for offset, key, _ in records}
        for key, offset in self.final.items():
            if self.appended[offset][1] is not None:
                assert last_in_log.get(key) == offset, f"replica {broker}: {key}'s final value is not its last record"
            elif key in last_in_log:
                assert last_in_log[key] == offset, f"replica {broker}: {key} came back with an older value"
            else:
                assert self.written_ms[offset] <= self.cluster.now - RETENTION_MS, \
                    f"replica {broker}: {key}'s tombstone went before delete.retention.ms"

    @invariant()
    def every_replica_reads_the_final_values_at_their_offsets(self):
        end = max(self.appended, default=-1) + 1
        for broker in sorted(self.cluster.nodes):
            part = self.cluster.partition(broker)
            if part is None or part.log.log_end_offset < end:
                continue  # not caught up yet: checked once it is
            self.check_read(broker, self.read_from_start(broker))

    @invariant()
    def settled_replicas_hold_the_same_map(self):
        if not self.cluster.settled():
            return
        model = {key: self.appended[offset][1] for key, offset in self.final.items()
                 if self.appended[offset][1] is not None}
        for broker in self.cluster.brokers:
            found: dict[str, str | None] = {}
            for _, key, value in self.read_from_start(broker):
                found[key] = value
            assert {k: v for k, v in found.items() if v is not None} == model, f"replica {broker} differs"


CompactionMachine.TestCase.settings = machine_settings(25, 20, deep_steps=50)
test_compaction = CompactionMachine.TestCase
