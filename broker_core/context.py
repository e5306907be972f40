"""The per-node context the core's components share while handling one input."""
from __future__ import annotations

from typing import Any, Hashable

from broker_core.config import BrokerConfig
from broker_core.coordination import TaskRunner
from broker_core.effects import CancelTimer, Effect, Send, SetTimer, Trace


class NodeContext:
    def __init__(self, broker_id: int, config: BrokerConfig):
        self.broker_id = broker_id
        self.config = config
        self.now_ms = 0
        self.out: list[Effect] = []
        self.tasks = TaskRunner(self.emit, lambda: self.now_ms)
        self._correlation_id = 0
        self.replay_requested = False  # held requests may proceed once this input is done

    def request_replay(self) -> None:
        self.replay_requested = True

    def emit(self, effect: Effect) -> None:
        self.out.append(effect)

    def send(self, dst: Hashable, message: Any) -> None:
        self.out.append(Send(dst, message))

    def trace(self, type_: str, **fields: Any) -> None:
        self.out.append(Trace(type_, fields))

    def set_timer(self, key: tuple, delay_ms: int) -> None:
        self.out.append(SetTimer(key, self.now_ms + max(delay_ms, 0)))

    def cancel_timer(self, key: tuple) -> None:
        self.out.append(CancelTimer(key))

    @property
    def last_correlation_id(self) -> int:
        """The id of the last request this node sent (0: none); BrokerNode.last_correlation_id."""
        return self._correlation_id

    def next_correlation_id(self) -> int:
        self._correlation_id += 1
        return self._correlation_id
