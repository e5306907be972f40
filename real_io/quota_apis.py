"""AlterClientQuotas (49) and DescribeClientQuotas (48) on the wire: bodies to the core's
requests (broker_core/quota_admin.py) and its answers back, field by field from Kafka
2.7.0's AlterClientQuotas*/DescribeClientQuotas*.json. The core decides everything;
this only maps. ``throttle_time_ms`` is 0 here: the server puts the request quota's
throttle in after the core answered (real_io/server.py)."""
from __future__ import annotations

from typing import Any, Callable

from broker_core.quota_admin import (
    AlterClientQuotasRequest, AlterClientQuotasResponse, ClientQuotaAlteration, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse, Entity, QuotaFilterComponent)
from real_io.protocol.apis import ApiKey


def _entity(wire: list[dict]) -> Entity:
    return tuple((e["entity_type"], e["entity_name"]) for e in wire)


def _entity_wire(entity: Entity) -> list[dict]:
    return [{"entity_type": kind, "entity_name": name} for kind, name in entity]


def alter_client_quotas_request(correlation_id: int, version: int, body: dict) -> AlterClientQuotasRequest:
    """An op whose ``remove`` is set removes its key (its value is ignored, as
    AlterClientQuotasRequest.entries() makes it null)."""
    entries = tuple(ClientQuotaAlteration(_entity(entry["entity"]), tuple(
        (op["key"], None if op["remove"] else op["value"]) for op in entry["ops"])) for entry in body["entries"])
    return AlterClientQuotasRequest(correlation_id, entries, bool(body["validate_only"]))


def alter_client_quotas_response(response: AlterClientQuotasResponse) -> dict:
    return {"throttle_time_ms": 0, "entries": [
        {"error_code": int(r.error), "error_message": r.message, "entity": _entity_wire(r.entity)}
        for r in response.results]}


def describe_client_quotas_request(correlation_id: int, version: int, body: dict) -> DescribeClientQuotasRequest:
    components = tuple(QuotaFilterComponent(c["entity_type"], c["match_type"], c["match"])
                       for c in body["components"])
    return DescribeClientQuotasRequest(correlation_id, components, bool(body["strict"]))


def describe_client_quotas_response(response: DescribeClientQuotasResponse) -> dict:
    entries = None if response.entries is None else [
        {"entity": _entity_wire(entity), "values": [{"key": key, "value": value} for key, value in values]}
        for entity, values in response.entries]
    return {"throttle_time_ms": 0, "error_code": int(response.error), "error_message": response.message,
            "entries": entries}


INBOUND: dict[int, tuple[Callable[[int, int, dict], Any], Callable[[Any], dict]]] = {
    ApiKey.ALTER_CLIENT_QUOTAS: (alter_client_quotas_request, alter_client_quotas_response),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (describe_client_quotas_request, describe_client_quotas_response),
}
