"""AlterClientQuotas and DescribeClientQuotas (KIP-546): what ``kafka-configs.sh
--entity-type users|clients`` sends since 2.6, answered from and written to the quota
nodes of the coordination store, as Kafka 2.7.0 core/.../server/AdminManager.scala
``alterClientQuotas`` / ``describeClientQuotas`` do it through AdminZkClient.

An entity is a tuple of (type, name) pairs, type "user" or "client-id" and name None
for the default entity (ClientQuotaEntity). Names are sanitized into paths as Kafka's
``Sanitizer`` does (``sanitizeEntityName``), so a user and a client-id land in
/config/users/<u>, /config/clients/<c> or /config/users/<u>/clients/<c>, with
``<default>`` for a null name. The write is dynamic_config's ``write_entity_config``
(the node, then the change notification), so every broker's config listener applies it
without a restart, exactly as a node written by ZooKeeper tools or the ``client_quota``
scenario step.

One deviation: the resulting node is also checked by the quota model
(broker_core/quotas.py ``parse_quota_config``). 2.7 writes a byte rate of 0 or below
and a request_percentage of 0 or below, which its own brokers then turn into "no
throttle" (docs/quotas.md); here the brokers refuse such a node, so the API refuses it
first, INVALID_REQUEST naming the key, and store and brokers never disagree.
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Hashable, Mapping

from broker_core import coordination as coord
from broker_core.context import NodeContext
from broker_core.dynamic_config import entity_config, write_entity_config
from broker_core.errors import ConfigError, ErrorCode
from broker_core.quotas import (
    CONSUMER_BYTE_RATE, DEFAULT_NAME, IGNORED_USER_KEYS, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE, desanitize,
    entity_of_path, parse_quota_config, sanitize)

USER, CLIENT_ID = "user", "client-id"  # ClientQuotaEntity.USER, CLIENT_ID
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2  # DescribeClientQuotasRequest's match types
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
# QuotaConfigs.isQuotaConfig, and their ConfigDef types in DynamicConfig.Client
QUOTA_KEY_TYPES = {PRODUCER_BYTE_RATE: "LONG", CONSUMER_BYTE_RATE: "LONG", REQUEST_PERCENTAGE: "DOUBLE",
                   CONTROLLER_MUTATION_RATE: "DOUBLE"}
LONG_EPSILON = 1e-6

Entity = tuple[tuple[str, "str | None"], ...]


# -- messages ----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ClientQuotaAlteration:
    entity: Entity  # as the request listed it
    ops: tuple[tuple[str, "float | None"], ...]  # (key, value); None: remove the key


@dataclass(frozen=True, slots=True)
class AlterClientQuotasRequest:
    correlation_id: int
    entries: tuple[ClientQuotaAlteration, ...]
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class ClientQuotaAlterationResult:
    entity: Entity
    error: ErrorCode
    message: str | None = None


@dataclass(frozen=True, slots=True)
class AlterClientQuotasResponse:
    correlation_id: int
    results: tuple[ClientQuotaAlterationResult, ...]


@dataclass(frozen=True, slots=True)
class QuotaFilterComponent:
    entity_type: str
    match_type: int  # MATCH_EXACT, MATCH_DEFAULT or MATCH_SPECIFIED
    match: str | None = None


@dataclass(frozen=True, slots=True)
class DescribeClientQuotasRequest:
    correlation_id: int
    components: tuple[QuotaFilterComponent, ...]
    strict: bool = False


@dataclass(frozen=True, slots=True)
class DescribeClientQuotasResponse:
    correlation_id: int
    error: ErrorCode
    message: str | None = None
    # (entity, ((key, value), ...)) sorted; None with an error
    entries: tuple[tuple[Entity, tuple[tuple[str, float], ...]], ...] | None = None


REQUESTS = (AlterClientQuotasRequest, DescribeClientQuotasRequest)


class _Failed(Exception):
    """An ApiError: ``ApiError.fromThrowable`` gives UNKNOWN_SERVER_ERROR no message."""

    def __init__(self, error: ErrorCode, message: str | None = None):
        super().__init__(message)
        self.error = error
        self.message = message if error is not ErrorCode.UNKNOWN_SERVER_ERROR else None


def java_double(value: float) -> str:
    """Java's ``Double.toString``, the text 2.7 stores for a DOUBLE quota (``value.toString``):
    plain between 10^-3 and 10^7, else computerized scientific notation ("1.0E7")."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value))
    sign, digits, exponent = Decimal(repr(float(value))).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{int(exponent) + len(digits) - 1}"


def _sanitized(name: str | None) -> str:
    return DEFAULT_NAME if name is None else sanitize(name)  # AdminManager.sanitizeEntityName


def _desanitized(name: str) -> str | None:
    return None if name == DEFAULT_NAME else desanitize(name)  # AdminManager.desanitizeEntityName


def entity_node(entity: Entity) -> tuple[str, str, bool]:
    """(config type, name under it, whether user keys are allowed): 2.7.0
    ``alterEntityQuotas``'s path with ``entityToSanitizedUserClientId``'s checks, and
    ``changeUserOrUserClientIdConfig``'s choice of validation (User only for a named user)."""
    if not entity:
        raise _Failed(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
    parts: dict[str, str | None] = {}
    for entity_type, name in entity:  # a HashMap in Kafka: a type named twice keeps its last name
        if entity_type not in (USER, CLIENT_ID):
            raise _Failed(ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {entity_type}")
        if name is not None and not name:
            raise _Failed(ErrorCode.INVALID_REQUEST, f"Empty {entity_type} not supported")
        parts[entity_type] = name
    if USER in parts and CLIENT_ID in parts:
        return "users", f"{_sanitized(parts[USER])}/clients/{_sanitized(parts[CLIENT_ID])}", False
    if USER in parts:
        return "users", _sanitized(parts[USER]), parts[USER] is not None
    return "clients", _sanitized(parts[CLIENT_ID]), False


def apply_quota_ops(props: dict[str, str], ops: tuple[tuple[str, float | None], ...], on_users: bool,
                    user_keys: bool) -> dict[str, str]:
    """``alterEntityQuotas``' loop: a removal drops the key (any key); a value must be
    a quota key, a LONG one whole to within 1e-6 (on a /config/users node the SCRAM keys
    are known too, but of type PASSWORD: IllegalStateException); then DynamicConfig's
    validate refuses keys of no ConfigDef (``require``: an IllegalArgumentException).
    Both exceptions answer UNKNOWN_SERVER_ERROR without a message."""
    out = dict(props)
    for key, value in ops:
        if value is None:
            out.pop(key, None)
            continue
        kind = QUOTA_KEY_TYPES.get(key)
        if kind is None:
            if on_users and key in IGNORED_USER_KEYS:  # a PASSWORD key: "Unexpected config type"
                raise _Failed(ErrorCode.UNKNOWN_SERVER_ERROR)
            raise _Failed(ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}")
        if kind == "LONG":
            whole = int(value + LONG_EPSILON) if abs(value) < 2**63 else None
            if whole is None or abs(float(whole) - value) > LONG_EPSILON:
                raise _Failed(ErrorCode.INVALID_REQUEST, f"Configuration {key} must be a Long value")
            out[key] = str(whole)
        else:
            out[key] = java_double(value)
    allowed = set(QUOTA_KEY_TYPES) | (IGNORED_USER_KEYS if user_keys else set())
    if any(key not in allowed for key in out):
        raise _Failed(ErrorCode.UNKNOWN_SERVER_ERROR)
    return dict(sorted(out.items()))


class QuotaAdmin:
    """One broker's handler of the two client quota APIs."""

    def __init__(self, ctx: NodeContext):
        self.ctx = ctx

    def handle(self, src: Hashable, request: AlterClientQuotasRequest | DescribeClientQuotasRequest) -> None:
        if isinstance(request, AlterClientQuotasRequest):
            self.ctx.tasks.start(self._alter_all(src, request))
        else:
            self.ctx.tasks.start(self._describe(src, request))

    # -- AlterClientQuotas ----------------------------------------------------------
    def _alter_all(self, src: Hashable, request: AlterClientQuotasRequest):
        """Each entry on its own: one's failure does not stop the others."""
        results = []
        for entry in request.entries:
            try:
                yield from self._alter(entry, request.validate_only)
                results.append(ClientQuotaAlterationResult(entry.entity, ErrorCode.NONE))
            except _Failed as failed:
                results.append(ClientQuotaAlterationResult(entry.entity, failed.error, failed.message))
        self.ctx.send(src, AlterClientQuotasResponse(request.correlation_id, tuple(results)))

    def _alter(self, entry: ClientQuotaAlteration, validate_only: bool):
        config_type, name, user_keys = entity_node(entry.entity)
        path = f"/config/{config_type}/{name}"
        read = yield coord.GetData(path)
        current = entity_config(read.data) if read.ok else {}
        if current is None:
            raise _Failed(ErrorCode.UNKNOWN_SERVER_ERROR)  # a node Kafka could not parse either
        props = apply_quota_ops(current, entry.ops, config_type == "users", user_keys)
        try:
            parse_quota_config(entity_of_path(path), props)
        except ConfigError as error:
            raise _Failed(ErrorCode.INVALID_REQUEST, f"Invalid value for {error.key}: {error.message}") from None
        if validate_only:
            return
        if not (yield from write_entity_config(config_type, name, props)):
            raise _Failed(ErrorCode.UNKNOWN_SERVER_ERROR)

    # -- DescribeClientQuotas -------------------------------------------------------
    def _describe(self, src: Hashable, request: DescribeClientQuotasRequest):
        try:
            by_type = _filter_components(request.components)
            nodes = yield from self._candidates(by_type, request.strict)
            entries = _matching(nodes, by_type, request.strict)
            response = DescribeClientQuotasResponse(request.correlation_id, ErrorCode.NONE, None, entries)
        except _Failed as failed:
            response = DescribeClientQuotasResponse(request.correlation_id, failed.error, failed.message)
        self.ctx.send(src, response)

    def _candidates(self, by_type: Mapping[str, QuotaFilterComponent], strict: bool):
        """``handleDescribeClientQuotas``: the nodes worth reading, as (entity, config)."""
        user, client = by_type.get(USER), by_type.get(CLIENT_ID)
        exact_user = user is not None and user.match_type != MATCH_SPECIFIED
        exact_client = client is not None and client.match_type != MATCH_SPECIFIED
        exclude_user, exclude_client = strict and user is None, strict and client is None
        found: list[tuple[Entity, dict[str, str]]] = []
        if exact_user and exclude_client:
            path = f"/config/users/{_sanitized(_wanted(user))}"
            found.append((((USER, _wanted(user)),), (yield from _read(path))))
        elif not exclude_user and not exact_client:
            for name in (yield from _children("/config/users")):
                found.append((((USER, _desanitized(name)),), (yield from _read(f"/config/users/{name}"))))
        if exclude_user and exact_client:
            path = f"/config/clients/{_sanitized(_wanted(client))}"
            found.append((((CLIENT_ID, _wanted(client)),), (yield from _read(path))))
        elif not exact_user and not exclude_client:
            for name in (yield from _children("/config/clients")):
                found.append((((CLIENT_ID, _desanitized(name)),), (yield from _read(f"/config/clients/{name}"))))
        if exact_user and exact_client:
            path = f"/config/users/{_sanitized(_wanted(user))}/clients/{_sanitized(_wanted(client))}"
            found.append((((USER, _wanted(user)), (CLIENT_ID, _wanted(client))), (yield from _read(path))))
        elif not exclude_user and not exclude_client:
            for name in (yield from _children("/config/users")):
                for child in (yield from _children(f"/config/users/{name}/clients")):
                    entity = ((USER, _desanitized(name)), (CLIENT_ID, _desanitized(child)))
                    found.append((entity, (yield from _read(f"/config/users/{name}/clients/{child}"))))
        return found


def _filter_components(components: tuple[QuotaFilterComponent, ...]) -> dict[str, QuotaFilterComponent]:
    """DescribeClientQuotasRequest.filter (a bad match type: IllegalArgumentException; an
    exact match of null: a NullPointerException, both UNKNOWN_SERVER_ERROR), then
    ``describeClientQuotas``' checks of the entity types."""
    for component in components:
        if component.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED) or (
                component.match_type == MATCH_EXACT and component.match is None):
            raise _Failed(ErrorCode.UNKNOWN_SERVER_ERROR)
    by_type: dict[str, QuotaFilterComponent] = {}
    for component in components:
        kind = component.entity_type
        if kind in (USER, CLIENT_ID):
            if kind in by_type:
                raise _Failed(ErrorCode.INVALID_REQUEST, f"Duplicate {'user' if kind == USER else 'client'} "
                                                         "filter component entity type")
            by_type[kind] = component
        elif kind == "":
            raise _Failed(ErrorCode.INVALID_REQUEST, "Unexpected empty filter component entity type")
        else:
            raise _Failed(ErrorCode.UNSUPPORTED_VERSION, f"Custom entity type '{kind}' not supported")
    return by_type


def _wanted(component: QuotaFilterComponent | None) -> str | None:
    """The name an exact or default component asks for (None: the default entity)."""
    return None if component is None or component.match_type == MATCH_DEFAULT else component.match


def _matches(component: QuotaFilterComponent | None, entity: Entity, kind: str, strict: bool) -> bool:
    names = dict(entity)
    if component is None:
        return kind not in names or not strict
    if component.match_type == MATCH_SPECIFIED:
        return kind in names
    return kind in names and names[kind] == _wanted(component)


def _matching(nodes: list[tuple[Entity, dict[str, str]]], by_type: Mapping[str, QuotaFilterComponent],
              strict: bool) -> tuple[tuple[Entity, tuple[tuple[str, float], ...]], ...]:
    """The entities with a quota key that match the filter, with their values as doubles
    (a value that does not parse: IllegalStateException, UNKNOWN_SERVER_ERROR)."""
    out: dict[Entity, tuple[tuple[str, float], ...]] = {}
    for entity, props in nodes:
        quota = {key: value for key, value in props.items() if key in QUOTA_KEY_TYPES}
        if not quota or not all(_matches(by_type.get(kind), entity, kind, strict) for kind in (USER, CLIENT_ID)):
            continue
        try:
            out[entity] = tuple((key, float(quota[key])) for key in sorted(quota))
        except ValueError:
            raise _Failed(ErrorCode.UNKNOWN_SERVER_ERROR) from None
    return tuple(sorted(out.items(), key=lambda item: tuple((k, n or "") for k, n in item[0])))


def _read(path: str):
    """AdminZkClient.fetchEntityConfig: no node is empty; one that does not parse fails."""
    read = yield coord.GetData(path)
    config = entity_config(read.data) if read.ok else {}
    if config is None:
        raise _Failed(ErrorCode.UNKNOWN_SERVER_ERROR)
    return config


def _children(path: str):
    listed = yield coord.GetChildren(path)
    return sorted(listed.children) if listed.ok else []
