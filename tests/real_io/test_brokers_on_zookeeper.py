"""End to end: three real core brokers, whose coordination goes through the kazoo binding
to a real ZooKeeper, elect a controller and a partition leader. Their messages to each
other are routed in-process by a small synchronous loop that also runs their timers; only
ZooKeeper is real. Proof that the core's coordination works against ZooKeeper itself, not
only against the simulated service."""
from __future__ import annotations

import heapq
import itertools
import json
import time

from broker_core import coordination as coord
from broker_core.broker import BrokerNode
from broker_core.config import broker_config, topic_config
from broker_core.effect_loop import carry_out_effects
from broker_core.effects import Halt
from broker_core.storage import MemoryFiles
from broker_core.inputs import FsyncCompleted, MessageReceived, Started, TimerFired
from broker_core.types import TopicPartition
from real_io.coordination import ZooKeeperCoordination

BROKERS = (1, 2, 3)
TOPIC = "t"


class Loop:
    """Runs core brokers in real time: in-process links (1 ms), timers, page-cache-only
    files, and each broker's own ZooKeeper session through the binding."""

    def __init__(self, hosts: str, profile: str = "kafka-2.7"):
        self.config = broker_config(profile, {})
        self.t0 = time.monotonic()
        self._queue: list = []
        self._seq = itertools.count()
        self.timers: dict[int, dict] = {b: {} for b in BROKERS}
        self.traces: list[tuple[int, int, str, dict]] = []
        self.nodes = {b: BrokerNode(b, self.config, {TOPIC: topic_config(self.config, {})}) for b in BROKERS}
        self.zk = {b: ZooKeeperCoordination(hosts, self.config.zookeeper_session_timeout_ms) for b in BROKERS}
        for b in BROKERS:
            self._apply(b, self.nodes[b].handle(Started(MemoryFiles().storage), self.now()))
            self.zk[b].start()

    def now(self) -> int:
        return int((time.monotonic() - self.t0) * 1000)

    def close(self) -> None:
        for b in sorted(self.nodes):
            self.zk[b].close()

    def stop(self, broker: int) -> None:
        """The process exits and closes its session (ZooKeeper drops its ephemeral nodes now)."""
        self.zk[broker].close()
        del self.nodes[broker]

    def run_until(self, predicate, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return True
            self._step()
        return predicate()

    def _step(self) -> None:
        busy = False
        for b in sorted(self.nodes):
            while b in self.nodes and (event := self.zk[b].poll(0)) is not None:
                self._deliver(b, event)
                busy = True
        now = self.now()
        while self._queue and self._queue[0][0] <= now:
            _, _, broker, event = heapq.heappop(self._queue)
            if isinstance(event, tuple):  # ("timer", key, token)
                _, key, token = event
                if self.timers[broker].get(key) != token:
                    continue
                del self.timers[broker][key]
                event = TimerFired(key)
            self._deliver(broker, event)
            busy = True
        if not busy:
            time.sleep(0.001)

    def _deliver(self, broker: int, event) -> None:
        if broker in self.nodes:
            self._apply(broker, self.nodes[broker].handle(event, self.now()))

    def _push(self, at: int, broker: int, event) -> None:
        heapq.heappush(self._queue, (at, next(self._seq), broker, event))

    def _apply(self, broker: int, effects: list) -> None:
        carry_out_effects(effects, _Port(self, broker))

    def controllers(self) -> list[int]:
        return [b for b in sorted(self.nodes) if self.nodes[b].controller.active]

    def leaders(self) -> list[int]:
        tp = TopicPartition(TOPIC, 0)
        return [b for b in sorted(self.nodes)
                if (p := self.nodes[b].replicas.partitions.get(tp)) is not None and p.is_leader]


class _Port:
    """One broker's effects in the loop (broker_core.effect_loop): in-process sends, the
    loop's timers, the broker's own ZooKeeper session; the files stay in the page cache
    (nothing reads them back here) and no client connects."""

    def __init__(self, loop: Loop, broker: int):
        self.loop, self.broker = loop, broker

    @property
    def is_running(self) -> bool:
        return self.broker in self.loop.nodes

    def send(self, dst, message, /) -> None:
        if dst in self.loop.nodes:
            self.loop._push(self.loop.now() + 1, dst, MessageReceived(self.broker, message))

    def set_timer(self, key: tuple, at_ms: int, /) -> None:
        token = next(self.loop._seq)
        self.loop.timers[self.broker][key] = token
        self.loop._push(at_ms, self.broker, ("timer", key, token))

    def cancel_timer(self, key: tuple, /) -> None:
        self.loop.timers[self.broker].pop(key, None)

    def write_bytes(self, effect, /) -> None:
        pass

    def file_effect(self, effect, /) -> None:
        pass

    def trace(self, type_: str, fields, /) -> None:
        self.loop.traces.append((self.loop.now(), self.broker, type_, dict(fields)))

    def coord_request(self, request_id: int, op, /) -> None:
        self.loop.zk[self.broker].request(request_id, op)

    def fsync(self, path: str, token: int, /) -> None:
        self.loop._push(self.loop.now(), self.broker, FsyncCompleted(path, token))

    def close_connection(self, dst, /) -> None:
        pass  # no client connections here: nothing to close

    def mute_connection(self, dst, until_ms: int, /) -> None:
        pass  # likewise

    def halt(self, effect: Halt, /) -> None:
        raise AssertionError(f"broker {self.broker} halted: {effect.reason}")


def _registered(admin) -> list[str]:
    return sorted(admin.get_children(coord.BROKER_IDS_PATH), key=int)


def _state(admin):
    found = admin.exists(coord.partition_state_path(TOPIC, 0))
    return json.loads(admin.get(coord.partition_state_path(TOPIC, 0))[0]) if found else None


def test_three_brokers_elect_a_controller_and_a_leader_through_real_zookeeper(zk_hosts, admin):
    """2.7.0 KafkaController.elect (the /controller ephemeral race),
    onNewPartitionCreation (the partition state written to
    /brokers/topics/t/partitions/0/state) and the LeaderAndIsr request that makes the
    named broker the leader; then onBrokerFailure moving leadership off a broker whose
    session closed (the next replica of the assignment, the ISR shrunk)."""
    admin.ensure_path(coord.TOPICS_PATH)  # Kafka creates its top-level paths at startup
    loop = Loop(zk_hosts)
    try:
        # One broker's registration may still be on its way when another has been elected
        # (a loaded machine delays a session's first write), and the controller learns of
        # a registration through its watch a moment after ZooKeeper has it: wait for all
        # three in the controller's live set, or the topic's ISR starts without the late one.
        assert loop.run_until(lambda: len(loop.controllers()) == 1 and _registered(admin) == ["1", "2", "3"]
                              and loop.nodes[loop.controllers()[0]].controller.live == set(BROKERS),
                              timeout_s=20), (_registered(admin), loop.traces[-20:])
        controller = loop.controllers()[0]
        assert json.loads(admin.get(coord.CONTROLLER_PATH)[0])["brokerid"] == controller
        for b in BROKERS:  # each registration is owned by that broker's real session
            owner = admin.get(coord.broker_path(b))[1].ephemeralOwner
            assert owner == loop.zk[b].session_id == loop.nodes[b].session_id

        admin.create(coord.topic_path(TOPIC), coord.encode_data({"partitions": {"0": [2, 3, 1]}}))
        assert loop.run_until(lambda: _state(admin) is not None and loop.leaders() == [_state(admin)["leader"]],
                              timeout_s=20), loop.traces[-20:]
        state = _state(admin)
        assert state["leader"] == 2  # the first live replica of the assignment
        assert sorted(state["isr"]) == [1, 2, 3]
        assert state["controller_epoch"] == loop.nodes[controller].controller.epoch

        # The leader goes away: ZooKeeper's watches (/brokers/ids, /controller if it was
        # the controller) tell the survivors, and a new leader is written and obeyed.
        loop.stop(2)
        assert loop.run_until(lambda: _state(admin)["leader"] != 2 and len(loop.controllers()) == 1
                              and loop.leaders() == [_state(admin)["leader"]], timeout_s=20), loop.traces[-20:]
        state = _state(admin)
        assert state["leader"] == 3 and sorted(state["isr"]) == [1, 3]
        assert json.loads(admin.get(coord.CONTROLLER_PATH)[0])["brokerid"] == loop.controllers()[0]
    finally:
        loop.close()

