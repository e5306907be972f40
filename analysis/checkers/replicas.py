"""Replicas that hold different data at the end of the run, from the replica_log
digests every broker writes after the cluster healed."""
from __future__ import annotations

from typing import Iterable

from analysis.checkers.result import CheckResult, Examples, anomaly
from analysis.trace import Event


def check_divergence(events: Iterable[Event]) -> CheckResult:
    """Replicas of one partition whose chunk digests differ. Where replicas start or
    stop at different offsets, only the chunks every replica covers whole are compared.
    Compacted replicas whose chunks differ but whose key -> value maps agree are not
    divergent (counted as ``compacted_key_maps_agree``)."""
    logs: dict[str, list[Event]] = {}
    for event in events:
        if event.type == "replica_log":
            logs.setdefault(event["partition"], []).append(event)
    found = Examples()
    by_key_map = 0
    for partition in sorted(logs):
        replicas = logs[partition]
        if len(replicas) >= 2:
            example = _diverging(partition, replicas)
            if example is not None and _key_maps_agree(replicas):
                by_key_map += 1
                continue
            if example is not None:
                found.add(example)
    details = {"partitions_compared": sum(1 for r in logs.values() if len(r) >= 2)}
    if by_key_map:
        details["compacted_key_maps_agree"] = by_key_map
    return anomaly("divergence", found, "partitions whose replicas hold different data",
                   "every partition's replicas hold the same data", details)


def _key_maps_agree(replicas: list[Event]) -> bool:
    """Replicas of a compacted partition clean on their own, so their offsets may differ
    where one removed a superseded record another still holds: they agree when their
    key -> value maps do (``compacted_replicas_converge`` judges those maps)."""
    digests = {replica.get("key_map_digest") for replica in replicas}
    return len(digests) == 1 and None not in digests


def _diverging(partition: str, replicas: list[Event]) -> dict | None:
    size = replicas[0].get("chunk_size", 1)
    starts = {r.get("log_start_offset", 0) for r in replicas}
    uptos = {r["upto_offset"] for r in replicas}
    low = None if len(starts) == 1 else max(starts)
    high = None if len(uptos) == 1 else min(uptos)
    groups: dict[tuple, list[str]] = {}
    by_node = {}
    for replica in replicas:
        chunks = {first: digest for first, digest in replica["chunks"]
                  if (low is None or first >= low) and (high is None or first + size <= high)}
        key = tuple(sorted(chunks.items()))
        groups.setdefault(key, []).append(replica.node)
        by_node[replica.node] = chunks
    if len(groups) < 2:
        return None
    tables = [dict(key) for key in groups]
    differing = sorted(first for first in set().union(*tables) if len({t.get(first) for t in tables}) > 1)
    first = differing[0]
    end = min(first + size, min(uptos))
    t_ms = max(r.t_ms for r in replicas)
    return {"t_ms": t_ms, "partition": partition, "replicas": sorted(sorted(g) for g in groups.values()),
            "first_differing_offsets": [first, end], "differing_chunks": len(differing),
            "upto_offsets": {r.node: r["upto_offset"] for r in replicas}}
