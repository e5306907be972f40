"""Group consumers in a scenario (``workload.consumers`` entries with ``group:``),
validated strictly like the rest of the file (docs/scenarios.md, "Group consumers").
Each entry is ``members`` simulated group members (sim/group_member.py), with the
Java consumer's settings and an application commit policy."""
from __future__ import annotations

from typing import Any

from analysis.group_application import COMMIT_POLICIES
from broker_core.assignors import STRATEGIES
from faults.nodes import group_member_node
from scenarios.model import GroupConsumerWorkload
from scenarios.source import Fields, Source, convert

GROUP_RESET_POLICIES = ("earliest", "latest")


def group_consumer(source: Source, data: Any, path: tuple, topics: set[str], index: int) -> GroupConsumerWorkload:
    f = Fields(source, data, path, "a group consumer")
    group = f.take("group", "str", check=lambda v: None if v and "/" not in v else "must be a name without /")
    chosen = _topics(source, f, path, topics)
    commit = f.take("commit", "str", "auto",
                    lambda v: None if v in COMMIT_POLICIES else f"must be one of {', '.join(COMMIT_POLICIES)}")
    positive = lambda v: None if v > 0 else "must be more than 0"
    if f.has("auto.commit.interval.ms") and commit != "auto":
        raise source.error(path + ("auto.commit.interval.ms",), f"needs commit: auto (this consumer commits {commit})")
    if f.has("retry_failed_commits") and commit != "async":
        raise source.error(path + ("retry_failed_commits",), f"needs commit: async (this consumer commits {commit})")
    session = f.take("session.timeout.ms", "duration", 10000, positive)
    workload = GroupConsumerWorkload(
        group, chosen, index,
        members=f.take("members", "int", 1, lambda v: None if 1 <= v <= 100 else "must be between 1 and 100"),
        commit=commit,
        auto_commit_interval_ms=f.take("auto.commit.interval.ms", "duration", 5000, positive),
        retry_failed_commits=f.take("retry_failed_commits", "bool", False),
        auto_offset_reset=f.take("auto.offset.reset", "str", "latest", lambda v: None if v in GROUP_RESET_POLICIES
                                 else f"must be one of {', '.join(GROUP_RESET_POLICIES)}"),
        session_timeout_ms=session,
        heartbeat_interval_ms=f.take("heartbeat.interval.ms", "duration", 3000, lambda v: positive(v) or (
            None if v < session else f"must be less than session.timeout.ms ({session} ms)")),
        max_poll_interval_ms=f.take("max.poll.interval.ms", "duration", 300000, positive),
        max_poll_records=f.take("max.poll.records", "int", 500, positive),
        assignors=_assignors(source, f, path),
        static=f.take("static", "bool", False),
        start_ms=f.take("start", "duration", 0),
        poll_interval_ms=f.take("poll_interval", "duration", 100, positive),
        processing_ms=f.take("processing", "duration", 0),
        client_id=f.take("client.id", "str", None,
                         lambda v: None if v and "/" not in v else "must be a name without /"),
    )
    f.done()
    return workload


def _topics(source: Source, f: Fields, path: tuple, topics: set[str]) -> tuple[str, ...]:
    """``topic: t`` or ``topics: [t, u]``, exactly one of them, topics of the cluster."""
    if f.has("topic") == f.has("topics"):
        raise source.error(path + ("topics",), "give either topic or topics (the group's subscription)")
    known = lambda v: None if v in topics else f"unknown topic; topics: {sorted(topics)}"
    if f.has("topic"):
        return (f.take("topic", "str", check=known),)
    raw = f.take("topics", "list", check=lambda v: None if v else "must name at least one topic")
    chosen = []
    for i, item in enumerate(raw):
        name = convert(source, path + ("topics", i), item, "str")
        problem = known(name) or (f"{name!r} is named twice" if name in chosen else None)
        if problem:
            raise source.error(path + ("topics", i), problem)
        chosen.append(name)
    return tuple(chosen)


def _assignors(source: Source, f: Fields, path: tuple) -> tuple[str, ...]:
    """partition.assignment.strategy: a name or a list, most preferred first."""
    key = "partition.assignment.strategy"
    raw = f.take(key, "any", ["range"])
    names = raw if isinstance(raw, list) else [raw]
    if not names:
        raise source.error(path + (key,), "must name at least one assignor")
    for i, name in enumerate(names):
        where = path + (key, i) if isinstance(raw, list) else path + (key,)
        convert(source, where, name, "str")
        if name not in STRATEGIES:
            raise source.error(where, f"unknown assignor {name!r}; assignors: {', '.join(STRATEGIES)}")
    return tuple(names)


def member_names(workload: GroupConsumerWorkload, number: int) -> list[str]:
    """The nodes of the ``number``-th group entry's members: ``group-<number>-<m>``."""
    return [group_member_node(number, m) for m in range(workload.members)]
