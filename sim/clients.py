"""Simulated Kafka clients that record a Jepsen-style history into the trace.

Every operation is an ``invoke`` followed by ``ok`` (it happened; with offsets),
``fail`` (it certainly did not happen; with the error) or ``info`` (unknown: a timeout
or an error after a possible append). The checkers judge from these events alone.

The unit of a produce operation is one batch for one partition, as the broker
acknowledges it: ``values`` lists the records, ``offset`` the first one's offset.

This module holds what every client shares (metadata, timeouts, the history writer)
and the final read; the producer is in sim/producer.py, the consumer in sim/consumer.py.
The history's vocabulary and events are analysis/client_history.py's, the final read's
records and window rule analysis/read_records.py's: the real binding writes the same.
"""
from __future__ import annotations

from typing import Any, Callable

import simpy

from analysis.client_history import CLIENT_TIMEOUT, CONNECTION_REFUSED, CONNECTION_RESET, INFO, INVOKE, OK, \
    read_gave_up, read_invoke, read_ok
from analysis.read_records import ReadRecords, read_complete
from broker_core.errors import ErrorCode
from broker_core.messages import (
    CONSUMER_REPLICA_ID, LATEST_TIMESTAMP, FetchPartition, FetchRequest, ListOffsetsRequest,
    MetadataRequest, MetadataResponse)
from broker_core.types import NO_LEADER, TopicPartition
from sim.broker_host import broker_name
from sim.deadlines import DeadlineQueue
from sim.network import ConnectionReset, Network

TraceFn = Callable[[str, str, dict], None]
RECONNECT_BACKOFF_MS = 1000


class SimClient:
    """Metadata, request timeouts and the history writer shared by all clients."""

    def __init__(self, env: simpy.Environment, network: Network, name: str, brokers: list[int],
                 trace: TraceFn, request_timeout_ms: int = 30000):
        self.env = env
        self.network = network
        self.name = name
        self.brokers = brokers
        self._trace = trace
        self.request_timeout_ms = request_timeout_ms
        self.leaders: dict[TopicPartition, int] = {}
        self.leader_epochs: dict[TopicPartition, int] = {}  # from the metadata that named the leader
        self.running = True
        self._correlation = 0
        self._pending: dict[int, Any] = {}  # correlation id -> context
        self._destination: dict[int, int] = {}  # correlation id -> broker
        self._backoff_until: dict[int, float] = {}
        self.client_id = name  # client.id (sim/world.py gives workloads Kafka's defaults)
        # KIP-219: a broker that answered with a throttle time gets nothing more from this
        # client until it has passed (2.7.0 NetworkClient: ClusterConnectionStates.throttle)
        self._throttled_until: dict[int, float] = {}
        self._metadata_in_flight: int | None = None
        self._bootstrap_index = 0
        self._next_op = 0
        # every request's deadline, request_timeout_ms after it was sent; one simpy wake-up
        self._deadlines = DeadlineQueue(env, request_timeout_ms, self._pending.__contains__, self._timed_out)
        network.add_node(name, self._receive)

    def now(self) -> int:
        return int(self.env.now)

    def history(self, type_: str, fields: dict) -> None:
        self._trace(self.name, type_, fields)

    def new_op(self) -> int:
        self._next_op += 1
        return self._next_op

    def request(self, broker: int, build, context: Any) -> int:
        self._correlation += 1
        cid = self._correlation
        self._pending[cid] = context
        self._destination[cid] = broker
        if self._throttled_until and self._throttled_until.get(broker, 0.0) > self.env.now:
            # The request waits in the client until the throttle ends, then leaves
            # (NetworkClient.isReady is false for a throttled node).
            event = self.env.timeout(self._throttled_until[broker] - self.env.now)
            event.callbacks.append(lambda _: self._send_after_throttle(broker, cid, build))
            return cid
        self.network.send(self.name, broker_name(broker), build(cid))
        self._deadlines.add(cid)
        return cid

    def _send_after_throttle(self, broker: int, cid: int, build) -> None:
        if cid in self._pending:  # not ended meanwhile (a connection reset)
            self.network.send(self.name, broker_name(broker), build(cid))
            self._deadlines.add(cid)

    def throttled(self, broker: int) -> bool:
        """Whether ``broker``'s last throttle time has not passed yet."""
        return self._throttled_until.get(broker, 0.0) > self.env.now

    def _timed_out(self, cid: int) -> None:
        context = self._pending.pop(cid, None)
        self._destination.pop(cid, None)
        if context is None:
            return
        if cid == self._metadata_in_flight:
            self._metadata_in_flight = None
            self.refresh_metadata()
            return
        self.on_timeout(context)

    def _receive(self, src: str, message: Any) -> None:
        if isinstance(message, ConnectionReset):
            if message.correlation_id is None:
                self._connection_reset(message.broker)
            else:
                self._connection_refused(message.broker, message.correlation_id)
            return
        broker = self._destination.pop(message.correlation_id, None)
        throttle = getattr(message, "throttle_time_ms", 0)
        if throttle > 0 and broker is not None:  # 2.7.0 NetworkClient.maybeThrottle (KIP-219)
            self._throttled_until[broker] = max(self._throttled_until.get(broker, 0.0), self.env.now + throttle)
        context = self._pending.pop(message.correlation_id, None)
        if context is None:
            return  # an answer after its timeout: the history already says "unknown"
        if isinstance(message, MetadataResponse):
            self._metadata_in_flight = None
            for tp in sorted(message.partitions):
                meta = message.partitions[tp]
                if self.accepts_metadata(tp, meta.leader_epoch):
                    self.leaders[tp] = meta.leader
                    self.leader_epochs[tp] = meta.leader_epoch
            self.on_metadata()
        else:
            self.on_response(context, message)

    def _connection_reset(self, broker: int) -> None:
        """The broker closed our connection (its process died, or it closed it after an
        acks=0 produce failed): every request in flight to it ends now, its outcome
        unknown, and the metadata is refreshed, as the disconnect may come from stale
        metadata (2.7.0 clients NetworkClient.processDisconnection: cancelInFlightRequests,
        then DefaultMetadataUpdater.handleServerDisconnect: metadata.requestUpdate)."""
        for cid in sorted(c for c, b in self._destination.items() if b == broker):
            del self._destination[cid]
            context = self._pending.pop(cid, None)
            if cid == self._metadata_in_flight:
                self._metadata_in_flight = None
            elif context is not None:
                self.on_timeout(context, reason=CONNECTION_RESET)
        self.refresh_metadata()

    def _connection_refused(self, broker: int, cid: int) -> None:
        """Nothing listens on the broker's port: the request never reached a broker."""
        self._backoff_until[broker] = self.env.now + RECONNECT_BACKOFF_MS
        self._destination.pop(cid, None)
        context = self._pending.pop(cid, None)
        if context is None:
            return
        if cid == self._metadata_in_flight:
            self._metadata_in_flight = None
            self.refresh_metadata()
        else:
            self.on_refused(context)

    def on_refused(self, context: Any) -> None:
        self.on_timeout(context, reason=CONNECTION_REFUSED)

    def reachable(self, broker: int) -> bool:
        """Not in a reconnect backoff, nor throttled."""
        if self._throttled_until and self.throttled(broker):
            return False
        return self._backoff_until.get(broker, 0) <= self.env.now

    def refresh_metadata(self) -> None:
        if self._metadata_in_flight is not None or not self.running:
            return
        candidates = [b for b in self.brokers if self.reachable(b)] or self.brokers
        broker = candidates[self._bootstrap_index % len(candidates)]
        self._bootstrap_index += 1
        self._metadata_in_flight = self.request(broker, lambda cid: MetadataRequest(cid), "metadata")

    def accepts_metadata(self, tp: TopicPartition, leader_epoch: int) -> bool:
        """Whether to take a partition's leader from a metadata response."""
        return True

    def on_metadata(self) -> None:
        pass

    def on_response(self, context: Any, message: Any) -> None:
        raise NotImplementedError

    def on_timeout(self, context: Any, reason: str = CLIENT_TIMEOUT) -> None:
        raise NotImplementedError


class SimReader(SimClient):
    """The final read: every partition from its log start up to its high watermark."""

    def __init__(self, env, network, name, brokers, trace, partitions: list[TopicPartition],
                 request_timeout_ms: int = 5000, retry_ms: int = 200):
        super().__init__(env, network, name, brokers, trace, request_timeout_ms)
        self.partitions = sorted(partitions)
        self.retry_ms = retry_ms
        self.results: dict[TopicPartition, ReadRecords] = {}
        self._state: dict[TopicPartition, dict] = {}

    def run(self, deadline_ms: float):
        """A simpy process: read everything, or give up at ``deadline_ms``."""
        for tp in self.partitions:
            op = self.new_op()
            self.history(INVOKE, read_invoke(op, str(tp)))
            self._state[tp] = {"op": op, "end": None, "position": 0, "records": ReadRecords(), "busy": False,
                               "done": False}
        self.refresh_metadata()
        while self.env.now < deadline_ms and not all(s["done"] for s in self._state.values()):
            for tp in self.partitions:
                self._step(tp)
            yield self.env.timeout(self.retry_ms)
        for tp in self.partitions:
            state = self._state[tp]
            if not state["done"]:
                self.history(INFO, read_gave_up(state["op"], str(tp), state["records"].json(), state["records"].keys))
        self.running = False

    def _step(self, tp: TopicPartition) -> None:
        state = self._state[tp]
        if state["done"] or state["busy"]:
            return
        leader = self.leaders.get(tp, NO_LEADER)
        if leader == NO_LEADER:
            self.refresh_metadata()
            return
        state["busy"] = True
        if state["end"] is None:
            self.request(leader, lambda cid: ListOffsetsRequest(cid, {tp: LATEST_TIMESTAMP}), ("end", tp))
        else:
            wanted = {tp: FetchPartition(state["position"])}
            self.request(leader, lambda cid: FetchRequest(cid, CONSUMER_REPLICA_ID, 0, 1, wanted, self.client_id),
                         ("fetch", tp))

    def on_response(self, context, message) -> None:
        kind, tp = context
        state = self._state[tp]
        state["busy"] = False
        if kind == "end":
            result = message.partitions[tp]
            if result.error is not ErrorCode.NONE:  # OFFSET_NOT_AVAILABLE too: asked again
                self.leaders.pop(tp, None)
                return
            state["end"] = result.offset
        else:
            result = message.partitions.get(tp)
            if result is None:
                return  # a throttled fetch has no partitions (KIP-219): asked again at the next step
            if result.error is ErrorCode.OFFSET_OUT_OF_RANGE and state["position"] < result.log_start_offset:
                state["position"] = result.log_start_offset
                return
            if result.error is not ErrorCode.NONE:
                self.leaders.pop(tp, None)
                return
            records = state["records"]
            if records.add(result.batches, state["position"], state["end"]):
                state["position"] = records.next_offset
            if result.batches and state["position"] < result.batches[-1].next_offset:
                state["position"] = min(result.batches[-1].next_offset, state["end"])
        if read_complete(state["position"], state["end"]):
            state["done"] = True
            self.results[tp] = state["records"]
            self.history(OK, read_ok(state["op"], str(tp), state["records"].json(), state["end"], state["records"].keys))
        else:
            self._step(tp)

    def on_timeout(self, context, reason: str = CLIENT_TIMEOUT) -> None:
        _, tp = context
        self._state[tp]["busy"] = False
        self.leaders.pop(tp, None)
        self.refresh_metadata()
