"""sim/deadlines.py: deadlines kept in one FIFO with one simpy wake-up fire exactly
where one simpy Timeout per deadline would, also against other events of the same
millisecond, and only while their request is unanswered."""
import random

import pytest
import simpy

from sim.deadlines import DeadlineQueue


def scripted_run(exact: bool, seed: int) -> list[tuple]:
    """Two clients add deadlines at integer times while a third process schedules plain
    timeouts that land on the same milliseconds; requests get answered at random. The
    log is every firing in the order simpy processed it."""
    env = simpy.Environment()
    rng = random.Random(seed)
    log: list[tuple] = []
    pending: dict[str, set] = {"a": set(), "b": set()}
    queues = {}
    for name, delay in (("a", 30), ("b", 30)):
        queue = DeadlineQueue(env, delay, pending[name].__contains__,
                              lambda key, name=name: (pending[name].discard(key), log.append((env.now, name, key))))
        queue._exact = exact
        queues[name] = queue

    def client(name):
        for i in range(300):
            key = (name, i)
            pending[name].add(key)
            queues[name].add(key)
            if rng.random() < 0.7:  # answered before its deadline
                answer_in = rng.randrange(0, 30)
                env.timeout(answer_in).callbacks.append(lambda _e, key=key: pending[name].discard(key))
            yield env.timeout(rng.choice((0, 1, 2, 5)))

    def other():
        for i in range(400):
            env.timeout(rng.choice((0, 10, 29, 30, 31))).callbacks.append(lambda _e, i=i: log.append((env.now, "x", i)))
            yield env.timeout(rng.choice((1, 2, 3)))

    env.process(client("a"))
    env.process(client("b"))
    env.process(other())
    env.run()
    return log


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_deadlines_fire_in_the_order_of_one_timeout_per_deadline(seed):
    exact = scripted_run(True, seed)
    assert exact == scripted_run(False, seed)
    assert sum(1 for e in exact if e[1] in "ab") > 50  # some deadlines did fire
    assert len({e[0] for e in exact if e[1] == "x"} & {e[0] for e in exact if e[1] in "ab"}) > 10  # ties happened


def test_answered_requests_leave_no_event_in_simpys_queue():
    env = simpy.Environment()
    pending = set(range(1000))
    fired = []
    queue = DeadlineQueue(env, 100, pending.__contains__, fired.append)
    for key in range(1000):
        queue.add(key)
    pending.difference_update(range(999))  # all but the last answered
    assert len(env._queue) == 1  # only the earliest deadline waits in simpy
    env.run()
    assert fired == [999] and env.now == 100 and len(queue) == 0


def test_a_deadline_added_while_one_fires_is_kept():
    env = simpy.Environment()
    pending = {1}
    fired = []

    def fire(key):
        pending.discard(key)
        fired.append((env.now, key))
        if key == 1:  # a retry, sent from the timeout itself
            pending.add(2)
            queue.add(2)
    queue = DeadlineQueue(env, 50, pending.__contains__, fire)
    queue.add(1)
    env.run()
    assert fired == [(50, 1), (100, 2)]


def test_a_negative_delay_is_refused():
    with pytest.raises(ValueError):
        DeadlineQueue(simpy.Environment(), -1, lambda key: True, lambda key: None)
