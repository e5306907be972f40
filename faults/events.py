"""The trace fields of fault and trigger events, written alike by both bindings'
executors (docs/trace-schema.md, Faults and triggers): analysis/checkers/happened.py
and the timelines read them whichever binding ran."""
from __future__ import annotations

from faults import model as fm


def fault_started_fields(fault_id: int, fault: fm.Fault, step=None, roles: dict | None = None,
                         no_effect: str | None = None, **extra) -> dict:
    """``step`` is the scenario's step the fault belongs to (None for the nemesis and the
    final phase); ``roles`` what each role target resolved to; ``no_effect`` why the
    fault changed nothing, so that a scripted fault that never took effect fails the run."""
    fields = {"fault_id": fault_id, "fault": fm.kind_of(fault), **fm.describe(fault), **extra}
    if step is not None:
        fields["line"] = step.line
        if step.optional:
            fields["optional"] = True
    if roles:
        fields["roles"] = {str(role): broker for role, broker in roles.items()}
    if no_effect is not None:
        fields["no_effect"] = no_effect
    return fields


def fault_ended_fields(fault_id: int, fault: fm.Fault) -> dict:
    return {"fault_id": fault_id, "fault": fm.kind_of(fault)}


def trigger_fields(step, fired: bool) -> dict:
    """``trigger_fired`` / ``trigger_never_fired`` of a scenario step with ``when:``."""
    fields = {"line": step.line, "when": step.when.describe()}
    if not fired and step.optional:
        fields["optional"] = True
    return fields
