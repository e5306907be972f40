"""Group consumers in scenario files (scenarios/parse_groups.py): what parses, errors
naming file, line and field, and what each binding runs."""
from pathlib import Path

import pytest

from scenarios.parse import parse_scenario
from scenarios.runner import check_binding, run_scenario
from scenarios.source import ScenarioError

GOOD = """\
name: groups
cluster:
  brokers: 3
  topics:
    - {name: t, partitions: 6, replication_factor: 3}
    - {name: u, partitions: 2, replication_factor: 3}
workload:
  producers:
    - {topic: t}
  consumers:
    - {topic: t}
    - group: g
      topics: [t, u]
      members: 3
      commit: after_processing
      auto.offset.reset: earliest
      session.timeout.ms: 6s
      heartbeat.interval.ms: 2s
      max.poll.interval.ms: 1m
      max.poll.records: 50
      partition.assignment.strategy: [sticky, range]
      static: true
    - {group: h, topic: t, commit: async, retry_failed_commits: true}
    - {group: i, topic: u, auto.commit.interval.ms: 1s}
faults:
  - {at: 5s, isolate: group-0-1, for: 20s}
duration: 30s
"""


def error_of(text: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "s.yaml")
    return info.value


def test_group_entries_parse_apart_from_the_plain_consumers():
    s = parse_scenario(GOOD, "s.yaml")
    assert [c.topic for c in s.consumers] == ["t"]  # still consumer-0
    g, h, i = s.group_consumers
    assert (g.group, g.topics, g.index, g.members, g.commit, g.auto_offset_reset) == \
        ("g", ("t", "u"), 1, 3, "after_processing", "earliest")
    assert (g.session_timeout_ms, g.heartbeat_interval_ms, g.max_poll_interval_ms, g.max_poll_records) == \
        (6000, 2000, 60000, 50)
    assert (g.assignors, g.static) == (("sticky", "range"), True)
    # the Java consumer's defaults
    assert (h.commit, h.retry_failed_commits, h.auto_offset_reset, h.assignors, h.members) == \
        ("async", True, "latest", ("range",), 1)
    assert (i.commit, i.auto_commit_interval_ms, i.session_timeout_ms, i.heartbeat_interval_ms) == \
        ("auto", 1000, 10000, 3000)


@pytest.mark.parametrize("change, field, words", [
    (("      members: 3", "      members: 0"), "workload.consumers[1].members", "between 1 and 100"),
    (("commit: after_processing", "commit: sometimes"), "workload.consumers[1].commit", "must be one of"),
    (("topics: [t, u]", "topics: [t, v]"), "workload.consumers[1].topics[1]", "unknown topic"),
    (("topics: [t, u]", "topics: [t, t]"), "workload.consumers[1].topics[1]", "named twice"),
    (("topics: [t, u]", "topic: t\n      topics: [u]"), "workload.consumers[1].topics", "either topic or topics"),
    (("heartbeat.interval.ms: 2s", "heartbeat.interval.ms: 6s"), "workload.consumers[1].heartbeat.interval.ms",
     "less than session.timeout.ms"),
    (("[sticky, range]", "[sticky, cooperative-sticky]"), "workload.consumers[1].partition.assignment.strategy[1]",
     "unknown assignor"),
    (("auto.offset.reset: earliest", "auto.offset.reset: none"), "workload.consumers[1].auto.offset.reset",
     "earliest, latest"),
    (("static: true", "static: yes please"), "workload.consumers[1].static", "true or false"),
    (("max.poll.records: 50", "max.poll.recrods: 50"), "workload.consumers[1].max.poll.recrods", "unknown key"),
    (("commit: async, retry", "commit: auto, retry"), "workload.consumers[2].retry_failed_commits", "needs commit: async"),
    (("{group: i, topic: u,", "{group: i, topic: u, commit: async,"), "workload.consumers[3].auto.commit.interval.ms",
     "needs commit: auto"),
    (("group: g\n", "group: a/b\n"), "workload.consumers[1].group", "without /"),
    (("isolate: group-0-1", "isolate: group-0-3"), "faults[0].isolate", "group-0-1"),
])
def test_mistakes_name_the_file_line_and_field(change, field, words):
    old, new = change
    assert old in GOOD
    error = error_of(GOOD.replace(old, new, 1))
    assert error.filename == "s.yaml" and error.line is not None
    assert error.field == field and words in error.message, (error.field, error.message)
    line = GOOD.replace(old, new, 1).splitlines()[error.line - 1]
    assert field.split(".")[-1].split("[")[0] in line or field.endswith("]") or "topics" in field, line


def test_both_bindings_run_group_consumers_but_the_real_one_has_no_eager_sticky_assignor():
    s = parse_scenario(GOOD, "s.yaml")
    check_binding(s, "sim")  # the simulation runs group members (sim/group_consumer.py)
    with pytest.raises(ScenarioError) as info:
        check_binding(s, "real")
    error = info.value
    assert error.field == "workload.consumers[1].partition.assignment.strategy"
    assert "no eager sticky assignor" in error.message and "range or roundrobin" in error.message
    # what librdkafka's members can do runs (real_io/real_groups.py); a network fault
    # still cannot single a member out behind the cluster's one client node
    runnable = GOOD.replace("[sticky, range]", "[roundrobin, range]").replace(
        "  - {at: 5s, isolate: group-0-1, for: 20s}", "  - {at: 5s, pause: group-0-1, for: 20s}")
    check_binding(parse_scenario(runnable, "s.yaml"), "real")
    isolated = GOOD.replace("[sticky, range]", "[range]")
    with pytest.raises(ScenarioError) as info:
        check_binding(parse_scenario(isolated, "s.yaml"), "real")
    assert info.value.field == "faults[0].isolate" and "group-0-1" in info.value.message


def test_each_entry_maps_to_its_members_settings():
    from sim.group_member_types import member_configs
    g, h, i = parse_scenario(GOOD, "s.yaml").group_consumers
    members = member_configs(g, 0)
    assert [name for name, _ in members] == ["group-0-0", "group-0-1", "group-0-2"]
    name, config = members[1]
    assert (config.group_id, config.topics, config.group_instance_id, config.client_id) == \
        ("g", ("t", "u"), "group-0-1", "group-0-1")
    assert (config.session_timeout_ms, config.heartbeat_interval_ms, config.max_poll_interval_ms) == (6000, 2000, 60000)
    assert (config.assignors, config.auto_commit, config.auto_offset_reset) == (("sticky", "range"), False, "earliest")
    (_, async_config), = member_configs(h, 1)
    assert (async_config.retry_async_commits, async_config.group_instance_id, async_config.auto_commit) == \
        (True, None, False)
    (_, auto_config), = member_configs(i, 2)
    assert (auto_config.auto_commit, auto_config.auto_commit_interval_ms) == (True, 1000)


def test_isrlab_run_on_the_real_binding_refuses_groups_that_can_have_no_coordinator_with_exit_2_and_no_trace(
        tmp_path: Path):
    import subprocess
    import sys
    scenario = tmp_path / "g.yaml"
    scenario.write_text("cluster:\n  brokers: 1\n  topics: [{name: t, partitions: 2, replication_factor: 1}]\n"
                        "workload:\n  consumers:\n    - {group: g, topic: t, members: 2}\nduration: 5s\n")
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-m", "isrlab", "run", str(scenario), "--binding", "real",
                             "--out", str(tmp_path / "out")], cwd=root, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert (f"{scenario}:6: workload.consumers[0].group: --binding real: offsets.topic.replication.factor is 3 but "
            "the cluster has 1 broker(s)") in result.stderr
    assert not (tmp_path / "out").exists()


def test_process_faults_may_name_a_group_member_and_processing_is_read():
    from faults import model as fm
    text = GOOD.replace("faults:\n", "faults:\n  - {at: 1s, crash: group-0-1, for: 2s}\n  - {at: 2s, pause: group-1-0}\n"
                                     "  - {at: 3s, resume: group-1-0}\n")
    text = text.replace("      static: true\n", "      static: true\n      processing: 300ms\n")
    s = parse_scenario(text, "s.yaml")
    faults = [step.fault for step in s.faults]
    assert fm.Crash(("group-0-1",)) in faults and fm.Pause(("group-1-0",)) in faults
    assert s.group_consumers[0].processing_ms == 300 and s.group_consumers[1].processing_ms == 0


@pytest.mark.parametrize("fault, words", [
    ("crash: group-7-0", "unknown group member 'group-7-0'"),
    ("shutdown: group-0-1", "integer"),        # a controlled shutdown is a broker's
    ("crash: consumer-0", "integer"),          # a plain consumer is not a member process
])
def test_other_client_targets_of_process_faults_are_refused(fault, words):
    text = GOOD.replace("faults:\n", f"faults:\n  - {{at: 1s, {fault}}}\n")
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "s.yaml")
    assert info.value.line == 26 and words in info.value.message, info.value.message


def test_a_coordinator_role_names_the_leader_of_the_groups_offsets_partition():
    """``{coordinator: g}`` is the leader of __consumer_offsets-<partition_for(g)>, out
    of the cluster's offsets.topic.num.partitions (50 unless set), as a broker or a node
    target; the trace spells it as the file does."""
    from broker_core.group_records import partition_for
    from faults import model as fm
    text = GOOD.replace("faults:\n", "faults:\n  - {at: 1s, crash: {coordinator: g}, for: 2s}\n"
                                     "  - {at: 4s, isolate: [{coordinator: h}, zk], for: 1s}\n")
    s = parse_scenario(text, "s.yaml")
    crash, isolate = s.faults[0].fault, s.faults[1].fault
    g = fm.Role("coordinator", f"__consumer_offsets-{partition_for('g', 50)}", group="g")
    assert crash == fm.Crash((g,)) and str(g) == "coordinator: g" and fm.is_role(g)
    assert [str(r) for r in fm.roles_of(isolate)] == ["coordinator: h"]
    three = parse_scenario(text.replace("cluster:\n", "cluster:\n  config: {offsets.topic.num.partitions: 3}\n"),
                           "s.yaml")
    assert fm.roles_of(three.faults[0].fault)[0].partition == f"__consumer_offsets-{partition_for('g', 3)}"


@pytest.mark.parametrize("target, field, words", [
    ("{coordinator: nope}", "faults[0].crash.coordinator", "unknown consumer group 'nope'; the workload's groups: "
                                                            "['g', 'h', 'i']"),
    ("{coordinator: [g]}", "faults[0].crash.coordinator", "must be a string"),
    ("{coordinator: g, isr: true}", "faults[0].crash.isr", "goes with follower"),
    ("{coordinator: g, not_isr: true}", "faults[0].crash.not_isr", "goes with follower"),
    ("{coordinator: g, leader: t-0}", "faults[0].crash", "names one of leader: or follower: with a partition, "
                                                          "or coordinator: with a consumer group"),
    ("{coordinator: g, colour: red}", "faults[0].crash.colour", "unknown key"),
    ("[1, {coordinator: x}]", "faults[0].crash[1].coordinator", "unknown consumer group"),
])
def test_a_bad_coordinator_role_names_the_file_line_and_field(target, field, words):
    text = GOOD.replace("faults:\n", f"faults:\n  - {{at: 1s, crash: {target}}}\n")
    error = error_of(text)
    assert (error.filename, error.line, error.field) == ("s.yaml", 26, field), (error.line, error.field)
    assert words in error.message, error.message


def test_a_coordinator_role_without_group_consumers_says_so():
    text = ("cluster:\n  brokers: 3\n  topics: [{name: t, partitions: 1, replication_factor: 3}]\n"
            "workload:\n  producers: [{topic: t}]\nfaults:\n  - {at: 1s, isolate: {coordinator: g}}\nduration: 5s\n")
    error = error_of(text)
    assert (error.line, error.field) == (7, "faults[0].isolate.coordinator")
    assert "the workload has no group consumers" in error.message


def test_a_trigger_may_test_a_group_members_state():
    """``when: {member: ..., processing/consumed/generation}`` (faults/triggers.py)."""
    from faults.triggers import Comparison
    text = GOOD.replace("faults:\n", "faults:\n  - {when: {member: group-0-0, processing: true}, after: 2s, "
                                     "crash: group-0-0, for: 2s}\n"
                                     "  - {when: {member: group-1-0, consumed: \">=40\", generation: \">=1\"}, "
                                     "pause: group-1-0, for: 1s}\n")
    s = parse_scenario(text, "s.yaml")
    first, second = s.faults[0], s.faults[1]
    assert first.when.member == "group-0-0" and first.when.tests == (("processing", True),)
    assert (first.at_ms, first.for_ms) == (2000, 2000)
    assert second.when.tests == (("consumed", Comparison(">=", 40)), ("generation", Comparison(">=", 1)))
    assert second.when.describe() == {"member": "group-1-0", "consumed": ">=40", "generation": ">=1"}


@pytest.mark.parametrize("when, field, words", [
    ("{member: group-0-3, processing: true}", "faults[0].when.member", "unknown group member 'group-0-3'; members: "
                                                                      "['group-0-0', 'group-0-1', 'group-0-2'"),
    ("{member: consumer-0, processing: true}", "faults[0].when.member", "unknown group member 'consumer-0'"),
    ("{member: [group-0-0], processing: true}", "faults[0].when.member", "must be a string"),
    ("{member: group-0-0, processing: yes please}", "faults[0].when.processing", "true or false"),
    ("{member: group-0-0, consumed: lots}", "faults[0].when.consumed", "comparison"),
    ("{member: group-0-0, generation: true}", "faults[0].when.generation", "number or a comparison"),
    ("{member: group-0-0, committed: 5}", "faults[0].when.committed", "cannot be tested for a group member; "
                                                                      "use one of: processing, consumed, generation"),
    ("{member: group-0-0, partition: t-0, processing: true}", "faults[0].when.partition", "cannot be tested"),
    ("{member: group-0-0}", "faults[0].when", "tests nothing of group-0-0"),
])
def test_a_bad_member_trigger_names_the_file_line_and_field(when, field, words):
    text = GOOD.replace("faults:\n", f"faults:\n  - {{when: {when}, crash: 1}}\n")
    error = error_of(text)
    assert (error.filename, error.line, error.field) == ("s.yaml", 26, field), (error.line, error.field)
    assert words in error.message, error.message


def test_a_member_trigger_without_group_consumers_says_so():
    text = ("cluster:\n  brokers: 3\n  topics: [{name: t, partitions: 1, replication_factor: 3}]\n"
            "workload:\n  producers: [{topic: t}]\n  consumers: [{topic: t}]\n"
            "faults:\n  - {when: {member: group-0-0, processing: true}, crash: 1}\nduration: 5s\n")
    error = error_of(text)
    assert (error.line, error.field) == (8, "faults[0].when.member")
    assert "the workload has no group consumers" in error.message
