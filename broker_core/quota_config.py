"""Client quota nodes in the coordination store, read as Kafka 2.7.0 reads them.

Quotas live in /config/clients/<client-id>, /config/users/<user> and
/config/users/<user>/clients/<client-id> (any name may be ``<default>``), as
{"version": 1, "config": {key: string}}. Whoever changes one (kafka-configs.sh, the
AlterClientQuotas API: 2.7.0 zk/AdminZkClient.scala ``changeClientIdConfig``,
``changeUserOrUserClientIdConfig``) writes the node, then a sequential change
notification /config/changes/config_change_<n> holding {"version": 2, "entity_path":
"clients/<id>"} (or "users/<u>", "users/<u>/clients/<c>").

A broker reads every quota node when it starts (2.7.0 DynamicConfigManager.startup:
``fetchAllEntityConfigs`` for clients and users, ``fetchAllChildEntityConfigs`` for
users' clients; see QuotaConfigListener for how isrlab does it), then each notification
numbered above the last one it handled, and hands the node's full content to its quota managers (ConfigHandler.scala
``QuotaConfigHandler.updateQuotaConfig``: a key left out removes that quota).

The topic config listener (broker_core/dynamic_config.py) reads the notifications and
hands those naming no topic to this one, as Kafka's one listener dispatches each entity
type to its own handler.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Mapping

from broker_core import coordination as coord
from broker_core.coordination_store import CoordinationStore

CONFIG_CHANGES_PATH = "/config/changes"
CHANGE_PREFIX = "config_change_"
CLIENTS_PATH = "/config/clients"
USERS_PATH = "/config/users"
QUOTA_ENTITY_TYPES = ("clients", "users")


def encode_quota_config(props: Mapping[str, Any]) -> bytes:
    """A quota node's data: Kafka's {"version": 1, "config": {...}}, values as strings."""
    return coord.encode_data({"version": 1, "config": {key: str(props[key]) for key in sorted(props)}})


def decode_quota_config(raw: bytes | None) -> dict[str, str] | None:
    """A quota node's keys and values (strings, as Kafka keeps them); None when the node
    is not a config node (the quotas in effect then stay). No data is no config."""
    if not raw:
        return {}
    try:
        value = coord.decode_data(raw)
    except ValueError:
        return None
    config = value.get("config") if isinstance(value, dict) else None
    if not isinstance(config, dict):
        return None
    return {str(key): config[key] if isinstance(config[key], str) else json.dumps(config[key])
            for key in sorted(config)}


def change_notification(entity_path: str) -> bytes:
    """2.7.0 ConfigEntityChangeNotificationSequenceZNode.encode: version 2, the entity path
    without /config/."""
    return coord.encode_data({"version": 2, "entity_path": entity_path.removeprefix("/config/")})


def notified_quota_entity(raw: bytes | None) -> str | None:
    """The quota node (/config/...) a change notification names, or None when it names
    another entity type (topics, brokers) or does not parse. Version 2 names an
    ``entity_path``; version 1 an ``entity_type`` and ``entity_name``."""
    try:
        value = json.loads(raw) if raw else None
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    path: Any = value.get("entity_path") if value.get("version") == 2 else None
    if path is None and value.get("entity_type") in QUOTA_ENTITY_TYPES and isinstance(value.get("entity_name"), str):
        path = f"{value['entity_type']}/{value['entity_name']}"
    if isinstance(path, str) and path.split("/", 1)[0] in QUOTA_ENTITY_TYPES:
        return "/config/" + path
    return None


def change_client_quota(store: CoordinationStore, entity_path: str, changes: Mapping[str, Any]) -> dict[str, str]:
    """What ``kafka-configs.sh --alter --entity-type clients|users --add-config`` (and
    ``--delete-config`` for a key whose value is None) does: the entity's node gets its
    current keys with the changes, then a change notification. Returns the node written."""
    current = decode_quota_config(store.get(entity_path)) or {}
    props = {key: str(value) for key, value in {**current, **changes}.items() if value is not None}
    store.put(entity_path, encode_quota_config(props))
    store.put_sequential(f"{CONFIG_CHANGES_PATH}/{CHANGE_PREFIX}", change_notification(entity_path))
    return dict(sorted(props.items()))


def write_client_quota(entity_path: str, props: Mapping[str, Any]):
    """The same as a coordination task of a broker (AlterClientQuotas: 2.7.0
    AdminManager.alterClientQuotas then AdminZkClient.changeConfigs): set or create the
    node, then the notification. Returns whether the store took both."""
    data = encode_quota_config(props)
    written = yield coord.SetData(entity_path, data)
    if not written.ok and written.error == coord.NO_NODE:
        written = yield coord.Create(entity_path, data, make_parents=True)
    if not written.ok:
        return False
    noted = yield coord.Create(f"{CONFIG_CHANGES_PATH}/{CHANGE_PREFIX}", change_notification(entity_path),
                               make_parents=True, sequential=True)
    return noted.ok


class QuotaConfigListener:
    """A broker's reader of quota nodes, fed by the topic config listener with every
    change notification that names no topic (``notified``): the nodes of users and
    clients are read and handed to ``on_config(path, props)``.

    Kafka also reads every quota node at startup. Here the first pass over the
    notifications does that: isrlab never purges them (Kafka purges those older than 15
    minutes), so it reads every node ever changed through one. A node written without a
    notification is read at the next notification naming it. Reading no more than that
    keeps a run without quotas making the same coordination requests as before (the
    simulation's traces stay byte-identical)."""

    def __init__(self, on_config: Callable[[str, dict[str, str]], None]):
        self.on_config = on_config

    def notified(self, raw: bytes | None):
        """A coordination task step: read the quota node a notification names, if any."""
        path = notified_quota_entity(raw)
        if path is None:
            return
        data = yield coord.GetData(path)
        # a missing node means no quotas (2.7.0 fetchEntityConfig: empty properties)
        props = decode_quota_config(data.data) if data.ok else {}
        if props is not None:
            self.on_config(path, props)
