"""What a binding must do for the shared fault executor (faults/executor.py): the
primitives on its own brokers, links, disks, clocks and coordination store.

The executor owns everything that is the same in every binding (fault ids, the
``fault_started`` and ``fault_ended`` events, which faults are active, which keep which
broker down or paused, role resolution, undo and heal); a binding only carries a
primitive out on its world. The simulation (sim/faults.py) and the real binding
(real_io/real_faults.py) each implement this Protocol; a binding that cannot carry a
fault out says so in ``refusal``, before the executor changes anything.
"""
from __future__ import annotations

import random
from typing import Callable, Iterable, Protocol

from faults import model as fm
from faults.links import Link

DiskFault = fm.SlowFsync | fm.WriteErrors | fm.DiskFull | fm.TornWrites


class FaultBinding(Protocol):
    # -- the run ---------------------------------------------------------------------
    def refusal(self, fault: fm.Fault) -> str | None:
        """Why this binding cannot apply ``fault`` (the whole message), or None."""

    def trace(self, node: str, type_: str, fields: dict) -> None: ...

    def cluster_view(self) -> dict:
        """The view roles resolve on (faults/triggers.py describes it)."""

    def brokers(self) -> list[int]: ...

    # -- processes -------------------------------------------------------------------
    def is_alive(self, broker: int) -> bool:
        """The process runs, paused or not: no crash or shutdown ended it."""

    def is_paused(self, broker: int) -> bool:
        """The process is frozen. A process that is gone is not paused: killing a
        stopped process ends it, and its pause ends with it."""

    def crash(self, broker: int) -> None: ...

    def power_loss(self, broker: int) -> None: ...

    def shutdown(self, broker: int) -> None: ...

    def start(self, broker: int) -> bool:
        """Start a broker that is down or that a fault is stopping (a shutdown under way);
        False when it did not start, so the faults that keep it down go on."""

    def pause(self, broker: int) -> None: ...

    def resume(self, broker: int) -> None: ...

    # -- network ---------------------------------------------------------------------
    def network_nodes(self) -> Iterable[str]:
        """Every node a link joins (faults/nodes.py names them)."""

    def cut_links(self, fault_id: int, links: set[Link]) -> None: ...

    def degrade_links(self, fault_id: int, links: set[Link], changes: dict) -> None:
        """``changes``: the LinkFault's fields that are set (latency_ms, loss, ...)."""

    def restore_links(self, fault_id: int) -> None:
        """Undo what ``cut_links`` and ``degrade_links`` did for ``fault_id``."""

    def reset_links(self, links: set[Link]) -> int:
        """Reset, now, every connection on ``links`` (each pair's two directions are
        listed): what was in flight on them is lost and their ends hear a reset; nothing
        stays cut. How many connections there were (0: the reset changed nothing). An end
        that the binding tells of the reset reacts after this returns where the binding
        can order it (the simulation does), so that ``fault_started`` comes first."""

    def heal_links(self) -> list[int]:
        """Restore every link; the ids of the faults that changed one."""

    # -- disks and clocks ------------------------------------------------------------
    def degrade_disk(self, broker: int, fault: DiskFault) -> None: ...

    def restore_disk(self, broker: int) -> None:
        """End every disk fault of ``broker``."""

    def flip_bit(self, broker: int, partition: str, rng: random.Random) -> dict | None:
        """Flip one bit of a segment of ``partition``: ``{"path", "byte"}``, or None
        when the broker has no segment of it."""

    def shift_clock(self, broker: int, delta_ms: int) -> None: ...

    # -- coordination and admin ------------------------------------------------------
    def expire_session(self, broker: int) -> Callable[[], None] | str:
        """Prepare the expiry of ``broker``'s session: the action that carries it out
        (run after ``fault_started``, so that the trace shows the cause first), or why
        there is nothing to expire. A binding that can only tell by trying (a real
        ZooKeeper) tries here and returns an action that does nothing."""

    def request_preferred_election(self, partitions: tuple[str, ...] | None) -> tuple[list[str], bool]:
        """Write the admin request for ``partitions`` (None: all); the partitions
        requested, and whether it was written (not while an earlier one is pending)."""

    def change_topic_config(self, topic: str, config: dict) -> dict | None:
        """Write the topic's overrides and change notification; the overrides written,
        or None when the topic does not exist."""

    def change_client_quota(self, entity: str, config: dict) -> dict:
        """Change the quota node ``entity`` (a key set to None is removed) and write the
        change notification; the node's keys and values written."""

    def create_topic(self, topic: str, partitions: int, replication_factor: int,
                     assignment: dict | None) -> dict | str:
        """Write a new topic's nodes as kafka-topics.sh --create does; its assignment,
        or why the tool refused."""

    def delete_topic(self, topic: str) -> str | None:
        """Mark the topic for deletion as kafka-topics.sh --delete does; None, or why
        the tool refused."""

    def create_partitions(self, topic: str, count: int, assignment: tuple | None) -> dict | str:
        """Add partitions as kafka-topics.sh --alter --partitions does; the new
        partitions' assignment, or why the tool refused."""

    def reassign_partitions(self, partitions: dict[str, tuple[int, ...]]) -> str | None:
        """Start a reassignment as kafka-reassign-partitions.sh --zookeeper --execute
        does ("t-0" -> new replicas); None, or why the tool refused."""
