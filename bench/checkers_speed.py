"""Checker speed: a history of 1,000,000 operations built in memory (sends of 1-5
values over 12 partitions, polls by 3 consumers, some failed and unknown sends, broker
samples, a final read of everything, a few planted anomalies), then every checker.
Prints the build time and the checker time separately, and, in the same run, the
checker time on 250,000 operations and the ratio (4.0 is linear).

    .venv/bin/python bench/checkers_speed.py [--ops 1000000] [--write docs/benchmarks.md]
"""
from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import shlex
import sys
import time
from pathlib import Path

from analysis.checkers import run_checkers
from analysis.checkers.availability import LeadershipSamples
from analysis.history import build_history
from analysis.trace import Event

PARTITIONS = [f"bench-{i}" for i in range(12)]
PRODUCERS = 4
CONSUMERS = 3
BROKERS = (1, 2, 3)
SAMPLE_MS = 100
POLL_EVERY = 10  # one operation in ten is a poll
POLL_MAX_RECORDS = 200
# What the planted anomalies must make the checkers report.
# The three records replaced at the end are truncated reads for the consumers that read
# them and, since those consumers never get the replacements, skips too (one jump + 3).
PLANTED = {"lost_writes": 3, "inconsistent_offsets": 3, "consumer_truncated_reads": 3, "duplicates": 1,
           "consumer_non_monotonic": 1, "consumer_skips": 4, "hw_regressions": 1, "divergence": 1,
           "unavailable_ms": 1000, "failed_but_present": 0}


class Generator:
    """Deterministic events of a run with one op per simulated millisecond."""

    def __init__(self, n_ops: int, seed: int):
        self.n_ops = n_ops
        self.rng = random.Random(seed)
        self.events: list[Event] = []
        self.logs: dict[str, list[str]] = {p: [] for p in PARTITIONS}
        self.positions = {(c, p): 0 for c in range(CONSUMERS) for p in PARTITIONS}
        self.high_watermarks: dict[tuple[int, str], int] = {}
        self.ops: dict[str, int] = {}
        self.seq = [0] * PRODUCERS
        self.leaderless: tuple[int, int] | None = None

    def op(self, process: str) -> int:
        self.ops[process] = self.ops.get(process, 0) + 1
        return self.ops[process]

    def run(self) -> list[Event]:
        n = self.n_ops
        plants = {n // 5: self.plant_skip, n // 4: self.plant_backwards, n // 3: self.plant_hw_regression}
        self.events.append(Event(0, "world", "run_started", {"scenario": "bench-checkers", "duration_ms": n}))
        for i in range(n):
            t = i + 1
            if t % SAMPLE_MS == 0:
                self.sample(t)
            if i in plants and plants[i](t):
                pass
            elif i in plants:
                plants[i + 1] = plants.pop(i)  # not possible yet: try at the next operation
                self.send(t)
            elif i % POLL_EVERY == POLL_EVERY - 1:
                self.poll(t, (i // POLL_EVERY) % CONSUMERS)
            else:
                self.send(t)
        self.events.append(Event(n + 1, "world", "workload_stopped", {}))
        self.finish(n + 1000)
        return self.events

    def send(self, t: int) -> None:
        rng = self.rng
        producer = rng.randrange(PRODUCERS)
        process = f"producer-{producer}"
        partition = PARTITIONS[rng.randrange(len(PARTITIONS))]
        values = []
        for _ in range(rng.randint(1, 5)):
            self.seq[producer] += 1
            values.append(f"{process}:{self.seq[producer]}")
        acks = -1 if rng.random() < 0.8 else 1
        op = self.op(process)
        self.events.append(Event(t, process, "invoke", {"f": "send", "op": op, "partition": partition,
                                                        "values": values, "acks": acks}))
        fate = rng.random()
        log = self.logs[partition]
        if fate < 0.015:
            self.events.append(Event(t, process, "fail", {"f": "send", "op": op, "partition": partition,
                                                          "error": "NOT_ENOUGH_REPLICAS", "error_code": 19}))
        elif fate < 0.03:
            if fate < 0.0225:  # appended although the client never heard back
                log.extend(values)
            self.events.append(Event(t, process, "info", {"f": "send", "op": op, "partition": partition,
                                                          "error": "REQUEST_TIMED_OUT", "error_code": 7,
                                                          "reason": "client_timeout"}))
        else:
            offset = len(log)
            log.extend(values)
            self.events.append(Event(t, process, "ok", {"f": "send", "op": op, "partition": partition,
                                                        "offset": offset}))

    def poll(self, t: int, consumer: int, skip: int = 0, back: int = 0, hw_drop: int = 0) -> None:
        process = f"consumer-{consumer}"
        mine = PARTITIONS[consumer::CONSUMERS]
        op = self.op(process)
        self.events.append(Event(t, process, "invoke", {"f": "poll", "op": op,
                                                        "positions": {p: self.positions[(consumer, p)] for p in mine}}))
        records, high_watermarks = {}, {}
        for p in mine:
            log = self.logs[p]
            start = self.positions[(consumer, p)] + skip - back
            end = min(len(log), start + POLL_MAX_RECORDS)
            if end > start:
                records[p] = [[o, log[o]] for o in range(start, end)]
                self.positions[(consumer, p)] = end
            high_watermarks[p] = self.high_watermarks[(consumer, p)] = len(log) - hw_drop
            skip = back = hw_drop = 0  # a planted anomaly touches the first partition only
        self.events.append(Event(t, process, "ok", {"f": "poll", "op": op, "records": records,
                                                    "high_watermarks": high_watermarks}))

    def plant_skip(self, t: int) -> bool:
        """Consumer 0 jumps over two records of its first partition."""
        first = PARTITIONS[0]
        if len(self.logs[first]) < self.positions[(0, first)] + 3:
            return False
        self.poll(t, 0, skip=2)
        return True

    def plant_backwards(self, t: int) -> bool:
        """Consumer 1 gets the last record of its first partition again."""
        if self.positions[(1, PARTITIONS[1])] == 0:
            return False
        self.poll(t, 1, back=1)
        return True

    def plant_hw_regression(self, t: int) -> bool:
        """Consumer 2 is told a high watermark below the last one it saw."""
        first = PARTITIONS[2]
        if (2, first) not in self.high_watermarks:
            return False
        self.poll(t, 2, hw_drop=len(self.logs[first]) - self.high_watermarks[(2, first)] + 1)
        self.leaderless = (t - t % SAMPLE_MS + SAMPLE_MS, t - t % SAMPLE_MS + SAMPLE_MS + PLANTED["unavailable_ms"])
        return True

    def sample(self, t: int) -> None:
        for broker in BROKERS:
            partitions = {}
            for i, p in enumerate(PARTITIONS):
                leads = BROKERS[i % len(BROKERS)] == broker
                if p == PARTITIONS[0] and self.leaderless and self.leaderless[0] <= t < self.leaderless[1]:
                    leads = False
                partitions[p] = {"role": "leader" if leads else "follower", "leader_epoch": 0,
                                 "high_watermark": len(self.logs[p]), "log_end_offset": len(self.logs[p])}
            self.events.append(Event(t, f"broker-{broker}", "replica_state", {"partitions": partitions}))

    def finish(self, t: int) -> None:
        """Plant the end-of-run anomalies, then the replica digests and the final read."""
        for k, p in enumerate(PARTITIONS[3:6]):  # acknowledged records replaced: lost
            log = self.logs[p]
            log[len(log) // 3 + k] = f"replaced-{k}"
        dup = self.logs[PARTITIONS[7]]
        dup.append(dup[len(dup) // 2])  # appended twice (a retry): a duplicate
        for p in PARTITIONS:
            size = len(self.logs[p])
            for broker in BROKERS:
                chunks = [[first, f"{first:016x}"] for first in range(0, size, 100)]
                if p == PARTITIONS[1] and broker == 3:
                    chunks[len(chunks) // 2][1] = "ffffffffffffffff"
                self.events.append(Event(t, f"broker-{broker}", "replica_log", {
                    "partition": p, "upto_offset": size, "log_start_offset": 0, "log_end_offset": size,
                    "high_watermark": size, "chunk_size": 100, "chunks": chunks}))
        for p in PARTITIONS:
            op = self.op("reader")
            log = self.logs[p]
            self.events.append(Event(t, "reader", "invoke", {"f": "read", "op": op, "partition": p}))
            self.events.append(Event(t + 1, "reader", "ok", {"f": "read", "op": op, "partition": p,
                                                             "records": [[o, v] for o, v in enumerate(log)],
                                                             "high_watermark": len(log)}))


def measure(n_ops: int, seed: int) -> dict:
    """Times for one history. The cyclic collector stays off throughout, as
    run_checkers and check_trace keep it off themselves, so that a collection owed by
    the generator's millions of objects is not charged to the checkers."""
    gc.disable()
    started = time.perf_counter()
    events = Generator(n_ops, seed).run()
    generated = time.perf_counter()
    samples = LeadershipSamples.of(events)
    history = build_history(events)
    built = time.perf_counter()
    results = run_checkers(history, samples)
    checked = time.perf_counter()
    records = sum(len(o.completion["records"]) for o in history.operations if o.f == "read")
    figures = {"ops": len(history.operations), "events": len(events), "records": records,
               "generate_s": generated - started, "build_s": built - generated, "check_s": checked - built,
               "results": results}
    del events, history, samples
    gc.enable()
    gc.collect()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--write", help="append the result to this markdown file")
    args = parser.parse_args()
    small = measure(args.ops // 4, args.seed)
    large = measure(args.ops, args.seed)
    found = {name: large["results"][name].value for name in PLANTED}
    wrong = {n: (v, PLANTED[n]) for n, v in found.items() if v != PLANTED[n]}
    rows = [
        ("operations / events", f"{large['ops']:,} / {large['events']:,}"),
        ("records in the final read", f"{large['records']:,}"),
        ("generate events (in memory)", f"{large['generate_s']:.2f} s"),
        ("build history (+ sample index)", f"{large['build_s']:.2f} s"),
        (f"all checkers, {large['ops']:,} ops", f"{large['check_s']:.2f} s   (target < 10 s)"),
        (f"all checkers, {small['ops']:,} ops", f"{small['check_s']:.2f} s   (same run)"),
        ("ratio (4.0 = linear)", f"{large['check_s'] / small['check_s']:.2f}"),
        ("planted anomalies found", "all" if not wrong else "MISMATCH " + repr(wrong)),
        ("cpus", str(os.cpu_count())),
    ]
    lines = [f"{label + ':':<36}{value}" for label, value in rows]
    print("\n".join(lines))
    if args.write:
        write(Path(args.write), lines)
    return 1 if wrong else 0


def write(path: Path, lines: list[str]) -> None:
    command = shlex.join([".venv/bin/python", "bench/checkers_speed.py", *sys.argv[1:]])
    new = not path.exists()
    with open(path, "a", encoding="utf-8") as out:
        if new:
            out.write("# Benchmarks\n")
        out.write(f"\n### checkers_speed, {time.strftime('%Y-%m-%d')} ({platform.python_implementation()} "
                  f"{platform.python_version()}, {platform.machine()})\n\n")
        out.write(f"`{command}`\n\n```\n" + "\n".join(lines) + "\n```\n")


if __name__ == "__main__":
    sys.exit(main())
