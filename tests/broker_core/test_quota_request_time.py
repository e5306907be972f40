"""The request-time quota (request_percentage) on the core's request path
(broker_core/quota_enforcement.py), driven through the in-test router: the simulation's
modelled handler time and the real binding's measured one (RequestHandled). Each test
names the Kafka 2.7.0 rule it checks."""
from __future__ import annotations

import pytest

from broker_core.config import broker_config
from broker_core.errors import ConfigError
from broker_core.inputs import RequestHandled
from broker_core.messages import (
    ANONYMOUS, CONSUMER_REPLICA_ID, FetchPartition, FetchRequest, ProduceRequest, RequestThrottle)
from broker_core.quota_enforcement import produce_request_bytes
from broker_core.quotas import NANOS_TO_PERCENTAGE_PER_SECOND, ClientQuotas
from broker_core.records import Record
from broker_core.types import TopicPartition
from tests.broker_core.test_quota_enforcement import _set_quota
from tests.harness import CLIENT, started_cluster

TP = TopicPartition("t", 0)
# 0.5 s of one thread per request: two of them are 10% of a thread over the young window of 10 s
SLOW = {"request_model_base_nanos": 500_000_000, "request_model_nanos_per_byte": 0}


def _produce(cluster, client_id: str, acks: int = 1, value: str = "v"):
    cid = cluster.next_correlation_id()
    request = ProduceRequest(cid, acks, 30000, {TP: (Record(None, value),)}, client_id)
    cluster.send(cluster.leader(), request)
    if acks == 0:
        cluster.run_for(10)
        return request, None
    assert cluster.wait_for(lambda: cid in cluster.responses, 5000, step_ms=1)
    return request, cluster.responses[cid]


def _handled(cluster, nanos: int, network_nanos: int = 0, api_key: int = 0, replica_id: int = -1,
             client_id: str = "chatty") -> int:
    """The real binding's report of a timed request (a Produce, api key 0, unless told);
    the node's RequestThrottle answer."""
    cid = cluster.next_correlation_id()
    cluster._push(cluster.now, cluster.leader(), RequestHandled(CLIENT, cid, client_id, ANONYMOUS, nanos,
                                                                network_nanos, api_key, replica_id))
    assert cluster.wait_for(lambda: cid in cluster.responses, 1000, step_ms=1)
    answer = cluster.responses[cid]
    assert type(answer) is RequestThrottle
    return answer.throttle_time_ms


def test_without_a_request_quota_nothing_is_recorded():
    """2.7.0 ClientRequestQuotaManager.maybeRecordAndGetThrottleTimeMs: ``if
    (quotasEnabled)``; without any request_percentage quota nothing is recorded, so the
    model changes no run that sets none."""
    cluster = started_cluster(config=SLOW)
    for _ in range(3):
        assert _produce(cluster, "chatty")[1].throttle_time_ms == 0
    assert not cluster.traced("quota_recorded") and not cluster.muted_connections


def test_the_model_charges_base_plus_bytes_per_answered_produce():
    """2.7.0 KafkaApis.handleProduceRequest: ``quotas.request.maybeRecordAndGetThrottleTimeMs``
    when the produce is answered; isrlab's model charges request_model_base_nanos +
    request_model_nanos_per_byte x the request's size, as percent-seconds
    (ClientRequestQuotaManager.nanosToPercentage)."""
    cluster = started_cluster(config={"request_model_base_nanos": 300_000, "request_model_nanos_per_byte": 7})
    _set_quota(cluster, "/config/clients/chatty", request_percentage=50)
    request, response = _produce(cluster, "chatty")
    (_, _, recorded), = cluster.traced("quota_recorded", client="chatty", quota_type="request")
    nanos = 300_000 + 7 * produce_request_bytes(request)
    assert recorded["nanos"] == nanos
    assert recorded["percent"] == pytest.approx(nanos * NANOS_TO_PERCENTAGE_PER_SECOND)
    assert recorded["quota"] == 50 and response.throttle_time_ms == 0


def test_over_the_request_quota_a_produce_is_throttled_and_muted():
    """2.7.0 KafkaApis.handleProduceRequest: over the request quota the response carries
    ``maxThrottleTimeMs`` and ``quotas.request.throttle`` mutes the channel (KIP-219); the
    time is ClientRequestQuotaManager's, bounded to one window (boundedThrottleTime)."""
    cluster = started_cluster(config=SLOW)
    _set_quota(cluster, "/config/clients/chatty", request_percentage=5)
    throttles = [_produce(cluster, "chatty")[1].throttle_time_ms for _ in range(3)]
    model = ClientQuotas()
    model.apply_config("/config/clients/chatty", {"request_percentage": 5})
    times = [t for t, _, _ in cluster.traced("quota_recorded", quota_type="request")]
    expected = [model.request.record_request_time(ANONYMOUS, "chatty", 500_000_000, t) for t in times]
    assert throttles == expected and expected[-1] > 0
    assert all(t <= 1000 for t in throttles)  # at most quota.window.size.seconds
    (_, _, dst, until) = cluster.muted_connections[-1]
    assert dst == CLIENT and until == times[-1] + throttles[-1]
    assert cluster.traced("throttled", client="chatty", quota_type="request")


def test_a_produce_under_both_quotas_gets_the_larger_throttle():
    """2.7.0 KafkaApis.handleProduceRequest: ``maxThrottleTimeMs = Math.max(bandwidthThrottleTimeMs,
    requestThrottleTimeMs)``; the channel stays muted until the later end."""
    cluster = started_cluster(config=SLOW)
    _set_quota(cluster, "/config/clients/chatty", request_percentage=1, producer_byte_rate=1)
    _produce(cluster, "chatty")
    _, response = _produce(cluster, "chatty", value="x" * 5000)
    latest = {f["quota_type"]: f["throttle_time_ms"] for _, _, f in cluster.traced("quota_recorded", client="chatty")}
    assert latest["produce"] > latest["request"] > 0  # the byte throttle is unbounded, the request's at most 1 s
    assert response.throttle_time_ms == latest["produce"]
    t_ms = cluster.traced("quota_recorded", client="chatty")[-1][0]
    assert max(until for _, _, _, until in cluster.muted_connections) == t_ms + latest["produce"]


def test_acks_0_produce_is_exempt_from_the_request_quota():
    """2.7.0 KafkaApis.handleProduceRequest: ``if (produceRequest.acks == 0) 0``: "the
    request quota is not enforced if acks == 0"."""
    cluster = started_cluster(config=SLOW)
    _set_quota(cluster, "/config/clients/chatty", request_percentage=1)
    for _ in range(4):
        _produce(cluster, "chatty", acks=0)
    assert not cluster.traced("quota_recorded", quota_type="request") and not cluster.muted_connections


def test_a_fetch_throttled_by_request_time_alone_is_answered_empty_and_its_bytes_taken_back():
    """2.7.0 KafkaApis.handleFetchRequest: the request quota is recorded first; if either
    throttle is above 0, ``unrecordQuotaSensor`` takes the fetch's bytes back and
    ``getThrottledResponse`` answers no data."""
    cluster = started_cluster(config=SLOW)
    cluster.produce_and_wait(cluster.leader(), ["a", "b"])
    _set_quota(cluster, "/config/clients/reader", request_percentage=5, consumer_byte_rate=10**9)

    def fetch():
        cid = cluster.next_correlation_id()
        cluster.send(cluster.leader(), FetchRequest(cid, CONSUMER_REPLICA_ID, 0, 1, {TP: FetchPartition(0)}, "reader"))
        assert cluster.wait_for(lambda: cid in cluster.responses, 5000, step_ms=1)
        return cluster.responses[cid]
    answers = [fetch() for _ in range(3)]
    assert answers[0].partitions and answers[0].throttle_time_ms == 0
    throttled = answers[-1]
    assert throttled.throttle_time_ms > 0 and throttled.partitions == {}
    fetches = [f for _, _, f in cluster.traced("quota_recorded", client="reader", quota_type="fetch")]
    assert fetches[-1]["throttle_time_ms"] == 0 and fetches[-1]["bytes"] == 0  # recorded, taken back


def test_the_measured_source_charges_nothing_itself_and_takes_the_bindings_times():
    """With request_time_source "measured" (the real binding) the core charges no model;
    RequestHandled's handler time is recorded (2.7.0 ``maybeRecordAndGetThrottleTimeMs``)
    and answered with its throttle, bounded to one window (``boundedThrottleTime``)."""
    cluster = started_cluster(config={"request_time_source": "measured", **SLOW})
    _set_quota(cluster, "/config/clients/chatty", request_percentage=5)
    _produce(cluster, "chatty")
    assert not cluster.traced("quota_recorded", quota_type="request")
    throttles = [_handled(cluster, 400_000_000) for _ in range(4)]
    assert throttles[0] == 0 and 0 < throttles[-1] <= 1000
    recorded = cluster.traced("quota_recorded", quota_type="request")
    assert [f["nanos"] for _, _, f in recorded] == [400_000_000] * 4


def test_network_time_counts_for_the_next_check_without_one_of_its_own():
    """2.7.0 ClientRequestQuotaManager: ``recordNetworkThreadTimeCallback`` records the
    network thread's time with ``recordNoThrottle``: no check, but the next request's
    check sees it."""
    quiet = started_cluster(config={"request_time_source": "measured"})
    _set_quota(quiet, "/config/clients/chatty", request_percentage=5)
    assert _handled(quiet, 1_000) == 0 and _handled(quiet, 1_000) == 0
    busy = started_cluster(config={"request_time_source": "measured"})
    _set_quota(busy, "/config/clients/chatty", request_percentage=5)
    assert _handled(busy, 1_000) == 0
    assert _handled(busy, 1_000, network_nanos=900_000_000) > 0


def test_exempt_requests_are_not_recorded():
    """2.7.0 KafkaApis.sendResponseExemptThrottle: the controller's requests and
    followers' fetches go through ``maybeRecordExempt``, never throttled (the exempt
    sensor, a metric without a quota, is not modelled)."""
    cluster = started_cluster(config={"request_time_source": "measured"})
    _set_quota(cluster, "/config/clients/chatty", request_percentage=1)
    # LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown, AlterIsr, a follower's fetch
    exempt = [(4, -1), (5, -1), (6, -1), (7, -1), (56, -1), (1, 2)]
    assert [_handled(cluster, 900_000_000, api_key=k, replica_id=r) for k, r in exempt] == [0] * len(exempt)
    assert not cluster.traced("quota_recorded", quota_type="request") and not cluster.muted_connections
    # a consumer's fetch and ApiVersions (18: not exempt in 2.7.0) are recorded and throttled
    assert _handled(cluster, 900_000_000, api_key=1, replica_id=-1) > 0
    assert _handled(cluster, 900_000_000, api_key=18) > 0


def test_the_time_source_is_checked():
    with pytest.raises(ConfigError, match="request_time_source"):
        broker_config("kafka-2.7", {"request_time_source": "guess"})
