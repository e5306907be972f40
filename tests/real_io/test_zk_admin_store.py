"""The admin tools' functions over a real ZooKeeper (real_io/zk_admin_store.py) write the
same nodes, byte for byte, as over the simulation's store: a scenario's admin steps are
written once (broker_core/admin_nodes.py, dynamic_config.change_topic_config,
quota_config.change_client_quota) and carried out alike in both bindings. The refusals
the tools give (an existing reassignment, a pending preferred election, a topic that
does not exist) come out the same too."""
from __future__ import annotations

import itertools
import time

import pytest
from kazoo.client import KazooClient

from broker_core import coordination as coord
from broker_core.admin_nodes import (
    add_partition_nodes, admin_topic_nodes, assigned_replicas, create_topic_nodes, mark_topic_deleted,
    request_preferred_election, write_reassignment)
from broker_core.coordination_store import CoordinationStore
from broker_core.dynamic_config import change_topic_config
from broker_core.quota_config import change_client_quota
from broker_core.types import TopicPartition
from real_io.zk_admin_store import ZkAdminStore

_roots = itertools.count()


@pytest.fixture
def stores(zookeeper):
    """(the simulation's store, a ZooKeeper store in a fresh chroot), each with three
    registered brokers and topic t on [1, 2]."""
    chroot = f"/admin-store-{next(_roots)}"
    real = ZkAdminStore.connect(zookeeper.hosts, chroot)
    sim = CoordinationStore(lambda owner, event: None)
    for store in (sim, real):
        for broker in (1, 2, 3):
            store.put(f"{coord.BROKER_IDS_PATH}/{broker}", b"{}")
        for path, data in admin_topic_nodes("t", {0: [1, 2]}, {}):
            store.put(path, data)
    yield sim, real
    real.client.delete(chroot, recursive=True)
    real.close()


def tree(store) -> dict[str, bytes]:
    """Every node below / and its data, as the store lists them."""
    out: dict[str, bytes] = {}
    todo = [""]
    while todo:
        path = todo.pop()
        for child in store.children(path or "/"):
            full = f"{path}/{child}"
            out[full] = store.get(full) or b""
            todo.append(full)
    return out


def both(stores, function, *args):
    answers = [function(store, *args) for store in stores]
    assert answers[0] == answers[1]
    return answers[0]


def test_every_admin_step_writes_the_same_nodes_in_zookeeper_as_in_the_simulation(stores):
    assert both(stores, change_topic_config, "t", {"retention.ms": 1000}) == {"retention.ms": 1000}
    assert both(stores, change_topic_config, "absent", {"retention.ms": 1000}) is None
    assert both(stores, change_client_quota, "/config/clients/app", {"producer_byte_rate": 5000})
    assert both(stores, change_client_quota, "/config/clients/app", {"producer_byte_rate": None}) == {}
    created = both(stores, create_topic_nodes, "u", 2, 2, None)
    assert sorted(created) == [0, 1] and all(len(set(r)) == 2 for r in created.values())
    assert both(stores, create_topic_nodes, "u", 2, 2, None) == "Topic 'u' already exists."
    assert both(stores, add_partition_nodes, "t", 2, None)
    assert both(stores, mark_topic_deleted, "u") is None
    assert both(stores, mark_topic_deleted, "u") == "topic u is already marked for deletion"
    assert both(stores, write_reassignment, {"t-0": (3, 2)}) is None
    assert both(stores, write_reassignment, {"t-1": (1, 2)}) == "There is an existing assignment running."
    assert both(stores, request_preferred_election, None) == (["t-0", "t-1", "u-0", "u-1"], True)
    assert both(stores, request_preferred_election, ("t-0",)) == (["t-0"], False)  # the first is pending
    sim, real = stores
    assert tree(real) == tree(sim)
    assert "/config/changes/config_change_0000000002" in tree(real)  # sequential, numbered as ZooKeeper does
    assert assigned_replicas(real, TopicPartition("t", 0)) == (1, 2)
    assert assigned_replicas(real, TopicPartition("t", 9)) is None


def test_a_set_fires_a_watch_as_the_admin_tool_does(stores, zookeeper):
    """add_partition_nodes rewrites the topic's node with set_data, which the controller's
    partition-modification watch must hear: on ZooKeeper every set fires the watch."""
    _, real = stores
    watcher = KazooClient(hosts=zookeeper.hosts + real.chroot)
    watcher.start(timeout=10)
    try:
        fired = []
        watcher.get(coord.topic_path("t"), watch=fired.append)
        assert add_partition_nodes(real, "t", 3, None)
        deadline = time.monotonic() + 10
        while not fired and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [event.type for event in fired] == ["CHANGED"]
    finally:
        watcher.stop()
        watcher.close()
