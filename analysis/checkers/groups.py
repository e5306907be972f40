"""What consumer groups did with the records (seed 003, issue 24), judged from the group
members' history alone (analysis/group_history.py, docs/trace-schema.md "Group
consumers"), so that a simulated and a real run are judged alike:

- ``group_duplicates``: records a group consumed more than once (a crash after
  processing and before the commit, a zombie member, a commit that went backwards);
- ``group_unconsumed``: records below an offset the group committed, at or after
  where the group started reading, that no member of it consumed (a commit before
  processing, then a crash);
- ``group_commits_backwards``: a commit the coordinator took that is below the one it
  took before for the same group and partition (seed 003: an async commit retried
  after a newer one);
- ``group_consumed``: how many records the groups' members consumed (every delivery
  counted, duplicates too): what happened, always valid, for ``expect:`` to name and the
  run's summary to show beside plain consumers' ``consumed``.

A run whose group members wrote their group's events but consumed nothing tested
nothing: ``group_duplicates`` and ``group_unconsumed`` are then invalid with
``tested: false`` in their details (scenarios/runner.py names such a run NOT TESTED),
rather than 0 and valid. A run without any group event at all is not judged here
(``no_groups``); the runner knows whether its scenario had group consumers.

Only what a commit's answer says was stored counts as committed (its ``committed``
partitions: NONE answers); a commit whose outcome is unknown (``info``) proves
nothing either way. Commits are ordered by their answers, which a coordinator gives in
the order it stored them.
"""
from __future__ import annotations

from analysis import group_history as gh
from analysis.checkers.index import RunIndex
from analysis.checkers.result import CheckResult, Examples, anomaly
from analysis.history import History, Operation

GROUP_RESULT_NAMES = ("group_duplicates", "group_unconsumed", "group_commits_backwards")
GROUP_CONSUMED = "group_consumed"


def check_group_consumption(index: RunIndex, history: History) -> list[CheckResult]:
    """The three anomalies, in GROUP_RESULT_NAMES's order, then ``group_consumed``."""
    consumed = _consumptions(index)
    commits = sorted((op for op in history.of(gh.COMMIT) if op.completion is not None), key=lambda o: o.done_seq)
    facts = sum(1 for event in index.events if event.type in gh.GROUP_EVENTS)
    if not consumed and not commits and not facts:
        return [CheckResult(name, 0, True, "no group consumers", (), {"no_groups": True})
                for name in (*GROUP_RESULT_NAMES, GROUP_CONSUMED)]
    judged = [_duplicates(consumed), _unconsumed(index, consumed, commits)]
    if not consumed:
        judged = [_consumed_nothing(result, facts, len(commits)) for result in judged]
    deliveries = sum(len(who) for who in consumed.values())
    return [*judged, _backwards(commits),
            CheckResult(GROUP_CONSUMED, deliveries, True, f"{deliveries} records consumed by group members",
                        (), {"no_groups": False})]


def _consumed_nothing(result: CheckResult, facts: int, commits: int) -> CheckResult:
    """A consumption result of a run whose members consumed no record: 0 proves nothing."""
    if result.value:
        return result
    return CheckResult(result.name, 0, False, f"tested nothing: the group members consumed no record ({facts} group "
                       f"events, {commits} commits answered)", (), {**result.details, "tested": False})


Consumption = tuple[str, str, int, int]  # (node, member_id, generation, t_ms)


def _consumptions(index: RunIndex) -> dict[tuple[str, str, int], list[Consumption]]:
    """(group, partition, offset) -> every consumption of it, in trace order."""
    seen: dict[tuple[str, str, int], list[Consumption]] = {}
    for event in index.events:
        if event.type == gh.GROUP_CONSUMED:
            f = event.fields
            who = (event.node, f["member_id"], f["generation"], event.t_ms)
            for offset in f["offsets"]:
                seen.setdefault((f["group"], f["partition"], offset), []).append(who)
    return seen


def _duplicates(consumed: dict[tuple[str, str, int], list[Consumption]]) -> CheckResult:
    found = Examples()
    extra = 0
    for (group, partition, offset), who in sorted(consumed.items()):
        if len(who) > 1:
            extra += len(who) - 1
            found.add({"group": group, "partition": partition, "offset": offset, "t_ms": who[1][3],
                       "consumed_by": [{"process": p, "member_id": m, "generation": g, "t_ms": t}
                                       for p, m, g, t in who]})
    return anomaly("group_duplicates", found, "records consumed more than once by one group",
                   "no group consumed a record twice", {"extra_deliveries": extra, "no_groups": False})


def _unconsumed(index: RunIndex, consumed: dict[tuple[str, str, int], list[Consumption]],
                commits: list[Operation]) -> CheckResult:
    """Records of the partition are those the final read returned, or else those the
    producers were told are in it (acknowledged sends)."""
    highest: dict[tuple[str, str], tuple[int, Operation]] = {}
    for op in commits:
        group = op.invoke["group"]
        for partition, offset in (op.done.get("committed") or {}).items():
            if offset > highest.get((group, partition), (-1, op))[0]:
                highest[(group, partition)] = (offset, op)
    starts = _starts(index)
    existing = _existing_offsets(index)
    found = Examples()
    for (group, partition), (committed, op) in sorted(highest.items()):
        start = starts.get((group, partition))
        if start is None:
            continue
        for offset in sorted(o for o in existing.get(partition, ()) if start <= o < committed):
            if (group, partition, offset) not in consumed:
                found.add({"group": group, "partition": partition, "offset": offset, "t_ms": op.done.t_ms,
                           "committed": committed, "process": op.process, "op": op.op,
                           "member_id": op.invoke["member_id"], "generation": op.invoke["generation"]})
    return anomaly("group_unconsumed", found, "records a group committed past but never consumed",
                   "every record a group committed past was consumed by it", {"no_groups": False})


def _starts(index: RunIndex) -> dict[tuple[str, str], int]:
    """Where each group first read each partition from: the lowest position any member
    took (a commit, or auto.offset.reset); below it nothing was owed."""
    starts: dict[tuple[str, str], int] = {}
    for event in index.events:
        if event.type == gh.GROUP_POSITION:
            key = (event["group"], event["partition"])
            starts[key] = min(starts.get(key, event["offset"]), event["offset"])
    return starts


def _existing_offsets(index: RunIndex) -> dict[str, set[int]]:
    existing: dict[str, set[int]] = {p: {r[0] for r in read.records} for p, read in index.reads.items()}
    for op in index.acknowledged:
        partition = op.invoke["partition"]
        if partition in index.reads:
            continue
        first = op.done["offset"]
        existing.setdefault(partition, set()).update(range(first, first + len(op.invoke["values"])))
    return existing


def _backwards(commits: list[Operation]) -> CheckResult:
    last: dict[tuple[str, str], tuple[int, Operation]] = {}
    found = Examples()
    for op in commits:
        group = op.invoke["group"]
        for partition, offset in sorted((op.done.get("committed") or {}).items()):
            previous = last.get((group, partition))
            if previous is not None and offset < previous[0]:
                before = previous[1]
                found.add({"group": group, "partition": partition, "offset": offset, "previous": previous[0],
                           "t_ms": op.done.t_ms, "process": op.process, "op": op.op, "mode": op.invoke["mode"],
                           "generation": op.invoke["generation"], "previous_process": before.process,
                           "previous_op": before.op})
            last[(group, partition)] = (offset, op)
    return anomaly("group_commits_backwards", found, "commits below the group's previous commit of the partition",
                   "no group's committed offset went backwards", {"no_groups": False})
