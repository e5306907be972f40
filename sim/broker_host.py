"""A simulated broker process: one core node bound to the simulated disk, network,
timers and coordination client. It carries out the node's effects and turns world
events into the node's inputs. Crash, power loss, restart and pause happen here."""
from __future__ import annotations

from collections import deque
from heapq import heappush
from typing import Any, Callable, Final, Hashable, Iterator

import simpy
from simpy.events import NORMAL

from broker_core.broker import BrokerNode
from broker_core.config import BrokerConfig
from broker_core.effect_loop import carry_out_effects
from broker_core.effects import DeleteFile, Halt, RenameFile, ReplaceFile, TruncateFile, WriteBytes, unhandled_effect
from broker_core.storage import BytesLogStorage, resolve_message
from broker_core.inputs import (
    DiskWriteFailed, FsyncCompleted, Input, MessageReceived, ShutdownRequested, Started, TimerFired)
from faults.nodes import broker_id_of, broker_node
from sim.coordination import SERVICE, CoordinationClient
from sim.deadlines import has_simpy_internals
from sim.disk import SimDisk
from sim.network import ConnectionReset, Network


_BROKER_NAMES: dict[int, str] = {}


def broker_name(broker_id: int) -> str:
    """Called for every message a broker or client sends: each name is built once."""
    name = _BROKER_NAMES.get(broker_id)
    if name is None:
        name = _BROKER_NAMES[broker_id] = broker_node(broker_id)
    return name


class _Timer:
    """A timer the core set: fires at ``at`` (simulated ms) unless cancelled or set again."""

    def __init__(self, at: float, token: int, key: tuple) -> None:
        self.at = at
        self.token = token  # the order of setting: breaks ties between equal times
        self.key = key
        self.live = True


class HostTimers:
    """A host's timers, due in the order of (time, order of setting), as from one heap.

    One FIFO per timer kind (``key[0]``): a kind mostly has one delay, so a new timer
    goes last (Kafka's timing wheel does the same); a shorter one, or one set after a
    clock change, is inserted in order. A cancelled timer stays in its FIFO, marked,
    until it reaches the front: no heap of thousands of cancelled produce and fetch
    timeouts to push and pop."""

    def __init__(self) -> None:
        self._live: dict[tuple, _Timer] = {}  # the live timer of each key
        self._queues: dict[Any, deque[_Timer]] = {}
        self._seq = 0

    def set(self, key: tuple, at: float) -> None:
        """Set (or set again) the timer ``key`` to fire at ``at``."""
        self._seq += 1
        timer = _Timer(at, self._seq, key)
        replaced = self._live.get(key)
        if replaced is not None:
            replaced.live = False
        self._live[key] = timer
        kind = key[0]
        queue = self._queues.get(kind)
        if queue is None:
            queue = self._queues[kind] = deque()
        if queue and queue[-1].at > at:
            _insert_in_order(queue, timer)
        else:
            queue.append(timer)

    def cancel(self, key: tuple) -> None:
        cancelled = self._live.pop(key, None)
        if cancelled is not None:
            cancelled.live = False

    def clear(self) -> None:
        for timer in self._live.values():
            timer.live = False
        self._live.clear()
        self._queues.clear()

    def _earliest_queue(self) -> deque[_Timer] | None:
        """The queue whose first timer is the earliest live one (cancelled ones in front dropped)."""
        best: deque[_Timer] | None = None
        best_timer: _Timer | None = None
        for queue in self._queues.values():
            while queue and not queue[0].live:
                queue.popleft()
            if queue:
                head = queue[0]
                if best_timer is None or head.at < best_timer.at or (
                        head.at == best_timer.at and head.token < best_timer.token):
                    best, best_timer = queue, head
        return best

    def next_at(self) -> float | None:
        """When the earliest live timer is due; None without one."""
        queue = self._earliest_queue()
        return None if queue is None else queue[0].at

    def pop_due(self, now: float) -> tuple | None:
        """The key of the earliest live timer due at or before ``now``, no longer set."""
        queue = self._earliest_queue()
        if queue is None or queue[0].at > now:
            return None
        timer = queue.popleft()
        timer.live = False
        del self._live[timer.key]
        return timer.key


class _Wake:
    """The simpy event that wakes the host's timers (what a Timeout with a callback did):
    simpy's step reads ``callbacks`` (then clears it) and ``_ok``."""

    def __init__(self, host: BrokerHost, token: int) -> None:
        self.callbacks: Any = _WAKE
        self._ok = True
        self._value: Any = None
        self.host = host
        self.token = token


def _wake_event(event: _Wake) -> None:
    event.host._wake(event.token)


_WAKE: Final = (_wake_event,)


class BrokerHost:
    def __init__(self, env: simpy.Environment, network: Network, broker_id: int, config: BrokerConfig,
                 topic_configs: dict[str, BrokerConfig], disk: SimDisk, trace: Callable[[str, str, dict], None]):
        self.env = env
        self.network = network
        self.broker_id = broker_id
        self.name = broker_name(broker_id)
        self.config = config
        self.topic_configs = topic_configs
        self.disk = disk
        # The port the core reads stored batches through; it keeps the batch objects
        # written, as the page cache keeps their bytes (both survive a process crash).
        self.storage = BytesLogStorage(self._read_file, lambda: disk.files.keys())
        self._trace = trace
        self.node: BrokerNode | None = None
        self.incarnation = 0
        self.started_at = 0.0  # when the current (or last) process started
        self.paused = False
        self.clock_offset_ms = 0
        self.powered = True
        self._clients: set[str] = set()
        self._timers = HostTimers()
        self._exact = has_simpy_internals(env)
        self._queue: list = env._queue if self._exact else []  # simpy keeps these for its whole life
        self._event_ids: Iterator[int] = env._eid if self._exact else iter(())
        self._wake_at: float | None = None
        self._wake_token = 0
        self._waking = False
        self._paused_inputs: list[tuple[str, Any]] = []
        # what MessageReceived names each sender by (a broker id, or a client's address),
        # worked out once per sender instead of once per message
        self._senders: dict[str, Hashable] = {}
        # Clients whose connection the core muted (a quota throttle): until when (simulated
        # time), and their requests that arrived meanwhile, unread, in order.
        self._muted: dict[str, float] = {}
        self._unread: dict[str, list[Any]] = {}
        self.exited = False  # the process stopped on its own account (not killed, not asked to)
        self.on_exit: Callable[[int], None] = lambda broker: None
        self.coord = CoordinationClient(env, self.name, config.zookeeper_session_timeout_ms,
                                        lambda m: network.send(self.name, SERVICE, m), self._input,
                                        discard=lambda: network.discard_held(self.name, SERVICE),
                                        trace=lambda type_, fields: trace(self.name, type_, fields))
        network.add_node(self.name, self._receive)

    @property
    def alive(self) -> bool:
        return self.node is not None

    def now_ms(self) -> int:
        return max(int(self._now()) + self.clock_offset_ms, 0)

    def _now(self) -> float:
        # simpy's ``now`` property returns ``_now``: read directly on the per-message path
        return self.env._now if self._exact else self.env.now

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        if self.node is not None:
            return
        self.incarnation += 1
        self.started_at = self.env.now
        self.exited = False
        self.powered = True
        self._clients = set(self.network.clients())
        self._clear_timers()
        self.paused = False
        self._paused_inputs.clear()
        self.node = BrokerNode(self.broker_id, self.config, self.topic_configs)
        self._input(Started(self.storage))
        self.coord.connect()

    def crash(self, reset_connections: bool = True) -> None:
        """Kill the process: its memory is gone, the page cache survives, and the OS
        resets the clients' connections (a power loss resets nothing: they time out)."""
        if self.node is None:
            return
        self.node = None
        self.exited = False
        self.incarnation += 1
        self._clear_timers()
        self._muted.clear()  # the connections died with the process
        self._unread.clear()
        self.coord.stop()
        if reset_connections:
            for client in self.network.clients():
                self.network.send(self.name, client, ConnectionReset(self.broker_id))
        self.network.forget_connections(self.name)  # a reset fault finds none of them (sim/faults.py)

    def _clear_timers(self) -> None:
        self._timers.clear()
        self._wake_at = None
        self._wake_token += 1

    def power_loss(self) -> None:
        self.crash(reset_connections=False)
        self.powered = False
        self.disk.power_loss()

    # -- inputs ----------------------------------------------------------------------
    def _receive(self, src: str, message: Any) -> None:
        if self.node is None:
            if self.powered and src in self._clients:
                refused = ConnectionReset(self.broker_id, getattr(message, "correlation_id", None))
                self.network.send(self.name, src, refused)
            return
        if src == SERVICE:
            if self.paused:
                self._paused_inputs.append(("coord", message))
            else:
                self.coord.handle(message)
            return
        if self._muted and src in self._muted:
            if self._muted[src] > self._now() or src in self._unread:
                self._hold_unread(src, message)
                return
            del self._muted[src]
        sender = self._senders.get(src)
        if sender is None:
            broker = broker_id_of(src)
            sender = self._senders[src] = broker if broker is not None else src
        self._input(MessageReceived(sender, message))

    def _mute(self, client: str, until_ms: int) -> None:
        """KIP-219's muted channel: nothing more is read from ``client`` until then."""
        at = float(until_ms - self.clock_offset_ms)
        if at > self._muted.get(client, 0.0):
            self._muted[client] = at

    def _hold_unread(self, src: str, message: Any) -> None:
        unread = self._unread.get(src)
        if unread is None:
            unread = self._unread[src] = []
            self._release_at(src)
        unread.append(message)

    def _release_at(self, src: str) -> None:
        incarnation = self.incarnation
        event = self.env.timeout(max(self._muted[src] - self._now(), 0.0))
        event.callbacks.append(lambda _: self._release(src, incarnation))

    def _release(self, src: str, incarnation: int) -> None:
        """The mute ended: the requests that waited are read in order, until one of them
        is throttled again (the rest wait for that mute to end)."""
        if incarnation != self.incarnation:
            return
        if self._muted.get(src, 0.0) > self._now():
            # muted again for longer while they waited (another answer to this client
            # throttled after the timer was set): they wait for the later end
            self._release_at(src)
            return
        unread = self._unread.pop(src, [])
        self._muted.pop(src, None)
        while unread:
            self._receive(src, unread.pop(0))
            if src in self._muted and self._muted[src] > self._now():
                if unread:
                    self._unread[src] = unread
                    self._release_at(src)
                return

    def _input(self, event: Input) -> None:
        node = self.node
        if node is None:
            return
        if self.paused:
            self._paused_inputs.append(("input", event))
            return
        carry_out_effects(node.handle(event, self.now_ms()), self)

    # -- the core's effects: the port broker_core.effect_loop.carry_out_effects drives --
    @property
    def is_running(self) -> bool:
        return self.node is not None

    def send(self, dst: Any, message: Any) -> None:
        """``dst``: a broker id, or a client's address (its node name)."""
        self.network.send(self.name, broker_name(dst) if isinstance(dst, int) else dst,
                          resolve_message(message, self.storage))

    def cancel_timer(self, key: tuple) -> None:
        self._timers.cancel(key)

    def write_bytes(self, effect: WriteBytes) -> None:
        error = self.disk.write(effect.path, effect.position, effect.data)
        if error is not None:
            self._disk_failed(effect.path, error)
        else:
            self.storage.remember(effect)

    def trace(self, type_: str, fields: Any) -> None:
        self._trace(self.name, type_, fields)  # fields: a dict (NodeContext.trace builds it)

    def coord_request(self, request_id: int, op: Any) -> None:
        self.coord.request(request_id, op)

    def fsync(self, path: str, token: int) -> None:
        self.disk.fsync(path, self._fsync_callback(path, token, self.incarnation))

    def file_effect(self, effect: TruncateFile | DeleteFile | ReplaceFile | RenameFile) -> None:
        if type(effect) is TruncateFile:
            self.disk.truncate(effect.path, effect.size)
        elif type(effect) is DeleteFile:
            self.disk.delete(effect.path)
            self.storage.forget(effect.path)
        elif type(effect) is ReplaceFile:
            error = self.disk.replace(effect.path, effect.data)
            if error is not None:
                self._disk_failed(effect.path, error)
        elif type(effect) is RenameFile:
            self.disk.rename(effect.path, effect.new_path)
            self.storage.renamed(effect.path, effect.new_path)
        else:
            unhandled_effect(effect)

    def close_connection(self, dst: Any) -> None:
        """The client's end sees the connection reset after what was sent before it."""
        self.network.send(self.name, broker_name(dst) if isinstance(dst, int) else dst,
                          ConnectionReset(self.broker_id))

    def mute_connection(self, dst: Any, until_ms: int) -> None:
        """``dst``: a client's address (brokers' fetches are never throttled)."""
        self._mute(broker_name(dst) if isinstance(dst, int) else dst, until_ms)

    def halt(self, effect: Halt) -> None:
        self._trace(self.name, "broker_halted", {"reason": effect.reason, "clean": effect.clean})
        if effect.clean:
            self.coord.close()
        self.crash()
        if not effect.requested:
            self.exited = True
            self.on_exit(self.broker_id)

    def _read_file(self, path: str) -> bytearray | None:
        f = self.disk.files.get(path)
        return None if f is None else f.data

    def _disk_failed(self, path: str, error: str) -> None:
        """The write failed: the core hears it before anything after the write happens
        (Kafka's append throws before the produce is answered)."""
        self._input(DiskWriteFailed(path, error))

    # -- pause, shutdown -------------------------------------------------------------
    def pause(self) -> None:
        if self.node is not None and not self.paused:
            self.paused = True
            self.coord.paused = True

    def resume(self) -> None:
        if not self.paused:
            return
        self.paused = False
        self.coord.paused = False
        queued, self._paused_inputs = self._paused_inputs, []
        for kind, item in queued:
            if self.node is None:
                break
            if kind == "coord":
                self.coord.handle(item)
            else:
                self._input(item)

    def shutdown(self) -> None:
        self._input(ShutdownRequested())

    # Timers live in the host's own queues; simpy holds one wake-up for the earliest, so a
    # cancelled timer (most produce and fetch timeouts) costs simpy nothing. Timers fire in
    # the order of (time, order of setting), as from one heap.
    def set_timer(self, key: tuple, at_ms: int) -> None:
        at = float(max(at_ms - self.clock_offset_ms, self._now()))
        self._timers.set(key, at)
        wake_at = self._wake_at
        if not self._waking and (wake_at is None or at < wake_at):
            self._schedule_wake(at)

    def _schedule_wake(self, at: float) -> None:
        self._wake_at = at
        self._wake_token += 1
        env = self.env
        now: float = self._now()
        delay = at - now
        event = _Wake(self, self._wake_token)
        if self._exact:  # what env.timeout(delay) does, without its Python calls (sim/deadlines.py)
            heappush(self._queue, (now + delay, NORMAL, next(self._event_ids), event))
        else:
            env.schedule(event, NORMAL, delay)  # type: ignore[arg-type]

    def _wake(self, token: int) -> None:
        if token != self._wake_token:
            return
        self._wake_at = None
        self._waking = True  # timers set while firing are scheduled below, all at once
        now: float = self._now()
        try:
            while True:
                key = self._timers.pop_due(now)
                if key is None:
                    break
                self._input(TimerFired(key))
        finally:
            self._waking = False
        at = self._timers.next_at()
        if at is not None:
            self._schedule_wake(at)

    def _fsync_callback(self, path: str, token: int, incarnation: int):
        def done():
            if incarnation == self.incarnation:
                self._input(FsyncCompleted(path, token))
        return done


def _insert_in_order(queue: deque[_Timer], timer: _Timer) -> None:
    """Put ``timer`` after every timer due at or before it (it was set last, so it
    fires after those of the same time)."""
    index = len(queue)
    while index > 0 and queue[index - 1].at > timer.at:
        index -= 1
    queue.insert(index, timer)
