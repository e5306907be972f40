"""The APIs the binding answers without the core: ApiVersions (the supported table),
DescribeConfigs (the configuration the node runs with), DeleteTopics (deletion is not
modelled) and FindCoordinator (consumer groups are not modelled yet).

Each answer is a Kafka error a client treats as final, so that a client needing a group
or a deletion fails at once with a clear error instead of retrying until a timeout.
"""
from __future__ import annotations

from dataclasses import fields
from typing import Callable

from broker_core.config import TOPIC_KEYS, BrokerConfig, kafka_name
from real_io.protocol.apis import api_versions_response

UNKNOWN_TOPIC_OR_PARTITION = 3
# FindCoordinator: GROUP_AUTHORIZATION_FAILED (30) is what Kafka answers a client the
# group is closed to; clients raise it at once. COORDINATOR_NOT_AVAILABLE (15) would be
# retried until the client's own timeout.
GROUP_AUTHORIZATION_FAILED = 30
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
TOPIC_DELETION_DISABLED = 73  # what Kafka answers with delete.topic.enable=false
INVALID_REQUEST = 42
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
CONFIG_SOURCE_TOPIC = 1
CONFIG_SOURCE_STATIC_BROKER = 4
COORDINATOR_KEY_TYPE_TRANSACTION = 1


def api_versions(body: dict) -> dict:
    return api_versions_response()


def find_coordinator(body: dict) -> dict:
    transaction = body.get("key_type") == COORDINATOR_KEY_TYPE_TRANSACTION
    error = TRANSACTIONAL_ID_AUTHORIZATION_FAILED if transaction else GROUP_AUTHORIZATION_FAILED
    what = "transactions are" if transaction else "consumer groups are"
    return {"throttle_time_ms": 0, "error_code": error, "error_message": f"{what} not supported by this broker",
            "node_id": -1, "host": "", "port": -1}


def delete_topics(body: dict) -> dict:
    return {"throttle_time_ms": 0, "responses": [
        {"name": name, "error_code": TOPIC_DELETION_DISABLED, "error_message": "topic deletion is not supported"}
        for name in body["topic_names"]]}


def _text(value) -> str | None:
    if value is None:
        return None
    return str(value).lower() if isinstance(value, bool) else str(value)


def broker_entries(config: BrokerConfig) -> list[tuple[str, str | None]]:
    return [(kafka_name(f.name), _text(getattr(config, f.name))) for f in fields(config)]


def topic_entries(config: BrokerConfig) -> list[tuple[str, str | None]]:
    return [(key, _text(getattr(config, attribute))) for key, attribute in sorted(TOPIC_KEYS.items())]


def describe_configs(body: dict, broker_id: int, config: BrokerConfig,
                     topic_config: Callable[[str], BrokerConfig | None]) -> dict:
    """The broker's configuration (resource type 4, named by its id) and a topic's
    (type 2: the keys a topic may override, as in effect). Entries are read-only: the
    binding applies no config change at run time."""
    results = []
    for resource in body["resources"]:
        kind, name, keys = resource["resource_type"], resource["resource_name"], resource["configuration_keys"]
        entries, error, message, source = [], 0, None, CONFIG_SOURCE_STATIC_BROKER
        if kind == RESOURCE_BROKER and name in ("", str(broker_id)):
            entries = broker_entries(config)
        elif kind == RESOURCE_TOPIC:
            found = topic_config(name)
            if found is None:
                error, message = UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"
            else:
                entries, source = topic_entries(found), CONFIG_SOURCE_TOPIC
        else:
            error, message = INVALID_REQUEST, f"resource type {kind} {name!r} is not described here"
        if keys is not None:
            entries = [(key, value) for key, value in entries if key in keys]
        results.append({"error_code": error, "error_message": message, "resource_type": kind, "resource_name": name,
                        "configs": [{"name": key, "value": value, "read_only": True, "is_default": False,
                                     "config_source": source, "is_sensitive": False, "synonyms": [],
                                     "config_type": 0, "documentation": None} for key, value in entries]})
    return {"throttle_time_ms": 0, "results": results}
