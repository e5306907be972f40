"""The faults a scenario, a nemesis or a property test can ask for.

Faults are plain frozen data naming their targets; the executor (faults/executor.py)
dispatches them by class and keeps their books, and each binding carries out its
primitives: the simulation (sim/faults.py) on the simpy world, the real binding
(real_io/real_faults.py) on processes. A target broker may be a role, resolved when the fault
starts: ``controller``, ``random`` (one broker drawn from the seed), or a Role (the
leader or a follower of a partition, or a consumer group's coordinator). Faults with a natural end (a crash ends with a
restart, a partition with a heal) may carry a duration after which they are undone.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields

CONTROLLER = "controller"
RANDOM = "random"


@dataclass(frozen=True)
class Role:
    """The ``leader`` of ``partition``, or one ``follower`` of it (``isr``: True only
    followers in the leader's ISR, False only those outside it, None any), or the
    ``coordinator`` of consumer group ``group``: the leader of its partition of
    __consumer_offsets (``coordinator_role`` computes which), which is how Kafka finds a
    group's coordinator too."""
    role: str
    partition: str
    isr: bool | None = None
    group: str | None = None

    def __str__(self) -> str:
        """The expression as a scenario writes it, e.g. ``follower: t-0, isr: false``
        or ``coordinator: g`` (the partition follows from the group and the config)."""
        if self.group is not None:
            return f"{self.role}: {self.group}"
        text = f"{self.role}: {self.partition}"
        return text if self.isr is None else f"{text}, isr: {'true' if self.isr else 'false'}"


BrokerRef = int | str | Role  # a broker id, CONTROLLER, RANDOM or a Role


def is_role(ref) -> bool:
    """A target that names a broker by role, resolved only when the fault starts."""
    return isinstance(ref, Role) or (isinstance(ref, str) and ref in (CONTROLLER, RANDOM))


# -- process -------------------------------------------------------------------------
@dataclass(frozen=True)
class Crash:
    """Kill the process: memory is lost, the OS page cache survives."""
    brokers: tuple[BrokerRef, ...]


@dataclass(frozen=True)
class PowerLoss:
    """Lose power: memory and every byte not fsynced are lost."""
    brokers: tuple[BrokerRef, ...]


@dataclass(frozen=True)
class Restart:
    """Start the process again; it recovers from what its disk kept."""
    brokers: tuple[BrokerRef, ...]


@dataclass(frozen=True)
class Shutdown:
    """A clean stop: controlled shutdown moves leadership away first."""
    brokers: tuple[BrokerRef, ...]


@dataclass(frozen=True)
class Pause:
    """Freeze the process (SIGSTOP): its sessions expire; it wakes believing nothing changed."""
    brokers: tuple[BrokerRef, ...]


@dataclass(frozen=True)
class Resume:
    brokers: tuple[BrokerRef, ...]


# -- network -------------------------------------------------------------------------
@dataclass(frozen=True)
class Isolate:
    """Cut every link to and from these nodes (brokers, ``zk`` or clients)."""
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class Split:
    """Keep only links within each group; nodes in no group keep all their links."""
    groups: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class RandomHalves:
    """Split the brokers into two random halves (drawn from the seed); ``zk`` joins the larger."""


@dataclass(frozen=True)
class Bridge:
    """Two halves that cannot reach each other, and one node that reaches both."""
    halves: tuple[tuple[str, ...], tuple[str, ...]]
    via: str


@dataclass(frozen=True)
class Cut:
    """One-way: messages from ``sources`` to ``destinations`` are lost; replies still flow."""
    sources: tuple[str, ...]
    destinations: tuple[str, ...]


@dataclass(frozen=True)
class Reset:
    """Reset every TCP connection between a node of ``between[0]`` and one of
    ``between[1]``, both directions, at one instant: what was in flight on them is lost
    and each end hears of it as a closed connection. Nothing stays cut: a new connection
    works at once, so there is nothing to undo."""
    between: tuple[tuple[str, ...], tuple[str, ...]]


@dataclass(frozen=True)
class LinkFault:
    """Degrade the links from ``sources`` to ``destinations`` (both ways when symmetric)."""
    sources: tuple[str, ...]
    destinations: tuple[str, ...]
    symmetric: bool = True
    latency_ms: float | None = None
    jitter_ms: float | None = None
    loss: float | None = None
    duplicate: float | None = None
    reorder: bool | None = None


@dataclass(frozen=True)
class Heal:
    """``network``: restore every link. ``all``: also resume, restore disks and restart."""
    scope: str = "network"


# -- coordination --------------------------------------------------------------------
@dataclass(frozen=True)
class ExpireSession:
    """The coordination service expires these brokers' sessions now."""
    brokers: tuple[BrokerRef, ...]


# -- admin -------------------------------------------------------------------------
@dataclass(frozen=True)
class PreferredReplicaElection:
    """What kafka-preferred-replica-election.sh does: write /admin/preferred_replica_election
    listing ``partitions`` (None: every partition the coordination store knows) for the
    controller, which elects each one's preferred replica and deletes the node."""
    partitions: tuple[str, ...] | None = None


@dataclass(frozen=True)
class TopicConfig:
    """What ``kafka-configs.sh --alter --entity-type topics --add-config`` does: add
    ``config`` ((Kafka topic key, value) pairs) to the topic's overrides in
    /config/topics/<topic> and write a change notification that every broker reads."""
    topic: str
    config: tuple[tuple[str, bool | int], ...]


@dataclass(frozen=True)
class ClientQuota:
    """What ``kafka-configs.sh --alter --entity-type clients|users --add-config`` (and
    ``--delete-config``, a key set to None) does: change the client quota node
    ``entity`` (/config/clients/<id>, /config/users/<user>,
    /config/users/<user>/clients/<id>) and write a change notification that every broker
    reads (2.7.0 AdminZkClient.changeClientIdConfig / changeUserOrUserClientIdConfig)."""
    entity: str
    config: tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class CreateTopic:
    """What ``kafka-topics.sh --create --zookeeper`` does: write the topic's nodes, its
    assignment ``assignment`` ((partition, brokers) pairs) or, when empty, one assigned
    over the registered brokers for ``partitions`` and ``replication_factor``; the
    controller's watch brings it online."""
    topic: str
    partitions: int = 1
    replication_factor: int = 1
    assignment: tuple[tuple[int, tuple[int, ...]], ...] = ()


@dataclass(frozen=True)
class DeleteTopic:
    """What ``kafka-topics.sh --delete --zookeeper`` does: mark the topic under
    /admin/delete_topics; the controller deletes it (broker_core.topic_deletion)."""
    topic: str


@dataclass(frozen=True)
class CreatePartitions:
    """What ``kafka-topics.sh --alter --partitions`` does: rewrite the topic's assignment
    with ``count`` partitions in all, the new ones on ``assignment`` (brokers per new
    partition) or assigned by Kafka's rule; the controller brings them online."""
    topic: str
    count: int
    assignment: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True)
class Reassign:
    """What ``kafka-reassign-partitions.sh --zookeeper --execute`` does: write
    /admin/reassign_partitions with each partition's new replica list (``partitions``:
    ("t-0", (4, 2, 3)) pairs); the controller moves the replicas (broker_core/reassignment.py)."""
    partitions: tuple[tuple[str, tuple[int, ...]], ...]


# -- disk ----------------------------------------------------------------------------
@dataclass(frozen=True)
class SlowFsync:
    brokers: tuple[BrokerRef, ...]
    fsync_ms: float


@dataclass(frozen=True)
class WriteErrors:
    """Every write fails with EIO."""
    brokers: tuple[BrokerRef, ...]


@dataclass(frozen=True)
class DiskFull:
    """Every write that grows a file fails with ENOSPC."""
    brokers: tuple[BrokerRef, ...]


@dataclass(frozen=True)
class TornWrites:
    """At a power loss, part of the unsynced tail of each file survives, torn."""
    brokers: tuple[BrokerRef, ...]


@dataclass(frozen=True)
class BitFlip:
    """Flip one stored bit in a segment of ``partition`` (a batch CRC must catch it)."""
    brokers: tuple[BrokerRef, ...]
    partition: str


# -- clock ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ClockJump:
    brokers: tuple[BrokerRef, ...]
    delta_ms: int


Fault = (Crash | PowerLoss | Restart | Shutdown | Pause | Resume | Isolate | Split | RandomHalves | Bridge
         | Cut | Reset | LinkFault | Heal | ExpireSession | PreferredReplicaElection | TopicConfig | ClientQuota
         | CreateTopic | DeleteTopic | CreatePartitions | Reassign | SlowFsync | WriteErrors | DiskFull | TornWrites
         | BitFlip | ClockJump)

KINDS: dict[str, type] = {
    "crash": Crash, "power_loss": PowerLoss, "restart": Restart, "shutdown": Shutdown,
    "pause": Pause, "resume": Resume,
    "isolate": Isolate, "partition": Split, "random_halves": RandomHalves, "bridge": Bridge,
    "cut": Cut, "reset": Reset, "link": LinkFault, "heal": Heal,
    "expire_session": ExpireSession,
    "preferred_replica_election": PreferredReplicaElection, "topic_config": TopicConfig,
    "client_quota": ClientQuota,
    "create_topic": CreateTopic, "delete_topic": DeleteTopic, "create_partitions": CreatePartitions,
    "reassign": Reassign,
    "slow_fsync": SlowFsync, "write_errors": WriteErrors, "disk_full": DiskFull,
    "torn_writes": TornWrites, "bit_flip": BitFlip,
    "clock": ClockJump,
}

# Faults that a duration (``for:``) can undo, and what undoes them.
UNDOABLE = frozenset({Crash, PowerLoss, Shutdown, Pause, Isolate, Split, RandomHalves, Bridge, Cut, LinkFault,
                      SlowFsync, WriteErrors, DiskFull, TornWrites, ClockJump})
NETWORK = (Isolate, Split, RandomHalves, Bridge, Cut, LinkFault)  # a heal ends them all
CUTTING = (Isolate, Split, RandomHalves, Bridge, Cut)  # the network faults that cut links (faults/links.py)
DISK = (SlowFsync, WriteErrors, DiskFull, TornWrites)
# The same sets by the names the trace's ``fault`` field gives them.
NETWORK_KINDS = frozenset(kind for kind, cls in KINDS.items() if cls in NETWORK)
CUTTING_KINDS = frozenset(kind for kind, cls in KINDS.items() if cls in CUTTING)


def kind_of(fault: Fault) -> str:
    for name, cls in KINDS.items():
        if type(fault) is cls:
            return name
    raise TypeError(type(fault).__name__)


def describe(fault: Fault) -> dict:
    """The fields a fault event carries in the trace (JSON-friendly, no Nones)."""
    out = {}
    for f in fields(fault):
        value = getattr(fault, f.name)
        if value is None:
            continue
        out[f.name] = _plain(value)
    return out


def _plain(value):
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Role):
        return str(value)
    return value


def roles_of(fault: Fault) -> list:
    """The role targets of a fault, in the order its fields name them, each once."""
    out: list = []

    def walk(value) -> None:
        if isinstance(value, tuple):
            for item in value:
                walk(item)
        elif is_role(value) and value not in out:
            out.append(value)
    for f in fields(fault):
        walk(getattr(fault, f.name))
    return out


def brokers_of(fault: Fault) -> tuple[BrokerRef, ...]:
    return getattr(fault, "brokers", ())


__all__ = [name for name in dir() if not name.startswith("_")] + ["asdict"]
