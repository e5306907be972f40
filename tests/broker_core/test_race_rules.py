"""The race machine's slow links (tests/broker_core/race_rules.py) and the races they
force, each once by hand: the real core fences them, and the mutant that drops the fence
breaks an invariant."""
from __future__ import annotations

import inspect

import pytest

from broker_core import mutants
from broker_core.inputs import MessageReceived
from broker_core.invariants import LEADER_EPOCHS_GROW, STRONG_ISR
from broker_core.messages import UpdateMetadataRequest
from tests.broker_core.race_rules import PLAIN_RULES, HeldLinksCluster, IsrRaceMachine, RaceMachine
from tests.broker_core.replication_machine import ReplicationMachine


def started(**config) -> HeldLinksCluster:
    cluster = HeldLinksCluster(config={"min.insync.replicas": 2, **config})
    cluster.start_all()
    assert cluster.wait_for(cluster.settled, 10_000)
    return cluster


def test_a_slow_link_keeps_its_order_and_a_held_one_delivers_on_release():
    cluster = started()
    leader = cluster.leader()
    follower = next(b for b in cluster.brokers if b != leader)
    cluster.jitter[(leader, follower)] = 1_000
    cluster.run_for(10)
    assert cluster.partition(follower).log.log_end_offset == 0
    cluster.produce(leader, ["a"])
    cluster.run_for(20)  # the follower's fetch waits at the leader; its answer is on the slow link
    cluster.slow_down(leader, follower)  # held from now: it must not overtake the slow answer
    cluster.produce(leader, ["b"])
    cluster.run_for(100)
    cluster.release()
    assert cluster.wait_for(lambda: cluster.values(follower) == ["a", "b"], 5_000)
    assert cluster.violations == []


def test_what_a_link_holds_for_a_restarted_broker_is_dropped():
    cluster = started()
    controller = cluster.controller()
    other = next(b for b in cluster.brokers if b != controller)
    cluster.slow_down(controller, other)
    stale = MessageReceived(controller, UpdateMetadataRequest(0, controller, 0, (), {}))
    cluster._push(cluster.now, other, stale)
    assert [event for _, event, _ in cluster.held] == [stale]
    cluster.crash(other)
    cluster.release()
    assert cluster.held == [] and not any(item.event is stale for item in cluster._queue)


def leader_writes_on_a_stale_zk_version(mutant: str | None) -> HeldLinksCluster:
    """The controller removes a crashed follower from the ISR (a new leader epoch and
    zkVersion) while its LeaderAndIsr to the leader is held; the leader then drops the
    same follower itself, with the zkVersion it knows (2.7.0 shrinkIsrWithZk)."""
    with mutants.active(mutant):
        cluster = started(isr_change_protocol="zookeeper")
        leader, controller = cluster.leader(), cluster.controller()
        cluster.slow_down(controller, leader)
        cluster.crash(next(b for b in cluster.brokers if b not in (leader, controller)))
        for _ in range(30):
            cluster.produce(leader, ["x"])
            cluster.run_for(2_000)
        return cluster


def test_the_leaders_isr_write_on_a_stale_zk_version_loses_to_the_controllers():
    cluster = leader_writes_on_a_stale_zk_version(None)
    assert cluster.traced("isr_update_conflict") and cluster.violations == []


def test_an_unversioned_isr_write_takes_the_quorum_back_to_an_older_leader_epoch():
    cluster = leader_writes_on_a_stale_zk_version("isr-write-unversioned")
    assert [v.invariant for v in cluster.violations][:1] == [LEADER_EPOCHS_GROW]


def rejoins_while_the_alter_isr_is_held(mutant: str | None) -> HeldLinksCluster:
    """A follower cut off for longer than replica.lag.time.max.ms leaves the ISR; it
    catches up, and the leader's AlterIsr adding it is held, then its fetches too,
    while records are produced (2.7.0 Partition.maximalIsr)."""
    with mutants.active(mutant):
        cluster = started()
        leader, controller = cluster.leader(), cluster.controller()
        follower = [b for b in cluster.brokers if b != leader][-1]
        cluster.block(follower, leader, both=False)
        for _ in range(30):
            cluster.produce(leader, ["x"])
            cluster.run_for(2_000)
        assert follower not in cluster.partition(leader).isr
        cluster.slow_down(leader, controller)
        cluster.heal()
        assert cluster.wait_for(lambda: cluster.partition(leader).pending_isr is not None, 60_000, 1)
        cluster.slow_down(follower, leader)
        for _ in range(5):
            cluster.produce(leader, ["y"])
            cluster.run_for(20)
        cluster.release()
        cluster.run_for(100)
        return cluster


@pytest.mark.parametrize("mutant, found", [(None, []), ("hw-over-committed-isr", [STRONG_ISR])])
def test_the_high_watermark_waits_for_a_replica_being_added(mutant, found):
    cluster = rejoins_while_the_alter_isr_is_held(mutant)
    assert sorted({v.invariant for v in cluster.violations}) == found


def rule_names(machine) -> set[str]:
    return {name for name, member in inspect.getmembers(machine)
            if getattr(member, "hypothesis_stateful_rule", None) is not None}


def test_the_race_machines_draw_the_rules_they_name():
    """A rule added to ReplicationMachine is not drawn by the race machines until it is
    named in PLAIN_RULES (their searches in tests/test_mutants.py would draw otherwise):
    this fails to say it must be decided, and those searches run again."""
    assert rule_names(ReplicationMachine) == PLAIN_RULES
    assert rule_names(RaceMachine) == PLAIN_RULES | {"slow_link", "deliver_held"}
    assert rule_names(IsrRaceMachine) == {"produce", "pass_time", "crash", "restart", "controlled_shutdown",
                                          "heal_everything", "slow_link", "deliver_held"}
