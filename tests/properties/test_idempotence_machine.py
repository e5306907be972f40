"""The idempotent producer against a model of sequence numbers (issue 23), over three
real core brokers on the in-test router (tests/harness.py, no simpy).

Rules send one producer's batches with chosen sequences and epochs (the next sequence,
a retry of one of the last five batches, one older than those, a gap, an old epoch, a
new epoch at 0 or not at 0), fail the leader over, restart a follower, and make the
leader append a batch (acks=1) that no follower gets before the leader dies, so that
the old leader truncates it on its return. The model is the list of batches the log
should hold; from it alone it predicts each answer.

The rules checked are Kafka 2.7.0's core/src/main/scala/kafka/log/ProducerStateManager.scala:
``ProducerStateEntry.findDuplicateBatch`` (a retry of one of the last
``NumBatchesToRetain`` = 5 batches of the same epoch is answered with the original
offsets, core/src/main/scala/kafka/log/Log.scala ``analyzeAndValidateProducerState``),
``ProducerAppendInfo.checkProducerEpoch`` (an older epoch: INVALID_PRODUCER_EPOCH, since
2.7; 0.8.2.2 has no idempotent producer at all, and 3.0.0 keeps these rules) and
``checkSequence`` (a new epoch starts at 0; otherwise the first sequence follows the
last, else OUT_OF_ORDER_SEQUENCE_NUMBER; a producer with no state left accepts any),
and Log.scala ``truncateTo`` / ``loadProducerState`` (after a truncation the state is
what the log holds; followers record the state of what they replicate).

Invariants, after every rule: the leader's log holds the model's batches, each sequence
once and in order, at the offsets they were answered with; every replica holds the same
once the cluster has settled.
"""
from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from broker_core.errors import ErrorCode
from broker_core.messages import ProduceRequest
from broker_core.records import Record, RecordBatch
from broker_core.types import TopicPartition
from tests.harness import Cluster
from tests.properties.cluster_steps import fail_over, restart
from tests.properties.depth import machine_settings

TP = TopicPartition("t", 0)
PRODUCER_ID = 7
RETAINED = 5  # ProducerStateEntry.NumBatchesToRetain
# Small session and lag times, so that a failover takes little core time.
# No preferred-leader elections: the leader moves only when a rule moves it (a produce
# racing one would be answered NOT_LEADER_OR_FOLLOWER, which these clients do not retry).
CONFIG = {"zookeeper.session.timeout.ms": 1000, "replica.lag.time.max.ms": 1000, "auto.leader.rebalance.enable": False}


@dataclass(frozen=True)
class Sent:
    """A batch the model expects in the log: the producer's epoch and sequences, and the
    offset the broker answered it with."""
    epoch: int
    first: int
    last: int
    base_offset: int
    values: tuple[str, ...]


class IdempotentProducerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.cluster = Cluster(config=CONFIG)
        self.cluster.start_all()
        assert self.cluster.wait_for(self.cluster.settled, 10000)
        self.log: list[Sent] = []  # the model: what the partition holds, in order
        self.epoch = 0  # the producer's epoch: the newest it was given
        self.tag = 0

    # -- the model -------------------------------------------------------------------
    def entry(self) -> tuple[int | None, list[Sent]]:
        """The producer state the leader should have: the epoch of its last batch in the
        log and that epoch's last five batches (a new epoch forgets the older ones)."""
        if not self.log:
            return None, []
        epoch = self.log[-1].epoch
        same = []
        for sent in reversed(self.log):
            if sent.epoch != epoch or len(same) == RETAINED:
                break
            same.append(sent)
        return epoch, same[::-1]

    def expected(self, epoch: int, first: int, last: int) -> tuple[ErrorCode, Sent | None]:
        state_epoch, batches = self.entry()
        if state_epoch is None:
            return ErrorCode.NONE, None  # no state (checkSequence with NO_PRODUCER_EPOCH)
        if epoch == state_epoch:
            for sent in batches:
                if (sent.first, sent.last) == (first, last):
                    return ErrorCode.NONE, sent  # findDuplicateBatch
        if epoch < state_epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH, None
        if epoch > state_epoch:
            return (ErrorCode.NONE if first == 0 else ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER), None
        in_sequence = first == batches[-1].last + 1
        return (ErrorCode.NONE if in_sequence else ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER), None

    def next_sequence(self) -> int:
        state_epoch, batches = self.entry()
        return batches[-1].last + 1 if batches and state_epoch == self.epoch else 0

    # -- the client ------------------------------------------------------------------
    def produce(self, epoch: int, first: int, count: int, acks: int = -1, values=None):
        if values is None:
            self.tag += 1
            values = tuple(f"p{self.tag}-{i}" for i in range(count))
        batch = RecordBatch(0, -1, [Record(None, v, 10) for v in values], producer_id=PRODUCER_ID,
                            producer_epoch=epoch, base_sequence=first)
        leader = self.cluster.leader()
        assert leader is not None
        response = self.cluster.request_and_wait(leader, lambda cid: ProduceRequest(cid, acks, 30000, {TP: batch}),
                                                 10000)
        assert response is not None, "no produce response"
        return response.partitions[TP], values

    def send_and_check(self, epoch: int, first: int, count: int, values=None) -> None:
        last = first + count - 1
        error, duplicate = self.expected(epoch, first, last)
        result, values = self.produce(epoch, first, count, values=values)
        assert result.error is error, (epoch, first, last, result.error, error)
        if error is not ErrorCode.NONE:
            return
        if duplicate is not None:
            assert result.base_offset == duplicate.base_offset, "a retry answered with other offsets"
            return
        end = self.log[-1].base_offset + len(self.log[-1].values) if self.log else 0
        assert result.base_offset == end
        self.log.append(Sent(epoch, first, last, result.base_offset, values))

    # -- rules -----------------------------------------------------------------------
    @rule(counts=st.lists(st.integers(1, 3), min_size=1, max_size=RETAINED + 2))
    def send_next(self, counts):
        """The next batches, in order (several at once, so that a run soon has more
        batches than the five the state keeps)."""
        for count in counts:
            self.send_and_check(self.epoch, self.next_sequence(), count)

    @precondition(lambda self: self.log)
    @rule(back=st.integers(0, RETAINED + 1))
    def retry_a_recent_batch(self, back):
        """A retry of the batch ``back`` batches before the last, with its values: one of
        the last five is a duplicate, an older one is out of order (or of an old epoch)."""
        sent = self.log[max(len(self.log) - 1 - back, 0)]
        self.send_and_check(sent.epoch, sent.first, len(sent.values), values=sent.values)

    @precondition(lambda self: len(self.log) > RETAINED)
    @rule()
    def retry_the_batch_just_out_of_the_window(self):
        """The sixth-newest batch: no longer a duplicate (the window's edge)."""
        self.retry_a_recent_batch(RETAINED)

    @rule(gap=st.integers(1, 4), count=st.integers(1, 2))
    def send_after_a_gap(self, gap, count):
        self.send_and_check(self.epoch, self.next_sequence() + gap, count)

    @precondition(lambda self: self.epoch > 0)
    @rule(count=st.integers(1, 2))
    def send_with_an_old_epoch(self, count):
        self.send_and_check(self.epoch - 1, 0, count)

    @rule(first=st.sampled_from([0, 0, 3]), count=st.integers(1, 2))
    def bump_the_epoch(self, first, count):
        """The producer got a new epoch (InitProducerId again): it starts at sequence 0."""
        self.epoch += 1
        self.send_and_check(self.epoch, first, count)

    @rule()
    def fail_the_leader_over(self):
        fail_over(self.cluster)

    @rule(data=st.data())
    def restart_a_follower(self, data):
        followers = [b for b in self.cluster.brokers if b != self.cluster.leader()]
        restart(self.cluster, data.draw(st.sampled_from(followers)))

    @rule(count=st.integers(1, 2))
    def lose_an_unreplicated_batch(self, count):
        """The leader appends a batch (acks=1) that no follower fetches, then dies: a
        follower takes over without it, and the old leader truncates it on its return."""
        cluster = self.cluster
        old = cluster.leader()
        assert old is not None
        for other in cluster.brokers:
            if other != old:
                cluster.block(old, other)
        first = self.next_sequence()
        error, duplicate = self.expected(self.epoch, first, first + count - 1)
        result, _ = self.produce(self.epoch, first, count, acks=1)
        assert result.error is error
        fail_over(cluster, heal=True)
        # the model is unchanged: the batch is gone, and its sequences with it

    # -- invariants ------------------------------------------------------------------
    def producer_batches(self, broker: int) -> list[tuple]:
        log = self.cluster.partition(broker).log
        return [(b.producer_epoch, b.base_sequence, b.last_sequence, b.base_offset, tuple(b.records.values))
                for b in log.load(log.log_start_offset) if b.producer_id == PRODUCER_ID]

    @invariant()
    def the_log_holds_each_sequence_once_in_order(self):
        leader = self.cluster.leader()
        if leader is None:
            return
        model = [(s.epoch, s.first, s.last, s.base_offset, s.values) for s in self.log]
        assert self.producer_batches(leader) == model
        if self.cluster.settled():
            for broker in self.cluster.brokers:
                assert self.producer_batches(broker) == model, f"replica {broker} differs"


IdempotentProducerMachine.TestCase.settings = machine_settings(30, 15, deep_steps=40)
test_idempotent_producer = IdempotentProducerMachine.TestCase
