"""Small hand-written histories for the checker tests."""
from __future__ import annotations

from analysis.checkers import run_checkers
from analysis.checkers.availability import LeadershipSamples
from analysis.history import History, build_history
from analysis.trace import Event


class HistoryBuilder:
    """Appends events in the order given; each client operation gets the next op id of
    its process. Times are whatever the test says."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._ops: dict[str, int] = {}

    def _op(self, process: str) -> int:
        self._ops[process] = self._ops.get(process, 0) + 1
        return self._ops[process]

    def add(self, t_ms: int, node: str, type_: str, **fields) -> "HistoryBuilder":
        self.events.append(Event(t_ms, node, type_, fields))
        return self

    def send(self, t_ms: int, values: list[str], offset: int | None = None, outcome: str = "ok",
             partition: str = "t-0", acks: int = -1, process: str = "producer-0", done_ms: int | None = None,
             error: str | None = None) -> int:
        """A send; ``outcome`` None leaves it without completion."""
        op = self._op(process)
        self.add(t_ms, process, "invoke", f="send", op=op, partition=partition, values=values, acks=acks)
        if outcome is None:
            return op
        fields = {"f": "send", "op": op, "partition": partition}
        if offset is not None:
            fields["offset"] = offset
        if error is not None:
            fields.update(error=error, error_code=7)
        self.add(done_ms if done_ms is not None else t_ms + 1, process, outcome, **fields)
        return op

    def poll(self, t_ms: int, records: dict[str, list], high_watermarks: dict[str, int] | None = None,
             errors: dict[str, str] | None = None, process: str = "consumer-0", outcome: str = "ok",
             positions: dict[str, int] | None = None) -> int:
        op = self._op(process)
        self.add(t_ms, process, "invoke", f="poll", op=op, positions=positions or {})
        if outcome == "ok":
            fields = {"f": "poll", "op": op, "records": records,
                      "high_watermarks": high_watermarks if high_watermarks is not None else {}}
            if errors:
                fields["errors"] = errors
            self.add(t_ms + 1, process, "ok", **fields)
        else:
            self.add(t_ms + 1, process, "info", f="poll", op=op, reason="client_timeout")
        return op

    def read(self, t_ms: int, records: list, partition: str = "t-0", high_watermark: int | None = None,
             complete: bool = True, process: str = "reader") -> int:
        op = self._op(process)
        self.add(t_ms, process, "invoke", f="read", op=op, partition=partition)
        if complete:
            hw = high_watermark if high_watermark is not None else (records[-1][0] + 1 if records else 0)
            self.add(t_ms + 1, process, "ok", f="read", op=op, partition=partition, records=records,
                     high_watermark=hw)
        else:
            self.add(t_ms + 1, process, "info", f="read", op=op, partition=partition,
                     reason="final_read_timed_out", records=records)
        return op

    def state(self, t_ms: int, broker: int, roles: dict[str, str]) -> "HistoryBuilder":
        partitions = {tp: {"role": role, "leader": broker if role == "leader" else -1} for tp, role in roles.items()}
        return self.add(t_ms, f"broker-{broker}", "replica_state", partitions=partitions)

    def reset(self, t_ms: int, to_offset: int, from_offset: int = 0, reason: str = "truncation_detected",
              partition: str = "t-0", process: str = "consumer-0") -> "HistoryBuilder":
        """A consumer's position_reset line (the contract of the simulated consumer)."""
        return self.add(t_ms, process, "position_reset", partition=partition, from_offset=from_offset,
                        to_offset=to_offset, reason=reason)

    def broker(self, t_ms: int, broker: int, type_: str, **fields) -> "HistoryBuilder":
        """An event a broker wrote (became_leader, broker_started, ...)."""
        return self.add(t_ms, f"broker-{broker}", type_, **fields)

    def fault(self, t_ms: int, fault_id: int, kind: str, **fields) -> "HistoryBuilder":
        return self.add(t_ms, "nemesis", "fault_started", fault_id=fault_id, fault=kind, **fields)

    def history(self) -> History:
        return build_history(self.events)

    def samples(self) -> LeadershipSamples:
        return LeadershipSamples.of(self.events)

    def check(self):
        return run_checkers(self.history(), self.samples())


def records(values: list[str], first: int = 0) -> list[list]:
    return [[first + i, v] for i, v in enumerate(values)]
