"""AlterConfigs and IncrementalAlterConfigs: a broker validates a resource's new config
and writes it where Kafka's ZooKeeper layout keeps it, followed by a change
notification that every broker's config listener reads (broker_core/dynamic_config.py).

Kafka 2.7.0 AdminManager.alterConfigs / incrementalAlterConfigs, resource by resource:
- a topic: it must be in this broker's metadata (UNKNOWN_TOPIC_OR_PARTITION); AlterConfigs
  replaces its overrides, IncrementalAlterConfigs applies SET/DELETE/APPEND/SUBTRACT to
  the ones in /config/topics/<topic>; then LogConfig.validate and
  AdminZkClient.changeTopicConfig (the node, then /config/changes/config_change_<n>);
- a broker, named by its id (only this broker's: INVALID_REQUEST otherwise) or "" for
  the cluster default: DynamicBrokerConfig.validate, then AdminZkClient.changeBrokerConfig
  into /config/brokers/<id> or /config/brokers/<default>;
- a null value (but for DELETE), a key named twice, another resource type:
  INVALID_REQUEST. An unknown topic key is INVALID_CONFIG; a bad value is INVALID_REQUEST
  with "Invalid config value for resource ...", as AdminManager wraps ConfigException.
``validate_only`` stops before the writes. Each resource gets its own answer; one
resource's failure does not stop the others.
"""
from __future__ import annotations

from typing import Callable, Hashable

from broker_core import coordination as coord
from broker_core.config_keys import (
    DELETE, SET, ConfigOp, InvalidConfig, apply_operations, validate_broker_configs, validate_topic_configs)
from broker_core.context import NodeContext
from broker_core.dynamic_config import (
    BROKER_CONFIG_PATH, DEFAULT_ENTITY, entity_config, topic_config_path, write_entity_config)
from broker_core.errors import ErrorCode
from broker_core.messages import AlterConfigsRequest, AlterConfigsResponse, ConfigResourceChange, ConfigResourceResult

RESOURCE_TOPIC, RESOURCE_BROKER = 2, 4  # ConfigResource.Type ids


class _Refused(Exception):
    def __init__(self, error: ErrorCode, message: str):
        super().__init__(message)
        self.error = error
        self.message = message


def _write(entity_type: str, name: str, configs: dict[str, str]):
    if not (yield from write_entity_config(entity_type, name, configs)):
        raise _Refused(ErrorCode.UNKNOWN_SERVER_ERROR, f"the coordination store refused /config/{entity_type}/{name}")


def _resource_text(change: ConfigResourceChange) -> str:
    kind = {RESOURCE_TOPIC: "TOPIC", RESOURCE_BROKER: "BROKER"}.get(change.resource_type, str(change.resource_type))
    return f"ConfigResource(type={kind}, name='{change.name}')"


class ConfigAdmin:
    """One node's handler of config changes asked for by clients."""

    def __init__(self, ctx: NodeContext, broker_id: int, has_topic: Callable[[str], bool]):
        self.ctx = ctx
        self.broker_id = broker_id
        self.has_topic = has_topic

    def handle_alter(self, src: Hashable, request: AlterConfigsRequest) -> None:
        self.ctx.tasks.start(self._alter_all(src, request))

    def _alter_all(self, src: Hashable, request: AlterConfigsRequest):
        results = []
        for change in request.resources:
            try:
                yield from self._alter(change, request)
                results.append(ConfigResourceResult(change.resource_type, change.name, ErrorCode.NONE))
            except _Refused as refused:
                results.append(ConfigResourceResult(change.resource_type, change.name, refused.error, refused.message))
            except InvalidConfig as invalid:
                error = ErrorCode.INVALID_CONFIG if invalid.unknown else ErrorCode.INVALID_REQUEST
                message = invalid.message if invalid.unknown else \
                    f"Invalid config value for resource {_resource_text(change)}: {invalid.message}"
                results.append(ConfigResourceResult(change.resource_type, change.name, error, message))
        self.ctx.send(src, AlterConfigsResponse(request.correlation_id, tuple(results)))

    def _alter(self, change: ConfigResourceChange, request: AlterConfigsRequest):
        names = [op.name for op in change.ops]
        duplicated = sorted({name for name in names if names.count(name) > 1})
        if duplicated and request.incremental:
            raise _Refused(ErrorCode.INVALID_REQUEST, f"Error due to duplicate config keys : {','.join(duplicated)}")
        nulls = [op.name for op in change.ops if op.value is None and op.operation != DELETE]
        if nulls:
            raise _Refused(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {','.join(nulls)}")
        if any(op.operation not in (SET, DELETE, 2, 3) for op in change.ops):
            raise _Refused(ErrorCode.INVALID_REQUEST, "unknown config operation")
        if change.resource_type == RESOURCE_TOPIC:
            yield from self._alter_topic(change, request)
        elif change.resource_type == RESOURCE_BROKER:
            yield from self._alter_broker(change, request)
        else:
            raise _Refused(ErrorCode.INVALID_REQUEST, "AlterConfigs is only supported for topics and brokers, but "
                                                      f"resource type is {change.resource_type}")

    def _current(self, path: str, incremental: bool):
        if not incremental:
            return {}
        read = yield coord.GetData(path)
        current = entity_config(read.data) if read.ok else {}
        if current is None:
            raise _Refused(ErrorCode.UNKNOWN_SERVER_ERROR, f"{path} does not hold a config")
        return current

    def _alter_topic(self, change: ConfigResourceChange, request: AlterConfigsRequest):
        topic = change.name
        if not self.has_topic(topic):
            raise _Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist.")
        current = yield from self._current(topic_config_path(topic), request.incremental)
        configs = apply_operations(current, change.ops, topic=True)
        validate_topic_configs(configs)
        if not request.validate_only:
            yield from _write("topics", topic, configs)

    def _alter_broker(self, change: ConfigResourceChange, request: AlterConfigsRequest):
        name = change.name
        if name:
            try:
                broker_id = int(name)
            except ValueError:
                raise _Refused(ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}") from None
            if broker_id != self.broker_id:
                raise _Refused(ErrorCode.INVALID_REQUEST,
                               f"Unexpected broker id, expected {self.broker_id}, but received {name}")
        entity = name or DEFAULT_ENTITY
        current = yield from self._current(f"{BROKER_CONFIG_PATH}/{entity}", request.incremental)
        configs = apply_operations(current, change.ops, topic=False)
        validate_broker_configs(configs, per_broker=bool(name))
        if not request.validate_only:
            yield from _write("brokers", entity, configs)


def alter_ops(configs: dict[str, str | None]) -> tuple[ConfigOp, ...]:
    """AlterConfigs' entries as SETs (the request replaces the resource's configs)."""
    return tuple(ConfigOp(name, SET, value) for name, value in configs.items())
