"""The KIP-320 consumer against a model of the log's history (issue 23): the project's
consumer (sim/consumer.py ``SimConsumer``, the only place its position validation
lives) fetching from three real core brokers on the in-test router (tests/harness.py),
while leaders change and logs truncate. No simpy world runs: a small clock stands in
for the consumer's environment and the router carries its requests, so the consumer's
own code (metadata, fetch, OffsetsForLeaderEpoch, resets) answers every message.

Rules produce records, let time pass (the consumer polls every 100 ms), fail the leader
over cleanly, and make a divergent history: the followers are cut off until the ISR
shrinks to the leader, the leader takes records (acks=1) that the consumer reads, then
dies; a follower is elected uncleanly (unclean.leader.election.enable) and takes other
records at the same offsets; the old leader truncates on its return.

The rules checked are Kafka 2.7.0's clients/src/main/java/org/apache/kafka/clients/
consumer/internals/SubscriptionState.java (``maybeValidatePositionForCurrentLeader``,
``maybeCompleteValidation``: a position whose epoch ends below it is truncated, and
the consumer moves to the divergence point, or raises LogTruncationException without a
reset policy) and Fetcher.java ``validateOffsetsAsync``, answered by the brokers'
core/src/main/scala/kafka/cluster/Partition.scala ``lastOffsetForLeaderEpoch``
(OffsetsForLeaderEpoch). Clients before 2.1 (the 0.8.2.2 profile's) have no validation
and can read a divergent history unnoticed; 3.0.0 keeps the 2.7 rules.

Invariant (the model): the consumer's view of the log is each offset's last record it
read, forgotten from the offset it moved to whenever it reset its position (that is
noticing). Once it has caught up with the leader, every offset of its view holds the
record the leader's log holds there: it never keeps a record that the history replaced
at that offset without having noticed.
"""
from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from broker_core.errors import ErrorCode
from broker_core.types import TopicPartition
from faults.nodes import broker_id_of, broker_node
from sim.consumer import SimConsumer
from sim.network import ConnectionReset
from tests.harness import Cluster
from tests.properties.cluster_steps import crash, fail_over
from tests.properties.depth import machine_settings

TP = TopicPartition("t", 0)
CONSUMER = "consumer"
POLL_MS = 100
# Unclean elections make divergent histories; the leader writes its own ISR changes to
# ZooKeeper (2.7.0 Partition.shrinkIsrWithZk, inter.broker.protocol.version below 2.7),
# so that a leader cut off from the other brokers, not from ZooKeeper, shrinks the ISR to
# itself and moves its high watermark on alone (with AlterIsr the controller, another
# broker, would never hear of it).
CONFIG = {"zookeeper.session.timeout.ms": 1000, "replica.lag.time.max.ms": 500,
          "auto.leader.rebalance.enable": False, "unclean.leader.election.enable": True,
          "isr_change_protocol": "zookeeper"}


class _Timeout:
    """What the consumer's code uses of a simpy timeout: callbacks run when it is due."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.callbacks: list = []


class ConsumerClock:
    """The consumer's environment: the router's time, and timeouts fired as it passes
    (its request deadlines; a fetch throttle's wait, though no quota is set here)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.timeouts: list[_Timeout] = []

    @property
    def now(self) -> int:
        return self.cluster.now

    def timeout(self, delay: float) -> _Timeout:
        timeout = _Timeout(int(self.cluster.now + delay))
        self.timeouts.append(timeout)
        return timeout

    def process(self, generator) -> None:
        generator.close()  # the poll loop is the machine's: see ConsumerMachine.advance

    def fire_due(self) -> None:
        due = [t for t in self.timeouts if t.at <= self.cluster.now]
        self.timeouts = [t for t in self.timeouts if t.at > self.cluster.now]
        for timeout in due:
            for callback in timeout.callbacks:
                callback(timeout)


class ConsumerCluster(Cluster):
    """The router with the consumer as one more node: its requests go to brokers, the
    brokers' answers to its receive function. As the OS does for sim/network.py's
    clients, a broker's crash resets the consumer's connection to it (every request in
    flight fails), and a request to a broker that is down is refused."""
    receive = None

    def add_node(self, name, receive) -> None:
        self.receive = receive

    def send_from_consumer(self, src, dst, message) -> None:
        broker = broker_id_of(dst)
        if broker in self.nodes:
            self.send(broker, message, src=CONSUMER)
        else:
            self._push(self.now + self.latency, CONSUMER, ConnectionReset(broker, message.correlation_id))

    def crash(self, broker: int) -> None:
        super().crash(broker)
        self._push(self.now + self.latency, CONSUMER, ConnectionReset(broker))

    def _dispatch(self, item) -> None:
        if item.target == CONSUMER:
            event = item.event
            if isinstance(event, ConnectionReset):
                self.receive(broker_node(event.broker), event)
            else:
                self.receive(broker_node(event.src), event.message)
            return
        super()._dispatch(item)


class _Network:
    def __init__(self, cluster: ConsumerCluster) -> None:
        self.add_node = cluster.add_node
        self.send = cluster.send_from_consumer


class ConsumerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        cluster = self.cluster = ConsumerCluster(config=CONFIG)
        cluster.start_all()
        assert cluster.wait_for(cluster.settled, 10000)
        self.clock = ConsumerClock(cluster)
        self.view: dict[int, str | None] = {}  # offset -> the last record read there
        self.synced = 0  # how many of the consumer's records the view has taken in
        self.resets: list[dict] = []
        self.consumer = SimConsumer(self.clock, _Network(cluster), CONSUMER, list(cluster.brokers), self.trace, [TP],
                                    max_wait_ms=0, poll_interval_ms=POLL_MS, validate_positions=True,
                                    auto_offset_reset="earliest", record_history=False)
        self.consumer.refresh_metadata()
        self.produced = 0

    def trace(self, node: str, type_: str, fields: dict) -> None:
        if type_ == "position_reset":  # the consumer noticed: what it read from there on is forgotten
            self.sync_view()
            self.resets.append(fields)
            for offset in [o for o in self.view if o >= fields["to_offset"]]:
                del self.view[offset]

    def sync_view(self) -> None:
        consumed = self.consumer.consumed[TP]
        for offset, value in consumed[self.synced:]:
            self.view[offset] = value
        self.synced = len(consumed)

    def advance(self, ms: int) -> None:
        """Time passes for brokers and consumer alike: it polls every POLL_MS."""
        end = self.cluster.now + ms
        while self.cluster.now < end:
            self.cluster.run_for(min(10, end - self.cluster.now))
            self.clock.fire_due()
            if self.cluster.now % POLL_MS < 10:
                self.consumer._poll()

    def produce(self, count: int, acks: int) -> None:
        leader = self.cluster.leader()
        assert leader is not None
        values = [f"v{self.produced + i}" for i in range(count)]
        self.produced += count
        assert self.cluster.produce_and_wait(leader, values, acks=acks, wait_ms=5000) is ErrorCode.NONE

    # -- rules -----------------------------------------------------------------------
    @rule(count=st.integers(1, 4), acks=st.sampled_from([1, -1]))
    def produce_records(self, count, acks):
        self.produce(count, acks)

    @rule(ms=st.sampled_from([50, 300, 1000]))
    def let_time_pass(self, ms):
        self.advance(ms)

    @rule()
    def fail_the_leader_over(self):
        fail_over(self.cluster)

    @precondition(lambda self: self.cluster.settled())
    @rule(count=st.integers(1, 3), read_ms=st.sampled_from([0, 300]), after=st.integers(0, 4))
    def diverge(self, count, read_ms, after):
        """A history that diverges: records only the old leader gets (and the consumer
        may read once the ISR has shrunk to it), an unclean election, other records at
        the same offsets."""
        cluster = self.cluster
        old = cluster.leader()
        for other in cluster.brokers:
            if other != old:
                cluster.block(old, other)
        self.produce(count, 1)
        # the followers fall behind, the ISR shrinks to the leader, its high watermark moves on
        assert cluster.wait_for(lambda: cluster.partition(old).isr == (old,), 10000), "the ISR never shrank"
        self.advance(read_ms)
        crash(cluster, old)
        cluster.heal()
        assert cluster.wait_for(lambda: cluster.leader() not in (None, old), 30000), "no unclean election"
        if after:
            self.produce(after, 1)
        cluster.start(old)
        assert cluster.wait_for(cluster.settled, 30000), f"the old leader {old} never caught up"

    # -- invariants ------------------------------------------------------------------
    @invariant()
    def a_caught_up_consumer_holds_the_leaders_records(self):
        """Once the consumer fetches from the current leader in its current epoch (so it
        has validated its position against it) and has read up to its high watermark,
        its view agrees with the leader's log at every offset below it."""
        cluster = self.cluster
        self.advance(400)  # a few polls: the consumer validates and catches up
        leader = cluster.leader()
        state = self.consumer.states[TP]
        if leader is None or state.state != "fetching":
            return
        part = cluster.partition(leader)
        if (state.leader, state.leader_epoch) != (leader, part.leader_epoch):
            return  # it has not heard of this leader yet: it validates once it has
        if state.position < part.log.high_watermark:
            return
        self.sync_view()
        log = dict((offset, record.value) for offset, record in part.log.records())
        for offset in sorted(self.view):
            if offset < part.log.high_watermark:
                assert self.view[offset] == log.get(offset), \
                    f"offset {offset}: read {self.view[offset]!r}, the log holds {log.get(offset)!r}, never noticed"


ConsumerMachine.TestCase.settings = machine_settings(15, 12, deep_steps=40)
test_kip_320_consumer = ConsumerMachine.TestCase
