"""Client quota nodes in the coordination store, as Kafka 2.7.0 writes them.

Quotas live in /config/clients/<client-id>, /config/users/<user> and
/config/users/<user>/clients/<client-id> (any name may be ``<default>``), as
{"version": 1, "config": {key: string}}. Whoever changes one (kafka-configs.sh, the
AlterClientQuotas API: 2.7.0 zk/AdminZkClient.scala ``changeClientIdConfig``,
``changeUserOrUserClientIdConfig``) writes the node, then a sequential change
notification /config/changes/config_change_<n> holding {"version": 2, "entity_path":
"clients/<id>"} (or "users/<u>", "users/<u>/clients/<c>").

Brokers read them through the one config change listener (broker_core/dynamic_config.py
``TopicConfigListener``, which routes each entity type to its handler as 2.7.0
DynamicConfigManager does) and hand the node's full content to their quota managers
(ConfigHandler.scala ``QuotaConfigHandler.updateQuotaConfig``: a key left out removes
that quota). A broker's own write of a quota node (AlterClientQuotas, not wired yet)
would be ``dynamic_config.write_entity_config``.
"""
from __future__ import annotations

from typing import Any, Mapping

from broker_core import coordination as coord
from broker_core.coordination_store import AdminStore
from broker_core.dynamic_config import entity_config
from broker_core.topic_admin import CHANGE_PREFIX, CONFIG_CHANGES_PATH


def encode_quota_config(props: Mapping[str, Any]) -> bytes:
    """A quota node's data: Kafka's {"version": 1, "config": {...}}, values as strings."""
    return coord.encode_data({"version": 1, "config": {key: str(props[key]) for key in sorted(props)}})


def change_notification(entity_path: str) -> bytes:
    """2.7.0 ConfigEntityChangeNotificationSequenceZNode.encode: version 2, the entity path
    without /config/."""
    return coord.encode_data({"version": 2, "entity_path": entity_path.removeprefix("/config/")})


def change_client_quota(store: AdminStore, entity_path: str, changes: Mapping[str, Any]) -> dict[str, str]:
    """What ``kafka-configs.sh --alter --entity-type clients|users --add-config`` (and
    ``--delete-config`` for a key whose value is None) does: the entity's node gets its
    current keys with the changes, then a change notification. Returns the node written."""
    current = entity_config(store.get(entity_path)) or {}
    props = {key: str(value) for key, value in {**current, **changes}.items() if value is not None}
    store.put(entity_path, encode_quota_config(props))
    store.put_sequential(f"{CONFIG_CHANGES_PATH}/{CHANGE_PREFIX}", change_notification(entity_path))
    return dict(sorted(props.items()))
