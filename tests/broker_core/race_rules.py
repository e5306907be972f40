"""Rules that make two writers race (issue 23, "Mutations"): a slow link delays the
messages sent on it, or holds them until it is released, as a stalled TCP connection
does, so that a request arrives after the state it was built from has changed.

The replication machine (tests/broker_core/replication_machine.py) delivers every message
1 ms after it is sent. Races that Kafka's fences guard need one side to act on a view
the other has already changed:

- two ISR writes on one zkVersion: the controller removes a replica from the ISR (a new
  leader epoch and zkVersion, 2.7.0 ReplicaStateMachine OfflineReplica,
  ``removeReplicasFromIsr``) while its LeaderAndIsr to the leader is held; the leader,
  still on the old version, shrinks or expands the ISR itself (2.7.0
  ``Partition.shrinkIsrWithZk``, ``expandIsrWithZk``: a conditional write, which loses);
- a zombie controller: a controller's requests to a broker are held while a newer
  controller takes over (the old one paused, cut off from the store, or crashed), and
  then arrive with the old controller epoch (2.7.0 ``becomeLeaderOrFollower``,
  ``stopReplicas``, ``maybeUpdateMetadataCache``: STALE_CONTROLLER_EPOCH);
- a pending AlterIsr (KIP-497): the leader's AlterIsr to the controller is held, so the
  high watermark must go on counting the replica being added while records are
  acknowledged (2.7.0 ``Partition.maximalIsr``).

The rules live in subclasses, not in ReplicationMachine itself: hypothesis seeds a
derandomized search from the source of the machine's class, so the searches that name
the plain machine (tests/test_mutants.py) keep drawing what they drew. For the same
reason an edit of RaceMachine or IsrRaceMachine changes what their searches draw: run
tests/test_mutants.py's replication searches again after one (their budgets were found
for these sources, with no margin to spare)."""
from __future__ import annotations

import inspect
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule

from broker_core.inputs import MessageReceived
from tests.broker_core.replication_machine import ROLES, MachineCluster, MachineFailure, ReplicationMachine, \
    run_replication_machine


HOLD = None  # a slow link's delay: held until deliver_held
DELAYS_MS = (1_000, 10_000, HOLD)
JITTER_MS = (0, 0, 10, 100, 1_000)  # a link's own latency in IsrRaceMachine (0: none)
LINKS = tuple((a, b) for a in (1, 2, 3) for b in (1, 2, 3))


class HeldLinksCluster(MachineCluster):
    """The machine's cluster with slow links: a message sent on a slow link arrives its
    delay later, in the order sent (one TCP connection), or, on a held link, waits in
    ``held`` until ``release``. A crash or restart of the receiver drops what a link
    holds for it, as its connection is gone; the sender's crash does not (its kernel
    still sends what the process had written)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._no_slow_links()

    @classmethod
    def adopt(cls, cluster: MachineCluster) -> "HeldLinksCluster":
        """The machine's started cluster, with slow links from now on. ReplicationMachine
        builds a MachineCluster itself, and its class is left as it is: hypothesis seeds
        its derandomized searches from that class's source."""
        cluster.__class__ = cls
        assert isinstance(cluster, HeldLinksCluster)
        cluster._no_slow_links()
        return cluster

    def _no_slow_links(self) -> None:
        self.jitter: dict[tuple[int, int], int] = {}  # (src, dst) -> delay ms while no rule slows it
        self.slow: dict[tuple[int, int], int | None] = {}  # (src, dst) -> delay ms, None: held
        self.last_arrival: dict[tuple[int, int], int] = {}
        self.held: list[tuple[int, MessageReceived, int]] = []  # (target, event, its incarnation)

    def slow_down(self, src: int, dst: int, delay_ms: int | None = HOLD) -> None:
        self.slow[(src, dst)] = delay_ms

    def _push(self, at: int, target: Any, event: Any) -> None:
        link = (event.src, target) if type(event) is MessageReceived else None
        if link is not None and (link in self.slow or link in self.jitter):
            delay = self.slow[link] if link in self.slow else self.jitter[link]
            if delay is HOLD:
                self.held.append((target, event, self.incarnation[target]))
                return
            at = self._in_order(link, at + delay)
        super()._push(at, target, event)

    def _in_order(self, link: tuple[int, int], at: int) -> int:
        """A link's messages arrive in the order sent, whatever each one's delay."""
        at = max(at, self.last_arrival.get(link, 0))
        self.last_arrival[link] = at
        return at

    def release(self) -> None:
        """Every slowed link is back to its jitter; what was held arrives now (after what
        the link delays already), in the order it was sent."""
        self.slow.clear()
        held, self.held = self.held, []
        for target, event, incarnation in held:
            if self.incarnation[target] == incarnation:
                super()._push(self._in_order((event.src, target), self.now + self.latency), target, event)


class RaceMachine(ReplicationMachine):
    """The replication machine with slow links."""

    cluster: HeldLinksCluster

    def __init__(self) -> None:
        super().__init__()
        self.cluster = HeldLinksCluster.adopt(self.cluster)

    @rule(a=st.sampled_from(ROLES), b=st.sampled_from(ROLES), delay_ms=st.sampled_from(DELAYS_MS))
    def slow_link(self, a: str, b: str, delay_ms: int | None) -> None:
        """Slow down what ``a`` sends to ``b`` (a controller's requests, a leader's
        AlterIsr, a follower's fetches), or hold it until deliver_held. The two may be
        one broker: a controller reaches its own broker through the network too
        (2.7.0 ControllerChannelManager), as the leader reaches the controller with AlterIsr."""
        src, dst = self.resolve(a), self.resolve(b)
        if src is not None and dst is not None:
            self.cluster.slow_down(src, dst, delay_ms)

    @rule()
    def deliver_held(self) -> None:
        self.cluster.release()

    @rule()
    def heal_everything(self) -> None:
        """Everything heals, the links' jitter too, until the healed checks are done
        (ReplicasAgreeBelowHighWatermark expects every replica caught up); the jitter
        then comes back."""
        self.cluster.release()
        jitter, self.cluster.jitter = self.cluster.jitter, {}
        super().heal_everything()
        self.cluster.jitter = jitter


class IsrRaceMachine(RaceMachine):
    """The race rules with only the rules these races need: clients, time, crash and
    restart, controlled shutdown (a controller-side ISR change that bumps the leader
    epoch, 2.7.0 ``doControlledShutdown``), slow links and healing. Each race takes two
    or three faults together; every rule that plays no part in it (power loss, pause,
    cuts, session expiry, preferred election) is drawn as often as those and makes a
    small search miss it (300 examples of the full set missed every one)."""

    lose_power = preferred_election = isolate = pause = resume = expire_session = cut_link = heal_network = None

    @initialize(delays=st.lists(st.sampled_from(JITTER_MS), min_size=len(LINKS), max_size=len(LINKS)))
    def jitter(self, delays: list[int]) -> None:
        """Each link between brokers (a broker's link to itself too: a controller's
        requests to its own broker, a leader's AlterIsr to itself as controller) gets a
        latency of its own for the whole run: the followers fall behind and rejoin, and
        requests cross, without a rule having to slow each link."""
        for link, delay in zip(LINKS, delays):
            if delay:
                self.cluster.jitter[link] = delay


def _rules_only(machine: type[ReplicationMachine], names: frozenset[str]) -> None:
    """Hide every rule of ``machine`` not in ``names``. A rule added to
    ReplicationMachine later would otherwise be drawn here too, and change what the
    searches of tests/test_mutants.py draw (their seeds come from these classes' sources,
    which would not change)."""
    for name, member in inspect.getmembers(machine):
        if getattr(member, "hypothesis_stateful_rule", None) is not None and name not in names:
            setattr(machine, name, None)


PLAIN_RULES = frozenset({
    "produce", "pass_time", "crash", "lose_power", "restart", "pause", "resume", "expire_session", "cut_link",
    "isolate", "heal_network", "preferred_election", "controlled_shutdown", "heal_everything"})
_rules_only(RaceMachine, PLAIN_RULES | {"slow_link", "deliver_held"})

# The names tests/test_mutants.py gives a search's machine.
RACE_MACHINES: dict[str, type[ReplicationMachine]] = {"races": RaceMachine, "isr-races": IsrRaceMachine}
# ISR changes every few seconds once a link is slow (the default, 30 s, takes 45 s of
# lag to drop a follower): the leader's own ISR writes then race the controller's.
FAST_ISR = {"replica.lag.time.max.ms": 500}


def run_race_machine(profile: str = "kafka-2.7", examples: int | None = None, machine: str = "races",
                     **kwargs: Any) -> MachineFailure | None:
    """run_replication_machine with the race rules (``machine``: a RACE_MACHINES name)."""
    return run_replication_machine(profile, examples, base=RACE_MACHINES[machine], **kwargs)
