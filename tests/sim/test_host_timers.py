"""sim/broker_host.py HostTimers: a broker host's timers in one FIFO per kind fire in
exactly the order one heap of (time, order of setting) gave, whatever the delays,
cancellations, re-settings of a key and clock changes."""
import heapq
import random

import pytest

from sim.broker_host import HostTimers


class HeapTimers:
    """The order the host had before: every timer in one heap, a cancelled or re-set
    one skipped when popped."""

    def __init__(self):
        self.heap, self.live, self.seq = [], {}, 0

    def set(self, key, at):
        self.seq += 1
        self.live[key] = self.seq
        heapq.heappush(self.heap, (at, self.seq, key))

    def cancel(self, key):
        self.live.pop(key, None)

    def _drop_dead(self):
        while self.heap and self.live.get(self.heap[0][2]) != self.heap[0][1]:
            heapq.heappop(self.heap)

    def next_at(self):
        self._drop_dead()
        return self.heap[0][0] if self.heap else None

    def pop_due(self, now):
        self._drop_dead()
        if not self.heap or self.heap[0][0] > now:
            return None
        _, _, key = heapq.heappop(self.heap)
        del self.live[key]
        return key


def drive(timers, seed):
    """Random sets, cancels and firings as a broker makes them: most kinds keep one delay,
    some timers are shorter than their kind's last one (a request's own timeout, a clock
    jump), many land on the same millisecond; returns every observation."""
    rng = random.Random(seed)
    delays = {"produce-timeout": 30000, "fetch-wait": 500, "fetch-timeout": 30500, "isr-check": 5000, "task": 0}
    seen, now = [], 0.0
    for _ in range(3000):
        op = rng.random()
        kind = rng.choice(sorted(delays))
        key = (kind, rng.randrange(40))
        if op < 0.5:
            delay = delays[kind] if rng.random() < 0.8 else rng.choice([0, 1, 250, 10000])
            timers.set(key, now + delay)
        elif op < 0.8:
            timers.cancel(key)
        else:
            now += rng.choice([0, 1, 10, 500, 5000])
            while (key := timers.pop_due(now)) is not None:
                seen.append((now, key))
        seen.append(("next", timers.next_at()))
    return seen


@pytest.mark.parametrize("seed", range(8))
def test_timers_fire_in_the_order_of_one_heap(seed):
    expected = drive(HeapTimers(), seed)
    assert drive(HostTimers(), seed) == expected
    assert sum(1 for e in expected if e[0] != "next") > 100  # timers did fire


def test_equal_times_fire_in_the_order_they_were_set_across_kinds_and_after_an_earlier_insert():
    timers = HostTimers()
    timers.set(("fetch-wait", 1), 500.0)
    timers.set(("produce-timeout", 1), 500.0)
    timers.set(("fetch-wait", 2), 900.0)
    timers.set(("fetch-wait", 3), 500.0)  # shorter than its kind's last: inserted before fetch-wait 2
    timers.set(("fetch-wait", 1), 900.0)  # set again: its first deadline no longer fires
    timers.cancel(("produce-timeout", 9))  # never set: nothing happens
    assert timers.next_at() == 500.0
    fired = []
    while (key := timers.pop_due(900.0)) is not None:
        fired.append(key)
    assert fired == [("produce-timeout", 1), ("fetch-wait", 3), ("fetch-wait", 2), ("fetch-wait", 1)]
    assert timers.next_at() is None


def test_cleared_timers_never_fire():
    timers = HostTimers()
    timers.set(("isr-check",), 10.0)
    timers.clear()
    timers.set(("hw-checkpoint",), 20.0)
    assert timers.pop_due(100.0) == ("hw-checkpoint",)
    assert timers.pop_due(100.0) is None and timers.next_at() is None
