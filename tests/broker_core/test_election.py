from broker_core.election import (
    controlled_shutdown_leader, offline_partition_leader, preferred_replica_leader, reassignment_leader)


def test_seed_001_example_stop_broker_0_gives_leader_1_not_2():
    # AR [0, 1, 2] with broker 0 stopped: alive AR [1, 2], ISR [2, 1] -> leader 1,
    # because the order of AR decides, not the order of the ISR.
    election = offline_partition_leader([0, 1, 2], isr=[2, 1], live={1, 2}, unclean_enabled=False)
    assert election.leader == 1 and not election.unclean


def test_clean_election_skips_live_replicas_outside_the_isr():
    assert offline_partition_leader([1, 2, 3], isr=[3], live={2, 3}, unclean_enabled=False).leader == 3


def test_no_live_isr_member_and_unclean_disabled_gives_no_leader():
    election = offline_partition_leader([1, 2, 3], isr=[1], live={2, 3}, unclean_enabled=False)
    assert election.leader is None


def test_unclean_election_takes_the_first_live_assigned_replica():
    election = offline_partition_leader([1, 2, 3], isr=[1], live={3, 2}, unclean_enabled=True)
    assert election.leader == 2 and election.unclean


def test_unclean_is_not_used_when_a_clean_candidate_exists():
    election = offline_partition_leader([1, 2, 3], isr=[1, 3], live={2, 3}, unclean_enabled=True)
    assert election.leader == 3 and not election.unclean


def test_nothing_alive_gives_no_leader_even_when_unclean():
    assert offline_partition_leader([1, 2], isr=[1], live=set(), unclean_enabled=True).leader is None


def test_preferred_replica_is_the_first_assigned_when_alive_and_in_sync():
    assert preferred_replica_leader([2, 1, 3], isr=[1, 2], live={1, 2, 3}).leader == 2
    assert preferred_replica_leader([2, 1, 3], isr=[1, 3], live={1, 2, 3}).leader is None
    assert preferred_replica_leader([2, 1, 3], isr=[1, 2], live={1, 3}).leader is None


def test_controlled_shutdown_avoids_the_broker_shutting_down():
    assert controlled_shutdown_leader([1, 2, 3], isr=[1, 2, 3], live={1, 2, 3}, shutting_down={1}).leader == 2
    assert controlled_shutdown_leader([1, 2], isr=[1], live={1, 2}, shutting_down={1}).leader is None


def test_reassignment_uses_the_new_assignment_order():
    assert reassignment_leader([3, 2], isr=[2, 3], live={2, 3}).leader == 3
