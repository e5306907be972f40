"""The checkers confirm most records in bulk against a gapless final read and look
value by value only at the rest. A final read listed out of order has no such fast
path, so on random histories both must give the same figures."""
import random

import pytest

from analysis.checkers import CHECKER_NAMES, GROUPS_ONLY, run_checkers
from analysis.history import build_history
from analysis.trace import Event

from tests.analysis.builders import HistoryBuilder

PARTITIONS = ("t-0", "t-1", "t-2")


def random_history(seed: int) -> HistoryBuilder:
    """Sends, polls by two consumers and a final read, with lost, replaced, duplicated,
    skipped and repeated records planted at random."""
    rng = random.Random(seed)
    h = HistoryBuilder()
    logs = {p: [] for p in PARTITIONS}
    positions = {(c, p): 0 for c in range(2) for p in PARTITIONS}
    for t in range(1, 400):
        if rng.random() < 0.25:
            consumer = rng.randrange(2)
            records = {}
            for p in PARTITIONS:
                start = max(0, positions[(consumer, p)] + rng.choice([0, 0, 0, 0, 1, 2, -1]))
                got = [[o, logs[p][o]] for o in range(start, min(len(logs[p]), start + rng.randint(0, 4)))]
                if got:
                    records[p] = got
                    positions[(consumer, p)] = got[-1][0] + 1
            h.poll(t, records, {p: len(logs[p]) - rng.choice([0, 0, 0, 1]) for p in PARTITIONS},
                   process=f"consumer-{consumer}")
            continue
        p = rng.choice(PARTITIONS)
        values = [f"v{t}.{i}" for i in range(rng.randint(1, 3))]
        fate = rng.random()
        if fate < 0.1:
            if fate < 0.02:  # appended although the client called it failed
                logs[p].extend(values)
            h.send(t, values, outcome="fail", partition=p, error="NOT_ENOUGH_REPLICAS")
        elif fate < 0.2:
            logs[p].extend(values)
            h.send(t, values, outcome="info", partition=p, error="REQUEST_TIMED_OUT")
        else:
            h.send(t, values, offset=len(logs[p]), partition=p, acks=rng.choice([-1, 1]))
            logs[p].extend(values)
    for p in PARTITIONS:
        log = logs[p]
        for _ in range(rng.randint(0, 3)):
            if log:
                log[rng.randrange(len(log))] = f"replaced{rng.random()}"
        if log and rng.random() < 0.5:
            log.append(rng.choice(log))
        if log and rng.random() < 0.3:
            del log[rng.randrange(len(log)):]
        h.read(1000, [[o, v] for o, v in enumerate(log)], partition=p, high_watermark=len(log),
               complete=rng.random() < 0.8)
    return h


def shuffled_reads(events: list[Event], seed: int) -> list[Event]:
    rng = random.Random(seed)
    out = []
    for e in events:
        if e.node == "reader" and e.get("records"):
            records = list(e["records"])
            rng.shuffle(records)
            e = Event(e.t_ms, e.node, e.type, {**e.fields, "records": records})
        out.append(e)
    return out


@pytest.mark.parametrize("seed", range(40))
def test_fast_and_slow_paths_agree_on_random_histories(seed):
    h = random_history(seed)
    fast = run_checkers(h.history())
    slow = run_checkers(build_history(shuffled_reads(h.events, seed)))
    # every result, but the group checkers' of a history without groups (GROUPS_ONLY)
    assert list(fast) == list(slow) == [n for n in CHECKER_NAMES if n not in GROUPS_ONLY]
    assert {n: fast[n].value for n in fast} == {n: slow[n].value for n in slow}
    assert {n: fast[n].details for n in fast if n != "duplicates"} == \
           {n: slow[n].details for n in slow if n != "duplicates"}


def test_random_histories_do_plant_anomalies():
    totals = {n: 0 for n in CHECKER_NAMES}
    for seed in range(40):
        for name, result in run_checkers(random_history(seed).history()).items():
            totals[name] += bool(result.value) if isinstance(result.value, dict) else result.value > 0
    for name in ("lost_writes", "duplicates", "inconsistent_offsets", "consumer_non_monotonic", "consumer_skips",
                 "consumer_truncated_reads", "unseen", "hw_regressions", "failed_but_present"):
        assert totals[name] >= 5, (name, totals)
