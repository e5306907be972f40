"""Client quotas, judged from the brokers' ``quota_recorded``, ``throttled`` and
``throttle_waited`` events (broker_core/quota_enforcement.py writes them, in both
bindings, only for clients under a finite quota).

- ``quota_violations``: for each broker, quota type and (user, client), every span of at
  most (N - 1) x W between two recorded requests (N = quota.window.num, W =
  quota.window.size.seconds) carries at most T x (span + N x W + 0.5 ms) + M bytes, T the
  quota and M the largest request of the series: the tolerance docs/quotas.md derives
  for a client that waits out its throttles. Spans whose requests saw different quotas
  (a quota changed between them) are not judged: the bound holds for one quota.
  Request-time quotas (``quota_type`` "request", ``request_percentage``) are judged the
  same way over the recorded percent-seconds of handler time (``percent``; T in percent
  of one thread), with one exception: their throttle is capped at one window (2.7.0
  ClientRequestQuotaManager ``boundedThrottleTime``), and the bound's derivation needs
  the throttle given to the request before the span's last one, so a span whose
  second-to-last request got a capped throttle is not judged.
- ``throttle_not_honoured``: a throttled client's next request reached the broker
  before the throttle time had passed (KIP-219: the broker mutes the connection and the
  client waits, so this should never happen).
- ``throttled``: how many responses were throttled, for ``expect:`` to require some.
- ``unthrottled_produce_p99_ms``: the worst 99th percentile of produce latency (invoke to
  ok) among producers never throttled: what a noisy neighbour's quota protects.

With no quota at all they say so ("tested nothing") rather than pass in silence.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from analysis.checkers.result import CheckResult, Examples, anomaly
from analysis.history import History
from analysis.trace import Event

NOTHING = "tested nothing: no client ran under a quota (no quota_recorded event)"


def check_quotas(events: Iterable[Event], history: History) -> list[CheckResult]:
    series: dict[tuple, list[Event]] = defaultdict(list)
    waited: list[Event] = []
    throttled: list[Event] = []
    clients: dict[str, str] = {}
    for event in events:
        if event.type == "run_started":
            clients = event.get("clients") or {}
        elif event.type == "quota_recorded":
            series[(event.node, event["quota_type"], event["user"], event["client"])].append(event)
        elif event.type == "throttle_waited":
            waited.append(event)
        elif event.type == "throttled":
            throttled.append(event)
    return [_violations(series), _not_honoured(waited, bool(series)), _throttled(throttled, bool(series)),
            _unthrottled_latency(history, throttled, clients)]


def _amount(event: Event) -> float:
    """What a recorded request used: bytes, or the handler time in percent-seconds."""
    return event["percent"] if event["quota_type"] == "request" else event["bytes"]


def _judged(records: list[Event], j: int) -> bool:
    """Whether the tolerance applies to spans ending at ``records[j]`` (see the module's
    docstring: not after a request-time throttle capped at one window)."""
    if j == 0 or records[j]["quota_type"] != "request":
        return True
    before = records[j - 1]
    return before["throttle_time_ms"] < before["window_ms"]


def _violations(series: dict[tuple, list[Event]]) -> CheckResult:
    examples = Examples()
    spans = 0
    for key in sorted(series):
        records = series[key]
        largest = max(_amount(e) for e in records)
        for j, last in enumerate(records):
            if not _judged(records, j):
                continue
            samples, window = last["samples"], last["window_ms"]
            total = 0.0
            for i in range(j, -1, -1):
                first = records[i]
                span = last.t_ms - first.t_ms
                if span > (samples - 1) * window or first["quota"] != last["quota"]:
                    break
                total += _amount(first)
                spans += 1
                bound = last["quota"] * (span + samples * window + 0.5) / 1000.0 + largest
                if total > bound:
                    broker, quota_type, user, client = key
                    examples.add({"t_ms": last.t_ms, "node": broker, "client": client, "user": user,
                                  "quota_type": quota_type, "from_ms": first.t_ms, "used": round(total, 6),
                                  "bound": round(bound, 1), "quota": last["quota"]})
                    break
    if not series:
        return CheckResult("quota_violations", 0, True, NOTHING)
    return anomaly("quota_violations", examples, "spans where a client exceeded its quota by more than the tolerance",
                   f"every client stayed within its quota's tolerance ({spans} spans of {len(series)} series)",
                   {"series": len(series), "spans": spans})


def _not_honoured(waited: list[Event], quotas: bool) -> CheckResult:
    examples = Examples()
    excess = []
    for event in waited:
        if event["waited_ms"] < event["throttle_time_ms"]:
            examples.add({"t_ms": event.t_ms, "node": event.node, "client": event["client"],
                          "throttle_time_ms": event["throttle_time_ms"], "waited_ms": event["waited_ms"]})
        excess.append(event["waited_ms"] - event["throttle_time_ms"])
    if not waited:
        text = "tested nothing: no throttled client sent again" if quotas else NOTHING
        return CheckResult("throttle_not_honoured", 0, True, text)
    details = {"throttles_followed": len(waited), "min_excess_ms": min(excess), "max_excess_ms": max(excess)}
    return anomaly("throttle_not_honoured", examples, "requests that came before their throttle time had passed",
                   f"all {len(waited)} throttled clients waited at least the throttle time before their next "
                   f"request (extra wait {min(excess)}..{max(excess)} ms)", details)


def _throttled(throttled: list[Event], quotas: bool) -> CheckResult:
    if not quotas:
        return CheckResult("throttled", 0, True, NOTHING)
    clients = sorted({e["client"] for e in throttled})
    text = (f"{len(throttled)} responses throttled (clients: {', '.join(clients)})" if throttled
            else "tested nothing: quotas were set but no response was throttled")
    return CheckResult("throttled", len(throttled), True, text, details={"clients": clients})


def _unthrottled_latency(history: History, throttled: list[Event], clients: dict[str, str]) -> CheckResult:
    """The quiet producers' produce latency. A throttled event names the client id (which
    ``run_started``'s ``clients`` maps to processes) and the connection, which in the
    simulation is the producer's process; in the real binding it is the broker's name for
    the socket, so the client id is what ties a throttle to a producer there."""
    throttled_ids = {e["client"] for e in throttled}
    noisy = {e["connection"] for e in throttled} | {p for p, c in clients.items() if c in throttled_ids}
    latencies: dict[str, list[int]] = defaultdict(list)
    for op in history.of("send"):
        if op.process not in noisy and op.outcome == "ok":
            latencies[op.process].append(op.done.t_ms - op.invoke.t_ms)
    if not latencies:
        return CheckResult("unthrottled_produce_p99_ms", 0, True, "no acknowledged send from an unthrottled producer")
    worst = {process: _p99(values) for process, values in sorted(latencies.items())}
    value = max(worst.values())
    return CheckResult("unthrottled_produce_p99_ms", value, True,
                       f"99th percentile produce latency of producers never throttled: at most {value} ms",
                       details={"p99_ms": worst, "throttled": sorted(noisy)})


def _p99(values: list[int]) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, (99 * len(ordered)) // 100)]
