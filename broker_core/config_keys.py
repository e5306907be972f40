"""Checking and combining Kafka-named config values, read from the generated tables of
broker_core/kafka_config_keys.py (Kafka 2.7.0's ConfigDefs), so that every key Kafka
has is validated and described alike and no key needs code of its own.

The rules, from 2.7.0: a value is parsed by its ConfigDef type and then checked by the
key's validator (clients/.../config/ConfigDef.java parseType, Range.atLeast/between,
ValidString.in, ValidList.in); topic keys are checked as LogConfig.validate does
(names first: an unknown one is InvalidConfigurationException, INVALID_CONFIG; then
values: ConfigException); incremental operations combine as AdminManager
.prepareIncrementalConfigs does; broker keys may change at run time only if
DynamicBrokerConfig.AllDynamicConfigs has them, and per broker only
(PerBrokerConfigs) if so marked.

Which keys the core *models* is a separate, smaller table: ``TOPIC_KEYS`` in
broker_core/config.py (Kafka topic key -> BrokerConfig attribute). A key Kafka has and
isrlab does not model is accepted, stored and described, and changes nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from broker_core.kafka_config_keys import BROKER_KEYS, DYNAMIC_BROKER_KEYS, TOPIC_KEYS_KAFKA

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # IncrementalAlterConfigs' config_operation (AlterConfigOp.OpType)
OPERATIONS = (SET, DELETE, APPEND, SUBTRACT)
_INTEGER_BOUNDS = {"INT": (-2**31, 2**31 - 1), "LONG": (-2**63, 2**63 - 1), "SHORT": (-2**15, 2**15 - 1)}


class InvalidConfig(Exception):
    """A config Kafka refuses. ``unknown``: the name (InvalidConfigurationException,
    INVALID_CONFIG); otherwise the value (ConfigException, whose error code depends on
    the API: INVALID_CONFIG at CreateTopics, INVALID_REQUEST at AlterConfigs)."""

    def __init__(self, key: str, message: str, unknown: bool = False):
        super().__init__(message)
        self.key = key
        self.message = message
        self.unknown = unknown


@dataclass(frozen=True, slots=True)
class ConfigOp:
    """One config of an AlterConfigs (always SET) or IncrementalAlterConfigs resource."""
    name: str
    operation: int
    value: str | None


def check_value(key: str, kind: str, validator: tuple, text: str) -> None:
    """ConfigDef.parseType then the validator, with Kafka's messages."""
    value = text.strip()
    if kind in _INTEGER_BOUNDS:
        try:
            number = float(int(value))  # (a float: mypyc keeps int and float apart; the bounds checked below are ints)
        except ValueError:
            raise InvalidConfig(key, _invalid(key, text, f"Not a number of type {kind}")) from None
        low, high = _INTEGER_BOUNDS[kind]
        if not low <= int(value) <= high:
            raise InvalidConfig(key, _invalid(key, text, f"Not a number of type {kind}"))
    elif kind == "DOUBLE":
        try:
            number = float(value)
        except ValueError:
            raise InvalidConfig(key, _invalid(key, text, "Not a number of type DOUBLE")) from None
    elif kind == "BOOLEAN":
        if value.lower() not in ("true", "false"):
            raise InvalidConfig(key, _invalid(key, text, "Expected value to be either true or false"))
        return
    else:
        number = 0.0
    _validate(key, validator, text, value, number)


def _validate(key: str, validator: tuple, text: str, value: str, number: float) -> None:
    if not validator:
        return
    rule = validator[0]
    if rule == "at_least" and number < validator[1]:
        raise InvalidConfig(key, _invalid(key, text, f"Value must be at least {validator[1]}"))
    if rule == "between" and not validator[1] <= number <= validator[2]:
        bound = f"at least {validator[1]}" if number < validator[1] else f"no more than {validator[2]}"
        raise InvalidConfig(key, _invalid(key, text, f"Value must be {bound}"))
    if rule == "in" and value not in validator[1]:
        raise InvalidConfig(key, _invalid(key, text, f"String must be one of: {', '.join(validator[1])}"))
    if rule == "list_in":
        for item in split_list(value):
            if item not in validator[1]:
                raise InvalidConfig(key, _invalid(key, item, f"String must be one of: {', '.join(validator[1])}"))


def _invalid(key: str, text: str, why: str) -> str:
    return f"Invalid value {text} for configuration {key}: {why}"


def split_list(text: str) -> list[str]:
    """ConfigDef's LIST: comma-separated, trimmed; the empty string is the empty list."""
    return [item.strip() for item in text.split(",")] if text.strip() else []


def validate_topic_configs(configs: Mapping[str, str]) -> None:
    """LogConfig.validate (2.7.0): every name must be a topic key, then every value must
    parse and pass its validator."""
    for key in sorted(configs):
        if key not in TOPIC_KEYS_KAFKA:
            raise InvalidConfig(key, f"Unknown topic config name: {key}", unknown=True)
    for key in sorted(configs):
        kind, _, validator, _ = TOPIC_KEYS_KAFKA[key]
        check_value(key, kind, validator, configs[key])


def validate_broker_configs(configs: Mapping[str, str], per_broker: bool) -> None:
    """DynamicBrokerConfig.validateConfigs (2.7.0): only dynamic keys; per-broker-only
    keys not at the cluster default; values of their type (and, for the broker keys
    topic keys fall back to, the topic key's validator). Kafka 2.7 stores names it does
    not know and ignores them; isrlab refuses them (INVALID_CONFIG), so that what is
    stored is what DescribeConfigs can show. DynamicConfig.Broker's keys (the replication
    throttle rates) are known too, with their own validators (DynamicConfig.Broker
    .validate); the broker applies them from its own entity only (BrokerConfigHandler)."""
    unknown = sorted(key for key in configs if key not in BROKER_KEYS and key not in DYNAMIC_BROKER_KEYS)
    if unknown:
        raise InvalidConfig(unknown[0], f"Unknown broker config name: {unknown[0]}", unknown=True)
    for key in sorted(k for k in configs if k in DYNAMIC_BROKER_KEYS):
        kind, _, validator = DYNAMIC_BROKER_KEYS[key]
        check_value(key, kind, validator, configs[key])
    configs = {k: v for k, v in configs.items() if k not in DYNAMIC_BROKER_KEYS}
    fixed = sorted(key for key in configs if BROKER_KEYS[key][2] == "read-only")
    if fixed:
        raise InvalidConfig(fixed[0], f"Cannot update these configs dynamically: Set({', '.join(fixed)})")
    if not per_broker:
        only_per_broker = sorted(key for key in configs if BROKER_KEYS[key][2] == "per-broker")
        if only_per_broker:
            raise InvalidConfig(only_per_broker[0], "Cannot update these configs at default cluster level, broker id "
                                                    f"must be specified: Set({', '.join(only_per_broker)})")
    validators = {server: row[2] for row in TOPIC_KEYS_KAFKA.values() for server in [row[3]] if server}
    for key in sorted(configs):
        check_value(key, BROKER_KEYS[key][0], validators.get(key, ()), configs[key])


def key_type(key: str, topic: bool) -> str | None:
    row = TOPIC_KEYS_KAFKA.get(key) if topic else BROKER_KEYS.get(key) or DYNAMIC_BROKER_KEYS.get(key)
    return row[0] if row is not None else None


def apply_operations(current: Mapping[str, str], ops: tuple[ConfigOp, ...], topic: bool) -> dict[str, str]:
    """AdminManager.prepareIncrementalConfigs (2.7.0): SET and DELETE one key; APPEND and
    SUBTRACT only on LIST keys, starting from the key's current value or its default."""
    configs = dict(current)
    for op in ops:
        if op.operation == SET:
            configs[op.name] = op.value or ""
        elif op.operation == DELETE:
            configs.pop(op.name, None)
        else:
            kind = key_type(op.name, topic)
            if kind is None:
                raise InvalidConfig(op.name, f"Unknown topic config name: {op.name}", unknown=True)
            verb = "append" if op.operation == APPEND else "subtract"
            if kind != "LIST":
                raise InvalidConfig(op.name, f"Config value {verb} is not allowed for config key: {op.name}")
            default = (TOPIC_KEYS_KAFKA[op.name][1] if topic else BROKER_KEYS[op.name][1]) or ""
            old = configs.get(op.name, default).split(",")
            given = (op.value or "").split(",")
            new = old + given if op.operation == APPEND else [item for item in old if item not in given]
            configs[op.name] = ",".join(new)
    return configs
