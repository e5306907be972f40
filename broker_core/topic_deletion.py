"""Deleting topics: the DeleteTopics API (the controller marks the topic under
/admin/delete_topics) and the controller's TopicDeletionManager, which deletes it.

2.7.0's sequence (KafkaApis.handleDeleteTopicsRequest, AdminManager.deleteTopics,
AdminZkClient.deleteTopic; KafkaController.processTopicDeletion and
TopicDeletionManager):

1. The request marks ``/admin/delete_topics/<t>``; the controller's watch fires.
2. The controller queues the topic. Its partitions leave the partition state machine
   (OfflinePartition -> NonExistentPartition) and every broker is sent UpdateMetadata
   without them (Kafka marks them LeaderDuringDelete, which the metadata cache drops):
   from then on Metadata does not list the topic and produces to it fail.
3. Each live replica gets StopReplica with delete (ReplicaDeletionStarted); its broker
   stops the replica, deletes its log and answers. A replica on an offline broker makes
   the topic ineligible (ReplicaDeletionIneligible): deletion waits until that broker
   is back, then resumes (resumeDeletionForTopics from onBrokerStartup). A broker that
   dies while its StopReplica is in flight is the same (failReplicaDeletion).
4. When every replica is ReplicaDeletionSuccessful, completeDeleteTopic removes
   ``/brokers/topics/<t>`` (with its partition states), ``/config/topics/<t>`` and
   ``/admin/delete_topics/<t>``, and forgets the topic.

With delete.topic.enable=false the request answers TOPIC_DELETION_DISABLED and the
controller removes any marks it finds. The request is answered through the topic
purgatory (broker_core.topic_admin) once this broker's metadata no longer lists the
topic, as DelayedDeleteTopics does: that is step 2, not step 4.

isrlab sends one StopReplica with delete per broker (2.7 first sends one without delete
through the OfflineReplica transition, which stops the fetchers, then the deleting one);
its removal of the nodes is not fenced by the controller epoch (2.7 checks it in the
same multi-op).
"""
from __future__ import annotations

from typing import Hashable, Mapping

from broker_core import coordination as coord
from broker_core.errors import ErrorCode
from broker_core.messages import (
    EPOCH_DURING_DELETE, DeleteTopicsRequest, DeleteTopicsResponse, NO_LEADER_EPOCH, StopReplicaRequest, StopReplicaResponse,
    TopicCreationResult)
from broker_core.topic_admin import TOPIC_CONFIG_PATH, TopicCreator
from broker_core.types import TopicPartition

DELETE_TOPICS_PATH = "/admin/delete_topics"

Replica = tuple[TopicPartition, int]


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{topic}"


# -- the request ---------------------------------------------------------------------------
def handle_delete_topics(creator: TopicCreator, controller, known_topics: set[str], src: Hashable,
                         request: DeleteTopicsRequest) -> None:
    """KafkaApis.handleDeleteTopicsRequest (2.7.0): NOT_CONTROLLER off the controller;
    TOPIC_DELETION_DISABLED with delete.topic.enable=false (the binding answers it
    INVALID_REQUEST below version 3); UNKNOWN_TOPIC_OR_PARTITION for a topic this
    broker's metadata does not list (a topic being deleted no longer is); the rest are
    marked (AdminManager.deleteTopics), and the controller reads the marks even
    without its watch (see BrokerConfig.controller_watches_deletions)."""
    is_controller = controller.active
    names = tuple(dict.fromkeys(request.topics))
    error = (ErrorCode.NOT_CONTROLLER if not is_controller
             else ErrorCode.TOPIC_DELETION_DISABLED if not creator.ctx.config.delete_topic_enable else None)
    if error is not None:
        results = {name: TopicCreationResult(error) for name in names}
        creator.ctx.send(src, DeleteTopicsResponse(request.correlation_id, dict(sorted(results.items()))))
        return
    pending = creator.open_pending(src, request.correlation_id, names, request.timeout_ms, DeleteTopicsResponse)
    todo = []
    for name in names:
        if name in known_topics:
            todo.append(name)
        else:
            pending.results[name] = TopicCreationResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    creator.ctx.tasks.start(_mark_all(creator, controller, pending, todo))


def _mark_all(creator: TopicCreator, controller, pending, topics: list[str]):
    for topic in topics:
        error, message = yield from mark_topic(topic)
        pending.results[topic] = TopicCreationResult(error, message)
        if error is ErrorCode.NONE:
            pending.gone.add(topic)
            creator.ctx.trace("topic_deletion_requested", topic=topic)
    if pending.gone:
        controller.enqueue("topic_deletion")
    creator.written_all(pending)


def mark_topic(topic: str):
    """AdminZkClient.deleteTopic (2.7.0): a topic already marked is fine (the request
    still waits for it to go); a topic without an assignment node is unknown."""
    exists = yield coord.Exists(coord.topic_path(topic))
    if not exists.ok:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic `{topic}` to delete does not exist"
    made = yield coord.Create(delete_topic_path(topic), b"", make_parents=True)
    if made.ok or made.error == coord.NODE_EXISTS:
        return ErrorCode.NONE, None
    return ErrorCode.UNKNOWN_SERVER_ERROR, f"coordination store: {made.error}"


# -- the controller's side -----------------------------------------------------------------
class TopicDeletionManager:
    """The controller's books of topics queued for deletion and their replicas'
    deletion states; its events run in the controller's queue."""

    def __init__(self, controller) -> None:
        self.controller = controller
        self.reset()

    def reset(self) -> None:
        self.queued: set[str] = set()
        self.started: set[str] = set()  # their partitions have left the state machine
        self.ineligible: set[str] = set()
        self.deleting: dict[str, set[Replica]] = {}  # ReplicaDeletionStarted
        self.deleted: dict[str, set[Replica]] = {}  # ReplicaDeletionSuccessful

    def is_queued(self, topic: str) -> bool:
        return topic in self.queued

    def replicas(self, topic: str) -> set[Replica]:
        assignments = self.controller.assignments
        return {(tp, b) for tp in assignments if tp.topic == topic for b in assignments[tp]}

    # -- events ----------------------------------------------------------------------------
    def read_marks(self):
        """The watched children of /admin/delete_topics, with the marks of unknown
        topics (and every mark, with deletion disabled) removed; the topics to queue."""
        controller = self.controller
        reply = yield coord.GetChildren(DELETE_TOPICS_PATH, watch=True)
        marked = sorted(reply.children) if reply.ok else []
        topics = {tp.topic for tp in controller.assignments}
        dropped = [t for t in marked if t not in topics or not controller.ctx.config.delete_topic_enable]
        for topic in dropped:
            yield coord.Delete(delete_topic_path(topic))
        if dropped:
            controller.ctx.trace("topic_deletion_ignored", topics=dropped,
                                 reason="unknown topic" if controller.ctx.config.delete_topic_enable
                                 else "delete.topic.enable is false")
        return [t for t in marked if t not in dropped]

    def on_topic_deletion(self):
        """KafkaController.processTopicDeletion: queue the marked topics, then resume."""
        for topic in (yield from self.read_marks()):
            self.queued.add(topic)
        yield from self.resume()

    def leave_state_machine(self, topics) -> None:
        """OfflinePartition -> NonExistentPartition: the partitions' states are dropped
        (their nodes stay until the topic's are removed), so LeaderAndIsr and
        UpdateMetadata no longer name them and no election touches them."""
        controller = self.controller
        for topic in sorted(set(topics) - self.started):
            self.started.add(topic)
            for tp in [tp for tp in controller.states if tp.topic == topic]:
                del controller.states[tp]
            controller.ctx.trace("topic_deletion_started", topic=topic,
                                 partitions=[str(tp) for tp in sorted(controller.assignments) if tp.topic == topic])

    def resume(self):
        """TopicDeletionManager.resumeDeletions: complete the topics whose replicas are
        all deleted; start (or retry) the eligible ones."""
        eligible = []
        for topic in sorted(self.queued):
            replicas = self.replicas(topic)
            if replicas <= self.deleted.get(topic, set()):
                yield from self.complete(topic)
            elif topic not in self.ineligible and not self.deleting.get(topic):
                eligible.append(topic)
        if eligible:
            self.start(eligible)

    def start(self, topics: list[str]) -> None:
        """onTopicDeletion -> onPartitionDeletion: UpdateMetadata without the topics,
        StopReplica with delete to every live replica not yet deleted; a replica on an
        offline broker makes its topic ineligible."""
        controller = self.controller
        self.leave_state_machine(topics)
        controller._send_update_metadata()
        by_broker: dict[int, list[TopicPartition]] = {}
        for topic in topics:
            todo = self.replicas(topic) - self.deleted.get(topic, set())
            offline = sorted((tp, b) for tp, b in todo if b not in controller.live)
            if offline:
                self.ineligible.add(topic)
                controller.ctx.trace("topic_deletion_ineligible", topic=topic, reason="offline replicas",
                                     replicas=[f"{tp}@{b}" for tp, b in offline])
            for tp, broker in sorted(todo):
                if broker in controller.live:
                    self.deleting.setdefault(topic, set()).add((tp, broker))
                    by_broker.setdefault(broker, []).append(tp)
        epoch = EPOCH_DURING_DELETE if controller.ctx.config.stop_replica_leader_epoch else NO_LEADER_EPOCH
        for broker, tps in sorted(by_broker.items()):
            partitions = {tp: epoch for tp in sorted(tps)}
            controller._enqueue_request(broker, lambda cid, p=partitions: StopReplicaRequest(
                cid, controller.ctx.broker_id, controller.epoch, True, p))

    def replica_deletion_done(self, broker: int, errors: Mapping[TopicPartition, ErrorCode]):
        """The broker answered a deleting StopReplica (completeReplicaDeletion /
        failReplicaDeletion): a replica without error is deleted; one with an error is
        tried again when deletion resumes."""
        for tp, error in sorted(errors.items()):
            if tp.topic not in self.queued:
                continue
            self.deleting.get(tp.topic, set()).discard((tp, broker))
            if error is ErrorCode.NONE:
                self.deleted.setdefault(tp.topic, set()).add((tp, broker))
        yield from self.resume()

    def brokers_failed(self, dead) -> None:
        """failReplicaDeletion for the replicas of dead brokers still being deleted:
        their topics wait for the brokers."""
        for topic in sorted(self.deleting):
            lost = {(tp, b) for tp, b in self.deleting[topic] if b in dead}
            if lost:
                self.deleting[topic] -= lost
                self.ineligible.add(topic)
                self.controller.ctx.trace("topic_deletion_ineligible", topic=topic, reason="broker failed",
                                          replicas=[f"{tp}@{b}" for tp, b in sorted(lost)])

    def brokers_started(self, born) -> bool:
        """onBrokerStartup -> resumeDeletionForTopics: topics with a replica on a started
        broker become eligible again. True when there is something to resume."""
        revived = sorted(t for t in self.ineligible if any(b in born for _, b in self.replicas(t)))
        self.ineligible -= set(revived)
        return bool(revived)

    def complete(self, topic: str):
        """completeDeleteTopic: remove the topic's nodes, then forget it."""
        controller = self.controller
        yield from delete_tree(coord.topic_path(topic))
        yield coord.Delete(f"{TOPIC_CONFIG_PATH}/{topic}")
        yield coord.Delete(delete_topic_path(topic))
        for tp in [tp for tp in controller.assignments if tp.topic == topic]:
            del controller.assignments[tp]
            controller.states.pop(tp, None)
        for books in (self.queued, self.started, self.ineligible):
            books.discard(topic)
        self.deleting.pop(topic, None)
        self.deleted.pop(topic, None)
        controller.ctx.trace("topic_deleted", topic=topic)


def delete_tree(path: str):
    """Delete a node and everything under it, children first (KafkaZkClient
    .deleteRecursive)."""
    children = yield coord.GetChildren(path)
    for child in sorted(children.children if children.ok else ()):
        yield from delete_tree(f"{path}/{child}")
    yield coord.Delete(path)


def is_deleting_stop_replica(request) -> bool:
    return isinstance(request, StopReplicaRequest) and request.delete_partitions


def deletion_errors(request: StopReplicaRequest, response: StopReplicaResponse) -> dict[TopicPartition, ErrorCode]:
    """Each partition's outcome; a request-level error fails them all."""
    if response.error is not ErrorCode.NONE:
        return {tp: response.error for tp in request.partitions}
    return {tp: response.partitions.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR) for tp in request.partitions}
