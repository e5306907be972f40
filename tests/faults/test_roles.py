"""faults/roles.py on a cluster view: a coordinator role resolves as the leader of the
group's partition of __consumer_offsets, or to nothing, saying why."""
import random

from faults import model as fm
from faults.roles import resolve_role, role_partitions
from faults.triggers import cluster_view

COORDINATOR = fm.Role("coordinator", "__consumer_offsets-1", group="g")


def view(offsets_leader_epochs: dict[int, int] | None) -> dict:
    """t-0 led by 1; __consumer_offsets-1 hosted with these brokers leading it at these
    epochs (None: the topic does not exist yet, so no broker hosts it)."""
    states: dict[int, dict] = {b: {"t-0": {"role": "leader" if b == 1 else "follower", "leader_epoch": 0,
                                           "isr": [1, 2, 3], "high_watermark": 0}} for b in (1, 2, 3)}
    for broker, epoch in (offsets_leader_epochs or {}).items():
        states[broker]["__consumer_offsets-1"] = {"role": "leader", "leader_epoch": epoch, "isr": [broker],
                                                  "high_watermark": 0}
    return cluster_view(1, states, ["t-0", "__consumer_offsets-1"])


def test_the_coordinator_is_the_offsets_partitions_leader_with_the_highest_epoch():
    # 3 leads at epoch 4; 2 still believes it leads at epoch 3 (a zombie): not the coordinator
    assert resolve_role(COORDINATOR, view({2: 3, 3: 4}), [1, 2, 3], random.Random(0)) == (3, "")


def test_no_leader_of_the_groups_partition_resolves_to_nothing_and_says_why():
    broker, why = resolve_role(COORDINATOR, view(None), [1, 2, 3], random.Random(0))
    assert broker is None and why == "group g's partition __consumer_offsets-1 has no leader"
    # a view that does not hold the partition at all says the same, not a KeyError
    bare = cluster_view(1, {}, ["t-0"])
    assert resolve_role(COORDINATOR, bare, [1, 2, 3], random.Random(0))[0] is None


def test_the_view_holds_the_partitions_coordinator_roles_name_and_no_others():
    faults = [fm.Crash((COORDINATOR, 2)), fm.Isolate((fm.Role("leader", "t-0"), "zk")),
              fm.Pause((fm.Role("coordinator", "__consumer_offsets-0", group="h"), COORDINATOR))]
    assert role_partitions(faults) == ["__consumer_offsets-0", "__consumer_offsets-1"]
    assert role_partitions([fm.Crash((fm.CONTROLLER,))]) == []
