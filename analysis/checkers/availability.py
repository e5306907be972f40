"""How long each partition had no leader while the workload ran.

From the leadership intervals the trace records (``analysis/checkers/leadership.py``):
a partition is unavailable while no running, unpaused broker that clients can reach
claims its leadership, or while the controller's last election found no leader
(``leader_elected`` with leader -1). This holds when every broker is down, when no
broker writes a sample at all. Each partition is measured from its first leadership
fact (its first ``became_leader`` or leaderless election) until ``workload_stopped``.

Traces without ``became_leader`` events (hand-built ones, or a binding that does not
write them) fall back on two sources, united: the brokers' replica_state samples (no
live broker reporting the role "leader"; two brokers claiming it still counts as led)
and ``leader_elected`` with leader -1 until the next real leader."""
from __future__ import annotations

from collections import Counter
from typing import Callable, Iterable

from analysis.checkers.leadership import LeadershipReplay
from analysis.checkers.result import CheckResult
from analysis.trace import Event

DEFAULT_SAMPLE_INTERVAL_MS = 100
# A broker's claim counts until this many sample intervals after it was made, so that
# brokers sampling at different phases, or a little late, are not read as gone.
CLAIM_LIFETIME_INTERVALS = 1.5

Interval = tuple[int, int]


class LeadershipSamples:
    """The replica_state samples reduced to what availability needs: for each sample
    its time, broker, the partitions it reported and those it led."""

    def __init__(self) -> None:
        self.samples: list[tuple[int, str, tuple[str, ...], frozenset[str]]] = []

    def add(self, event: Event) -> None:
        partitions = event.get("partitions") or {}
        led = frozenset(p for p, s in partitions.items() if s.get("role") == "leader")
        self.samples.append((event.t_ms, event.node, tuple(partitions), led))

    @classmethod
    def of(cls, events: Iterable[Event]) -> "LeadershipSamples":
        samples = cls()
        for event in events:
            if event.type == "replica_state":
                samples.add(event)
        return samples

    def interval_ms(self) -> int:
        """The usual gap between two samples of one broker."""
        last: dict[str, int] = {}
        gaps: Counter[int] = Counter()
        for t_ms, node, _, _ in self.samples:
            if node in last and t_ms > last[node]:
                gaps[t_ms - last[node]] += 1
            last[node] = t_ms
        return gaps.most_common(1)[0][0] if gaps else DEFAULT_SAMPLE_INTERVAL_MS


class _LeaderlessIntervals:
    """Receives the replay's changes and keeps, per partition, the intervals before
    ``stop`` in which it was not served."""

    def __init__(self, stop: int):
        self.stop = stop
        self.replay: LeadershipReplay | None = None
        self.down_since: dict[str, int | None] = {}
        self.gaps: dict[str, list[Interval]] = {}

    def changed(self, t_ms: int, partitions: Iterable[str]) -> None:
        if t_ms >= self.stop:
            return
        replay = self.replay
        if replay is None:
            raise RuntimeError("the replay reports changes to intervals it was not attached to")
        down_since = self.down_since
        for partition in partitions:
            served = replay.served(partition)
            if partition not in down_since:  # not tracked yet
                if not replay.claims.get(partition) and partition not in replay.offline:
                    continue  # no leadership fact yet: the partition does not exist so far
                self.gaps.setdefault(partition, [])
                down_since[partition] = None if served else t_ms
                continue
            since = down_since[partition]
            if since is None and not served:
                down_since[partition] = t_ms
            elif since is not None and served:
                self.gaps[partition].append((since, t_ms))
                down_since[partition] = None

    def close(self) -> dict[str, list[Interval]]:
        for partition, since in self.down_since.items():
            if since is not None:
                self.gaps[partition].append((since, self.stop))
        return self.gaps


def replay_leadership(events: list[Event], clients: Iterable[str] | Callable[[], Iterable[str]] = (),
                      samples: "LeadershipSamples | None" = None) -> tuple[LeadershipReplay, dict[str, list[Interval]], int]:
    """One pass over the events: the replay at the end of the run, the leaderless
    intervals of each partition before the workload stopped, and that stop time."""
    stop = _workload_end(events, samples)
    intervals = _LeaderlessIntervals(stop)
    replay = LeadershipReplay(clients, intervals.changed)
    intervals.replay = replay
    feed = replay.feed
    for event in events:
        feed(event)
    return replay, intervals.close(), stop


def check_unavailable(events: list[Event], samples: LeadershipSamples | None,
                      leadership: tuple[LeadershipReplay, dict[str, list[Interval]], int] | None = None) -> CheckResult:
    replay, leaderless, stop = leadership if leadership is not None else replay_leadership(events, (), samples)
    gaps: dict[str, list[Interval]] = {}
    sources = []
    if replay.saw_leadership:
        sources.append("leadership")
        gaps = leaderless
    else:
        if samples is not None and samples.samples:
            sources.append("replica_state")
            _sample_gaps(samples, stop, gaps)
        if any(e.type == "leader_elected" for e in events):
            sources.append("leader_elected")
            _election_gaps(events, stop, gaps)
    if not sources:
        return CheckResult("unavailable_ms", 0, True, "no leadership facts in the trace", (),
                           {"per_partition_ms": {}, "sources": []})
    per_partition = {}
    intervals: list[tuple[int, str, int]] = []  # (start, partition, end)
    for partition in sorted(gaps):
        merged = _merge(gaps[partition])
        per_partition[partition] = sum(end - start for start, end in merged)
        intervals.extend((start, partition, end) for start, end in merged)
    intervals.sort()
    examples = tuple({"t_ms": s, "partition": p, "from_ms": s, "to_ms": e, "duration_ms": e - s}
                     for s, p, e in intervals[:10])
    worst = max(per_partition.items(), key=lambda item: (item[1], item[0]), default=(None, 0))
    text = (f"longest time without a leader: {worst[1]} ms ({worst[0]})" if worst[1]
            else "every partition had a leader while the workload ran")
    details = {"per_partition_ms": per_partition, "sources": sources, "until_ms": stop}
    if samples is not None and samples.samples and "replica_state" in sources:
        details["sample_interval_ms"] = samples.interval_ms()
    return CheckResult("unavailable_ms", worst[1], True, text, examples, details)


def _workload_end(events: list[Event], samples: LeadershipSamples | None) -> int:
    for event in events:
        if event.type == "workload_stopped":
            return event.t_ms
    last = events[-1].t_ms if events else 0
    if samples is not None and samples.samples:
        last = max(last, samples.samples[-1][0])
    return last


def _sample_gaps(samples: LeadershipSamples, stop: int, gaps: dict[str, list[Interval]]) -> None:
    """Times at which no fresh leader claim existed, evaluated at every sampling instant."""
    lifetime = samples.interval_ms() * CLAIM_LIFETIME_INTERVALS
    claims: dict[str, dict[str, int]] = {}  # partition -> broker -> time of its claim
    led_by: dict[str, frozenset[str]] = {}  # broker -> partitions its last sample led
    down_since: dict[str, int | None] = {}
    ordered = sorted(samples.samples, key=lambda s: s[0])
    i = 0
    while i < len(ordered) and ordered[i][0] < stop:
        t_ms = ordered[i][0]
        while i < len(ordered) and ordered[i][0] == t_ms:
            _, node, reported, led = ordered[i]
            for partition in led_by.get(node, frozenset()) - led:
                claims[partition].pop(node, None)
            for partition in led:
                claims.setdefault(partition, {})[node] = t_ms
            for partition in reported:
                down_since.setdefault(partition, None)
            led_by[node] = led
            i += 1
        for partition, since in down_since.items():
            led_now = any(t_ms - t < lifetime for t in claims.get(partition, {}).values())
            if not led_now and since is None:
                down_since[partition] = t_ms
            elif led_now and since is not None:
                gaps.setdefault(partition, []).append((since, t_ms))
                down_since[partition] = None
    for partition, since in down_since.items():
        gaps.setdefault(partition, [])
        if since is not None:
            gaps[partition].append((since, stop))


def _election_gaps(events: list[Event], stop: int, gaps: dict[str, list[Interval]]) -> None:
    """From a leader_elected with leader -1 to the next one with a real leader."""
    down_since: dict[str, int] = {}
    for event in events:
        if event.type != "leader_elected" or event.t_ms >= stop:
            continue
        partition = event["partition"]
        gaps.setdefault(partition, [])
        if event.get("leader", -1) < 0:
            down_since.setdefault(partition, event.t_ms)
        elif partition in down_since:
            gaps.setdefault(partition, []).append((down_since.pop(partition), event.t_ms))
    for partition, since in down_since.items():
        gaps.setdefault(partition, []).append((since, stop))


def _merge(intervals: list[Interval]) -> list[Interval]:
    merged: list[list[int]] = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]
