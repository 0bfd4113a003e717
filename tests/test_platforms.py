"""Azure commands where the local backend cannot load (no fcntl, not Linux), the local backend's own
refusal there, and the workspace reached from az's defaults alone: real `python -m dtrain`-style
processes against the Azure ML emulator."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from azure_emulator import AzureMLEmulator, fake_jwt

SRC = str(Path(__file__).resolve().parents[1] / "src")
JOB_YML = """\
command: python train.py
code: src
environment:
  image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04
compute: azureml:gpu-cluster
resources:
  instance_count: 2
distribution:
  type: pytorch
  process_count_per_instance: 2
"""
# Runs dtrain's main() after breaking the platform as asked; then reports which local-backend modules
# were imported, on the last stderr line.
_RUNNER = """\
import sys
mode = sys.argv[1]
if mode in ("no-fcntl", "darwin"):
    sys.modules["fcntl"] = None
if mode == "darwin":
    sys.platform = "darwin"
from dtrain.cli import main
rc = main(sys.argv[2:])
loaded = sorted(m for m in sys.modules if m.startswith("dtrain.backends.local"))
print("LOADED=" + ",".join(loaded), file=sys.stderr)
sys.exit(rc)
"""


def run(mode, *args, env, cwd, timeout=90):
    e = dict(env, PYTHONPATH=SRC + os.pathsep + env.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", _RUNNER, mode, *map(str, args)], env=e, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def loaded(r) -> list[str]:
    last = [ln for ln in r.stderr.splitlines() if ln.startswith("LOADED=")][-1]
    return [m for m in last[len("LOADED="):].split(",") if m]


@pytest.fixture
def emu(monkeypatch):
    monkeypatch.delenv("AZUREML_CURRENT_CLOUD", raising=False)
    with AzureMLEmulator(lro_retry_after=0.2, cancel_seconds=0.2) as e:
        yield e


@pytest.fixture
def project(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('hi')\n")
    (tmp_path / "job.yml").write_text(JOB_YML)
    return tmp_path


def base_env(tmp: Path, **extra) -> dict:
    # os.environ is hermetic already (conftest's _hermetic_environment)
    return {**os.environ, "DTRAIN_HOME": str(tmp / "dtrain-home"), **extra}


def emulator_env(emu, tmp: Path, **extra) -> dict:
    return base_env(tmp, DTRAIN_ARM_ENDPOINT=emu.url, DTRAIN_ARM_TOKEN=fake_jwt(audience=emu.url + "/"),
                    DTRAIN_AZURE_RETRY_BACKOFF_S="0.1", **extra)


@pytest.mark.sdk
@pytest.mark.slow  # a dozen dtrain processes against the emulator
@pytest.mark.timeout(240)  # several dtrain processes through the emulator: 60-90 s at load 30
def test_azure_commands_never_load_the_local_backend(emu, project):
    env = emulator_env(emu, project)
    ws = ("--subscription", emu.subscription_id, "-g", emu.resource_group, "-w", emu.workspace)
    r = run("no-fcntl", "submit", "job.yml", "--name", "nofcntl", *ws, env=env, cwd=project)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "nofcntl" and list(emu.jobs) == ["nofcntl"]
    assert loaded(r) == []
    for args in (("status", "nofcntl"), ("list",), ("cancel", "nofcntl")):
        r = run("no-fcntl", *args, *ws, env=env, cwd=project)
        assert r.returncode == 0, (args, r.stderr)
        assert "nofcntl" in r.stdout and loaded(r) == [], args


def test_a_local_job_of_that_name_is_found_without_loading_the_backend(tmp_path, monkeypatch):
    # routing looks for $DTRAIN_HOME/jobs/NAME/state.json itself, the same lookup as the backend's own
    from dtrain.backends import local_job_exists

    monkeypatch.setenv("DTRAIN_HOME", str(tmp_path / "dtrain-home"))
    job = tmp_path / "dtrain-home" / "jobs" / "mine"
    job.mkdir(parents=True)
    assert not local_job_exists("mine")
    (job / "state.json").write_text("{}")
    assert local_job_exists("mine") and not local_job_exists("../mine") and not local_job_exists("")
    from dtrain.backends.local import LocalBackend

    assert LocalBackend().knows("mine") and not LocalBackend().knows("../mine")


@pytest.mark.parametrize("mode", ["no-fcntl", "darwin"])
def test_the_local_backend_refuses_other_platforms_with_exit_2(mode, project):
    env = base_env(project)
    for args in (("submit", "job.yml", "--local"), ("render", "job.yml", "--local"), ("list", "--local"),
                 ("status", "x", "--local")):
        r = run(mode, *args, env=env, cwd=project)
        assert r.returncode == 2, (args, r.stderr)
        assert "local backend runs on Linux" in r.stderr and "Traceback" not in r.stderr, args
        assert loaded(r) == [], args
    # without --local and without a workspace, list says what the workspace lacks (not the platform)
    r = run(mode, "list", env=env, cwd=project)
    assert r.returncode == 6 and "missing subscription id" in r.stderr


@pytest.mark.sdk
@pytest.mark.slow  # submits and waits through the emulator
@pytest.mark.timeout(240)  # several dtrain processes through the emulator
def test_az_defaults_alone_reach_the_workspace(emu, project):
    az = project / "az"
    az.mkdir()
    (az / "config").write_text(f"[defaults]\ngroup = {emu.resource_group}\nworkspace = {emu.workspace}\n")
    profile = {"subscriptions": [{"id": "not-this-one", "isDefault": False},
                                 {"id": emu.subscription_id, "isDefault": True}]}
    (az / "azureProfile.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(profile).encode())
    env = emulator_env(emu, project, AZURE_CONFIG_DIR=str(az))
    r = run("plain", "submit", "job.yml", "--name", "fromaz", env=env, cwd=project)
    assert r.returncode == 0, r.stderr
    assert list(emu.jobs) == ["fromaz"]
    r = run("plain", "list", "--output", "json", env=env, cwd=project)
    assert r.returncode == 0, r.stderr
    assert [j["name"] for j in json.loads(r.stdout)] == ["fromaz"]
    r = run("plain", "config", "--output", "json", env=env, cwd=project)
    got = json.loads(r.stdout)
    assert r.returncode == 0 and got["workspace_name"] == emu.workspace
    assert "az configure default 'workspace'" in got["sources"]["workspace_name"]
    assert "azureProfile.json" in got["sources"]["subscription_id"]

    # a missing part: exit 6 naming it, and what was found where
    (az / "config").write_text(f"[defaults]\nworkspace = {emu.workspace}\n")
    # (a job submitted from another machine: this one has no record of its workspace)
    for args in (("list",), ("submit", "job.yml"), ("status", "submitted-elsewhere"), ("config",)):
        r = run("plain", *args, env=env, cwd=project)
        assert r.returncode == 6, (args, r.stderr)
        assert "missing resource group" in r.stderr and "az configure --defaults group=" in r.stderr, args
        assert f"workspace name '{emu.workspace}' from az configure default 'workspace'" in r.stderr, args
    assert len(emu.jobs) == 1
    # the job submitted from here is found in the workspace it went to, recorded at submit
    r = run("plain", "status", "fromaz", env=env, cwd=project)
    assert r.returncode == 0 and r.stdout.startswith("fromaz\t"), r.stderr

    # a workspace the service does not know: exit 6, saying where each part came from
    (az / "config").write_text(f"[defaults]\ngroup = {emu.resource_group}\nworkspace = no-such-ws\n")
    for args in (("list",), ("status", "submitted-elsewhere")):
        r = run("plain", *args, env=env, cwd=project)
        assert r.returncode == 6, (args, r.stderr)
        assert "no-such-ws" in r.stderr and "workspace name from az configure default 'workspace'" in r.stderr, args
        assert "azureProfile.json" in r.stderr and "dtrain config" in r.stderr, args
