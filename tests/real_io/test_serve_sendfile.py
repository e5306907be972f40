"""A fetch is served from the segment files with sendfile: the broker neither holds
nor re-encodes the bytes it sends (issue 9's storage seam, docs/model.md)."""
from __future__ import annotations

import asyncio
import os
import signal

import pytest

from broker_core.records import RecordBatch, Records
from real_io import serve
from real_io.protocol.apis import ApiKey
from real_io.protocol.record_batch import decode_batches
from tests.real_io.test_serve_wire import WireClient, create, fetch_body, partition_of, produce_body


def test_a_fetch_is_sent_from_the_segment_file_with_sendfile(tmp_path, monkeypatch):
    """The response's records are the segment's bytes as stored (the producer's batch v2
    with its offset assigned), sent by os.sendfile from the segment file: the call is
    observed at the OS boundary, with the file it reads and the byte range."""
    calls = []
    real_sendfile = os.sendfile

    def observed(out_fd, in_fd, offset, count):
        sent = real_sendfile(out_fd, in_fd, offset, count)
        calls.append((os.readlink(f"/proc/self/fd/{in_fd}"), offset, sent))
        return sent
    monkeypatch.setattr(os, "sendfile", observed)
    data_dir = tmp_path / "data"

    def client_work(port: int) -> dict:
        client = WireClient(port)
        try:
            create(client, "sf")
            for values in (["a", "b"], ["c"]):
                batch = RecordBatch(0, -1, Records(values, [f"k-{v}" for v in values], 0, [7] * len(values), None))
                assert partition_of(client.ask(ApiKey.PRODUCE, 8, produce_body("sf", batch)))["error_code"] == 0
            return partition_of(client.ask(ApiKey.FETCH, 11, fetch_body("sf", 0, 0, 1)), inner="partition_responses")
        finally:
            client.close()

    async def main() -> tuple[int, dict]:
        loop = asyncio.get_running_loop()
        ready = loop.create_future()
        options = serve.ServeOptions(1, data_dir, port=0)
        task = asyncio.create_task(serve.serve(options, lambda host, port: ready.set_result(port)))
        port = await asyncio.wait_for(asyncio.shield(ready), 60)
        try:
            fetched = await loop.run_in_executor(None, client_work, port)
        finally:
            os.kill(os.getpid(), signal.SIGTERM)  # the serve's own handler: a controlled shutdown
        return await asyncio.wait_for(task, 60), fetched

    code, fetched = asyncio.run(main())
    assert code == 0
    segment = data_dir / "sf-0" / f"{0:020d}.log"
    stored = segment.read_bytes()
    assert fetched["record_set"] == stored
    assert [b.records.values for b in decode_batches(fetched["record_set"])] == [("a", "b"), ("c",)]
    assert [(path, offset, sent) for path, offset, sent in calls if path.endswith(".log")] == [
        (str(segment.resolve()), 0, len(stored))]


def _resident_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_the_broker_does_not_hold_the_log_in_memory(tmp_path):
    """The core keeps a header per batch, never its records (broker_core/storage.py):
    as the log grows by 96 MiB, written and read back, the broker's resident memory
    grows by a small fraction of it."""
    from tests.real_io.serve_process import ServeProcess
    broker = ServeProcess(tmp_path / "data").start()
    try:
        client = WireClient(broker.port)
        create(client, "big")
        value = "x" * (1 << 20)  # 1 MiB records, 8 to a batch
        batch = RecordBatch(0, -1, Records([value] * 8, None, 0, [1] * 8, None))
        body = produce_body("big", batch, acks=1)
        for _ in range(3):  # warm up: buffers, imports, the first segment
            assert partition_of(client.ask(ApiKey.PRODUCE, 8, body))["error_code"] == 0
        before = _resident_mb(broker.process.pid)
        for _ in range(12):
            assert partition_of(client.ask(ApiKey.PRODUCE, 8, body))["error_code"] == 0
        offset = 24
        while offset < 15 * 8:  # read it all back, 8 MiB at a time
            fetched = partition_of(client.ask(ApiKey.FETCH, 11, fetch_body("big", offset, 0, 1)),
                                   inner="partition_responses")
            offset += sum(len(b.records) for b in decode_batches(fetched["record_set"]))
        grown = _resident_mb(broker.process.pid) - before
        client.close()
        assert (tmp_path / "data" / "big-0" / f"{0:020d}.log").stat().st_size > 120 * (1 << 20)
        assert grown < 40, f"resident memory grew {grown:.0f} MiB while the log grew 96 MiB"
    finally:
        assert broker.stop() == 0


@pytest.mark.slow
def test_memory_stays_bounded_as_the_number_of_batches_grows(tmp_path):
    """Kafka 2.7.0 keeps no per-batch state for a sealed segment: LogSegment.append adds
    an offset index entry only every index.interval.bytes (OffsetIndex.append) and a
    read finds its batch by OffsetIndex.lookup and a scan of the file
    (LogSegment.translateOffset). So does this broker: 40,000 more single-record
    batches (one header each was ~200 bytes, 8 MiB, before sealed segments dropped
    theirs) leave its resident memory within 3 MiB, and reads deep in sealed segments
    still find their offsets."""
    from tests.real_io.serve_process import ServeProcess
    data_dir = tmp_path / "data"
    broker = ServeProcess(data_dir, config={"log.segment.bytes": 256 << 10}).start()
    try:
        client = WireClient(broker.port)
        client.sock.settimeout(120)  # the broker works through tens of thousands of queued requests
        create(client, "many")
        batch = RecordBatch(0, -1, Records(["x"], None, 0, [1], None))
        unanswered, answered = produce_body("many", batch, acks=0), produce_body("many", batch, acks=1)

        def produce(count: int) -> None:
            for _ in range(count):  # acks=0: no response; the acks=1 one after them answers when all are in
                client.send(ApiKey.PRODUCE, 8, unanswered)
            assert partition_of(client.ask(ApiKey.PRODUCE, 8, answered))["error_code"] == 0
        produce(10000)  # warm up: buffers, imports, the first segments
        before = _resident_mb(broker.process.pid)
        produce(40000)
        grown = _resident_mb(broker.process.pid) - before
        for offset in (0, 7777, 31313, 50001):
            fetched = partition_of(client.ask(ApiKey.FETCH, 11, fetch_body("many", offset, 0, 1)),
                                   inner="partition_responses")
            assert decode_batches(fetched["record_set"])[0].base_offset == offset
        client.close()
        logs = sorted((data_dir / "many-0").glob("*.log"))
        assert len(logs) > 10
        assert all(log.with_suffix(".index").stat().st_size > 0 for log in logs[:-1])
        assert grown < 3, f"resident memory grew {grown:.1f} MiB while the log grew by 40,000 batches"
    finally:
        assert broker.stop() == 0
