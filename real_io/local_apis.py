"""The APIs the binding answers without the core: ApiVersions (the supported table),
DescribeConfigs (what the core's config layers say, encoded per version), DeleteTopics (deletion is not
modelled) and FindCoordinator while the group APIs are not served (real_io/protocol/apis.py
GROUPS_SERVED; when they are, the core answers it).

Each answer is a Kafka error a client treats as final, so that a client needing a group
or a deletion fails at once with a clear error instead of retrying until a timeout.
"""
from __future__ import annotations

from typing import Callable, Mapping

from broker_core.config_describe import DEFAULT_CONFIG, ConfigEntry, ConfigLayers, describe_broker, describe_topic
from real_io.kafka_api import config_entry_fields
from real_io.protocol.apis import api_versions_response

UNKNOWN_TOPIC_OR_PARTITION = 3
# FindCoordinator: GROUP_AUTHORIZATION_FAILED (30) is what Kafka answers a client the
# group is closed to; clients raise it at once. COORDINATOR_NOT_AVAILABLE (15) would be
# retried until the client's own timeout.
GROUP_AUTHORIZATION_FAILED = 30
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
INVALID_REQUEST = 42
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
COORDINATOR_KEY_TYPE_TRANSACTION = 1


def api_versions(body: dict) -> dict:
    return api_versions_response()


def find_coordinator(body: dict) -> dict:
    transaction = body.get("key_type") == COORDINATOR_KEY_TYPE_TRANSACTION
    error = TRANSACTIONAL_ID_AUTHORIZATION_FAILED if transaction else GROUP_AUTHORIZATION_FAILED
    what = "transactions are" if transaction else "consumer groups are"
    return {"throttle_time_ms": 0, "error_code": error, "error_message": f"{what} not supported by this broker",
            "node_id": -1, "host": "", "port": -1}


def describe_configs(body: dict, version: int, broker_id: int, layers: ConfigLayers,
                     topic_overrides: Callable[[str], Mapping[str, str] | None]) -> dict:
    """Kafka 2.7.0 AdminManager.describeConfigs, resource by resource: the broker named by
    this broker's id (every key) or "" (the cluster default's dynamic keys), a topic in
    this broker's metadata (``topic_overrides`` answers None for one that is not); the
    entries come from the core (broker_core/config_describe.py). v0 has ``is_default``
    instead of a source, synonyms come from v1, types and documentation from v3 (the
    encoder leaves out the fields a version lacks; isrlab has no documentation texts)."""
    synonyms = bool(body.get("include_synonyms")) and version >= 1
    results = []
    for resource in body["resources"]:
        kind, name, keys = resource["resource_type"], resource["resource_name"], resource["configuration_keys"]
        wanted = tuple(keys) if keys is not None else None
        entries, error, message = [], 0, None
        if kind == RESOURCE_BROKER and name == "":
            entries = describe_broker(layers, False, synonyms, wanted)
        elif kind == RESOURCE_BROKER and name == str(broker_id):
            entries = describe_broker(layers, True, synonyms, wanted)
        elif kind == RESOURCE_BROKER:
            error = INVALID_REQUEST
            message = f"Broker id must be an integer, but it is: {name}" if not name.lstrip("-").isdigit() else \
                f"Unexpected broker id, expected {broker_id} or empty string, but received {name}"
        elif kind == RESOURCE_TOPIC:
            overrides = topic_overrides(name)
            if overrides is None:
                error, message = UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
            else:
                entries = describe_topic(layers, overrides, synonyms, wanted)
        else:
            error, message = INVALID_REQUEST, f"Unsupported resource type: {kind}"
        results.append({"error_code": error, "error_message": message, "resource_type": kind, "resource_name": name,
                        "configs": [_entry(entry) for entry in entries]})
    return {"throttle_time_ms": 0, "results": results}


def _entry(entry: ConfigEntry) -> dict:
    return {**config_entry_fields(entry), "is_default": entry.source == DEFAULT_CONFIG,
            "config_type": entry.config_type, "documentation": None,
            "synonyms": [{"name": s.name, "value": s.value, "source": s.source} for s in entry.synonyms]}
