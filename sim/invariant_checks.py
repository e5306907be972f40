"""``isrlab run --check-invariants``: the replication invariants (broker_core/invariants.py,
broker_core/stale_epochs.py) checked after every input a simulated broker's core
handles. Only a core's handling of an input changes a core's state, so this is after
every simulated event that could break one. The first violation stops the run.

Used only when asked for: the world builds ``CheckedBrokerHost`` instead of
``BrokerHost``, so a run without the flag runs exactly the code it ran before."""
from __future__ import annotations

from typing import Any, Callable

import simpy

from broker_core.inputs import Input, MessageReceived
from broker_core.follower_invariants import log_start_followed, log_starts_told
from broker_core.invariants import ClusterView, InvariantObserver, Violation, appended_by, log_ends
from broker_core.messages import ProduceRequest, ProduceResponse
from broker_core.stale_epochs import stale_request_changed, stale_request_state
from broker_core.effect_loop import carry_out_effects
from broker_core.config import BrokerConfig
from sim.broker_host import BrokerHost
from sim.disk import SimDisk
from sim.network import Network


class InvariantBroken(Exception):
    """Stops the simulation at the first violation (caught by World.run)."""

    def __init__(self, violation: Violation):
        super().__init__(violation)
        self.violation = violation


class InvariantChecks:
    """The world's observer and view: the hosts' cores as they come and go, the
    coordination service's store, and the first violation."""

    def __init__(self, store: Any) -> None:
        self.nodes: dict[int, Any] = {}
        self.view = ClusterView(self.nodes, store)
        self.observer = InvariantObserver()
        self.first: Violation | None = None
        self.first_at_ms: float | None = None
        self.checked = 0  # inputs after which the invariants ran

    def stop(self, violations: list[Violation], now_ms: float) -> None:
        if violations:
            if self.first is None:
                self.first, self.first_at_ms = violations[0], now_ms
            raise InvariantBroken(self.first)

    def healed(self, now_ms: float) -> None:
        """ReplicasAgreeBelowHighWatermark, once the final phase saw the cluster settled."""
        self.stop(self.observer.healed(self.view), now_ms)


class CheckedBrokerHost(BrokerHost):
    """A BrokerHost that runs the invariants around every input its core handles."""

    # BrokerHost's parameters spelled out: compiled (isrlab/compiled.py), a class
    # cannot pass *args on to a compiled __init__
    def __init__(self, checks: InvariantChecks, env: simpy.Environment, network: Network, broker_id: int,
                 config: BrokerConfig, topic_configs: dict[str, BrokerConfig], disk: SimDisk,
                 trace: Callable[[str, str, dict], None]) -> None:
        self.checks = checks
        # acks=all produces being answered: (client, correlation id) -> request, and
        # where handling it appended (leader epoch, first offset) per partition
        self._produces: dict[tuple[Any, int], tuple[ProduceRequest, dict]] = {}
        super().__init__(env, network, broker_id, config, topic_configs, disk, trace)

    def start(self) -> None:
        super().start()
        self.checks.nodes[self.broker_id] = self.node

    def crash(self, reset_connections: bool = True) -> None:
        super().crash(reset_connections)
        self.checks.nodes[self.broker_id] = None
        self._produces.clear()

    def power_loss(self) -> None:
        self.checks.observer.power_lost(self.broker_id)
        super().power_loss()

    def _input(self, event: Input) -> None:
        node = self.node
        if node is None or self.paused:
            super()._input(event)
            return
        checks = self.checks
        stale = None
        told = None
        produce: tuple[Any, ProduceRequest, dict] | None = None
        if isinstance(event, MessageReceived):
            message = event.message
            if type(message) is ProduceRequest and message.acks == -1:
                produce = (event.src, message, log_ends(node, message))
            stale = stale_request_state(node, message)
            told = log_starts_told(node, event.src, message)
        effects = node.handle(event, self.now_ms())
        if produce is not None:
            src, request, ends = produce
            self._produces[(src, request.correlation_id)] = (request, appended_by(node, ends))
        checks.checked += 1
        now = self._now()
        if stale is not None:
            checks.stop(stale_request_changed(self.node, stale, effects), now)
        if told is not None:
            checks.stop(log_start_followed(self.broker_id, self.node, told), now)
        checks.stop(checks.observer.observe(checks.view, (self.broker_id,)), now)
        carry_out_effects(effects, self)

    def send(self, dst: Any, message: Any) -> None:
        if type(message) is ProduceResponse and self._produces:
            produce = self._produces.pop((dst, message.correlation_id), None)
            if produce is not None:
                self.checks.stop(self.checks.observer.produce_answered(self.checks.view, self.broker_id, produce[0],
                                                                       message, produce[1]), self._now())
        super().send(dst, message)
