"""Each fault of the vocabulary, applied by the simulated executor, does what it says."""
from pathlib import Path

from analysis.history import load_history
from faults.nodes import broker_id_of
from scenarios.parse import parse_scenario
from scenarios.runner import run_scenario

BASE = """
name: {name}
cluster:
  brokers: 3
  config: {{min.insync.replicas: 2{extra_config}}}
  topics: [{{name: t, partitions: 1, replication_factor: 3, assignment: {{0: [1, 2, 3]}}}}]
workload:
  producers: [{{topic: t, acks: all, rate: 100}}]
faults:
{faults}
duration: {duration}
"""


def run(tmp_path: Path, faults: str, duration: str = "30s", extra_config: str = "", seed: int = 1):
    text = BASE.format(name="faults", faults=faults, duration=duration, extra_config=extra_config)
    result = run_scenario(parse_scenario(text, "faults.yaml"), seed, tmp_path)
    return result, load_history(result.trace_path)


def events(history, type_, **match):
    return [e for e in history.events if e.type == type_ and all(e.get(k) == v for k, v in match.items())]


def test_fault_intervals_are_traced_with_matching_ids(tmp_path):
    _, history = run(tmp_path, "  - {at: 2s, isolate: 2, for: 3s}\n  - {at: 8s, crash: 3}\n  - {at: 12s, restart: 3}")
    started = {e["fault_id"]: e for e in events(history, "fault_started")}
    ended = {e["fault_id"]: e for e in events(history, "fault_ended")}
    isolate = next(i for i, e in started.items() if e["fault"] == "isolate")
    crash = next(i for i, e in started.items() if e["fault"] == "crash")
    assert ended[isolate].t_ms - started[isolate].t_ms == 3000
    assert ended[crash].t_ms == 12000


def test_controlled_shutdown_moves_leadership_before_stopping(tmp_path):
    result, history = run(tmp_path, "  - {at: 5s, shutdown: 1}\n  - {at: 10s, restart: 1}")
    elections = events(history, "leader_elected", election="controlled_shutdown")
    halted = events(history, "broker_halted")
    assert elections and elections[0]["leader"] != 1
    assert halted and halted[0]["clean"] and halted[0].t_ms >= elections[0].t_ms
    assert result.verdict.value("lost_writes") == 0
    # a clean stop closes the session at once: no waiting for the session timeout
    assert halted[0].t_ms - 5000 < 1000


def test_a_paused_leader_loses_its_session_and_wakes_as_a_follower(tmp_path):
    _, history = run(tmp_path, "  - {at: 3s, pause: 1, for: 22s}", duration="35s")
    expired = events(history, "session_expired_at_service", owner="broker-1")
    # 18 s after the service last heard from it, which may be a ping up to 6 s before the pause
    assert expired and 3000 + 18000 - 6000 <= expired[0].t_ms <= 3000 + 18000 + 200
    new_leader = [e for e in events(history, "leader_elected") if e["leader_epoch"] >= 1]
    assert new_leader and new_leader[0]["leader"] != 1
    woke = events(history, "session_expired")
    assert woke and woke[0].node == "broker-1" and woke[0].t_ms >= 25000
    assert any(e.node == "broker-1" and e.t_ms >= 25000 for e in events(history, "became_follower"))


def test_expire_session_makes_the_controller_elect_again(tmp_path):
    _, history = run(tmp_path, "  - {at: 3s, expire_session: 1}")
    assert events(history, "session_expired_at_service", owner="broker-1", reason="forced")
    assert any(e["leader"] != 1 for e in events(history, "leader_elected") if e["leader_epoch"] >= 1)


def test_crash_controller_resolves_the_current_controller(tmp_path):
    _, history = run(tmp_path, "  - {at: 3s, crash: controller}")
    first = events(history, "controller_elected")[0]
    crash = events(history, "fault_started", fault="crash")[0]
    assert crash["targets"] == [broker_id_of(first.node)]
    assert crash["roles"] == {"controller": crash["targets"][0]}
    assert len(events(history, "controller_elected")) >= 2


def test_a_write_error_halts_the_broker_before_it_acknowledges(tmp_path):
    result, history = run(tmp_path, "  - {at: 3s, write_errors: 1}\n  - {at: 6s, restart: 1}",
                          extra_config="")
    failed = events(history, "log_dir_failed")
    assert failed and failed[0].node == "broker-1"
    assert events(history, "broker_halted")
    assert result.verdict.value("lost_writes") == 0


def test_a_full_disk_fails_growing_writes(tmp_path):
    _, history = run(tmp_path, "  - {at: 3s, disk_full: 2}")
    assert any("ENOSPC" in e["reason"] for e in events(history, "log_dir_failed"))


def test_a_bit_flip_is_caught_by_the_crc_at_recovery(tmp_path):
    result, history = run(tmp_path, "  - {at: 5s, bit_flip: {broker: 2, partition: t-0}}\n"
                                    "  - {at: 6s, crash: 2}\n  - {at: 7s, restart: 2}")
    flip = events(history, "fault_started", fault="bit_flip")[0]
    assert flip["flipped"] and flip["flipped"][0]["broker"] == 2
    recovered = [e for e in events(history, "log_recovered") if e.node == "broker-2" and e.t_ms >= 7000]
    assert recovered and recovered[0]["truncated_bytes"] > 0 and recovered[0]["reason"]
    # the corrupt tail was dropped and re-fetched: the replicas agree again
    assert result.verdict.value("divergence") == 0 and result.verdict.value("lost_writes") == 0


def test_torn_writes_leave_a_partial_tail_that_recovery_truncates(tmp_path):
    result, history = run(tmp_path, "  - {at: 2s, torn_writes: 3}\n  - {at: 6s, power_loss: 3}\n"
                                    "  - {at: 7s, restart: 3}")
    recovered = [e for e in events(history, "log_recovered") if e.node == "broker-3" and e.t_ms >= 7000]
    assert recovered and recovered[0]["truncated_bytes"] > 0
    assert result.verdict.value("divergence") == 0


def test_a_clock_jump_backwards_keeps_a_stalled_follower_in_the_isr(tmp_path):
    """The leader judges lag by its own clock: after it jumps back 60 s, a follower that
    stopped fetching looks as if it caught up in the future and is not evicted."""
    stall = "  - {at: 5s, cut: {from: 3, to: 1}}\n"
    _, control = run(tmp_path / "control", stall, extra_config=", replica.lag.time.max.ms: 5000")
    shrunk = events(control, "isr_shrunk", partition="t-0")
    assert shrunk and shrunk[0]["isr"] == [1, 2] and shrunk[0].t_ms < 15000
    _, jumped = run(tmp_path / "jumped", stall + "  - {at: 5s, clock: {broker: 1, jump: -60s}}\n",
                    extra_config=", replica.lag.time.max.ms: 5000")
    assert not [e for e in events(jumped, "isr_shrunk") if e.t_ms < 30000]


def test_slow_fsync_and_link_faults_apply_and_end(tmp_path):
    result, history = run(tmp_path, "  - {at: 2s, slow_fsync: {broker: 1, fsync_ms: 500}, for: 5s}\n"
                                    "  - {at: 3s, link: {between: [1, 2], latency_ms: 200, loss: 0.2}, for: 4s}\n"
                                    "  - {at: 4s, cut: {from: 3, to: 1}, for: 2s}\n"
                                    "  - {at: 9s, bridge: {halves: [[1, 2], [2, 3]], via: 2}, for: 3s}\n"
                                    "  - {at: 13s, random_halves: true, for: 3s}",
                          extra_config=", log.flush.interval.messages: 1")
    started = events(history, "fault_started")
    assert [e["fault"] for e in started] == ["slow_fsync", "link", "cut", "bridge", "random_halves"]
    assert len(events(history, "fault_ended")) == 5
    assert result.verdict.value("lost_writes") == 0


def test_a_trigger_fires_when_its_condition_holds(tmp_path):
    _, history = run(tmp_path, "  - {when: {partition: t-0, high_watermark: '>=300'}, crash: 1}", duration="10s")
    fired = events(history, "trigger_fired")
    crash = events(history, "fault_started", fault="crash")
    assert fired and crash and crash[0].t_ms - fired[0].t_ms <= 1
    hw_before = [e["high_watermark"] for e in events(history, "high_watermark_advanced") if e.t_ms < fired[0].t_ms]
    assert max(hw_before) >= 300 and sorted(hw_before)[-2] < 300 + 100


def test_a_trigger_that_never_holds_is_reported(tmp_path):
    _, history = run(tmp_path, "  - {when: {partition: t-0, leader: 3}, crash: 1}", duration="5s")
    assert events(history, "trigger_never_fired")
    assert not events(history, "fault_started", fault="crash")


def test_nemesis_draws_faults_from_the_seed(tmp_path):
    text = BASE.format(name="nemesis", faults="  []", duration="40s", extra_config="") + \
        "nemesis: {faults: [crash, pause, isolate, random_halves, expire_session], interval: 3s, duration: 2s}\n"
    scenario = parse_scenario(text, "nemesis.yaml")

    def kinds(seed, tag):
        result = run_scenario(scenario, seed, tmp_path / f"{seed}-{tag}")
        history = load_history(result.trace_path)
        return [(e.t_ms, e["fault"]) for e in history.events if e.type == "fault_started"], result
    a, result = kinds(5, "a")
    b, _ = kinds(5, "b")
    c, _ = kinds(6, "a")
    assert len(a) >= 4 and a == b and a != c
    assert result.verdict.value("lost_writes") == 0, "acks=all with min ISR 2 survives single faults"
