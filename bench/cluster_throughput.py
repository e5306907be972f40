"""Three real brokers against librdkafka's three-broker mock cluster, and the failover
time of a killed leader, real and simulated, in one run (issue 21).

    .venv/bin/python bench/cluster_throughput.py [--records-mb 100] [--failovers 3]
        [--session-timeout-ms 6000] [--sim-seeds 3] [--write docs/benchmarks.md]

Throughput: ``--records-mb`` MiB of 10 KiB records (``--size``) produced with acks=all by
one confluent-kafka producer (not idempotent, linger.ms=5, no compression) to a topic
of 4 partitions with replication factor 3, then read back by one consumer, first
against a ``LocalCluster`` (real_io/cluster.py: ZooKeeper and three ``isrlab serve``
processes, min.insync.replicas=2), then against the mock cluster librdkafka builds
in-process with ``test.mock.num.brokers: 3`` (its auto-created topic: 4 partitions,
replication factor 3). The producer and consumer, and their settings, are
bench/broker_throughput.py's. Between the two, the floor (bench/cluster_floor.py): the
same bytes through three processes that do nothing but write and replicate them.

Failover, real: an idempotent acks=all producer writes one record every 10 ms to one
partition; its leader is killed with SIGKILL; the time from the kill to the first
successful delivery report of a record produced after the kill (necessarily written by
the new leader). Then the killed broker is restarted (once its ZooKeeper session has
gone) and the ISR waited for, ``--failovers`` times; the leader killed is never the
controller. Failover, simulated: the same cluster, config and producer as a scenario
(``SIM_SCENARIO``), a crash of the partition's leader, the same time read from the
trace, once per seed.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import confluent_kafka
from confluent_kafka import Producer
from kazoo.client import KazooClient

from broker_throughput import (MOCK_PARTITIONS, ROOT, consume, create_topic, peak_rss_mb, produce,
                               rates, replace_section, run_mock)
from cluster_floor import cpu_seconds, floor_throughput

# The brokers are `python -m isrlab serve` children: make them run this checkout's code
# whatever the current directory (bench/ is on sys.path for the import above).
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))

from broker_core.coordination import (BROKER_IDS_PATH, CONTROLLER_PATH, decode_data,  # noqa: E402
                                      partition_state_path)
from faults.nodes import broker_id_of  # noqa: E402
from real_io.cluster import CHROOT, LocalCluster  # noqa: E402

BROKERS = 3
FLOOR_RUNS = 3
ACKS_ALL = {"acks": "all"}
ZK_TICK_MS = 500  # ZooKeeper grants sessions of 2 to 20 ticks, and expires them a tick at a time
FAILOVER_TOPIC = "failover"
PRODUCE_INTERVAL_S = 0.01
QUIET = {"log_level": 0}  # librdkafka's log of a broker going away is what is measured here


def cluster_config(session_ms: int) -> dict:
    return {"zookeeper.session.timeout.ms": session_ms, "min.insync.replicas": 2}


# -- throughput -----------------------------------------------------------------------
def cluster_throughput(cluster: LocalCluster, size: int, megabytes: float) -> dict:
    """Produce and consume on the real cluster, then the same on the mock."""
    partitions = MOCK_PARTITIONS
    count = max(int(megabytes * 1024 * 1024 / size), partitions)
    out: dict = {"size": size, "count": count}
    create_topic(cluster.bootstrap, partitions, BROKERS)
    pids = [cluster.brokers[b].process.pid for b in cluster.broker_ids]
    # Each side starts with no dirty pages of an earlier phase's files: the kernel's
    # writeback of one side's gigabytes otherwise lands on the next side's writes.
    os.sync()
    before = [sum(cpu_seconds(pid)) for pid in pids]
    out["ours_produce_s"] = produce({**ACKS_ALL, "bootstrap.servers": cluster.bootstrap}, count, size, partitions)
    out["ours_brokers_cpu_s"] = sum(sum(cpu_seconds(pid)) for pid in pids) - sum(before)
    out["ours_consume_s"], read, _ = consume(cluster.bootstrap, partitions)
    if read != count:
        raise SystemExit(f"read back {read} of {count} records from the cluster")
    out["peak_rss_mb"] = [peak_rss_mb(cluster.brokers[b].process.pid) for b in cluster.broker_ids]
    # The floor is what no implementation can beat: its best of FLOOR_RUNS runs (one run
    # alone varies by 2x on this machine, with where the scheduler puts its processes).
    floors = []
    for _ in range(FLOOR_RUNS):
        os.sync()
        floors.append(floor_throughput(count * size / (1024 * 1024)))
    out.update(min(floors, key=lambda r: r["floor_produce_s"]))
    out["floor_runs_mb_s"] = [r["floor_bytes"] / 1e6 / r["floor_produce_s"] for r in floors]
    out.update(run_mock(BROKERS, count, size, partitions, ACKS_ALL))
    return out


# -- ZooKeeper, as the controller wrote it ------------------------------------------------
def leader_state(zk: KazooClient, topic: str, partition: int) -> tuple[dict | None, float]:
    """The partition's state znode (leader, leader_epoch, isr) and when it was last
    written (ZooKeeper's clock, Unix seconds)."""
    path = partition_state_path(topic, partition)
    if zk.exists(path) is None:
        return None, 0.0
    raw, stat = zk.get(path)
    return decode_data(raw), stat.mtime / 1000


def active_controller(zk: KazooClient) -> int | None:
    if zk.exists(CONTROLLER_PATH) is None:
        return None
    return decode_data(zk.get(CONTROLLER_PATH)[0])["brokerid"]


def wait_for(condition, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise SystemExit(f"timed out after {timeout_s:.0f}s waiting for {what}")


# -- failover, real -------------------------------------------------------------------------
class FailoverProbe:
    """Delivery reports of an idempotent acks=all producer writing one partition: how
    many were acknowledged, and when the first record produced after ``kill_at`` was."""

    def __init__(self, bootstrap: str, topic: str, partition: int):
        self.topic, self.partition = topic, partition
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 0, **QUIET})
        self.acknowledged = 0
        self.errors: list[str] = []
        self.kill_at: float | None = None
        self.first_after_kill: float | None = None

    def _report(self, produced_at: float):
        def delivered(error, _message) -> None:
            if error is not None:
                self.errors.append(str(error))
                return
            self.acknowledged += 1
            if self.kill_at is not None and produced_at >= self.kill_at and self.first_after_kill is None:
                self.first_after_kill = time.monotonic()
        return delivered

    def produce_until(self, done, timeout_s: float) -> bool:
        """One record every PRODUCE_INTERVAL_S until ``done()``; False at the timeout."""
        deadline = time.monotonic() + timeout_s
        while not done():
            if time.monotonic() > deadline:
                return False
            now = time.monotonic()
            self.producer.produce(self.topic, b"x" * 100, partition=self.partition, on_delivery=self._report(now))
            self.producer.poll(PRODUCE_INTERVAL_S)
        return True


def failover_once(cluster: LocalCluster, zk: KazooClient, partition: int, session_ms: int) -> dict:
    """Kill the partition's leader under load; the seconds to the first acknowledged
    write after it, and to the controller's writing the new leader to ZooKeeper."""
    before, _ = leader_state(zk, FAILOVER_TOPIC, partition)
    assert before is not None
    leader = before["leader"]
    probe = FailoverProbe(cluster.bootstrap, FAILOVER_TOPIC, partition)
    limit_s = session_ms / 1000 + 60
    if not probe.produce_until(lambda: probe.acknowledged >= 50, 30):
        raise SystemExit(f"the failover producer had {probe.acknowledged} records acknowledged in 30 s")
    killed_wall = time.time()
    probe.kill_at = time.monotonic()
    cluster.kill(leader)
    if not probe.produce_until(lambda: probe.first_after_kill is not None, limit_s):
        raise SystemExit(f"no write acknowledged within {limit_s:.0f}s of killing broker {leader}")
    remaining = probe.producer.flush(60)
    after, written = leader_state(zk, FAILOVER_TOPIC, partition)
    assert after is not None and probe.first_after_kill is not None
    if remaining or probe.errors:
        raise SystemExit(f"failover producer: {remaining} undelivered, errors {probe.errors[:3]}")
    return {"killed": leader, "new_leader": after["leader"], "epoch": after["leader_epoch"],
            "failover_s": probe.first_after_kill - probe.kill_at, "elected_s": written - killed_wall}


def bring_back(cluster: LocalCluster, zk: KazooClient, broker: int, partition: int, session_ms: int) -> None:
    """Restart a killed broker once its session has expired (a 2.7 broker started
    before that exits) and wait until it is back in the partition's ISR."""
    timeout_s = session_ms / 1000 + 60
    wait_for(lambda: str(broker) not in zk.get_children(BROKER_IDS_PATH), timeout_s,
             f"broker {broker}'s session to expire")
    if not cluster.restart(broker, 60):
        raise SystemExit(f"broker {broker} did not restart: {cluster.brokers[broker].last_words()}")
    wait_for(lambda: (s := leader_state(zk, FAILOVER_TOPIC, partition)[0]) and broker in s["isr"], timeout_s,
             f"broker {broker} back in the ISR")


def not_controller_partition(zk: KazooClient, partitions: int) -> int:
    """A partition of the failover topic whose leader is not the controller (whose
    death would add a controller election to the leader's)."""
    controller = active_controller(zk)
    for partition in range(partitions):
        state, _ = leader_state(zk, FAILOVER_TOPIC, partition)
        if state is not None and state["leader"] not in (controller, -1) and len(state["isr"]) == BROKERS:
            return partition
    raise SystemExit(f"every partition of {FAILOVER_TOPIC} is led by the controller {controller}")


def real_failovers(cluster: LocalCluster, repeats: int, session_ms: int) -> list[dict]:
    zk = KazooClient(hosts=cluster.zk_hosts + CHROOT)
    zk.start(timeout=10)
    try:
        create_topic(cluster.bootstrap, BROKERS, BROKERS, FAILOVER_TOPIC)  # a leader on each broker
        wait_for(lambda: all((s := leader_state(zk, FAILOVER_TOPIC, p)[0]) and len(s["isr"]) == BROKERS
                             for p in range(BROKERS)), 30, "the failover topic's full ISRs")
        runs = []
        for _ in range(repeats):
            partition = not_controller_partition(zk, BROKERS)
            run = failover_once(cluster, zk, partition, session_ms)
            runs.append(run)
            print(f"  real failover: broker {run['killed']} killed, broker {run['new_leader']} led from "
                  f"{run['elected_s']:.2f} s, first write acknowledged after {run['failover_s']:.2f} s", flush=True)
            bring_back(cluster, zk, run["killed"], partition, session_ms)
        return runs
    finally:
        zk.stop()
        zk.close()


# -- failover, simulated --------------------------------------------------------------------
# The real measurement as a scenario: three brokers, the same broker config, one
# partition whose leader (broker 2) is not the first controller, an idempotent acks=all
# producer at 100 records/s, a crash of the leader at 10 s.
SIM_SCENARIO = """
name: bench-failover
cluster:
  brokers: 3
  config: {{min.insync.replicas: 2, zookeeper.session.timeout.ms: {session_ms}}}
  topics: [{{name: t, partitions: 1, replication_factor: 3, assignment: {{0: [2, 3, 1]}}}}]
workload:
  producers: [{{topic: t, acks: all, enable.idempotence: true, rate: 100}}]
faults:
  - {{at: 10s, crash: {{leader: t-0}}}}
duration: {duration_s}s
"""


def sim_failover(seed: int, session_ms: int, directory: Path) -> dict:
    """Run the scenario; from its trace, the crash to the first ``ok`` of a send invoked
    after it (a send invoked at the crash's instant holds records produced before it)
    whose offset is in the new leader's epoch."""
    from scenarios.parse import parse_scenario
    from scenarios.runner import run_scenario_events
    text = SIM_SCENARIO.format(session_ms=session_ms, duration_s=10 + 2 * session_ms // 1000 + 20)
    scenario = parse_scenario(text, "bench-failover.yaml")
    _, events = run_scenario_events(scenario, seed, directory / f"seed{seed}", judge=False)
    return failover_from_trace(events)


def failover_from_trace(events: list) -> dict:
    """``events``: analysis.trace.Event objects of one run."""
    crash = next(e for e in events if e.type == "fault_started" and e["fault"] == "crash")
    killed, crashed_ms = crash["targets"][0], crash.t_ms
    controllers = [broker_id_of(e.node) for e in events
                   if e.type == "controller_elected" and e.t_ms < crashed_ms]
    elected = next(e for e in events if e.type == "leader_elected" and e.t_ms > crashed_ms
                   and e["leader"] not in (-1, killed))
    became = next(e for e in events if e.type == "became_leader" and e.t_ms > crashed_ms)
    invoked = {(e.node, e["op"]): e.t_ms for e in events if e.type == "invoke" and e.get("f") == "send"}
    first = next(e for e in events if e.type == "ok" and e.get("f") == "send" and e.t_ms > crashed_ms
                 and invoked[(e.node, e["op"])] > crashed_ms and e["offset"] >= became["log_end_offset"])
    expired = next((e.t_ms for e in events if e.type == "session_expired_at_service"
                    and e["owner"] == f"broker-{killed}" and e.t_ms > crashed_ms), None)
    return {"killed": killed, "was_controller": bool(controllers) and controllers[-1] == killed,
            "new_leader": broker_id_of(became.node), "epoch": became["leader_epoch"],
            "failover_s": (first.t_ms - crashed_ms) / 1000, "elected_s": (elected.t_ms - crashed_ms) / 1000,
            "expired_s": None if expired is None else (expired - crashed_ms) / 1000}


# -- the report -------------------------------------------------------------------------------
def spread(values: list[float]) -> str:
    """median (min-max) of seconds."""
    return f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"


def throughput_table(r: dict) -> str:
    x = rates(r)
    rss = ", ".join(f"{m:.0f}" for m in r["peak_rss_mb"])
    floor = r["floor_bytes"] / 1e6 / r["floor_produce_s"]
    # CPU seconds of the three brokers per GB (10^9 bytes) produced
    ours_cpu = r["ours_brokers_cpu_s"] / (r["size"] * r["count"] / 1e9)
    floor_cpu = r["floor_brokers_cpu_s"] / (r["floor_bytes"] / 1e9)
    return "\n".join([
        "| record size | records | ours produce MB/s | floor produce MB/s | mock produce MB/s | ours / mock | "
        "floor / mock | ours / floor | brokers' CPU s per GB: ours, floor | ours consume MB/s | "
        "mock consume MB/s | ratio | brokers' peak RSS |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        f"| {r['size']} B | {r['count']} | {x['ours_produce']:.1f} ({r['count'] / r['ours_produce_s']:.0f}/s) | "
        f"{floor:.1f} | {x['mock_produce']:.1f} ({r['count'] / r['mock_produce_s']:.0f}/s) | "
        f"**{x['produce_ratio']:.2f}** | **{floor / x['mock_produce']:.2f}** | {x['ours_produce'] / floor:.2f} | "
        f"{ours_cpu:.2f}, {floor_cpu:.2f} | "
        f"{x['ours_consume']:.1f} | {x['mock_consume']:.1f} | {x['consume_ratio']:.2f} | {rss} MiB |",
        "",
        f"The floor's {len(r['floor_runs_mb_s'])} runs: "
        + ", ".join(f"{v:.0f}" for v in r["floor_runs_mb_s"]) + " MB/s (the table has the best)."])


def failover_table(real: list[dict], simulated: list[dict]) -> str:
    lines = ["| run | kill -9 / crash to the new leader in ZooKeeper | to the first acknowledged write | "
             "killed broker -> new leader (epoch) |", "| --- | --- | --- | --- |"]
    for name, runs in (("real", real), ("simulated", simulated)):
        for i, run in enumerate(runs, 1):
            lines.append(f"| {name} {i} | {run['elected_s']:.2f} s | {run['failover_s']:.2f} s | "
                         f"{run['killed']} -> {run['new_leader']} ({run['epoch']}) |")
        if runs:
            lines.append(f"| **{name}, median (range)** | {spread([r['elected_s'] for r in runs])} | "
                         f"**{spread([r['failover_s'] for r in runs])}** | |")
    return "\n".join(lines)


def run_real(args) -> tuple[dict | None, list[dict]]:
    """Throughput and the failovers on one fresh cluster. At the end the brokers stop
    one after another with a controlled shutdown but the last is killed: with no replica
    left to hand its leaderships to, its controlled shutdown would retry until the stop
    timeout."""
    with tempfile.TemporaryDirectory(prefix="isrlab-bench-") as tmp:
        with LocalCluster(Path(tmp) / "cluster", brokers=BROKERS, config=cluster_config(args.session_timeout_ms),
                          zk_tick_ms=ZK_TICK_MS, stop_timeout_s=10) as cluster:
            throughput = cluster_throughput(cluster, args.size, args.records_mb) if args.records_mb > 0 else None
            failovers = real_failovers(cluster, args.failovers, args.session_timeout_ms) if args.failovers else []
            *first, last = cluster.broker_ids
            for broker in first:
                cluster.brokers[broker].stop(10)
            cluster.kill(last)
    return throughput, failovers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records-mb", type=float, default=100.0, help="MiB produced (0: no throughput run)")
    parser.add_argument("--size", type=int, default=10240, help="record size in bytes")
    parser.add_argument("--failovers", type=int, default=3, help="kill -9s of a leader on the real cluster")
    parser.add_argument("--sim-seeds", type=int, default=3, help="simulated runs of the failover (seeds 1..N)")
    parser.add_argument("--session-timeout-ms", type=int, default=6000,
                        help="zookeeper.session.timeout.ms of the real and the simulated brokers")
    parser.add_argument("--write", type=Path, help="replace this markdown file's section on the cluster")
    args = parser.parse_args(argv)
    if args.size < 1 or args.failovers < 0 or args.sim_seeds < 0 or args.records_mb < 0:
        parser.error("--size must be positive; --records-mb, --failovers and --sim-seeds not negative")
    if not 2 * ZK_TICK_MS <= args.session_timeout_ms <= 20 * ZK_TICK_MS:
        parser.error(f"--session-timeout-ms must be {2 * ZK_TICK_MS}-{20 * ZK_TICK_MS}: ZooKeeper (tick "
                     f"{ZK_TICK_MS} ms) grants sessions of 2 to 20 ticks")
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    throughput, real = run_real(args)
    with tempfile.TemporaryDirectory(prefix="isrlab-bench-sim-") as tmp:
        simulated = [sim_failover(seed, args.session_timeout_ms, Path(tmp)) for seed in range(1, args.sim_seeds + 1)]
    load = (f"1-minute load average {load_before:.2f} before the run and {os.getloadavg()[0]:.2f} after, on "
            f"{os.cpu_count()} cores; the whole run took {time.monotonic() - started:.0f} s")
    parts = [throughput_table(throughput)] if throughput else []
    if real or simulated:
        parts.append(failover_table(real, simulated))
    text = "\n\n".join(parts)
    print(text)
    print(load)
    if args.write:
        write_section(args.write, text, argv if argv is not None else sys.argv[1:], args, load)
    return 0


SECTION = "## Three brokers against librdkafka's three-broker mock, and the failover time"
HOW = """\
What it measures (issue 21). Throughput: one confluent-kafka producer (acks=all, not
idempotent, linger.ms 5, no compression; `bench/broker_throughput.py`'s settings) writes
the records to a topic of 4 partitions with replication factor 3, and one consumer reads
them back, first on a fresh `LocalCluster` (real_io/cluster.py: a ZooKeeper and three
`isrlab serve` processes; the topic created by AdminClient), then on the mock cluster
librdkafka builds in the client's process (`test.mock.num.brokers: 3`). Between the two,
the floor (`bench/cluster_floor.py`) moves the same bytes through three processes with
no broker logic; the brokers' CPU seconds are read from /proc for ours and the floor.
Failover, real:
on a topic of three partitions, an idempotent acks=all producer writes one 100 B record
every 10 ms to a partition whose leader is not the controller; the leader is killed with
SIGKILL; the time from the kill to the first successful delivery report of a record
produced after the kill (so written by the new leader), and to the controller's write of
the new leader (the partition's state znode's modification time). The killed broker is
then restarted once its session has gone, and the next run waits until it is back in the
ISR. Failover, simulated: the same cluster and config as a scenario (`SIM_SCENARIO` in the
script; broker 2 leads, broker 1 is the controller), a crash of the leader at 10 s, seeds
1 to 3; from the trace, the crash to the controller's `leader_elected` and to the first
`ok` of a send invoked after the crash whose offset is in the new leader's epoch."""
VERDICT = """**The mock.** librdkafka's mock cluster (`src/rdkafka_mock.c`, `rdkafka_mock_handlers.c`) has
no CreateTopics and no replication setting (its hidden settings are `test.mock.num.brokers`
and `test.mock.broker.rtt`; there is no `test.mock.topic.replication.factor`): the first
produce auto-creates the topic with 4 partitions and replication factor min(3, brokers),
which for three brokers is 3. The replicas are only a list of broker ids: each partition
is one in-memory log in the client's own process, Metadata reports the ISR equal to the
replicas, and Produce checks that the request reached the partition's leader, appends,
and answers at once. It reads the request's acks and does nothing with them, so acks=all
costs the mock what acks=1 does (no follower fetch, no high watermark, no
min.insync.replicas); it keeps only the newest 5 MiB of each partition, so its consumer
reads 20 MiB whatever was produced.

**Throughput: the issue's target (60% of the mock's MB/s with 10 KiB records, acks=all)
is not met, and on this machine it is where the floor is.** The floor
(`bench/cluster_floor.py`, run in the same run between ours and the mock, best of three
runs) is three processes and a client moving the same bytes with no broker logic: the
client sends prebuilt 1 MB requests, one in flight per connection (a Kafka broker reads a
connection's next request only after answering the last), the leader writes each chunk
to its file and pushes it to both followers, which write it and answer; no protocol
decoding, no CRC, no offsets or indexes, no fetch round trips, no high watermark, no
traces. A single floor run varies by 2x here (427 to 955 MB/s in one run of the command,
with where the scheduler puts its processes), so the table has its best. In the runs of
`--records-mb 500` on a quiet machine (load below 1) the floor reached 0.54 and 0.60 of
the mock, ours 0.15 and 0.20 (ours / floor 0.24 and 0.36); earlier runs, with other
agents loading the machine and a single floor run, gave floor / mock 0.52-0.67 and ours
/ mock 0.17-0.23. So a broker that did nothing but move the bytes would be at the target,
and every piece of Kafka's work pushes below it. The mock appends once in C in the
client's own process (see above), while here three processes each receive, write and
send every byte, on two cores shared with the client. The brokers spend 4.3-5.7 CPU
seconds per GB produced against the floor's 1.8. By `perf record` over the three brokers
(1 GB), about 30% of that is the Python interpreter (the asyncio loop, the protocol's
decoding, the core), 12% the kernel's copies (socket to user, user to page cache), 3.6%
the batches' CRC32C, and the rest the kernel's TCP and scheduling; a follower now reads
its leader's fetch answers into a buffer of their own (real_io/peer_channels.py on
real_io/connection.py's FrameConnection), which took the brokers' CPU per GB from 6.5-7.1
s to 5.2-5.6 s in the runs before and after that change. The three brokers and the client
together keep about 1.4 of the two cores busy, the floor 1.2: the rest is waiting, as in
the floor, for each acks=all request is answered only once both followers have fetched
it and fetched again past it. acks=1 on the same cluster gives 450-600 MB/s. Consume is
above the mock (the consumer's fetches are answered with sendfile from the segment
files). Each phase starts after os.sync(), so that one side's dirty pages are not
written back on the next side's time.

**Failover.** In Kafka 2.7 a leader killed with kill -9 keeps its leadership until its
ZooKeeper session expires (zookeeper.session.timeout.ms, 6 s here for the real brokers and
the simulated ones; Kafka's default is 18 s): only then does the controller's watch on
`/brokers/ids` fire, and it elects a new leader from the ISR, writes it to ZooKeeper and
sends LeaderAndIsr and UpdateMetadata; the producer then learns the new leader from its
next metadata request. ZooKeeper expires a session the timeout after it last heard from
the client, a tick (500 ms here) at a time; kazoo sends a ping after about a third of
the timeout without traffic, so a kill lands 0-2 s after the last packet and the session
expires 4-6.5 s after it. The simulated client pings every third of the timeout as well,
but the crash at 10 s falls at the same point of that cycle in every seed, so the
simulated expiry is 4.1 s after the crash every time, and the simulated controller's
election, in simulated time, costs a few ms where the real one, on a loaded machine,
costs tens to hundreds. From the election to the first acknowledged write, both
producers wait for a metadata refresh (librdkafka backs off retry.backoff.ms, 100 ms,
doubling to retry.backoff.max.ms, 1 s; the simulated producer likewise): 0.7-1.9 s real
in the runs so far, about 1 s simulated. The real producer is idempotent, acks=all, one 100 B record every
10 ms; the simulated one is idempotent, acks=all, 100 records/s (linger 10 ms). The
killed broker is the partition's leader and not the controller in both (a controller's
death adds the election of a new controller, at the same expiry)."""


def write_section(path: Path, text: str, argv: list[str], args, load: str) -> None:
    command = " ".join([".venv/bin/python bench/cluster_throughput.py", *argv])
    body = (f"{SECTION}\n\nCommand: `{command}` (one run; confluent-kafka {confluent_kafka.version()} "
            f"(librdkafka {confluent_kafka.libversion()[0]}) on both sides, acks=all; "
            f"zookeeper.session.timeout.ms {args.session_timeout_ms} for the real brokers and the simulated "
            f"ones, min.insync.replicas 2, the rest Kafka 2.7's defaults; {load}).\n\n{HOW}\n\n{text}\n\n"
            f"{VERDICT}\n")
    replace_section(path, SECTION, body)


if __name__ == "__main__":
    sys.exit(main())
