"""The workload both bindings generate: how many records a producer creates per tick,
and what their values are.

Values are ``producer-<i>:<seq>``, ``seq`` counting from 1 per producer, so every value
in a run is unique: the checkers (lost writes, duplicates, inconsistent offsets) find a
record by its value alone. A producer with ``rate`` records per second creates records
every ``linger_ms``; the fraction left over carries to the next tick, so over time the
count is ``rate`` per second whatever the tick.
"""
from __future__ import annotations


def record_value(producer: str, seq: int) -> str:
    return f"{producer}:{seq}"


def client_id(spec, role: str, index: int) -> str:
    """A workload's client.id (what client quotas name): its own, else the Java
    clients' default, ``producer-<n>`` / ``consumer-<n>`` counting from 1 (a consumer
    without a group), in both bindings."""
    return spec.client_id or f"{role}-{index + 1}"


# A real record's value is padded to the size the simulated one stands for
# (``record_bytes``: broker_core/records.py counts a simulated value as that many bytes),
# so that quotas, throttles and segment sizes see the same bytes; the readers strip it.
PADDING = "\0"


def padded_value(value: str | None, size: int) -> str | None:
    """``value`` followed by NULs up to ``size`` bytes (UTF-8); a longer value, or a
    tombstone, stays as it is."""
    if value is None:
        return None
    short = size - len(value.encode())
    return value + PADDING * short if short > 0 else value


def unpadded_value(value: str | None) -> str | None:
    """The value a reader reports: ``padded_value``'s padding removed."""
    return None if value is None else value.rstrip(PADDING)


def record_key(seq: int, keys: int) -> str:
    """A keyed workload's key of record ``seq``: ``keys`` distinct keys in turn."""
    return f"k{seq % keys}"


def record_values(producer: str, first: int, stop: int, step: int = 1) -> list[str]:
    """The values of sequence numbers ``range(first, stop, step)``."""
    prefix = producer + ":"  # one concatenation per value (compiled, a little faster than the f-string)
    return [prefix + str(seq) for seq in range(first, stop, step)]


class RecordCredit:
    """Records due per tick of ``linger_ms`` at ``rate`` records per second."""

    def __init__(self, rate: float, linger_ms: int):
        self.per_tick = rate * linger_ms / 1000.0
        self._credit = 0.0

    def take(self) -> int:
        """The records due at the next tick."""
        self._credit += self.per_tick
        count = int(self._credit)
        self._credit -= count
        return count


# How a keyed producer picks each record's key (the scenario's ``key_distribution``).
ROUND_ROBIN_KEYS = "round_robin"  # key seq % keys: every key in turn (record_key)
UNIFORM_KEYS = "uniform"  # a key drawn uniformly from the producer's seeded workload stream
KEY_DISTRIBUTIONS = (ROUND_ROBIN_KEYS, UNIFORM_KEYS)


def workload_label(producer: str) -> str:
    """The label of a producer's random stream (faults/rng.py derive): both bindings draw
    its keys and tombstones from the same stream, so the same seed sends the same records."""
    return f"workload-{producer}"


class KeyedRecords:
    """The records of a keyed or scripted producer, one per sequence number, in order:
    ``(key, value)``, ``value`` None for a tombstone.

    ``spec`` is the scenario's ProducerWorkload (duck-typed: ``keys``,
    ``key_distribution``, ``tombstone_rate``, ``records``); ``rng`` its workload stream,
    drawn from only for a uniform distribution or a tombstone rate, so that a producer with
    neither makes today's round-robin records. Generated values are ``record_value``'s, so
    every value but a tombstone stays unique; scripted records (``records:``, each with
    ``key``, ``value`` and ``at_ms``) are sent as written, each once its time has come."""

    def __init__(self, producer: str, spec, rng) -> None:
        self.producer = producer
        self.keys: int = spec.keys or 0
        self.uniform = getattr(spec, "key_distribution", ROUND_ROBIN_KEYS) == UNIFORM_KEYS
        self.tombstone_rate: float = getattr(spec, "tombstone_rate", 0.0) or 0.0
        self.script: tuple = tuple(getattr(spec, "records", None) or ())
        self._rng = rng
        self._scheduled = 0  # scripted records handed out so far

    @property
    def scripted(self) -> bool:
        return bool(self.script)

    def due(self, now_ms: float) -> int:
        """How many more scripted records are due at ``now_ms`` (ms since the run's start)."""
        count = 0
        script = self.script
        while self._scheduled + count < len(script) and script[self._scheduled + count].at_ms <= now_ms:
            count += 1
        self._scheduled += count
        return count

    def record(self, seq: int) -> tuple[str, str | None]:
        """Record ``seq`` (from 1); generated records must be asked for in order, as the
        draws from the stream are."""
        if self.script:
            scripted = self.script[seq - 1]
            return scripted.key, scripted.value
        if self.uniform:
            key = f"k{self._rng.randrange(self.keys)}"
        else:
            key = record_key(seq, self.keys)
        if self.tombstone_rate and self._rng.random() < self.tombstone_rate:
            return key, None
        return key, record_value(self.producer, seq)


def keyed_records(producer: str, spec, rng) -> KeyedRecords | None:
    """The producer's keyed records, or None for a keyless producer."""
    if spec.keys or getattr(spec, "records", None):
        return KeyedRecords(producer, spec, rng)
    return None
