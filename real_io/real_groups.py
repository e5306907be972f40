"""A scenario's group consumers in the real binding: each member (``group-<n>-<m>``) is
a process of its own (real_io/group_member_process.py: a confluent-kafka consumer with
``group.id``), so that the faults that name it act on it as they do on a broker:

| fault | the member's process |
| --- | --- |
| crash | SIGKILL: no LeaveGroup, no last commit, its buffers and requests in flight gone; the coordinator notices when its session times out |
| restart | a new process: a new member (new member id) whose positions come from the group's commits |
| pause / resume | SIGSTOP / SIGCONT: no poll and no heartbeat (librdkafka's threads stop with the rest), so it wakes as a zombie past its session |

Each member's history lines are read as they come and recorded on the run's clock,
under the member's node name, in analysis/group_history.py's vocabulary. Its state
lines (in a batch's processing or not, records consumed, generation) are not history:
they make the member's part of the view triggers judge (faults/triggers.py), kept here.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from faults.nodes import group_member_node
from faults.triggers import member_view

ROOT = Path(__file__).resolve().parent.parent  # the checkout the child imports from
STOP_TIMEOUT_S = 10.0
PROBE_S = (0.1, 1.0)  # one try of await_coordinators: the first's timeout, doubled up to the second

RecordAt = Callable[[float, str, str, dict], None]  # (monotonic time, node, type, fields)


def member_specs(workload, number: int, bootstrap: str) -> list[tuple[str, dict]]:
    """The members of a scenario's ``number``-th group entry (a
    scenarios.model.GroupConsumerWorkload, the layer above: read, not imported), each
    with its node name and the spec its process takes."""
    out = []
    for m in range(workload.members):
        name = group_member_node(number, m)
        out.append((name, {
            "name": name, "bootstrap": bootstrap, "group": workload.group, "topics": list(workload.topics),
            "client_id": workload.client_id or name, "commit": workload.commit,
            "processing_ms": workload.processing_ms, "poll_interval_ms": workload.poll_interval_ms,
            "max_poll_records": workload.max_poll_records, "session_timeout_ms": workload.session_timeout_ms,
            "heartbeat_interval_ms": workload.heartbeat_interval_ms,
            "max_poll_interval_ms": workload.max_poll_interval_ms, "assignors": list(workload.assignors),
            "auto_commit_interval_ms": workload.auto_commit_interval_ms,
            "auto_offset_reset": workload.auto_offset_reset, "static": workload.static,
            "retry_failed_commits": workload.retry_failed_commits, "retry_backoff_ms": 100}))
    return out


class RealGroupMember:
    """One member's process across its incarnations; the fault binding's primitives."""

    def __init__(self, name: str, spec: dict, record_at: RecordAt, stderr_path: Path) -> None:
        self.name, self.spec = name, spec
        self.record_at = record_at
        self.stderr_path = stderr_path
        self.process: subprocess.Popen | None = None
        self.paused = False
        self.incarnations = 0
        self.failures: list[str] = []  # incarnations that ended by themselves, not by a kill or a stop
        self._killed: set[int] = set()  # the pids this run sent SIGKILL
        self._readers: list[threading.Thread] = []
        self._lock = threading.Lock()
        # the last state line of the running incarnation; consumed counts every incarnation
        self._state: dict = {"processing": False, "generation": None}
        self._consumed_before = 0  # by the incarnations before this one
        self._consumed = 0

    def view(self) -> dict:
        """This member's part of the view triggers judge. A killed process is in no
        batch, whatever its last line said; a paused one still is."""
        return member_view(self.alive, self._state["processing"], self._consumed_before + self._consumed,
                           self._state["generation"])

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """A restart (the fault binding's primitive): a new incarnation that begins at once."""
        self.launch()
        self.begin(0.0)

    def launch(self) -> None:
        """A new incarnation's process, waiting for ``begin``."""
        with self._lock:
            self.incarnations += 1
            self._consumed_before += self._consumed
            self._consumed, self._state = 0, {"processing": False, "generation": None}
            self.stderr_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.stderr_path, "ab") as stderr:
                self.process = subprocess.Popen(
                    [sys.executable, "-m", "real_io.group_member_process", json.dumps(self.spec)], cwd=ROOT,
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
            self.paused = False
            reader = threading.Thread(target=self._read, args=(self.process,), daemon=True)
            reader.start()
            self._readers.append(reader)

    def _read(self, process: subprocess.Popen) -> None:
        assert process.stdout is not None
        for raw in process.stdout:
            try:
                line = json.loads(raw)
            except ValueError:
                continue  # the line a SIGKILL cut short
            if "state" in line:
                if process is self.process:  # not a late line of a killed incarnation
                    self._consumed = line["state"]["consumed"]
                    self._state = line["state"]
                continue
            self.record_at(line["t"], self.name, line["type"], line["fields"])
        code = process.wait()
        if code != 0 and process.pid not in self._killed:
            self.failures.append(f"{self.name} (pid {process.pid}) exited with {code}: {self._last_words()}")

    def _last_words(self) -> str:
        try:
            lines = self.stderr_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        except OSError:
            return "no stderr"
        return lines[-1] if lines else "nothing on stderr"

    def kill(self) -> None:
        """SIGKILL (a SIGSTOPped process dies too)."""
        with self._lock:
            if self.alive:
                assert self.process is not None
                self._killed.add(self.process.pid)
                self.process.send_signal(signal.SIGKILL)
                self.process.wait()
            self.paused = False

    def pause(self) -> None:
        with self._lock:
            if self.alive and not self.paused:
                assert self.process is not None
                self.process.send_signal(signal.SIGSTOP)
                self.paused = True

    def resume(self) -> None:
        with self._lock:
            if self.alive and self.paused:
                assert self.process is not None
                self.process.send_signal(signal.SIGCONT)
            self.paused = False

    def begin(self, at: float) -> None:
        """The application subscribes and starts at ``at`` (monotonic seconds)."""
        self._tell(f"go {at!r}")

    def _tell(self, command: str) -> None:
        with self._lock:
            if self.alive:
                assert self.process is not None and self.process.stdin is not None
                try:
                    self.process.stdin.write(command.encode() + b"\n")
                    self.process.stdin.flush()
                except OSError:
                    pass  # it exited meanwhile

    def ask_to_stop(self) -> None:
        """The final phase: the application hands over a batch it committed before
        processing it, then exits without leaving the group."""
        self.resume()
        self._tell("stop")

    def finish(self, deadline: float) -> None:
        """Wait for the stop until ``deadline`` (monotonic), else kill; then every line it
        wrote has been recorded."""
        process = self.process
        if process is not None:
            try:
                process.wait(max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                self.kill()
        for reader in self._readers:
            reader.join(5.0)


class GroupMemberFailed(Exception):
    """A member's process ended by itself (a bug in it, or librdkafka refusing its
    settings): the run fails rather than go on without that member's history."""


def stop_members(members: list[RealGroupMember]) -> None:
    """Stop every member at once (each one's batch in hand handed over), then wait;
    raise GroupMemberFailed if any incarnation had ended by itself."""
    for member in members:
        member.ask_to_stop()
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for member in members:
        member.finish(deadline)
    failures = [failure for member in members for failure in member.failures]
    if failures:
        raise GroupMemberFailed("; ".join(failures))


def await_coordinators(bootstrap: str, groups: list[str], partition: tuple[str, int], timeout_s: float) -> list[str]:
    """Wait until each group's coordinator answers (an OffsetFetch of ``partition``
    through librdkafka: FindCoordinator, then the coordinator's answer once it has
    loaded its part of ``__consumer_offsets``); returns the groups that had none
    within ``timeout_s``. The broker creates ``__consumer_offsets`` at the first
    FindCoordinator, which on a real cluster takes a ZooKeeper round and an election:
    the simulation's members form their group within a few hundred ms, so the real run
    makes the coordinators ready before its clients start, or a member's scripted
    crash at 3 s would find it still looking for its coordinator. Nothing joins any
    group here, and nothing is committed."""
    missing = []
    deadline = time.monotonic() + timeout_s
    for group in groups:
        wait_s = PROBE_S[0]
        while not _coordinator_answers(bootstrap, group, partition, wait_s):
            if time.monotonic() > deadline:
                missing.append(group)
                break
            wait_s = min(2 * wait_s, PROBE_S[1])
    return missing


def _coordinator_answers(bootstrap: str, group: str, partition: tuple[str, int], wait_s: float) -> bool:
    """One try with a new client: librdkafka asks a failed FindCoordinator again only a
    second later, a new client at once."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    from real_io.real_clients import QUIET
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, **QUIET})
    try:
        return all(tp.error is None for tp in probe.committed([TopicPartition(*partition)], timeout=wait_s))
    except KafkaException:
        return False
    finally:
        probe.close()
