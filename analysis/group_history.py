"""The history a consumer-group member writes (docs/trace-schema.md, "Group consumers"):
what it knew of its group (generations, assignments, positions), what its application
consumed, and each offset commit as an operation with a Jepsen-style outcome.

Both bindings build these events here, as they build the other client events in
analysis/client_history.py, so that analysis/checkers/groups.py reads one vocabulary.
A commit is an operation (``invoke`` then ``ok``, ``fail`` or ``info``, with ``f`` =
``commit``) because its outcome is what the checkers must not over-claim: an error the
coordinator may send after it appended the offsets to ``__consumer_offsets`` leaves the
commit ``info``, never ``fail``.
"""
from __future__ import annotations

from typing import Any


COMMIT = "commit"  # the ``f`` of a commit operation

# facts (no ``op``): the member's view of its group
GROUP_COORDINATOR_FOUND = "group_coordinator_found"
GROUP_COORDINATOR_LOST = "group_coordinator_lost"
GROUP_JOINED = "group_joined"
GROUP_ASSIGNED = "group_assigned"
GROUP_REVOKED = "group_revoked"
GROUP_LEFT = "group_left"
GROUP_MEMBER_FAILED = "group_member_failed"
GROUP_POSITION = "group_position"
GROUP_CONSUMED = "group_consumed"
GROUP_EVENTS = (GROUP_COORDINATOR_FOUND, GROUP_COORDINATOR_LOST, GROUP_JOINED, GROUP_ASSIGNED, GROUP_REVOKED,
                GROUP_LEFT, GROUP_MEMBER_FAILED, GROUP_POSITION, GROUP_CONSUMED)

# commit modes (the invoke's ``mode``)
SYNC, ASYNC, AUTO, RETRY = "sync", "async", "auto", "retry"

# reasons of a commit that was never sent (``fail``) or never answered (``info``)
NOT_IN_GROUP = "not_in_group"  # ConsumerCoordinator: no stable generation, CommitFailedException
NO_COORDINATOR = "no_coordinator"  # a sync commit that ran out of time looking for one

# Offset commit errors after which the offsets were certainly not stored: the
# coordinator answers them before it writes to __consumer_offsets
# (GroupCoordinator.handleCommitOffsets validates first). Any other error
# (REQUEST_TIMED_OUT, NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE, which a store in
# flight also ends with) leaves the outcome unknown.
DEFINITE_COMMIT_ERRORS = frozenset({
    "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID", "REBALANCE_IN_PROGRESS", "FENCED_INSTANCE_ID",
    "COORDINATOR_LOAD_IN_PROGRESS", "OFFSET_METADATA_TOO_LARGE", "INVALID_COMMIT_OFFSET_SIZE",
    "GROUP_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED", "INVALID_GROUP_ID", "UNKNOWN_TOPIC_OR_PARTITION",
    "GROUP_ID_NOT_FOUND"})


def _member(group: str, member_id: str, generation: int) -> dict[str, Any]:
    return {"group": group, "member_id": member_id, "generation": generation}


def coordinator_found(group: str, coordinator: int) -> dict[str, Any]:
    return {"group": group, "coordinator": coordinator}


def coordinator_lost(group: str, coordinator: int, reason: str) -> dict[str, Any]:
    return {"group": group, "coordinator": coordinator, "reason": reason}


def joined(group: str, member_id: str, generation: int, leader: str | None, protocol: str | None) -> dict[str, Any]:
    """``leader`` and ``protocol`` None when the client does not say (librdkafka names
    neither to its application: the real binding's members)."""
    return {**_member(group, member_id, generation), "leader": leader, "protocol": protocol}


def assigned(group: str, member_id: str, generation: int, partitions: list[str]) -> dict[str, Any]:
    return {**_member(group, member_id, generation), "partitions": partitions}


def revoked(group: str, member_id: str, generation: int, partitions: list[str], reason: str) -> dict[str, Any]:
    """``reason``: ``rebalance`` (onPartitionsRevoked, before a rejoin), ``lost``
    (onPartitionsLost: the member learnt it was no longer in the generation) or ``close``."""
    return {**_member(group, member_id, generation), "partitions": partitions, "reason": reason}


def left(group: str, member_id: str, generation: int, reason: str) -> dict[str, Any]:
    return {**_member(group, member_id, generation), "reason": reason}


def member_failed(group: str, member_id: str, error: str) -> dict[str, Any]:
    return {"group": group, "member_id": member_id, "error": error}


def position(group: str, member_id: str, generation: int, partition: str, offset: int,
             reason: str) -> dict[str, Any]:
    """``reason``: ``committed`` (OffsetFetch found one), ``earliest`` or ``latest``
    (auto.offset.reset, none committed)."""
    return {**_member(group, member_id, generation), "partition": partition, "offset": offset, "reason": reason}


def consumed(group: str, member_id: str, generation: int, partition: str, offsets: list[int]) -> dict[str, Any]:
    return {**_member(group, member_id, generation), "partition": partition, "offsets": offsets}


def commit_invoke(op: int, group: str, member_id: str, generation: int, mode: str,
                  offsets: dict[str, int]) -> dict[str, Any]:
    return {"f": COMMIT, "op": op, **_member(group, member_id, generation), "mode": mode, "offsets": offsets}


def commit_outcome(errors: dict[str, str]) -> str:
    """The completion of an answered commit, from its partitions' error names."""
    # imported here: analysis.client_history is compiled (isrlab/compiled.py), and the
    # checkers import this module before a command can switch the build on
    from analysis.client_history import FAIL, INFO, OK
    if not errors:
        return OK
    return FAIL if all(e in DEFINITE_COMMIT_ERRORS for e in errors.values()) else INFO


def commit_completion(op: int, group: str, committed: dict[str, int], errors: dict[str, str] | None = None,
                      reason: str | None = None) -> dict[str, Any]:
    """``committed``: the partitions the coordinator answered NONE, with their offsets;
    ``errors``: the others, by error name; ``reason`` for a commit not answered."""
    fields: dict[str, Any] = {"f": COMMIT, "op": op, "group": group, "committed": committed}
    if errors:
        fields["errors"] = errors
    if reason is not None:
        fields["reason"] = reason
    return fields
