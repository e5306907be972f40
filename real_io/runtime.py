"""One broker process: the core's node driven by an asyncio event loop.

The runtime hands the node one input at a time with a monotonic millisecond clock and
carries out the effects it answers: messages to clients go to their connection (the
server registers each as an address), messages to itself (a controller's requests to
its own broker) come back as inputs on the next loop turn, requests to another broker
go over the wire (real_io/peer_channels.py) and their answers come back as inputs from
that broker, file effects go to the data
directory (fsync on a worker thread, answered by ``FsyncCompleted``), timers are
``loop.call_at`` handles, coordination requests go to the embedded store or ZooKeeper,
and trace effects to the trace writer with the simulation's schema (binding ``real``).

The core refers to stored bytes it does not hold (broker_core/storage.py): ``Started``
hands it the data directory as its storage port, and a fetch response carries file
regions, which ``send`` reads from the segment files as they are (no decoding, no
re-encoding) when it carries out the ``Send``, in effect order, so every region's bytes
were written before it is read.
"""
from __future__ import annotations

import asyncio
from dataclasses import replace
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Hashable, Mapping, Protocol

from analysis.trace import TraceWriter
from broker_core.broker import BrokerNode
from broker_core.config import BrokerConfig
from broker_core.effect_loop import carry_out_effects
from broker_core.effects import FileEffect, Halt
from broker_core.messages import FetchResponse
from faults.nodes import broker_node
from real_io.protocol.primitives import Splice
from broker_core.inputs import (
    DiskWriteFailed, FsyncCompleted, Input, MessageReceived, ShutdownRequested, Started, TimerFired)
from real_io.files import DataDir
from real_io.inter_broker_api import CONTROLLER, FETCHER, TO_CONTROLLER
from real_io.peer_channels import Address, PeerChannels


class CoordinationPort(Protocol):
    """The coordination service as the runtime drives it: it carries out the core's
    ``CoordRequest`` effects and hands back the coordination inputs (``CoordReplied``,
    ``CoordWatchFired``, ``CoordSessionStarted``, ``CoordSessionExpired``) in the order the
    core must see them. ``ZooKeeperCoordination`` (real_io/coordination.py) and
    ``EmbeddedCoordination`` (real_io/embedded_coordination.py) implement it; mypy checks
    both where real_io/serve.py hands one to the runtime."""

    def set_wakeup(self, wakeup: Callable[[], None]) -> None:
        """``wakeup`` is called, from any thread, whenever an input is ready for ``poll``."""

    def start(self) -> None:
        """Open the session; the core hears ``CoordSessionStarted`` through ``poll``."""

    def request(self, request_id: int, op: Any) -> None:
        """Carry out one of the core's coordination ops (broker_core.coordination)."""

    def poll(self, timeout_s: float | None = 0.0) -> Any | None:
        """The next coordination input for the core, or None."""

    def close(self) -> None:
        """End the session cleanly (its ephemeral nodes go with it); nothing more is handed over."""


class BrokerRuntime:
    # The running loop, from start(): nothing reaches the runtime before (the server
    # asks is_running, which is False until then), so it is not Optional.
    loop: asyncio.AbstractEventLoop

    def __init__(self, broker_id: int, config: BrokerConfig, data_dir: DataDir, coordination: CoordinationPort,
                 trace: TraceWriter | None = None, topic_configs: dict[str, BrokerConfig] | None = None,
                 clock_origin: float | None = None, peers: Mapping[int, Address] | None = None,
                 advertised: Mapping[int, Address] | None = None):
        """``clock_origin``: the event loop's (monotonic) time that is 0 ms on the broker's
        clock; None: when it starts. A scenario run passes its own start, so that every
        incarnation of the broker and the run's clients write one clock. ``peers``: where
        to connect to reach each other broker; ``advertised``: the address clients are
        told for each broker (Metadata, and the controller's requests), this broker's own
        added by serve.py once it listens."""
        self.broker_id = broker_id
        self.name = broker_node(broker_id)
        # this binding measures each request's handler time (server.py, request_time.py)
        # rather than the simulation's model of it
        config = replace(config, request_time_source="measured")
        self.config = config
        self.data_dir = data_dir
        self.coordination = coordination
        self.writer = trace
        self.node = BrokerNode(broker_id, config, topic_configs or {})
        self._origin = 0.0
        self._clock_origin = clock_origin
        self._last_now = 0
        self._timers: dict[tuple, asyncio.TimerHandle] = {}
        self._clients: dict[Hashable, Callable[[Any], None]] = {}
        self._closers: dict[Hashable, Callable[[], None]] = {}
        self._muters: dict[Hashable, Callable[[float], None]] = {}
        self.halted: asyncio.Future[Halt] | None = None  # from start(); done once the node halts
        self.halt_reason: Halt | None = None
        self._draining = False
        self._fsync_thread = ThreadPoolExecutor(1, thread_name_prefix="fsync")
        self.advertised: dict[int, Address] = dict(advertised or {})
        self.peers = PeerChannels(broker_id, peers or {}, lambda: self.advertised, self._answered_by_peer,
                                  self.trace, _request_timeouts_ms(config))

    # -- clock -----------------------------------------------------------------------
    def now_ms(self) -> int:
        now = int((self.loop.time() - self._origin) * 1000)
        self._last_now = max(self._last_now, now)  # never backwards, even across rounding
        return self._last_now

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._origin = self.loop.time() if self._clock_origin is None else self._clock_origin
        self.halted = self.loop.create_future()
        self.coordination.set_wakeup(self._wakeup_threadsafe)
        self.feed(Started(self.data_dir))
        self.coordination.start()

    def shutdown(self) -> None:
        """An operator's stop (SIGTERM): the core's controlled shutdown."""
        if self.is_running:
            self.feed(ShutdownRequested())

    @property
    def is_running(self) -> bool:
        return self.halted is not None and not self.halted.done()

    def close(self) -> None:
        self.peers.close()
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        self.coordination.close()
        self._fsync_thread.shutdown(wait=True)
        self.data_dir.close()

    # -- inputs ----------------------------------------------------------------------
    def feed(self, event: Input) -> None:
        if not self.is_running and not isinstance(event, Started):
            return
        carry_out_effects(self.node.handle(event, self.now_ms()), self)

    def deliver(self, src: Hashable, message: Any) -> None:
        """A client's request, translated to the core's message."""
        self.feed(MessageReceived(src, message))

    def register_client(self, address: Hashable, on_message: Callable[[Any], None],
                        on_close: Callable[[], None] | None = None,
                        on_mute: Callable[[float], None] | None = None) -> None:
        """``on_message`` takes the core's messages to the client; ``on_close`` closes
        its connection when the core says so (CloseConnection); ``on_mute(until)`` stops
        reading it until the event loop's time ``until`` (MuteConnection)."""
        self._clients[address] = on_message
        if on_close is not None:
            self._closers[address] = on_close
        if on_mute is not None:
            self._muters[address] = on_mute

    def unregister_client(self, address: Hashable) -> None:
        self._clients.pop(address, None)
        self._closers.pop(address, None)
        self._muters.pop(address, None)

    def _wakeup_threadsafe(self) -> None:
        loop = self.loop  # set: start() sets it before it hands this to the coordination
        if not loop.is_closed():
            loop.call_soon_threadsafe(self._drain_coordination)

    def _drain_coordination(self) -> None:
        if self._draining:
            return
        self._draining = True
        try:
            while self.is_running:
                event = self.coordination.poll(0)
                if event is None:
                    break
                self.feed(event)
        finally:
            self._draining = False

    # -- effects: the port broker_core.effect_loop.carry_out_effects drives ------------
    def trace(self, type_: str, fields: Any) -> None:
        if self.writer is not None:
            self.writer.write(self.now_ms(), self.name, type_, fields)

    def send(self, dst: Hashable, message: Any) -> None:
        if dst == self.broker_id:  # the controller's request to its own broker
            self.loop.call_soon(self.feed, MessageReceived(self.broker_id, message))
            return
        deliver = self._clients.get(dst)
        if deliver is not None:
            if type(message) is FetchResponse:
                self._pin_regions(message)
            deliver(message)
        elif not isinstance(dst, int):
            return  # the client's connection closed: its answer goes nowhere, as on a socket
        else:
            self.peers.send(dst, message)

    def _answered_by_peer(self, broker: int, response: Any) -> None:
        self.feed(MessageReceived(broker, response))

    def _pin_regions(self, response: FetchResponse) -> None:
        """Each partition's regions become one Splice of pinned regions, which the server
        sends from the segment files with sendfile: the stored record batches v2, as they
        are. Pinned now, in effect order (every region's bytes were written before), and
        in place: the response is the core's fresh answer to this one request."""
        for result in response.partitions.values():
            regions = result.batches
            if regions:
                # As the one element of the core's tuple: the field's type (which mypyc,
                # compiling the core, enforces) is a tuple; kafka_api.fetch_records takes it out.
                result.batches = (Splice(sum(r.size for r in regions), [self.data_dir.pin(r) for r in regions]),)

    def file_effect(self, effect: FileEffect) -> None:
        try:
            self.data_dir.carry_out(effect)
        except OSError as error:
            # The core hears of it before anything after the write happens.
            self.feed(DiskWriteFailed(effect.path, f"{type(error).__name__}: {error.strerror or error}"))

    write_bytes = file_effect  # the data directory carries out every file effect alike

    def coord_request(self, request_id: int, op: Any) -> None:
        self.coordination.request(request_id, op)
        self.loop.call_soon(self._drain_coordination)

    def close_connection(self, dst: Hashable) -> None:
        close = self._closers.get(dst)
        if close is not None:  # else the client is gone already
            close()

    def mute_connection(self, dst: Hashable, until_ms: int) -> None:
        mute = self._muters.get(dst)
        if mute is not None:  # else the client is gone already
            mute(self._origin + until_ms / 1000.0)  # the node's clock to the event loop's

    def fsync(self, path: str, token: int) -> None:
        # One fsync thread: fsyncs complete in the order they were asked for, which the
        # core's durable offsets rely on (PartitionLog.fsync_completed).
        future = self.loop.run_in_executor(self._fsync_thread, self.data_dir.fsync, path)

        def done(result: asyncio.Future) -> None:
            if result.cancelled() or not self.is_running:
                return
            error = result.exception()
            if error is not None:
                self.feed(DiskWriteFailed(path, f"fsync: {error}"))
            else:
                self.feed(FsyncCompleted(path, token))
        future.add_done_callback(done)

    def set_timer(self, key: tuple, at_ms: int) -> None:
        old = self._timers.pop(key, None)
        if old is not None:
            old.cancel()
        self._timers[key] = self.loop.call_at(self._origin + at_ms / 1000.0, self._fire, key)

    def cancel_timer(self, key: tuple) -> None:
        handle = self._timers.pop(key, None)
        if handle is not None:
            handle.cancel()

    def _fire(self, key: tuple) -> None:
        if self._timers.pop(key, None) is not None:
            self.feed(TimerFired(key))

    def halt(self, effect: Halt) -> None:
        self.trace("broker_halted", {"reason": effect.reason, "clean": effect.clean})
        self.halt_reason = effect
        # No fsync of its own: a clean halt comes after the core flushed every log
        # (BrokerNode._close_logs), in both bindings.
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        if self.halted is not None:  # always: effects are carried out only while is_running
            self.halted.set_result(effect)


def _request_timeouts_ms(config: BrokerConfig) -> dict[str, int]:
    """How long a connection to another broker waits for an answer before it closes
    (NetworkClient's request timeout): replica.socket.timeout.ms for the fetcher, which
    is below the core's own fetch timeout (that plus replica.fetch.wait.max.ms);
    controller.socket.timeout.ms for the others, less 50 ms, so that the connection is
    closed before the core's timer at that same timeout sends again, and the new request
    goes on a new connection instead of being lost with the old one."""
    controller = max(config.controller_socket_timeout_ms - 50, 1)
    return {FETCHER: max(config.replica_socket_timeout_ms, 1), CONTROLLER: controller, TO_CONTROLLER: controller}
