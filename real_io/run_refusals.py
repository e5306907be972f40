"""What a scenario asks that the real binding cannot do (``isrlab run --binding real``):
the runner (scenarios/runner.py) refuses such a file before anything starts, with the
place in the file and the reason; nothing is skipped silently."""
from __future__ import annotations

from dataclasses import fields as dataclass_fields

from broker_core.config import PROFILES, broker_config
from faults import model as fm
from faults.nodes import SERVICE_NODE, broker_id_of
from real_io import lossy_mount
from real_io.cluster import CLIENT_NODE
from real_io.real_faults import UNSUPPORTED, link_refusal, nemesis_supported, supported

SERVE_PROFILES = tuple(PROFILES)  # isrlab serve --profile


def is_cluster(scenario) -> bool:
    """A scenario of more than one broker runs on a fresh local cluster (ZooKeeper, a
    fault proxy on every link); one broker runs alone on ZooKeeper or its embedded store."""
    return len(scenario.cluster.brokers) > 1


def refusals(scenario, on_zookeeper: bool = False) -> list[tuple[tuple, int | None, str]]:
    """What ``scenario`` asks that the real binding (on ZooKeeper, or on the embedded
    store) cannot do: (path in the file, line if known, why). Nothing is skipped
    silently: a run refuses any of these."""
    cluster_run = is_cluster(scenario)
    lossy_reason = lossy_mount.available() if cluster_run else "only a cluster run mounts a lossy file system"
    kinds = supported(on_zookeeper or cluster_run, cluster_run, lossy_reason is None)
    nemesis_kinds = nemesis_supported(on_zookeeper or cluster_run, cluster_run, lossy_reason is None)
    out: list[tuple[tuple, int | None, str]] = []
    cluster = scenario.cluster
    if cluster.profile not in SERVE_PROFILES:
        out.append((("cluster", "profile"), None, f"isrlab serve runs the profiles {', '.join(SERVE_PROFILES)}"))
    if cluster.supervisor_restart_ms is not None:
        out.append((("cluster", "supervisor"), None, "the real binding has no process supervisor yet"))
    for i, topic in enumerate(cluster.topics):
        if topic.config and not (on_zookeeper or cluster_run):
            out.append((("cluster", "topics", i, "config"), None, "on its embedded store the real broker takes "
                        "topics from CreateTopics, which refuses topic configs (INVALID_CONFIG): run with "
                        "--zk HOST:PORT, where the run writes /config/topics/<t> as an administrator does"))
    if scenario.network != type(scenario.network)():
        out.append((("network",), None, "simulated network settings; the real binding runs on the machine's "
                    "loopback, which it cannot slow down or make lossy"))
    if scenario.disk != type(scenario.disk)():
        out.append((("disk",), None, "simulated disk settings; the real binding writes to the machine's disk"))
    for i, producer in enumerate(scenario.producers):
        if producer.sequence_restart is not None:
            out.append((("workload", "producers", i, "sequence_restart"), None, "sequence_restart picks the "
                        "simulated Java producer's epoch bump; the real binding's producer is librdkafka's"))
    for i, consumer in enumerate(scenario.consumers):
        if consumer.auto_offset_reset == "none" or consumer.validate_positions is not None:
            out.append((("workload", "consumers", i), None, "auto_offset_reset: none and validate_positions are "
                        "not supported by the real binding's consumers"))
    if scenario.group_consumers:
        factor = broker_config(cluster.profile, dict(cluster.config)).offsets_topic_replication_factor
        if factor > len(cluster.brokers):
            first = scenario.group_consumers[0]
            out.append((("workload", "consumers", first.index, "group"), None,
                        f"offsets.topic.replication.factor is {factor} but the cluster has {len(cluster.brokers)} "
                        f"broker(s): the broker never creates __consumer_offsets, so group {first.group!r} would "
                        "wait for a coordinator all run (set cluster.config.offsets.topic.replication.factor)"))
    for group in scenario.group_consumers:
        if "sticky" in group.assignors:
            out.append((("workload", "consumers", group.index, "partition.assignment.strategy"), None,
                        "the real binding's group members are librdkafka's, which has no eager sticky assignor "
                        "(only cooperative-sticky, another protocol): use range or roundrobin"))
    for i, step in enumerate(scenario.faults):
        kind = fm.kind_of(step.fault)
        if kind not in kinds:
            why = lossy_reason if kind == "power_loss" and cluster_run else UNSUPPORTED[kind]
            out.append((("faults", i, kind), step.line, f"the real binding cannot apply {kind}: {why}"))
            continue
        why = link_refusal(step.fault) or _client_target(step.fault)
        if why:
            out.append((("faults", i, kind), step.line, why))
    if scenario.nemesis is not None:
        bad = sorted(set(scenario.nemesis.kinds) - nemesis_kinds)
        if bad:
            where = ("on a local cluster" if cluster_run else "on ZooKeeper" if on_zookeeper else
                     "on its embedded store (--zk adds expire_session)")
            out.append((("nemesis", "kinds"), None, f"the real binding {where} can draw only "
                        f"{', '.join(sorted(nemesis_kinds))}, not {', '.join(bad)}"))
    return out


def _client_target(fault) -> str | None:
    """The cluster's clients share one node behind the proxy (``client``): a network
    fault may name brokers and ``zk``, not one client alone."""
    if not isinstance(fault, fm.NETWORK):
        return None
    named = [value for f in dataclass_fields(fault) for value in _names(getattr(fault, f.name))]
    clients = sorted({n for n in named if isinstance(n, str) and broker_id_of(n) is None and n != SERVICE_NODE
                      and n not in (fm.CONTROLLER, fm.RANDOM)})
    if clients:
        return (f"the real cluster's clients all reach the brokers through one node of the fault proxy "
                f"({CLIENT_NODE}), so a network fault cannot single out {', '.join(clients)}")
    return None


def _names(value) -> list:
    if isinstance(value, (tuple, list)):
        return [n for item in value for n in _names(item)]
    return [value]
