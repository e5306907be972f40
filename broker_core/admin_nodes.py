"""What an administrator writes into the coordination service from outside the
cluster, written once for both bindings: the simulation puts these nodes into its store
and the real cluster run into ZooKeeper, so both create a scenario's topics alike."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from broker_core import coordination as coord
from broker_core.coordination_store import AdminStore
from broker_core.dynamic_config import encode_overrides, topic_config_path
from broker_core.partition_admin import new_partitions_assignment
from broker_core.reassignment import REASSIGN_PARTITIONS_PATH, encode_reassignment
from broker_core.topic_admin import (
    TopicCreationError, assign_replicas_to_brokers, assignment_data, explicit_assignment, start_index_for,
    validate_topic_name)
from broker_core.topic_deletion import delete_topic_path
from broker_core.types import TopicPartition


def admin_topic_nodes(topic: str, assignment: Mapping[int, Sequence[int]],
                      overrides: Mapping[str, Any]) -> list[tuple[str, bytes]]:
    """The nodes an administrator writes to create a topic with a given assignment from
    outside the cluster, in order (kafka-topics.sh --create --zookeeper, 2.7.0
    AdminZkClient.createTopicWithAssignment): the config overrides first, then the
    assignment, the node the controller watches. The simulation writes them into its
    store and the real cluster run into ZooKeeper, so both create topics alike."""
    partitions = {str(p): list(r) for p, r in sorted(assignment.items())}
    return [(topic_config_path(topic), encode_overrides(overrides)),
            (coord.topic_path(topic), coord.encode_data({"partitions": partitions}))]


# -- the admin tools' topic changes over a coordination store (a scenario's steps) ------------
# ``store``: the simulation's CoordinationStore or a real ZooKeeper (real_io/zk_admin_store.py)
def _registered_brokers(store: AdminStore) -> list[int]:
    return sorted(int(b) for b in store.children(coord.BROKER_IDS_PATH))


def create_topic_nodes(store: AdminStore, topic: str, partitions: int, replication_factor: int,
                       assignment: Mapping[int, Sequence[int]] | None = None) -> dict[int, tuple[int, ...]] | str:
    """``kafka-topics.sh --create --zookeeper`` (2.7.0 TopicCommand.ZookeeperTopicService
    .createTopic: AdminUtils.assignReplicasToBrokers over the registered brokers unless an
    assignment is given, then AdminZkClient.createTopicWithAssignment). The assignment
    written, or why the tool refused."""
    try:
        validate_topic_name(topic)
        if store.get(coord.topic_path(topic)) is not None:
            return f"Topic '{topic}' already exists."
        if assignment is not None:
            chosen = explicit_assignment(sorted(assignment.items()), -1, -1)
        else:
            brokers = _registered_brokers(store)
            if not brokers:
                return "no broker is registered"
            chosen = assign_replicas_to_brokers(brokers, partitions, replication_factor,
                                                start_index_for(topic, len(brokers)))
    except TopicCreationError as refused:
        return refused.message
    for path, data in admin_topic_nodes(topic, chosen, {}):
        store.put(path, data)
    return chosen


def mark_topic_deleted(store: AdminStore, topic: str) -> str | None:
    """``kafka-topics.sh --delete --zookeeper`` (2.7.0 AdminZkClient.deleteTopic): write
    /admin/delete_topics/<topic> for the controller. None, or why the tool refused."""
    if store.get(coord.topic_path(topic)) is None:
        return f"Topic `{topic}` to delete does not exist"
    if store.get(delete_topic_path(topic)) is not None:
        return f"topic {topic} is already marked for deletion"
    store.put(delete_topic_path(topic), b"")
    return None


def add_partition_nodes(store: AdminStore, topic: str, count: int,
                        assignment: Sequence[Sequence[int]] | None = None) -> dict[int, tuple[int, ...]] | str:
    """``kafka-topics.sh --alter --partitions --zookeeper`` (2.7.0 AdminZkClient
    .addPartitions: createNewPartitionsAssignment, then the topic's node rewritten, which
    the controller's partition-modification watch reads). The new partitions'
    assignment, or why the tool refused."""
    data = coord.decode_data(store.get(coord.topic_path(topic)))
    if not data or not data.get("partitions"):
        return f"The topic '{topic}' does not exist."
    existing = {int(p): tuple(int(b) for b in r) for p, r in data["partitions"].items()}
    try:
        new = new_partitions_assignment(topic, existing, _registered_brokers(store), count, assignment)
    except TopicCreationError as refused:
        return refused.message
    store.set_data(coord.topic_path(topic), assignment_data({**existing, **new}))
    return new


def write_reassignment(store: AdminStore, partitions: Mapping[str, Sequence[int]]) -> str | None:
    """``kafka-reassign-partitions.sh --zookeeper --execute`` (2.7.0 ReassignPartitionsCommand
    .executeAssignment with a ZooKeeper client): refused while a reassignment runs, or for
    a partition that does not exist or a list naming a broker that is not registered
    twice or not at all; else /admin/reassign_partitions is created for the controller.
    None, or why the tool refused."""
    if store.get(REASSIGN_PARTITIONS_PATH) is not None:
        return "There is an existing assignment running."
    brokers = set(_registered_brokers(store))
    asked: dict[TopicPartition, tuple[int, ...]] = {}
    for name, replicas in sorted(partitions.items()):
        topic, _, number = name.rpartition("-")
        data = coord.decode_data(store.get(coord.topic_path(topic))) if topic else None
        if not number.isdigit() or not data or number not in data.get("partitions", {}):
            return f"Topic {topic} not found" if not data else f"Partition {name} not found"
        if len(set(replicas)) != len(replicas) or not replicas:
            return f"Partition {name}: the replica list {list(replicas)} is empty or names a broker twice"
        unknown = sorted(set(replicas) - brokers)
        if unknown:
            return f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}"
        asked[TopicPartition(topic, int(number))] = tuple(replicas)
    store.put(REASSIGN_PARTITIONS_PATH, encode_reassignment(asked))
    return None


def request_preferred_election(store: AdminStore, partitions: Sequence[str] | None) -> tuple[list[str], bool]:
    """``kafka-preferred-replica-election.sh --zookeeper`` (2.7.0
    PreferredReplicaLeaderElectionCommand.ZkCommand): write /admin/preferred_replica_election
    for the controller, every partition the store lists when none is named. Like the tool,
    refuse while an earlier request is still there (the controller has not finished it).
    (the partitions asked, whether the node was written)."""
    path = coord.PREFERRED_REPLICA_ELECTION_PATH
    requested = list(partitions) if partitions is not None else _all_partitions(store)
    written = store.get(path) is None
    if written:
        entries = []
        for name in requested:
            tp = TopicPartition.parse(name)
            entries.append({"topic": tp.topic, "partition": tp.partition})
        store.put(path, coord.encode_data({"version": 1, "partitions": entries}))
    return requested, written


def _all_partitions(store: AdminStore) -> list[str]:
    """Every partition the coordination store lists, as the admin tool reads them."""
    out = []
    for topic in store.children(coord.TOPICS_PATH):
        data = coord.decode_data(store.get(coord.topic_path(topic))) or {}
        out += [str(TopicPartition(topic, int(p))) for p in sorted(data.get("partitions", {}), key=int)]
    return out


def assigned_replicas(store: AdminStore, tp: TopicPartition) -> tuple[int, ...] | None:
    """The partition's replicas as its topic node holds them now (a reassignment moves
    them); None where the node or the partition is gone. Both bindings' settle rule
    reads this (faults/final_phase.py partition_settled)."""
    data = coord.decode_data(store.get(coord.topic_path(tp.topic)))
    replicas = data.get("partitions", {}).get(str(tp.partition)) if isinstance(data, dict) else None
    return tuple(replicas) if replicas else None
