"""A test's end of the binding: ask one op and wait for its reply, or wait for an input."""
from __future__ import annotations

import time

from broker_core.inputs import CoordReplied, CoordSessionStarted
from real_io.coordination import ZooKeeperCoordination


class Driver:
    def __init__(self, hosts: str, session_timeout_ms: int = 2000):
        self.binding = ZooKeeperCoordination(hosts, session_timeout_ms)
        self.seen: list = []  # inputs that arrived while waiting for something else
        self._next_request = 1
        self.binding.start()
        self.session_id = self.wait_for(lambda e: isinstance(e, CoordSessionStarted)).session_id

    def send(self, op) -> int:
        request_id = self._next_request
        self._next_request += 1
        self.binding.request(request_id, op)
        return request_id

    def ask(self, op):
        request_id = self.send(op)
        return self.reply_to(request_id)

    def reply_to(self, request_id: int):
        return self.wait_for(lambda e: isinstance(e, CoordReplied) and e.request_id == request_id).reply

    def wait_for(self, match, timeout_s: float = 10.0):
        for i, event in enumerate(self.seen):
            if match(event):
                return self.seen.pop(i)
        deadline = time.monotonic() + timeout_s
        while True:
            event = self.binding.poll(max(deadline - time.monotonic(), 0.001))
            if event is None:
                raise AssertionError(f"nothing matching within {timeout_s}s; seen: {self.seen}")
            if match(event):
                return event
            self.seen.append(event)

    def close(self) -> None:
        self.binding.close()
