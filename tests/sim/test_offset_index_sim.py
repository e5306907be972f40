"""The simulation writes and uses the segments' offset indexes through the same core
effects and storage port as the other bindings (issue 9: one mechanism in all)."""
from __future__ import annotations

import json
from pathlib import Path

from analysis.trace import TraceWriter
from broker_core.effects import ReplaceFile
from broker_core.log_loader import recover_log
from broker_core.storage import MemoryFiles
from broker_core.types import TopicPartition
from scenarios.parse import parse_scenario
from scenarios.runner import TRACE_FILE, run_scenario
from sim.world import World

SCENARIO = """
name: segments
cluster:
  brokers: 3
  config: {min.insync.replicas: 2, log.segment.bytes: SEGMENT_BYTES, log.index.interval.bytes: 256}
  topics: [{name: t, partitions: 1, replication_factor: 3}]
workload:
  producers: [{topic: t, acks: all, rate: 200}]
  consumers: [{topic: t}]
faults:
  - {at: 5s, crash: 1}
  - {at: 12s, restart: 1}
duration: 20s
"""


def _client_events(trace: Path) -> list[str]:
    """What clients saw: invocations, outcomes and the final read (not the replicas'
    durable offsets, which move with every segment roll's fsync)."""
    out = []
    for line in trace.read_text().splitlines():
        event = json.loads(line)
        if event["type"] in ("invoke", "ok", "fail", "info") or event["node"] == "reader":
            out.append(line)
    return out


def test_clients_see_the_same_history_whether_the_log_is_one_segment_or_many(tmp_path):
    """Fetches served from sealed segments (headers read through the index and the
    simulated disk) answer exactly as fetches from one segment held in memory: same
    seed, same acknowledged writes, same consumed records, same final read."""
    # 12000 v2 bytes: about ten segments, as 3000 bytes of the simulation's own format made;
    # many more would make a restarted broker's shutdown flush take longer (one fsync a segment).
    runs = {}
    for segment_bytes in (12000, 1 << 30):
        out = tmp_path / str(segment_bytes)
        run_scenario(parse_scenario(SCENARIO.replace("SEGMENT_BYTES", str(segment_bytes)), "segments.yaml"), 1, out)
        runs[segment_bytes] = _client_events(out / TRACE_FILE)
    assert len(runs[12000]) > 1000
    assert runs[12000] == runs[1 << 30]


def test_every_sealed_segment_on_a_simulated_disk_has_its_index(tmp_path):
    """After a run with a crash and restart, every broker's sealed segments have an
    ``.index`` and a ``.timeindex`` that recovery would not rewrite (it equals the one rebuilt from the
    segment), and the active segment has none (its index lives in memory)."""
    scenario = parse_scenario(SCENARIO.replace("SEGMENT_BYTES", "3000"), "segments.yaml")
    with open(tmp_path / "trace.jsonl", "w") as stream:
        world = World(scenario, 1, TraceWriter(stream, "segments", 1, "sim"))
        world.run()
    tp = TopicPartition("t", 0)
    for broker, host in sorted(world.hosts.items()):
        files = host.disk.contents()
        logs = sorted(p for p in files if p.startswith("t-0/") and p.endswith(".log"))
        indexes = sorted(p for p in files if p.endswith(".index"))
        assert len(logs) > 10, broker
        assert indexes == [p[:-len(".log")] + ".index" for p in logs[:-1]], broker
        # The time index beside it: empty, as the simulated producers stamp no CreateTime
        # (2.7.0 TimeIndex.maybeAppend keeps only timestamps above NO_TIMESTAMP).
        time_indexes = sorted(p for p in files if p.endswith(".timeindex"))
        assert time_indexes == [p[:-len(".log")] + ".timeindex" for p in logs[:-1]], broker
        assert all(files[p] == b"" for p in time_indexes), broker
        log, effects, report = recover_log(tp, MemoryFiles(files).storage, 3000, 0, True, 256)
        assert not [e for e in effects if isinstance(e, ReplaceFile) and "index" in e.path], broker
        assert report.reason is None and log.log_end_offset > 1000
