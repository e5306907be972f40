"""How a leader changes its partition's ISR. Two protocols, chosen by the profile
(``isr.change.protocol``):

- ``zookeeper`` (0.8.2 Partition.updateIsr; 2.7.0 Partition.shrinkIsrWithZk and
  expandIsrWithZk, used up to 2.6 and with an older inter.broker.protocol.version): the
  leader writes the partition state itself, synchronously, under the partition's write
  lock. Nothing is appended, read or acknowledged for that partition until the write
  returns; a version conflict is not retried ("Cached zkVersion not equal to that in
  zookeeper, skip updating ISR"), and a session expiry ends the write.
- ``alter_isr`` (KIP-497, 2.7.0 Partition.sendAlterIsrRequest and AlterIsrManager): the
  leader asks the controller, which validates the request and writes the state. While
  the request is pending the leader counts the maximal ISR (current plus joining
  replicas) for the high watermark, and makes no other ISR change.

An AlterIsr request, once built, is the one sent until an answer other than
NOT_CONTROLLER comes back (2.7.0 and 3.0.0 BrokerToControllerRequestThread.handleResponse:
on a disconnect or NOT_CONTROLLER the same request goes back to the head of the queue,
and doWork sends it to the controller the metadata cache names). The core sees no TCP
disconnects, so the one from a controller whose process stopped is read from
UpdateMetadata: a new controller is named and the old one is no longer live.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from broker_core import coordination as coord
from broker_core import mutants
from broker_core.context import NodeContext
from broker_core.errors import ErrorCode
from broker_core.messages import AlterIsrRequest, AlterIsrResponse, LeaderAndIsr
from broker_core.partition import Partition
from broker_core.types import NO_LEADER, TopicPartition

ALTER_ISR_INTERVAL_MS = 50  # AlterIsrManager's send-alter-isr schedule
# Errors after which the leader gives up and stays pending until the next LeaderAndIsr
# (Partition.handleAlterIsrResponse); any other error is retried.
_GIVE_UP = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.FENCED_LEADER_EPOCH,
                      ErrorCode.INVALID_UPDATE_VERSION})


class IsrChanger:
    """Proposes, writes or requests, and commits ISR changes for the partitions this
    broker leads. ``on_committed(partition)`` runs after a new ISR is in force."""

    def __init__(self, ctx: NodeContext, partitions: dict[TopicPartition, Partition],
                 on_committed: Callable[[Partition], None]):
        self.ctx = ctx
        self.partitions = partitions
        self.on_committed = on_committed
        self.controller_id: Callable[[], int] = lambda: NO_LEADER  # set by the node
        self.broker_epoch: Callable[[], int | None] = lambda: None
        self.unsent: dict[TopicPartition, tuple[LeaderAndIsr, str]] = {}
        self.in_flight: int | None = None  # correlation id of the AlterIsr awaiting its answer
        self._in_flight_items: dict[TopicPartition, tuple[LeaderAndIsr, str]] = {}
        # The request under way (Kafka's inflightRequest flag and its queue item): kept,
        # and sent again as it is, until an answer other than NOT_CONTROLLER.
        self._request: AlterIsrRequest | None = None
        self._sent_to = NO_LEADER  # the controller the request last went to
        self._ticking = False
        self.locked: set[TopicPartition] = set()  # partitions whose lock a write holds

    def propose(self, partition: Partition, new_isr: tuple[int, ...], reason: str) -> None:
        """Start changing the ISR, unless a change is already under way (Kafka's
        canAddReplicaToIsr / maybeShrinkIsr check isInflight first)."""
        if partition.isr_change_in_flight or new_isr == partition.isr:
            return
        partition.pending_isr = new_isr
        proposed = LeaderAndIsr(self.ctx.broker_id, partition.leader_epoch, new_isr,
                                partition.controller_epoch, partition.zk_version)
        if partition.config.isr_change_protocol == "zookeeper":
            partition.isr_locked = True
            self.locked.add(partition.tp)
            self.ctx.tasks.start(self._write(partition, proposed, reason))
        else:
            self.unsent[partition.tp] = (proposed, reason)
            self._send()

    def forget(self, tp: TopicPartition) -> None:
        """A LeaderAndIsr replaced the partition's state (AlterIsrManager.clearPending)."""
        self.unsent.pop(tp, None)

    # -- zookeeper: the leader's own synchronous write ---------------------------------
    def _write(self, partition: Partition, proposed: LeaderAndIsr, reason: str):
        """Requests that touch the partition wait meanwhile (the node holds them), and a
        LeaderAndIsr for it too, so the partition cannot change hands mid-write."""
        path = coord.partition_state_path(partition.tp.topic, partition.tp.partition)
        reply = None
        try:
            # A resent write that had been applied answers BAD_VERSION with our own data.
            reply = yield from coord.conditional_update(
                coord.SetData(path, coord.encode_data(proposed.to_data()),
                              coord.ANY_VERSION if mutants.ISR_WRITE_UNVERSIONED else proposed.zk_version))
        finally:
            # The write ended, or the session that carried it did: release the lock.
            partition.isr_locked = False
            partition.pending_isr = None
            self.locked.discard(partition.tp)
            self.ctx.request_replay()
        if reply.ok:
            self._commit(partition, proposed.isr, reply.version, reason)
        elif reply.error == coord.BAD_VERSION:
            self.ctx.trace("isr_update_conflict", partition=str(partition.tp), protocol="zookeeper",
                           cached_zk_version=partition.zk_version, isr=list(proposed.isr))

    # -- alter_isr: a request to the controller ----------------------------------------
    def _send(self) -> None:
        if self._request is not None or not self.unsent:
            return
        epoch = self.broker_epoch()
        if self.controller_id() == NO_LEADER or epoch is None:
            self._tick_later()  # no controller known yet: AlterIsrManager keeps the items
            return
        self._in_flight_items = dict(sorted(self.unsent.items()))
        self._request = AlterIsrRequest(0, self.ctx.broker_id, epoch,
                                        {tp: item[0] for tp, item in self._in_flight_items.items()})
        self._transmit(None)

    def _transmit(self, reason: str | None) -> None:
        """Send the request under way to the controller the metadata names, with a new
        correlation id as NetworkClient gives each send; ``reason`` names a resend."""
        assert self._request is not None
        controller = self.controller_id()
        if controller == NO_LEADER:
            self._tick_later()  # doWork: no controller in the metadata cache, back off
            return
        if reason is not None:
            self.ctx.trace("alter_isr_resent", reason=reason, controller=controller,
                           previous_controller=self._sent_to, partitions=[str(tp) for tp in self._in_flight_items])
        self._request = replace(self._request, correlation_id=self.ctx.next_correlation_id())
        self.in_flight = self._request.correlation_id
        self._sent_to = controller
        self.ctx.send(controller, self._request)
        self.ctx.set_timer(("alter-isr-timeout",), self.ctx.config.controller_socket_timeout_ms)

    def _tick_later(self) -> None:
        if not self._ticking:
            self._ticking = True
            self.ctx.set_timer(("alter-isr-tick",), ALTER_ISR_INTERVAL_MS)

    def tick(self) -> None:
        self._ticking = False
        if self._request is None:
            self._send()
        elif self.in_flight is None:
            self._transmit("retry")

    def request_timed_out(self) -> None:
        """controller.socket.timeout.ms passed without an answer: NetworkClient fails the
        request as disconnected, and it goes again (after the reconnect backoff)."""
        self.in_flight = None
        self._tick_later()

    def metadata_updated(self, live_brokers: tuple[int, ...]) -> None:
        """UpdateMetadata names a controller. If the request went to another one that is
        no longer live, that broker's process stopped (a controlled shutdown or a crash
        whose session expired) and Kafka saw its connection close: handleResponse got a
        disconnect, and doWork sends the request to the new controller as soon as the
        metadata cache names it. Not resent while the old controller stays live (alive
        but resigned, paused or cut off): Kafka waits for an answer or the timeout."""
        if self._request is None:
            return
        controller = self.controller_id()
        if controller == NO_LEADER or controller == self._sent_to:
            return
        if self.in_flight is not None and self._sent_to in live_brokers:
            return
        self.ctx.cancel_timer(("alter-isr-timeout",))
        self.in_flight = None
        self._transmit("controller_moved")

    def handle_response(self, response: AlterIsrResponse) -> None:
        if response.correlation_id != self.in_flight:
            return  # an answer to a request given up on
        self.in_flight = None
        self.ctx.cancel_timer(("alter-isr-timeout",))
        if response.error is ErrorCode.NOT_CONTROLLER:
            # Never reaches AlterIsrManager: the channel sends the same request to the
            # controller the metadata names, at once if it names another one.
            self.ctx.trace("alter_isr_failed", error=response.error.name,
                           partitions=[str(tp) for tp in self._in_flight_items])
            if self.controller_id() not in (NO_LEADER, self._sent_to):
                self._transmit("not_controller")
            else:
                self._tick_later()
            return
        self._request = None
        items, self._in_flight_items = self._in_flight_items, {}
        if response.error is not ErrorCode.NONE:
            # STALE_BROKER_EPOCH, ...: the items stay and go again in a new request.
            self.ctx.trace("alter_isr_failed", error=response.error.name, partitions=[str(tp) for tp in items])
            self._tick_later()
            return
        for tp, (proposed, reason) in items.items():
            result = response.partitions.get(tp)
            if result is None:
                continue  # not answered: stays unsent, goes again
            if self.unsent.get(tp) == (proposed, reason):
                del self.unsent[tp]
            partition = self.partitions.get(tp)
            if partition is not None and partition.pending_isr == proposed.isr:
                self._on_result(partition, proposed, reason, result.error, result.leader_and_isr)
        if self.unsent:
            self._tick_later()

    def _on_result(self, partition: Partition, proposed: LeaderAndIsr, reason: str, error: ErrorCode,
                   state: LeaderAndIsr | None) -> None:
        """Partition.handleAlterIsrResponse (2.7.0)."""
        tp = str(partition.tp)
        if error is not ErrorCode.NONE:
            self.ctx.trace("isr_update_conflict", partition=tp, protocol="alter_isr", error=error.name,
                           cached_zk_version=partition.zk_version, isr=list(proposed.isr))
            if error not in _GIVE_UP:
                self.unsent[partition.tp] = (proposed, reason)  # retried
            return  # given up: pending until the next LeaderAndIsr
        assert state is not None
        if state.leader_epoch != partition.leader_epoch or state.zk_version <= partition.zk_version:
            return  # stale: ignored, and still pending, as 2.7.0 does
        self._commit(partition, state.isr, state.zk_version, reason)

    def _commit(self, partition: Partition, isr: tuple[int, ...], zk_version: int, reason: str) -> None:
        old = partition.isr
        partition.isr = isr
        partition.zk_version = zk_version
        partition.pending_isr = None
        self.ctx.trace("isr_shrunk" if len(isr) < len(old) else "isr_expanded", partition=str(partition.tp),
                       isr=list(isr), old_isr=list(old), reason=reason, leader_epoch=partition.leader_epoch,
                       zk_version=zk_version, protocol=partition.config.isr_change_protocol)
        self.on_committed(partition)
