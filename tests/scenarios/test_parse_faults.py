"""The faults, triggers, nemesis and expect sections: accepted forms and rejections
that name file, line and field."""
import textwrap

import pytest

from faults import model as fm
from faults.triggers import Comparison
from scenarios.parse import parse_scenario
from scenarios.source import ScenarioError

HEAD = """\
cluster:
  brokers: 3
  topics: [{name: t, partitions: 2, replication_factor: 2}]
workload:
  producers: [{topic: t}]
duration: 60s
"""


def parse(tail: str):
    return parse_scenario(HEAD + textwrap.dedent(tail), "f.yaml")


def error(tail: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        parse(tail)
    return info.value


def test_every_fault_kind_parses():
    s = parse("""\
    faults:
      - {at: 1s, crash: [1, 2], for: 2s}
      - {at: 4s, power_loss: 3}
      - {at: 5s, restart: 3}
      - {at: 6s, shutdown: controller}
      - {at: 7s, pause: all, for: 1s}
      - {at: 9s, isolate: [zk, producer-0]}
      - {at: 10s, partition: random_halves, for: 1s}
      - {at: 11s, bridge: {halves: [[1, 2], [2, 3]], via: 2}}
      - {at: 12s, cut: {from: 1, to: [2, 3]}}
      - {at: 13s, link: {between: [1, 2], latency_ms: 30, jitter_ms: 5, loss: 0.1, duplicate: 0.01, reorder: true}}
      - {at: 14s, heal: all}
      - {at: 15s, expire_session: 2}
      - {at: 16s, slow_fsync: {broker: 1, fsync_ms: 300}, for: 5s}
      - {at: 17s, write_errors: 2}
      - {at: 18s, disk_full: 3}
      - {at: 19s, torn_writes: 1}
      - {at: 20s, bit_flip: {broker: 1, partition: t-1}}
      - {at: 21s, clock: {broker: 2, jump: -30s}}
      - {at: 22s, reset: {between: [{leader: t-0}, [2, producer-0]]}}
    """)
    kinds = [fm.kind_of(step.fault) for step in s.faults]
    assert kinds == ["crash", "power_loss", "restart", "shutdown", "pause", "isolate", "random_halves", "bridge",
                     "cut", "link", "heal", "expire_session", "slow_fsync", "write_errors", "disk_full",
                     "torn_writes", "bit_flip", "clock", "reset"]
    assert s.faults[0].for_ms == 2000 and s.faults[3].fault == fm.Shutdown(("controller",))
    assert s.faults[4].fault == fm.Pause((1, 2, 3))
    assert s.faults[7].fault.via == "broker-2"
    assert s.faults[17].fault == fm.ClockJump((2,), -30000)
    assert s.faults[18].fault == fm.Reset(((fm.Role("leader", "t-0"),), ("broker-2", "producer-0")))


def test_triggers_parse_with_comparisons():
    s = parse("""\
    faults:
      - when: {partition: t-0, isr: [2, 1], high_watermark: ">=100"}
        after: 5s
        delay: 1s
        crash: 1
      - when: {partition: t-1, broker: 3, role: follower, log_end_offset: "<10"}
        isolate: 3
      - when: {controller: 2}
        crash: controller
    """)
    first = s.faults[0]
    assert first.at_ms == 5000 and first.delay_ms == 1000
    assert first.when.tests == (("isr", (2, 1)), ("high_watermark", Comparison(">=", 100.0)))
    view = {"controller": 1, "partitions": {"t-0": {"leader": 1, "leader_epoch": 0, "isr": [1, 2],
                                                    "high_watermark": 150, "replicas": {}}}}
    assert first.when.holds(view)
    view["partitions"]["t-0"]["high_watermark"] = 99
    assert not first.when.holds(view)
    assert not s.faults[2].when.holds(view) and s.faults[2].when.holds({**view, "controller": 2})


@pytest.mark.parametrize("tail,field,words", [
    ("faults:\n  - {at: 1s, crash: 9}\n", "faults[0].crash", "broker 9 does not exist"),
    ("faults:\n  - {at: 1s, isolate: kafka}\n", "faults[0].isolate", "unknown node"),
    ("faults:\n  - {at: 1s, crash: 1, bogus: 2}\n", "faults[0].bogus", "unknown key"),
    ("faults:\n  - {at: 1s}\n", "faults[0]", "exactly one"),
    ("faults:\n  - {at: 1s, restart: 1, for: 2s}\n", "faults[0].for", "no duration"),
    ("faults:\n  - {at: 2m, crash: 1}\n", "faults[0].at", "not before the end"),
    ("faults:\n  - {at: 1s, link: {between: [1, 2]}}\n", "faults[0].link", "changes nothing"),
    ("faults:\n  - {at: 1s, link: {between: [1, 2], loss: 2}}\n", "faults[0].link.loss", "between 0 and 1"),
    ("faults:\n  - {at: 1s, bit_flip: {broker: 1, partition: t-7}}\n", "faults[0].bit_flip.partition", "unknown partition"),
    ("faults:\n  - {at: 1s, clock: {broker: 1, jump: soon}}\n", "faults[0].clock.jump", "duration"),
    # impossible triggers
    ("faults:\n  - {when: {partition: t-9, leader: 1}, crash: 1}\n", "faults[0].when.partition", "unknown partition"),
    ("faults:\n  - {when: {partition: t-0, leader: 3}, crash: 1}\n", "faults[0].when.leader", "can never lead"),
    ("faults:\n  - {when: {partition: t-0, isr: [1, 3]}, crash: 1}\n", "faults[0].when.isr", "subset of the replicas"),
    ("faults:\n  - {when: {partition: t-0, isr_size: 3}, crash: 1}\n", "faults[0].when.isr_size", "1 to 2 members"),
    ("faults:\n  - {when: {partition: t-0, broker: 3, role: leader}, crash: 1}\n", "faults[0].when.broker", "holds no replica"),
    ("faults:\n  - {when: {partition: t-0, high_watermark: lots}, crash: 1}\n", "faults[0].when.high_watermark", "comparison"),
    ("faults:\n  - {when: {partition: t-0, colour: red}, crash: 1}\n", "faults[0].when.colour", "cannot be tested"),
    ("faults:\n  - {when: {partition: t-0, role: leader}, crash: 1}\n", "faults[0].when.role", "add broker:"),
    ("faults:\n  - {when: {isr_size: 2}, crash: 1}\n", "faults[0].when", "names no partition"),
    ("faults:\n  - {when: {partition: t-0}, crash: 1}\n", "faults[0].when", "tests nothing"),
    ("faults:\n  - {when: {partition: t-0, leader: 1}, at: 3s, crash: 1}\n", "faults[0].at", "after:"),
    # contradictory overlapping faults
    ("faults:\n  - {at: 1s, crash: 1}\n  - {at: 2s, crash: 1}\n", "faults[1]", "already down"),
    ("faults:\n  - {at: 1s, crash: 1, for: 5s}\n  - {at: 3s, restart: 1}\n", "faults[0].for", "cannot restart"),
    ("faults:\n  - {at: 1s, restart: 2}\n", "faults[0]", "cannot restart"),
    ("faults:\n  - {at: 1s, crash: 1}\n  - {at: 2s, pause: 1}\n", "faults[1]", "cannot be paused"),
    ("faults:\n  - {at: 1s, resume: 1}\n", "faults[0]", "not paused"),
    # role targets (issue 10)
    ("faults:\n  - {at: 1s, crash: {leader: t-9}}\n", "faults[0].crash.leader", "unknown partition"),
    ("faults:\n  - {at: 1s, crash: [1, {follower: t-5}]}\n", "faults[0].crash[1].follower", "unknown partition"),
    ("faults:\n  - {at: 1s, isolate: {leader: t-0, follower: t-1}}\n", "faults[0].isolate", "names one of leader"),
    ("faults:\n  - {at: 1s, crash: {boss: t-0}}\n", "faults[0].crash", "names one of leader"),
    ("faults:\n  - {at: 1s, pause: {leader: [t-0]}}\n", "faults[0].pause.leader", "must be a string"),
    ("faults:\n  - {at: 1s, crash: {follower: t-0, colour: red}}\n", "faults[0].crash.colour", "unknown key"),
    ("faults:\n  - {at: 1s, crash: {follower: t-0, isr: maybe}}\n", "faults[0].crash.isr", "true or false"),
    ("faults:\n  - {at: 1s, crash: {leader: t-0, isr: true}}\n", "faults[0].crash.isr", "goes with follower"),
    ("faults:\n  - {at: 1s, crash: {isr: false}}\n", "faults[0].crash.isr", "goes with follower"),
    ("faults:\n  - {at: 1s, crash: {follower: t-0, isr: true, not_isr: true}}\n", "faults[0].crash.not_isr",
     "not both"),
    ("faults:\n  - {at: 1s, crash: {leader: t-0, not_isr: true}}\n", "faults[0].crash.not_isr", "goes with follower"),
    ("faults:\n  - {at: 1s, slow_fsync: {broker: {leader: t-7}, fsync_ms: 9}}\n", "faults[0].slow_fsync.broker.leader",
     "unknown partition"),
    ("faults:\n  - {at: 1s, partition: [[{leader: t-0}], [{leader: t-0}, 3]]}\n", "faults[0].partition",
     "appears in two groups"),
    ("faults:\n  - {at: 1s, cut: {from: {leader: t-0}, to: {follower: t-2}}}\n", "faults[0].cut.to.follower",
     "unknown partition"),
    ("nemesis: {faults: [crash], interval: 5s, targets: [random]}\n", "nemesis.targets[0]", "must be an integer"),
    ("faults:\n  - {when: {controller: {leader: t-0}}, crash: 1}\n", "faults[0].when.controller", "must be an integer"),
    # preferred replica election
    ("faults:\n  - {at: 1s, preferred_replica_election: t-9}\n", "faults[0].preferred_replica_election",
     "unknown partition"),
    ("faults:\n  - {at: 1s, preferred_replica_election: [t-0, 3]}\n", "faults[0].preferred_replica_election[1]", ""),
    ("faults:\n  - {at: 1s, preferred_replica_election: []}\n", "faults[0].preferred_replica_election",
     "names no partition"),
    ("faults:\n  - {at: 1s, preferred_replica_election: all, for: 2s}\n", "faults[0].for", "no duration"),
    # topic changes (kafka-topics.sh)
    ("faults:\n  - {at: 1s, delete_topic: 'bad name'}\n", "faults[0].delete_topic", "is illegal"),
    ("faults:\n  - {at: 1s, delete_topic: {topic: t, now: true}}\n", "faults[0].delete_topic.now", "unknown key"),
    ("faults:\n  - {at: 1s, create_topic: {topic: u, partitions: 0}}\n", "faults[0].create_topic.partitions",
     "at least 1"),
    ("faults:\n  - {at: 1s, create_topic: {topic: u, partitions: 2, assignment: {0: [1]}}}\n",
     "faults[0].create_topic", "not both"),
    ("faults:\n  - {at: 1s, create_topic: {topic: u, assignment: {0: []}}}\n", "faults[0].create_topic.assignment[0]",
     "names no broker"),
    ("faults:\n  - {at: 1s, create_partitions: {topic: t}}\n", "faults[0].create_partitions.count", "required"),
    ("faults:\n  - {at: 1s, create_partitions: {topic: t, count: 2, assignment: [[x]]}}\n",
     "faults[0].create_partitions.assignment[0][0]", "must be an integer"),
    ("faults:\n  - {at: 1s, create_partitions: {topic: t, count: 2}, for: 2s}\n", "faults[0].for", "no duration"),
    # topic config change (kafka-configs.sh)
    ("faults:\n  - {at: 1s, topic_config: {topic: u, set: {flush.messages: 1}}}\n", "faults[0].topic_config.topic",
     "unknown topic"),
    ("faults:\n  - {at: 1s, topic_config: {topic: t, set: {}}}\n", "faults[0].topic_config.set", "changes nothing"),
    ("faults:\n  - {at: 1s, topic_config: {topic: t}}\n", "faults[0].topic_config.set", "required"),
    ("faults:\n  - {at: 1s, topic_config: {topic: t, set: {retention.hours: 5}}}\n",
     "faults[0].topic_config.set.retention.hours", "unknown topic configuration key"),
    ("faults:\n  - {at: 1s, topic_config: {topic: t, set: {retention.bytes: -2}}}\n",
     "faults[0].topic_config.set.retention.bytes", "not be negative"),
    ("faults:\n  - {at: 1s, topic_config: {topic: t, set: {unclean.leader.election.enable: 1}}}\n",
     "faults[0].topic_config.set.unclean.leader.election.enable", "true or false"),
    ("faults:\n  - {at: 1s, topic_config: {topic: t, set: {flush.messages: -1}}}\n",
     "faults[0].topic_config.set.flush.messages", "not be negative"),
    ("faults:\n  - {at: 1s, topic_config: {topic: t, set: {min.insync.replicas: 0}}}\n",
     "faults[0].topic_config.set.min.insync.replicas", "at least 1"),
    # client quota change (kafka-configs.sh --entity-type clients|users)
    ("faults:\n  - {at: 1s, client_quota: {entity: topics/t, set: {producer_byte_rate: 1}}}\n",
     "faults[0].client_quota.entity", "unknown quota entity type"),
    ("faults:\n  - {at: 1s, client_quota: {entity: clients/c, set: {}}}\n", "faults[0].client_quota.set",
     "changes nothing"),
    ("faults:\n  - {at: 1s, client_quota: {entity: clients/c, set: {producer_byte_rate: 0}}}\n",
     "faults[0].client_quota.set.producer_byte_rate", "at least 1"),
    ("faults:\n  - {at: 1s, client_quota: {entity: clients/c, set: {byte_rate: 5}}}\n",
     "faults[0].client_quota.set.byte_rate", "unknown quota configuration"),
    ("faults:\n  - {at: 1s, topic_config: {topic: t, set: {flush.ms: null}}}\n",
     "faults[0].topic_config.set.flush.ms", "needs a value"),
    ("faults:\n  - {at: 1s, topic_config: {topic: t, set: {flush.ms: 5}, when: 1}}\n",
     "faults[0].topic_config.when", "unknown key"),
    ("faults:\n  - {at: 1s, topic_config: t}\n", "faults[0].topic_config", "must be a mapping"),
    ("faults:\n  - {at: 1s, topic_config: {topic: t, set: {flush.ms: 5}}, for: 2s}\n", "faults[0].for",
     "no duration"),
    # reset: both directions by nature, instant
    ("faults:\n  - {at: 1s, reset: {from: 1, to: 2}}\n", "faults[0].reset.from", "both directions"),
    ("faults:\n  - {at: 1s, reset: {between: [1]}}\n", "faults[0].reset.between", "names two nodes"),
    ("faults:\n  - {at: 1s, reset: {between: [1, [2, reader]]}}\n", "faults[0].reset.between[1][1]",
     "unknown node 'reader'"),
    ("faults:\n  - {at: 1s, reset: {between: [1, broker-1]}}\n", "faults[0].reset.between",
     "no link between two different nodes"),
    ("faults:\n  - {at: 1s, reset: {between: [1, 2], loss: 0.5}}\n", "faults[0].reset.loss", "unknown key"),
    ("faults:\n  - {at: 1s, reset: {between: [1, 2]}, for: 2s}\n", "faults[0].for", "no duration"),
    ("faults:\n  - {at: 1s, reset: [1, 2]}\n", "faults[0].reset", "must be a mapping"),
    # nemesis and expect
    ("nemesis: {faults: [crash, meteor], interval: 5s}\n", "nemesis.faults[1]", "unknown nemesis fault"),
    ("nemesis: {faults: [crash], interval: 5s, stop: 2m}\n", "nemesis.stop", "within the run"),
    ("nemesis: {faults: [crash]}\n", "nemesis.interval", "required"),
    ("expect: {lost_writes: lots}\n", "expect.lost_writes", ""),
    ("expect: {lost_rights: 0}\n", "expect.lost_rights", "unknown checker"),
    ("expect: {final_leader: 1}\n", "expect.final_leader", "takes a mapping of partition"),
    ("expect:\n  final_leader:\n    t-7: 1\n", "expect.final_leader.t-7", "unknown partition 't-7'"),
    ("expect: {final_leader: {t-0: leader}}\n", "expect.final_leader", "not a number"),
    ("expect: {unclean_elections: {t-0: 1}}\n", "expect.unclean_elections", "only final_leader"),
])
def test_rejections_name_the_field(tail, field, words):
    err = error(tail)
    assert err.field == field, str(err)
    assert words in err.message
    assert err.line is not None and str(err).startswith(f"f.yaml:{err.line}:")


def test_the_contradiction_names_the_earlier_fault():
    err = error("faults:\n  - {at: 1s, crash: 1}\n  - {at: 2s, crash: 1}\n")
    assert "line 8" in err.message and err.line == 9


def test_a_crash_of_the_controller_makes_later_restarts_legitimate():
    s = parse("faults:\n  - {at: 1s, crash: [controller, 2]}\n  - {at: 5s, restart: all}\n")
    assert len(s.faults) == 2


def test_role_targets_parse_for_broker_and_node_faults():
    """Issue 10: controller, random, {leader: t-0} and {follower: t-0, isr: ...} wherever
    a fault names brokers or nodes, alone or in a list."""
    s = parse("""\
    faults:
      - {at: 1s, crash: {leader: t-0}, for: 1s}
      - {at: 3s, isolate: {follower: t-1, isr: false}, for: 1s}
      - {at: 5s, pause: random, for: 1s}
      - {at: 7s, partition: [[{leader: t-0}, zk], [controller, 3]], for: 1s}
      - {at: 9s, slow_fsync: {broker: {follower: t-0, isr: true}, fsync_ms: 50}}
      - {at: 10s, expire_session: [1, {leader: t-1}]}
      - {at: 11s, cut: {from: random, to: {leader: t-0}}}
      - {at: 12s, bridge: {halves: [[1], [3]], via: {follower: t-0}}}
      - {at: 13s, crash: {follower: t-1, not_isr: true}, for: 1s}
    """)
    leader0, follower1 = fm.Role("leader", "t-0"), fm.Role("follower", "t-1", False)
    assert s.faults[0].fault == fm.Crash((leader0,))
    assert s.faults[1].fault == fm.Isolate((follower1,))
    assert s.faults[2].fault == fm.Pause(("random",))
    assert s.faults[3].fault == fm.Split(((leader0, "zk"), ("controller", "broker-3")))
    assert s.faults[4].fault.brokers == (fm.Role("follower", "t-0", True),)
    assert s.faults[5].fault == fm.ExpireSession((1, fm.Role("leader", "t-1")))
    assert s.faults[7].fault.via == fm.Role("follower", "t-0")
    # the trace writes each role as the scenario writes it
    assert fm.describe(s.faults[3].fault) == {"groups": [["leader: t-0", "zk"], ["controller", "broker-3"]]}
    assert [str(r) for r in fm.roles_of(s.faults[1].fault)] == ["follower: t-1, isr: false"]
    assert fm.roles_of(s.faults[6].fault) == ["random", leader0]
    assert s.faults[8].fault == fm.Crash((follower1,)), "not_isr: true is isr: false"


def test_the_contradiction_check_leaves_role_targets_to_the_run():
    """A role resolves only when its fault starts: the static check neither judges a
    fault on a role nor trusts any broker's state after one stopped a broker."""
    s = parse("faults:\n  - {at: 1s, crash: 1}\n  - {at: 2s, crash: {leader: t-0}}\n  - {at: 3s, crash: 1}\n"
              "  - {at: 4s, restart: 2}\n")
    assert len(s.faults) == 4
    # a fault on a role that stops nothing (a clock jump) leaves the known states alone
    err = error("faults:\n  - {at: 1s, crash: 1}\n  - {at: 2s, clock: {broker: random, jump: 5s}}\n"
                "  - {at: 3s, crash: 1}\n")
    assert err.field == "faults[2]" and "already down" in err.message


def test_nemesis_and_expect_parse():
    s = parse("nemesis: {faults: [crash, random_halves], interval: 5s, duration: 2s, targets: [1, 2], start: 3s}\n"
              "expect: {lost_writes: 0, unavailable_ms: '<5000', produce_error_rate: '<=0.5'}\n")
    assert s.nemesis.kinds == ("crash", "random_halves") and s.nemesis.targets == (1, 2)
    assert s.nemesis.start_ms == 3000 and s.nemesis.stop_ms == 60000
    assert s.expect["unavailable_ms"].matches(4999) and not s.expect["unavailable_ms"].matches(5000)
    assert s.expect_lines["lost_writes"] == 8


def test_a_preferred_replica_election_step_names_all_or_some_partitions():
    s = parse("""\
    faults:
      - {at: 1s, preferred_replica_election: all}
      - {at: 2s, preferred_replica_election: true}
      - {at: 3s, preferred_replica_election: [t-1, t-0, t-1]}
      - {at: 4s, preferred_replica_election: t-1}
    """)
    assert [step.fault for step in s.faults] == [
        fm.PreferredReplicaElection(), fm.PreferredReplicaElection(),
        fm.PreferredReplicaElection(("t-0", "t-1")), fm.PreferredReplicaElection(("t-1",))]
    assert fm.kind_of(s.faults[0].fault) == "preferred_replica_election"


def test_a_topic_config_step_sets_topic_keys_at_a_time_or_on_a_trigger():
    """kafka-configs.sh --alter --entity-type topics --add-config as a step; the values
    are checked against the topic's overrides with the change added."""
    s = parse("""\
    faults:
      - {at: 1s, topic_config: {topic: t, set: {unclean.leader.election.enable: true, min.insync.replicas: 2}}}
      - when: {partition: t-0, isr_size: 1}
        topic_config:
          topic: t
          set: {flush.messages: 1}
    """)
    assert s.faults[0].fault == fm.TopicConfig("t", (("min.insync.replicas", 2), ("unclean.leader.election.enable", True)))
    assert s.faults[0].at_ms == 1000
    assert s.faults[1].when is not None and s.faults[1].fault == fm.TopicConfig("t", (("flush.messages", 1),))
    assert fm.kind_of(s.faults[1].fault) == "topic_config"
    err = error("faults:\n  - when: {partition: t-0, isr_size: 1}\n    topic_config:\n      topic: t\n"
                "      set:\n        segment.bytes: lots\n")
    assert err.field == "faults[0].topic_config.set.segment.bytes" and err.line == 12


def test_facts_and_the_final_leader_parse_in_expect():
    """Issue 8, item 19: counts use the comparisons of every checker; final_leader
    maps partitions of the scenario to a broker or a comparison."""
    s = parse("expect: {unclean_elections: 0, isr_shrinks: '>0', fenced_requests: '>=1', failed_but_present: 0,\n"
              "         leader_elections: '<=3', isr_expansions: 2, final_leader: {t-0: 1, t-1: '!=2'}}\n")
    assert s.expect["isr_shrinks"].matches(1) and not s.expect["isr_shrinks"].matches(0)
    assert s.expect["final_leader"].matches({"t-0": 1, "t-1": 3})
    assert not s.expect["final_leader"].matches({"t-0": 1, "t-1": 2})
    assert str(s.expect["final_leader"]) == "{t-0: == 1, t-1: != 2}"
