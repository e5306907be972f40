"""What a group member's application does with one batch of records, by the scenario's
``commit`` policy (docs/scenarios.md, "Group consumers"), written once for both
bindings: the simulated member (sim/group_consumer.py) and the real one, a
confluent-kafka consumer in a process of its own (real_io/group_member_process.py).

A batch is at most ``max.poll.records`` records one poll returned. Its steps, in order:

- ``consume``: the application processed the records (``group_consumed``: what the
  group checkers count as consumed);
- ``work``: ``processing`` ms pass (the application's work on the batch, or the wait
  between a commit and the processing): a crash that falls within it is what the
  duplicate and loss scenarios are about;
- ``commit_sync`` / ``commit_async``: commit the batch's end (the offset after its last
  record, per partition).

``after_processing`` processes, works, then commits synchronously (at-least-once: a
crash in between duplicates the batch); ``async`` the same with an asynchronous commit;
``before_processing`` commits first and processes after the wait (at-most-once: a crash
in between loses the batch for the group); ``auto`` only processes and leaves commits
to the consumer's auto-commit, of what the application has finished with.

A batch committed but not yet consumed is *in hand*: when a run stops its members (a
stop is not a crash) the application hands it over first, so that the end of the run
makes no loss of its own.
"""
from __future__ import annotations

from typing import Mapping, Sequence, TypeVar

CONSUME, WORK, COMMIT_SYNC, COMMIT_ASYNC = "consume", "work", "commit_sync", "commit_async"

_STEPS: dict[str, tuple[str, ...]] = {
    "auto": (CONSUME, WORK),
    "after_processing": (CONSUME, WORK, COMMIT_SYNC),
    "before_processing": (COMMIT_SYNC, WORK, CONSUME),
    "async": (CONSUME, WORK, COMMIT_ASYNC),
}
COMMIT_POLICIES = tuple(_STEPS)

K = TypeVar("K")


def batch_steps(policy: str) -> tuple[str, ...]:
    """The steps of one batch under ``policy`` (a ``commit:`` value), in order."""
    try:
        return _STEPS[policy]
    except KeyError:
        raise ValueError(f"unknown commit policy {policy!r}; policies: {', '.join(COMMIT_POLICIES)}") from None


def in_hand_after(steps: Sequence[str], index: int) -> bool:
    """Whether the batch is committed but not consumed once step ``index`` has run."""
    done = steps[:index + 1]
    return any(s in (COMMIT_SYNC, COMMIT_ASYNC) for s in done) and CONSUME not in done


def batch_ends(batch: Mapping[K, Sequence[int]]) -> dict[K, int]:
    """The offsets a commit of ``batch`` (partition -> its offsets, ascending) names:
    the next offset to read, after each partition's last record."""
    return {partition: offsets[-1] + 1 for partition, offsets in batch.items() if offsets}
