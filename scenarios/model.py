"""The scenario model: what a YAML file says, validated and with defaults filled in."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from faults.model import Fault
from faults.triggers import Condition


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int
    config: dict[str, Any]
    assignment: dict[int, tuple[int, ...]]  # partition -> replicas (AR, in order)


@dataclass(frozen=True)
class ClusterSpec:
    brokers: tuple[int, ...]
    profile: str
    config: dict[str, Any]  # Kafka broker config names
    topics: tuple[TopicSpec, ...]
    # A process supervisor (systemd's Restart=on-failure, a Kubernetes restart policy)
    # restarts a broker that exited on its own after this long; None: nothing does.
    supervisor_restart_ms: int | None = None


@dataclass(frozen=True)
class NetworkSpec:
    latency_ms: float = 1.0
    jitter_ms: float = 0.5
    loss: float = 0.0
    hold_ms: int = 30000  # how long a message waits on a cut link before its connection is given up


@dataclass(frozen=True)
class DiskSpec:
    fsync_ms: float = 2.0
    writeback_ms: int | None = 30000  # the OS writing dirty pages back; None: never


@dataclass(frozen=True)
class ScriptedRecord:
    """One record of a producer's ``records:`` list: sent once the run reaches ``at_ms``."""
    key: str
    value: str | None  # None: a tombstone
    at_ms: int


@dataclass(frozen=True)
class ProducerWorkload:
    topic: str
    acks: int = -1
    rate: float = 100.0
    record_bytes: int = 100
    linger_ms: int = 10
    keys: int | None = None
    retries: int = 0
    retry_backoff_ms: int = 100
    request_timeout_ms: int = 30000
    delivery_timeout_ms: int = 120000
    start_ms: int = 0
    stop_ms: int | None = None
    partitioner: str | None = None  # keyless records: round_robin or sticky; None: the profile's
    enable_idempotence: bool = False  # enable.idempotence, after the profile's default and its conditions
    sequence_restart: str | None = None  # the idempotent producer's epoch bump (KAFKA-12152); None: the profile's
    client_id: str | None = None  # client.id, what client quotas name; None: Kafka's default, producer-<n>
    key_distribution: str = "round_robin"  # how keys are picked from ``keys``: round_robin or uniform
    tombstone_rate: float = 0.0  # the fraction of generated keyed records sent with a null value
    records: tuple[ScriptedRecord, ...] = ()  # explicit records, sent instead of generated ones


@dataclass(frozen=True)
class ConsumerWorkload:
    topic: str
    start_ms: int = 0
    poll_interval_ms: int = 100
    auto_offset_reset: str = "earliest"  # earliest, latest or none
    start_offset: int | None = None  # seek every partition here first; None: by auto_offset_reset
    validate_positions: bool | None = None  # KIP-320; None: the profile's
    client_id: str | None = None  # client.id; None: Kafka's default, consumer-<n>


@dataclass(frozen=True)
class GroupConsumerWorkload:
    """``members`` consumers of one group (sim/group_member.py), each with the Java
    consumer's settings; ``commit`` is the application's policy: ``auto``
    (enable.auto.commit), or commitSync of each batch ``after_processing`` or
    ``before_processing`` it, or commitAsync after it (``async``; with
    ``retry_failed_commits`` a failed one is sent again, seed 003's case). ``index`` is
    the entry's place in ``workload.consumers`` (for error messages)."""
    group: str
    topics: tuple[str, ...]
    index: int
    members: int = 1
    commit: str = "auto"
    auto_commit_interval_ms: int = 5000
    retry_failed_commits: bool = False
    auto_offset_reset: str = "latest"  # the Java consumer's default
    session_timeout_ms: int = 10000
    heartbeat_interval_ms: int = 3000
    max_poll_interval_ms: int = 300000
    max_poll_records: int = 500
    assignors: tuple[str, ...] = ("range",)
    static: bool = False  # group.instance.id: each member's node name
    start_ms: int = 0
    poll_interval_ms: int = 100
    client_id: str | None = None
    processing_ms: int = 0  # how long the application works on a batch (a crash can fall within)


@dataclass(frozen=True)
class FaultStep:
    """A fault at a time, or (``when``) once a condition holds after ``at_ms``; with
    ``for_ms`` it is undone that long after it started."""
    fault: Fault
    at_ms: int = 0
    when: Condition | None = None
    delay_ms: int = 0
    for_ms: int | None = None
    line: int | None = None
    optional: bool = False  # a trigger that may never fire without failing the run


@dataclass(frozen=True)
class NemesisSpec:
    """Random faults drawn from the seed: one at a time, each lasting ``duration_ms``,
    separated by exponentially distributed gaps with mean ``interval_ms``."""
    kinds: tuple[str, ...]
    interval_ms: int
    duration_ms: int
    targets: tuple[int, ...]
    start_ms: int
    stop_ms: int


@dataclass(frozen=True)
class SwarmSpec:
    """Swarm testing (TigerBeetle's simulator): the seed draws which fault ``kinds`` are
    enabled (``choose`` ``some``: each with probability 1/2, at least one; ``all``: every
    one), each kind's weight, the fault rate, the broker config knobs and the producers'
    rates, then a fault schedule from them (scenarios/explore/generate.py). ``base`` is
    the scenario document (without ``swarm``) the draws are added to."""
    kinds: tuple[str, ...]
    choose: str = "some"
    rate: tuple[float, float] = (2.0, 8.0)  # faults per minute of the run
    for_ms: tuple[int, int] = (1000, 20000)  # how long a fault with an end lasts
    roles: float = 0.3  # the chance a target is a role (controller, leader or follower of a partition)
    triggers: float = 0.3  # the chance a fault starts on a trigger rather than at a time
    producer_rate: tuple[float, float] = (1.0, 1.0)  # a factor on each producer's rate
    config: tuple[tuple[str, tuple], ...] = ()  # key -> ("one_of", values) or ("range", low, high)
    start_ms: int = 1000  # no drawn fault starts before this
    base: dict = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class FinalPhase:
    """After the workload: heal everything, restart every broker, wait for full ISRs,
    then read every partition from the start."""
    max_wait_ms: int = 120000
    restart: str = "down"  # "down": restart brokers that are down; "all": restart every broker


@dataclass(frozen=True)
class Scenario:
    name: str
    path: str
    description: str
    cluster: ClusterSpec
    network: NetworkSpec
    disk: DiskSpec
    producers: tuple[ProducerWorkload, ...]
    consumers: tuple[ConsumerWorkload, ...]
    faults: tuple[FaultStep, ...]
    duration_ms: int
    final: FinalPhase = field(default_factory=FinalPhase)
    sample_interval_ms: int = 100
    nemesis: NemesisSpec | None = None
    expect: dict[str, Any] = field(default_factory=dict)  # checker name -> expectation
    expect_lines: dict[str, int] = field(default_factory=dict)
    variant: str | None = None  # this scenario is the base's variant of that name
    variants: tuple["Scenario", ...] = ()  # the file's variants (on the base only)
    settings: tuple[str, ...] = ()  # the --set overrides it was read with
    # false: leave out the leaders' per-batch high_watermark_advanced lines (no checker reads them)
    trace_high_watermarks: bool = True
    swarm: SwarmSpec | None = None  # draw faults, knobs and rates from each seed (scenarios/swarm.py)
    # expect: {invariant_violated: NAME}: the run checks the invariants and passes when
    # NAME stops it (what isrlab explore writes for an invariant property)
    expect_invariant: str | None = None
    # consumers: entries with group: (group members: sim/group_consumer.py simulated, real_io/real_groups.py real)
    group_consumers: tuple[GroupConsumerWorkload, ...] = ()

    def topic(self, name: str) -> TopicSpec:
        for topic in self.cluster.topics:
            if topic.name == name:
                return topic
        raise KeyError(name)
