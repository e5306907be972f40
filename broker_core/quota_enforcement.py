"""Client quotas on the request path: what KafkaApis does with the quota model when it
answers a client's produce or fetch (2.7.0 server/KafkaApis.scala).

- A produce is recorded against the produce quota when it is answered
  (``handleProduceRequest``'s ``sendResponseCallback``: after the append for acks 0 and
  1, when the DelayedProduce completes for acks=all), with the request's size.
- A consumer's fetch is recorded against the fetch quota with the response's size when
  it is answered (``handleFetchRequest``'s ``processResponseCallback``, after any
  DelayedFetch). A throttled fetch takes its bytes back (``unrecordQuotaSensor``) and is
  answered with no partitions at all (``fetchContext.getThrottledResponse``, KIP-219).
  Followers' fetches are never recorded here (replication quotas are another path).
- A throttle time above 0 goes in the response's ``throttle_time_ms`` and the client's
  connection is muted for it (``ClientQuotaManager.throttle`` with a ThrottledChannel,
  KIP-219, 2.0+): the response leaves at once, and the broker reads nothing more from
  that connection until the throttle time has passed. An acks=0 produce has no response
  but is muted all the same (KafkaApis: "the channel may be throttled due to bandwidth
  quota violation").

The request-time quota (``request_percentage``, ClientRequestQuotaManager) needs the
time a request thread spent, which the core cannot measure. Its nanoseconds come from
``request_time_source`` (docs/quotas.md, "The request-time quota"):
- ``model`` (the simulation): a produce (acks 1 or all) and a consumer's fetch are
  charged ``request_model_base_nanos`` + ``request_model_nanos_per_byte`` x bytes (the
  produce request's size, the fetch's answered bytes) when they are answered, and
  throttled by the larger of the byte and the request throttle (2.7.0 KafkaApis
  ``handleProduceRequest``, ``handleFetchRequest``). A model, not a measurement.
- ``measured`` (the real binding): nothing is charged here; the binding times each
  request and hands the core ``RequestHandled`` (``request_handled``), whose answer
  ``RequestThrottle`` tells it the throttle to put in the response.

Trace events, only for clients whose quota is finite (so a run with no quota writes
nothing new): ``quota_recorded`` for each recorded request, ``throttled`` for each
throttled one, and ``throttle_waited`` when a throttled client's next request arrives,
telling how long after the throttled answer it came.
"""
from __future__ import annotations

from typing import Any, Hashable, Mapping, Sequence

from broker_core.context import NodeContext
from broker_core.effects import MuteConnection
from broker_core.errors import ConfigError
from broker_core.inputs import RequestHandled
from broker_core.messages import FetchResponse, ProduceRequest, ProduceResponse, RequestThrottle
from broker_core.records import RecordBatch
from broker_core.quotas import NANOS_TO_PERCENTAGE_PER_SECOND, UNLIMITED, ClientQuotaManager, ClientQuotas

PRODUCE, FETCH, REQUEST = "produce", "fetch", "request"
JAVA_INT_MAX = 2**31 - 1


class ClientQuotaEnforcer:
    """One broker's client quotas and the throttles it gave out."""

    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx
        self.quotas = ClientQuotas.from_config(ctx.config)
        # the size each produce waiting for its answer is recorded with, by (client, correlation id)
        # (a list: acks=0 produces of the simulation all carry correlation id 0)
        self._produce_bytes: dict[tuple[Hashable, int], list[tuple[str, str, int]]] = {}
        # a throttled client's last throttle: (throttle_time_ms, answered at), until its next request
        self._throttled: dict[Hashable, tuple[int, int, str]] = {}

    # -- configuration ---------------------------------------------------------------
    def apply_config(self, path: str, props: Mapping[str, Any]) -> None:
        """A quota node read (at startup or after a change notification): its full
        content. A refused node changes nothing and says why in the trace."""
        try:
            entity = self.quotas.apply_config(path, props)
        except ConfigError as error:
            self.ctx.trace("quota_config_refused", entity=path, key=error.key, reason=error.message)
            return
        self.ctx.trace("quota_config_changed", entity=entity.path,
                       config={key: _number(value) for key, value in sorted(self.quotas.configs.get(entity, {}).items())})

    # -- arrivals --------------------------------------------------------------------
    def request_arrived(self, src: Hashable, client_id: str) -> None:
        """A client's produce or fetch reached the core: if its last answer was throttled,
        trace how long after that answer it came (what the client waited, plus the
        network both ways), for the checker's comparison with the throttle time."""
        last = self._throttled.pop(src, None)
        if last is not None:
            throttle_ms, answered_ms, quota_type = last
            self.ctx.trace("throttle_waited", client=client_id, quota_type=quota_type, throttle_time_ms=throttle_ms,
                           waited_ms=self.ctx.now_ms - answered_ms)

    def produce_received(self, src: Hashable, correlation_id: int, client_id: str, user: str,
                         request: ProduceRequest) -> None:
        """Keep the request's size (``produce_request_bytes``) for when it is answered
        (the produce quota records it, the request-time model charges for it)."""
        if self.quotas.produce.quotas_enabled or self._modelled(request.acks):
            self._produce_bytes.setdefault((src, correlation_id), []).append(
                (client_id, user, produce_request_bytes(request)))

    def fetch_cap(self, client_id: str, user: str) -> int:
        """2.7.0 KafkaApis.handleFetchRequest's ``maxQuotaWindowBytes`` for a consumer:
        ``getMaxValueInQuotaWindow(...).toInt``, quota x (samples - 1) x window, the most a
        fetch may carry without being throttled for sure; Int.MaxValue without a quota
        (Double.MaxValue saturates). Followers' fetches are never capped by it."""
        manager = self.quotas.fetch
        if not manager.quotas_enabled:
            return JAVA_INT_MAX
        return int(min(manager.max_value_in_quota_window(user, client_id, self.ctx.now_ms), JAVA_INT_MAX))

    # -- answers ---------------------------------------------------------------------
    def produce_answered(self, src: Hashable, correlation_id: int, acks: int = 0) -> int:
        """Record an answered produce; its throttle time (0: none): the larger of the
        produce quota's and, modelled, the request quota's (2.7.0 KafkaApis
        handleProduceRequest: ``maxThrottleTimeMs``; acks=0 is exempt from the request
        quota, "the request quota is not enforced if acks == 0")."""
        waiting = self._produce_bytes.get((src, correlation_id))
        if not waiting:
            return 0
        client_id, user, size = waiting.pop(0)
        if not waiting:
            del self._produce_bytes[(src, correlation_id)]
        throttle = self._record(self.quotas.produce, PRODUCE, src, client_id, user, size, size)
        if self._modelled(acks):
            throttle = max(throttle, self.request_time(src, client_id, user, self.modelled_nanos(size)))
        return throttle

    def throttled_produce(self, src: Hashable, response: ProduceResponse, acks: int = -1) -> ProduceResponse:
        response.throttle_time_ms = self.produce_answered(src, response.correlation_id, acks)
        return response

    def fetch_answered(self, src: Hashable, client_id: str, user: str, response: FetchResponse,
                       size: int) -> FetchResponse:
        """Record a consumer's fetch answer of ``size`` bytes (its batches' v2 sizes:
        2.7.0 records ``fetchContext.getResponseSize``, the whole response); throttled,
        it is answered with no partitions (KIP-219's empty response) and its bytes are
        taken back."""
        manager = self.quotas.fetch
        modelled = self._modelled(-1)
        if not manager.quotas_enabled and not modelled:
            return response
        # 2.7.0 handleFetchRequest records the request time first, then the bytes; either
        # throttle empties the answer and takes the bytes back
        request_throttle = self.request_time(src, client_id, user, self.modelled_nanos(size)) if modelled else 0
        throttle = max(self._record(manager, FETCH, src, client_id, user, size, 0, request_throttle > 0),
                       request_throttle)
        if throttle <= 0:
            return response
        if manager.quotas_enabled:
            manager.unrecord(user, client_id, size, self.ctx.now_ms)
        return FetchResponse(response.correlation_id, {}, throttle)

    # -- the request-time quota --------------------------------------------------------
    def _modelled(self, acks: int) -> bool:
        """Whether the core charges this answer's modelled handler time: the model is
        the time source, a request_percentage quota was ever set (``quotasEnabled``:
        without one nothing is recorded, so runs without it are unchanged), and the
        request is not an acks=0 produce (exempt in 2.7.0)."""
        return (acks != 0 and self.ctx.config.request_time_source == "model"
                and self.quotas.request.quotas_enabled)

    def modelled_nanos(self, size: int) -> int:
        """The simulation's handler time for a request moving ``size`` bytes: a fixed
        cost per request plus a cost per byte (isrlab's own keys, docs/quotas.md)."""
        config = self.ctx.config
        return config.request_model_base_nanos + config.request_model_nanos_per_byte * size

    def request_time(self, src: Hashable, client_id: str, user: str, nanos: int) -> int:
        """2.7.0 ClientRequestQuotaManager.maybeRecordAndGetThrottleTimeMs: record the
        handler's ``nanos`` as percent-seconds of one thread, and return the throttle
        (bounded to one window, ``boundedThrottleTime``); 0 and nothing recorded while
        no request quota was ever set. A throttle mutes the connection, as for bytes."""
        manager = self.quotas.request
        if not manager.quotas_enabled:
            return 0
        percent = nanos * NANOS_TO_PERCENTAGE_PER_SECOND
        throttle, quota, rate = manager.record_and_measure(user, client_id, percent, self.ctx.now_ms)
        if quota >= UNLIMITED:
            return max(throttle, 0)
        return self._report(manager, REQUEST, src, client_id, user, {"percent": round(percent, 9), "nanos": nanos},
                            max(throttle, 0), quota, rate)

    def request_handled(self, event: RequestHandled) -> None:
        """The real binding timed a request (``RequestHandled``): record the previous
        response's network time unchecked (2.7.0 ``recordNetworkThreadTimeCallback``,
        ``recordNoThrottle``), then, unless the request is exempt
        (``sendResponseExemptThrottle``), its handler time; answer the throttle."""
        manager, now = self.quotas.request, self.ctx.now_ms
        if event.network_nanos > 0:
            manager.record_network_time(event.user, event.client_id, event.network_nanos, now)
        exempt = request_quota_exempt(event.api_key, event.replica_id)
        throttle = 0 if exempt else self.request_time(event.src, event.client_id, event.user, event.handler_nanos)
        self.ctx.send(event.src, RequestThrottle(event.correlation_id, throttle))

    def _record(self, manager: ClientQuotaManager, quota_type: str, src: Hashable, client_id: str, user: str,
                size: int, size_if_throttled: int, throttled_anyway: bool = False) -> int:
        now = self.ctx.now_ms
        throttle, quota, rate = manager.record_and_measure(user, client_id, size, now)
        if quota >= UNLIMITED:
            return max(throttle, 0)
        throttle = max(throttle, 0)  # a wrapped (negative) throttle is none, as Kafka's throttle() treats it
        sent = size if throttle <= 0 and not throttled_anyway else size_if_throttled
        return self._report(manager, quota_type, src, client_id, user, {"bytes": sent}, throttle, quota, rate, size)

    def _report(self, manager: ClientQuotaManager, quota_type: str, src: Hashable, client_id: str, user: str,
                amount: dict[str, Any], throttle: int, quota: float, rate: float | None, size: int = -1) -> int:
        """Trace a recorded request and, throttled, mute its connection. Two throttles of
        one answer (bytes and request time) mute it until the later end: both bindings
        keep the latest mute, which is 2.7's one ``throttle`` call with the larger time."""
        now = self.ctx.now_ms
        self.ctx.trace("quota_recorded", client=client_id, user=user, quota_type=quota_type, **amount,
                       quota=_number(quota), throttle_time_ms=throttle, samples=manager.samples,
                       window_ms=manager.window_ms)
        if throttle > 0:
            extra = {"bytes": size} if size >= 0 else amount
            self.ctx.trace("throttled", client=client_id, user=user, connection=str(src), quota_type=quota_type,
                           **extra, throttle_time_ms=throttle, quota=_number(quota),
                           rate=None if rate is None else round(rate, 3))
            last = self._throttled.get(src)
            if last is None or last[1] != now or last[0] < throttle:
                self._throttled[src] = (throttle, now, quota_type)
            self.ctx.emit(MuteConnection(src, now + throttle))
        return throttle


def produce_request_bytes(request: ProduceRequest) -> int:
    """What 2.7.0 KafkaApis.handleProduceRequest records against the produce quota,
    ``request.header.toStruct.sizeOf + request.sizeOfBodyInBytes``, plus the frame's
    4-byte size as real_io counts it: a Produce v8 request (what librdkafka and
    kafka-python send a 2.7 broker) carrying the request's batches in the v2 format.
    The real binding measures it on the wire (``request_bytes``); the simulation, whose
    requests never are bytes, has it computed here, byte for byte the same layout:
    frame size 4; header v1: api key 2, version 2, correlation id 4, client id 2 + UTF-8;
    body: transactional id 2 (null), acks 2, timeout 4, topics 4, per topic its name
    2 + UTF-8 and partitions 4, per partition its index 4 and records 4 + the batch's
    v2 size."""
    if request.request_bytes >= 0:
        return request.request_bytes
    size = 4 + 8 + 2 + len(request.client_id.encode()) + 2 + 2 + 4 + 4
    topics: set[str] = set()
    for tp, payload in request.partitions.items():
        if tp.topic not in topics:
            topics.add(tp.topic)
            size += 2 + len(tp.topic.encode()) + 4
        # records as the workload made them, or a client's batch, which knows its v2 size
        size += 4 + 4 + (RecordBatch(0, -1, payload).size_bytes if isinstance(payload, Sequence) else payload.size_bytes)
    return size


def _number(value: float) -> int | float:
    """A quota as the trace shows it: an integer where it is one (byte rates are longs)."""
    return int(value) if value == int(value) else value


# 2.7.0 KafkaApis answers these with sendResponseExemptThrottle: the controller's and the
# brokers' own requests (LeaderAndIsr 4, StopReplica 5, UpdateMetadata 6,
# ControlledShutdown 7, AlterIsr 56), by API key as the wire names them. ApiVersions is
# not among them in 2.7.0.
REQUEST_QUOTA_EXEMPT_API_KEYS = frozenset({4, 5, 6, 7, 56})
FETCH_API_KEY = 1


def request_quota_exempt(api_key: int, replica_id: int) -> bool:
    """Whether 2.7.0 exempts a request from the request quota: the inter-broker APIs
    above and a follower's fetch (handleFetchRequest: ``if (fetchRequest.isFromFollower)
    ... sendResponseExemptThrottle``). An acks=0 produce is exempt too; it has no
    response, so the binding reports no time for it."""
    return api_key in REQUEST_QUOTA_EXEMPT_API_KEYS or (api_key == FETCH_API_KEY and replica_id >= 0)
