"""The names of the nodes that network faults and traces name: ``broker-<id>`` for a
broker, ``zk`` for the coordination service, anything else a client.

Written once here, below both bindings, because fault targets (scenarios, the nemesis,
both executors) and every trace's ``node`` field use them, and the checkers and
timelines read broker ids back from them. ``faults`` is the lowest package that all of
those may import (broker_core may not import faults, nor faults broker_core; the core
names its peers by id and never by node name).
"""
from __future__ import annotations

from functools import lru_cache

BROKER_PREFIX = "broker-"
SERVICE_NODE = "zk"
GROUP_PREFIX = "group-"


def broker_node(broker_id: int) -> str:
    """The node name of a broker, e.g. ``broker-3``. The simulation, which names a
    broker for every message it sends, keeps each name it built (sim/broker_host.py)."""
    return f"{BROKER_PREFIX}{broker_id}"


@lru_cache(maxsize=4096)  # the analysis asks once per trace event; a run has a few node names
def broker_id_of(node: str) -> int | None:
    """The broker id of a node name such as ``broker-3``; None for every other node."""
    if node.startswith(BROKER_PREFIX) and node[len(BROKER_PREFIX):].isdigit():
        return int(node[len(BROKER_PREFIX):])
    return None


def group_member_node(entry: int, member: int) -> str:
    """The node name of the ``member``-th member of a scenario's ``entry``-th group
    consumer entry, e.g. ``group-0-1``: what faults name and the member's history is
    written under, in both bindings."""
    return f"{GROUP_PREFIX}{entry}-{member}"
