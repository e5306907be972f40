"""The floor under bench/sim_speed.py: the benchmark's messages with no broker logic.

Each linger, the producer sends one request per broker. The request carries that
broker's two partitions' batches of 100-byte records. Every request then costs what an
acks=all round trip costs in any faithful model of Kafka: six deliveries through simpy,
with the same latency and jitter as the simulated network:

1. the produce request;
2. the leader's two fetch responses (its followers' fetches wait for new data);
3. the followers' two next fetches, which carry their new log end offsets;
4. the acknowledgement, once the high watermark has passed the batches.

The leader builds and encodes each batch as `broker_core.records` does. The trace gets
the lines a real run writes per batch: the producer's ``invoke`` and ``ok``, and the
leader's ``high_watermark_advanced``. Everything else is left out: leader epochs, the
ISR, delayed operations, the disk, timeouts, request objects, client retries, the
coordination service and the checks a broker makes.

So no implementation on CPython and simpy that writes this trace and stores batches as
bytes can run the benchmark faster than this does. sim_speed.py prints the floor beside
each real run.

Run alone, it also shows the floor without the trace lines and without the encoding.

    .venv/bin/python bench/sim_floor.py [--seconds 20] [--linger-ms 10,100]
"""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

import simpy

from analysis.trace import TraceWriter
from broker_core.records import RecordBatch, Records
from sim.world import collector_tuned_for_runs

BROKERS = (1, 2, 3)
PARTITIONS = 6  # partition p is led by broker p % 3 + 1; the other two follow it
RATE = 5000
RECORD_BYTES = 100


def floor_run(seconds: int, linger_ms: int, latency_ms: float = 1.0, jitter_ms: float = 0.5,
              trace: bool = True, encode: bool = True) -> dict:
    """One floor run; returns simulated seconds and wall seconds (trace written to a file).
    ``trace`` and ``encode`` False leave out the trace lines or the batch encoding, to
    show what each costs."""
    env = simpy.Environment()
    rng = random.Random(1)
    log_end = {(p, b): 0 for p in range(PARTITIONS) for b in BROKERS}
    high_watermark = dict.fromkeys(range(PARTITIONS), 0)
    waiting: dict[int, list[tuple[int, int]]] = {p: [] for p in range(PARTITIONS)}  # (end offset, op)
    per_batch = max(1, RATE * linger_ms // 1000 // PARTITIONS)
    led = {b: [p for p in range(PARTITIONS) if p % 3 + 1 == b] for b in BROKERS}
    acknowledged = 0

    with tempfile.TemporaryDirectory() as tmp, \
            open(Path(tmp) / "trace.jsonl", "w", encoding="utf-8", buffering=1 << 20) as stream:
        write = TraceWriter(stream, "floor", 1, "sim").write if trace else (lambda *_: None)

        def deliver(handler, *args) -> None:
            delay = latency_ms + rng.random() * jitter_ms
            env.timeout(delay).callbacks.append(lambda _event: handler(*args))

        def producer():
            sent = 0
            while env.now < seconds * 1000:
                yield env.timeout(linger_ms)
                for leader in BROKERS:
                    batches = {}
                    for p in led[leader]:
                        values = [f"producer-1:{sent + i}" for i in range(per_batch)]
                        sent += per_batch
                        write(int(env.now), "producer-1", "invoke", {
                            "f": "send", "op": sent, "partition": f"bench-{p}", "values": values, "acks": "all"})
                        batches[p] = (sent, Records(values, None, RECORD_BYTES))
                    deliver(produce, leader, batches)

        def produce(leader: int, batches: dict) -> None:
            appended = {}
            for p, (op, records) in batches.items():
                batch = RecordBatch(log_end[(p, leader)], 1, records)
                if encode:
                    batch.encode()
                log_end[(p, leader)] = batch.next_offset
                waiting[p].append((batch.next_offset, op))
                appended[p] = batch
            for follower in BROKERS:
                if follower != leader:
                    deliver(fetch_response, follower, leader, appended)

        def fetch_response(follower: int, leader: int, appended: dict) -> None:
            for p, batch in appended.items():
                log_end[(p, follower)] = batch.next_offset
            deliver(fetch, leader, list(appended))

        def fetch(leader: int, partitions: list) -> None:
            for p in partitions:
                hw = min(log_end[(p, b)] for b in BROKERS)
                if hw > high_watermark[p]:
                    high_watermark[p] = hw
                    write(int(env.now), f"broker-{leader}", "high_watermark_advanced",
                          {"partition": f"bench-{p}", "high_watermark": hw})
                    done = [w for w in waiting[p] if w[0] <= hw]
                    waiting[p] = [w for w in waiting[p] if w[0] > hw]
                    if done:
                        deliver(acknowledge, p, done)

        def acknowledge(p: int, done: list) -> None:
            nonlocal acknowledged
            for end, op in done:
                acknowledged += per_batch
                write(int(env.now), "producer-1", "ok",
                      {"f": "send", "op": op, "partition": f"bench-{p}", "offset": end - per_batch})

        env.process(producer())
        started = time.perf_counter()
        with collector_tuned_for_runs():
            env.run(until=seconds * 1000 + 100)  # the last acknowledgements arrive
        wall = time.perf_counter() - started
    return {"simulated_s": env.now / 1000, "wall": wall, "acknowledged": acknowledged}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--linger-ms", default="10,100", help="comma-separated producer lingers in ms")
    args = parser.parse_args()
    print("simulated s per wall s       full  no trace  no trace, no encoding")
    for linger in (int(x) for x in args.linger_ms.split(",")):
        speeds = []
        for trace, encode in ((True, True), (False, True), (False, False)):
            r = floor_run(args.seconds, linger, trace=trace, encode=encode)
            speeds.append(r["simulated_s"] / r["wall"])
        print(f"floor at linger {linger:>3} ms:  {speeds[0]:>9.1f}  {speeds[1]:>8.1f}  {speeds[2]:>21.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
