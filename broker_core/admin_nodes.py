"""What an administrator writes into the coordination service from outside the
cluster, written once for both bindings: the simulation puts these nodes into its store
and the real cluster run into ZooKeeper, so both create a scenario's topics alike."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from broker_core import coordination as coord
from broker_core.dynamic_config import encode_overrides, topic_config_path


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
