"""Kafka's windowed rate and quota check, step for step, with time given by the caller.

The client quotas and the replication throttles of Kafka 2.7.0 all measure usage with the
metrics library of clients/src/main/java/org/apache/kafka/common/metrics: a ``Sensor``
records a value into a ``Rate`` over a ``WindowedSum`` (a ``SampledStat``), then checks
the rate against the quota of its ``MetricConfig`` (``Sensor.checkQuotas``). Every detail
that changes a throttle time is kept, because a checker compares the core with Kafka:

- samples are not aligned to a clock: a sample opens at the time of the record that
  found the current one complete (``SampledStat.record`` / ``advance``), and the ring of
  ``samples`` slots is reused in order;
- a sample whose start is ``samples * window`` or more in the past is reset to *now*
  with nothing in it when the rate is read (``purgeObsoleteSamples``), so reading
  changes the state; so does asking a fresh stat for its oldest sample, which creates one
  (``SampledStat.oldest``);
- the elapsed time divides the sum: ``Rate.windowSize`` is the time since the oldest
  sample's start, padded up to ``samples - 1`` whole windows while the stat is young;
  ``SimpleRate`` (the replication throttles) takes at least one window instead.

Arithmetic is Java's: values and rates are doubles (Python floats, the same IEEE
operations in the same order), a division by zero gives an infinity or NaN rather than
an exception, and ``Math.round`` then ``Long.toInt`` turn a throttle into an int.
"""
from __future__ import annotations

import math

JAVA_LONG_MAX = 2**63 - 1
JAVA_LONG_MIN = -(2**63)


def java_divide(a: float, b: float) -> float:
    """Java's double division: x/0.0 is an infinity of x's sign, 0/0 (and NaN/0) is NaN."""
    if b != 0.0:
        return a / b
    if a != a or a == 0.0:
        return math.nan
    negative = (a < 0.0) != (math.copysign(1.0, b) < 0.0)
    return -math.inf if negative else math.inf


def java_round(x: float) -> int:
    """Java's ``Math.round(double)``: the nearest long, halves up; NaN is 0 and values
    beyond the long range saturate (so an infinite throttle becomes Long.MAX_VALUE)."""
    if x != x:
        return 0
    if x >= 9.223372036854775807e18:
        return JAVA_LONG_MAX
    if x <= -9.223372036854775808e18:
        return JAVA_LONG_MIN
    floor = math.floor(x)
    # x - floor(x) is exact for a double, so this is floor(x + 1/2) without the rounding
    # error of adding 0.5 (Java 7 fixed Math.round(0.49999999999999994) the same way).
    return int(floor) + (1 if x - floor >= 0.5 else 0)


def java_long_to_int(value: int) -> int:
    """Scala's ``Long.toInt``: the low 32 bits, as a signed int (it wraps, it does not clamp)."""
    low = value & 0xFFFFFFFF
    return low - 2**32 if low >= 2**31 else low


class RateConfig:
    """A ``MetricConfig`` as the quota managers build it: ``samples`` windows of
    ``window_ms`` and an upper bound (``Quota.upperBound``), or ``bound`` None for a
    metric with no quota (a replication throttle never set). The event window is Long.MAX_VALUE
    in every quota config, so a sample completes by time only."""
    __slots__ = ("samples", "window_ms", "bound")

    def __init__(self, samples: int, window_ms: int, bound: float | None):
        if samples < 1 or window_ms < 1:
            raise ValueError(f"a rate needs at least one sample of at least 1 ms, not {samples} x {window_ms} ms")
        self.samples = samples
        self.window_ms = window_ms
        self.bound = bound

    def with_bound(self, bound: float | None) -> "RateConfig":
        return RateConfig(self.samples, self.window_ms, bound)

    def acceptable(self, value: float) -> bool:
        """``Quota.acceptable`` of an upper bound (NaN is never acceptable)."""
        return self.bound is None or value <= self.bound


class Sample:
    """One window of a ``SampledStat``: when it (last) started and the sum recorded in it."""
    __slots__ = ("start_ms", "value", "events")

    def __init__(self, start_ms: int):
        self.start_ms = start_ms
        self.value = 0.0
        self.events = 0

    def reset(self, now_ms: int) -> None:
        self.start_ms = now_ms
        self.value = 0.0
        self.events = 0

    def is_complete(self, now_ms: int, config: RateConfig) -> bool:
        return now_ms - self.start_ms >= config.window_ms


class WindowedSum:
    """``SampledStat`` with ``WindowedSum``'s update and combine: a ring of samples."""
    __slots__ = ("samples", "current")

    def __init__(self) -> None:
        self.samples: list[Sample] = []
        self.current = 0

    def record(self, config: RateConfig, value: float, now_ms: int) -> None:
        sample = self._current(now_ms)
        if sample.is_complete(now_ms, config):
            sample = self._advance(config, now_ms)
        sample.value += value
        sample.events += 1

    def _advance(self, config: RateConfig, now_ms: int) -> Sample:
        self.current = (self.current + 1) % config.samples
        if self.current >= len(self.samples):
            sample = Sample(now_ms)
            self.samples.append(sample)
            return sample
        sample = self.samples[self.current]
        sample.reset(now_ms)
        return sample

    def _current(self, now_ms: int) -> Sample:
        if not self.samples:
            self.samples.append(Sample(now_ms))
        return self.samples[self.current]

    def oldest(self, now_ms: int) -> Sample:
        """The sample with the earliest start; a stat with none gets one started now."""
        if not self.samples:
            self.samples.append(Sample(now_ms))
        oldest = self.samples[0]
        for sample in self.samples[1:]:
            if sample.start_ms < oldest.start_ms:
                oldest = sample
        return oldest

    def purge_obsolete(self, config: RateConfig, now_ms: int) -> None:
        expire_age = config.samples * config.window_ms
        for sample in self.samples:
            if now_ms - sample.start_ms >= expire_age:
                sample.reset(now_ms)

    def measure(self, config: RateConfig, now_ms: int) -> float:
        self.purge_obsolete(config, now_ms)
        total = 0.0
        for sample in self.samples:
            total += sample.value
        return total


class Rate:
    """Kafka's ``Rate`` in units per second (``Rate()`` defaults to TimeUnit.SECONDS), or
    ``SimpleRate`` when ``simple``: the replication throttles' rate."""
    __slots__ = ("stat", "simple")

    def __init__(self, simple: bool = False):
        self.stat = WindowedSum()
        self.simple = simple

    def record(self, config: RateConfig, value: float, now_ms: int) -> None:
        self.stat.record(config, value, now_ms)

    def measure(self, config: RateConfig, now_ms: int) -> float:
        total = self.stat.measure(config, now_ms)
        return java_divide(total, self.window_size(config, now_ms) / 1000.0)

    def window_size(self, config: RateConfig, now_ms: int) -> int:
        """The elapsed time the sum is divided by, in ms (``Rate.windowSize``,
        ``SimpleRate.windowSize``)."""
        self.stat.purge_obsolete(config, now_ms)
        elapsed = now_ms - self.stat.oldest(now_ms).start_ms
        if self.simple:
            return max(elapsed, config.window_ms)
        full_windows = elapsed // config.window_ms
        min_full_windows = config.samples - 1
        if full_windows < min_full_windows:
            elapsed += (min_full_windows - full_windows) * config.window_ms
        return elapsed


class Violation:
    """A ``QuotaViolationException``: the rate measured and the bound it exceeded."""
    __slots__ = ("value", "bound")

    def __init__(self, value: float, bound: float):
        self.value = value
        self.bound = bound


class QuotaSensor:
    """A ``Sensor`` holding one quota metric: a ``Rate`` and the ``MetricConfig`` that the
    quota managers replace in place when a quota changes (``KafkaMetric.config``)."""
    __slots__ = ("rate", "config", "last_record_ms")

    def __init__(self, config: RateConfig, now_ms: int, simple: bool = False):
        self.rate = Rate(simple)
        self.config = config
        self.last_record_ms = now_ms  # Sensor's lastRecordTime starts at its creation

    def record(self, value: float, now_ms: int, check_quotas: bool) -> Violation | None:
        """``Sensor.record(value, timeMs, checkQuotas)``: record first, then check the
        quota at the same time; the violation is returned rather than thrown."""
        if value != value or value in (math.inf, -math.inf):
            raise ValueError(f"a quota sensor records finite values, not {value}")
        self.last_record_ms = now_ms
        self.rate.record(self.config, value, now_ms)
        return self.check(now_ms) if check_quotas else None

    def check(self, now_ms: int) -> Violation | None:
        """``Sensor.checkQuotas(timeMs)``: the rate measured now against the bound."""
        if self.config.bound is None:
            return None
        value = self.rate.measure(self.config, now_ms)
        if self.config.acceptable(value):
            return None
        return Violation(value, self.config.bound)

    def measure(self, now_ms: int) -> float:
        return self.rate.measure(self.config, now_ms)

    def throttle_time(self, violation: Violation, now_ms: int) -> int:
        """``QuotaUtils.throttleTime``: X = (O - T) / T * W, rounded (a long). If O is the
        observed rate over the window W and T the quota, waiting X more brings
        O * W / (W + X) down to T. W is the same ``windowSize`` the rate used."""
        difference = violation.value - violation.bound
        window = self.rate.window_size(self.config, now_ms)
        return java_round(java_divide(difference, violation.bound) * window)
