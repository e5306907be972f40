"""Client quotas against a brute-force rate model (issue 23), over a real core broker on
the in-test router (tests/harness.py, no simpy), quota nodes changed through the
coordination store as ``kafka-configs.sh`` changes them.

Rules send produces and consumer fetches of random sizes from several (user, client-id)
connections at random times, and set or remove producer_byte_rate / consumer_byte_rate
on any of the eight entity levels while traffic runs. The model keeps every value
recorded against each sensor and computes each throttle from scratch with the
brute-force ``Rate`` of tests/broker_core/test_quota_properties.py (``model_throttle``);
which sensor and which quota a request is held to, it picks by the precedence below.

The rules checked are Kafka 2.7.0's core/src/main/scala/kafka/server/ClientQuotaManager.scala:
``DefaultQuotaCallback.quotaMetricTags`` (while quotas were only ever set at one kind of
level the tags are fixed by it; once several kinds were used, the most specific entity
with a quota of the eight, /config/users/<user>/clients/<client-id>,
.../users/<user>/clients/<default>, /config/users/<user>, .../users/<default>/clients/
<client-id>, .../users/<default>/clients/<default>, /config/users/<default>,
/config/clients/<client-id>, /config/clients/<default>) and ``quotaLimit``,
``updateQuotaMetricConfigs`` (a change keeps the sensors' samples, and a sensor whose
tags resolve to no quota keeps its old one), ``maybeRecordAndGetThrottleTimeMs`` and
``throttle`` (KIP-219: the answer carries the throttle time and the connection is muted
for it); core/src/main/scala/kafka/server/KafkaApis.scala ``handleFetchRequest`` (a
throttled fetch is answered empty and its bytes taken back). 0.8.2.2 has no quotas;
3.0.0 keeps these rules.

Invariants: every answer's throttle time is the model's, and the quota it was held to
the precedence's; a throttled connection is muted until the throttle has passed; the
runtime here honours the mute as the bindings do (a muted connection's next request is
not read before the mute ends), and the core's ``throttle_waited`` shows no request of
a muted connection handled before its throttle time had passed.
"""
from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from broker_core.errors import ErrorCode
from broker_core.inputs import MessageReceived
from broker_core.messages import CONSUMER_REPLICA_ID, FetchPartition, FetchRequest, ProduceRequest
from broker_core.quota_config import change_client_quota
from broker_core.records import Record
from broker_core.types import TopicPartition
from tests.broker_core.test_quota_properties import model_throttle
from tests.harness import Cluster
from tests.properties.depth import machine_settings

TP = TopicPartition("t", 0)
SAMPLES, WINDOW_MS = 4, 1000
USERS, CLIENTS = ["u1", "u2"], ["c1", "c2"]  # two of each: sensors shared or not
D = "<default>"
KEYS = {"produce": "producer_byte_rate", "fetch": "consumer_byte_rate"}
UNLIMITED = float(2**63 - 1)  # Quota.upperBound(Long.MaxValue)
# The eight levels, most specific first: (user part, client part), "U"/"C" the
# request's own user / client-id, D the default, None the part left out.
LEVELS = [("U", "C"), ("U", D), ("U", None), (D, "C"), (D, D), (D, None), (None, "C"), (None, D)]


def connection(user: str, client: str) -> str:
    return f"conn-{user}-{client}"


class QuotaCluster(Cluster):
    """The router with connections other than CLIENT: their answers are kept in
    ``responses`` and a muted connection's next request waits until the mute ends, as
    sim/broker_host.py and real_io's server read nothing from a muted channel."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.muted_until: dict[str, int] = {}

    def send(self, broker, request, src="client"):
        at = max(self.now + self.latency, self.muted_until.get(src, 0))
        self._push(at, broker, MessageReceived(src, request))
        return request.correlation_id

    def _dispatch(self, item) -> None:
        if isinstance(item.target, str) and item.target.startswith("conn-"):
            self.responses[item.event.message.correlation_id] = item.event.message
            return
        super()._dispatch(item)


class QuotaModel:
    """Which levels were ever used, the quotas in force, and every sensor's values."""

    def __init__(self) -> None:
        self.used: set[str] = set()  # "client", "user", "user-client" (2.7's QuotaTypes bits)
        self.quotas: dict[tuple, dict[str, int]] = {}  # (user part, client part) -> key -> bound
        self.sensors: dict[tuple, list] = {}  # (type, tags) -> [events, bound]

    def configure(self, entity: tuple, key: str, bound: int | None) -> None:
        user, client = entity
        self.used.add("user-client" if user is not None and client is not None else "user" if user else "client")
        props = self.quotas.setdefault(entity, {})
        if bound is None:
            props.pop(key, None)
        else:
            props[key] = bound
        for (kind, tags), sensor in self.sensors.items():  # updateQuotaMetricConfigs
            limit = self.limit(KEYS[kind], tags)
            if limit is not None:
                sensor[1] = limit

    def has(self, entity: tuple, key: str) -> bool:
        return key in self.quotas.get(entity, {})

    def tags(self, key: str, user: str, client: str) -> tuple[str, str]:
        if self.used <= {"client"}:
            return "", client
        if self.used == {"user"}:
            return user, ""
        if self.used == {"user-client"}:
            return user, client
        for user_part, client_part in LEVELS:
            entity = (user if user_part == "U" else user_part, client if client_part == "C" else client_part)
            if self.has(entity, key):
                return (user if user_part else "", client if client_part else "")
        return "", client

    def limit(self, key: str, tags: tuple[str, str]) -> float | None:
        user, client = tags
        if user and client:
            candidates = [(user, client), (user, D), (D, client), (D, D)]
        elif user:
            candidates = [(user, None), (D, None)]
        else:
            candidates = [(None, client), (None, D)]
        for entity in candidates:
            if self.has(entity, key):
                return self.quotas[entity][key]
        return UNLIMITED if not user else None  # a client-id sensor: the static default

    def record(self, kind: str, user: str, client: str, now: int, value: int, unrecord: bool) -> tuple[int, float]:
        """The throttle time and quota of a request: its value recorded on its sensor."""
        if not self.used:
            return 0, UNLIMITED  # quotasEnabled is false: nothing recorded
        tags = self.tags(KEYS[kind], user, client)
        sensor = self.sensors.get((kind, tags))
        if sensor is None:
            limit = self.limit(KEYS[kind], tags)
            sensor = self.sensors[(kind, tags)] = [[], UNLIMITED if limit is None else limit]
        sensor[0].append((now, value))
        throttle = model_throttle(sensor[0], SAMPLES, WINDOW_MS, sensor[1])
        if throttle > 0 and unrecord:
            sensor[0].append((now, -value))
        return throttle, sensor[1]


# every entity a quota node can name: (user, client-id), (user, None), (None, client-id)
entities = st.sampled_from([(u, c) for u in [None, D, *USERS] for c in [None, D, *CLIENTS]
                            if (u, c) != (None, None)])


class QuotaMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.cluster = QuotaCluster(brokers=(1,), replication_factor=1,
                                    config={"quota.window.num": SAMPLES, "quota.window.size.seconds": 1})
        self.cluster.start_all()
        assert self.cluster.wait_for(self.cluster.settled, 5000)
        self.model = QuotaModel()
        self.mutes: list[tuple[int, str, int]] = []  # (answered at, connection, throttle)

    def request(self, kind: str, user: str, client: str, size: int):
        cluster = self.cluster
        src = connection(user, client)
        cid = cluster.next_correlation_id()
        if kind == "produce":
            # request_bytes: the size on the wire, as the real binding gives it (what is recorded)
            request = ProduceRequest(cid, 1, 30000, {TP: (Record(None, f"v{cid}", size),)}, client, user, size)
        else:
            request = FetchRequest(cid, CONSUMER_REPLICA_ID, 0, 1, {TP: FetchPartition(0)}, client, user)
        before = len(cluster.traces)
        read_at = max(cluster.now + cluster.latency, cluster.muted_until.get(src, 0))
        cluster.send(1, request, src)
        # a muted connection's request waits for the mute's end, which may be long ahead
        assert cluster.wait_for(lambda: cid in cluster.responses, read_at - cluster.now + 5000, step_ms=1), "no answer"
        return cluster.responses[cid], cluster.traces[before:], read_at

    @staticmethod
    def recorded_value(kind, size, response, recorded, throttled) -> int:
        """What the request counts for: a produce's request size; a fetch's answer size
        (its batches' sizes; a throttled answer is empty, its size is in the trace)."""
        if kind == "produce":
            return size
        if throttled:
            return throttled[0]["bytes"]
        value = sum(batch.size_bytes for batch in response.partitions[TP].batches)
        assert not recorded or recorded[0]["bytes"] == value
        return value

    # -- rules -----------------------------------------------------------------------
    @rule(kind=st.sampled_from(["produce", "fetch"]), user=st.sampled_from(USERS), client=st.sampled_from(CLIENTS),
          size=st.integers(100, 3000), wait_ms=st.sampled_from([0, 1, 40, 300, 1200]))
    def send(self, kind, user, client, size, wait_ms):
        self.cluster.run_for(wait_ms)
        response, traces, read_at = self.request(kind, user, client, size)
        if kind == "produce":
            assert response.partitions[TP].error is ErrorCode.NONE
        recorded = [f for _, _, ty, f in traces if ty == "quota_recorded"]
        throttled = [f for _, _, ty, f in traces if ty == "throttled"]
        # one broker, acks=1, max wait 0: answered (and recorded) when read
        assert all(t == read_at for t, _, ty, _ in traces if ty == "quota_recorded")
        answered = [read_at]
        value = self.recorded_value(kind, size, response, recorded, throttled)
        expected, quota = self.model.record(kind, user, client, answered[0], value, unrecord=kind == "fetch")
        assert response.throttle_time_ms == expected, (kind, user, client, response.throttle_time_ms, expected)
        manager = getattr(self.cluster.nodes[1].replicas.client_quotas.quotas, kind)
        if self.model.used:  # the sensor the usage went to: the precedence's entity
            assert manager.metric_tags(user, client) == self.model.tags(KEYS[kind], user, client)
        if recorded:  # traced only for a finite quota: the one the precedence picks
            assert recorded[0]["quota"] == quota, (recorded[0]["quota"], quota)
        else:
            assert quota == UNLIMITED, f"{user}/{client} held to {quota} with nothing recorded"
        if expected > 0:
            self.mutes.append((answered[0], connection(user, client), expected))
            assert (answered[0], 1, connection(user, client), answered[0] + expected) in \
                self.cluster.muted_connections, "not muted for its throttle time"
            self.cluster.muted_until[connection(user, client)] = answered[0] + expected

    @rule(user=st.sampled_from(USERS), client=st.sampled_from(CLIENTS), kind=st.sampled_from(["produce", "fetch"]),
          levels=st.sets(st.sampled_from(range(len(LEVELS))), min_size=2, max_size=4),
          bounds=st.lists(st.sampled_from([300, 1000, 5000]), min_size=4, max_size=4))
    def set_several_levels_for_one_client(self, user, client, kind, levels, bounds):
        """Quotas on several of the eight levels that could apply to one client, so that
        the precedence decides between them."""
        for level, bound in zip(sorted(levels), bounds):
            user_part, client_part = LEVELS[level]
            self.change_a_quota((user if user_part == "U" else user_part, client if client_part == "C" else client_part),
                                kind, bound)

    @rule(entity=entities, kind=st.sampled_from(["produce", "fetch"]),
          bound=st.one_of(st.none(), st.sampled_from([300, 1000, 5000])))
    def change_a_quota(self, entity, kind, bound):
        user, client = entity
        path = (f"/config/users/{user}/clients/{client}" if user and client else
                f"/config/users/{user}" if user else f"/config/clients/{client}")
        cluster = self.cluster
        before = len(cluster.traced("quota_config_changed", entity=path))
        change_client_quota(cluster.store, path, {KEYS[kind]: bound})
        assert cluster.wait_for(lambda: len(cluster.traced("quota_config_changed", entity=path)) > before, 5000)
        self.model.configure((user, client), KEYS[kind], bound)

    # -- invariants ------------------------------------------------------------------
    @invariant()
    def no_request_of_a_muted_connection_was_read_before_its_mute_ended(self):
        for _, _, waited in self.cluster.traced("throttle_waited"):
            assert waited["waited_ms"] >= waited["throttle_time_ms"], waited


QuotaMachine.TestCase.settings = machine_settings(40, 25, deep_steps=60)
test_quotas = QuotaMachine.TestCase
