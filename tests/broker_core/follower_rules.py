"""Rules the replication machine (tests/broker_core/replication_machine.py) adds when
asked (``run_replication_machine(..., follower_rules=True)``), for issue 23's mutants
whose rule the base machine's rules never reach:

- ``idle``: time passes with nothing produced. The base machine's ``pass_time`` always
  produces, so a follower that stopped fetching (a cut link) was never at the leader's
  log end for longer than replica.lag.time.max.ms: 2.7.0 Partition.isFollowerOutOfSync
  keeps such a follower (KAFKA-7152), 0.8.2.2's "stuck" rule (getOutOfSyncReplicas)
  drops it (mutant ``idle-follower-dropped``; CaughtUpFollowerStaysInIsr).
- ``burst``: a producer sends a run of one-record acks=1 batches to the leader at once,
  so that a follower that is down or cut off comes back many batches behind: with a
  small replica.fetch.max.bytes (a search's override) it catches up over several
  fetches, each answered with a high watermark past its log end (2.7.0
  ReplicaFetcherThread.processPartitionData caps it; mutant ``follower-hw-uncapped``),
  and a leader with retention moves its log start meanwhile (mutant
  ``log-start-not-applied``; LogStartFollowsLeader).

A separate class, so that the base machine's derandomized searches (tests/test_mutants.py)
draw exactly what they drew before: adding a rule to a hypothesis machine changes every
example it draws."""
from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import rule

from tests.broker_core.replication_machine import ReplicationMachine


class FollowerRulesMachine(ReplicationMachine):
    @rule(ms=st.sampled_from((15_000, 40_000)))
    def idle(self, ms: int) -> None:
        """Nobody produces for ``ms`` (the lag time is 30 s by default, 10 s on kafka-0.8)."""
        self.cluster.run_for(ms)

    @rule(count=st.sampled_from((10, 40)))
    def burst(self, count: int) -> None:
        """``count`` acks=1 records, one batch each, sent to the leader at once."""
        for _ in range(count):
            self.produce(1, 1, "leader")
        self.cluster.run_for(10)
