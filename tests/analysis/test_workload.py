"""The workload both bindings generate (analysis/workload.py): unique values and the
rate kept whatever the tick."""
from analysis.workload import RecordCredit, record_key, record_value, record_values


def test_values_are_unique_per_producer_and_sequence():
    assert record_value("producer-0", 7) == "producer-0:7"
    assert record_values("producer-1", 1, 8, 3) == ["producer-1:1", "producer-1:4", "producer-1:7"]
    assert record_key(13, 5) == "k3"


def test_the_rate_holds_over_time_whatever_the_tick():
    for rate, linger_ms in ((100, 10), (300, 7), (3, 200), (1000, 1)):
        credit = RecordCredit(rate, linger_ms)
        ticks = 60_000 // linger_ms  # a minute
        total = sum(credit.take() for _ in range(ticks))
        assert abs(total - rate * 60) <= 1, (rate, linger_ms, total)
