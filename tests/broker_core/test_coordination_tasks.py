"""Coordination tasks: generators that yield operations and receive replies."""
from broker_core import coordination as coord
from broker_core.effects import CancelTimer, CoordRequest, SetTimer


def make():
    out = []
    now = [0]
    return coord.TaskRunner(out.append, lambda: now[0]), out, now


def test_a_task_yields_requests_and_receives_replies_in_turn():
    runner, out, _ = make()
    seen = []

    def task():
        reply = yield coord.GetData("/a")
        seen.append(reply.value)
        reply = yield coord.SetData("/a", coord.encode_data(2), reply.version)
        seen.append(reply.ok)
    runner.start(task())
    first = out[-1]
    assert isinstance(first, CoordRequest) and first.op == coord.GetData("/a")
    runner.on_reply(first.request_id, coord.Reply(True, data=coord.encode_data(1), version=7))
    second = out[-1]
    assert second.op == coord.SetData("/a", b"2", 7) and second.request_id != first.request_id
    runner.on_reply(second.request_id, coord.Reply(True, version=8))
    assert seen == [1, True] and runner.in_flight == 0


def test_sleep_sets_a_timer_and_resumes_on_it():
    runner, out, now = make()
    resumed = []

    def task():
        yield coord.Sleep(500)
        resumed.append(True)
    now[0] = 100
    runner.start(task())
    timer = out[-1]
    assert isinstance(timer, SetTimer) and timer.at_ms == 600
    runner.on_timer(timer.key)
    assert resumed == [True]


def test_cancel_all_abandons_tasks_and_ignores_late_replies():
    runner, out, _ = make()
    finished = []

    def waiting():
        try:
            yield coord.GetData("/x")
            finished.append("resumed")
        finally:
            finished.append("closed")

    def sleeping():
        yield coord.Sleep(10)
    runner.start(waiting())
    request = out[-1]
    runner.start(sleeping())
    runner.cancel_all()
    assert finished == ["closed"] and runner.in_flight == 0
    assert any(isinstance(e, CancelTimer) for e in out)
    runner.on_reply(request.request_id, coord.Reply(True))
    assert finished == ["closed"]


def test_paths_and_data_encoding_are_stable():
    assert coord.partition_state_path("t", 3) == "/brokers/topics/t/partitions/3/state"
    assert coord.encode_data({"b": 1, "a": [2]}) == b'{"a":[2],"b":1}'
    assert coord.decode_data(None) is None
