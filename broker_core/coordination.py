"""Coordination-store operations (the subset of ZooKeeper the core uses) and a runner
that lets core code write a multi-step coordination sequence as a generator.

A task is a generator that yields operations and receives their replies::

    reply = yield GetData(path, watch=True)
    if reply.ok: ...

The runner turns each yielded operation into a ``CoordRequest`` effect and resumes the
generator when the runtime hands back ``CoordReplied``. ``Sleep`` pauses a task on a
timer. Everything stays synchronous and deterministic.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Generator

from broker_core.effects import CancelTimer, CoordRequest, SetTimer

# Reply errors, named as in ZooKeeper.
NO_NODE = "no_node"
NODE_EXISTS = "node_exists"
BAD_VERSION = "bad_version"
NOT_EMPTY = "not_empty"
SESSION_EXPIRED = "session_expired"
CONNECTION_LOSS = "connection_loss"
CHECK_FAILED = "check_failed"  # the check half of a multi-op failed

ANY_VERSION = -1

CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"  # written by the admin tool


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}/state"


def encode_data(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def decode_data(raw: bytes | None) -> Any:
    return None if raw is None else json.loads(raw)


@dataclass(frozen=True, slots=True)
class Create:
    path: str
    data: bytes
    ephemeral: bool = False
    make_parents: bool = False


@dataclass(frozen=True, slots=True)
class SetData:
    path: str
    data: bytes
    version: int = ANY_VERSION
    check_path: str | None = None  # a multi-op: also require check_path at check_version
    check_version: int = ANY_VERSION


@dataclass(frozen=True, slots=True)
class GetData:
    path: str
    watch: bool = False


@dataclass(frozen=True, slots=True)
class GetChildren:
    path: str
    watch: bool = False


@dataclass(frozen=True, slots=True)
class Exists:
    path: str
    watch: bool = False


@dataclass(frozen=True, slots=True)
class Delete:
    path: str
    version: int = ANY_VERSION


@dataclass(frozen=True, slots=True)
class Sleep:
    """Not sent anywhere: resumes the task after ``ms``."""
    ms: int


@dataclass(frozen=True, slots=True)
class Reply:
    ok: bool
    error: str | None = None
    data: bytes | None = None
    version: int = -1
    children: tuple[str, ...] = ()

    @property
    def value(self) -> Any:
        return decode_data(self.data)


Task = Generator[Any, Reply | None, None]


class TaskRunner:
    """Drives coordination tasks. ``emit`` receives the effects the tasks need."""

    def __init__(self, emit: Callable[[Any], None], now: Callable[[], int]):
        self._emit = emit
        self._now = now
        self._next_request_id = 1
        self._next_task_id = 1
        self._waiting_reply: dict[int, Task] = {}
        self._sleeping: dict[tuple, Task] = {}

    def start(self, task: Task) -> None:
        self._advance(task, None)

    def on_reply(self, request_id: int, reply: Reply) -> None:
        task = self._waiting_reply.pop(request_id, None)
        if task is not None:  # replies for cancelled tasks are ignored
            self._advance(task, reply)

    def on_timer(self, key: tuple) -> None:
        task = self._sleeping.pop(key, None)
        if task is not None:
            self._advance(task, None)

    def cancel_all(self) -> None:
        """Abandon every task (the session that their requests belonged to is gone)."""
        for task in list(self._waiting_reply.values()) + list(self._sleeping.values()):
            task.close()
        for key in sorted(self._sleeping, key=repr):
            self._emit(CancelTimer(key))
        self._waiting_reply.clear()
        self._sleeping.clear()

    @property
    def in_flight(self) -> int:
        return len(self._waiting_reply) + len(self._sleeping)

    def _advance(self, task: Task, value: Reply | None) -> None:
        try:
            op = task.send(value)
        except StopIteration:
            return
        if isinstance(op, Sleep):
            key = ("task", self._next_task_id)
            self._next_task_id += 1
            self._sleeping[key] = task
            self._emit(SetTimer(key, self._now() + op.ms))
            return
        request_id = self._next_request_id
        self._next_request_id += 1
        self._waiting_reply[request_id] = task
        self._emit(CoordRequest(request_id, op))
