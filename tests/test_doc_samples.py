"""docs/commands.md's sample outputs are what their commands print (issue 10: the
samples had drifted, e.g. 600 acknowledged where the command gave 1603)."""
from isrlab.doc_samples import SAMPLES, stale_samples


def test_every_documented_sample_matches_a_fresh_run():
    assert len(SAMPLES) >= 4
    assert stale_samples() == [], "run: .venv/bin/python -m isrlab.doc_samples --write"
