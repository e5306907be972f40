"""Scenario files are validated strictly: errors name the file, the line and the field."""
import textwrap

import pytest

from faults import model as fm
from scenarios.parse import parse_scenario
from scenarios.source import ScenarioError

GOOD = """\
name: ok
cluster:
  brokers: 3
  profile: kafka-0.8
  config:
    min.insync.replicas: 2
  topics:
    - name: t
      partitions: 2
      replication_factor: 2
      assignment:
        0: [3, 1]
workload:
  producers:
    - topic: t
      acks: 1
      rate: 50
faults:
  - at: 2s
    crash: 1
  - at: 2500ms
    partition: [[1, 2], [3, zk]]
  - at: 3000ms
    heal: true
duration: 1m
"""


def error_of(text: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(textwrap.dedent(text), "bad.yaml")
    return info.value


def test_a_good_file_parses_with_defaults_and_units():
    s = parse_scenario(GOOD, "ok.yaml")
    assert s.cluster.brokers == (1, 2, 3) and s.cluster.profile == "kafka-0.8"
    topic = s.topic("t")
    assert topic.assignment == {0: (3, 1), 1: (2, 3)}
    assert s.producers[0].acks == 1 and s.producers[0].rate == 50
    assert [f.at_ms for f in s.faults] == [2000, 2500, 3000]
    assert s.faults[1].fault == fm.Split((("broker-1", "broker-2"), ("broker-3", "zk")))
    assert s.duration_ms == 60000


def test_unknown_key_names_file_line_and_field():
    err = error_of(GOOD.replace("      rate: 50\n", "      rate: 50\n      speed: 3\n"))
    assert (err.filename, err.line, err.field) == ("bad.yaml", 18, "workload.producers[0].speed")
    assert "unknown key" in str(err) and str(err).startswith("bad.yaml:18:")


def test_wrong_type_names_the_field():
    err = error_of(GOOD.replace("partitions: 2", "partitions: two"))
    assert err.field == "cluster.topics[0].partitions" and err.line == 9 and "integer" in err.message


def test_a_broker_that_does_not_exist_is_rejected():
    err = error_of(GOOD.replace("crash: 1", "crash: 7"))
    assert err.field == "faults[0].crash" and err.line == 20 and "broker 7 does not exist" in err.message
    err = error_of(GOOD.replace("0: [3, 1]", "0: [3, 9]"))
    assert err.field == "cluster.topics[0].assignment[0][1]"


@pytest.mark.parametrize("change,field", [
    (("min.insync.replicas: 2", "min.insync.replica: 2"), "cluster.config.min.insync.replica"),
    (("acks: 1", "acks: 2"), "workload.producers[0].acks"),
    (("topic: t\n      acks", "topic: nope\n      acks"), "workload.producers[0].topic"),
    (("at: 2s", "at: 2 weeks"), "faults[0].at"),
    (("at: 2s", "at: 2h"), "faults[0].at"),
    (("duration: 1m", "duration: -3"), "duration"),
    (("profile: kafka-0.8", "profile: kafka-0.7"), "cluster.profile"),
    (("heal: true", "heal: maybe"), "faults[2].heal"),
    (("[[1, 2], [3, zk]]", "[[1, 2], [2, zk]]"), "faults[1].partition"),
    (("[[1, 2], [3, zk]]", "[[1, 2], [3, kafka]]"), "faults[1].partition[1][1]"),
])
def test_bad_values_are_rejected_with_their_field(change, field):
    assert error_of(GOOD.replace(*change)).field == field


def test_a_fault_needs_exactly_one_action():
    err = error_of(GOOD.replace("    crash: 1\n", "    crash: 1\n    restart: 1\n"))
    assert err.field == "faults[0]" and "exactly one" in err.message


def test_malformed_yaml_and_missing_sections():
    err = error_of("cluster: [unclosed\n")
    assert err.line is not None and "not valid YAML" in err.message
    assert error_of("name: x\n").field == "cluster"
    assert "duplicate key" in error_of(GOOD + "duration: 2m\n").message
    assert "empty" in error_of("").message
    assert "mapping" in error_of("- a\n- b\n").message


CLIENTS = GOOD.replace("""      rate: 50
""", """      rate: 50
      partitioner: sticky
  consumers:
    - topic: t
      auto.offset.reset: none
      start_offset: 5
      validate_positions: true
""")


def test_client_keys_parse_and_default_to_the_profile():
    """Scenario keys for the Java clients' partitioner (KIP-480) and consumer position
    (auto.offset.reset, seek, KIP-320); None means the profile's default."""
    s = parse_scenario(CLIENTS, "ok.yaml")
    assert s.producers[0].partitioner == "sticky"
    c = s.consumers[0]
    assert (c.auto_offset_reset, c.start_offset, c.validate_positions) == ("none", 5, True)
    plain = parse_scenario(GOOD, "ok.yaml")
    assert plain.producers[0].partitioner is None


@pytest.mark.parametrize("change,field,words", [
    (("partitioner: sticky", "partitioner: random"), "workload.producers[0].partitioner", "round_robin, sticky"),
    (("auto.offset.reset: none", "auto.offset.reset: smallest"), "workload.consumers[0].auto.offset.reset",
     "earliest, latest, none"),
    (("      start_offset: 5\n", ""), "workload.consumers[0].auto.offset.reset", "needs a start_offset"),
    (("start_offset: 5", "start_offset: -1"), "workload.consumers[0].start_offset", "negative"),
    (("validate_positions: true", "validate_positions: 1"), "workload.consumers[0].validate_positions", "true or false"),
])
def test_bad_client_keys_name_their_field(change, field, words):
    err = error_of(CLIENTS.replace(*change))
    assert err.field == field and words in err.message and err.line is not None


@pytest.mark.parametrize("supervisor,field", [("{restart_after: 0s}", "restart_after"),
                                              ("{restart_after: 5s, also: 1}", "also"),
                                              ("{}", "restart_after")])
def test_a_bad_supervisor_names_its_field(supervisor, field):
    text = ("name: s\ncluster:\n  brokers: 3\n  supervisor: " + supervisor +
            "\n  topics: [{name: t}]\nduration: 10s\n")
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "s.yaml")
    assert "s.yaml:4" in str(info.value) and field in str(info.value)


@pytest.mark.parametrize("value", ["60", "'60'", "2.5"])
def test_a_duration_without_a_unit_is_an_error_that_suggests_one(value):
    """Issue 10: ``duration: 60`` used to run 60 ms; a bare number (but 0) now names its
    file, line and field and asks which unit was meant."""
    err = error_of(GOOD.replace("duration: 1m", f"duration: {value}"))
    number = value.strip("'")
    assert err.field == "duration" and err.line == 25
    assert f"{number} needs a unit: {number}s or {number}ms?" in str(err)


def test_zero_needs_no_unit():
    s = parse_scenario(GOOD.replace("  - at: 2s\n", "  - at: 0\n"), "ok.yaml")
    assert s.faults[0].at_ms == 0


@pytest.mark.parametrize("producer,field,message", [
    ("{topic: t, start: 10s, stop: 5s}", "stop", "is not after start (10000 ms)"),
    ("{topic: t, start: 5s, stop: 5s}", "stop", "is not after start (5000 ms)"),
    ("{topic: t, start: 2m}", "start", "is not before the end of the run"),
])
def test_a_producer_that_would_send_nothing_is_rejected(producer, field, message):
    """Issue 10: a producer stopping before it starts ran, produced nothing and passed."""
    text = (f"cluster: {{brokers: 1, topics: [{{name: t}}]}}\nworkload:\n  producers: [{producer}]\n"
            "duration: 1m\n")
    err = error_of(text)
    assert err.field == f"workload.producers[0].{field}" and err.line == 3 and message in str(err)


def test_a_fault_due_at_the_end_of_the_run_is_rejected():
    """Faults stop starting when the workload stops: one due then would never happen."""
    err = error_of(GOOD.replace("  - at: 3000ms\n", "  - at: 1m\n"))
    assert err.field == "faults[2].at" and "is not before the end of the run" in str(err)


KEYED = """\
name: keyed
cluster:
  brokers: 1
  topics: [{name: t, config: {cleanup.policy: compact}}]
workload:
  producers:
    - {topic: t, keys: 10, key_distribution: uniform, tombstone_rate: 0.25}
    - topic: t
      start: 1s
      records:
        - {key: a, value: a1}
        - {key: a, value: null, at: 3s}
        - {key: b, value: b1}
duration: 5s
"""


def test_keyed_workloads_take_a_distribution_a_tombstone_rate_or_a_script():
    s = parse_scenario(KEYED, "keyed.yaml")
    generated, scripted = s.producers
    assert (generated.keys, generated.key_distribution, generated.tombstone_rate) == (10, "uniform", 0.25)
    # a record without at: goes with the one above it (the first with the producer's start)
    assert [(r.key, r.value, r.at_ms) for r in scripted.records] == [("a", "a1", 1000), ("a", None, 3000),
                                                                     ("b", "b1", 3000)]
    plain = parse_scenario(GOOD, "ok.yaml").producers[0]
    assert (plain.key_distribution, plain.tombstone_rate, plain.records) == ("round_robin", 0.0, ())


@pytest.mark.parametrize("change,field,words", [
    (("key_distribution: uniform", "key_distribution: zipf"), "workload.producers[0].key_distribution",
     "round_robin, uniform"),
    (("tombstone_rate: 0.25", "tombstone_rate: 1.5"), "workload.producers[0].tombstone_rate", "between 0 and 1"),
    (("keys: 10, ", ""), "workload.producers[0].key_distribution", "needs keys"),
    (("- topic: t\n      start", "- topic: t\n      rate: 5\n      start"), "workload.producers[1].rate",
     "records only"),
    (("{key: a, value: a1}", "{key: a}"), "workload.producers[1].records[0].value", "null for a tombstone"),
    (("{key: a, value: a1}", "{value: a1}"), "workload.producers[1].records[0].key", "required"),
    (("{key: a, value: a1}", "{key: a, value: [1]}"), "workload.producers[1].records[0].value", "string"),
    (("{key: b, value: b1}", "{key: b, value: b1, at: 2s}"), "workload.producers[1].records[2].at",
     "before the record above"),
    (("{key: b, value: b1}", "{key: b, value: b1, at: 5s}"), "workload.producers[1].records[2].at",
     "before the producer stops"),
    (("{key: b, value: b1}", "{key: b, value: b1, partition: 0}"), "workload.producers[1].records[2].partition",
     "unknown key"),
    (("records:\n", "records: []\n"), "workload.producers[1].records", "at least one"),
])
def test_bad_keyed_workloads_name_their_field(change, field, words):
    text = KEYED.replace(*change)
    if change[1] == "records: []\n":
        text = text.split("        - {key: a, value: a1}")[0] + "duration: 5s\n"
    err = error_of(text)
    assert err.field == field and words in err.message and err.line is not None, err
