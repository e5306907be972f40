"""Role targets resolved on a cluster view (faults/triggers.py describes the view).

Both bindings resolve a fault's roles here when it starts, each from its own view of
the cluster: the simulation from its brokers' snapshots, the real binding from the
broker's metadata. ``controller`` is the view's controller; ``random`` one of all
brokers; ``leader: t-0`` the view's leader of t-0; ``follower: t-0`` one running
replica of t-0 other than that leader (``isr`` restricts it to the leader's ISR, or
to outside it); ``coordinator: g`` the view's leader of group g's partition of
__consumer_offsets (the parser names the partition: faults/ cannot compute Kafka's
hash, which lives in broker_core). Draws come from ``rng``, the binding's own stream
for roles.
"""
from __future__ import annotations

from faults import model as fm


def resolve_role(role, view: dict, brokers: list[int], rng) -> tuple[int | None, str]:
    """The broker ``role`` names, or None and why it names none."""
    if role == fm.CONTROLLER:
        return view["controller"], "no active controller"
    if role == fm.RANDOM:
        brokers = sorted(brokers)
        return brokers[rng.randrange(len(brokers))], ""
    partition = view["partitions"].get(role.partition)
    leader = partition["leader"] if partition is not None else None
    if leader is None:
        if role.group is not None:  # before the group's first FindCoordinator the topic may not exist
            return None, f"group {role.group}'s partition {role.partition} has no leader"
        return None, f"{role.partition} has no leader"
    if role.role in ("leader", "coordinator"):
        return leader, ""
    followers = sorted(b for b in partition["replicas"] if b != leader
                       and (role.isr is None or (b in partition["isr"]) == role.isr))
    if not followers:
        where = {None: "", True: " in the ISR", False: " outside the ISR"}[role.isr]
        return None, f"{role.partition} has no running follower{where}"
    return followers[rng.randrange(len(followers))], ""


def role_partitions(faults) -> list[str]:
    """The partitions outside the scenario's topics that these faults' roles read in the
    cluster view (a coordinator's partition of __consumer_offsets), sorted: a binding
    adds them to the partitions its view holds."""
    return sorted({role.partition for fault in faults for role in fm.roles_of(fault)
                   if isinstance(role, fm.Role) and role.group is not None})
