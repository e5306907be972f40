"""``isrlab run --binding real``: the same one-broker scenario run simulated and for real
(an ``isrlab serve`` process, confluent-kafka clients, signals as faults) gives the same
verdict; what the real binding cannot do is refused with file, line and field."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import KafkaError

from analysis.trace import read_events, read_header
from broker_core.errors import ErrorCode
from real_io.real_clients import classify_send_error
from scenarios.parse import load_scenario
from scenarios.runner import check_binding, run_scenario
from scenarios.source import ScenarioError

ROOT = Path(__file__).resolve().parents[2]
LIBRARY_FILE = ROOT / "scenarios" / "library" / "single-broker-crash.yaml"


def variant(name: str):
    return next(v for v in load_scenario(LIBRARY_FILE).variants if v.variant == name)


def validity(result) -> dict[str, bool]:
    return {name: check.valid for name, check in result.verdict.results.items()}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["acks1", "acks-all"])
def test_single_broker_crash_gives_the_same_verdict_simulated_and_real(name, tmp_path):
    scenario = variant(name)
    sim = run_scenario(scenario, 1, tmp_path / "sim", binding="sim")
    real = run_scenario(scenario, 1, tmp_path / "real", binding="real")
    assert read_header(real.trace_path)["binding"] == "real"
    assert sim.passed and real.passed, ([e for e in real.evaluations if not e.passed], real.untested)
    assert validity(real) == validity(sim)
    assert [(e.name, e.passed) for e in real.evaluations] == [(e.name, e.passed) for e in sim.evaluations]
    for result in (sim, real):
        # acknowledged writes exist, and the kill lost none of them (the page cache survives)
        assert result.verdict.value("acknowledged") > 100
        assert result.verdict.value("lost_writes") == 0
        assert result.verdict.value("failed_but_present") == 0
        assert result.summary.final_read_complete and result.summary.settled


@pytest.mark.slow
def test_a_real_run_records_the_crash_the_restart_and_the_recovery(tmp_path):
    real = run_scenario(variant("acks1"), 1, tmp_path, binding="real")
    events = list(read_events(real.trace_path))
    assert [e.t_ms for e in events] == sorted(e.t_ms for e in events)  # one clock
    assert (events[0].type, events[-1].type) == ("run_started", "run_finished")
    faults = [(e.type, e["fault"], e.get("targets"), e.get("line")) for e in events
              if e.type in ("fault_started", "fault_ended")]
    lines = LIBRARY_FILE.read_text().splitlines()
    crash_line, restart_line = lines.index("  - at: 2s") + 1, lines.index("  - at: 5s") + 1
    assert faults == [("fault_started", "crash", [1], crash_line), ("fault_started", "restart", [1], restart_line),
                      ("fault_ended", "restart", None, None), ("fault_ended", "crash", None, None)]
    crash_at = next(e.t_ms for e in events if e.type == "fault_started")
    restarted = [e for e in events if e.type == "broker_started" and e.t_ms > crash_at]
    assert restarted and restarted[0]["recovered_partitions"] == ["t-0", "t-1"]
    sends = [e for e in events if e.node == "producer-0" and e.type == "invoke"]
    assert sends and all(e["values"][0].startswith("producer-0:") for e in sends)
    digests = [e for e in events if e.type == "replica_log"]
    assert sorted(e["partition"] for e in digests) == ["t-0", "t-1"]


@pytest.mark.slow
def test_pause_resume_and_a_shutdown_of_the_leader_agree_between_the_bindings(tmp_path):
    text = """
name: pause-and-shutdown
cluster: {brokers: 1, config: {zookeeper.session.timeout.ms: 2000}, topics: [{name: t, partitions: 1}]}
workload: {producers: [{topic: t, acks: all, rate: 50}], consumers: [{topic: t}]}
faults:
  - {at: 1s, pause: 1, for: 1s}
  - {at: 3500ms, shutdown: {leader: t-0}}
  - {at: 5s, restart: 1}
duration: 6s
expect: {lost_writes: 0, acknowledged: ">50"}
"""
    path = tmp_path / "pause.yaml"
    path.write_text(text)
    scenario = load_scenario(path)
    sim = run_scenario(scenario, 1, tmp_path / "sim", binding="sim")
    real = run_scenario(scenario, 1, tmp_path / "real", binding="real")
    assert sim.passed and real.passed, real.untested
    assert validity(real) == validity(sim)
    events = list(read_events(real.trace_path))
    kinds = [e["fault"] for e in events if e.type == "fault_started"]
    assert kinds == ["pause", "shutdown", "restart"]
    assert any(e.type == "controlled_shutdown_completed" for e in events)  # SIGTERM reached the core
    assert all("no_effect" not in e.fields for e in events if e.type == "fault_started")
    # the role resolved on the broker's metadata, as the simulation resolves it on its state
    assert [e.get("roles") for e in events if e.type == "fault_started"] == [None, {"leader: t-0": 1}, None]


@pytest.mark.slow
def test_a_trigger_on_the_high_watermark_fires_on_both_bindings(tmp_path):
    """The real binding judges ``when:`` on the broker's metadata and offsets: the crash
    waits until t-0 holds 100 records, on both bindings; a trigger that cannot hold
    never fires on either, and fails the run on both."""
    text = """
name: triggered
cluster: {brokers: 1, config: {zookeeper.session.timeout.ms: 2000}, topics: [{name: t, partitions: 1}]}
workload: {producers: [{topic: t, acks: 1, rate: 100}]}
faults:
  - {when: {partition: t-0, high_watermark: ">=100", isr_size: 1, leader: 1}, crash: 1, for: 2s}
  - {when: {partition: t-0, high_watermark: ">=1000000"}, crash: 1}
duration: 5s
expect: {lost_writes: 0}
"""
    path = tmp_path / "triggered.yaml"
    path.write_text(text)
    scenario = load_scenario(path)
    sim = run_scenario(scenario, 1, tmp_path / "sim", binding="sim")
    real = run_scenario(scenario, 1, tmp_path / "real", binding="real")
    assert validity(real) == validity(sim)
    for result in (sim, real):
        assert not result.passed and result.verdict.value("triggers_never_fired") == 1
        events = list(read_events(result.trace_path))
        fired = [e for e in events if e.type == "trigger_fired"]
        assert [e["line"] for e in fired] == [6]
        hw_at_fire = [e["high_watermark"] for e in events if e.type == "high_watermark_advanced"
                      and e.t_ms <= fired[0].t_ms]
        assert hw_at_fire and max(hw_at_fire) >= 100, result.trace_path
        assert [e["line"] for e in events if e.type == "trigger_never_fired"] == [7]
        assert [e["fault"] for e in events if e.type == "fault_ended"] == ["crash"]  # undone after for:


REFUSED = [
    ("cluster: {brokers: 1, topics: [{name: t}]}\nfaults: [{at: 1s, power_loss: 1}]",
     5, "faults[0].power_loss", "page cache"),
    ("cluster: {brokers: 1, topics: [{name: t}]}\nfaults:\n  - {at: 1s, crash: 1}\n  - {at: 2s, isolate: [broker-1]}",
     7, "faults[1].isolate", "proxy"),
    ("cluster: {brokers: 1, topics: [{name: t}]}\nfaults: [{at: 1s, clock: {broker: 1, jump: 5s}}]",
     5, "faults[0].clock", "clock"),
    ("cluster: {brokers: 1, topics: [{name: t}]}\nnetwork: {loss: 0.1}", 5, "network", "loopback"),
    ("cluster: {brokers: 1, topics: [{name: t}]}\nfaults: [{at: 1s, reassign: {t-0: [1]}}]",
     5, "faults[0].reassign", "--zk"),
    ("cluster: {brokers: 1, topics: [{name: t}]}\nworkload: {producers: [{topic: t, sequence_restart: in_flight}]}",
     5, "workload.producers[0].sequence_restart", "librdkafka"),
]


@pytest.mark.parametrize("body,line,field,why", REFUSED, ids=[r[2] for r in REFUSED])
def test_what_the_real_binding_cannot_do_is_refused_with_file_line_and_field(body, line, field, why, tmp_path):
    path = tmp_path / "refused.yaml"
    workload = "" if "workload:" in body else "workload: {producers: [{topic: t}]}"
    path.write_text(f"name: refused\n{workload}\nduration: 5s\n{body}\n")
    scenario = load_scenario(path)
    with pytest.raises(ScenarioError) as refused:
        check_binding(scenario, "real")
    assert (refused.value.line, refused.value.field) == (line, field)
    assert why in refused.value.message and "--binding real" in refused.value.message
    check_binding(scenario, "sim")  # the simulation runs all of it


def test_the_command_refuses_before_anything_runs_and_exits_2(tmp_path):
    path = tmp_path / "refused.yaml"
    path.write_text("name: refused\ncluster: {brokers: 1, topics: [{name: t}]}\n"
                    "workload: {producers: [{topic: t}]}\nfaults: [{at: 1s, power_loss: 1}]\nduration: 5s\n")
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "isrlab", "run", str(path), "--binding", "real", "--out", str(out)],
                            capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 2
    assert f"{path}:4: faults[0].power_loss: --binding real: the real binding cannot apply power_loss" \
        in result.stderr
    assert "Traceback" not in result.stderr and not out.exists()
    seeds = subprocess.run([sys.executable, "-m", "isrlab", "run", str(LIBRARY_FILE), "--binding", "real",
                            "--seeds", "1-2"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert seeds.returncode == 2 and "one seed at a time" in seeds.stderr


def test_a_variant_is_refused_on_the_line_the_variant_wrote(tmp_path):
    text = ("name: v\ncluster: {brokers: 1, topics: [{name: t}]}\nworkload: {producers: [{topic: t}]}\n"
            "duration: 5s\nvariants:\n  plain: {}\n  lossy:\n    network: {loss: 0.2}\n")
    path = tmp_path / "v.yaml"
    path.write_text(text)
    scenario = load_scenario(path)
    check_binding(scenario.variants[0], "real")
    with pytest.raises(ScenarioError) as refused:
        check_binding(scenario.variants[1], "real")
    assert (refused.value.line, refused.value.field) == (8, "network")


@pytest.mark.parametrize("code,acks,retries,outcome,reason", [
    (int(ErrorCode.NOT_ENOUGH_REPLICAS), -1, 0, "fail", None),  # refused before the append
    (int(ErrorCode.NOT_ENOUGH_REPLICAS), -1, 3, "info", "outcome_unknown"),  # an earlier try may have landed
    (int(ErrorCode.NOT_LEADER_OR_FOLLOWER), 1, 0, "fail", None),
    (int(ErrorCode.NOT_LEADER_OR_FOLLOWER), -1, 0, "info", "outcome_unknown"),  # the delayed produce's answer too
    (int(ErrorCode.REQUEST_TIMED_OUT), -1, 0, "info", "outcome_unknown"),
    (KafkaError._TRANSPORT, 1, 0, "info", "connection_reset"),
    (KafkaError._MSG_TIMED_OUT, 1, 0, "info", "client_timeout"),  # queued or in flight: librdkafka cannot say
    (KafkaError._PURGE_QUEUE, 1, 0, "fail", "run_ended"),  # never sent
    (KafkaError._PURGE_QUEUE, 1, 2, "info", "run_ended"),  # may be a retry of a sent one
    (KafkaError._PURGE_INFLIGHT, 1, 0, "info", "run_ended"),
    (KafkaError._FAIL, 1, 0, "info", "outcome_unknown"),  # anything else librdkafka says
])
def test_librdkafka_outcomes_are_fail_only_when_kafka_certainly_did_not_append(code, acks, retries, outcome, reason):
    got, fields = classify_send_error(code, "NAME", acks, retries)
    assert (got, fields.get("reason")) == (outcome, reason)
    assert isinstance(fields["error_code"], int) and fields["error"]


@pytest.mark.slow
def test_the_nemesis_draws_the_same_faults_on_both_bindings(tmp_path):
    """faults/nemesis.py draws from the seed for both bindings: the same kinds in the same
    order (the real executor applies them with signals)."""
    text = """
name: nemesis-one-broker
cluster: {brokers: 1, config: {zookeeper.session.timeout.ms: 2000}, topics: [{name: t, partitions: 1}]}
workload: {producers: [{topic: t, acks: all, rate: 50}]}
nemesis: {faults: [crash, pause, crash_controller], interval: 1s, duration: 2500ms, stop: 8s}
duration: 9s
expect: {lost_writes: 0}
"""
    path = tmp_path / "nemesis.yaml"
    path.write_text(text)
    scenario = load_scenario(path)
    sim = run_scenario(scenario, 3, tmp_path / "sim", binding="sim")
    real = run_scenario(scenario, 3, tmp_path / "real", binding="real")

    def drawn(result):
        return [(e["fault"], e.get("brokers")) for e in read_events(result.trace_path)
                if e.type == "fault_started" and "line" not in e.fields]
    assert len(drawn(sim)) >= 2 and drawn(real) == drawn(sim)
    assert sim.passed and real.passed and validity(real) == validity(sim)


KEYED = """
name: keyed
cluster: {brokers: 1, config: {log.cleanup.policy: compact}, topics: [{name: t, partitions: 2}]}
workload:
  producers:
    - {topic: t, acks: 1, rate: 100, keys: 4, key_distribution: uniform, tombstone_rate: 0.3}
    - topic: t
      records:
        - {key: a, value: a1, at: 500ms}
        - {key: a, value: null, at: 1s}
  consumers: [{topic: t}]
duration: 3s
"""


def _records_by_partition(trace, process: str) -> dict[str, list]:
    """(key, value) of each record ``process`` sent, per partition, in the order sent."""
    out: dict[str, list] = {}
    for event in read_events(trace):
        if event.type == "invoke" and event.node == process and event["f"] == "send":
            out.setdefault(event["partition"], []).extend(zip(event["keys"], event["values"]))
    return out


@pytest.mark.slow
def test_a_keyed_workload_with_tombstones_sends_the_same_records_on_both_bindings(tmp_path):
    """Keys, tombstones (null values) and scripted records come from the shared workload:
    the real producer (librdkafka) sends, partition by partition, the records the
    simulated one sends (as far as both got), and the real consumer and final read give
    each record's key."""
    path = tmp_path / "keyed.yaml"
    path.write_text(KEYED)
    scenario = load_scenario(path)
    sim = run_scenario(scenario, 1, tmp_path / "sim", binding="sim")
    real = run_scenario(scenario, 1, tmp_path / "real", binding="real")
    generated = [_records_by_partition(r.trace_path, "producer-0") for r in (sim, real)]
    for partition in ("t-0", "t-1"):
        sim_records, real_records = generated[0][partition], generated[1][partition]
        common = min(len(sim_records), len(real_records))
        assert common > 20 and sim_records[:common] == real_records[:common]
        assert any(value is None for _, value in real_records)
    for result in (sim, real):
        scripted = [r for records in _records_by_partition(result.trace_path, "producer-1").values() for r in records]
        assert scripted == [("a", "a1"), ("a", None)]
        events = list(read_events(result.trace_path))
        reads = [e for e in events if e.type == "ok" and e["f"] == "read"]
        assert reads and all(len(e["keys"]) == len(e["records"]) for e in reads)
        polls = [e for e in events if e.type == "ok" and e["f"] == "poll" and e["records"]]
        assert polls and all(len(e["keys"][p]) == len(rs) for e in polls for p, rs in e["records"].items())
        read_a = [(k, r[1]) for e in reads for k, r in zip(e["keys"], e["records"]) if k == "a"]
        assert read_a == [("a", "a1"), ("a", None)]
