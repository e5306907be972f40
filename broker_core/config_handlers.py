"""What a broker does with a config it read from the coordination store: a topic's
overrides or a broker entity's dynamic config (2.7.0 server/ConfigHandler.scala,
``TopicConfigHandler`` and ``BrokerConfigHandler``; 0.8.2.2 TopicConfigManager).

How the configs are read (the change notifications, the startup read) is
``dynamic_config.TopicConfigListener``; these are the steps that follow, kept apart from
``broker.py`` because they are one concern of their own: each takes the node and works
on its config state (``config``, ``topic_configs``, ``topic_overrides``,
``config_layers``) and on the parts that run with a config (the logs, the cleaner, the
replication throttles, the controller's unclean elections).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from broker_core.config import topic_config
from broker_core.config_describe import effective_config
from broker_core.dynamic_config import DEFAULT_ENTITY, UNCLEAN_KEY, modelled_overrides, reconfigure_logs
from broker_core.errors import ConfigError

if TYPE_CHECKING:  # the node imports this module
    from broker_core.broker import BrokerNode


def topic_config_read(node: BrokerNode, topic: str, configs: dict[str, str]) -> None:
    """2.7.0 TopicConfigHandler.processConfigChanges (0.8.2.2 TopicConfigManager
    .processConfigChanges): the topic's logs take the broker's config overridden by
    the topic's; in 2.7 overrides that enable unclean election also ask the active
    controller to elect the topic's offline partitions."""
    overrides = modelled_overrides(configs)
    if overrides is None:
        return  # LogConfig refuses it: the logs keep their config
    try:
        config = topic_config(node.config, overrides)
    except ConfigError:
        return
    replicas = node.replicas
    replicas.replication_quotas.apply_topic_config(topic, configs)  # TopicConfigHandler's updateThrottledList
    node.topic_overrides[topic] = configs
    if config != replicas.config_for(topic):
        node.topic_configs[topic] = config
        reconfigure_logs(topic, config, replicas.partitions, replicas.recovered_logs)
        node.ctx.trace("topic_config_changed", topic=topic, overrides=dict(sorted(overrides.items())))
        node.cleaner.maybe_start([config])
    if overrides.get(UNCLEAN_KEY) is True and node.config.unclean_enable_triggers_election:
        node.controller.enqueue(("topic_unclean_leader_election_enable", topic))


def broker_config_read(node: BrokerNode, entity: str, configs: dict[str, str]) -> None:
    """2.7.0 BrokerConfigHandler.processConfigChanges: the cluster default's or this
    broker's dynamic config changed (another broker's is not ours). The broker's
    config becomes the static one with the dynamic layers on top, and every log
    takes it, under its topic's overrides (DynamicLogConfig.reconfigure)."""
    layers = node.config_layers
    own = entity == str(node.broker_id)
    if own:  # BrokerConfigHandler: the throttled rates are this broker's only
        try:
            node.replicas.replication_quotas.apply_broker_config({  # the static rates under the node's
                "leader.replication.throttled.rate": node.static_config.leader_replication_throttled_rate,
                "follower.replication.throttled.rate": node.static_config.follower_replication_throttled_rate,
                **configs})
        except ConfigError:
            pass  # a refused rate leaves the throttles as they were (DynamicConfig.Broker validation)
    if entity == DEFAULT_ENTITY:
        before, layers.dynamic_default = layers.dynamic_default, dict(configs)
    elif own:
        before, layers.dynamic_broker = layers.dynamic_broker, dict(configs)
    else:
        return
    try:
        config = effective_config(node.static_config, layers)
    except ConfigError:  # refused: the broker keeps its config, and shows what it keeps
        if entity == DEFAULT_ENTITY:
            layers.dynamic_default = before
        else:
            layers.dynamic_broker = before
        return
    node.ctx.trace("broker_config_changed", entity=entity, configs=dict(sorted(configs.items())))
    if config == node.config:
        return
    node.config = node.ctx.config = config
    _reconfigure_topics(node)


def _reconfigure_topics(node: BrokerNode) -> None:
    """The broker's config changed: every topic's config is the new one under the
    topic's overrides (as stored, else as the runtime gave them at start), and every
    log takes its topic's."""
    config, replicas = node.config, node.replicas
    for topic in sorted(set(node.topic_overrides) | set(node.topic_configs)):
        stored = node.topic_overrides.get(topic)
        overrides = node.initial_overrides.get(topic, {}) if stored is None else modelled_overrides(stored) or {}
        try:
            node.topic_configs[topic] = topic_config(config, overrides)
        except ConfigError:
            node.topic_configs.pop(topic, None)
    for topic in sorted({tp.topic for tp in replicas.partitions} | {tp.topic for tp in replicas.recovered_logs}):
        reconfigure_logs(topic, replicas.config_for(topic), replicas.partitions, replicas.recovered_logs)
    node.cleaner.maybe_start([config, *node.topic_configs.values()])
