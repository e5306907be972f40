"""A topic's throttled replica list (``leader.replication.throttled.replicas``,
``follower.replication.throttled.replicas``) as Kafka 2.7.0 reads it: its own module so
that the config's validation and the throttles (quota_replication.py) both use it
without importing each other."""
from __future__ import annotations

import re
from typing import Union

from broker_core.errors import ConfigError

_INT_MAX = 2**31 - 1
_REPLICA = re.compile(r"([0-9]+):([0-9]+)")


class AllReplicas:
    """The "*" of a throttled replica list (ReplicationQuotaManager's ``AllReplicas``)."""
    __slots__ = ()

    def __repr__(self) -> str:
        return "*"


ALL_REPLICAS = AllReplicas()
ThrottledPartitions = Union[AllReplicas, frozenset[int]]


def parse_throttled_replicas(key: str, value: str, broker_id: int) -> ThrottledPartitions:
    """The partitions of a topic that ``key`` throttles on ``broker_id``: ALL_REPLICAS for
    "*", else those listed as "<partition>:<broker_id>". Refused with a ConfigError naming
    the key unless it is "*" or a list of <partition>:<broker> (2.7.0
    ThrottledReplicaListValidator; entries may carry spaces, as a LIST config's do)."""
    text = value.strip()
    if text == "*":
        return ALL_REPLICAS
    partitions: set[int] = set()
    for entry in text.split(",") if text else ():
        match = _REPLICA.fullmatch(entry.strip())
        if match is None or int(match.group(1)) > _INT_MAX or int(match.group(2)) > _INT_MAX:
            raise ConfigError(key, f"must be the literal '*' or a list of replicas in the format "
                                   f"[partitionId]:[brokerId],[partitionId]:[brokerId],..., not {value!r}")
        if int(match.group(2)) == broker_id:
            partitions.add(int(match.group(1)))
    return frozenset(partitions)


