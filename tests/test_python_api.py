"""docs/python-api.md's example, run as it is written there: the Runner is dtrain's Python API."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def example() -> str:
    text = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    return re.search(r"```python\n(.*?)```", text, re.S).group(1)


def test_the_api_names_import_lazily_and_cheaply():
    code = ("import sys, dtrain\nassert 'dtrain.runner' not in sys.modules\n"
            "from dtrain import Runner, SubmitOptions, Workspace, JobStatus, follow, load_spec\n"
            "assert Runner.__module__ == 'dtrain.runner' and follow.__name__ == 'dtrain.follow'\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_documented_example_runs_a_job_and_reads_its_metrics():
    pytest.importorskip("torch")
    r = subprocess.run([sys.executable, "-c", example()], capture_output=True, text=True, timeout=280, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "submitted api-example" in r.stdout and "api-example Completed" in r.stdout
    assert re.search(r"^r0: step=\d+ loss=", r.stdout, re.M) and re.search(r"loss [\d.]+ -> [\d.]+", r.stdout)
