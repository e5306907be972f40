"""The core against a coordination service as unkind as ZooKeeper: requests that fail
with CONNECTION_LOSS after being applied, resends that answer NODE_EXISTS or
BAD_VERSION, and a restarted broker whose previous session still holds its
registration. Driven through tests/harness.py (real core nodes, the project's store)."""
from __future__ import annotations

import pytest

from broker_core import coordination as coord
from broker_core.errors import ErrorCode
from broker_core.types import TopicPartition
from tests.harness import Cluster

STATE = coord.partition_state_path("t", 0)


def started(**kwargs) -> Cluster:
    cluster = Cluster(**kwargs)
    cluster.start_all()
    assert cluster.wait_for(cluster.settled, 5000), "the cluster never settled"
    return cluster


def registered(cluster: Cluster, broker: int, since: int = 0) -> bool:
    return any(b == broker and t >= since for t, b, _ in cluster.traced("broker_registered"))


def test_a_2_7_broker_restarted_while_its_old_session_lives_exits_at_startup_and_stays_down():
    """Kafka 2.7.0 KafkaZkClient.registerBroker -> checkedEphemeralCreate:
    CheckedEphemeral.getAfterNodeExists throws NODEEXISTS when the node's ephemeral owner
    is another session; KafkaServer.startup catches it as fatal, shuts down and
    KafkaServerStartable exits. The broker stays down until something restarts it."""
    cluster = started(profile="kafka-2.7")
    old_session = cluster.sessions[3]
    cluster.crash(3)  # its session lives on for zookeeper.session.timeout.ms (18 s)
    cluster.run_for(1000)
    restarted_at = cluster.now
    cluster.start(3)
    new_session = cluster.sessions[3]
    cluster.run_for(500)
    assert 3 not in cluster.nodes, "the 2.7 broker kept running without a registration"
    conflicts = [f for _, b, f in cluster.traced("broker_registration_conflict") if b == 3]
    assert conflicts == [{"session_id": new_session, "owner_session": old_session, "action": "exit"}]
    halted = [f for t, b, f in cluster.traced("broker_halted") if b == 3 and t >= restarted_at]
    assert halted and "registration" in halted[0]["reason"]
    assert not registered(cluster, 3, restarted_at)
    cluster.run_for(30000)  # the old session expires; nothing restarts the process
    assert 3 not in cluster.nodes and cluster.store.get(coord.broker_path(3)) is None
    cluster.start(3)  # a later restart finds the path free
    assert cluster.wait_for(lambda: registered(cluster, 3, restarted_at), 2000)
    assert cluster.wait_for(cluster.settled, 40000)


def test_a_0_8_broker_restarted_while_its_old_session_lives_retries_until_that_session_expires():
    """Kafka 0.8.2.2 ZkUtils.registerBrokerInZk -> createEphemeralPathExpectConflictHandleZKBug:
    on ZkNodeExistsException with the same broker's data it sleeps the session timeout
    (KafkaHealthcheck passes zkSessionTimeoutMs as backoff) and tries again, until the old
    session's node is gone."""
    cluster = started(profile="kafka-0.8")  # zookeeper.session.timeout.ms 6000
    old_session = cluster.sessions[3]
    cluster.crash(3)
    cluster.run_for(1000)
    restarted_at = cluster.now
    cluster.start(3)
    assert cluster.wait_for(lambda: registered(cluster, 3, restarted_at), 20000)
    assert 3 in cluster.nodes
    conflicts = [(t, f) for t, b, f in cluster.traced("broker_registration_conflict") if b == 3]
    assert conflicts and all(f["owner_session"] == old_session and f["action"] == "retry" for _, f in conflicts)
    attempts = [t for t, _ in conflicts]
    assert all(b - a == 6000 for a, b in zip(attempts, attempts[1:])), "backs off the session timeout"
    registered_at = min(t for t, b, _ in cluster.traced("broker_registered") if b == 3 and t >= restarted_at)
    assert 6000 <= registered_at - attempts[-1] <= 6010  # the retry after the backoff, one round trip
    assert cluster.wait_for(cluster.settled, 40000)


@pytest.mark.parametrize("profile", ["kafka-0.8", "kafka-2.7"])
def test_a_resent_registration_that_was_applied_answers_node_exists_and_is_the_brokers_own(profile):
    """Kafka 2.7.0 KafkaZkClient.CheckedEphemeral.getAfterNodeExists (the owner is this
    session: success) after ZooKeeperClient retried the create on CONNECTIONLOSS
    (retryRequestsUntilConnected); 0.8.2.2 ZkUtils.createEphemeralPathExpectConflict
    (the stored data is what this create wrote: "this is ok")."""
    cluster = Cluster(profile=profile)
    path = coord.broker_path(3)
    cluster.lose_answers(3, coord.Create, path)  # applied; the connection drops before the answer
    cluster.start_all()
    assert cluster.wait_for(cluster.settled, 5000)
    assert [f for _, b, f in cluster.traced("coordination_request_retried") if b == 3] == [
        {"op": "Create", "path": path, "error": coord.CONNECTION_LOSS}]
    assert registered(cluster, 3) and not cluster.traced("broker_registration_conflict")
    assert coord.decode_data(cluster.store.get(path))["session"] == cluster.sessions[3]


def test_a_resent_controller_create_that_was_applied_makes_its_sender_controller():
    """Kafka 2.7.0 KafkaZkClient.registerControllerAndIncrementControllerEpoch
    (checkControllerAndEpoch: /controller already names this broker: success); 0.8.2.2
    ZookeeperLeaderElector.elect via createEphemeralPathExpectConflictHandleZKBug (the
    stored data is this broker's own). Without it /controller names a broker that does
    not control, and no controller exists until that session expires."""
    cluster = Cluster()
    cluster.lose_answers(1, coord.Create, coord.CONTROLLER_PATH)
    cluster.start(1)
    cluster.run_for(5)
    cluster.start(2)
    cluster.start(3)
    assert cluster.wait_for(cluster.settled, 5000)
    assert cluster.nodes[1].controller.active
    assert [f["path"] for _, b, f in cluster.traced("coordination_request_retried") if b == 1] == [
        coord.CONTROLLER_PATH]


def lagging_follower_cluster(**kwargs):
    """The leader writes the ISR itself: the zookeeper ISR protocol (0.8.2; 2.7 with an
    inter-broker protocol before AlterIsr)."""
    cluster = started(config={"replica.lag.time.max.ms": 1000, "isr_change_protocol": "zookeeper"}, **kwargs)
    leader = cluster.leader()
    follower = [b for b in cluster.brokers if b != leader][0]
    cluster.block(follower, leader, both=False)  # its fetches never arrive: the leader shrinks the ISR
    return cluster, leader, follower


def test_an_isr_write_applied_but_unanswered_is_retried_and_identical_data_is_success():
    """Kafka 2.7.0 ReplicationUtils.updateLeaderAndIsr -> KafkaZkClient.conditionalUpdatePath:
    ZooKeeperClient resent the SetData after CONNECTIONLOSS, the first one had been
    applied, the resend answers BADVERSION, and checkLeaderAndIsrZkData finds the node
    holding exactly the leader-and-ISR it wrote: success with the node's version
    (0.8.2.2 ReplicationUtils.checkLeaderAndIsrZkData is the same rule)."""
    cluster, leader, follower = lagging_follower_cluster()
    cluster.lose_answers(leader, coord.SetData, STATE)
    assert cluster.produce_and_wait(leader, ["a"], acks=1) is ErrorCode.NONE
    assert cluster.wait_for(lambda: follower not in cluster.partition(leader).isr, 5000)
    shrunk = [f for _, b, f in cluster.traced("isr_shrunk") if b == leader]
    assert shrunk and follower not in shrunk[0]["isr"]
    assert not cluster.traced("isr_update_conflict")
    assert [f["op"] for _, b, f in cluster.traced("coordination_request_retried") if b == leader] == ["SetData"]
    written = cluster.store.znodes[STATE]
    assert cluster.partition(leader).zk_version == written.version == shrunk[0]["zk_version"]
    assert follower not in coord.decode_data(written.data)["isr"]


def test_an_isr_write_whose_resend_finds_different_data_is_a_real_conflict():
    """The other half of Kafka 2.7.0 checkLeaderAndIsrZkData: when the node holds other
    data than this write (the controller moved the partition on meanwhile) the BADVERSION
    stands, and the leader's ISR update fails with a stale zkVersion (2.7.0
    Partition.maybeUpdateIsrAndVersionWithZk: it keeps its ISR until the controller
    tells it otherwise)."""
    cluster, leader, follower = lagging_follower_cluster()

    def controller_moves_on():
        state = coord.decode_data(cluster.store.get(STATE))
        cluster.store.put(STATE, coord.encode_data(dict(state, leader_epoch=state["leader_epoch"] + 1)))

    cached = cluster.partition(leader).zk_version
    cluster.lose_answers(leader, coord.SetData, STATE, then=controller_moves_on)
    assert cluster.produce_and_wait(leader, ["a"], acks=1) is ErrorCode.NONE
    assert cluster.wait_for(lambda: cluster.traced("isr_update_conflict"), 5000)
    retried = [(t, f["op"]) for t, b, f in cluster.traced("coordination_request_retried") if b == leader]
    assert [op for _, op in retried] == ["SetData"]
    at, _, conflict = cluster.traced("isr_update_conflict")[0]
    assert at - retried[0][0] <= 10, "the resend itself found the conflict"
    assert conflict["cached_zk_version"] == cached  # the leader's own write landed, then was overwritten
    assert cluster.store.znodes[STATE].version == cached + 2
    assert not [f for _, b, f in cluster.traced("isr_shrunk") if b == leader]
    assert follower in cluster.partition(leader).isr


def test_a_controller_state_write_applied_but_unanswered_still_elects_the_new_leader():
    """Kafka 0.8.2.2 PartitionStateMachine.electLeaderForPartition writes through
    ReplicationUtils.updateLeaderAndIsr with checkLeaderAndIsrZkData: a resent SetData
    that finds its own leader-and-ISR is a success, so the election completes and the
    brokers are told. (2.7.0 instead retries the election on BADVERSION,
    KafkaZkClient.updateLeaderAndIsr; isrlab uses the 0.8 check for both.)"""
    cluster = started()
    leader = cluster.leader()
    controller = next(b for b, n in sorted(cluster.nodes.items()) if n.controller.active)
    victim = leader if leader != controller else next(b for b in cluster.brokers if b != controller)
    cluster.lose_answers(controller, coord.SetData, STATE)
    cluster.crash(victim)
    assert cluster.wait_for(lambda: cluster.leader() not in (None, victim) and victim not in
                            cluster.partition(cluster.leader()).isr, 30000)
    assert [f["op"] for _, b, f in cluster.traced("coordination_request_retried") if b == controller] == ["SetData"]
    state = coord.decode_data(cluster.store.get(STATE))
    assert state["leader"] == cluster.leader() and victim not in state["isr"]
    assert cluster.nodes[controller].controller.states[TopicPartition("t", 0)].zk_version == cluster.store.znodes[STATE].version


def test_a_request_sent_while_the_link_to_the_store_is_cut_fails_with_connection_loss_and_is_retried():
    """Kafka 2.7.0 ZooKeeperClient.handleRequests answers CONNECTIONLOSS for a request
    whose connection dropped; KafkaZkClient.retryRequestsUntilConnected waits until
    connected and sends it again. Here the leader's ISR shrink is sent while its link
    to the store is cut, and lands once the link returns within the session timeout."""
    cluster, leader, follower = lagging_follower_cluster()
    cluster.block(leader, "zk", both=False)
    assert cluster.produce_and_wait(leader, ["a"], acks=1) is ErrorCode.NONE
    cluster.run_for(3000)  # the shrink was attempted and never reached the store
    assert follower in coord.decode_data(cluster.store.get(STATE))["isr"]
    cluster.blocked.discard((leader, "zk"))
    assert cluster.wait_for(lambda: follower not in cluster.partition(leader).isr, 5000)
    assert [f["op"] for _, b, f in cluster.traced("coordination_request_retried") if b == leader] == ["SetData"]
    assert follower not in coord.decode_data(cluster.store.get(STATE))["isr"]


def test_the_profiles_pick_the_registration_conflict_rule_and_a_bad_value_is_refused():
    """0.8.2.2 ZkUtils.createEphemeralPathExpectConflictHandleZKBug retries; 2.7.0 (and
    3.0.0) KafkaZkClient.checkedEphemeralCreate throws and startup fails."""
    from broker_core.config import broker_config
    from broker_core.errors import ConfigError
    assert broker_config("kafka-0.8").registration_conflict == "retry"
    assert broker_config("kafka-2.7").registration_conflict == "exit"
    assert broker_config("kafka-3.0").registration_conflict == "exit"
    with pytest.raises(ConfigError, match="must be one of retry, exit"):
        broker_config("kafka-2.7", {"registration_conflict": "sometimes"})
