"""Stopping and starting ``isrlab serve`` on the same data directory: SIGTERM's clean
stop leaves nothing to recover, and after kill -9 in the middle of a produce load every
acknowledged record is read back."""
from __future__ import annotations

import threading
import time

from kafka import KafkaProducer

from analysis.trace import read_events
from tests.real_io.serve_process import ServeProcess
from tests.real_io.test_serve_clients import kafka_python_read


def events(trace, type_: str) -> list:
    return [e for e in read_events(trace) if e.type == type_]


def test_sigterm_stops_cleanly_and_the_next_start_recovers_nothing(tmp_path):
    trace = tmp_path / "trace.jsonl"
    broker = ServeProcess(tmp_path / "data", trace=trace).start()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", request_timeout_ms=5000)
    futures = [producer.send("kept", f"v{i}".encode()) for i in range(50)]
    producer.flush(10)
    assert [f.get(5).offset for f in futures] == list(range(50))
    producer.close(5)
    started = time.monotonic()
    assert broker.stop() == 0
    assert time.monotonic() - started < 5  # a single broker's controlled shutdown needs no retries
    assert events(trace, "controlled_shutdown_completed")
    broker = ServeProcess(tmp_path / "data", trace=trace).start()
    try:
        recovered = [e for e in events(trace, "log_recovered") if e["partition"] == "kept-0"]
        assert [(e["log_end_offset"], e["high_watermark"], e["truncated_bytes"]) for e in recovered] == [(50, 50, 0)]
        records = kafka_python_read(broker.bootstrap, "kept", 1, 50)
        assert [r.value for r in records] == [f"v{i}".encode() for i in range(50)]
    finally:
        assert broker.stop() == 0


def test_kill_9_during_a_produce_load_loses_no_acknowledged_record(tmp_path):
    """kill -9 keeps the page cache: every record acknowledged (acks=1, written before the
    answer) is there after a restart, whatever the flush settings."""
    broker = ServeProcess(tmp_path / "data").start()
    acknowledged: list[bytes] = []
    stop = threading.Event()

    def produce() -> None:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1, request_timeout_ms=1000,
                                 retries=0, linger_ms=2, max_block_ms=2000, enable_idempotence=False,
                                 delivery_timeout_ms=1500)
        i = 0
        while not stop.is_set():
            value = f"r{i}".encode()
            producer.send("load", value).add_callback(lambda _metadata, v=value: acknowledged.append(v))
            i += 1
            if i % 50 == 0:
                time.sleep(0.01)
        # Sends pending when the broker died fail by delivery.timeout.ms: unknown, not acknowledged.
        producer.close(5)

    worker = threading.Thread(target=produce)
    worker.start()
    deadline = time.monotonic() + 10
    while len(acknowledged) < 500 and time.monotonic() < deadline:
        time.sleep(0.05)
    broker.kill()
    stop.set()
    worker.join(10)
    survivors = list(acknowledged)
    assert len(survivors) >= 500
    broker = ServeProcess(tmp_path / "data").start()
    try:
        records = kafka_python_read(broker.bootstrap, "load", 1, len(survivors))
        read = {r.value for r in records}
        assert set(survivors) <= read
        assert [r.offset for r in records] == list(range(len(records)))
    finally:
        assert broker.stop() == 0


def test_a_torn_tail_is_truncated_at_restart_never_served(tmp_path):
    """A crash in the middle of a write leaves a partial batch at the end of the active
    segment: recovery's CRC scan cuts it off, and the next append takes its offset."""
    trace = tmp_path / "trace.jsonl"
    broker = ServeProcess(tmp_path / "data", trace=trace).start()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", request_timeout_ms=5000)
    for i in range(10):
        producer.send("torn", f"v{i}".encode())
    producer.flush(10)
    producer.close(5)
    assert broker.stop() == 0
    segment = tmp_path / "data" / "torn-0" / "00000000000000000000.log"
    whole = segment.read_bytes()
    torn = whole[:61] + b"\x00" * 20  # a header-sized start of a batch that never finished
    segment.write_bytes(whole + torn)
    broker = ServeProcess(tmp_path / "data", trace=trace).start()
    try:
        recovered = [e for e in events(trace, "log_recovered") if e["partition"] == "torn-0"][-1]
        assert (recovered["log_end_offset"], recovered["truncated_bytes"]) == (10, len(torn))
        assert segment.stat().st_size == len(whole)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", request_timeout_ms=5000)
        assert producer.send("torn", b"after").get(10).offset == 10
        producer.close(5)
        records = kafka_python_read(broker.bootstrap, "torn", 1, 11)
        assert [r.value for r in records] == [f"v{i}".encode() for i in range(10)] + [b"after"]
    finally:
        assert broker.stop() == 0


def test_kill_9_after_a_segment_outgrew_its_reserve_leaves_what_was_written_and_a_torn_tail_is_cut(tmp_path):
    """A segment past 4 MiB has disk blocks reserved past its end (real_io/files.py,
    FALLOC_FL_KEEP_SIZE): after kill -9 its length is what was written, no more, so
    recovery reads every acknowledged batch, cuts a torn tail as without the reserve,
    and the next append takes the next offset."""
    broker = ServeProcess(tmp_path / "data").start()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1, linger_ms=0, request_timeout_ms=5000)
    values = [bytes([i]) * 100_000 for i in range(60)]
    for value in values:
        producer.send("reserved", value).get(10)
    producer.close(5)
    broker.kill()
    segment = tmp_path / "data" / "reserved-0" / "00000000000000000000.log"
    whole = segment.read_bytes()
    assert len(whole) > 6_000_000 and segment.stat().st_blocks * 512 > len(whole) + (1 << 20)  # reserved
    segment.write_bytes(whole + whole[:61] + b"\x00" * 20)  # a batch that never finished
    broker = ServeProcess(tmp_path / "data").start()
    try:
        assert segment.stat().st_size == len(whole)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1, request_timeout_ms=5000)
        assert producer.send("reserved", b"after").get(10).offset == 60
        producer.close(5)
        records = kafka_python_read(broker.bootstrap, "reserved", 1, 61)
        assert [r.value for r in records] == values + [b"after"]
    finally:
        assert broker.stop() == 0


def test_serve_on_zookeeper_creates_its_chroot_and_kafkas_layout(zk_hosts, admin, tmp_path):
    broker = ServeProcess(tmp_path / "data", zk=zk_hosts + "/kafka-root").start()
    try:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", request_timeout_ms=5000)
        producer.send("zk-topic", b"v").get(10)
        producer.close(5)
        assert admin.get_children("/kafka-root/brokers/ids") == ["1"]
        assert admin.exists("/kafka-root/controller") and admin.exists("/kafka-root/controller_epoch")
        assert admin.exists("/kafka-root/brokers/topics/zk-topic/partitions/0/state")
        assert admin.exists("/kafka-root/config/topics/zk-topic")
    finally:
        assert broker.stop() == 0
    assert admin.get_children("/kafka-root/brokers/ids") == []  # a clean stop closes the session


def test_serve_refuses_a_busy_data_directory_and_bad_arguments(tmp_path):
    import subprocess
    import sys
    broker = ServeProcess(tmp_path / "data").start()
    try:
        second = subprocess.run([sys.executable, "-m", "isrlab", "serve", "--broker-id", "2", "--data-dir",
                                 str(tmp_path / "data"), "--listen", "127.0.0.1:0"],
                                capture_output=True, text=True, timeout=30)
        assert second.returncode == 2 and "in use by another broker" in second.stderr, second.stderr
    finally:
        assert broker.stop() == 0
    for bad in (["--listen", "nowhere"], ["--config", "num.partitions=many"], ["--config", "no.such.key=1"]):
        result = subprocess.run([sys.executable, "-m", "isrlab", "serve", "--broker-id", "1", "--data-dir",
                                 str(tmp_path / "other"), *bad], capture_output=True, text=True, timeout=30)
        assert result.returncode == 2, bad
        assert "Traceback" not in result.stderr
