"""The floor under bench/sim_speed.py: the benchmark's messages with no broker logic.

Each linger, the producer sends the requests the benchmark's partitioner causes:

- ``round_robin``: one request per broker, carrying that broker's two partitions'
  batches of 100-byte records (the tick's records spread over all six partitions);
- ``sticky`` (KIP-480, the 2.7 profile's default): one request carrying one batch, all
  of the tick's records, to the sticky partition's leader; the partition changes every
  tick (each tick closes the open batch), drawn by ``broker_core.partitioner``'s
  StickyPartitioner from a seeded generator, as the real producer draws it.

Every request then costs what an acks=all round trip costs in any faithful model of
Kafka: six deliveries through simpy, with the same latency and jitter as the simulated
network:

1. the produce request;
2. the leader's two fetch responses (its followers' fetches wait for new data), each
   with the request's batches;
3. the followers' two next fetches, which carry their new log end offsets;
4. the acknowledgement, once the high watermark has passed the batches.

The leader builds and encodes each batch as the core does (`broker_core.records`,
`broker_core.segment_format`). The trace gets
the lines a real run writes per batch: the producer's ``invoke`` and ``ok``, and the
leader's ``high_watermark_advanced``. Everything else is left out: leader epochs, the
ISR, delayed operations, the disk, timeouts, request objects, client retries, the
coordination service and the checks a broker makes.

So no implementation on CPython and simpy that writes this trace and stores batches as
bytes can run the benchmark faster than this does. sim_speed.py prints the floor beside
each real run.

Run alone, it also shows the floor without the trace lines and without the encoding.

    .venv/bin/python bench/sim_floor.py [--seconds 20] [--linger-ms 10,100] [--partitioner round_robin,sticky]
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
from broker_core.partitioner import PARTITIONERS, StickyPartitioner
from broker_core.records import RecordBatch, Records
from broker_core.segment_format import encode_batch
from sim.world import collector_tuned_for_runs

BROKERS = (1, 2, 3)
PARTITIONS = 6  # partition p is led by broker p % 3 + 1; the other two follow it
RATE = 5000
RECORD_BYTES = 100


def tick_batches(partitioner: str, linger_ms: int, sticky: StickyPartitioner) -> list[tuple[int, int]]:
    """(partition, records) of the batches one linger tick closes."""
    if partitioner == "sticky":
        every = list(range(PARTITIONS))
        target = sticky.on_new_batch(PARTITIONS, every, sticky.partition(PARTITIONS, every))
        return [(target, max(1, RATE * linger_ms // 1000))]
    per_batch = max(1, RATE * linger_ms // 1000 // PARTITIONS)
    return [(p, per_batch) for p in range(PARTITIONS)]


def floor_run(seconds: int, linger_ms: int, latency_ms: float = 1.0, jitter_ms: float = 0.5,
              trace: bool = True, encode: bool = True, partitioner: str = "round_robin",
              high_watermark_lines: bool = True) -> dict:
    """One floor run; returns simulated seconds, wall and CPU seconds (trace written to a file).
    ``trace`` and ``encode`` False leave out the trace lines or the batch encoding, to
    show what each costs; ``partitioner`` (round_robin or sticky) sets which requests
    each tick sends; ``high_watermark_lines`` False leaves out the high_watermark_advanced
    lines, as a scenario with ``trace_high_watermarks: false`` does."""
    if partitioner not in PARTITIONERS:
        raise ValueError(f"unknown partitioner {partitioner!r}; known: {', '.join(PARTITIONERS)}")
    env = simpy.Environment()
    rng = random.Random(1)
    sticky = StickyPartitioner(random.Random(2))
    log_end = {(p, b): 0 for p in range(PARTITIONS) for b in BROKERS}
    high_watermark = dict.fromkeys(range(PARTITIONS), 0)
    waiting: dict[int, list[tuple[int, int, int]]] = {p: [] for p in range(PARTITIONS)}  # (end, op, count)
    acknowledged = requests = 0

    with tempfile.TemporaryDirectory() as tmp, \
            open(Path(tmp) / "trace.jsonl", "w", encoding="utf-8", buffering=1 << 20) as stream:
        write = TraceWriter(stream, "floor", 1, "sim").write if trace else (lambda *_: None)

        def deliver(handler, *args) -> None:
            delay = latency_ms + rng.random() * jitter_ms
            env.timeout(delay).callbacks.append(lambda _event: handler(*args))

        def producer():
            nonlocal requests
            sent = 0
            while env.now < seconds * 1000:
                yield env.timeout(linger_ms)
                by_leader: dict[int, dict] = {}
                for p, count in tick_batches(partitioner, linger_ms, sticky):
                    values = [f"producer-1:{sent + i}" for i in range(count)]
                    sent += count
                    write(int(env.now), "producer-1", "invoke", {
                        "f": "send", "op": sent, "partition": f"bench-{p}", "values": values, "acks": "all"})
                    by_leader.setdefault(p % 3 + 1, {})[p] = (sent, Records(values, None, RECORD_BYTES))
                for leader in sorted(by_leader):
                    requests += 1
                    deliver(produce, leader, by_leader[leader])

        def produce(leader: int, batches: dict) -> None:
            appended = {}
            for p, (op, records) in batches.items():
                batch = RecordBatch(log_end[(p, leader)], 1, records)
                if encode:
                    encode_batch(batch)
                log_end[(p, leader)] = batch.next_offset
                waiting[p].append((batch.next_offset, op, len(records)))
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
                    if high_watermark_lines:
                        write(int(env.now), f"broker-{leader}", "high_watermark_advanced",
                              {"partition": f"bench-{p}", "high_watermark": hw})
                    done = [w for w in waiting[p] if w[0] <= hw]
                    waiting[p] = [w for w in waiting[p] if w[0] > hw]
                    if done:
                        deliver(acknowledge, p, done)

        def acknowledge(p: int, done: list) -> None:
            nonlocal acknowledged
            for end, op, count in done:
                acknowledged += count
                write(int(env.now), "producer-1", "ok",
                      {"f": "send", "op": op, "partition": f"bench-{p}", "offset": end - count})

        env.process(producer())
        started, cpu = time.perf_counter(), time.process_time()
        with collector_tuned_for_runs():
            env.run(until=seconds * 1000 + 100)  # the last acknowledgements arrive
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {"simulated_s": env.now / 1000, "wall": wall, "cpu": cpu, "acknowledged": acknowledged,
            "requests": requests}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--linger-ms", default="10,100", help="comma-separated producer lingers in ms")
    parser.add_argument("--partitioner", default=",".join(PARTITIONERS),
                        help="comma-separated partitioners whose requests the floor sends (round_robin, sticky)")
    args = parser.parse_args()
    partitioners = args.partitioner.split(",")
    unknown = [p for p in partitioners if p not in PARTITIONERS]
    if unknown:
        parser.error(f"unknown partitioner {unknown[0]!r}; known: {', '.join(PARTITIONERS)}")
    print("simulated s per wall s                   full  no trace  no trace, no encoding")
    for partitioner in partitioners:
        for linger in (int(x) for x in args.linger_ms.split(",")):
            speeds = []
            for trace, encode in ((True, True), (False, True), (False, False)):
                r = floor_run(args.seconds, linger, trace=trace, encode=encode, partitioner=partitioner)
                speeds.append(r["simulated_s"] / r["wall"])
            print(f"floor, {partitioner:<11} linger {linger:>3} ms: {speeds[0]:>7.1f}  {speeds[1]:>8.1f}  "
                  f"{speeds[2]:>21.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
