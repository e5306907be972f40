"""tests/harness.py's Cluster with the replication invariants checked after every input
a core handles, as ``isrlab run --check-invariants`` checks them in the simulation
(sim/invariant_checks.py): for hypothesis machines and the invariants' own tests."""
from __future__ import annotations

from typing import Any

from broker_core.effects import Send
from broker_core.inputs import MessageReceived
from broker_core.follower_invariants import log_start_followed, log_starts_told
from broker_core.invariants import ClusterView, InvariantObserver, Violation, appended_by, log_ends
from broker_core.messages import ProduceRequest, ProduceResponse
from broker_core.stale_epochs import stale_request_changed, stale_request_state
from tests.harness import Cluster


class ObservedCluster(Cluster):
    """Every violation found is kept in ``violations`` (in order); ``stale_checked``
    counts the requests the stale-epoch probe found stale, so a test can tell its
    check did run."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.view = ClusterView(self.nodes, self.store)
        self.observer = InvariantObserver()
        self.violations: list[Violation] = []
        self.stale_checked: list[str] = []
        self._produces: dict[int, tuple[int, ProduceRequest, dict]] = {}

    def named(self, invariant: str) -> list[Violation]:
        return [v for v in self.violations if v.invariant == invariant]

    def _deliver(self, broker: int, event) -> None:
        node = self.nodes.get(broker)
        if node is None:
            return
        stale = told = None
        if type(event) is MessageReceived:
            message = event.message
            stale = stale_request_state(node, message)
            told = log_starts_told(node, event.src, message)
            if stale is not None:
                self.stale_checked.append(stale.request)
            if type(message) is ProduceRequest and message.acks == -1:
                ends = log_ends(node, message)
        effects = node.handle(event, self.now)
        if type(event) is MessageReceived and type(event.message) is ProduceRequest and event.message.acks == -1:
            self._produces[event.message.correlation_id] = (broker, event.message, appended_by(node, ends))
        if stale is not None:
            self.violations += stale_request_changed(self.nodes.get(broker), stale, effects)
        if told is not None:
            self.violations += log_start_followed(broker, self.nodes.get(broker), told)
        self.violations += self.observer.observe(self.view, (broker,))
        for effect in effects:
            if type(effect) is Send and type(effect.message) is ProduceResponse:
                self._answered(effect.message)
        self._apply(broker, effects)

    def _answered(self, response: ProduceResponse) -> None:
        produce = self._produces.pop(response.correlation_id, None)
        if produce is not None:
            broker, request, appended = produce
            self.violations += self.observer.produce_answered(self.view, broker, request, response, appended)

    def healed(self) -> list[Violation]:
        found = self.observer.healed(self.view)
        self.violations += found
        return found


def observed_cluster(**kwargs: Any) -> ObservedCluster:
    """A started ObservedCluster whose partition has a leader and a full ISR."""
    cluster = ObservedCluster(**kwargs)
    cluster.start_all()
    assert cluster.wait_for(cluster.settled, 5000), "the cluster never elected a leader with a full ISR"
    return cluster
