"""The final phase's steps (faults/final_phase.py), driven by a fake binding that logs
every call and carries out every request on a counter clock."""
from __future__ import annotations

from faults.final_phase import (
    SETTLE_POLL_MS, Lag, ReadEverything, StopProducers, Wait, carried_out_blocking, final_phase_steps)


class FakeRun:
    def __init__(self, settles_after_ms: float, consumers: list[str], consumer_done_ms: float = 0.0):
        self.now = 1000.0
        self.calls: list[tuple] = []
        self.settles_at = self.now + settles_after_ms
        self.consumers = consumers
        self.consumer_done_at = consumer_done_ms

    def clock_ms(self) -> float:
        return self.now

    def trace(self, node, type_, fields):
        self.calls.append(("trace", type_, fields))

    def end_fault_schedule(self):
        self.calls.append(("end_fault_schedule",))

    def heal_everything(self):
        self.calls.append(("heal_everything",))

    def restart_all(self):
        self.calls.append(("restart_all",))

    def restart_exited(self):
        self.calls.append(("restart_exited",))

    def is_settled(self):
        return self.now >= self.settles_at

    def trace_replica_logs(self):
        self.calls.append(("trace_replica_logs",))

    def has_consumers(self):
        return bool(self.consumers)

    def lagging_consumers(self, ends):
        behind = self.now < self.consumer_done_at
        return [Lag(c, "t-0", False) for c in self.consumers if behind and ends.get("t-0", 0) > 0]

    def stop_consumers(self):
        self.calls.append(("stop_consumers",))

    def drive(self, max_wait_ms=2000, restart="down", producer_timeout_ms=300):
        steps = final_phase_steps(self, max_wait_ms, restart, producer_timeout_ms)
        return carried_out_blocking(steps, self.carry_out)

    def carry_out(self, request):
        self.calls.append(("request", request))
        if isinstance(request, Wait):
            self.now += request.ms
        elif isinstance(request, ReadEverything):
            return {"t-0": 5}
        return None


def test_the_steps_come_in_the_documented_order_and_the_digests_precede_the_read():
    run = FakeRun(settles_after_ms=250, consumers=["consumer-0"], consumer_done_ms=1500)
    assert run.drive() is True
    names = [c[1] if c[0] == "trace" else c[0] if c[0] != "request" else type(c[1]).__name__ for c in run.calls]
    assert names == ["workload_stopped", "StopProducers", "end_fault_schedule", "final_phase_started",
                     "heal_everything", "Wait", "restart_exited", "Wait", "restart_exited", "Wait",
                     "restart_exited", "cluster_settled", "trace_replica_logs", "ReadEverything",
                     "Wait", "Wait", "stop_consumers", "consumers_caught_up"]
    assert run.calls[1] == ("request", StopProducers(1300.0))
    assert ("trace", "cluster_settled", {"waited_ms": 3 * SETTLE_POLL_MS}) in run.calls
    assert run.calls[-1] == ("trace", "consumers_caught_up", {"waited_ms": 2 * SETTLE_POLL_MS, "behind": []})


def test_restart_all_follows_the_heal_and_an_unsettled_cluster_is_waited_for_at_most_max_wait():
    run = FakeRun(settles_after_ms=10_000, consumers=[])
    assert run.drive(max_wait_ms=500, restart="all") is False
    names = [c[0] if c[0] != "trace" else c[1] for c in run.calls]
    assert names.index("restart_all") == names.index("heal_everything") + 1
    assert ("trace", "cluster_not_settled", {"waited_ms": 500}) in run.calls
    assert "consumers_caught_up" not in names and "consumers_behind" not in names  # no consumers: no line


def test_the_settle_rule_both_bindings_share():
    """faults/final_phase.partition_settled: one leader, a full ISR, its high watermark at
    its log end, every replica's log ending where the leader's does."""
    from faults.final_phase import partition_settled

    def replica(role, isr=(), leo=10, hw=10):
        return {"role": role, "isr": list(isr), "log_end_offset": leo, "high_watermark": hw}
    settled = {1: replica("leader", (2, 1)), 2: replica("follower")}
    assert partition_settled(settled, [1, 2])
    assert not partition_settled({**settled, 2: replica("leader", (1, 2))}, [1, 2])  # two leaders
    assert not partition_settled({**settled, 1: replica("leader", (1,))}, [1, 2])  # ISR not full
    assert not partition_settled({**settled, 1: replica("leader", (1, 2), hw=9)}, [1, 2])  # hw below log end
    assert not partition_settled({**settled, 2: replica("follower", leo=9)}, [1, 2])  # a replica behind
    assert not partition_settled({1: settled[1]}, [1, 2])  # a replica that says nothing
