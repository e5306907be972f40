"""The simulation's binding of the fault executor (faults/executor.py, which owns fault
ids, events, roles, undo and heal): the primitives on the simpy world's broker hosts,
network, disks and coordination service (faults/binding.py)."""
from __future__ import annotations

import random
from typing import Any, Callable, Iterable

from broker_core import messages
from broker_core.admin_nodes import (
    add_partition_nodes, create_topic_nodes, mark_topic_deleted, request_preferred_election, write_reassignment)
from broker_core.dynamic_config import change_topic_config
from broker_core.quota_config import change_client_quota
from faults import model as fm
from faults.binding import DiskFault
from faults.executor import FaultExecutor
from faults.links import Link
from faults.nodes import SERVICE_NODE, broker_id_of
from sim.broker_host import broker_name
from sim.network import ConnectionReset

# The answers to requests (a reset loses those whose request went on the old connection).
RESPONSES = frozenset(cls for name, cls in vars(messages).items() if name.endswith("Response") and isinstance(cls, type))

# What each disk fault sets on the simulated disk (sim/disk.py).
_DISK_CHANGES: dict[type, Callable[[DiskFault], dict]] = {
    fm.SlowFsync: lambda fault: {"fsync_ms": fault.fsync_ms},  # type: ignore[union-attr]
    fm.WriteErrors: lambda fault: {"write_error": "EIO"},
    fm.DiskFull: lambda fault: {"write_error": "ENOSPC"},
    fm.TornWrites: lambda fault: {"torn_writes": True},
}


class SimFaultBinding:
    """Every fault of the vocabulary is possible here: nothing is refused."""

    def __init__(self, world) -> None:
        self.world = world

    def refusal(self, fault: fm.Fault) -> str | None:
        return None

    def trace(self, node: str, type_: str, fields: dict) -> None:
        self.world.trace(node, type_, fields)

    def cluster_view(self) -> dict:
        return self.world.cluster_view()

    def brokers(self) -> list[int]:
        return list(self.world.hosts)

    # -- processes -------------------------------------------------------------------
    def is_alive(self, broker: int | str) -> bool:
        if isinstance(broker, str):  # a group member's process (sim/group_consumer.py)
            return self.world.group_members[broker].alive
        return self.world.hosts[broker].alive

    def is_paused(self, broker: int | str) -> bool:
        if isinstance(broker, str):
            member = self.world.group_members[broker]
            return member.alive and member.paused
        host = self.world.hosts[broker]
        return host.alive and host.paused  # a crashed host keeps the flag until it starts

    def crash(self, broker: int | str) -> None:
        if isinstance(broker, str):
            self.world.group_members[broker].crash()
            return
        self.world.hosts[broker].crash()

    def power_loss(self, broker: int) -> None:
        self.world.hosts[broker].power_loss()

    def shutdown(self, broker: int) -> None:
        # a paused host queues the request as a stopped process keeps a SIGTERM pending
        self.world.hosts[broker].shutdown()

    def start(self, broker: int | str) -> bool:
        if isinstance(broker, str):
            member = self.world.group_members[broker]
            if member.alive:
                return False
            member.start()
            return True
        host = self.world.hosts[broker]
        if host.alive:  # a controlled shutdown under way ends when the broker exits by itself
            return False
        host.start()
        return True

    def pause(self, broker: int | str) -> None:
        if isinstance(broker, str):
            self.world.group_members[broker].pause()
            return
        self.world.hosts[broker].pause()

    def resume(self, broker: int | str) -> None:
        if isinstance(broker, str):
            self.world.group_members[broker].resume()
            return
        self.world.hosts[broker].resume()

    # -- network ---------------------------------------------------------------------
    def network_nodes(self) -> Iterable[str]:
        return self.world.network.nodes

    def cut_links(self, fault_id: int, links: set[Link]) -> None:
        self.world.network.add_cuts(fault_id, links)

    def degrade_links(self, fault_id: int, links: set[Link], changes: dict) -> None:
        self.world.network.add_link_override(fault_id, links, changes)

    def restore_links(self, fault_id: int) -> None:
        self.world.network.remove_cuts(fault_id)
        self.world.network.remove_link_override(fault_id)

    def reset_links(self, links: set[Link]) -> int:
        """Reset each pair's connection where both ends run (a process that is gone has
        none left); the ends hear it after this returns: a client as when a broker's
        process dies (ConnectionReset: its requests to that broker end, outcome unknown),
        a broker's coordination client as a lost connection. A broker hears nothing of a
        reset link to another broker (the core has no disconnect input): its requests on
        it time out, as a fetch does after replica.socket.timeout.ms."""
        network = self.world.network
        reset = 0
        for a, b in sorted({(min(link), max(link)) for link in links}):
            if self._runs(a) and self._runs(b) and network.reset(a, b, self._answers_to_old_requests(a, b)):
                reset += 1
                self._tell_reset(a, b)
                self._tell_reset(b, a)
        return reset

    def _runs(self, node: str) -> bool:
        broker = broker_id_of(node)
        return broker is None or self.world.hosts[broker].alive

    def _answers_to_old_requests(self, a: str, b: str) -> Callable[[str, Any], bool]:
        """Whether a message to a broker answers a request it sent before the reset (by
        its correlation ids, counted per process): the answer has no connection to go
        on. A client forgets such requests itself when it hears of the reset."""
        issued = {node: self._last_request(node) for node in (a, b)}
        return lambda dst, message: type(message) in RESPONSES and message.correlation_id <= issued[dst]

    def _last_request(self, node: str) -> int:
        broker = broker_id_of(node)
        process = self.world.hosts[broker].node if broker is not None else None
        return process.last_correlation_id() if process is not None else 0

    def _tell_reset(self, src: str, dst: str) -> None:
        """``dst`` hears that its connection to ``src`` was reset."""
        network, broker = self.world.network, broker_id_of(src)
        if broker is not None and dst in network.clients():
            network.tell(src, dst, ConnectionReset(broker))
        elif src == SERVICE_NODE and broker_id_of(dst) is not None:
            coord = self.world.hosts[broker_id_of(dst)].coord
            network.at_once(coord.connection_reset)

    def heal_links(self) -> list[int]:
        return self.world.network.heal()

    # -- disks and clocks ------------------------------------------------------------
    def degrade_disk(self, broker: int, fault: DiskFault) -> None:
        disk = self.world.hosts[broker].disk
        for name, value in _DISK_CHANGES[type(fault)](fault).items():
            setattr(disk, name, value)

    def restore_disk(self, broker: int) -> None:
        self.world.hosts[broker].disk.restore()

    def flip_bit(self, broker: int, partition: str, rng: random.Random) -> dict | None:
        disk = self.world.hosts[broker].disk
        segments = sorted(p for p in disk.files if p.startswith(partition + "/") and p.endswith(".log"))
        if not segments:
            return None
        path = segments[rng.randrange(len(segments))]
        return {"path": path, "byte": disk.flip_bit(path)}

    def shift_clock(self, broker: int, delta_ms: int) -> None:
        self.world.hosts[broker].clock_offset_ms += delta_ms

    # -- coordination and admin ------------------------------------------------------
    def expire_session(self, broker: int) -> Callable[[], None] | str:
        """The service expires the session it holds for the broker; a broker without one
        (down) has nothing to expire, and the fault still names it."""
        store = self.world.service.store

        def expire() -> None:
            session = store.session_of(broker_name(broker))
            if session is not None:
                store.expire(session, reason="forced")
        return expire

    def request_preferred_election(self, partitions: tuple[str, ...] | None) -> tuple[list[str], bool]:
        """Write the request node as the admin tool does (broker_core/admin_nodes.py)."""
        return request_preferred_election(self.world.service.store, partitions)

    def change_topic_config(self, topic: str, config: dict) -> dict | None:
        """Write the topic's overrides and the change notification as kafka-configs.sh does."""
        return change_topic_config(self.world.service.store, topic, config)

    def change_client_quota(self, entity: str, config: dict) -> dict:
        """Write the quota node and the change notification as kafka-configs.sh does."""
        return change_client_quota(self.world.service.store, entity, config)

    def create_topic(self, topic: str, partitions: int, replication_factor: int,
                     assignment: dict | None) -> dict | str:
        return create_topic_nodes(self.world.service.store, topic, partitions, replication_factor, assignment)

    def delete_topic(self, topic: str) -> str | None:
        return mark_topic_deleted(self.world.service.store, topic)

    def create_partitions(self, topic: str, count: int, assignment: tuple | None) -> dict | str:
        return add_partition_nodes(self.world.service.store, topic, count, assignment)

    def reassign_partitions(self, partitions: dict[str, tuple[int, ...]]) -> str | None:
        return write_reassignment(self.world.service.store, partitions)


class SimFaultExecutor(FaultExecutor):
    """The shared executor on a simulated world; ``rng`` draws random halves and bit
    flips, ``role_rng`` (default ``rng``) the roles."""

    def __init__(self, world, rng, role_rng=None) -> None:
        super().__init__(SimFaultBinding(world), role_rng if role_rng is not None else rng, rng)

