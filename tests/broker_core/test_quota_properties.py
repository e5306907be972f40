"""Hypothesis over the quota rate (broker_core/quota_rate.py, quotas.py).

1. The throttle times the core gives equal those of a brute-force model of Kafka 2.7.0's
   ``Rate`` over ``SampledStat`` written here from the Java source (clients/src/main/java/
   org/apache/kafka/common/metrics/stats/Rate.java windowSize, SampledStat.java record,
   advance and purgeObsoleteSamples; core/src/main/scala/kafka/utils/QuotaUtils.scala
   throttleTime): the whole event list is replayed from scratch at every request.
2. A client that waits out every throttle time stays within quota, over every span of
   up to (samples - 1) windows, by the tolerance derived in docs/quotas.md:
   bytes(span) <= T * (span + samples * window + 0.5 ms) + M, M its largest request.
"""
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from broker_core.quotas import ClientQuotaManager, QuotaEntity
from tests.properties.depth import examples

T0 = 5_000_000


def model_throttle(events, samples, window_ms, bound):
    """Kafka's throttle for the last of ``events`` ((time ms, value) pairs, times not
    decreasing), each recorded then checked at its time, computed from the list alone."""
    slots = []  # ring slots: [start_ms, total]
    current = 0
    rate = window = None
    for t, value in events:
        if not slots:
            slots.append([t, 0])
        if t - slots[current][0] >= window_ms:  # the current sample is complete: advance
            current = (current + 1) % samples
            if current == len(slots):
                slots.append([t, 0])
            else:
                slots[current] = [t, 0]
        slots[current][1] += value
        for slot in slots:  # the check reads the rate: obsolete samples restart now, empty
            if t - slot[0] >= samples * window_ms:
                slot[0], slot[1] = t, 0
        elapsed = t - min(slot[0] for slot in slots)
        full_windows = elapsed // window_ms  # padded to samples - 1 whole windows while young
        window = elapsed + max(samples - 1 - full_windows, 0) * window_ms
        total = sum(slot[1] for slot in slots)
        rate = total / (window / 1000.0) if window else (math.inf if total else math.nan)
    if rate <= bound:
        return 0
    x = (rate - bound) / bound * window
    return 0 if x != x else math.floor(x + 0.5)


events_strategy = st.lists(
    st.tuples(st.one_of(st.integers(0, 300), st.integers(0, 30_000)), st.integers(0, 50_000)),
    min_size=1, max_size=40)


@settings(max_examples=examples(300), deadline=None)
@given(events_strategy, st.integers(1, 12), st.integers(1, 3), st.integers(1, 20_000))
def test_throttle_times_match_the_brute_force_model(steps, samples, window_seconds, quota):
    manager = ClientQuotaManager("producer_byte_rate", samples, window_seconds)
    manager.update_quota(QuotaEntity(None, "c"), float(quota))
    events, now = [], T0
    for gap, value in steps:
        now += gap
        events.append((now, value))
        got = manager.record_and_throttle("u", "c", value, now)
        assert got == model_throttle(events, samples, window_seconds * 1000, quota), events


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.integers(1, 20_000), st.integers(0, 3_000)), min_size=1, max_size=80),
       st.integers(2, 12), st.integers(1, 2), st.integers(1_000, 50_000))
def test_a_client_that_waits_out_its_throttles_stays_within_quota(requests, samples, window_seconds, quota):
    manager = ClientQuotaManager("producer_byte_rate", samples, window_seconds)
    manager.update_quota(QuotaEntity(None, "c"), float(quota))
    sent, now = [], T0
    for size, extra_wait in requests:
        throttle = manager.record_and_throttle("u", "c", size, now)
        assert throttle >= 0
        sent.append((now, size))
        now += throttle + extra_wait
    window_ms = window_seconds * 1000
    largest = max(size for size, _ in requests)
    for i, (start, _) in enumerate(sent):
        total = 0
        for end, size in sent[i:]:
            if end - start >= (samples - 1) * window_ms:
                break
            total += size
            assert total <= quota * (end - start + samples * window_ms + 0.5) / 1000 + largest, (start, end)
