"""Failures the machines share, on the in-test router (tests/harness.py): each waits
until the cluster has reacted, so that the next rule starts from a settled cluster."""
from __future__ import annotations

from broker_core import coordination as coord
from tests.harness import Cluster

WAIT_MS = 30000


def crash(cluster: Cluster, broker: int) -> None:
    """Crash ``broker`` and wait until its registration is gone (its session expired):
    a 2.7 broker restarted while its old registration lives halts (registration
    conflict), which is right but not what these rules are after."""
    cluster.crash(broker)
    assert cluster.wait_for(lambda: cluster.store.get(coord.broker_path(broker)) is None, WAIT_MS), \
        f"broker {broker}'s registration never expired"


def restart(cluster: Cluster, broker: int, p: int = 0) -> None:
    """Crash ``broker``, start it again, and wait until it is back in the ISR."""
    crash(cluster, broker)
    cluster.start(broker)
    assert cluster.wait_for(lambda: cluster.settled(p), WAIT_MS), f"broker {broker} never caught up"


def fail_over(cluster: Cluster, p: int = 0, heal: bool = False) -> int:
    """Crash the leader, wait for another, start the old one again until it has caught
    up; the old leader's id. ``heal``: the links blocked before are healed once the old
    leader is down (so that what only it had never reaches another replica)."""
    old = cluster.leader(p)
    assert old is not None, "no leader to fail over"
    crash(cluster, old)
    if heal:
        cluster.heal()
    assert cluster.wait_for(lambda: cluster.leader(p) not in (None, old), WAIT_MS), "no new leader"
    cluster.start(old)
    assert cluster.wait_for(lambda: cluster.settled(p), WAIT_MS), f"the old leader {old} never caught up"
    return old
