"""The group machine of tests/properties/test_group_machine.py with an administrator
(issue 24): besides the consumers' joins, leaves, commits, crashes and pauses, DeleteGroups
and OffsetDelete arrive at any time, and the consumers also commit a partition of a
topic they do not subscribe to ("z-0"). The consumers' JoinGroup metadata is the
consumer protocol's, so the coordinator knows their subscriptions.

A subclass, so that the parent machines' searches (sized in their own file) are not
changed. On top of the parent's invariants (OffsetFetch gives exactly the model's
offsets, no partition owned twice in a generation, ...), the model follows 2.7.0's
GroupCoordinator.handleDeleteGroups / handleDeleteOffsets: a group is deleted only
when Empty (NON_EMPTY_GROUP otherwise) and its offsets are gone; an OffsetDelete answered
NONE removes that offset and no other; in a Stable group the subscribed topics' offsets
are GROUP_SUBSCRIBED_TO_TOPIC and "z-0" is deleted. A group that leaves the cache (deleted,
or Empty and out of offsets) starts again at generation 1 when a consumer comes back, so
the generation bookkeeping starts again with it."""
from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st
from hypothesis.stateful import rule

from broker_core.consumer_protocol import encode_subscription
from broker_core.errors import ErrorCode
from broker_core.group_messages import (
    DeleteGroupsRequest, JoinGroupProtocol, JoinGroupRequest, OffsetDeleteRequest, OffsetDeleteTopic)
from tests.properties.depth import machine_settings
from tests.properties.test_group_machine import NAMES, PARTITIONS, TOPICS, Consumer, GroupMachine

UNSUBSCRIBED = "z-0"


class AdminMachine(GroupMachine):
    def join_request(self, c: Consumer) -> JoinGroupRequest:
        request = super().join_request(c)
        return replace(request, protocols=(JoinGroupProtocol("roundrobin", encode_subscription(sorted(TOPICS))),))

    def _forget_group_if_gone(self, was_there: bool) -> None:
        """The group left the cache: a new one of that id begins at generation 1."""
        if was_there and "g" not in self.coord.groups:
            self.last_generation = 0
            self.owned.clear()
            self.leader_assignments.clear()
            self.synced.clear()
            for c in self.consumers.values():
                c.seen_generations.clear()

    @rule()
    def everyone_leaves(self) -> None:
        """All live consumers leave (an application shutting down): the group is Empty
        with its offsets, what DeleteGroups and OffsetDelete take."""
        for name in NAMES:
            self.leave(name)

    @rule(name=st.sampled_from(NAMES), offset=st.integers(0, 100))
    def commit_unsubscribed(self, name: str, offset: int) -> None:
        self.commit(name, UNSUBSCRIBED, offset)

    @rule()
    def delete_group(self) -> None:
        group = self.coord.groups.get("g")
        state = None if group is None else group.state.value
        (_, response), = self.coord.handle("admin", DeleteGroupsRequest(0, ("g",)), self.now)
        error = response.results[0].error_code
        expected = {None: ErrorCode.GROUP_ID_NOT_FOUND, "Empty": ErrorCode.NONE}.get(state, ErrorCode.NON_EMPTY_GROUP)
        assert error is expected, (state, error)
        if error is ErrorCode.NONE:
            self.committed.clear()
        self._forget_group_if_gone(group is not None)

    @rule(partition=st.sampled_from([*PARTITIONS, UNSUBSCRIBED]))
    def delete_offset(self, partition: str) -> None:
        group = self.coord.groups.get("g")
        state = None if group is None else group.state.value
        topic, index = partition.split("-")
        (_, response), = self.coord.handle(
            "admin", OffsetDeleteRequest(0, "g", (OffsetDeleteTopic(topic, (int(index),)),)), self.now)
        if state is None:
            assert response.error_code is ErrorCode.GROUP_ID_NOT_FOUND
            return
        assert response.error_code is ErrorCode.NONE
        (error,) = [p.error_code for t in response.topics for p in t.partitions]
        if state == "Empty" or (state == "Stable" and partition == UNSUBSCRIBED):
            assert error is ErrorCode.NONE
        elif state == "Stable":
            assert error is ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
        if error is ErrorCode.NONE:
            self.committed.pop(partition, None)
        self._forget_group_if_gone(True)


TestAdminMachine = AdminMachine.TestCase
TestAdminMachine.settings = machine_settings(100, 60)
