"""Log compaction on the real broker (issue 22, compaction slice 3): one ``isrlab serve``
with log.cleanup.policy=compact cleans its v2 segment files (Kafka 2.7.0
core/src/main/scala/kafka/log/LogCleaner.scala, CleanerThread.doWork; Log.replaceSegments),
confluent-kafka and kafka-python read one value per key from the start, kcat -Z tombstones are honoured,
a keyless record is refused (LogValidator.validateKey: INVALID_RECORD), and a kill -9
at random points of cleaning recovers to the old or the cleaned segments
(Log.loadSegments, completeSwapOperations)."""
from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CTopicPartition

from broker_core.cleaned_batch import CleanedBatch
from broker_core.records import RecordBatch, Records
from real_io.protocol import compression, record_batch
from tests.real_io.serve_process import ServeProcess

CONFIG = {"log.segment.bytes": 1500, "log.cleanup.policy": "compact", "log.cleaner.backoff.ms": 100,
          "log.cleaner.min.cleanable.ratio": 0.01, "log.cleaner.delete.retention.ms": 0,
          "log.cleaner.step.records": 20}
KEYS = 10


def _cleanings(trace) -> list[dict]:
    if not trace.exists():
        return []
    return [e for e in map(json.loads, trace.read_text().splitlines()) if e["type"] == "segments_cleaned"]


def _produce(bootstrap: str, count: int, start: int = 0, odd_keys_only: bool = False) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "acks": "all"})
    for i in range(start, start + count):
        key = i % KEYS | 1 if odd_keys_only else i % KEYS
        producer.produce("t", key=b"k%d" % key, value=b"v%04d" % i + b"x" * 40)
        if i % 50 == 49:
            producer.flush(10)
    assert producer.flush(10) == 0


def _read_all(bootstrap: str, timeout_s: float = 15) -> list[tuple[int, bytes, bytes | None]]:
    """Every record of t-0 from the beginning to the end (librdkafka's partition EOF)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "isrlab-unused", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([CTopicPartition("t", 0, OFFSET_BEGINNING)])
    records = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return records
                continue  # the coordinator lookup's refusal (the group is never joined)
            records.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    raise AssertionError(f"no end of partition within {timeout_s} s ({len(records)} records)")


def _read_all_kafka_python(bootstrap: str, end: int, timeout_s: float = 15) -> list[tuple[int, bytes, bytes | None]]:
    """The same read with kafka-python: from the beginning up to offset ``end``."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = KTopicPartition("t", 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    records: list[tuple[int, bytes, bytes | None]] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and consumer.position(tp) < end:
            for batch in consumer.poll(timeout_ms=200).values():
                records += [(r.offset, r.key, r.value) for r in batch]
    finally:
        consumer.close()
    assert _reached(records, end), f"kafka-python read {len(records)} records, not up to {end}"
    return records


def _reached(records, end: int) -> bool:
    return bool(records) and records[-1][0] == end - 1


def _wait_for_cleaning(trace, past_offset: int = 0, timeout_s: float = 30) -> None:
    """Until a cleaning covered offsets up to ``past_offset``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(c["end_offset"] > past_offset for c in _cleanings(trace)):
            return
        time.sleep(0.2)
    raise AssertionError(f"no cleaning past offset {past_offset}: {_cleanings(trace)}")


@pytest.mark.slow
def test_a_compacted_topic_read_from_the_start_after_cleaning_shows_the_last_value_per_key(tmp_path):
    trace = tmp_path / "trace.jsonl"
    broker = ServeProcess(tmp_path / "data", trace=trace, config=CONFIG).start()
    try:
        _produce(broker.bootstrap, 400)
        _wait_for_cleaning(trace)
        time.sleep(1)
        records = _read_all(broker.bootstrap)
        offsets = [offset for offset, _, _ in records]
        assert offsets == sorted(offsets) and len(records) < 400
        last = {}
        for _, key, value in records:
            last[key] = value
        # The active segment is never cleaned: its keys may appear more than once, but
        # the last value read of each key is the last one written.
        assert last == {b"k%d" % k: b"v%04d" % (390 + k) + b"x" * 40 for k in range(KEYS)}
        # kafka-python reads the same cleaned log: the same records at the same offsets
        assert _read_all_kafka_python(broker.bootstrap, offsets[-1] + 1) == records
        # A keyless record: INVALID_RECORD (LogValidator.validateKey, 2.7.0).
        errors = []
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "retries": 0})
        producer.produce("t", value=b"no key", on_delivery=lambda err, msg: errors.append(err))
        producer.flush(10)
        assert errors and errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD
    finally:
        assert broker.stop() == 0, (tmp_path / "data.stderr").read_text()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_tombstones_are_honoured_by_the_cleaner(tmp_path):
    """kcat -Z sends an empty value as NULL: a tombstone. With delete.retention.ms 0 the
    cleaner removes the key once a later cleaning has the tombstone below its horizon."""
    trace = tmp_path / "trace.jsonl"
    broker = ServeProcess(tmp_path / "data", trace=trace, config=CONFIG).start()
    try:
        _produce(broker.bootstrap, 200)
        lines = "".join(f"k{k}:\n" for k in range(0, KEYS, 2))  # tombstones for the even keys
        subprocess.run(["kcat", "-P", "-b", broker.bootstrap, "-t", "t", "-K", ":", "-Z"], input=lines.encode(),
                       check=True, timeout=30)
        _produce(broker.bootstrap, 300, start=200, odd_keys_only=True)  # more segments: the tombstones get cleaned
        _wait_for_cleaning(trace, 210)  # past the tombstones (offsets 200-204)
        time.sleep(1)
        last = {}
        for _, key, value in _read_all(broker.bootstrap):
            last[key] = value
        for k in range(0, KEYS, 2):  # a tombstoned key: gone, or its tombstone (never an old value)
            assert last.get(b"k%d" % k) is None, k
        assert all(last[b"k%d" % k] is not None for k in range(1, KEYS, 2))
    finally:
        assert broker.stop() == 0, (tmp_path / "data.stderr").read_text()


SEGMENT_FILE = re.compile(r"^(\d{20})\.log(\.cleaned|\.swap|\.deleted)?$")


def _segment_files(data_dir) -> dict[str, bytes]:
    """t-0's segment files by name, suffixed or not (indexes and temporary files left out)."""
    return {p.name: p.read_bytes() for p in (data_dir / "t-0").iterdir() if SEGMENT_FILE.match(p.name)}


def _by_base(files: dict[str, bytes], suffixes: tuple[str, ...]) -> dict[int, bytes]:
    out = {}
    for name, data in files.items():
        match = SEGMENT_FILE.match(name)
        if match and (match.group(2) or "") in suffixes:
            out[int(match.group(1))] = data
    return out


def _offset_ranges(data: bytes) -> list[tuple[int, int]]:
    """(base offset, next offset) of each batch of a segment file."""
    out, position = [], 0
    while position < len(data):
        batch, position = record_batch.decode_stored_batch(data, position)
        out.append((batch.base_offset, batch.next_offset))
    return out


def _swap_outcome(before: dict[str, bytes], after: dict[str, bytes]) -> str:
    """What recovery made of the files a kill -9 left (Log.replaceSegments' steps:
    ``.cleaned`` written, the replaced segments renamed ``.deleted``, ``.cleaned`` renamed
    ``.swap`` (the commit point), the ``.deleted`` removed, ``.swap`` renamed ``.log``):
    "none" when no group was being swapped, "old" when the kill came before the commit
    point (every replaced segment back, byte for byte), "new" after it (the cleaned
    segment alone in their place). Anything else, a mix, fails."""
    assert set(after) == {n for n in after if n.endswith(".log")}, f"recovery left {sorted(after)}"
    recovered = _by_base(after, ("",))
    logs = _by_base(before, ("",))
    old = {**logs, **_by_base(before, (".deleted",))}
    new = _by_base(before, (".cleaned", ".swap"))
    if not new:  # the kill met no swap: recovery changes no segment
        assert not _by_base(before, (".deleted",)), sorted(before)
        assert recovered == logs, "recovery changed segments no swap touched"
        return "none"
    assert len(new) == 1, f"two groups swapped at once: {sorted(before)}"
    [(base, cleaned)] = new.items()
    if _by_base(before, (".cleaned",)):
        assert recovered == old, f"group {base}: killed before its .swap, yet not the old segments"
        return "old"
    assert recovered == {**logs, base: cleaned}, f"group {base}: killed after its .swap, yet not the new segment"
    following = min((b for b in recovered if b > base), default=None)
    assert following is None or all(end <= following for _, end in _offset_ranges(cleaned)), (base, following)
    return "new"


def _cleaning_under_way(trace, first_line: int) -> bool:
    """Whether the broker's last cleaning event since ``first_line`` of the trace (this
    process's) is a cleaning_started without its segments_cleaned or cleaning_aborted."""
    lines = trace.read_text().splitlines()[first_line:] if trace.exists() else []
    kinds = [e["type"] for e in map(json.loads, lines)
             if e["type"] in ("cleaning_started", "segments_cleaned", "cleaning_aborted")]
    return bool(kinds) and kinds[-1] == "cleaning_started"


def _lines(trace) -> int:
    return len(trace.read_text().splitlines()) if trace.exists() else 0


@pytest.mark.slow
def test_kill_9_at_random_points_of_cleaning_recovers_old_or_cleaned_segments(tmp_path):
    """Log.replaceSegments and loadSegments (2.7.0): a kill -9 at a random moment of
    cleaning, several rounds. After each restart (its cleaner off, so that the files are
    what recovery made of the kill's) the group being swapped is wholly the old segments
    or wholly the new one, every other segment is unchanged, every record read is one
    written at its own offset, and each key's last value is its last write. One record a
    cleaner step makes a cleaning last long enough that some kills land inside one: the
    broker's trace says which (cleaning_started without segments_cleaned)."""
    rng = random.Random(22)
    trace = tmp_path / "trace.jsonl"
    data = tmp_path / "data"
    config = {**CONFIG, "log.cleaner.step.records": 1, "log.cleaner.min.cleanable.ratio": 0.3}
    written: dict[int, tuple[bytes, bytes]] = {}
    produced = in_cleaning = 0
    outcomes = []
    for _round in range(8):
        first_line = _lines(trace)
        broker = ServeProcess(data, trace=trace, config=config).start()
        try:
            _produce(broker.bootstrap, 150, start=produced)
            produced += 150
            time.sleep(rng.uniform(0.0, 0.5))
        finally:
            broker.kill()
        in_cleaning += _cleaning_under_way(trace, first_line)
        before = _segment_files(data)
        broker = ServeProcess(data, trace=trace, config={**config, "log.cleaner.enable": "false"}).start()
        try:
            records = _read_all(broker.bootstrap)
        finally:
            assert broker.stop() == 0, (tmp_path / "data.stderr").read_text()
        outcomes.append(_swap_outcome(before, _segment_files(data)))
        values = {}
        for offset, key, value in records:
            assert int(value[1:5]) == offset or offset not in written or written[offset] == (key, value)
            values[key] = value
        assert values == {b"k%d" % (i % KEYS): b"v%04d" % i + b"x" * 40 for i in range(produced - KEYS, produced)}
        assert [o for o, _, _ in records] == sorted(o for o, _, _ in records)
        written.update((o, (k, v)) for o, k, v in records)
    print(f"kills during a cleaning: {in_cleaning} of 8; swaps met: {outcomes}")
    assert _cleanings(trace), "the brokers never finished a cleaning"
    assert in_cleaning >= 1, f"no kill landed during a cleaning ({outcomes})"


def _segment(base: int, count: int, step: int = 1) -> bytes:
    """A v2 segment of one batch holding offsets base, base + step, ... (a gap: cleaned)."""
    offsets = [base + i * step for i in range(count)]
    records = Records([f"v{o}" for o in offsets], [f"k{o}" for o in offsets])
    if step == 1:
        return record_batch.encode_batch(RecordBatch(base, 0, records), compression.NONE)
    return record_batch.encode_cleaned_batch(CleanedBatch(base, offsets[-1] + 1, 0, offsets, records))


def test_the_swap_check_tells_old_and_new_from_a_mix():
    """_swap_outcome itself, for the group [0, 10] whose cleaned segment holds offsets up
    to 18: a kill before the commit point (``.cleaned``, 10 already ``.deleted``) and one
    after it (``.swap``, both ``.deleted``)."""
    name = "{:020d}.log{}".format
    old0, old10, old20, cleaned = _segment(0, 10), _segment(10, 10), _segment(20, 5), _segment(0, 10, step=2)
    as_old = {name(0, ""): old0, name(10, ""): old10, name(20, ""): old20}
    as_new = {name(0, ""): cleaned, name(20, ""): old20}
    mixed = {name(0, ""): cleaned, name(10, ""): old10, name(20, ""): old20}  # a replaced segment came back
    before_commit = {name(0, ""): old0, name(10, ".deleted"): old10, name(20, ""): old20, name(0, ".cleaned"): cleaned}
    after_commit = {name(0, ".deleted"): old0, name(10, ".deleted"): old10, name(20, ""): old20,
                    name(0, ".swap"): cleaned}
    assert _swap_outcome(before_commit, as_old) == "old"
    assert _swap_outcome(after_commit, as_new) == "new"
    assert _swap_outcome(as_old, as_old) == "none"
    wrong = [(before_commit, as_new), (before_commit, mixed), (before_commit, {name(0, ""): old0, name(20, ""): old20}),
             (after_commit, as_old), (after_commit, mixed), (after_commit, {name(0, ""): cleaned}),
             (after_commit, {**as_new, name(0, ".swap"): cleaned}), (as_old, as_new)]
    for before, after in wrong:
        with pytest.raises(AssertionError):
            _swap_outcome(before, after)
