"""Client quotas as Kafka 2.7.0 computes them: entities, precedence, sensors, throttle time.

A broker keeps one quota manager per quota type (2.7.0 server/QuotaFactory.scala):
produce (``producer_byte_rate``), fetch (``consumer_byte_rate``) and request
(``request_percentage``). Quotas are set per entity, stored as ZooKeeper nodes
(/config/users/<user>/clients/<client-id>, /config/users/<user>, /config/clients/<client-id>,
any name possibly ``<default>``) and handed to every manager when a node changes
(server/ConfigHandler.scala ``QuotaConfigHandler.updateQuotaConfig``). The managers follow
server/ClientQuotaManager.scala and its ``DefaultQuotaCallback``:

- the *metric tags* of a (user, client-id) decide which sensor its usage is recorded
  against, so which clients share one rate (``quotaMetricTags``); while quotas exist at one
  level only, the tags are fixed by that level; once several levels have been used they
  follow the most specific entity that has a quota (8 levels);
- the *quota limit* of those tags is looked up again through the defaults
  (``quotaLimit``); a client-id-only sensor falls back on the static
  ``quota.producer.default`` / ``quota.consumer.default``;
- a quota change rewrites the quota of the sensors that exist, in place, keeping their
  samples (``updateQuotaMetricConfigs``); the next request sees it.

The core has no clock: every call that records or reads a rate takes the time in ms.
"""
from __future__ import annotations

from typing import Mapping, Union
from urllib.parse import quote, unquote_plus

from broker_core import mutants
from broker_core.config import BrokerConfig
from broker_core.errors import ConfigError
from broker_core.quota_rate import JAVA_LONG_MAX, QuotaSensor, RateConfig, Violation, java_long_to_int

DEFAULT_NAME = "<default>"  # ConfigEntityName.Default, as it appears in a node's path
UNLIMITED = float(JAVA_LONG_MAX)  # Quota.upperBound(Long.MaxValue): no quota
# Sensors idle this long are dropped (ClientQuotaManager.InactiveSensorExpirationTimeSeconds).
INACTIVE_SENSOR_EXPIRATION_MS = 3600 * 1000
MAX_DOUBLE = 1.7976931348623157e308  # java.lang.Double.MAX_VALUE

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
# Keys 2.7 accepts in a quota node that this model does not use: the controller mutation
# quota (KIP-599, create/delete topic and partition rates) and, on users, SCRAM credentials.
IGNORED_KEYS = frozenset({"controller_mutation_rate"})
IGNORED_USER_KEYS = frozenset({"SCRAM-SHA-256", "SCRAM-SHA-512"})

# 2.7's QuotaTypes: which levels have ever had a quota (a bit set that only grows).
NO_QUOTAS, CLIENT_ID_ENABLED, USER_ENABLED, USER_CLIENT_ID_ENABLED = 0, 1, 2, 4


class DefaultEntityName:
    """The ``<default>`` user or client-id (DefaultUserEntity, DefaultClientIdEntity):
    distinct from any real name, even one spelled "<default>"."""
    __slots__ = ()

    def __repr__(self) -> str:
        return DEFAULT_NAME


DEFAULT = DefaultEntityName()
EntityName = Union[str, DefaultEntityName]


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: URL-encoding as Java's URLEncoder does it, with
    "*" and spaces percent-encoded. User names are kept sanitized, as in the paths."""
    return quote(name, safe="-_.").replace("~", "%7E")


def desanitize(name: str) -> str:
    """Kafka's ``Sanitizer.desanitize`` (Java's URLDecoder)."""
    return unquote_plus(name)


class QuotaEntity:
    """A ``KafkaQuotaEntity``: an optional user (sanitized, or DEFAULT) and an optional
    client-id (as the client sends it, or DEFAULT)."""
    __slots__ = ("user", "client_id")

    def __init__(self, user: EntityName | None, client_id: EntityName | None):
        self.user = user
        self.client_id = client_id

    def _key(self) -> tuple[str, str]:
        def part(name: EntityName | None) -> str:
            return "" if name is None else "D" if isinstance(name, DefaultEntityName) else "N" + name
        return part(self.user), part(self.client_id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, QuotaEntity) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"QuotaEntity({self.user!r}, {self.client_id!r})"

    @property
    def path(self) -> str:
        """The entity's ZooKeeper node (2.7.0 AdminManager.alterClientQuotas's paths)."""
        def name(value: EntityName, sanitized: bool) -> str:
            if isinstance(value, DefaultEntityName):
                return DEFAULT_NAME
            return value if sanitized else sanitize(value)
        if self.user is not None and self.client_id is not None:
            return f"/config/users/{name(self.user, True)}/clients/{name(self.client_id, False)}"
        if self.user is not None:
            return f"/config/users/{name(self.user, True)}"
        if self.client_id is not None:
            return f"/config/clients/{name(self.client_id, False)}"
        raise ValueError("an entity names a user, a client-id or both")


def entity_of_path(path: str) -> QuotaEntity:
    """The entity of a quota node: /config/users/<u>, /config/users/<u>/clients/<c> or
    /config/clients/<c> (the ``/config/`` prefix may be left out, as in a change
    notification's entity path). Anything else is refused, naming the path."""
    parts = path.strip("/").split("/")
    if parts and parts[0] == "config":
        parts = parts[1:]
    if any(not part for part in parts):
        raise ConfigError(path, "an empty name in a quota entity path")
    if len(parts) == 2 and parts[0] == "clients":
        return QuotaEntity(None, _client_name(parts[1]))
    if len(parts) in (2, 4) and parts[0] == "users" and (len(parts) == 2 or parts[2] == "clients"):
        user: EntityName = DEFAULT if parts[1] == DEFAULT_NAME else parts[1]
        return QuotaEntity(user, _client_name(parts[3]) if len(parts) == 4 else None)
    raise ConfigError(path, "unknown quota entity type: quotas are set on /config/users/<user>, "
                            "/config/users/<user>/clients/<client-id> or /config/clients/<client-id>")


def _client_name(sanitized: str) -> EntityName:
    # ConfigHandler keeps the client-id desanitized (ClientIdEntity(clientId)).
    return DEFAULT if sanitized == DEFAULT_NAME else desanitize(sanitized)


def parse_quota_config(entity: QuotaEntity, props: Mapping[str, object]) -> dict[str, float]:
    """A quota node's properties, typed and checked (DynamicConfig.Client / User: the two
    byte rates are LONGs, request_percentage a DOUBLE). Unknown keys are refused, as 2.7
    refuses them ("Unknown Dynamic Configuration"); so are rates below 1 and percentages
    that are not positive: 2.7's throttle time divides by the quota, and a quota of 0
    gives an infinite throttle that Long.toInt turns into -1 (no throttle at all)."""
    out: dict[str, float] = {}
    for key in sorted(props):
        value = props[key]
        if key in IGNORED_KEYS or (entity.client_id is None and key in IGNORED_USER_KEYS):
            continue
        if key in (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE):
            out[key] = float(_parse_long(key, value))
            if out[key] < 1:
                raise ConfigError(key, f"must be at least 1 byte per second, not {value!r}")
        elif key == REQUEST_PERCENTAGE:
            out[key] = _parse_double(key, value)
            if not out[key] > 0:
                raise ConfigError(key, f"must be a positive percentage, not {value!r}")
        else:
            raise ConfigError(key, f"unknown quota configuration for {entity.path}; known: "
                                   f"{CONSUMER_BYTE_RATE}, {PRODUCER_BYTE_RATE}, {REQUEST_PERCENTAGE}")
    return out


def _parse_long(key: str, value: object) -> int:
    if isinstance(value, bool):
        raise ConfigError(key, f"must be an integer, not {value!r}")
    if isinstance(value, int):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = int(value.strip())
        except ValueError:
            raise ConfigError(key, f"must be an integer, not {value!r}") from None
    else:
        raise ConfigError(key, f"must be an integer, not {value!r}")
    if not -2**63 <= parsed <= JAVA_LONG_MAX:
        raise ConfigError(key, f"does not fit a long: {value!r}")
    return parsed


def _parse_double(key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ConfigError(key, f"must be a number, not {value!r}")
    try:
        parsed = float(value.strip() if isinstance(value, str) else value)
    except ValueError:
        raise ConfigError(key, f"must be a number, not {value!r}") from None
    if parsed != parsed or parsed in (float("inf"), float("-inf")):
        raise ConfigError(key, f"must be a finite number, not {value!r}")
    return parsed


class ClientQuotaManager:
    """One quota type's ``ClientQuotaManager`` with the ``DefaultQuotaCallback``.

    ``user`` arguments are principal names (``ANONYMOUS`` on a PLAINTEXT listener); they
    are sanitized here as Kafka's session does. Metric tags are (sanitized user, client-id)
    pairs where "" means the level does not use that part."""
    __slots__ = ("key", "samples", "window_ms", "static_default", "enabled", "overrides", "sensors")

    def __init__(self, key: str, samples: int, window_seconds: int, static_default: int = JAVA_LONG_MAX):
        self.key = key  # the quota node key this manager reads
        self.samples = samples
        self.window_ms = window_seconds * 1000
        self.static_default = float(static_default)
        # A static default below Long.MaxValue enables client-id quotas from the start.
        self.enabled = NO_QUOTAS if static_default == JAVA_LONG_MAX else CLIENT_ID_ENABLED
        self.overrides: dict[QuotaEntity, float] = {}
        self.sensors: dict[tuple[str, str], QuotaSensor] = {}

    @property
    def quotas_enabled(self) -> bool:
        """Whether this manager records at all (``quotasEnabled``): once any quota has
        been set or removed for it, until the broker restarts."""
        return self.enabled != NO_QUOTAS

    def metric_tags(self, user: str, client_id: str) -> tuple[str, str]:
        """``DefaultQuotaCallback.quotaMetricTags`` (2.7.0 ClientQuotaManager.scala)."""
        sanitized = sanitize(user)
        if self.enabled in (NO_QUOTAS, CLIENT_ID_ENABLED):
            return "", client_id
        if self.enabled == USER_ENABLED:
            return sanitized, ""
        if self.enabled == USER_CLIENT_ID_ENABLED:
            return sanitized, client_id
        has = self.overrides.__contains__
        if (has(QuotaEntity(sanitized, client_id)) or has(QuotaEntity(sanitized, DEFAULT))):
            return sanitized, client_id  # levels 1 and 2
        if has(QuotaEntity(sanitized, None)):
            return sanitized, ""  # level 3
        if has(QuotaEntity(DEFAULT, client_id)) or has(QuotaEntity(DEFAULT, DEFAULT)):
            return sanitized, client_id  # levels 4 and 5
        if has(QuotaEntity(DEFAULT, None)):
            return sanitized, ""  # level 6
        return "", client_id  # levels 7 and 8, and the static client-id default

    def quota_limit(self, tags: tuple[str, str]) -> float | None:
        """``DefaultQuotaCallback.quotaLimit``: the quota of a sensor's tags, or None."""
        user, client_id = tags
        get = self.overrides.get
        if user and client_id:
            for entity in (QuotaEntity(user, client_id), QuotaEntity(user, DEFAULT),
                           QuotaEntity(DEFAULT, client_id), QuotaEntity(DEFAULT, DEFAULT)):
                if entity in self.overrides:
                    return self.overrides[entity]
            return None
        if user:
            found = get(QuotaEntity(user, None))
            return found if found is not None else get(QuotaEntity(DEFAULT, None))
        if client_id:
            found = get(QuotaEntity(None, client_id))
            if found is None:
                found = get(QuotaEntity(None, DEFAULT))
            return found if found is not None else self.static_default
        return None

    def quota(self, user: str, client_id: str) -> float:
        """The quota that applies to a client now (``ClientQuotaManager.quota``)."""
        limit = self.quota_limit(self.metric_tags(user, client_id))
        return UNLIMITED if limit is None else limit

    def update_quota(self, entity: QuotaEntity, bound: float | None) -> None:
        """``ClientQuotaManager.updateQuota``: set (or, with None, remove) an entity's
        quota, mark its level as used, and give the existing sensors their new quota."""
        if entity.user is not None:
            self.enabled |= USER_CLIENT_ID_ENABLED if entity.client_id is not None else USER_ENABLED
        elif entity.client_id is not None:
            self.enabled |= CLIENT_ID_ENABLED
        if bound is None:
            self.overrides.pop(entity, None)
        else:
            self.overrides[entity] = bound
        is_default = isinstance(entity.user, DefaultEntityName) or isinstance(entity.client_id, DefaultEntityName)
        self._update_sensor_quotas(None if is_default else entity)

    def _update_sensor_quotas(self, entity: QuotaEntity | None) -> None:
        """``updateQuotaMetricConfigs``. With quotas at one level only and a named entity,
        only that entity's sensor changes; else every sensor is looked up again. Either way
        a sensor whose tags now resolve to no quota keeps the one it had (2.7 skips a null
        limit), until it expires."""
        if self.enabled in (NO_QUOTAS, CLIENT_ID_ENABLED, USER_ENABLED, USER_CLIENT_ID_ENABLED) and entity:
            tags = (entity.user if isinstance(entity.user, str) else "",
                    entity.client_id if isinstance(entity.client_id, str) else "")
            sensor = self.sensors.get(tags)
            limit = self.quota_limit(tags)
            if sensor is not None and limit is not None:
                sensor.config = sensor.config.with_bound(limit)
            return
        for tags in sorted(self.sensors):
            sensor = self.sensors[tags]
            limit = self.quota_limit(tags)
            if limit is not None and limit != sensor.config.bound:
                sensor.config = sensor.config.with_bound(limit)

    def sensor(self, user: str, client_id: str, now_ms: int) -> QuotaSensor:
        """The sensor a client's usage goes to (``getOrCreateQuotaSensors``), created with
        the quota its tags resolve to; one idle for over an hour is replaced by a new one
        (Kafka's Metrics purges it at its next 30 s check, so up to 30 s later)."""
        tags = self.metric_tags(user, client_id)
        sensor = self.sensors.get(tags)
        if sensor is None or now_ms - sensor.last_record_ms > INACTIVE_SENSOR_EXPIRATION_MS:
            limit = self.quota_limit(tags)
            config = RateConfig(self.samples, self.window_ms, UNLIMITED if limit is None else limit)
            sensor = QuotaSensor(config, now_ms)
            self.sensors[tags] = sensor
        return sensor

    def record_and_throttle(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """``maybeRecordAndGetThrottleTimeMs``: record the value, then check the quota;
        the throttle time in ms, 0 within quota (and 0 without recording while no quota
        was ever set). An int as Kafka's: ``Math.round`` then ``Long.toInt``."""
        return self.record_and_measure(user, client_id, value, now_ms)[0]

    def record_and_measure(self, user: str, client_id: str, value: float,
                           now_ms: int) -> tuple[int, float, float | None]:
        """``record_and_throttle``, also telling what a trace shows of it: (throttle time,
        the sensor's quota, the rate measured when the quota was exceeded, else None).
        The quota is UNLIMITED when nothing was recorded (no quota ever set)."""
        if not self.quotas_enabled:
            return 0, UNLIMITED, None
        sensor = self.sensor(user, client_id, now_ms)
        violation = sensor.record(value, now_ms, True)
        bound = sensor.config.bound
        quota = UNLIMITED if bound is None else bound
        if violation is None or mutants.THROTTLE_NEVER_APPLIED:
            return 0, quota, None
        return java_long_to_int(self._throttle_time(sensor, violation, now_ms)), quota, violation.value

    def _throttle_time(self, sensor: QuotaSensor, violation: Violation, now_ms: int) -> int:
        return sensor.throttle_time(violation, now_ms)

    def record_no_throttle(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """``recordNoThrottle``: usage that counts for the next request's check only."""
        self.sensor(user, client_id, now_ms).record(value, now_ms, False)

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """``unrecordQuotaSensor``: a throttled fetch sends no data, so the bytes recorded
        for it are taken back by recording their negative (in the current sample)."""
        self.sensor(user, client_id, now_ms).record(-value, now_ms, False)

    def max_value_in_quota_window(self, user: str, client_id: str, now_ms: int) -> float:
        """``getMaxValueInQuotaWindow``: the most one request may use without being
        throttled for sure, quota x (samples - 1) x window seconds (a fetch's max bytes
        are capped to it); Double.MAX_VALUE without a quota."""
        if not self.quotas_enabled:
            return MAX_DOUBLE
        tags = self.metric_tags(user, client_id)
        self.sensor(user, client_id, now_ms)
        limit = self.quota_limit(tags)
        if limit is None:
            return MAX_DOUBLE
        return limit * (self.samples - 1) * (self.window_ms // 1000)


NANOS_TO_PERCENTAGE_PER_SECOND = 100.0 / 1_000_000_000  # ClientRequestQuotaManager.NanosToPercentagePerSecond


class RequestQuotaManager(ClientQuotaManager):
    """``ClientRequestQuotaManager``: request handling time as a percentage of one
    thread's second (``request_percentage``), recorded in nanoseconds converted to
    percent-seconds; the throttle time is capped at one window."""
    __slots__ = ()

    def __init__(self, samples: int, window_seconds: int):
        super().__init__(REQUEST_PERCENTAGE, samples, window_seconds)

    def record_request_time(self, user: str, client_id: str, thread_time_nanos: int, now_ms: int) -> int:
        """``maybeRecordAndGetThrottleTimeMs(request, timeMs)``: the request thread's time."""
        return self.record_and_throttle(user, client_id, thread_time_nanos * NANOS_TO_PERCENTAGE_PER_SECOND, now_ms)

    def record_network_time(self, user: str, client_id: str, thread_time_nanos: int, now_ms: int) -> None:
        """The network thread's time, recorded when the response is sent, unchecked."""
        if self.quotas_enabled:
            self.record_no_throttle(user, client_id, thread_time_nanos * NANOS_TO_PERCENTAGE_PER_SECOND, now_ms)

    def _throttle_time(self, sensor: QuotaSensor, violation: Violation, now_ms: int) -> int:
        # QuotaUtils.boundedThrottleTime: at most quota.window.size.seconds.
        return min(super()._throttle_time(sensor, violation, now_ms), self.window_ms)


class ClientQuotas:
    """A broker's three client quota managers and the quota nodes they were given.

    ``apply_config(path, props)`` is what the broker does when it reads a quota node
    (at startup, or after a change notification): the node's full content, so a key
    left out removes that quota (``QuotaConfigHandler.updateQuotaConfig``)."""
    __slots__ = ("produce", "fetch", "request", "configs")

    def __init__(self, samples: int = 11, window_seconds: int = 1, producer_default: int = JAVA_LONG_MAX,
                 consumer_default: int = JAVA_LONG_MAX):
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, samples, window_seconds, producer_default)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, samples, window_seconds, consumer_default)
        self.request = RequestQuotaManager(samples, window_seconds)
        self.configs: dict[QuotaEntity, dict[str, float]] = {}

    @classmethod
    def from_config(cls, config: BrokerConfig) -> "ClientQuotas":
        return cls(config.quota_window_num, config.quota_window_size_seconds,
                   config.quota_producer_default, config.quota_consumer_default)

    def apply_config(self, path: str, props: Mapping[str, object]) -> QuotaEntity:
        """Check the whole node first (a refused node changes nothing), then give each
        manager the entity's quota or its removal."""
        entity = entity_of_path(path)
        parsed = parse_quota_config(entity, props)
        for manager in (self.produce, self.fetch, self.request):
            manager.update_quota(entity, parsed.get(manager.key))
        if parsed:
            self.configs[entity] = parsed
        else:
            self.configs.pop(entity, None)
        return entity
