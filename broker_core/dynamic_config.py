"""Topic configs that change while the cluster runs, through the coordination store.

The admin tool (kafka-configs.sh: 2.7.0 zk/AdminZkClient.scala ``changeTopicConfig``;
0.8.2.2 admin/AdminUtils.scala ``changeTopicConfig``) writes the topic's overrides to
``/config/topics/<topic>`` and then a persistent sequential notification
``/config/changes/config_change_<n>``. Every broker watches ``/config/changes`` (2.7.0
server/DynamicConfigManager.scala with common/ZkNodeChangeNotificationListener.scala;
0.8.2.2 server/TopicConfigManager.scala): it reads each notification numbered above the
last one it handled, then the topic's config node, and gives the topic's logs the new
config (2.7.0 server/ConfigHandler.scala ``TopicConfigHandler.processConfigChanges``).
A broker that starts reads every topic's config node (2.7.0 KafkaServer.startup's
``getLogConfigs`` and DynamicConfigManager.startup; 0.8.2.2 KafkaServer.createLogManager's
``fetchAllTopicConfigs``) and handles every notification still there.

Only 2.7 (and 3.0) goes further: when the overrides read enable unclean leader election,
TopicConfigHandler asks the active controller to elect leaders for the topic's offline
partitions (KafkaController.enableTopicUncleanLeaderElection). 0.8.2.2's controller has
no such hook: the new value counts at the next election something else triggers.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Mapping

from broker_core import coordination as coord
from broker_core.config import BOOL_KEYS, TOPIC_KEYS, BrokerConfig
from broker_core.context import NodeContext
from broker_core.kafka_config_keys import TOPIC_KEYS_KAFKA
from broker_core.coordination_store import AdminStore
from broker_core.log import PartitionLog
from broker_core.partition import Partition
from broker_core.topic_admin import CHANGE_PREFIX, CONFIG_CHANGES_PATH, TOPIC_CONFIG_PATH
from broker_core.types import TopicPartition

BROKER_CONFIG_PATH = "/config/brokers"  # 2.7.0 ConfigType.Broker: /config/brokers/<id> and /config/brokers/<default>
DEFAULT_ENTITY = "<default>"  # ConfigEntityName.Default
QUOTA_ENTITY_TYPES = ("clients", "users")  # 2.7.0 ConfigType.Client, ConfigType.User
ENTITY_TYPES = ("topics", "brokers", *QUOTA_ENTITY_TYPES)  # the types a change notification may name
UNCLEAN_KEY = "unclean.leader.election.enable"


def topic_config_path(topic: str) -> str:
    return f"{TOPIC_CONFIG_PATH}/{topic}"


def encode_overrides(overrides: Mapping[str, Any]) -> bytes:
    """The config node's data: Kafka's {"version": 1, "config": {...}}, values as the
    strings Kafka keeps in its properties."""
    strings = {key: _kafka_string(overrides[key]) for key in sorted(overrides)}
    return coord.encode_data({"version": 1, "config": strings})


def _kafka_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def decode_overrides(raw: bytes | None) -> dict[str, Any] | None:
    """The topic keys isrlab models, typed; keys it does not model are left out. None if
    the node does not parse or a modelled key's value is not valid (Kafka's LogConfig
    refuses the whole config then, and the logs keep the one they had)."""
    config = _node_config(raw)
    return None if config is None else modelled_overrides(config)


def modelled_overrides(config: Mapping[str, Any]) -> dict[str, Any] | None:
    """``config``'s keys that TOPIC_KEYS models, typed (None: one does not parse)."""
    out: dict[str, Any] = {}
    for key in sorted(config):
        if key not in TOPIC_KEYS:
            continue
        parsed = _parse_value(TOPIC_KEYS[key], config[key], TOPIC_KEYS_KAFKA[key][0] if key in TOPIC_KEYS_KAFKA else "")
        if parsed is None:
            return None
        out[key] = parsed
    return out


def _parse_value(attribute: str, text: Any, kind: str = "") -> Any:
    """A typed value, by the key's ConfigDef type in Kafka's table (broker_core/
    kafka_config_keys.py): bool, int, float (DOUBLE), the text itself (STRING, LIST), or
    None when it does not parse. Typed Any on purpose: mypyc reads ``bool | int`` as
    ``int`` (bool is an int to mypy) and would hand back 1 for True, which BrokerConfig's
    bool fields refuse."""
    if not isinstance(text, str):
        return None
    if attribute in BOOL_KEYS or kind == "BOOLEAN":  # ConfigDef's BOOLEAN: true or false, in any case
        lowered = text.strip().lower()
        return True if lowered == "true" else False if lowered == "false" else None
    if kind in ("STRING", "LIST"):
        return text.strip()
    if kind == "DOUBLE":
        try:
            return float(text.strip())
        except ValueError:
            return None
    try:
        return int(text.strip())
    except ValueError:
        return None


def entity_config(raw: bytes | None) -> dict[str, str] | None:
    """A config node's {"version": 1, "config": {...}} as the strings Kafka keeps, every
    key (modelled or not); None if it does not parse. No node is no config (2.7.0
    AdminZkClient.fetchEntityConfig answers empty properties)."""
    config = _node_config(raw)
    if config is None or not all(isinstance(v, str) for v in config.values()):
        return None
    return {str(k): config[k] for k in sorted(config)}


def _node_config(raw: bytes | None) -> dict | None:
    """The "config" object of a config node ({"version": 1, "config": {...}}): empty for
    no node, None when it does not parse."""
    if not raw:
        return {}
    try:
        value = coord.decode_data(raw)
    except ValueError:
        return None
    config = value.get("config") if isinstance(value, dict) else None
    return config if isinstance(config, dict) else None


def write_entity_config(entity_type: str, name: str, configs: Mapping[str, str]):
    """2.7.0 AdminZkClient.changeEntityConfig: set (or create) /config/<type>/<name>, then
    the sequential change notification naming it (version 2, ``entity_path``). A task
    returning whether the store took both."""
    path = f"/config/{entity_type}/{name}"
    data = coord.encode_data({"version": 1, "config": dict(sorted(configs.items()))})
    written = yield coord.SetData(path, data)
    if not written.ok and written.error == coord.NO_NODE:
        written = yield coord.Create(path, data, make_parents=True)
    if not written.ok:
        return False
    note = coord.encode_data({"version": 2, "entity_path": f"{entity_type}/{name}"})
    noted = yield coord.Create(f"{CONFIG_CHANGES_PATH}/{CHANGE_PREFIX}", note, make_parents=True, sequential=True)
    return noted.ok


def change_notification(topic: str) -> bytes:
    """2.7.0 ConfigEntityChangeNotificationSequenceZNode.encode: version 2, the entity path."""
    return coord.encode_data({"version": 2, "entity_path": f"topics/{topic}"})


def notified_topic(raw: bytes | None) -> str | None:
    """The topic a notification names (None if it names none)."""
    entity = notified_entity(raw)
    return entity[1] if entity is not None and entity[0] == "topics" else None


def notified_entity(raw: bytes | None) -> tuple[str, str] | None:
    """(entity type, name) of a notification: 2.7.0's version 2 (``entity_path``) or
    version 1 (``entity_type``, ``entity_name``), or 0.8.2.2's JSON string of a topic's
    name. Topics, brokers and the quota entities (clients, users; a user's client is
    ``users``, ``<u>/clients/<c>``) are read; any other type is ignored, as 2.7.0's
    listener ignores a type it has no handler for."""
    try:
        value = json.loads(raw) if raw else None
    except ValueError:
        return None
    if isinstance(value, str):
        return ("topics", value) if value else None
    if not isinstance(value, dict):
        return None
    kind: Any = value.get("entity_type")
    name: Any = value.get("entity_name")
    if value.get("version") == 2:
        path = value.get("entity_path")
        kind, _, name = path.partition("/") if isinstance(path, str) else ("", "", "")
    if kind in ENTITY_TYPES and isinstance(name, str) and name:
        return kind, name
    return None


def change_number(name: str) -> int | None:
    if not name.startswith(CHANGE_PREFIX) or not name[len(CHANGE_PREFIX):].isdigit():
        return None
    return int(name[len(CHANGE_PREFIX):])


def change_topic_config(store: AdminStore, topic: str, changes: Mapping[str, Any]) -> dict[str, Any] | None:
    """What ``kafka-configs.sh --alter --entity-type topics --add-config`` does (2.7.0
    ConfigCommand.alterConfig then AdminZkClient.changeTopicConfig): add the changes to the
    topic's current overrides, write them to its config node, then create the change
    notification. Returns the overrides written, or None when the topic does not exist
    (the tool refuses then)."""
    if store.get(coord.topic_path(topic)) is None:
        return None
    current = decode_overrides(store.get(topic_config_path(topic))) or {}
    overrides = {**current, **changes}
    store.put(topic_config_path(topic), encode_overrides(overrides))
    store.put_sequential(f"{CONFIG_CHANGES_PATH}/{CHANGE_PREFIX}", change_notification(topic))
    return dict(sorted(overrides.items()))


def reconfigure_logs(topic: str, config: BrokerConfig, partitions: Mapping[TopicPartition, Partition],
                     recovered: Mapping[TopicPartition, PartitionLog]) -> None:
    """Give the topic's partitions and logs the new config (2.7.0 Log.updateConfig; 0.8.2.2
    ``log.config =``): what reads it later sees it (min.insync.replicas at the next append
    or acks=all check, flush settings at the next append or flusher run, segment.bytes at
    the next roll, index.interval.bytes at the next append)."""
    for tp in sorted(partitions):
        if tp.topic == topic:
            partitions[tp].config = config
            _reconfigure_log(partitions[tp].log, config)
    for tp in sorted(recovered):
        if tp.topic == topic:
            _reconfigure_log(recovered[tp], config)


def _reconfigure_log(log: PartitionLog, config: BrokerConfig) -> None:
    configure_log(log, config)


def configure_log(log: PartitionLog, config: BrokerConfig) -> None:
    """The settings a log reads itself (retention's are read by each check)."""
    log.segment_bytes = config.log_segment_bytes
    log.index_interval_bytes = config.log_index_interval_bytes
    log.roll_ms = config.roll_ms
    log.roll_jitter_ms = config.roll_jitter_ms


class TopicConfigListener:
    """A broker's reader of topic, broker and client quota configs: every topic's at its
    first session, then the change notifications. ``on_config(topic, configs)`` gets each
    topic config read, ``on_broker_config(entity, configs)`` each broker config (entity:
    an id or <default>), ``on_quota_config(path, configs)`` each quota node of a user or
    client; configs as the strings the node holds, every key. One reader for every entity
    type, as Kafka has one listener with a handler per type (``_route``)."""

    def __init__(self, ctx: NodeContext, on_config: Callable[[str, dict[str, str]], None],
                 on_broker_config: Callable[[str, dict[str, str]], None] | None = None,
                 on_quota_config: Callable[[str, dict[str, str]], None] | None = None):
        self.ctx = ctx
        self.on_config = on_config
        self.on_broker_config = on_broker_config
        # client quotas (broker_core/quota_enforcement.py): called with the node's path,
        # /config/clients/<c>, /config/users/<u> or /config/users/<u>/clients/<c>
        self.on_quota_config = on_quota_config
        self.last_change = -1  # lastExecutedChange: kept across sessions, as Kafka's listener keeps it
        self.loaded = False
        self._running = False
        self._again = False

    def session_started(self) -> None:
        """A session's tasks died with the previous one; start over on this one (2.7.0
        ZkNodeChangeNotificationListener's state-change handler processes the
        notifications again after a new session)."""
        self._running = False
        self._again = False
        self.ctx.tasks.start(self._process() if self.loaded else self._startup())

    def changes_notified(self) -> None:
        """The watch on /config/changes fired: read the new notifications, one reader at
        a time (Kafka's listener runs on one thread)."""
        if self._running:
            self._again = True
            return
        self.ctx.tasks.start(self._process())

    def _startup(self):
        self._running = True
        listed = yield coord.GetChildren(TOPIC_CONFIG_PATH)
        for topic in sorted(listed.children if listed.ok else ()):
            data = yield coord.GetData(topic_config_path(topic))
            configs = entity_config(data.data) if data.ok else None
            if configs is not None:
                self.on_config(topic, configs)
        self.loaded = True
        yield from self._process()

    def _process(self):
        """The notifications above the last one handled, in order. Broker and quota
        entities have no startup read of their own: isrlab never purges notifications
        (Kafka purges them after 15 minutes and reads every /config/brokers, clients and
        users node at startup), so the first pass over them reads every broker config and
        quota ever changed. Reading no more than that keeps a run without them making the
        same coordination requests as before (the simulation's traces unchanged)."""
        self._running = True
        again = True
        while again:
            self._again = False
            listed = yield coord.GetChildren(CONFIG_CHANGES_PATH, watch=True)
            numbered = []
            for name in listed.children if listed.ok else ():
                number = change_number(name)
                if number is not None and number > self.last_change:
                    numbered.append((number, name))
            for number, name in sorted(numbered):
                note = yield coord.GetData(f"{CONFIG_CHANGES_PATH}/{name}")
                entity = notified_entity(note.data) if note.ok else None
                if entity is not None:
                    data = yield coord.GetData(f"/config/{entity[0]}/{entity[1]}")
                    # a missing node means no overrides (2.7.0 fetchEntityConfig: empty properties)
                    configs = entity_config(data.data) if data.ok else {}
                    if configs is not None:  # else not a config node Kafka could read: the configs in effect stay
                        self._route(entity, configs)
                self.last_change = number
            again = self._again
        self._running = False

    def _route(self, entity: tuple[str, str], configs: dict[str, str]) -> None:
        """Each entity type to its handler, as 2.7.0 DynamicConfigManager's
        ``configHandlers`` map does (TopicConfigHandler, BrokerConfigHandler,
        QuotaConfigHandler for users and clients alike)."""
        kind, name = entity
        if kind == "topics":
            self.on_config(name, configs)
        elif kind == "brokers":
            if self.on_broker_config is not None:
                self.on_broker_config(name, configs)
        elif self.on_quota_config is not None:  # clients, users (QUOTA_ENTITY_TYPES)
            self.on_quota_config(f"/config/{kind}/{name}", configs)
