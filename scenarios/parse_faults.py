"""The ``faults:`` and ``nemesis:`` sections: every fault kind, ``for:`` durations,
``when:`` triggers, and the static check for contradictory overlapping faults."""
from __future__ import annotations

from typing import Any

from broker_core.config import TOPIC_KEYS, broker_config, kafka_name, topic_config
from broker_core.quotas import entity_of_path, parse_quota_config
from broker_core.errors import ConfigError
from broker_core.group_records import OFFSETS_TOPIC, partition_for
from broker_core.types import TopicPartition
from broker_core.topic_admin import TopicCreationError, validate_topic_name
from faults import model as fm
from faults.nodes import broker_node
from faults.triggers import MEMBER_FIELDS, PARTITION_FIELDS, REPLICA_FIELDS, Condition, parse_comparison
from scenarios.model import ClusterSpec, FaultStep, NemesisSpec
from scenarios.source import Fields, Source, convert

NEMESIS_KINDS = ("crash", "power_loss", "pause", "shutdown", "isolate", "random_halves", "bridge",
                 "expire_session", "slow_fsync", "clock", "crash_controller", "isolate_controller", "link", "reset")
STEP_KEYS = ("at", "when", "after", "delay", "for", "optional")


class FaultParser:
    def __init__(self, source: Source, cluster: ClusterSpec, nodes: set[str], duration_ms: int,
                 groups: tuple[str, ...] = ()):
        """``groups``: the consumer groups of the workload, the ones a coordinator role may name."""
        self.source = source
        self.cluster = cluster
        self.nodes = nodes
        self.duration_ms = duration_ms
        self.groups_named = tuple(sorted(set(groups)))
        self.partitions = {str(TopicPartition(t.name, p)): r for t in cluster.topics for p, r in t.assignment.items()}

    # -- targets ---------------------------------------------------------------------
    def brokers(self, path: tuple, value: Any, allow_roles: bool = True, members: bool = False) -> tuple:
        """Broker targets; with ``members`` (crash, restart, pause, resume) a group
        member's node name too (``group-0-1``: the simulation stops that client)."""
        if value == "all":
            return self.cluster.brokers
        if allow_roles and (role := self.role(path, value)) is not None:
            return (role,)
        items = value if isinstance(value, list) else [value]
        if not items:
            raise self.source.error(path, "names no broker")
        out = []
        for i, item in enumerate(items):
            ipath = path + (i,) if isinstance(value, list) else path
            if allow_roles and (role := self.role(ipath, item)) is not None:
                out.append(role)
                continue
            if members and isinstance(item, str) and item.startswith("group-"):
                if item not in self.nodes:
                    known = sorted(n for n in self.nodes if n.startswith("group-"))
                    raise self.source.error(ipath, f"unknown group member {item!r}; members: {known}")
                out.append(item)
                continue
            broker = convert(self.source, ipath, item, "int")
            if broker not in self.cluster.brokers:
                raise self.source.error(ipath, f"broker {broker} does not exist (brokers: {list(self.cluster.brokers)})")
            out.append(broker)
        return tuple(out)

    def role(self, path: tuple, value: Any):
        """``controller``, ``random``, ``{leader: t-0}``, ``{follower: t-0, isr: true}`` or
        ``{coordinator: g}`` as a role target (resolved when the fault starts); None for
        anything else."""
        if value in (fm.CONTROLLER, fm.RANDOM):
            return value
        if not isinstance(value, dict):
            return None
        named = [k for k in ("leader", "follower", "coordinator") if k in value]
        if not named and "isr" in value:
            raise self.source.error(path + ("isr",), "isr: goes with follower:, e.g. {follower: t-0, isr: false}")
        if len(named) != 1:
            raise self.source.error(path, "a role target names one of leader: or follower: with a partition, "
                                    "or coordinator: with a consumer group, e.g. {leader: t-0}, "
                                    "{follower: t-0, isr: true} or {coordinator: g}")
        f = Fields(self.source, value, path, "a role target")
        if named[0] == "coordinator":
            return self._coordinator(path, f)
        partition = f.take(named[0], "str", check=self._partition_check)
        isr = None
        for key, inside in (("isr", True), ("not_isr", False)):  # isr: true and not_isr: true, or false
            if not f.has(key):
                continue
            if named[0] != "follower":
                raise self.source.error(path + (key,), f"{key}: goes with follower: (a leader is always in its ISR)")
            if isr is not None:
                raise self.source.error(path + (key,), "give isr or not_isr, not both")
            isr = f.take(key, "bool") == inside
        f.done()
        return fm.Role(named[0], partition, isr)

    def _coordinator(self, path: tuple, f: Fields) -> fm.Role:
        """``{coordinator: g}``: the leader of the partition of __consumer_offsets that
        Kafka's hash of g picks among offsets.topic.num.partitions (the cluster's config),
        computed here once so that both bindings resolve it as a leader."""
        def known(group: str) -> str | None:
            if group in self.groups_named:
                return None
            if not self.groups_named:
                return "names a consumer group, but the workload has no group consumers (consumers with group:)"
            return f"unknown consumer group {group!r}; the workload's groups: {list(self.groups_named)}"
        group = f.take("coordinator", "str", check=known)
        for key in ("isr", "not_isr"):
            if f.has(key):
                raise self.source.error(path + (key,), f"{key}: goes with follower: (a coordinator is a leader)")
        f.done()
        count = broker_config(self.cluster.profile, dict(self.cluster.config)).offsets_topic_num_partitions
        return fm.Role("coordinator", f"{OFFSETS_TOPIC}-{partition_for(group, count)}", group=group)

    def node(self, path: tuple, value: Any):
        if (role := self.role(path, value)) is not None:
            return role
        if isinstance(value, int) and not isinstance(value, bool):
            if value not in self.cluster.brokers:
                raise self.source.error(path, f"broker {value} does not exist (brokers: {list(self.cluster.brokers)})")
            return broker_node(value)
        if isinstance(value, str) and value in self.nodes:
            return value
        raise self.source.error(path, f"unknown node {value!r}; a broker id, a role (controller, random, "
                                f"{{leader: t-0}}, {{follower: t-0}}, {{coordinator: g}}), "
                                f"or one of {sorted(self.nodes)}")

    def node_list(self, path: tuple, value: Any) -> tuple:
        items = value if isinstance(value, list) else [value]
        if not items:
            raise self.source.error(path, "names no node")
        return tuple(self.node(path + ((i,) if isinstance(value, list) else ()), v) for i, v in enumerate(items))

    def groups(self, path: tuple, value: Any, minimum: int = 2, overlap: bool = False) -> tuple[tuple[str, ...], ...]:
        groups = convert(self.source, path, value, "list")
        if len(groups) < minimum:
            raise self.source.error(path, "needs at least two groups, e.g. [[1, 2], [3, zk]]")
        parsed = tuple(self.node_list(path + (g,), convert(self.source, path + (g,), group, "list"))
                       for g, group in enumerate(groups))
        flat = [n for g in parsed for n in g]
        if len(flat) != len(set(flat)) and not overlap:
            raise self.source.error(path, "a node appears in two groups")
        return parsed

    # -- one step --------------------------------------------------------------------
    def step(self, data: Any, path: tuple) -> FaultStep:
        f = Fields(self.source, data, path, "a fault")
        actions = [k for k in data if k in fm.KINDS]
        if len(actions) != 1:
            unknown = [k for k in data if k not in fm.KINDS and k not in STEP_KEYS]
            if unknown:
                raise self.source.error(path + (unknown[0],), f"unknown key {unknown[0]!r}; a fault is one of: "
                                        f"{', '.join(fm.KINDS)} (with at, when, after, delay, for)")
            raise self.source.error(path, f"needs exactly one of: {', '.join(fm.KINDS)}")
        kind = actions[0]
        # A fault due at the end of the run would never start: faults stop starting then.
        within = lambda v: None if v < self.duration_ms else "is not before the end of the run (duration)"
        when = None
        if f.has("when"):
            when = self.condition(path + ("when",), f.take("when", "map"))
            at = f.take("after", "duration", 0, within)
            if f.has("at"):
                raise self.source.error(path + ("at",), "a triggered fault takes after: (the earliest time), not at:")
        else:
            at = f.take("at", "duration", check=within)
            if f.has("after"):
                raise self.source.error(path + ("after",), "after: goes with when:")
        delay = f.take("delay", "duration", 0)
        fault = self.fault(kind, f.take(kind, "any"), path + (kind,))
        for_ms = f.take("for", "duration", None, lambda v: None if v > 0 else "must be more than 0")
        if for_ms is not None and type(fault) not in fm.UNDOABLE:
            raise self.source.error(path + ("for",), f"a {kind} has no duration to end")
        optional = f.take("optional", "bool", False)
        f.done()
        return FaultStep(fault, at, when, delay, for_ms, self.source.line(path), optional)

    def fault(self, kind: str, value: Any, path: tuple) -> fm.Fault:
        if kind in ("crash", "power_loss", "restart", "shutdown", "pause", "resume", "expire_session",
                    "write_errors", "disk_full", "torn_writes"):
            members = kind in ("crash", "restart", "pause", "resume")
            return fm.KINDS[kind](self.brokers(path, value, members=members))
        if kind == "isolate":
            return fm.Isolate(self.node_list(path, value))
        if kind == "partition":
            if value == "random_halves":
                return fm.RandomHalves()
            return fm.Split(self.groups(path, value))
        if kind == "random_halves":
            if value is not True:
                raise self.source.error(path, "write random_halves: true")
            return fm.RandomHalves()
        if kind == "preferred_replica_election":
            return self._preferred_replica_election(value, path)
        if kind == "reassign":
            return self._reassign(value, path)
        if kind == "delete_topic" and not isinstance(value, dict):
            return fm.DeleteTopic(self._topic_name(path, value))
        if kind == "heal":
            if value in (True, "network"):
                return fm.Heal("network")
            if value == "all":
                return fm.Heal("all")
            raise self.source.error(path, "write heal: true (the network) or heal: all (everything)")
        return getattr(self, "_" + kind)(Fields(self.source, value, path, f"a {kind}"), path)

    def _bridge(self, f: Fields, path: tuple) -> fm.Bridge:
        halves = self.groups(path + ("halves",), f.take("halves", "list"), overlap=True)
        if len(halves) != 2:
            raise self.source.error(path + ("halves",), "needs exactly two halves")
        via = self.node(path + ("via",), f.take("via", "any"))
        f.done()
        return fm.Bridge((tuple(h for h in halves[0] if h != via) + (via,),
                          tuple(h for h in halves[1] if h != via) + (via,)), via)

    def _cut(self, f: Fields, path: tuple) -> fm.Cut:
        sources = self.node_list(path + ("from",), f.take("from", "any"))
        destinations = self.node_list(path + ("to",), f.take("to", "any"))
        f.done()
        return fm.Cut(sources, destinations)

    def _reset(self, f: Fields, path: tuple) -> fm.Reset:
        """``{between: [1, [2, producer-0]]}``: two nodes or lists of nodes. A reset
        ends connections, which carry both directions, so there is no one-way form."""
        for one_way in ("from", "to"):
            if f.has(one_way):
                raise self.source.error(path + (one_way,), "a reset ends connections, which carry both directions: "
                                        "write between: [[1], [2, producer-0]]")
        pair = f.take("between", "list")
        if len(pair) != 2:
            raise self.source.error(path + ("between",), "names two nodes (or two lists of nodes)")
        sides = (self.node_list(path + ("between", 0), pair[0]), self.node_list(path + ("between", 1), pair[1]))
        f.done()
        if all(a == b for a in sides[0] for b in sides[1]):  # roles are Role or str: equal only to themselves
            raise self.source.error(path + ("between",), "names no link between two different nodes")
        return fm.Reset(sides)

    def _link(self, f: Fields, path: tuple) -> fm.LinkFault:
        if f.has("between"):
            pair = f.take("between", "list")
            if len(pair) != 2:
                raise self.source.error(path + ("between",), "names two nodes (or two lists of nodes)")
            sources = self.node_list(path + ("between", 0), pair[0])
            destinations = self.node_list(path + ("between", 1), pair[1])
            symmetric = True
        else:
            sources = self.node_list(path + ("from",), f.take("from", "any"))
            destinations = self.node_list(path + ("to",), f.take("to", "any"))
            symmetric = False
        nonneg = lambda v: None if v >= 0 else "must not be negative"
        probability = lambda v: None if 0 <= v <= 1 else "must be between 0 and 1"
        fault = fm.LinkFault(sources, destinations, symmetric,
                             f.take("latency_ms", "number", None, nonneg), f.take("jitter_ms", "number", None, nonneg),
                             f.take("loss", "number", None, probability), f.take("duplicate", "number", None, probability),
                             f.take("reorder", "bool", None))
        if all(getattr(fault, k) is None for k in ("latency_ms", "jitter_ms", "loss", "duplicate", "reorder")):
            raise self.source.error(path, "changes nothing: give latency_ms, jitter_ms, loss, duplicate or reorder")
        f.done()
        return fault

    def _slow_fsync(self, f: Fields, path: tuple) -> fm.SlowFsync:
        brokers = self.brokers(path + ("broker",), f.take("broker", "any"))
        fault = fm.SlowFsync(brokers, f.take("fsync_ms", "number", check=lambda v: None if v >= 0 else "must not be negative"))
        f.done()
        return fault

    def _bit_flip(self, f: Fields, path: tuple) -> fm.BitFlip:
        brokers = self.brokers(path + ("broker",), f.take("broker", "any"))
        partition = f.take("partition", "str", check=self._partition_check)
        f.done()
        return fm.BitFlip(brokers, partition)

    def _clock(self, f: Fields, path: tuple) -> fm.ClockJump:
        brokers = self.brokers(path + ("broker",), f.take("broker", "any"))
        raw = f.take("jump", "any")
        negative = isinstance(raw, str) and raw.strip().startswith("-")
        delta = convert(self.source, path + ("jump",), raw.strip()[1:] if negative else raw, "duration")
        f.done()
        return fm.ClockJump(brokers, -delta if negative else delta)

    def _preferred_replica_election(self, value: Any, path: tuple) -> fm.PreferredReplicaElection:
        if value is True or value == "all":
            return fm.PreferredReplicaElection()
        items = value if isinstance(value, list) else [value]
        if not items:
            raise self.source.error(path, "names no partition; write all, a partition (t-0) or a list of them")
        names = []
        for i, item in enumerate(items):
            ipath = path + (i,) if isinstance(value, list) else path
            name = convert(self.source, ipath, item, "str")
            problem = self._partition_check(name)
            if problem:
                raise self.source.error(ipath, problem)
            names.append(name)
        return fm.PreferredReplicaElection(tuple(sorted(set(names))))

    def _topic_name(self, path: tuple, value: Any) -> str:
        """A name the admin tool accepts (Topic.validate); whether the topic exists when
        the step runs is the tool's to say (the step records its refusal)."""
        name = convert(self.source, path, value, "str")
        try:
            validate_topic_name(name)
        except TopicCreationError as refused:
            raise self.source.error(path, refused.message) from None
        return name

    def _brokers_of(self, path: tuple, value: Any) -> tuple[int, ...]:
        brokers = tuple(convert(self.source, path + (i,), b, "int")
                        for i, b in enumerate(convert(self.source, path, value, "list")))
        if not brokers:
            raise self.source.error(path, "names no broker")
        return brokers

    def _create_topic(self, f: Fields, path: tuple) -> fm.CreateTopic:
        """``{topic: u, partitions: 2, replication_factor: 2}`` or ``{topic: u,
        assignment: {0: [1, 2], 1: [2, 3]}}`` (kafka-topics.sh --create)."""
        name = self._topic_name(path + ("topic",), f.take("topic", "any"))
        raw = f.take("assignment", "map", None)
        positive = lambda v: None if v > 0 else "must be at least 1"  # noqa: E731
        partitions = f.take("partitions", "int", 1, positive)
        replication = f.take("replication_factor", "int", 1, positive)
        f.done()
        if raw is None:
            return fm.CreateTopic(name, partitions, replication)
        if f.has("partitions") or f.has("replication_factor"):
            raise self.source.error(path, "give assignment: or partitions: and replication_factor:, not both")
        pairs = tuple((convert(self.source, path + ("assignment", p), p, "int"),
                       self._brokers_of(path + ("assignment", p), brokers)) for p, brokers in raw.items())
        return fm.CreateTopic(name, len(pairs), len(pairs[0][1]) if pairs else 0, tuple(sorted(pairs)))

    def _delete_topic(self, f: Fields, path: tuple) -> fm.DeleteTopic:
        name = self._topic_name(path + ("topic",), f.take("topic", "any"))
        f.done()
        return fm.DeleteTopic(name)

    def _create_partitions(self, f: Fields, path: tuple) -> fm.CreatePartitions:
        """``{topic: t, count: 3}``, optionally ``assignment: [[1, 2]]`` for the new
        partitions in order (kafka-topics.sh --alter --partitions)."""
        name = self._topic_name(path + ("topic",), f.take("topic", "any"))
        count = f.take("count", "int", check=lambda v: None if v > 0 else "must be at least 1")
        raw = f.take("assignment", "list", None)
        f.done()
        assignment = tuple(self._brokers_of(path + ("assignment", i), b) for i, b in enumerate(raw or ()))
        return fm.CreatePartitions(name, count, assignment)

    def _reassign(self, value: Any, path: tuple) -> fm.Reassign:
        """``{t-0: [4, 2, 3]}``: each partition's new replica list, brokers of the cluster
        (kafka-reassign-partitions.sh --zookeeper --execute)."""
        raw = convert(self.source, path, value, "map")
        if not raw:
            raise self.source.error(path, "names no partition: give {t-0: [4, 2, 3]}")
        pairs = []
        for name, replicas in raw.items():
            try:
                tp = TopicPartition.parse(str(name))
                validate_topic_name(tp.topic)
            except (ValueError, TopicCreationError):
                raise self.source.error(path + (name,), "is not a partition: write <topic>-<n>, e.g. t-0") from None
            brokers = self._brokers_of(path + (name,), replicas)
            unknown = sorted(set(brokers) - set(self.cluster.brokers))
            if unknown or len(set(brokers)) != len(brokers):
                raise self.source.error(path + (name,), f"names an unknown or repeated broker; brokers: "
                                        f"{list(self.cluster.brokers)}")
            pairs.append((str(tp), brokers))
        return fm.Reassign(tuple(sorted(pairs)))

    def _topic_config(self, f: Fields, path: tuple) -> fm.TopicConfig:
        """``{topic: t, set: {unclean.leader.election.enable: true}}``: topic keys only,
        each value valid for the topic once added to its overrides."""
        topics = {t.name: t for t in self.cluster.topics}
        name = f.take("topic", "str", check=lambda v: None if v in topics else f"unknown topic; topics: {sorted(topics)}")
        changes = f.take("set", "map")
        f.done()
        if not changes:
            raise self.source.error(path + ("set",), "changes nothing: give at least one topic key")
        for key in changes:
            if key not in TOPIC_KEYS:
                raise self.source.error(path + ("set", key), f"unknown topic configuration key; known: "
                                        f"{', '.join(sorted(TOPIC_KEYS))}")
            if changes[key] is None:
                raise self.source.error(path + ("set", key), "needs a value")
        try:
            topic_config(broker_config(self.cluster.profile, self.cluster.config), {**topics[name].config, **changes})
        except ConfigError as exc:
            named = [k for k in changes if exc.key in (k, kafka_name(TOPIC_KEYS[k]))]
            raise self.source.error(path + ("set", named[0] if named else exc.key), exc.message) from None
        return fm.TopicConfig(name, tuple(sorted(changes.items())))

    def _client_quota(self, f: Fields, path: tuple) -> fm.ClientQuota:
        """``{entity: clients/noisy, set: {producer_byte_rate: 10000}}``: a quota entity
        (clients/<id>, users/<user>, users/<user>/clients/<id>; any name may be
        <default>) and the keys to set, or to remove with null."""
        entity = f.take("entity", "str")
        changes = f.take("set", "map")
        f.done()
        node = "/config/" + entity.removeprefix("/").removeprefix("config/")
        try:
            quota_entity = entity_of_path(node)
        except ConfigError as exc:
            raise self.source.error(path + ("entity",), exc.message) from None
        if not changes:
            raise self.source.error(path + ("set",), "changes nothing: give at least one quota key")
        try:
            parse_quota_config(quota_entity, {k: v for k, v in changes.items() if v is not None})
        except ConfigError as exc:
            raise self.source.error(path + ("set", exc.key), exc.message) from None
        config = tuple(sorted((str(k), None if v is None else str(v)) for k, v in changes.items()))
        return fm.ClientQuota(quota_entity.path, config)

    def _partition_check(self, value: str) -> str | None:
        return None if value in self.partitions else f"unknown partition; partitions: {sorted(self.partitions)}"

    # -- triggers --------------------------------------------------------------------
    def condition(self, path: tuple, data: dict) -> Condition:
        f = Fields(self.source, data, path, "a condition")
        controller = None
        if f.has("controller"):
            controller = self.brokers(path + ("controller",), f.take("controller", "any"), allow_roles=False)[0]
        if f.has("member"):
            return self.member_condition(path, data, f, controller)
        partition = f.take("partition", "str", None, self._partition_check)
        broker = None
        if f.has("broker"):
            broker = convert(self.source, path + ("broker",), f.take("broker", "any"), "int")
            if partition is None:
                raise self.source.error(path + ("broker",), "a broker condition needs partition:")
            if broker not in self.partitions[partition]:
                raise self.source.error(path + ("broker",), f"broker {broker} holds no replica of {partition} "
                                        f"(replicas: {list(self.partitions[partition])})")
        allowed = REPLICA_FIELDS if broker is not None else PARTITION_FIELDS
        names = [k for k in data if k not in ("controller", "partition", "broker")]
        for name in names:
            if name not in allowed:
                where = "for a broker's replica" if broker is not None else "for a partition"
                also = "" if broker is not None or name not in REPLICA_FIELDS else " (add broker: to test one replica)"
                raise self.source.error(path + (name,), f"cannot be tested {where}; use one of: "
                                        f"{', '.join(allowed)}{also}")
        if names and partition is None:
            raise self.source.error(path, f"tests {', '.join(names)} but names no partition: add partition:")
        if not names and controller is None:
            raise self.source.error(path, "tests nothing: name a field such as isr, leader or high_watermark")
        tests = [(name, self._expected(path + (name,), name, f.take(name, "any"), partition)) for name in names]
        f.done()
        return Condition(partition, broker, tuple(tests), controller)

    def member_condition(self, path: tuple, data: dict, f: Fields, controller: int | None) -> Condition:
        """``{member: group-0-0, processing: true}``: a test of a group member's state
        (faults/triggers.py MEMBER_FIELDS), which only a member of the workload has."""
        member = f.take("member", "str")
        known = sorted(n for n in self.nodes if n.startswith("group-"))
        if member not in known:
            raise self.source.error(path + ("member",), f"unknown group member {member!r}; members: {known}"
                                    if known else f"names group member {member!r} but the workload has no group consumers")
        names = [k for k in data if k not in ("controller", "member")]
        for name in names:
            if name not in MEMBER_FIELDS:
                raise self.source.error(path + (name,), f"cannot be tested for a group member; use one of: "
                                        f"{', '.join(MEMBER_FIELDS)}")
        if not names:
            raise self.source.error(path, f"tests nothing of {member}: name one of {', '.join(MEMBER_FIELDS)}")
        tests = []
        for name in names:
            value = f.take(name, "any")
            if name == "processing":
                tests.append((name, convert(self.source, path + (name,), value, "bool")))
                continue
            try:
                tests.append((name, parse_comparison(value)))
            except ValueError as exc:
                raise self.source.error(path + (name,), str(exc)) from None
        f.done()
        return Condition(None, None, tuple(tests), controller, member)

    def _expected(self, path: tuple, name: str, value: Any, partition: str):
        replicas = self.partitions[partition] if partition else ()
        if name == "leader":
            if value in (None, "none"):
                return None
            broker = convert(self.source, path, value, "int")
            if broker not in replicas:
                raise self.source.error(path, f"broker {broker} can never lead {partition} (replicas: {list(replicas)})")
            return broker
        if name == "isr":
            members = tuple(convert(self.source, path + (i,), b, "int") for i, b in enumerate(convert(self.source, path, value, "list")))
            if not members or any(b not in replicas for b in members):
                raise self.source.error(path, f"an ISR is a non-empty subset of the replicas {list(replicas)}")
            return members
        if name == "role":
            if value not in ("leader", "follower", "offline"):
                raise self.source.error(path, "must be leader, follower or offline")
            return value
        try:
            comparison = parse_comparison(value)
        except ValueError as exc:
            raise self.source.error(path, str(exc)) from None
        if name == "isr_size" and comparison.op == "==" and not 1 <= comparison.number <= len(replicas):
            raise self.source.error(path, f"an ISR of {partition} has 1 to {len(replicas)} members")
        return comparison

    # -- nemesis ---------------------------------------------------------------------
    def nemesis(self, data: Any, path: tuple) -> NemesisSpec:
        f = Fields(self.source, data, path, "the nemesis")
        kinds = f.take("faults", "list")
        for i, kind in enumerate(kinds):
            if kind not in NEMESIS_KINDS:
                raise self.source.error(path + ("faults", i), f"unknown nemesis fault {kind!r}; known: {', '.join(NEMESIS_KINDS)}")
        if not kinds:
            raise self.source.error(path + ("faults",), "names no fault")
        positive = lambda v: None if v > 0 else "must be more than 0"
        spec = NemesisSpec(
            tuple(kinds), f.take("interval", "duration", check=positive), f.take("duration", "duration", 5000, positive),
            self.brokers(path + ("targets",), f.take("targets", "any", "all"), allow_roles=False),
            f.take("start", "duration", 0), f.take("stop", "duration", self.duration_ms))
        if spec.start_ms >= spec.stop_ms or spec.stop_ms > self.duration_ms:
            raise self.source.error(path + ("stop",), "the nemesis must stop after it starts and within the run")
        f.done()
        return spec


def check_contradictions(source: Source, steps: list[FaultStep], paths: list[tuple], brokers: tuple[int, ...]) -> None:
    """Reject scheduled faults that contradict each other: crashing a broker that is
    already down, restarting one that runs, pausing a down or paused one, resuming one
    that is not paused. Triggered faults are judged when they fire. A role target
    (controller, random, leader, follower) is unknown until the fault starts: such a
    fault is not judged, and once it may have stopped or paused a broker, no broker's
    state is known any more (a role that resolves to nothing at run time makes the fault
    change nothing, which fails the run unless the step is optional)."""
    events = []
    for index, step in enumerate(steps):
        if step.when is not None:
            continue
        events.append((step.at_ms + step.delay_ms, 0, index, step.fault))
        if step.for_ms is not None and isinstance(step.fault, (fm.Crash, fm.PowerLoss, fm.Shutdown, fm.Pause)):
            ending = fm.Restart(step.fault.brokers) if not isinstance(step.fault, fm.Pause) else fm.Resume(step.fault.brokers)
            events.append((step.at_ms + step.delay_ms + step.for_ms, 1, index, ending))
    state = {b: "up" for b in brokers}
    since: dict[int, int] = {}
    for at, undo, index, fault in sorted(events, key=lambda e: (e[0], e[1], e[2])):
        targets = fm.brokers_of(fault)
        if any(fm.is_role(t) for t in targets) and _next_state(fault, "up") != "up":
            # which broker a role names is only known when the fault starts
            state = {b: "unknown" for b in state}
        for broker in targets:
            if not isinstance(broker, int):  # a role (fm.is_role): the parser lets no other target through
                continue
            current = state[broker]
            if current == "unknown":
                continue
            problem = _contradiction(fault, current)
            if problem:
                earlier = steps[since[broker]].line if broker in since else None
                where = f" (since the fault on line {earlier})" if earlier else ""
                if undo:  # the automatic end of a fault with for:
                    raise source.error(paths[index] + ("for",), f"ends at {at / 1000:g}s by undoing it, but "
                                       f"broker {broker} {problem}{where}")
                raise source.error(paths[index], f"broker {broker} {problem}{where}")
            new = _next_state(fault, current)
            if new != current:
                state[broker] = new
                since[broker] = index


def _contradiction(fault, state: str) -> str | None:
    if isinstance(fault, (fm.Crash, fm.PowerLoss, fm.Shutdown)) and state == "down":
        return "is already down"
    if isinstance(fault, fm.Restart) and state != "down":
        return "is not down, so it cannot restart"
    if isinstance(fault, fm.Pause) and state != "up":
        return f"is {state}, so it cannot be paused"
    if isinstance(fault, fm.Resume) and state != "paused":
        return "is not paused"
    return None


def _next_state(fault, state: str) -> str:
    if isinstance(fault, (fm.WriteErrors, fm.DiskFull)):
        return "unknown"  # the broker halts at its next write, if it writes
    if isinstance(fault, (fm.Crash, fm.PowerLoss, fm.Shutdown)):
        return "down"
    if isinstance(fault, fm.Restart):
        return "up"
    if isinstance(fault, fm.Pause):
        return "paused"
    if isinstance(fault, fm.Resume):
        return "up"
    return state
