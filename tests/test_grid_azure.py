"""Matrix submission to Azure ML through the real azure-ai-ml SDK, against the emulator, with the job PUTs
throttled (429 + Retry-After): submission slows down and every combination is submitted exactly once."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from azure_emulator import AzureMLEmulator
from test_azure_backend import JOB_YML, TRAIN_PY, dtrain, emu_env

pytestmark = [pytest.mark.slow, pytest.mark.sdk]
MATRIX = ["--matrix", "inputs.lr=0.1,0.2", "--matrix", "inputs.epochs=1,2"]
JOB_PUT = r"/workspaces/[^/]+/jobs/[^/]+$"


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
    (tmp_path / "job.yml").write_text(JOB_YML)
    return tmp_path


def accepted_puts(emu) -> list[str]:
    return [name for name, _ in emu.job_puts]


@pytest.mark.timeout(240)  # a grid through the emulator, allowed 180 s
def test_throttled_job_puts_slow_the_grid_and_each_job_is_submitted_once(emu, project):
    # every one of the first 6 job PUTs answers 429 Retry-After: 1; azure-core waits and asks again
    fault = emu.throttle(JOB_PUT, retry_after=1, method="PUT", count=6)
    env = emu_env(emu, project)
    r = dtrain("submit", "job.yml", *MATRIX, "--name", "sweep", "--wait", "--output", "json",
               env=env, cwd=project, timeout=180)
    assert r.returncode == 0, r.stderr
    assert fault.hits == 6
    rows = json.loads(r.stdout)
    names = [row["name"] for row in rows]
    assert len(set(names)) == 4 and all(row["status"] == "Completed" for row in rows)
    assert sorted(accepted_puts(emu)) == sorted(names)            # exactly once each
    for row in rows:
        tags = emu.jobs[row["name"]]["properties"]["tags"]
        assert tags["dtrain.group"] == "sweep"
        assert tags["dtrain.matrix.inputs.lr"] == row["combination"]["inputs.lr"]
        assert tags["dtrain.matrix.inputs.epochs"] == row["combination"]["inputs.epochs"]
        assert tags["suite"] == "azure"                             # the spec's own tags are kept
        assert emu.jobs[row["name"]]["properties"]["inputs"]["lr"]["value"] == row["combination"]["inputs.lr"]

    # the same command again: the jobs exist with this spec, so nothing is sent
    again = dtrain("submit", "job.yml", *MATRIX, "--name", "sweep", "--wait", env=env, cwd=project, timeout=120)
    assert again.returncode == 0, again.stderr
    assert sorted(accepted_puts(emu)) == sorted(names)
    assert again.stderr.count("already exists with this spec") == 4


@pytest.mark.timeout(240)  # a grid through the emulator, allowed 180 s
def test_throttling_past_the_sdks_retries_is_waited_out_by_the_grid(emu, project):
    """azure-core asks only once more (DTRAIN_AZURE_RETRIES=1) and the backend three times: 7 throttled
    PUTs in a row outlast both, and the grid waits and submits again under the same name."""
    fault = emu.throttle(JOB_PUT, retry_after=0.2, method="PUT", count=7)
    env = emu_env(emu, project, DTRAIN_AZURE_RETRIES=1)
    r = dtrain("submit", "job.yml", "--matrix", "inputs.lr=0.1,0.2", "--name", "slow", "--max-parallel", "1",
               "--output", "jsonl", env=env, cwd=project, timeout=180)
    assert r.returncode == 0, r.stderr
    assert fault.hits == 7
    events = [json.loads(line) for line in r.stdout.splitlines()]
    retried = [e for e in events if e["event"] == "retrying"]
    assert retried and all("429" in e["reason"] for e in retried)
    submitted = [e["job"] for e in events if e["event"] == "submitted"]
    assert len(submitted) == 2 and sorted(accepted_puts(emu)) == sorted(submitted)
