"""The quota checkers (analysis/checkers/quotas.py) on hand-built traces: each finds what
it names, and says when it tested nothing."""
from analysis.checkers.quotas import check_quotas
from analysis.history import History, build_history
from analysis.trace import Event


def recorded(t_ms: int, size: int, quota: int = 1000, client: str = "c") -> Event:
    return Event(t_ms, "broker-1", "quota_recorded", {"client": client, "user": "ANONYMOUS", "quota_type": "produce",
                                                       "bytes": size, "quota": quota, "throttle_time_ms": 0,
                                                       "samples": 11, "window_ms": 1000})


def results(events):
    return {r.name: r for r in check_quotas(events, History())}


def test_no_quota_says_it_tested_nothing():
    found = results([])
    assert found["quota_violations"].valid and "tested nothing" in found["quota_violations"].explanation
    assert "tested nothing" in found["throttled"].explanation


def test_a_client_within_the_derived_tolerance_passes():
    # T x (N x W) + M = 1000 x 11 + 500: a young window's credit, then one request per second
    events = [recorded(0, 10_000)] + [recorded(1000 * i, 1000) for i in range(1, 10)]
    assert results(events)["quota_violations"].value == 0


def test_bytes_over_the_tolerance_within_a_span_are_a_violation():
    """docs/quotas.md "Tolerance": over spans of at most (N-1) x W, bytes <= T x (span +
    N x W + 0.5 ms) + M; 30 requests of 1000 B in 3 s break it for a 1000 B/s quota."""
    events = [recorded(100 * i, 1000) for i in range(30)]
    found = results(events)["quota_violations"]
    assert found.value > 0 and not found.valid and found.examples[0]["client"] == "c"


def test_spans_across_a_quota_change_are_not_judged_against_one_quota():
    events = [recorded(100 * i, 1000, quota=1_000_000) for i in range(30)] + [recorded(3000, 1000)]
    assert results(events)["quota_violations"].value == 0


def test_a_request_before_the_throttle_time_passed_is_not_honoured():
    waited = [Event(10, "broker-1", "throttle_waited", {"client": "c", "quota_type": "produce",
                                                          "throttle_time_ms": 500, "waited_ms": 200}),
              Event(900, "broker-1", "throttle_waited", {"client": "c", "quota_type": "produce",
                                                           "throttle_time_ms": 500, "waited_ms": 502})]
    found = results([recorded(0, 1)] + waited)["throttle_not_honoured"]
    assert found.value == 1 and not found.valid and found.examples[0]["waited_ms"] == 200


def request_recorded(t_ms: int, percent: float, throttle_ms: int = 0, quota: float = 10.0) -> Event:
    return Event(t_ms, "broker-1", "quota_recorded", {"client": "c", "user": "ANONYMOUS", "quota_type": "request",
                                                       "percent": percent, "nanos": int(percent * 1e7),
                                                       "quota": quota, "throttle_time_ms": throttle_ms,
                                                       "samples": 11, "window_ms": 1000})


def test_request_time_within_the_tolerance_passes_and_over_it_is_a_violation():
    """The same tolerance over percent-seconds of handler time (a request_percentage of
    10 is 10 percent-seconds per second): 100 requests of 1 %-s within 2 s break it
    (bound 10 x (2 + 11) + 1 = 131 only from 131 on: 200 requests do), one per second do not."""
    assert results([request_recorded(1000 * i, 1.0) for i in range(10)])["quota_violations"].value == 0
    found = results([request_recorded(10 * i, 1.0) for i in range(200)])["quota_violations"]
    assert found.value > 0 and found.examples[0]["quota_type"] == "request"


def test_request_time_spans_after_a_capped_throttle_are_not_judged():
    """2.7.0 ClientRequestQuotaManager.throttleTime: boundedThrottleTime caps a throttle
    at one window, so a client that waited it out may still be over the derived bound:
    the span ending at the request after a capped throttle is not judged, the others are."""
    # 1 %-s a millisecond: the bound 10 x (span + 11 s + 0.5 ms) + 1 holds up to the 112th
    # request and breaks at the 113th, which follows the throttle under test
    def series(last_throttle_ms):
        return ([request_recorded(i, 1.0) for i in range(111)] + [request_recorded(111, 1.0, last_throttle_ms)]
                + [request_recorded(112, 1.0)])
    assert results(series(1000))["quota_violations"].value == 0
    assert results(series(999))["quota_violations"].value > 0


def test_the_quiet_producers_latency_leaves_out_the_throttled_one_by_client_id():
    """In the real binding a throttle names the broker's connection (``client-5``), not
    the producer's process: ``run_started``'s ``clients`` maps the throttled client id
    (``noisy``) to ``producer-0``, whose slow sends are then not counted as the quiet
    producer's latency (a real run of quota-noisy-neighbour reported the noisy one's 44 s)."""
    def send(node: str, op: int, start: int, took: int) -> list[Event]:
        return [Event(start, node, "invoke", {"op": op, "f": "send", "partition": "t-0", "values": [f"{node}:{op}"]}),
                Event(start + took, node, "ok", {"op": op, "f": "send", "partition": "t-0", "offsets": [op]})]
    started = Event(0, "world", "run_started", {"clients": {"producer-0": "noisy", "producer-1": "quiet"}})
    throttle = Event(50, "broker-1", "throttled", {"client": "noisy", "connection": "client-5", "user": "ANONYMOUS",
                                                    "quota_type": "produce", "throttle_time_ms": 900})
    events = [started, recorded(40, 5000, client="noisy"), throttle]
    for op in range(1, 101):
        events += send("producer-0", op, 100 * op, 30_000) + send("producer-1", op, 100 * op, 20)
    events.sort(key=lambda e: e.t_ms)

    def latency(with_clients: bool) -> int:
        chosen = events if with_clients else [e for e in events if e.type != "run_started"]
        found = {r.name: r for r in check_quotas(chosen, build_history(chosen))}
        return found["unthrottled_produce_p99_ms"].value

    assert latency(with_clients=True) == 20
    assert latency(with_clients=False) == 30_000  # without the map the noisy one is taken for quiet
