"""Which of librdkafka's integration tests to run, how to run one, and what it said (for
bench/librdkafka_suite.py).

The suite's own table, `tests[]` in tests/test.c, says per test whether it needs a broker
(`TEST_F_LOCAL` tests do not), whether it is manual, a known issue of librdkafka, uses
sockem (a socket shim inside the client), the broker version it needs (`TEST_BRKVER`,
compared by the runner with `TEST_KAFKA_VERSION`) and the scenario it needs
(`noautocreate`: a broker with `auto.create.topics.enable=false`). The runner picks tests
by their four-digit number (`TESTS=0045` runs every 0045_* test of the current
scenario), so one run is one number in one scenario.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

_SUMMARY = re.compile(r"^\|\s*(\w+)\s*\|\s*(PASSED|FAILED|SKIPPED|RUNNING|NOT STARTED|DNS)\s*\|\s*([\d.]+)s\s*\|(.*)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class SuiteTest:
    name: str  # e.g. 0045_subscribe_update_mock
    flags: str  # the flags expression as test.c writes it
    scenario: str  # "default", or e.g. "noautocreate"

    @property
    def number(self) -> str:
        return self.name[:4]

    @property
    def local(self) -> bool:
        return "TEST_F_LOCAL" in self.flags

    @property
    def manual(self) -> bool:
        return "TEST_F_MANUAL" in self.flags

    @property
    def known_issue(self) -> bool:
        return re.search(r"TEST_F_KNOWN_ISSUE\b", self.flags) is not None


@dataclass
class Outcome:
    """What one test did: ``state`` is the runner's (PASSED, FAILED, SKIPPED) or TIMEOUT
    when the run was stopped, NOT RUN when the runner never reached it."""
    name: str
    scenario: str
    state: str
    seconds: float
    first_failure: str = ""
    log: str = ""
    brokers: int = 1


def list_tests(source: Path) -> list[SuiteTest]:
    """Every entry of tests[] in the source's tests/test.c, in its order: each
    `_TEST(name, flags...)` read up to its balanced closing parenthesis (flags hold
    parentheses of their own: TEST_BRKVER(0, 9, 0, 0), _THRES(...))."""
    text = (source / "tests" / "test.c").read_text(errors="replace")
    start = text.index("struct test tests[] = {")
    body = text[start:text.index("{NULL}", start)]
    tests, at = [], body.find("_TEST(")
    while at >= 0:
        depth, end = 0, at + len("_TEST")
        for end in range(at + len("_TEST"), len(body)):
            depth += {"(": 1, ")": -1}.get(body[end], 0)
            if depth == 0:
                break
        name, _, rest = body[at + len("_TEST("):end].partition(",")
        flags = " ".join(rest.split())
        scenario = re.search(r'\.scenario\s*=\s*"([^"]*)"', flags)
        tests.append(SuiteTest(name.strip(), flags, scenario.group(1).split(",")[0] if scenario else "default"))
        at = body.find("_TEST(", end)
    return tests


def select(tests: list[SuiteTest], only: list[str] | None) -> list[SuiteTest]:
    """The broker tests (not local, not manual), all of them or those whose name starts
    with one of ``only`` (numbers like 0012 or whole names)."""
    broker_tests = [test for test in tests if not test.local and not test.manual]
    if only:
        return [test for test in broker_tests if any(test.name.startswith(prefix) for prefix in only)]
    return broker_tests


def runs(tests: list[SuiteTest]) -> list[tuple[str, str, list[SuiteTest]]]:
    """(number, scenario, tests) in order: one test-runner invocation each."""
    grouped: dict[tuple[str, str], list[SuiteTest]] = {}
    for test in tests:
        grouped.setdefault((test.number, test.scenario), []).append(test)
    return [(number, scenario, members) for (number, scenario), members in grouped.items()]


def write_test_conf(path: Path, bootstrap: str, timeout_multiplier: float, extra: dict[str, str]) -> None:
    """The runner's test.conf: the bootstrap, IPv4 (trivup's clusters write it too), and
    the timeout multiplier for a loaded machine."""
    lines = [f"metadata.broker.list={bootstrap}", "broker.address.family=v4",
             f"test.timeout.multiplier={timeout_multiplier}"]
    lines += [f"{key}={value}" for key, value in sorted(extra.items())]
    path.write_text("\n".join(lines) + "\n")


def run_number(runner: Path, number: str, scenario: str, members: list[SuiteTest], conf: Path, log: Path,
               timeout_s: float, kafka_version: str) -> list[Outcome]:
    """Run one test number in one scenario (`-L`: its local variants are left out, `-p1`:
    one at a time); every member gets an outcome."""
    tests_dir = runner.parent
    env = {**os.environ, "TESTS": number, "TEST_KAFKA_VERSION": kafka_version, "RDKAFKA_TEST_CONF": str(conf),
           "TEST_SCENARIO": scenario, "LD_LIBRARY_PATH": f"{tests_dir.parent}/src:{tests_dir.parent}/src-cpp",
           "RDKAFKA_GITVER": "debian-source"}
    env.pop("CI", None)  # CI=... makes the runner stricter about timing thresholds of its own CI
    started = time.monotonic()
    timed_out = False
    with open(log, "wb") as out:
        process = subprocess.Popen([str(runner), "-p1", "-L", "-s", scenario], cwd=tests_dir, env=env,
                                   stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    elapsed = time.monotonic() - started
    text = _ANSI.sub("", log.read_text(errors="replace"))
    return outcomes(text, members, scenario, elapsed, timed_out, str(log))


def outcomes(text: str, members: list[SuiteTest], scenario: str, elapsed: float, timed_out: bool,
             log: str) -> list[Outcome]:
    """Each member's outcome from the runner's summary table (`| name | STATE | 1.2s |
    reason`). A failed run often has no table (the runner ends on `assert(0)` once a test
    failed), so a member missing from it is read from its own banner lines: PASSED or
    SKIPPED, or `### Test "name (...)" failed at ...` followed by the reason. A member
    with none of these timed out if the run was stopped, else was not run."""
    summary = {}
    for line in text.splitlines():
        match = _SUMMARY.match(line.strip())
        if match:
            summary[match.group(1)] = match
    results = []
    for test in members:
        match = summary.get(test.name)
        if match is not None:
            state, seconds, reason = match.group(2), float(match.group(3)), match.group(4).strip()
            if state == "FAILED":
                reason = first_failure(text, test.name) or reason
            results.append(Outcome(test.name, scenario, state, seconds, _short(reason), log))
            continue
        banner = re.search(rf"=+ Test {test.name} (PASSED|SKIPPED)", text)
        failure = first_failure(text, test.name)
        if failure:
            state = "FAILED"
        elif banner:
            state = banner.group(1)
        elif timed_out and (f"[{test.name} " in text or test is members[0]):
            state, failure = "TIMEOUT", f"stopped after {elapsed:.0f} s; last line: {last_line(text)}"
        else:
            state, failure = "NOT RUN", last_line(text)
        results.append(Outcome(test.name, scenario, state, _seconds(text, test.name, elapsed), _short(failure), log))
    return results


def first_failure(text: str, name: str) -> str:
    """The first `### Test "name..." failed at FILE:LINE...` of ``name`` with the line
    after it (the reason the test gave)."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.startswith(f'### Test "{name}') and " failed at " in line:
            where = line.split(" failed at ", 1)[1].split(" at ", 1)[0]
            reason = lines[index + 1].strip() if index + 1 < len(lines) else ""
            context = line[len('### Test "'):].split('"', 1)[0].removeprefix(name).strip(" ()")
            return f"{reason} ({where}{'; ' + context if context else ''})"
    return ""


def _seconds(text: str, name: str, elapsed: float) -> float:
    """The last elapsed time the runner printed for ``name`` (`[name / 12.345s]`)."""
    times = re.findall(rf"\[{re.escape(name)}\s*/\s*([\d.]+)s\]", text)
    return float(times[-1]) if times else elapsed


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _short(line: str, limit: int = 200) -> str:
    line = line.replace("|", "/")
    return line if len(line) <= limit else line[:limit - 3] + "..."


@dataclass
class Tally:
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, outcome: Outcome) -> None:
        self.counts[outcome.state] = self.counts.get(outcome.state, 0) + 1
