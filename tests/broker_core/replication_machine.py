"""The replication state machine (issue 23): hypothesis drives real broker cores through
tests/harness.py's synchronous router (no simpy, no event loop) with produces, the
passing of time, and every fault the harness can apply, and checks
broker_core/invariants.py after every step.

One machine serves every behaviour profile and truncation rule (``MachineSetup``).
Under the safe ones (kafka-2.7, kafka-3.0) it must find nothing. Under the unsafe ones
(kafka-0.8, ``truncation: high_watermark``, ``truncation: leader_epoch_kip101``,
unclean election) Kafka itself loses acknowledged data, and the machine is expected to
find a violation whose ``allowed_by`` names that setting. ``run_replication_machine``
is the entry point a test (or a mutant's test) calls with a profile and a budget.

The rules follow Kafka's source (apache/kafka at 2.7.0 unless named):
- produce (acks=all and acks=1): core/src/main/scala/kafka/cluster/Partition.scala
  appendRecordsToLeader (NOT_ENOUGH_REPLICAS under min.insync.replicas) and
  checkEnoughReplicasReachOffset, server/DelayedProduce.scala tryComplete;
- time passing (fetches, ISR expiry, flushes): server/ReplicaFetcherThread.scala
  processPartitionData, server/AbstractFetcherThread.scala truncateToEpochEndOffsets
  (leader_epoch; one round in leader_epoch_kip101) and truncateToHighWatermark
  (high_watermark, 0.8.2.2 server/ReplicaManager.scala makeFollowers), 3.0.0
  AbstractFetcherThread.truncateOnFetchResponse (diverging_epoch: the fetch's
  divergingEpoch), Partition.scala maybeIncrementLeaderHW, maybeExpandIsr and
  maybeShrinkIsr (0.8.2.2 Partition.scala maybeShrinkIsr, updateLeaderHWAndMaybeExpandIsr);
- crash and restart: log/Log.scala loadSegments and recoverLog, zk/KafkaZkClient.scala
  registerBroker (a restart before the old session expired conflicts),
  controller/KafkaController.scala processBrokerChange and onBrokerFailure, Election.scala
  leaderForOffline (0.8.2.2 controller/PartitionLeaderSelector.scala
  OfflinePartitionLeaderSelector, unclean by default);
- power loss: Log.scala flush (only fsynced bytes survive; Kafka acknowledges before it
  unless flush.messages forces one per append);
- partition and heal links, pause and resume (a frozen process whose session expires and
  that wakes up as a zombie), expire a coordination session: KafkaController.scala
  processExpire and processRegisterBrokerAndReelect, ReplicaManager.scala
  becomeLeaderOrFollower (stale epochs fenced);
- elect: KafkaController.scala onReplicaElection with Election.scala
  leaderForPreferredReplica (0.8.2.2 onPreferredReplicaElection,
  PreferredReplicaPartitionLeaderSelector), and doControlledShutdown with
  leaderForControlledShutdown (0.8.2.2 shutdownBroker, ControlledShutdownLeaderSelector).

The default budget keeps `make test` quick; ISRLAB_DEEP=1 runs many more examples of
more steps each, with a random (not derandomized) search."""
from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.reporting import with_reporter
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from broker_core import coordination as coord
from broker_core.inputs import ShutdownRequested
from broker_core.invariants import Violation, check_all
from broker_core.types import TopicPartition
from faults.nodes import broker_node
from tests.harness import ZK
from tests.invariant_harness import ObservedCluster
from tests.power_harness import PowerCluster

TP = TopicPartition("t", 0)
REPLICAS = (1, 2, 3)  # the partition's assignment (a fourth broker holds no replica)
DEEP = os.environ.get("ISRLAB_DEEP", "") not in ("", "0")
EXAMPLES = 400 if DEEP else 12  # per machine run; the tests pass their own where they need more
STEPS = 100 if DEEP else 50
SETTLE_MS = 120_000  # how long heal_everything waits for one leader, a full ISR and equal log ends
WAITS_MS = (1, 10, 100, 500, 2_000, 10_000, 20_000)


@dataclass(frozen=True)
class MachineSetup:
    """One configuration of the machine: a behaviour profile and broker overrides (a
    ``truncation`` rule, unclean election...), on top of min.insync.replicas 2. With
    ``power_loss`` the power-loss rule is enabled; ``tolerated`` names the unsafe
    settings (broker_core.invariants: UNSAFE_SETTINGS names, POWER_LOSS) whose
    violations the run accepts, as Kafka's own behaviour."""
    profile: str = "kafka-2.7"
    overrides: tuple[tuple[str, Any], ...] = ()
    brokers: int = 3
    power_loss: bool = False
    tolerated: frozenset[str] = frozenset()

    def config(self) -> dict[str, Any]:
        return {"min.insync.replicas": 2, **dict(self.overrides)}

    def tolerates(self, violation: Violation) -> bool:
        return bool(set(violation.allowed_by) & self.tolerated)


@dataclass(frozen=True)
class MachineFailure:
    """What a failing run found, after hypothesis shrank it: the violation (None when
    the run raised something else, its text in ``error``) and the rules of the shrunk
    example, as hypothesis prints them."""
    violation: Violation | None
    error: str
    steps: tuple[str, ...]
    seconds: float


class InvariantBroken(AssertionError):
    def __init__(self, violation: Violation) -> None:
        super().__init__(violation.describe())
        self.violation = violation


class MachineCluster(PowerCluster, ObservedCluster):
    """The observed cluster with platters (power loss) and pause: a paused broker's
    inputs wait until it resumes, and it stops pinging the store, so that its session
    expires as a frozen process's does; it then wakes up to the expiry."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.paused: dict[int, int | None] = {}  # broker -> its session id, while paused
        self.paused_inputs: dict[int, list] = {}

    def pause(self, broker: int) -> None:
        if broker in self.nodes and broker not in self.paused:
            self.paused[broker] = self.sessions.pop(broker, None)
            self.paused_inputs[broker] = []

    def resume(self, broker: int) -> None:
        if broker not in self.paused:
            return
        session = self.paused.pop(broker)
        if session is not None:
            self.sessions[broker] = session  # the next ping finds out whether it expired
        for event in self.paused_inputs.pop(broker):
            super()._deliver(broker, event)

    def _deliver(self, broker: int, event) -> None:
        if broker in self.paused:
            self.paused_inputs[broker].append(event)
            return
        super()._deliver(broker, event)

    def crash(self, broker: int) -> None:
        self.paused.pop(broker, None)
        self.paused_inputs.pop(broker, None)
        super().crash(broker)

    def expire_session(self, broker: int) -> None:
        """The store expires ``broker``'s session (live, paused or left by a dead process)."""
        session = self.store.session_of(broker_node(broker))
        if session is not None:
            self.store.expire(session)


# Faults are aimed by role, as the scenarios' role targets are, so that few examples
# are spent on a broker for which the rule does nothing; "broker N" names one outright.
ROLES = ("leader", "follower", "other follower", "controller")
roles = st.sampled_from(ROLES)
peers = st.sampled_from(ROLES + ("zk",))
TRAFFIC = 5  # acks=all produces to the believed leader spread over each wait


class ReplicationMachine(RuleBasedStateMachine):
    """Produce, let time pass and apply faults to one replicated partition (replication
    factor 3, min.insync.replicas 2); every invariant is checked after every step."""

    setup = MachineSetup()  # run_replication_machine makes a subclass per setup

    def __init__(self) -> None:
        super().__init__()
        setup = self.setup
        brokers = tuple(range(1, setup.brokers + 1))
        self.cluster = MachineCluster(brokers=brokers, replication_factor=3, profile=setup.profile,
                                      config=setup.config())
        self.cluster.start_all()
        assert self.cluster.wait_for(self._settled, 10_000), "the cluster never settled"
        self.checked = 0
        self.produced = 0

    def _settled(self) -> bool:
        return self.cluster.settled(replicas=REPLICAS)

    def resolve(self, role: str) -> int | None:
        """The live broker ``role`` names now (None: none does)."""
        c = self.cluster
        if role == "leader":
            return c.leader()
        if role == "controller":
            return c.controller()
        leader = c.leader()
        followers = [b for b in REPLICAS if b in c.nodes and b != leader]
        if not followers:
            return None
        return followers[0] if role == "follower" else followers[-1]

    # -- clients ---------------------------------------------------------------------
    @rule(acks=st.sampled_from((-1, 1)), count=st.integers(1, 3), to=roles)
    def produce(self, acks: int, count: int, to: str) -> None:
        """A producer sends to the broker it believes leads (a stale belief is a follower)."""
        broker = self.resolve(to)
        if broker is None:
            return
        values = [f"v{self.produced + i}" for i in range(count)]
        self.produced += count
        self.cluster.produce(broker, values, acks=acks)

    @rule(ms=st.sampled_from(WAITS_MS))
    def pass_time(self, ms: int) -> None:
        """Time passes (fetches, timers, elections) while a producer keeps sending acks=all
        records to whichever broker leads as far as it knows."""
        step = max(ms // TRAFFIC, 1)
        for _ in range(min(TRAFFIC, ms)):
            self.produce(-1, 1, "leader")
            self.cluster.run_for(step)
        self.cluster.run_for(ms - step * min(TRAFFIC, ms))

    # -- processes -------------------------------------------------------------------
    @rule(who=roles)
    def crash(self, who: str) -> None:
        broker = self.resolve(who)
        if broker is not None:
            self.cluster.crash(broker)

    @rule(who=roles)
    def lose_power(self, who: str) -> None:
        broker = self.resolve(who)
        if self.setup.power_loss and broker is not None:
            self.cluster.observer.power_lost(broker)
            self.cluster.lose_power(broker)

    @rule(which=st.integers(0, 3), after_session_expired=st.booleans())
    def restart(self, which: int, after_session_expired: bool) -> None:
        """Restart the ``which``-th down broker. Before its old session expired, it meets
        its own registration (2.7.0 registerBroker: NodeExists, the broker exits; 0.8.2.2
        retries until the session goes)."""
        down = [b for b in self.cluster.brokers if b not in self.cluster.nodes]
        if not down:
            return
        broker = down[which % len(down)]
        if after_session_expired:
            self.cluster.expire_session(broker)
        self.cluster.start(broker)

    @rule(who=roles)
    def pause(self, who: str) -> None:
        broker = self.resolve(who)
        if broker is not None:
            self.cluster.pause(broker)

    @rule(which=st.integers(0, 3))
    def resume(self, which: int) -> None:
        paused = sorted(self.cluster.paused)
        if paused:
            self.cluster.resume(paused[which % len(paused)])

    @rule(who=roles)
    def expire_session(self, who: str) -> None:
        broker = self.resolve(who)
        if broker is not None:
            self.cluster.expire_session(broker)

    # -- network ---------------------------------------------------------------------
    @rule(a=roles, b=peers, both=st.booleans())
    def cut_link(self, a: str, b: str, both: bool) -> None:
        """Block the link from ``a`` to ``b`` (and back, if ``both``); zk is the store."""
        first, second = self.resolve(a), ZK if b == "zk" else self.resolve(b)
        if first is not None and second is not None and first != second:
            self.cluster.block(first, second, both)

    @rule(who=roles)
    def isolate(self, who: str) -> None:
        broker = self.resolve(who)
        if broker is not None:
            self.cluster.isolate(broker)

    @rule()
    def heal_network(self) -> None:
        self.cluster.heal()

    # -- elections -------------------------------------------------------------------
    @rule()
    def preferred_election(self) -> None:
        """The admin tool's request (kafka-preferred-replica-election.sh writes it)."""
        request = {"version": 1, "partitions": [{"topic": TP.topic, "partition": TP.partition}]}
        self.cluster.store.put(coord.PREFERRED_REPLICA_ELECTION_PATH, coord.encode_data(request))

    @rule(who=roles)
    def controlled_shutdown(self, who: str) -> None:
        broker = self.resolve(who)
        if broker is not None and broker not in self.cluster.paused:
            self.cluster._push(self.cluster.now, broker, ShutdownRequested())

    # -- healing and the end state ---------------------------------------------------
    @rule()
    def heal_everything(self) -> None:
        """Heal every link, resume and restart every broker, wait until the partition has
        one leader with the full ISR and equal log ends, then check what only holds once
        healed (ReplicasAgreeBelowHighWatermark) and the memoryless invariants again."""
        c = self.cluster
        c.heal()
        for broker in sorted(c.paused):
            c.resume(broker)
        for broker in c.brokers:
            if broker not in c.nodes:
                c.expire_session(broker)
                c.start(broker)
        if c.wait_for(self._settled, SETTLE_MS, step_ms=100):
            c.run_for(1_000)  # the followers learn the leader's high watermark
            c.healed()
            c.violations += check_all(c.view)

    @invariant()
    def no_violation(self) -> None:
        found = self.cluster.violations[self.checked:]
        self.checked = len(self.cluster.violations)
        for violation in found:
            if not self.setup.tolerates(violation):
                raise InvariantBroken(violation)


def machine_settings(examples: int, steps: int, shrink: bool) -> settings:
    phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if shrink else [])
    return settings(max_examples=examples, stateful_step_count=steps, deadline=None, database=None,
                    derandomize=not DEEP, phases=phases, print_blob=False,
                    suppress_health_check=list(HealthCheck))


@contextmanager
def project_constants_left_out() -> Iterator[None]:
    """Hypothesis (6.170) biases what it draws with constants mined from every project
    module in sys.modules (internal/conjecture/providers.py, _get_local_constants), so a
    derandomized search drew other examples in a process where an earlier test had
    imported more of the project (an xdist worker's lot). Left out here, a search draws
    the same examples whatever was imported: tests/test_mutants.py's searches catch their
    mutants at fixed sizes. Its global constants (0, -1, the float edges ...) still count."""
    from hypothesis.internal.conjecture import providers
    from sortedcontainers import SortedSet
    empty = providers.Constants(integers=SortedSet(), floats=SortedSet(key=providers.float_to_int),
                                bytes=SortedSet(), strings=SortedSet())
    mined = providers._get_local_constants
    providers._get_local_constants = lambda: empty
    providers.CONSTANTS_CACHE.cache.clear()  # may hold the mined constants' choices
    try:
        yield
    finally:
        providers._get_local_constants = mined
        providers.CONSTANTS_CACHE.cache.clear()


def run_replication_machine(profile: str = "kafka-2.7", examples: int | None = None, *,
                            overrides: Mapping[str, Any] | None = None, brokers: int = 3,
                            power_loss: bool = False, tolerated: frozenset[str] = frozenset(),
                            steps: int | None = None, shrink: bool = True,
                            follower_rules: bool = False,
                            base: type[ReplicationMachine] | None = None) -> MachineFailure | None:
    """Run the machine on ``profile`` (with broker ``overrides``) for ``examples``
    examples of up to ``steps`` rules; the shrunk failure, or None if it found none.
    ``follower_rules`` adds tests/broker_core/follower_rules.py's rules (idle, burst).
    ``base``: a subclass with more rules (tests/broker_core/race_rules.py); without it,
    the rules above only. Hypothesis seeds a derandomized search from the source of
    the machine's class (stateful.run_state_machine_as_test: function_digest, which
    finds it by name in its module), so an edit of ReplicationMachine changes what
    every search of it named in tests/test_mutants.py draws: add rules in a subclass
    instead, whose searches are seeded from the subclass's source alone. (The follower
    rules' searches keep this module's name, and so ReplicationMachine's seed.)"""
    setup = MachineSetup(profile, tuple(sorted((overrides or {}).items())), brokers, power_loss, tolerated)
    if base is not None:
        machine = type(base.__name__, (base,), {"setup": setup, "__module__": base.__module__})
    else:
        plain: type[ReplicationMachine] = ReplicationMachine
        if follower_rules:
            from tests.broker_core.follower_rules import FollowerRulesMachine  # it extends this module's class
            plain = FollowerRulesMachine
        machine = type("ReplicationMachine", (plain,), {"setup": setup})
    lines: list[object] = []
    start = time.perf_counter()
    try:
        with with_reporter(lines.append), project_constants_left_out():
            run_state_machine_as_test(machine, settings=machine_settings(examples or EXAMPLES, steps or STEPS, shrink))
    except Exception as error:  # noqa: BLE001 - any exception is the machine's finding
        printed = lines + list(getattr(error, "__notes__", []))  # hypothesis adds the example as notes
        steps_run = tuple(line.strip() for text in printed for line in str(text).splitlines()
                          if line.strip().startswith("state.")
                          and not line.strip().startswith(("state.teardown", "state.no_violation")))
        return MachineFailure(getattr(error, "violation", None), f"{type(error).__name__}: {error}",
                              steps_run, time.perf_counter() - start)
    return None
