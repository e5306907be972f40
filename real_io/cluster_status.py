"""``isrlab cluster status``: what a local cluster (real_io/cluster.py) is doing, read
from outside its processes, the way an operator's tools read a Kafka cluster.

- processes: ``cluster.json`` and ``/proc`` (alive, paused by SIGSTOP, or down);
- metadata: ZooKeeper through kazoo, in the layout the core writes
  (broker_core/coordination.py): ``/controller``, ``/brokers/ids``,
  ``/brokers/topics/<t>`` (the replicas) and ``.../partitions/<p>/state`` (leader,
  leader epoch, ISR);
- offsets: ListOffsets through confluent-kafka (librdkafka sends it to each partition's
  leader): the high watermark (latest) and the log start offset (earliest).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from broker_core import coordination as coord
from real_io import process_identity
from real_io.cluster import read_record
from real_io.process_identity import ProcessIdentity
from real_io.real_clients import QUIET, UNUSED_GROUP

ZK_TIMEOUT_S = 5.0
OFFSETS_TIMEOUT_S = 5.0


@dataclass
class BrokerRow:
    broker_id: int
    state: str  # alive, paused, down
    pid: int | None
    address: str
    registered: bool | None = None  # in /brokers/ids; None when ZooKeeper did not answer


@dataclass
class PartitionRow:
    topic: str
    partition: int
    replicas: list[int]
    leader: int | None = None  # -1 in ZooKeeper: no leader
    leader_epoch: int | None = None
    isr: list[int] | None = None
    high_watermark: int | None = None
    log_start_offset: int | None = None
    offsets_error: str | None = None


@dataclass
class ClusterStatus:
    directory: str
    state: str  # what cluster.json says: starting, running, stopping, stopped
    bootstrap: str
    zookeeper: str  # alive, paused, down
    zk_connect: str
    brokers: list[BrokerRow]
    controller: int | None = None
    partitions: list[PartitionRow] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _state(entry: dict) -> tuple[str, int | None]:
    try:
        identity = ProcessIdentity.from_data(entry)
    except (KeyError, TypeError, ValueError):
        return "down", None
    state = process_identity.state(identity)
    return ("alive" if state == "running" else "down" if state == "gone" else state), identity.pid


def cluster_status(directory, read_offsets: bool = True) -> ClusterStatus:
    record = read_record(directory)
    zookeeper = record.get("zookeeper") or {}
    zk_state = _state(zookeeper)[0] if zookeeper else "down"
    brokers = []
    for broker, entry in sorted((record.get("brokers") or {}).items(), key=lambda item: int(item[0])):
        state, pid = _state(entry)
        brokers.append(BrokerRow(int(broker), state, pid, entry.get("advertised") or entry.get("listen", "?")))
    status = ClusterStatus(record.get("directory", str(directory)), record.get("state", "?"),
                           record.get("bootstrap", ""), zk_state, zookeeper.get("connect", ""), brokers)
    if zk_state != "alive":
        status.problems.append(f"ZooKeeper is {zk_state}: no controller, leaders or ISRs to read")
        return status
    _read_zookeeper(status)
    serving = [b.address for b in brokers if b.state == "alive"]
    if read_offsets and serving and status.partitions:
        _read_offsets(status, ",".join(serving))
    return status


def _read_zookeeper(status: ClusterStatus) -> None:
    from kazoo.client import KazooClient
    from kazoo.exceptions import KazooException, NoNodeError
    from kazoo.handlers.threading import KazooTimeoutError
    client = KazooClient(hosts=status.zk_connect, timeout=ZK_TIMEOUT_S)
    try:
        client.start(timeout=ZK_TIMEOUT_S)
    except KazooTimeoutError:
        status.problems.append(f"ZooKeeper at {status.zk_connect} did not answer within {ZK_TIMEOUT_S:.0f}s")
        client.close()
        return
    try:
        registered = set(_children(client, coord.BROKER_IDS_PATH))
        for row in status.brokers:
            row.registered = str(row.broker_id) in registered
        try:
            status.controller = int(coord.decode_data(client.get(coord.CONTROLLER_PATH)[0])["brokerid"])
        except NoNodeError:
            status.controller = None
        for topic in sorted(_children(client, coord.TOPICS_PATH)):
            status.partitions += _topic_partitions(client, topic)
    except (KazooException, ValueError, KeyError, TypeError) as error:
        status.problems.append(f"reading ZooKeeper failed: {type(error).__name__}: {error}")
    finally:
        client.stop()
        client.close()


def _children(client, path: str) -> list[str]:
    from kazoo.exceptions import NoNodeError
    try:
        return client.get_children(path)
    except NoNodeError:
        return []


def _topic_partitions(client, topic: str) -> list[PartitionRow]:
    from kazoo.exceptions import NoNodeError
    assignment = coord.decode_data(client.get(coord.topic_path(topic))[0])
    rows = []
    for number, replicas in sorted(assignment["partitions"].items(), key=lambda item: int(item[0])):
        row = PartitionRow(topic, int(number), [int(r) for r in replicas])
        try:
            state = coord.decode_data(client.get(coord.partition_state_path(topic, int(number)))[0])
        except NoNodeError:
            rows.append(row)  # assigned, not yet elected
            continue
        row.leader = int(state["leader"])
        row.leader_epoch = int(state["leader_epoch"])
        row.isr = [int(b) for b in state["isr"]]
        rows.append(row)
    return rows


def _read_offsets(status: ClusterStatus, bootstrap: str) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": UNUSED_GROUP, "enable.auto.commit": False,
                         **QUIET})
    alive = {b.broker_id for b in status.brokers if b.state == "alive"}
    try:
        for row in status.partitions:
            if row.leader not in alive:  # no leader, or it is down or paused: nobody to ask
                row.offsets_error = "no leader to ask"
                continue
            try:
                low, high = consumer.get_watermark_offsets(TopicPartition(row.topic, row.partition),
                                                           timeout=OFFSETS_TIMEOUT_S)
            except KafkaException as error:
                row.offsets_error = error.args[0].name() if error.args else "no answer"
                continue
            row.log_start_offset, row.high_watermark = (low if low >= 0 else None), (high if high >= 0 else None)
    finally:
        consumer.close()


def format_status(status: ClusterStatus) -> str:
    lines = [f"cluster in {status.directory} ({status.state}); bootstrap {status.bootstrap}",
             f"ZooKeeper {status.zk_connect}: {status.zookeeper}",
             f"controller: {'none' if status.controller is None else f'broker {status.controller}'}", "",
             f"{'broker':>6}  {'state':<7}  {'pid':>7}  {'address':<21}  registered"]
    for b in status.brokers:
        registered = "?" if b.registered is None else "yes" if b.registered else "no"
        pid = b.pid if b.pid and b.state != "down" else "-"
        lines.append(f"{b.broker_id:>6}  {b.state:<7}  {pid:>7}  {b.address:<21}  {registered}")
    if status.partitions:
        lines += ["", f"{'partition':<24}  {'leader':>6}  {'epoch':>5}  {'replicas':<12}  {'isr':<12}  "
                      f"{'high_watermark':>14}  {'log_start':>9}"]
        for p in status.partitions:
            leader = "-" if p.leader is None else "none" if p.leader < 0 else str(p.leader)
            hw = p.high_watermark if p.high_watermark is not None else (p.offsets_error or "-")
            lines.append(f"{f'{p.topic}-{p.partition}':<24}  {leader:>6}  "
                         f"{'-' if p.leader_epoch is None else p.leader_epoch:>5}  {_ids(p.replicas):<12}  "
                         f"{'-' if p.isr is None else _ids(p.isr):<12}  {hw:>14}  "
                         f"{'-' if p.log_start_offset is None else p.log_start_offset:>9}")
    elif status.zookeeper == "alive":
        lines += ["", "no topics"]
    lines += [f"note: {problem}" for problem in status.problems]
    return "\n".join(lines)


def _ids(ids: list[int]) -> str:
    return ",".join(map(str, ids))
