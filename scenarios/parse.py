"""Build a Scenario from YAML, strictly: every problem names file, line and field."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from analysis.workload import KEY_DISTRIBUTIONS, ROUND_ROBIN_KEYS
from broker_core.config import broker_config, client_defaults, topic_config, PROFILES, SEQUENCE_RESTARTS
from broker_core.errors import ConfigError
from broker_core.partitioner import PARTITIONERS
from broker_core.types import TopicPartition
from faults.nodes import SERVICE_NODE, broker_node
from scenarios.parse_faults import FaultParser, check_contradictions
from scenarios.parse_groups import group_consumer, member_names
from scenarios.model import (
    ClusterSpec, ConsumerWorkload, DiskSpec, FinalPhase, NetworkSpec, ProducerWorkload,
    Scenario, ScriptedRecord, TopicSpec)
from scenarios.source import Fields, ScenarioError, Source, convert, load_yaml
from scenarios.swarm import parse_swarm
from scenarios.variants import apply_set, variant_data, variant_lines

ACKS = {"0": 0, "1": 1, "all": -1, "-1": -1}


def load_scenario(path: str | Path, settings: tuple[str, ...] = ()) -> Scenario:
    """The scenario in ``path``, its ``variants`` in ``.variants``; ``settings`` are
    ``--set key=value`` overrides applied to the base and to every variant."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(str(path), None, "", f"cannot read the file: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ScenarioError(str(path), None, "", "the file is not UTF-8 text") from None
    return parse_scenario(text, str(path), settings)


def parse_scenario(text: str, filename: str, settings: tuple[str, ...] = ()) -> Scenario:
    data, lines = load_yaml(text, filename)
    source = Source(filename, lines)
    if not isinstance(data, dict):
        raise source.error((), f"a scenario must be a mapping, not {type(data).__name__}")
    documents = variant_data(source, data)
    base = {k: v for k, v in data.items() if k != "variants"}
    for assignment in settings:
        apply_set(base, assignment, filename)
        for document in documents.values():
            apply_set(document, assignment, filename)
    scenario = _scenario(source, base, filename)
    variants = []
    for name, document in documents.items():
        try:
            variant = _scenario(Source(filename, variant_lines(lines, name)), document, filename)
        except ScenarioError as exc:
            raise ScenarioError(exc.filename, exc.line, exc.field, f"(variant {name}) {exc.message}") from None
        variants.append(replace(variant, name=f"{scenario.name}-{name}", variant=name, settings=settings))
    return replace(scenario, variants=tuple(variants), settings=settings)


def _scenario(source: Source, data: dict, filename: str) -> Scenario:
    top = Fields(source, data, (), "a scenario")
    name = top.take("name", "str", Path(filename).stem)
    description = top.take("description", "str", "")
    cluster = _cluster(source, top.take("cluster", "map"))
    network = _network(source, top.take("network", "map", {}))
    disk = _disk(source, top.take("disk", "map", {}))
    duration_ms = top.take("duration", "duration", check=lambda v: None if v > 0 else "must be more than 0")
    workload = Fields(source, top.take("workload", "map", {}), ("workload",))
    topics = {t.name for t in cluster.topics}
    producers = tuple(_producer(source, item, ("workload", "producers", i), topics, cluster.profile, duration_ms)
                      for i, item in enumerate(workload.take("producers", "list", [])))
    raw_consumers = workload.take("consumers", "list", [])
    consumers = tuple(_consumer(source, item, ("workload", "consumers", i), topics)
                      for i, item in enumerate(raw_consumers) if not _is_group(item))
    groups = tuple(group_consumer(source, item, ("workload", "consumers", i), topics, i)
                   for i, item in enumerate(raw_consumers) if _is_group(item))
    workload.done()
    nodes = _node_names(cluster, producers, consumers, groups)
    fault_parser = FaultParser(source, cluster, nodes, duration_ms, tuple(g.group for g in groups))
    raw_faults = top.take("faults", "list", [])
    paths = [("faults", i) for i in range(len(raw_faults))]
    faults = tuple(fault_parser.step(item, path) for item, path in zip(raw_faults, paths))
    check_contradictions(source, list(faults), paths, cluster.brokers)
    nemesis = fault_parser.nemesis(top.take("nemesis", "map"), ("nemesis",)) if top.has("nemesis") else None
    expect, expect_lines = _expectations(source, top.take("expect", "map", {}), cluster)
    expect_invariant = expect.pop(INVARIANT_EXPECTATION, None)
    final = Fields(source, top.take("final", "map", {}), ("final",))
    final_phase = FinalPhase(final.take("max_wait", "duration", 120000),
                             final.take("restart", "str", "down",
                                        lambda v: None if v in ("down", "all") else "must be down or all"))
    final.done()
    sample = top.take("sample_interval", "duration", 100, lambda v: None if v > 0 else "must be more than 0")
    high_watermarks = top.take("trace_high_watermarks", "bool", True)
    swarm = None
    if top.has("swarm"):
        base = {k: v for k, v in data.items() if k != "swarm"}
        swarm = parse_swarm(source, top.take("swarm", "map"), cluster, duration_ms, base)
    top.done()
    return Scenario(name, filename, description, cluster, network, disk, producers, consumers, faults,
                    duration_ms, final_phase, sample, nemesis, expect, expect_lines,
                    trace_high_watermarks=high_watermarks, swarm=swarm, expect_invariant=expect_invariant,
                    group_consumers=groups)


def _cluster(source: Source, data: Any) -> ClusterSpec:
    path = ("cluster",)
    f = Fields(source, data, path)
    raw_brokers = f.take("brokers", "any")
    if isinstance(raw_brokers, int) and not isinstance(raw_brokers, bool):
        if not 1 <= raw_brokers <= 100:
            raise source.error(path + ("brokers",), "must be between 1 and 100")
        brokers = tuple(range(1, raw_brokers + 1))
    elif isinstance(raw_brokers, list) and raw_brokers:
        brokers = tuple(convert(source, path + ("brokers", i), b, "int") for i, b in enumerate(raw_brokers))
        if len(set(brokers)) != len(brokers) or any(b < 0 for b in brokers):
            raise source.error(path + ("brokers",), "broker ids must be distinct and not negative")
    else:
        raise source.error(path + ("brokers",), "must be a count (3) or a list of broker ids ([1, 2, 3])")
    profile = f.take("profile", "str", "kafka-2.7",
                     lambda v: None if v in PROFILES else f"unknown profile; known: {', '.join(sorted(PROFILES))}")
    config = f.take("config", "map", {})
    try:
        base = broker_config(profile, config)
    except ConfigError as exc:
        raise source.error(path + ("config", exc.key), exc.message) from None
    topics = []
    for i, item in enumerate(f.take("topics", "list")):
        topics.append(_topic(source, item, path + ("topics", i), brokers, base))
    if len({t.name for t in topics}) != len(topics):
        raise source.error(path + ("topics",), "topic names must be distinct")
    supervisor = f.take("supervisor", "map", None)
    restart_ms = None
    if supervisor is not None:
        s = Fields(source, supervisor, path + ("supervisor",), "a supervisor")
        restart_ms = s.take("restart_after", "duration", check=lambda v: None if v > 0 else "must be more than 0")
        s.done()
    f.done()
    return ClusterSpec(brokers, profile, dict(config), tuple(topics), restart_ms)


def _topic(source: Source, data: Any, path: tuple, brokers: tuple[int, ...], base) -> TopicSpec:
    f = Fields(source, data, path, "a topic")
    name = f.take("name", "str", check=lambda v: None if v and "/" not in v and " " not in v else "must be a name without / or spaces")
    partitions = f.take("partitions", "int", 1, lambda v: None if 1 <= v <= 1000 else "must be between 1 and 1000")
    rf = f.take("replication_factor", "int", min(3, len(brokers)),
                lambda v: None if 1 <= v <= len(brokers) else f"must be between 1 and the number of brokers ({len(brokers)})")
    config = f.take("config", "map", {})
    try:
        topic_config(base, config)
    except ConfigError as exc:
        raise source.error(path + ("config", exc.key), exc.message) from None
    assignment = {p: tuple(brokers[(p + r) % len(brokers)] for r in range(rf)) for p in range(partitions)}
    raw = f.take("assignment", "map", {})
    for key in raw:
        apath = path + ("assignment", key)
        if not isinstance(key, int) or not 0 <= key < partitions:
            raise source.error(apath, f"partition must be a number from 0 to {partitions - 1}")
        replicas = convert(source, apath, raw[key], "list")
        ids = tuple(convert(source, apath + (i,), r, "int") for i, r in enumerate(replicas))
        for i, broker in enumerate(ids):
            if broker not in brokers:
                raise source.error(apath + (i,), f"broker {broker} does not exist (brokers: {list(brokers)})")
        if len(ids) != rf or len(set(ids)) != len(ids):
            raise source.error(apath, f"must list {rf} distinct brokers (the replication factor)")
        assignment[key] = ids
    f.done()
    return TopicSpec(name, partitions, rf, dict(config), assignment)


def _network(source: Source, data: Any) -> NetworkSpec:
    f = Fields(source, data, ("network",))
    latency = f.take("latency_ms", "number", 1.0, lambda v: None if v >= 0 else "must not be negative")
    jitter = f.take("jitter_ms", "number", 0.5, lambda v: None if v >= 0 else "must not be negative")
    loss = f.take("loss", "number", 0.0, lambda v: None if 0 <= v < 1 else "must be at least 0 and below 1")
    hold = f.take("hold", "duration", 30000)
    f.done()
    return NetworkSpec(latency, jitter, loss, hold)


def _disk(source: Source, data: Any) -> DiskSpec:
    f = Fields(source, data, ("disk",))
    fsync = f.take("fsync_ms", "number", 2.0, lambda v: None if v >= 0 else "must not be negative")
    writeback = f.take("writeback", "any", "30s")
    if writeback in (False, "never"):
        writeback_ms = None
    else:
        writeback_ms = convert(source, ("disk", "writeback"), writeback, "duration")
    f.done()
    return DiskSpec(fsync, writeback_ms)


def _acks(source: Source, path: tuple, value: Any) -> int:
    key = str(value).lower()
    if key not in ACKS or isinstance(value, bool):
        raise source.error(path, "must be 0, 1 or all")
    return ACKS[key]


JAVA_DEFAULT_RETRIES = 2**31 - 1  # the Java producer's retries default (since 2.1)


def _idempotence(source: Source, f: Fields, path: tuple, profile: str, acks: int) -> tuple[bool, int | None]:
    """``enable.idempotence`` and the retries it implies. Kafka 2.7.0/3.0.1
    ProducerConfig: set explicitly, it requires acks=all and retries > 0 (retries then
    default to Integer.MAX_VALUE); taken from the profile's default (true from 3.0,
    KIP-679), it is dropped silently when acks or retries conflict. 0.8 has none."""
    explicit = f.has("enable.idempotence")
    key_path = path + ("enable.idempotence",)
    enabled = f.take("enable.idempotence", "bool", client_defaults(profile).enable_idempotence)
    retries_given = f.has("retries")
    retries = f.take("retries", "int", None, lambda v: None if v >= 0 else "must not be negative")
    if not enabled:
        return False, retries
    if explicit and profile == "kafka-0.8":
        raise source.error(key_path, "kafka-0.8 has no idempotent producer (it came with Kafka 0.11)")
    conflict = "acks must be all" if acks != -1 else "retries must not be 0" if retries_given and retries == 0 else None
    if conflict is None:
        return True, retries if retries_given else JAVA_DEFAULT_RETRIES
    if explicit:
        raise source.error(key_path, f"the idempotent producer needs acks=all and retries > 0: {conflict}")
    return False, retries


def _producer(source: Source, data: Any, path: tuple, topics: set[str], profile: str,
              duration_ms: int) -> ProducerWorkload:
    f = Fields(source, data, path, "a producer")
    topic = f.take("topic", "str", check=lambda v: None if v in topics else f"unknown topic; topics: {sorted(topics)}")
    acks = _acks(source, path + ("acks",), f.take("acks", "any", "all"))
    idempotent, retries = _idempotence(source, f, path, profile, acks)
    positive = lambda v: None if v > 0 else "must be more than 0"
    workload = ProducerWorkload(
        topic, acks,
        rate=f.take("rate", "number", 100.0, positive),
        record_bytes=f.take("record_bytes", "int", 100, positive),
        linger_ms=f.take("linger", "duration", 10, positive),
        keys=f.take("keys", "int", None, positive),
        retries=0 if retries is None else retries,
        retry_backoff_ms=f.take("retry_backoff", "duration", 100),
        request_timeout_ms=f.take("request_timeout", "duration", 30000, positive),
        delivery_timeout_ms=f.take("delivery_timeout", "duration", 120000, positive),
        start_ms=(start := f.take("start", "duration", 0, lambda v: None if v < duration_ms else
                                  "is not before the end of the run (duration): the producer would send nothing")),
        stop_ms=f.take("stop", "duration", None,
                       lambda v: None if v > start else f"is not after start ({start} ms): the producer would send nothing"),
        partitioner=f.take("partitioner", "str", None,
                           lambda v: None if v in PARTITIONERS else f"must be one of {', '.join(PARTITIONERS)}"),
        enable_idempotence=idempotent,
        sequence_restart=f.take("sequence_restart", "str", None, lambda v: None if v in SEQUENCE_RESTARTS else
                                f"must be one of {', '.join(SEQUENCE_RESTARTS)}"),
        client_id=f.take("client.id", "str", None, _client_id_check),
    )
    workload = _keyed_workload(source, f, path, workload, duration_ms)
    f.done()
    return workload


def _client_id_check(value: str) -> str | None:
    return None if value and "/" not in value else "must be a name without /"


def _keyed_workload(source: Source, f: Fields, path: tuple, workload: ProducerWorkload,
                    duration_ms: int) -> ProducerWorkload:
    """``key_distribution`` and ``tombstone_rate`` (which need ``keys``), or a ``records:``
    script (which replaces the generated records, so it takes neither ``keys`` nor ``rate``)."""
    distribution = f.take("key_distribution", "str", ROUND_ROBIN_KEYS,
                          lambda v: None if v in KEY_DISTRIBUTIONS else f"must be one of {', '.join(KEY_DISTRIBUTIONS)}")
    rate = f.take("tombstone_rate", "number", 0.0, lambda v: None if 0 <= v <= 1 else "must be between 0 and 1")
    for name in ("key_distribution", "tombstone_rate"):
        if f.has(name) and not workload.keys:
            raise source.error(path + (name,), "needs keys (the size of the key space)")
    if not f.has("records"):
        return replace(workload, key_distribution=distribution, tombstone_rate=rate)
    for name in ("keys", "rate", "key_distribution", "tombstone_rate", "partitioner"):
        if f.has(name):
            raise source.error(path + (name,), "a producer with records: sends those records only; remove " + name)
    items = f.take("records", "list", check=lambda v: None if v else "must list at least one record")
    script: list[ScriptedRecord] = []
    at_ms = workload.start_ms
    for i, item in enumerate(items):
        r = Fields(source, item, path + ("records", i), "a record")
        key = r.take("key", "str", check=lambda v: None if v else "must not be empty")
        if not r.has("value"):
            raise source.error(path + ("records", i, "value"), "is required (null for a tombstone)")
        raw = r.data["value"]
        value = None if raw is None else convert(source, path + ("records", i, "value"), raw, "str")
        r.take("value", "any", None)
        earliest = at_ms
        at_ms = r.take("at", "duration", at_ms, lambda v: None if v >= earliest else
                       f"must not be before the record above it or the producer's start ({earliest} ms)")
        if at_ms >= (workload.stop_ms if workload.stop_ms is not None else duration_ms):
            raise source.error(path + ("records", i, "at"), "is not before the producer stops (stop or duration)")
        r.done()
        script.append(ScriptedRecord(key, value, at_ms))
    return replace(workload, records=tuple(script))


RESET_POLICIES = ("earliest", "latest", "none")


def _consumer(source: Source, data: Any, path: tuple, topics: set[str]) -> ConsumerWorkload:
    f = Fields(source, data, path, "a consumer")
    topic = f.take("topic", "str", check=lambda v: None if v in topics else f"unknown topic; topics: {sorted(topics)}")
    start_ms = f.take("start", "duration", 0)
    poll_interval_ms = f.take("poll_interval", "duration", 100, lambda v: None if v > 0 else "must be more than 0")
    reset = f.take("auto.offset.reset", "str", "earliest",
                   lambda v: None if v in RESET_POLICIES else f"must be one of {', '.join(RESET_POLICIES)}")
    start_offset = f.take("start_offset", "int", None, lambda v: None if v >= 0 else "must not be negative")
    if reset == "none" and start_offset is None:  # the Java consumer would throw NoOffsetForPartitionException
        raise source.error(path + ("auto.offset.reset",), "none needs a start_offset: there is no committed offset")
    validate = f.take("validate_positions", "bool", None)
    client_id = f.take("client.id", "str", None, _client_id_check)
    f.done()
    return ConsumerWorkload(topic, start_ms, poll_interval_ms, reset, start_offset, validate, client_id)


def _node_names(cluster: ClusterSpec, producers, consumers, groups=()) -> set[str]:
    names = {broker_node(b) for b in cluster.brokers} | {SERVICE_NODE}
    names |= {f"producer-{i}" for i in range(len(producers))}
    names |= {f"consumer-{i}" for i in range(len(consumers))}
    for number, workload in enumerate(groups):
        names |= set(member_names(workload, number))
    return names


def _is_group(item: Any) -> bool:
    """A consumers entry with ``group:`` is a group consumer (scenarios/parse_groups.py);
    the others read every partition with no group, numbered among themselves."""
    return isinstance(item, dict) and "group" in item


def _expectations(source: Source, data: Any, cluster: ClusterSpec) -> tuple[dict, dict]:
    f = Fields(source, data, ("expect",))
    if not data:
        return {}, {}
    from analysis.verdict import CHECKER_NAMES, MAPPING_CHECKERS, parse_expectation
    expect, lines = {}, {}
    if isinstance(data, dict) and INVARIANT_EXPECTATION in data:
        return _invariant_expectation(source, data, f)
    for name in list(data):
        if name not in CHECKER_NAMES:
            raise source.error(("expect", name), f"unknown checker {name!r}; checkers: {', '.join(CHECKER_NAMES)}")
        value = f.take(name, "any")
        if name in MAPPING_CHECKERS and isinstance(value, dict):
            _check_partitions(source, ("expect", name), value, cluster)
        try:
            expect[name] = parse_expectation(value, name)
        except ValueError as exc:
            raise source.error(("expect", name), str(exc)) from None
        lines[name] = source.line(("expect", name))
    f.done()
    return expect, lines


INVARIANT_EXPECTATION = "invariant_violated"


def _invariant_expectation(source: Source, data: dict, f: Fields) -> tuple[dict, dict]:
    """``expect: {invariant_violated: NAME}``: the run checks the invariants after every
    step and passes when NAME stops it. A stopped run is not judged, so no checker can
    be expected beside it."""
    from broker_core.invariants import INVARIANTS
    path = ("expect", INVARIANT_EXPECTATION)
    others = [name for name in data if name != INVARIANT_EXPECTATION]
    if others:
        raise source.error(("expect", others[0]), f"{INVARIANT_EXPECTATION} goes alone: a run an invariant "
                                                  "stops is not judged, so no checker can be expected beside it")
    name = f.take(INVARIANT_EXPECTATION, "str")
    if name not in INVARIANTS:
        raise source.error(path, f"unknown invariant {name!r}; invariants: {', '.join(INVARIANTS)}")
    f.done()
    return {INVARIANT_EXPECTATION: name}, {INVARIANT_EXPECTATION: source.line(path)}


def _check_partitions(source: Source, path: tuple, value: dict, cluster: ClusterSpec) -> None:
    """Keys of a per-partition expectation must name partitions of the scenario."""
    known = [str(TopicPartition(t.name, i)) for t in cluster.topics for i in range(t.partitions)]
    for key in value:
        if str(key) not in known:
            shown = ", ".join(known[:10]) + (", ..." if len(known) > 10 else "")
            raise source.error(path + (key,), f"unknown partition {key!r}; partitions: {shown}")
