"""What the run did: the faults it applied (start, end, targets), the triggers that never
fired, and how many records were produced, acknowledged and consumed. A run that tested
nothing must not pass quietly: a scripted fault that changed nothing or a trigger that
never fired (unless its step is ``optional: true``), and a workload that acknowledged
nothing, are invalid results, which a scenario can only accept by naming them in
``expect:`` (``acknowledged: 0``)."""
from __future__ import annotations

from analysis.checkers.result import CheckResult
from analysis.history import History
from analysis.trace import Event

_FAULT_FIELDS = ("targets", "brokers", "nodes", "groups", "roles", "line", "no_effect")


def check_happened(events: list[Event], history: History) -> list[CheckResult]:
    faults: dict[int, dict] = {}
    never: list[dict] = []
    ineffective: list[dict] = []
    for event in events:
        if event.type == "fault_started":
            faults[event["fault_id"]] = {"fault": event["fault"], "start_ms": event.t_ms, "end_ms": None,
                                         **{k: event.fields[k] for k in _FAULT_FIELDS if k in event.fields}}
            # a scenario's own step (it has a line) that changed nothing, unless optional
            if "no_effect" in event.fields and "line" in event.fields and not event.get("optional"):
                ineffective.append({"line": event["line"], "fault": event["fault"], "t_ms": event.t_ms,
                                    "why": event["no_effect"]})
        elif event.type == "fault_ended" and event.get("fault_id") in faults:
            faults[event["fault_id"]]["end_ms"] = event.t_ms
        elif event.type == "trigger_never_fired" and not event.get("optional"):
            never.append({"line": event.get("line"), "when": event.get("when")})
    listed = [{"fault_id": fid, **facts} for fid, facts in sorted(faults.items())]
    sends = history.of("send")
    produced = sum(len(op.invoke["values"]) for op in sends)
    acknowledged = sum(len(op.invoke["values"]) for op in sends
                       if op.outcome == "ok" and op.done.get("offset", -1) >= 0)
    consumed = sum(len(records) for op in history.of("poll") if op.outcome == "ok"
                   for records in op.done.get("records", {}).values())
    lines = ", ".join(f"line {n['line']}" for n in never)
    return [
        CheckResult("faults_applied", len(listed), True, f"{len(listed)} faults started", tuple(listed[:50]),
                    {"faults": listed}),
        CheckResult("faults_without_effect", len(ineffective), not ineffective,
                    f"{len(ineffective)} scripted faults changed nothing" + "".join(
                        f"; line {f['line']}: {f['fault']} {f['why']}" for f in ineffective[:3]), tuple(ineffective)),
        CheckResult("triggers_never_fired", len(never), not never,
                    f"{len(never)} triggers never fired" + (f" ({lines}): their faults never happened" if never
                                                              else ""), tuple(never)),
        CheckResult("produced", produced, True, f"{produced} records sent by producers"),
        CheckResult("acknowledged", acknowledged, acknowledged > 0 or not sends,
                    f"{acknowledged} records acknowledged" + ("" if acknowledged or not sends
                                                              else ": the workload tested nothing")),
        CheckResult("consumed", consumed, True, f"{consumed} records read by consumers"),
    ]
