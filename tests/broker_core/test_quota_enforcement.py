"""Client quotas on the core's request path (broker_core/quota_enforcement.py), driven
through the in-test router: each test names the Kafka 2.7.0 rule it checks."""
from __future__ import annotations

from broker_core import coordination as coord
from broker_core.messages import (
    ANONYMOUS, CONSUMER_REPLICA_ID, FetchPartition, FetchRequest, FetchResponse, ProduceRequest, ProduceResponse)
from broker_core.quota_config import change_client_quota, change_notification, encode_quota_config
from broker_core.quotas import ClientQuotas
from broker_core.records import Record
from broker_core.types import TopicPartition
from tests.harness import CLIENT, started_cluster

TP = TopicPartition("t", 0)
RECORD_BYTES = 20_000  # one request of these is twice a 1000 B/s quota over the young window of 10 s


def _produce(cluster, client_id: str, acks: int = 1, size: int = RECORD_BYTES) -> ProduceResponse | None:
    cid = cluster.next_correlation_id()
    cluster.send(cluster.leader(), ProduceRequest(cid, acks, 30000, {TP: (Record(None, f"v{cid}", size),)}, client_id))
    if acks == 0:
        cluster.run_for(10)
        return None
    assert cluster.wait_for(lambda: cid in cluster.responses, 5000, step_ms=1)
    return cluster.responses[cid]


def _fetch(cluster, client_id: str, offset: int = 0) -> FetchResponse:
    cid = cluster.next_correlation_id()
    cluster.send(cluster.leader(), FetchRequest(cid, CONSUMER_REPLICA_ID, 0, 1, {TP: FetchPartition(offset)}, client_id))
    assert cluster.wait_for(lambda: cid in cluster.responses, 5000, step_ms=1)
    return cluster.responses[cid]


def _set_quota(cluster, path: str, **props) -> None:
    before = len(cluster.traced("quota_config_changed", entity=path))
    change_client_quota(cluster.store, path, props)
    assert cluster.wait_for(lambda: len(cluster.traced("quota_config_changed", entity=path)) > before, 5000)


def test_no_quota_means_no_throttle_and_no_quota_trace():
    """2.7.0 ClientQuotaManager.maybeRecordAndGetThrottleTimeMs: while no quota was ever
    set (quotasEnabled false) nothing is recorded and the throttle time is 0."""
    cluster = started_cluster()
    response = _produce(cluster, "noisy", size=10 * RECORD_BYTES)
    assert response.throttle_time_ms == 0
    assert not cluster.traced("quota_recorded") and not cluster.muted_connections


def test_produce_over_quota_is_answered_at_once_with_the_throttle_time_and_muted():
    """2.7.0 KafkaApis.handleProduceRequest (sendResponseCallback): the produce quota
    records the request's size when it is answered; over quota the response carries
    throttle_time_ms and ClientQuotaManager.throttle mutes the channel for that long
    (KIP-219), while the answer itself goes out at once."""
    cluster = started_cluster()
    _set_quota(cluster, "/config/clients/noisy", producer_byte_rate=1000)
    response = _produce(cluster, "noisy")
    (t_ms, _, recorded), = cluster.traced("quota_recorded", client="noisy")
    model = ClientQuotas()
    model.apply_config("/config/clients/noisy", {"producer_byte_rate": 1000})
    expected = model.produce.record_and_throttle(ANONYMOUS, "noisy", recorded["bytes"], t_ms)
    assert expected > 0 and response.throttle_time_ms == expected
    assert response.partitions[TP].error.name == "NONE"  # appended: a throttle is not an error
    (_, _, throttled), = cluster.traced("throttled", client="noisy")
    assert throttled["throttle_time_ms"] == expected and throttled["quota"] == 1000 and throttled["rate"] > 1000
    (muted_at, _, dst, until), = cluster.muted_connections
    assert dst == CLIENT and until == t_ms + expected


def test_a_quota_on_one_client_id_leaves_another_alone():
    """2.7.0 DefaultQuotaCallback.quotaLimit: /config/clients/<id> applies to that client
    id only; another client id without a quota is never throttled."""
    cluster = started_cluster()
    _set_quota(cluster, "/config/clients/noisy", producer_byte_rate=1000)
    for _ in range(3):
        assert _produce(cluster, "quiet").throttle_time_ms == 0
    assert not cluster.traced("throttled")


def test_acks_0_produce_over_quota_mutes_without_an_answer():
    """2.7.0 KafkaApis.handleProduceRequest: acks=0 is exempt from the request quota but
    "the channel may be throttled due to bandwidth quota violation": no answer, a mute."""
    cluster = started_cluster()
    _set_quota(cluster, "/config/clients/noisy", producer_byte_rate=1000)
    _produce(cluster, "noisy", acks=0)
    assert cluster.traced("throttled", client="noisy")
    assert len(cluster.muted_connections) == 1


def test_acks_all_is_recorded_when_the_delayed_produce_answers():
    """2.7.0 KafkaApis.handleProduceRequest: the quota is recorded in the response
    callback, which for acks=all runs when DelayedProduce completes."""
    cluster = started_cluster()
    _set_quota(cluster, "/config/clients/noisy", producer_byte_rate=1000)
    response = _produce(cluster, "noisy", acks=-1)
    assert response.throttle_time_ms > 0
    (t_recorded, _, _), = cluster.traced("quota_recorded", client="noisy")
    (t_hw, _, _) = cluster.traced("high_watermark_advanced")[-1]
    assert t_recorded >= t_hw  # not before the produce could be answered


def test_throttled_consumer_fetch_gets_no_data_and_its_bytes_are_taken_back():
    """2.7.0 KafkaApis.handleFetchRequest: a consumer fetch over quota is answered by
    fetchContext.getThrottledResponse (no partitions) with the throttle time, and
    quotas.fetch.unrecordQuotaSensor takes its bytes back; a follower's fetches are
    never recorded against client quotas (isFromFollower)."""
    cluster = started_cluster()
    for _ in range(3):
        _produce(cluster, "producer", size=RECORD_BYTES)
    _set_quota(cluster, "/config/clients/reader", consumer_byte_rate=1000)
    first = _fetch(cluster, "reader")
    assert first.throttle_time_ms > 0 and first.partitions == {}
    (_, _, recorded), = cluster.traced("quota_recorded", client="reader")
    assert recorded["bytes"] == 0
    assert not cluster.traced("quota_recorded", client="")  # followers' fetches: not recorded
    # The bytes were taken back: after the throttle, a fetch of the same size is over
    # quota by the same amount again, not by twice as much.
    cluster.run_for(first.throttle_time_ms)
    second = _fetch(cluster, "reader")
    assert second.throttle_time_ms > 0
    throttles = [f["throttle_time_ms"] for _, _, f in cluster.traced("throttled", client="reader")]
    assert throttles[1] <= throttles[0]


def test_the_next_request_after_a_throttle_reports_how_long_the_client_waited():
    """The ``throttle_waited`` trace event the quota checker compares with the throttle
    time (KIP-219: the client should not send before the throttle time has passed)."""
    cluster = started_cluster()
    _set_quota(cluster, "/config/clients/noisy", producer_byte_rate=1000)
    throttle = _produce(cluster, "noisy").throttle_time_ms
    cluster.run_for(throttle + 5)
    _produce(cluster, "noisy", size=10)
    (_, _, waited), = cluster.traced("throttle_waited", client="noisy")
    assert waited["throttle_time_ms"] == throttle and waited["waited_ms"] >= throttle


def test_a_quota_change_applies_without_a_restart_and_a_refused_node_changes_nothing():
    """2.7.0 ConfigHandler.QuotaConfigHandler.updateQuotaConfig through the change
    notifications (DynamicConfigManager): a new quota counts for the next request; a
    node with an unknown key is refused whole and the quota in force stays."""
    cluster = started_cluster()
    _set_quota(cluster, "/config/clients/noisy", producer_byte_rate=1_000_000)
    assert _produce(cluster, "noisy").throttle_time_ms == 0
    cluster.store.put("/config/clients/noisy", encode_quota_config({"producer_byte_rate": "1000", "bogus": "1"}))
    cluster.store.put_sequential("/config/changes/config_change_", change_notification("/config/clients/noisy"))
    assert cluster.wait_for(lambda: cluster.traced("quota_config_refused", key="bogus"), 5000)
    assert _produce(cluster, "noisy").throttle_time_ms == 0
    _set_quota(cluster, "/config/clients/noisy", producer_byte_rate=1000, bogus=None)
    assert _produce(cluster, "noisy").throttle_time_ms > 0


def test_user_and_default_quotas_come_from_their_nodes():
    """2.7.0 DefaultQuotaCallback: /config/users/<user> applies to that principal
    (ANONYMOUS on PLAINTEXT) and /config/clients/<default> to every client id."""
    cluster = started_cluster()
    _set_quota(cluster, "/config/users/ANONYMOUS", producer_byte_rate=1000)
    assert _produce(cluster, "anyone").throttle_time_ms > 0
    cluster2 = started_cluster()
    _set_quota(cluster2, "/config/clients/<default>", producer_byte_rate=1000)
    assert _produce(cluster2, "whoever").throttle_time_ms > 0


def _notify(cluster, path: str, raw: bytes | None) -> None:
    """A node written behind the admin tools' back, then its change notification."""
    if raw is not None:
        cluster.store.put(path, raw)
    cluster.store.put_sequential("/config/changes/config_change_", change_notification(path))


def test_one_listener_routes_topics_brokers_users_and_clients_in_notification_order():
    """2.7.0 DynamicConfigManager: one listener over /config/changes hands each entity
    type to its handler (TopicConfigHandler, BrokerConfigHandler, QuotaConfigHandler for
    users and clients). Notifications of every type, a user's client among them (entity
    path users/<u>/clients/<c>), one of a type 2.7 has no handler for, and a quota node
    Kafka cannot read (a number where a string goes) are read in one pass; each reaches
    its own handler only, and the bad ones change nothing."""
    cluster = started_cluster()
    topic_config = coord.encode_data({"version": 1, "config": {"min.insync.replicas": "2"}})
    _notify(cluster, "/config/topics/t", topic_config)
    _notify(cluster, "/config/users/ANONYMOUS/clients/noisy", encode_quota_config({"producer_byte_rate": 1000}))
    _notify(cluster, "/config/ips/127.0.0.1", coord.encode_data({"version": 1, "config": {"x": "1"}}))
    _notify(cluster, "/config/clients/quiet", b'{"version":1,"config":{"producer_byte_rate":1000}}')
    _notify(cluster, "/config/brokers/<default>", coord.encode_data({"version": 1, "config": {
        "log.flush.interval.messages": "7"}}))
    assert cluster.wait_for(lambda: len(cluster.traced("broker_config_changed")) == 3, 5000)
    changed = [(b, f["entity"]) for _, b, f in cluster.traced("quota_config_changed")]
    assert changed == [(b, "/config/users/ANONYMOUS/clients/noisy") for b in (1, 2, 3)]
    assert all(cluster.nodes[b].replicas.config_for("t").min_insync_replicas == 2 for b in (1, 2, 3))
    assert all(f["entity"] == "<default>" for _, _, f in cluster.traced("broker_config_changed"))
    assert not cluster.traced("quota_config_refused")
    assert _produce(cluster, "noisy").throttle_time_ms > 0  # the user's client quota counts
    assert _produce(cluster, "quiet").throttle_time_ms == 0  # its unreadable node did not


def _fetched_bytes(response: FetchResponse) -> int:
    return sum(batch.size_bytes for batch in response.partitions[TP].batches)


def test_a_consumers_fetch_is_capped_to_its_quota_window():
    """2.7.0 KafkaApis.handleFetchRequest: fetchMaxBytes is capped by maxQuotaWindowBytes
    (ClientQuotaManager.getMaxValueInQuotaWindow: quota x (samples - 1) x window), and
    ReplicaManager.readFromLocalLog still gives one whole batch when the first is larger
    (minOneMessage). A consumer without a quota of its own is not capped."""
    cluster = started_cluster()
    for _ in range(4):
        _produce(cluster, "producer", size=300)
    assert cluster.wait_for(lambda: cluster.partition(cluster.leader()).log.high_watermark == 4, 5000)
    everything = _fetched_bytes(_fetch(cluster, "free"))
    batch = everything // 4
    _set_quota(cluster, "/config/clients/capped", consumer_byte_rate=100)  # 100 x 10 x 1 s = 1000 bytes
    capped = _fetch(cluster, "capped")
    assert _fetched_bytes(capped) == (1000 // batch) * batch < everything
    assert _fetched_bytes(_fetch(cluster, "free")) == everything  # quotas on, but none for it
    _set_quota(cluster, "/config/clients/tiny", consumer_byte_rate=1)  # 10 bytes: below one batch
    assert _fetch(cluster, "tiny").partitions == {}  # the one batch read puts it over quota: throttled
    (_, _, throttled), = cluster.traced("throttled", client="tiny")
    assert throttled["bytes"] == batch
