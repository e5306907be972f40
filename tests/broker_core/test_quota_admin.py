"""AlterClientQuotas / DescribeClientQuotas in the core (KIP-546), each rule with its
Kafka 2.7.0 source: core/src/main/scala/kafka/server/AdminManager.scala
``alterClientQuotas`` / ``describeClientQuotas`` / ``handleDescribeClientQuotas``, the
node writes of zk/AdminZkClient.scala ``changeClientIdConfig`` /
``changeUserOrUserClientIdConfig``, and every broker's QuotaConfigHandler reading them."""
import pytest

from broker_core.dynamic_config import entity_config
from broker_core.errors import ErrorCode
from broker_core.quota_admin import (
    CLIENT_ID, MATCH_DEFAULT, MATCH_EXACT, MATCH_SPECIFIED, USER, AlterClientQuotasRequest, ClientQuotaAlteration,
    DescribeClientQuotasRequest, QuotaFilterComponent, java_double)
from broker_core.quota_config import change_client_quota
from broker_core.quotas import QuotaEntity
from tests.harness import Cluster


@pytest.fixture()
def cluster():
    cluster = Cluster()
    cluster.start_all()
    assert cluster.wait_for(cluster.settled, 5000)
    return cluster


def alter(cluster, broker, *entries, validate_only=False):
    return cluster.request_and_wait(broker, lambda cid: AlterClientQuotasRequest(
        cid, tuple(ClientQuotaAlteration(entity, tuple(ops)) for entity, ops in entries), validate_only))


def describe(cluster, broker, *components, strict=False):
    return cluster.request_and_wait(broker, lambda cid: DescribeClientQuotasRequest(
        cid, tuple(QuotaFilterComponent(*c) for c in components), strict))


def described(cluster, *components, strict=False) -> dict:
    answer = describe(cluster, 1, *components, strict=strict)
    assert answer.error is ErrorCode.NONE, answer
    return {entity: dict(values) for entity, values in answer.entries}


def test_an_alter_writes_the_node_and_every_broker_applies_it(cluster):
    """alterEntityQuotas: fetchEntityConfig, the ops, AdminZkClient.changeConfigs (the
    node, then /config/changes); every broker's QuotaConfigHandler.updateQuotaConfig
    applies it without a restart. validate_only writes nothing."""
    entity = ((CLIENT_ID, "app"),)
    answer = alter(cluster, 2, (entity, [("producer_byte_rate", 1024.0)]), validate_only=True)
    assert answer.results[0].error is ErrorCode.NONE
    assert cluster.store.get("/config/clients/app") is None
    answer = alter(cluster, 2, (entity, [("producer_byte_rate", 1024.0), ("request_percentage", 50.0)]))
    assert [(r.entity, r.error, r.message) for r in answer.results] == [(entity, ErrorCode.NONE, None)]
    assert entity_config(cluster.store.get("/config/clients/app")) == {
        "producer_byte_rate": "1024", "request_percentage": "50.0"}
    app = QuotaEntity(None, "app")
    assert cluster.wait_for(lambda: all(
        cluster.nodes[b].replicas.client_quotas.quotas.configs.get(app) == {
            "producer_byte_rate": 1024.0, "request_percentage": 50.0} for b in (1, 2, 3)), 2000)
    # a removal drops the key only, the rest of the node stays
    assert alter(cluster, 3, (entity, [("request_percentage", None)])).results[0].error is ErrorCode.NONE
    assert cluster.wait_for(lambda: all(
        cluster.nodes[b].replicas.client_quotas.quotas.configs.get(app) == {"producer_byte_rate": 1024.0}
        for b in (1, 2, 3)), 2000)


def test_entities_are_sanitized_into_paths_and_default_is_a_null_name(cluster):
    """AdminManager.sanitizeEntityName (Sanitizer.sanitize; null: <default>) and the three
    paths of alterEntityQuotas."""
    entries = [(((USER, "a b*"), (CLIENT_ID, None)), [("consumer_byte_rate", 2048.0)]),
               (((USER, None),), [("consumer_byte_rate", 4096.0)]),
               (((CLIENT_ID, "c/1"),), [("producer_byte_rate", 100.0)])]
    assert all(r.error is ErrorCode.NONE for r in alter(cluster, 1, *entries).results)
    assert entity_config(cluster.store.get("/config/users/a%20b%2A/clients/<default>")) == {
        "consumer_byte_rate": "2048"}
    assert entity_config(cluster.store.get("/config/users/<default>")) == {"consumer_byte_rate": "4096"}
    assert entity_config(cluster.store.get("/config/clients/c%2F1")) == {"producer_byte_rate": "100"}
    # and describe gives the names back desanitized
    assert described(cluster) == {
        ((USER, "a b*"), (CLIENT_ID, None)): {"consumer_byte_rate": 2048.0},
        ((USER, None),): {"consumer_byte_rate": 4096.0},
        ((CLIENT_ID, "c/1"),): {"producer_byte_rate": 100.0}}


def test_bad_entries_get_kafkas_errors_and_the_others_are_applied(cluster):
    """alterEntityQuotas / entityToSanitizedUserClientId: each entry its own ApiError."""
    good = ((CLIENT_ID, "ok"),)
    answer = alter(cluster, 1,
                   ((), [("producer_byte_rate", 1.0)]),
                   (((("group", "g"),)), [("producer_byte_rate", 1.0)]),
                   (((CLIENT_ID, ""),), [("producer_byte_rate", 1.0)]),
                   (((CLIENT_ID, "x"),), [("no_such_key", 1.0)]),
                   (((CLIENT_ID, "x"),), [("producer_byte_rate", 1.5)]),
                   (((CLIENT_ID, "x"),), [("producer_byte_rate", 0.0)]),
                   (((CLIENT_ID, "x"),), [("request_percentage", -1.0)]),
                   (((USER, "u"), (CLIENT_ID, "x")), [("SCRAM-SHA-256", 1.0)]),
                   (good, [("producer_byte_rate", 10.0)]))
    got = [(r.error, r.message) for r in answer.results]
    assert got[:5] == [
        (ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity"),
        (ErrorCode.INVALID_REQUEST, "Unhandled client quota entity type: group"),
        (ErrorCode.INVALID_REQUEST, "Empty client-id not supported"),
        (ErrorCode.INVALID_REQUEST, "Invalid configuration key no_such_key"),
        (ErrorCode.INVALID_REQUEST, "Configuration producer_byte_rate must be a Long value")]
    # isrlab's one deviation (docs/quotas.md): values the brokers' quota model refuses
    assert got[5][0] is ErrorCode.INVALID_REQUEST and "producer_byte_rate" in got[5][1]
    assert got[6][0] is ErrorCode.INVALID_REQUEST and "request_percentage" in got[6][1]
    assert got[7] == (ErrorCode.UNKNOWN_SERVER_ERROR, None)  # a SCRAM key is no quota (Client.validate)
    assert got[8] == (ErrorCode.NONE, None)
    assert cluster.store.get("/config/clients/x") is None
    assert entity_config(cluster.store.get("/config/clients/ok")) == {"producer_byte_rate": "10"}


def test_describe_filters_exact_default_and_specified_strict_or_not(cluster):
    """handleDescribeClientQuotas: exact and default components read one node, a
    specified one lists the type; strict leaves out entities with an unnamed type;
    only quota keys are shown (QuotaConfigs.isQuotaConfig), as doubles."""
    store = cluster.store
    change_client_quota(store, "/config/users/alice", {"producer_byte_rate": 10})
    change_client_quota(store, "/config/users/alice/clients/app", {"consumer_byte_rate": 20})
    change_client_quota(store, "/config/users/<default>/clients/app", {"consumer_byte_rate": 30})
    change_client_quota(store, "/config/clients/app", {"request_percentage": 12.5})
    change_client_quota(store, "/config/clients/<default>", {"producer_byte_rate": 40})
    alice, app = (USER, "alice"), (CLIENT_ID, "app")
    assert described(cluster, (USER, MATCH_EXACT, "alice")) == {
        (alice,): {"producer_byte_rate": 10.0}, (alice, app): {"consumer_byte_rate": 20.0}}
    assert described(cluster, (USER, MATCH_EXACT, "alice"), strict=True) == {(alice,): {"producer_byte_rate": 10.0}}
    assert described(cluster, (CLIENT_ID, MATCH_DEFAULT, None), strict=True) == {
        ((CLIENT_ID, None),): {"producer_byte_rate": 40.0}}
    assert described(cluster, (USER, MATCH_SPECIFIED, None), (CLIENT_ID, MATCH_EXACT, "app")) == {
        (alice, app): {"consumer_byte_rate": 20.0}, ((USER, None), app): {"consumer_byte_rate": 30.0}}
    assert described(cluster, (CLIENT_ID, MATCH_SPECIFIED, None), strict=True) == {
        (app,): {"request_percentage": 12.5}, ((CLIENT_ID, None),): {"producer_byte_rate": 40.0}}
    assert len(described(cluster)) == 5
    assert described(cluster, (USER, MATCH_EXACT, "bob")) == {}


def test_describe_refuses_bad_filters_with_kafkas_errors(cluster):
    """describeClientQuotas' component checks and DescribeClientQuotasRequest.filter."""
    def error(*components):
        answer = describe(cluster, 1, *components)
        return answer.error, answer.message, answer.entries
    assert error((USER, MATCH_SPECIFIED, None), (USER, MATCH_EXACT, "a")) == (
        ErrorCode.INVALID_REQUEST, "Duplicate user filter component entity type", None)
    assert error(("", MATCH_SPECIFIED, None)) == (
        ErrorCode.INVALID_REQUEST, "Unexpected empty filter component entity type", None)
    assert error(("ip", MATCH_SPECIFIED, None)) == (
        ErrorCode.UNSUPPORTED_VERSION, "Custom entity type 'ip' not supported", None)
    assert error((USER, 7, None)) == (ErrorCode.UNKNOWN_SERVER_ERROR, None, None)


def test_java_double_to_string():
    """The text 2.7 stores for a DOUBLE quota: java.lang.Double.toString."""
    assert [java_double(v) for v in (50.0, 0.5, 12.25, 1e7, 1.5e-4, 123456789.0, 0.0)] == [
        "50.0", "0.5", "12.25", "1.0E7", "1.5E-4", "1.23456789E8", "0.0"]
