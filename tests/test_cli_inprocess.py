"""The real command line, in process (dtrain.cli.main, the one error boundary), over a fake backend
registered the real way (tests/fakes.py standing in for the "local" kind): what submit --wait, a grid and
a retry chain print and exit with, in milliseconds. The real backends run the same commands end to end in
test_cli_local_jobs.py, test_retries_local.py, test_grid_local.py and the emulator tests."""
from __future__ import annotations

import json

import pytest

from dtrain.cli import main

SPEC = """\
command: python train.py --lr ${{inputs.lr}}
environment: azureml:env@latest
compute: local
inputs: {lr: 0.01}
"""


@pytest.fixture
def spec(tmp_path):
    p = tmp_path / "job.yml"
    p.write_text(SPEC)
    return str(p)


def dtrain(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_submit_wait_streams_the_logs_and_exits_by_the_outcome(fake_backend, spec, capsys):
    fake_backend.lines["j1"] = ["hello from rank 0", "done"]
    code, out, err = dtrain(capsys, "submit", spec, "--local", "--wait", "--name", "j1")
    assert code == 0, err
    assert out.splitlines() == ["n0/r0 | hello from rank 0", "n0/r0 | done"]
    assert "j1: Completed" in err and fake_backend.submitted == ["j1"]


def test_a_failed_job_exits_1_and_json_carries_its_status(fake_backend, spec, capsys):
    fake_backend.scripts["bad"] = ["Queued", "Running", "Failed"]
    code, out, err = dtrain(capsys, "submit", spec, "--local", "--wait", "--name", "bad", "-o", "json")
    assert code == 1, err
    assert json.loads(out)["status"] == "Failed"


def test_submit_again_under_the_same_name_follows_the_job(fake_backend, spec, capsys):
    assert dtrain(capsys, "submit", spec, "--local", "--name", "once")[0] == 0
    code, out, _ = dtrain(capsys, "submit", spec, "--local", "--name", "once")
    assert code == 0 and out.strip() == "once" and fake_backend.submitted == ["once"]


def test_a_grid_runs_every_combination_and_exits_by_the_worst(fake_backend, spec, capsys):
    argv = ["submit", spec, "--local", "--matrix", "inputs.lr=0.1,0.2,0.3", "--name", "g", "--wait", "-o", "json"]
    names = []

    def fail_the_second(name):                       # decided at submit: the 0.2 combination fails
        return ["Queued", "Running", "Failed" if "0_2" in name else "Completed"]

    real_submit = fake_backend.submit

    def submit(plan):
        fake_backend.scripts.setdefault(plan.name, fail_the_second(plan.name))
        names.append(plan.name)
        return real_submit(plan)

    fake_backend.submit = submit
    code, out, err = dtrain(capsys, *argv)
    assert code == 1, err
    rows = json.loads(out)
    assert [r["combination"]["inputs.lr"] for r in rows] == ["0.1", "0.2", "0.3"]
    assert [r["status"] for r in rows] == ["Completed", "Failed", "Completed"]
    assert all(r["tags"]["dtrain.group"] == "g" for r in rows) and len(fake_backend.submitted) == 3
    code, _, _ = dtrain(capsys, *argv)                # the same command again: nothing new is started
    assert code == 1 and len(fake_backend.submitted) == 3


def test_a_retry_chain_is_driven_by_the_follower(fake_backend, spec, capsys, monkeypatch):
    monkeypatch.setenv("DTRAIN_RETRY_BACKOFF_S", "0")
    fake_backend.scripts["c"] = ["Queued", "Running", "NotResponding"]
    fake_backend.scripts["c-r1"] = ["Queued", "Running", "Completed"]
    code, out, err = dtrain(capsys, "submit", spec, "--local", "--name", "c", "--retries", "2", "--wait", "-q")
    assert code == 0, err
    assert fake_backend.submitted == ["c", "c-r1"] and fake_backend.stopped == ["c"]
    assert "attempt 2 of 3 submitted: c-r1" in err
    code, out, err = dtrain(capsys, "status", "c", "-o", "json")
    doc = json.loads(out)
    assert code == 0 and doc["status"] == "Completed" and [a["name"] for a in doc["attempts"]] == ["c", "c-r1"]


def test_reading_a_chain_between_attempts_submits_nothing(fake_backend, spec, capsys, monkeypatch):
    monkeypatch.setenv("DTRAIN_RETRY_BACKOFF_S", "0")
    fake_backend.scripts["r"] = ["Queued", "NotResponding"]
    assert dtrain(capsys, "submit", spec, "--local", "--name", "r", "--retries", "1")[0] == 0
    for argv in (["status", "r"], ["list"], ["logs", "r"], ["watch", "--once", "--local"]):
        assert dtrain(capsys, *argv)[0] == 0
    assert fake_backend.submitted == ["r"]
    code, _, err = dtrain(capsys, "wait", "r")          # a follower drives it
    assert code == 0 and fake_backend.submitted == ["r", "r-r1"], err


def test_usage_errors_exit_2_before_anything_is_submitted(fake_backend, spec, capsys):
    for argv, words in [(["submit", spec, "--local", "--timeout", "5"], "only applies with --wait"),
                        (["submit", spec, "--local", "--name", "bad name"], "not a valid job name"),
                        (["submit", spec, "--dry-run", "--wait"], "--wait does nothing with --dry-run"),
                        (["status", "x", "--local", "-w", "ws"], "--workspace name an Azure ML workspace")]:
        code, _, err = dtrain(capsys, *argv)
        assert code == 2 and words in err, (argv, err)
    assert fake_backend.submit_calls == []
