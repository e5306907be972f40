"""Which topics of a run are compacted, and their ``delete.retention.ms``, read from what
the scenario configured (the ``run_started`` event's broker and topic configs) and from
``topic_config_changed`` events: the checkers judge compaction only there, and the
bindings write a replica's key -> value digest only there."""
from __future__ import annotations

from typing import Any, Iterable

DEFAULT_DELETE_RETENTION_MS = 86400000  # Kafka 2.7.0 log.cleaner.delete.retention.ms


def policy_compacts(policy: Any) -> bool:
    """Whether a ``cleanup.policy`` value (``"compact,delete"`` or a YAML list) includes compact."""
    items = policy if isinstance(policy, (list, tuple)) else str(policy).split(",")
    return any(str(item).strip() == "compact" for item in items)


def compacted_topics(broker_config: dict, topics: Iterable[tuple[str, dict]]) -> dict[str, int]:
    """topic -> ``delete.retention.ms`` of every compacted topic among ``(name, overrides)``."""
    default_policy = broker_config.get("log.cleanup.policy", "delete")
    default_retention = broker_config.get("log.cleaner.delete.retention.ms", DEFAULT_DELETE_RETENTION_MS)
    out = {}
    for name, overrides in topics:
        if is_internal(name):
            continue
        if policy_compacts(overrides.get("cleanup.policy", default_policy)):
            out[name] = int(overrides.get("delete.retention.ms", default_retention))
    return out


def is_internal(topic: str) -> bool:
    """``__consumer_offsets``: compacted, but written by the coordinators, not by the
    workload's producers, so the compaction checkers have nothing of it to judge (the
    group checkers judge what it holds through the members' commits)."""
    return topic.startswith("__")


def topic_of(partition: str) -> str:
    """``t-0`` -> ``t``."""
    return partition.rsplit("-", 1)[0]


def compacted_in_trace(events: Iterable) -> dict[str, int]:
    """topic -> ``delete.retention.ms`` for the topics compacted at some time of a run:
    configured so at the start, or changed to it by a ``topic_config_changed``."""
    broker: dict = {}
    overrides: dict[str, dict] = {}
    compacted: dict[str, int] = {}
    for event in events:
        if event.type == "run_started":
            broker = dict(event.get("config") or {})
            overrides = {t["name"]: dict(t.get("config") or {}) for t in event.get("topics") or ()}
            compacted.update(compacted_topics(broker, overrides.items()))
        elif event.type == "topic_config_changed":
            changed = {event["topic"]: dict(event.get("overrides") or {})}
            compacted.update(compacted_topics(broker, changed.items()))
    return compacted


def compacted_only_in_trace(events: Iterable) -> set[str]:
    """The topics whose ``cleanup.policy`` is compact without delete at some time of a
    run: retention never deletes their segments, so the log start does not move and a
    record below it is not excused as deleted by retention."""
    broker: dict = {}
    only: set[str] = set()
    for event in events:
        if event.type == "run_started":
            broker = dict(event.get("config") or {})
            changed = {t["name"]: dict(t.get("config") or {}) for t in event.get("topics") or ()}
        elif event.type == "topic_config_changed":
            changed = {event["topic"]: dict(event.get("overrides") or {})}
        else:
            continue
        default_policy = broker.get("log.cleanup.policy", "delete")
        for name, overrides in changed.items():
            if is_internal(name):
                continue
            policy = overrides.get("cleanup.policy", default_policy)
            items = policy if isinstance(policy, (list, tuple)) else str(policy).split(",")
            if policy_compacts(policy) and not any(str(item).strip() == "delete" for item in items):
                only.add(name)
    return only
