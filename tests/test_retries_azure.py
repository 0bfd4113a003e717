"""Retry chains on Azure ML through the real azure-ai-ml SDK, against the emulator (docs/retries.md): an
attempt that ends NotResponding (a lost or preempted node) is retried once under NAME-r1, into the same
checkpoint folder; a re-run of the same command sends nothing."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from azure_emulator import AzureMLEmulator
from test_azure_backend import JOB_YML, TRAIN_PY, dtrain, emu_env

pytestmark = [pytest.mark.slow, pytest.mark.sdk]

CKPT = """\
outputs:
  checkpoints:
    type: uri_folder
    path: azureml://datastores/workspaceblobstore/paths/dtrain/${{name}}/checkpoints
"""
LOST = {"code": "NodeLost", "message": "a node of the job was preempted and did not come back (scripted)"}


@pytest.fixture
def emu(monkeypatch):
    monkeypatch.delenv("AZUREML_CURRENT_CLOUD", raising=False)
    with AzureMLEmulator(lro_retry_after=0.2, cancel_seconds=0.2) as e:
        e.script_job_statuses(["Queued", "Running", "Completed"], seconds_per_step=0.3)
        yield e


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(TRAIN_PY)
    (tmp_path / "job.yml").write_text(JOB_YML.replace("command: python train.py",
                                                      "command: python train.py --out ${{outputs.checkpoints}}") + CKPT)
    return tmp_path


@pytest.mark.timeout(240)  # a chain of two jobs through the emulator, allowed 180 s
def test_attempt_1_not_responding_attempt_2_completed_then_a_rerun_sends_nothing(emu, project):
    emu.script_job_statuses(["Queued", "Running", "NotResponding"], 0.3, job="ch", error=LOST)
    env = emu_env(emu, project, DTRAIN_RETRY_BACKOFF_S="0.1")
    cmd = ("submit", "job.yml", "--retries", "2", "--name", "ch", "--wait", "--output", "json")
    r = dtrain(*cmd, env=env, cwd=project, timeout=180)
    assert r.returncode == 0, r.stderr
    assert [name for name, _ in emu.job_puts] == ["ch", "ch-r1"]          # exactly two job PUTs
    out = json.loads(r.stdout)
    assert out["name"] == "ch" and out["status"] == "Completed"
    a1, a2 = out["attempts"]
    assert (a1["name"], a1["outcome"], a1["exit_code"], a1["cause"]) == ("ch", "infrastructure", 5, "preempted")
    assert (a2["name"], a2["status"], a2["outcome"]) == ("ch-r1", "Completed", "completed")
    assert "attempt 2 of 3 submitted: ch-r1" in r.stderr and "preempted" in r.stderr
    # both attempts write the chain's one checkpoint folder, and carry the chain's tags
    for name, k in (("ch", "1"), ("ch-r1", "2")):
        props = emu.jobs[name]["properties"]
        assert props["outputs"]["checkpoints"]["uri"] == "azureml://datastores/workspaceblobstore/paths/dtrain/ch/checkpoints"
        # attempt 1's cause, from the NotResponding error Azure gave, recorded by jobs.update (retry_causes.py)
        cause = {"dtrain.cause": "preempted"} if k == "1" else {}
        assert {t: props["tags"][t] for t in props["tags"] if t.startswith("dtrain.")} == {
            "dtrain.chain": "ch", "dtrain.attempt": k, "dtrain.retries": "2", "dtrain.retry_on": "infrastructure",
            **cause}
        assert props["tags"]["suite"] == "azure"
    # the NotResponding attempt was stopped before the next one (a NotResponding run can come back)
    assert emu.requests_to(r"/jobs/ch/cancel$", "POST")

    # the same command again (a CI runner that died and re-ran): it follows the chain and sends no PUT
    again = dtrain(*cmd, env=env, cwd=project, timeout=120)
    assert again.returncode == 0, again.stderr
    assert [name for name, _ in emu.job_puts] == ["ch", "ch-r1"]
    assert [a["name"] for a in json.loads(again.stdout)["attempts"]] == ["ch", "ch-r1"]

    # status from a machine that never submitted it (no recipe, no index): the tags make the chain
    st = dtrain("status", "ch", "--output", "json", env={**env, "DTRAIN_HOME": str(project / "other-home")},
                cwd=project)
    assert st.returncode == 0, st.stderr
    s = json.loads(st.stdout)
    assert s["status"] == "Completed" and [a["name"] for a in s["attempts"]] == ["ch", "ch-r1"]


def test_a_failed_attempt_is_not_retried_without_retry_on_failed(emu, project):
    emu.script_job_statuses(["Queued", "Running", "Failed"], 0.3, job="fl")
    env = emu_env(emu, project, DTRAIN_RETRY_BACKOFF_S="0.1")
    r = dtrain("submit", "job.yml", "--retries", "2", "--name", "fl", "--wait", "--quiet", env=env, cwd=project,
               timeout=120)
    assert r.returncode == 1, r.stderr
    assert [name for name, _ in emu.job_puts] == ["fl"]
