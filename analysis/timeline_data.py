"""What a timeline shows, extracted from trace events as plain data (no drawing here).

Every function takes events in trace order and returns small frozen records with
times in trace milliseconds, so that each can be tested on a hand-made event list.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from analysis.history import Operation
from analysis.trace import Event
from broker_core.types import TopicPartition
from faults.nodes import broker_id_of, broker_node

DOWN_FAULTS = ("crash", "power_loss")          # a broker stays down until it restarts
STOPPED_FAULTS = DOWN_FAULTS + ("pause",)      # the brokers drawn as down (or frozen) meanwhile
# The network faults of the vocabulary before faults had ids (faults/model.py's
# NETWORK_KINDS came later): the only ones a trace without fault_id holds, each cut until a heal.
LEGACY_NETWORK_FAULTS = ("isolate", "partition")
INSTANT_FAULTS = ("restart", "heal")           # they end other faults; no interval of their own


@dataclass(frozen=True)
class Election:
    """The controller's choice of leader (-1: none), from a leader_elected event."""
    t_ms: int
    leader: int
    leader_epoch: int
    unclean: bool
    election: str
    isr: tuple[int, ...]


@dataclass(frozen=True)
class LeaderClaim:
    """A span during which one broker believed it led the partition at one epoch.

    ``stale`` marks the part of a claim after the controller had already moved to a
    newer epoch: the broker is a zombie leader there.
    """
    broker: int
    leader_epoch: int
    start_ms: int
    end_ms: int
    stale: bool = False


@dataclass(frozen=True)
class FaultInterval:
    start_ms: int
    end_ms: int
    fault: str
    label: str
    brokers: tuple[int, ...] = ()  # the brokers it took down (crash, power loss)


@dataclass(frozen=True)
class Truncation:
    t_ms: int
    broker: int
    from_offset: int
    to_offset: int
    removed_count: int
    rule: str


@dataclass
class ReplicaSeries:
    """replica_state samples of one broker for one partition (None where absent)."""
    broker: int
    t_ms: list[int] = field(default_factory=list)
    log_end_offset: list[int | None] = field(default_factory=list)
    high_watermark: list[int | None] = field(default_factory=list)


@dataclass
class ProduceOutcomes:
    acked_t_ms: list[int] = field(default_factory=list)
    acked_offset: list[int] = field(default_factory=list)
    failed: list[tuple[int, str]] = field(default_factory=list)     # (t_ms, error)
    unknown: list[tuple[int, str]] = field(default_factory=list)    # (t_ms, reason)
    lost: list[tuple[int, int, str]] = field(default_factory=list)  # (ack t_ms, offset, value)


def _sample(event: Event, partition: str) -> dict | None:
    if event.type != "replica_state":
        return None
    return (event.get("partitions") or {}).get(partition)


def _is_about(event: Event, partition: str) -> bool:
    return event.get("partition") == partition


def elections(events: Iterable[Event], partition: str) -> list[Election]:
    out = []
    for e in events:
        if e.type == "leader_elected" and _is_about(e, partition):
            out.append(Election(e.t_ms, e.get("leader", -1), e.get("leader_epoch", -1),
                                bool(e.get("unclean", False)), e.get("election", ""),
                                tuple(e.get("isr") or ())))
    return out


def _claim_change(event: Event, partition: str) -> tuple[int, int | None, bool] | None:
    """(broker, epoch, leads) when this event says what one broker believes, else None."""
    broker = broker_id_of(event.node)
    if broker is None:
        return None
    if event.type == "became_leader" and _is_about(event, partition):
        return broker, event.get("leader_epoch"), True
    if event.type == "became_follower" and _is_about(event, partition):
        return broker, None, False
    if event.type == "broker_started":
        return broker, None, False
    sample = _sample(event, partition)
    if sample is not None:
        leads = sample.get("role") == "leader"
        return broker, sample.get("leader_epoch") if leads else None, leads
    return None


def _fault_brokers(event: Event) -> list[int]:
    """The brokers a fault names; where it names a role (``controller``, ``leader: t-0``),
    the brokers it resolved to when it started (``targets``)."""
    brokers = event.get("brokers") or []
    if event.get("roles") or not all(isinstance(b, int) for b in brokers):
        brokers = event.get("targets") or []
    return [b for b in brokers if isinstance(b, int)]


def _down(event: Event) -> tuple[int, ...]:
    if event.get("fault") in STOPPED_FAULTS:
        return tuple(_fault_brokers(event))
    return ()


def _downed_brokers(event: Event) -> list[int]:
    if event.type == "fault_started" and event.get("fault") in DOWN_FAULTS:
        return _fault_brokers(event)
    return []


def raw_leader_claims(events: Iterable[Event], partition: str, end_ms: int) -> list[LeaderClaim]:
    """Claims as the brokers saw them, not yet split into current and stale parts."""
    open_claims: dict[int, tuple[int, int]] = {}  # broker -> (epoch, start_ms)
    out = []

    def close(broker: int, t_ms: int) -> None:
        epoch, start = open_claims.pop(broker)
        out.append(LeaderClaim(broker, epoch, start, t_ms))

    for e in events:
        for broker in _downed_brokers(e):
            if broker in open_claims:
                close(broker, e.t_ms)
        change = _claim_change(e, partition)
        if change is None:
            continue
        broker, epoch, leads = change
        current = open_claims.get(broker)
        if current is not None and (not leads or current[0] != epoch):
            close(broker, e.t_ms)
        if leads and broker not in open_claims:
            open_claims[broker] = (epoch if epoch is not None else -1, e.t_ms)
    for broker in sorted(open_claims):
        close(broker, max(end_ms, open_claims[broker][1]))
    return sorted(out, key=lambda c: (c.start_ms, c.broker))


def _epoch_starts(events: Iterable[Event], partition: str) -> list[tuple[int, int]]:
    """(t_ms, epoch) each time a newer leader epoch of the partition first appears."""
    out: list[tuple[int, int]] = []
    best = -1
    for e in events:
        if e.type in ("leader_elected", "became_leader", "isr_shrunk", "isr_expanded") and _is_about(e, partition):
            epoch = e.get("leader_epoch")
            if isinstance(epoch, int) and epoch > best:
                best = epoch
                out.append((e.t_ms, epoch))
    return out


def leader_claims(events: Sequence[Event], partition: str, end_ms: int) -> list[LeaderClaim]:
    """Who believed it led when; the part of a claim after a newer epoch appeared is stale."""
    starts = _epoch_starts(events, partition)
    out = []
    for claim in raw_leader_claims(events, partition, end_ms):
        newer = [t for t, epoch in starts if epoch > claim.leader_epoch and t < claim.end_ms]
        stale_from = max(min(newer), claim.start_ms) if newer else None
        if stale_from is None:
            out.append(claim)
            continue
        if stale_from > claim.start_ms:
            out.append(LeaderClaim(claim.broker, claim.leader_epoch, claim.start_ms, stale_from))
        out.append(LeaderClaim(claim.broker, claim.leader_epoch, stale_from, claim.end_ms, stale=True))
    return sorted(out, key=lambda c: (c.start_ms, c.broker))


def no_leader_intervals(claims: Iterable[LeaderClaim], start_ms: int, end_ms: int) -> list[tuple[int, int]]:
    """The gaps within [start_ms, end_ms) not covered by any of the claims (pass only the
    current ones to find where the partition had no valid leader)."""
    gaps = []
    cursor = start_ms
    for claim in sorted(claims, key=lambda c: (c.start_ms, c.end_ms)):
        if claim.start_ms > cursor:
            gaps.append((cursor, min(claim.start_ms, end_ms)))
        cursor = max(cursor, claim.end_ms)
    if cursor < end_ms:
        gaps.append((cursor, end_ms))
    return [(a, b) for a, b in gaps if b > a]


def zombie_intervals(claims: Iterable[LeaderClaim]) -> list[tuple[int, int, int]]:
    """(start_ms, end_ms, broker) where a stale claim overlapped a current one."""
    claims = list(claims)
    out = []
    for stale in (c for c in claims if c.stale):
        for current in (c for c in claims if not c.stale and c.broker != stale.broker):
            start, end = max(stale.start_ms, current.start_ms), min(stale.end_ms, current.end_ms)
            if end > start:
                out.append((start, end, stale.broker))
    return sorted(out)


def isr_changes(events: Iterable[Event], partition: str) -> list[tuple[int, tuple[int, ...]]]:
    """(t_ms, sorted ISR) at each change, from ISR events and the current leader's samples.

    An update carrying a leader epoch older than one already seen comes from a stale
    leader and is ignored, so that a zombie's cached ISR does not flicker in.
    """
    out: list[tuple[int, tuple[int, ...]]] = []
    best = -1
    for e in events:
        if e.type in ("leader_elected", "became_leader", "isr_shrunk", "isr_expanded") and _is_about(e, partition):
            isr, epoch = e.get("isr"), e.get("leader_epoch")
        else:
            sample = _sample(e, partition)
            if sample is None or sample.get("role") != "leader":
                continue
            isr, epoch = sample.get("isr"), sample.get("leader_epoch")
        if isr is None:
            continue
        if isinstance(epoch, int):
            if epoch < best:
                continue
            best = epoch
        members = tuple(sorted(isr))
        if not out or out[-1][1] != members:
            out.append((e.t_ms, members))
    return out


def isr_intervals(changes: Sequence[tuple[int, tuple[int, ...]]], brokers: Iterable[int],
                  end_ms: int) -> dict[int, list[tuple[int, int]]]:
    """broker -> [(start_ms, end_ms)] while it was in the ISR, for each given broker."""
    out: dict[int, list[tuple[int, int]]] = {b: [] for b in sorted(brokers)}
    since: dict[int, int] = {}
    bounds = [t for t, _ in changes[1:]] + [end_ms]
    for (t_ms, members), next_ms in zip(changes, bounds):
        for broker in out:
            if broker in members and broker not in since:
                since[broker] = t_ms
            elif broker not in members and broker in since:
                out[broker].append((since.pop(broker), t_ms))
    for broker, start in since.items():
        out[broker].append((start, max(end_ms, start)))
    return out


def _short(node) -> str:
    broker = broker_id_of(node) if isinstance(node, str) else None
    return f"b{broker}" if broker is not None else str(node)


def _names(items) -> str:
    return ",".join(_short(broker_node(n) if isinstance(n, int) else n) for n in items)


def fault_label(event: Event) -> str:
    """A short label such as ``crash b1``, ``isolate b2,zk``, ``partition b1,b2 | b3,zk``
    or ``cut b1->b2``."""
    name = str(event.get("fault", "fault")).replace("_", " ")
    if event.get("roles"):  # the brokers the roles resolved to, then the roles
        targets = event.get("targets") or []
        if targets and all(isinstance(t, list) for t in targets):
            resolved = " | ".join(_names(g) for g in targets)
        else:
            resolved = _names(targets) if targets else "nothing"
        return f"{name} {resolved} ({', '.join(event['roles'])})"
    if event.get("brokers"):
        return f"{name} {_names(event['brokers'])}"
    if event.get("nodes"):
        return f"{name} {_names(event['nodes'])}"
    if event.get("groups"):
        return name + " " + " | ".join(_names(g) for g in event["groups"])
    if event.get("sources") or event.get("destinations"):
        return f"{name} {_names(event.get('sources') or ['*'])}\u2192{_names(event.get('destinations') or ['*'])}"
    if event.get("targets"):
        return f"{name} {_names(event['targets'])}"
    return name


class _LegacyFaults:
    """Faults of traces without fault_id: a broker is down until it restarts, the network
    is cut until a heal, and the final phase heals whatever is left."""

    def __init__(self):
        self.down: dict[int, tuple[int, str]] = {}   # broker -> (start_ms, fault)
        self.other: list[tuple[int, str, str]] = []  # (start_ms, fault, label)
        self.closed: list[FaultInterval] = []

    def start(self, e: Event) -> None:
        fault = e.get("fault", "fault")
        if fault in DOWN_FAULTS:
            for b in e.get("brokers") or ():
                self.down.setdefault(b, (e.t_ms, fault))
        elif fault == "restart":
            for b in e.get("brokers") or ():
                self.broker_up(b, e.t_ms)
        elif fault == "heal":
            self.heal(e.t_ms)
        else:
            self.other.append((e.t_ms, fault, fault_label(e)))

    def broker_up(self, broker: int, t_ms: int) -> None:
        if broker in self.down:
            start, fault = self.down.pop(broker)
            label = f"{fault.replace('_', ' ')} b{broker}"
            self.closed.append(FaultInterval(start, t_ms, fault, label, (broker,)))

    def heal(self, t_ms: int) -> None:
        kept = []
        for start, fault, label in self.other:
            if fault in LEGACY_NETWORK_FAULTS:
                self.closed.append(FaultInterval(start, t_ms, fault, label))
            else:
                kept.append((start, fault, label))
        self.other = kept

    def finish(self, end_ms: int) -> None:
        for broker in sorted(self.down):
            self.broker_up(broker, end_ms)
        for start, fault, label in self.other:
            self.closed.append(FaultInterval(start, end_ms, fault, label))
        self.other = []


def fault_intervals(events: Iterable[Event], end_ms: int) -> list[FaultInterval]:
    """Fault spans: fault_started to fault_ended with the same fault_id (unmatched: to
    end_ms); older traces without fault_id follow the rules of _LegacyFaults."""
    open_by_id: dict = {}
    legacy = _LegacyFaults()
    out: list[FaultInterval] = []
    final_ms = None
    for e in events:
        if e.type == "fault_started" and e.get("fault_id") is not None:
            if e.get("fault") not in INSTANT_FAULTS:
                open_by_id[e["fault_id"]] = (e.t_ms, e.get("fault", "fault"), fault_label(e), _down(e))
        elif e.type == "fault_started":
            legacy.start(e)
        elif e.type == "fault_ended" and e.get("fault_id") in open_by_id:
            start, fault, label, down = open_by_id.pop(e["fault_id"])
            out.append(FaultInterval(start, e.t_ms, fault, label, down))
        elif e.type == "broker_started" and (started := broker_id_of(e.node)) is not None:
            legacy.broker_up(started, e.t_ms)
        elif e.type == "final_phase_started" and final_ms is None:
            final_ms = e.t_ms
    for start, fault, label, down in open_by_id.values():
        out.append(FaultInterval(start, max(end_ms, start), fault, label, down))
    legacy.finish(final_ms if final_ms is not None else end_ms)
    return sorted(out + legacy.closed, key=lambda f: (f.start_ms, f.end_ms, f.label))


def replica_series(events: Iterable[Event], partition: str) -> dict[int, ReplicaSeries]:
    """broker -> its replica_state samples of the partition, in time order."""
    out: dict[int, ReplicaSeries] = {}
    for e in events:
        sample = _sample(e, partition)
        broker = broker_id_of(e.node)
        if sample is None or broker is None:
            continue
        series = out.setdefault(broker, ReplicaSeries(broker))
        series.t_ms.append(e.t_ms)
        series.log_end_offset.append(sample.get("log_end_offset"))
        series.high_watermark.append(sample.get("high_watermark"))
    return dict(sorted(out.items()))


def high_watermark_events(events: Iterable[Event], partition: str) -> dict[int, ReplicaSeries]:
    """broker -> high watermarks from high_watermark_advanced, for traces without samples."""
    out: dict[int, ReplicaSeries] = {}
    for e in events:
        broker = broker_id_of(e.node)
        if e.type != "high_watermark_advanced" or not _is_about(e, partition) or broker is None:
            continue
        series = out.setdefault(broker, ReplicaSeries(broker))
        series.t_ms.append(e.t_ms)
        series.log_end_offset.append(None)
        series.high_watermark.append(e.get("high_watermark"))
    return dict(sorted(out.items()))


def truncations(events: Iterable[Event], partition: str) -> list[Truncation]:
    out = []
    for e in events:
        broker = broker_id_of(e.node)
        if e.type == "log_truncated" and _is_about(e, partition) and broker is not None:
            from_offset, to_offset = e.get("from_offset", 0), e.get("to_offset", 0)
            removed = e.get("removed_count", max(0, from_offset - to_offset))
            out.append(Truncation(e.t_ms, broker, from_offset, to_offset, removed, e.get("rule", "")))
    return out


@dataclass(frozen=True)
class Cleaned:
    """One finished cleaning pass of a replica's log (segments_cleaned): the offsets it
    covered and how many records it removed."""
    t_ms: int
    broker: int
    start_offset: int
    end_offset: int
    records_removed: int


def cleanings(events: Iterable[Event], partition: str) -> list[Cleaned]:
    out = []
    for e in events:
        broker = broker_id_of(e.node)
        if e.type == "segments_cleaned" and _is_about(e, partition) and broker is not None:
            removed = e.get("records_before", 0) - e.get("records_after", 0)
            out.append(Cleaned(e.t_ms, broker, e.get("start_offset", 0), e.get("end_offset", 0), removed))
    return out


def log_starts(events: Iterable[Event], partition: str) -> dict[int, list[tuple[int, int]]]:
    """broker -> (t_ms, log start offset) where retention (segments_deleted) or a
    cleaning (segments_cleaned) stated a new one. Only changes are kept: a compacted
    log's start stays put through most cleanings, and a repeated value draws nothing."""
    out: dict[int, list[tuple[int, int]]] = {}
    for e in events:
        broker = broker_id_of(e.node)
        if e.type not in ("segments_deleted", "segments_cleaned") or not _is_about(e, partition) or broker is None:
            continue
        start = e.get("log_start_offset")
        points = out.setdefault(broker, [])
        if start is not None and (not points or points[-1][1] != start):
            points.append((e.t_ms, start))
    return {b: points for b, points in sorted(out.items()) if points}


def produce_outcomes(operations: Iterable[Operation], partition: str,
                     lost_values: set[str] | None = None) -> ProduceOutcomes:
    """Sends to the partition: acknowledged records at their offsets, failures, unknowns,
    and the acknowledged records whose values are in lost_values."""
    lost_values = lost_values or set()
    out = ProduceOutcomes()
    for op in operations:
        if op.f != "send" or op.partition != partition:
            continue
        done = op.completion
        if done is None:  # no completion: unknown, as Operation.outcome says
            out.unknown.append((op.invoke.t_ms, "no reply"))
        elif done.type == "ok":
            base = done.get("offset", -1)
            if not isinstance(base, int) or base < 0:
                continue
            for i, value in enumerate(op.invoke.get("values") or ()):
                out.acked_t_ms.append(done.t_ms)
                out.acked_offset.append(base + i)
                if value in lost_values:
                    out.lost.append((done.t_ms, base + i, value))
        elif done.type == "fail":
            out.failed.append((done.t_ms, str(done.get("error") or done.get("error_code") or "error")))
        else:
            out.unknown.append((done.t_ms, str(done.get("reason") or done.get("error") or "unknown")))
    return out


@dataclass
class RunInfo:
    scenario: str
    partitions: dict[str, tuple[int, ...]]  # "t-0" -> its replicas
    start_ms: int
    end_ms: int
    markers: list[tuple[int, str]]          # (t_ms, "workload stopped" / "final phase")


MARKERS = {"workload_stopped": "workload stopped", "final_phase_started": "final phase"}


def _assigned_partitions(run_started: Event) -> dict[str, tuple[int, ...]]:
    out = {}
    for topic in run_started.get("topics") or ():
        assignment = topic.get("assignment") or {}
        for p in range(int(topic.get("partitions", len(assignment)))):
            out[f"{topic['name']}-{p}"] = tuple(assignment.get(str(p), ()))
    return out


def _seen_partitions(events: Iterable[Event]) -> dict[str, tuple[int, ...]]:
    """Partitions and the brokers that reported on them, when run_started is missing."""
    seen: dict[str, set[int]] = {}
    for e in events:
        names = list(e.get("partitions") or ()) if e.type == "replica_state" else [e.get("partition")]
        broker = broker_id_of(e.node)
        for name in names:
            if isinstance(name, str):
                seen.setdefault(name, set()).update([broker] if broker is not None else [])
    return {name: tuple(sorted(b)) for name, b in seen.items()}


def run_info(events: Sequence[Event]) -> RunInfo:
    started = next((e for e in events if e.type == "run_started"), None)
    partitions = _assigned_partitions(started) if started is not None else {}
    if not partitions:
        partitions = _seen_partitions(events)
    markers: list[tuple[int, str]] = []
    for e in events:
        if e.type in MARKERS and all(m[1] != MARKERS[e.type] for m in markers):
            markers.append((e.t_ms, MARKERS[e.type]))
    start_ms = events[0].t_ms if events else 0
    end_ms = max((e.t_ms for e in events), default=0)
    scenario = started.get("scenario", "") if started is not None else ""
    return RunInfo(scenario, dict(sorted(partitions.items(), key=lambda kv: _partition_key(kv[0]))),
                   start_ms, end_ms, markers)


def _partition_key(name: str) -> tuple[str, int]:
    """Partitions in (topic, number) order; a name that is no partition's goes by itself."""
    try:
        return TopicPartition.parse(name)
    except ValueError:
        return (name, -1)
