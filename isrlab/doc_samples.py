"""The sample outputs in docs/commands.md, generated from real runs.

Each sample sits between ``<!-- sample NAME -->`` and ``<!-- /sample -->`` in the doc.
``python -m isrlab.doc_samples --write`` runs every sample's command and writes its
output there; ``--check`` (and tests/test_doc_samples.py) runs them and reports every
sample whose documented output no longer matches. Runs are deterministic; only the
wall-clock time in a run's header is left out of the comparison.
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "commands.md"

# name -> (the isrlab arguments, the first output line to show or None for all)
SAMPLES: dict[str, tuple[list[str], str | None]] = {
    "single-run": (["run", "scenarios/library/jepsen-2013.yaml", "--variant", "unclean", "--seed", "1",
                    "--out", "/tmp/isrdoc/jepsen-unclean"], None),
    "failed-expectation": (["run", "scenarios/library/leader-crash.yaml", "--set", "expect.lost_writes=>0",
                            "--seed", "7", "--out", "/tmp/isrdoc/lc-fail", "--no-plot"], "expectations:"),
    "variants": (["run", "scenarios/library/jepsen-2013.yaml", "--seed", "1", "--out", "/tmp/isrdoc/jepsen-2013",
                  "--no-plot"], None),
    "many-seeds": (["run", "scenarios/library/zombie-leader.yaml", "--variant", "acks1", "--seeds", "1-4",
                    "--out", "/tmp/isrdoc/zombie-seeds"], None),
    "explore": (["explore", "scenarios/library/jepsen-2013.yaml", "--variant", "unclean", "--property", "lost_writes",
                 "--max-runs", "6", "--shrink-runs", "12", "--out", "/tmp/isrdoc/explore"], None),
}
_BLOCK = re.compile(r"(<!-- sample (?P<name>[\w-]+) -->\n```\n)(?P<body>.*?)(```\n<!-- /sample -->)", re.S)
_WALL = re.compile(r"\(\d+\.\d+s wall")
_SEARCH_TIME = re.compile(r"\(\d+s, \d+\.\d+ runs/s\)")  # isrlab explore's search time and rate


def run_sample(name: str) -> str:
    """The block's text: the command, its output (from the chosen line), its exit status."""
    args, first = SAMPLES[name]
    done = subprocess.run([sys.executable, "-m", "isrlab", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    lines = done.stdout.splitlines() + [line for line in done.stderr.splitlines() if line.startswith("isrlab:")]
    if first is not None:
        lines = lines[next(i for i, line in enumerate(lines) if line.startswith(first)):]
    command = "$ isrlab " + " ".join(shlex.quote(a) for a in args)
    return _as_from_root("\n".join([command, *lines, "$ echo $?", str(done.returncode)]) + "\n")


def _as_from_root(text: str) -> str:
    """Replay commands as printed in the project's own folder: run from a git worktree
    whose virtual environment is another checkout's, they name its script by a longer
    relative path (``../main/.venv/bin/isrlab``)."""
    script = os.path.relpath(Path(sys.executable).parent / "isrlab", ROOT)
    return text if script == ".venv/bin/isrlab" else text.replace(f" {script} run ", " .venv/bin/isrlab run ")


def _normal(text: str) -> str:
    return _SEARCH_TIME.sub("(…s, … runs/s)", _WALL.sub("(…s wall", text))


def stale_samples(doc: Path = DOC) -> list[str]:
    """The samples whose documented text differs from what their command prints now."""
    text = doc.read_text(encoding="utf-8")
    found = {m["name"]: m["body"] for m in _BLOCK.finditer(text)}
    missing = sorted(set(SAMPLES) - set(found))
    return missing + [name for name in SAMPLES if name in found and _normal(found[name]) != _normal(run_sample(name))]


def write_samples(doc: Path = DOC) -> None:
    text = doc.read_text(encoding="utf-8")
    text = _BLOCK.sub(lambda m: m.group(1) + run_sample(m["name"]) + m.group(4)
                      if m["name"] in SAMPLES else m.group(0), text)
    doc.write_text(text, encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the samples in docs/commands.md")
    parser.add_argument("--check", action="store_true", help="only report stale samples (the default)")
    args = parser.parse_args()
    if args.write:
        write_samples()
    stale = stale_samples()
    for name in stale:
        print(f"docs/commands.md: sample {name} does not match its command's output", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
