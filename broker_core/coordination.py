"""Coordination-store operations (the subset of ZooKeeper the core uses) and a runner
that lets core code write a multi-step coordination sequence as a generator.

A task is a generator that yields operations and receives their replies::

    reply = yield GetData(path, watch=True)
    if reply.ok: ...

The runner turns each yielded operation into a ``CoordRequest`` effect and resumes the
generator when the runtime hands back ``CoordReplied``. ``Sleep`` pauses a task on a
timer. Everything stays synchronous and deterministic.

The service is as unkind as ZooKeeper: a request whose connection drops answers
``CONNECTION_LOSS`` and may or may not have been applied. The runner sends it again
(the runtime holds it until the client has reconnected), as Kafka's ZooKeeperClient
does (2.7.0 KafkaZkClient.retryRequestsUntilConnected). A resent create may then
answer NODE_EXISTS and a resent compare-and-set BAD_VERSION: ``create_checked`` and
``conditional_update`` tell one's own earlier write from a real conflict.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Generator

from broker_core.effects import CancelTimer, CoordRequest, Effect, SetTimer, Trace

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
    sequential: bool = False  # ZooKeeper's PERSISTENT_SEQUENTIAL: the path is a prefix, a number follows


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
    ephemeral_owner: int = 0  # ZooKeeper's Stat.ephemeralOwner: the owning session, 0 if persistent

    @property
    def value(self) -> Any:
        return decode_data(self.data)


Task = Generator[Any, Reply | None, None]


def conditional_update(op: SetData):
    """A compare-and-set that survives its own resend: on BAD_VERSION read the node, and
    data identical to what this write carried means the first attempt was applied and
    only its answer was lost. Kafka: ReplicationUtils.updateLeaderAndIsr with
    checkLeaderAndIsrZkData (0.8.2.2, 2.7.0) via conditionalUpdatePath. Use as
    ``reply = yield from conditional_update(SetData(...))``; a real conflict returns the
    BAD_VERSION reply."""
    reply = yield op
    if reply.error != BAD_VERSION:
        return reply
    written = yield GetData(op.path)
    if written.ok and written.data == op.data:
        return Reply(True, data=written.data, version=written.version)
    return reply


def create_checked(op: Create, session_id: int | None):
    """A create that survives its own resend: on NODE_EXISTS read the node; an ephemeral
    node owned by this session (2.7.0 KafkaZkClient.CheckedEphemeral.getAfterNodeExists)
    or a persistent node holding exactly this data (0.8.2.2 ZkUtils
    createEphemeralPathExpectConflict compares the data) is this create's own. A node
    that vanished meanwhile is created again. Another owner's node returns NODE_EXISTS
    with that node's data and ``ephemeral_owner``."""
    while True:
        reply = yield op
        if reply.error != NODE_EXISTS:
            return reply
        written = yield GetData(op.path)
        if written.error == NO_NODE:
            continue
        if not written.ok:
            return written
        if (written.ephemeral_owner == session_id) if op.ephemeral else (written.data == op.data):
            return Reply(True, data=written.data, version=written.version, ephemeral_owner=written.ephemeral_owner)
        return Reply(False, NODE_EXISTS, data=written.data, version=written.version,
                     ephemeral_owner=written.ephemeral_owner)


class TaskRunner:
    """Drives coordination tasks. ``emit`` receives the effects the tasks need."""

    def __init__(self, emit: Callable[[Effect], None], now: Callable[[], int]):
        self._emit = emit
        self._now = now
        self._next_request_id = 1
        self._next_task_id = 1
        self._waiting_reply: dict[int, Task] = {}
        self._ops: dict[int, Any] = {}
        self._sleeping: dict[tuple, Task] = {}

    def start(self, task: Task) -> None:
        self._advance(task, None)

    def on_reply(self, request_id: int, reply: Reply) -> None:
        task = self._waiting_reply.pop(request_id, None)
        op = self._ops.pop(request_id, None)
        if task is None:  # replies for cancelled tasks are ignored
            return
        if reply.error == CONNECTION_LOSS:
            # Kafka retries until connected; the op may have been applied already.
            self._emit(Trace("coordination_request_retried", {
                "op": type(op).__name__, "path": op.path, "error": CONNECTION_LOSS}))
            self._send(task, op)
            return
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
        self._ops.clear()
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
        self._send(task, op)

    def _send(self, task: Task, op: Any) -> None:
        request_id = self._next_request_id
        self._next_request_id += 1
        self._waiting_reply[request_id] = task
        self._ops[request_id] = op
        self._emit(CoordRequest(request_id, op))
