"""What DescribeConfigs answers for a broker or a topic: every key of Kafka 2.7.0's
ConfigDefs (broker_core/kafka_config_keys.py), its value, where the value comes from,
and the synonyms it fell back through (2.7.0 AdminManager.describeConfigs,
createTopicConfigEntry, createBrokerConfigEntry, configSynonyms; DynamicBrokerConfig
.brokerConfigSynonyms).

A broker value comes from the first of four layers that has it: the broker's dynamic
config (/config/brokers/<id>), the cluster's dynamic default (/config/brokers/<default>),
the static config the broker started with, Kafka's default. A topic value is the
topic's override, else what the topic's broker key resolves to (KafkaServer
.copyKafkaConfigToLog: retention.ms from log.retention.ms, else minutes, else hours).

isrlab has no server.properties: a key counts as static when the broker's BrokerConfig
(profile and --config) gives it a value other than Kafka's default, and broker.id always.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Mapping

from broker_core.config import ISRLAB_KEYS, BrokerConfig, kafka_name
from broker_core.kafka_config_keys import BROKER_KEYS, TOPIC_KEYS_KAFKA

TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 2, 3, 4, 5
# DescribeConfigsResponse.ConfigType ids (v3+)
CONFIG_TYPES = {"BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6, "LIST": 7, "CLASS": 8,
                "PASSWORD": 9}

# DynamicBrokerConfig.brokerConfigSynonyms: broker keys that name one setting in several units
_SYNONYMS = (("log.roll.ms", "log.roll.hours"), ("log.roll.jitter.ms", "log.roll.jitter.hours"),
             ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
             ("log.retention.ms", "log.retention.minutes", "log.retention.hours"))
# KafkaConfig's derived values (logRetentionTimeMillis, logRollTimeMillis, ...): the
# factor to milliseconds of each synonym, the first with a value wins
_TO_MS = {"log.roll.ms": 1, "log.roll.hours": 3600000, "log.roll.jitter.ms": 1, "log.roll.jitter.hours": 3600000,
          "log.flush.interval.ms": 1, "log.flush.scheduler.interval.ms": 1, "log.retention.ms": 1,
          "log.retention.minutes": 60000, "log.retention.hours": 3600000}


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: int


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    read_only: bool
    sensitive: bool
    config_type: int
    synonyms: tuple[ConfigSynonym, ...]


@dataclass
class ConfigLayers:
    """A broker's config as DescribeConfigs sees it: the static layer (Kafka names and
    texts) and the dynamic ones read from the coordination store."""
    static: dict[str, str]
    dynamic_default: dict[str, str] = field(default_factory=dict)
    dynamic_broker: dict[str, str] = field(default_factory=dict)

    def ordered(self, per_broker: bool = True) -> tuple[tuple[Mapping[str, str], int], ...]:
        defaults = {name: row[1] for name, row in BROKER_KEYS.items() if row[1] is not None}
        layers = ((self.dynamic_broker, DYNAMIC_BROKER_CONFIG), (self.dynamic_default, DYNAMIC_DEFAULT_BROKER_CONFIG),
                  (self.static, STATIC_BROKER_CONFIG), (defaults, DEFAULT_CONFIG))
        return layers if per_broker else layers[1:2]

    def value(self, name: str) -> str | None:
        for layer, _ in self.ordered():
            if name in layer:
                return layer[name]
        return None


def config_text(value: object) -> str | None:
    if value is None:
        return None
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def static_layer(broker_id: int, config: BrokerConfig) -> dict[str, str]:
    """The Kafka keys the broker's config sets to other than Kafka's default (isrlab's
    own keys are not Kafka's and stay out)."""
    static = {"broker.id": str(broker_id)}
    for f in fields(config):
        name = kafka_name(f.name)
        if f.name in ISRLAB_KEYS or name not in BROKER_KEYS:
            continue
        text = config_text(getattr(config, f.name))
        if text is not None and text != BROKER_KEYS[name][1]:
            static[name] = text
    return dict(sorted(static.items()))


def _synonym_names(name: str) -> tuple[str, ...]:
    for group in _SYNONYMS:
        if name in group:
            return group
    return (name,)


def _synonyms(layers: ConfigLayers, name: str, per_broker: bool = True) -> list[ConfigSynonym]:
    """AdminManager.configSynonyms: each layer in precedence order, each synonym within
    it; then the ones before ``name`` itself dropped (they describe another unit)."""
    sensitive = BROKER_KEYS[name][0] == "PASSWORD" if name in BROKER_KEYS else False
    found = [ConfigSynonym(synonym, None if sensitive else layer[synonym], source)
             for layer, source in layers.ordered(per_broker) for synonym in _synonym_names(name) if synonym in layer]
    while found and found[0].name != name:
        found.pop(0)
    return found


def describe_broker(layers: ConfigLayers, per_broker: bool, include_synonyms: bool,
                    keys: tuple[str, ...] | None) -> list[ConfigEntry]:
    """createBrokerConfigEntry over every broker key (per broker), or over the keys the
    cluster default sets (the resource named "")."""
    names = sorted(BROKER_KEYS) if per_broker else sorted(k for k in layers.dynamic_default if k in BROKER_KEYS)
    entries = []
    for name in names:
        if keys is not None and name not in keys:
            continue
        kind, _, mode = BROKER_KEYS[name]
        synonyms = _synonyms(layers, name, per_broker)
        sensitive = kind == "PASSWORD"
        value = None if sensitive else (layers.value(name) if per_broker else layers.dynamic_default.get(name))
        entries.append(ConfigEntry(name, value, synonyms[0].source if synonyms else DEFAULT_CONFIG,
                                   mode == "read-only", sensitive, CONFIG_TYPES.get(kind, 0),
                                   tuple(synonyms) if include_synonyms else ()))
    return entries


def _topic_default(layers: ConfigLayers, key: str) -> str | None:
    kind, default, _, server_key = TOPIC_KEYS_KAFKA[key]
    if server_key is None:
        return default
    if server_key in _TO_MS:
        for synonym in _synonym_names(server_key):
            text = layers.value(synonym)
            if text is not None:
                return str(int(text) * _TO_MS[synonym])
        return default
    text = layers.value(server_key)
    return default if text is None else text


def describe_topic(layers: ConfigLayers, overrides: Mapping[str, str], include_synonyms: bool,
                   keys: tuple[str, ...] | None) -> list[ConfigEntry]:
    """createTopicConfigEntry over every topic key: the override first (TOPIC_CONFIG),
    then the synonyms of the broker key it falls back to."""
    entries = []
    for name in sorted(TOPIC_KEYS_KAFKA):
        if keys is not None and name not in keys:
            continue
        kind, _, _, server_key = TOPIC_KEYS_KAFKA[name]
        synonyms = _synonyms(layers, server_key) if server_key else []
        if name in overrides:
            synonyms.insert(0, ConfigSynonym(name, overrides[name], TOPIC_CONFIG))
        value = overrides[name] if name in overrides else _topic_default(layers, name)
        entries.append(ConfigEntry(name, value, synonyms[0].source if synonyms else DEFAULT_CONFIG, False,
                                   kind == "PASSWORD", CONFIG_TYPES.get(kind, 0),
                                   tuple(synonyms) if include_synonyms else ()))
    return entries


def _typed(kind: str, text: str) -> object:
    if kind == "BOOLEAN":
        return text.strip().lower() == "true"
    if kind in ("INT", "LONG", "SHORT"):
        return int(text.strip())
    if kind == "DOUBLE":
        return float(text.strip())
    return text


def effective_config(static: BrokerConfig, layers: ConfigLayers) -> BrokerConfig:
    """The config the broker runs with: its static config, then the cluster default's
    dynamic values, then its own (DynamicBrokerConfig.updateCurrentConfig's precedence),
    for the keys BrokerConfig models; a dynamic key it does not model changes nothing.
    Raises ConfigError when a value is refused."""
    modelled = {f.name for f in fields(static) if f.name not in ISRLAB_KEYS}
    overrides: dict[str, object] = {}
    for layer in (layers.dynamic_default, layers.dynamic_broker):
        for name in sorted(layer):
            attribute = name.replace(".", "_")
            if attribute in modelled and name in BROKER_KEYS:
                overrides[attribute] = _typed(BROKER_KEYS[name][0], layer[name])
    return static.with_overrides(overrides)
