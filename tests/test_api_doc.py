"""docs/api.md's example runs as written (a documented API that drifted would fail here)."""
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_documented_example_runs(tmp_path, capsys):
    text = (ROOT / "docs" / "api.md").read_text()
    example = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    example = example.replace('"scenarios/library/', f'"{ROOT}/scenarios/library/')
    cwd = os.getcwd()
    os.chdir(tmp_path)  # the example writes under runs/
    try:
        exec(compile(example, "docs/api.md", "exec"), {})
    finally:
        os.chdir(cwd)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("True ") and "--variant unclean" in printed[0]
    assert (tmp_path / "runs" / "api-sweep" / "summary.json").exists()
    assert printed[-1].startswith("False {")  # the unclean variant's trace has anomalies
