"""The shrink's edits: the cheapest simplification is tried first (one record a second,
the shortest run the faults allow), then halves, so a shrink that holds early makes
every later run cheap."""
from scenarios.explore.shrink import Facts, _fewer_records, _shorter_run

NO_FACTS = Facts({}, {}, [], 0, 0)


def document(rate=100, duration="45s", faults=()) -> dict:
    return {"name": "d", "workload": {"producers": [{"topic": "t", "acks": "all", "rate": rate}]},
            "duration": duration, "faults": list(faults)}


def test_a_producer_rate_goes_to_one_record_a_second_first_then_a_quarter_then_half():
    edits = list(_fewer_records(document(100), NO_FACTS))
    assert [label for label, _ in edits] == ["producer 0 at 1 records/s", "producer 0 at 25 records/s",
                                             "producer 0 at 50 records/s"]
    assert [d["workload"]["producers"][0]["rate"] for _, d in edits] == [1, 25, 50]
    assert [label for label, _ in _fewer_records(document(3), NO_FACTS)] == ["producer 0 at 1 records/s"]
    assert list(_fewer_records(document(1), NO_FACTS)) == []


def test_a_run_goes_to_the_shortest_the_faults_allow_first():
    edits = list(_shorter_run(document(faults=[{"at": "9500ms", "crash": 1}]), NO_FACTS))
    assert [label for label, _ in edits] == ["run 11s", "run 22s", "run 33s"]
    late = list(_shorter_run(document(faults=[{"at": "30s", "crash": 1}]), NO_FACTS))
    assert [label for label, _ in late] == ["run 32s", "run 33s"]


def test_a_coordinator_role_is_replaced_by_the_broker_it_resolved_to():
    from scenarios.explore.shrink import _concrete
    step = {"at": "3s", "crash": [{"coordinator": "g"}, {"leader": "t-0"}], "for": "2s"}
    facts = Facts({7: 3000}, {7: {"coordinator: g": 3, "leader: t-0": None}}, [7], 0, 0)
    [(label, edited)] = list(_concrete(document(faults=[step]), facts))
    assert label == "fault 1's role targets replaced by their brokers"
    assert edited["faults"][0]["crash"] == [3, {"leader": "t-0"}]  # a role that resolved to nothing stays
