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
from broker_core.config import BOOL_KEYS, CLEANER_TEXT_KEYS, TOPIC_KEYS, BrokerConfig, parse_cleaner_text
from broker_core.context import NodeContext
from broker_core.coordination_store import CoordinationStore
from broker_core.log import PartitionLog
from broker_core.partition import Partition
from broker_core.topic_admin import TOPIC_CONFIG_PATH
from broker_core.types import TopicPartition

CONFIG_CHANGES_PATH = "/config/changes"
CHANGE_PREFIX = "config_change_"  # 2.7.0 ConfigEntityChangeNotificationSequenceZNode; 0.8.2.2 TopicConfigChangeZnodePrefix
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
    if not raw:
        return {}
    try:
        value = coord.decode_data(raw)
    except ValueError:
        return None
    config = value.get("config") if isinstance(value, dict) else None
    if not isinstance(config, dict):
        return None
    out: dict[str, Any] = {}
    for key in sorted(config):
        if key not in TOPIC_KEYS:
            continue
        parsed = _parse_value(TOPIC_KEYS[key], config[key])
        if parsed is None:
            return None
        out[key] = parsed
    return out


def _parse_value(attribute: str, text: Any) -> Any:
    """A typed value: bool, int, or None when it does not parse. Typed Any on purpose:
    mypyc reads ``bool | int`` as ``int`` (bool is an int to mypy) and would hand back 1
    for True, which BrokerConfig's bool fields refuse."""
    if not isinstance(text, str):
        return None
    if attribute in CLEANER_TEXT_KEYS:  # a float ratio and a policy list (log compaction)
        return parse_cleaner_text(attribute, text)
    if attribute in BOOL_KEYS:  # ConfigDef's BOOLEAN: true or false, in any case
        lowered = text.strip().lower()
        return True if lowered == "true" else False if lowered == "false" else None
    try:
        return int(text.strip())
    except ValueError:
        return None


def change_notification(topic: str) -> bytes:
    """2.7.0 ConfigEntityChangeNotificationSequenceZNode.encode: version 2, the entity path."""
    return coord.encode_data({"version": 2, "entity_path": f"topics/{topic}"})


def notified_topic(raw: bytes | None) -> str | None:
    """The topic a notification names: 2.7.0's version 2 (``entity_path``) or version 1
    (``entity_type``, ``entity_name``), or 0.8.2.2's JSON string of the topic's name."""
    try:
        value = json.loads(raw) if raw else None
    except ValueError:
        return None
    if isinstance(value, str):
        return value or None
    if not isinstance(value, dict):
        return None
    if value.get("version") == 2:
        path = value.get("entity_path")
        if isinstance(path, str) and path.startswith("topics/"):
            return path[len("topics/"):] or None
        return None
    if value.get("entity_type") == "topics" and isinstance(value.get("entity_name"), str):
        return value["entity_name"] or None
    return None


def change_number(name: str) -> int | None:
    if not name.startswith(CHANGE_PREFIX) or not name[len(CHANGE_PREFIX):].isdigit():
        return None
    return int(name[len(CHANGE_PREFIX):])


def change_topic_config(store: CoordinationStore, topic: str, changes: Mapping[str, Any]) -> dict[str, Any] | None:
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
    log.segment_bytes = config.log_segment_bytes
    log.index_interval_bytes = config.log_index_interval_bytes


class TopicConfigListener:
    """A broker's reader of topic configs: all of them at its first session, then the
    change notifications. ``on_config(topic, overrides)`` gets each config read."""

    def __init__(self, ctx: NodeContext, on_config: Callable[[str, dict[str, Any]], None],
                 on_other: Callable[[bytes | None], Any] | None = None):
        self.ctx = ctx
        self.on_config = on_config
        # a task step for each notification naming no topic (client quotas: broker_core/quota_config.py)
        self.on_other = on_other
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
            overrides = decode_overrides(data.data) if data.ok else None
            if overrides is not None:
                self.on_config(topic, overrides)
        self.loaded = True
        yield from self._process()

    def _process(self):
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
                topic = notified_topic(note.data) if note.ok else None
                if topic is None and note.ok and self.on_other is not None:
                    yield from self.on_other(note.data)
                if topic is not None:
                    data = yield coord.GetData(topic_config_path(topic))
                    # a missing node means no overrides (2.7.0 fetchEntityConfig: empty properties)
                    overrides = decode_overrides(data.data) if data.ok else {}
                    if overrides is not None:
                        self.on_config(topic, overrides)
                self.last_change = number
            again = self._again
        self._running = False
