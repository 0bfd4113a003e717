"""A submit killed between writing the job folder and starting its supervisor leaves a Queued job that
nothing will start. Re-running the same submit starts it (instead of following it to NotResponding after
60 s and using the name up); a submit that is still alive, or a job that did start, is left alone."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

JOB = "command: echo started $AZ_BATCHAI_TASK_INDEX\nenvironment: azureml:env:1\ncompute: local\n"
# the submit dies (SIGKILL-like: no cleanup) right where it would start the supervisor
KILLED_SUBMIT = """\
import os, sys
from dtrain.backends import local
local.LocalBackend._start_supervisor = lambda self, job_dir: os._exit(9)
from dtrain.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.timeout(120)
def test_rerun_starts_a_job_whose_submit_was_killed(cli, write, dtrain_home):
    spec = write("job.yml", JOB)
    killed = subprocess.run([sys.executable, "-c", KILLED_SUBMIT, "submit", str(spec), "--name", "orphan"],
                            capture_output=True, text=True, timeout=60)
    assert killed.returncode == 9, killed.stderr
    state = json.loads((dtrain_home / "jobs" / "orphan" / "state.json").read_text())
    assert state["status"] == "Queued" and not state.get("watchdog") and not state.get("supervisor")

    r = cli("submit", spec, "--name", "orphan", "--wait", timeout=60)
    assert r.returncode == 0, r.stderr                      # started and Completed, not NotResponding (5)
    assert "started 0" in cli("logs", "orphan").stdout
    again = cli("submit", spec, "--name", "orphan", "-o", "json")     # a finished job is only returned
    assert again.returncode == 0 and json.loads(again.stdout)["status"] == "Completed"


def test_a_queued_job_whose_submitter_lives_is_not_started_twice(write, dtrain_home, monkeypatch):
    from dtrain.backends.base import SubmitOptions
    from dtrain.backends.local import LocalBackend
    from dtrain.spec.validate import load_spec

    spec, _ = load_spec(str(write("job.yml", JOB)))
    starts = []
    monkeypatch.setattr(LocalBackend, "_start_supervisor", lambda self, d: starts.append(d))
    b = LocalBackend()
    plan = b.plan(spec, SubmitOptions(name="alive"))
    b.submit(plan)
    b.submit(b.plan(spec, SubmitOptions(name="alive")))   # its submitter (this process) still runs
    assert len(starts) == 1
