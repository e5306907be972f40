"""Stored digests of library scenarios' traces and verdicts: the check that a change
meant to leave behaviour alone (a speed-up, a refactoring) really leaves every trace
byte-identical.

``tests/data/trace_digests.json`` holds the sha256 of ``trace.jsonl`` and of
``verdict.json`` for each run in ``RUNS`` (scenario file, variant, seed);
tests/test_trace_digests.py runs them again and compares. When a change is MEANT to alter
behaviour (a new Kafka rule, a new trace event, a changed default), regenerate the file
and commit it with that change, saying why the traces moved:

    .venv/bin/python -m tests.update_trace_digests          # rewrite the stored digests
    .venv/bin/python -m tests.update_trace_digests --check  # compare only (exit 1 on a change)
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

from scenarios.parse import load_scenario
from scenarios.runner import TRACE_FILE, VERDICT_FILE, run_scenario

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ROOT / "scenarios" / "library"
DIGESTS = Path(__file__).resolve().parent / "data" / "trace_digests.json"

# (scenario file, variant or None for a file without variants, seed): every library
# scenario and variant at seed 1 (tests/test_trace_digests.py checks that none is missing), and a second seed of the two shortest stories. Together
# they cover both profiles, crashes and restarts, unclean election, truncation after a
# leader change, producer retries with and without idempotence, controller failover and
# both nemeses, and issue 20's library files (an idle follower, KAFKA-13091, a topic
# config changed while running, a parked produce acknowledged after its truncation); all
# of them take about 30 s.
RUNS: tuple[tuple[str, str | None, int], ...] = (
    ("bounce-hidden-by-controller-failover.yaml", None, 1),
    ("controller-and-leader-failover.yaml", None, 1),
    ("idle-follower-stays-in-sync.yaml", "kept", 1),
    ("idle-follower-stays-in-sync.yaml", "stuck-0.8", 1),
    ("idle-follower-stays-in-sync.yaml", "kip-16", 1),
    ("jepsen-2013.yaml", "unclean", 1),
    ("jepsen-2013.yaml", "unclean", 2),
    ("jepsen-2013.yaml", "safe", 1),
    ("jepsen-2013.yaml", "safe", 2),
    ("kip-101-scenario-1.yaml", "hw", 1),
    ("kip-101-scenario-1.yaml", "hw", 2),
    ("kip-101-scenario-1.yaml", "epoch", 1),
    ("kip-101-scenario-1.yaml", "epoch", 2),
    ("kip-101-scenario-2.yaml", "hw", 1),
    ("kip-101-scenario-2.yaml", "epoch", 1),
    ("kip-279.yaml", "kip101", 1),
    ("kip-279.yaml", "epoch", 1),
    ("kafka-13091.yaml", "stalled", 1),
    ("kafka-13091.yaml", "fixed", 1),
    ("kafka-13091.yaml", "zookeeper", 1),
    ("leader-crash.yaml", None, 1),
    ("nemesis-kafka-0.8.yaml", None, 1),
    ("nemesis-safe.yaml", None, 1),
    ("retries-on-failover.yaml", "duplicates", 1),
    ("retries-on-failover.yaml", "duplicates", 2),
    ("retries-on-failover.yaml", "idempotent", 1),
    ("retries-on-failover.yaml", "idempotent", 2),
    ("rolling-restart.yaml", None, 1),
    ("zombie-leader.yaml", "acks1", 1),
    ("zombie-leader.yaml", "acks-all", 1),
    ("unclean-enabled-at-runtime.yaml", "kafka-2.7", 1),
    ("unclean-enabled-at-runtime.yaml", "kafka-0.8", 1),
    ("ack-after-truncation.yaml", "kafka-0.8", 1),
    ("ack-after-truncation.yaml", "kafka-2.7", 1),
    # issue 22's compaction scenarios: the cleaner in every replica under failover and
    # truncation, a replica back after delete.retention.ms, an unclean election
    ("compaction-failover.yaml", None, 1),
    ("compaction-tombstone-restart.yaml", "behind", 1),
    ("compaction-tombstone-restart.yaml", "within-retention", 1),
    ("compaction-unclean.yaml", None, 1),
    ("reassign-throttled.yaml", None, 1),  # issue 22: a reassignment under a follower throttle
    ("quota-noisy-neighbour.yaml", None, 1),  # issue 22's quota scenarios: produce, request
    ("quota-lowered-mid-run.yaml", None, 1),  # and fetch throttles and a quota lowered mid-run
    ("quota-request-percentage.yaml", None, 1),
    ("retention-moves-the-log-start.yaml", "by-size", 1),
    ("retention-moves-the-log-start.yaml", "by-time", 1),
    ("single-broker-crash.yaml", "acks1", 1),
    ("single-broker-crash.yaml", "acks-all", 1),
    # issue 23's demo sweep scenario, whose verdict depends on the seed: two seeds
    ("jepsen-2013-nemesis.yaml", "unclean", 1),
    ("jepsen-2013-nemesis.yaml", "unclean", 2),
    ("jepsen-2013-nemesis.yaml", "safe", 1),
    # issue 24's consumer-group scenarios in the simulation: a crash between processing
    # and commit, a commit before processing, a coordinator failover mid-rebalance, a
    # zombie fenced by its generation
    ("group-crash-before-commit.yaml", None, 1),
    ("group-commit-before-processing.yaml", None, 1),
    ("group-coordinator-failover.yaml", None, 1),
    ("group-zombie-fenced.yaml", None, 1),
    # bench/sim_speed.py's scenario, 5 simulated seconds at 10 ms linger: the hot path
    # every speed lever changes, with no faults at all.
    ("bench:round_robin", None, 1),
    ("bench:sticky", None, 1),
)
BENCH_SECONDS, BENCH_LINGER_MS = 5, 10


def bench_scenario(seconds: int, linger_ms: int, partitioner: str):
    sys.path.insert(0, str(ROOT / "bench"))  # bench/ is a folder of scripts, not a package
    try:
        from sim_speed import bench_scenario as scenario_of
    finally:
        sys.path.remove(str(ROOT / "bench"))
    return scenario_of(seconds, linger_ms, partitioner)


def run_key(filename: str, variant: str | None, seed: int) -> str:
    return f"{filename.removesuffix('.yaml')}/{variant or '-'}/seed-{seed}"


def run_digests(filename: str, variant: str | None, seed: int, out: Path) -> dict[str, str]:
    """Run one scenario (variant) and seed into ``out``; the sha256 of its trace and verdict.
    ``bench:<partitioner>`` names the benchmark's scenario with that partitioner."""
    if filename.startswith("bench:"):
        scenario = bench_scenario(BENCH_SECONDS, BENCH_LINGER_MS, filename.removeprefix("bench:"))
    else:
        scenario = load_scenario(LIBRARY / filename)
    if variant is not None:
        by_name = {v.variant: v for v in scenario.variants}
        if variant not in by_name:
            raise KeyError(f"{filename} has no variant {variant!r} (it has {sorted(by_name)})")
        scenario = by_name[variant]
    run_scenario(scenario, seed, out)
    return {name: hashlib.sha256((out / name).read_bytes()).hexdigest() for name in (TRACE_FILE, VERDICT_FILE)}


def all_digests() -> dict[str, dict[str, str]]:
    with tempfile.TemporaryDirectory() as tmp:
        return {run_key(*run): run_digests(*run, Path(tmp) / str(i)) for i, run in enumerate(RUNS)}


def stored_digests() -> dict[str, dict[str, str]]:
    return json.loads(DIGESTS.read_text(encoding="utf-8"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the stored digests, write nothing")
    args = parser.parse_args(argv)
    digests = all_digests()
    if args.check:
        stored = stored_digests() if DIGESTS.exists() else {}
        changed = sorted(k for k in digests.keys() | stored.keys() if digests.get(k) != stored.get(k))
        for key in changed:
            print(f"changed: {key}")
        print("all digests match" if not changed else f"{len(changed)} of {len(digests)} runs changed")
        return 1 if changed else 0
    DIGESTS.parent.mkdir(parents=True, exist_ok=True)
    DIGESTS.write_text(json.dumps(digests, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {len(digests)} runs' digests to {DIGESTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
