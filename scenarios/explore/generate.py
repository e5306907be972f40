"""Draw a fault schedule, config knobs and producer rates around a base scenario, from a
seed: what a ``swarm:`` block asks for and what ``isrlab explore`` searches with.

Everything is drawn as scenario YAML data (the ``faults:`` list a person would write),
so that a drawn run is an ordinary scenario: validated by the same parser, written to a
file that ``isrlab run`` replays, and shrunk by editing that data. Each random stream
is a ``random.Random`` seeded by a label and the seed (never ``hash()``), so the same
seed draws the same document in any process.
"""
from __future__ import annotations

import copy
import random
from dataclasses import dataclass
from typing import Any, Callable

from faults import model as fm
from scenarios.model import Scenario, SwarmSpec

PROCESS = ("crash", "power_loss", "shutdown", "pause")
# How often a kind is drawn against the others when every kind is on (``choose: all``):
# the faults that lose or split data come more often than admin, disk and clock steps,
# which the swarm's own draws (``choose: some``) reweigh per seed anyway.
DEFAULT_WEIGHTS = {kind: 1.0 for kind in fm.KINDS} | {
    kind: 0.3 for kind in ("heal", "preferred_replica_election", "topic_config", "client_quota", "create_topic",
                           "delete_topic", "create_partitions", "reassign", "slow_fsync", "write_errors",
                           "disk_full", "torn_writes", "bit_flip", "clock", "restart", "resume")} | {"slow_nodes": 1.0}
# Drawn shapes that are not fault kinds of their own, on only when a swarm block names
# them (``faults: [shutdown, slow_nodes]``): left out of the default list, so that the
# seeds of every search that does not ask for them draw what they drew before.
OPT_IN = ("slow_nodes",)


@dataclass(frozen=True)
class Context:
    """What a draw may name: brokers, partitions and their replicas, topics, nodes."""
    brokers: tuple[int, ...]
    partitions: dict[str, tuple[int, ...]]
    topics: tuple[str, ...]
    clients: tuple[str, ...]
    duration_ms: int
    groups: tuple[str, ...] = ()  # the consumer groups of the workload, sorted

    @classmethod
    def of(cls, scenario: Scenario) -> "Context":
        partitions = {f"{t.name}-{p}": r for t in scenario.cluster.topics for p, r in sorted(t.assignment.items())}
        clients = tuple(f"producer-{i}" for i in range(len(scenario.producers))) + tuple(
            f"consumer-{i}" for i in range(len(scenario.consumers)))
        groups = tuple(sorted({g.group for g in scenario.group_consumers}))
        return cls(scenario.cluster.brokers, partitions, tuple(t.name for t in scenario.cluster.topics), clients,
                   scenario.duration_ms, groups)


def duration_text(ms: int) -> str:
    """A duration as a person writes it: 12s, 1500ms."""
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


class Draw:
    """One seed's draws: the swarm's choices, then the schedule."""

    def __init__(self, spec: SwarmSpec, context: Context, seed: int):
        self.spec = spec
        self.context = context
        self.rng = random.Random(f"swarm-schedule:{seed}")
        self.choice_rng = random.Random(f"swarm-choices:{seed}")
        self.focus: str | None = None  # the partition of the trigger being drawn, if any

    # -- the swarm's choices (TigerBeetle: each seed stresses a different corner) ------
    def weights(self) -> dict[str, float]:
        kinds = list(self.spec.kinds)
        if self.spec.choose == "all":
            return {kind: DEFAULT_WEIGHTS[kind] for kind in kinds}
        enabled = [kind for kind in kinds if self.choice_rng.random() < 0.5] or [self.choice_rng.choice(kinds)]
        return {kind: self.choice_rng.uniform(0.1, 1.0) for kind in enabled}

    def knobs(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, choice in self.spec.config:
            if choice[0] == "one_of":
                out[key] = self.choice_rng.choice(choice[1])
            else:
                out[key] = self.choice_rng.randint(choice[1], choice[2])
        return out

    # -- targets ---------------------------------------------------------------------
    def broker(self) -> int:
        return self.rng.choice(self.context.brokers)

    def target(self) -> Any:
        """A broker, or (with probability ``roles``) a role resolved when the fault starts.
        Under a trigger, roles are likelier and name the trigger's partition: "when the
        ISR of t-0 is the leader alone, crash its leader" is the kind of step that finds
        the known losses. With group consumers a fifth role, a group's coordinator, is
        drawn as often as each of the others (a base without groups draws exactly as
        before: the same calls on the same stream)."""
        chance = self.spec.roles if self.focus is None else max(self.spec.roles, 0.7)
        if self.rng.random() >= chance:
            return self.broker()
        partition = self.focus or self.rng.choice(sorted(self.context.partitions))
        groups = self.context.groups
        pick = self.rng.randrange(5 if groups else 4)
        if pick == 0:
            return fm.CONTROLLER
        if pick == 4:
            return {"coordinator": groups[self.rng.randrange(len(groups))]}
        if pick == 1 or len(self.context.partitions[partition]) < 2:
            return {"leader": partition}
        if pick == 2:
            return {"follower": partition}
        return {"follower": partition, "isr": self.rng.random() < 0.5}

    def node(self) -> Any:
        roll = self.rng.random()
        if roll < 0.1:
            return "zk"
        if roll < 0.2 and self.context.clients:
            return self.rng.choice(self.context.clients)
        return self.target()

    def groups(self) -> list[list[Any]]:
        """Two sides of a partition: the brokers shuffled and cut in two, zk on either side;
        a lone broker is cut off from zk (its only peer)."""
        brokers: list[Any] = list(self.context.brokers)
        if len(brokers) < 2:
            return [brokers, ["zk"]]
        self.rng.shuffle(brokers)
        cut = self.rng.randint(1, len(brokers) - 1)
        sides = [brokers[:cut], brokers[cut:]]
        sides[self.rng.randrange(2)].append("zk")
        return sides

    def for_ms(self) -> int:
        low, high = self.spec.for_ms
        return _round(self.rng.uniform(low, high))

    # -- the schedule ----------------------------------------------------------------
    def schedule(self, weights: dict[str, float]) -> list[dict]:
        """Faults as a Poisson process of the drawn rate over the run, each of a kind
        drawn by weight; a paired kind (crash then restart) adds both steps."""
        low, high = self.spec.rate
        per_minute = self.choice_rng.uniform(low, high)
        start, end = self.spec.start_ms, self.context.duration_ms - 1000
        kinds, shares = zip(*sorted(weights.items()))
        steps: list[dict] = []
        at = float(start)
        while per_minute > 0 and end > start:
            at += self.rng.expovariate(per_minute / 60000.0)
            if at >= end:
                break
            kind = self.rng.choices(kinds, shares)[0]
            steps.extend(self.steps(kind, _round(at), end))
        return steps

    def steps(self, kind: str, at_ms: int, end_ms: int) -> list[dict]:
        triggered = self.rng.random() < self.spec.triggers
        timing: dict[str, Any] = self.when(at_ms) if triggered else {"at": duration_text(at_ms)}
        self.focus = timing["when"]["partition"] if triggered else None
        body = GENERATORS[kind](self)
        self.focus = None
        if kind in ("restart", "resume"):  # the end of a crash or pause written as its own step
            broker = self.broker()
            first = {"crash" if kind == "restart" else "pause": broker}
            later = min(end_ms, at_ms + self.for_ms())
            return [{"at": duration_text(at_ms), **first}, {"at": duration_text(later), kind: broker}]
        step = timing
        optional = step.pop("optional", False)
        step.update(body)
        if type_of(next(iter(body))) in fm.UNDOABLE:
            step["for"] = duration_text(self.for_ms())
        if optional:
            step["optional"] = True
        return [step]

    def when(self, after_ms: int) -> dict:
        """A trigger on a partition's state, from ``after_ms`` on (optional: a trigger that
        never fires is part of the search, not a failed run)."""
        partition = self.rng.choice(sorted(self.context.partitions))
        replicas = self.context.partitions[partition]
        options: list[dict] = [{"partition": partition, "leader": "none"}]
        if len(replicas) > 1:
            options += [{"partition": partition, "isr_size": f"<{len(replicas)}"},
                        {"partition": partition, "isr_size": 1}]
        condition = self.rng.choice(options)
        return {"when": condition, "after": duration_text(after_ms),
                "delay": duration_text(_round(self.rng.uniform(0, 3000))), "optional": True}


def _round(ms: float) -> int:
    """To 100 ms: a drawn schedule reads like a written one."""
    return max(0, int(round(ms / 100.0)) * 100)


def type_of(kind: str) -> type:
    return fm.KINDS[kind]


def _link(d: Draw) -> dict:
    body: dict[str, Any] = {"between": [d.node(), d.node()]}
    body.update(d.rng.choice(({"latency_ms": d.rng.choice((20, 100, 500))}, {"loss": d.rng.choice((0.1, 0.3, 0.9))},
                               {"duplicate": 0.2}, {"reorder": True})))
    return {"link": body}


def _slow_nodes(d: Draw) -> dict:
    """Every link of one node (a broker, a role, zk or a client), or of it and zk, given
    a jitter for the fault's window: a ``link`` fault between the nodes and everyone.
    Two links slow at once is what a pending AlterIsr needs to matter (the follower
    being added fetches behind the others while the leader's request or the controller's
    write to zk waits), and the jitter lets a follower catch up between two slow
    fetches, which a steady latency never does under a steady producer."""
    first = d.node()
    nodes = [first] + (["zk"] if first != "zk" and d.rng.random() < 0.5 else [])
    everyone: list[Any] = [*d.context.brokers, "zk"]
    return {"link": {"between": [nodes, everyone], "jitter_ms": d.rng.choice((20, 50, 100))}}


def _bridge(d: Draw) -> dict:
    brokers: list[Any] = list(d.context.brokers)
    d.rng.shuffle(brokers)
    if len(brokers) < 3:
        return {"partition": d.groups()}
    return {"bridge": {"halves": [brokers[:1], brokers[1:2] + ["zk"]], "via": brokers[2]}}


def _scratch_topic(d: Draw) -> str:
    return f"scratch-{d.rng.randrange(3)}"


def _reassign(d: Draw) -> dict:
    partition = d.rng.choice(sorted(d.context.partitions))
    replicas = list(d.context.partitions[partition])
    spare = [b for b in d.context.brokers if b not in replicas]
    if spare and d.rng.random() < 0.5:
        replicas[d.rng.randrange(len(replicas))] = d.rng.choice(spare)
    else:
        d.rng.shuffle(replicas)
    return {"reassign": {partition: replicas}}


GENERATORS: dict[str, Callable[[Draw], dict]] = {
    **{kind: (lambda kind: lambda d: {kind: d.target()})(kind) for kind in PROCESS},
    "expire_session": lambda d: {"expire_session": d.target()},
    "restart": lambda d: {}, "resume": lambda d: {},  # Draw.steps writes the pair
    "isolate": lambda d: {"isolate": d.node()},
    "partition": lambda d: {"partition": d.groups() if d.rng.random() < 0.8 else "random_halves"},
    "random_halves": lambda d: {"random_halves": True},
    "bridge": _bridge,
    "cut": lambda d: {"cut": {"from": d.node(), "to": d.node()}},
    "reset": lambda d: {"reset": {"between": [d.node(), d.node()]}},
    "link": _link,
    "slow_nodes": _slow_nodes,
    "heal": lambda d: {"heal": True},
    "preferred_replica_election": lambda d: {"preferred_replica_election": "all"},
    "topic_config": lambda d: {"topic_config": {"topic": d.rng.choice(d.context.topics),
                                                "set": d.rng.choice(({"flush.messages": 1}, {"flush.ms": 1000}))}},
    "client_quota": lambda d: {"client_quota": {"entity": "clients/<default>",
                                                "set": {"producer_byte_rate": d.rng.choice((20000, 200000))}}},
    "create_topic": lambda d: {"create_topic": {"topic": _scratch_topic(d), "partitions": 1,
                                                "replication_factor": min(2, len(d.context.brokers))}},
    "delete_topic": lambda d: {"delete_topic": _scratch_topic(d)},
    "create_partitions": lambda d: {"create_partitions": {"topic": _scratch_topic(d), "count": 2}},
    "reassign": _reassign,
    "slow_fsync": lambda d: {"slow_fsync": {"broker": d.target(), "fsync_ms": d.rng.choice((50, 200, 1000))}},
    "write_errors": lambda d: {"write_errors": d.target()},
    "disk_full": lambda d: {"disk_full": d.target()},
    "torn_writes": lambda d: {"torn_writes": d.target()},
    "bit_flip": lambda d: {"bit_flip": {"broker": d.broker(), "partition": d.rng.choice(sorted(d.context.partitions))}},
    "clock": lambda d: {"clock": {"broker": d.target(),
                                  "jump": d.rng.choice(("-", "")) + duration_text(_round(d.rng.uniform(1000, 60000)))}},
}


def draw_document(base: dict, spec: SwarmSpec, context: Context, seed: int) -> dict:
    """``base`` with the seed's knobs in ``cluster.config``, its producer rates, and its
    drawn faults after the base's own."""
    draw = Draw(spec, context, seed)
    weights = draw.weights()
    knobs = draw.knobs()
    factor = draw.choice_rng.uniform(*spec.producer_rate)
    document = copy.deepcopy(base)
    if knobs:
        cluster = document.setdefault("cluster", {})
        cluster["config"] = {**(cluster.get("config") or {}), **knobs}
    if factor != 1.0:
        for producer in (document.get("workload") or {}).get("producers") or []:
            if "records" not in producer:
                producer["rate"] = max(1, round(float(producer.get("rate", 100)) * factor))
    document["faults"] = list(document.get("faults") or []) + draw.schedule(weights)
    return document
