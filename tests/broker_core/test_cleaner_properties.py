"""The cleaner against a dict model, over random appends, tombstones, rolls, time and
cleanings in random step budgets.

150 examples by default (about 2 s); ISRLAB_DEEP=1 (make test-deep) runs 5000, and
ISRLAB_CLEANER_EXAMPLES=N any number (it wins over ISRLAB_DEEP)."""
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker_core.cleaner import Cleaning
from broker_core.cleaner_selection import LogToClean
from tests.broker_core.compacted_logs import MemoryCompactedLog, compacted
from tests.properties.depth import examples

EXAMPLES = int(os.environ.get("ISRLAB_CLEANER_EXAMPLES", examples(150, 5000)))
T0 = 1_000_000  # file times are never 0 (a horizon of 0 keeps every tombstone)

KEYS = ["a", "b", "c", "d"]
record = st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.sampled_from(["1", "2", "3"])))
operation = st.one_of(
    st.tuples(st.just("append"), st.lists(record, min_size=1, max_size=4)),
    st.tuples(st.just("roll")),
    st.tuples(st.just("tick"), st.integers(1, 80)),
    st.tuples(st.just("clean"), st.integers(1, 6)),
)
configs = st.fixed_dictionaries({
    "delete.retention.ms": st.sampled_from([0, 30, 1000]),
    "min.cleanable.dirty.ratio": st.sampled_from([0.0, 0.3, 0.5]),
    "segment.bytes": st.sampled_from([80, 1 << 30]),
    "min.compaction.lag.ms": st.sampled_from([0, 40]),
})


class Run:
    """The log and what the model knows: every record appended, at what time."""

    def __init__(self, overrides):
        self.log = MemoryCompactedLog(compacted(**overrides))
        self.retention_ms = overrides["delete.retention.ms"]
        self.now = T0
        self.appended: dict[int, tuple] = {}  # offset -> (key, value)
        self.written_ms: dict[int, int] = {}
        self.final: dict[str, int] = {}  # key -> offset of its last record
        self.consumer_seen: dict[int, tuple] = {}
        self.cleanings = []

    def poll(self):
        """A consumer that keeps up: reads whatever is new after each operation."""
        position = max(self.consumer_seen, default=-1) + 1
        for offset, key, value in self.log.read_all():
            if offset >= position:
                self.consumer_seen[offset] = (key, value)

    def apply(self, op):
        if op[0] == "append":
            batch = self.log.append(op[1], self.now)
            for offset, (key, value) in zip(range(batch.base_offset, batch.next_offset), op[1]):
                self.appended[offset] = (key, value)
                self.written_ms[offset] = self.now
                self.final[key] = offset
        elif op[0] == "roll":
            self.log.roll(self.now)
        elif op[0] == "tick":
            self.now += op[1]
        else:
            self.clean(op[1])
        self.poll()

    def clean(self, budget):
        log = self.log
        to_clean = log.choose(self.now)
        if to_clean is None:
            return
        active = log.segments[-1]
        active_batches = list(active.batches)
        before = log.read_all()
        cleaning = log.cleaning(to_clean)
        while not cleaning.step(budget):
            pass
        log.swap_in(cleaning)
        assert log.segments[-1] is active and all(a is b for a, b in zip(active.batches, active_batches))
        removed = {r[0] for r in before} - {r[0] for r in log.read_all()}
        assert all(offset < to_clean.first_uncleanable_offset for offset in removed)
        self.cleanings.append((to_clean, cleaning))
        self.check_again(to_clean, cleaning)

    def check_again(self, to_clean, cleaning):
        """Cleaning the same range again, with the same horizon, changes nothing."""
        log = self.log
        again = LogToClean(log.cleanable(), to_clean.first_dirty_offset, to_clean.uncleanable_offset)
        second = Cleaning(again, log, log.producer_last_offsets, delete_horizon=cleaning.delete_horizon_ms).run()
        assert [b for g in second.groups for b in g.batches] == [
            b for s in log.segments for b in s.batches if b.base_offset < second.next_dirty_offset]


def check_against_the_model(run):
    records = run.log.read_all()
    offsets = [r[0] for r in records]
    assert offsets == sorted(set(offsets))  # strictly increasing
    for offset, key, value in records:  # every survivor unchanged at its offset
        assert run.appended[offset] == (key, value)
    last_in_log = {key: offset for offset, key, _ in records}
    for key, offset in run.final.items():
        value = run.appended[offset][1]
        if value is not None:
            assert last_in_log.get(key) == offset, f"{key}: its final value is gone or an older one is last"
        elif key in last_in_log:
            assert last_in_log[key] == offset, f"{key} came back with an older value after its tombstone"
        else:  # the tombstone went: only once delete.retention.ms had passed since it was written
            assert run.written_ms[offset] <= run.now - run.retention_ms
    assert run.consumer_seen == run.appended  # a consumer that keeps up sees every record


def build(overrides, ops):
    run = Run(overrides)
    for op in ops:
        run.apply(op)
        if op[0] == "clean":
            check_against_the_model(run)
    return run


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs, st.lists(operation, max_size=40))
def test_cleaning_keeps_each_keys_final_value_and_every_offset(overrides, ops):
    run = build(overrides, ops + [("tick", 1000), ("roll",), ("append", [("z", "z")]), ("clean", 3)])
    check_against_the_model(run)


@settings(max_examples=max(EXAMPLES // 3, 10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs, st.lists(operation, max_size=30))
def test_the_same_inputs_give_the_same_log(overrides, ops):
    first, second = build(overrides, ops), build(overrides, ops)
    assert first.log.batches() == second.log.batches()
    assert first.log.checkpoint == second.log.checkpoint
