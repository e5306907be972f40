"""Which directed links a network fault cuts (or a reset resets), written once: the simulation cuts them
(faults/executor.py computes them and sim/faults.py hands them to sim/network.py) and the leadership checker replays them
from the trace (analysis/checkers/leadership.py), so both agree on who could reach whom.

A link is a (source, destination) pair of node names (faults/nodes.py). Every pair of
nodes is a link, a node's link to itself included (a controller talks to its own
broker). The fault's roles must already be resolved to node names: the executor does
that when the fault starts, and the trace's ``fault_started`` carries what they
resolved to (``targets``, ``groups``, ``roles``; faults/events.py).
"""
from __future__ import annotations

from typing import Iterable

from faults import model as fm
from faults.nodes import broker_node

Link = tuple[str, str]
CuttingFault = fm.Isolate | fm.Split | fm.Bridge | fm.Cut  # RandomHalves cuts as the Split it drew


def cut_links(fault: CuttingFault, nodes: Iterable[str]) -> set[Link]:
    """The links between ``nodes`` that ``fault`` cuts: isolate cuts its nodes from the
    rest; a split cuts the links between nodes in different groups (a node in no group
    keeps all its links); a bridge cuts one half from the other except through ``via``;
    a cut is one way, from ``sources`` to ``destinations``."""
    ordered = list(nodes)
    links = [(a, b) for a in ordered for b in ordered]
    if isinstance(fault, fm.Isolate):
        isolated = set(fault.nodes)
        return {(a, b) for a, b in links if (a in isolated) != (b in isolated)}
    if isinstance(fault, fm.Split):
        member = {n: i for i, group in enumerate(fault.groups) for n in group}
        return {(a, b) for a, b in links if a in member and b in member and member[a] != member[b]}
    if isinstance(fault, fm.Bridge):
        left, right = set(fault.halves[0]) - {fault.via}, set(fault.halves[1]) - {fault.via}
        return {(a, b) for a, b in links if (a in left and b in right) or (a in right and b in left)}
    if isinstance(fault, fm.Cut):
        sources, destinations = set(fault.sources), set(fault.destinations)
        return {(a, b) for a, b in links if a != b and a in sources and b in destinations}
    raise TypeError(f"{type(fault).__name__} cuts no link")


def reset_links(fault: fm.Reset, nodes: Iterable[str]) -> set[Link]:
    """The links between ``nodes`` whose connections ``fault`` resets: every link from a
    node of one side to a node of the other, both directions (a TCP connection carries
    both). A node's link to itself is no connection between two nodes."""
    known = set(nodes)
    left, right = set(fault.between[0]) & known, set(fault.between[1]) & known
    pairs = {(a, b) for a in left for b in right if a != b}
    return pairs | {(b, a) for a, b in pairs}


def cut_from_fields(fields: dict) -> CuttingFault | None:
    """The cutting fault a ``fault_started`` event recorded, its roles as they resolved;
    None when it cut nothing (``no_effect``) or is no cutting fault. Older traces named
    the targets by the fault's own fields (``nodes``, ``groups``, ``halves``, ``sources``
    and ``destinations``) instead of ``targets``."""
    kind = fields.get("fault")
    if "no_effect" in fields or kind not in fm.CUTTING_KINDS:
        return None
    targets = fields.get("targets")
    if kind == "isolate":
        return fm.Isolate(tuple(targets or fields.get("nodes") or ()))
    if kind in ("partition", "random_halves"):
        return fm.Split(tuple(tuple(group) for group in targets or fields.get("groups") or ()))
    if kind == "bridge":
        halves = targets or fields.get("halves") or [[], []]
        via = fields.get("via") or ""  # "": no node
        roles = fields.get("roles") or {}
        if roles.get(via) is not None:  # ``via`` is written as the scenario named it; targets are resolved
            via = broker_node(roles[via])
        return fm.Bridge((tuple(halves[0]), tuple(halves[1])), via)
    sources, destinations = targets or [fields.get("sources", []), fields.get("destinations", [])]
    return fm.Cut(tuple(sources), tuple(destinations))
