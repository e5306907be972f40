"""What happened, not what went wrong: counts of the cluster's own leadership and ISR
facts over the whole run (final phase included), and who leads each partition at the
end. They judge nothing (always valid); a scenario states them in ``expect:`` to say
that its story happened (``unclean_elections: ">0"``, ``final_leader: {t-0: 1}``)."""
from __future__ import annotations

from collections import Counter

from analysis.checkers.leadership import NO_LEADER, LeadershipReplay
from analysis.checkers.result import CheckResult
from analysis.trace import Event

# Events that record a request or write refused because its sender's view was stale:
# a broker refusing a LeaderAndIsr from an older controller epoch (request_fenced), the
# coordination store refusing a controller's write after a newer controller took over
# (controller_fenced without by_broker), and the store refusing a leader's ISR write
# whose zk_version was stale (isr_update_conflict). A controller_fenced with by_broker
# is the controller learning of a request_fenced already counted, so it is listed in
# the details but not counted again.
FENCING_EVENTS = ("request_fenced", "controller_fenced", "isr_update_conflict")


class _Tally:
    __slots__ = ("elections", "unclean", "offline", "by_kind", "fenced", "fenced_by", "shrinks", "shrinks_by",
                 "expansions", "unclean_examples", "fenced_examples")

    def __init__(self) -> None:
        self.elections = self.unclean = self.offline = self.fenced = self.shrinks = self.expansions = 0
        self.by_kind: Counter[str] = Counter()
        self.fenced_by: Counter[str] = Counter()
        self.shrinks_by: Counter[str] = Counter()
        self.unclean_examples: list[dict] = []
        self.fenced_examples: list[dict] = []


def _tally(events: list[Event]) -> _Tally:
    tally = _Tally()
    wanted = {"leader_elected", "isr_shrunk", "isr_expanded", *FENCING_EVENTS}
    for event in events:
        kind = event.type
        if kind not in wanted:
            continue
        if kind == "leader_elected":
            _election(tally, event)
        elif kind == "isr_shrunk":
            tally.shrinks += 1
            tally.shrinks_by[event.get("by", "leader")] += 1
        elif kind == "isr_expanded":
            tally.expansions += 1
        else:
            _fencing(tally, event)
    return tally


def _election(tally: _Tally, event: Event) -> None:
    if event.get("leader", NO_LEADER) < 0:
        tally.offline += 1
        return
    tally.elections += 1
    tally.by_kind[event.get("election", "?")] += 1
    if event.get("unclean"):
        tally.unclean += 1
        if len(tally.unclean_examples) < 10:
            tally.unclean_examples.append({"t_ms": event.t_ms, "partition": event["partition"],
                                           "leader": event["leader"], "leader_epoch": event.get("leader_epoch"),
                                           "node": event.node})


def _fencing(tally: _Tally, event: Event) -> None:
    kind = event.type
    if kind == "controller_fenced" and "by_broker" in event.fields:
        tally.fenced_by["controller_fenced_by_broker"] += 1
        return
    tally.fenced += 1
    tally.fenced_by[kind] += 1
    if len(tally.fenced_examples) < 10:
        tally.fenced_examples.append({"t_ms": event.t_ms, "node": event.node, "event": kind,
                                      **{k: v for k, v in sorted(event.fields.items()) if not isinstance(v, list)}})


def check_facts(events: list[Event], replay: LeadershipReplay) -> list[CheckResult]:
    tally = _tally(events)
    kinds = dict(sorted(tally.by_kind.items()))
    return [
        CheckResult("unclean_elections", tally.unclean, True,
                    f"{tally.unclean} leaders elected from outside the ISR", tuple(tally.unclean_examples)),
        CheckResult("leader_elections", tally.elections, True,
                    f"{tally.elections} leaders elected by the controller ({tally.offline} elections found none)",
                    (), {"by_election": kinds, "leaderless": tally.offline}),
        CheckResult("fenced_requests", tally.fenced, True,
                    f"{tally.fenced} requests or writes refused as stale", tuple(tally.fenced_examples),
                    {"by_event": dict(sorted(tally.fenced_by.items()))}),
        CheckResult("isr_shrinks", tally.shrinks, True, f"{tally.shrinks} ISR shrinks", (),
                    {"by": dict(sorted(tally.shrinks_by.items()))}),
        CheckResult("isr_expansions", tally.expansions, True, f"{tally.expansions} ISR expansions"),
        _final_leader(replay),
    ]


def _final_leader(replay: LeadershipReplay) -> CheckResult:
    """The serving broker that claims each partition at the end of the run, the one with
    the highest leader epoch should two claim it; without became_leader facts in the
    trace, the controller's last election."""
    if replay.saw_leadership:
        leaders = {p: replay.leader(p) for p in replay.partitions()}
        source = "became_leader"
    else:
        leaders = dict(sorted(replay.elected.items()))
        source = "leader_elected"
    text = ", ".join(f"{p}: {b}" for p, b in leaders.items()) or "no leadership facts in the trace"
    return CheckResult("final_leader", leaders, True, f"leaders at the end: {text}", (), {"source": source})
