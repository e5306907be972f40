"""Role targets resolved on a cluster view (faults/triggers.py describes the view).

Both bindings resolve a fault's roles here when it starts, each from its own view of
the cluster: the simulation from its brokers' snapshots, the real binding from the
broker's metadata. ``controller`` is the view's controller; ``random`` one of all
brokers; ``leader: t-0`` the view's leader of t-0; ``follower: t-0`` one running
replica of t-0 other than that leader (``isr`` restricts it to the leader's ISR, or
to outside it). Draws come from ``rng``, the binding's own stream for roles.
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
    partition = view["partitions"][role.partition]
    leader = partition["leader"]
    if leader is None:
        return None, f"{role.partition} has no leader"
    if role.role == "leader":
        return leader, ""
    followers = sorted(b for b in partition["replicas"] if b != leader
                       and (role.isr is None or (b in partition["isr"]) == role.isr))
    if not followers:
        where = {None: "", True: " in the ISR", False: " outside the ISR"}[role.isr]
        return None, f"{role.partition} has no running follower{where}"
    return followers[rng.randrange(len(followers))], ""
